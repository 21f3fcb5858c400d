//! The README's readers, for real: each test mounts the demo dataset
//! (`examples/demo/data`, written by zarr-python) with the slabfs binary and
//! reads it the way a user would: `dd`/`od`, `numpy.fromfile`/`memmap`,
//! `np.load` of the npy view, a Fortran direct-access program, GDAL through
//! the hdr view. Expected values always come from zarr-python reading the
//! store directly, never from slabfs.
//!
//! The example programs under `examples/readers/` are run as they are,
//! only with the README's mount point `/tmp/slabfs-demo` replaced by the
//! test's own, and [`readme_reader_examples_are_the_tested_programs`]
//! checks that every command the README shows comes from one of them: so
//! every example in the README is exercised here.
//!
//! Needs: /dev/fuse (+ `fusermount3` when not root), the project venv with
//! numpy and zarr (`scripts/venv.sh`; `SLABFS_PYTHON` overrides its path).
//! The NumPy tests never skip: without the venv they fail and say how to
//! make it. Optional, skipped with a message when absent: `gfortran` and
//! GDAL (`gdalinfo`, `gdallocationinfo`; Debian `gfortran`, `gdal-bin`).

use crate::common;
use common::mount::Mount;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The mount point the README and the example programs use.
const README_MOUNT: &str = "/tmp/slabfs-demo";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn demo() -> PathBuf {
    repo().join("examples/demo/data")
}

fn readers() -> PathBuf {
    repo().join("examples/readers")
}

/// The arrays of the demo: (path in the mount, store, array path in it).
const ARRAYS: [(&str, &str, &str); 5] = [
    ("climate.zarr/lat", "climate.zarr", "lat"),
    ("climate.zarr/lon", "climate.zarr", "lon"),
    ("climate.zarr/tas", "climate.zarr", "tas"),
    ("climate.zarr/time", "climate.zarr", "time"),
    ("elevation.zarr", "elevation.zarr", ""),
];

// ---------------------------------------------------------------------------
// The daemon
// ---------------------------------------------------------------------------

/// Mount the demo dataset with `args`.
fn mount_demo(args: &[&str]) -> Mount {
    Mount::start(&demo(), args)
}

/// `text` with the README's mount point replaced by that of `m`.
fn localise(m: &Mount, text: &str) -> String {
    text.replace(README_MOUNT, m.mnt.to_str().unwrap())
}

// ---------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------

/// The project venv's python (numpy, zarr). Required, never skipped.
fn python() -> PathBuf {
    common::python()
}

/// Whether an optional tool runs; if not, say the test is skipped.
fn have(tool: &str, test: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED {test}: `{tool}` is not installed");
    }
    ok
}

/// Run `cmd`, require success, return its output.
fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} exited with {}:\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Run a Python script with the venv's python and `args`.
fn py(script: &str, args: &[&str]) -> Output {
    run(Command::new(python()).arg("-c").arg(script).args(args))
}

/// The bytes zarr-python reads for an array of the demo, C order,
/// little-endian (the machine's order: see the const assertion).
fn zarr_bytes(store: &str, array: &str) -> Vec<u8> {
    const {
        assert!(
            cfg!(target_endian = "little"),
            "expected bytes are little-endian"
        )
    };
    let script = r#"
import sys, numpy as np, zarr
a = zarr.open_array(sys.argv[1], path=sys.argv[2], mode="r")[...]
sys.stdout.buffer.write(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes())
"#;
    py(script, &[demo().join(store).to_str().unwrap(), array]).stdout
}

/// Run `script` with arguments `MNT DEMO EXTRA... SPEC...`, one
/// `path-in-mount:store:array` SPEC per demo array; require one `ok` line
/// per array.
fn py_over_arrays(script: &str, m: &Mount, extra: &[&str]) -> String {
    let demo = demo();
    let specs: Vec<String> = ARRAYS
        .iter()
        .map(|(rel, store, path)| format!("{rel}:{store}:{path}"))
        .collect();
    let mut args = vec![m.mnt.to_str().unwrap(), demo.to_str().unwrap()];
    args.extend(extra);
    args.extend(specs.iter().map(String::as_str));
    let out = stdout(&py(script, &args));
    let ok = out.lines().filter(|l| l.starts_with("ok ")).count();
    assert_eq!(ok, ARRAYS.len(), "{out}");
    out
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `tas[t, y, x]` from the little-endian bytes of tas (12 x 73 x 144).
fn tas_at(tas: &[f32], t: usize, y: usize, x: usize) -> f32 {
    tas[(t * 73 + y) * 144 + x]
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// numpy.fromfile and numpy.memmap of every mounted array, with dtype and
/// shape from its sidecar, equal what zarr-python reads from the store.
#[test]
fn numpy_fromfile_and_memmap_equal_zarr_python() {
    let m = mount_demo(&[]);
    let script = r#"
import json, sys, numpy as np, zarr
mnt, demo = sys.argv[1], sys.argv[2]
for spec in sys.argv[3:]:
    rel, store, path = spec.split(":")
    want = zarr.open_array(f"{demo}/{store}", path=path, mode="r")[...]
    meta = json.load(open(f"{mnt}/{rel}.json"))
    assert meta["dtype"] == want.dtype.str, (rel, meta["dtype"], want.dtype.str)
    assert tuple(meta["shape"]) == want.shape, (rel, meta["shape"], want.shape)
    f = f"{mnt}/{rel}"
    a = np.fromfile(f, dtype=meta["dtype"]).reshape(meta["shape"])
    assert a.tobytes() == want.tobytes(), f"{rel}: fromfile differs"
    mm = np.memmap(f, dtype=meta["dtype"], mode="r", shape=tuple(meta["shape"]))
    # Scattered reads through the mapping first (page faults served by
    # the mount), then the whole array.
    rng = np.random.default_rng(0)
    for _ in range(50):
        i = tuple(int(rng.integers(n)) for n in want.shape)
        assert mm[i].tobytes() == want[i].tobytes(), f"{rel}{i}: memmap differs"
    assert mm.tobytes() == want.tobytes(), f"{rel}: memmap differs"
    print("ok", rel)
"#;
    py_over_arrays(script, &m, &[]);
}

/// `examples/readers/dd_od.sh`: its `dd bs=1M` copy and its one-field copy
/// equal zarr-python's bytes, and what `od` prints are the right numbers.
#[test]
fn dd_and_od_example() {
    let m = mount_demo(&[]);
    let work = tempfile::tempdir().unwrap();
    let script = localise(
        &m,
        &std::fs::read_to_string(readers().join("dd_od.sh")).unwrap(),
    );
    let out = stdout(&run(Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())));

    let tas = zarr_bytes("climate.zarr", "tas");
    assert_eq!(tas.len(), 12 * 73 * 144 * 4);
    let copied = std::fs::read(work.path().join("tas.f32")).unwrap();
    assert!(
        copied == tas,
        "dd bs=1M of tas differs from zarr-python's bytes"
    );
    let month1 = std::fs::read(work.path().join("tas-month1.f32")).unwrap();
    assert!(month1 == tas[..73 * 144 * 4], "dd of month 1 differs");

    // od's lines are "OFFSET v v v ...": collect the values after each
    // offset in the order od printed them.
    let rows: Vec<(u64, Vec<&str>)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let off = f.next()?.parse().ok()?;
            Some((off, f.collect::<Vec<_>>()))
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    // od -t f4 prints FLT_DIG (6) significant digits or more: compare
    // against float32 with a matching tolerance.
    let first: Vec<f32> = rows[0].1.iter().map(|v| v.parse().unwrap()).collect();
    for (got, want) in first.iter().zip(f32s(&tas[..16])) {
        assert!(
            (got - want).abs() <= want.abs() * 1e-6,
            "od: {got} vs {want}"
        );
    }
    assert_eq!(first.len(), 4);

    let time = zarr_bytes("climate.zarr", "time");
    let want_time: Vec<String> = time
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()).to_string())
        .collect();
    let got_time: Vec<&str> = rows[1..4].iter().flat_map(|(_, v)| v.clone()).collect();
    assert_eq!(got_time, want_time);

    let elev = zarr_bytes("elevation.zarr", "");
    let want_elev: Vec<String> = elev[64900..64920]
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes(c.try_into().unwrap()).to_string())
        .collect();
    assert!(
        want_elev.contains(&"-32768".to_string()),
        "the example should show ocean"
    );
    let got_elev: Vec<&str> = rows
        .iter()
        .filter(|(off, _)| (64900..64920).contains(off))
        .flat_map(|(_, v)| v.clone())
        .collect();
    assert_eq!(got_elev, want_elev);
}

/// `examples/readers/read_numpy.py` runs against the mount and prints the
/// values zarr-python reads.
#[test]
fn numpy_example() {
    let m = mount_demo(&[]);
    let script = localise(
        &m,
        &std::fs::read_to_string(readers().join("read_numpy.py")).unwrap(),
    );
    let out = stdout(&py(&script, &[]));
    let tas = f32s(&zarr_bytes("climate.zarr", "tas"));
    let line = out
        .lines()
        .find(|l| l.starts_with("month 7, equator"))
        .unwrap_or_else(|| panic!("{out}"));
    let got: Vec<f32> = line
        .split_once('[')
        .unwrap()
        .1
        .trim_end_matches(']')
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let want: Vec<f32> = (0..4).map(|x| tas_at(&tas, 6, 36, x)).collect();
    assert_eq!(got, want, "{out}");
    assert!(out.contains("highest"), "{out}");
}

/// `examples/readers/read_tas.f90`, compiled with gfortran, reads tas and
/// lat through direct access and prints what zarr-python reads.
#[test]
fn fortran_direct_access_example() {
    if !have("gfortran", "fortran_direct_access_example") {
        return;
    }
    let m = mount_demo(&[]);
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("read_tas");
    run(Command::new("gfortran")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(readers().join("read_tas.f90"))
        .current_dir(work.path()));
    let out = stdout(&run(Command::new(&exe).arg(m.path("climate.zarr"))));

    let tas = f32s(&zarr_bytes("climate.zarr", "tas"));
    let lat: Vec<f64> = zarr_bytes("climate.zarr", "lat")
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 12, "{out}");
    for (t, row) in rows.iter().enumerate() {
        assert_eq!(row[0], (t + 1).to_string(), "{out}");
        // ES19.8 prints 9 significant digits: a float32 round-trips.
        let equator: f32 = row[1].parse().unwrap();
        let pole: f32 = row[2].parse().unwrap();
        assert_eq!(equator, tas_at(&tas, t, 36, 0), "month {}", t + 1);
        assert_eq!(pole, tas_at(&tas, t, 0, 0), "month {}", t + 1);
        // The cos-latitude weighted mean, summed in f64 (the order of the
        // sum differs from Fortran's by far less than the 6 printed
        // decimals).
        let (mut sum, mut wsum) = (0.0, 0.0);
        for (y, lat) in lat.iter().enumerate() {
            let w = lat.to_radians().cos();
            wsum += w;
            sum += w * (0..144).map(|x| tas_at(&tas, t, y, x) as f64).sum::<f64>();
        }
        let mean: f64 = row[3].parse().unwrap();
        assert!(
            (mean - sum / (144.0 * wsum)).abs() < 2e-6,
            "month {}: {mean}",
            t + 1
        );
    }
}

/// The npy view is exactly what `numpy.save` writes for the array
/// zarr-python reads (header and data, byte for byte, in both byte
/// orders), and `np.load`, plain and `mmap_mode="r"`, loads it.
#[test]
fn npy_view_is_what_numpy_saves() {
    let script = r#"
import io, sys, numpy as np, zarr
mnt, demo, order = sys.argv[1], sys.argv[2], sys.argv[3]
for spec in sys.argv[4:]:
    rel, store, path = spec.split(":")
    want = zarr.open_array(f"{demo}/{store}", path=path, mode="r")[...]
    want = want.astype(want.dtype.newbyteorder(order))
    buf = io.BytesIO()
    np.save(buf, want)
    f = f"{mnt}/{rel}.npy"
    got = open(f, "rb").read()
    assert got == buf.getvalue(), f"{rel}.npy differs from numpy.save: {got[:128]!r} vs {buf.getvalue()[:128]!r}"
    for mode in (None, "r"):
        a = np.load(f, mmap_mode=mode)
        assert a.dtype == want.dtype and a.shape == want.shape, (rel, a.dtype, a.shape)
        assert a.tobytes() == want.tobytes(), f"{rel}.npy loads differently (mmap_mode={mode})"
    print("ok", rel)
"#;
    for (order, flag) in [("<", "little"), (">", "big")] {
        let m = mount_demo(&["--views", "raw,json,npy", "--byte-order", flag]);
        py_over_arrays(script, &m, &[order]);
    }

    // examples/readers/read_npy.py, as the README shows it.
    let m = mount_demo(&["--views", "raw,json,npy"]);
    let script = localise(
        &m,
        &std::fs::read_to_string(readers().join("read_npy.py")).unwrap(),
    );
    let out = stdout(&py(&script, &[]));
    let tas = f32s(&zarr_bytes("climate.zarr", "tas"));
    let line = out.lines().find(|l| l.starts_with("float32 (12, 73, 144)"));
    let values: Vec<f32> = line
        .unwrap_or_else(|| panic!("{out}"))
        .rsplit_once('[')
        .unwrap()
        .1
        .trim_end_matches(']')
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let want: Vec<f32> = (0..4).map(|x| tas_at(&tas, 6, 36, x)).collect();
    assert_eq!(values, want, "{out}");
    assert!(out.contains("int16 (180, 360) highest:"), "{out}");
}

/// Through the hdr view GDAL opens the raw files as ENVI with the right
/// size, bands, type and nodata, reads the values zarr-python reads in
/// both byte orders, and `examples/readers/gdal.sh` runs.
#[test]
fn hdr_view_opens_in_gdal() {
    if !have("gdalinfo", "hdr_view_opens_in_gdal") {
        return;
    }
    let tas = f32s(&zarr_bytes("climate.zarr", "tas"));
    let elev: Vec<i16> = zarr_bytes("elevation.zarr", "")
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for order in ["little", "big"] {
        let m = mount_demo(&["--views", "raw,json,hdr", "--byte-order", order]);
        let info = |rel: &str| -> Value {
            let out = run(Command::new("gdalinfo").arg("-json").arg(m.path(rel)));
            serde_json::from_slice(&out.stdout).unwrap()
        };
        let t = info("climate.zarr/tas");
        assert_eq!(t["driverShortName"], "ENVI", "{t}");
        assert_eq!(t["size"], serde_json::json!([144, 73]), "{t}");
        let bands = t["bands"].as_array().unwrap();
        assert_eq!(bands.len(), 12);
        assert!(bands.iter().all(|b| b["type"] == "Float32"), "{t}");
        let e = info("elevation.zarr");
        assert_eq!(e["driverShortName"], "ENVI", "{e}");
        assert_eq!(e["size"], serde_json::json!([360, 180]), "{e}");
        assert_eq!(e["bands"][0]["type"], "Int16", "{e}");
        assert_eq!(e["bands"][0]["noDataValue"], -32768.0, "{e}");

        // Values as GDAL decodes them: every month at two pixels, and a
        // stretch of elevation crossing the coast.
        let values = |rel: &str, x: usize, y: usize| -> Vec<f64> {
            let out = run(Command::new("gdallocationinfo")
                .arg("-valonly")
                .arg(m.path(rel))
                .args([x.to_string(), y.to_string()]));
            stdout(&out)
                .lines()
                .map(|v| v.trim().parse().unwrap())
                .collect()
        };
        for (x, y) in [(0, 36), (100, 60)] {
            // gdallocationinfo prints 15 significant digits: enough to
            // round back to the float32 exactly.
            let got: Vec<f32> = values("climate.zarr/tas", x, y)
                .into_iter()
                .map(|v| v as f32)
                .collect();
            let want: Vec<f32> = (0..12).map(|t| tas_at(&tas, t, y, x)).collect();
            assert_eq!(got, want, "{order} ({x}, {y})");
        }
        for x in 48..60 {
            let want = elev[90 * 360 + x] as f64;
            assert_eq!(values("elevation.zarr", x, 90), [want], "{order} ({x}, 90)");
        }
    }
    let m = mount_demo(&["--views", "raw,json,hdr"]);
    let script = localise(
        &m,
        &std::fs::read_to_string(readers().join("gdal.sh")).unwrap(),
    );
    let out = stdout(&run(Command::new("sh").arg("-c").arg(&script)));
    assert!(out.contains("NoData Value=-32768"), "{out}");
}

/// Every command line of the README's "Reading the files" section comes
/// from one of the example programs the tests above run, so no README
/// example goes untested.
#[test]
fn readme_reader_examples_are_the_tested_programs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("\n## Reading the files")
        .nth(1)
        .expect("README has a '## Reading the files' section");
    let section = section.split("\n## ").next().unwrap();
    let mut programs = String::new();
    for name in [
        "dd_od.sh",
        "read_numpy.py",
        "read_npy.py",
        "read_tas.f90",
        "gdal.sh",
    ] {
        programs += &std::fs::read_to_string(readers().join(name)).unwrap();
    }
    // Only command blocks are checked: ```text and ```json blocks show
    // output.
    let mut in_code = false;
    let mut checked = 0;
    for line in section.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            in_code = ["sh", "python", "fortran"].contains(&lang);
            continue;
        }
        let line = line.trim();
        // Comments and elisions are prose.
        if !in_code
            || line.is_empty()
            || line.starts_with('#')
            || line.starts_with('!')
            || line == "..."
        {
            continue;
        }
        assert!(
            programs.contains(line),
            "README line not found in examples/readers/ (so not tested): {line}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} README code lines found");
}
