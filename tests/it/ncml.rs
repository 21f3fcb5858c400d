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

/// A directory holding the fixtures' member files and the NcML files
/// `files` (name, text), NcML 2.2's namespace added to each root.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    common::mount::copy_tree(&fixtures().join("data"), &dir.path().join("data"));
    for (name, body) in files {
        let text = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<netcdf xmlns=\"http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2\"{body}</netcdf>\n"
        );
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// The skipped datasets' messages of a directory opened whole.
fn skipped_of(ds: &Dataset) -> Vec<String> {
    ds.skipped.iter().map(|e| e.to_string()).collect()
}

fn one_skip<'a>(skipped: &'a [String], file: &str) -> &'a str {
    let hits: Vec<&String> = skipped.iter().filter(|s| s.contains(file)).collect();
    assert_eq!(hits.len(), 1, "{file}: {skipped:#?}");
    hits[0]
}

const GOOD: &str = r#">
  <aggregation dimName="time" type="joinExisting">
    <netcdf location="data/time/2000_01.nc"/>
    <netcdf location="data/time/2000_02.nc"/>
  </aggregation>
"#;

/// Broken NcML files are skipped, each with a message naming the file and
/// what is wrong (the line and column of malformed XML, the element not
/// served, the member that does not fit, the cycle, the location outside
/// the roots), and the good NcML file beside them serves on.
#[test]
fn broken_ncml_files_are_skipped_naming_file_and_cause() {
    let dir = tree(&[
        ("good.ncml", GOOD),
        ("malformed.ncml", ">\n  <variable name=\"a\">\n"),
        (
            "fmrc.ncml",
            ">\n  <aggregation dimName=\"run\" type=\"forecastModelRunCollection\"/>\n",
        ),
        (
            "group.ncml",
            " location=\"data/union/temp.nc\">\n  <group name=\"g\"/>\n",
        ),
        ("loop_a.ncml", " location=\"loop_b.ncml\">\n"),
        ("loop_b.ncml", " location=\"loop_a.ncml\">\n"),
        ("outside.ncml", " location=\"../../etc/hostname\">\n"),
        (
            "opendap.ncml",
            " location=\"https://example.org/thredds/dodsC/x.nc\">\n",
        ),
        (
            "mismatch.ncml",
            r#">
  <aggregation dimName="lat" type="joinExisting">
    <netcdf location="data/union/temp.nc"/>
    <netcdf location="data/ens/ens_0.nc"/>
  </aggregation>
"#,
        ),
        (
            "missing.ncml",
            r#">
  <aggregation dimName="time" type="joinExisting">
    <netcdf location="data/time/2000_01.nc"/>
    <netcdf location="data/time/gone.nc"/>
  </aggregation>
"#,
        ),
        (
            "tile_nosection.ncml",
            r#">
  <aggregation dimName="lat lon" type="tiled">
    <netcdf location="data/tiles/t_00.nc" section="0:1,0:2"/>
    <netcdf location="data/tiles/t_01.nc"/>
  </aggregation>
"#,
        ),
        (
            "tile_misfit.ncml",
            r#">
  <aggregation dimName="lat lon" type="tiled">
    <netcdf location="data/tiles/t_00.nc" section="0:1,0:2"/>
    <netcdf location="data/tiles/t_01.nc" section="0:1,3:6"/>
  </aggregation>
"#,
        ),
    ]);
    let ds = dataset::Opener::new(Arc::new(ChunkCache::new(1 << 20)))
        .open(dir.path())
        .unwrap();
    let skipped = skipped_of(&ds);
    // Tiles: one without a section, one whose section does not fit its
    // shape (4 columns for its 3): refused, the member named.
    let nosection = one_skip(&skipped, "tile_nosection.ncml");
    assert!(
        nosection.contains("t_01.nc") && nosection.contains("no section"),
        "{nosection}"
    );
    let misfit = one_skip(&skipped, "tile_misfit.ncml");
    assert!(
        misfit.contains("t_01.nc") && misfit.contains("its section needs"),
        "{misfit}"
    );
    let malformed = one_skip(&skipped, "malformed.ncml");
    assert!(
        malformed.contains("XML") && malformed.contains("4:"),
        "{malformed}"
    );
    let fmrc = one_skip(&skipped, "fmrc.ncml");
    assert!(
        fmrc.contains("forecastModelRunCollection") && fmrc.contains("line 3"),
        "{fmrc}"
    );
    let group = one_skip(&skipped, "group.ncml");
    assert!(
        group.contains("<group>") && group.contains("line 3"),
        "{group}"
    );
    let cycle: Vec<&String> = skipped.iter().filter(|s| s.contains("cycle")).collect();
    assert_eq!(cycle.len(), 2, "{skipped:#?}");
    assert!(
        cycle
            .iter()
            .all(|s| s.contains("loop_a.ncml") && s.contains("loop_b.ncml"))
    );
    let outside = one_skip(&skipped, "outside.ncml");
    assert!(outside.contains("outside the allowed roots"), "{outside}");
    let opendap = one_skip(&skipped, "opendap.ncml");
    assert!(opendap.contains("OPeNDAP"), "{opendap}");
    // T of temp.nc is double, ens_0.nc has no T: refused, member named.
    let mismatch = one_skip(&skipped, "mismatch.ncml");
    assert!(mismatch.contains("data/ens/ens_0.nc"), "{mismatch}");
    // A member whose length cannot be told without it: the load fails.
    let missing = one_skip(&skipped, "missing.ncml");
    assert!(missing.contains("gone.nc"), "{missing}");
    // The good one serves, whole.
    let t = ds
        .get("good.ncml/T")
        .unwrap_or_else(|| panic!("{skipped:#?}"));
    assert_eq!(t.array.meta().shape, [5, 3, 4]);
    let mut out = vec![0u8; t.array.meta().nbytes() as usize];
    slabfs::engine::read::read_at(t.array.as_ref(), 0, &mut out, Endian::Little).unwrap();
}

/// A joinNew member that is missing or out of reach loads (its row is
/// known to be one) and fails only the reads of its row, naming it,
/// until it appears; a member of another dtype is refused at load.
#[test]
fn a_missing_join_new_member_fails_only_its_reads() {
    let dir = tree(&[(
        "ens.ncml",
        r#">
  <aggregation dimName="member" type="joinNew">
    <variableAgg name="tas"/>
    <netcdf location="data/ens/ens_0.nc" coordValue="0"/>
    <netcdf location="data/ens/late.nc" coordValue="1"/>
    <netcdf location="data/ens/ens_2.nc" coordValue="2"/>
  </aggregation>
"#,
    )]);
    let path = dir.path().join("ens.ncml");
    let ds = open(&path);
    let tas = ds.get("tas").unwrap().array.clone();
    assert_eq!(tas.meta().shape, [3, 3, 4]);
    let row = 3 * 4 * 4;
    let read = |offset: u64, len: usize| {
        let mut buf = vec![0u8; len];
        slabfs::engine::read::read_at(tas.as_ref(), offset, &mut buf, Endian::Little).map(|_| buf)
    };
    let first = read(0, row).unwrap();
    let err = read(row as u64, row).unwrap_err().to_string();
    assert!(err.contains("late.nc"), "{err}");
    let third = read(2 * row as u64, row).unwrap();
    // The file appears: the same aggregation reads it (the failure was not kept).
    std::fs::copy(
        dir.path().join("data/ens/ens_1.nc"),
        dir.path().join("data/ens/late.nc"),
    )
    .unwrap();
    let whole = read(0, 3 * row).unwrap();
    let m = manifest();
    let want = std::fs::read(
        fixtures().join(
            m["ncml"]["join_new.ncml"]["variables"]["tas"]["expected"]
                .as_str()
                .unwrap(),
        ),
    )
    .unwrap();
    assert_eq!(whole, want);
    assert_eq!(first, want[..row]);
    assert_eq!(third, want[2 * row..]);
}

/// A `<scan>` aggregation in a mount follows its directory: a file landing
/// there joins it within the refresh period, a removed one leaves, and a
/// file still being written (newer than `olderThan`, or not yet a whole
/// netCDF file) is left out until it is complete; `stat` sizes follow and
/// every byte read is one the members hold.
#[test]
fn a_scan_aggregation_grows_and_shrinks_with_its_directory() {
    let _g = common::side_by_side();
    let m = manifest();
    let spec = &m["ncml"]["join_existing.ncml"]["variables"]["T"];
    let joined = std::fs::read(fixtures().join(spec["expected"].as_str().unwrap())).unwrap();
    // T's rows: 12 float32 (48 bytes) per time step; months of 3, 2, 4.
    let row = 48;
    let (jan, feb, mar) = (
        joined[..3 * row].to_vec(),
        joined[3 * row..5 * row].to_vec(),
        joined[5 * row..].to_vec(),
    );
    let src = tempfile::tempdir().unwrap();
    let series = src.path().join("series");
    std::fs::create_dir(&series).unwrap();
    let time = fixtures().join("data/time");
    std::fs::copy(time.join("2000_01.nc"), series.join("2000_01.nc")).unwrap();
    std::fs::copy(time.join("2000_02.nc"), series.join("2000_02.nc")).unwrap();
    std::fs::write(
        src.path().join("series.ncml"),
        r#"<netcdf xmlns="http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2">
  <aggregation dimName="time" type="joinExisting">
    <scan location="series" suffix=".nc" olderThan="3 sec"/>
  </aggregation>
</netcdf>
"#,
    )
    .unwrap();
    // Both files older than olderThan before the mount (dated back, not
    // waited for).
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for f in ["2000_01.nc", "2000_02.nc"] {
        let file = std::fs::File::options()
            .write(true)
            .open(series.join(f))
            .unwrap();
        file.set_modified(old).unwrap();
    }
    let mount = common::mount::Mount::start(src.path(), &["--refresh", "1"]);
    let t = mount.path("series.ncml/T");
    let wait_for = |want: &[u8], what: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let size = std::fs::metadata(&t).map(|m| m.len()).unwrap_or(0);
            let got = std::fs::read(&t).unwrap_or_default();
            // Never a byte that is not the members': what is read is one
            // of the states the directory went through.
            for state in [
                &[jan.clone(), feb.clone()].concat(),
                &[jan.clone(), feb.clone(), mar.clone()].concat(),
                &[feb.clone(), mar.clone()].concat(),
            ] {
                if got.len() == state.len() {
                    assert_eq!(
                        &got, state,
                        "{what}: a read that is no state of the directory"
                    );
                }
            }
            if size == want.len() as u64 && got == want {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: {size} bytes\n{}",
                mount.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    wait_for(&[jan.clone(), feb.clone()].concat(), "at the start");
    // A file being written: half of it first (not a whole netCDF file),
    // then the rest. It is left out while it is newer than olderThan.
    let whole = std::fs::read(time.join("2000_03.nc")).unwrap();
    std::fs::write(series.join("2000_03.nc"), &whole[..whole.len() / 2]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        std::fs::read(&t).unwrap(),
        [jan.clone(), feb.clone()].concat(),
        "a file being written joined"
    );
    std::fs::write(series.join("2000_03.nc"), &whole).unwrap();
    wait_for(
        &[jan.clone(), feb.clone(), mar.clone()].concat(),
        "after March landed",
    );
    std::fs::remove_file(series.join("2000_01.nc")).unwrap();
    wait_for(&[feb.clone(), mar.clone()].concat(), "after January left");
    mount.stop();
}

/// An NcML file is an aggregation's fragment like any dataset the
/// registry reads: an NCA partition naming it (no `format`: NcML has no
/// magic number, its name says it) reads its joined variable.
#[test]
fn an_ncml_file_is_an_nca_fragment() {
    let dir = tree(&[("series.ncml", GOOD)]);
    let desc = serde_json::json!({
        "dimensions": {"time": 5, "lat": 3, "lon": 4},
        "variables": {"T": {
            "dtype": "float32",
            "nca_dimensions": "time lat lon",
            "nca_array": {
                "pdimensions": ["time"],
                "pshape": [1],
                "Partitions": [{
                    "index": [0],
                    "location": [[0, 5], [0, 3], [0, 4]],
                    "data": {"file": "series.ncml", "ncvar": "T"}
                }]
            }
        }}
    });
    let path = dir.path().join("agg.nca.json");
    std::fs::write(&path, desc.to_string()).unwrap();
    let ds = open(&path);
    assert!(ds.skipped.is_empty(), "{:?}", skipped_of(&ds));
    let t = ds.get("T").unwrap().array.clone();
    let m = manifest();
    let want = std::fs::read(
        fixtures().join(
            m["ncml"]["join_existing.ncml"]["variables"]["T"]["expected"]
                .as_str()
                .unwrap(),
        ),
    )
    .unwrap();
    // GOOD joins January and February: the first 5 of the 9 steps.
    common::check_ranges(t.as_ref(), &want[..5 * 48], 0x6e66, 8).unwrap();
}

/// And a CF-1.13 aggregation's fragment: cf-python's aggregation of three
/// fragments (tests/fixtures/nca/data/cf/basic), each fragment file
/// renamed and reached only through an NcML wrapper its URI now names
/// (rewritten by netCDF4-python), reads as cf-python computed it.
#[test]
fn an_ncml_file_is_a_cf_aggregation_fragment() {
    let nca = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nca");
    let dir = tempfile::tempdir().unwrap();
    common::mount::copy_tree(&nca.join("data/cf/basic"), dir.path());
    for i in 0..3 {
        std::fs::rename(
            dir.path().join(format!("frag_{i}_0.nc")),
            dir.path().join(format!("raw_{i}.nc")),
        )
        .unwrap();
        std::fs::write(
            dir.path().join(format!("frag_{i}.ncml")),
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<netcdf xmlns=\"http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2\" location=\"raw_{i}.nc\"/>\n"
            ),
        )
        .unwrap();
    }
    let code = r#"
import sys, netCDF4, numpy as np
with netCDF4.Dataset(sys.argv[1], "a") as ds:
    v = ds["fragment_uris"]
    v[...] = netCDF4.stringtochar(np.array([[[f"frag_{i}.ncml"]] for i in range(3)], dtype="S11"))
"#;
    common::python::Python::new()
        .args(["-c", code])
        .arg(dir.path().join("agg.nc"))
        .run();
    let ds = open(&dir.path().join("agg.nc"));
    assert!(ds.skipped.is_empty(), "{:?}", skipped_of(&ds));
    let q = ds.get("q").unwrap().array.clone();
    let mut want = std::fs::read(nca.join("expected/data__cf__basic__agg__q.bin")).unwrap();
    if cfg!(target_endian = "big") {
        slabfs::dtype::swap_in_place(&mut want, 8);
    }
    common::check_ranges(q.as_ref(), &want, 0xcf13, 8).unwrap();
}

/// Members by absolute path, by `file:` URL (`file:/abs` and
/// `file:///abs`) and of another format (a Zarr store zarr-python wrote,
/// in a union with a netCDF file) read as the same members by relative
/// path do.
#[test]
fn members_by_absolute_path_file_url_and_of_other_formats() {
    let dir = tree(&[]);
    let zarr = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr");
    common::mount::copy_tree(&zarr.join("v2/basic.zarr"), &dir.path().join("basic.zarr"));
    let abs = dir.path().canonicalize().unwrap();
    let abs = abs.display();
    let ns = "http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2";
    std::fs::write(
        dir.path().join("abs.ncml"),
        format!(
            r#"<netcdf xmlns="{ns}"><aggregation dimName="time" type="joinExisting">
    <netcdf location="{abs}/data/time/2000_01.nc"/>
    <netcdf location="file:{abs}/data/time/2000_02.nc"/>
    <netcdf location="file://{abs}/data/time/2000_03.nc"/>
  </aggregation></netcdf>"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("zarr.ncml"),
        format!(
            r#"<netcdf xmlns="{ns}"><aggregation type="union">
    <netcdf location="basic.zarr"/>
    <netcdf location="data/time/2000_02.nc"/>
  </aggregation></netcdf>"#
        ),
    )
    .unwrap();
    let m = manifest();
    let want = |file: &str, var: &str| {
        std::fs::read(
            fixtures().join(
                m["ncml"][file]["variables"][var]["expected"]
                    .as_str()
                    .unwrap(),
            ),
        )
        .unwrap()
    };
    let ds = open(&dir.path().join("abs.ncml"));
    assert!(ds.skipped.is_empty(), "{:?}", skipped_of(&ds));
    for var in ["T", "P", "time"] {
        let a = ds.get(var).unwrap().array.clone();
        common::check_ranges(a.as_ref(), &want("join_existing.ncml", var), 0xab5, 6).unwrap();
    }
    let ds = open(&dir.path().join("zarr.ncml"));
    assert!(ds.skipped.is_empty(), "{:?}", skipped_of(&ds));
    let t = ds.get("T").unwrap().array.clone();
    common::check_ranges(t.as_ref(), &want("wrapper_file_dims.ncml", "T"), 0x2a, 6).unwrap();
    let zm: Value =
        serde_json::from_slice(&std::fs::read(zarr.join("manifest.json")).unwrap()).unwrap();
    let case = zm
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "v2_i2_plain_attrs")
        .unwrap();
    let mut counts = std::fs::read(zarr.join(case["expected"].as_str().unwrap())).unwrap();
    if cfg!(target_endian = "big") {
        slabfs::dtype::swap_in_place(&mut counts, 2);
    }
    let c = ds.get("g1/counts").unwrap().array.clone();
    common::check_ranges(c.as_ref(), &counts, 0x2b, 6).unwrap();
}

/// A tiled mosaic with a tile missing: its cells read as the fill value,
/// while a coordinate along one tiled dimension (`lat`) is still read
/// from the other tiles of its row (it used to be the fill value too when
/// the row's first tile was the one missing).
#[test]
fn a_missing_tile_is_fill_and_its_row_keeps_its_coordinates() {
    let dir = tree(&[(
        "gap.ncml",
        r#">
  <aggregation dimName="lat lon" type="tiled">
    <netcdf location="data/tiles/t_01.nc" section="0:1,3:5"/>
    <netcdf location="data/tiles/t_10.nc" section="2:3,0:2"/>
    <netcdf location="data/tiles/t_11.nc" section="2:3,3:5"/>
  </aggregation>
"#,
    )]);
    let ds = open(&dir.path().join("gap.ncml"));
    assert!(ds.skipped.is_empty(), "{:?}", skipped_of(&ds));
    let m = manifest();
    let want = |var: &str| {
        std::fs::read(
            fixtures().join(
                m["ncml"]["tiled.ncml"]["variables"][var]["expected"]
                    .as_str()
                    .unwrap(),
            ),
        )
        .unwrap()
    };
    let read = |var: &str| {
        let a = ds.get(var).unwrap().array.clone();
        let mut out = vec![0u8; a.meta().nbytes() as usize];
        slabfs::engine::read::read_at(a.as_ref(), 0, &mut out, Endian::Little).unwrap();
        out
    };
    assert_eq!(read("lat"), want("lat"));
    assert_eq!(read("lon"), want("lon"));
    // tas(lat=4, lon=6) f4: rows 0-1, columns 0-2 are the missing tile,
    // netCDF's default float fill (no _FillValue in the tiles).
    let mut tas = want("tas");
    for r in 0..2 {
        for c in 0..3 {
            let at = (r * 6 + c) * 4;
            tas[at..at + 4].copy_from_slice(&9.969_21e36_f32.to_le_bytes());
        }
    }
    assert_eq!(read("tas"), tas);
}
