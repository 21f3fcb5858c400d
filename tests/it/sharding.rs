//! Sharded arrays read their inner chunks with range reads: counting the
//! requests and bytes a real read makes through a store wrapper proves
//! that a read needing one inner chunk fetches the shard index and that
//! chunk, not the shard; and damaged shards fail only the reads that need
//! them. Values are checked against the bytes zarr-python wrote
//! (tests/fixtures/generate_zarr.py).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use slabfs::dtype::Endian;
use slabfs::engine::array::ArraySource;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::chunked::ChunkedArray;
use slabfs::formats::zarr;
use slabfs::storage::local::FsStore;
use slabfs::storage::testing::CountingStore;

fn store_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr/v3/sharded.zarr")
}

fn expected(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/zarr/expected")
        .join(format!("{name}.bin"));
    std::fs::read(p).unwrap()
}

fn open(dir: &Path, array: &str) -> (Arc<CountingStore<FsStore>>, Arc<ChunkedArray>) {
    let counting = Arc::new(CountingStore::new(FsStore::new(dir)));
    let h = zarr::open_store(counting.clone(), Arc::new(ChunkCache::new(64 << 20))).unwrap();
    let node = h.nodes.iter().find(|n| n.path == array).unwrap();
    (counting, node.array.clone().unwrap())
}

/// Bytes `[offset, offset + len)` of the flat file, little-endian.
fn read(a: &dyn ArraySource, offset: u64, len: usize) -> slabfs::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let n = read_at(a, offset, &mut buf, Endian::Little)?;
    buf.truncate(n);
    Ok(buf)
}

fn file_len(p: PathBuf) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

#[test]
fn one_inner_chunk_costs_the_index_and_that_chunk() {
    // float32 (9, 13, 10), shards (4, 6, 8), inner chunks (2, 3, 4), zstd,
    // index at the end with crc32c: 8 inner chunks per shard.
    let (counting, a) = open(&store_dir(), "sharded_3d");
    let want = expected("v3_sharded_3d");
    let shard = file_len(store_dir().join("sharded_3d/c/0/0/0"));
    let elem = |z: u64, y: u64, x: u64| (z * 13 * 10 + y * 10 + x) * 4;

    let (g0, b0) = (counting.gets(), counting.bytes());
    let off = elem(1, 4, 5); // inner chunk (0, 1, 1) of shard (0, 0, 0)
    assert_eq!(read(a.as_ref(), off, 4).unwrap(), want[off as usize..][..4]);
    assert_eq!(counting.gets() - g0, 2, "the index, then the chunk");
    let bytes = counting.bytes() - b0;
    assert!(
        bytes > 8 * 16 + 4 && bytes < shard,
        "read {bytes} bytes of a {shard}-byte shard"
    );

    // Another inner chunk of the same shard: the decoded index is cached.
    let (g1, b1) = (counting.gets(), counting.bytes());
    let off = elem(2, 0, 0); // inner chunk (1, 0, 0)
    assert_eq!(read(a.as_ref(), off, 4).unwrap(), want[off as usize..][..4]);
    assert_eq!(counting.gets() - g1, 1, "only the chunk");
    assert!(counting.bytes() - b1 < bytes);

    // And the whole array still reads as zarr-python wrote it.
    assert_eq!(read(a.as_ref(), 0, want.len()).unwrap(), want);
}

#[test]
fn nested_shards_read_one_index_per_level() {
    // uint16 (19, 14): shards (12, 12) of inner shards (6, 4) (index at
    // the start, big-endian, no checksum) of chunks (3, 2).
    let (counting, a) = open(&store_dir(), "sharded_nested");
    let want = expected("v3_sharded_nested");
    let shard = file_len(store_dir().join("sharded_nested/c/0/0"));
    let (g0, b0) = (counting.gets(), counting.bytes());
    let off = (7 * 14 + 5) * 2;
    assert_eq!(read(a.as_ref(), off, 2).unwrap(), want[off as usize..][..2]);
    assert_eq!(counting.gets() - g0, 3, "outer index, inner index, chunk");
    assert!(counting.bytes() - b0 < shard / 2);
    assert_eq!(read(a.as_ref(), 0, want.len()).unwrap(), want);
}

/// Copy the fixture store to a temporary directory to damage it.
fn damaged_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(store_dir())
        .arg(tmp.path().join("s.zarr"))
        .status()
        .unwrap();
    assert!(status.success());
    tmp
}

#[test]
fn a_corrupt_index_fails_only_the_reads_of_its_shard() {
    let tmp = damaged_copy();
    let dir = tmp.path().join("s.zarr");
    // Flip a byte of shard (0, 0, 0)'s index (the last 132 bytes): its
    // crc32c no longer matches.
    let shard = dir.join("sharded_3d/c/0/0/0");
    let mut bytes = std::fs::read(&shard).unwrap();
    let n = bytes.len();
    bytes[n - 20] ^= 0x40;
    std::fs::write(&shard, bytes).unwrap();

    let (_, a) = open(&dir, "sharded_3d");
    let want = expected("v3_sharded_3d");
    let err = read(a.as_ref(), 0, 4).unwrap_err().to_string();
    assert!(err.contains("c/0/0/0"), "{err}");
    assert!(err.contains("shard index"), "{err}");
    assert!(err.contains("crc32c"), "{err}");
    // Shard (1, 0, 0) starts at z = 4.
    let off = 4 * 13 * 10 * 4;
    assert_eq!(
        read(a.as_ref(), off, 400).unwrap(),
        want[off as usize..][..400]
    );
}

#[test]
fn an_index_entry_outside_its_shard_is_an_error() {
    let tmp = damaged_copy();
    let dir = tmp.path().join("s.zarr");
    // The outer index of shard (0, 0) is at the start, big-endian, no
    // checksum: point its first entry far past the end of the file.
    let shard = dir.join("sharded_nested/c/0/0");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[..8].copy_from_slice(&(1u64 << 40).to_be_bytes());
    std::fs::write(&shard, bytes).unwrap();

    let (_, a) = open(&dir, "sharded_nested");
    let err = read(a.as_ref(), 0, 2).unwrap_err().to_string();
    assert!(err.contains("c/0/0"), "{err}");
    let want = expected("v3_sharded_nested");
    // Shard (1, 0) (rows 12..) is intact.
    let off = 12 * 14 * 2;
    assert_eq!(
        read(a.as_ref(), off, 28).unwrap(),
        want[off as usize..][..28]
    );
}

/// The arrays whose `sharding_indexed` sits inside a longer codec list
/// (issue 16), each with the name of its expected bytes.
const COMBINED: &[(&str, &str)] = &[
    ("sharded_then_zstd", "v3_sharded_then_zstd"),
    ("sharded_then_gzip", "v3_sharded_then_gzip_index_start"),
    ("sharded_then_blosc", "v3_sharded_then_blosc"),
    ("transposed_sharded", "v3_transposed_sharded"),
    ("transposed_sharded_3d", "v3_transposed_sharded_3d"),
    (
        "transposed_sharded_then_zstd",
        "v3_transposed_sharded_then_zstd",
    ),
    ("sharded_nested_then_gzip", "v3_sharded_nested_then_gzip"),
];

/// Regression (issue 16): `[sharding_indexed, zstd]` (zarr-python's
/// `serializer=ShardingCodec(...)` with its default compressors) and
/// `[transpose, sharding_indexed]` (a transpose filter) were refused at
/// open ("combined with other codecs in one list is not supported") and
/// the arrays hidden. Each reads as zarr-python reads it, whole and in
/// every one-element window, so each inner chunk and each edge of an
/// overhanging or missing shard is checked on its own.
#[test]
fn sharding_inside_a_longer_codec_list_reads_as_zarr_python_reads_it() {
    for &(array, name) in COMBINED {
        let h = zarr::open_store(
            Arc::new(FsStore::new(store_dir())),
            Arc::new(ChunkCache::new(64 << 20)),
        )
        .unwrap();
        let node = h.nodes.iter().find(|n| n.path == array);
        let a = node
            .and_then(|n| n.array.clone())
            .unwrap_or_else(|| panic!("{array} is not readable: {:?}", h.skipped));
        let want = expected(name);
        assert_eq!(read(a.as_ref(), 0, want.len()).unwrap(), want, "{array}");
        let item = a.meta().item_size();
        for off in (0..want.len()).step_by(item) {
            assert_eq!(
                read(a.as_ref(), off as u64, item).unwrap(),
                want[off..][..item],
                "{array}: element at byte {off}"
            );
        }
    }
}

/// Open `array` of the store at `dir` with its own cache of `budget`
/// bytes.
fn open_with_cache(
    dir: &Path,
    array: &str,
    budget: usize,
) -> (
    Arc<CountingStore<FsStore>>,
    Arc<ChunkedArray>,
    Arc<ChunkCache>,
) {
    let counting = Arc::new(CountingStore::new(FsStore::new(dir)));
    let cache = Arc::new(ChunkCache::new(budget));
    let h = zarr::open_store(counting.clone(), cache.clone()).unwrap();
    let node = h.nodes.iter().find(|n| n.path == array).unwrap();
    (counting, node.array.clone().unwrap(), cache)
}

#[test]
fn a_transpose_before_sharding_still_reads_one_inner_chunk() {
    // int16 (14, 10), shards (6, 6) stored transposed, inner chunks (3, 2)
    // of the stored shard: (2, 3) of the array.
    let (counting, a) = open(&store_dir(), "transposed_sharded");
    assert_eq!(a.spec().grid.len(), 2);
    assert_eq!(
        format!("{:?}", a.spec().grid),
        "[Regular(2), Regular(3)]",
        "the array is read by the inverse-transposed inner chunks"
    );
    let want = expected("v3_transposed_sharded");
    let shard = file_len(store_dir().join("transposed_sharded/c/0/1"));
    let (g0, b0) = (counting.gets(), counting.bytes());
    let off = (5 * 10 + 7) * 2; // element (5, 7): shard (0, 1)
    assert_eq!(read(a.as_ref(), off, 2).unwrap(), want[off as usize..][..2]);
    assert_eq!(counting.gets() - g0, 2, "the index, then the chunk");
    assert!(counting.bytes() - b0 < shard);
}

/// A shard compressed whole is fetched and decoded once, cached as one
/// entry of its decoded size, and dropped once a reader has been served
/// all of its bytes inside the array (the use-once rule), overhanging
/// shards included.
#[test]
fn a_shard_compressed_whole_is_one_cache_entry_of_its_decoded_size() {
    // float64 (11, 14), shards (6, 8) of 384 bytes, [sharding, zstd].
    let (counting, a, cache) = open_with_cache(&store_dir(), "sharded_then_zstd", 64 << 20);
    let want = expected("v3_sharded_then_zstd");
    let row = |r: u64, c0: u64, c1: u64| ((r * 14 + c0) * 8, ((c1 - c0) * 8) as usize);
    let check = |(off, len): (u64, usize)| {
        assert_eq!(
            read(a.as_ref(), off, len).unwrap(),
            want[off as usize..][..len]
        );
    };
    let stored = file_len(store_dir().join("sharded_then_zstd/c/0/0"));
    let (g0, b0) = (counting.gets(), counting.bytes());
    check(row(1, 2, 3));
    assert_eq!(counting.gets() - g0, 1, "the whole shard, once");
    assert_eq!(counting.bytes() - b0, stored);
    let s = cache.stats();
    assert_eq!((s.decodes, s.entries, s.bytes), (1, 1, 6 * 8 * 8));
    check(row(4, 0, 8));
    assert_eq!(counting.gets() - g0, 1, "served from the cached shard");
    // 8 + 64 bytes served; four more rows leave it short of 384.
    for r in [0, 2, 3, 5] {
        check(row(r, 0, 8));
    }
    assert_eq!(cache.stats().entries, 1);
    check(row(1, 0, 8));
    let s = cache.stats();
    assert_eq!((s.entries, s.bytes, s.consumed), (0, 0, 1));

    // Shard (1, 1) overhangs: rows 6..11, columns 8..14 of its 6x8.
    for r in 6..11 {
        check(row(r, 8, 14));
    }
    let s = cache.stats();
    assert_eq!((s.entries, s.consumed, s.decodes), (0, 2, 2));
    assert_eq!(read(a.as_ref(), 0, want.len()).unwrap(), want);
}

#[test]
fn a_damaged_shard_compressed_whole_fails_its_reads_and_is_not_cached() {
    let tmp = damaged_copy();
    let dir = tmp.path().join("s.zarr");
    // Shard (0, 0) cut short (its zstd frame ends early), shard (1, 1)
    // replaced by a zstd bomb: 64 MiB of zeros in a few KiB, past the
    // worst-case size of a (6, 8) float64 shard of 2x2 inner chunks.
    let cut = dir.join("sharded_then_zstd/c/0/0");
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 3).unwrap();
    assert!(bomb.len() < 64 << 10);
    std::fs::write(dir.join("sharded_then_zstd/c/1/1"), bomb).unwrap();

    let (_, a, cache) = open_with_cache(&dir, "sharded_then_zstd", 64 << 20);
    let want = expected("v3_sharded_then_zstd");
    let err = read(a.as_ref(), 8, 8).unwrap_err().to_string();
    assert!(err.contains("c/0/0") && err.contains("zstd"), "{err}");
    let off = (7 * 14 + 9) * 8; // element (7, 9): shard (1, 1)
    let err = read(a.as_ref(), off, 8).unwrap_err().to_string();
    assert!(err.contains("c/1/1") && err.contains("exceeds"), "{err}");
    let s = cache.stats();
    assert_eq!((s.entries, s.bytes, s.decodes), (0, 0, 0));
    // Shard (1, 0) (rows 6.., columns ..8) is intact.
    let off = 6 * 14 * 8;
    assert_eq!(
        read(a.as_ref(), off, 64).unwrap(),
        want[off as usize..][..64]
    );
}
