//! Watching a source for changes (inotify, through the `notify` crate), so
//! the live refresh re-loads only what changed instead of walking the
//! whole archive every interval.
//!
//! inotify watches are per directory: [`Watcher::watch_tree`] registers
//! one non-recursive watch for every directory the dataset walk would
//! enter (hidden names skipped, symlinked directories followed when they
//! resolve under the allowed roots, at most [`MAX_DEPTH`] deep), including
//! the chunk directories inside Zarr stores, since a rewritten chunk must
//! be noticed. Directories that appear later are watched when their
//! creation (or move into the tree) is seen, by the refresh thread, before
//! it re-loads them, so files written into them meanwhile are found by
//! that re-load.
//!
//! notify's own thread (one per mount, whatever the number of datasets)
//! reads the kernel's events and hands them to [`Watcher`]'s handler,
//! which turns each into a [`Seen`] on a bounded channel: opens and
//! close-after-read are dropped there (the daemon opens data files itself
//! to serve reads), so an idle or merely read archive wakes nobody. When
//! the kernel's queue overflows (`IN_Q_OVERFLOW`) or ours is full, events
//! were lost: the handler raises the `lost` flag and the refresh thread
//! walks everything once.
//!
//! Watching is all or nothing: [`Watcher::watch_tree`] fails
//! ([`Unwatchable`]) when a directory is on a file system whose changes
//! inotify does not report completely ([`local_fs`]: NFS, Lustre, CIFS,
//! GPFS, FUSE... only see changes made through this machine's kernel),
//! when the directories exceed the configured cap, or when the kernel
//! refuses more watches (`ENOSPC`: `fs.inotify.max_user_watches` reached).
//! The refresh thread then drops the watcher and walks periodically.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher as _};

use crate::storage::local::confine::Roots;

/// Directories deeper than this are not watched: the dataset walk's own
/// bound (it does not enter them either: symlink loops).
pub use crate::formats::dataset::MAX_DEPTH;

/// Events queued between notify's thread and the refresh thread. Beyond
/// it, events are dropped and one full walk replaces them: a bound on
/// memory whatever a writer does while a re-load runs.
const QUEUE: usize = 16 * 1024;

/// The watch cap when none is configured: this share of the kernel's
/// per-user limit, which every inotify user of the same uid (other
/// mounts, editors, systemd) shares.
const AUTO_SHARE: usize = 2;

/// The kernel's per-user watch limit when /proc does not say (the old
/// kernel default).
const KERNEL_DEFAULT_WATCHES: usize = 8192;

/// What the watcher saw, as the refresh thread receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Something at `path` was created, written, removed, renamed or had
    /// its attributes changed. `dir`: it is now a directory (created or
    /// moved in), to be watched. `gone`: removed or moved away.
    Changed {
        path: PathBuf,
        dir: bool,
        gone: bool,
    },
    /// The watcher cannot go on (an inotify read error).
    Failed(String),
    /// Nothing seen: the refresh thread is asked to look at its stop flag.
    Wake,
    /// A mount of an archive began to use the directory `dir` (the kernel
    /// looked it up, or a Zarr store in it was opened: `tree`, watch what
    /// is under it too): watch it from now on.
    Touched { dir: PathBuf, tree: bool },
}

/// Why a source cannot be watched (all of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwatchable(pub String);

impl std::fmt::Display for Unwatchable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The events channel: the sender side is shared by notify's handler and
/// whoever wakes the refresh thread.
pub struct Channel {
    pub tx: SyncSender<Seen>,
    pub rx: Receiver<Seen>,
    /// Set when events were lost: walk everything.
    pub lost: Arc<AtomicBool>,
}

impl Channel {
    pub fn new() -> Channel {
        let (tx, rx) = sync_channel(QUEUE);
        Channel {
            tx,
            rx,
            lost: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl Default for Channel {
    fn default() -> Channel {
        Channel::new()
    }
}

/// The watches of one source.
pub struct Watcher {
    inner: notify::INotifyWatcher,
    /// Every directory watched.
    watched: BTreeSet<PathBuf>,
    limit: usize,
}

impl Watcher {
    /// An inotify instance whose events go to `tx` (and `lost`), watching
    /// nothing yet; at most `limit` directories (`None`: half the kernel's
    /// per-user limit).
    pub fn new(
        tx: SyncSender<Seen>,
        lost: Arc<AtomicBool>,
        limit: Option<usize>,
    ) -> Result<Watcher, Unwatchable> {
        let handler = move |res: notify::Result<notify::Event>| {
            for seen in translate(res) {
                match seen {
                    Err(()) => lost.store(true, Ordering::Relaxed),
                    Ok(seen) => match tx.try_send(seen) {
                        Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                        Err(TrySendError::Full(_)) => lost.store(true, Ordering::Relaxed),
                    },
                }
            }
        };
        let inner = notify::INotifyWatcher::new(handler, notify::Config::default())
            .map_err(|e| Unwatchable(format!("cannot start inotify: {e}")))?;
        Ok(Watcher {
            inner,
            watched: BTreeSet::new(),
            limit: limit.unwrap_or_else(auto_limit),
        })
    }

    /// How many directories are watched.
    pub fn len(&self) -> usize {
        self.watched.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// Watch `dir` (at walk depth `depth`) and every directory under it
    /// that the dataset walk would enter and that is not watched yet. A
    /// directory that vanishes meanwhile is skipped.
    pub fn watch_tree(
        &mut self,
        dir: &Path,
        roots: &Roots,
        depth: usize,
    ) -> Result<(), Unwatchable> {
        self.watch_from(dir, roots, depth, true)
    }

    /// Watch the directory `dir` alone (not what is under it).
    pub fn watch_dir(&mut self, dir: &Path, roots: &Roots) -> Result<(), Unwatchable> {
        self.watch_from(dir, roots, MAX_DEPTH, false)
    }

    fn watch_from(
        &mut self,
        dir: &Path,
        roots: &Roots,
        depth: usize,
        below: bool,
    ) -> Result<(), Unwatchable> {
        let mut todo = vec![(dir.to_path_buf(), depth)];
        while let Some((dir, depth)) = todo.pop() {
            if !self.watched.contains(&dir) {
                if self.watched.len() >= self.limit {
                    return Err(Unwatchable(format!(
                        "more than {} directories to watch (--max-watches)",
                        self.limit
                    )));
                }
                local_fs(&dir)?;
                match self.inner.watch(&dir, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.watched.insert(dir.clone());
                    }
                    Err(e) => match e.kind {
                        notify::ErrorKind::MaxFilesWatch => {
                            return Err(Unwatchable(format!(
                                "the kernel refused more watches after {} directories \
                                 (fs.inotify.max_user_watches)",
                                self.watched.len()
                            )));
                        }
                        notify::ErrorKind::PathNotFound => continue,
                        _ => {
                            return Err(Unwatchable(format!("watching {}: {e}", dir.display())));
                        }
                    },
                }
            }
            if depth >= MAX_DEPTH || !below {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue; // gone, or unreadable: the walk will say so
            };
            for e in entries.filter_map(|e| e.ok()) {
                let name = e.file_name();
                if name.as_bytes().starts_with(b".") {
                    continue;
                }
                let is_dir = match e.file_type() {
                    Ok(t) if t.is_dir() => true,
                    Ok(t) if t.is_symlink() => e.path().is_dir() && roots.check(&e.path()).is_ok(),
                    _ => false,
                };
                if is_dir {
                    todo.push((e.path(), depth + 1));
                }
            }
        }
        Ok(())
    }

    /// `path` and everything under it are gone (removed or moved away):
    /// notify has dropped their watches, so stop counting them.
    pub fn forget(&mut self, path: &Path) {
        let under: Vec<PathBuf> = self
            .watched
            .range(path.to_path_buf()..)
            .take_while(|p| p.starts_with(path))
            .cloned()
            .collect();
        for p in under {
            self.watched.remove(&p);
        }
    }
}

/// The default cap: a share of `fs.inotify.max_user_watches`.
fn auto_limit() -> usize {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(KERNEL_DEFAULT_WATCHES)
        / AUTO_SHARE
}

/// One notify event as what the refresh thread needs: `Err(())` when
/// events were lost.
fn translate(res: notify::Result<notify::Event>) -> Vec<Result<Seen, ()>> {
    let ev = match res {
        Ok(ev) => ev,
        Err(e) => return vec![Ok(Seen::Failed(e.to_string()))],
    };
    if ev.need_rescan() {
        return vec![Err(())];
    }
    let (dir, gone) = match ev.kind {
        // Opens and reads (the daemon's own included) change nothing.
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => (false, false),
        EventKind::Access(_) => return Vec::new(),
        EventKind::Create(_) => (true, false),
        // Both: the From and To halves were reported on their own.
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => return Vec::new(),
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) => (false, true),
        EventKind::Modify(ModifyKind::Name(_)) => (true, false),
        EventKind::Modify(_) => (false, false),
        EventKind::Remove(_) => (false, true),
        EventKind::Any | EventKind::Other => (false, false),
    };
    ev.paths
        .into_iter()
        .map(|path| {
            // Whether it is a directory now (created or moved in); a
            // symlink is not followed here, the walk decides about it.
            let dir = dir
                && std::fs::symlink_metadata(&path)
                    .map(|m| m.is_dir())
                    .unwrap_or(false);
            Ok(Seen::Changed { path, dir, gone })
        })
        .collect()
}

/// inotify reports every change on a local file system; on a network or
/// cluster file system only the changes made through this machine's own
/// kernel, so other writers would go unseen. Those are not watched.
pub fn local_fs(dir: &Path) -> Result<(), Unwatchable> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| Unwatchable(format!("{}: {e}", dir.display())))?;
    // SAFETY: statfs is plain data the call fills; c is a valid path that
    // outlives the call.
    let (rc, st) = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        (libc::statfs(c.as_ptr(), &mut st), st)
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(Unwatchable(format!("{}: {e}", dir.display())));
    }
    // f_type's integer type differs between targets; the magic numbers
    // all fit in 32 bits.
    let magic = st.f_type as u32;
    match fs_name(magic) {
        (name, true) => {
            log::trace!("{} is on {name}: watched", dir.display());
            Ok(())
        }
        (name, false) => Err(Unwatchable(format!(
            "{} is on {name}, whose changes made by other machines inotify does not report",
            dir.display()
        ))),
    }
}

/// A file system's name by its `statfs` magic number, and whether inotify
/// sees every change on it. Unknown types are not trusted.
fn fs_name(magic: u32) -> (String, bool) {
    let local = [
        (0xEF53, "ext2/3/4"),
        (0x5846_5342, "XFS"),
        (0x9123_683E, "Btrfs"),
        (0x0102_1994, "tmpfs"),
        (0x8584_58F6, "ramfs"),
        (0x2FC1_2FC1, "ZFS"),
        (0xF2F5_2010, "F2FS"),
        (0x794C_7630, "overlayfs"),
        (0x3153_464A, "JFS"),
        (0x5265_4973, "ReiserFS"),
        (0xCA45_1A4E, "bcachefs"),
        (0x3434, "NILFS"),
        (0x2011_BAB0, "exFAT"),
        (0x4D44, "FAT"),
    ];
    let remote = [
        (0x6969, "NFS"),
        (0x0BD0_0BD0, "Lustre"),
        (0xFF53_4D42, "CIFS"),
        (0xFE53_4D42, "SMB2"),
        (0x4750_4653, "GPFS"),
        (0x00C3_6400, "CephFS"),
        (0x6573_5546, "FUSE"),
        (0x0102_1997, "9p"),
        (0x1983_0326, "BeeGFS"),
        (0xAAD7_AAEA, "PanFS"),
        (0x5346_414F, "AFS"),
    ];
    if let Some((_, n)) = local.iter().find(|(m, _)| *m == magic) {
        return (n.to_string(), true);
    }
    match remote.iter().find(|(m, _)| *m == magic) {
        Some((_, n)) => (n.to_string(), false),
        None => (format!("a file system of type {magic:#x}"), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn file_system_types() {
        assert_eq!(fs_name(0xEF53), ("ext2/3/4".to_string(), true));
        assert_eq!(fs_name(0x6969), ("NFS".to_string(), false));
        assert_eq!(fs_name(0x0BD0_0BD0), ("Lustre".to_string(), false));
        assert!(!fs_name(0x1234_5678).1);
    }

    fn recv(rx: &Receiver<Seen>, want: impl Fn(&Seen) -> bool) -> Seen {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let seen = rx.recv_timeout(left).expect("no event within 10 s");
            if want(&seen) {
                return seen;
            }
        }
    }

    /// Real inotify on a temporary directory: new directories are watched
    /// when added, reads are not reported, the cap holds.
    #[test]
    fn watches_directories_and_reports_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        if local_fs(&root).is_err() {
            eprintln!("skipped: {} is not a local file system", root.display());
            return;
        }
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join(".hidden")).unwrap();
        std::fs::write(root.join("a/b/x.nc"), b"old").unwrap();
        let ch = Channel::new();
        let roots = Roots::new(vec![root.clone()]);
        let mut w = Watcher::new(ch.tx.clone(), ch.lost.clone(), None).unwrap();
        w.watch_tree(&root, &roots, 0).unwrap();
        assert_eq!(w.len(), 3, "root, a, a/b; not .hidden");

        // Reading a file is not a change.
        let _ = std::fs::read(root.join("a/b/x.nc")).unwrap();
        std::fs::write(root.join("a/b/x.nc"), b"new").unwrap();
        let seen = recv(&ch.rx, |_| true);
        assert_eq!(
            seen,
            Seen::Changed {
                path: root.join("a/b/x.nc"),
                dir: false,
                gone: false
            }
        );

        std::fs::create_dir(root.join("a/c")).unwrap();
        let seen = recv(&ch.rx, |s| matches!(s, Seen::Changed { dir: true, .. }));
        assert_eq!(
            seen,
            Seen::Changed {
                path: root.join("a/c"),
                dir: true,
                gone: false
            }
        );
        w.watch_tree(&root.join("a/c"), &roots, 2).unwrap();
        assert_eq!(w.len(), 4);
        std::fs::write(root.join("a/c/y.nc"), b"y").unwrap();
        recv(
            &ch.rx,
            |s| matches!(s, Seen::Changed { path, .. } if path.ends_with("a/c/y.nc")),
        );

        std::fs::remove_dir_all(root.join("a")).unwrap();
        recv(
            &ch.rx,
            |s| matches!(s, Seen::Changed { path, gone: true, .. } if *path == root.join("a")),
        );
        w.forget(&root.join("a"));
        assert_eq!(w.len(), 1);
        assert!(!ch.lost.load(Ordering::Relaxed));

        // The cap: a second tree of three directories does not fit in 2.
        let mut small = Watcher::new(ch.tx.clone(), ch.lost.clone(), Some(2)).unwrap();
        std::fs::create_dir_all(root.join("p/q")).unwrap();
        let err = small.watch_tree(&root, &roots, 0).unwrap_err();
        assert!(err.0.contains("more than 2 directories"), "{err}");
    }
}
