//! `--daemon` (and the `mount.slabfs` helper): return to the caller only
//! once the mount is live, and fail with the reason when it is not.
//!
//! # How
//!
//! [`detach`] forks. The parent keeps the read end of a pipe and blocks on
//! it; the child gets the write end as a [`ReadyPipe`], starts a new
//! session (`setsid`: no controlling terminal, so closing the terminal
//! sends it no SIGHUP and Ctrl-C in the shell no SIGINT), moves to `/` (so
//! it keeps no directory busy), points stdin and stdout at `/dev/null`,
//! and runs the mount as usual. Right after the kernel accepted the mount
//! it writes `OK`, or `ERR <reason>` if mounting failed, and the parent
//! exits 0, or prints the reason and exits non-zero. If the child dies
//! without writing (killed, or a signal before the mount was live) the
//! parent sees end-of-file and reports how the child ended.
//!
//! # The caller's descriptors
//!
//! Once the mount is live the daemon holds nothing of its caller's, so a
//! caller that captures the output through pipes and waits for them to
//! close (`out=$(slabfs mount --daemon ...)`, cron, Python's
//! `subprocess.run(..., capture_output=True)`, Ansible) returns at once:
//!
//! - descriptors above stderr that the caller let it inherit are closed
//!   before anything else is opened ([`close_inherited`]);
//! - stdin and stdout point at `/dev/null` from the fork on;
//! - stderr is kept until the mount is live, so whatever goes wrong while
//!   mounting is seen; then, just before the parent is released, it is
//!   pointed at the daemon's [`Output`]: the `--log-file`, else the system
//!   log (`/dev/log`, which the journal reads), else `/dev/null` when there
//!   is no system log (the caller was warned before detaching). The one
//!   exception is a stderr that is systemd's journal stream: no caller
//!   waits on it, so it is kept.
//!
//! A failure before the mount is live goes through the pipe and the
//! parent prints it on the caller's stderr (exit 1).
//!
//! # Why fork first
//!
//! `fork` copies only the calling thread. A process that already runs
//! other threads (the signal thread, rayon's pool, fuser's workers) would
//! leave the child with locks held by threads that no longer exist, so
//! [`detach`] runs before any thread is started and refuses to fork when
//! it finds more than one. One fork is enough: the child is a session
//! leader but never opens a terminal, so it cannot acquire one.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::Path;

/// The system log's socket, where syslog(3) writes.
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// Where the daemon's stderr, and with it its log, goes once the mount is
/// live (see the module doc).
#[derive(Debug)]
pub enum Output {
    /// Keep stderr: it is systemd's journal stream.
    Keep,
    /// The `--log-file`, opened for appending.
    File(File),
    /// The system log's socket: lines are formatted for it
    /// ([`crate::logging::use_syslog_format`]).
    Syslog(UnixDatagram),
    /// Nowhere: there is no system log and no log file.
    Discard,
}

impl Output {
    /// The system log, or why there is none.
    pub fn syslog() -> io::Result<Output> {
        let sock = UnixDatagram::unbound()?;
        sock.connect(SYSLOG_SOCKET)?;
        Ok(Output::Syslog(sock))
    }

    /// Point stderr at this output.
    fn install(self) -> io::Result<()> {
        let target = match self {
            Output::Keep => return Ok(()),
            Output::File(f) => OwnedFd::from(f),
            Output::Syslog(s) => {
                crate::logging::use_syslog_format();
                OwnedFd::from(s)
            }
            Output::Discard => OwnedFd::from(File::options().write(true).open("/dev/null")?),
        };
        // SAFETY: both descriptors are open; dup2 replaces stderr
        // atomically and `target` (a descriptor of our own) is closed
        // when dropped, leaving the copy on 2.
        if unsafe { libc::dup2(target.as_raw_fd(), libc::STDERR_FILENO) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Close every descriptor above stderr: what the caller let this process
/// inherit (a lock held by `flock(1)`, a shell's extra pipe). Call it
/// first, before anything of the process's own is opened. Returns how
/// many were closed.
pub fn close_inherited() -> io::Result<usize> {
    let fds: Vec<RawFd> = std::fs::read_dir(Path::new("/proc/self/fd"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > libc::STDERR_FILENO)
        .collect();
    let mut closed = 0;
    for fd in fds {
        // SAFETY: nothing in this process owns these descriptors (it has
        // opened none yet); the one read_dir used is already closed, and
        // closing it again only fails with EBADF.
        if unsafe { libc::close(fd) } == 0 {
            closed += 1;
        }
    }
    Ok(closed)
}

/// What [`detach`] returns in each process.
#[derive(Debug)]
pub enum Detached {
    /// In the child: report on this once the mount is live or has failed.
    Child(ReadyPipe),
    /// In the parent: the child's report. `Err` holds the reason to print.
    Parent(Result<(), String>),
}

/// The child's end of the pipe to the waiting parent, and where its
/// stderr goes once live. Reporting consumes it; dropping it unreported
/// makes the parent report that the daemon ended before the mount was
/// live.
#[derive(Debug)]
pub struct ReadyPipe {
    pipe: File,
    output: Output,
}

impl ReadyPipe {
    /// Give the caller's stderr back (pointing it at the [`Output`]),
    /// then tell the parent the mount is live.
    pub fn ready(self) {
        let ReadyPipe { pipe, output } = self;
        let where_to = format!("{output:?}");
        if let Err(e) = output.install() {
            // Still the caller's stderr: the line reaches them.
            log::warn!("could not redirect stderr to {where_to}: {e}");
        }
        // What was held back from the caller's terminal goes to the log.
        crate::logging::release_held();
        ReadyPipe {
            pipe,
            output: Output::Keep,
        }
        .send(&encode(&Ok(())));
    }

    /// Tell the parent mounting failed, and why. The lines held back from
    /// the caller's terminal (how far the mount got) are dropped: the
    /// reason is what the caller needs.
    pub fn failed(self, reason: &str) {
        crate::logging::drop_held();
        self.send(&encode(&Err(reason.to_string())));
    }

    fn send(mut self, msg: &[u8]) {
        // The parent may have been killed meanwhile (EPIPE): nothing then
        // waits for the report, and the mount itself is unaffected.
        if let Err(e) = self.pipe.write_all(msg) {
            log::warn!("could not report to the waiting parent process: {e}");
        }
    }
}

/// Fork into a waiting parent and a daemon child (see the module doc);
/// the child's stderr goes to `output` once the mount is live. Call it
/// before any thread exists.
pub fn detach(output: Output) -> io::Result<Detached> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(io::Error::other(format!(
            "cannot detach: {threads} threads are already running (fork must come first)"
        )));
    }
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors that nothing
    // else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the process is single-threaded (checked above), so the child
    // is a consistent copy of it and may run arbitrary code.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(read);
            let pipe = ReadyPipe {
                pipe: File::from(write),
                output,
            };
            if let Err(e) = become_daemon() {
                pipe.failed(&format!("detaching: {e}"));
                std::process::exit(1);
            }
            Ok(Detached::Child(pipe))
        }
        child => {
            drop(write);
            Ok(Detached::Parent(wait_for_report(File::from(read), child)))
        }
    }
}

/// The child's side of detaching: own session, `/` as working directory,
/// stdin and stdout on /dev/null.
fn become_daemon() -> io::Result<()> {
    // SAFETY: setsid has no memory-safety preconditions.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    std::env::set_current_dir("/")?;
    let null = File::options().read(true).write(true).open("/dev/null")?;
    for fd in [libc::STDIN_FILENO, libc::STDOUT_FILENO] {
        // SAFETY: both descriptors are open; dup2 replaces fd atomically
        // and `null` stays owned by the File, which closes only its own.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Block until the child reports (or dies), and say how it went.
fn wait_for_report(mut pipe: File, child: libc::pid_t) -> Result<(), String> {
    let mut msg = Vec::new();
    if let Err(e) = pipe.read_to_end(&mut msg) {
        return Err(format!("waiting for the daemon (pid {child}): {e}"));
    }
    match decode(&msg) {
        Some(report) => report,
        None => Err(format!(
            "the daemon (pid {child}) {} before the mount was live",
            child_end(child)
        )),
    }
}

/// How `child` ended, once its pipe closed unreported.
fn child_end(child: libc::pid_t) -> String {
    let mut status = 0;
    // SAFETY: status is a valid out pointer; child is our own child.
    let rc = unsafe { libc::waitpid(child, &mut status, 0) };
    if rc != child {
        return format!("ended ({})", io::Error::last_os_error());
    }
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("was killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("ended (wait status {status:#x})")
    }
}

/// The pipe message: `OK`, or `ERR ` and the reason.
fn encode(report: &Result<(), String>) -> Vec<u8> {
    match report {
        Ok(()) => b"OK".to_vec(),
        Err(reason) => format!("ERR {reason}").into_bytes(),
    }
}

/// Read the pipe message; `None` when there is none (the child died) or it
/// is garbled.
fn decode(msg: &[u8]) -> Option<Result<(), String>> {
    if msg == b"OK" {
        Some(Ok(()))
    } else {
        msg.strip_prefix(b"ERR ")
            .map(|r| Err(String::from_utf8_lossy(r).into_owned()))
    }
}

/// Threads of this process (`Threads:` in /proc/self/status).
fn thread_count() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no thread count in /proc/self/status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        for report in [
            Ok(()),
            Err("mount point /m: Permission denied".to_string()),
            Err(String::new()),
        ] {
            assert_eq!(decode(&encode(&report)), Some(report));
        }
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"OKAY"), None);
        assert_eq!(decode(b"ERR"), None);
    }

    #[test]
    fn the_test_harness_is_threaded_so_detach_refuses() {
        // A spawned thread guarantees more than one, whatever the harness.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        assert!(thread_count().unwrap() > 1);
        let err = detach(Output::Keep).unwrap_err();
        assert!(
            err.to_string().contains("threads are already running"),
            "{err}"
        );
        drop(tx);
        t.join().unwrap().unwrap_err();
    }
}
