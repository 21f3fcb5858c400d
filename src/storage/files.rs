//! How sources reach the file system: the one seam every data read goes
//! through.
//!
//! Sources read two kinds of things. Zarr hierarchies are key-value
//! [`Store`]s; netCDF-3 files, blocked archives and raw NCA fragments are
//! single files read with positioned reads ([`ReadAt`]). [`Files`] opens
//! both. The daemon uses [`OsFiles`], the real file system; tests hand a
//! wrapper to [`crate::formats::dataset::open_with`] that injects I/O errors, short
//! reads, delays and flipped bytes, to check that every source turns a
//! failed read into an error for that read alone and that the cache never
//! keeps what a failed read produced.
//!
//! Opening is where a file is fixed: a source opens each file once and
//! keeps the handle, so a file replaced by rename keeps serving the old
//! version until the refresh ([`crate::fs::refresh`]) reopens the dataset.
//!
//! Opening is also where confinement is enforced. The daemon's [`OsFiles`]
//! carries the allowed roots (SOURCE and `--allow-outside`), and every
//! file it opens, data files and Zarr chunk files alike, goes through
//! [`Roots::open`]: it must resolve under a root (symlinks and `..`
//! followed), be a regular file (a FIFO planted in a dataset cannot hang a
//! read: the open does not block), and be the file that was checked (no
//! swap between check and open). docs/SECURITY.md lists the guarantees.

use std::fmt::Debug;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::storage::confine::Roots;
use crate::storage::descriptors::CachedFile;
use crate::storage::store::{FsStore, Store};

/// A file read with positioned reads, shared by the threads of a source.
pub trait ReadAt: Send + Sync + Debug {
    /// Fill `buf` from `offset`; `UnexpectedEof` if the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// The file's current length in bytes.
    fn size(&self) -> io::Result<u64>;

    /// A number that changes when the file behind this reader is
    /// rewritten or replaced, asked of the file itself; `None` when the
    /// reader cannot tell, and the caller stats the path
    /// ([`file_stamp`]). A remote object answers with a HEAD (its ETag,
    /// size and time), since its URL is no path to stat.
    fn stamp(&self) -> Option<u64> {
        None
    }
}

impl ReadAt for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

/// Opens the files and stores that sources read.
pub trait Files: Send + Sync + Debug {
    /// Open `path` for positioned reads.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn ReadAt>>;

    /// The Zarr store rooted at the directory `root`.
    fn store(&self, root: &Path) -> Arc<dyn Store>;
}

/// The real file system, confined to some roots or not.
#[derive(Debug, Clone, Default)]
pub struct OsFiles {
    roots: Option<Arc<Roots>>,
}

impl OsFiles {
    /// Every file, for commands given explicit paths (`pack`, `unpack`).
    pub fn unconfined() -> OsFiles {
        OsFiles { roots: None }
    }

    /// Only regular files under `roots`.
    pub fn confined(roots: Roots) -> OsFiles {
        OsFiles {
            roots: Some(Arc::new(roots)),
        }
    }
}

impl Files for OsFiles {
    /// A [`CachedFile`]: a descriptor borrowed from the process's bounded
    /// cache for each read ([`crate::storage::descriptors`]).
    fn open(&self, path: &Path) -> io::Result<Arc<dyn ReadAt>> {
        Ok(Arc::new(CachedFile::open(path, self.roots.clone())?))
    }

    fn store(&self, root: &Path) -> Arc<dyn Store> {
        Arc::new(match &self.roots {
            Some(roots) => FsStore::confined(root, roots.clone()),
            None => FsStore::new(root),
        })
    }
}

/// A hash of what `stat` says about `path` (device, inode, length, times):
/// changes when the file is rewritten or replaced; `None` if it cannot be
/// read. How sources that read single files answer
/// [`crate::engine::array::ArraySource::change_stamp`] when their
/// [`ReadAt::stamp`] cannot.
pub fn file_stamp(path: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()).hash(&mut h);
    (m.ctime(), m.ctime_nsec()).hash(&mut h);
    Some(h.finish())
}

/// The real file system, unconfined, as a shared [`Files`].
pub fn os() -> Arc<dyn Files> {
    Arc::new(OsFiles::unconfined())
}

/// The real file system confined to `roots`, as a shared [`Files`].
pub fn confined(roots: Roots) -> Arc<dyn Files> {
    Arc::new(OsFiles::confined(roots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_files_read_exactly_or_report_eof() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        let f = OsFiles::unconfined().open(&p).unwrap();
        assert_eq!(f.size().unwrap(), 10);
        let mut buf = [0u8; 4];
        f.read_exact_at(&mut buf, 3).unwrap();
        assert_eq!(&buf, b"3456");
        let err = f.read_exact_at(&mut buf, 8).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(
            OsFiles::unconfined()
                .open(&tmp.path().join("missing"))
                .is_err()
        );
    }

    #[test]
    fn confined_files_stay_under_their_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("in"), b"in").unwrap();
        std::fs::write(tmp.path().join("secret"), b"secret").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), root.join("link")).unwrap();
        let files = OsFiles::confined(Roots::new([root.clone()]));
        assert!(files.open(&root.join("in")).is_ok());
        for bad in [
            root.join("link"),
            root.join("../secret"),
            "/dev/zero".into(),
        ] {
            let e = files.open(&bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{bad:?}");
        }
        // Stores too: a chunk symlinked out of the root is an error, a
        // missing one is absent.
        let store = files.store(&root);
        assert!(store.get("link", 100).is_err());
        assert_eq!(store.get("missing", 100).unwrap(), None);
        assert_eq!(store.get("in", 100).unwrap(), Some(b"in".to_vec()));
    }
}
