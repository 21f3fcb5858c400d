//! Operations, for real: `--daemon`, the `mount.slabfs` helper (directly
//! and through mount(8)), systemd's readiness protocol, ownership options
//! and `--read-ahead-kb`. Every test really mounts FUSE, like
//! tests/it/mount.rs (whose SIGTERM and stale-mount tests are not repeated
//! here), on a unique temporary mount point, and a drop guard detaches the
//! mount and ends the daemons it started even when a test fails.
//!
//! A detached daemon is not our child: it is found by its command line,
//! which names the test's unique mount point.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a mount may take to come up or a daemon to exit. Generous:
/// CI machines are slow and shared. Only a bound against hanging, never
/// a measurement.
const TIMEOUT: Duration = Duration::from_secs(60);

const SLABFS: &str = env!("CARGO_BIN_EXE_slabfs");

/// A small dataset: three arrays, `g1/sub/temp` among them.
fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr/v2/basic.zarr")
}

/// `g1/sub/temp` as zarr-python reads it (little-endian f8).
fn expected_temp() -> Vec<u8> {
    const {
        assert!(
            cfg!(target_endian = "little"),
            "the expected file is little-endian"
        )
    };
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr/expected/v2_f8_zlib.bin"),
    )
    .unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

// ---------------------------------------------------------------------------
// A scratch directory with a mount point, cleaned up whatever happens
// ---------------------------------------------------------------------------

struct Scratch {
    /// Canonical, so it matches /proc/self/mountinfo and command lines.
    base: PathBuf,
    mnt: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("slabfs-ops-test")
            .tempdir()
            .unwrap();
        let base = dir.path().canonicalize().unwrap();
        // slabfs mounts only on an existing directory.
        std::fs::create_dir(base.join("mnt")).unwrap();
        Scratch {
            mnt: base.join("mnt"),
            base,
            _dir: dir,
        }
    }

    fn log_path(&self) -> PathBuf {
        self.base.join("log")
    }

    /// A file for a daemon's stderr (and, given with `--log-file`, its log
    /// once it is live).
    fn log_file(&self) -> File {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Run `cmd` to completion with stdout discarded and stderr in the log.
    fn run(&self, cmd: &mut Command) -> ExitStatus {
        let child = cmd
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file())
            .spawn()
            .unwrap();
        wait_bounded(child, &self.log_path())
    }

    /// Run `cmd` to completion and return its status and stderr (through a
    /// file of its own, never a pipe a surviving daemon could hold open).
    fn run_capture(&self, cmd: &mut Command) -> (ExitStatus, String) {
        let path = self.base.join("stderr");
        let child = cmd
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&path).unwrap())
            .spawn()
            .unwrap();
        let status = wait_bounded(child, &path);
        (status, std::fs::read_to_string(&path).unwrap())
    }

    /// Unmount (as a user would) and wait for every daemon serving it to
    /// exit by itself.
    fn unmount_and_wait(&self) {
        let pids = daemons(&self.mnt);
        assert!(!pids.is_empty(), "no daemon serves {}", self.mnt.display());
        // Retried while the mount is busy: a process of another test can
        // be passing through it (a run with ten test threads met one).
        let mut tries = 0;
        let out = loop {
            let out = if is_root() {
                Command::new("umount").arg(&self.mnt).output().unwrap()
            } else {
                Command::new("fusermount3")
                    .arg("-u")
                    .arg(&self.mnt)
                    .output()
                    .unwrap()
            };
            tries += 1;
            let busy = String::from_utf8_lossy(&out.stderr).contains("busy");
            if out.status.success() || !busy || tries == 50 {
                break out;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            out.status.success(),
            "unmount failed after {tries} tries: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        for pid in pids {
            wait_gone(pid, &self.log());
        }
        assert!(!is_mount_point(&self.mnt));
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if is_mount_point(&self.mnt) {
            let c = CString::new(self.mnt.as_os_str().as_bytes()).unwrap();
            // SAFETY: c is a valid NUL-terminated path.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
                let _ = Command::new("fusermount3")
                    .args(["-u", "-z", "-q"])
                    .arg(&self.mnt)
                    .status();
            }
        }
        // Daemons this test started (their command line names our unique
        // mount point): ask, then insist.
        for pid in daemons(&self.mnt) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

// ---------------------------------------------------------------------------
// Processes and mounts as the kernel shows them
// ---------------------------------------------------------------------------

/// Live processes with `mnt` as one of their arguments.
fn daemons(mnt: &Path) -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline
            .split(|&b| b == 0)
            .any(|a| a == mnt.as_os_str().as_bytes())
            && alive(pid)
        {
            out.push(pid);
        }
    }
    out
}

/// `/proc/PID/stat` fields after the command name: state is [0], ppid
/// [1], session [3].
fn stat_fields(pid: libc::pid_t) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Running: present and not a zombie (an orphaned daemon may be reaped
/// late, or never, by the container's init).
fn alive(pid: libc::pid_t) -> bool {
    stat_fields(pid).is_some_and(|f| f[0] != "Z" && f[0] != "X")
}

fn wait_gone(pid: libc::pid_t, log: &str) {
    let deadline = Instant::now() + TIMEOUT;
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "daemon {pid} still running after {TIMEOUT:?}:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One line of /proc/self/mountinfo: (mount point, MAJ:MIN, fstype).
fn mounts() -> Vec<(PathBuf, String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let point = f.get(4)?.replace("\\040", " ");
            Some((
                PathBuf::from(point),
                f.get(2)?.to_string(),
                right.split(' ').next()?.to_string(),
            ))
        })
        .collect()
}

fn is_mount_point(mnt: &Path) -> bool {
    mounts().iter().any(|(p, _, _)| p == mnt)
}

/// A FUSE mount is at `mnt` and its daemon answers (`statfs` always
/// reaches the daemon). The type is `fuse` when root mounts with mount(2),
/// `fuse.slabfs` through fusermount3.
fn is_live(mnt: &Path) -> bool {
    let fuse = mounts()
        .iter()
        .any(|(p, _, t)| p == mnt && (t == "fuse" || t == "fuse.slabfs"));
    let c = CString::new(mnt.as_os_str().as_bytes()).unwrap();
    // SAFETY: statfs is plain data filled by the call; c is a valid path.
    let answers = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0
    };
    fuse && answers
}

/// Check the mount at `mnt` serves the right bytes now, with no waiting.
fn check_serving(mnt: &Path, log: &str) {
    assert!(is_live(mnt), "not a live slabfs mount:\n{log}");
    let got = std::fs::read(mnt.join("g1/sub/temp")).unwrap();
    assert!(got == expected_temp(), "g1/sub/temp differs");
}

fn bdi_read_ahead_kb(mnt: &Path) -> u32 {
    let (_, dev, _) = mounts().into_iter().find(|(p, _, _)| p == mnt).unwrap();
    std::fs::read_to_string(format!("/sys/class/bdi/{dev}/read_ahead_kb"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn slabfs_mount(s: &Scratch, args: &[&str]) -> Command {
    let mut cmd = Command::new(SLABFS);
    cmd.arg("mount").args(args).arg(source()).arg(&s.mnt);
    cmd
}

/// Wait for a command that must return by itself (a `--daemon` parent, a
/// mount helper): a regression that never reports makes the test fail
/// after TIMEOUT instead of hanging.
fn wait_bounded(mut child: Child, log: &Path) -> ExitStatus {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running after {TIMEOUT:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------
// --daemon
// ---------------------------------------------------------------------------

/// A missing mount point is refused (a typo would otherwise leave a
/// directory tree behind), and so is one with files in it (they would be
/// hidden), each with a message saying what to do; `--create-mountpoint`
/// and `--allow-non-empty` (fstab `nonempty`) ask for it.
#[test]
fn a_missing_or_non_empty_mountpoint_is_refused_saying_what_to_do() {
    let s = Scratch::new();
    std::fs::remove_dir(&s.mnt).unwrap();
    let mount = |extra: &[&str]| {
        let mut cmd = Command::new(SLABFS);
        cmd.args(["mount", "--daemon", "--log-file"])
            .arg(s.log_path())
            .args(extra)
            .arg(source())
            .arg(&s.mnt);
        cmd
    };
    let (status, err) = s.run_capture(&mut mount(&[]));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("mount point {}", s.mnt.display()))
            && err.contains("no such directory")
            && err.contains(&format!("mkdir -p {}", s.mnt.display()))
            && err.contains("--create-mountpoint"),
        "{err}"
    );
    assert!(!s.mnt.exists(), "nothing created");

    let (status, err) = s.run_capture(&mut mount(&["--create-mountpoint"]));
    assert!(status.success(), "{err}\n{}", s.log());
    check_serving(&s.mnt, &s.log());
    s.unmount_and_wait();

    // Not empty: refused, and the file stays visible.
    std::fs::write(s.mnt.join("notes.txt"), b"mine").unwrap();
    let (status, err) = s.run_capture(&mut mount(&[]));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("not empty (\"notes.txt\")") && err.contains("--allow-non-empty"),
        "{err}"
    );
    assert!(!is_mount_point(&s.mnt));
    let (status, err) = s.run_capture(&mut mount(&["--allow-non-empty"]));
    assert!(status.success(), "{err}\n{}", s.log());
    check_serving(&s.mnt, &s.log());
    assert!(!s.mnt.join("notes.txt").exists(), "hidden by the mount");
    s.unmount_and_wait();
    assert_eq!(std::fs::read(s.mnt.join("notes.txt")).unwrap(), b"mine");

    // The fstab helper: refused with mount(8)'s "mount failure", and
    // mounted with `nonempty`.
    let helper = helper_link(&s, "mount.fuse.slabfs");
    let (status, err) = s.run_capture(
        Command::new(&helper)
            .arg(source())
            .arg(&s.mnt)
            .args(["-o", "ro"]),
    );
    assert_eq!(status.code(), Some(32), "{err}");
    assert!(err.contains("fstab: nonempty"), "{err}");
    let (status, err) = s.run_capture(
        Command::new(&helper)
            .arg(source())
            .arg(&s.mnt)
            .args(["-o", "ro,nonempty"]),
    );
    assert!(status.success(), "{err}\n{}", s.log());
    check_serving(&s.mnt, &s.log());
    s.unmount_and_wait();
}

/// `slabfs mount -o` takes the fstab helper's options (issue 42): every
/// long option with `_` for `-`, views joined by `+`, and fstab's words.
#[test]
fn mount_takes_fstab_options_with_o() {
    let s = Scratch::new();
    let (status, err) = s.run_capture(
        Command::new(SLABFS)
            .args(["mount", "--daemon", "-o"])
            .arg(format!(
                "ro,noatime,cache_size=64MiB,views=raw+json+npy,log_file={}",
                s.log_path().display()
            ))
            .arg(source())
            .arg(&s.mnt),
    );
    assert!(status.success(), "{err}\n{}", s.log());
    check_serving(&s.mnt, &s.log());
    assert!(s.mnt.join("g1/sub/temp.npy").exists());
    assert!(s.log().contains("cache 64 MiB"), "{}", s.log());
    s.unmount_and_wait();
    // An unknown option, and a bad value, name the option.
    let (status, err) = s.run_capture(
        Command::new(SLABFS)
            .args(["mount", "-o", "ro,compress=zstd"])
            .arg(source())
            .arg(&s.mnt),
    );
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("slabfs: unknown option \"compress=zstd\""),
        "{err}"
    );
    let (status, err) = s.run_capture(
        Command::new(SLABFS)
            .args(["mount", "-o", "views=raw+tiff"])
            .arg(source())
            .arg(&s.mnt),
    );
    assert_ne!(status.code(), Some(0), "{err}");
    assert!(err.contains("unknown view \"tiff\""), "{err}");
}

#[test]
fn daemon_returns_only_once_the_mount_is_live() {
    let s = Scratch::new();
    // A relative SOURCE: it must keep its meaning after the daemon moves
    // to `/`.
    let status = s.run(
        Command::new(SLABFS)
            .args(["mount", "--daemon", "--log-file"])
            .arg(s.log_path())
            .arg("basic.zarr")
            .arg(&s.mnt)
            .current_dir(source().parent().unwrap()),
    );
    assert!(status.success(), "{status}:\n{}", s.log());
    // No polling: the files are there the moment the command returned.
    check_serving(&s.mnt, &s.log());

    let pids = daemons(&s.mnt);
    assert_eq!(pids.len(), 1, "{pids:?}");
    let fields = stat_fields(pids[0]).unwrap();
    assert_eq!(fields[3], pids[0].to_string(), "not a session leader");
    assert_ne!(fields[1], std::process::id().to_string(), "still our child");
    for fd in [0, 1] {
        assert_eq!(
            std::fs::read_link(format!("/proc/{}/fd/{fd}", pids[0])).unwrap(),
            Path::new("/dev/null")
        );
    }
    // It kept no directory busy (it moved to /).
    assert_eq!(
        std::fs::read_link(format!("/proc/{}/cwd", pids[0])).unwrap(),
        Path::new("/")
    );
    s.unmount_and_wait();
    let log = s.log();
    assert!(
        log.contains("mounted ") && log.contains("unmounted "),
        "{log}"
    );
}

/// Run `cmd` as a caller that captures its output through pipes would
/// (Python's `subprocess.run(..., capture_output=True)`, `$(...)`, cron):
/// wait for the exit *and* for both pipes to close. `None` if that took
/// longer than `limit` (the pipes are then still held by someone).
fn run_with_pipes(cmd: &mut Command, limit: Duration) -> Option<std::process::Output> {
    let child = cmd
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    rx.recv_timeout(limit).ok()
}

/// Regression (issue 16, item 1): a detached daemon kept the caller's
/// stdout/stderr pipes, so a caller waiting for them to close never
/// returned. Once live it must hold none of the caller's descriptors
/// (an inherited extra one included) and log to --log-file.
#[test]
fn daemon_with_captured_output_returns_and_logs_to_the_log_file() {
    let s = Scratch::new();
    let log = s.base.join("daemon.log");
    let held = s.base.join("held-by-caller");
    // The caller also lets it inherit descriptor 7 (as flock(1) or a
    // shell's redirection would).
    let script = r#"exec 7>"$HELD"; exec "$SLABFS" mount --daemon --log-file "$LOG" "$SRC" "$MNT""#;
    let out = run_with_pipes(
        Command::new("sh")
            .args(["-c", script])
            .env("HELD", &held)
            .env("SLABFS", SLABFS)
            .env("LOG", &log)
            .env("SRC", source())
            .env("MNT", &s.mnt),
        Duration::from_secs(10),
    )
    .expect("the caller's pipes did not close within 10 s: the daemon holds them");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        text()
    );
    check_serving(&s.mnt, &text());
    let pids = daemons(&s.mnt);
    assert_eq!(pids.len(), 1, "{pids:?}");
    let mut fds: Vec<(String, PathBuf)> = std::fs::read_dir(format!("/proc/{}/fd", pids[0]))
        .unwrap()
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), target)
        })
        .collect();
    fds.sort();
    for (fd, target) in &fds {
        assert!(
            !target.to_string_lossy().contains("pipe:") && target != &held,
            "descriptor {fd} -> {} is the caller's: {fds:?}",
            target.display()
        );
    }
    for fd in ["0", "1"] {
        assert!(
            fds.contains(&(fd.to_string(), PathBuf::from("/dev/null"))),
            "{fds:?}"
        );
    }
    assert!(fds.contains(&("2".to_string(), log.clone())), "{fds:?}");
    assert!(text().contains("mounted "), "{}", text());
    s.unmount_and_wait();
    assert!(text().contains("unmounted "), "{}", text());
    // Nothing was written to the caller's pipes on success.
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
}

/// Without --log-file the daemon's log goes to the system log once live:
/// `/dev/log` receives `<PRI>slabfs[PID]: ...` datagrams. Needs a machine
/// without a system logger of its own (CI's), since the test plays it.
#[test]
fn daemon_without_a_log_file_logs_to_the_system_log() {
    let dev_log = Path::new("/dev/log");
    if !is_root() || dev_log.exists() {
        eprintln!("skipped: needs root and no system logger at /dev/log to stand in for");
        return;
    }
    let syslog = UnixDatagram::bind(dev_log).unwrap();
    struct Unlink<'a>(&'a Path);
    impl Drop for Unlink<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
        }
    }
    let _unlink = Unlink(dev_log);
    syslog
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let s = Scratch::new();
    let out = run_with_pipes(
        Command::new(SLABFS)
            .args(["mount", "--daemon"])
            .arg(source())
            .arg(&s.mnt),
        Duration::from_secs(10),
    )
    .expect("the caller's pipes did not close within 10 s");
    assert!(out.status.success(), "{out:?}");
    // Quiet success: nothing on the caller's terminal (the mount's info
    // lines went to the system log, below).
    assert!(
        out.stderr.is_empty() && out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = daemons(&s.mnt)[0];
    s.unmount_and_wait();
    // Other tests' daemons may log here too: keep this one's lines.
    let mine = format!("slabfs[{pid}]: ");
    let mut lines = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        match syslog.recv(&mut buf) {
            Ok(n) => {
                let line = String::from_utf8_lossy(&buf[..n]).into_owned();
                if line.contains(&mine) {
                    lines.push(line);
                }
            }
            Err(_) if lines.iter().any(|l| l.contains("unmounted ")) => break,
            Err(_) => {}
        }
    }
    let want = format!("<30>slabfs[{pid}]: slabfs::fs::mount: unmounted ");
    assert!(lines.iter().any(|l| l.starts_with(&want)), "{lines:#?}");
    // Logged while the caller's terminal was still stderr, held back, and
    // logged here once the daemon was live.
    let mounted = format!("<30>slabfs[{pid}]: slabfs::fs::mount: mounted ");
    assert!(lines.iter().any(|l| l.starts_with(&mounted)), "{lines:#?}");
}

#[test]
fn daemon_failures_exit_non_zero_with_the_reason() {
    let s = Scratch::new();
    // Nonexistent source: the child fails and the parent says why.
    let (status, err) = s.run_capture(
        Command::new(SLABFS)
            .args(["mount", "--daemon"])
            .arg(s.base.join("no-such-dataset"))
            .arg(&s.mnt),
    );
    assert_eq!(status.code(), Some(1), "{err}");
    // One line, the reason in words (not "(os error 2)"), and no warning
    // about where the log of a daemon that never ran would have gone.
    assert_eq!(
        err.trim_end(),
        format!(
            "slabfs: {}: no such file or directory",
            s.base.join("no-such-dataset").display()
        ),
        "{err}"
    );

    // A mount point that is a file.
    let file = s.base.join("file");
    std::fs::write(&file, b"").unwrap();
    let (status, err) = s.run_capture(
        Command::new(SLABFS)
            .args(["mount", "--daemon"])
            .arg(source())
            .arg(&file),
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("mount point") && err.contains("file"), "{err}");
    assert!(!is_mount_point(&file));
    assert!(daemons(&file).is_empty());
}

// ---------------------------------------------------------------------------
// mount.slabfs
// ---------------------------------------------------------------------------

/// A directory holding `name` -> the slabfs binary, as an installer would.
fn helper_link(s: &Scratch, name: &str) -> PathBuf {
    let bin = s.base.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join(name);
    std::os::unix::fs::symlink(SLABFS, &link).unwrap();
    link
}

#[test]
fn mount_slabfs_helper_mounts_with_fstab_options() {
    let s = Scratch::new();
    let helper = helper_link(&s, "mount.slabfs");

    // `rw` (what mount(8) passes without `ro`) is refused, nothing mounted.
    let (status, err) = s.run_capture(
        Command::new(&helper)
            .arg(source())
            .arg(&s.mnt)
            .args(["-o", "rw,cache_size=64MiB"]),
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("mount.slabfs: option \"rw\"") && err.contains("read-only"),
        "{err}"
    );
    // So is an unknown option; -f (fake) checks and mounts nothing.
    let (status, err) = s.run_capture(
        Command::new(&helper)
            .arg(source())
            .arg(&s.mnt)
            .args(["-o", "ro,compress=zstd"]),
    );
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("unknown option \"compress=zstd\""), "{err}");
    let status = s.run(
        Command::new(&helper)
            .arg(source())
            .arg(&s.mnt)
            .args(["-f", "-o", "ro"]),
    );
    assert!(status.success());
    assert!(!is_mount_point(&s.mnt));

    // As mount(8) calls it for an fstab line.
    let status = s.run(Command::new(&helper).arg(source()).arg(&s.mnt).args([
        "-n",
        "-o",
        "ro,cache_size=64MiB,views=raw+json,noauto,nofail,_netdev,nodev,nosuid,\
         x-systemd.automount",
    ]));
    assert!(status.success(), "{status}:\n{}", s.log());
    check_serving(&s.mnt, &s.log());
    let sidecar: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.mnt.join("g1/sub/temp.json")).unwrap()).unwrap();
    assert_eq!(sidecar["shape"], serde_json::json!([10, 7]));
    let opts = mount_options(&s.mnt);
    assert!(opts.split(',').any(|o| o == "ro"), "{opts}");
    s.unmount_and_wait();
}

/// The per-mount options of `mnt` (sixth mountinfo field).
fn mount_options(mnt: &Path) -> String {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (Path::new(f[4]) == mnt).then(|| f[5].to_string())
        })
        .unwrap()
}

/// `mount -t fuse.slabfs` through util-linux mount(8) and fuse3's
/// `mount.fuse`, which runs `slabfs SOURCE DIR -o OPTS` found on the
/// shell's default PATH. To put slabfs there without touching the system,
/// the whole thing runs in a private mount namespace where a directory
/// holding a `slabfs` link is bind-mounted over /usr/local/sbin (first on
/// that PATH). The checks run inside the namespace too, since the mount
/// is only visible there. Root only.
#[test]
fn mount_8_with_type_fuse_slabfs() {
    if !is_root() {
        eprintln!("skipped: mount(8) of an fstab-style type needs root");
        return;
    }
    let helper_exists = ["/sbin/mount.fuse.slabfs", "/sbin/mount.fuse"]
        .iter()
        .any(|p| Path::new(p).exists());
    if !helper_exists || Command::new("unshare").arg("--help").output().is_err() {
        eprintln!("skipped: needs fuse3's mount.fuse and util-linux unshare");
        return;
    }
    let s = Scratch::new();
    helper_link(&s, "slabfs");
    let expected = s.base.join("expected");
    std::fs::write(&expected, expected_temp()).unwrap();
    let script = r#"
        set -eu
        mount --bind "$BIN" /usr/local/sbin
        trap 'umount -l "$MNT" 2>/dev/null || true' EXIT
        mount -t fuse.slabfs -o ro,cache_size=64MiB,views=raw+json,nofail "$SRC" "$MNT"
        cmp "$MNT/g1/sub/temp" "$EXPECTED"
        test -s "$MNT/g1/sub/temp.json"
        grep -Eq " $MNT .* - fuse(\.slabfs)? " /proc/self/mountinfo
        umount "$MNT"
        trap - EXIT
        echo helper-mount-ok >&2
    "#;
    let status = s.run(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", script])
            .env("BIN", s.base.join("bin"))
            .env("MNT", &s.mnt)
            .env("SRC", source())
            .env("EXPECTED", &expected),
    );
    let log = s.log();
    assert!(
        status.success() && log.contains("helper-mount-ok"),
        "{status}:\n{log}"
    );
    // The daemon saw the unmount and exited.
    for pid in daemons(&s.mnt) {
        wait_gone(pid, &s.log());
    }
}

// ---------------------------------------------------------------------------
// systemd
// ---------------------------------------------------------------------------

#[test]
fn sd_notify_ready_once_live_and_stopping_on_sigterm() {
    let s = Scratch::new();
    let sock_path = s.base.join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    // A bound against hanging if READY never comes, not a measurement.
    sock.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut child = slabfs_mount(&s, &[])
        .env("NOTIFY_SOCKET", &sock_path)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(s.log_file())
        .spawn()
        .unwrap();
    let recv = || {
        let mut buf = [0u8; 4096];
        let n = sock
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("no notification ({e}):\n{}", s.log()));
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let ready = recv();
    assert!(
        ready.lines().any(|l| l == "READY=1"),
        "{ready:?}:\n{}",
        s.log()
    );
    assert!(
        ready
            .lines()
            .any(|l| l.starts_with("STATUS=serving 3 arrays")),
        "{ready:?}"
    );
    // Told only once the files are there.
    check_serving(&s.mnt, &s.log());

    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    assert_eq!(recv(), "STOPPING=1");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}:\n{}", s.log());
    assert!(!is_mount_point(&s.mnt));
}

// ---------------------------------------------------------------------------
// Ownership and kernel tuning
// ---------------------------------------------------------------------------

#[test]
fn uid_and_gid_options_own_every_node() {
    let s = Scratch::new();
    let status = s.run(&mut slabfs_mount(
        &s,
        &["--daemon", "--uid", "4242", "--gid", "4343"],
    ));
    assert!(status.success(), "{status}:\n{}", s.log());
    for (rel, mode) in [
        ("", 0o555),
        ("g1", 0o555),
        ("g1/sub/temp", 0o444),
        ("g1/sub/temp.json", 0o444),
    ] {
        let md = std::fs::metadata(s.mnt.join(rel)).unwrap();
        assert_eq!((md.uid(), md.gid()), (4242, 4343), "{rel:?}");
        assert_eq!(md.permissions().mode() & 0o7777, mode, "{rel:?}");
    }
    // Ownership changes nothing about the bytes.
    check_serving(&s.mnt, &s.log());
    s.unmount_and_wait();
}

#[test]
fn read_ahead_kb_is_applied_before_the_mount_is_reported_live() {
    let s = Scratch::new();
    // With a log file: a daemon's info lines never reach its caller's
    // terminal (they wait for the daemon's log).
    let log = s.log_path();
    let status = s.run(&mut slabfs_mount(
        &s,
        &[
            "--daemon",
            "--log-file",
            log.to_str().unwrap(),
            "--read-ahead-kb",
            "1024",
        ],
    ));
    assert!(status.success(), "{status}:\n{}", s.log());
    let kb = bdi_read_ahead_kb(&s.mnt);
    if is_root() {
        assert_eq!(kb, 1024, "{}", s.log());
        assert!(s.log().contains("-> 1024 KiB"), "{}", s.log());
    } else {
        // Not root: the kernel's value stays, with a warning saying why.
        assert_ne!(kb, 1024);
        assert!(
            s.log().contains("--read-ahead-kb 1024 not applied"),
            "{}",
            s.log()
        );
    }
    check_serving(&s.mnt, &s.log());
    s.unmount_and_wait();
}

#[test]
fn allow_other_without_user_allow_other_says_what_to_do() {
    let conf = std::fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
    if conf.lines().any(|l| l.trim() == "user_allow_other") {
        eprintln!("skipped: /etc/fuse.conf allows allow_other to every user here");
        return;
    }
    let s = Scratch::new();
    // Not as root, which needs no permission for allow_other.
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", SLABFS]);
        c
    } else {
        Command::new(SLABFS)
    };
    let (status, err) = s.run_capture(
        cmd.args(["mount", "--allow-other"])
            .arg(source())
            .arg(&s.mnt)
            .current_dir("/"),
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("--allow-other needs the line 'user_allow_other' in /etc/fuse.conf"),
        "{err}"
    );
    assert!(!is_mount_point(&s.mnt));
}

#[test]
fn logs_carry_syslog_priorities_when_stderr_is_the_journal() {
    let s = Scratch::new();
    // What systemd sets when it connects stderr to the journal; `run`
    // sends stderr to the log file.
    let md = s.log_file().metadata().unwrap();
    let status = s.run(
        slabfs_mount(&s, &["--daemon"]).env("JOURNAL_STREAM", format!("{}:{}", md.dev(), md.ino())),
    );
    assert!(status.success(), "{status}:\n{}", s.log());
    let text = s.log();
    assert!(
        text.lines()
            .any(|l| l.starts_with("<6>slabfs::fs::mount: mounted ")),
        "{text}"
    );
    assert!(text.lines().all(|l| l.starts_with('<')), "{text}");
    s.unmount_and_wait();
}
