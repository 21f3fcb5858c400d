//! A `slabfs mount` daemon under test, shared by the tests that mount.
//!
//! Each test starts `slabfs mount` as a child process on a fresh mount
//! point, waits until the mount is live, and stops it with a signal; a drop
//! guard stops the daemon and detaches the mount even when a test fails,
//! so no stale mount is ever left behind.

#![allow(dead_code)]

use std::ffi::CString;
use std::fs::OpenOptions;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a mount may take to come up (the dataset is opened first) and
/// a daemon to exit after a signal. Generous: CI machines are slow and
/// shared.
pub const TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// The daemon under test
// ---------------------------------------------------------------------------

/// A running `slabfs mount`. Dropping it stops the daemon (SIGTERM, then
/// SIGKILL) and detaches anything left at the mount point.
pub struct Mount {
    pub child: Option<Child>,
    pub mnt: PathBuf,
    pub log: PathBuf,
    /// Owns the mount point's parent; removed after the unmount.
    pub _dir: Option<tempfile::TempDir>,
}

impl Mount {
    /// Mount `source` at a new mount point (not created beforehand: the
    /// daemon must create it) and wait until it is live.
    pub fn start(source: &Path, args: &[&str]) -> Mount {
        let dir = tempfile::Builder::new()
            .prefix("slabfs-mount-test")
            .tempdir()
            .unwrap();
        let base = dir.path().canonicalize().unwrap();
        let mut m = Mount::spawn(source, &base.join("mnt"), &base.join("log"), args);
        m._dir = Some(dir);
        m.wait_live();
        m
    }

    /// Start a daemon at `mnt` (created first, as slabfs mounts only on an
    /// existing directory), logging to `log` (appended), without waiting.
    pub fn spawn(source: &Path, mnt: &Path, log: &Path, args: &[&str]) -> Mount {
        std::fs::create_dir_all(mnt).unwrap();
        let log_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .arg("mount")
            .args(args)
            .arg(source)
            .arg(mnt)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap();
        Mount {
            child: Some(child),
            mnt: mnt.to_path_buf(),
            log: log.to_path_buf(),
            _dir: None,
        }
    }

    pub fn pid(&self) -> libc::pid_t {
        self.child.as_ref().unwrap().id() as libc::pid_t
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the mount point is a live FUSE mount served by our child.
    pub fn wait_live(&mut self) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "slabfs mount exited with {status} before mounting:\n{}",
                    self.log()
                );
            }
            if is_live(&self.mnt) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "mount at {} not live after {TIMEOUT:?}:\n{}",
                self.mnt.display(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// Send `sig` without waiting.
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// Send `sig` and wait for the daemon to exit.
    pub fn signal_and_wait(&mut self, sig: libc::c_int) -> ExitStatus {
        self.signal(sig);
        self.wait_exit()
    }

    /// Forget a daemon that already exited, leaving whatever it left at
    /// the mount point (a stale mount) for the next `slabfs mount` to deal
    /// with: the guard neither detaches it nor removes the directory.
    /// Returns the mount point's parent, to hand to the next [`Mount`].
    pub fn abandon(mut self) -> Option<tempfile::TempDir> {
        assert!(self.child.is_none(), "abandon a daemon that has exited");
        self.mnt = PathBuf::from("/nonexistent/slabfs-test");
        self._dir.take()
    }

    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "daemon still running after {TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop with `sig` and check the clean shutdown: exit 0, nothing
    /// mounted.
    pub fn stop_with(mut self, sig: libc::c_int) {
        let status = self.signal_and_wait(sig);
        let log = self.log();
        assert!(status.success(), "daemon exited with {status}:\n{log}");
        assert!(
            !is_mount_point(&self.mnt),
            "still mounted after exit:\n{log}"
        );
        assert!(log.contains("unmounted"), "{log}");
    }

    pub fn stop(self) {
        self.stop_with(libc::SIGTERM)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if is_mount_point(&self.mnt) {
            detach(&self.mnt);
        }
    }
}

/// Lazily unmount whatever is at `mnt` (a test's last resort).
pub fn detach(mnt: &Path) {
    let c = CString::new(mnt.as_os_str().as_bytes()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        let _ = Command::new("fusermount3")
            .args(["-u", "-z", "-q"])
            .arg(mnt)
            .status();
    }
}

/// Mount points in /proc/self/mountinfo (field 5, octal escapes undone).
pub fn mount_points() -> Vec<(PathBuf, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            let fstype = right.split(' ').next()?.to_string();
            let mut out = Vec::new();
            let b = point.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'\\' && i + 3 < b.len() {
                    let o = std::str::from_utf8(&b[i + 1..i + 4]).ok()?;
                    out.push(u8::from_str_radix(o, 8).ok()?);
                    i += 4;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            Some((PathBuf::from(std::ffi::OsStr::from_bytes(&out)), fstype))
        })
        .collect()
}

pub fn is_mount_point(mnt: &Path) -> bool {
    mount_points().iter().any(|(p, _)| p == mnt)
}

/// A FUSE mount is at `mnt` and its daemon answers. `statfs` always goes
/// to the daemon (a stale mount fails it with ENOTCONN, where `stat` may
/// still be answered from the kernel's attribute cache); the device check
/// rules out the bare directory before the mount.
pub fn is_live(mnt: &Path) -> bool {
    let fuse = mount_points()
        .iter()
        .any(|(p, t)| p == mnt && (t == "fuse" || t.starts_with("fuse.")));
    let c = CString::new(mnt.as_os_str().as_bytes()).unwrap();
    // SAFETY: statfs is plain data filled by the call; c is a valid path.
    let answers = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0
    };
    let (Ok(m), Ok(parent)) = (
        std::fs::metadata(mnt),
        std::fs::metadata(mnt.parent().unwrap()),
    ) else {
        return false;
    };
    fuse && answers && m.dev() != parent.dev()
}

/// Copy a directory tree.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
