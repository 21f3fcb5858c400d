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

use super::buffers::{BufferPool, DEFAULT_CAP};
use super::decodes::Decodes;
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

/// Bytes of one decoded chunk lent to a reader instead of copied out
/// ([`crate::engine::array::ArraySource::read_shared`]): a FUSE reply is written
/// to the kernel straight from the cached chunk. When it is dropped (the
/// reply sent), its bytes count as served ([`ChunkCache::served`]), after
/// it has let go of the chunk, so a chunk now wholly served can still hand
/// its buffer to the next decode.
pub struct SharedBytes {
    data: Option<ChunkData>,
    range: std::ops::Range<usize>,
    /// The cache, key and useful bytes to report the bytes served to, and
    /// the address of the chunk lent, so that they are not credited to a
    /// later decode of the same key (if this one was evicted meanwhile).
    served: Option<(Arc<ChunkCache>, ChunkKey, usize, usize)>,
}

impl SharedBytes {
    /// `data[range]`, counted as served from chunk `key` of `cache` (whose
    /// useful bytes are `useful`) when dropped. `None` when `range` is not
    /// inside `data`.
    pub fn served(
        data: ChunkData,
        range: std::ops::Range<usize>,
        cache: Arc<ChunkCache>,
        key: ChunkKey,
        useful: usize,
    ) -> Option<Self> {
        data.get(range.clone())?;
        let lent = Arc::as_ptr(&data) as usize;
        Some(SharedBytes {
            data: Some(data),
            range,
            served: Some((cache, key, useful, lent)),
        })
    }

    /// All of `data`, owned by nobody else (such as a fill value).
    pub fn owned(data: Vec<u8>) -> Self {
        SharedBytes {
            range: 0..data.len(),
            data: Some(Arc::new(data)),
            served: None,
        }
    }
}

impl std::ops::Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.data {
            Some(d) => &d[self.range.clone()],
            None => &[],
        }
    }
}

impl Drop for SharedBytes {
    fn drop(&mut self) {
        self.data = None;
        if let Some((cache, key, useful, lent)) = self.served.take() {
            cache.credit(&key, Some(lent), self.range.len(), useful);
        }
    }
}

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
    /// Chunks dropped once every byte of them was served
    /// ([`ChunkCache::served`]).
    pub consumed: u64,
    pub bytes: u64,
    pub entries: u64,
}

pub struct ChunkCache {
    budget: usize,
    /// The read path's buffers ([`super::buffers`]), capped with the
    /// budget ([`pool_cap`]).
    pool: Arc<BufferPool>,
    inner: Mutex<Inner>,
    /// The decodes of the sources that cache here, by codec chain.
    decodes: Decodes,
}

struct Inner {
    lru: LruCache<ChunkKey, Entry>,
    bytes: usize,
    inflight: HashMap<ChunkKey, Arc<Flight>>,
    stats: CacheStats,
    /// Where the buffers of dropped chunks go, for the next decodes
    /// ([`ChunkCache::take_buffer`]); the same pool as
    /// [`ChunkCache::buffers`].
    pool: Arc<BufferPool>,
    /// Chunks recently dropped because every byte was served
    /// ([`ChunkCache::served`]), which prefetching skips.
    consumed: LruCache<ChunkKey, ()>,
    /// Chunks a read is fetching for itself ([`ChunkCache::reading`]),
    /// which prefetching skips too; bounded by the reads in progress.
    reading: std::collections::HashSet<ChunkKey>,
}

/// Consumed chunks remembered: 4 GiB of 1 MiB chunks, a few hundred KiB
/// of keys.
const CONSUMED_MEMORY: usize = 4096;

struct Entry {
    data: ChunkData,
    /// Bytes of it served so far ([`ChunkCache::served`]).
    served: u64,
}

/// Most bytes of buffers the cache's pool keeps for a budget of `budget`:
/// [`DEFAULT_CAP`] (a readahead window of chunks), or a quarter of the
/// budget if that is less: the pool is memory beyond the budget, and a
/// buffer of a size no decode asks for stays in it for good, so a small
/// `--cache-size` must mean a small pool too (a 1 MiB cache kept 64 MiB of
/// spare buffers before).
fn pool_cap(budget: usize) -> usize {
    DEFAULT_CAP.min(budget / 4)
}

impl Inner {
    /// Drop `data` from the books; keep its buffer for reuse when no reader
    /// holds it any more.
    fn recycle(&mut self, data: ChunkData) {
        if let Ok(buf) = Arc::try_unwrap(data) {
            self.pool.give(buf);
        }
    }
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
        let pool = Arc::new(BufferPool::new(pool_cap(budget)));
        ChunkCache {
            budget,
            pool: pool.clone(),
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
                inflight: HashMap::new(),
                stats: CacheStats::default(),
                pool: pool.clone(),
                consumed: LruCache::new(
                    std::num::NonZeroUsize::new(CONSUMED_MEMORY).expect("non-zero"),
                ),
                reading: Default::default(),
            }),
            decodes: Decodes::default(),
        }
    }

    /// The decodes of the sources caching here, by codec chain
    /// ([`super::decodes`]).
    pub fn decodes(&self) -> &Decodes {
        &self.decodes
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
                if let Some(e) = inner.lru.get(key) {
                    let data = e.data.clone();
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
                        inner.bytes -= old.data.len();
                        inner.stats.evictions += 1;
                        inner.recycle(old.data);
                    }
                    None => break,
                }
            }
            let entry = Entry {
                data: data.clone(),
                served: 0,
            };
            if let Some(old) = inner.lru.put(key.clone(), entry) {
                inner.bytes -= old.data.len();
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
                if let Some(e) = inner.lru.get(key) {
                    let data = e.data.clone();
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
    /// unless it is cached or being decoded already, or was recently
    /// consumed (every byte served, see [`served`](Self::served)): then
    /// some reader went through it already, and a readahead running into
    /// it is one reader overshooting into what another has read (eight
    /// readers of consecutive parts of a file decoded nearly twice the
    /// chunks before this rule). Returns whether it ran `load`. Errors are
    /// not kept: the real read reports them.
    pub fn prefetch(&self, key: &ChunkKey, load: impl Fn() -> Result<Option<Vec<u8>>>) -> bool {
        if !self.start_prefetch(key) {
            return false;
        }
        if let Err(e) = self.lead(key, &load) {
            log::debug!("prefetch of {key:?} failed (the read will report it): {e}");
        }
        true
    }

    /// Put `key` in flight for a prefetch, unless it is cached, in flight
    /// already or recently consumed (then `false`): the rule of
    /// [`prefetch`](Self::prefetch) and [`claim`](Self::claim).
    fn start_prefetch(&self, key: &ChunkKey) -> bool {
        let mut inner = self.inner.lock();
        if inner.lru.contains(key)
            || inner.inflight.contains_key(key)
            || inner.consumed.contains(key)
            || inner.reading.contains(key)
        {
            return false;
        }
        inner.stats.prefetches += 1;
        inner
            .inflight
            .insert(key.clone(), Arc::new(Flight::default()));
        true
    }

    /// Claim `key` for a prefetch whose bytes are fetched first and
    /// decoded later ([`Claim::finish`]): under the same rule as
    /// [`prefetch`](Self::prefetch) (`None` if it is cached, being
    /// decoded, or recently consumed). While claimed, the key is in
    /// flight: a read of it waits for the claim instead of fetching it a
    /// second time. A claim dropped unfinished (its fetch failed) lets
    /// the waiters load it themselves.
    pub fn claim(&self, key: &ChunkKey) -> Option<Claim<'_>> {
        if !self.start_prefetch(key) {
            return None;
        }
        Some(Claim {
            cache: self,
            key: key.clone(),
            open: true,
        })
    }

    /// Note that a read took chunk `key` whole, decoded straight into its
    /// buffer without keeping it ([`peek`](Self::peek)): like a chunk
    /// consumed through the cache ([`served`](Self::served)), it is not
    /// prefetched again (a readahead over it, another reader's or one of
    /// the kernel's requests out of order, fetched it a second time).
    pub fn taken_whole(&self, key: &ChunkKey) {
        self.inner.lock().consumed.put(key.clone(), ());
    }

    /// Mark `key` as fetched by a read for itself (with the other chunks
    /// of the read, [`crate::engine::pieces::PieceSource::fetch_together`]),
    /// unless it is cached, being decoded, or marked by another read
    /// (then `None`). Until the mark is dropped, prefetching leaves the key
    /// alone: a readahead over the blocks a read is fetching at that
    /// moment fetched each of them a second time. Nothing waits on a mark
    /// (a read of the key meanwhile loads it for itself, as before): its
    /// holder may be a piece queued behind the waiters on the rayon pool.
    pub fn reading(self: &Arc<Self>, key: &ChunkKey) -> Option<Reading> {
        let mut inner = self.inner.lock();
        if inner.lru.contains(key)
            || inner.inflight.contains_key(key)
            || !inner.reading.insert(key.clone())
        {
            return None;
        }
        Some(Reading {
            cache: self.clone(),
            key: key.clone(),
        })
    }

    /// Whether `key` is cached (without touching its recency).
    pub fn contains(&self, key: &ChunkKey) -> bool {
        self.inner.lock().lru.contains(key)
    }

    /// Note that `bytes` of cached chunk `key` were copied or lent to a reader, of
    /// `useful` bytes it has inside its array. Once every useful byte has
    /// been served, the chunk is dropped and its buffer kept for the next
    /// decode: a reader that went through all of it (a sequential scan,
    /// typically) is done with it, and the kernel's page cache holds what
    /// it read. This use-once rule is the cache's scan resistance: a scan
    /// of any size occupies about a readahead window of chunks instead of
    /// flushing the cache, and it reuses its buffers instead of faulting in
    /// fresh memory for every chunk. A chunk read piecemeal here and there
    /// stays until the least-recently-used rule evicts it. (Re-reading the
    /// same part of a chunk over and over also adds up; the kernel's page
    /// cache absorbs such re-reads before they reach the cache.) A
    /// consumed chunk is remembered ([`CONSUMED_MEMORY`] of them) and not
    /// prefetched again; a second pass over it, which reaches slabfs only
    /// once the kernel has dropped its pages, decodes on demand.
    pub fn served(&self, key: &ChunkKey, bytes: usize, useful: usize) {
        self.credit(key, None, bytes, useful);
    }

    /// [`served`](Self::served), for the cached chunk at address `lent`
    /// only, when given: a loan returned after its chunk was evicted and
    /// decoded again must not count towards the new copy.
    fn credit(&self, key: &ChunkKey, lent: Option<usize>, bytes: usize, useful: usize) {
        let mut inner = self.inner.lock();
        let Some(e) = inner.lru.peek_mut(key) else {
            return;
        };
        if lent.is_some_and(|p| p != Arc::as_ptr(&e.data) as usize) {
            return;
        }
        e.served += bytes as u64;
        if e.served < useful as u64 {
            return;
        }
        if let Some(e) = inner.lru.pop(key) {
            inner.bytes -= e.data.len();
            inner.stats.consumed += 1;
            inner.recycle(e.data);
            inner.consumed.put(key.clone(), ());
        }
    }

    /// A buffer of exactly `len` bytes (contents unspecified) to decode a
    /// chunk into: a recycled one when the pool has one large enough, so
    /// a scan does not fault in fresh pages for every chunk.
    pub fn take_buffer(&self, len: usize) -> Vec<u8> {
        self.pool.take(len)
    }

    /// The read path's buffer pool (scratch buffers for decoding and
    /// strided copies), the one [`take_buffer`](Self::take_buffer) draws
    /// on: one cap for all of them.
    pub fn buffers(&self) -> &BufferPool {
        &self.pool
    }

    /// Return a buffer from [`take_buffer`](Self::take_buffer) that was not
    /// used after all.
    pub fn give_back(&self, buf: Vec<u8>) {
        self.pool.give(buf);
    }

    /// Drop the entry `key`, if cached: a value found to be bad after it
    /// was decoded (a shard index whose entries lead to bytes that do not
    /// decode), so that the next read loads it again.
    pub fn forget(&self, key: &ChunkKey) {
        let mut inner = self.inner.lock();
        if let Some(e) = inner.lru.pop(key) {
            inner.bytes -= e.data.len();
            inner.recycle(e.data);
        }
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
                inner.bytes -= v.data.len();
            }
        }
    }
}

/// A key a read is fetching for itself ([`ChunkCache::reading`]); the
/// mark goes when this is dropped.
pub struct Reading {
    cache: Arc<ChunkCache>,
    key: ChunkKey,
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.cache.inner.lock().reading.remove(&self.key);
    }
}

/// A key claimed for a prefetch ([`ChunkCache::claim`]).
pub struct Claim<'a> {
    cache: &'a ChunkCache,
    key: ChunkKey,
    open: bool,
}

impl Claim<'_> {
    pub fn key(&self) -> &ChunkKey {
        &self.key
    }

    /// Decode the claimed chunk with `load` into the cache and wake its
    /// waiters. Errors are not kept: the real read reports them.
    pub fn finish(mut self, load: impl FnOnce() -> Result<Option<Vec<u8>>>) {
        self.open = false;
        let load = parking_lot::Mutex::new(Some(load));
        let once = || match load.lock().take() {
            Some(f) => f(),
            None => Ok(None),
        };
        if let Err(e) = self.cache.lead(&self.key, &once) {
            log::debug!(
                "prefetch of {:?} failed (the read will report it): {e}",
                self.key
            );
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.open {
            let flight = self.cache.inner.lock().inflight.remove(&self.key);
            if let Some(f) = flight {
                *f.done.lock() = true;
                f.cv.notify_all();
            }
        }
    }
}

/// The chunk cache's series: the same counters as the `cache`, `buffers`
/// and `decodes` sections of `.slabfs/stats`, read when scraped.
impl crate::metrics::Collect for ChunkCache {
    fn collect(&self, out: &mut crate::metrics::Out<'_>) -> std::fmt::Result {
        use crate::metrics::Kind;
        let c = self.stats();
        out.counter(
            "slabfs_chunk_cache_hits",
            "Decoded chunks found in the chunk cache.",
            c.hits,
        )?;
        out.counter(
            "slabfs_chunk_cache_misses",
            "Chunks not in the chunk cache when asked for (then decoded, or absent).",
            c.misses,
        )?;
        out.counter(
            "slabfs_chunk_cache_evictions",
            "Chunks dropped from the chunk cache to stay within --cache-size.",
            c.evictions,
        )?;
        out.counter(
            "slabfs_chunk_cache_prefetches",
            "Chunks decoded ahead of a sequential reader.",
            c.prefetches,
        )?;
        out.counter(
            "slabfs_chunk_cache_uncached",
            "Chunks a read covered whole, decoded into the reply and not kept.",
            c.uncached,
        )?;
        out.gauge(
            "slabfs_chunk_cache_bytes",
            "Bytes of decoded chunks in the chunk cache.",
            c.bytes as f64,
        )?;
        out.gauge(
            "slabfs_chunk_cache_entries",
            "Decoded chunks in the chunk cache.",
            c.entries as f64,
        )?;
        out.gauge(
            "slabfs_chunk_cache_budget_bytes",
            "The chunk cache's budget (--cache-size).",
            self.budget as f64,
        )?;
        let b = self.pool.stats();
        out.gauge(
            "slabfs_buffer_pool_bytes",
            "Bytes of spare decode and scratch buffers kept for reuse.",
            b.bytes as f64,
        )?;
        out.counter(
            "slabfs_buffer_pool_misses",
            "Buffers of the read path that had to be allocated.",
            b.misses,
        )?;
        let decoders = self.decodes.all();
        let mut f = out.family(
            "slabfs_decode_duration_seconds",
            "Time to decode one chunk, by codec chain (codecs in encoding order, \
             joined by +); its count is the number of chunks decoded.",
            Kind::Histogram,
        )?;
        for d in &decoders {
            f.histogram(&[("codec", d.name())], d.time())?;
        }
        let mut f = out.family(
            "slabfs_decoded_bytes",
            "Bytes produced by decoding chunks, by codec chain.",
            Kind::Counter,
        )?;
        for d in &decoders {
            f.counter(&[("codec", d.name())], d.bytes())?;
        }
        Ok(())
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
    fn consumed_chunks_are_not_prefetched_again_but_still_read() {
        let c = ChunkCache::new(1 << 20);
        let (k, other) = (key(1), key(2));
        c.get_or_load(&k, || Ok(Some(vec![7u8; 64]))).unwrap();
        c.served(&k, 64, 64);
        assert!(!c.contains(&k));
        assert!(!c.prefetch(&k, || Ok(Some(vec![7u8; 64]))));
        assert!(!c.contains(&k));
        assert!(c.prefetch(&other, || Ok(Some(vec![8u8; 64]))));
        assert!(c.contains(&other));
        // A real read of it decodes it again.
        let again = c.get_or_load(&k, || Ok(Some(vec![9u8; 64]))).unwrap();
        assert_eq!(*again.unwrap(), vec![9u8; 64]);
    }

    /// Regression (found by tests/it/soak.rs: the daemon of a 1 MiB cache
    /// grew by 60 MiB of spare buffers): a small budget bounds the pool.
    #[test]
    fn the_buffer_pool_stays_within_a_quarter_of_a_small_budget() {
        let c = ChunkCache::new(1 << 20);
        for i in 0..1000 {
            c.give_back(vec![0u8; 4096 + i]);
        }
        let pool = c.buffers().stats().bytes;
        assert!(pool <= 256 << 10 && pool > 250 << 10, "{pool}");
        let big = ChunkCache::new(DEFAULT_BUDGET);
        for _ in 0..100 {
            big.give_back(vec![0u8; 1 << 20]);
        }
        assert_eq!(big.buffers().stats().bytes, DEFAULT_CAP as u64);
    }

    #[test]
    fn wholly_served_chunks_are_dropped_and_their_buffers_reused() {
        let c = ChunkCache::new(1 << 20);
        let k = key(1);
        let data = c.get_or_load(&k, || Ok(Some(vec![7u8; 4096]))).unwrap();
        let data = data.unwrap();
        let ptr = data.as_ptr();
        drop(data);
        c.served(&k, 1000, 4096);
        assert!(c.contains(&k));
        c.served(&k, 3096, 4096);
        assert!(!c.contains(&k));
        assert_eq!((c.stats().consumed, c.stats().bytes), (1, 0));
        let b = c.take_buffer(4000);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 4000));
        // The pool had one buffer; the next is fresh.
        let fresh = c.take_buffer(4000);
        assert_ne!(fresh.as_ptr(), ptr);
        // A buffer still held by a reader is not recycled.
        let held = c.get_or_load(&k, || Ok(Some(vec![1u8; 4096]))).unwrap();
        c.served(&k, 4096, 4096);
        assert!(!c.contains(&k));
        assert_eq!(held.unwrap()[0], 1);
        let fresh = c.take_buffer(4000);
        assert_ne!(fresh.as_ptr(), ptr);
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
    fn forgotten_entries_are_loaded_again() {
        let cache = ChunkCache::new(1 << 20);
        cache
            .get_or_load(&key(1), || Ok(Some(vec![1; 10])))
            .unwrap();
        cache
            .get_or_load(&key(2), || Ok(Some(vec![2; 10])))
            .unwrap();
        cache.forget(&key(1));
        cache.forget(&key(3)); // not cached: nothing happens
        assert!(!cache.contains(&key(1)) && cache.contains(&key(2)));
        assert_eq!((cache.stats().entries, cache.stats().bytes), (1, 10));
        let again = cache
            .get_or_load(&key(1), || Ok(Some(vec![9; 10])))
            .unwrap();
        assert_eq!(*again.unwrap(), vec![9; 10]);
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
