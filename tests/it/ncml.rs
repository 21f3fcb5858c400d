//! NcML files through slabfs, against what netCDF4-python and xncml read
//! (tests/fixtures/ncml/generate.py writes the member files with
//! netCDF4-python, the NcML files as netCDF-Java's tutorial writes them,
//! and the expected bytes from netCDF4-python's reads by netCDF-Java's
//! rules, checked against xncml where xncml serves the feature): every
//! variable of every NcML file byte for byte, whole and in ranges, with
//! its dtype, shape, dimensions and attributes, through the library,
//! `slabfs cat` and a mount; and broken NcML files, which are skipped
//! naming the file and the line while the rest serves on.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::formats::dataset::{self, Dataset};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ncml")
}

fn manifest() -> Value {
    let raw = std::fs::read(fixtures().join("manifest.json")).unwrap();
    serde_json::from_slice(&raw).unwrap()
}

fn open(path: &Path) -> Dataset {
    dataset::Opener::new(Arc::new(ChunkCache::new(1 << 20)))
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// JSON values equal, numbers to a relative 1e-12 (a float attribute
/// read as float32 by one side and double by the other still differs).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        _ => a == b,
    }
}

#[test]
fn every_variable_of_every_ncml_file_reads_as_the_reference_readers_read_it() {
    let m = manifest();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (file, spec) in m["ncml"].as_object().unwrap() {
        let path = fixtures().join(file);
        let ds = open(&path);
        let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
        assert!(skipped.is_empty(), "{file}: {skipped:#?}");
        let vars = spec["variables"].as_object().unwrap();
        let listed: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
        let want: Vec<&str> = vars.keys().map(String::as_str).collect();
        if listed != want {
            failures.push(format!("{file}: variables {listed:?}, want {want:?}"));
            continue;
        }
        let root = ds
            .directories
            .get("")
            .map(|d| d.attributes.clone())
            .unwrap_or_default();
        for (k, v) in spec["attributes"].as_object().unwrap() {
            if !root.get(k).is_some_and(|got| same_json(got, v)) {
                failures.push(format!("{file}: global {k}: {:?}, want {v}", root.get(k)));
            }
        }
        for (var, vs) in vars {
            let what = format!("{file}: {var}");
            let meta = ds.get(var).unwrap().array.meta();
            let shape: Vec<u64> = serde_json::from_value(vs["shape"].clone()).unwrap();
            let dims: Vec<Option<String>> =
                serde_json::from_value(vs["dimensions"].clone()).unwrap();
            if meta.shape != shape {
                failures.push(format!("{what}: shape {:?}, want {shape:?}", meta.shape));
            }
            if meta.dtype.numpy_typestr(Endian::Little) != vs["dtype"] {
                failures.push(format!(
                    "{what}: dtype {}, want {}",
                    meta.dtype, vs["dtype"]
                ));
            }
            if meta.dimension_names != dims {
                failures.push(format!(
                    "{what}: dims {:?}, want {dims:?}",
                    meta.dimension_names
                ));
            }
            for (k, v) in vs["attributes"].as_object().unwrap() {
                if !meta.attributes.get(k).is_some_and(|got| same_json(got, v)) {
                    failures.push(format!(
                        "{what}: attribute {k}: {:?}, want {v}",
                        meta.attributes.get(k)
                    ));
                }
            }
            for k in meta.attributes.keys() {
                if !vs["attributes"].as_object().unwrap().contains_key(k) {
                    failures.push(format!("{what}: attribute {k} should not be there"));
                }
            }
            let expected =
                std::fs::read(fixtures().join(vs["expected"].as_str().unwrap())).unwrap();
            let array = ds.get(var).unwrap().array.clone();
            if let Err(e) = common::check_ranges(array.as_ref(), &expected, 0x6e63, 12) {
                failures.push(format!("{what}: {e}"));
            }
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} variables checked");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `slabfs cat` of joined variables writes the same bytes.
#[test]
fn cat_writes_joined_variables() {
    let m = manifest();
    let bin = env!("CARGO_BIN_EXE_slabfs");
    for (file, var) in [
        ("join_existing.ncml", "T"),
        ("join_existing_scan.ncml", "P"),
        ("join_new.ncml", "tas"),
        ("nested.ncml", "U"),
        ("wrapper.ncml", "temperature"),
    ] {
        let rel = m["ncml"][file]["variables"][var]["expected"]
            .as_str()
            .unwrap();
        let mut want = std::fs::read(fixtures().join(rel)).unwrap();
        let dtype = m["ncml"][file]["variables"][var]["dtype"].as_str().unwrap();
        if cfg!(target_endian = "big") && !dtype.starts_with("|S") {
            slabfs::dtype::swap_in_place(&mut want, dtype[2..].parse().unwrap());
        }
        let out = Command::new(bin)
            .arg("cat")
            .arg(fixtures().join(file))
            .arg(var)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{file} {var}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, want, "{file} {var}");
    }
}

/// Through a mount of the fixtures' directory: the NcML files are
/// datasets beside their member files, read with plain `read`s.
#[test]
fn a_mounted_directory_serves_its_ncml_files() {
    let _g = common::side_by_side();
    let m = manifest();
    let mount = common::mount::Mount::start(&fixtures(), &[]);
    for (file, var) in [
        ("join_existing.ncml", "T"),
        ("join_new_names.ncml", "member"),
        ("union.ncml", "T"),
    ] {
        let rel = m["ncml"][file]["variables"][var]["expected"]
            .as_str()
            .unwrap();
        let want = std::fs::read(fixtures().join(rel)).unwrap();
        let path = mount.path(&format!("{file}/{var}"));
        let got = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), mount.log()));
        assert_eq!(got, want, "{file} {var}");
    }
    mount.stop();
}
