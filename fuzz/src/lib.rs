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
//! [`slabfs::formats::chunked::MAX_CHUNK_BYTES`] (4 GiB): a valid but huge
//! chunk shape in fuzzed metadata would then cost gigabytes per input and
//! stop the fuzzer on its memory limit without revealing anything. Arrays
//! whose decoded chunk exceeds [`MAX_FUZZ_CHUNK_BYTES`] are opened (that
//! is what the metadata targets test) but not read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use slabfs::ArraySource;
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
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
        for sub in [
            "nca/data",
            "kerchunk/data",
            "netcdf3/data",
            "hdf5/data",
            "ncml",
        ] {
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
    if let Ok(ds) = slabfs::formats::dataset::Opener::new(cache()).open(&path) {
        for entry in &ds.entries {
            probe(entry.array.as_ref());
        }
    }
}

/// The largest decoded chunk of `array`'s read grid (its inner chunks when
/// sharded), in bytes, saturating.
pub fn zarr_chunk_bytes(array: &slabfs::formats::chunked::ChunkedArray) -> u64 {
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
pub fn open_store_and_probe(store: slabfs::storage::testing::MemoryStore) {
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

/// An HDF5 file held in memory: what the HDF5 structure targets give the
/// parsers (`formats::hdf5::meta`, `index`, `dense`) to read from.
#[derive(Debug)]
pub struct MemFile(pub Vec<u8>);

impl slabfs::storage::ReadAt for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.0.get(start..end))
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn size(&self) -> std::io::Result<u64> {
        Ok(self.0.len() as u64)
    }
}

/// Signatures of the version 2 structures whose checksum the HDF5 reader
/// checks (see [`hdf5_with_checksums`]).
pub const HDF5_SIGNATURES: &[&[u8; 4]] = &[
    b"OHDR", b"OCHK", b"FRHP", b"FHIB", b"BTHD", b"BTIN", b"BTLF", b"FAHD", b"FADB", b"EAHD",
    b"EAIB", b"EASB", b"EADB",
];

/// `data` with the checksum of every structure that starts with one of
/// [`HDF5_SIGNATURES`] recomputed: the 4 bytes before the next such
/// signature (or the end) set to the lookup3 hash of the bytes from the
/// signature to there. That is only right for structures laid out back to
/// back, which is what small files mostly hold, and lets the fuzzer reach
/// behind the checksums random mutations almost never get right.
pub fn hdf5_with_checksums(data: &[u8]) -> Vec<u8> {
    use slabfs::codec::jenkins_lookup3::hashlittle;
    let mut file = data.to_vec();
    let starts: Vec<usize> = (0..file.len().saturating_sub(3))
        .filter(|&i| HDF5_SIGNATURES.iter().any(|s| &file[i..i + 4] == *s))
        .collect();
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(file.len());
        if end >= start + 8 {
            let sum = hashlittle(&file[start..end - 4], 0);
            file[end - 4..end].copy_from_slice(&sum.to_le_bytes());
        }
    }
    file
}

/// The input of the HDF5 structure targets (`hdf5_object_header`,
/// `hdf5_btree_v1`, `hdf5_btree_v2`, `hdf5_fixed_array`,
/// `hdf5_extensible_array`, `hdf5_fractal_heap`):
///
/// ```text
/// flags (1) | addr (8, LE) | addr2 (8, LE) | target fields... | file bytes
/// ```
///
/// - flags bits 0-1: size of file addresses (0 or 3: 8 bytes, 1: 4, 2: 2),
///   bits 2-3 size of lengths, the same way; bits 4-6 choose what the
///   target parses (its module doc); bit 7: recompute the checksums of
///   the file bytes first ([`hdf5_with_checksums`]).
/// - `addr`: where the structure is (relative to the file's start, as if
///   the superblock were at 0); `addr2`: a second structure some targets
///   need (a group's local heap, a dense index's name B-tree).
pub struct H5Input<'a> {
    pub flags: u8,
    pub addr: u64,
    pub addr2: u64,
    /// What follows the two addresses: the target's fields, then the file.
    pub rest: &'a [u8],
}

impl<'a> H5Input<'a> {
    pub fn parse(data: &'a [u8]) -> Option<H5Input<'a>> {
        let (head, rest) = data.split_at_checked(17)?;
        Some(H5Input {
            flags: head[0],
            addr: u64::from_le_bytes(head[1..9].try_into().unwrap()),
            addr2: u64::from_le_bytes(head[9..17].try_into().unwrap()),
            rest,
        })
    }

    /// The bits 4-6 of the flags.
    pub fn selector(&self) -> u8 {
        (self.flags >> 4) & 0x07
    }

    /// The HDF5 file over `bytes` (checksums recomputed when flag bit 7
    /// says so), with the sizes the flags give.
    pub fn file(&self, bytes: &[u8]) -> slabfs::formats::hdf5::io::H5File {
        let size = |code: u8| match code & 3 {
            1 => 4,
            2 => 2,
            _ => 8,
        };
        let bytes = if self.flags & 0x80 != 0 {
            hdf5_with_checksums(bytes)
        } else {
            bytes.to_vec()
        };
        dump("hdf5.bin", &bytes);
        slabfs::formats::hdf5::io::H5File {
            len: bytes.len() as u64,
            file: Arc::new(MemFile(bytes)),
            base: 0,
            sizeof_addr: size(self.flags),
            sizeof_len: size(self.flags >> 2),
            shared: Default::default(),
        }
    }
}

/// A chunked dataset's geometry as the chunk-index targets decode it:
///
/// ```text
/// rank (1: 1 + b % 4) | gflags (1) | element size (4, LE) |
/// per dimension: shape (4, LE), layout extent (4, LE), chunk (4, LE)
/// ```
///
/// gflags bit 0: the dataset has filters; bit 1: it has one unlimited
/// dimension, `(gflags >> 2) % rank`. The layout extent is at least the
/// shape; a chunk of 0 is taken as 1.
#[derive(Debug)]
pub struct Geom {
    pub shape: Vec<u64>,
    pub layout_shape: Vec<u64>,
    pub chunk: Vec<u64>,
    pub chunk_nbytes: u64,
    pub filtered: bool,
    pub unlimited: Option<usize>,
}

impl Geom {
    /// The geometry at the start of `data` and the bytes after it.
    pub fn parse(data: &[u8]) -> Option<(Geom, &[u8])> {
        let (&r, data) = data.split_first()?;
        let rank = 1 + (r % 4) as usize;
        let (head, data) = data.split_at_checked(5 + 12 * rank)?;
        let word = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().unwrap()) as u64;
        let gflags = head[0];
        let elem = word(1).max(1);
        let mut g = Geom {
            shape: Vec::new(),
            layout_shape: Vec::new(),
            chunk: Vec::new(),
            chunk_nbytes: elem,
            filtered: gflags & 1 != 0,
            unlimited: (gflags & 2 != 0).then_some((gflags as usize >> 2) % rank),
        };
        for d in 0..rank {
            let at = 5 + 12 * d;
            g.shape.push(word(at));
            g.layout_shape.push(word(at + 4).max(word(at)));
            g.chunk.push(word(at + 8).max(1));
            g.chunk_nbytes = g.chunk_nbytes.saturating_mul(word(at + 8).max(1));
        }
        Some((g, data))
    }

    pub fn geometry(&self) -> slabfs::formats::hdf5::index::Geometry {
        slabfs::formats::hdf5::index::Geometry {
            shape: self.shape.clone(),
            layout_shape: self.layout_shape.clone(),
            chunk: self.chunk.clone(),
            chunk_nbytes: self.chunk_nbytes,
            unlimited: self.unlimited,
        }
    }

    /// Chunks per dimension over `shape`.
    pub fn grid(&self, shape: &[u64]) -> Vec<u64> {
        shape
            .iter()
            .zip(&self.chunk)
            .map(|(&s, &c)| s.div_ceil(c))
            .collect()
    }
}

/// Walk the chunk index `index` of the dataset `g` in `f` and check what
/// every chunk index must give: chunk coordinates of the dataset's rank
/// inside its grid (no more chunks than the grid holds), and for an
/// implicit index the grid of the layout extent.
pub fn check_chunk_index(
    f: &slabfs::formats::hdf5::io::H5File,
    index: &slabfs::formats::hdf5::meta::ChunkIndex,
    g: &Geom,
) {
    use slabfs::formats::hdf5::index::{Chunks, chunks};
    debug(|| format!("{index:?} {g:?}"));
    let Ok(found) = chunks(f, index, &g.geometry(), "fuzz") else {
        return;
    };
    match found {
        Chunks::Table {
            grid: table_grid,
            entries,
        } => {
            let total = table_grid
                .iter()
                .try_fold(1u64, |a, &n| a.checked_mul(n))
                .expect("a grid that overflows has no chunks");
            assert!(entries.len() as u64 <= total, "more chunks than the grid's");
            assert!(
                entries.windows(2).all(|w| w[0].linear() < w[1].linear()),
                "entries not sorted by linear index, or repeated"
            );
            if let Some(last) = entries.last() {
                let at = last.linear();
                assert!(at < total, "chunk {at} outside the grid {table_grid:?}");
            }
        }
        Chunks::Implicit { down, nbytes, .. } => {
            assert_eq!(down, g.grid(&g.layout_shape));
            assert_eq!(nbytes, g.chunk_nbytes);
        }
    }
}

/// Decode every header message slabfs reads with its parser, as the
/// group walk and the dataset builder do, and check what the parsers
/// promise: dataspaces of rank at most 32 (with as many maximum sizes),
/// attribute values of exactly `elements x size` bytes.
pub fn parse_messages(
    f: &slabfs::formats::hdf5::io::H5File,
    messages: &[slabfs::formats::hdf5::meta::Message],
) {
    use slabfs::formats::hdf5::meta;
    for m in messages {
        assert_ne!(m.kind, 0, "a NIL message was kept");
        assert_ne!(m.kind, meta::MSG_CONTINUATION, "a continuation was kept");
        let what = "fuzz";
        match m.kind {
            meta::MSG_DATASPACE => {
                if let Ok(s) = meta::dataspace(f, &m.data, what) {
                    assert!(s.dims.len() <= 32);
                    if let Some(max) = &s.max {
                        assert_eq!(max.len(), s.dims.len());
                    }
                }
            }
            meta::MSG_DATATYPE => {
                let _ = meta::datatype(f, &m.data, what);
            }
            meta::MSG_FILL | meta::MSG_FILL_OLD => {
                let _ = meta::fill(f, m.kind, &m.data, what);
            }
            meta::MSG_LAYOUT => {
                if let Ok(meta::Layout::Chunked { chunk, .. }) = meta::layout(f, &m.data, what) {
                    assert!(chunk.len() <= 32 && !chunk.contains(&0));
                }
            }
            meta::MSG_FILTERS => {
                let _ = meta::filters(f, &m.data, what);
            }
            meta::MSG_ATTRIBUTE => {
                if let Ok(a) = meta::attribute(f, &m.data, what) {
                    let n = a.space.num_elements().unwrap() * a.size as u64;
                    assert_eq!(a.data.len() as u64, n, "attribute {:?}", a.name);
                }
            }
            meta::MSG_LINK => {
                let _ = meta::link(f, &m.data, what);
            }
            meta::MSG_LINK_INFO => {
                let _ = meta::link_info_dense(f, &m.data, what);
            }
            meta::MSG_ATTRIBUTE_INFO => {
                let _ = meta::attribute_info_dense(f, &m.data, what);
            }
            meta::MSG_SYMBOL_TABLE => {
                let _ = meta::symbol_table(f, &m.data, what);
            }
            _ => {}
        }
    }
}
