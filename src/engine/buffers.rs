//! The buffer pool: every scratch and decode buffer of the read path
//! reused from one place, under one cap, counted.
//!
//! A scan decodes chunk after chunk of the same size; allocating each
//! buffer afresh would fault in new pages for every chunk (the kernel
//! zeroes them), which costs about as much as decoding. Three kinds of
//! buffer are reused:
//!
//! - **decode buffers** ([`BufferPool::take`], [`BufferPool::give`]): a
//!   chunk decoded into the cache needs a buffer of its own, which it
//!   keeps while cached. When the cache drops it (evicted, or wholly
//!   served) and no reader holds it, the buffer goes back to the pool's
//!   shared list and the next decode of a similar size takes it. These
//!   cross threads (decoded on one, evicted on another), so they sit behind
//!   a lock, taken once per chunk decoded into the cache.
//! - **scratch buffers** ([`BufferPool::with_scratch`]): where a worker
//!   decodes a chunk that is then copied into a strided destination, and
//!   the intermediate buffer of a two-codec chain (a compressor's output,
//!   a filter's input; the codec takes it from its caller, see
//!   [`crate::codec::CodecChain::decode_into`]). These are used per piece
//!   of a read, on the hot path, so they stay with their thread ([`SLOTS`]
//!   per thread, one per nesting level): no lock, only a few relaxed
//!   atomic counters per use.
//!
//! **One cap** covers both: the bytes of spare buffers in the shared list
//! plus the bytes of the threads' scratch buffers. A buffer handed back
//! past the cap is freed; a scratch buffer that grew past it is freed
//! after its use, so idle threads never pin more than the cap between
//! them. The cap is the cache's ([`crate::engine::cache::ChunkCache`] owns
//! the pool): 64 MiB, or a quarter of the cache budget when that is less
//! (the pool is memory beyond the budget).
//!
//! **Counted** in `.slabfs/stats` (`buffers`): the bytes held, the cap,
//! and hits (a buffer reused) and misses (one allocated or grown).
//!
//! Why not a crate: the pools of the ecosystem (`object-pool`, `lifeguard`,
//! `bytes`' reuse) recycle objects of one kind by count, not byte buffers
//! of varying sizes under a byte cap, and none keeps a per-thread slot that
//! stays lock-free on the hot path.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Scratch buffers per thread: one per level of nesting (a strided
/// piece's decoded chunk, and inside its decode the chain's intermediate
/// buffer).
pub const SLOTS: usize = 2;

/// The slot of a chunk decoded whole before its strided copy.
pub const CHUNK_SLOT: usize = 0;

/// The slot of a codec chain's intermediate buffer.
pub const CODEC_SLOT: usize = 1;

/// Most bytes the pool keeps: enough for a readahead window of chunks (at
/// most an eighth of the budget, see `SlabFs::with_cache`).
pub const DEFAULT_CAP: usize = 64 << 20;

/// The counters of one pool, shared with the thread slots that hold
/// scratch buffers on its account.
#[derive(Debug, Default)]
struct Counters {
    /// Bytes (capacity) held: shared spare buffers and thread scratch.
    held: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// What [`BufferPool::stats`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferStats {
    /// Bytes of buffers kept for reuse (spare and per-thread scratch).
    pub bytes: u64,
    /// The cap on `bytes`.
    pub cap: u64,
    /// Buffers handed out without allocating.
    pub hits: u64,
    /// Buffers that had to be allocated (or grown).
    pub misses: u64,
}

/// Byte buffers for decoding, reused under one cap (the [module
/// docs](self)).
#[derive(Debug)]
pub struct BufferPool {
    cap: usize,
    counters: Arc<Counters>,
    /// Spare decode buffers, any size.
    shared: Mutex<Vec<Vec<u8>>>,
}

/// A thread's scratch buffer and the pool it is counted against.
type Slot = RefCell<Option<(Arc<Counters>, Vec<u8>)>>;

thread_local! {
    static SCRATCH: [Slot; SLOTS] = const { [RefCell::new(None), RefCell::new(None)] };
}

impl BufferPool {
    /// A pool keeping at most `cap` bytes of buffers.
    pub fn new(cap: usize) -> BufferPool {
        BufferPool {
            cap,
            counters: Arc::default(),
            shared: Mutex::new(Vec::new()),
        }
    }

    pub fn stats(&self) -> BufferStats {
        let c = &self.counters;
        BufferStats {
            bytes: c.held.load(Ordering::Relaxed) as u64,
            cap: self.cap as u64,
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
        }
    }

    /// Count `bytes` more held, unless that passes the cap (then `false`,
    /// nothing counted).
    fn reserve(&self, bytes: usize) -> bool {
        self.counters
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&n| n <= self.cap)
            })
            .is_ok()
    }

    /// A buffer of exactly `len` bytes (contents unspecified): a spare one
    /// when the pool has one large enough and not much larger (so small
    /// chunks do not pin big buffers), else a new one.
    pub fn take(&self, len: usize) -> Vec<u8> {
        let recycled = {
            let mut shared = self.shared.lock();
            let pos = shared
                .iter()
                .position(|b| b.capacity() >= len && b.capacity() <= len.saturating_mul(2));
            pos.map(|i| shared.swap_remove(i))
        };
        match recycled {
            Some(mut b) => {
                self.counters
                    .held
                    .fetch_sub(b.capacity(), Ordering::Relaxed);
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                if b.len() >= len {
                    b.truncate(len);
                } else {
                    b.resize(len, 0);
                }
                b
            }
            None => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                vec![0; len]
            }
        }
    }

    /// Keep `buf` for a later [`take`](Self::take), unless that would pass
    /// the cap (then it is freed).
    pub fn give(&self, buf: Vec<u8>) {
        if buf.capacity() == 0 || !self.reserve(buf.capacity()) {
            return;
        }
        self.shared.lock().push(buf);
    }

    /// Free spare buffers until `bytes` more fit under the cap, and count
    /// them; `false` (nothing counted) if they cannot. A scratch buffer
    /// is used for every piece of a strided read, a spare one maybe never
    /// again, so scratch comes first. Runs only when a scratch buffer grew.
    fn make_room(&self, bytes: usize) -> bool {
        let mut shared = self.shared.lock();
        while let Some(spare) = shared.pop() {
            self.counters
                .held
                .fetch_sub(spare.capacity(), Ordering::Relaxed);
            if self.reserve(bytes) {
                return true;
            }
        }
        false
    }

    /// Run `f` with this thread's scratch buffer of slot `slot` (one of
    /// [`SLOTS`]; a call inside `f` uses another slot), which `f` may
    /// resize. Counted against the pool's cap afterwards: a buffer past it
    /// is freed rather than kept. Panics if `slot` is in use on this
    /// thread already (a nesting bug).
    pub fn with_scratch<R>(&self, slot: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        SCRATCH.with(|slots| {
            let mut cell = slots[slot].borrow_mut();
            // A buffer counted against another pool (another cache in
            // this process) goes: its pool is told through its counters.
            if let Some((owner, buf)) = cell.take_if(|(o, _)| !Arc::ptr_eq(o, &self.counters)) {
                owner.held.fetch_sub(buf.capacity(), Ordering::Relaxed);
            }
            let (_, buf) = cell.get_or_insert_with(|| (self.counters.clone(), Vec::new()));
            let before = buf.capacity();
            let result = f(buf);
            let after = buf.capacity();
            let c = &self.counters;
            if after == before {
                c.hits.fetch_add(1, Ordering::Relaxed);
                return result;
            }
            c.misses.fetch_add(1, Ordering::Relaxed);
            c.held.fetch_sub(before, Ordering::Relaxed);
            if !self.reserve(after) && !self.make_room(after) {
                // Past the cap: freed now, a fresh one next time.
                *cell = None;
            }
            result
        })
    }
}

impl Drop for BufferPool {
    /// Scratch buffers of other threads stay counted in the dropped
    /// counters (harmless: nobody reads them); this thread's go now.
    fn drop(&mut self) {
        let _ = SCRATCH.try_with(|slots| {
            for slot in slots {
                if let Ok(mut cell) = slot.try_borrow_mut() {
                    cell.take_if(|(o, _)| Arc::ptr_eq(o, &self.counters));
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_buffers_are_reused_and_capped() {
        let pool = BufferPool::new(10_000);
        let a = pool.take(4000);
        let ptr = a.as_ptr();
        pool.give(a);
        assert_eq!(pool.stats().bytes, 4000);
        // Large enough and not twice as large: reused.
        let b = pool.take(3000);
        assert_eq!((b.as_ptr(), b.len()), (ptr, 3000));
        assert_eq!(pool.stats().bytes, 0);
        // Too large for 1000 bytes: a new one.
        pool.give(b);
        let small = pool.take(1000);
        assert_ne!(small.as_ptr(), ptr);
        // Past the cap: freed.
        pool.give(vec![0; 7000]);
        assert_eq!(pool.stats().bytes, 4000);
        // A scratch buffer that needs the room frees spare buffers first.
        pool.with_scratch(CHUNK_SLOT, |b| b.resize(8000, 0));
        assert_eq!(pool.stats().bytes, 8000);
        assert!(pool.shared.lock().is_empty());
        let s = pool.stats();
        assert_eq!((s.hits, s.misses, s.cap), (1, 3, 10_000));
    }

    #[test]
    fn scratch_stays_with_its_thread_within_the_cap() {
        let pool = BufferPool::new(1 << 20);
        let first = pool.with_scratch(CHUNK_SLOT, |b| {
            b.resize(4096, 0);
            b.as_ptr()
        });
        assert_eq!(pool.stats().bytes, 4096);
        // Nested: the other slot, another buffer.
        let (again, inner) = pool.with_scratch(CHUNK_SLOT, |b| {
            b.resize(4096, 0);
            let inner = pool.with_scratch(CODEC_SLOT, |c| {
                c.resize(100, 0);
                c.as_ptr()
            });
            (b.as_ptr(), inner)
        });
        assert_eq!(again, first);
        assert_ne!(inner, first);
        assert_eq!(pool.stats().bytes, 4096 + 100);
        // A scratch grown past the cap is freed after its use.
        pool.with_scratch(CHUNK_SLOT, |b| b.resize(2 << 20, 0));
        assert_eq!(pool.stats().bytes, 100);
        let s = pool.stats();
        assert_eq!((s.hits, s.misses), (1, 3));
        // Another pool on this thread takes the slot over; the first is
        // told.
        let other = BufferPool::new(1 << 20);
        other.with_scratch(CODEC_SLOT, |c| c.resize(10, 0));
        assert_eq!(pool.stats().bytes, 0);
        assert_eq!(other.stats().bytes, 10);
    }
}
