//! Bad input never takes the reader down: malformed metadata, unknown
//! codecs and dtypes, inconsistent shapes, corrupt, truncated, oversized
//! and wrongly sized chunks each give a typed error that names the file
//! (and chunk), and the rest of the array and of the store keeps working.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use slabfs::Error;
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;
use slabfs::formats::zarr;

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(16 << 20))
}

/// A v2 array of 8 little-endian u16 in chunks of 4, values 0..8, with the
/// given compressor and chunk encoder.
fn v2_store(dir: &Path, compressor: serde_json::Value, encode: impl Fn(&[u8]) -> Vec<u8>) {
    std::fs::create_dir_all(dir).unwrap();
    let zarray = json!({
        "zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "<u2",
        "compressor": compressor, "fill_value": 7, "order": "C", "filters": null
    });
    std::fs::write(dir.join(".zarray"), zarray.to_string()).unwrap();
    for c in 0..2u16 {
        let raw: Vec<u8> = (c * 4..c * 4 + 4).flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(dir.join(c.to_string()), encode(&raw)).unwrap();
    }
}

fn zstd_encode(raw: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(raw, 3).unwrap()
}

fn gzip_encode(raw: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(raw).unwrap();
    e.finish().unwrap()
}

fn read_all(dir: &Path) -> Result<Vec<u8>, Error> {
    let ds = dataset::Opener::new(cache()).open(dir).unwrap();
    let e = &ds.entries[0];
    let mut buf = vec![0u8; e.array.meta().nbytes() as usize];
    read_at(e.array.as_ref(), 0, &mut buf, Endian::Little).map(|_| buf)
}

/// Reads of chunk 1 (bytes 8..16) succeed and give 4..8.
fn second_chunk_ok(dir: &Path) {
    let ds = dataset::Opener::new(cache()).open(dir).unwrap();
    let mut buf = vec![0u8; 8];
    read_at(ds.entries[0].array.as_ref(), 8, &mut buf, Endian::Little).unwrap();
    let want: Vec<u8> = (4u16..8).flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(buf, want);
}

fn expect_chunk_error(dir: &Path, what: &str) -> String {
    let err = read_all(dir).expect_err(what);
    let msg = err.to_string();
    assert!(matches!(err, Error::Chunk { .. }), "{what}: {msg}");
    assert!(
        msg.contains(&dir.join("0").display().to_string()),
        "{what}: no file in {msg}"
    );
    assert!(msg.contains("chunk [0]"), "{what}: no chunk in {msg}");
    msg
}

#[test]
fn corrupt_zstd_chunk_is_an_error_naming_file_and_chunk() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a.zarr");
    v2_store(&dir, json!({"id": "zstd", "level": 3}), zstd_encode);
    assert_eq!(
        read_all(&dir).unwrap(),
        (0u16..8).flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()
    );
    let mut bytes = std::fs::read(dir.join("0")).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    bytes[n - 1] ^= 0xff;
    std::fs::write(dir.join("0"), bytes).unwrap();
    expect_chunk_error(&dir, "corrupt zstd");
    second_chunk_ok(&dir);
}

#[test]
fn truncated_gzip_chunk_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a.zarr");
    v2_store(&dir, json!({"id": "gzip", "level": 1}), gzip_encode);
    let bytes = std::fs::read(dir.join("0")).unwrap();
    std::fs::write(dir.join("0"), &bytes[..bytes.len() / 2]).unwrap();
    expect_chunk_error(&dir, "truncated gzip");
    second_chunk_ok(&dir);
}

#[test]
fn chunk_of_wrong_decoded_size_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    // Uncompressed: a short chunk file.
    let dir = tmp.path().join("raw.zarr");
    v2_store(&dir, json!(null), |raw| raw.to_vec());
    std::fs::write(dir.join("0"), [1u8, 2, 3]).unwrap();
    let msg = expect_chunk_error(&dir, "short raw chunk");
    assert!(msg.contains('3') && msg.contains('8'), "{msg}");
    second_chunk_ok(&dir);
    // Compressed: a valid zstd frame of the wrong size, either way.
    let dir = tmp.path().join("z.zarr");
    v2_store(&dir, json!({"id": "zstd", "level": 1}), zstd_encode);
    std::fs::write(dir.join("0"), zstd_encode(&[0u8; 6])).unwrap();
    expect_chunk_error(&dir, "short zstd");
    std::fs::write(dir.join("0"), zstd_encode(&[0u8; 10])).unwrap();
    expect_chunk_error(&dir, "long zstd");
    second_chunk_ok(&dir);
}

#[test]
fn decompression_bomb_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bomb.zarr");
    v2_store(&dir, json!({"id": "zstd", "level": 1}), zstd_encode);
    // 256 MiB of zeros compresses to a few KiB; the chunk is 8 bytes.
    let bomb = zstd::stream::encode_all(std::io::repeat(0).take_bytes(256 << 20), 1).unwrap();
    assert!(bomb.len() < 1 << 20);
    std::fs::write(dir.join("0"), bomb).unwrap();
    expect_chunk_error(&dir, "zstd bomb");
    let gz = gzip_encode(&vec![0u8; 64 << 20]);
    std::fs::write(dir.join("0"), gz).unwrap();
    // The array says zstd, so this is simply corrupt; make a gzip array too.
    let dir2 = tmp.path().join("gzbomb.zarr");
    v2_store(&dir2, json!({"id": "gzip", "level": 1}), gzip_encode);
    std::fs::write(dir2.join("0"), gzip_encode(&vec![0u8; 64 << 20])).unwrap();
    expect_chunk_error(&dir2, "gzip bomb");
    second_chunk_ok(&dir2);
}

trait TakeBytes: std::io::Read + Sized {
    fn take_bytes(self, n: u64) -> std::io::Take<Self> {
        self.take(n)
    }
}
impl<R: std::io::Read> TakeBytes for R {}

#[test]
fn oversized_chunk_file_is_refused_before_reading() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a.zarr");
    v2_store(&dir, json!(null), |raw| raw.to_vec());
    // 8-byte chunk, 16 MiB file: refused by size, not read.
    let f = std::fs::File::create(dir.join("0")).unwrap();
    f.set_len(16 << 20).unwrap();
    let err = read_all(&dir).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    second_chunk_ok(&dir);
}

#[test]
fn crc32c_mismatch_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c.zarr");
    std::fs::create_dir_all(&dir).unwrap();
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
    });
    std::fs::write(dir.join("zarr.json"), meta.to_string()).unwrap();
    std::fs::create_dir_all(dir.join("c")).unwrap();
    for c in 0..2u16 {
        let mut raw: Vec<u8> = (c * 4..c * 4 + 4).flat_map(|v| v.to_le_bytes()).collect();
        let crc = crc32c::crc32c(&raw);
        raw.extend(crc.to_le_bytes());
        if c == 0 {
            raw[0] ^= 1; // data no longer matches its checksum
        }
        std::fs::write(dir.join("c").join(c.to_string()), raw).unwrap();
    }
    let err = read_all(&dir).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("checksum") && msg.contains("c/0"), "{msg}");
    second_chunk_ok(&dir);
}

#[test]
fn missing_chunk_reads_fill_without_touching_others() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m.zarr");
    v2_store(&dir, json!({"id": "zstd", "level": 1}), zstd_encode);
    std::fs::remove_file(dir.join("0")).unwrap();
    // Corrupt the other chunk: a read of chunk 0 alone must not touch it.
    std::fs::write(dir.join("1"), b"garbage").unwrap();
    let ds = dataset::Opener::new(cache()).open(&dir).unwrap();
    let mut buf = vec![0u8; 8];
    read_at(ds.entries[0].array.as_ref(), 0, &mut buf, Endian::Little).unwrap();
    assert_eq!(buf, [7u8, 0, 7, 0, 7, 0, 7, 0]);
}

#[test]
fn malformed_metadata_is_skipped_with_a_message_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.zarr");
    v2_store(&good, json!(null), |raw| raw.to_vec());
    let cases: &[(&str, String, &str)] = &[
        ("badjson.zarr", "{\"zarr_format\": 2, \"shape\": [8".to_string(), "invalid JSON"),
        (
            "codec.zarr",
            json!({"zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "<u2",
                   "compressor": {"id": "snappy9000"}, "fill_value": 0, "order": "C", "filters": null})
            .to_string(),
            "snappy9000",
        ),
        (
            "dtype.zarr",
            json!({"zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "<q7",
                   "compressor": null, "fill_value": 0, "order": "C", "filters": null})
            .to_string(),
            "<q7",
        ),
        (
            "rank.zarr",
            json!({"zarr_format": 2, "shape": [8, 2], "chunks": [4], "dtype": "<u2",
                   "compressor": null, "fill_value": 0, "order": "C", "filters": null})
            .to_string(),
            "rank",
        ),
        (
            "overflow.zarr",
            json!({"zarr_format": 2, "shape": [4294967296u64, 4294967296u64, 2], "chunks": [1, 1, 1],
                   "dtype": "<f8", "compressor": null, "fill_value": 0, "order": "C", "filters": null})
            .to_string(),
            "overflow",
        ),
        (
            "hugechunk.zarr",
            json!({"zarr_format": 2, "shape": [100], "chunks": [4294967296u64],
                   "dtype": "<f8", "compressor": null, "fill_value": 0, "order": "C", "filters": null})
            .to_string(),
            "limit",
        ),
        (
            "fill.zarr",
            json!({"zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "|u1",
                   "compressor": null, "fill_value": 300, "order": "C", "filters": null})
            .to_string(),
            "out of range",
        ),
    ];
    for (name, zarray, _) in cases {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(".zarray"), zarray).unwrap();
    }
    let ds = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let paths: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["good.zarr"]);
    for (name, _, needle) in cases {
        let msg = ds
            .skipped
            .iter()
            .map(|e| e.to_string())
            .find(|m| m.contains(&tmp.path().join(name).display().to_string()))
            .unwrap_or_else(|| panic!("{name} not reported: {:?}", ds.skipped));
        assert!(msg.contains(needle), "{name}: {msg}");
    }
}

#[test]
fn v3_unknown_extensions_and_storage_transformers_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let base = json!({
        "zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
    });
    let variant = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = base.clone();
        f(&mut v);
        v
    };
    let bad = [
        (
            "codec",
            variant(&|v| {
                v["codecs"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "lzma9"}))
            }),
            "lzma9",
        ),
        (
            "transformer",
            variant(&|v| v["storage_transformers"] = json!([{"name": "x"}])),
            "storage_transformers",
        ),
        (
            "key",
            variant(&|v| v["surprise"] = json!({"name": "x"})),
            "surprise",
        ),
        (
            "grid",
            variant(&|v| v["chunk_grid"] = json!({"name": "hexagonal", "configuration": {}})),
            "hexagonal",
        ),
        (
            "nobytes",
            variant(&|v| v["codecs"] = json!([{"name": "gzip", "configuration": {"level": 1}}])),
            "array->bytes",
        ),
    ];
    let ok = [
        (
            "optcodec",
            variant(&|v| {
                v["codecs"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "lzma9", "must_understand": false}))
            }),
        ),
        (
            "optkey",
            variant(&|v| v["surprise"] = json!({"name": "x", "must_understand": false})),
        ),
    ];
    for (name, doc, needle) in &bad {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("zarr.json"), doc.to_string()).unwrap();
        let h = zarr::open(&d, cache()).unwrap();
        assert!(h.nodes.is_empty(), "{name}");
        let msg = h.skipped[0].to_string();
        assert!(
            msg.contains(needle) && msg.contains("zarr.json"),
            "{name}: {msg}"
        );
    }
    for (name, doc) in &ok {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("zarr.json"), doc.to_string()).unwrap();
        let h = zarr::open(&d, cache()).unwrap();
        assert_eq!(h.nodes.len(), 1, "{name}: {:?}", h.skipped);
    }
}

#[test]
fn bytes_codec_without_endian_on_a_multibyte_type_fails_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s.zarr");
    std::fs::create_dir_all(root.join("bad")).unwrap();
    std::fs::create_dir_all(root.join("fine")).unwrap();
    std::fs::write(
        root.join("zarr.json"),
        json!({"zarr_format": 3, "node_type": "group"}).to_string(),
    )
    .unwrap();
    for (name, dtype) in [("bad", "int16"), ("fine", "uint8")] {
        let meta = json!({
            "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "bytes", "configuration": {}}]
        });
        std::fs::write(root.join(name).join("zarr.json"), meta.to_string()).unwrap();
    }
    let ds = dataset::Opener::new(cache()).open(&root).unwrap();
    let paths: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["fine"]);
    let msg = ds.skipped[0].to_string();
    assert!(
        msg.contains("bad/zarr.json") && msg.contains("endian") && msg.contains("int16"),
        "{msg}"
    );
}
