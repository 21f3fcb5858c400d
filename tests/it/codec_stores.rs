//! Whole Zarr v2/v3 arrays whose chunks numcodecs' array-encoding
//! compressors wrote (`pcodec`, `zfpy`; tests/fixtures/codecs/stores/, from
//! generate_codecs.py), read through the library and through `slabfs cat`,
//! and compared byte for byte with what zarr-python read back (lossy zfp
//! modes included: the expected bytes are zarr-python's decode).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use slabfs::dtype::{DataType, Endian};
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codecs")
}

struct Case {
    name: String,
    path: String,
    dtype: DataType,
    shape: Vec<u64>,
    expected: Vec<u8>,
}

fn cases() -> Vec<Case> {
    let m: Value =
        serde_json::from_slice(&std::fs::read(root().join("manifest.json")).unwrap()).unwrap();
    let out: Vec<Case> = m["stores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| Case {
            name: e["name"].as_str().unwrap().into(),
            path: e["path"].as_str().unwrap().into(),
            dtype: DataType::from_numpy(e["dtype"].as_str().unwrap())
                .unwrap()
                .0,
            shape: e["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect(),
            expected: std::fs::read(root().join(e["expected_file"].as_str().unwrap())).unwrap(),
        })
        .collect();
    assert!(out.len() >= 10, "only {} stores", out.len());
    assert!(out.iter().any(|c| c.name.starts_with("pcodec")));
    assert!(out.iter().any(|c| c.name.starts_with("zfpy")));
    out
}

fn stores() -> PathBuf {
    root().join("stores")
}

#[test]
fn every_store_reads_as_zarr_python_reads_it() {
    let ds = dataset::Opener::new(Arc::new(ChunkCache::new(16 << 20)))
        .open(&stores())
        .unwrap();
    let skipped: Vec<String> = ds.skipped.iter().map(|e| format!("{e:#}")).collect();
    let mut failures = Vec::new();
    for case in cases() {
        let entry = ds.get(&case.path);
        let Some(entry) = entry else {
            failures.push(format!("{}: not listed; skipped: {skipped:#?}", case.name));
            continue;
        };
        let meta = entry.array.meta();
        assert_eq!(
            (&meta.shape, &meta.dtype),
            (&case.shape, &case.dtype),
            "{}",
            case.name
        );
        let mut whole = vec![0u8; case.expected.len() + 8];
        match read_at(entry.array.as_ref(), 0, &mut whole, Endian::Little) {
            Ok(n) if whole[..n] == case.expected[..] => {}
            Ok(n) => failures.push(format!(
                "{}: read {n} bytes, first difference at {:?}",
                case.name,
                whole[..n]
                    .iter()
                    .zip(&case.expected)
                    .position(|(a, b)| a != b)
            )),
            Err(e) => failures.push(format!("{}: {e:#}", case.name)),
        }
        // A range across chunk edges, starting mid-element.
        let (lo, hi) = (case.expected.len() / 3 + 1, case.expected.len() * 2 / 3);
        let mut part = vec![0u8; hi - lo];
        let n = read_at(entry.array.as_ref(), lo as u64, &mut part, Endian::Little).unwrap();
        if n != hi - lo || part != case.expected[lo..hi] {
            failures.push(format!("{}: bytes {lo}..{hi} differ", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `slabfs cat` writes native byte order; the expected files are
/// little-endian.
#[cfg(target_endian = "little")]
#[test]
fn slabfs_cat_serves_the_same_bytes() {
    let bin = env!("CARGO_BIN_EXE_slabfs");
    for case in cases() {
        let out = Command::new(bin)
            .arg("cat")
            .arg(stores())
            .arg(&case.path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            case.name,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout == case.expected,
            "{}: slabfs cat differs",
            case.name
        );
    }
}
