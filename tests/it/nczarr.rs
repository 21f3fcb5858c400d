//! NCZarr stores written by netcdf-c (Debian's nccopy 4.9.0 and the
//! netcdf-c 4.10.1 inside netCDF4-python; tests/fixtures/nczarr/generate.py)
//! read as netCDF4-python reads the source file: every variable byte for
//! byte, dimension names from NCZarr's dimension references, scalars as
//! 0-d files, netcdf-c's bookkeeping attributes hidden, and a missing chunk
//! read as netcdf-c reads it.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use slabfs::dtype::{DataType, Endian};
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nczarr")
}

fn manifest() -> Vec<Value> {
    let m: Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap();
    m.as_array().unwrap().clone()
}

#[test]
fn every_variable_of_every_layout_reads_as_netcdf_c_reads_it() {
    let entries = manifest();
    assert_eq!(entries.len(), 21, "3 stores x 7 variables");
    let mut failures = Vec::new();
    for store in ["v490.zarr", "v49lower.zarr", "v2.zarr"] {
        let ds = dataset::Opener::new(Arc::new(ChunkCache::new(16 << 20)))
            .open(&fixtures().join(store))
            .unwrap();
        assert!(ds.skipped.is_empty(), "{store}: {:?}", ds.skipped);
        for e in entries.iter().filter(|e| e["store"] == store) {
            let path = e["path"].as_str().unwrap();
            let Some(entry) = ds.get(path) else {
                failures.push(format!("{store}/{path}: not found"));
                continue;
            };
            let meta = entry.array.meta();
            let want = std::fs::read(fixtures().join(e["expected"].as_str().unwrap())).unwrap();
            let shape: Vec<u64> = e["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            if meta.shape != shape {
                failures.push(format!(
                    "{store}/{path}: shape {:?} != {shape:?}",
                    meta.shape
                ));
                continue;
            }
            let (dtype, _) = DataType::from_numpy(e["dtype"].as_str().unwrap()).unwrap();
            if meta.dtype != dtype {
                failures.push(format!("{store}/{path}: dtype {} != {dtype}", meta.dtype));
            }
            let dims: Vec<Option<String>> = e["dims"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| Some(d.as_str().unwrap().to_string()))
                .collect();
            if meta.dimension_names != dims {
                failures.push(format!(
                    "{store}/{path}: dims {:?} != {dims:?}",
                    meta.dimension_names
                ));
            }
            if meta
                .attributes
                .keys()
                .any(|k| k.to_ascii_lowercase().starts_with("_nczarr") || k == "_ARRAY_DIMENSIONS")
            {
                failures.push(format!(
                    "{store}/{path}: bookkeeping shown: {:?}",
                    meta.attributes.keys()
                ));
            }
            for (k, v) in e["attributes"].as_object().unwrap() {
                if k != "_FillValue" && meta.attributes.get(k) != Some(v) {
                    failures.push(format!(
                        "{store}/{path}: attribute {k} = {:?}, netCDF4 says {v}",
                        meta.attributes.get(k)
                    ));
                }
            }
            let mut got = vec![0u8; want.len()];
            match read_at(entry.array.as_ref(), 0, &mut got, Endian::Little) {
                Ok(n) if n == want.len() && got == want => {}
                Ok(n) => failures.push(format!("{store}/{path}: {n} bytes differ")),
                Err(err) => failures.push(format!("{store}/{path}: {err}")),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn group_attributes_hide_netcdf_bookkeeping() {
    for store in ["v490.zarr", "v49lower.zarr", "v2.zarr"] {
        let h = slabfs::formats::zarr::open(
            &fixtures().join(store),
            Arc::new(ChunkCache::new(1 << 20)),
        )
        .unwrap();
        let root = h.nodes.iter().find(|n| n.path.is_empty()).unwrap();
        assert_eq!(
            root.attributes.get("title").and_then(Value::as_str),
            Some("slabfs NCZarr fixture"),
            "{store}"
        );
        for node in &h.nodes {
            let hidden: Vec<&String> = node
                .attributes
                .keys()
                .filter(|k| k.to_ascii_lowercase().starts_with("_nczarr") || *k == "_NCProperties")
                .collect();
            assert!(hidden.is_empty(), "{store}/{}: {hidden:?}", node.path);
        }
    }
}

#[test]
fn slabfs_cat_serves_the_same_bytes() {
    for e in manifest().iter().filter(|e| e["store"] == "v2.zarr") {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .arg("cat")
            .arg(fixtures().join("v2.zarr"))
            .arg(e["path"].as_str().unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = std::fs::read(fixtures().join(e["expected"].as_str().unwrap())).unwrap();
        // The expected bytes are little-endian, as served on this machine.
        assert_eq!(Endian::NATIVE, Endian::Little);
        assert_eq!(out.stdout, want, "{}", e["path"]);
    }
}

#[test]
fn every_layout_mounts_with_the_same_bytes() {
    // The stores are read-only fixtures: mount each in turn.
    for store in ["v490.zarr", "v49lower.zarr", "v2.zarr"] {
        let m = common::mount::Mount::start(&fixtures().join(store), &["--refresh", "0"]);
        for e in manifest().iter().filter(|e| e["store"] == store) {
            let path = e["path"].as_str().unwrap();
            let want = std::fs::read(fixtures().join(e["expected"].as_str().unwrap())).unwrap();
            let got = std::fs::read(m.path(path)).unwrap();
            assert_eq!(got, want, "{store}/{path} through the mount");
            let sidecar: Value =
                serde_json::from_slice(&std::fs::read(m.path(&format!("{path}.json"))).unwrap())
                    .unwrap();
            assert_eq!(sidecar["dimension_names"], e["dims"], "{store}/{path}");
        }
        m.stop();
    }
}
