//! The attributes of the mount's directories (a file's global attributes,
//! a group's, a Zarr group's, a references file's, a descriptor's),
//! against what the formats' own libraries read from the committed
//! fixtures (tests/fixtures/attributes/generate.py: netCDF4-python,
//! h5py, zarr-python, kerchunk's JSON): through the library
//! (`Dataset::directories`), a real mount (`DIR/.json`, the
//! `user.slabfs.attributes` xattr) and a refresh.

use crate::common;
use common::mount::Mount;
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::formats::dataset;
use slabfs::fs::refresh::Invalidate;
use slabfs::fs::{FsConfig, ROOT_INO, SlabFs, Views, XattrReply};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(1 << 20))
}

/// Every source of expected.json with its groups' attributes.
fn expected() -> Vec<(String, Map<String, Value>)> {
    let raw = std::fs::read(fixtures().join("attributes/expected.json")).unwrap();
    let all: Vec<Value> = serde_json::from_slice(&raw).unwrap();
    all.into_iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap().to_string(),
                e["groups"].as_object().unwrap().clone(),
            )
        })
        .collect()
}

/// [`expected`], with each netCDF source's `dimensions`.
fn expected_with_dims() -> Vec<(String, Map<String, Value>, Option<Value>)> {
    let raw = std::fs::read(fixtures().join("attributes/expected.json")).unwrap();
    let all: Vec<Value> = serde_json::from_slice(&raw).unwrap();
    all.into_iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap().to_string(),
                e["groups"].as_object().unwrap().clone(),
                e.get("dimensions").cloned(),
            )
        })
        .collect()
}

/// The groups of `source` in expected.json.
fn groups_of(source: &str) -> Map<String, Value> {
    expected()
        .into_iter()
        .find(|(s, _)| s == source)
        .unwrap_or_else(|| panic!("{source} not in expected.json"))
        .1
}

/// JSON equality, floats within one part in 10^6 (float32 attributes are
/// printed widened by Python, shortest by slabfs).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-6 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Every group of every fixture the writers' libraries read: its
/// attributes at its path, and no directory that has none.
#[test]
fn every_fixture_directory_has_its_writers_attributes() {
    let mut checked = 0;
    let mut dims_checked = 0;
    for (source, groups, entry_dims) in expected_with_dims() {
        let ds = dataset::Opener::new(cache())
            .open(&fixtures().join(&source))
            .unwrap();
        for (group, attrs) in &groups {
            let attrs = attrs.as_object().unwrap();
            match ds.directories.get(group) {
                None => assert!(attrs.is_empty(), "{source} /{group}: not reported"),
                Some(d) => {
                    assert!(
                        json_eq(
                            &Value::Object(d.attributes.clone()),
                            &Value::Object(attrs.clone())
                        ),
                        "{source} /{group}:\n slabfs {:?}\n writer {attrs:?}",
                        d.attributes
                    );
                    checked += 1;
                }
            }
        }
        for path in ds.directories.keys() {
            assert!(groups.contains_key(path), "{source}: /{path} is no group");
        }
        // netCDF files: each group's own dimensions, in netCDF's order.
        let hdf5 = std::fs::read(fixtures().join(&source)).is_ok_and(|b| b.starts_with(b"\x89HDF"));
        if let Some(dims) = entry_dims.as_ref().and_then(Value::as_object) {
            for (group, want) in dims {
                let want: Vec<(String, u64, bool)> = want
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| {
                        (
                            d[0].as_str().unwrap().to_string(),
                            d[1].as_u64().unwrap(),
                            d[2].as_bool().unwrap(),
                        )
                    })
                    .collect();
                let mut want = want;
                let got = ds
                    .directories
                    .get(group)
                    .map(|d| d.dimensions.clone())
                    .unwrap_or_default();
                // netCDF-4 (HDF5) files list them by name, not by dimid.
                if hdf5 {
                    want.sort();
                }
                assert_eq!(got, want, "{source} /{group}: dimensions");
                dims_checked += want.len();
            }
        }
    }
    assert!(checked >= 50, "{checked}");
    assert!(dims_checked >= 50, "{dims_checked}");
}

/// Attributes of a file inside a directory are at the file's path; the
/// same through a real mount: the sidecar `.json` and the xattr.
#[test]
fn netcdf3_globals_through_a_mount() {
    let dir = fixtures().join("netcdf3/data");
    let ds = dataset::Opener::new(cache()).open(&dir).unwrap();
    let want = groups_of("netcdf3/data/classic_types.nc")[""].clone();
    let got = &ds.directories["classic_types.nc"];
    assert!(json_eq(&Value::Object(got.attributes.clone()), &want));
    assert!(got.source.ends_with("netcdf3/data/classic_types.nc"));
    // A file without attributes: its dimensions only.
    let bare = &ds.directories["single_record_byte.nc"];
    assert!(bare.attributes.is_empty() && !bare.dimensions.is_empty());

    let m = Mount::start(&dir, &[]);
    let doc = read_json(&m.path("classic_types.nc/.json"));
    assert!(json_eq(&doc["attributes"], &want), "{doc}");
    assert_eq!(doc["source"], json!(got.source));
    let x = getxattr(&m.path("classic_types.nc"), "user.slabfs.attributes").unwrap();
    assert!(json_eq(&serde_json::from_slice(&x).unwrap(), &want));
    // A file of dimensions and attributes only is a directory of its
    // sidecar.
    let names = list(&m.path("no_variables.nc"));
    assert_eq!(names, [".json"]);
    let doc = read_json(&m.path("no_variables.nc/.json"));
    assert_eq!(
        doc["attributes"],
        groups_of("netcdf3/data/no_variables.nc")[""]
    );
    let doc = read_json(&m.path("single_record_byte.nc/.json"));
    assert_eq!(doc["attributes"], json!({}));
    let dims: Vec<Value> = bare
        .dimensions
        .iter()
        .map(|(n, s, u)| json!({"name": n, "size": s, "unlimited": u}))
        .collect();
    assert_eq!(doc["dimensions"], Value::Array(dims));
    assert_eq!(
        getxattr(&m.path("single_record_byte.nc"), "user.slabfs.attributes")
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENODATA)
    );
    // The root (a plain directory) has none.
    assert!(!m.path(".json").exists());
    m.stop();
}

/// Every netCDF-3 file's dimensions against
/// netCDF4-python's (tests/fixtures/netcdf3/manifest.json `dimensions`:
/// `len(dim)`, `dim.isunlimited()`), in the library and the sidecar.
#[test]
fn netcdf3_dimensions_match_netcdf4_python() {
    let root = fixtures().join("netcdf3");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let mut checked = 0;
    for f in manifest.as_array().unwrap() {
        let file = f["file"].as_str().unwrap();
        // (The manifest's object is read back sorted by name.)
        let mut want: Vec<(String, u64, bool)> = f["dimensions"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(n, d)| {
                (
                    n.clone(),
                    d["len"].as_u64().unwrap(),
                    d["unlimited"].as_bool().unwrap(),
                )
            })
            .collect();
        let ds = dataset::Opener::new(cache())
            .open(&root.join(file))
            .unwrap();
        let mut got = ds
            .directories
            .get("")
            .map(|d| d.dimensions.clone())
            .unwrap_or_default();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{file}");
        checked += want.len();
    }
    assert!(checked > 20, "{checked}");
}

/// A Zarr store as SOURCE: its root group's attributes at the mount root,
/// its nested groups' in theirs (consolidated v3 metadata, a nested JSON
/// object value included).
#[test]
fn zarr_groups_through_a_mount() {
    let source = "zarr/v3/consolidated.zarr";
    let groups = groups_of(source);
    let m = Mount::start(&fixtures().join(source), &[]);
    for (group, want) in &groups {
        let dir = if group.is_empty() {
            m.path("")
        } else {
            m.path(group)
        };
        let sidecar = dir.join(".json");
        if want.as_object().unwrap().is_empty() {
            assert!(!sidecar.exists(), "{group}");
            continue;
        }
        let doc = read_json(&sidecar);
        assert!(json_eq(&doc["attributes"], want), "{group}: {doc}");
        let x = getxattr(&dir, "user.slabfs.attributes").unwrap();
        assert!(json_eq(&serde_json::from_slice(&x).unwrap(), want));
    }
    assert_eq!(
        read_json(&m.path(".json"))["attributes"]["nested"],
        json!({"a": [1, 2, {"b": null}]})
    );
    m.stop();
}

/// A kerchunk references file as SOURCE: kerchunk's root `.zattrs`.
#[test]
fn kerchunk_root_attributes_through_a_mount() {
    let source = "kerchunk/data/netcdf4.json";
    let want = groups_of(source)[""].clone();
    let m = Mount::start(&fixtures().join(source), &[]);
    assert!(json_eq(&read_json(&m.path(".json"))["attributes"], &want));
    let x = getxattr(&m.path(""), "user.slabfs.attributes").unwrap();
    assert!(json_eq(&serde_json::from_slice(&x).unwrap(), &want));
    m.stop();
}

/// A CF-1.13 aggregation file inside a directory: its global attributes
/// beside its assembled variables.
#[test]
fn cf_aggregation_globals() {
    let dir = fixtures().join("nca/data/cf/basic");
    let ds = dataset::Opener::new(cache()).open(&dir).unwrap();
    let want = groups_of("nca/data/cf/basic/agg.nc")[""].clone();
    assert!(ds.entries.iter().any(|e| e.path.starts_with("agg.nc/")));
    assert!(json_eq(
        &Value::Object(ds.directories["agg.nc"].attributes.clone()),
        &want
    ));
}

/// An NCA descriptor's `attributes`, with a top-level `Conventions`
/// folded in (the descriptor is the writer here: its JSON is the
/// expectation), at the descriptor's path inside a directory.
#[test]
fn nca_descriptor_attributes() {
    let tmp = tempfile::tempdir().unwrap();
    let original = fixtures().join("nca/data/size1.nca.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(original).unwrap()).unwrap();
    let attrs = json!({"title": "an aggregation", "history": "assembled", "version": [1, 2]});
    doc["attributes"] = attrs.clone();
    doc["Conventions"] = json!("CF-1.8 NCA");
    std::fs::write(
        tmp.path().join("agg.nca.json"),
        serde_json::to_vec(&doc).unwrap(),
    )
    .unwrap();
    let ds = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let mut want = attrs.as_object().unwrap().clone();
    want.insert("Conventions".into(), json!("CF-1.8 NCA"));
    let got = &ds.directories["agg.nca.json"];
    assert_eq!(got.attributes, want);
    assert!(got.source.ends_with("agg.nca.json"));
    // As SOURCE: at the root.
    let ds = dataset::Opener::new(cache())
        .open(&tmp.path().join("agg.nca.json"))
        .unwrap();
    assert_eq!(ds.directories[""].attributes, want);
}

struct NoKernel;
impl Invalidate for NoKernel {
    fn inode(&self, _: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn entry(&self, _: u64, _: &str) -> std::io::Result<()> {
        Ok(())
    }
}

fn config() -> FsConfig {
    FsConfig {
        byte_order: Endian::Little,
        uid: 0,
        gid: 0,
        views: Views::default(),
        track_changes: true,
    }
}

/// The core's `.json` of directory `dir` ("" the root), if any.
fn core_sidecar(fs: &SlabFs, dir: &str) -> Option<Value> {
    let mut ino = ROOT_INO;
    for c in dir.split('/').filter(|c| !c.is_empty()) {
        ino = fs.lookup(ino, OsStr::new(c)).ok()?.ino;
    }
    let side = fs.lookup(ino, OsStr::new(".json")).ok()?;
    let bytes = fs.read(side.ino, 0, 0, 1 << 20).unwrap();
    Some(serde_json::from_slice(&bytes).unwrap())
}

/// A file whose attributes change is refreshed: the new attributes in
/// its sidecar and xattr, reported as changed; a removed file's go.
#[test]
fn refresh_updates_a_files_attributes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = fixtures().join("netcdf3/data");
    let file = tmp.path().join("a.nc");
    std::fs::copy(data.join("ncgen_classic.nc"), &file).unwrap();
    std::fs::copy(data.join("classic_records.nc"), tmp.path().join("b.nc")).unwrap();
    let ds = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let fs = SlabFs::of_dataset(&ds, config());
    let before = groups_of("netcdf3/data/ncgen_classic.nc")[""].clone();
    assert!(json_eq(
        &core_sidecar(&fs, "a.nc").unwrap()["attributes"],
        &before
    ));

    // Unchanged: nothing to do.
    let again = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    assert!(fs.refresh(&again, &NoKernel).is_empty());

    std::fs::copy(data.join("ncgen_cdf5.nc"), &file).unwrap();
    let changed = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let changes = fs.refresh(&changed, &NoKernel);
    assert_eq!(changes.attributes, ["a.nc"], "{changes:?}");
    let after = groups_of("netcdf3/data/ncgen_cdf5.nc")[""].clone();
    assert!(json_eq(
        &core_sidecar(&fs, "a.nc").unwrap()["attributes"],
        &after
    ));
    let a = fs.lookup(ROOT_INO, OsStr::new("a.nc")).unwrap().ino;
    let XattrReply::Data(x) = fs
        .getxattr(a, OsStr::new("user.slabfs.attributes"), 1 << 16)
        .unwrap()
    else {
        panic!("no data")
    };
    assert!(json_eq(&serde_json::from_slice(&x).unwrap(), &after));

    std::fs::remove_file(&file).unwrap();
    let gone = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let changes = fs.refresh(&gone, &NoKernel);
    assert_eq!(changes.attributes, ["a.nc"], "{changes:?}");
    assert!(fs.lookup(ROOT_INO, OsStr::new("a.nc")).is_err());
    assert!(core_sidecar(&fs, "b.nc").is_some());
}

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn getxattr(path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    // SAFETY: valid C strings and a buffer of the length passed.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf)
}

/// NCZarr stores netcdf-c 4.9.0 wrote from the same CDL as `v2.zarr`
/// (netCDF4-python of the 4.10 wheel cannot open them): the same global
/// attributes, their bookkeeping (`_NCProperties`, `_NCZARR_ATTR` in
/// capitals) hidden.
#[test]
fn nczarr_bookkeeping_is_hidden() {
    let want = groups_of("nczarr/v2.zarr");
    for store in ["v490.zarr", "v49lower.zarr"] {
        let ds = dataset::Opener::new(cache())
            .open(&fixtures().join("nczarr").join(store))
            .unwrap();
        for (group, attrs) in &want {
            let got = ds
                .directories
                .get(group)
                .map(|d| Value::Object(d.attributes.clone()))
                .unwrap_or_else(|| json!({}));
            assert!(json_eq(&got, attrs), "{store} /{group}: {got}");
        }
    }
}

/// A kerchunk references file with a subgroup that is caught half
/// written by a refresh: the pass fails to re-open it, and every group's
/// attributes are kept as they were (a group's source is the references
/// file, which still exists; `refs.json/grp` never does), not dropped
/// until the next pass.
#[test]
fn refresh_keeps_a_half_written_references_files_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("refs.json");
    // kerchunk's version 1 layout, as kerchunk writes it: each metadata
    // document a JSON string, a chunk inline as base64.
    let refs = json!({
        "version": 1,
        "refs": {
            ".zgroup": "{\"zarr_format\": 2}",
            ".zattrs": "{\"title\": \"root\"}",
            "grp/.zgroup": "{\"zarr_format\": 2}",
            "grp/.zattrs": "{\"units\": \"K\", \"n\": 3}",
            "grp/x/.zarray": "{\"zarr_format\": 2, \"shape\": [2], \"chunks\": [2], \
                \"dtype\": \"<i2\", \"compressor\": null, \"fill_value\": 0, \
                \"filters\": null, \"order\": \"C\"}",
            "grp/x/0": "base64:AQACAA==",
        }
    });
    let text = serde_json::to_vec_pretty(&refs).unwrap();
    std::fs::write(&file, &text).unwrap();
    let ds = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    assert!(ds.skipped.is_empty());
    let fs = SlabFs::of_dataset(&ds, config());
    let grp = json!({"units": "K", "n": 3});
    let root = json!({"title": "root"});
    assert_eq!(
        core_sidecar(&fs, "refs.json/grp").unwrap()["attributes"],
        grp
    );
    assert_eq!(core_sidecar(&fs, "refs.json").unwrap()["attributes"], root);

    // Half written: the pass reports the file as failed.
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let half = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    assert_eq!(half.skipped.len(), 1, "{:?}", half.skipped);
    let changes = fs.refresh(&half, &NoKernel);
    assert!(changes.attributes.is_empty(), "{changes:?}");
    assert_eq!(
        core_sidecar(&fs, "refs.json/grp").unwrap()["attributes"],
        grp
    );
    assert_eq!(core_sidecar(&fs, "refs.json").unwrap()["attributes"], root);

    // Whole again: nothing changed.
    std::fs::write(&file, &text).unwrap();
    let again = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let changes = fs.refresh(&again, &NoKernel);
    assert!(changes.attributes.is_empty(), "{changes:?}");
}
