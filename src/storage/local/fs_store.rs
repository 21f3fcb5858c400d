//! The directory store: a [`Store`] over a directory of the local file
//! system (a Zarr hierarchy on disk).
//!
//! A [`Store`] maps Zarr-style keys (`a/b/.zarray`, `temp/c/0/1`) to bytes;
//! [`FsStore`] maps each key to the file of that relative path. Files are
//! opened through [`super::descriptors`] (the only code that opens files),
//! confined to the allowed roots when the store is ([`super::confine`]).
//!
//! Every read takes a size limit: the caller knows the most bytes a value
//! can legitimately hold (a chunk's worst-case encoded size, a metadata
//! document's sanity bound), so a huge or hostile file is refused before it
//! is read into memory.
//!
//! # Values that change while mounted
//!
//! A mount lives for months while writers append to its stores, so two
//! things matter beyond plain reads:
//!
//! - **No torn values.** A writer that renames a finished file into place
//!   (zarr-python's `LocalStore` does) is atomic for us: an open file keeps
//!   its old contents. A writer that rewrites a file in place is not, so
//!   [`FsStore::get`] compares the file's identity (length, mtime, ctime,
//!   inode) before and after reading and reads again, up to
//!   [`TORN_READ_RETRIES`] times, when they differ. A value that keeps
//!   changing is an I/O error (EIO) rather than a mix of two versions.
//!   The check is as fine as the file system's timestamps: a same-length
//!   in-place rewrite within one timestamp tick (a few ms on filesystems
//!   with coarse timestamps) cannot be seen, which is why writers should
//!   rename into place.
//! - **Change stamps.** [`Store::change_stamp`] summarises everything under
//!   a key prefix (an array's metadata and chunk files) as one number that
//!   changes whenever any of them is added, removed, rewritten or replaced.
//!   The live refresh ([`crate::fs::refresh`]) compares stamps to decide
//!   whether an array's cached chunks are still valid. [`FsStore`] hashes
//!   `(key, length, mtime, ctime, inode)` of every file under the prefix.

use std::fs::{File, Metadata};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Read, Seek};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::confine::Roots;
use super::descriptors;
use crate::error::{Error, Result};
use crate::storage::contract::{ByteRange, Store};

/// How many times [`FsStore::get`] reads a file again when it changed
/// while being read. Three covers a writer that rewrites a chunk in place
/// twice in a row; a file that changes on every read is an error.
pub const TORN_READ_RETRIES: usize = 3;

/// Directories deeper than this are not walked by
/// [`FsStore::change_stamp`] (a guard against symlink loops, far beyond any
/// chunk key nesting).
const MAX_STAMP_DEPTH: usize = 64;

/// The bytes `[start, end)` of the file `real` (a path `roots` admitted)
/// that `pick` chooses from the metadata of the file as opened (and may
/// refuse: a checksum, a range past its end): it is opened checked
/// ([`descriptors::open_checked`]: a symlink or FIFO swapped in since is
/// refused, never read or waited on), and read again when its identity
/// changed during the read ([`TORN_READ_RETRIES`]), so the bytes are of
/// the version `pick` saw. The whole file is read to its end, so a file
/// that grew is caught too. `io_err` says an I/O error in the caller's
/// terms.
pub fn read_verified<E>(
    roots: &Roots,
    real: &Path,
    pick: impl Fn(&Metadata) -> std::result::Result<(u64, u64), E>,
    io_err: impl Fn(io::Error) -> E,
) -> std::result::Result<Vec<u8>, E> {
    for attempt in 1..=TORN_READ_RETRIES + 1 {
        let file = descriptors::open_checked(roots, real).map_err(&io_err)?;
        if let Some(buf) = read_picked(&file, &pick, &io_err)? {
            return Ok(buf);
        }
        log::debug!(
            "{}: changed while being read (attempt {attempt}), reading again",
            real.display()
        );
    }
    Err(changed_every_time(&io_err))
}

/// [`read_verified`] through a descriptor open already (a file kept open
/// across reads, [`descriptors::CachedFile::descriptor`]): `pick` sees
/// the metadata of the file as it is now (`fstat`), and a read during
/// which it changed is read again. Whether `file` is still the file its
/// path names is the caller's to check.
pub fn read_open_verified<E>(
    file: &File,
    shown: &Path,
    pick: impl Fn(&Metadata) -> std::result::Result<(u64, u64), E>,
    io_err: impl Fn(io::Error) -> E,
) -> std::result::Result<Vec<u8>, E> {
    for attempt in 1..=TORN_READ_RETRIES + 1 {
        if let Some(buf) = read_picked(file, &pick, &io_err)? {
            return Ok(buf);
        }
        log::debug!(
            "{}: changed while being read (attempt {attempt}), reading again",
            shown.display()
        );
    }
    Err(changed_every_time(&io_err))
}

/// One read of the bytes `pick` chooses from `file`'s metadata; `None`
/// when the file's identity changed during the read (a torn read).
fn read_picked<E>(
    file: &File,
    pick: &impl Fn(&Metadata) -> std::result::Result<(u64, u64), E>,
    io_err: &impl Fn(io::Error) -> E,
) -> std::result::Result<Option<Vec<u8>>, E> {
    use std::os::unix::fs::FileExt;
    let before = file.metadata().map_err(io_err)?;
    let (start, end) = pick(&before)?;
    let mut buf = vec![0u8; (end - start) as usize];
    if start == 0 && end == before.len() {
        // Read to the end (and one byte more), so a file that grew is
        // caught too; with positioned reads, since a descriptor kept open
        // is shared by reads running at once.
        buf.push(0);
        let mut n = 0;
        while n < buf.len() {
            match file.read_at(&mut buf[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        buf.truncate(n);
    } else {
        file.read_exact_at(&mut buf, start).map_err(io_err)?;
    }
    let after = file.metadata().map_err(io_err)?;
    Ok(
        (file_identity(&before) == file_identity(&after) && buf.len() as u64 == end - start)
            .then_some(buf),
    )
}

fn changed_every_time<E>(io_err: &impl Fn(io::Error) -> E) -> E {
    io_err(io::Error::other(format!(
        "the file changed while being read, {} times in a row",
        TORN_READ_RETRIES + 1
    )))
}

/// The identity of a file's contents as far as `stat` can tell: equal
/// before and after a read means the read saw one version (also used by
/// the kerchunk store for the local files its references read).
pub fn file_identity(m: &Metadata) -> (u64, i64, i64, i64, i64, u64, u64) {
    (
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.ino(),
        m.dev(),
    )
}

/// A directory on the local file system.
#[derive(Debug, Clone)]
pub struct FsStore {
    root: PathBuf,
    /// When set, every file read must resolve under these roots
    /// ([`descriptors::open_confined`]): a chunk file symlinked out of the dataset is an
    /// error, not a leak.
    roots: Option<Arc<Roots>>,
}

impl FsStore {
    pub fn new(root: impl Into<PathBuf>) -> FsStore {
        FsStore {
            root: root.into(),
            roots: None,
        }
    }

    /// A store whose files must resolve under `roots`.
    pub fn confined(root: impl Into<PathBuf>, roots: Arc<Roots>) -> FsStore {
        FsStore {
            root: root.into(),
            roots: Some(roots),
        }
    }

    /// Open the value file `path`: `None` if there is none (no file, or a
    /// directory where a chunk file would be, e.g. "c" of a v3 `default`
    /// key on a 0-d array). Never blocks (a FIFO planted in a store is an
    /// error, not a hung read), and only regular files are read.
    fn open_value(&self, path: &Path) -> io::Result<Option<File>> {
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return Ok(None);
        }
        let opened = match &self.roots {
            Some(roots) => descriptors::open_confined(roots, path),
            None => descriptors::open_regular(path),
        };
        match opened {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::IsADirectory => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of `key`, refusing keys that would leave the root (`..`,
    /// absolute paths): keys can come from metadata, which is input.
    fn path(&self, key: &str) -> Result<PathBuf> {
        let rel = Path::new(key);
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(Error::metadata(
                self.root.display().to_string(),
                format!("key {key:?} escapes the store"),
            ));
        }
        Ok(self.root.join(rel))
    }
}

impl FsStore {
    /// [`Store::get`], with `between(attempt)` run inside each attempt
    /// after the read (a test hook: it plays a writer).
    fn get_checked(
        &self,
        key: &str,
        limit: u64,
        between: &dyn Fn(usize),
    ) -> Result<Option<Vec<u8>>> {
        let path = self.path(key)?;
        for attempt in 1..=TORN_READ_RETRIES + 1 {
            match self.read_once(&path, limit, &|| between(attempt))? {
                None => return Ok(None),
                Some((buf, true)) => return Ok(Some(buf)),
                Some(_) => log::debug!(
                    "{}: changed while being read (attempt {attempt}), reading again",
                    path.display()
                ),
            }
        }
        Err(Error::Io {
            path: path.display().to_string(),
            source: io::Error::other(format!(
                "the file changed while being read, {} times in a row",
                TORN_READ_RETRIES + 1
            )),
        })
    }

    /// One attempt at reading `path`: the bytes, and whether the file kept
    /// its identity while they were read. `between` runs after the read,
    /// before the second `fstat`.
    fn read_once(
        &self,
        path: &Path,
        limit: u64,
        between: &dyn Fn(),
    ) -> Result<Option<(Vec<u8>, bool)>> {
        let io_err = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let Some(mut file) = self.open_value(path).map_err(io_err)? else {
            return Ok(None);
        };
        let before = file.metadata().map_err(io_err)?;
        if before.is_dir() {
            return Ok(None);
        }
        if before.len() > limit {
            return Err(Error::TooLarge {
                path: path.display().to_string(),
                size: before.len(),
                limit,
            });
        }
        let mut buf = Vec::with_capacity(before.len() as usize);
        // `take` guards against a file that grows between stat and read.
        (&mut file)
            .take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(io_err)?;
        if buf.len() as u64 > limit {
            return Err(Error::TooLarge {
                path: path.display().to_string(),
                size: buf.len() as u64,
                limit,
            });
        }
        between();
        // fstat of the same open file: an in-place rewrite while we read
        // changes its length or times. (A rename into place does not touch
        // our file at all, so we hold a complete old version: fine.)
        let after = file.metadata().map_err(io_err)?;
        let stable =
            file_identity(&before) == file_identity(&after) && buf.len() as u64 == after.len();
        Ok(Some((buf, stable)))
    }

    /// Hash `(key, len, mtime, ctime, inode)` of every file under `dir`
    /// (key `rel`), in name order.
    fn stamp_dir(&self, dir: &Path, rel: &str, h: &mut DefaultHasher, depth: usize) -> Result<()> {
        let io_err = |source| Error::Io {
            path: dir.display().to_string(),
            source,
        };
        let mut names: Vec<std::ffi::OsString> = match std::fs::read_dir(dir) {
            Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect(),
            // Removed while we walk: it has no files, which is its stamp.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(e)),
        };
        names.sort();
        for name in names {
            let path = dir.join(&name);
            // Follow symlinks, as `get` does.
            let m = match std::fs::metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(Error::Io {
                        path: path.display().to_string(),
                        source: e,
                    });
                }
            };
            let key = format!("{rel}{}", name.to_string_lossy());
            if m.is_dir() {
                if depth < MAX_STAMP_DEPTH {
                    self.stamp_dir(&path, &format!("{key}/"), h, depth + 1)?;
                }
            } else {
                key.hash(h);
                file_identity(&m).hash(h);
            }
        }
        Ok(())
    }
}

impl Store for FsStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.get_checked(key, limit, &|_| {})
    }

    /// One positioned read of exactly the range, checked against torn
    /// reads like [`FsStore::get`].
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        let path = self.path(key)?;
        let io_err = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        for attempt in 1..=TORN_READ_RETRIES + 1 {
            let Some(file) = self.open_value(&path).map_err(io_err)? else {
                return Ok(None);
            };
            let before = file.metadata().map_err(io_err)?;
            if before.is_dir() {
                return Ok(None);
            }
            let (start, end) = range
                .resolve(before.len())
                .ok_or_else(|| range.out_of_bounds(&path.display().to_string(), before.len()))?;
            // Read into spare capacity rather than a zero-filled buffer:
            // the zeroing alone was 3 % of a sharded read.
            let len = end - start;
            let mut buf = Vec::with_capacity(len as usize);
            let mut reader = &file;
            reader.seek(io::SeekFrom::Start(start)).map_err(io_err)?;
            reader.take(len).read_to_end(&mut buf).map_err(io_err)?;
            if buf.len() as u64 != len {
                return Err(io_err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} of {len} bytes at offset {start}", buf.len()),
                )));
            }
            let after = file.metadata().map_err(io_err)?;
            if file_identity(&before) == file_identity(&after) {
                return Ok(Some(buf));
            }
            log::debug!(
                "{}: changed while being read (attempt {attempt}), reading again",
                path.display()
            );
        }
        Err(io_err(io::Error::other(format!(
            "the file changed while being read, {} times in a row",
            TORN_READ_RETRIES + 1
        ))))
    }

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        let dir = self.path(prefix)?;
        let mut h = DefaultHasher::new();
        self.stamp_dir(&dir, prefix, &mut h, 0)?;
        Ok(Some(h.finish()))
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let path = self.path(dir)?;
        let io_err = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            // Nothing under this prefix: an empty listing, as an object
            // store (which cannot tell a missing prefix from an empty
            // one) and the memory store answer (the storage contract).
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(Vec::new());
            }
            Err(e) => return Err(io_err(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not valid UTF-8: cannot be a Zarr node name
            };
            // Follow symlinks, as the user's tools would.
            let is_dir = std::fs::metadata(entry.path())
                .map(|m| m.is_dir())
                .unwrap_or(false);
            out.push((name, is_dir));
        }
        out.sort();
        Ok(out)
    }

    fn describe(&self, key: &str) -> String {
        self.root.join(key).display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_store_refuses_escaping_keys_and_large_values() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"12345").unwrap();
        let s = FsStore::new(dir.path());
        assert_eq!(s.get("a", 5).unwrap().unwrap(), b"12345");
        assert!(matches!(
            s.get("a", 4),
            Err(Error::TooLarge { size: 5, .. })
        ));
        assert!(s.get("missing", 10).unwrap().is_none());
        assert!(s.get("../etc/passwd", 10).is_err());
        assert!(s.get("/etc/passwd", 10).is_err());
    }

    /// Regression (found by the storage conformance test): listing a
    /// prefix with nothing under it failed (ENOENT as an I/O error) where
    /// the memory and object stores list it as empty, which the contract
    /// now says. A value is no directory either: empty too.
    #[test]
    fn fs_store_lists_a_missing_prefix_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"1").unwrap();
        let s = FsStore::new(dir.path());
        assert_eq!(s.list_dir("missing").unwrap(), Vec::new());
        assert_eq!(s.list_dir("missing/deeper").unwrap(), Vec::new());
        assert_eq!(s.list_dir("a").unwrap(), Vec::new());
        assert_eq!(s.list_dir("").unwrap(), vec![("a".to_string(), false)]);
    }

    #[test]
    fn fs_store_stamps_change_with_the_files_under_the_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/c/0")).unwrap();
        std::fs::create_dir_all(root.join("b")).unwrap();
        std::fs::write(root.join("a/zarr.json"), b"{}").unwrap();
        std::fs::write(root.join("a/c/0/0"), b"chunk").unwrap();
        std::fs::write(root.join("b/zarr.json"), b"{}").unwrap();
        let s = FsStore::new(root);
        let stamp = |p: &str| s.change_stamp(p).unwrap().unwrap();
        let (a0, b0, all0) = (stamp("a/"), stamp("b/"), stamp(""));
        assert_eq!(stamp("a/"), a0, "no change, same stamp");

        // Rename into place (a new inode), as zarr-python writes.
        std::fs::write(root.join("a/c/0/.tmp"), b"CHUNK").unwrap();
        std::fs::rename(root.join("a/c/0/.tmp"), root.join("a/c/0/0")).unwrap();
        let a1 = stamp("a/");
        assert_ne!(a1, a0);
        assert_eq!(stamp("b/"), b0, "a sibling's stamp is unaffected");
        assert_ne!(stamp(""), all0);

        // A chunk added, then removed; a length change in place.
        std::fs::write(root.join("a/c/0/1"), b"x").unwrap();
        let a2 = stamp("a/");
        assert_ne!(a2, a1);
        std::fs::remove_file(root.join("a/c/0/1")).unwrap();
        assert_eq!(stamp("a/"), a1, "same files, same stamp");
        std::fs::write(root.join("a/c/0/0"), b"longer chunk").unwrap();
        assert_ne!(stamp("a/"), a1);
        // A prefix that does not exist (the array was deleted).
        assert_eq!(stamp("gone/"), DefaultHasher::new().finish());
    }

    #[test]
    fn fs_store_reads_again_when_a_file_changes_while_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, b"old version").unwrap();
        let s = FsStore::new(dir.path());
        // Nobody writes: one attempt.
        let attempts = std::sync::atomic::AtomicUsize::new(0);
        let count = |_: usize| {
            attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        assert_eq!(
            s.get_checked("k", 100, &count).unwrap().unwrap(),
            b"old version"
        );
        assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 1);

        // A writer rewrites the file in place while the first attempt
        // reads it: that attempt's bytes are dropped, the second is whole.
        let rewrite_once = |attempt: usize| {
            if attempt == 1 {
                std::fs::write(&path, b"NEW VERSION, longer").unwrap();
            }
        };
        assert_eq!(
            s.get_checked("k", 100, &rewrite_once).unwrap().unwrap(),
            b"NEW VERSION, longer"
        );

        // A file rewritten during every attempt: an error, never bytes.
        let always = |attempt: usize| {
            std::fs::write(&path, vec![b'x'; attempt]).unwrap();
        };
        let err = s.get_checked("k", 100, &always).unwrap_err();
        assert!(
            err.to_string().contains("changed while being read"),
            "{err}"
        );
        // EIO at the mount (fs::error pins the errno of every variant).
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
    }
}
