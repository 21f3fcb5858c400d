//! A classic file read from an object store: its bytes in fixed blocks
//! through the chunk cache, so reads of it get what Zarr chunks get.
//!
//! Locally a netCDF-3 variable is read with positioned reads of exactly
//! the bytes a box needs, and the kernel's page cache keeps what was read.
//! From an object store every read is a round trip, there is no page
//! cache, and the engine's readahead had nothing to prefetch into: a
//! sequential `dd` of a variable waited one round trip per FUSE read
//! (12 MB/s at 20 ms per request, against 250 MB/s at 0 ms).
//!
//! So a remote classic file is also shown to itself as a one-dimensional
//! array of bytes chunked in [`BLOCK`]-byte blocks (key `i` is block `i`,
//! a ranged GET pinned to the object's version), a [`ChunkedArray`] over
//! the file's ranges ([`RangedStore`], the blocks found by [`FileBlocks`])
//! with no codec but `bytes`, exactly as a blocked archive shows its
//! compressed blocks ([`crate::formats::packed::reader`]). The blocks of
//! one read are one [`ReadAt::read_many`] (adjacent blocks one range). The
//! variables read their runs from it, so the shared chunk cache keeps
//! recent blocks (bounded by the cache budget), the blocks of one read are
//! fetched at once, and the sequential prefetcher fetches the blocks of
//! its window ahead of the reader, with the window grown to the link's
//! latency times its throughput ([`crate::engine::readahead`]).
//!
//! A random 4 KiB read then fetches its whole block: on a link where a
//! request costs a round trip, a 1 MiB block costs little more than 4 KiB,
//! and the neighbours of a read are often read next.

use std::sync::Arc;

use crate::codec::v2_chain;
use crate::dtype::{DataType, Endian};
use crate::engine::array::ArrayMeta;
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::chunked::ChunkedArray;
use crate::storage::ReadAt;
use crate::storage::paths::file_stamp;
use crate::storage::ranged::{Locate, Located, RangedStore};

/// Bytes per block: about what one round trip is worth on a fast link,
/// the size of the Zarr chunks slabfs reads best.
pub const BLOCK: u64 = 1 << 20;

/// Where the blocks of one file are: block `i` is bytes
/// `[i * BLOCK, (i + 1) * BLOCK)`, the last one short. The reading is the
/// [`RangedStore`]'s.
#[derive(Debug)]
pub struct FileBlocks {
    path: String,
    file: Arc<dyn ReadAt>,
    size: u64,
}

impl Locate for FileBlocks {
    fn rank(&self) -> usize {
        1
    }

    fn locate(&self, coords: &[u64]) -> Result<Located> {
        let start = coords[0].checked_mul(BLOCK).filter(|&s| s < self.size);
        Ok(match start {
            Some(start) => Located::At {
                offset: start,
                len: (start + BLOCK).min(self.size) - start,
                tag: 0,
            },
            None => Located::Missing,
        })
    }

    fn describe(&self, key: &str) -> String {
        format!("{} (block {key})", self.path)
    }

    fn change_stamp(&self) -> Result<Option<u64>> {
        Ok(self
            .file
            .stamp()
            .or_else(|| file_stamp(std::path::Path::new(&self.path))))
    }
}

/// The blocks of `file` as a store: key `i` is block `i`.
fn block_store(path: &str, file: Arc<dyn ReadAt>, size: u64) -> RangedStore {
    let blocks = FileBlocks {
        path: path.to_string(),
        file: file.clone(),
        size,
    };
    RangedStore::new(file, Arc::new(blocks))
}

/// The bytes of `file` (`size` of them, named `path`) as a 1-D `uint8`
/// array in [`BLOCK`]-byte chunks, read through `cache`.
pub fn byte_view(
    path: &str,
    file: Arc<dyn ReadAt>,
    size: u64,
    cache: Arc<ChunkCache>,
) -> Result<ChunkedArray> {
    let chain = v2_chain(1, false, Endian::Little, &[], None)
        .map_err(|e| Error::metadata(path, e.to_string()))?;
    let meta = ArrayMeta::new(path.to_string(), vec![size], DataType::UInt8, vec![0])?;
    let store = Arc::new(block_store(path, file, size));
    ChunkedArray::blocks(meta, BLOCK, chain, store, cache)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::InMemory;
    use crate::storage::testing::conformance::{Limits, check_values};

    /// The blocks of a file keep the storage contract: block `i` is bytes
    /// `[i * BLOCK, (i + 1) * BLOCK)` of the file, the last one short.
    #[test]
    fn file_blocks_conform() {
        let size = 2 * BLOCK + 1000;
        let data: Vec<u8> = (0..size).map(|i| (i * 31 % 253) as u8).collect();
        let store = block_store("mem.nc", Arc::new(InMemory(data.clone())), size);
        let block =
            |i: u64| data[(i * BLOCK) as usize..((i + 1) * BLOCK).min(size) as usize].to_vec();
        let entries = [("0", block(0)), ("2", block(2)), ("1", block(1))];
        let limits = Limits {
            flat: true,
            ..Limits::default()
        };
        check_values("FileBlocks", &store, &entries, limits);
    }

    /// A remote file that counts the reads of each block and, while the
    /// first read of several blocks is in flight, runs a readahead over
    /// the same blocks on another thread (what the sequential prefetcher
    /// does when the kernel's requests overlap its window).
    #[derive(Debug)]
    struct Racing {
        data: Vec<u8>,
        reads: parking_lot::Mutex<Vec<u64>>,
        array: std::sync::OnceLock<Arc<ChunkedArray>>,
        raced: std::sync::atomic::AtomicBool,
    }

    impl ReadAt for Racing {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            // Every block the read covers (adjacent blocks are one read).
            let end = offset + buf.len() as u64;
            self.reads
                .lock()
                .extend(offset / BLOCK..end.div_ceil(BLOCK));
            let at = offset as usize;
            buf.copy_from_slice(&self.data[at..at + buf.len()]);
            Ok(())
        }

        fn size(&self) -> std::io::Result<u64> {
            Ok(self.data.len() as u64)
        }

        fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> std::io::Result<()> {
            use crate::engine::array::ArraySource;
            if !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let array = self.array.get().expect("set").clone();
                let whole = crate::engine::index::Region::whole(&array.meta().shape);
                std::thread::spawn(move || array.prefetch(&[whole]))
                    .join()
                    .unwrap();
            }
            for (offset, buf) in reads.iter_mut() {
                self.read_exact_at(buf, *offset)?;
            }
            Ok(())
        }

        fn latency(&self) -> Option<std::time::Duration> {
            Some(std::time::Duration::from_millis(20))
        }
    }

    /// Three blocks of a [`Racing`] file (racing a readahead into the
    /// first read of several when `race`), read whole through a byte view
    /// (`then` runs after the read), the bytes checked: the blocks read,
    /// sorted.
    fn blocks_read(race: bool, then: impl FnOnce(&ChunkedArray)) -> Vec<u64> {
        use crate::engine::array::ArraySource;
        let size = 3 * BLOCK;
        let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        let file = Arc::new(Racing {
            data: data.clone(),
            reads: Default::default(),
            array: Default::default(),
            raced: (!race).into(),
        });
        let cache = Arc::new(ChunkCache::new(64 << 20));
        let array = Arc::new(byte_view("racing.nc", file.clone(), size, cache).unwrap());
        file.array.set(array.clone()).unwrap();
        let mut out = vec![0u8; size as usize];
        let whole = crate::engine::index::Region::whole(&[size]);
        array.read_region(&whole, &mut out).unwrap();
        assert!(out == data);
        then(&array);
        let mut reads = file.reads.lock().clone();
        reads.sort_unstable();
        reads
    }

    /// Regression: a read of several blocks fetched them without marking
    /// them, so a readahead over the same blocks at that moment fetched
    /// each a second time (a remote netCDF-3 file read sequentially made
    /// more requests than it has blocks, now and then).
    #[test]
    fn a_readahead_does_not_fetch_what_a_read_is_fetching() {
        let reads = blocks_read(true, |_| {});
        assert_eq!(reads, [0, 1, 2], "each block read once");
    }

    /// Regression: the chunks a read of several took whole (decoded
    /// straight into its buffer, not cached) were fetched again by a
    /// readahead over them that came after (another reader's, or the
    /// kernel's requests out of order), where a chunk consumed through
    /// the cache was not.
    #[test]
    fn a_readahead_does_not_fetch_what_a_read_took_whole() {
        use crate::engine::array::ArraySource;
        let reads = blocks_read(false, |array| {
            array.prefetch(&[crate::engine::index::Region::whole(&[3 * BLOCK])])
        });
        assert_eq!(reads, [0, 1, 2], "each block read once");
    }
}
