//! What the slabfs fuzz targets share: a scratch directory holding copies
//! of the test fixtures, a fresh chunk cache, and a probe that reads a few
//! ranges of every array a target manages to open.
//!
//! # Why a scratch directory
//!
//! The aggregation (NCA, CF-1.13, CFA-0.4) and kerchunk readers take a
//! *file*: they canonicalise its path, confine every reference to the
//! directory holding it, and open the fragments it names. The targets for
//! them therefore write each fuzz input to a file inside a copy of the
//! fixture directory the seeds came from, so a seed (and every mutation of
//! it that keeps its references) really reaches the fragments and reads
//! them, instead of stopping at "file not found". The copy lives in
//! `/dev/shm` (tmpfs: one write per input costs microseconds, and nothing
//! touches the disk), one directory per process so that parallel fuzzing
//! jobs never see each other's input; directories of processes that no
//! longer exist are removed on start-up.
//!
//! # What the probe checks
//!
//! [`probe`] reads four small ranges of an opened array (start, middle,
//! end, the last byte), alternately in native and swapped byte order,
//! through [`slabfs::engine::read::read_at`], the function a FUSE read calls. A
//! read may fail (the input is garbage; a typed error is the right
//! answer) but must not panic, and when it succeeds it must return exactly
//! the bytes up to the end of the file (the contract of `read_at`).
//!
//! Reading decodes whole chunks, and slabfs accepts chunks of up to
//! [`slabfs::formats::zarr::array::MAX_CHUNK_BYTES`] (4 GiB): a valid but huge
//! chunk shape in fuzzed metadata would then cost gigabytes per input and
//! stop the fuzzer on its memory limit without revealing anything. Arrays
//! whose decoded chunk exceeds [`MAX_FUZZ_CHUNK_BYTES`] are opened (that
//! is what the metadata targets test) but not read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use slabfs::ArraySource;
use slabfs::engine::cache::ChunkCache;
use slabfs::dtype::Endian;
use slabfs::engine::read::read_at;

/// Largest decoded chunk the targets let slabfs decode (see the module
/// documentation): far above every fixture's, far below the memory limit
/// the fuzzer runs with.
pub const MAX_FUZZ_CHUNK_BYTES: u64 = 16 << 20;

/// Bytes asked for by each read of [`probe`]: a page, as FUSE asks.
const PROBE_BYTES: u64 = 4096;

/// Budget of the chunk cache each input gets (every input starts from an
/// empty cache, so a crash reproduces from the input alone).
const CACHE_BYTES: usize = 64 << 20;

/// A fresh, empty chunk cache.
pub fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(CACHE_BYTES))
}

/// The decoded size in bytes of a chunk of `shape` with `item` bytes per
/// element, saturating.
pub fn chunk_bytes(shape: &[u64], item: usize) -> u64 {
    shape
        .iter()
        .fold(item as u64, |acc, &d| acc.saturating_mul(d))
}

/// Read a few ranges of `array` (see the module documentation). Arrays
/// with chunks larger than [`MAX_FUZZ_CHUNK_BYTES`] are skipped, judged
/// by `meta().chunk_shape` (sources without chunks are always read).
pub fn probe(array: &dyn ArraySource) {
    let meta = array.meta();
    if let Some(shape) = &meta.chunk_shape
        && chunk_bytes(shape, meta.item_size()) > MAX_FUZZ_CHUNK_BYTES
    {
        return;
    }
    probe_unchecked(array);
}

/// [`probe`] without the chunk-size check, for callers that checked the
/// chunks they know better (a sharded array's inner chunks).
pub fn probe_unchecked(array: &dyn ArraySource) {
    let size = array.meta().nbytes();
    let swapped = match Endian::NATIVE {
        Endian::Little => Endian::Big,
        Endian::Big => Endian::Little,
    };
    let offsets = [
        0,
        size / 2,
        size.saturating_sub(PROBE_BYTES / 2),
        size.saturating_sub(1),
    ];
    for (i, &offset) in offsets.iter().enumerate() {
        let order = if i % 2 == 0 { Endian::NATIVE } else { swapped };
        let mut buf = vec![0u8; PROBE_BYTES as usize];
        if let Ok(n) = read_at(array, offset, &mut buf, order) {
            let expected = size.saturating_sub(offset).min(PROBE_BYTES);
            assert_eq!(
                n as u64, expected,
                "read_at({offset}) of a {size}-byte file returned {n} bytes"
            );
        }
    }
}

/// The repository's `tests/fixtures`.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// This process's scratch directory: `fixtures` subdirectories (relative
/// to `tests/fixtures`) copied under it on first use.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        remove_stale(&base);
        let dir = base.join(format!("slabfs-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["nca/data", "kerchunk/data", "netcdf3/data", "hdf5/data"] {
            copy_dir(&fixtures().join(sub), &dir.join(sub));
        }
        dir
    })
}

/// Remove the scratch directories of processes that have exited.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("slabfs-fuzz-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the scratch directory");
    for e in std::fs::read_dir(from).expect("read a fixture directory") {
        let e = e.expect("read a fixture directory");
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().expect("stat a fixture").is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy a fixture");
        }
    }
}

/// Write `data` to `dir/name` under the scratch directory, open it as a
/// dataset the way `slabfs mount FILE` does, and [`probe`] every array.
pub fn open_and_probe(dir: &str, name: &str, data: &[u8]) {
    let path = scratch().join(dir).join(name);
    std::fs::write(&path, data).expect("write the fuzz input");
    if let Ok(ds) = slabfs::formats::dataset::open(&path, cache()) {
        for entry in &ds.entries {
            probe(entry.array.as_ref());
        }
    }
}

/// The largest decoded chunk of `array`'s read grid (its inner chunks when
/// sharded), in bytes, saturating.
pub fn zarr_chunk_bytes(array: &slabfs::formats::zarr::ZarrArray) -> u64 {
    use slabfs::engine::index::tiling::DimTiling;
    let spec = array.spec();
    let largest: Vec<u64> = spec
        .grid
        .iter()
        .map(|t| match t {
            DimTiling::Regular(n) => *n,
            DimTiling::Explicit(ends) => {
                let mut prev = 0;
                ends.iter()
                    .map(|&e| {
                        let len = e.saturating_sub(prev);
                        prev = e;
                        len
                    })
                    .max()
                    .unwrap_or(0)
            }
        })
        .collect();
    chunk_bytes(&largest, spec.meta.item_size())
}

/// Open the Zarr store `store` and [`probe`] every array whose chunks are
/// small enough (judged by its read grid, so sharded arrays with large
/// shards and small inner chunks are read).
pub fn open_store_and_probe(store: slabfs::storage::store::MemoryStore) {
    let Ok(h) = slabfs::formats::zarr::open_store(Arc::new(store), cache()) else {
        return;
    };
    for node in &h.nodes {
        if let Some(array) = &node.array
            && zarr_chunk_bytes(array) <= MAX_FUZZ_CHUNK_BYTES
        {
            probe_unchecked(array.as_ref());
        }
    }
}

/// Split a metadata target's input at its first NUL byte: the metadata
/// document before it (JSON text never holds a raw NUL), the bytes of a
/// chunk after it (`None` without a NUL).
pub fn split_metadata(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    }
}

/// The keys chunk 0 of an array of rank 0 to 4 has under every chunk key
/// encoding (v3 `default` with `/` or `.`, v2 with `.` or `/`), so that
/// whatever the fuzzed metadata says, its first chunk is there.
pub fn first_chunk_keys() -> Vec<String> {
    let mut keys = Vec::new();
    for rank in 0..=4usize {
        for sep in ["/", "."] {
            let zeros = vec!["0"; rank].join(sep);
            keys.push(if rank == 0 {
                "c".to_string()
            } else {
                format!("c{sep}{zeros}")
            });
            keys.push(if rank == 0 { "0".to_string() } else { zeros });
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Print what `what` says on standard error when `SLABFS_FUZZ_DEBUG` is
/// set: how the arithmetic targets show the case an input decodes to,
/// so that a crash can be written down as a plain regression test
/// (docs/DEVELOPMENT.md).
pub fn debug(what: impl FnOnce() -> String) {
    if std::env::var_os("SLABFS_FUZZ_DEBUG").is_some() {
        eprintln!("{}", what());
    }
}

/// Write `data` to the file `name` in the directory `SLABFS_FUZZ_DUMP`
/// names, when it is set: how the targets that rewrite their input
/// (checksum fix-ups) show the bytes slabfs was really given, so that a
/// crash can be saved as a plain fixture (docs/DEVELOPMENT.md).
pub fn dump(name: &str, data: &[u8]) {
    if let Some(dir) = std::env::var_os("SLABFS_FUZZ_DUMP") {
        let path = Path::new(&dir).join(name);
        std::fs::write(&path, data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
