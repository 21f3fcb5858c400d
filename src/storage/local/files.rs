//! The real file system as [`Files`]: how sources reach local files.
//!
//! Sources read two kinds of things. Zarr hierarchies are key-value
//! [`Store`]s ([`FsStore`]); netCDF-3 files, blocked archives and raw NCA
//! fragments are single files read with positioned reads ([`ReadAt`]:
//! [`CachedFile`]). [`OsFiles`] opens both. The daemon uses it; tests hand
//! a wrapper to [`crate::formats::dataset::Opener::files`] that injects I/O
//! errors, short reads, delays and flipped bytes, to check that every source turns a
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
//! [`super::descriptors::open_confined`]: it must resolve under a root (symlinks and `..`
//! followed), be a regular file (a FIFO planted in a dataset cannot hang a
//! read: the open does not block), and be the file that was checked (no
//! swap between check and open). docs/SECURITY.md lists the guarantees.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::confine::Roots;
use super::descriptors::CachedFile;
use super::fs_store::FsStore;
use crate::storage::contract::{Files, ReadAt, Store};

impl ReadAt for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
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
    /// cache for each read ([`crate::storage::local::descriptors`]).
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
