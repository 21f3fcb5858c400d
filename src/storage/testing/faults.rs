//! Failure injection: wrappers that make file and store reads fail, come
//! up short, stall or return damaged bytes, on demand.
//!
//! This is a testing tool, compiled only for tests (the `testing`
//! feature, which `cargo test` turns on). It lives in the library rather
//! than under `tests/` so that every integration test (and future fuzz
//! targets) can wrap the very seam the daemon reads through,
//! [`crate::storage::Files`]: hand a
//! [`FaultyFiles`] to [`crate::formats::dataset::Opener::files`] and every data file and
//! Zarr store of the dataset is read through the wrappers below. The
//! daemon never builds one; nothing here runs unless a test asks for it.
//! (mountpoint-s3 keeps its `failure_client` beside its mock client for
//! the same reason: the layers above must be testable against every way
//! a read can go wrong.)
//!
//! # Model
//!
//! A [`FaultPlan`] is a list of [`Rule`]s shared (`Arc`) between the test
//! and every wrapper built from it, and changeable while reads run: add a
//! rule, read, remove it ([`FaultPlan::remove`], [`FaultPlan::clear`]),
//! read again. Every read through a wrapper has a *location* and a *span*:
//!
//! - [`FaultyFile`] (a [`ReadAt`]): the path the file was opened with, and
//!   the file bytes `[offset, offset + len)` asked for;
//! - [`FaultyStore`] (a [`Store`]): the key and the inner store's
//!   `describe(key)` (a file path for [`crate::storage::local::FsStore`], the
//!   reference and its target for kerchunk), and the bytes of the value
//!   read: all of it for `get`, the range for `get_range`.
//!
//! A rule applies to a read when its pattern is a substring of the
//! location and, if the rule is limited to a byte range
//! ([`Rule::bytes`]), the span overlaps it. What it does:
//!
//! | [`Fault`] | `ReadAt::read_exact_at` | `Store::get`, `Store::get_range` |
//! | --- | --- | --- |
//! | `Error(kind)` | fails with an `io::Error` of `kind` | fails with [`Error::Io`] naming `describe(key)` |
//! | `Short` | fills the first half of the buffer, then fails with `UnexpectedEof` (a file cut short under the reader) | returns the first half of the bytes as if that were all: a store that silently lost data, which the decoder must notice |
//! | `Slow(d)` | sleeps `d`, then reads normally | the same |
//! | `Flip { offset }` | inverts every bit of the byte at file offset `offset`, when the read covers it | the same, `offset` counted in the value |
//!
//! Several rules may apply to one read: their delays add up, an error
//! wins over everything else, then a short read, then flips. A rule can be
//! limited to its first `n` firings ([`Rule::times`]), a transient fault;
//! after that it lets reads through. The plan counts how often each rule
//! fired ([`FaultPlan::fired`]), so a test can prove its fault was
//! reached at all: a fault that never fires proves nothing.
//!
//! # Limits of the model
//!
//! - Only reads are faulted. Opening a file or a store, `ReadAt::size`,
//!   listing and change stamps pass through: the question these wrappers
//!   answer is whether one bad read becomes one failed request (EIO) with
//!   nothing of it kept, not how a dataset that cannot be opened is
//!   reported (the bad-input tests do that with real files).
//! - A `get_range` of a suffix ([`ByteRange::Suffix`]) does not say where
//!   in the value it starts, so rules limited to a byte range (and flips)
//!   ignore it; rules without a range apply. A shard index stored at the
//!   end of its shard is read that way: a rule limited to the shard's
//!   bytes reaches its chunks and spares its index.
//! - A key that does not exist (`Ok(None)`) was not read: no rule fires.
//!   A store read is faulted after the inner store answered (where a
//!   `get` falls in its value is known only then), so an injected error
//!   still costs the real read; a file read is faulted before it is made.
//! - A chunk decoded into the cache before a rule is added is served from
//!   there, rightly: tests inject the fault before the first read of the
//!   unit they fault.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::storage::contract::{ByteRange, Files, ReadAt, Store};

/// What a rule does to the reads it applies to (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The read fails with an I/O error of this kind.
    Error(io::ErrorKind),
    /// The read delivers only the first half of what was asked.
    Short,
    /// The read takes this much longer, and is otherwise untouched.
    Slow(Duration),
    /// The byte at `offset` (of the file, or of the store value) comes
    /// back with every bit inverted.
    Flip { offset: u64 },
}

/// Which reads a fault applies to, and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pattern: String,
    fault: Fault,
    bytes: Option<Range<u64>>,
    times: Option<u64>,
}

impl Rule {
    /// `fault` for every read whose location contains `pattern` (a file
    /// path, or a store key or its `describe`).
    pub fn new(pattern: impl Into<String>, fault: Fault) -> Rule {
        Rule {
            pattern: pattern.into(),
            fault,
            bytes: None,
            times: None,
        }
    }

    /// Only reads overlapping `range` (file offsets, or offsets in the
    /// store value).
    pub fn bytes(mut self, range: Range<u64>) -> Rule {
        self.bytes = Some(range);
        self
    }

    /// Only the first `n` reads it applies to; later ones pass.
    pub fn times(mut self, n: u64) -> Rule {
        self.times = Some(n);
        self
    }
}

/// A rule's handle in its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleId(u64);

/// The faults currently injected, shared by the test and its wrappers.
#[derive(Default)]
pub struct FaultPlan {
    inner: Mutex<PlanState>,
}

#[derive(Default)]
struct PlanState {
    rules: Vec<(RuleId, Rule)>,
    next_id: u64,
    /// Firings per rule, kept after the rule is removed.
    fired: HashMap<RuleId, u64>,
    total_fired: u64,
    /// Reads that consulted the plan.
    reads: u64,
}

impl fmt::Debug for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.inner.lock();
        f.debug_struct("FaultPlan")
            .field("rules", &s.rules)
            .field("total_fired", &s.total_fired)
            .finish()
    }
}

/// Where a read falls in its file or value.
#[derive(Debug, Clone, Copy)]
enum Span {
    /// Bytes `[start, end)`.
    At(u64, u64),
    /// A suffix of unknown position.
    Unknown,
}

impl Span {
    fn overlaps(self, r: &Range<u64>) -> bool {
        match self {
            Span::At(s, e) => s < r.end && r.start < e,
            Span::Unknown => false,
        }
    }
}

/// What the rules that apply to one read ask for, combined.
#[derive(Debug, Default)]
struct Actions {
    delay: Duration,
    error: Option<io::ErrorKind>,
    short: bool,
    /// Offsets of bytes to invert, in the file or value.
    flips: Vec<u64>,
}

impl FaultPlan {
    /// An empty plan: every read passes until a rule is added.
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan::default())
    }

    /// Start injecting `rule`.
    pub fn add(&self, rule: Rule) -> RuleId {
        let mut s = self.inner.lock();
        let id = RuleId(s.next_id);
        s.next_id += 1;
        s.fired.insert(id, 0);
        s.rules.push((id, rule));
        id
    }

    /// Stop injecting rule `id`; false if it was not active.
    pub fn remove(&self, id: RuleId) -> bool {
        let mut s = self.inner.lock();
        let before = s.rules.len();
        s.rules.retain(|(r, _)| *r != id);
        s.rules.len() != before
    }

    /// Stop injecting every rule (the counters stay).
    pub fn clear(&self) {
        self.inner.lock().rules.clear();
    }

    /// How many reads rule `id` has faulted so far (also after removal).
    pub fn fired(&self, id: RuleId) -> u64 {
        self.inner.lock().fired.get(&id).copied().unwrap_or(0)
    }

    /// How many faults all rules have injected so far.
    pub fn total_fired(&self) -> u64 {
        self.inner.lock().total_fired
    }

    /// How many reads went through wrappers of this plan.
    pub fn reads(&self) -> u64 {
        self.inner.lock().reads
    }

    /// The combined actions of the rules that apply to a read at `span`
    /// of something named by any of `location`, counting their firings.
    fn actions(&self, location: &[&str], span: Span) -> Actions {
        let mut s = self.inner.lock();
        s.reads += 1;
        let mut out = Actions::default();
        let mut firing = Vec::new();
        for (id, rule) in &s.rules {
            if !location.iter().any(|l| l.contains(&rule.pattern)) {
                continue;
            }
            if let Some(r) = &rule.bytes
                && !span.overlaps(r)
            {
                continue;
            }
            if let Fault::Flip { offset } = rule.fault
                && !span.overlaps(&(offset..offset.saturating_add(1)))
            {
                continue;
            }
            if rule.times.is_some_and(|n| s.fired[id] >= n) {
                continue;
            }
            match rule.fault {
                Fault::Error(kind) => {
                    out.error.get_or_insert(kind);
                }
                Fault::Short => out.short = true,
                Fault::Slow(d) => out.delay += d,
                Fault::Flip { offset } => out.flips.push(offset),
            }
            firing.push(*id);
        }
        for id in &firing {
            *s.fired.get_mut(id).expect("every rule has a counter") += 1;
        }
        s.total_fired += firing.len() as u64;
        drop(s);
        if !firing.is_empty() {
            log::debug!("injecting {out:?} into a read of {location:?} at {span:?}");
        }
        out
    }
}

/// The error an injected `Error(kind)` fault returns.
fn injected(kind: io::ErrorKind, span: Span) -> io::Error {
    let at = match span {
        Span::At(s, e) => format!("bytes {s}..{e}"),
        Span::Unknown => "a suffix".to_string(),
    };
    io::Error::new(kind, format!("injected fault: {kind} reading {at}"))
}

/// Invert the bytes at `flips` (offsets counted from where `buf` starts
/// being `start`) that fall inside `buf`.
fn flip(buf: &mut [u8], start: u64, flips: &[u64]) {
    for &o in flips {
        if let Some(b) = o
            .checked_sub(start)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| buf.get_mut(i))
        {
            *b = !*b;
        }
    }
}

/// A file whose positioned reads go through a [`FaultPlan`].
pub struct FaultyFile {
    inner: Arc<dyn ReadAt>,
    path: String,
    plan: Arc<FaultPlan>,
}

impl FaultyFile {
    /// Wrap `inner`, opened as `path` (what rules match).
    pub fn new(
        inner: Arc<dyn ReadAt>,
        path: impl Into<String>,
        plan: Arc<FaultPlan>,
    ) -> FaultyFile {
        FaultyFile {
            inner,
            path: path.into(),
            plan,
        }
    }
}

impl fmt::Debug for FaultyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyFile")
            .field("path", &self.path)
            .finish()
    }
}

impl ReadAt for FaultyFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let span = Span::At(offset, offset.saturating_add(buf.len() as u64));
        let a = self.plan.actions(&[&self.path], span);
        if !a.delay.is_zero() {
            std::thread::sleep(a.delay);
        }
        if let Some(kind) = a.error {
            return Err(injected(kind, span));
        }
        if a.short {
            // What a file truncated under the reader gives: the bytes up
            // to the cut, then end of file.
            let half = buf.len() / 2;
            self.inner.read_exact_at(&mut buf[..half], offset)?;
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "injected fault: short read, {half} of {} bytes at offset {offset}",
                    buf.len()
                ),
            ));
        }
        self.inner.read_exact_at(buf, offset)?;
        flip(buf, offset, &a.flips);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn stamp(&self) -> Option<u64> {
        self.inner.stamp()
    }

    fn version(&self) -> Option<crate::storage::ObjectVersion> {
        self.inner.version()
    }
}

/// A store whose `get` and `get_range` go through a [`FaultPlan`].
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    plan: Arc<FaultPlan>,
}

impl<S: Store> FaultyStore<S> {
    pub fn new(inner: S, plan: Arc<FaultPlan>) -> FaultyStore<S> {
        FaultyStore { inner, plan }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Apply the plan to `value`, the bytes of `key` at `span`.
    fn apply(&self, key: &str, span: Span, mut value: Vec<u8>) -> Result<Option<Vec<u8>>> {
        let described = self.inner.describe(key);
        let a = self.plan.actions(&[key, &described], span);
        if !a.delay.is_zero() {
            std::thread::sleep(a.delay);
        }
        if let Some(kind) = a.error {
            return Err(Error::Io {
                path: described,
                source: injected(kind, span),
            });
        }
        if a.short {
            value.truncate(value.len() / 2);
        }
        if let Span::At(start, _) = span {
            flip(&mut value, start, &a.flips);
        }
        Ok(Some(value))
    }
}

impl<S: Store> Store for FaultyStore<S> {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let Some(value) = self.inner.get(key, limit)? else {
            return Ok(None);
        };
        let span = Span::At(0, value.len() as u64);
        self.apply(key, span, value)
    }

    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        let Some(value) = self.inner.get_range(key, range)? else {
            return Ok(None);
        };
        let span = match range {
            ByteRange::At { offset, len } => Span::At(offset, offset.saturating_add(len)),
            ByteRange::Suffix(_) => Span::Unknown,
        };
        self.apply(key, span, value)
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        self.inner.list_dir(dir)
    }

    fn describe(&self, key: &str) -> String {
        self.inner.describe(key)
    }

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        self.inner.change_stamp(prefix)
    }
}

/// Opens files and stores through `inner` (usually
/// [`crate::storage::local::OsFiles`]) and wraps each in the faulty wrappers of one
/// plan.
#[derive(Debug)]
pub struct FaultyFiles {
    inner: Arc<dyn Files>,
    plan: Arc<FaultPlan>,
}

impl FaultyFiles {
    pub fn new(inner: Arc<dyn Files>, plan: Arc<FaultPlan>) -> FaultyFiles {
        FaultyFiles { inner, plan }
    }

    /// The real file system, through `plan`.
    pub fn os(plan: Arc<FaultPlan>) -> Arc<dyn Files> {
        Arc::new(FaultyFiles::new(crate::storage::local::os(), plan))
    }
}

impl Files for FaultyFiles {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn ReadAt>> {
        let file = self.inner.open(path)?;
        Ok(Arc::new(FaultyFile::new(
            file,
            path.display().to_string(),
            self.plan.clone(),
        )))
    }

    fn store(&self, root: &Path) -> Arc<dyn Store> {
        Arc::new(FaultyStore::new(self.inner.store(root), self.plan.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::MemoryStore;

    fn file(plan: &Arc<FaultPlan>) -> (tempfile::TempDir, Arc<dyn ReadAt>) {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("data.bin");
        std::fs::write(&p, b"0123456789").unwrap();
        let f = FaultyFiles::os(plan.clone()).open(&p).unwrap();
        (tmp, f)
    }

    fn read(f: &dyn ReadAt, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, offset).map(|()| buf)
    }

    #[test]
    fn file_faults_apply_to_matching_reads_only() {
        let plan = FaultPlan::new();
        let (_tmp, f) = file(&plan);
        assert_eq!(read(f.as_ref(), 2, 3).unwrap(), b"234");

        let e = plan.add(Rule::new("data.bin", Fault::Error(io::ErrorKind::Other)).bytes(4..6));
        assert_eq!(read(f.as_ref(), 0, 4).unwrap(), b"0123", "before the range");
        assert_eq!(read(f.as_ref(), 6, 4).unwrap(), b"6789", "after the range");
        let err = read(f.as_ref(), 3, 2).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Other);
        assert!(err.to_string().contains("injected"), "{err}");
        assert_eq!(plan.fired(e), 1);
        let other = plan.add(Rule::new("elsewhere.bin", Fault::Short));
        assert!(plan.remove(e));
        assert!(!plan.remove(e));
        assert_eq!(read(f.as_ref(), 0, 10).unwrap(), b"0123456789");
        assert_eq!((plan.fired(e), plan.fired(other)), (1, 0));
        assert_eq!(plan.reads(), 5);
    }

    #[test]
    fn short_reads_fill_half_then_report_eof() {
        let plan = FaultPlan::new();
        let (_tmp, f) = file(&plan);
        plan.add(Rule::new("data", Fault::Short));
        let mut buf = [b'.'; 6];
        let err = f.read_exact_at(&mut buf, 2).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(&buf, b"234...");
    }

    #[test]
    fn flips_invert_one_byte_where_the_read_covers_it() {
        let plan = FaultPlan::new();
        let (_tmp, f) = file(&plan);
        let id = plan.add(Rule::new("data", Fault::Flip { offset: 5 }));
        assert_eq!(read(f.as_ref(), 0, 5).unwrap(), b"01234");
        assert_eq!(
            plan.fired(id),
            0,
            "a read that misses the byte is untouched"
        );
        let got = read(f.as_ref(), 3, 4).unwrap();
        assert_eq!(got, [b'3', b'4', !b'5', b'6']);
        assert_eq!(plan.fired(id), 1);
    }

    #[test]
    fn transient_faults_fire_n_times_and_delays_only_delay() {
        let plan = FaultPlan::new();
        let (_tmp, f) = file(&plan);
        let id = plan.add(Rule::new("data", Fault::Error(io::ErrorKind::Interrupted)).times(2));
        assert!(read(f.as_ref(), 0, 1).is_err());
        assert!(read(f.as_ref(), 0, 1).is_err());
        assert_eq!(read(f.as_ref(), 0, 1).unwrap(), b"0");
        assert_eq!(plan.fired(id), 2);
        plan.clear();
        let slow = plan.add(Rule::new("data", Fault::Slow(Duration::from_millis(30))));
        let t = std::time::Instant::now();
        assert_eq!(read(f.as_ref(), 0, 10).unwrap(), b"0123456789");
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert_eq!(plan.fired(slow), 1);
        assert_eq!(plan.total_fired(), 3);
    }

    #[test]
    fn an_error_wins_over_other_faults_of_the_same_read() {
        let plan = FaultPlan::new();
        let (_tmp, f) = file(&plan);
        let flip = plan.add(Rule::new("data", Fault::Flip { offset: 0 }));
        let short = plan.add(Rule::new("data", Fault::Short));
        let err = plan.add(Rule::new(
            "data",
            Fault::Error(io::ErrorKind::PermissionDenied),
        ));
        let e = read(f.as_ref(), 0, 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            (plan.fired(flip), plan.fired(short), plan.fired(err)),
            (1, 1, 1)
        );
    }

    #[test]
    fn store_faults_match_keys_and_ranges() {
        let plan = FaultPlan::new();
        let mem = MemoryStore::new();
        mem.set("a/c/0", b"abcdefgh".to_vec());
        mem.set("a/c/1", b"ABCDEFGH".to_vec());
        let s = FaultyStore::new(mem, plan.clone());

        let e = plan.add(Rule::new("a/c/0", Fault::Error(io::ErrorKind::Other)));
        let err = s.get("a/c/0", 100).unwrap_err();
        assert!(
            matches!(&err, Error::Io { path, .. } if path == "memory:a/c/0"),
            "{err}"
        );
        // The injected kind travels as data (EIO at the mount: fs::error).
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == io::ErrorKind::Other),
            "{err:?}"
        );
        assert_eq!(s.get("a/c/1", 100).unwrap().unwrap(), b"ABCDEFGH");
        assert!(s.get("a/c/9", 100).unwrap().is_none());
        assert_eq!(plan.fired(e), 1, "absent keys are not faulted");
        plan.clear();

        plan.add(Rule::new("a/c/1", Fault::Short));
        assert_eq!(s.get("a/c/1", 100).unwrap().unwrap(), b"ABCD");
        let r = ByteRange::At { offset: 2, len: 4 };
        assert_eq!(s.get_range("a/c/1", r).unwrap().unwrap(), b"CD");
        plan.clear();

        // A flip at value offset 3, seen through a range read from 2.
        plan.add(Rule::new("memory:a/c/0", Fault::Flip { offset: 3 }));
        assert_eq!(
            s.get_range("a/c/0", r).unwrap().unwrap(),
            [b'c', !b'd', b'e', b'f']
        );
        // A suffix's position is unknown: ranged rules and flips skip it.
        assert_eq!(
            s.get_range("a/c/0", ByteRange::Suffix(6)).unwrap().unwrap(),
            b"cdefgh"
        );
        plan.clear();
        let ranged = plan.add(Rule::new("a/c/0", Fault::Short).bytes(0..4));
        assert_eq!(
            s.get_range("a/c/0", ByteRange::Suffix(6)).unwrap().unwrap(),
            b"cdefgh"
        );
        let tail = ByteRange::At { offset: 4, len: 4 };
        assert_eq!(s.get_range("a/c/0", tail).unwrap().unwrap(), b"efgh");
        assert_eq!(plan.fired(ranged), 0);
        plan.add(Rule::new("a/c/0", Fault::Short));
        assert_eq!(
            s.get_range("a/c/0", ByteRange::Suffix(6)).unwrap().unwrap(),
            b"cde",
            "an unranged rule applies to suffixes"
        );
    }

    #[test]
    fn faulty_files_wrap_the_stores_they_open() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("k"), b"value").unwrap();
        let plan = FaultPlan::new();
        let files = FaultyFiles::os(plan.clone());
        let store = files.store(tmp.path());
        assert_eq!(store.get("k", 10).unwrap().unwrap(), b"value");
        // Rules match the file path the store describes.
        let path = tmp.path().join("k").display().to_string();
        let id = plan.add(Rule::new(path.clone(), Fault::Error(io::ErrorKind::Other)));
        let err = store.get("k", 10).unwrap_err();
        assert!(err.to_string().contains(&path), "{err}");
        assert_eq!(plan.fired(id), 1);
    }
}
