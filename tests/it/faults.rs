//! Every source type read through failing storage
//! ([`slabfs::storage::testing::faults`]): an I/O error, a short read, a slow read and a
//! flipped byte injected into one chunk, fragment or block.
//!
//! For each source and each fault: every element read that touches the
//! faulted unit fails with an error whose errno is EIO and whose message
//! names the file; every other element, and another array of the same
//! dataset, reads exactly the bytes the reference tools wrote (the
//! fixtures' `expected` files, never slabfs's own output); a failed read
//! leaves nothing in the cache (repeating it goes back to storage every
//! time, and the cache's counters do not move); once the fault is
//! cleared the same read returns the expected bytes and is cached like
//! any other. A slow read only delays. Formats without checksums
//! (netCDF-3, raw NCA fragments) cannot notice a flipped byte: there the
//! test checks that exactly that byte comes back changed, and nothing
//! once the fault is gone.
//!
//! The filesystem core ([`slabfs::fs::SlabFs`]) is exercised the same
//! way without mounting: a failed read is EIO and is counted, the next
//! read of another file works. Concurrency: a slow chunk holds up no
//! other read, and of many readers racing for a chunk whose first read
//! fails, only the one whose read failed sees the error.
//!
//! The last part is limits: metadata documents of absurd size, shapes,
//! chunk grids, shard indexes and partition matrices whose sizes overflow
//! 2^64 (or any sane bound) are refused with an error naming the file,
//! without allocating for them; arrays of almost 2^64 bytes read fine at
//! their far end. (Reference cycles and nesting depth are in
//! tests/it/security.rs; decompression bombs in tests/it/bad_input.rs and the
//! codecs' unit tests.)

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slabfs::dtype::Endian;
use slabfs::engine::array::ArraySource;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset::{self, Dataset};
use slabfs::formats::{kerchunk, netcdf3, packed, zarr};
use slabfs::fs::error::ToErrno;
use slabfs::fs::{FsConfig, ROOT_INO, SlabFs, Views};
use slabfs::storage::testing::faults::{Fault, FaultPlan, FaultyFiles, FaultyStore, Rule};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn expected(rel: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn new_cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(64 << 20))
}

/// Open `source` with every file and store read through `plan`.
fn open(source: &Path, plan: &Arc<FaultPlan>, cache: &Arc<ChunkCache>) -> Dataset {
    dataset::Opener::new(cache.clone())
        .files(FaultyFiles::os(plan.clone()))
        .open(source)
        .unwrap_or_else(|e| panic!("{}: {e}", source.display()))
}

fn array(ds: &Dataset, path: &str) -> Arc<dyn ArraySource> {
    match ds.get(path) {
        Some(e) => e.array.clone(),
        None => panic!(
            "{path} not found; skipped: {:?}",
            ds.skipped.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        ),
    }
}

/// `len` bytes of the flat file from `offset`, little-endian.
fn read(a: &dyn ArraySource, offset: u64, len: u64) -> slabfs::Result<Vec<u8>> {
    let mut buf = vec![0u8; len as usize];
    let n = read_at(a, offset, &mut buf, Endian::Little)?;
    buf.truncate(n);
    Ok(buf)
}

/// The error and its causes, joined.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(" | ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The multi-index of flat element `i` of `shape`.
fn unravel(mut i: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// Which elements (by multi-index) a fault reaches.
type Faulted = Box<dyn Fn(&[u64]) -> bool>;

/// One faulted unit of one source, and how to check it.
struct Target {
    what: &'static str,
    plan: Arc<FaultPlan>,
    cache: Arc<ChunkCache>,
    array: Arc<dyn ArraySource>,
    /// The array's flat file as the reference tool read it.
    expected: Vec<u8>,
    /// Which elements (by multi-index) lie in the faulted unit.
    faulted: Faulted,
    /// The rule that injects a fault into exactly that unit.
    rule: Box<dyn Fn(Fault) -> Rule>,
    /// A byte of the unit (file or store value offset) to flip.
    flip: u64,
    /// `None` when the format detects a flipped byte (the read fails);
    /// else the byte of the flat file that comes back inverted.
    undetected_flip: Option<usize>,
    /// What every error message must contain: the file (and chunk).
    names: Vec<String>,
    /// Whether the source decodes through the chunk cache.
    cached: bool,
    /// Whether a failed read decodes (and then drops) shard indexes.
    reloads_indexes: bool,
    /// Another array of the same dataset, and its expected bytes.
    other: (Arc<dyn ArraySource>, Vec<u8>),
}

impl Target {
    fn item(&self) -> u64 {
        self.array.meta().item_size() as u64
    }

    fn n(&self) -> u64 {
        self.array.meta().num_elements()
    }

    fn element(&self, i: u64) -> slabfs::Result<Vec<u8>> {
        read(self.array.as_ref(), i * self.item(), self.item())
    }

    fn want(&self, i: u64) -> &[u8] {
        let item = self.item() as usize;
        &self.expected[i as usize * item..][..item]
    }

    fn check_error(&self, fault: Fault, e: &slabfs::Error) {
        let msg = chain(e);
        assert_eq!(e.errno(), libc::EIO, "{}, {fault:?}: {msg}", self.what);
        for n in &self.names {
            assert!(
                msg.contains(n.as_str()),
                "{}, {fault:?}: no {n:?} in {msg}",
                self.what
            );
        }
    }

    /// The whole flat file, which must read as expected.
    fn whole_reads_fine(&self, when: &str) {
        let got = read(self.array.as_ref(), 0, self.expected.len() as u64 + 8)
            .unwrap_or_else(|e| panic!("{} {when}: {}", self.what, chain(&e)));
        assert!(got == self.expected, "{} {when}: wrong bytes", self.what);
    }

    /// A fault the source must turn into errors for exactly the reads
    /// that touch the unit.
    fn failing(&self, fault: Fault) {
        let what = self.what;
        let shape = self.array.meta().shape.clone();
        let id = self.plan.add((self.rule)(fault));
        // A flipped byte fails the reads of the chunk (or inner chunk) it
        // lies in, which may be only part of the unit; the others must
        // still be exact.
        let partial = matches!(fault, Fault::Flip { .. });
        let mut failed = Vec::new();
        for i in 0..self.n() {
            let idx = unravel(i, &shape);
            match self.element(i) {
                Ok(b) => {
                    assert!(
                        b == self.want(i),
                        "{what}, {fault:?}: element {idx:?} is wrong"
                    );
                    assert!(
                        partial || !(self.faulted)(&idx),
                        "{what}, {fault:?}: element {idx:?} read despite the fault"
                    );
                }
                Err(e) => {
                    assert!(
                        (self.faulted)(&idx),
                        "{what}, {fault:?}: element {idx:?} outside the fault failed: {}",
                        chain(&e)
                    );
                    self.check_error(fault, &e);
                    failed.push(i);
                }
            }
        }
        assert!(!failed.is_empty(), "{what}, {fault:?}: no read failed");
        assert!(self.plan.fired(id) > 0, "{what}, {fault:?}: never fired");
        // The rest of the dataset is unaffected, the whole file fails.
        let (other, other_want) = &self.other;
        let got = read(other.as_ref(), 0, other_want.len() as u64)
            .unwrap_or_else(|e| panic!("{what}, {fault:?}: other array: {}", chain(&e)));
        assert!(
            got == *other_want,
            "{what}, {fault:?}: other array is wrong"
        );
        let e = read(self.array.as_ref(), 0, self.expected.len() as u64)
            .expect_err("a whole read touches the fault");
        self.check_error(fault, &e);

        // Nothing of a failed read is kept: reading it again goes back to
        // storage every time, and the cache neither decodes nor holds
        // anything more.
        let i = failed[0];
        let (s0, f0) = (self.cache.stats(), self.plan.fired(id));
        for _ in 0..3 {
            let e = self.element(i).expect_err("still faulted");
            self.check_error(fault, &e);
        }
        let (s1, f1) = (self.cache.stats(), self.plan.fired(id));
        assert!(
            f1 >= f0 + 3,
            "{what}, {fault:?}: a failed read was answered from memory"
        );
        assert_eq!(
            (s1.entries, s1.bytes),
            (s0.entries, s0.bytes),
            "{what}, {fault:?}: a failed read left something in the cache"
        );
        if !self.reloads_indexes {
            assert_eq!(s1.decodes, s0.decodes, "{what}, {fault:?}: decoded");
        }
        if self.cached {
            assert!(
                s1.misses >= s0.misses + 3,
                "{what}, {fault:?}: {s0:?} -> {s1:?}"
            );
        }

        // Cleared: the same read succeeds, and is cached like any other.
        assert!(self.plan.remove(id));
        let s2 = self.cache.stats();
        let got = self
            .element(i)
            .unwrap_or_else(|e| panic!("{what}, {fault:?} cleared: {}", chain(&e)));
        assert!(
            got == self.want(i),
            "{what}, {fault:?} cleared: wrong bytes"
        );
        let s3 = self.cache.stats();
        if self.cached {
            assert!(
                s3.decodes > s2.decodes && s3.entries > s2.entries,
                "{what}, {fault:?}: the good read was not cached: {s2:?} -> {s3:?}"
            );
            assert!(self.element(i).unwrap() == self.want(i));
            let s4 = self.cache.stats();
            assert_eq!(s4.decodes, s3.decodes, "{what}, {fault:?}: decoded again");
            assert!(s4.hits > s3.hits, "{what}, {fault:?}: {s3:?} -> {s4:?}");
        }
        self.whole_reads_fine(&format!("after {fault:?} was cleared"));
    }

    /// A flipped byte in a format without checksums: served as read,
    /// exactly that byte changed; gone once the fault is.
    fn undetected(&self, fault: Fault, p: usize) {
        let id = self.plan.add((self.rule)(fault));
        let got = read(self.array.as_ref(), 0, self.expected.len() as u64)
            .unwrap_or_else(|e| panic!("{}, {fault:?}: {}", self.what, chain(&e)));
        let mut want = self.expected.clone();
        want[p] = !want[p];
        assert!(
            got == want,
            "{}, {fault:?}: not exactly byte {p} changed",
            self.what
        );
        assert!(self.plan.fired(id) > 0);
        self.plan.remove(id);
        self.whole_reads_fine(&format!("after {fault:?} was cleared"));
    }

    /// A slow unit only delays its reads.
    fn slow(&self) {
        let delay = Duration::from_millis(150);
        let id = self.plan.add((self.rule)(Fault::Slow(delay)));
        let shape = &self.array.meta().shape;
        let i = (0..self.n())
            .find(|&i| (self.faulted)(&unravel(i, shape)))
            .expect("checked in exercise");
        let t = Instant::now();
        let got = self
            .element(i)
            .unwrap_or_else(|e| panic!("{}, slow: {}", self.what, chain(&e)));
        assert!(got == self.want(i), "{}, slow: wrong bytes", self.what);
        assert!(
            t.elapsed() >= delay,
            "{}: the slow read was not slow",
            self.what
        );
        assert!(self.plan.fired(id) > 0);
        self.whole_reads_fine("while slow");
        self.plan.remove(id);
    }
}

fn plan_and_cache() -> (Arc<FaultPlan>, Arc<ChunkCache>) {
    (FaultPlan::new(), new_cache())
}

/// Run every fault kind against the unit `make` describes, each on a
/// freshly opened dataset with an empty cache (a chunk decoded before a
/// fault is injected is served from the cache, rightly, and would hide
/// the fault).
fn exercise(make: impl Fn() -> Target) {
    let t = make();
    t.whole_reads_fine("before any fault");
    assert!(
        (0..t.n()).any(|i| (t.faulted)(&unravel(i, &t.array.meta().shape))),
        "{}: the faulted unit holds no element",
        t.what
    );
    for fault in [
        Fault::Error(ErrorKind::Other),
        Fault::Error(ErrorKind::NotFound),
        Fault::Short,
        Fault::Flip { offset: t.flip },
    ] {
        let t = make();
        match (fault, t.undetected_flip) {
            (Fault::Flip { .. }, Some(p)) => t.undetected(fault, p),
            _ => t.failing(fault),
        }
    }
    make().slow();
}

#[test]
fn zarr_v2_chunk() {
    // int64 (50,) in chunks of 16, zstd: chunk 1 is elements 16..32.
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&fixtures().join("zarr/v2/basic.zarr"), &plan, &cache);
        Target {
            what: "zarr v2",
            array: array(&ds, "time"),
            expected: expected("zarr/expected/v2_rank1_top.bin"),
            faulted: Box::new(|i| i[0] / 16 == 1),
            rule: Box::new(|f| Rule::new("basic.zarr/time/1", f)),
            flip: 0, // the zstd magic number
            undetected_flip: None,
            names: vec!["basic.zarr/time/1".into()],
            cached: true,
            reloads_indexes: false,
            other: (
                array(&ds, "g1/counts"),
                expected("zarr/expected/v2_i2_plain_attrs.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn zarr_v3_chunk() {
    // int16 (30, 20) in chunks (11, 9), zstd then crc32c: chunk (1, 1).
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&fixtures().join("zarr/v3/codecs.zarr"), &plan, &cache);
        Target {
            what: "zarr v3",
            array: array(&ds, "crc32c/zstd"),
            expected: expected("zarr/expected/v3_zstd_crc32c.bin"),
            faulted: Box::new(|i| i[0] / 11 == 1 && i[1] / 9 == 1),
            rule: Box::new(|f| Rule::new("codecs.zarr/crc32c/zstd/c/1/1", f)),
            flip: 20, // inside the compressed data: the checksum catches it
            undetected_flip: None,
            names: vec!["crc32c/zstd/c/1/1".into()],
            cached: true,
            reloads_indexes: false,
            other: (array(&ds, "gzip"), expected("zarr/expected/v3_gzip.bin")),
            plan,
            cache,
        }
    });
}

#[test]
fn sharded_zarr_shard() {
    // float32 (9, 13, 10), shards (4, 6, 8) of inner chunks (2, 3, 4),
    // zstd, index at the end with crc32c: shard (0, 0, 0).
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&fixtures().join("zarr/v3/sharded.zarr"), &plan, &cache);
        Target {
            what: "sharded",
            array: array(&ds, "sharded_3d"),
            expected: expected("zarr/expected/v3_sharded_3d.bin"),
            faulted: Box::new(|i| i[0] < 4 && i[1] < 6 && i[2] < 8),
            rule: Box::new(|f| Rule::new("sharded.zarr/sharded_3d/c/0/0/0", f)),
            flip: 0, // the first stored inner chunk's zstd magic number
            undetected_flip: None,
            names: vec!["sharded_3d/c/0/0/0".into()],
            cached: true,
            reloads_indexes: true,
            other: (
                array(&ds, "sharded_index_start"),
                expected("zarr/expected/v3_sharded_index_start.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn a_failed_inner_chunk_drops_its_shard_index() {
    // float32 (9, 13, 10), shards (4, 6, 8), inner chunks (2, 3, 4):
    // elements (0, 0, 0) and (0, 0, 4) are inner chunks (0, 0, 0) and
    // (0, 0, 1) of one shard. A fault on the shard's data but not its
    // index (read as a suffix): the index is read and decoded each time,
    // and dropped after the chunk fails (it could be what is wrong), while
    // chunks decoded before stay cached.
    let (plan, cache) = plan_and_cache();
    let ds = open(&fixtures().join("zarr/v3/sharded.zarr"), &plan, &cache);
    let a = array(&ds, "sharded_3d");
    let want = expected("zarr/expected/v3_sharded_3d.bin");
    assert_eq!(read(a.as_ref(), 0, 4).unwrap(), want[..4]);
    let s0 = cache.stats();
    assert_eq!(
        (s0.decodes, s0.entries),
        (2, 2),
        "the index and chunk (0, 0, 0)"
    );

    let id = plan
        .add(Rule::new("sharded_3d/c/0/0/0", Fault::Error(ErrorKind::Other)).bytes(0..u64::MAX));
    for attempt in 1..=3 {
        let e = read(a.as_ref(), 16, 4).unwrap_err();
        assert_eq!(e.errno(), libc::EIO, "{e}");
        assert_eq!(plan.fired(id), attempt, "one chunk read per attempt");
        let s = cache.stats();
        assert_eq!(s.entries, 1, "only chunk (0, 0, 0) is kept");
        // The first attempt finds the index cached; each later one reads
        // it again, since the attempt before dropped it.
        assert_eq!(s.decodes - s0.decodes, attempt - 1, "the index, read again");
    }
    plan.clear();
    let s1 = cache.stats();
    assert_eq!(read(a.as_ref(), 16, 4).unwrap(), want[16..20]);
    let s2 = cache.stats();
    assert_eq!(
        (s2.decodes - s1.decodes, s2.entries),
        (2, 3),
        "index and chunk"
    );
    assert_eq!(read(a.as_ref(), 0, 4).unwrap(), want[..4]);
    let s3 = cache.stats();
    assert_eq!(
        (s3.decodes, s3.hits - s2.hits),
        (s2.decodes, 1),
        "chunk (0, 0, 0) survived the failures"
    );
}

#[test]
fn nczarr_chunk() {
    // netcdf-c's NCZarr: float32 (3, 5, 6) in chunks (1, 2, 3), shuffle
    // and zlib: chunk (1, 1, 0).
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&fixtures().join("nczarr/v2.zarr"), &plan, &cache);
        Target {
            what: "nczarr",
            array: array(&ds, "tas"),
            expected: expected("nczarr/expected/v2.zarr/tas.bin"),
            faulted: Box::new(|i| i[0] == 1 && i[1] / 2 == 1 && i[2] / 3 == 0),
            rule: Box::new(|f| Rule::new("v2.zarr/tas/1.1.0", f)),
            flip: 0, // the zlib header
            undetected_flip: None,
            names: vec!["v2.zarr/tas/1.1.0".into()],
            cached: true,
            reloads_indexes: false,
            other: (
                array(&ds, "count"),
                expected("nczarr/expected/v2.zarr/count.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn netcdf3_variable_rows() {
    // float64 fixed_f8 (3, 5), stored big-endian from `begin`: its row 1
    // (elements 5..10) is faulted. netCDF-3 has no checksums.
    let file = fixtures().join("netcdf3/data/classic_types.nc");
    let begin = netcdf3::File::open(&file)
        .unwrap()
        .variable("fixed_f8")
        .unwrap()
        .layout
        .begin;
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&file, &plan, &cache);
        let row = begin + 5 * 8..begin + 10 * 8;
        Target {
            what: "netcdf3",
            array: array(&ds, "fixed_f8"),
            expected: expected("netcdf3/expected/classic_types.fixed_f8.bin"),
            faulted: Box::new(|i| i[0] == 1),
            rule: Box::new(move |f| Rule::new("classic_types.nc", f).bytes(row.clone())),
            // Byte 3 of element 7 (big-endian) is byte 4 of it little-endian.
            flip: begin + 7 * 8 + 3,
            undetected_flip: Some(7 * 8 + 4),
            names: vec!["classic_types.nc".into(), "fixed_f8".into()],
            cached: false,
            reloads_indexes: false,
            other: (
                array(&ds, "fixed_i4"),
                expected("netcdf3/expected/classic_types.fixed_i4.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn hdf5_chunk() {
    // float32 `checked` (4, 5) of nc4.nc (netCDF4-python): chunks of
    // (2, 5) with deflate and fletcher32; the second chunk (rows 2..4) is
    // faulted, at the bytes h5py says it has (chunk_map.json). The
    // checksum catches a flipped byte.
    let file = fixtures().join("hdf5/data/nc4.nc");
    let map: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("hdf5/chunk_map.json")).unwrap())
            .unwrap();
    let chunk = map["nc4.nc"]["checked"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["start"] == serde_json::json!([2, 0]))
        .expect("the second chunk of `checked`")
        .clone();
    let (at, size) = (
        chunk["offset"].as_u64().unwrap(),
        chunk["size"].as_u64().unwrap(),
    );
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&file, &plan, &cache);
        Target {
            what: "hdf5",
            array: array(&ds, "checked"),
            expected: expected("hdf5/expected/nc4.nc.checked.bin"),
            faulted: Box::new(|i| i[0] >= 2),
            rule: Box::new(move |f| Rule::new("nc4.nc", f).bytes(at..at + size)),
            flip: at + size / 2,
            undetected_flip: None,
            names: vec!["nc4.nc".into(), "checked".into()],
            cached: true,
            reloads_indexes: false,
            other: (
                array(&ds, "zstd"),
                expected("hdf5/expected/nc4.nc.zstd.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn nca_zarr_fragment_chunk() {
    // mixed.nca.json tas (time 6, lat 4, lon 5): partition [1, 0] is
    // frag/mixed_10.zarr (time 2..6, lon 0..2), a v3 store of chunks
    // (2, 2, 1), zstd. Its chunk (0, 1, 1) is time 2..4, lat 2..4, lon 1.
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&fixtures().join("nca/data"), &plan, &cache);
        Target {
            what: "nca zarr fragment",
            array: array(&ds, "mixed.nca.json/tas"),
            expected: expected("nca/expected/data__mixed__tas.bin"),
            faulted: Box::new(|i| (2..4).contains(&i[0]) && (2..4).contains(&i[1]) && i[2] == 1),
            rule: Box::new(|f| Rule::new("mixed_10.zarr/c/0/1/1", f)),
            flip: 0,
            undetected_flip: None,
            names: vec!["mixed_10.zarr".into(), "mixed.nca.json".into()],
            cached: true,
            reloads_indexes: false,
            other: (
                array(&ds, "directions.nca.json/v"),
                expected("nca/expected/data__directions__v.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn nca_raw_fragment() {
    // Partition [0, 1] of the same master: frag/mixed_01.bin, raw <f8
    // (2, 4, 1) from byte 16, at time 0..2, lon 2.
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&fixtures().join("nca/data"), &plan, &cache);
        Target {
            what: "nca raw fragment",
            array: array(&ds, "mixed.nca.json/tas"),
            expected: expected("nca/expected/data__mixed__tas.bin"),
            faulted: Box::new(|i| i[0] < 2 && i[2] == 2),
            rule: Box::new(|f| Rule::new("mixed_01.bin", f)),
            // Byte 3 of the fragment's first element, master element
            // (0, 0, 2): flat byte 2 * 8 + 3.
            flip: 16 + 3,
            undetected_flip: Some(2 * 8 + 3),
            names: vec!["mixed_01.bin".into(), "mixed.nca.json".into()],
            cached: false,
            reloads_indexes: false,
            other: (
                array(&ds, "directions.nca.json/v"),
                expected("nca/expected/data__directions__v.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn kerchunk_reference() {
    // kerchunk does not open through `Files` (yet): its reference store
    // is wrapped directly. temp: float32 (4, 9, 11) in chunks (2, 4, 5),
    // shuffle + zlib; "temp/0.0.0" is a byte range of netcdf4.h5.
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let refs = fixtures().join("kerchunk/data/netcdf4.json");
        let store = kerchunk::load(
            &refs,
            &slabfs::formats::Options::new(
                vec![],
                Arc::new(ChunkCache::new(1 << 20)),
                slabfs::formats::registry::builtin(),
            ),
        )
        .unwrap()
        .expect("a references file");
        let store = Arc::new(FaultyStore::new(store, plan.clone()));
        let h = zarr::open_store(store, cache.clone()).unwrap();
        let get = |p: &str| -> Arc<dyn ArraySource> {
            h.nodes
                .iter()
                .find(|n| n.path == p)
                .and_then(|n| n.array.clone())
                .unwrap_or_else(|| panic!("{p} not found"))
        };
        Target {
            what: "kerchunk",
            array: get("temp"),
            expected: expected("kerchunk/expected/netcdf4/temp.bin"),
            faulted: Box::new(|i| i[0] < 2 && i[1] < 4 && i[2] < 5),
            rule: Box::new(|f| Rule::new("temp/0.0.0", f)),
            flip: 0, // the zlib header
            undetected_flip: None,
            names: vec!["netcdf4.h5".into(), "temp/0.0.0".into()],
            cached: true,
            reloads_indexes: false,
            other: (
                get("counts"),
                expected("kerchunk/expected/netcdf4/counts.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn packed_archive_block() {
    // realistic.nc packed in 1 KiB blocks: elev, int16 (37, 53), is 4
    // blocks of 512 elements; block 1 (elements 512..1024) is faulted.
    let tmp = tempfile::tempdir().unwrap();
    let ncb = tmp.path().join("realistic.ncb");
    let opts = packed::PackOptions {
        block_size: 1024,
        ..Default::default()
    };
    packed::pack(&fixtures().join("packed/data/realistic.nc"), &ncb, &opts).unwrap();
    let nc = packed::open(&ncb).unwrap();
    let var = nc
        .variables()
        .iter()
        .position(|v| v.name == "elev")
        .unwrap();
    let index = &packed::archive_of(&nc).expect("an archive").vars[var];
    assert_eq!(index.nblocks(), 4);
    let (a, b) = index.block_range(1);
    exercise(|| {
        let (plan, cache) = plan_and_cache();
        let ds = open(&ncb, &plan, &cache);
        Target {
            what: "packed",
            array: array(&ds, "elev"),
            expected: expected("packed/expected/realistic.elev.bin"),
            faulted: Box::new(|i| (512..1024).contains(&(i[0] * 53 + i[1]))),
            rule: Box::new(move |f| Rule::new("realistic.ncb", f).bytes(a..b)),
            flip: a + 5, // the block's CRC-32C catches it
            undetected_flip: None,
            names: vec!["realistic.ncb".into(), "elev".into()],
            cached: true,
            reloads_indexes: false,
            other: (
                array(&ds, "temp"),
                expected("packed/expected/realistic.temp.bin"),
            ),
            plan,
            cache,
        }
    });
}

#[test]
fn a_slow_chunk_holds_up_nothing_else() {
    // While one reader waits on a slow chunk, other chunks of the same
    // array and other arrays are served at once.
    let (plan, cache) = plan_and_cache();
    let ds = open(&fixtures().join("zarr/v2/basic.zarr"), &plan, &cache);
    let time = array(&ds, "time");
    let want = expected("zarr/expected/v2_rank1_top.bin");
    let counts_want = expected("zarr/expected/v2_i2_plain_attrs.bin");
    let id = plan.add(Rule::new(
        "basic.zarr/time/1",
        Fault::Slow(Duration::from_secs(4)),
    ));
    let slow = {
        let time = time.clone();
        std::thread::spawn(move || read(time.as_ref(), 16 * 8, 8))
    };
    let t = Instant::now();
    while plan.fired(id) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the slow read never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(read(time.as_ref(), 0, 16 * 8).unwrap(), want[..16 * 8]);
    assert_eq!(
        read(time.as_ref(), 32 * 8, 8).unwrap(),
        want[32 * 8..33 * 8]
    );
    let counts = array(&ds, "g1/counts");
    assert_eq!(read(counts.as_ref(), 0, 1 << 20).unwrap(), counts_want);
    assert!(
        !slow.is_finished(),
        "the other reads waited for the slow one"
    );
    assert_eq!(slow.join().unwrap().unwrap(), want[16 * 8..17 * 8]);
}

#[test]
fn a_transient_error_fails_one_of_many_concurrent_readers() {
    // Eight readers ask for one chunk at once; its first read fails. The
    // cache runs one load at a time per chunk and keeps no failure: the
    // reader whose load failed gets EIO, the others retry and get the
    // bytes, and the chunk is decoded once.
    let (plan, cache) = plan_and_cache();
    let ds = open(&fixtures().join("zarr/v2/basic.zarr"), &plan, &cache);
    let time = array(&ds, "time");
    let want = expected("zarr/expected/v2_rank1_top.bin");
    plan.add(Rule::new(
        "basic.zarr/time/2",
        Fault::Slow(Duration::from_millis(200)),
    ));
    let err = plan.add(Rule::new("basic.zarr/time/2", Fault::Error(ErrorKind::Other)).times(1));
    let s0 = cache.stats();
    let results: Vec<slabfs::Result<Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8u64)
            .map(|k| {
                let time = &time;
                s.spawn(move || read(time.as_ref(), (32 + k) * 8, 8))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut failures = 0;
    for (k, r) in results.iter().enumerate() {
        match r {
            Ok(b) => assert_eq!(*b, want[(32 + k) * 8..][..8], "reader {k}"),
            Err(e) => {
                assert_eq!(e.errno(), libc::EIO);
                assert!(chain(e).contains("basic.zarr/time/2"), "{}", chain(e));
                failures += 1;
            }
        }
    }
    assert_eq!(failures, 1, "{results:?}");
    assert_eq!(plan.fired(err), 1);
    assert_eq!(cache.stats().decodes - s0.decodes, 1);
}

fn lookup(fs: &SlabFs, path: &str) -> u64 {
    let mut ino = ROOT_INO;
    for c in path.split('/') {
        ino = fs.lookup(ino, OsStr::new(c)).unwrap().ino;
    }
    ino
}

#[test]
fn the_filesystem_core_answers_eio_and_keeps_serving() {
    let (plan, cache) = plan_and_cache();
    let ds = open(&fixtures().join("zarr/v2/basic.zarr"), &plan, &cache);
    let config = FsConfig {
        byte_order: Endian::Little,
        uid: 0,
        gid: 0,
        views: Views::default(),
        track_changes: false,
    };
    let fs = SlabFs::new(&ds.entries, config).with_cache(cache.clone());
    let want = expected("zarr/expected/v2_rank1_top.bin");
    let counts_want = expected("zarr/expected/v2_i2_plain_attrs.bin");
    let (time, counts) = (lookup(&fs, "time"), lookup(&fs, "g1/counts"));
    let fh = fs.open(time, libc::O_RDONLY).unwrap().fh;
    let id = plan.add(Rule::new("basic.zarr/time/1", Fault::Short));

    let e = fs.read(time, fh, 0, 4096).unwrap_err();
    assert_eq!(e.errno(), libc::EIO);
    let msg = chain(&e);
    assert!(
        msg.contains("time") && msg.contains("basic.zarr/time/1"),
        "{msg}"
    );
    assert_eq!(fs.stats().errors(libc::EIO), 1);
    assert!(plan.fired(id) > 0);

    // Another file, and the good chunks of the same one, still read.
    let cfh = fs.open(counts, libc::O_RDONLY).unwrap().fh;
    assert_eq!(fs.read(counts, cfh, 0, 1 << 20).unwrap(), counts_want);
    assert_eq!(fs.read(time, fh, 0, 128).unwrap(), want[..128]);
    assert_eq!(fs.read(time, fh, 256, 4096).unwrap(), want[256..]);
    assert_eq!(fs.read(time, fh, 100, 100).unwrap_err().errno(), libc::EIO);
    assert_eq!(fs.stats().errors(libc::EIO), 2);

    plan.clear();
    assert_eq!(fs.read(time, fh, 0, 4096).unwrap(), want);
    fs.release(time, fh);
    fs.release(counts, cfh);
}

/// Regression: a bit flipped while reading a shard index without a
/// checksum (the outer level of `sharded_nested`: big-endian, at the
/// start, no crc32c) decodes into wrong offsets. That index used to stay
/// cached, so the shard kept failing after the storage recovered.
#[test]
fn a_damaged_shard_index_is_not_remembered() {
    let (plan, cache) = plan_and_cache();
    let ds = open(&fixtures().join("zarr/v3/sharded.zarr"), &plan, &cache);
    let a = array(&ds, "sharded_nested");
    let want = expected("zarr/expected/v3_sharded_nested.bin");
    // Byte 7 is the low byte of the first inner shard's offset.
    let id = plan.add(Rule::new("sharded_nested/c/0/0", Fault::Flip { offset: 7 }));
    let e = read(a.as_ref(), 0, 2).expect_err("the inner index is read from the wrong place");
    assert_eq!(e.errno(), libc::EIO);
    assert!(chain(&e).contains("sharded_nested/c/0/0"), "{}", chain(&e));
    assert_eq!(plan.fired(id), 1);
    plan.clear();
    assert_eq!(read(a.as_ref(), 0, 2).unwrap(), want[..2]);
    assert_eq!(read(a.as_ref(), 0, 1 << 20).unwrap(), want);
}

#[test]
fn a_fragment_opened_on_first_read_is_not_remembered_failed() {
    // frag/mixed_12.nc (partition [1, 2]: time 2..6, lon 3..5) does not
    // exist when the descriptor loads, so its header is read by the first
    // read that needs it. That header read fails; the next one, after the
    // storage recovers, opens the fragment and serves its bytes.
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(data.join("frag")).unwrap();
    let src = fixtures().join("nca/data");
    std::fs::copy(src.join("mixed.nca.json"), data.join("mixed.nca.json")).unwrap();
    for e in std::fs::read_dir(src.join("frag")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        let name = name.to_str().unwrap();
        if name.starts_with("mixed_") && name != "mixed_12.nc" {
            let out = data.join("frag").join(name);
            let status = std::process::Command::new("cp")
                .arg("-r")
                .arg(e.path())
                .arg(&out)
                .status()
                .unwrap();
            assert!(status.success());
        }
    }
    let (plan, cache) = plan_and_cache();
    let ds = open(&data, &plan, &cache);
    let a = array(&ds, "mixed.nca.json/tas");
    let want = expected("nca/expected/data__mixed__tas.bin");
    // Element (3, 0, 4): in the late partition.
    let at = ((3 * 4) * 5 + 4) * 8;
    assert!(read(a.as_ref(), at, 8).is_err(), "no fragment yet");
    std::fs::copy(src.join("frag/mixed_12.nc"), data.join("frag/mixed_12.nc")).unwrap();
    let id = plan.add(Rule::new("mixed_12.nc", Fault::Error(ErrorKind::Other)));
    for _ in 0..2 {
        let e = read(a.as_ref(), at, 8).unwrap_err();
        assert_eq!(e.errno(), libc::EIO);
        assert!(chain(&e).contains("mixed_12.nc"), "{}", chain(&e));
    }
    assert!(plan.fired(id) >= 2, "the open was attempted again");
    // The other partitions read meanwhile.
    assert_eq!(read(a.as_ref(), 0, 8).unwrap(), want[..8]);
    plan.clear();
    assert_eq!(read(a.as_ref(), at, 8).unwrap(), want[at as usize..][..8]);
    assert_eq!(read(a.as_ref(), 0, 1 << 20).unwrap(), want);
}

// ---------------------------------------------------------------------
// Limits: metadata whose sizes, shapes or counts are absurd is refused
// with an error naming the file, before anything is allocated for it;
// shapes that are merely huge work.

fn write(path: &Path, text: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The messages of what `ds` skipped, each with the file it names.
fn skipped_naming(ds: &Dataset, file: &Path) -> String {
    let name = file.display().to_string();
    ds.skipped
        .iter()
        .map(|e| chain(e))
        .find(|m| m.contains(&name))
        .unwrap_or_else(|| {
            panic!(
                "nothing skipped names {name}: {:?}",
                ds.skipped.iter().map(|e| e.to_string()).collect::<Vec<_>>()
            )
        })
}

#[test]
fn metadata_documents_of_absurd_size_are_refused_unread() {
    // Sparse files: 300 MiB that cost no disk, but would cost 300 MiB of
    // memory each if they were read. Every kind of metadata document has
    // its bound and is refused by size alone.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let huge = |p: &Path| {
        write(p, "{");
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(300 << 20)
            .unwrap();
    };
    let docs = [
        root.join("v3.zarr/zarr.json"),
        root.join("v2.zarr/.zarray"),
        root.join("consolidated.zarr/.zmetadata"),
        root.join("agg.nca.json"),
        root.join("refs.json"),
    ];
    for d in &docs {
        huge(d);
    }
    // A v2 group whose child array's metadata is huge: the group opens.
    write(&root.join("group.zarr/.zgroup"), r#"{"zarr_format": 2}"#);
    huge(&root.join("group.zarr/a/.zarray"));
    let ds = dataset::Opener::new(new_cache()).open(root).unwrap();
    assert!(ds.entries.is_empty());
    for d in docs.iter().chain([&root.join("group.zarr/a/.zarray")]) {
        let msg = skipped_naming(&ds, d);
        assert!(
            msg.contains(&(300u64 << 20).to_string()) && msg.contains("more than"),
            "{}: {msg}",
            d.display()
        );
    }
}

#[test]
fn a_netcdf3_header_longer_than_its_bound_is_refused() {
    // CDF-1: no dimensions, one global attribute of 80 MiB of text (a
    // sparse file), no variables: a valid header larger than any real
    // one, which must not be read into memory.
    let mut h = Vec::new();
    h.extend(b"CDF\x01");
    h.extend(0u32.to_be_bytes()); // numrecs
    h.extend([0u8; 8]); // no dimensions
    h.extend(0x0Cu32.to_be_bytes()); // NC_ATTRIBUTE
    h.extend(1u32.to_be_bytes());
    h.extend(1u32.to_be_bytes());
    h.extend(b"a\0\0\0");
    h.extend(2u32.to_be_bytes()); // NC_CHAR
    let n: u32 = 80 << 20;
    h.extend(n.to_be_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("big.nc");
    write(&p, &h);
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(h.len() as u64 + n as u64 + 8).unwrap();
    f.write_all_at(&[0u8; 8], h.len() as u64 + n as u64)
        .unwrap();
    let ds = dataset::Opener::new(new_cache()).open(tmp.path()).unwrap();
    let msg = skipped_naming(&ds, &p);
    assert!(msg.contains("header"), "{msg}");
}

/// A v2 array of `|u1` with no compressor and fill value 7.
fn zarray(shape: &[u64], chunks: &[u64]) -> String {
    serde_json::json!({
        "zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": "|u1",
        "compressor": null, "fill_value": 7, "order": "C", "filters": null
    })
    .to_string()
}

/// A v3 array of uint8 with fill value 7 and `codecs`.
fn zarr_json(shape: &[u64], grid: serde_json::Value, codecs: serde_json::Value) -> String {
    serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "uint8",
        "chunk_grid": grid, "chunk_key_encoding": {"name": "default"},
        "fill_value": 7, "codecs": codecs
    })
    .to_string()
}

fn regular(chunks: &[u64]) -> serde_json::Value {
    serde_json::json!({"name": "regular", "configuration": {"chunk_shape": chunks}})
}

fn bytes_codec() -> serde_json::Value {
    serde_json::json!([{"name": "bytes"}])
}

#[test]
fn arrays_of_almost_2_64_bytes_read_at_their_far_end() {
    // A flat file of 2^64 - 1 bytes: one-byte chunks whose last key is
    // 18446744073709551614. Reads near the end see the stored chunk and
    // the fill value; nothing iterates over the chunks.
    let max = u64::MAX;
    let last = (max - 1).to_string();
    let tmp = tempfile::tempdir().unwrap();
    let v2 = tmp.path().join("v2.zarr");
    write(&v2.join(".zarray"), zarray(&[max], &[1]));
    write(&v2.join(&last), [42u8]);
    let v3 = tmp.path().join("v3.zarr");
    write(
        &v3.join("zarr.json"),
        zarr_json(&[max], regular(&[1]), bytes_codec()),
    );
    write(&v3.join("c").join(&last), [42u8]);
    // Two dimensions: (2^63 - 1) rows of 2, chunks of one row.
    let rows = tmp.path().join("rows.zarr");
    write(&rows.join(".zarray"), zarray(&[max / 2, 2], &[1, 2]));
    write(&rows.join(format!("{}.0", max / 2 - 1)), [40u8, 41]);

    let ds = dataset::Opener::new(new_cache()).open(tmp.path()).unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    for name in ["v2.zarr", "v3.zarr"] {
        let a = array(&ds, name);
        assert_eq!(a.meta().nbytes(), max);
        assert_eq!(read(a.as_ref(), max - 3, 3).unwrap(), [7, 7, 42], "{name}");
        assert_eq!(read(a.as_ref(), max - 1, 100).unwrap(), [42], "{name}");
        assert_eq!(read(a.as_ref(), max, 100).unwrap(), [0u8; 0], "{name}");
        assert_eq!(read(a.as_ref(), 0, 2).unwrap(), [7, 7], "{name}");
    }
    let a = array(&ds, "rows.zarr");
    assert_eq!(a.meta().nbytes(), max - 1);
    assert_eq!(read(a.as_ref(), max - 5, 10).unwrap(), [7, 7, 40, 41]);
}

#[test]
fn zarr_shapes_and_chunk_grids_that_overflow_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let big = 1u64 << 31;
    let sharded = |inner: &[u64]| {
        serde_json::json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": inner, "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": "end"}}])
    };
    let rectilinear = |edges: serde_json::Value| {
        serde_json::json!({"name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": [edges]}})
    };
    let cases: Vec<(&str, &str, String, &str)> = vec![
        // Bytes of the flat file past 2^64.
        (
            "v2_shape.zarr",
            ".zarray",
            zarray(&[u64::MAX, 2], &[1, 1]),
            "overflow",
        ),
        (
            "v3_shape.zarr",
            "zarr.json",
            zarr_json(&[1 << 32, 1 << 32], regular(&[1, 1]), bytes_codec()),
            "overflow",
        ),
        // A chunk whose element count overflows 2^64.
        (
            "v2_chunk.zarr",
            ".zarray",
            zarray(&[1, 1, 1], &[1 << 22, 1 << 22, 1 << 22]),
            "limit",
        ),
        (
            "v3_chunk.zarr",
            "zarr.json",
            zarr_json(&[1], regular(&[u64::MAX]), bytes_codec()),
            "limit",
        ),
        // Chunks of no elements: no grid.
        ("v2_zero.zarr", ".zarray", zarray(&[8], &[0]), "chunk"),
        (
            "v3_zero.zarr",
            "zarr.json",
            zarr_json(&[8], regular(&[0]), bytes_codec()),
            "chunk",
        ),
        // Shard indexes of 2^62 inner chunks (2^66 bytes) and of 2^40
        // (16 TiB, to be read and cached whole).
        (
            "v3_index.zarr",
            "zarr.json",
            zarr_json(&[big, big], regular(&[big, big]), sharded(&[1, 1])),
            "index larger than",
        ),
        (
            "v3_big_index.zarr",
            "zarr.json",
            zarr_json(
                &[1 << 20, 1 << 20],
                regular(&[1 << 20, 1 << 20]),
                sharded(&[1, 1]),
            ),
            "index larger than",
        ),
        // Rectilinear edges (run-length form) adding up past 2^64.
        (
            "v3_edges.zarr",
            "zarr.json",
            zarr_json(
                &[8],
                rectilinear(serde_json::json!([[1u64 << 63, 3]])),
                bytes_codec(),
            ),
            "overflow",
        ),
    ];
    for (dir, file, doc, _) in &cases {
        write(&root.join(dir).join(file), doc);
    }
    let t = Instant::now();
    let ds = dataset::Opener::new(new_cache()).open(root).unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        ds.entries.is_empty(),
        "{:?}",
        ds.entries.iter().map(|e| &e.path).collect::<Vec<_>>()
    );
    for (dir, file, _, needle) in &cases {
        let msg = skipped_naming(&ds, &root.join(dir).join(file));
        assert!(msg.contains(needle), "{dir}: {msg}");
    }
}

/// An NCA descriptor of one uint8 variable `v` of `shape` (dimension
/// names d0, d1...) with the given partition matrix.
fn nca_doc(shape: &[u64], pshape: &[u64], partitions: serde_json::Value) -> String {
    let names: Vec<String> = (0..shape.len()).map(|d| format!("d{d}")).collect();
    let dims: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .zip(shape)
        .map(|(n, &s)| (n.clone(), s.into()))
        .collect();
    serde_json::json!({
        "dimensions": dims,
        "variables": {"v": {
            "dtype": "uint8", "nca_dimensions": names.join(" "), "_FillValue": 7,
            "nca_array": {"pdimensions": names, "pshape": pshape, "Partitions": partitions}
        }}
    })
    .to_string()
}

#[test]
fn aggregations_with_overflowing_shapes_or_partition_matrices() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(&root.join("two.bin"), [1u8, 2]);
    let max = u64::MAX;
    let raw = |location: serde_json::Value, index: serde_json::Value, shape: &[u64]| {
        serde_json::json!([{"index": index, "location": location, "format": "raw",
            "data": {"file": "two.bin", "dtype": "|u1", "shape": shape}}])
    };
    // Refused: a master of more than 2^64 bytes; partitions whose
    // boundaries cut the master into more cells than the bound (81^4
    // here: 40 partitions on the diagonal of a 4-D master). (The cell
    // count cannot overflow: it is at most the element count.)
    write(
        &root.join("shape.nca.json"),
        nca_doc(
            &[max, 2],
            &[1, 1],
            raw(
                serde_json::json!([[0, 1], [0, 2]]),
                serde_json::json!([0, 0]),
                &[1, 2],
            ),
        ),
    );
    let many: Vec<serde_json::Value> = (0..40u64)
        .map(|k| {
            let at = serde_json::json!([k * 512, k * 512 + 1]);
            serde_json::json!({"index": [k, k, k, k], "location": [at, at, at, at],
                "format": "raw",
                "data": {"file": "two.bin", "dtype": "|u1", "shape": [1, 1, 1, 1]}})
        })
        .collect();
    write(
        &root.join("cells.nca.json"),
        nca_doc(&[1 << 15; 4], &[40; 4], serde_json::Value::Array(many)),
    );
    // Accepted: a partition matrix of 2^128 positions of which one is
    // used, and a partition at the very end of a 2^64 - 1 byte master
    // (everything else is a hole).
    write(
        &root.join("pshape.nca.json"),
        nca_doc(
            &[2, 2],
            &[max, max],
            raw(
                serde_json::json!([[0, 1], [0, 2]]),
                serde_json::json!([0, 0]),
                &[1, 2],
            ),
        ),
    );
    write(
        &root.join("far.nca.json"),
        nca_doc(
            &[max],
            &[1],
            raw(
                serde_json::json!([[max - 2, max]]),
                serde_json::json!([0]),
                &[2],
            ),
        ),
    );
    let t = Instant::now();
    let ds = dataset::Opener::new(new_cache()).open(root).unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    let paths: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["far.nca.json/v", "pshape.nca.json/v"],
        "{:?}",
        ds.skipped
    );
    let msg = skipped_naming(&ds, &root.join("shape.nca.json"));
    assert!(msg.contains("overflow") || msg.contains("2^64"), "{msg}");
    let msg = skipped_naming(&ds, &root.join("cells.nca.json"));
    assert!(msg.contains("cells"), "{msg}");

    let a = array(&ds, "pshape.nca.json/v");
    assert_eq!(read(a.as_ref(), 0, 8).unwrap(), [1, 2, 7, 7]);
    let a = array(&ds, "far.nca.json/v");
    assert_eq!(a.meta().nbytes(), max);
    assert_eq!(read(a.as_ref(), max - 4, 8).unwrap(), [7, 7, 1, 2]);
    assert_eq!(read(a.as_ref(), 0, 2).unwrap(), [7, 7]);
}

#[test]
fn a_netcdf3_variable_of_almost_2_64_bytes_is_refused_or_read_at_its_end() {
    // CDF-5 (64-bit sizes): a byte variable v(x, y) with x = y = 2^32 is
    // 2^64 bytes: refused. (The layout's unit tests cover 2^80.)
    let mut h = Vec::new();
    h.extend(b"CDF\x05");
    h.extend(0u64.to_be_bytes()); // numrecs
    h.extend(0x0Au32.to_be_bytes()); // NC_DIMENSION
    h.extend(2u64.to_be_bytes());
    for name in [b"x", b"y"] {
        h.extend(1u64.to_be_bytes());
        h.extend(name);
        h.extend([0u8; 3]);
        h.extend((1u64 << 32).to_be_bytes());
    }
    h.extend([0u8; 12]); // no global attributes
    h.extend(0x0Bu32.to_be_bytes()); // NC_VARIABLE
    h.extend(1u64.to_be_bytes());
    h.extend(1u64.to_be_bytes());
    h.extend(b"v\0\0\0");
    h.extend(2u64.to_be_bytes()); // rank 2
    h.extend(0u64.to_be_bytes());
    h.extend(1u64.to_be_bytes());
    h.extend([0u8; 12]); // no attributes
    h.extend(1u32.to_be_bytes()); // NC_BYTE
    h.extend(u64::MAX.to_be_bytes()); // vsize (ignored)
    let begin = h.len() as u64 + 8;
    h.extend(begin.to_be_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("huge.nc");
    write(&p, &h);
    let ds = dataset::Opener::new(new_cache()).open(tmp.path()).unwrap();
    let msg = skipped_naming(&ds, &p);
    assert!(msg.contains("2^64") || msg.contains("overflow"), "{msg}");
}

/// A minimal CDF-1 writer: dimensions, then fixed variables with text
/// attributes, their data laid out after the header in order.
struct Cdf1 {
    dims: Vec<(String, u32)>,
    vars: Vec<Var>,
}

struct Var {
    name: String,
    dimids: Vec<u32>,
    nc_type: u32,
    /// Text attributes.
    atts: Vec<(String, String)>,
    /// Big-endian data.
    data: Vec<u8>,
}

impl Cdf1 {
    fn name(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u32).to_be_bytes());
        out.extend(s.as_bytes());
        out.resize(out.len().div_ceil(4) * 4, 0);
    }

    fn header(&self, begins: &[u32]) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend(b"CDF\x01");
        h.extend(0u32.to_be_bytes());
        h.extend(0x0Au32.to_be_bytes());
        h.extend((self.dims.len() as u32).to_be_bytes());
        for (n, len) in &self.dims {
            Cdf1::name(&mut h, n);
            h.extend(len.to_be_bytes());
        }
        h.extend([0u8; 8]); // no global attributes
        h.extend(0x0Bu32.to_be_bytes());
        h.extend((self.vars.len() as u32).to_be_bytes());
        for (v, begin) in self.vars.iter().zip(begins) {
            Cdf1::name(&mut h, &v.name);
            h.extend((v.dimids.len() as u32).to_be_bytes());
            for d in &v.dimids {
                h.extend(d.to_be_bytes());
            }
            if v.atts.is_empty() {
                h.extend([0u8; 8]);
            } else {
                h.extend(0x0Cu32.to_be_bytes());
                h.extend((v.atts.len() as u32).to_be_bytes());
                for (k, text) in &v.atts {
                    Cdf1::name(&mut h, k);
                    h.extend(2u32.to_be_bytes()); // NC_CHAR
                    Cdf1::name(&mut h, text);
                }
            }
            h.extend(v.nc_type.to_be_bytes());
            h.extend((v.data.len().div_ceil(4) as u32 * 4).to_be_bytes());
            h.extend(begin.to_be_bytes());
        }
        h
    }

    fn bytes(&self) -> Vec<u8> {
        let len = self.header(&vec![0; self.vars.len()]).len() as u32;
        let mut begins = Vec::new();
        let mut at = len;
        for v in &self.vars {
            begins.push(at);
            at += v.data.len().div_ceil(4) as u32 * 4;
        }
        let mut out = self.header(&begins);
        for v in &self.vars {
            out.extend(&v.data);
            out.resize(out.len().div_ceil(4) * 4, 0);
        }
        out
    }
}

/// Regression: a CF-1.13 aggregation over 8 dimensions of 256 fragments
/// each (a `map` of 8 KiB) has 256^8 = 2^64 fragments. Their count
/// overflowed (a panic in debug builds; in release it wrapped to 0 and
/// passed the bound).
#[test]
fn a_cf_aggregation_whose_fragment_count_overflows_is_refused() {
    let mut dims: Vec<(String, u32)> = (0..8).map(|d| (format!("d{d}"), 256)).collect();
    dims.push(("r".into(), 8));
    let map: Vec<u8> = std::iter::repeat_n(1i32.to_be_bytes(), 8 * 256)
        .flatten()
        .collect();
    let names: Vec<String> = (0..8).map(|d| format!("d{d}")).collect();
    let nc = Cdf1 {
        dims,
        vars: vec![
            Var {
                name: "map".into(),
                dimids: vec![8, 0],
                nc_type: 4, // NC_INT
                atts: vec![],
                data: map,
            },
            Var {
                name: "agg".into(),
                dimids: vec![],
                nc_type: 4,
                atts: vec![
                    ("aggregated_dimensions".into(), names.join(" ")),
                    ("aggregated_data".into(), "map: map".into()),
                ],
                data: vec![0; 4],
            },
        ],
    };
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("agg.nc");
    write(&p, nc.bytes());
    let ds = dataset::Opener::new(new_cache()).open(&p).unwrap();
    assert!(ds.get("agg").is_none());
    let msg = skipped_naming(&ds, &p);
    assert!(msg.contains("fragments"), "{msg}");
}
