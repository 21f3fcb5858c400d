//! kerchunk / fsspec reference files through slabfs, against what
//! netCDF4-python reads from the files the references point into
//! (tests/fixtures/kerchunk/generate.py writes a netCDF-3 and a
//! netCDF-4/HDF5 file with netCDF4-python, their references with kerchunk
//! and the expected bytes with netCDF4-python): every variable of every
//! reference file byte for byte, whole and in pseudo-random ranges,
//! through the library and the `slabfs` binary; the listing of a
//! directory holding reference files; and broken reference files (bad
//! JSON, urls escaping the root by `..` or a symlink, other schemes,
//! missing targets, ranges past the end), which must give errors naming
//! the file and never panic.

use crate::common;
use common::Lcg;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};
use slabfs::dtype::Endian;
use slabfs::engine::array::ArraySource;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset::{self, Dataset};
use slabfs::formats::kerchunk;
use slabfs::fs::error::ToErrno;
use slabfs::storage::{ByteRange, Store};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kerchunk")
}

fn manifest() -> Value {
    let raw = std::fs::read(fixtures().join("manifest.json")).unwrap();
    serde_json::from_slice(&raw).unwrap()
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(1 << 20))
}

fn open(path: &Path) -> Dataset {
    dataset::Opener::new(cache())
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn skipped(ds: &Dataset) -> Vec<String> {
    ds.skipped.iter().map(|e| e.to_string()).collect()
}

/// The expected bytes of `var` of manifest dataset `dataset`.
fn expected(m: &Value, dataset: &str, var: &str) -> Vec<u8> {
    let rel = m["datasets"][dataset]["variables"][var]["expected"]
        .as_str()
        .unwrap_or_else(|| panic!("{dataset}/{var} not in the manifest"));
    std::fs::read(fixtures().join(rel)).unwrap()
}

/// Whole, then pseudo-random ranges, little-endian output.
fn check_bytes(a: &dyn ArraySource, expected: &[u8]) -> Result<(), String> {
    common::check_ranges(a, expected, 0x6b63, 25)
}

#[test]
fn every_variable_of_every_reference_file_reads_as_netcdf4_python_reads_it() {
    let m = manifest();
    let mut failures = Vec::new();
    let mut checked = 0;
    for r in m["references"].as_array().unwrap() {
        let file = fixtures().join(r["file"].as_str().unwrap());
        let dataset = r["dataset"].as_str().unwrap();
        let ds = open(&file);
        assert!(
            skipped(&ds).is_empty(),
            "{}: {:#?}",
            file.display(),
            skipped(&ds)
        );
        let vars: Vec<&str> = r["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let listed: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
        let mut want = vars.clone();
        want.sort();
        assert_eq!(listed, want, "{}: arrays listed", file.display());
        for var in vars {
            let what = format!("{}: {var}", r["file"]);
            let entry = ds.get(var).unwrap();
            let a = entry.array.as_ref();
            let meta = a.meta();
            let spec = &m["datasets"][dataset]["variables"][var];
            let shape: Vec<u64> = serde_json::from_value(spec["shape"].clone()).unwrap();
            let dims: Vec<Option<String>> =
                serde_json::from_value(spec["dimensions"].clone()).unwrap();
            if meta.shape != shape {
                failures.push(format!("{what}: shape {:?} vs {shape:?}", meta.shape));
            }
            if meta.dtype.numpy_typestr(Endian::Little) != spec["dtype"] {
                failures.push(format!("{what}: dtype {} vs {}", meta.dtype, spec["dtype"]));
            }
            if meta.dimension_names != dims {
                failures.push(format!("{what}: dims {:?}", meta.dimension_names));
            }
            if let Err(e) = check_bytes(a, &expected(&m, dataset, var)) {
                failures.push(format!("{what}: {e}"));
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} variables checked");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn attributes_and_fill_values_come_through() {
    let ds = open(&fixtures().join("data/netcdf4.json"));
    let temp = ds.get("temp").unwrap().array.meta();
    assert_eq!(temp.attributes.get("units"), Some(&json!("K")));
    assert_eq!(temp.fill_value, (-999.0f32).to_ne_bytes());
    // Chunks HDF5 never allocated have no reference: they read as the
    // fill value (the manifest's bytes say so too, from netCDF4-python).
    let sparse = ds.get("sparse").unwrap().array.meta();
    assert_eq!(sparse.fill_value, (-1.5f32).to_ne_bytes());
    let refs: Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("data/netcdf4.json")).unwrap())
            .unwrap();
    let sparse_chunks = refs["refs"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("sparse/") && !k.contains(".z"))
        .count();
    assert!(
        sparse_chunks < 9,
        "the fixture must have unallocated chunks"
    );
    let classic = open(&fixtures().join("data/classic.json"));
    let t = classic.get("temp").unwrap().array.meta();
    assert_eq!(t.attributes.get("units"), Some(&json!("K")));
    assert_eq!(t.fill_value, (-999.0f32).to_ne_bytes());
}

/// `expected` (little-endian) in the machine's byte order, what `slabfs
/// cat` writes.
fn native(m: &Value, dataset: &str, var: &str) -> Vec<u8> {
    let mut bytes = expected(m, dataset, var);
    if cfg!(target_endian = "big") {
        let dtype = m["datasets"][dataset]["variables"][var]["dtype"]
            .as_str()
            .unwrap();
        if !dtype.starts_with("|S") {
            let unit: usize = dtype[2..].parse().unwrap();
            slabfs::dtype::swap_in_place(&mut bytes, unit);
        }
    }
    bytes
}

/// `slabfs cat` writes the same bytes, whole and in ranges.
#[test]
fn cat_writes_every_variable() {
    let m = manifest();
    let bin = env!("CARGO_BIN_EXE_slabfs");
    let mut rng = Lcg(0x6361);
    for r in m["references"].as_array().unwrap() {
        let file = fixtures().join(r["file"].as_str().unwrap());
        let dataset = r["dataset"].as_str().unwrap();
        for var in r["variables"].as_array().unwrap() {
            let var = var.as_str().unwrap();
            let want = native(&m, dataset, var);
            let out = Command::new(bin)
                .arg("cat")
                .arg(&file)
                .arg(var)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{var}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.stdout, want, "{}: {var}", file.display());
        }
        // A few ranges of the first variable with more than one chunk.
        let var = if dataset == "classic" {
            "temp"
        } else {
            "counts"
        };
        if !r["variables"].as_array().unwrap().contains(&json!(var)) {
            continue;
        }
        let want = native(&m, dataset, var);
        for _ in 0..3 {
            let offset = rng.next(want.len() as u64);
            let len = rng.next(want.len() as u64 - offset + 1);
            let out = Command::new(bin)
                .arg("cat")
                .arg(&file)
                .arg(var)
                .args([
                    "--offset",
                    &offset.to_string(),
                    "--length",
                    &len.to_string(),
                ])
                .output()
                .unwrap();
            assert!(out.status.success());
            let (lo, hi) = (offset as usize, (offset + len) as usize);
            assert_eq!(out.stdout, want[lo..hi], "{var} {offset}+{len}");
        }
    }
}

/// A netCDF-4 file and kerchunk's references of it serve the same bytes
/// through `slabfs cat`, variable by variable, and they are the values
/// netCDF4-python reads.
#[test]
fn cat_of_a_netcdf4_file_and_of_its_references_agree() {
    let m = manifest();
    let bin = env!("CARGO_BIN_EXE_slabfs");
    let cat = |file: &str, var: &str| {
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
        out.stdout
    };
    let vars = m["datasets"]["netcdf4"]["variables"].as_object().unwrap();
    assert!(vars.len() >= 10, "{} variables", vars.len());
    let refs = m["references"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["file"] == "data/netcdf4.json")
        .expect("kerchunk's references of netcdf4.h5");
    for var in vars.keys() {
        let native_bytes = cat("data/netcdf4.h5", var);
        assert_eq!(native_bytes, native(&m, "netcdf4", var), "netcdf4.h5 {var}");
        assert!(
            refs["variables"].as_array().unwrap().contains(&json!(var)),
            "{var} not referenced"
        );
        assert_eq!(
            cat("data/netcdf4.json", var),
            native_bytes,
            "netcdf4.json {var}"
        );
    }
}

/// In a directory, reference files are directories of their arrays, next
/// to the netCDF-3 file they point into; the broken ones are reported,
/// never fatal; other JSON files (the manifest) are not datasets.
#[test]
fn ls_shows_reference_files_as_directories() {
    let bin = env!("CARGO_BIN_EXE_slabfs");
    let out = Command::new(bin)
        .arg("ls")
        .arg(fixtures())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let listing = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = listing
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    for want in [
        "data/classic.nc/temp",
        "data/classic.json/temp",
        "data/classic.json/name",
        "data/netcdf4.json/temp",
        "data/netcdf4.json/sparse",
        "data/netcdf4.json/scalar",
        "data/v0.json/elev",
        "data/templates.json/count",
        "data/whole.json/lon",
        // Loads; its reads fail (see below).
        "bad/missing.json/lon",
        "bad/past_eof.json/lon",
        "bad/malformed.json/ok",
    ] {
        assert!(names.contains(&want), "{want} not in\n{listing}");
    }
    for absent in [
        "bad/escape.json/lon",
        "bad/http.json/lon",
        "bad/s3.json/lon",
        "bad/malformed.json/lon",
        "bad/bad_base64.json/lon",
        "bad/bad_template.json/lon",
    ] {
        assert!(!names.contains(&absent), "{absent} listed");
    }
    assert!(!names.iter().any(|n| n.starts_with("manifest.json")));
    // The HDF5 file the references point into is a dataset of its own
    // (read natively: tests/it/hdf5.rs compares the two).
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("data/netcdf4.h5/"))
            .count(),
        13
    );
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("data/netcdf4.json/"))
            .count(),
        13
    );
    for reported in [
        "not_json.json: not valid JSON",
        "version2.json: reference spec version 2",
        "escape.json: ref \"lon/0\": url \"../../outside.nc\"",
        "http.json: ref \"lon/0\": url \"http://example.com/data.nc\" is not a local file",
        "malformed.json: ref \"lon/0\": offset -4",
        "bad_base64.json: ref \"lon/0\": bad base64",
        "bad_template.json: ref \"lon/0\": \"{{nope}}\": unknown name",
    ] {
        assert!(stderr.contains(reported), "{reported:?} not in\n{stderr}");
    }
}

/// A references file as SOURCE: the root is its arrays.
#[test]
fn a_references_file_as_source_lists_its_arrays() {
    let bin = env!("CARGO_BIN_EXE_slabfs");
    let out = Command::new(bin)
        .arg("ls")
        .arg(fixtures().join("data/whole.json"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let listing = String::from_utf8(out.stdout).unwrap();
    assert_eq!(listing.lines().count(), 1, "{listing}");
    assert!(listing.starts_with("lon\t"), "{listing}");
}

/// A reference file whose root is an array is one file, named after it.
#[test]
fn a_single_array_reference_file_is_one_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(fixtures().join("data/lon.raw"), dir.join("lon.raw")).unwrap();
    let classic: Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("data/classic.json")).unwrap())
            .unwrap();
    let doc = json!({
        ".zarray": classic["refs"]["lon/.zarray"],
        "0": ["lon.raw"]
    });
    std::fs::write(dir.join("lon.json"), doc.to_string()).unwrap();
    let want = expected(&manifest(), "classic", "lon");
    let ds = open(&dir.join("lon.json"));
    assert_eq!(ds.entries.len(), 1);
    assert_eq!(ds.entries[0].path, "lon.json");
    check_bytes(ds.entries[0].array.as_ref(), &want).unwrap();
    let ds = open(tmp.path());
    assert_eq!(ds.entries.len(), 1);
    assert_eq!(ds.entries[0].path, "d/lon.json");
    check_bytes(ds.entries[0].array.as_ref(), &want).unwrap();
}

/// Through the kernel: a mount of the fixture directory serves every
/// variable of a reference file, and a read whose target is missing fails
/// with EIO while its neighbours read.
#[test]
fn the_mount_serves_reference_files() {
    let m = manifest();
    let mnt = common::mount::Mount::start(&fixtures(), &[]);
    for var in m["datasets"]["netcdf4"]["variables"]
        .as_object()
        .unwrap()
        .keys()
    {
        let got = std::fs::read(mnt.path(&format!("data/netcdf4.json/{var}"))).unwrap();
        assert_eq!(got, native(&m, "netcdf4", var), "{var}");
    }
    let got = std::fs::read(mnt.path("data/whole.json/lon")).unwrap();
    assert_eq!(got, native(&m, "classic", "lon"));
    let err = std::fs::read(mnt.path("bad/missing.json/lon")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert_eq!(
        std::fs::metadata(mnt.path("bad/missing.json/lon"))
            .unwrap()
            .len(),
        20
    );
    mnt.stop();
}

fn bad(name: &str) -> PathBuf {
    fixtures().join("bad").join(name)
}

fn open_err(path: &Path) -> String {
    match dataset::Opener::new(cache()).open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

/// The one array `lon` is skipped, and the reason holds every `parts`.
fn assert_skipped(path: &Path, parts: &[&str]) {
    let ds = open(path);
    assert!(ds.get("lon").is_none(), "{}: lon loaded", path.display());
    let s = skipped(&ds);
    assert_eq!(s.len(), 1, "{s:#?}");
    for p in parts {
        assert!(s[0].contains(p), "{p:?} not in {:?}", s[0]);
    }
    assert!(s[0].contains(&path.display().to_string()), "{:?}", s[0]);
}

/// The error of reading all of `var`.
fn read_err(ds: &Dataset, var: &str) -> slabfs::Error {
    let a = ds.get(var).unwrap().array.as_ref();
    let mut buf = vec![0u8; a.meta().nbytes() as usize];
    read_at(a, 0, &mut buf, Endian::Little).unwrap_err()
}

#[test]
fn broken_documents_are_errors_naming_the_file() {
    let e = open_err(&bad("not_json.json"));
    assert!(
        e.contains("not_json.json") && e.contains("not valid JSON"),
        "{e}"
    );
    let e = open_err(&bad("version2.json"));
    assert!(
        e.contains("version2.json") && e.contains("version 2"),
        "{e}"
    );
    // Some JSON that is not references: not a dataset.
    let e = open_err(&fixtures().join("manifest.json"));
    assert!(e.contains("not a dataset"), "{e}");
}

#[test]
fn refused_urls_skip_their_array() {
    assert_skipped(
        &bad("escape.json"),
        &["\"lon/0\"", "../../outside.nc", "outside the allowed roots"],
    );
    assert_skipped(
        &bad("http.json"),
        &[
            "\"lon/0\"",
            "http://example.com/data.nc",
            "not a local file",
        ],
    );
    assert_skipped(
        &bad("s3.json"),
        &["s3://bucket/data.nc", "not a local file"],
    );
    assert_skipped(&bad("bad_base64.json"), &["\"lon/0\"", "base64"]);
    assert_skipped(&bad("bad_template.json"), &["{{nope}}", "unknown name"]);
    // The other array of the same file loads and reads the target's bytes.
    let path = bad("malformed.json");
    let ds = open(&path);
    assert_eq!(skipped(&ds).len(), 1);
    assert!(skipped(&ds)[0].contains("offset -4"));
    let ok = ds.get("ok").unwrap().array.as_ref();
    let mut got = vec![0u8; 16];
    read_at(ok, 0, &mut got, Endian::Big).unwrap();
    assert_eq!(got, std::fs::read(bad("small.bin")).unwrap()); // >f4 stored
}

#[test]
fn missing_targets_and_short_files_fail_reads_naming_the_file() {
    let ds = open(&bad("missing.json"));
    let e = read_err(&ds, "lon");
    assert_eq!(e.errno(), libc::EIO);
    let msg = e.to_string();
    assert!(
        msg.contains("missing.json") && msg.contains("missing.nc") && msg.contains("lon/0"),
        "{msg}"
    );
    let ds = open(&bad("past_eof.json"));
    let e = read_err(&ds, "lon");
    assert_eq!(e.errno(), libc::EIO);
    let msg = e.to_string();
    assert!(
        msg.contains("small.bin") && msg.contains("bytes 0..20") && msg.contains("16 bytes"),
        "{msg}"
    );

    // A truncated target: the records still in the file read, the last
    // one fails; the variables stored before it are untouched.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixtures().join("data/classic.json"),
        tmp.path().join("classic.json"),
    )
    .unwrap();
    let nc = std::fs::read(fixtures().join("data/classic.nc")).unwrap();
    std::fs::write(tmp.path().join("classic.nc"), &nc[..nc.len() - 40]).unwrap();
    let ds = dataset::Opener::new(cache())
        .open(&tmp.path().join("classic.json"))
        .unwrap();
    let m = manifest();
    check_bytes(
        ds.get("elev").unwrap().array.as_ref(),
        &expected(&m, "classic", "elev"),
    )
    .unwrap();
    let msg = read_err(&ds, "temp").to_string();
    assert!(msg.contains("past the end of the file"), "{msg}");
    // The file appears whole again: the same open dataset reads it.
    std::fs::write(tmp.path().join("classic.nc"), &nc).unwrap();
    check_bytes(
        ds.get("temp").unwrap().array.as_ref(),
        &expected(&m, "classic", "temp"),
    )
    .unwrap();
}

/// `classic.json` with its urls replaced by `url`, written to `dir`.
fn classic_with_url(dir: &Path, name: &str, url: &str) -> PathBuf {
    let mut doc: Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("data/classic.json")).unwrap())
            .unwrap();
    for (_, v) in doc["refs"].as_object_mut().unwrap() {
        if let Some(a) = v.as_array_mut() {
            a[0] = json!(url);
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    path
}

#[test]
fn absolute_paths_and_file_urls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let nc = dir.join("classic.nc");
    std::fs::copy(fixtures().join("data/classic.nc"), &nc).unwrap();
    let m = manifest();
    for (name, url) in [
        ("abs.json", nc.display().to_string()),
        ("file.json", format!("file://{}", nc.display())),
        ("rel.json", "./classic.nc".to_string()),
    ] {
        let ds = open(&classic_with_url(&dir, name, &url));
        assert!(skipped(&ds).is_empty(), "{name}: {:?}", skipped(&ds));
        for var in ["temp", "count", "name", "scale"] {
            check_bytes(
                ds.get(var).unwrap().array.as_ref(),
                &expected(&m, "classic", var),
            )
            .unwrap_or_else(|e| panic!("{name}: {var}: {e}"));
        }
    }
}

#[test]
fn symlinks_out_of_the_root_are_refused_at_load_and_at_read() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let outside = tmp.path().join("outside.nc");
    std::fs::copy(fixtures().join("data/classic.nc"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("link.nc")).unwrap();
    let refs = classic_with_url(&root, "refs.json", "link.nc");
    let ds = open(&refs);
    assert!(ds.entries.is_empty(), "{:?}", ds.entries.len());
    let s = skipped(&ds);
    assert!(!s.is_empty());
    assert!(
        s.iter()
            .all(|e| e.contains("\"link.nc\"") && e.contains("outside the allowed roots")),
        "{s:#?}"
    );
    // An allowed extra root (as `--allow-outside` gives) lets it through.
    let ds = dataset::Opener::new(cache())
        .allow_outside(&[tmp.path().to_path_buf()])
        .open(&refs)
        .unwrap();
    assert!(skipped(&ds).is_empty(), "{:?}", skipped(&ds));
    assert!(ds.get("temp").is_some());

    // A target missing at load is inside the root; a symlink planted
    // later is refused when read.
    let late = classic_with_url(&root, "late.json", "late.nc");
    let ds = open(&late);
    assert!(skipped(&ds).is_empty());
    let msg = read_err(&ds, "temp").to_string();
    assert!(msg.contains("late.nc"), "{msg}");
    std::os::unix::fs::symlink(&outside, root.join("late.nc")).unwrap();
    let msg = read_err(&ds, "temp").to_string();
    assert!(msg.contains("outside the allowed roots"), "{msg}");
}

/// The kerchunk store keeps the storage contract
/// (`slabfs::storage::testing::conformance`): the fixture's values as a
/// range of a file, a whole file, inline text and base64, an empty one.
#[test]
fn kerchunk_store_conforms() {
    use base64::Engine;
    use slabfs::storage::testing::conformance::{self, BIG, EMPTY, Limits, SMALL};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let value = |key: &str| {
        conformance::fixture()
            .into_iter()
            .find(|(k, _)| *k == key)
            .unwrap()
            .1
    };
    // BIG sits at offset 7 of a longer file: a range reference.
    let mut data = b"padding".to_vec();
    data.extend(value(BIG));
    data.extend(b"after");
    std::fs::write(dir.join("data.bin"), &data).unwrap();
    std::fs::write(dir.join("top.bin"), value("top")).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(value("dir/sub/leaf"));
    let doc = json!({
        "version": 1,
        "refs": {
            BIG: ["data.bin", 7, value(BIG).len()],
            SMALL: String::from_utf8(value(SMALL)).unwrap(),
            EMPTY: "",
            "top": ["top.bin"],
            "dir/sub/leaf": format!("base64:{b64}"),
        }
    });
    let path = dir.join("r.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let store = kerchunk::load(
        &path,
        &slabfs::formats::Options::new(
            vec![],
            Arc::new(ChunkCache::new(1 << 20)),
            slabfs::formats::registry::builtin(),
        ),
    )
    .unwrap()
    .unwrap();
    conformance::check_store("kerchunk RefStore", &store, Limits::default());
}

#[test]
fn the_store_reads_exactly_the_referenced_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("a.bin"), (0u8..100).collect::<Vec<u8>>()).unwrap();
    std::fs::write(dir.join("b.bin"), b"whole file").unwrap();
    let doc = json!({
        "version": 1,
        "templates": {"a": "a.bin"},
        "refs": {
            ".zgroup": {"zarr_format": 2},
            "x/0": ["{{a}}", 10, 20],
            "x/1": ["b.bin"],
            "y/0": "base64:AAEC",
            "y/1": "text",
            "z/0": ["a.bin", 90, 20]
        }
    });
    let path = dir.join("r.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let store = kerchunk::load(
        &path,
        &slabfs::formats::Options::new(
            vec![],
            Arc::new(ChunkCache::new(1 << 20)),
            slabfs::formats::registry::builtin(),
        ),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        store.get("x/0", 20).unwrap().unwrap(),
        (10u8..30).collect::<Vec<_>>()
    );
    assert!(matches!(
        store.get("x/0", 19),
        Err(slabfs::Error::TooLarge { size: 20, .. })
    ));
    assert_eq!(store.get("x/1", 100).unwrap().unwrap(), b"whole file");
    assert!(store.get("x/1", 5).is_err());
    assert_eq!(store.get("y/0", 10).unwrap().unwrap(), [0, 1, 2]);
    assert_eq!(store.get("y/1", 10).unwrap().unwrap(), b"text");
    assert_eq!(
        store.get(".zgroup", 100).unwrap().unwrap(),
        br#"{"zarr_format":2}"#
    );
    assert!(store.get("nope", 10).unwrap().is_none());
    // Ranges inside a reference: one positioned read of just those bytes.
    let at = |offset, len| ByteRange::At { offset, len };
    assert_eq!(
        store.get_range("x/0", at(5, 3)).unwrap().unwrap(),
        [15, 16, 17]
    );
    assert_eq!(
        store
            .get_range("x/0", ByteRange::Suffix(2))
            .unwrap()
            .unwrap(),
        [28, 29]
    );
    assert!(
        store.get_range("x/0", at(15, 6)).is_err(),
        "past the ref's end"
    );
    assert_eq!(
        store
            .get_range("x/1", ByteRange::Suffix(4))
            .unwrap()
            .unwrap(),
        b"file"
    );
    assert_eq!(store.get_range("y/1", at(1, 2)).unwrap().unwrap(), b"ex");
    // A range past the end of its file: an error, even for the part
    // inside; a part wholly inside the file reads.
    let e = store.get("z/0", 100).unwrap_err().to_string();
    assert!(
        e.contains("bytes 90..110") && e.contains("100 bytes"),
        "{e}"
    );
    assert_eq!(
        store.get_range("z/0", at(0, 10)).unwrap().unwrap(),
        (90u8..100).collect::<Vec<_>>()
    );
    // Listing from the keys; descriptions name the target and range.
    assert_eq!(
        store.list_dir("").unwrap(),
        [
            (".zgroup".to_string(), false),
            ("x".to_string(), true),
            ("y".to_string(), true),
            ("z".to_string(), true)
        ]
    );
    assert_eq!(
        store.list_dir("x").unwrap(),
        [("0".to_string(), false), ("1".to_string(), false)]
    );
    let d = store.describe("x/0");
    assert!(
        d.contains("r.json") && d.contains("a.bin") && d.contains("bytes 10..30"),
        "{d}"
    );
}

#[test]
fn change_stamps_follow_the_references_and_their_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("a.bin"), [1u8; 40]).unwrap();
    std::fs::write(dir.join("b.bin"), [2u8; 40]).unwrap();
    let write = |b_offset: u64| {
        let doc = json!({"version": 1, "refs": {
            ".zgroup": "{\"zarr_format\":2}",
            "a/0": ["a.bin", 0, 8], "b/0": ["b.bin", b_offset, 8]}});
        std::fs::write(dir.join("r.json"), doc.to_string()).unwrap();
        kerchunk::load(
            &dir.join("r.json"),
            &slabfs::formats::Options::new(
                vec![],
                Arc::new(ChunkCache::new(1 << 20)),
                slabfs::formats::registry::builtin(),
            ),
        )
        .unwrap()
        .unwrap()
    };
    let stamp = |s: &kerchunk::RefStore, p: &str| s.change_stamp(p).unwrap().unwrap();
    let s0 = write(0);
    let (a0, b0) = (stamp(&s0, "a/"), stamp(&s0, "b/"));
    assert_eq!(stamp(&write(0), "a/"), a0, "same references, same files");
    // The references of b change: only b's stamp does.
    let s1 = write(8);
    assert_eq!(stamp(&s1, "a/"), a0);
    assert_ne!(stamp(&s1, "b/"), b0);
    // A target rewritten (a new file renamed into place): its arrays'
    // stamps change.
    std::fs::write(dir.join("tmp"), [3u8; 41]).unwrap();
    std::fs::rename(dir.join("tmp"), dir.join("a.bin")).unwrap();
    assert_ne!(stamp(&s1, "a/"), a0);
    assert_eq!(stamp(&s1, "b/"), stamp(&write(8), "b/"));
    // A target that disappears is a state, not an error.
    std::fs::remove_file(dir.join("b.bin")).unwrap();
    let gone = stamp(&s1, "b/");
    std::fs::write(dir.join("b.bin"), [2u8; 40]).unwrap();
    assert_ne!(stamp(&s1, "b/"), gone);
}

/// Garbage never panics: truncations and byte flips of a real
/// references file either open (and read, or fail reads) or are errors.
#[test]
fn mangled_reference_files_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::os::unix::fs::symlink(fixtures().join("data/netcdf4.h5"), dir.join("netcdf4.h5")).unwrap();
    let orig = std::fs::read(fixtures().join("data/netcdf4.json")).unwrap();
    let path = dir.join("m.json");
    let mut rng = Lcg(0x6d61);
    let mut opened = 0;
    for i in 0..60 {
        let mut bytes = orig.clone();
        if i % 3 == 0 {
            bytes.truncate(rng.next(bytes.len() as u64) as usize);
        } else {
            for _ in 0..4 {
                let at = rng.next(bytes.len() as u64) as usize;
                bytes[at] = b"{}[]\",:0123456789-ae/"[rng.next(21) as usize];
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        // The data file is a symlink into the fixtures: allow the
        // fixtures' data directory as a root too.
        let Ok(ds) = dataset::Opener::new(cache())
            .allow_outside(&[fixtures().join("data")])
            .open(&path)
        else {
            continue;
        };
        opened += 1;
        for e in &ds.entries {
            let mut buf = vec![0u8; e.array.meta().nbytes().min(1 << 20) as usize];
            let _ = read_at(e.array.as_ref(), 0, &mut buf, Endian::Little);
        }
    }
    assert!(opened > 0, "no mangled file opened at all");
}
