//! The decoded-chunk cache seen through the store: counting the reads a
//! real Zarr array makes proves hits, eviction within the byte budget, and
//! one decode per chunk when many threads ask at once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use slabfs::dtype::Endian;
use slabfs::engine::array::ArraySource;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::{chunked, zarr};
use slabfs::storage::Store;
use slabfs::storage::testing::{CountingStore, MemoryStore};

/// 16 little-endian u16 values 0..16 in 4 chunks of 4 (8 bytes each).
fn store() -> MemoryStore {
    let s = MemoryStore::new();
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [16], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 9,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    });
    s.set("zarr.json", meta.to_string());
    for c in 0..4u16 {
        let bytes: Vec<u8> = (c * 4..c * 4 + 4).flat_map(|v| v.to_le_bytes()).collect();
        s.set(&format!("c/{c}"), bytes);
    }
    s
}

fn open(store: Arc<dyn Store>, budget: usize) -> Arc<chunked::ChunkedArray> {
    let h = zarr::open_store(store, Arc::new(ChunkCache::new(budget))).unwrap();
    h.nodes[0].array.clone().unwrap()
}

fn read(a: &dyn ArraySource, elem: u64, n: u64) -> Vec<u16> {
    let mut buf = vec![0u8; n as usize * 2];
    read_at(a, elem * 2, &mut buf, Endian::Little).unwrap();
    buf.chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

#[test]
fn repeated_reads_hit_the_cache_until_a_chunk_is_wholly_served() {
    let counting = Arc::new(CountingStore::new(store()));
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let h = zarr::open_store(counting.clone(), cache.clone()).unwrap();
    let a = h.nodes[0].array.clone().unwrap();
    let base = counting.gets();
    // Chunk 0 read piecemeal: fetched once, then from the cache.
    assert_eq!(read(a.as_ref(), 0, 1), vec![0]);
    assert_eq!(read(a.as_ref(), 1, 1), vec![1]);
    assert_eq!(read(a.as_ref(), 2, 1), vec![2]);
    assert_eq!(counting.gets() - base, 1);
    // Elements 3..13: chunk 0 (cached; now every element of it has been
    // served, so it is dropped), chunks 1 and 2 (covered whole: fetched
    // for this read only), chunk 3 in part (fetched and kept).
    assert_eq!(read(a.as_ref(), 3, 10), (3..13).collect::<Vec<u16>>());
    assert_eq!(counting.gets() - base, 4);
    assert_eq!(read(a.as_ref(), 13, 2), vec![13, 14]);
    assert_eq!(
        counting.gets() - base,
        4,
        "chunk 3 must come from the cache"
    );
    let stats = cache.stats();
    assert_eq!((stats.consumed, stats.entries), (1, 1));
    // Chunk 0 was used up: read again, it is fetched again.
    assert_eq!(read(a.as_ref(), 0, 1), vec![0]);
    assert_eq!(counting.gets() - base, 5);
}

#[test]
fn a_scan_of_whole_chunks_leaves_the_cache_alone() {
    let counting = Arc::new(CountingStore::new(store()));
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let h = zarr::open_store(counting.clone(), cache.clone()).unwrap();
    let a = h.nodes[0].array.clone().unwrap();
    let base = counting.gets();
    // Chunk 1 read piecemeal, so it is cached.
    assert_eq!(read(a.as_ref(), 5, 1), vec![5]);
    assert_eq!(counting.gets() - base, 1);
    assert_eq!(cache.stats().entries, 1);
    for _ in 0..2 {
        assert_eq!(read(a.as_ref(), 0, 16), (0..16).collect::<Vec<u16>>());
    }
    // Two scans: chunks 0, 2, 3 fetched each time, chunk 1 from the cache.
    assert_eq!(counting.gets() - base, 1 + 2 * 3);
    let stats = cache.stats();
    assert_eq!(stats.entries, 1, "the scan must not fill the cache");
    assert_eq!(stats.uncached, 6);
    assert_eq!(stats.hits, 2);
}

#[test]
fn budget_evicts_least_recently_used() {
    let counting = Arc::new(CountingStore::new(store()));
    // Room for two 8-byte chunks. Reads of one element each, so no chunk
    // is ever wholly served (see the test above).
    let a = open(counting.clone(), 16);
    let base = counting.gets();
    read(a.as_ref(), 0, 1); // chunk 0
    read(a.as_ref(), 4, 1); // chunk 1
    read(a.as_ref(), 1, 1); // hit: chunk 0 is now the most recent
    assert_eq!(counting.gets() - base, 2);
    read(a.as_ref(), 8, 1); // chunk 2 evicts chunk 1
    read(a.as_ref(), 2, 1); // still cached
    assert_eq!(counting.gets() - base, 3);
    read(a.as_ref(), 5, 1); // chunk 1 again: reloaded
    assert_eq!(counting.gets() - base, 4);
}

/// A store that takes a while to answer, so concurrent readers overlap.
#[derive(Debug)]
struct Slow(CountingStore<MemoryStore>);

impl Store for Slow {
    fn get(&self, key: &str, limit: u64) -> slabfs::Result<Option<Vec<u8>>> {
        std::thread::sleep(Duration::from_millis(100));
        self.0.get(key, limit)
    }
    fn list_dir(&self, dir: &str) -> slabfs::Result<Vec<(String, bool)>> {
        self.0.list_dir(dir)
    }
    fn describe(&self, key: &str) -> String {
        self.0.describe(key)
    }
}

#[test]
fn concurrent_readers_of_one_chunk_decode_it_once() {
    let slow = Arc::new(Slow(CountingStore::new(store())));
    let a = open(slow.clone(), 1 << 20);
    let base = slow.0.gets();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let a = a.clone();
            s.spawn(move || {
                // Different elements, same chunk 2 (together exactly all
                // of it, so it stays cached until the last has read).
                let e = 8 + t;
                assert_eq!(read(a.as_ref(), e, 1), vec![e as u16]);
            });
        }
    });
    assert_eq!(slow.0.gets() - base, 1);
}

#[test]
fn missing_chunks_read_fill_and_are_looked_up_again() {
    let mem = store();
    mem.remove("c/1");
    let counting = Arc::new(CountingStore::new(mem));
    let a = open(counting.clone(), 1 << 20);
    let base = counting.gets();
    assert_eq!(read(a.as_ref(), 4, 4), vec![9; 4]);
    assert_eq!(
        counting.gets() - base,
        1,
        "only the missing chunk's key is asked for"
    );
    // A chunk written later is seen: absence is not cached.
    counting.inner().set(
        "c/1",
        (40u16..44)
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    assert_eq!(read(a.as_ref(), 4, 4), vec![40, 41, 42, 43]);
}

#[test]
fn rank_32_arrays_read() {
    // 2^5 elements spread over 32 dimensions, chunks of 1 in the last five.
    let mut shape = vec![1u64; 27];
    shape.extend([2, 2, 2, 2, 2]);
    let s = MemoryStore::new();
    let chunk_shape = vec![1u64; 32];
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk_shape}},
        "chunk_key_encoding": {"name": "v2"}, "fill_value": 0,
        "codecs": [{"name": "bytes"}]
    });
    s.set("zarr.json", meta.to_string());
    for i in 0..32u8 {
        let mut key: Vec<String> = vec!["0".into(); 27];
        key.extend((0..5).rev().map(|b| ((i >> b) & 1).to_string()));
        s.set(&key.join("."), vec![i]);
    }
    let h = zarr::open_store(Arc::new(s), Arc::new(ChunkCache::new(1 << 20))).unwrap();
    let a = h.nodes[0].array.clone().unwrap();
    let mut buf = vec![0u8; 32];
    assert_eq!(
        read_at(a.as_ref(), 0, &mut buf, Endian::Little).unwrap(),
        32
    );
    assert_eq!(buf, (0..32u8).collect::<Vec<_>>());
}

/// Native-order u16 values of lent or read bytes.
fn u16s(b: &[u8]) -> Vec<u16> {
    b.chunks(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect()
}

/// The byte order that is not this machine's.
const FOREIGN: Endian = if cfg!(target_endian = "little") {
    Endian::Big
} else {
    Endian::Little
};

/// The mount's copy-free path: a range inside one chunk, contiguous there,
/// is lent from the cached chunk (the same bytes `read_at` gives), counts
/// as served only once the loan is dropped, and anything else is refused
/// before any I/O.
#[test]
fn shared_reads_lend_chunk_bytes_and_count_them_when_returned() {
    use slabfs::engine::read::read_shared_at;
    let counting = Arc::new(CountingStore::new(store()));
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let h = zarr::open_store(counting.clone(), cache.clone()).unwrap();
    let a = h.nodes[0].array.clone().unwrap();
    let shared = |elem: u64, n: usize, order| read_shared_at(a.as_ref(), elem * 2, n * 2, order);

    let base = counting.gets();
    let mid = shared(1, 2, Endian::NATIVE).unwrap().unwrap();
    assert_eq!(u16s(&mid), vec![1, 2]);
    let ends =
        [shared(0, 1, Endian::NATIVE), shared(3, 1, Endian::NATIVE)].map(|r| r.unwrap().unwrap());
    assert_eq!((u16s(&ends[0]), u16s(&ends[1])), (vec![0], vec![3]));
    assert_eq!(counting.gets() - base, 1, "one fetch for the three loans");
    assert_eq!(cache.stats().consumed, 0, "not served while lent");
    drop(ends);
    assert_eq!(cache.stats().consumed, 0);
    drop(mid);
    assert_eq!(cache.stats().consumed, 1, "every byte served once returned");

    // Across two chunks, a swap, a partial element: not lent, nothing read.
    assert!(shared(3, 2, Endian::NATIVE).is_none());
    assert!(shared(4, 2, FOREIGN).is_none());
    assert!(read_shared_at(a.as_ref(), 1, 2, Endian::NATIVE).is_none());
    assert!(shared(16, 1, Endian::NATIVE).is_none(), "past the end");
    assert_eq!(counting.gets() - base, 1);
}

/// A loan returned after its chunk was evicted and decoded again does not
/// count towards the new copy (which would then be dropped as used up).
#[test]
fn a_loan_outliving_its_chunk_is_not_credited_to_the_next_decode() {
    use slabfs::engine::read::read_shared_at;
    let counting = Arc::new(CountingStore::new(store()));
    // Room for one 8-byte chunk.
    let cache = Arc::new(ChunkCache::new(8));
    let h = zarr::open_store(counting.clone(), cache.clone()).unwrap();
    let a = h.nodes[0].array.clone().unwrap();
    let whole0 = read_shared_at(a.as_ref(), 0, 8, Endian::NATIVE)
        .unwrap()
        .unwrap();
    assert_eq!(u16s(&whole0), vec![0, 1, 2, 3]);
    // Chunk 1 evicts chunk 0 (still lent); chunk 0 comes back as a new copy.
    assert_eq!(read(a.as_ref(), 4, 1), vec![4]);
    assert_eq!(read(a.as_ref(), 0, 1), vec![0]);
    drop(whole0);
    assert_eq!(
        cache.stats().consumed,
        0,
        "the old loan must not use up the new copy"
    );
    let base = counting.gets();
    assert_eq!(read(a.as_ref(), 1, 1), vec![1]);
    assert_eq!(counting.gets(), base, "chunk 0 is still cached");
}

/// A (rows, cols) uint16 array with value 10 * row + col, in chunks of
/// `chunk`, without the chunks in `missing` (fill value 9). Edge chunks
/// are stored whole, padded with 7777.
fn grid_store(shape: [u16; 2], chunk: [u16; 2], missing: &[(u16, u16)]) -> MemoryStore {
    let s = MemoryStore::new();
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 9,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    });
    s.set("zarr.json", meta.to_string());
    for cr in 0..shape[0].div_ceil(chunk[0]) {
        for cc in 0..shape[1].div_ceil(chunk[1]) {
            if missing.contains(&(cr, cc)) {
                continue;
            }
            let bytes: Vec<u8> = (0..chunk[0])
                .flat_map(|r| (0..chunk[1]).map(move |c| (cr * chunk[0] + r, cc * chunk[1] + c)))
                .map(|(r, c)| {
                    if r < shape[0] && c < shape[1] {
                        10 * r + c
                    } else {
                        7777
                    }
                })
                .flat_map(|v| v.to_le_bytes())
                .collect();
            s.set(&format!("c/{cr}/{cc}"), bytes);
        }
    }
    s
}

/// A 2-D case: shape, chunk shape, missing chunks, and reads (first
/// element, count, the values lent or `None` when not lendable).
type Case<'a> = (
    [u16; 2],
    [u16; 2],
    &'a [(u16, u16)],
    &'a [(u64, usize, Option<Vec<u16>>)],
);

/// In two dimensions the loan is the right part of the chunk, in edge
/// chunks that overhang the array too, and a missing chunk lends its fill
/// value.
#[test]
fn shared_reads_of_2d_arrays_edge_chunks_and_missing_chunks() {
    use slabfs::engine::read::{read_at, read_shared_at};
    let cases: [Case<'_>; 2] = [
        (
            [4, 4],
            [2, 2],
            &[(1, 1)],
            &[
                (4, 2, Some(vec![10, 11])), // row 1, cols 0-1: second row of chunk (0, 0)
                (6, 2, Some(vec![12, 13])),
                (14, 2, Some(vec![9, 9])), // chunk (1, 1) is missing
                (4, 4, None),              // a whole row crosses two chunks
                (1, 2, None),              // cols 1-2 cross two chunks
            ],
        ),
        (
            // Chunks of (2, 4) over (5, 5): the last column and row are in
            // chunks that overhang the array.
            [5, 5],
            [2, 4],
            &[],
            &[
                (0, 4, Some(vec![0, 1, 2, 3])),
                (4, 1, Some(vec![4])), // chunk (0, 1), of which one column is inside
                (9, 1, Some(vec![14])), // its second row
                (20, 4, Some(vec![40, 41, 42, 43])), // chunk (2, 0), one row inside
                (24, 1, Some(vec![44])),
                (3, 2, None),
            ],
        ),
    ];
    for (shape, chunk, missing, reads) in cases {
        let a = open(Arc::new(grid_store(shape, chunk, missing)), 1 << 20);
        for (elem, n, want) in reads {
            let got = read_shared_at(a.as_ref(), elem * 2, n * 2, Endian::NATIVE)
                .map(|r| u16s(&r.unwrap()));
            assert_eq!(&got, want, "{shape:?} by {chunk:?}: elements {elem}..+{n}");
            if let Some(w) = want {
                let mut buf = vec![0u8; n * 2];
                read_at(a.as_ref(), elem * 2, &mut buf, Endian::NATIVE).unwrap();
                assert_eq!(&u16s(&buf), w, "read_at agrees");
            }
        }
    }
}

/// A read whose chunks land strided in the reply (2x4 chunks of a 4x8
/// array) decodes each chunk into a scratch buffer of the cache's buffer
/// pool, then copies it into place: one scratch use per chunk, each a hit
/// (reused) or a miss (allocated), the bytes kept within the pool's cap.
#[test]
fn strided_reads_take_their_scratch_from_the_cache_pool() {
    let s = MemoryStore::new();
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [4, 8], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 4]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    });
    s.set("zarr.json", meta.to_string());
    for (r, c) in [(0u16, 0u16), (0, 1), (1, 0), (1, 1)] {
        let bytes: Vec<u8> = (0..2u16)
            .flat_map(|i| (0..4u16).map(move |j| (r * 2 + i) * 8 + c * 4 + j))
            .flat_map(|v| v.to_le_bytes())
            .collect();
        s.set(&format!("c/{r}/{c}"), bytes);
    }
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let h = zarr::open_store(Arc::new(s), cache.clone()).unwrap();
    let a = h.nodes[0].array.clone().unwrap();
    for round in 1..=2u64 {
        assert_eq!(read(a.as_ref(), 0, 32), (0..32).collect::<Vec<u16>>());
        let b = cache.buffers().stats();
        assert_eq!(b.hits + b.misses, 4 * round, "{b:?}");
        assert!(b.misses >= 1 && b.bytes <= b.cap, "{b:?}");
    }
    assert_eq!(
        cache.stats().entries,
        0,
        "chunks covered whole are not kept"
    );
}
