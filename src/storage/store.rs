//! Key-value access to the files of a dataset.
//!
//! A [`Store`] maps Zarr-style keys (`a/b/.zarray`, `temp/c/0/1`) to bytes.
//! [`FsStore`] reads a directory; [`MemoryStore`] and [`CountingStore`]
//! exist so that every layer above can be tested without files and with
//! exact counts of what was read.
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
//!   `(key, length, mtime, ctime, inode)` of every file under the prefix;
//!   [`MemoryStore`] numbers its writes.

use std::collections::HashMap;
use std::fmt::Debug;
use std::fs::{File, Metadata};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Read, Seek};
use std::ops::Range;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::storage::confine::Roots;

/// Part of a stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// `len` bytes from `offset`.
    At { offset: u64, len: u64 },
    /// The last `len` bytes.
    Suffix(u64),
}

impl ByteRange {
    /// `[start, end)` inside a value of `size` bytes, `None` if the range
    /// does not fit.
    pub fn resolve(self, size: u64) -> Option<(u64, u64)> {
        match self {
            ByteRange::At { offset, len } => offset
                .checked_add(len)
                .filter(|&end| end <= size)
                .map(|end| (offset, end)),
            ByteRange::Suffix(len) => size.checked_sub(len).map(|start| (start, size)),
        }
    }

    /// The error for a value of `size` bytes too short for this range.
    pub fn out_of_bounds(self, path: &str, size: u64) -> Error {
        Error::Io {
            path: path.to_string(),
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{self:?} is outside the {size} bytes stored"),
            ),
        }
    }
}

pub trait Store: Send + Sync + Debug {
    /// The whole value of `key`, `None` if it does not exist, an error if it
    /// holds more than `limit` bytes.
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>>;

    /// The names directly under the prefix `dir` ("" for the root), with
    /// whether each is itself a directory. Used to discover hierarchies
    /// that have no consolidated metadata.
    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>>;

    /// Where `key` lives, for error messages (a file path for [`FsStore`]).
    fn describe(&self, key: &str) -> String;

    /// The bytes `range` of the value of `key`, `None` if it does not
    /// exist; an error if the value is shorter than the range needs. How
    /// a sharded array reads one inner chunk without reading its shard.
    /// The default reads the whole value and slices it.
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        let Some(value) = self.get(key, u64::MAX)? else {
            return Ok(None);
        };
        let (start, end) = range
            .resolve(value.len() as u64)
            .ok_or_else(|| range.out_of_bounds(&self.describe(key), value.len() as u64))?;
        Ok(Some(value[start as usize..end as usize].to_vec()))
    }

    /// The values of many keys at once, each with its size limit, in the
    /// order asked: what [`get`](Self::get) would answer for each. The
    /// default reads them one after another, which is right for a local
    /// store (the caller decodes on several threads anyway), and for a
    /// store with a [`latency`](Self::latency) (one whose `get` is a
    /// blocking round trip: an HDF5 file or a blocked archive read from
    /// an object store) several at once on threads ([`fan_out`]); an
    /// object store issues them all at once on its runtime, so a read of
    /// many chunks costs one round trip instead of one per chunk.
    fn get_many(&self, keys: &[(String, u64)]) -> Vec<Result<Option<Vec<u8>>>> {
        if self.latency().is_some() && keys.len() > 1 {
            return fan_out(keys.len(), |i| self.get(&keys[i].0, keys[i].1));
        }
        keys.iter().map(|(k, limit)| self.get(k, *limit)).collect()
    }

    /// [`get_many`](Self::get_many), each answer handed to `each` with its
    /// index in `keys` as soon as it is there, in the order they arrive:
    /// the caller can decode the first values while the others are still
    /// on their way. The default, for a store with a
    /// [`latency`](Self::latency), runs the gets on threads and hands each
    /// value on as its get returns ([`fan_out_each`]); otherwise it asks
    /// [`get_many`](Self::get_many) and hands the answers on in order.
    fn get_each(
        &self,
        keys: &[(String, u64)],
        each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>),
    ) {
        if self.latency().is_some() && keys.len() > 1 {
            return fan_out_each(keys.len(), |i| self.get(&keys[i].0, keys[i].1), each);
        }
        for (i, got) in self.get_many(keys).into_iter().enumerate() {
            each(i, got);
        }
    }

    /// Parts of many values at once: for each `(key, ranges)`, the bytes
    /// of each range of the value of `key`, in order (`None` if it does
    /// not exist; an error if it is shorter than a range needs). The
    /// default reads range by range; a remote store merges the ranges of
    /// one object that lie close together into one ranged GET and issues
    /// them all at once.
    fn get_ranges(
        &self,
        requests: &[(String, Vec<Range<u64>>)],
    ) -> Vec<Result<Option<Vec<Vec<u8>>>>> {
        requests
            .iter()
            .map(|(key, ranges)| {
                let mut out = Vec::with_capacity(ranges.len());
                for r in ranges {
                    let range = ByteRange::At {
                        offset: r.start,
                        len: r.end.saturating_sub(r.start),
                    };
                    match self.get_range(key, range)? {
                        Some(v) => out.push(v),
                        None => return Ok(None),
                    }
                }
                Ok(Some(out))
            })
            .collect()
    }

    /// The typical time one request takes before its first byte arrives,
    /// for stores whose cost is latency (object stores, HTTP), measured
    /// on recent requests; `None` for local stores. Callers that see
    /// `Some` gather their reads into [`get_many`](Self::get_many) and
    /// read further ahead ([`crate::engine::readahead`]).
    fn latency(&self) -> Option<std::time::Duration> {
        None
    }

    /// A number that changes whenever any value whose key starts with
    /// `prefix` ("" for the whole store, else ending in `/`) is added,
    /// removed or rewritten; `None` when the store cannot tell. Only
    /// comparable with other stamps of the same store and prefix in the
    /// same process.
    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        let _ = prefix;
        Ok(None)
    }
}

/// How many times [`FsStore::get`] reads a file again when it changed
/// while being read. Three covers a writer that rewrites a chunk in place
/// twice in a row; a file that changes on every read is an error.
pub const TORN_READ_RETRIES: usize = 3;

/// Directories deeper than this are not walked by
/// [`FsStore::change_stamp`] (a guard against symlink loops, far beyond any
/// chunk key nesting).
const MAX_STAMP_DEPTH: usize = 64;

/// The identity of a file's contents as far as `stat` can tell.
fn file_identity(m: &Metadata) -> (u64, i64, i64, i64, i64, u64, u64) {
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
    /// ([`Roots::open`]): a chunk file symlinked out of the dataset is an
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
            Some(roots) => roots.open(path),
            None => super::descriptors::open_retrying(|| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                    .open(path)
                    .and_then(|f| match f.metadata()?.is_file() {
                        true => Ok(f),
                        false => Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "not a regular file",
                        )),
                    })
            }),
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
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(io_err)? {
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

/// An in-memory store, for tests. Every value remembers which write put
/// it there (a store-wide counter), which is what its change stamps hash.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: RwLock<HashMap<String, (Vec<u8>, u64)>>,
    writes: AtomicU64,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    pub fn set(&self, key: &str, value: impl Into<Vec<u8>>) {
        let generation = self.writes.fetch_add(1, Ordering::SeqCst);
        self.map
            .write()
            .insert(key.to_string(), (value.into(), generation));
    }

    pub fn remove(&self, key: &str) {
        self.map.write().remove(key);
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        match self.map.read().get(key).map(|(v, _)| v) {
            None => Ok(None),
            Some(v) if v.len() as u64 > limit => Err(Error::TooLarge {
                path: self.describe(key),
                size: v.len() as u64,
                limit,
            }),
            Some(v) => Ok(Some(v.clone())),
        }
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{}/", dir.trim_end_matches('/'))
        };
        let mut out: Vec<(String, bool)> = self
            .map
            .read()
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .map(|rest| match rest.split_once('/') {
                Some((first, _)) => (first.to_string(), true),
                None => (rest.to_string(), false),
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn describe(&self, key: &str) -> String {
        format!("memory:{key}")
    }

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        let map = self.map.read();
        let mut under: Vec<(&String, u64)> = map
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, (_, generation))| (k, *generation))
            .collect();
        under.sort();
        let mut h = DefaultHasher::new();
        under.hash(&mut h);
        Ok(Some(h.finish()))
    }
}

/// Wraps a store and counts the values read through it.
#[derive(Debug)]
pub struct CountingStore<S> {
    inner: S,
    gets: AtomicU64,
    bytes: AtomicU64,
}

impl<S: Store> CountingStore<S> {
    pub fn new(inner: S) -> CountingStore<S> {
        CountingStore {
            inner,
            gets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Number of `get` calls that found a value or failed (misses for absent
    /// keys are counted too: they are requests to the store).
    pub fn gets(&self) -> u64 {
        self.gets.load(Ordering::SeqCst)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Store> Store for CountingStore<S> {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let v = self.inner.get(key, limit)?;
        if let Some(v) = &v {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        Ok(v)
    }

    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let v = self.inner.get_range(key, range)?;
        if let Some(v) = &v {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        Ok(v)
    }

    fn get_ranges(
        &self,
        requests: &[(String, Vec<Range<u64>>)],
    ) -> Vec<Result<Option<Vec<Vec<u8>>>>> {
        let n: usize = requests.iter().map(|(_, r)| r.len()).sum();
        self.gets.fetch_add(n as u64, Ordering::SeqCst);
        let got = self.inner.get_ranges(requests);
        for v in got.iter().flatten().flatten().flatten() {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        got
    }

    fn get_many(&self, keys: &[(String, u64)]) -> Vec<Result<Option<Vec<u8>>>> {
        self.gets.fetch_add(keys.len() as u64, Ordering::SeqCst);
        let got = self.inner.get_many(keys);
        for v in got.iter().flatten().flatten() {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        got
    }

    fn get_each(
        &self,
        keys: &[(String, u64)],
        each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>),
    ) {
        self.gets.fetch_add(keys.len() as u64, Ordering::SeqCst);
        self.inner.get_each(keys, &mut |i, got| {
            if let Ok(Some(v)) = &got {
                self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
            }
            each(i, got)
        })
    }

    fn latency(&self) -> Option<std::time::Duration> {
        self.inner.latency()
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        self.inner.list_dir(dir)
    }

    fn describe(&self, key: &str) -> String {
        self.inner.describe(key)
    }

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        self.inner.change_stamp(prefix)
    }
}

/// Threads [`fan_out`] runs at once across the process (beyond them, the
/// calling threads do the work themselves).
pub const FAN_OUT_THREADS: usize = 64;

/// Threads one [`fan_out`] call uses, its caller included.
pub const FAN_OUT_PER_CALL: usize = 16;

static FANNED_OUT: AtomicUsize = AtomicUsize::new(0);

/// Helper threads reserved from [`FAN_OUT_THREADS`]; given back on drop,
/// even on a panic.
struct Helpers(usize);

impl Helpers {
    /// Up to `want` of them, as many as are free.
    fn take(want: usize) -> Helpers {
        let mut taken = Helpers(0);
        while taken.0 < want {
            if FANNED_OUT.fetch_add(1, Ordering::AcqRel) >= FAN_OUT_THREADS {
                FANNED_OUT.fetch_sub(1, Ordering::AcqRel);
                break;
            }
            taken.0 += 1;
        }
        taken
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        FANNED_OUT.fetch_sub(self.0, Ordering::AcqRel);
    }
}

/// `get(i)` for every `i < n`, in that order, on up to
/// [`FAN_OUT_PER_CALL`] threads at once: for blocking calls whose cost is
/// a round trip (a range of an object read by a format's own store), so
/// that their waits overlap instead of adding up. The threads are scoped
/// to the call and bounded for the process ([`FAN_OUT_THREADS`]); when
/// none is free, or one cannot be started, the caller does the work
/// alone, as without this. A panic in `get` reaches the caller.
pub fn fan_out<T: Send>(n: usize, get: impl Fn(usize) -> T + Sync) -> Vec<T> {
    // The caller is one of the call's threads.
    let taken = Helpers::take(n.min(FAN_OUT_PER_CALL).saturating_sub(1));
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return done;
            }
            done.push((i, get(i)));
        }
    };
    let mut all: Vec<(usize, T)> = std::thread::scope(|s| {
        let helpers: Vec<_> = (0..taken.0)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("slabfs-fetch".into())
                    .spawn_scoped(s, work)
                    .ok()
            })
            .collect();
        let mut all = work();
        for h in helpers {
            match h.join() {
                Ok(done) => all.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    drop(taken);
    all.sort_unstable_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, t)| t).collect()
}

/// [`fan_out`], each result handed to `each` (on the calling thread) as
/// soon as its `get` returns, in the order they finish: the caller decodes
/// the first values while the rest are still on their way. When helper
/// threads could be taken the caller only hands results on (it is the one
/// that decodes, and must not be stuck in a get meanwhile); when none
/// could, it runs the gets itself, one after another. A panic in `get`
/// reaches the caller.
pub fn fan_out_each<T: Send>(
    n: usize,
    get: impl Fn(usize) -> T + Sync,
    each: &mut dyn FnMut(usize, T),
) {
    // The caller only hands results on: it may take a whole call's worth.
    let taken = Helpers::take(n.min(FAN_OUT_PER_CALL));
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<(usize, T)>();
        let mut helpers = Vec::with_capacity(taken.0);
        for _ in 0..taken.0 {
            let tx = tx.clone();
            let (next, get) = (&next, &get);
            let work = move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || tx.send((i, get(i))).is_err() {
                        return;
                    }
                }
            };
            if let Ok(h) = std::thread::Builder::new()
                .name("slabfs-fetch".into())
                .spawn_scoped(s, work)
            {
                helpers.push(h);
            }
        }
        drop(tx);
        if helpers.is_empty() {
            // Alone: every get here, in order.
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                each(i, get(i));
            }
        }
        // Until every helper is done (they hold the senders).
        for (i, t) in rx {
            each(i, t);
        }
        for h in helpers {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    drop(taken);
}

impl<T: Store + ?Sized> Store for std::sync::Arc<T> {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        (**self).get(key, limit)
    }
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        (**self).get_range(key, range)
    }
    fn get_many(&self, keys: &[(String, u64)]) -> Vec<Result<Option<Vec<u8>>>> {
        (**self).get_many(keys)
    }
    fn get_each(
        &self,
        keys: &[(String, u64)],
        each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>),
    ) {
        (**self).get_each(keys, each)
    }
    fn get_ranges(
        &self,
        requests: &[(String, Vec<Range<u64>>)],
    ) -> Vec<Result<Option<Vec<Vec<u8>>>>> {
        (**self).get_ranges(requests)
    }
    fn latency(&self) -> Option<std::time::Duration> {
        (**self).latency()
    }
    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        (**self).list_dir(dir)
    }
    fn describe(&self, key: &str) -> String {
        (**self).describe(key)
    }
    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        (**self).change_stamp(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store whose key "slow" takes `delay` and that reports a latency,
    /// as a format's store over a remote file does.
    #[derive(Debug)]
    struct Slow(std::time::Duration);

    impl Store for Slow {
        fn get(&self, key: &str, _limit: u64) -> Result<Option<Vec<u8>>> {
            if key == "slow" {
                std::thread::sleep(self.0);
            }
            Ok(Some(key.as_bytes().to_vec()))
        }
        fn list_dir(&self, _dir: &str) -> Result<Vec<(String, bool)>> {
            Ok(Vec::new())
        }
        fn describe(&self, key: &str) -> String {
            key.to_string()
        }
        fn latency(&self) -> Option<std::time::Duration> {
            Some(self.0)
        }
    }

    /// A store with a latency hands each value on as its get returns (so
    /// an HDF5 prefetch over an object store decodes the first chunks
    /// while the others are on their way): the fast key first, though
    /// asked second. (It was handed on after every get had returned, in
    /// order.)
    #[test]
    fn get_each_of_a_store_with_latency_hands_values_on_as_they_arrive() {
        let s = Slow(std::time::Duration::from_millis(300));
        let keys = [("slow".to_string(), 10), ("fast".to_string(), 10)];
        let mut order = Vec::new();
        s.get_each(&keys, &mut |i, got| {
            assert_eq!(got.unwrap().unwrap(), keys[i].0.as_bytes());
            order.push(i);
        });
        assert_eq!(order, vec![1, 0]);
        // Every key once, whatever the count.
        let many: Vec<(String, u64)> = (0..40).map(|i| (i.to_string(), 10)).collect();
        let mut seen = vec![0; many.len()];
        s.get_each(&many, &mut |i, got| {
            assert_eq!(got.unwrap().unwrap(), many[i].0.as_bytes());
            seen[i] += 1;
        });
        assert!(seen.iter().all(|&k| k == 1), "{seen:?}");
    }

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
            attempts.fetch_add(1, Ordering::SeqCst);
        };
        assert_eq!(
            s.get_checked("k", 100, &count).unwrap().unwrap(),
            b"old version"
        );
        assert_eq!(attempts.load(Ordering::SeqCst), 1);

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
        assert_eq!(err.errno(), libc::EIO);
    }

    #[test]
    fn memory_store_stamps_count_writes() {
        let s = MemoryStore::new();
        s.set("a/zarr.json", "{}");
        s.set("b/zarr.json", "{}");
        let stamp = |p: &str| s.change_stamp(p).unwrap().unwrap();
        let (a0, b0) = (stamp("a/"), stamp("b/"));
        s.set("a/c/0", "x");
        assert_ne!(stamp("a/"), a0);
        assert_eq!(stamp("b/"), b0);
        let a1 = stamp("a/");
        s.set("a/c/0", "x"); // the same bytes written again: a new write
        assert_ne!(stamp("a/"), a1);
    }

    #[test]
    fn memory_store_lists_like_a_directory() {
        let s = MemoryStore::new();
        s.set("g/.zgroup", "{}");
        s.set("g/a/.zarray", "{}");
        s.set("x", "1");
        assert_eq!(
            s.list_dir("").unwrap(),
            vec![("g".to_string(), true), ("x".to_string(), false)]
        );
        assert_eq!(
            s.list_dir("g").unwrap(),
            vec![(".zgroup".to_string(), false), ("a".to_string(), true)]
        );
    }
}
