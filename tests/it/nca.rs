//! NCA, CF-1.13 and CFA-0.4 aggregations (tests/fixtures/nca, written by
//! netCDF4-python, zarr-python, numpy and cf-python from the committed
//! generate.py) read through
//! slabfs and compared with the generator's independent numpy assembly:
//! byte for byte (1e-12 relative where units are converted), whole and
//! at pseudo-random ranges, in both byte orders, through the library and
//! `slabfs cat`. Broken descriptors must fail with errors that name the
//! problem, never panic; confinement, missing fragments and nesting
//! limits are checked on descriptors written into temporary directories.

use crate::common;
use common::Lcg;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use slabfs::dtype::{DataType, Endian, swap_in_place};
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::Options;
use slabfs::formats::dataset::{self, Dataset};
use slabfs::formats::nca::{self, NcaError};
use slabfs::fs::error::ToErrno;
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
    let ds = dataset::Opener::new(cache())
        .open(&root().join("data"))
        .unwrap();
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
            let rtol = if (offset as usize).is_multiple_of(item) && len % item == 0 {
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
    let missing: Vec<Case> = cases()
        .into_iter()
        .filter(|c| !c.errors.is_empty())
        .collect();
    assert_eq!(
        missing.len(),
        4,
        "an NCA and a CF case, a missing and a corrupt netCDF-4 fragment"
    );
    for case in missing {
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
                assert!(e.contains(name), "{e}");
            } else {
                let at = t as usize * row;
                assert_eq!(
                    got.unwrap(),
                    case.expected[at..at + row],
                    "{} row {t}",
                    case.path
                );
            }
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
/// file's error, or its variables' (then none may have loaded). An
/// aggregation netCDF file's other variables (coordinates) still load.
fn load_error(path: &Path, roots: Vec<PathBuf>) -> String {
    let opts = Options::new(roots, cache(), slabfs::formats::registry::builtin());
    if path.extension().is_some_and(|e| e == "nc") {
        let v = nca::netcdf::open(path, &opts).unwrap();
        assert!(!v.skipped.is_empty(), "{}: no error", path.display());
        return v.skipped.iter().map(chain).collect::<Vec<_>>().join("\n");
    }
    match nca::open_json(path, &opts) {
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
        let file = if file == "agg.nc" {
            b["source"].as_str().unwrap()
        } else {
            file
        };
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
    let ds = dataset::Opener::new(cache())
        .open(&root().join("bad"))
        .unwrap();
    assert!(ds.entries.iter().all(|e| !e.path.ends_with(".nca.json/v")));
    assert!(ds.get("cf_shape/agg.nc/q").is_none());
    assert!(ds.get("cf_shape/agg.nc/lat").is_some());
    assert!(ds.skipped.len() >= bad.len());
}

#[test]
fn overlap_and_cycle_errors_are_typed() {
    let r = |name: &str| {
        nca::open_json(
            &root().join("bad").join(name),
            &Options::new(vec![root()], cache(), slabfs::formats::registry::builtin()),
        )
        .unwrap()
        .skipped
        .remove(0)
    };
    let kind = |name: &str| {
        r(name)
            .into_source::<NcaError>()
            .unwrap_or_else(|other| panic!("{name}: {other}"))
    };
    assert!(matches!(kind("overlap.nca.json"), NcaError::Overlap { .. }));
    assert!(matches!(
        kind("self_reference.nca.json"),
        NcaError::Cycle(_)
    ));
    assert!(matches!(
        kind("units_unknown.nca.json"),
        NcaError::Units { .. }
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
    let ds = dataset::Opener::new(cache()).open(&inside).unwrap();
    assert!(ds.entries.is_empty());
    assert_eq!(ds.skipped.len(), 3);
    // ...unless --allow-outside names the other directory.
    let ds = dataset::Opener::new(cache())
        .allow_outside(std::slice::from_ref(&outside))
        .open(&inside)
        .unwrap();
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
    let vars = nca::open_json(
        &desc,
        &Options::new(vec![], cache(), slabfs::formats::registry::builtin()),
    )
    .unwrap();
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
    let opts = Options::new(vec![], cache(), slabfs::formats::registry::builtin());
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
    let vars = nca::open_json(
        &path,
        &Options::new(vec![], cache(), slabfs::formats::registry::builtin()),
    )
    .unwrap();
    let a = vars.arrays[0].1.clone();
    let e = read_le(a.as_ref(), 0, 8, Endian::Little).unwrap_err();
    assert!(e.to_string().contains("tas_0.nc"), "{e}");
}

/// `slabfs mount` of the fixtures, for real: every master file reads as
/// expected through the kernel, and a read of the missing fragment's
/// region fails with EIO (logged with the path) while the rest of that
/// file reads.
#[test]
fn the_mount_serves_every_master() {
    use std::os::unix::fs::FileExt;
    let m = common::mount::Mount::start(&root().join("data"), &[]);
    for case in cases() {
        let path = m.path(&case.path);
        if case.errors.is_empty() {
            let mut got = std::fs::read(&path).unwrap();
            if Endian::NATIVE == Endian::Big {
                swap_in_place(&mut got, case.dtype.swap_unit());
            }
            if let Err(e) = same(&got, &case.expected, &case.dtype, case.rtol) {
                panic!("{}: {e}", case.path);
            }
            continue;
        }
        let row = case.expected.len() / case.shape[0] as usize;
        if !row.is_multiple_of(4096) {
            // Rows share pages: the kernel reads them together.
            let e = std::fs::read(&path).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(5), "{}: EIO", case.path);
            continue;
        }
        // Rows are whole pages; no kernel readahead, so each read asks
        // the daemon for exactly its row. Backwards, so that no read is
        // followed by one of the row after it.
        let f = std::fs::File::open(&path).unwrap();
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: a valid open descriptor; fadvise only sets a hint.
            let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
            assert_eq!(r, 0);
        }
        for t in (0..case.shape[0] as usize).rev() {
            let mut buf = vec![0u8; row];
            let r = f.read_exact_at(&mut buf, (t * row) as u64);
            if (case.errors[0].0[0].0..case.errors[0].0[0].1).contains(&(t as u64)) {
                assert_eq!(r.unwrap_err().raw_os_error(), Some(5), "row {t}: EIO");
            } else {
                r.unwrap();
                assert_eq!(buf, case.expected[t * row..(t + 1) * row], "row {t}");
            }
        }
    }
    assert!(
        m.log().contains("gone.nc"),
        "the failed read is logged with the path:\n{}",
        m.log()
    );
    m.stop();
}

/// Regression: a descriptor given as a bare relative file name (whose
/// `Path::parent` is "") was refused as "outside the allowed roots".
#[test]
fn a_relative_descriptor_path_is_its_own_root() {
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .current_dir(root().join("data"))
        .args(["cat", "mixed.nca.json", "tas"])
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let case = cases()
        .into_iter()
        .find(|c| c.path == "mixed.nca.json/tas")
        .unwrap();
    assert_eq!(out.stdout.len(), case.expected.len());
}

/// A strided `part` whose bounding box is far larger than the data it
/// selects is read in pieces (the sparse split), with the same result.
#[test]
fn sparse_parts_read_the_selected_elements() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 200_000u64;
    let sub: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
    std::fs::write(tmp.path().join("big.bin"), f64_bytes(&sub)).unwrap();
    // Every 997th element forwards, then an index list backwards.
    let forward: Vec<u64> = (0..n).step_by(997).collect();
    let list: Vec<u64> = vec![n - 1, 150_000, 3, 99_999, 0];
    let m = forward.len() as u64 + list.len() as u64;
    let desc = serde_json::json!({
        "dimensions": {"x": m},
        "variables": {"v": {
            "dtype": "float64", "nca_dimensions": "x",
            "nca_array": {"pdimensions": ["x"], "pshape": [2], "Partitions": [
                {"index": [0], "location": [[0, forward.len()]], "format": "raw",
                 "part": format!("[(0, {n}, 997)]"),
                 "data": {"file": "big.bin", "dtype": "<f8", "shape": [n]}},
                {"index": [1], "location": [[forward.len(), m]], "format": "raw",
                 "part": format!("[{list:?}]"), "directions": {"x": false},
                 "data": {"file": "big.bin", "dtype": "<f8", "shape": [n]}}
            ]}
        }}
    });
    std::fs::write(tmp.path().join("s.nca.json"), desc.to_string()).unwrap();
    let vars = nca::open_json(
        &tmp.path().join("s.nca.json"),
        &Options::new(vec![], cache(), slabfs::formats::registry::builtin()),
    )
    .unwrap();
    let a = vars.arrays[0].1.clone();
    let want: Vec<f64> = forward
        .iter()
        .chain(list.iter().rev())
        .map(|&i| sub[i as usize])
        .collect();
    let got = read_le(a.as_ref(), 0, m as usize * 8, Endian::Little).unwrap();
    assert_eq!(got, f64_bytes(&want));
    // A sub-range, crossing the partition boundary.
    let from = (forward.len() - 3) * 8;
    let got = read_le(a.as_ref(), from as u64, 6 * 8, Endian::Little).unwrap();
    assert_eq!(got, f64_bytes(&want[forward.len() - 3..forward.len() + 3]));
}

/// Bad input never panics: descriptors with random bytes changed (in
/// keys, numbers, paths, part strings) either load and read, or fail
/// with an error.
#[test]
fn mutated_descriptors_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let data = root().join("data");
    let frag = format!("{}/frag/", data.display());
    let mut texts = Vec::new();
    for name in [
        "mixed.nca.json",
        "part.nca.json",
        "size1.nca.json",
        "units.nca.json",
    ] {
        let t = std::fs::read_to_string(data.join(name)).unwrap();
        texts.push(t.replace("\"frag/", &format!("\"{frag}")));
    }
    let opts = Options::new(
        vec![data.clone(), tmp.path().to_path_buf()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let mut rng = Lcg(0xbad);
    let (mut loaded, mut refused) = (0, 0);
    for i in 0..300 {
        let mut bytes = texts[i % texts.len()].clone().into_bytes();
        for _ in 0..1 + rng.next(3) {
            let at = rng.next(bytes.len() as u64) as usize;
            bytes[at] = b"0123456789[](),-:\"{}aZ_ /."[rng.next(26) as usize];
        }
        let path = tmp.path().join(format!("m{i}.nca.json"));
        std::fs::write(&path, &bytes).unwrap();
        match nca::open_json(&path, &opts) {
            Err(_) => refused += 1,
            Ok(v) => {
                refused += v.skipped.len();
                for (_, a) in v.arrays {
                    loaded += 1;
                    let n = a.meta().nbytes().min(1 << 20) as usize;
                    let _ = read_le(a.as_ref(), 0, n, Endian::Little);
                }
            }
        }
    }
    assert!(
        loaded > 0 && refused > 0,
        "loaded {loaded}, refused {refused}"
    );
}

// ------------------------------------------------------------ CFA-0.4

/// The expected master of a manifest case.
fn case(path: &str) -> Case {
    cases().into_iter().find(|c| c.path == path).unwrap()
}

/// The `cfa_array` of `var` in the netCDF file `path`, as JSON.
fn cfa_array(path: &Path, var: &str) -> Value {
    let f = slabfs::formats::netcdf3::File::open(path).unwrap();
    let text = f.variable(var).unwrap().attributes["cfa_array"]
        .as_str()
        .unwrap()
        .to_string();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn cfa04_files_show_the_master_and_hide_private_variables() {
    let ds = open_data();
    let listed: Vec<&str> = ds
        .entries
        .iter()
        .filter_map(|e| e.path.strip_prefix("cfa04/tas.nc/"))
        .collect();
    // The coordinates and the master; not the cfa_private sub-array.
    assert_eq!(listed, ["lat", "lon", "tas", "time"]);
    let tas = ds.get("cfa04/tas.nc/tas").unwrap().array.meta();
    assert_eq!(tas.shape, [7, 4, 5]);
    assert_eq!(
        tas.dimension_names,
        [Some("time".into()), Some("lat".into()), Some("lon".into())]
    );
    assert_eq!(tas.attributes["units"], "K");
    assert_eq!(tas.attributes["standard_name"], "air_temperature");
    for k in ["cf_role", "cfa_array", "cfa_dimensions"] {
        assert!(!tas.attributes.contains_key(k), "{k} is shown");
    }
    assert_eq!(tas.fill_value, 1e20f64.to_ne_bytes());
    let w = ds.get("cfa04/defaults.nc/w").unwrap().array.meta();
    assert_eq!(
        (w.dtype.clone(), w.shape.clone()),
        (DataType::Int32, vec![3, 4])
    );
}

/// Every partition's inclusive `[start, stop]` becomes `[start, stop + 1)`,
/// and the elements on both sides of every stop and start (the edges
/// where an off-by-one would show) read as numpy assembled them; so does
/// the cell no partition covers.
#[test]
fn cfa04_inclusive_locations_at_the_edges() {
    let file = root().join("data/cfa04/tas.nc");
    let json = cfa_array(&file, "tas");
    let dims: Vec<String> = ["time", "lat", "lon"].map(String::from).to_vec();
    let shape = [7u64, 4, 5];
    let mut file_dims = dims.clone();
    file_dims.extend(["level", "cfa2", "cfa5"].map(String::from));
    let spec = nca::cfa04::parse_cfa_array(&json.to_string(), &dims, &shape, Some("K"), &file_dims)
        .unwrap();
    let written = json["Partitions"].as_array().unwrap();
    assert_eq!(spec.partitions.len(), written.len());
    let mut covered = 0;
    for (p, w) in spec.partitions.iter().zip(written) {
        let inclusive: Vec<(u64, u64)> = w["location"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap()))
            .collect();
        let half_open: Vec<(u64, u64)> = inclusive.iter().map(|&(a, b)| (a, b + 1)).collect();
        assert_eq!(p.location, half_open, "{}", p.label);
        covered += p.extents().iter().product::<u64>();
    }
    // 7 * 4 * 5 elements, less the 1 * 2 * 5 of the absent partition.
    assert_eq!(covered, 140 - 10);
    // One (1, 2) range is a single index: [5, 5] and [6, 6].
    assert!(spec.partitions.iter().any(|p| p.location[0] == (5, 6)));

    let ds = open_data();
    let a = ds.get("cfa04/tas.nc/tas").unwrap().array.clone();
    let c = case("cfa04/tas.nc/tas");
    let at = |t: u64, y: u64, x: u64| ((t * 4 + y) * 5 + x) * 8;
    let mut edges = vec![[0u64; 3]; 0];
    for p in &spec.partitions {
        for (d, &(a0, b)) in p.location.iter().enumerate() {
            for i in [a0.checked_sub(1), Some(a0), Some(b - 1), Some(b)]
                .into_iter()
                .flatten()
                .filter(|&i| i < shape[d])
            {
                let mut e = [p.location[0].0, p.location[1].0, p.location[2].0];
                e[d] = i;
                edges.push(e);
            }
        }
    }
    for [t, y, x] in edges {
        let o = at(t, y, x);
        let got = read_le(a.as_ref(), o, 8, Endian::Little).unwrap();
        assert_eq!(
            got,
            c.expected[o as usize..o as usize + 8],
            "element ({t}, {y}, {x})"
        );
    }
    // The hole (time 5, lat 2..3) is the master's fill value.
    for y in 2..4 {
        for x in 0..5 {
            let got = read_le(a.as_ref(), at(5, y, x), 8, Endian::Little).unwrap();
            assert_eq!(got, 1e20f64.to_le_bytes(), "hole ({y}, {x})");
        }
    }
    // Whole boxes of the partitions with `part` (stepped inclusive
    // ranges, index lists, negative steps, "(1,)"), `reverse` and
    // `pdimensions`, read row by row (runs along lon).
    for p in &spec.partitions {
        if p.part.is_none() && p.directions.is_empty() && p.dimensions.is_none() {
            continue;
        }
        for t in p.location[0].0..p.location[0].1 {
            for y in p.location[1].0..p.location[1].1 {
                let o = at(t, y, 0);
                let got = read_le(a.as_ref(), o, 40, Endian::Little).unwrap();
                assert_eq!(
                    got,
                    c.expected[o as usize..o as usize + 40],
                    "{} row ({t}, {y})",
                    p.label
                );
            }
        }
    }
}

/// The partition that combines `part` (negative steps, one down to index
/// 0) with `reverse` on time, and the one stored (lon, lat, time) with
/// lat reversed, against values computed here from the sub-arrays read
/// through slabfs's plain netCDF reader: a second check, independent of
/// the generator's numpy assembly, of which way round each one goes.
#[test]
fn cfa04_part_and_reverse_pick_the_right_elements() {
    let ds = open_data();
    let a = ds.get("cfa04/tas.nc/tas").unwrap().array.clone();
    let master = read_le(a.as_ref(), 0, 7 * 4 * 5 * 8, Endian::Little).unwrap();
    let m = |t: usize, y: usize, x: usize| {
        let o = ((t * 4 + y) * 5 + x) * 8;
        f64::from_le_bytes(master[o..o + 8].try_into().unwrap())
    };
    let frag = |name: &str, var: &str| -> (Vec<u64>, Vec<f64>) {
        let f = slabfs::formats::netcdf3::File::open(&root().join("data/cfa04/frag").join(name))
            .unwrap();
        let v = f.array(var).unwrap();
        let meta = v.meta();
        let mut raw = vec![0u8; meta.nbytes() as usize];
        v.read_region(&slabfs::engine::index::Region::whole(&meta.shape), &mut raw)
            .unwrap();
        let vals = raw
            .chunks(meta.item_size())
            .map(|c| match meta.dtype {
                DataType::Int16 => i16::from_ne_bytes(c.try_into().unwrap()) as f64 * 0.25 + 280.0,
                DataType::Float64 => f64::from_ne_bytes(c.try_into().unwrap()),
                ref d => panic!("{d}"),
            })
            .collect();
        (meta.shape.clone(), vals)
    };
    // d.nc: tas(6, 3, 7) int16 packed; part "[[4, 2, -1], [2, 0, -2],
    // [6, 2, -1]]" = time 4, 3, 2; lat 2, 0; lon 6, 5, 4, 3, 2; time then
    // reversed: master (2 + i, 2 + j, k) = sub[[2, 3, 4][i], [2, 0][j],
    // [6, 5, 4, 3, 2][k]].
    let (s, d) = frag("d.nc", "tas");
    assert_eq!(s, [6, 3, 7]);
    for (i, ti) in [2, 3, 4].into_iter().enumerate() {
        for (j, yj) in [2, 0].into_iter().enumerate() {
            for (k, xk) in [6, 5, 4, 3, 2].into_iter().enumerate() {
                assert_eq!(
                    m(2 + i, 2 + j, k),
                    d[(ti * 3 + yj) * 7 + xk],
                    "({i}, {j}, {k})"
                );
            }
        }
    }
    // b.nc: tas(lon 5, lat 2, time 2), lat reversed: master (t, 2 + j, x)
    // = sub[x, 1 - j, t].
    let (s, b) = frag("b.nc", "tas");
    assert_eq!(s, [5, 2, 2]);
    for t in 0..2 {
        for j in 0..2 {
            for x in 0..5 {
                assert_eq!(
                    m(t, 2 + j, x),
                    b[(x * 2 + (1 - j)) * 2 + t],
                    "({t}, {j}, {x})"
                );
            }
        }
    }
}

/// Bad input never panics: CFA files whose `cfa_array` text has random
/// bytes changed (the file stays a valid netCDF file: same length) either
/// load and read, or are skipped with an error naming the file.
#[test]
fn cfa04_mutated_metadata_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let data = root().join("data/cfa04");
    std::os::unix::fs::symlink(data.join("frag"), tmp.path().join("frag")).unwrap();
    let opts = Options::new(
        vec![root(), tmp.path().to_path_buf()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let mut rng = Lcg(0xcfa04);
    let (mut loaded, mut refused) = (0, 0);
    for (name, var) in [("tas.nc", "tas"), ("units.nc", "t"), ("defaults.nc", "w")] {
        let bytes = std::fs::read(data.join(name)).unwrap();
        let text = cfa_array(&data.join(name), var).to_string();
        // The attribute as written (json.dumps spacing) starts with `{"`
        // and is the only such run in the header.
        let start = bytes.windows(2).position(|w| w == b"{\"").unwrap();
        let len = bytes[start..]
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(bytes.len() - start)
            .min(text.len() + 200);
        for i in 0..120 {
            let mut b = bytes.clone();
            for _ in 0..1 + rng.next(3) {
                let at = start + rng.next(len as u64) as usize;
                b[at] = b"0123456789[](),-:\"{}aZ_ /."[rng.next(26) as usize];
            }
            let path = tmp.path().join(format!("m{i}_{name}"));
            std::fs::write(&path, &b).unwrap();
            let vars = match nca::netcdf::open(&path, &opts) {
                Ok(v) => v,
                Err(_) => {
                    refused += 1;
                    continue;
                }
            };
            for e in &vars.skipped {
                let s = chain(e);
                assert!(s.contains(&format!("m{i}_{name}")), "{s}");
                refused += 1;
            }
            for (n, a) in vars.arrays {
                if n == var {
                    loaded += 1;
                }
                let _ = read_le(
                    a.as_ref(),
                    0,
                    a.meta().nbytes().min(1 << 20) as usize,
                    Endian::Little,
                );
            }
        }
    }
    assert!(
        loaded > 0 && refused > 0,
        "loaded {loaded}, refused {refused}"
    );
}

#[test]
fn cfa04_documented_example_is_accepted() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/AGGREGATION.md"))
            .unwrap();
    let start = doc.find("tas:cfa_array = \"").unwrap() + "tas:cfa_array = \"".len();
    let end = start + doc[start..].find("\" ;").unwrap();
    let text = doc[start..end].replace("\\\"", "\"");
    let dims: Vec<String> = ["time", "lat", "lon"].map(String::from).to_vec();
    let spec = nca::cfa04::parse_cfa_array(&text, &dims, &[48, 64, 128], Some("K"), &dims).unwrap();
    let [p0, p1] = &spec.partitions[..] else {
        panic!("{spec:?}")
    };
    assert_eq!(p0.location, [(0, 12), (0, 64), (0, 128)]);
    assert_eq!(p1.location, [(12, 48), (0, 64), (0, 128)]);
    assert_eq!(p0.data.file.as_deref(), Some("frag/tas_0.nc"));
    assert_eq!(p1.directions.get("lat"), Some(&false));
    assert_eq!(p1.units.as_deref(), Some("degC"));
    assert_eq!(p1.data.dtype, Some((DataType::Float32, Endian::NATIVE)));
    // The part selects exactly the partition's extents, in the stored order.
    let sizes: Vec<u64> = p1
        .part
        .as_ref()
        .unwrap()
        .iter()
        .zip([128, 64, 72])
        .map(|(s, n)| s.resolve(n).unwrap().len())
        .collect();
    assert_eq!(sizes, [128, 64, 36]);
}

/// CFA-0.4 files written by cf-python 3.13.1 itself (`cf.write(...,
/// fmt="CFA3")`, see generate_cf313.py): inclusive locations, `part` from
/// slices, `reverse`, `pdimensions`, `"varid": null`. slabfs reads them as
/// cf-python computed the data in memory (its own CFA reader does not: it
/// ignores `reverse`), byte for byte, whole and at random ranges in both
/// byte orders, through the library and `slabfs cat`.
#[test]
fn cfa04_files_written_by_cf_python_3_13_read_back() {
    let dir = root().join("cf313");
    let m: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["versions"]["cf-python"], "3.13.1");
    let ds = dataset::Opener::new(cache()).open(&dir).unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    let arrays = m["arrays"].as_array().unwrap();
    assert_eq!(arrays.len(), 3);
    let mut rng = Lcg(0x313);
    for e in arrays {
        let file = e["file"].as_str().unwrap();
        let want = std::fs::read(dir.join(e["expected"].as_str().unwrap())).unwrap();
        let a = ds.get(&format!("{file}/q")).unwrap().array.clone();
        let shape: Vec<u64> = e["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(a.meta().shape, shape, "{file}");
        assert_eq!(
            read_le(a.as_ref(), 0, want.len() + 8, Endian::Little).unwrap(),
            want,
            "{file}"
        );
        let n = want.len() as u64 / 8;
        for _ in 0..20 {
            let e0 = rng.next(n + 1);
            let k = rng.next(n + 1 - e0);
            let order = if rng.next(2) == 1 {
                Endian::Big
            } else {
                Endian::Little
            };
            let got = read_le(a.as_ref(), e0 * 8, k as usize * 8, order).unwrap();
            assert_eq!(
                got,
                want[e0 as usize * 8..(e0 + k) as usize * 8],
                "{file} elements {e0}+{k} {order:?}"
            );
        }
        let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .arg("cat")
            .arg(dir.join(file))
            .arg("q")
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut got = out.stdout;
        if Endian::NATIVE == Endian::Big {
            swap_in_place(&mut got, 8);
        }
        assert_eq!(got, want, "slabfs cat {file}");
    }
}

/// Issue 16, item 6: a descriptor written from an NCA file carries the
/// seed's global `Conventions` ("CF" and "NCA") at its top level. It loads,
/// and serves what the reference assembled for the same descriptor
/// without it; an unknown top-level key is still refused, naming the key.
#[test]
fn a_top_level_conventions_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let src = root().join("data/mixed.nca.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
    // Fragments stay where they are: absolute paths under the fixture root.
    for var in doc["variables"].as_object_mut().unwrap().values_mut() {
        for p in var["nca_array"]["Partitions"].as_array_mut().unwrap() {
            if let Some(f) = p["data"]["file"].as_str() {
                let abs = root().join("data").join(f).display().to_string();
                p["data"]["file"] = Value::from(abs);
            }
        }
    }
    doc["Conventions"] = Value::from("CF-1.6 NCA");
    let path = tmp.path().join("conv.nca.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let opts = Options::new(
        vec![root(), tmp.path().to_path_buf()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let vars = match nca::open_json(&path, &opts) {
        Ok(v) => v,
        Err(e) => panic!("refused whole: {}", chain(&e)),
    };
    let skipped: Vec<String> = vars.skipped.iter().map(chain).collect();
    assert!(skipped.is_empty(), "{skipped:#?}");
    let want = cases()
        .into_iter()
        .find(|c| c.path == "mixed.nca.json/tas")
        .unwrap();
    let (name, a) = &vars.arrays[0];
    assert_eq!(name, "tas");
    assert_eq!(a.meta().shape, want.shape);
    let got = read_le(a.as_ref(), 0, want.expected.len(), Endian::Little).unwrap();
    same(&got, &want.expected, &want.dtype, want.rtol).unwrap();

    doc["title"] = Value::from("a global attribute out of place");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let e = match nca::open_json(&path, &opts) {
        Ok(_) => panic!("an unknown top-level key was accepted"),
        Err(e) => chain(&e),
    };
    assert!(
        e.contains("conv.nca.json") && e.contains("the descriptor.title") && e.contains("unknown"),
        "{e}"
    );
}

/// Issue 16, item 7, seen from an aggregation: a fragment's `ncvar` finds
/// what netCDF-C finds in a classic file, whose names may be NUL-padded
/// (`yy\0` is `yy`) or unfit for a file name (`a/b`, which the mount does
/// not show but a partition may read). Values: netCDF4-python's read
/// (tests/fixtures/netcdf3/names/manifest.json).
#[test]
fn fragments_are_found_by_the_names_netcdf_c_reads() {
    let names = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/netcdf3/names");
    let m: Value =
        serde_json::from_slice(&std::fs::read(names.join("manifest.json")).unwrap()).unwrap();
    let values = |file: &str, var: &str| -> Vec<f64> {
        let f = m
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["file"] == file)
            .unwrap();
        let v = f["variables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == var)
            .unwrap();
        let mut out = Vec::new();
        for x in v["values"].as_array().unwrap() {
            match x {
                Value::Array(row) => out.extend(row.iter().map(|y| y.as_f64().unwrap())),
                y => out.push(y.as_f64().unwrap()),
            }
        }
        out
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = |f: &str| names.join(f).display().to_string();
    let doc = serde_json::json!({
        "Conventions": "CF-1.6 NCA",
        "dimensions": {"t": 2, "x": 3, "y": 2},
        "variables": {
            "yy": {"dtype": "float64", "nca_dimensions": "t x", "nca_array": {
                "pdimensions": ["t"], "pshape": [1], "Partitions": [
                    {"index": [0], "location": [[0, 2], [0, 3]],
                     "data": {"file": file("nul_padded_classic.nc"), "ncvar": "yy"}}]}},
            "slash": {"dtype": "float64", "nca_dimensions": "y", "nca_array": {
                "pdimensions": ["y"], "pshape": [1], "Partitions": [
                    {"index": [0], "location": [[0, 2]],
                     "data": {"file": file("unshowable_names.nc"), "ncvar": "a/b"}}]}}
        }
    });
    let path = tmp.path().join("names.nca.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let opts = Options::new(
        vec![names.clone(), tmp.path().to_path_buf()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let vars = nca::open_json(&path, &opts).unwrap();
    let skipped: Vec<String> = vars.skipped.iter().map(chain).collect();
    assert!(skipped.is_empty(), "{skipped:#?}");
    for (name, file, var) in [
        ("yy", "nul_padded_classic.nc", "yy"),
        ("slash", "unshowable_names.nc", "a/b"),
    ] {
        let a = &vars.arrays.iter().find(|(n, _)| n == name).unwrap().1;
        let want = f64_bytes(&values(file, var));
        let got = read_le(a.as_ref(), 0, want.len(), Endian::Little).unwrap();
        assert_eq!(got, want, "{name}");
    }
}

// ------------------------------------------------------------ netCDF-4

/// A netCDF-4 fragment whose reads fail after the load (tests/it/faults.rs
/// style, through `FaultyFiles`): the reads touching it fail with EIO
/// naming the fragment file, the other partitions read, a failed read is
/// not cached (repeating it goes back to the file), and once the fault is
/// gone the same read returns the expected bytes.
#[test]
fn a_failing_netcdf4_fragment_fails_only_its_reads() {
    use slabfs::storage::testing::faults::{Fault, FaultPlan, FaultyFiles, Rule};
    let plan = FaultPlan::new();
    let ds = dataset::Opener::new(cache())
        .files(FaultyFiles::os(plan.clone()))
        .open(&root().join("data"))
        .unwrap();
    // nc4.nca.json tas (time 6, lat 4, lon 5): partition [0] is
    // frag/nc4_0.nc (deflate + shuffle chunks), time 0..2.
    let c = case("nc4.nca.json/tas");
    let a = ds.get(&c.path).unwrap().array.clone();
    let row = c.expected.len() / c.shape[0] as usize;
    let id = plan.add(Rule::new(
        "nc4_0.nc",
        Fault::Error(std::io::ErrorKind::Other),
    ));
    let mut fired = 0;
    for attempt in 1..=2 {
        let e = read_le(a.as_ref(), 0, 2 * row, Endian::Little).unwrap_err();
        assert_eq!(e.errno(), 5, "{e}");
        assert!(chain(&e).contains("nc4_0.nc"), "{}", chain(&e));
        // Nothing failed was cached: each attempt goes to the file again.
        assert!(plan.fired(id) > fired, "attempt {attempt} read nothing");
        fired = plan.fired(id);
    }
    let rest = read_le(a.as_ref(), 2 * row as u64, 4 * row, Endian::Little).unwrap();
    same(&rest, &c.expected[2 * row..], &c.dtype, c.rtol).unwrap();
    plan.clear();
    let first = read_le(a.as_ref(), 0, 2 * row, Endian::Little).unwrap();
    same(&first, &c.expected[..2 * row], &c.dtype, c.rtol).unwrap();
}

/// The netCDF-4 cases of the manifest are there (the generic tests above
/// read them): aggregation files in NETCDF4 and NETCDF3_CLASSIC over
/// netCDF-4 fragments, an NCA descriptor and a CFA-0.4 file.
#[test]
fn netcdf4_cases_are_covered() {
    let paths: Vec<String> = cases().into_iter().map(|c| c.path).collect();
    for p in [
        "cf/nc4/agg.nc/q",
        "cf/nc4_classic/agg.nc/q",
        "cf/nc4_missing/agg.nc/q",
        "cf/nc4_corrupt/agg.nc/q",
        "nc4.nca.json/tas",
        "cfa04/nc4.nc/w",
    ] {
        assert!(paths.iter().any(|x| x == p), "{p} not in the manifest");
    }
    // cf-python's default writes the aggregation file as netCDF-4, its
    // fragment URIs as variable-length strings.
    let agg = root().join("data/cf/nc4/agg.nc");
    assert_eq!(
        slabfs::formats::netcdf::sniff(&agg).unwrap(),
        slabfs::formats::netcdf::Kind::Hdf5
    );
    let ds = dataset::Opener::new(cache()).open(&agg).unwrap();
    let names: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
    assert!(names.contains(&"q"), "{names:?}");
    // Definition variables hidden, and not reported as skipped.
    assert!(
        !names.iter().any(|n| n.starts_with("fragment_")),
        "{names:?}"
    );
    assert!(
        ds.skipped.is_empty(),
        "{:?}",
        ds.skipped.iter().map(|e| e.to_string()).collect::<Vec<_>>()
    );
}
