//! Open descriptors: the only code of storage that opens a local file,
//! and a bounded cache of them, so an archive of any size mounts at an
//! ordinary `ulimit -n`.
//!
//! Every open goes through [`open_retrying`] (out of descriptors: close
//! cached ones, try again). A confined open ([`open_confined`]) asks
//! [`super::confine::Roots`] (the policy, which never opens anything)
//! before and after: the path must be admitted, and so must the file the
//! descriptor turned out to be.
//!
//! A source that reads one file (a netCDF-3 file, a blocked archive, a raw
//! fragment) used to keep that file open for as long as it lived: one
//! descriptor per file of the archive, so a directory of a few thousand
//! files failed to mount at the common limit of 1,024 ("Too many open
//! files"). Now [`super::files::OsFiles`]'s `open` returns a
//! [`CachedFile`]: it remembers the path and the identity (device, inode)
//! of the file it opened, and borrows a descriptor from the process-wide
//! [`Descriptors`] cache for each read. The cache keeps at most its
//! capacity open, closing the least recently used; a read of a file whose
//! descriptor was closed opens it again.
//!
//! # Same file, or an error
//!
//! An open descriptor follows its inode: a file replaced by rename keeps
//! serving the old contents until the refresh reopens the dataset. A
//! reopened path may lead to another file, so a reopen checks the device
//! and inode; when they differ, the read fails (EIO at the mount, a log
//! line naming the file) rather than mix two files, until the refresh
//! reopens the dataset (at the next `--refresh` tick). Growing or
//! rewriting a file in place keeps its inode and reads on, as before.
//!
//! # Bounds
//!
//! At most [`Descriptors::capacity`] descriptors are cached; a read in
//! progress holds its own reference (`Arc<File>`), so the process has at
//! most the capacity plus one per read in flight. The daemon raises its
//! soft `RLIMIT_NOFILE` to the hard limit at start ([`raise_nofile_limit`])
//! and sizes the cache from it ([`default_capacity`]: half the soft limit,
//! at most [`MAX_DEFAULT_CAPACITY`]), leaving the rest for the FUSE
//! device, chunk files read by Zarr stores (opened per read) and
//! directory walks. An open that still fails with `EMFILE`/`ENFILE`
//! closes half of the cached descriptors and tries again
//! ([`open_retrying`]), so a per-file limit is never a failed mount.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use lru::LruCache;
use parking_lot::Mutex;

use super::confine::Roots;
use crate::storage::contract::ReadAt;

/// The default capacity never exceeds this: enough for every file a busy
/// mount reads at once, small enough that an idle mount of a huge archive
/// holds little.
pub const MAX_DEFAULT_CAPACITY: usize = 4096;

/// The fewest descriptors the cache keeps, whatever the limit.
const MIN_CAPACITY: usize = 16;

/// How many times an open that ran out of descriptors is retried after
/// closing cached ones.
const EMFILE_RETRIES: usize = 4;

/// The process-wide cache of open data files.
#[derive(Debug)]
pub struct Descriptors {
    open: Mutex<LruCache<u64, Arc<File>>>,
    next_id: AtomicU64,
    /// Descriptors opened (first opens and reopens), for tests and stats.
    opened: AtomicU64,
}

impl Descriptors {
    pub fn new(capacity: usize) -> Descriptors {
        let d = Descriptors {
            open: Mutex::new(LruCache::unbounded()),
            next_id: AtomicU64::new(0),
            opened: AtomicU64::new(0),
        };
        d.set_capacity(capacity);
        d
    }

    /// Keep at most `capacity` descriptors (at least [`MIN_CAPACITY`]),
    /// closing the least recently used beyond it.
    pub fn set_capacity(&self, capacity: usize) {
        let capacity = std::num::NonZeroUsize::new(capacity.max(MIN_CAPACITY)).expect("nonzero");
        self.open.lock().resize(capacity);
    }

    pub fn capacity(&self) -> usize {
        self.open.lock().cap().get()
    }

    /// Descriptors held now.
    pub fn len(&self) -> usize {
        self.open.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Opens so far (first opens and reopens after eviction).
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Close half of the cached descriptors (at least one); how many.
    fn shed(&self) -> usize {
        let closing: Vec<Arc<File>> = {
            let mut open = self.open.lock();
            let n = open.len().div_ceil(2);
            (0..n)
                .filter_map(|_| open.pop_lru().map(|(_, f)| f))
                .collect()
        };
        // Closed here, outside the lock.
        closing.len()
    }

    fn get(&self, id: u64) -> Option<Arc<File>> {
        self.open.lock().get(&id).cloned()
    }

    fn put(&self, id: u64, file: Arc<File>) {
        // The evicted descriptor is closed outside the lock.
        let _evicted = self.open.lock().push(id, file);
    }

    fn forget(&self, id: u64) {
        let _closed = self.open.lock().pop(&id);
    }
}

/// The process's cache ([`Descriptors`]), sized by [`default_capacity`]
/// unless [`Descriptors::set_capacity`] says otherwise.
pub fn global() -> &'static Descriptors {
    static GLOBAL: OnceLock<Descriptors> = OnceLock::new();
    GLOBAL.get_or_init(|| Descriptors::new(default_capacity()))
}

/// Half the soft `RLIMIT_NOFILE`, at most [`MAX_DEFAULT_CAPACITY`].
pub fn default_capacity() -> usize {
    let soft = nofile_limit().map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 2)
        .unwrap_or(usize::MAX)
        .min(MAX_DEFAULT_CAPACITY)
}

/// `(soft, hard)` `RLIMIT_NOFILE`.
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Raise the soft `RLIMIT_NOFILE` to the hard limit, as daemons that hold
/// many files do; returns the new `(soft, hard)`.
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let (soft, hard) = nofile_limit()?;
    if soft < hard {
        let lim = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: `lim` is a valid rlimit; raising the soft limit up to the
        // hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    nofile_limit()
}

/// Whether `e` means the process (or the system) is out of descriptors.
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Run `open`; when it fails for want of descriptors, close half of the
/// cached ones and try again (a few times).
pub fn open_retrying<T>(mut open: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match open() {
            Err(e) if out_of_descriptors(&e) && tries < EMFILE_RETRIES => {
                tries += 1;
                let closed = global().shed();
                log::debug!("out of descriptors ({e}): closed {closed} cached ones, retrying");
                if closed == 0 {
                    return Err(e);
                }
            }
            other => return other,
        }
    }
}

/// A file read through the descriptor cache (see the module doc).
pub struct CachedFile {
    /// The path opened (the real one when confined).
    path: PathBuf,
    /// Where a reopen must stay, as the first open did.
    roots: Option<Arc<Roots>>,
    /// Device and inode of the file first opened.
    identity: (u64, u64),
    id: u64,
    cache: &'static Descriptors,
}

impl std::fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl CachedFile {
    /// Open `path` (under `roots` when given) through the process's cache.
    pub fn open(path: &Path, roots: Option<Arc<Roots>>) -> io::Result<CachedFile> {
        CachedFile::open_in(global(), path, roots)
    }

    /// [`CachedFile::open`] through `cache`.
    pub fn open_in(
        cache: &'static Descriptors,
        path: &Path,
        roots: Option<Arc<Roots>>,
    ) -> io::Result<CachedFile> {
        let file = open_file(path, roots.as_deref())?;
        CachedFile::new_in(cache, path, roots, file)
    }

    /// [`CachedFile::open`] of `real`, a path [`Roots::check`] admitted
    /// already (the caller words its own refusal): opened checked
    /// ([`open_checked`]), and opened confined to `roots` again whenever
    /// its descriptor was closed.
    pub fn open_admitted(real: &Path, roots: Arc<Roots>) -> io::Result<CachedFile> {
        let file = open_checked(&roots, real)?;
        CachedFile::new_in(global(), real, Some(roots), file)
    }

    /// The file `file`, just opened at `path`, in `cache`.
    fn new_in(
        cache: &'static Descriptors,
        path: &Path,
        roots: Option<Arc<Roots>>,
        file: File,
    ) -> io::Result<CachedFile> {
        cache.opened.fetch_add(1, Ordering::Relaxed);
        let meta = file.metadata()?;
        let f = CachedFile {
            path: path.to_path_buf(),
            roots,
            identity: (meta.dev(), meta.ino()),
            id: cache.next_id.fetch_add(1, Ordering::Relaxed),
            cache,
        };
        cache.put(f.id, Arc::new(file));
        Ok(f)
    }

    /// The open file, for a caller that checks its metadata around a
    /// read ([`super::fs_store::read_open_verified`]): the cached
    /// descriptor, or the path opened again (and checked to be the same
    /// file).
    pub fn descriptor(&self) -> io::Result<Arc<File>> {
        self.file()
    }

    /// The open file: the cached descriptor, or the path opened again
    /// (and checked to be the same file).
    fn file(&self) -> io::Result<Arc<File>> {
        if let Some(f) = self.cache.get(self.id) {
            return Ok(f);
        }
        let file = open_file(&self.path, self.roots.as_deref())?;
        self.cache.opened.fetch_add(1, Ordering::Relaxed);
        let meta = file.metadata()?;
        if (meta.dev(), meta.ino()) != self.identity {
            return Err(io::Error::other(format!(
                "{} was replaced by another file since it was opened; it is read again \
                 once the dataset is reopened (--refresh)",
                self.path.display()
            )));
        }
        let file = Arc::new(file);
        self.cache.put(self.id, file.clone());
        Ok(file)
    }
}

/// Open `path` for reading, confined to `roots` when given, retrying when
/// out of descriptors.
fn open_file(path: &Path, roots: Option<&Roots>) -> io::Result<File> {
    match roots {
        Some(roots) => open_confined(roots, path),
        None => open_retrying(|| File::open(path)),
    }
}

/// Open the file `path` for reading if [`Roots::check`] admits it,
/// without the races of checking a path and then opening it: the open
/// does not block (`O_NONBLOCK`: a FIFO swapped in after the check cannot
/// hang it), and the file actually opened must be a regular file whose
/// path (`/proc/self/fd`) is admitted as well
/// ([`Roots::judge_opened`]). A refusal is a `PermissionDenied` error
/// saying why.
pub fn open_confined(roots: &Roots, path: &Path) -> io::Result<File> {
    let real = roots.check(path).map_err(|r| roots.refused(&r))?;
    open_checked(roots, &real)
}

/// [`open_confined`] of `real`, which [`Roots::check`] returned: for
/// callers that have checked already (to word their own error).
pub fn open_checked(roots: &Roots, real: &Path) -> io::Result<File> {
    let file = open_retrying(|| open_nonblocking(real))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(roots.refused(real));
    }
    use std::os::fd::AsRawFd;
    // What the descriptor really is. Without /proc (no way to ask),
    // the check of the path above stands.
    if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        let opened = match opened.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
            Some(s) => PathBuf::from(s),
            None => opened,
        };
        roots.judge_opened(real, &opened)?;
    }
    Ok(file)
}

/// Open `path` for reading, unconfined, if it is a regular file: never
/// blocks (a FIFO planted in a store is an error, not a hung read);
/// anything else is `InvalidInput`. How an unconfined directory store
/// opens its value files.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_retrying(|| {
        open_nonblocking(path).and_then(|f| match f.metadata()?.is_file() {
            true => Ok(f),
            false => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            )),
        })
    })
}

/// `open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY)`.
fn open_nonblocking(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

impl ReadAt for CachedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&*self.file()?, buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.file()?.metadata()?.len())
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        self.cache.forget(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked(capacity: usize) -> &'static Descriptors {
        Box::leak(Box::new(Descriptors::new(capacity)))
    }

    /// Descriptors of this process pointing at files under `dir`.
    fn open_under(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(dir)))
            .count()
    }

    #[test]
    fn more_files_than_the_capacity_read_with_bounded_descriptors() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = leaked(16);
        let files: Vec<CachedFile> = (0..100)
            .map(|i| {
                let p = tmp.path().join(format!("f{i}"));
                std::fs::write(&p, format!("file {i:03}")).unwrap();
                CachedFile::open_in(cache, &p, None).unwrap()
            })
            .collect();
        assert!(open_under(tmp.path()) <= 16);
        for round in 0..2 {
            for (i, f) in files.iter().enumerate() {
                let mut buf = [0u8; 3];
                f.read_exact_at(&mut buf, 5).unwrap();
                assert_eq!(&buf, format!("{i:03}").as_bytes(), "round {round}");
                assert_eq!(f.size().unwrap(), 8);
            }
            assert!(open_under(tmp.path()) <= 16, "round {round}");
        }
        // 100 first opens, then every read of a round reopened its file.
        assert!(cache.opened() >= 100 + 2 * 84, "{}", cache.opened());
        drop(files);
        assert!(cache.is_empty());
        assert_eq!(open_under(tmp.path()), 0);
    }

    #[test]
    fn a_file_replaced_while_closed_is_an_error_not_another_file() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = leaked(16);
        let p = tmp.path().join("f");
        std::fs::write(&p, b"old contents").unwrap();
        let f = CachedFile::open_in(cache, &p, None).unwrap();
        // Replaced by rename while the descriptor is cached: the old file
        // is still read, as an open descriptor would.
        std::fs::write(tmp.path().join("new"), b"NEW CONTENTS").unwrap();
        std::fs::rename(tmp.path().join("new"), &p).unwrap();
        let mut buf = [0u8; 3];
        f.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"old");
        // Once its descriptor was closed, a reopen finds another inode.
        cache.forget(f.id);
        let e = f.read_exact_at(&mut buf, 0).unwrap_err();
        assert!(e.to_string().contains("replaced by another file"), "{e}");
        // Grown in place: the same inode, read on.
        let g = tmp.path().join("g");
        std::fs::write(&g, b"abc").unwrap();
        let gf = CachedFile::open_in(cache, &g, None).unwrap();
        cache.forget(gf.id);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&g)
            .and_then(|mut w| std::io::Write::write_all(&mut w, b"def"))
            .unwrap();
        gf.read_exact_at(&mut buf, 3).unwrap();
        assert_eq!(&buf, b"def");
    }

    #[test]
    fn shedding_closes_half() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = leaked(64);
        let files: Vec<CachedFile> = (0..40)
            .map(|i| {
                let p = tmp.path().join(format!("f{i}"));
                std::fs::write(&p, b"x").unwrap();
                CachedFile::open_in(cache, &p, None).unwrap()
            })
            .collect();
        assert_eq!(cache.len(), 40);
        assert_eq!(cache.shed(), 20);
        assert_eq!(cache.len(), 20);
        drop(files);
    }

    #[test]
    fn capacity_has_a_floor_and_follows_the_limit() {
        assert_eq!(Descriptors::new(0).capacity(), MIN_CAPACITY);
        let (soft, hard) = nofile_limit().unwrap();
        assert!(soft <= hard);
        let c = default_capacity() as u64;
        assert!(
            c <= MAX_DEFAULT_CAPACITY as u64 && c <= soft / 2 + 1,
            "{c} of {soft}"
        );
    }

    /// Regression: devices, FIFOs and /proc files were admitted when a
    /// root covered them (`--allow-outside /`), and opening a FIFO hangs.
    #[test]
    fn special_files_are_refused_under_any_root() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(dir.join("plain"), b"x").unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero")).unwrap();
        let roots = Roots::new([PathBuf::from("/")]);
        for p in [
            Path::new("/dev/zero"),
            Path::new("/dev/null"),
            Path::new("/proc/self/environ"),
            Path::new("/proc/self/fd"),
            Path::new("/sys/kernel"),
            &fifo,
            &dir.join("zero"),
        ] {
            assert!(roots.check(p).is_err(), "{}", p.display());
            let e = open_confined(&roots, p).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{}", p.display());
        }
        assert!(roots.describe().contains("/proc"));
        assert!(roots.check(&dir.join("plain")).is_ok());
        assert!(roots.check(&dir).is_ok());
        assert!(roots.check(&dir.join("missing")).is_ok());
        let mut f = open_confined(&roots, &dir.join("plain")).unwrap();
        let mut s = String::new();
        std::io::Read::read_to_string(&mut f, &mut s).unwrap();
        assert_eq!(s, "x");
        // A directory is not a file to read.
        assert!(open_confined(&roots, &dir).is_err());
        // Outside the roots, even a plain file.
        let narrow = Roots::new([dir.join("sub")]);
        assert!(open_confined(&narrow, &dir.join("plain")).is_err());
    }
}
