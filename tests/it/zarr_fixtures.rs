//! Every Zarr fixture written by zarr-python 3 / numcodecs
//! (tests/fixtures/generate_zarr.py) read through slabfs and compared byte
//! for byte with what zarr-python itself read back, whole and at
//! pseudo-random offsets and lengths, in both byte orders, through the
//! library and through the `slabfs` binary.

use crate::common;
use common::Lcg;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use slabfs::dtype::{DataType, Endian, swap_in_place};
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset::{self, Dataset};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr")
}

struct Case {
    name: String,
    /// Path of the array in `slabfs ls` of the fixtures directory.
    path: String,
    dtype: DataType,
    shape: Vec<u64>,
    /// Little-endian bytes as zarr-python read them.
    expected: Vec<u8>,
}

fn cases() -> Vec<Case> {
    let root = fixtures();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for e in manifest.as_array().unwrap() {
        let store = e["store"].as_str().unwrap();
        let array = e["array"].as_str().unwrap();
        let path = if array.is_empty() {
            store.to_string()
        } else {
            format!("{store}/{array}")
        };
        let (dtype, _) = DataType::from_numpy(e["dtype"].as_str().unwrap()).unwrap();
        out.push(Case {
            name: e["name"].as_str().unwrap().to_string(),
            path,
            dtype,
            shape: e["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect(),
            expected: std::fs::read(root.join(e["expected"].as_str().unwrap())).unwrap(),
        });
    }
    assert!(out.len() > 50, "manifest lists only {} arrays", out.len());
    out
}

fn open_all() -> Dataset {
    let ds = dataset::Opener::new(Arc::new(ChunkCache::new(64 << 20)))
        .open(&fixtures())
        .unwrap();
    let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
    assert!(skipped.is_empty(), "fixtures failed to open: {skipped:#?}");
    ds
}

#[test]
fn every_fixture_reads_as_zarr_python_reads_it() {
    let ds = open_all();
    let mut failures = Vec::new();
    for case in cases() {
        let Some(entry) = ds.get(&case.path) else {
            failures.push(format!("{}: {} not listed", case.name, case.path));
            continue;
        };
        let meta = entry.array.meta();
        if meta.shape != case.shape || meta.dtype != case.dtype {
            failures.push(format!(
                "{}: shape/dtype {:?} {} != {:?} {}",
                case.name, meta.shape, meta.dtype, case.shape, case.dtype
            ));
            continue;
        }
        let mut whole = vec![0u8; case.expected.len() + 16];
        match read_at(entry.array.as_ref(), 0, &mut whole, Endian::Little) {
            Ok(n) if n == case.expected.len() && whole[..n] == case.expected[..] => {}
            Ok(n) => {
                let first_diff = whole[..n.min(case.expected.len())]
                    .iter()
                    .zip(&case.expected)
                    .position(|(a, b)| a != b);
                failures.push(format!(
                    "{}: read {n} bytes (expected {}), first difference at {first_diff:?}",
                    case.name,
                    case.expected.len()
                ));
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: {e}", case.name));
                continue;
            }
        }
        // Random sub-ranges, including mid-element starts and ends, empty
        // reads and reads past the end.
        let size = case.expected.len() as u64;
        let mut rng = Lcg(size ^ 0x5eed);
        for _ in 0..25 {
            let offset = rng.next(size + 8);
            let len = rng.next(size / 2 + 9);
            let mut buf = vec![0u8; len as usize];
            let n = read_at(entry.array.as_ref(), offset, &mut buf, Endian::Little).unwrap();
            let lo = offset.min(size) as usize;
            let hi = (offset + len).min(size) as usize;
            if n != hi - lo || buf[..n] != case.expected[lo..hi] {
                failures.push(format!("{}: bytes {offset}+{len} differ", case.name));
                break;
            }
        }
        // Big-endian output is the same values with each element swapped.
        let mut big = vec![0u8; case.expected.len()];
        read_at(entry.array.as_ref(), 0, &mut big, Endian::Big).unwrap();
        swap_in_place(&mut big, case.dtype.swap_unit());
        if big != case.expected {
            failures.push(format!("{}: big-endian output differs", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `slabfs cat` writes native byte order; the expected files are
/// little-endian, so this comparison only holds on little-endian machines.
#[cfg(target_endian = "little")]
#[test]
fn cli_ls_and_cat_serve_the_same_bytes() {
    let bin = env!("CARGO_BIN_EXE_slabfs");
    let ls = Command::new(bin)
        .arg("ls")
        .arg(fixtures())
        .output()
        .unwrap();
    assert!(
        ls.status.success(),
        "{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    let listing = String::from_utf8(ls.stdout).unwrap();
    for case in cases() {
        let line = listing
            .lines()
            .find(|l| l.split('\t').next() == Some(case.path.as_str()))
            .unwrap_or_else(|| panic!("{} missing from ls:\n{listing}", case.path));
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields[3], case.expected.len().to_string(), "{line}");
        let cat = Command::new(bin)
            .arg("cat")
            .arg(fixtures())
            .arg(&case.path)
            .output()
            .unwrap();
        assert!(
            cat.status.success(),
            "{}: {}",
            case.name,
            String::from_utf8_lossy(&cat.stderr)
        );
        assert!(
            cat.stdout == case.expected,
            "{}: slabfs cat differs",
            case.name
        );
    }
    // --offset/--length on one array.
    let case = &cases()[0];
    let n = case.expected.len();
    let cat = Command::new(bin)
        .args([
            "cat",
            fixtures().to_str().unwrap(),
            &case.path,
            "--offset",
            "3",
            "--length",
        ])
        .arg((n / 2).to_string())
        .output()
        .unwrap();
    assert!(cat.status.success());
    assert_eq!(cat.stdout, case.expected[3.min(n)..(3 + n / 2).min(n)]);
}
