//! Global and group attributes of netCDF-4 and HDF5 files
//! (tests/fixtures/hdf5/generate_attrs.py: netCDF4-python's `ncattrs()`
//! and h5py's `attrs` of every group, in manifest.attrs.json's `groups`)
//! on the mount's directories: the library, the sidecar `.json`, the
//! `user.slabfs.attributes` xattr, and the clash rule (a dataset named
//! `.json` keeps its name).

use super::*;

/// `groups` of `file` in manifest.attrs.json.
fn groups(file: &str) -> serde_json::Map<String, Value> {
    manifest()
        .into_iter()
        .find(|m| m["file"] == file)
        .unwrap_or_else(|| panic!("{file} not in a manifest"))["groups"]
        .as_object()
        .unwrap()
        .clone()
}

fn sidecar(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn netcdf4_group_attributes() {
    let groups = groups("attrs.nc");
    assert!(groups["obs/raw"].as_object().is_some_and(|a| !a.is_empty()));
    let ds = dataset::Opener::new(cache())
        .open(&data("attrs.nc"))
        .unwrap();
    for (g, want) in &groups {
        match ds.directories.get(g) {
            Some(d) => assert!(
                json_eq_obj(&d.attributes, want),
                "/{g}: {:?} vs {want}",
                d.attributes
            ),
            None => assert!(want.as_object().unwrap().is_empty(), "/{g} missing"),
        }
    }
    // _NCProperties is netCDF's bookkeeping: hidden.
    assert!(!ds.directories[""].attributes.contains_key("_NCProperties"));
    // Each group's own dimensions, as netCDF4-python lists them.
    let dims = manifest()
        .into_iter()
        .find(|m| m["file"] == "attrs.nc")
        .unwrap()["dimensions"]
        .clone();
    for (g, want) in dims.as_object().unwrap() {
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
        let got = ds
            .directories
            .get(g)
            .map(|d| d.dimensions.clone())
            .unwrap_or_default();
        assert_eq!(got, want, "/{g}");
    }

    let m = Mount::start(&data("attrs.nc"), &[]);
    let root = sidecar(&m.path(".json"));
    assert!(json_eq_obj(
        root["attributes"].as_object().unwrap(),
        &groups[""]
    ));
    assert!(root["source"].as_str().unwrap().ends_with("attrs.nc"));
    assert_eq!(
        root["dimensions"],
        serde_json::json!([
            {"name": "time", "size": 2, "unlimited": true},
            {"name": "x", "size": 4, "unlimited": false}
        ])
    );
    let x = xattr(&m.path(""), "user.slabfs.attributes").unwrap();
    let x: Value = serde_json::from_slice(&x).unwrap();
    assert!(json_eq_obj(x.as_object().unwrap(), &groups[""]));
    for g in ["obs", "obs/raw"] {
        let doc = sidecar(&m.path(&format!("{g}/.json")));
        assert!(
            json_eq_obj(doc["attributes"].as_object().unwrap(), &groups[g]),
            "{g}"
        );
        let x = xattr(&m.path(g), "user.slabfs.attributes").unwrap();
        let x: Value = serde_json::from_slice(&x).unwrap();
        assert!(json_eq_obj(x.as_object().unwrap(), &groups[g]), "{g}");
    }
    // A group of attributes only is a directory of its sidecar; a group
    // of neither is not shown.
    let raw: Vec<_> = std::fs::read_dir(m.path("obs/raw"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(raw, [".json"]);
    assert!(!m.path("empty").exists());
    assert_eq!(
        std::fs::read(m.path("obs/t")).unwrap(),
        expected("attrs.nc.obs.t.bin")
    );
    m.stop();
}

/// h5py's root attributes with a dataset named `.json` at the root: the
/// dataset keeps the name (its bytes are h5py's), the root's attributes
/// are in its xattr only, with an info line; a group's sidecar is there.
#[test]
fn hdf5_dataset_named_like_the_sidecar_keeps_its_name() {
    let groups = groups("attrs.h5");
    let ds = dataset::Opener::new(cache())
        .open(&data("attrs.h5"))
        .unwrap();
    assert!(json_eq_obj(&ds.directories[""].attributes, &groups[""]));
    assert!(json_eq_obj(&ds.directories["g"].attributes, &groups["g"]));

    let m = Mount::start(&data("attrs.h5"), &["--log-level", "info"]);
    assert_eq!(
        std::fs::read(m.path(".json")).unwrap(),
        expected("attrs.h5..json.bin")
    );
    let own = sidecar(&m.path(".json.json"));
    assert_eq!(own["shape"], serde_json::json!([3]));
    let x = xattr(&m.path(""), "user.slabfs.attributes").unwrap();
    let x: Value = serde_json::from_slice(&x).unwrap();
    assert!(json_eq_obj(x.as_object().unwrap(), &groups[""]));
    let g = sidecar(&m.path("g/.json"));
    assert!(json_eq_obj(
        g["attributes"].as_object().unwrap(),
        &groups["g"]
    ));
    let log = m.log();
    assert!(
        log.contains("no sidecar of directory /: .json is taken"),
        "{log}"
    );
    m.stop();
}

fn json_eq_obj(a: &serde_json::Map<String, Value>, b: &Value) -> bool {
    let b = b.as_object().unwrap();
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| json_eq(v, w)))
}
