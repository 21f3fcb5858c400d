//! One named test per bug the fuzz targets (`fuzz/`, docs/DEVELOPMENT.md)
//! found. Each feeds the exact input the fuzzer saved, the file under
//! `tests/fixtures/fuzz/` (in the target's input layout, so the target
//! binary reproduces it too), through the same public entry points the
//! target uses, and asserts the typed error slabfs now gives instead of
//! the panic or the wrong answer it gave before the fix.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::storage::testing::MemoryStore;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(16 << 20))
}

/// `shard_index`: a nested shard (outer index at the end, inner indexes at
/// the start, no checksums) whose first outer entry claims bytes
/// `0..2199023255634` of a 196-byte shard. The inner index and the chunks
/// it points to lie inside the shard, so the read used to succeed, serving
/// a corrupt shard (with the inner index at the end it failed). Fixed in
/// `chunked::shard` (`Sharding::load_index` checks that an inner shard whose
/// index is at its start ends inside the stored value).
#[test]
fn shard_nested_entry_past_shard_end() {
    let input = fixture("shard_nested_entry_past_shard_end.bin");
    // The target's flags byte: nested (8), inner index at the start (16).
    assert_eq!(input[0], 0x18);
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let inner = json!([{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 3], "codecs": [bytes], "index_codecs": [bytes],
        "index_location": "start"}}]);
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [4, 6], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0x1234,
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 6], "codecs": inner, "index_codecs": [bytes],
            "index_location": "end"}}],
    });
    let store = MemoryStore::new();
    store.set("zarr.json", meta.to_string());
    store.set("c/0/0", &input[1..]);
    let h = slabfs::formats::zarr::open_store(Arc::new(store), cache()).unwrap();
    let array = h.nodes[0].array.as_ref().unwrap();
    // Rows 0 and 1 are the first inner shard, the one whose entry is bad.
    let mut buf = vec![0u8; 2 * 6 * 2];
    let err = read_at(array.as_ref(), 0, &mut buf, Endian::NATIVE).unwrap_err();
    assert!(err.to_string().contains("c/0/0"), "{err}");
}

/// `index_projection`: a regular tiling whose tile containing the box ends
/// past 2^64 (tiles of 11611229770449642167 elements; the box starts at
/// 13096378655951572106, in the second tile, whose overhang lies past
/// `u64::MAX`). `project_dim` added the tile's start and length and
/// overflowed (a panic in debug builds, a wrapped end and garbage pieces
/// in release builds). Reachable from a Zarr array of extent near 2^64 and
/// chunks of up to 4 GiB. Fixed in `index::tiling::project_dim` (the tile
/// end saturates). The case is the one the saved input
/// `projection_regular_tile_end_past_2_64.bin` decodes to
/// (`SLABFS_FUZZ_DEBUG=1` prints it); checked here against the tilings'
/// definition, element by element.
#[test]
fn projection_regular_tile_end_past_2_64() {
    use slabfs::engine::index::Region;
    use slabfs::engine::index::tiling::{DimTiling, Projection};
    assert!(!fixture("projection_regular_tile_end_past_2_64.bin").is_empty());
    let tilings = [
        DimTiling::Explicit(vec![1981190757, 6804784394968112801]),
        DimTiling::Regular(3202220421441065089),
        DimTiling::Explicit(vec![
            10203938212496915125,
            10203938212496916028,
            10203938212496916029,
            10203938212496916501,
            10203938213777615395,
            10203938213777615407,
            14208252634035346235,
        ]),
        DimTiling::Regular(11611229770449642167),
    ];
    let region = Region {
        start: vec![735, 474, 872, 13096378655951572106],
        count: vec![1119, 2, 1, 1],
    };
    // Tile t of each dimension as [start, end), from the definition, in
    // 128 bits so that the overhang past 2^64 is representable.
    let bounds = |d: usize, t: u64| -> (u128, u128) {
        match &tilings[d] {
            DimTiling::Regular(s) => (t as u128 * *s as u128, (t as u128 + 1) * *s as u128),
            DimTiling::Explicit(ends) => {
                let start = if t == 0 { 0 } else { ends[t as usize - 1] };
                (start as u128, ends[t as usize] as u128)
            }
        }
    };
    let mut covered = 0u64;
    for p in Projection::new(&tilings, &region).pieces() {
        for d in 0..4 {
            let (lo, hi) = bounds(d, p.tile[d]);
            let first = region.start[d] as u128 + p.box_start[d] as u128;
            let last = first + p.count[d] as u128 - 1;
            assert!(
                lo <= first && last < hi,
                "dimension {d}: piece {p:?} outside its tile"
            );
            assert_eq!(lo + p.tile_start[d] as u128, first, "dimension {d}: {p:?}");
        }
        covered += p.count.iter().product::<u64>();
    }
    assert_eq!(covered, region.num_elements());
    // The last dimension lies in tile 1, at its offset from that tile.
    let pieces = slabfs::engine::index::tiling::project_dim(&tilings[3], region.start[3], 1);
    assert_eq!(pieces.len(), 1);
    assert_eq!(
        (pieces[0].tile, pieces[0].in_tile, pieces[0].len),
        (1, 13096378655951572106 - 11611229770449642167, 1)
    );

    // The same overflow through the read path: a Zarr v2 array of 2^64 - 1
    // bytes in chunks of 4 GiB (the largest accepted), none stored, read
    // at its last bytes (the last chunk ends at 2^64): the fill value.
    let store = MemoryStore::new();
    let zarray = json!({"zarr_format": 2, "shape": [u64::MAX], "chunks": [1u64 << 32],
        "dtype": "|u1", "compressor": null, "fill_value": 7, "order": "C", "filters": null});
    store.set(".zarray", zarray.to_string());
    let h = slabfs::formats::zarr::open_store(Arc::new(store), cache()).unwrap();
    let array = h.nodes[0].array.as_ref().unwrap();
    let mut buf = [0u8; 4];
    let n = read_at(array.as_ref(), u64::MAX - 2, &mut buf, Endian::NATIVE).unwrap();
    assert_eq!(&buf[..n], &[7, 7]);
}

/// `blocked_archive`: an archive whose last variable holds no data (so no
/// blocks) and whose single index offset is 18402271027389268591, far past
/// the data area (which ends at the index, byte 623). The index parsed, and
/// the archive opened, with an offset pointing nowhere. Fixed in
/// `packed::format::parse_index` (a variable's first offset must lie
/// inside the data area, not only after the previous variable's blocks).
/// `..._past_data.bin` is the target's input (flags byte 7: the target
/// rewrote the checksums); `..._past_data.ncb` the archive it then parsed
/// (`SLABFS_FUZZ_DUMP` writes it).
#[test]
fn blocked_empty_variable_offset_past_data() {
    use slabfs::formats::packed::format::{Superblock, parse_index};
    assert_eq!(fixture("blocked_empty_variable_offset_past_data.bin")[0], 7);
    let name = "blocked_empty_variable_offset_past_data.ncb";
    let file = fixture(name);
    let sb = Superblock::parse(&file, file.len() as u64).unwrap();
    assert_eq!((sb.index_offset, sb.index_len), (623, 280));
    let index = &file[623..623 + 280 + 4];
    // The variables' byte lengths, as the embedded header gives them.
    let lens = [24, 20, 0, 0, 0, 0, 0, 0];
    let err = parse_index(index, &lens, sb.data_start(), sb.index_offset).unwrap_err();
    assert!(err.to_string().contains("index entry 7"), "{err}");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(name);
    let err = slabfs::formats::dataset::Opener::new(cache())
        .open(&path)
        .err()
        .expect("the archive is refused");
    assert!(err.to_string().contains(name), "{err}");
}
