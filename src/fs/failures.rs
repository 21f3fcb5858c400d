//! What failed, where a user looks: the `.slabfs/errors` document and the
//! error shown by a dataset that fails to open.
//!
//! A failure is logged once an hour at most (loads: [`crate::logging`])
//! and counted in `.slabfs/stats`, but neither says *which* dataset or
//! chunk. [`Failures`] keeps the recent ones, each with its reason and
//! times, and is what `cat MOUNT/.slabfs/errors` shows (a JSON document
//! generated when the file is opened, like the stats file):
//!
//! ```json
//! {
//!   "max_entries": 256,
//!   "recorded": 7,
//!   "dropped": 0,
//!   "unresolved": 2,
//!   "failures": [
//!     {"kind": "read", "path": "/climate.zarr/tas",
//!      "reason": "/data/climate.zarr/tas/c/1/1/1: chunk [1, 1, 1]: zstd: Data corruption detected",
//!      "count": 3, "first": "2026-12-03T10:15:42.120Z", "last": "2026-12-03T10:15:44.021Z"},
//!     {"kind": "open", "path": "/bad.nc",
//!      "reason": "/data/bad.nc: not a netCDF file (bad magic number)",
//!      "count": 4, "first": "2026-12-03T10:15:40.002Z", "last": "2026-12-03T10:15:41.310Z"},
//!     {"kind": "open", "path": "/old.nc", "reason": "...", "count": 1,
//!      "first": "2026-12-03T09:02:11.500Z", "last": "2026-12-03T09:02:11.500Z",
//!      "resolved": "2026-12-03T09:05:00.017Z"}
//!   ]
//! }
//! ```
//!
//! - `kind`: [`Kind`]: `open` (a dataset of a mounted directory that could
//!   not be opened: everything inside it fails with EIO), `read` (a read
//!   that failed, EIO), `skipped` (an array or file a load left out; the
//!   reason names it), `refresh` (a refresh could not re-open the source
//!   or a dataset, which stays shown as it was), `list` (a directory of
//!   the source that could not be listed).
//! - `path`: the mount path (from the mount root, with a leading `/`) of
//!   what failed: the dataset, the array file read, the directory listed.
//! - `reason`: the error's text as the log line has it (it names the file,
//!   and for a chunk the chunk's file and grid coordinates), with every
//!   known secret blanked ([`crate::storage::location::redact`]; remote
//!   errors name objects without credentials already), cut at
//!   [`MAX_REASON`] bytes.
//! - `count`, `first`, `last`: the same failure (same kind, path and
//!   reason; reasons that differ only in a time they report, as a remote
//!   request's `in 101.98ms`, are the same: [`same_key`]) happening again
//!   is one entry, with the latest reason: how many times, the first and
//!   the last (RFC 3339, UTC, milliseconds). Every attempt counts: a
//!   dataset that fails is opened again by each request inside it, a
//!   mount of one dataset loads again at each refresh.
//! - `resolved`: when it stopped applying; absent while it still does.
//!   An `open` or `refresh` failure is resolved when the dataset opens
//!   (a request, or a refresh that saw its files change, opened it), or
//!   is gone; a `skipped` one when a load of its dataset no longer skips
//!   it; a `read` one when a refresh replaced or removed the array (new
//!   data, which the next read will judge), or its dataset went; a
//!   `list` one when the directory lists. A failure that happens again
//!   is unresolved again.
//!
//! Bounded: at most [`MAX_ENTRIES`] entries, newest (last happened)
//! first; when one more is needed the oldest resolved entry goes, else
//! the oldest one. `dropped` counts the entries dropped since the mount,
//! `recorded` every failure recorded (repeats and dropped ones included),
//! `unresolved` the entries not resolved. A path is cut at [`MAX_PATH`]
//! bytes, so the log holds at most about 1.6 MiB however many
//! failures come; recording one is a lock and a scan of at most 256
//! entries, on the failure's path only (a successful read records
//! nothing).

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;

use crate::error::Error as LibError;

/// Most entries kept.
pub const MAX_ENTRIES: usize = 256;

/// Longest reason kept, in bytes; a longer one is cut (at a character
/// boundary) and ends with [`CUT`].
pub const MAX_REASON: usize = 2048;

/// Longest path kept, in bytes (cut the same way).
pub const MAX_PATH: usize = 4096;

/// What ends a reason or path that was cut.
pub const CUT: &str = " [...]";

/// The xattr of a dataset's directory that failed to open: the reason.
pub const XATTR_ERROR: &str = "user.slabfs.error";

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Open,
    Read,
    Skipped,
    Refresh,
    List,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Open => "open",
            Kind::Read => "read",
            Kind::Skipped => "skipped",
            Kind::Refresh => "refresh",
            Kind::List => "list",
        }
    }
}

/// One entry: a failure and its repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: Kind,
    pub path: String,
    pub reason: String,
    pub count: u64,
    pub first: SystemTime,
    pub last: SystemTime,
    pub resolved: Option<SystemTime>,
}

/// An entry as the document shows it (fields in this order).
#[derive(Serialize)]
struct EntryDoc<'a> {
    kind: &'static str,
    path: &'a str,
    reason: &'a str,
    count: u64,
    first: String,
    last: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolved: Option<String>,
}

impl Failure {
    fn doc(&self) -> EntryDoc<'_> {
        EntryDoc {
            kind: self.kind.name(),
            path: &self.path,
            reason: &self.reason,
            count: self.count,
            first: rfc3339(self.first),
            last: rfc3339(self.last),
            resolved: self.resolved.map(rfc3339),
        }
    }
}

/// The `.slabfs/errors` document.
#[derive(Serialize)]
struct Doc<'a> {
    max_entries: usize,
    recorded: u64,
    dropped: u64,
    unresolved: usize,
    failures: Vec<EntryDoc<'a>>,
}

/// The sidecar of a dataset that failed to open.
#[derive(Serialize)]
struct SidecarDoc<'a> {
    error: &'a str,
    kind: &'static str,
    path: &'a str,
    time: String,
    first: String,
    count: u64,
}

/// `doc` pretty-printed with a final newline.
fn pretty(doc: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(doc).expect("always serializes");
    out.push(b'\n');
    out
}

/// The mount's recent failures. See the module docs.
#[derive(Debug)]
pub struct Failures {
    inner: Mutex<Inner>,
    cap: usize,
}

#[derive(Debug, Default)]
struct Inner {
    /// Newest (last happened) first, each with its reason's [`same_key`].
    entries: VecDeque<(String, Failure)>,
    recorded: u64,
    dropped: u64,
}

impl Default for Failures {
    fn default() -> Failures {
        Failures::new(MAX_ENTRIES)
    }
}

/// The mount path of the relative path `rel` ("" the root): `/rel`.
pub fn mount_path(rel: &str) -> String {
    format!("/{rel}")
}

/// The text of `err` as a failure's reason: its message and causes (as
/// the log line has them), secrets blanked, cut at [`MAX_REASON`].
pub fn reason(err: &LibError) -> String {
    reason_text(&super::error::chain(err))
}

/// `text` as a reason: secrets blanked, cut at [`MAX_REASON`].
pub fn reason_text(text: &str) -> String {
    cut(crate::storage::location::redact(text), MAX_REASON)
}

/// `s` cut to at most `max` bytes (a character boundary), ending with
/// [`CUT`] when it was longer.
fn cut(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut at = max - CUT.len();
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s.truncate(at);
    s.push_str(CUT);
    s
}

/// What tells two reasons apart: the text with every time it reports
/// (a number followed by `ns`, `µs`, `us`, `ms` or `s`, as a `Duration`
/// prints: remote errors say how long a request took, `in 101.98ms`)
/// made one, so that the same failure at another speed is the same entry.
/// Other numbers (a chunk's coordinates, a byte offset) stay.
fn same_key(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut rest = reason;
    let mut prev: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_digit() && !prev.is_some_and(|p| p.is_alphanumeric() || p == '.') {
            let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            let mut end = digits(rest);
            if rest[end..].starts_with('.')
                && rest[end + 1..].starts_with(|c: char| c.is_ascii_digit())
            {
                end += 1 + digits(&rest[end + 1..]);
            }
            let unit = ["ns", "µs", "us", "ms", "s"]
                .into_iter()
                .find(|u| rest[end..].starts_with(u))
                .filter(|u| !rest[end + u.len()..].starts_with(|c: char| c.is_alphanumeric()));
            if let Some(u) = unit {
                out.push_str("<time>");
                rest = &rest[end + u.len()..];
                prev = Some('>');
                continue;
            }
            out.push_str(&rest[..end]);
            prev = rest[..end].chars().next_back();
            rest = &rest[end..];
            continue;
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether mount path `path` is `root` or under it.
fn at_or_under(path: &str, root: &str) -> bool {
    root == "/"
        || path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Failures {
    /// A log of at most `cap` entries (at least one).
    pub fn new(cap: usize) -> Failures {
        Failures {
            inner: Mutex::new(Inner::default()),
            cap: cap.max(1),
        }
    }

    /// Record a failure of `kind` at mount path `path` (`/...`) for
    /// `reason` ([`reason`]), at `now`; returns its entry as it is now.
    pub fn record(&self, kind: Kind, path: &str, reason: &str, now: SystemTime) -> Failure {
        let path = cut(path.to_string(), MAX_PATH);
        let reason = cut(reason.to_string(), MAX_REASON);
        let key = same_key(&reason);
        let mut inner = self.inner.lock();
        inner.recorded += 1;
        let found = inner
            .entries
            .iter()
            .position(|(k, f)| f.kind == kind && f.path == path && *k == key);
        let entry = match found.and_then(|i| inner.entries.remove(i)) {
            Some((_, mut f)) => {
                f.count += 1;
                f.last = now.max(f.last);
                f.resolved = None;
                // The latest words (its times).
                f.reason = reason;
                f
            }
            None => {
                if inner.entries.len() >= self.cap {
                    let victim = inner
                        .entries
                        .iter()
                        .rposition(|(_, f)| f.resolved.is_some())
                        .unwrap_or(inner.entries.len() - 1);
                    inner.entries.remove(victim);
                    inner.dropped += 1;
                }
                Failure {
                    kind,
                    path,
                    reason,
                    count: 1,
                    first: now,
                    last: now,
                    resolved: None,
                }
            }
        };
        inner.entries.push_front((key, entry.clone()));
        entry
    }

    /// Mark resolved at `now` the unresolved entries `which` says.
    /// Returns how many.
    pub fn resolve(&self, which: impl Fn(&Failure) -> bool, now: SystemTime) -> usize {
        let mut inner = self.inner.lock();
        let mut n = 0;
        for (_, f) in inner.entries.iter_mut() {
            if f.resolved.is_none() && which(f) {
                f.resolved = Some(now);
                n += 1;
            }
        }
        n
    }

    /// The dataset at mount path `path` was loaded (opened, or re-opened
    /// by a refresh) at `now`, leaving out `skipped` (the reasons, as
    /// [`reason`] gives them): its `open` and `refresh` failures are
    /// resolved, and so are its `skipped` ones that are not in `skipped`;
    /// each of `skipped` is recorded.
    pub fn loaded(&self, path: &str, skipped: &[String], now: SystemTime) {
        let keys: Vec<String> = skipped.iter().map(|s| same_key(s)).collect();
        self.resolve(
            |f| {
                f.path == path
                    && match f.kind {
                        Kind::Open | Kind::Refresh => true,
                        Kind::Skipped => !keys.contains(&same_key(&f.reason)),
                        Kind::Read | Kind::List => false,
                    }
            },
            now,
        );
        for s in skipped {
            self.record(Kind::Skipped, path, s, now);
        }
    }

    /// What is at or under mount path `path` is gone (removed, or no
    /// dataset any more): every failure there is resolved.
    pub fn gone(&self, path: &str, now: SystemTime) {
        self.resolve(|f| at_or_under(&f.path, path), now);
    }

    /// A refresh replaced or removed the array at mount path `path`: its
    /// read failures (of the raw file and of its `.npy` view) are resolved.
    pub fn replaced(&self, path: &str, now: SystemTime) {
        let npy = format!("{path}.npy");
        self.resolve(
            |f| f.kind == Kind::Read && (f.path == path || f.path == npy),
            now,
        );
    }

    /// The unresolved entry of `kind` at `path`, if any (the newest).
    pub fn current(&self, kind: Kind, path: &str) -> Option<Failure> {
        let inner = self.inner.lock();
        inner
            .entries
            .iter()
            .map(|(_, f)| f)
            .find(|f| f.kind == kind && f.path == path && f.resolved.is_none())
            .cloned()
    }

    /// The unresolved entry of `kind` at `path` for `reason` (or the same
    /// reason at another speed: [`same_key`]), if any.
    pub fn find(&self, kind: Kind, path: &str, reason: &str) -> Option<Failure> {
        let key = same_key(&cut(reason.to_string(), MAX_REASON));
        let inner = self.inner.lock();
        inner
            .entries
            .iter()
            .find(|(k, f)| f.kind == kind && f.path == path && *k == key && f.resolved.is_none())
            .map(|(_, f)| f.clone())
    }

    /// Every entry, newest first.
    pub fn entries(&self) -> Vec<Failure> {
        self.inner
            .lock()
            .entries
            .iter()
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// The document as the file serves it: pretty JSON (the fields in
    /// the order of the module docs) and a newline.
    pub fn render(&self) -> Vec<u8> {
        let inner = self.inner.lock();
        let unresolved = inner
            .entries
            .iter()
            .filter(|(_, f)| f.resolved.is_none())
            .count();
        pretty(&Doc {
            max_entries: self.cap,
            recorded: inner.recorded,
            dropped: inner.dropped,
            unresolved,
            failures: inner.entries.iter().map(|(_, f)| f.doc()).collect(),
        })
    }

    /// The document as a JSON value.
    pub fn to_json(&self) -> Value {
        serde_json::from_slice(&self.render()).expect("just made")
    }
}

/// What the sidecar of a dataset that failed to open reads: the failure
/// (`error`, its reason; `time`, the last attempt; `first`, `count`), and
/// its `kind` and `path`, pretty-printed with a newline.
pub fn failed_sidecar(f: &Failure) -> Vec<u8> {
    pretty(&SidecarDoc {
        error: &f.reason,
        kind: f.kind.name(),
        path: &f.path,
        time: rfc3339(f.last),
        first: rfc3339(f.first),
        count: f.count,
    })
}

/// `t` in RFC 3339, UTC, to the millisecond: `2026-12-03T10:15:42.120Z`
/// (a time before 1970 as 1970's first instant), by chrono (already in
/// the tree for AWS credential expiry times).
pub fn rfc3339(t: SystemTime) -> String {
    let t = t.max(UNIX_EPOCH);
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // A leap day, and the milliseconds.
        let t = at(951_782_400) + Duration::from_millis(1234);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:01.234Z");
        assert_eq!(rfc3339(at(1_798_761_599)), "2026-12-31T23:59:59.000Z");
        assert_eq!(rfc3339(at(4_107_542_400)), "2100-03-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00.000Z"
        );
    }

    /// The same failure again is one entry with a count and its first and
    /// last times, moved to the front; another reason is another entry.
    #[test]
    fn repeats_collapse_into_one_entry() {
        let log = Failures::new(8);
        log.record(Kind::Read, "/a.zarr/x", "chunk [0]: corrupt", at(10));
        log.record(Kind::Open, "/bad.nc", "not netCDF", at(11));
        for s in 12..20 {
            log.record(Kind::Read, "/a.zarr/x", "chunk [0]: corrupt", at(s));
        }
        log.record(Kind::Read, "/a.zarr/x", "chunk [1]: corrupt", at(20));
        // Same path and reason, another kind: its own entry.
        log.record(Kind::Skipped, "/bad.nc", "not netCDF", at(21));
        let e = log.entries();
        let brief: Vec<(&str, &str, u64)> = e
            .iter()
            .map(|f| (f.path.as_str(), f.reason.as_str(), f.count))
            .collect();
        assert_eq!(
            brief,
            [
                ("/bad.nc", "not netCDF", 1),
                ("/a.zarr/x", "chunk [1]: corrupt", 1),
                ("/a.zarr/x", "chunk [0]: corrupt", 9),
                ("/bad.nc", "not netCDF", 1),
            ]
        );
        assert_eq!((e[2].first, e[2].last), (at(10), at(19)));
        let doc = log.to_json();
        assert_eq!(doc["recorded"], 12);
        assert_eq!(doc["dropped"], 0);
        assert_eq!(doc["unresolved"], 4);
        assert_eq!(doc["failures"][2]["first"], "1970-01-01T00:00:10.000Z");
        assert_eq!(doc["failures"][2]["last"], "1970-01-01T00:00:19.000Z");
        assert_eq!(doc["failures"][2]["kind"], "read");
        assert!(doc["failures"][2].get("resolved").is_none());
    }

    /// Many distinct failures: never more than the bound, the oldest
    /// resolved one dropped first, then the oldest; each drop counted.
    #[test]
    fn the_bound_holds_and_drops_are_counted() {
        let log = Failures::new(4);
        for i in 0..4 {
            log.record(Kind::Open, &format!("/d{i}"), "bad", at(i));
        }
        // d1 resolved: it goes first, though d0 is older.
        log.loaded("/d1", &[], at(5));
        log.record(Kind::Open, "/d4", "bad", at(6));
        let paths =
            |log: &Failures| -> Vec<String> { log.entries().into_iter().map(|f| f.path).collect() };
        assert_eq!(paths(&log), ["/d4", "/d3", "/d2", "/d0"]);
        // Nothing resolved: the oldest goes.
        log.record(Kind::Open, "/d5", "bad", at(7));
        assert_eq!(paths(&log), ["/d5", "/d4", "/d3", "/d2"]);
        // A repeat drops nothing.
        log.record(Kind::Open, "/d2", "bad", at(8));
        assert_eq!(paths(&log), ["/d2", "/d5", "/d4", "/d3"]);
        for i in 0..1000 {
            log.record(Kind::Read, &format!("/x/{i}"), "corrupt", at(10));
        }
        let doc = log.to_json();
        assert_eq!(doc["failures"].as_array().unwrap().len(), 4);
        assert_eq!(doc["dropped"], 2 + 1000);
        assert_eq!(doc["recorded"], 4 + 3 + 1000);
        assert_eq!(doc["max_entries"], 4);
        assert_eq!(Failures::default().to_json()["max_entries"], MAX_ENTRIES);
    }

    /// A remote error says how long its request took: the same failure
    /// at another speed is the same entry (with the latest words), but a
    /// failure of another chunk or offset is not.
    #[test]
    fn reasons_differing_only_in_a_time_are_one_failure() {
        let log = Failures::new(8);
        let head = |t: &str| {
            format!("s3://b/x.nc: Error performing HEAD in {t}, after 1 retries, retry_timeout: 2s")
        };
        log.record(Kind::Open, "/x.nc", &head("101.987904ms"), at(1));
        log.record(Kind::Open, "/x.nc", &head("7s"), at(2));
        let f = log.record(Kind::Open, "/x.nc", &head("1.5µs"), at(3));
        assert_eq!((f.count, f.reason.as_str()), (3, head("1.5µs").as_str()));
        assert_eq!(log.entries().len(), 1);
        assert_eq!(log.find(Kind::Open, "/x.nc", &head("2ms")), Some(f));
        assert_eq!(log.find(Kind::Open, "/x.nc", "another reason"), None);
        for (a, b) in [
            ("x: chunk [1, 1, 1]: corrupt", "x: chunk [1, 1, 2]: corrupt"),
            ("x: 3 claimed at byte 292", "x: 3 claimed at byte 293"),
            ("x: 12ms", "x: 12mss"),
            ("run2s: bad", "run3s: bad"),
            ("v1.5s: bad", "v1.6s: bad"),
        ] {
            assert_ne!(same_key(a), same_key(b), "{a} / {b}");
        }
        assert_eq!(same_key("took 12ms, then 3s."), "took <time>, then <time>.");
        assert_eq!(same_key("é 12µs"), "é <time>");
    }

    #[test]
    fn reasons_and_paths_are_cut_at_a_character_boundary() {
        let log = Failures::new(4);
        let long = "é".repeat(MAX_REASON); // 2 bytes each
        let f = log.record(Kind::Read, &"/p".repeat(MAX_PATH), &long, at(0));
        assert!(f.reason.len() <= MAX_REASON && f.reason.ends_with(CUT));
        assert!(f.reason.starts_with("éé"));
        assert!(f.path.len() <= MAX_PATH && f.path.ends_with(CUT));
        // The same long reason again is the same entry.
        assert_eq!(
            log.record(Kind::Read, &"/p".repeat(MAX_PATH), &long, at(1))
                .count,
            2
        );
        assert_eq!(reason_text("short"), "short");
    }

    /// A secret the process knows (a URL's query value, a credential
    /// variable) never reaches the document, whatever the error says.
    #[test]
    fn secrets_are_blanked() {
        crate::storage::location::remember_secrets(["failures-s3cr3t-9f2".to_string()]);
        let text = reason_text("GET https://h/x.nc?sig=failures-s3cr3t-9f2: 403 Forbidden");
        assert_eq!(text, "GET https://h/x.nc?sig=***: 403 Forbidden");
        let err = LibError::metadata("https://h/x.nc?sig=failures-s3cr3t-9f2", "bad magic");
        assert!(!reason(&err).contains("s3cr3t"), "{}", reason(&err));
    }

    /// What resolves what: a load resolves its dataset's open, refresh and
    /// vanished skipped failures (and records those still skipped); a
    /// replaced array its reads; a removed dataset everything under it.
    /// A failure again is unresolved again.
    #[test]
    fn loads_replacements_and_removals_resolve() {
        let log = Failures::new(16);
        log.record(Kind::Open, "/a.nc", "truncated", at(1));
        log.record(Kind::Refresh, "/a.nc", "half written", at(2));
        log.record(Kind::Skipped, "/a.nc", "x: bad dtype", at(3));
        log.record(Kind::Skipped, "/a.nc", "y: bad dtype", at(3));
        log.record(Kind::Read, "/a.nc/z", "chunk [0]", at(4));
        log.record(Kind::Read, "/b.zarr/t.npy", "chunk [1]", at(4));
        log.record(Kind::Read, "/b.zarr/tt", "chunk [1]", at(4));
        log.record(Kind::Open, "/b.zarr.old", "bad", at(4));
        log.loaded("/a.nc", &["y: bad dtype".to_string()], at(5));
        let state = |log: &Failures| -> Vec<(String, &'static str, bool)> {
            let mut v: Vec<_> = log
                .entries()
                .into_iter()
                .map(|f| {
                    (
                        format!("{} {}", f.path, f.reason),
                        f.kind.name(),
                        f.resolved.is_some(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        let resolved = |log: &Failures, what: &str| {
            state(log)
                .into_iter()
                .find(|(p, _, _)| p == what)
                .unwrap_or_else(|| panic!("no {what}"))
                .2
        };
        assert!(resolved(&log, "/a.nc truncated"));
        assert!(resolved(&log, "/a.nc half written"));
        assert!(resolved(&log, "/a.nc x: bad dtype"));
        assert!(!resolved(&log, "/a.nc y: bad dtype"));
        assert_eq!(log.current(Kind::Skipped, "/a.nc").unwrap().count, 2);
        assert!(
            !resolved(&log, "/a.nc/z chunk [0]"),
            "a load is no new data"
        );
        log.replaced("/b.zarr/t", at(6));
        assert!(resolved(&log, "/b.zarr/t.npy chunk [1]"));
        assert!(!resolved(&log, "/b.zarr/tt chunk [1]"));
        log.gone("/b.zarr", at(7));
        assert!(resolved(&log, "/b.zarr/tt chunk [1]"));
        assert!(!resolved(&log, "/b.zarr.old bad"), "another name");
        assert_eq!(log.to_json()["unresolved"], 3);
        assert!(log.current(Kind::Open, "/a.nc").is_none());
        // It fails again: the same entry, unresolved, counted.
        let f = log.record(Kind::Open, "/a.nc", "truncated", at(8));
        assert_eq!((f.count, f.resolved, f.first), (2, None, at(1)));
        assert_eq!(log.current(Kind::Open, "/a.nc"), Some(f.clone()));
        let doc: Value = serde_json::from_slice(&failed_sidecar(&f)).unwrap();
        assert_eq!(
            doc,
            json!({"error": "truncated", "kind": "open", "path": "/a.nc",
                   "time": "1970-01-01T00:00:08.000Z", "first": "1970-01-01T00:00:01.000Z",
                   "count": 2})
        );
        // Everything goes with the root.
        log.gone("/", at(9));
        assert_eq!(log.to_json()["unresolved"], 0);
        let doc: Value = serde_json::from_slice(&log.render()).unwrap();
        assert_eq!(doc["failures"][0]["resolved"], "1970-01-01T00:00:09.000Z");
    }
}
