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
use crate::storage::location::Location;
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

    /// Many positioned reads: fill each `(offset, buf)`, failing if any
    /// fails. The default reads them one after another, which is right
    /// for a local file; a remote object issues them all at once, so the
    /// lot costs about one round trip.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        reads
            .iter_mut()
            .try_for_each(|(offset, buf)| self.read_exact_at(buf, *offset))
    }

    /// The typical time one read takes before its first byte arrives,
    /// when that is what reads cost (a remote object); `None` for a local
    /// file. Readers that see `Some` gather their reads into
    /// [`read_many`](Self::read_many) and merge ranges across wider gaps.
    fn latency(&self) -> Option<std::time::Duration> {
        None
    }

    /// Ranges of this file at most this far apart are cheaper read with
    /// one request than with two: none locally; over the network, the
    /// gap a remote store merges across itself
    /// ([`crate::storage::remote::COALESCE_GAP`], 1 MiB). It follows from
    /// [`latency`](Self::latency), so a wrapper that passes that on
    /// passes this on too.
    fn coalesce_gap(&self) -> u64 {
        match self.latency() {
            Some(_) => crate::storage::remote::COALESCE_GAP,
            None => 0,
        }
    }

    /// A hint: small reads at `offsets` come next (the children of an
    /// index node a parser is about to visit one by one). A reader that
    /// keeps blocks ([`ReadCache`]) fetches theirs now, all at once;
    /// others ignore it.
    fn will_read(&self, offsets: &[u64]) {
        let _ = offsets;
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

/// Files opened by URL, confined to some locations: how formats read the
/// objects and stores of remote sources without knowing how they are
/// reached (the daemon's are [`crate::storage::remote::RemoteFiles`]).
pub trait UrlFiles: Files {
    /// The location `path` names, if it is a URL within the allowed
    /// locations; else why not (`PermissionDenied`).
    fn admit(&self, path: &Path) -> io::Result<Location>;

    /// The store of keys under the admitted location `at` (the location
    /// itself, not its display: that leaves out what a presigned URL
    /// needs).
    fn store_at(&self, at: &Location) -> io::Result<Arc<dyn Store>>;

    /// The allowed locations, for messages.
    fn describe(&self) -> String;

    /// The typical time a request takes before its first byte arrives
    /// (zero before the first); readers size their batches by it.
    fn latency(&self) -> std::time::Duration;
}

/// Reaches URLs: what formats are handed ([`crate::formats::Options`])
/// to open a remote source, or the `--allow-outside` URLs of a local one,
/// without naming the network code (the daemon's is
/// [`crate::storage::remote::Remote`], one per mount, carrying its
/// configuration, limits and counters).
pub trait Network: Send + Sync + Debug {
    /// The files and stores within `roots` (and nowhere else), each
    /// root's store connected now, so a bad URL or missing credentials
    /// fail at mount, not at first read.
    fn files(&self, roots: Vec<Location>) -> crate::error::Result<Arc<dyn UrlFiles>>;
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

/// [`file_stamp`] of a local path; for a URL, the remote object's own
/// stamp (a HEAD: its ETag, size and time), opened through `files`.
pub fn stamp_at(files: &dyn Files, path: &Path) -> Option<u64> {
    if crate::storage::location::url_of(path).is_some() {
        files.open(path).ok()?.stamp()
    } else {
        file_stamp(path)
    }
}

/// Whether something is at `path`: a local file or directory, or a
/// remote object that answers (a HEAD).
pub fn exists_at(files: &dyn Files, path: &Path) -> bool {
    if crate::storage::location::url_of(path).is_some() {
        files.open(path).is_ok()
    } else {
        path.exists()
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

/// The path references made by the file `path` are resolved against: its
/// canonical path locally (symlinks followed, as the kernel will), the
/// URL itself for a remote object.
pub fn real_path(path: &Path) -> io::Result<std::path::PathBuf> {
    if crate::storage::location::url_of(path).is_some() {
        Ok(path.to_path_buf())
    } else {
        path.canonicalize()
    }
}

/// A small document (a descriptor, a references file) read whole through
/// `files`, local or remote alike. Its first bytes (up to
/// [`SNIFF_BYTES`]) are shown to `wanted` first: `Ok(None)` when it says
/// the file is not what the caller reads, without reading the rest or
/// minding its size. Larger than `limit` bytes: [`Error::TooLarge`].
pub fn read_document(
    files: &dyn Files,
    path: &Path,
    limit: u64,
    wanted: impl Fn(&[u8]) -> bool,
) -> crate::error::Result<Option<Vec<u8>>> {
    use crate::error::Error;
    let io = |e| Error::Io {
        path: path.display().to_string(),
        source: e,
    };
    let file = files.open(path).map_err(io)?;
    let size = file.size().map_err(io)?;
    let mut text = vec![0u8; size.min(SNIFF_BYTES) as usize];
    file.read_exact_at(&mut text, 0).map_err(io)?;
    if !wanted(&text) {
        return Ok(None);
    }
    if size > limit {
        return Err(Error::TooLarge {
            path: path.display().to_string(),
            size,
            limit,
        });
    }
    let head = text.len();
    if (head as u64) < size {
        text.resize(size as usize, 0);
        file.read_exact_at(&mut text[head..], head as u64)
            .map_err(io)?;
    }
    Ok(Some(text))
}

/// How much of a document [`read_document`] reads before deciding: small
/// documents (most descriptors) in one read, one round trip remotely.
pub const SNIFF_BYTES: u64 = 64 << 10;

/// A [`ReadAt`] that reads small ranges in whole blocks and keeps the last
/// few: for parsing a file's metadata, which a format reads as many small
/// pieces (an HDF5 object header's prefix, then its messages, then the
/// next header: dozens of reads of a few bytes each). Locally that is a
/// system call per piece; from an object store a round trip per piece,
/// which made opening one netCDF-4 file over a 20 ms link take a second.
/// Through this, neighbouring pieces come from one block read; a block
/// that fails to read falls back to the piece alone, so a fault next to
/// the metadata (in a chunk's bytes) fails no more than before.
///
/// Meant to live only while a file's metadata is parsed (memory:
/// [`ReadCache::BLOCKS`] blocks), not for data: reads of a block or more
/// go straight through. Blocks are [`ReadCache::LOCAL_BLOCK`] bytes for a
/// local file and [`ReadCache::REMOTE_BLOCK`] for a remote one (one round
/// trip then fetches what many would have).
#[derive(Debug)]
pub struct ReadCache {
    inner: Arc<dyn ReadAt>,
    block: u64,
    size: u64,
    /// Most recently used last: (block index, its bytes).
    blocks: parking_lot::Mutex<Vec<(u64, Arc<Vec<u8>>)>>,
}

impl ReadCache {
    /// Blocks kept.
    pub const BLOCKS: usize = 8;
    /// Block size over a local file.
    pub const LOCAL_BLOCK: u64 = 64 << 10;
    /// Block size over a remote object.
    pub const REMOTE_BLOCK: u64 = 256 << 10;

    pub fn new(inner: Arc<dyn ReadAt>) -> io::Result<ReadCache> {
        let block = match inner.latency() {
            Some(_) => Self::REMOTE_BLOCK,
            None => Self::LOCAL_BLOCK,
        };
        Ok(ReadCache {
            size: inner.size()?,
            inner,
            block,
            blocks: parking_lot::Mutex::new(Vec::with_capacity(Self::BLOCKS)),
        })
    }

    /// Keep block `i` (`data`), the least recently used one dropped.
    fn keep(blocks: &mut Vec<(u64, Arc<Vec<u8>>)>, i: u64, data: Arc<Vec<u8>>) {
        if blocks.len() == Self::BLOCKS {
            blocks.remove(0);
        }
        blocks.push((i, data));
    }

    /// Block `i`, read if it is not kept.
    fn block(&self, i: u64) -> io::Result<Arc<Vec<u8>>> {
        let mut blocks = self.blocks.lock();
        if let Some(at) = blocks.iter().position(|(b, _)| *b == i) {
            let hit = blocks.remove(at);
            blocks.push(hit.clone());
            return Ok(hit.1);
        }
        let start = i * self.block;
        let len = self.block.min(self.size.saturating_sub(start));
        let mut data = vec![0; len as usize];
        self.inner.read_exact_at(&mut data, start)?;
        let data = Arc::new(data);
        Self::keep(&mut blocks, i, data.clone());
        Ok(data)
    }
}

impl ReadAt for ReadCache {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        if buf.len() as u64 >= self.block || end > self.size {
            // Large, or past the end (the inner reader says how).
            return self.inner.read_exact_at(buf, offset);
        }
        let mut at = offset;
        while at < end {
            let i = at / self.block;
            // A block that cannot be read (a bad sector or a failed
            // request somewhere in it, maybe in data next to the metadata
            // wanted) must not fail more than the read itself would have:
            // the piece asked for is read on its own instead.
            let Ok(data) = self.block(i) else {
                return self.inner.read_exact_at(buf, offset);
            };
            let from = (at - i * self.block) as usize;
            let n = (data.len() - from).min((end - at) as usize);
            let to = (at - offset) as usize;
            buf[to..to + n].copy_from_slice(&data[from..from + n]);
            at += n as u64;
        }
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.size)
    }

    fn stamp(&self) -> Option<u64> {
        self.inner.stamp()
    }

    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        self.inner.read_many(reads)
    }

    /// Over a remote object, the blocks holding `offsets` that are not
    /// kept are read now with one [`ReadAt::read_many`] (one round trip,
    /// not one per block), as many as are kept at once. Locally nothing:
    /// a read there costs no round trip to save. A failure is left for
    /// the reads themselves.
    fn will_read(&self, offsets: &[u64]) {
        if self.inner.latency().is_none() {
            return;
        }
        let mut wanted: Vec<u64> = offsets
            .iter()
            .filter(|&&o| o < self.size)
            .map(|o| o / self.block)
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        {
            let blocks = self.blocks.lock();
            wanted.retain(|i| !blocks.iter().any(|(b, _)| b == i));
        }
        wanted.truncate(Self::BLOCKS);
        if wanted.len() < 2 {
            return; // one block: the read itself fetches it as soon
        }
        let mut bufs: Vec<Vec<u8>> = wanted
            .iter()
            .map(|&i| {
                let start = i * self.block;
                vec![0; self.block.min(self.size - start) as usize]
            })
            .collect();
        let mut reads: Vec<(u64, &mut [u8])> = wanted
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&i, b)| (i * self.block, b.as_mut_slice()))
            .collect();
        if self.inner.read_many(&mut reads).is_err() {
            return;
        }
        let mut blocks = self.blocks.lock();
        for (i, data) in wanted.into_iter().zip(bufs) {
            if !blocks.iter().any(|(b, _)| *b == i) {
                Self::keep(&mut blocks, i, Arc::new(data));
            }
        }
    }

    fn latency(&self) -> Option<std::time::Duration> {
        self.inner.latency()
    }
}

/// A file held in memory, for unit tests of readers that parse through
/// [`ReadAt`]. Reads past its end are `UnexpectedEof`, as a short file's.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct InMemory(pub Vec<u8>);

#[cfg(test)]
impl ReadAt for InMemory {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.0.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.len() as u64)
    }
}

#[cfg(test)]
mod tests {

    /// A remote-like file of `len` bytes (byte `i` is `i as u8`) that
    /// records its reads: `(kind, ranges)`.
    #[derive(Debug)]
    struct Recorded {
        len: u64,
        remote: bool,
        reads: parking_lot::Mutex<Vec<(&'static str, usize)>>,
    }

    impl ReadAt for Recorded {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.reads.lock().push(("one", 1));
            for (k, b) in buf.iter_mut().enumerate() {
                *b = (offset + k as u64) as u8;
            }
            Ok(())
        }
        fn size(&self) -> io::Result<u64> {
            Ok(self.len)
        }
        fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
            self.reads.lock().push(("many", reads.len()));
            for (offset, buf) in reads.iter_mut() {
                for (k, b) in buf.iter_mut().enumerate() {
                    *b = (*offset + k as u64) as u8;
                }
            }
            Ok(())
        }
        fn latency(&self) -> Option<std::time::Duration> {
            self.remote.then(|| std::time::Duration::from_millis(20))
        }
    }

    /// `will_read` over a remote object fetches the blocks of the offsets
    /// it is told of with one `read_many` (one round trip: the children of
    /// an HDF5 index node), and the reads that follow are served from
    /// them; locally it does nothing.
    #[test]
    fn read_cache_fetches_announced_blocks_at_once() {
        let block = ReadCache::REMOTE_BLOCK;
        let file = Arc::new(Recorded {
            len: 10 * block,
            remote: true,
            reads: Default::default(),
        });
        let cache = ReadCache::new(file.clone()).unwrap();
        let offsets = [block + 5, 3 * block + 7, 3 * block + 9, 6 * block];
        cache.will_read(&offsets);
        assert_eq!(*file.reads.lock(), vec![("many", 3)]);
        for o in offsets {
            let mut buf = [0u8; 16];
            cache.read_exact_at(&mut buf, o).unwrap();
            assert_eq!(buf[0], o as u8);
        }
        assert_eq!(file.reads.lock().len(), 1, "{:?}", file.reads.lock());
        let local = Arc::new(Recorded {
            len: 10 * block,
            remote: false,
            reads: Default::default(),
        });
        ReadCache::new(local.clone()).unwrap().will_read(&offsets);
        assert!(local.reads.lock().is_empty());
    }
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

    /// Counts the reads that reach the file under a [`ReadCache`].
    #[derive(Debug)]
    struct Counted(Vec<u8>, std::sync::atomic::AtomicUsize);

    impl ReadAt for Counted {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let at = offset as usize;
            let src = self
                .0
                .get(at..at + buf.len())
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "past the end"))?;
            buf.copy_from_slice(src);
            Ok(())
        }
        fn size(&self) -> io::Result<u64> {
            Ok(self.0.len() as u64)
        }
    }

    #[test]
    fn read_cache_serves_small_reads_from_blocks() {
        let block = ReadCache::LOCAL_BLOCK as usize;
        let n = ReadCache::BLOCKS + 3;
        let data: Vec<u8> = (0..n * block + 100).map(|i| (i * 7 % 251) as u8).collect();
        let file = Arc::new(Counted(data.clone(), Default::default()));
        let cache = ReadCache::new(file.clone()).unwrap();
        let reads = || file.1.load(std::sync::atomic::Ordering::SeqCst);
        let check = |offset: usize, len: usize| {
            let mut buf = vec![0u8; len];
            cache.read_exact_at(&mut buf, offset as u64).unwrap();
            assert_eq!(buf, data[offset..offset + len], "{offset}+{len}");
        };
        // Many small reads in one block: one read of the file.
        for i in 0..100 {
            check(i * 13, 9);
        }
        assert_eq!(reads(), 1);
        // Across a block boundary: the next block, once.
        check(block - 5, 10);
        check(block + 7, 3);
        assert_eq!(reads(), 2);
        // The short last block, up to the end.
        check(n * block + 90, 10);
        assert_eq!(reads(), 3);
        // A block or more goes straight through, as does a read past the end.
        check(10, block);
        assert_eq!(reads(), 4);
        let mut buf = [0u8; 8];
        let err = cache
            .read_exact_at(&mut buf, data.len() as u64 - 4)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        // At most BLOCKS kept: the first is read again after enough others.
        let before = reads();
        for i in 0..ReadCache::BLOCKS {
            check((i + 2) * block, 1);
        }
        assert_eq!(reads(), before + ReadCache::BLOCKS);
        check(0, 4);
        assert_eq!(reads(), before + ReadCache::BLOCKS + 1);
    }
}
