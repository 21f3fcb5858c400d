//! The decoded-chunk cache.
//!
//! Decoding is the expensive step of a read, and readers come back to the
//! same chunks (a 128 KiB kernel read is much smaller than a typical chunk,
//! so a sequential scan asks for each chunk many times in a row). The cache
//! keeps decoded chunks, native byte order, under a byte budget, evicting
//! the least recently used.
//!
//! Keys carry the source's identity *and version* ([`ChunkKey`]): when a
//! dataset changes underneath, the reopened source gets a new version, so
//! stale entries are simply never asked for again and age out.
//!
//! When several threads ask for the same missing chunk at once (the kernel
//! issues parallel readahead requests that land in one chunk), exactly one
//! decodes it while the others wait for its result: no thundering herd.
//! A failed decode is never cached; waiters then retry (one at a time), so
//! a transient I/O error is not remembered and a corrupt chunk is reported
//! to each reader.
//!
//! Missing chunks (read as fill value) are not cached either: they cost one
//! failed `open`, and not remembering them means a chunk written later is
//! seen at once.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;
use parking_lot::{Condvar, Mutex};

use crate::error::Result;

/// Identifies one decoded chunk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChunkKey {
    /// Which array (see [`next_source_id`]).
    pub source: u64,
    /// Which version of it: bumped when the array's files change.
    pub version: u64,
    /// The chunk's coordinates in its grid.
    pub coords: Box<[u64]>,
}

/// A process-wide unique id for a newly opened source.
pub fn next_source_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Decoded chunk bytes, shared between the cache and readers.
pub type ChunkData = Arc<Vec<u8>>;

/// Counters, for the stats file and for tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Decodes that produced data (misses of absent chunks excluded).
    pub decodes: u64,
    pub evictions: u64,
    /// Chunks decoded for a read that covered them whole, and not kept
    /// (see [`ChunkCache::peek`]).
    pub uncached: u64,
    /// Chunks decoded ahead of a sequential reader ([`ChunkCache::prefetch`]).
    pub prefetches: u64,
    pub bytes: u64,
    pub entries: u64,
}

pub struct ChunkCache {
    budget: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    lru: LruCache<ChunkKey, ChunkData>,
    bytes: usize,
    inflight: HashMap<ChunkKey, Arc<Flight>>,
    stats: CacheStats,
}

/// One decode in progress; waiters sleep on `cv` until `done`.
#[derive(Default)]
struct Flight {
    done: Mutex<bool>,
    cv: Condvar,
}

/// Default budget: 512 MiB.
pub const DEFAULT_BUDGET: usize = 512 << 20;

impl ChunkCache {
    /// A cache holding at most `budget` bytes of decoded chunks. A chunk
    /// larger than the whole budget is decoded for the read that needs it
    /// and not kept.
    pub fn new(budget: usize) -> ChunkCache {
        ChunkCache {
            budget,
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
                inflight: HashMap::new(),
                stats: CacheStats::default(),
            }),
        }
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    pub fn stats(&self) -> CacheStats {
        let inner = self.inner.lock();
        CacheStats {
            bytes: inner.bytes as u64,
            entries: inner.lru.len() as u64,
            ..inner.stats
        }
    }

    /// The decoded chunk `key`, from the cache or by calling `load` (at most
    /// one `load` per key runs at a time). `load` returns `None` for a
    /// chunk that does not exist.
    pub fn get_or_load(
        &self,
        key: &ChunkKey,
        load: impl Fn() -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<ChunkData>> {
        loop {
            let flight = {
                let mut inner = self.inner.lock();
                if let Some(data) = inner.lru.get(key) {
                    let data = data.clone();
                    inner.stats.hits += 1;
                    return Ok(Some(data));
                }
                match inner.inflight.get(key) {
                    Some(f) => Some(f.clone()),
                    None => {
                        inner.stats.misses += 1;
                        inner
                            .inflight
                            .insert(key.clone(), Arc::new(Flight::default()));
                        None
                    }
                }
            };
            match flight {
                // Someone else is decoding it: wait, then look again.
                Some(f) => {
                    let mut done = f.done.lock();
                    while !*done {
                        f.cv.wait(&mut done);
                    }
                }
                None => return self.lead(key, &load),
            }
        }
    }

    /// Run `load` for `key` as the one thread doing so, publish the result
    /// and wake the waiters, whatever happens.
    fn lead(
        &self,
        key: &ChunkKey,
        load: &impl Fn() -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<ChunkData>> {
        /// Removes the in-flight marker and wakes waiters even if `load`
        /// panics, so no waiter sleeps forever.
        struct Finish<'a>(&'a ChunkCache, &'a ChunkKey);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                let flight = self.0.inner.lock().inflight.remove(self.1);
                if let Some(f) = flight {
                    *f.done.lock() = true;
                    f.cv.notify_all();
                }
            }
        }
        let _finish = Finish(self, key);
        let data = match load()? {
            Some(v) => Arc::new(v),
            None => return Ok(None),
        };
        let mut inner = self.inner.lock();
        inner.stats.decodes += 1;
        let size = data.len();
        if size <= self.budget {
            while inner.bytes + size > self.budget {
                match inner.lru.pop_lru() {
                    Some((_, old)) => {
                        inner.bytes -= old.len();
                        inner.stats.evictions += 1;
                    }
                    None => break,
                }
            }
            if let Some(old) = inner.lru.put(key.clone(), data.clone()) {
                inner.bytes -= old.len();
            }
            inner.bytes += size;
        }
        Ok(Some(data))
    }

    /// The chunk `key` if it is cached (counted as a hit), else `None`
    /// (counted as an uncached decode: the caller decodes it for itself).
    /// If it is being decoded, waits for that decode.
    ///
    /// This is for reads that cover a chunk whole: such a chunk is used
    /// once, by this read (the kernel's page cache keeps the result), so
    /// keeping it would only flush chunks that piecemeal readers, such as
    /// the kernel's 128 KiB requests, come back to. A whole-array scan
    /// therefore leaves the cache as it found it.
    pub fn peek(&self, key: &ChunkKey) -> Option<ChunkData> {
        loop {
            let flight = {
                let mut inner = self.inner.lock();
                if let Some(data) = inner.lru.get(key) {
                    let data = data.clone();
                    inner.stats.hits += 1;
                    return Some(data);
                }
                match inner.inflight.get(key) {
                    Some(f) => f.clone(),
                    None => {
                        inner.stats.uncached += 1;
                        return None;
                    }
                }
            };
            // Being decoded (by a prefetch, say): wait for it rather than
            // decode it twice.
            let mut done = flight.done.lock();
            while !*done {
                flight.cv.wait(&mut done);
            }
        }
    }

    /// Decode `key` into the cache ahead of a read that is expected soon,
    /// unless it is cached or being decoded already. Returns whether it
    /// ran `load`. Errors are not kept: the real read reports them.
    pub fn prefetch(&self, key: &ChunkKey, load: impl Fn() -> Result<Option<Vec<u8>>>) -> bool {
        {
            let mut inner = self.inner.lock();
            if inner.lru.contains(key) || inner.inflight.contains_key(key) {
                return false;
            }
            inner.stats.prefetches += 1;
            inner
                .inflight
                .insert(key.clone(), Arc::new(Flight::default()));
        }
        if let Err(e) = self.lead(key, &load) {
            log::debug!("prefetch of {key:?} failed (the read will report it): {e}");
        }
        true
    }

    /// Drop every entry of `source` (all versions), e.g. when it goes away.
    pub fn forget_source(&self, source: u64) {
        let mut inner = self.inner.lock();
        let stale: Vec<ChunkKey> = inner
            .lru
            .iter()
            .filter(|(k, _)| k.source == source)
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            if let Some(v) = inner.lru.pop(&k) {
                inner.bytes -= v.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn key(i: u64) -> ChunkKey {
        ChunkKey {
            source: 1,
            version: 0,
            coords: vec![i].into(),
        }
    }

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let cache = ChunkCache::new(300);
        let loads = AtomicUsize::new(0);
        let load = |n: usize| {
            let loads = &loads;
            move || {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok(Some(vec![0u8; n]))
            }
        };
        cache.get_or_load(&key(0), load(100)).unwrap();
        cache.get_or_load(&key(1), load(100)).unwrap();
        cache.get_or_load(&key(2), load(100)).unwrap();
        cache.get_or_load(&key(0), load(100)).unwrap(); // hit, now most recent
        assert_eq!(loads.load(Ordering::SeqCst), 3);
        cache.get_or_load(&key(3), load(100)).unwrap(); // evicts key 1
        assert_eq!(cache.stats().bytes, 300);
        cache.get_or_load(&key(0), load(100)).unwrap();
        assert_eq!(loads.load(Ordering::SeqCst), 4);
        cache.get_or_load(&key(1), load(100)).unwrap();
        assert_eq!(loads.load(Ordering::SeqCst), 5);
        // Larger than the budget: returned, not kept, nothing evicted.
        let big = cache.get_or_load(&key(9), load(1000)).unwrap().unwrap();
        assert_eq!(big.len(), 1000);
        assert_eq!(cache.stats().bytes, 300);
    }

    #[test]
    fn one_decode_when_many_threads_ask_at_once() {
        let cache = ChunkCache::new(1 << 20);
        let loads = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    let got = cache
                        .get_or_load(&key(7), || {
                            loads.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(50));
                            Ok(Some(vec![42u8; 10]))
                        })
                        .unwrap()
                        .unwrap();
                    assert_eq!(*got, vec![42u8; 10]);
                });
            }
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn failures_and_missing_chunks_are_not_cached() {
        let cache = ChunkCache::new(1 << 20);
        let err = cache.get_or_load(&key(1), || Err(Error::NotFound("x".into())));
        assert!(err.is_err());
        let ok = cache.get_or_load(&key(1), || Ok(Some(vec![1]))).unwrap();
        assert_eq!(*ok.unwrap(), vec![1]);
        assert!(cache.get_or_load(&key(2), || Ok(None)).unwrap().is_none());
        let later = cache.get_or_load(&key(2), || Ok(Some(vec![2]))).unwrap();
        assert_eq!(*later.unwrap(), vec![2]);
        assert_eq!(cache.stats().entries, 2);
    }
}
