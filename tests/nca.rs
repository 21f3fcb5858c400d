//! NCA aggregations (tests/fixtures/nca, written by netCDF4-python,
//! zarr-python and numpy from the committed generate.py) read through
//! slabfs and compared with the generator's independent numpy assembly:
//! byte for byte (1e-12 relative where units are converted), whole and
//! at pseudo-random ranges, in both byte orders, through the library and
//! `slabfs cat`. Broken descriptors must fail with errors that name the
//! problem, never panic; confinement, missing fragments and nesting
//! limits are checked on descriptors written into temporary directories.

mod common;
use common::Lcg;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use slabfs::cache::ChunkCache;
use slabfs::dataset::{self, Dataset};
use slabfs::dtype::{DataType, Endian, swap_in_place};
use slabfs::nca::{self, NcaError, Options};
use slabfs::read::read_at;
use slabfs::{ArraySource, Error};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nca")
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(16 << 20))
}

fn manifest() -> Value {
    serde_json::from_slice(&std::fs::read(root().join("manifest.json")).unwrap()).unwrap()
}

struct Case {
    /// Path in `slabfs ls tests/fixtures/nca/data`.
    path: String,
    dtype: DataType,
    shape: Vec<u64>,
    /// Little-endian, C order.
    expected: Vec<u8>,
    rtol: f64,
    /// Master boxes (`[start, stop)` per dimension) whose fragment is
    /// missing, and the file.
    errors: Vec<(Vec<(u64, u64)>, String)>,
}

fn cases() -> Vec<Case> {
    let m = manifest();
    let mut out = Vec::new();
    for e in m["arrays"].as_array().unwrap() {
        let source = e["source"].as_str().unwrap();
        let var = e["variable"].as_str().unwrap();
        let errors = e["error_regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let loc = r["location"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
                    .collect();
                (loc, r["file"].as_str().unwrap().to_string())
            })
            .collect();
        out.push(Case {
            path: format!("{}/{var}", source.strip_prefix("data/").unwrap()),
            dtype: DataType::from_numpy(e["dtype"].as_str().unwrap())
                .unwrap()
                .0,
            shape: e["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect(),
            expected: std::fs::read(root().join(e["expected"].as_str().unwrap())).unwrap(),
            rtol: e["rtol"].as_f64().unwrap(),
            errors,
        });
    }
    assert!(out.len() >= 15, "manifest lists only {} arrays", out.len());
    out
}

fn open_data() -> Dataset {
    let ds = dataset::open(&root().join("data"), cache()).unwrap();
    let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
    assert!(skipped.is_empty(), "fixtures failed to open: {skipped:#?}");
    ds
}

/// Compare `got` with `want` (both little-endian elements of `dtype`):
/// bytes, or floats within `rtol`.
fn same(got: &[u8], want: &[u8], dtype: &DataType, rtol: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes, expected {}", got.len(), want.len()));
    }
    if rtol == 0.0 {
        return match got.iter().zip(want).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => Err(format!("first difference at byte {i}")),
        };
    }
    assert_eq!(*dtype, DataType::Float64, "tolerance only for float64");
    for (i, (a, b)) in got.chunks(8).zip(want.chunks(8)).enumerate() {
        let a = f64::from_le_bytes(a.try_into().unwrap());
        let b = f64::from_le_bytes(b.try_into().unwrap());
        if (a - b).abs() > rtol * b.abs().max(1e-300) {
            return Err(format!("element {i}: {a} vs {b}"));
        }
    }
    Ok(())
}

/// Read `[offset, offset + len)` in byte order `order` and return it
/// little-endian.
fn read_le(
    array: &dyn ArraySource,
    offset: u64,
    len: usize,
    order: Endian,
) -> slabfs::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let n = read_at(array, offset, &mut buf, order)?;
    buf.truncate(n);
    if order == Endian::Big {
        // Whole elements only: the callers align big-endian reads.
        swap_in_place(&mut buf, array.meta().dtype.swap_unit());
    }
    Ok(buf)
}

#[test]
fn every_master_reads_as_the_reference_assembles_it() {
    let ds = open_data();
    let mut failures = Vec::new();
    let mut rng = Lcg(0x4e4341);
    for case in cases() {
        let Some(entry) = ds.get(&case.path) else {
            failures.push(format!("{}: not listed", case.path));
            continue;
        };
        let a = entry.array.as_ref();
        let meta = a.meta();
        if meta.dtype != case.dtype || meta.shape != case.shape {
            failures.push(format!(
                "{}: {} {:?}, expected {} {:?}",
                case.path, meta.dtype, meta.shape, case.dtype, case.shape
            ));
            continue;
        }
        if !case.errors.is_empty() {
            continue; // reads_touching_a_missing_fragment_fail_the_rest_read
        }
        let item = meta.item_size();
        let size = case.expected.len();
        let whole = read_le(a, 0, size + 7, Endian::Little);
        if let Err(e) = whole
            .map_err(|e| e.to_string())
            .and_then(|g| same(&g, &case.expected, &case.dtype, case.rtol))
        {
            failures.push(format!("{}: whole read: {e}", case.path));
            continue;
        }
        for _ in 0..24 {
            let big = rng.next(2) == 1;
            let (offset, len) = if big {
                // Whole elements, so the swap back is per element.
                let e0 = rng.next((size / item) as u64 + 1);
                let n = rng.next((size / item) as u64 + 1 - e0);
                (e0 * item as u64, n as usize * item)
            } else {
                let o = rng.next(size as u64 + 1);
                (o, rng.next(size as u64 + 1 - o) as usize)
            };
            let order = if big { Endian::Big } else { Endian::Little };
            let got = match read_le(a, offset, len, order) {
                Ok(g) => g,
                Err(e) => {
                    failures.push(format!("{}: read {offset}+{len}: {e}", case.path));
                    break;
                }
            };
            let want = &case.expected[offset as usize..offset as usize + len];
            // Partial elements cannot be compared with a tolerance.
            let rtol = if offset as usize % item == 0 && len % item == 0 {
                case.rtol
            } else {
                0.0
            };
            if rtol == 0.0 && case.rtol != 0.0 {
                continue;
            }
            if let Err(e) = same(&got, want, &case.dtype, rtol) {
                failures.push(format!("{}: read {offset}+{len} {order:?}: {e}", case.path));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn reads_touching_a_missing_fragment_fail_the_rest_read() {
    let ds = open_data();
    let case = cases()
        .into_iter()
        .find(|c| !c.errors.is_empty())
        .expect("a case with a missing fragment");
    let a = ds.get(&case.path).unwrap().array.clone();
    let (loc, file) = &case.errors[0];
    let name = Path::new(file).file_name().unwrap().to_str().unwrap();
    // The whole file fails, naming the missing fragment.
    let err = read_le(a.as_ref(), 0, case.expected.len(), Endian::Little).unwrap_err();
    assert!(err.to_string().contains(name), "{err}");
    assert_eq!(err.errno(), 5, "EIO");
    // Row by row (the partitions split the first dimension).
    let row = case.expected.len() / case.shape[0] as usize;
    for t in 0..case.shape[0] {
        let got = read_le(a.as_ref(), t * row as u64, row, Endian::Little);
        if (loc[0].0..loc[0].1).contains(&t) {
            let e = got.unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("Partitions[1]"), "{e}");
        } else {
            let at = t as usize * row;
            assert_eq!(got.unwrap(), case.expected[at..at + row], "row {t}");
        }
    }
}

#[test]
fn slabfs_cat_serves_the_same_bytes() {
    let data = root().join("data");
    for case in cases().into_iter().filter(|c| c.errors.is_empty()) {
        let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .arg("cat")
            .arg(&data)
            .arg(&case.path)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            case.path,
            String::from_utf8_lossy(&out.stderr)
        );
        let mut got = out.stdout;
        if Endian::NATIVE == Endian::Big {
            swap_in_place(&mut got, case.dtype.swap_unit());
        }
        if let Err(e) = same(&got, &case.expected, &case.dtype, case.rtol) {
            panic!("slabfs cat {}: {e}", case.path);
        }
    }
}

#[test]
fn nca_netcdf_files_hide_private_variables() {
    let ds = open_data();
    let listed: Vec<&str> = ds
        .entries
        .iter()
        .filter_map(|e| e.path.strip_prefix("frag/ncafile.nc/"))
        .collect();
    assert_eq!(listed, ["lat", "tas"]);
    let tas = ds.get("frag/ncafile.nc/tas").unwrap().array.meta();
    assert_eq!(
        tas.dimension_names,
        [Some("time".into()), Some("lat".into()), Some("lon".into())]
    );
    assert_eq!(tas.attributes["units"], "K");
    assert!(!tas.attributes.contains_key("nca_array"));
    assert_eq!(tas.fill_value, 1e20f64.to_ne_bytes());
}

/// The full error text of a descriptor that must not load: the whole
/// file's error, or its variables' (then none may have loaded).
fn load_error(path: &Path, roots: Vec<PathBuf>) -> String {
    match nca::open_json(path, &Options::new(roots, cache())) {
        Err(e) => chain(&e),
        Ok(v) => {
            let names: Vec<&String> = v.arrays.iter().map(|a| &a.0).collect();
            assert!(names.is_empty(), "{}: loaded {names:?}", path.display());
            assert!(!v.skipped.is_empty(), "{}: no error", path.display());
            v.skipped.iter().map(chain).collect::<Vec<_>>().join("\n")
        }
    }
}

fn chain(e: &Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(" | ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

#[test]
fn bad_descriptors_fail_clearly() {
    let m = manifest();
    let bad = m["bad"].as_array().unwrap();
    assert!(bad.len() >= 15);
    let mut failures = Vec::new();
    for b in bad {
        let path = root().join(b["source"].as_str().unwrap());
        let roots = match b["roots"].as_str().unwrap() {
            "bad" => vec![], // the default: the descriptor's directory
            _ => vec![root()],
        };
        let text = load_error(&path, roots);
        let file = path.file_name().unwrap().to_str().unwrap();
        if !text.contains(file) {
            failures.push(format!("{file}: error does not name the file: {text}"));
        }
        for w in b["error"].as_array().unwrap() {
            if !text.contains(w.as_str().unwrap()) {
                failures.push(format!("{file}: error lacks {w}: {text}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // A directory of broken descriptors still opens, reporting each.
    let ds = dataset::open(&root().join("bad"), cache()).unwrap();
    assert!(ds.entries.iter().all(|e| !e.path.ends_with(".nca.json/v")));
    assert!(ds.skipped.len() >= bad.len());
}

#[test]
fn overlap_and_cycle_errors_are_typed() {
    let r = |name: &str| {
        nca::open_json(
            &root().join("bad").join(name),
            &Options::new(vec![root()], cache()),
        )
        .unwrap()
        .skipped
        .remove(0)
    };
    assert!(matches!(
        r("overlap.nca.json"),
        Error::Aggregation {
            source: NcaError::Overlap { .. },
            ..
        }
    ));
    assert!(matches!(
        r("self_reference.nca.json"),
        Error::Aggregation {
            source: NcaError::Cycle(_),
            ..
        }
    ));
    assert!(matches!(
        r("units_unknown.nca.json"),
        Error::Aggregation {
            source: NcaError::Units { .. },
            ..
        }
    ));
}

/// A one-partition descriptor over a raw little-endian float64 file.
fn raw_descriptor(file: &str, n: u64) -> String {
    serde_json::json!({
        "dimensions": {"x": n},
        "variables": {"v": {
            "dtype": "float64", "nca_dimensions": "x",
            "nca_array": {"pdimensions": ["x"], "pshape": [1], "Partitions": [{
                "index": [0], "location": [[0, n]], "format": "raw",
                "data": {"file": file, "dtype": "<f8", "shape": [n]}
            }]}
        }}
    })
    .to_string()
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn references_must_stay_under_the_allowed_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let inside = tmp.path().join("mnt");
    let outside = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.bin"), f64_bytes(&[1.0, 2.0])).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.bin"), inside.join("link.bin")).unwrap();
    let absolute = outside.join("secret.bin");
    let cases = [
        ("dotdot.nca.json", "../elsewhere/secret.bin"),
        ("symlink.nca.json", "link.bin"),
        ("absolute.nca.json", absolute.to_str().unwrap()),
    ];
    for (name, file) in cases {
        std::fs::write(inside.join(name), raw_descriptor(file, 2)).unwrap();
        let e = load_error(&inside.join(name), vec![]);
        assert!(
            e.contains("outside the allowed roots") && e.contains("secret.bin"),
            "{e}"
        );
    }
    // The mount's SOURCE is the root: the descriptors are skipped...
    let ds = dataset::open(&inside, cache()).unwrap();
    assert!(ds.entries.is_empty());
    assert_eq!(ds.skipped.len(), 3);
    // ...unless --allow-outside names the other directory.
    let ds = dataset::open_with_roots(&inside, cache(), std::slice::from_ref(&outside)).unwrap();
    assert_eq!(ds.entries.len(), 3, "{:?}", ds.skipped);
    let a = ds.get("symlink.nca.json/v").unwrap().array.clone();
    assert_eq!(
        read_le(a.as_ref(), 0, 16, Endian::Little).unwrap(),
        f64_bytes(&[1.0, 2.0])
    );
}

#[test]
fn a_missing_fragment_reads_once_it_appears() {
    let tmp = tempfile::tempdir().unwrap();
    let desc = tmp.path().join("late.nca.json");
    std::fs::write(&desc, raw_descriptor("late.bin", 3)).unwrap();
    let vars = nca::open_json(&desc, &Options::new(vec![], cache())).unwrap();
    let a = vars.arrays[0].1.clone();
    let e = read_le(a.as_ref(), 0, 24, Endian::Little).unwrap_err();
    assert!(e.to_string().contains("late.bin"), "{e}");
    let before = a.change_stamp().data.unwrap();
    std::fs::write(tmp.path().join("late.bin"), f64_bytes(&[5.0, 6.0, 7.5])).unwrap();
    // The live refresh sees the fragment appear...
    let appeared = a.change_stamp().data.unwrap();
    assert_ne!(before, appeared);
    assert_eq!(
        read_le(a.as_ref(), 0, 24, Endian::Little).unwrap(),
        f64_bytes(&[5.0, 6.0, 7.5])
    );
    // ...and change.
    let opened = a.change_stamp().data.unwrap();
    std::fs::remove_file(tmp.path().join("late.bin")).unwrap();
    std::fs::write(tmp.path().join("late.bin"), f64_bytes(&[1.0, 6.0, 7.5])).unwrap();
    assert_ne!(a.change_stamp().data.unwrap(), opened);
}

#[test]
fn nesting_is_limited() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("leaf.bin"), f64_bytes(&[1.0])).unwrap();
    std::fs::write(
        tmp.path().join("d0.nca.json"),
        raw_descriptor("leaf.bin", 1),
    )
    .unwrap();
    let nested = |inner: &str| {
        serde_json::json!({
            "dimensions": {"x": 1},
            "variables": {"v": {"dtype": "float64", "nca_dimensions": "x",
                "nca_array": {"pdimensions": ["x"], "pshape": [1], "Partitions": [{
                    "index": [0], "location": [[0, 1]], "format": "nca",
                    "data": {"file": inner, "ncvar": "v"}}]}}}
        })
        .to_string()
    };
    for i in 1..40 {
        std::fs::write(
            tmp.path().join(format!("d{i}.nca.json")),
            nested(&format!("d{}.nca.json", i - 1)),
        )
        .unwrap();
    }
    let opts = Options::new(vec![], cache());
    // Shallow nesting reads through every level.
    let v = nca::open_json(&tmp.path().join("d5.nca.json"), &opts).unwrap();
    let a = v.arrays[0].1.clone();
    assert_eq!(
        read_le(a.as_ref(), 0, 8, Endian::Little).unwrap(),
        f64_bytes(&[1.0])
    );
    // Deep nesting is refused.
    let e = load_error(&tmp.path().join("d39.nca.json"), vec![]);
    assert!(e.contains("nested more than"), "{e}");
}

#[test]
fn concurrent_reads_agree() {
    let ds = open_data();
    let case = cases()
        .into_iter()
        .find(|c| c.path == "mixed.nca.json/tas")
        .unwrap();
    let a = ds.get(&case.path).unwrap().array.clone();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (a, case) = (&a, &case);
            s.spawn(move || {
                let mut rng = Lcg(t);
                for _ in 0..50 {
                    let o = rng.next(case.expected.len() as u64);
                    let n = rng.next(case.expected.len() as u64 - o + 1) as usize;
                    let got = read_le(a.as_ref(), o, n, Endian::Little).unwrap();
                    assert_eq!(got, case.expected[o as usize..o as usize + n]);
                }
            });
        }
    });
}

#[test]
fn the_documented_example_is_accepted() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/AGGREGATION.md"))
            .unwrap();
    let start = doc.find("```json\n").unwrap() + 8;
    let end = start + doc[start..].find("```").unwrap();
    let json: Value = serde_json::from_str(&doc[start..end]).unwrap();
    let masters = nca::descriptor::json_masters(&json).unwrap();
    let (name, spec) = &masters[0];
    let spec = spec.as_ref().unwrap();
    assert_eq!(name, "tas");
    assert_eq!(spec.shape, [6, 4, 5]);
    assert_eq!(spec.array.partitions[1].extents(), [3, 4, 5]);
    // Its fragments do not exist: the variable loads, reads fail.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("doc.nca.json");
    std::fs::write(&path, &doc[start..end]).unwrap();
    let vars = nca::open_json(&path, &Options::new(vec![], cache())).unwrap();
    let a = vars.arrays[0].1.clone();
    let e = read_le(a.as_ref(), 0, 8, Endian::Little).unwrap_err();
    assert!(e.to_string().contains("tas_0.nc"), "{e}");
}
