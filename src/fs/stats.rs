//! The mount's counters and the `.slabfs/stats` document.
//!
//! Operators keep mounts alive for months and paste numbers into bug
//! reports, so the daemon counts what it does and publishes it as JSON in a
//! hidden file at the mount root (`cat MOUNT/.slabfs/stats`):
//!
//! ```json
//! {
//!   "uptime_seconds": 3600.2,
//!   "reads": {"requests": 51234, "bytes": 6710886400},
//!   "read_latency_us": {"count": 51234, "p50": 95, "p90": 410, "p99": 2300, "max": 18211},
//!   "errors": {"EIO": 2, "ENOENT": 40},
//!   "cache": {"hits": 50011, "misses": 1223, "decodes": 1190, "evictions": 12,
//!             "bytes": 536608768, "entries": 1024, "budget": 536870912},
//!   "refresh": {"interval_seconds": 5, "runs": 720, "changes": 14, "failures": 0,
//!               "walks": 2, "watching": true, "watched_directories": 41}
//! }
//! ```
//!
//! - `reads`: FUSE read requests answered with data and the bytes sent.
//! - `read_latency_us`: the time the core takes to produce a read's bytes
//!   (chunk fetch, decode, copy), in microseconds, over every read since
//!   mount. Percentiles come from a fixed log-scale histogram
//!   ([`Histogram`]: 8 buckets per power of two, so a reported value is
//!   within 12.5% above the true one; memory is constant whatever the
//!   uptime). `max` is exact.
//! - `errors`: failed requests of every kind by errno name, as the caller's
//!   syscall saw them (`ENOENT` counts lookups of names that do not exist,
//!   which shells do all the time; `EIO` is a chunk that cannot be read).
//! - `cache`: the decoded-chunk cache ([`crate::engine::cache::CacheStats`]).
//! - `refresh`: live-refresh passes run, paths added, removed or changed
//!   that they found, and passes that could not re-open the source;
//!   `walks` counts the passes that re-loaded the whole source (the others
//!   re-loaded only what the watcher saw change), `watching` whether
//!   changes are watched (inotify) rather than found by periodic walks, and
//!   `watched_directories` how many directories are watched.
//!
//! Recording is on the read path of every request, possibly from many
//! threads at once, so it is a handful of relaxed atomic adds: no lock,
//! no allocation. Counters are read without a global snapshot, so a
//! document may be a few requests inconsistent with itself; that is fine
//! for monitoring.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::engine::cache::ChunkCache;

/// Errnos the core returns, by name; anything else counts as "other".
const ERRNOS: [(i32, &str); 8] = [
    (libc::EIO, "EIO"),
    (libc::ENOENT, "ENOENT"),
    (libc::ENOTDIR, "ENOTDIR"),
    (libc::EISDIR, "EISDIR"),
    (libc::EROFS, "EROFS"),
    (libc::ENODATA, "ENODATA"),
    (libc::ERANGE, "ERANGE"),
    (libc::EINVAL, "EINVAL"),
];

/// The mount's counters. One per mount, shared by every request thread and
/// the refresh thread.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    latency: Histogram,
    /// `errors[i]` counts `ERRNOS[i]`; the last slot is "other".
    errors: [AtomicU64; ERRNOS.len() + 1],
    refresh_interval_ms: AtomicU64,
    refreshes: AtomicU64,
    refresh_changes: AtomicU64,
    refresh_failures: AtomicU64,
    refresh_walks: AtomicU64,
    /// Watched directories + 1 while watching; 0 when not watching.
    watching: AtomicU64,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            started: Instant::now(),
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            latency: Histogram::new(),
            errors: Default::default(),
            refresh_interval_ms: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            refresh_changes: AtomicU64::new(0),
            refresh_failures: AtomicU64::new(0),
            refresh_walks: AtomicU64::new(0),
            watching: AtomicU64::new(0),
        }
    }

    /// A read answered with `bytes` bytes after `took`.
    pub fn record_read(&self, bytes: usize, took: Duration) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.latency.record(took);
    }

    /// A read that failed after `took` (its errno is counted by
    /// [`Stats::record_error`]).
    pub fn record_failed_read(&self, took: Duration) {
        self.latency.record(took);
    }

    /// A request answered with `errno`.
    pub fn record_error(&self, errno: i32) {
        let i = ERRNOS
            .iter()
            .position(|&(e, _)| e == errno)
            .unwrap_or(ERRNOS.len());
        self.errors[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The refresh interval shown in the document (`None`: refresh off).
    pub fn set_refresh_interval(&self, every: Option<Duration>) {
        let ms = every.map_or(0, |d| d.as_millis().clamp(1, u64::MAX as u128) as u64);
        self.refresh_interval_ms.store(ms, Ordering::Relaxed);
    }

    /// A refresh pass that found `changes` paths added, removed or changed.
    pub fn record_refresh(&self, changes: usize) {
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        self.refresh_changes
            .fetch_add(changes as u64, Ordering::Relaxed);
    }

    /// A refresh pass that could not re-open the source.
    pub fn record_refresh_failure(&self) {
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        self.refresh_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// A refresh pass that re-loads the whole source (counted as a run by
    /// [`Stats::record_refresh`] or [`Stats::record_refresh_failure`]).
    pub fn record_full_walk(&self) {
        self.refresh_walks.fetch_add(1, Ordering::Relaxed);
    }

    /// Changes are watched in `Some(n)` directories, or not watched.
    pub fn set_watching(&self, directories: Option<usize>) {
        let v = directories.map_or(0, |n| n as u64 + 1);
        self.watching.store(v, Ordering::Relaxed);
    }

    /// The count of errors with `errno` so far.
    pub fn errors(&self, errno: i32) -> u64 {
        let i = ERRNOS
            .iter()
            .position(|&(e, _)| e == errno)
            .unwrap_or(ERRNOS.len());
        self.errors[i].load(Ordering::Relaxed)
    }

    /// The document, as a JSON value.
    pub fn to_json(&self, cache: Option<&ChunkCache>) -> Value {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut errors = serde_json::Map::new();
        for (i, counter) in self.errors.iter().enumerate() {
            let n = load(counter);
            if n > 0 {
                let name = ERRNOS.get(i).map_or("other", |&(_, name)| name);
                errors.insert(name.into(), json!(n));
            }
        }
        let lat = self.latency.summary();
        let interval = load(&self.refresh_interval_ms);
        let mut doc = json!({
            "uptime_seconds": (self.started.elapsed().as_millis() as f64) / 1000.0,
            "reads": {
                "requests": load(&self.reads),
                "bytes": load(&self.read_bytes),
            },
            "read_latency_us": {
                "count": lat.count,
                "p50": lat.p50 / 1000,
                "p90": lat.p90 / 1000,
                "p99": lat.p99 / 1000,
                "max": lat.max / 1000,
            },
            "errors": errors,
            "refresh": {
                "interval_seconds": if interval == 0 {
                    Value::Null
                } else {
                    json!(interval as f64 / 1000.0)
                },
                "runs": load(&self.refreshes),
                "changes": load(&self.refresh_changes),
                "failures": load(&self.refresh_failures),
                "walks": load(&self.refresh_walks),
                "watching": load(&self.watching) > 0,
                "watched_directories": load(&self.watching).saturating_sub(1),
            },
        });
        if let Some(cache) = cache {
            let c = cache.stats();
            doc["cache"] = json!({
                "hits": c.hits,
                "misses": c.misses,
                "decodes": c.decodes,
                "evictions": c.evictions,
                "prefetches": c.prefetches,
                "uncached": c.uncached,
                "bytes": c.bytes,
                "entries": c.entries,
                "budget": cache.budget(),
            });
        }
        doc
    }

    /// The document as the stats file serves it: pretty JSON and a newline.
    pub fn render(&self, cache: Option<&ChunkCache>) -> Vec<u8> {
        let mut out =
            serde_json::to_vec_pretty(&self.to_json(cache)).expect("stats always serialize");
        out.push(b'\n');
        out
    }
}

/// Sub-buckets per power of two, as a bit count: 2^3 = 8, so a bucket
/// spans at most 1/8 of its lower bound.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Values below `SUB` get a bucket each; each power of two from `SUB` up to
/// 2^63 gets `SUB` buckets.
const BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * SUB) as usize;

/// A log-scale histogram of durations in nanoseconds: fixed size (about
/// 4 KiB of atomics), lock-free recording, percentiles accurate to one
/// bucket (12.5%).
#[derive(Debug)]
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    max: AtomicU64,
}

/// Percentiles of a [`Histogram`], in nanoseconds (0 when empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
        }
    }

    /// The bucket of value `v`.
    fn bucket(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // v's highest bit, >= SUB_BITS
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        (SUB * (e - SUB_BITS + 1) as u64 + sub) as usize
    }

    /// The largest value in bucket `b`.
    fn upper(b: usize) -> u64 {
        let b = b as u64;
        if b < SUB {
            return b;
        }
        let e = (b / SUB) as u32 + SUB_BITS - 1;
        let sub = b % SUB;
        // (SUB + sub + 1) << (e - SUB_BITS), minus one, without overflow.
        ((SUB + sub) << (e - SUB_BITS)) + ((1u64 << (e - SUB_BITS)) - 1)
    }

    pub fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[Self::bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(ns, Ordering::Relaxed);
    }

    pub fn summary(&self) -> Summary {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let count: u64 = counts.iter().sum();
        let max = self.max.load(Ordering::Relaxed);
        let quantile = |q: f64| -> u64 {
            if count == 0 {
                return 0;
            }
            // The rank of the q-quantile, 1-based: the smallest value with
            // at least q of the samples at or below it.
            let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
            let mut seen = 0;
            for (b, &n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return Self::upper(b).min(max);
                }
            }
            max
        };
        Summary {
            count,
            p50: quantile(0.50),
            p90: quantile(0.90),
            p99: quantile(0.99),
            max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_u64_range_with_bounded_error() {
        // Every bucket starts right after the previous one ends.
        assert_eq!(Histogram::bucket(0), 0);
        for b in 0..BUCKETS - 1 {
            let end = Histogram::upper(b);
            assert_eq!(Histogram::bucket(end), b, "upper bound of {b}");
            assert_eq!(Histogram::bucket(end + 1), b + 1, "start of {}", b + 1);
        }
        assert_eq!(Histogram::upper(BUCKETS - 1), u64::MAX);
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
        // A bucket's upper bound is within 1/8 of any value in it.
        for v in [9u64, 100, 1_000, 123_456, 10_000_000_007, u64::MAX / 3] {
            let up = Histogram::upper(Histogram::bucket(v));
            assert!(up >= v && (up - v) as f64 <= v as f64 / 8.0, "{v} -> {up}");
        }
    }

    #[test]
    fn percentiles() {
        let h = Histogram::new();
        assert_eq!(h.summary().count, 0);
        assert_eq!(h.summary().p99, 0);
        // 1..=1000 microseconds, once each.
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.max, 1_000_000);
        for (got, want) in [(s.p50, 500_000u64), (s.p90, 900_000), (s.p99, 990_000)] {
            assert!(
                got >= want && got as f64 <= want as f64 * 1.125,
                "{got} vs {want}"
            );
        }
        // A single huge outlier moves max, not p99.
        h.record(Duration::from_secs(100));
        let s = h.summary();
        assert_eq!(s.max, 100_000_000_000);
        assert!(s.p99 < 1_200_000);
    }

    #[test]
    fn counters_from_many_threads_add_up() {
        let stats = Stats::new();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        stats.record_read(4096, Duration::from_micros(10));
                    }
                    stats.record_error(libc::EIO);
                    stats.record_error(libc::ENOENT);
                    stats.record_error(libc::EPIPE);
                });
            }
        });
        let doc = stats.to_json(None);
        assert_eq!(doc["reads"]["requests"], 8000);
        assert_eq!(doc["reads"]["bytes"], 8000 * 4096);
        assert_eq!(doc["read_latency_us"]["count"], 8000);
        assert_eq!(doc["read_latency_us"]["max"], 10);
        assert_eq!(doc["errors"], json!({"EIO": 8, "ENOENT": 8, "other": 8}));
        assert!(doc.get("cache").is_none());
        assert_eq!(doc["refresh"]["interval_seconds"], Value::Null);
    }

    #[test]
    fn document_parses_and_names_the_cache() {
        let stats = Stats::new();
        stats.set_refresh_interval(Some(Duration::from_secs(5)));
        stats.record_refresh(3);
        stats.record_refresh(0);
        stats.record_refresh_failure();
        stats.record_full_walk();
        stats.set_watching(Some(7));
        let cache = ChunkCache::new(1 << 20);
        let bytes = stats.render(Some(&cache));
        assert_eq!(bytes.last(), Some(&b'\n'));
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(doc["cache"]["budget"], 1 << 20);
        assert_eq!(doc["cache"]["hits"], 0);
        assert_eq!(
            doc["refresh"],
            json!({"interval_seconds": 5.0, "runs": 3, "changes": 3, "failures": 1,
                   "walks": 1, "watching": true, "watched_directories": 7})
        );
        stats.set_watching(None);
        assert_eq!(stats.to_json(None)["refresh"]["watching"], false);
        assert!(doc["uptime_seconds"].as_f64().unwrap() >= 0.0);
    }
}
