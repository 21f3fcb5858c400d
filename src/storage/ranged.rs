//! Byte ranges of one file or object as a [`Store`]: the store of every
//! format whose chunks are ranges of its own container (HDF5 chunks and
//! contiguous tiles, a blocked archive's compressed blocks, a remote
//! netCDF-3 file's 1 MiB blocks).
//!
//! The format keeps what only it knows, behind [`Locate`]: where chunk
//! `c` is (its chunk index, its block table, block arithmetic), and what
//! is done to a chunk's bytes once read (a CRC checked, a filter mask
//! appended). The store does the reading, the same way for all of them:
//!
//! - a chunk is asked for by its grid coordinates ([`RangedStore::get_at`],
//!   [`RangedStore::get_each_at`]), which the chunked array hands over as
//!   they are (`formats::chunked::ChunkedArray::ranged`); the string keys
//!   of the [`Store`] trait (`i.j.k`, `0` for a scalar) are parsed into
//!   coordinates only for callers that speak keys (the conformance test,
//!   a generic reader).
//! - a batch of chunks is one [`ReadAt::read_many`]: the ranges sorted and
//!   merged where they lie at most [`ReadAt::coalesce_gap`] apart (up to
//!   [`MAX_WINDOW`] bytes a window locally, [`REMOTE_MAX_WINDOW`] from an
//!   object), so over an object store a read of N
//!   chunks is a few ranged GETs issued together on the remote runtime
//!   (`storage::remote`'s `RemoteFile::read_many`), not N blocking GETs
//!   on N threads. Locally the gap is 0: adjacent chunks are one `pread`.
//! - if the batch fails, each chunk is read alone, so one bad range fails
//!   only the reads that need it (the contract's "each failing alone").
//!
//! Why one type: the three formats read their ranges three ways before
//! (one batched through `read_many`, two through the contract's default
//! of one thread per chunk), and an HDF5 dataset's chunk coordinates went
//! through a `"i.j.k"` string and back for each chunk.

use std::fmt::Debug;
use std::io;
use std::sync::Arc;

use super::contract::{ReadAt, Store};
use crate::error::{Error, Result};

/// The longest window of merged ranges read as one from a local file:
/// bounds the scratch held for one window (its chunks are copied out of
/// it).
pub const MAX_WINDOW: u64 = 16 << 20;

/// The longest window merged from a file with a latency (an object):
/// ranges of 1 MiB or more each go as a GET of their own, side by side,
/// rather than one after another on one connection. Merging pays for
/// small chunks, whose cost is the round trip; a long merged GET costs a
/// stream its parallelism (a stalled 2 MiB GET stalled both blocks a read
/// of two needed: tests/it/remote.rs
/// `a_stalled_answer_is_abandoned_and_resumed_on_a_new_connection`).
pub const REMOTE_MAX_WINDOW: u64 = 1 << 20;

/// Where a chunk's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Not stored: the chunk reads as its fill value.
    Missing,
    /// `len` bytes at `offset` of the file (an absolute offset), and a
    /// number the locator wants back with them ([`Locate::finish`]; HDF5:
    /// the chunk's filter mask).
    At { offset: u64, len: u64, tag: u32 },
    /// `len` bytes that are not one range of the file (an HDF5 compact
    /// dataset's, held in its object header; a tile gathered from
    /// external files): read by [`Locate::read_other`].
    Other { len: u64 },
}

/// What a format knows of its chunks: where each is, and what to do with
/// its bytes once read. Coordinates are grid coordinates of the chunked
/// array the store serves ([`rank`](Locate::rank) of them).
pub trait Locate: Send + Sync + Debug {
    /// The number of coordinates of a chunk (0: one chunk, key `0`).
    fn rank(&self) -> usize;

    /// Where chunk `coords` is; an error if the format cannot tell (an
    /// index that cannot be read, an address past the end of the file).
    fn locate(&self, coords: &[u64]) -> Result<Located>;

    /// The chunk's value from the bytes read at its range (`tag` as
    /// [`locate`](Self::locate) gave it): a checksum checked, a mask
    /// appended. The default hands them on.
    fn finish(&self, coords: &[u64], tag: u32, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let _ = (coords, tag);
        Ok(bytes)
    }

    /// The bytes of a chunk located as [`Located::Other`].
    fn read_other(&self, coords: &[u64]) -> Result<Vec<u8>> {
        Err(Error::metadata(
            self.describe(&key_of(coords)),
            "a chunk stored elsewhere, which this store cannot read",
        ))
    }

    /// Where chunk `key` (its coordinates as a key, `1.2`) lives, for
    /// error messages: it contains `key`.
    fn describe(&self, key: &str) -> String;

    /// The error for a failed read of chunk `key`'s range
    /// `offset..offset + len`. The default names it with
    /// [`describe`](Self::describe) and keeps the `io::Error` (its kind:
    /// `UnexpectedEof` for a file cut short).
    fn read_error(&self, key: &str, offset: u64, len: u64, e: io::Error) -> Error {
        Error::Io {
            path: format!("{} (bytes {offset}..{})", self.describe(key), offset + len),
            source: e,
        }
    }

    /// [`Store::change_stamp`] of the store: the container's.
    fn change_stamp(&self) -> Result<Option<u64>> {
        Ok(None)
    }
}

/// The key of chunk `coords`: `i.j.k`, `0` for a scalar (the Zarr v2
/// encoding with `.`, which the chunked array's other stores use too).
pub fn key_of(coords: &[u64]) -> String {
    if coords.is_empty() {
        return "0".to_string();
    }
    let mut key = String::new();
    for (i, c) in coords.iter().enumerate() {
        if i > 0 {
            key.push('.');
        }
        key.push_str(&c.to_string());
    }
    key
}

/// The chunks of one file, found by a [`Locate`], as a [`Store`].
#[derive(Debug)]
pub struct RangedStore {
    file: Arc<dyn ReadAt>,
    locate: Arc<dyn Locate>,
}

impl RangedStore {
    pub fn new(file: Arc<dyn ReadAt>, locate: Arc<dyn Locate>) -> RangedStore {
        RangedStore { file, locate }
    }

    /// The locator, for the format that made it.
    pub fn locator(&self) -> &Arc<dyn Locate> {
        &self.locate
    }

    /// The coordinates key `key` names, if it names a chunk.
    fn coords(&self, key: &str) -> Option<Vec<u64>> {
        let rank = self.locate.rank();
        if rank == 0 {
            return (key == "0").then(Vec::new);
        }
        let c: Vec<u64> = key
            .split('.')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        (c.len() == rank).then_some(c)
    }

    fn too_large(&self, coords: &[u64], size: u64, limit: u64) -> Error {
        Error::TooLarge {
            path: self.locate.describe(&key_of(coords)),
            size,
            limit,
        }
    }

    /// The value of chunk `coords`, `None` if it is not stored, an error if
    /// it holds more than `limit` bytes (nothing read then).
    pub fn get_at(&self, coords: &[u64], limit: u64) -> Result<Option<Vec<u8>>> {
        match self.locate.locate(coords)? {
            Located::Missing => Ok(None),
            Located::At { len, .. } | Located::Other { len } if len > limit => {
                Err(self.too_large(coords, len, limit))
            }
            Located::Other { .. } => self.locate.read_other(coords).map(Some),
            Located::At { offset, len, tag } => {
                let mut buf = vec![0u8; len as usize];
                self.file
                    .read_exact_at(&mut buf, offset)
                    .map_err(|e| self.locate.read_error(&key_of(coords), offset, len, e))?;
                self.locate.finish(coords, tag, buf).map(Some)
            }
        }
    }

    /// The values of many chunks (`(coordinates, limit)`), each handed to
    /// `each` with its index in `wanted`: what [`get_at`](Self::get_at)
    /// answers for each, the ranges read with one [`ReadAt::read_many`]
    /// (see the module doc). Handed on once the batch is in: the answers
    /// of one `read_many` arrive together.
    pub fn get_each_at(
        &self,
        wanted: &[(&[u64], u64)],
        each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>),
    ) {
        // Those read with the batch: (index in `wanted`, offset, len, tag).
        let mut ranged: Vec<(usize, u64, u64, u32)> = Vec::new();
        for (i, &(coords, limit)) in wanted.iter().enumerate() {
            match self.locate.locate(coords) {
                Ok(Located::At { offset, len, tag }) if len <= limit && len > 0 => {
                    ranged.push((i, offset, len, tag));
                }
                // Missing, too large, held elsewhere, empty, or not
                // located: answered as one alone would be.
                Ok(_) => each(i, self.get_at(coords, limit)),
                Err(e) => each(i, Err(e)),
            }
        }
        if ranged.len() < 2 {
            for &(i, ..) in &ranged {
                each(i, self.get_at(wanted[i].0, wanted[i].1));
            }
            return;
        }
        match self.read_batch(&mut ranged) {
            Ok(bufs) => {
                for ((i, _, _, tag), buf) in ranged.into_iter().zip(bufs) {
                    each(i, self.locate.finish(wanted[i].0, tag, buf).map(Some));
                }
            }
            // One at a time, so a bad range fails only its chunk (and a
            // transient failure of the batch is retried once, per chunk).
            Err(e) => {
                log::debug!(
                    "{}: a batch of {} chunks failed ({e}); reading them one by one",
                    self.locate.describe(&key_of(wanted[ranged[0].0].0)),
                    ranged.len()
                );
                for (i, ..) in ranged {
                    each(i, self.get_at(wanted[i].0, wanted[i].1));
                }
            }
        }
    }

    /// The bytes of each range of `ranged` (sorted by offset here; the
    /// answers in that order), read with one `read_many` of the windows
    /// they merge into.
    fn read_batch(&self, ranged: &mut [(usize, u64, u64, u32)]) -> io::Result<Vec<Vec<u8>>> {
        ranged.sort_by_key(|r| r.1);
        let gap = self.file.coalesce_gap();
        let spans: Vec<(u64, u64)> = ranged.iter().map(|r| (r.1, r.2)).collect();
        let max = match self.file.latency() {
            Some(_) => REMOTE_MAX_WINDOW,
            None => MAX_WINDOW,
        };
        let windows = windows(&spans, gap, max);
        let mut bufs: Vec<Vec<u8>> = spans
            .iter()
            .map(|&(_, len)| vec![0; len as usize])
            .collect();
        // A window of one range is read straight into its buffer; one of
        // several into a scratch buffer, then copied out.
        let mut scratch: Vec<Vec<u8>> = windows
            .iter()
            .map(|w| match w.members.len() {
                1 => Vec::new(),
                _ => vec![0; (w.end - w.start) as usize],
            })
            .collect();
        {
            let mut singles = bufs.iter_mut().enumerate();
            let mut reads: Vec<(u64, &mut [u8])> = Vec::with_capacity(windows.len());
            for (w, s) in windows.iter().zip(scratch.iter_mut()) {
                if w.members.len() == 1 {
                    let at = w.members.start;
                    let buf = singles
                        .find(|(k, _)| *k == at)
                        .map(|(_, b)| b)
                        .expect("each range in one window");
                    reads.push((w.start, buf.as_mut_slice()));
                } else {
                    reads.push((w.start, s.as_mut_slice()));
                }
            }
            log::debug!("{} chunks in {} ranges at once", spans.len(), reads.len());
            self.file.read_many(&mut reads)?;
        }
        for (w, s) in windows.iter().zip(&scratch) {
            if w.members.len() == 1 {
                continue;
            }
            for k in w.members.clone() {
                let (offset, len) = spans[k];
                let at = (offset - w.start) as usize;
                bufs[k].copy_from_slice(&s[at..at + len as usize]);
            }
        }
        Ok(bufs)
    }
}

/// Ranges merged into one read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    start: u64,
    end: u64,
    /// The ranges in it: indices into the sorted list.
    members: std::ops::Range<usize>,
}

/// `spans` (`(offset, len)`, sorted by offset, none empty) merged where
/// the next starts at most `gap` bytes after the window's end (or
/// overlaps it), no window longer than `max` unless one range is.
fn windows(spans: &[(u64, u64)], gap: u64, max: u64) -> Vec<Window> {
    let mut out: Vec<Window> = Vec::new();
    for (k, &(offset, len)) in spans.iter().enumerate() {
        let end = offset.saturating_add(len);
        if let Some(w) = out.last_mut()
            && offset <= w.end.saturating_add(gap)
            && end.max(w.end) - w.start <= max
        {
            w.end = w.end.max(end);
            w.members.end = k + 1;
            continue;
        }
        out.push(Window {
            start: offset,
            end,
            members: k..k + 1,
        });
    }
    out
}

impl Store for RangedStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        match self.coords(key) {
            Some(c) => self.get_at(&c, limit),
            None => Ok(None),
        }
    }

    fn get_many(&self, keys: &[(String, u64)]) -> Vec<Result<Option<Vec<u8>>>> {
        crate::storage::contract::get_many_by_each(self, keys)
    }

    /// [`RangedStore::get_each_at`] of the keys that name chunks; the
    /// others are missing.
    fn get_each(
        &self,
        keys: &[(String, u64)],
        each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>),
    ) {
        let parsed: Vec<Option<Vec<u64>>> = keys.iter().map(|(k, _)| self.coords(k)).collect();
        let mut index = Vec::with_capacity(keys.len());
        let mut wanted: Vec<(&[u64], u64)> = Vec::with_capacity(keys.len());
        for (i, (c, (_, limit))) in parsed.iter().zip(keys).enumerate() {
            match c {
                Some(c) => {
                    index.push(i);
                    wanted.push((c.as_slice(), *limit));
                }
                None => each(i, Ok(None)),
            }
        }
        self.get_each_at(&wanted, &mut |k, got| each(index[k], got));
    }

    /// Nothing: the keys are computed from the container, not listed
    /// (the conformance test's `Limits::flat`).
    fn list_dir(&self, _dir: &str) -> Result<Vec<(String, bool)>> {
        Ok(Vec::new())
    }

    fn describe(&self, key: &str) -> String {
        self.locate.describe(key)
    }

    /// The file's: a container read from an object store has the chunks
    /// of a read fetched together.
    fn latency(&self) -> Option<std::time::Duration> {
        self.file.latency()
    }

    fn change_stamp(&self, _prefix: &str) -> Result<Option<u64>> {
        self.locate.change_stamp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::InMemory;
    use crate::storage::testing::conformance::{Limits, check_values};

    /// Chunk `i` of a 1-D grid is `len(i)` bytes at `start(i)`, some
    /// chunks missing, some overlapping their neighbour (as no format
    /// does, but nothing here may assume they do not).
    #[derive(Debug)]
    struct Table(Vec<Option<(u64, u64)>>);

    impl Locate for Table {
        fn rank(&self) -> usize {
            1
        }
        fn locate(&self, coords: &[u64]) -> Result<Located> {
            Ok(match self.0.get(coords[0] as usize).copied().flatten() {
                Some((offset, len)) => Located::At {
                    offset,
                    len,
                    tag: 0,
                },
                None => Located::Missing,
            })
        }
        fn describe(&self, key: &str) -> String {
            format!("table.bin (chunk {key})")
        }
    }

    fn data(n: u64) -> Vec<u8> {
        (0..n).map(|i| (i * 13 % 251) as u8).collect()
    }

    /// A store over a file whose chunks are ranges keeps the storage
    /// contract: each key's value is the file's bytes at its range.
    #[test]
    fn a_ranged_store_conforms() {
        let bytes = data(5000);
        let ranges = vec![
            Some((100, 900)),
            Some((1000, 10)),
            None,
            Some((1005, 2000)),
            Some((4000, 1000)),
            Some((0, 0)),
        ];
        let store = RangedStore::new(
            Arc::new(InMemory(bytes.clone())),
            Arc::new(Table(ranges.clone())),
        );
        let value = |i: usize| {
            let (a, n) = ranges[i].unwrap();
            bytes[a as usize..(a + n) as usize].to_vec()
        };
        let entries = [
            ("0", value(0)),
            ("3", value(3)),
            ("1", value(1)),
            ("4", value(4)),
            ("5", value(5)),
        ];
        let limits = Limits {
            flat: true,
            ..Limits::default()
        };
        check_values("RangedStore", &store, &entries, limits);
        assert!(matches!(store.get("2", 100), Ok(None)));
    }

    /// Ranges merge into windows across gaps up to the gap, never past
    /// the longest window; overlapping ones merge too.
    #[test]
    fn windows_merge_nearby_ranges() {
        let spans = [(0, 10), (15, 5), (100, 10), (105, 20), (200, 1)];
        let starts = |w: &[Window]| w.iter().map(|w| (w.start, w.end)).collect::<Vec<_>>();
        assert_eq!(
            starts(&windows(&spans, 0, 1000)),
            [(0, 10), (15, 20), (100, 125), (200, 201)]
        );
        assert_eq!(
            starts(&windows(&spans, 5, 1000)),
            [(0, 20), (100, 125), (200, 201)]
        );
        assert_eq!(starts(&windows(&spans, 1000, 1000)), [(0, 201)]);
        assert_eq!(starts(&windows(&spans, 1000, 120)), [(0, 110), (105, 201)]);
    }

    /// A remote-like file (a latency, so a 1 MiB coalescing gap) that
    /// counts its reads: single reads, and the ranges of each
    /// `read_many`.
    #[derive(Debug, Default)]
    struct Counted {
        bytes: Vec<u8>,
        singles: std::sync::atomic::AtomicUsize,
        batches: parking_lot::Mutex<Vec<usize>>,
    }

    impl ReadAt for Counted {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.singles
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            InMemory(self.bytes.clone()).read_exact_at(buf, offset)
        }
        fn size(&self) -> io::Result<u64> {
            Ok(self.bytes.len() as u64)
        }
        fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
            self.batches.lock().push(reads.len());
            let file = InMemory(self.bytes.clone());
            for (offset, buf) in reads.iter_mut() {
                file.read_exact_at(buf, *offset)?;
            }
            Ok(())
        }
        fn latency(&self) -> Option<std::time::Duration> {
            Some(std::time::Duration::from_millis(20))
        }
    }

    /// A batch of N chunks of a remote file is one `read_many` of the
    /// windows they merge into: 40 chunks 4 KiB apart (well inside the
    /// 1 MiB gap) are one range; 8 chunks 2 MiB apart are 8 ranges, all
    /// in the one batch; no chunk is read alone. (Before, an HDF5 batch
    /// was one blocking read per chunk, on threads.)
    #[test]
    fn a_batch_is_one_read_many_of_merged_ranges() {
        for (n, stride, ranges) in [(40u64, 4096u64, 1usize), (8, 2 << 20, 8)] {
            let table: Vec<Option<(u64, u64)>> = (0..n).map(|i| Some((i * stride, 1000))).collect();
            let file = Arc::new(Counted {
                bytes: data(n * stride),
                ..Counted::default()
            });
            let store = RangedStore::new(file.clone(), Arc::new(Table(table)));
            let coords: Vec<[u64; 1]> = (0..n).map(|i| [i]).collect();
            let wanted: Vec<(&[u64], u64)> = coords.iter().map(|c| (&c[..], 1 << 20)).collect();
            let mut got = vec![None; n as usize];
            store.get_each_at(&wanted, &mut |i, v| got[i] = Some(v.unwrap().unwrap()));
            for (i, v) in got.iter().enumerate() {
                let at = i * stride as usize;
                assert_eq!(v.as_deref(), Some(&file.bytes[at..at + 1000]), "chunk {i}");
            }
            assert_eq!(*file.batches.lock(), [ranges], "{n} chunks {stride} apart");
            assert_eq!(
                file.singles.load(std::sync::atomic::Ordering::Relaxed),
                0,
                "no chunk read alone"
            );
        }
    }
}
