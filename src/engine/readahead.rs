//! Sequential readahead: decode the chunks a sequential reader will ask
//! for next while it is still busy with the current ones.
//!
//! The kernel reads ahead through FUSE by itself, but only a request or
//! two ahead (its `max_readahead`, 128 KiB to 1 MiB), and a request for the
//! first bytes of a chunk waits while the whole chunk decodes: with one
//! reader, decoding and serving alternate and one core idles. This layer
//! watches each open file's reads. When two reads in a row each start
//! about where the previous one ended, the stream is sequential and its
//! window (bytes to have decoded beyond the current read) doubles, from
//! [`MIN_WINDOW`] up to the maximum; the part of `[end, end + window)` not yet handed out is
//! passed to [`ArraySource::prefetch`] on the rayon pool, which decodes it
//! into the shared cache, where the coming reads find it (or wait for it:
//! the cache runs one decode per chunk). A read elsewhere resets the
//! window to zero, so random readers cost nothing extra: one read that
//! happens to land near the previous one (1 in 30 for random reads of a
//! 256 MiB file with the slack below) is not enough to open a window, two
//! in a row are (1 in 1000).
//!
//! Bounded in every direction: one prefetch in flight per stream (a slow
//! disk cannot pile up work), a window of at most the maximum (callers
//! keep it well inside the cache budget, so prefetched chunks are not
//! evicted before use), and a fixed-size table of streams.
//!
//! # Remote sources: latency times throughput
//!
//! A source whose fetches cost a round trip
//! ([`ArraySource::fetch_latency`] is `Some`: an object store) fetches
//! each prefetch's chunks all at once (those of every box of its byte
//! range together: one request per box would cost one round trip per
//! box) and decodes each as soon as its bytes are in, so a prefetch
//! costs about one round trip plus its bytes' transfer. To run at the link's bandwidth
//! rather than one window per round trip, such a stream keeps more in
//! flight, by Little's law: to go on reading at rate `R` from a source
//! that answers after `L`, `R x L` bytes must be on their way. So for
//! these streams
//!
//! - up to [`REMOTE_PREFETCHES`] prefetches run at once (each still at
//!   least a quarter window of new bytes), so the next round trip starts
//!   while the previous one's chunks decode; each runs on a thread of its
//!   own (at most [`MAX_REMOTE_THREADS`] per [`Readahead`], one per
//!   mount), which waits on
//!   the network and decodes its chunks as they arrive, while the rayon
//!   workers serve reads;
//! - the largest window is `4 x R x L`, where `R` is the stream's measured
//!   rate (bytes read per second since it became sequential) and `L` the
//!   source's measured latency (a moving average of the time to first
//!   byte of its recent requests), kept between the configured maximum
//!   and [`REMOTE_WINDOW_FACTOR`] times it. The factor 4 is twice the
//!   `R x L` in flight, so that the rate can still grow: a window sized to
//!   exactly today's rate would pin it there. The upper bound keeps the
//!   window a fixed part of the cache budget (the configured maximum is
//!   an eighth of it, so at most half), whatever the link.
//!
//! Local sources are unchanged: one prefetch, the configured maximum.
//!
//! # The first reads
//!
//! A stream is sequential from its third read, so that a random reader
//! never opens a window. Over a network that costs the first reads a
//! round trip each, one after another: nothing of the file is on its way
//! before they ask (issue 41 counted it: of the 32 reads of 1 MiB of a
//! Zarr array at 20 ms, `tests/it/latency.rs`, 9 waited). So a stream of
//! a remote source whose first read is at byte 0 (`dd`, `cp`, a reader
//! starting at the top) is sequential from that read: its first window
//! is fetched together with it. A random reader that happens to start at
//! byte 0 costs one [`MIN_WINDOW`] fetched for nothing, once per open;
//! its later reads are judged as always.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lru::LruCache;
use parking_lot::Mutex;

use crate::engine::array::ArraySource;
use crate::engine::index::linear::{boxes, element_range};

/// The first window of a stream found sequential.
pub const MIN_WINDOW: u64 = 2 << 20;

/// Default largest window: 16 chunks of 1 MiB keep two cores busy with
/// room to spare, and 32 MiB is small beside the default cache budget.
pub const DEFAULT_MAX_WINDOW: u64 = 32 << 20;

/// How far a read may start from where the previous one ended and still
/// count as sequential: the kernel issues its readahead requests (up to
/// 1 MiB each) from several threads, so they arrive slightly out of order.
const SLACK: u64 = 4 << 20;

/// Reads in a row (the first of them included) that make a stream
/// sequential: a reader starting anywhere is sequential from its third
/// read, and a lone read that lands near the previous one is not.
const SEQUENTIAL_RUN: u32 = 3;

/// Streams remembered at once (open files being read).
const STREAMS: usize = 256;

/// Prefetches of one stream of a remote source running at once.
pub const REMOTE_PREFETCHES: usize = 4;

/// A remote stream's window may grow to this many times the maximum.
pub const REMOTE_WINDOW_FACTOR: u64 = 4;

/// Remote prefetches running at once per [`Readahead`] (a mount). Each runs on a
/// thread of its own, which waits while its chunks are fetched (the
/// rayon workers must not: they decode); beyond this many, a stream waits
/// for one of its own to end before starting another.
pub const MAX_REMOTE_THREADS: usize = 16;

/// The largest window of a stream reading at `rate` bytes/s from a
/// source of latency `latency` (`None`: local), for a configured maximum
/// of `max`: see the module docs.
pub fn window_limit(max: u64, latency: Option<Duration>, rate: f64) -> u64 {
    match latency {
        None => max,
        Some(l) => {
            let in_flight = 4.0 * rate * l.as_secs_f64();
            (in_flight as u64).clamp(max, max.saturating_mul(REMOTE_WINDOW_FACTOR))
        }
    }
}

struct Stream {
    /// The furthest end of a read so far.
    end: u64,
    /// Reads in a row that continued the stream (the first read counts).
    run: u32,
    /// Bytes to keep decoded beyond `end`; 0 = not sequential.
    window: u64,
    /// Everything before this offset was handed to a prefetch already.
    ahead_to: u64,
    /// Prefetches of this stream running.
    busy: Arc<AtomicUsize>,
    /// When the stream became sequential, and where it was then: its rate.
    since: Option<(Instant, u64)>,
}

/// The readahead state of all open files.
pub struct Readahead {
    streams: Mutex<LruCache<u64, Stream>>,
    max_window: u64,
    /// Remote prefetch threads running (at most [`MAX_REMOTE_THREADS`]).
    remote_threads: Arc<AtomicUsize>,
}

impl Readahead {
    /// Readahead with windows up to `max_window` bytes (0 disables it).
    pub fn new(max_window: u64) -> Readahead {
        Readahead {
            streams: Mutex::new(LruCache::new(NonZeroUsize::new(STREAMS).expect("non-zero"))),
            max_window,
            remote_threads: Arc::default(),
        }
    }

    /// Note a read of `len` bytes at `offset` of `array` by stream `id`
    /// (e.g. a FUSE file handle), and start prefetching if the stream is
    /// sequential. Returns at once; the decoding runs on the rayon pool.
    pub fn on_read(&self, id: u64, array: &Arc<dyn ArraySource>, offset: u64, len: u64) {
        if self.max_window == 0 || len == 0 {
            return;
        }
        let size = array.meta().nbytes();
        let end = offset.saturating_add(len).min(size);
        let (from, to, busy, remote) = {
            let mut streams = self.streams.lock();
            let s = streams.get_or_insert_mut(id, || Stream {
                end: u64::MAX,
                run: 0,
                window: 0,
                ahead_to: 0,
                busy: Arc::new(AtomicUsize::new(0)),
                since: None,
            });
            let latency = array.fetch_latency();
            let continues = s.end != u64::MAX && offset.abs_diff(s.end) <= SLACK;
            s.run = if continues {
                s.run.saturating_add(1)
            } else if s.end == u64::MAX && offset == 0 && latency.is_some() {
                // A remote file read from its first byte: sequential at
                // once (see the module docs, "The first reads").
                s.end = 0;
                SEQUENTIAL_RUN
            } else {
                1
            };
            if s.run >= SEQUENTIAL_RUN {
                let (t0, at0) = *s.since.get_or_insert((Instant::now(), s.end));
                let secs = t0.elapsed().as_secs_f64();
                let rate = if secs > 0.01 {
                    s.end.saturating_sub(at0) as f64 / secs
                } else {
                    0.0
                };
                let max = window_limit(self.max_window, latency, rate);
                // (A small cache budget can make the maximum the smaller.)
                s.window = (s.window * 2).clamp(MIN_WINDOW.min(max), max);
                s.end = s.end.max(end);
            } else {
                s.window = 0;
                s.end = end;
                s.ahead_to = end;
                s.since = None;
                return;
            }
            let from = s.ahead_to.max(s.end);
            let to = s.end.saturating_add(s.window).min(size);
            // Wait for at least a quarter window of new work, so a stream
            // of small reads does not start a prefetch per read.
            if to <= from || (to < size && to - from < s.window / 4) {
                return;
            }
            let allowed = match latency {
                Some(_) => REMOTE_PREFETCHES,
                None => 1,
            };
            if s.busy.fetch_add(1, Ordering::AcqRel) >= allowed {
                s.busy.fetch_sub(1, Ordering::AcqRel);
                return;
            }
            if latency.is_some()
                && self.remote_threads.fetch_add(1, Ordering::AcqRel) >= MAX_REMOTE_THREADS
            {
                self.remote_threads.fetch_sub(1, Ordering::AcqRel);
                s.busy.fetch_sub(1, Ordering::AcqRel);
                return;
            }
            s.ahead_to = to;
            log::trace!(
                "{}: readahead of stream {id}, window {} KiB: bytes {from}..{to}",
                array.meta().source,
                s.window >> 10
            );
            (from, to, s.busy.clone(), latency.is_some())
        };
        let array = array.clone();
        let done = busy.clone();
        let job = move || {
            // A panic escaping a rayon job aborts the process (rayon's
            // default), and the decode code a prefetch runs is the read
            // path's: contain it as the FUSE adapter contains a read's, and
            // leave the error, if any, to the real read.
            let run = || prefetch_bytes(array.as_ref(), from, to);
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
                log::error!(
                    "readahead of {} bytes {from}..{to}: internal error, skipped (please \
                     report this bug): {}",
                    array.meta().source,
                    crate::error::panic_message(panic.as_ref())
                );
            }
            busy.fetch_sub(1, Ordering::Release);
        };
        if !remote {
            rayon::spawn(job);
            return;
        }
        // A remote prefetch waits on the network while its chunks are
        // fetched: on a thread of its own, so that no rayon worker waits
        // (it decodes them there too, as they arrive).
        let threads = self.remote_threads.clone();
        let spawned = std::thread::Builder::new()
            .name("slabfs-prefetch".into())
            .spawn(move || {
                job();
                threads.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            log::debug!("readahead: no thread for a remote prefetch ({e}), skipped");
            self.remote_threads.fetch_sub(1, Ordering::AcqRel);
            done.fetch_sub(1, Ordering::Release);
        }
    }

    /// Forget stream `id` (its file was closed).
    pub fn forget(&self, id: u64) {
        self.streams.lock().pop(&id);
    }
}

/// Decode what reading bytes `[from, to)` of `array` needs.
pub fn prefetch_bytes(array: &dyn ArraySource, from: u64, to: u64) {
    let meta = array.meta();
    let (first, end) = element_range(
        from,
        to.saturating_sub(from),
        meta.item_size() as u64,
        meta.num_elements(),
    );
    array.prefetch(&boxes(&meta.shape, first, end));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;
    use crate::engine::array::ArrayMeta;
    use crate::engine::index::Region;
    use crate::error::Result;
    use std::time::{Duration, Instant};

    /// Records the element ranges it is asked to prefetch.
    struct Recorder {
        meta: ArrayMeta,
        asked: Mutex<Vec<(u64, u64)>>,
        /// What it answers as its fetch latency (`None`: local).
        latency: Option<Duration>,
    }

    impl ArraySource for Recorder {
        fn meta(&self) -> &ArrayMeta {
            &self.meta
        }
        fn read_region(&self, _: &Region, _: &mut [u8]) -> Result<()> {
            unreachable!("readahead only prefetches")
        }
        fn fetch_latency(&self) -> Option<Duration> {
            self.latency
        }
        fn prefetch(&self, regions: &[Region]) {
            // 1-d: each region is an element range.
            for region in regions {
                let (s, n) = (region.start[0], region.count[0]);
                self.asked.lock().push((s, s + n));
            }
        }
    }

    fn recorder(bytes: u64) -> Arc<Recorder> {
        recorder_of(bytes, None)
    }

    fn remote_recorder(bytes: u64) -> Arc<Recorder> {
        recorder_of(bytes, Some(Duration::from_millis(20)))
    }

    fn recorder_of(bytes: u64, latency: Option<Duration>) -> Arc<Recorder> {
        Arc::new(Recorder {
            meta: ArrayMeta::new("t", vec![bytes], DataType::UInt8, vec![0]).unwrap(),
            asked: Mutex::new(Vec::new()),
            latency,
        })
    }

    /// Issue 41: a remote file read from its first byte prefetches its
    /// first window with its first read (it waited for a third read, each
    /// of the two before it a round trip of its own); read from elsewhere,
    /// or a local file, it still waits for the third.
    #[test]
    fn a_remote_stream_from_byte_zero_is_sequential_at_once() {
        let r = remote_recorder(256 << 20);
        let a: Arc<dyn ArraySource> = r.clone();
        let ra = Readahead::new(8 << 20);
        ra.on_read(1, &a, 0, K);
        assert_eq!(asked(&r, 1), vec![(K, K + MIN_WINDOW)]);
        // The next reads go on growing the window from there.
        ra.on_read(1, &a, K, K);
        let got = asked(&r, 2);
        assert_eq!(got[1], (K + MIN_WINDOW, 2 * K + 2 * MIN_WINDOW), "{got:?}");

        // From elsewhere: the third read, as for any stream.
        let r = remote_recorder(256 << 20);
        let a: Arc<dyn ArraySource> = r.clone();
        ra.on_read(2, &a, 10 * K, K);
        ra.on_read(2, &a, 11 * K, K);
        std::thread::sleep(Duration::from_millis(50));
        assert!(r.asked.lock().is_empty());
        ra.on_read(2, &a, 12 * K, K);
        assert_eq!(asked(&r, 1), vec![(13 * K, 13 * K + MIN_WINDOW)]);

        // A local file from byte 0: the third read too.
        let r = recorder(256 << 20);
        let a: Arc<dyn ArraySource> = r.clone();
        ra.on_read(3, &a, 0, K);
        ra.on_read(3, &a, K, K);
        std::thread::sleep(Duration::from_millis(50));
        assert!(r.asked.lock().is_empty());
    }

    /// Wait until the background prefetches have recorded `n` ranges.
    fn asked(r: &Recorder, n: usize) -> Vec<(u64, u64)> {
        let t = Instant::now();
        while r.asked.lock().len() < n && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        r.asked.lock().clone()
    }

    const K: u64 = 128 << 10;

    #[test]
    fn sequential_reads_prefetch_a_growing_window_once() {
        let r = recorder(256 << 20);
        let a: Arc<dyn ArraySource> = r.clone();
        let ra = Readahead::new(8 << 20);
        // Sequential from the third read on.
        ra.on_read(1, &a, 0, K);
        ra.on_read(1, &a, K, K);
        std::thread::sleep(Duration::from_millis(50));
        assert!(r.asked.lock().is_empty());
        ra.on_read(1, &a, 2 * K, K);
        let got = asked(&r, 1);
        assert_eq!(got, vec![(3 * K, 3 * K + MIN_WINDOW)]);
        // Reads inside the prefetched range extend it by at least a
        // quarter window at a time, never prefetching a byte twice.
        for i in 3..64 {
            ra.on_read(1, &a, i * K, K);
            std::thread::sleep(Duration::from_millis(2));
        }
        // The prefetches run on other threads: wait (under a bound) for
        // the window to have grown, so a loaded machine is not a failure.
        let grown = || {
            r.asked
                .lock()
                .last()
                .is_some_and(|l| l.1 > 64 * K + MIN_WINDOW)
        };
        let t = Instant::now();
        while !grown() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let got = asked(&r, 2);
        for w in got.windows(2) {
            assert_eq!(w[0].1, w[1].0, "gaps or overlaps: {got:?}");
        }
        let last = got.last().unwrap();
        assert!(last.1 <= 64 * K + (8 << 20), "beyond the window: {last:?}");
        assert!(last.1 > 64 * K + MIN_WINDOW, "window did not grow: {got:?}");
    }

    #[test]
    fn remote_windows_follow_rate_times_latency_within_bounds() {
        let max = 32 << 20;
        // Local: the configured maximum, whatever the rate.
        assert_eq!(window_limit(max, None, 1e9), max);
        // 20 ms at 1 GB/s: 4 x 20 MB = 80 MB in flight.
        let l = Some(Duration::from_millis(20));
        assert_eq!(window_limit(max, l, 1e9), 80_000_000);
        // Never below the maximum (a slow start must be able to grow)...
        assert_eq!(window_limit(max, l, 1e6), max);
        // ...nor above REMOTE_WINDOW_FACTOR times it, however long the link.
        let far = Some(Duration::from_millis(500));
        assert_eq!(window_limit(max, far, 1e9), max * REMOTE_WINDOW_FACTOR);
    }

    #[test]
    fn a_window_smaller_than_the_minimum_is_honoured() {
        let r = recorder(64 << 20);
        let a: Arc<dyn ArraySource> = r.clone();
        let ra = Readahead::new(K);
        for i in 0..3 {
            ra.on_read(4, &a, i * K, K);
        }
        assert_eq!(asked(&r, 1), vec![(3 * K, 4 * K)]);
    }

    #[test]
    fn random_reads_prefetch_nothing() {
        let r = recorder(256 << 20);
        let a: Arc<dyn ArraySource> = r.clone();
        let ra = Readahead::new(8 << 20);
        // Including one read right after another (1 in 30 random reads
        // of a 256 MiB file lands within the slack of the previous one).
        for off in [
            100 << 20,
            7 << 20,
            (7 << 20) + K,
            200 << 20,
            50 << 20,
            49 << 20,
        ] {
            ra.on_read(2, &a, off, K);
        }
        std::thread::sleep(Duration::from_millis(100));
        assert!(r.asked.lock().is_empty());
    }

    #[test]
    fn prefetch_stops_at_the_end_of_the_file() {
        let r = recorder(3 << 20);
        let a: Arc<dyn ArraySource> = r.clone();
        let ra = Readahead::new(8 << 20);
        ra.on_read(3, &a, 0, K);
        ra.on_read(3, &a, K, K);
        ra.on_read(3, &a, 2 * K, K);
        assert_eq!(asked(&r, 1), vec![(3 * K, 3 * K + MIN_WINDOW)]);
        ra.on_read(3, &a, 3 * K, K);
        assert_eq!(
            asked(&r, 2),
            vec![(3 * K, 3 * K + MIN_WINDOW), (3 * K + MIN_WINDOW, 3 << 20)]
        );
        ra.on_read(3, &a, 4 * K, K);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(r.asked.lock().len(), 2, "nothing left to prefetch");
    }
}
