//! The storage contract: the three traits every source of bytes
//! implements (and the two that reach URLs: [`UrlFiles`], [`Network`]),
//! and the small types they share. A leaf: it imports nothing else of
//! [`crate::storage`] but two leaves (the fan-out threads its defaults use,
//! [`super::fan_out`], and URLs parsed, [`super::location`]), so an adapter (local, remote, a test
//! store) depends on the contract and never the other way round.
//!
//! - [`ReadAt`]: one file read with positioned reads (a netCDF-3 file, an
//!   HDF5 file, a blocked archive, a raw NCA fragment).
//! - [`Store`]: a key-value store (a Zarr hierarchy, a kerchunk
//!   reference set, the chunks of a format's own container).
//! - [`Files`]: opens both, given a path or a URL; the one seam every
//!   data read goes through, so a wrapper of it (confinement, fault
//!   injection, URL scope) sees every read.
//!
//! # What every implementation promises
//!
//! Formats are written against these promises and not against any one
//! implementation; `storage::conformance` (behind the `testing` feature)
//! checks them for every implementation in the crate, local and remote.
//!
//! | situation | [`Store`] | [`ReadAt`] / [`Files`] |
//! | --- | --- | --- |
//! | missing key / file | `Ok(None)` from every getter (not an error: sparse arrays have missing chunks) | `Files::open` fails with `io::ErrorKind::NotFound` |
//! | value larger than the caller's limit | [`Error::TooLarge`], nothing read into memory beyond the limit | (no limit: callers ask for exact ranges) |
//! | range past the end | [`Error::Io`] whose source is `UnexpectedEof` ([`ByteRange::out_of_bounds`]) | `read_exact_at` fails with `UnexpectedEof` |
//! | empty range inside the value (offset up to its length), `Suffix(0)` | `Ok(Some(empty))` | `read_exact_at` of an empty buffer succeeds |
//! | many keys or ranges at once | `get_many`/`get_each`/`get_ranges` answer exactly what `get`/`get_range` would, one answer per request, each failing alone | `read_many` fills what `read_exact_at` would |
//! | listing | `list_dir` names each entry directly under the prefix once, sorted, with whether it is a prefix of more keys; a prefix with nothing under it lists as empty (an object store cannot tell it from a missing one); a store that cannot list (plain HTTP) fails with `Unsupported` | - |
//! | a key leaving the store (`..`, an absolute path) | an error, never a read outside | - |
//! | concurrency | `Send + Sync`: any number of threads read at once and get the answers one thread would | the same |
//! | failures | typed: [`Error::Io`] naming [`Store::describe`]'s location and carrying the `io::Error` (its kind, its raw OS code); never a panic | an `io::Error` of the matching kind |
//!
//! Secrets never appear in an error or a `describe` (remote adapters
//! redact them). The errno a failure becomes at the mount is chosen in
//! one place, `fs::error`, from these typed errors.

use std::fmt::Debug;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use super::fan_out::{fan_out, fan_out_each};
use super::location::Location;
use crate::error::{Error, Result};

/// An object's version as its store names it ([`ReadAt::version`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The ETag, as the server sent it (quotes included).
    pub e_tag: Option<String>,
    /// The last modification, in nanoseconds since the epoch.
    pub modified_ns: Option<i64>,
}

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

/// A file read with positioned reads, shared by the threads of a source.
pub trait ReadAt: Send + Sync + Debug {
    /// Fill `buf` from `offset`; `UnexpectedEof` if the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// The file's current length in bytes.
    fn size(&self) -> io::Result<u64>;

    /// A number that changes when the file behind this reader is
    /// rewritten or replaced, asked of the file itself; `None` when the
    /// reader cannot tell, and the caller stats the path
    /// ([`crate::storage::paths::file_stamp`]). A remote object answers with a HEAD (its ETag,
    /// size and time), since its URL is no path to stat.
    fn stamp(&self) -> Option<u64> {
        None
    }

    /// The version of the object this reader opened and reads (every read
    /// is of that version), as its store names it: what a reference
    /// recorded when it was written is checked against it (an Icechunk
    /// virtual chunk's ETag or last-modified time). `None` for a local
    /// file, whose version is its metadata.
    fn version(&self) -> Option<ObjectVersion> {
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
    /// gap object stores merge across themselves (object_store's
    /// `OBJECT_STORE_COALESCE_DEFAULT`, 1 MiB; `storage::remote`'s
    /// `COALESCE_GAP`). It follows from [`latency`](Self::latency), so a
    /// wrapper that passes that on passes this on too.
    fn coalesce_gap(&self) -> u64 {
        match self.latency() {
            Some(_) => object_store::OBJECT_STORE_COALESCE_DEFAULT,
            None => 0,
        }
    }

    /// A hint: small reads at `offsets` come next (the children of an
    /// index node a parser is about to visit one by one). A reader that
    /// keeps blocks ([`crate::storage::ReadCache`]) fetches theirs now, all at once;
    /// others ignore it.
    fn will_read(&self, offsets: &[u64]) {
        let _ = offsets;
    }
}

/// Opens the files and stores that sources read.
pub trait Files: Send + Sync + Debug {
    /// Open `path` for positioned reads.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn ReadAt>>;

    /// Open `path` and read `len` bytes at `offset` of it: the bytes are
    /// of the version the reader returned reads. The default opens, then
    /// reads; a remote object does both with one request (a ranged GET
    /// whose answer tells its size and version, where an open alone is a
    /// HEAD), which saves a first read a round trip.
    fn open_and_read(
        &self,
        path: &Path,
        offset: u64,
        len: usize,
    ) -> io::Result<(Arc<dyn ReadAt>, bytes::Bytes)> {
        read_opened(self.open(path)?, offset, len)
    }

    /// The Zarr store rooted at the directory `root`.
    fn store(&self, root: &Path) -> Arc<dyn Store>;
}

/// `file` with its `len` bytes at `offset`: [`Files::open_and_read`] as
/// an open, then a read.
pub fn read_opened(
    file: Arc<dyn ReadAt>,
    offset: u64,
    len: usize,
) -> io::Result<(Arc<dyn ReadAt>, bytes::Bytes)> {
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok((file, buf.into()))
}

/// Files opened by URL, confined to some locations: how formats read the
/// objects and stores of remote sources without knowing how they are
/// reached (the daemon's are `storage::remote::RemoteFiles`).
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

/// Reaches URLs: what formats are handed (`formats::Options`) to open a
/// remote source, or the `--allow-outside` URLs of a local one, without
/// naming the network code (the daemon's is `storage::remote::Remote`,
/// one per mount, carrying its configuration, limits and counters).
pub trait Network: Send + Sync + Debug {
    /// The files and stores within `roots` (and nowhere else), each
    /// root's store connected now, so a bad URL or missing credentials
    /// fail at mount, not at first read.
    fn files(&self, roots: Vec<Location>) -> Result<Arc<dyn UrlFiles>>;
}

/// A key-value store of byte values (see the module doc for what every
/// implementation promises).
pub trait Store: Send + Sync + Debug {
    /// The whole value of `key`, `None` if it does not exist, an error if it
    /// holds more than `limit` bytes.
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>>;

    /// The names directly under the prefix `dir` ("" for the root), with
    /// whether each is itself a directory. Used to discover hierarchies
    /// that have no consolidated metadata.
    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>>;

    /// Where `key` lives, for error messages (a file path for a directory store, a URL for an object store).
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

    /// [`get`](Self::get) (`range` `None`) or [`get_range`](Self::get_range)
    /// of a value that never changes once written: one named by a unique
    /// id, as an Icechunk repository's chunks, manifests and snapshots.
    /// A store with a disk cache keeps it by its key and range alone,
    /// with no version to learn (no listing, no HEAD). The default reads
    /// it as any other value.
    fn get_immutable(
        &self,
        key: &str,
        range: Option<ByteRange>,
        limit: u64,
    ) -> Result<Option<Vec<u8>>> {
        match range {
            Some(r) => self.get_range(key, r),
            None => self.get(key, limit),
        }
    }

    /// The values of many keys at once, each with its size limit, in the
    /// order asked: what [`get`](Self::get) would answer for each. The
    /// default reads them one after another, which is right for a local
    /// store (the caller decodes on several threads anyway), and for a
    /// store with a [`latency`](Self::latency) (one whose `get` is a
    /// blocking round trip) several at once on threads
    /// ([`super::fan_out::fan_out`]); an object store issues them all at
    /// once on its runtime, and the ranges of one file
    /// ([`super::ranged::RangedStore`]: HDF5 chunks, archive blocks) are
    /// one [`ReadAt::read_many`] of merged ranges, so a read of many
    /// chunks costs one round trip instead of one per chunk.
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
    /// value on as its get returns ([`super::fan_out::fan_out_each`]); otherwise it asks
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

    /// [`Store::list_dir`] sorted by name (then objects before
    /// prefixes), with each object's version as the same listing tells it
    /// (a hash of its size, ETag and modification time), for a refresh to
    /// tell a changed object without asking for it; a store whose listing
    /// cannot tell says `None` (the default).
    fn list_dir_versions(&self, dir: &str) -> Result<Vec<Listed>> {
        let mut out: Vec<Listed> = self
            .list_dir(dir)?
            .into_iter()
            .map(|(name, is_dir)| Listed {
                name,
                is_dir,
                version: None,
            })
            .collect();
        out.sort_by(|a, b| (&a.name, a.is_dir).cmp(&(&b.name, b.is_dir)));
        Ok(out)
    }
}

/// [`Store::get_many`] of a store whose [`Store::get_each`] is its
/// batched read: the answers `get_each` hands on, in the order asked.
pub fn get_many_by_each(
    store: &(impl Store + ?Sized),
    keys: &[(String, u64)],
) -> Vec<Result<Option<Vec<u8>>>> {
    let mut out: Vec<Option<Result<Option<Vec<u8>>>>> = keys.iter().map(|_| None).collect();
    store.get_each(keys, &mut |i, got| out[i] = Some(got));
    out.into_iter()
        .map(|got| got.expect("one answer per key"))
        .collect()
}

/// One name of a directory listing ([`Store::list_dir_versions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    /// A prefix (directory), not an object.
    pub is_dir: bool,
    /// An object's version, `None` for a prefix or when the store cannot
    /// tell. Comparable only with versions of the same store and key.
    pub version: Option<u64>,
}

impl<T: Store + ?Sized> Store for std::sync::Arc<T> {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        (**self).get(key, limit)
    }
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        (**self).get_range(key, range)
    }
    fn get_immutable(
        &self,
        key: &str,
        range: Option<ByteRange>,
        limit: u64,
    ) -> Result<Option<Vec<u8>>> {
        (**self).get_immutable(key, range, limit)
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
    fn list_dir_versions(&self, dir: &str) -> Result<Vec<Listed>> {
        (**self).list_dir_versions(dir)
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
}
