//! The mount's counters and the `.slabfs/stats` document.
//!
//! Operators keep mounts alive for months and paste numbers into bug
//! reports, so the daemon counts what it does and publishes it as JSON in a
//! hidden file at the mount root (`cat MOUNT/.slabfs/stats`):
//!
//! ```json
//! {
//!   "uptime_seconds": 3600.2,
//!   "reads": {"requests": 51234, "bytes": 6710886400, "deferred": 1220, "waiting": 3},
//!   "read_latency_us": {"count": 51234, "p50": 95, "p90": 410, "p99": 2300, "max": 18211},
//!   "fuse_latency_us": {"getattr": {"count": 310, "p50": 4, "p90": 9, "p99": 30, "max": 52},
//!                       "read": {"count": 51234, "p50": 120, ...}, ...},
//!   "errors": {"EIO": 2, "ENOENT": 40},
//!   "cache": {"hits": 50011, "misses": 1223, "decodes": 1190, "evictions": 12,
//!             "bytes": 536608768, "entries": 1024, "budget": 536870912},
//!   "buffers": {"bytes": 50331648, "cap": 67108864, "hits": 51002, "misses": 31},
//!   "decodes": {"bytes+zstd": {"bytes": 1246756864, "latency_us": {"count": 1190, ...}}},
//!   "refresh": {"interval_seconds": 5, "runs": 720, "changes": 14, "failures": 0,
//!               "walks": 2, "watching": true, "watched_directories": 41,
//!               "duration_us": {"count": 720, "p50": 310, ...}},
//!   "not_shown": 0,
//!   "datasets": {"open": 1000, "max_open": 1000, "opens": 5210, "failures": 1,
//!                "evictions": 4210},
//!   "inodes": 3120,
//!   "remote": {"s3://bucket": {"requests": {"GET": 12, "ranged_GET": 1204, "LIST": 3,
//!                                           "HEAD": 9, "other": 0},
//!                              "bytes": 1263534080, "retries": 9, "errors": 9,
//!                              "not_modified": 0, "stalls": 1, "resets": 2,
//!                              "throttles": 6,
//!                              "latency_us": {"count": 1235, "p50": 9100, ...}}},
//!   "remote_throttle": {"request_limit": 32, "max_requests": 64, "in_flight": 5,
//!                       "backoffs": 1, "resume_in_ms": 0, "hedges": 12, "hedges_won": 9},
//!   "disk_cache": {"hits": 250, "misses": 6, "evictions": 0, "corrupt": 0,
//!                  "bytes_read": 262144000, "bytes_written": 6291456,
//!                  "write_errors": 0, "bytes_held": 268437000,
//!                  "size_limit": 10737418240, "bytes_pending": 0}
//! }
//! ```
//!
//! - `reads`: FUSE read requests answered with data and the bytes sent;
//!   `deferred`, reads that may have waited on the network and were
//!   handed to threads of their own ([`crate::fs::waiting`]), and
//!   `waiting`, how many of those are unanswered now.
//! - `read_latency_us`: the time the core takes to produce a read's bytes
//!   (chunk fetch, decode, copy), in microseconds, over every read since
//!   mount. Percentiles come from a fixed log-scale histogram
//!   ([`Histogram`]: 8 buckets per power of two, so a reported value is
//!   within 12.5% above the true one; memory is constant whatever the
//!   uptime). `max` is exact.
//! - `fuse_latency_us`: every FUSE request by operation (`lookup`,
//!   `getattr`, `open`, `read`, `readdir`...; `other` for the rest: the
//!   refused writes, `flush`, `ioctl`...), failed ones too: how many and
//!   how long from its arrival to its answer (for a read handed to a
//!   waiting thread, the wait included), in microseconds. Operations never
//!   asked are left out.
//! - `errors`: failed requests of every kind by errno name, as the caller's
//!   syscall saw them (`ENOENT` counts lookups of names that do not exist,
//!   which shells do all the time; `EIO` is a chunk that cannot be read).
//! - `cache`: the decoded-chunk cache ([`crate::engine::cache::CacheStats`]).
//! - `decodes`: chunks decoded, by codec chain (its codecs in encoding
//!   order joined by `+`): the bytes they made and the time each decode
//!   took ([`crate::engine::decodes`]); decodes straight into a reply
//!   included, the fetch before and the copy after not.
//! - `disk_cache` (with `--disk-cache`): blocks reads took from it
//!   (`hits`) or fetched from the store (`misses`; each block a read
//!   needs counts once, a whole Icechunk object as one), removed to stay
//!   under the size limit (`evictions`) or found damaged and read again
//!   (`corrupt`), bytes read from and written to it, failed writes (each
//!   turns writes off for a minute), the bytes it holds and those waiting
//!   to be written ([`crate::storage::disk_cache`]).
//! - `buffers`: the read path's buffer pool ([`crate::engine::buffers`]):
//!   bytes of spare and per-thread scratch buffers kept for reuse, their
//!   cap, and buffers handed out reused (`hits`) or allocated (`misses`).
//! - `refresh`: live-refresh passes run, paths added, removed or changed
//!   that they found, and passes that could not re-open the source;
//!   `walks` counts the passes that re-loaded the whole source (the others
//!   re-loaded only what the watcher saw change), `watching` whether
//!   changes are watched (inotify) rather than found by periodic walks,
//!   `watched_directories` how many directories are watched, and
//!   `duration_us` the time of the passes that completed (`runs` minus
//!   `failures`), in microseconds.
//! - `not_shown`: the arrays, files and datasets that could not be loaded
//!   at their dataset's last load, each logged as `not shown:` (what a
//!   refresh could not re-open stays shown as it was, and counts here
//!   too): for a mount of one dataset, as of its last load (the mount,
//!   then each refresh pass that re-opened it); for a directory of
//!   datasets, summed over those open now (a dataset that fails to open as
//!   a whole counts in `datasets.failures` instead).
//! - `datasets` (a mount of a directory, whose datasets open when used:
//!   [`crate::fs::datasets`]): datasets open now and the most kept open
//!   (`--max-open-datasets`), opens since mount, opens that failed (the
//!   dataset's requests got EIO; which ones, and why, is in
//!   `.slabfs/errors`: [`crate::fs::failures`]), and datasets closed to
//!   make room (each costs an open again at its next use).
//! - `inodes`: the nodes the kernel holds (looked up and not forgotten):
//!   what the daemon keeps a path for ([`crate::fs::inodes`]).
//! - `remote` (only when the mount reads URLs): per source store, the HTTP
//!   requests sent by kind, bytes fetched, retries, failed attempts, `304`
//!   answers, stalls (attempts abandoned after `--stall-timeout` without a
//!   byte), resets (attempts and bodies cut by the connection: reset,
//!   closed, refused), throttles (`503`/`429` answers) and time to first
//!   byte; see [`crate::storage::remote::metrics`] for what each counts.
//!   They are the process's counters, named by store URL without user info
//!   or query string (never a secret).
//! - `remote_throttle` (with `remote`): the mount's limit of remote
//!   requests in flight, lowered by throttling answers and grown back as
//!   answers come ([`crate::storage::remote::throttle`]): `request_limit`
//!   now, `max_requests` its ceiling (`--max-requests`), `in_flight` now,
//!   `backoffs` since start (one per overload, however many `503`s it
//!   sent), and `resume_in_ms`, the time left of a backoff in progress
//!   (no request is sent before it ends); `hedges`, GETs sent a second
//!   time because the first made no progress, and `hedges_won`, those
//!   whose second attempt answered first
//!   ([`crate::storage::remote::hedge`]).
//!
//! Recording is on the read path of every request, possibly from many
//! threads at once, so it is a handful of relaxed atomic adds: no lock,
//! no allocation. Counters are read without a global snapshot, so a
//! document may be a few requests inconsistent with itself; that is fine
//! for monitoring.
//!
//! The metrics endpoint (`--metrics`, [`crate::metrics`]) reads these same
//! counters when scraped ([`Stats::collect`], and the chunk cache's and the
//! remote stores' own collectors): one set of counters, two views.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::engine::cache::ChunkCache;
pub use crate::histogram::{Histogram, Summary};
use crate::metrics::{Kind, Out};
use crate::storage::remote::{Remote, metrics, throttle};

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

/// A FUSE operation, as counted ([`Stats::record_op`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lookup,
    Getattr,
    Open,
    Read,
    Release,
    Opendir,
    Readdir,
    Releasedir,
    Forget,
    Statfs,
    Getxattr,
    Listxattr,
    Access,
    /// Everything else: `init`, `flush`, `fsync`, `ioctl`, and the
    /// requests to write, refused (`EROFS`).
    Other,
}

impl Op {
    /// Every operation, in the order of [`Stats`]' histograms.
    pub const ALL: [Op; 14] = [
        Op::Lookup,
        Op::Getattr,
        Op::Open,
        Op::Read,
        Op::Release,
        Op::Opendir,
        Op::Readdir,
        Op::Releasedir,
        Op::Forget,
        Op::Statfs,
        Op::Getxattr,
        Op::Listxattr,
        Op::Access,
        Op::Other,
    ];

    /// Its name in `.slabfs/stats` and in the `op` label.
    pub fn name(self) -> &'static str {
        match self {
            Op::Lookup => "lookup",
            Op::Getattr => "getattr",
            Op::Open => "open",
            Op::Read => "read",
            Op::Release => "release",
            Op::Opendir => "opendir",
            Op::Readdir => "readdir",
            Op::Releasedir => "releasedir",
            Op::Forget => "forget",
            Op::Statfs => "statfs",
            Op::Getxattr => "getxattr",
            Op::Listxattr => "listxattr",
            Op::Access => "access",
            Op::Other => "other",
        }
    }
}

/// The mount's counters. One per mount, shared by every request thread and
/// the refresh thread.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    /// The mount's remote state, whose counters the document shows.
    remote: Option<Remote>,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    /// Reads handed to the waiting threads, ever and now.
    reads_deferred: AtomicU64,
    reads_waiting: AtomicU64,
    latency: Histogram,
    /// Every FUSE request, by [`Op`] (its index in [`Op::ALL`]): arrival
    /// to answer.
    ops: [Histogram; Op::ALL.len()],
    /// `errors[i]` counts `ERRNOS[i]`; the last slot is "other".
    errors: [AtomicU64; ERRNOS.len() + 1],
    refresh_interval_ms: AtomicU64,
    refreshes: AtomicU64,
    refresh_changes: AtomicU64,
    refresh_failures: AtomicU64,
    refresh_walks: AtomicU64,
    /// The time of each refresh pass that completed.
    refresh_time: Histogram,
    /// Watched directories + 1 while watching; 0 when not watching.
    watching: AtomicU64,
    /// What the last load of a mount of one dataset could not show.
    not_shown: AtomicU64,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats::new()
    }
}

impl Stats {
    /// Show the counters of `remote` (the mount's remote state).
    pub fn set_remote(&mut self, remote: Remote) {
        self.remote = Some(remote);
    }

    pub fn new() -> Stats {
        Stats {
            started: Instant::now(),
            remote: None,
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            reads_deferred: AtomicU64::new(0),
            reads_waiting: AtomicU64::new(0),
            latency: Histogram::new(),
            ops: std::array::from_fn(|_| Histogram::new()),
            errors: Default::default(),
            refresh_interval_ms: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            refresh_changes: AtomicU64::new(0),
            refresh_failures: AtomicU64::new(0),
            refresh_walks: AtomicU64::new(0),
            refresh_time: Histogram::new(),
            watching: AtomicU64::new(0),
            not_shown: AtomicU64::new(0),
        }
    }

    /// A FUSE request `op` answered `took` after it arrived.
    pub fn record_op(&self, op: Op, took: Duration) {
        self.ops[op as usize].record(took);
    }

    /// A read answered with `bytes` bytes after `took`.
    pub fn record_read(&self, bytes: usize, took: Duration) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.latency.record(took);
    }

    /// A read handed to the waiting threads ([`crate::fs::waiting`]).
    pub fn read_deferred(&self) {
        self.reads_deferred.fetch_add(1, Ordering::Relaxed);
        self.reads_waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// A read handed to the waiting threads was answered.
    pub fn deferred_read_done(&self) {
        self.reads_waiting.fetch_sub(1, Ordering::Relaxed);
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

    /// A refresh pass that found `changes` paths added, removed or changed,
    /// in `took`.
    pub fn record_refresh(&self, changes: usize, took: Duration) {
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        self.refresh_changes
            .fetch_add(changes as u64, Ordering::Relaxed);
        self.refresh_time.record(took);
    }

    /// The last load of a mount of one dataset could not show `n` of its
    /// arrays, files or datasets.
    pub fn set_not_shown(&self, n: usize) {
        self.not_shown.store(n as u64, Ordering::Relaxed);
    }

    /// What [`Stats::set_not_shown`] last said.
    pub fn not_shown(&self) -> u64 {
        self.not_shown.load(Ordering::Relaxed)
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
        let mut ops = serde_json::Map::new();
        for op in Op::ALL {
            let s = self.ops[op as usize].summary();
            if s.count > 0 {
                ops.insert(op.name().into(), latency_json(&s));
            }
        }
        let mut doc = json!({
            "uptime_seconds": (self.started.elapsed().as_millis() as f64) / 1000.0,
            "reads": {
                "requests": load(&self.reads),
                "bytes": load(&self.read_bytes),
                "deferred": load(&self.reads_deferred),
                "waiting": load(&self.reads_waiting),
            },
            "read_latency_us": latency_json(&lat),
            "fuse_latency_us": ops,
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
                "duration_us": latency_json(&self.refresh_time.summary()),
            },
            "not_shown": load(&self.not_shown),
        });
        if let Some(r) = &self.remote {
            let remote = r.metrics();
            if !remote.is_empty() {
                doc["remote"] = remote_json(&remote);
                doc["remote_throttle"] = throttle_json(&r.throttle(), r.hedges());
            }
            if let Some(d) = r.disk_cache() {
                doc["disk_cache"] = serde_json::to_value(d).expect("plain numbers");
            }
        }
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
            let b = cache.buffers().stats();
            doc["buffers"] = json!({
                "bytes": b.bytes,
                "cap": b.cap,
                "hits": b.hits,
                "misses": b.misses,
            });
            let decodes: serde_json::Map<String, Value> = cache
                .decodes()
                .all()
                .iter()
                .map(|d| {
                    let v = json!({
                        "bytes": d.bytes(),
                        "latency_us": latency_json(&d.time().summary()),
                    });
                    (d.name().to_string(), v)
                })
                .collect();
            doc["decodes"] = Value::Object(decodes);
        }
        doc
    }

    /// The series of these counters for the metrics endpoint: the same
    /// numbers as [`Stats::to_json`] shows (the mount adds its datasets',
    /// `SlabFs`'s collector).
    pub fn collect(&self, out: &mut Out<'_>) -> fmt::Result {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        out.gauge(
            "slabfs_uptime_seconds",
            "Seconds since the mount started.",
            self.started.elapsed().as_secs_f64(),
        )?;
        let mut f = out.family(
            "slabfs_fuse_request_duration_seconds",
            "FUSE requests by operation, from arrival to answer (a read's wait for a \
             thread included); the count is the number of requests, failed ones included.",
            Kind::Histogram,
        )?;
        for op in Op::ALL {
            f.histogram(&[("op", op.name())], &self.ops[op as usize])?;
        }
        let mut f = out.family(
            "slabfs_fuse_errors",
            "FUSE requests answered with an error, by errno (ENOENT counts lookups of \
             names that do not exist; EIO reads that failed).",
            Kind::Counter,
        )?;
        for (i, counter) in self.errors.iter().enumerate() {
            let name = ERRNOS.get(i).map_or("other", |&(_, name)| name);
            f.counter(&[("errno", name)], load(counter))?;
        }
        out.counter(
            "slabfs_read_bytes",
            "Bytes sent in answer to read requests (the files' bytes served).",
            load(&self.read_bytes),
        )?;
        out.counter(
            "slabfs_reads",
            "Read requests answered with data.",
            load(&self.reads),
        )?;
        out.counter(
            "slabfs_reads_deferred",
            "Reads that could wait on the network, handed to a thread of their own.",
            load(&self.reads_deferred),
        )?;
        out.gauge(
            "slabfs_reads_waiting",
            "Reads handed to a thread of their own and not answered yet.",
            load(&self.reads_waiting) as f64,
        )?;
        out.counter(
            "slabfs_refresh_runs",
            "Live-refresh passes run (as .slabfs/stats' refresh.runs).",
            load(&self.refreshes),
        )?;
        out.counter(
            "slabfs_refresh_failures",
            "Refresh passes, or datasets in one, that could not re-open the source.",
            load(&self.refresh_failures),
        )?;
        out.counter(
            "slabfs_refresh_changes",
            "Paths added, removed or changed that refresh passes found.",
            load(&self.refresh_changes),
        )?;
        out.counter(
            "slabfs_refresh_walks",
            "Refresh passes that re-loaded the whole source.",
            load(&self.refresh_walks),
        )?;
        out.histogram(
            "slabfs_refresh_duration_seconds",
            "Time of each refresh pass that completed.",
            &self.refresh_time,
        )?;
        out.gauge(
            "slabfs_refresh_watched_directories",
            "Directories watched for changes (inotify); 0 when changes are found by walks.",
            load(&self.watching).saturating_sub(1) as f64,
        )
    }

    /// The document as the stats file serves it: pretty JSON and a newline.
    pub fn render(&self, cache: Option<&ChunkCache>) -> Vec<u8> {
        let mut out =
            serde_json::to_vec_pretty(&self.to_json(cache)).expect("stats always serialize");
        out.push(b'\n');
        out
    }
}

/// The `remote` section: one object per source store, by its URL.
fn remote_json(sources: &[metrics::Snapshot]) -> Value {
    let mut out = serde_json::Map::new();
    for s in sources {
        let requests: serde_json::Map<String, Value> = metrics::KINDS
            .iter()
            .zip(s.requests)
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect();
        out.insert(
            s.name.clone(),
            json!({
                "requests": requests,
                "bytes": s.bytes,
                "retries": s.retries,
                "errors": s.errors,
                "not_modified": s.not_modified,
                "stalls": s.stalls,
                "resets": s.resets,
                "throttles": s.throttles,
                "latency_us": latency_json(&s.latency),
            }),
        );
    }
    Value::Object(out)
}

/// The `remote_throttle` section: the throttle's state and the hedges sent
/// and won ([`Remote::hedges`]).
fn throttle_json(t: &throttle::Snapshot, (hedges, hedges_won): (u64, u64)) -> Value {
    json!({
        "request_limit": t.request_limit,
        "max_requests": t.max_requests,
        "in_flight": t.in_flight,
        "backoffs": t.backoffs,
        "resume_in_ms": t.resume_in.as_millis() as u64,
        "hedges": hedges,
        "hedges_won": hedges_won,
    })
}

fn latency_json(l: &Summary) -> Value {
    json!({
        "count": l.count,
        "p50": l.p50 / 1000,
        "p90": l.p90 / 1000,
        "p99": l.p99 / 1000,
        "max": l.max / 1000,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(doc.get("buffers").is_none());
        assert_eq!(doc["refresh"]["interval_seconds"], Value::Null);
    }

    #[test]
    fn remote_sections_show_throttles_resets_and_the_limit() {
        let source = metrics::Snapshot {
            name: "s3://b".into(),
            throttles: 6,
            resets: 2,
            stalls: 1,
            ..Default::default()
        };
        let doc = remote_json(&[source]);
        let s = &doc["s3://b"];
        assert_eq!(
            (&s["throttles"], &s["resets"], &s["stalls"]),
            (&json!(6), &json!(2), &json!(1))
        );
        let t = throttle::Snapshot {
            request_limit: 8,
            max_requests: 64,
            in_flight: 3,
            backoffs: 2,
            resume_in: Duration::from_millis(1500),
        };
        assert_eq!(
            throttle_json(&t, (5, 2)),
            json!({"request_limit": 8, "max_requests": 64, "in_flight": 3,
                   "backoffs": 2, "resume_in_ms": 1500, "hedges": 5, "hedges_won": 2})
        );
    }

    #[test]
    fn document_parses_and_names_the_cache() {
        let stats = Stats::new();
        stats.set_refresh_interval(Some(Duration::from_secs(5)));
        stats.record_refresh(3, Duration::from_millis(2));
        stats.record_refresh(0, Duration::from_millis(4));
        stats.record_refresh_failure();
        stats.record_full_walk();
        stats.set_watching(Some(7));
        let cache = ChunkCache::new(1 << 20);
        let bytes = stats.render(Some(&cache));
        assert_eq!(bytes.last(), Some(&b'\n'));
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(doc["cache"]["budget"], 1 << 20);
        assert_eq!(doc["cache"]["hits"], 0);
        // The buffer pool of a 1 MiB cache: a quarter of it.
        cache.give_back(vec![0; 1000]);
        let mut doc = stats.to_json(Some(&cache));
        assert_eq!(
            doc["buffers"],
            json!({"bytes": 1000, "cap": 256 << 10, "hits": 0, "misses": 0})
        );
        assert_eq!(doc["refresh"]["duration_us"]["count"], 2);
        assert_eq!(doc["refresh"]["duration_us"]["max"], 4000);
        doc["refresh"]
            .as_object_mut()
            .unwrap()
            .remove("duration_us");
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
