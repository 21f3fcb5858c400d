//! A block cache over one [`ReadAt`], for parsing a file's metadata;
//! works over any reader, local or remote.

use std::io;
use std::sync::Arc;

use crate::storage::contract::ReadAt;

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

    fn version(&self) -> Option<crate::storage::ObjectVersion> {
        self.inner.version()
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

#[cfg(test)]
mod tests {
    use super::*;

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
