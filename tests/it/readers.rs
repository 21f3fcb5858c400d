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
//! The `corrupt_chunk_*` tests mount a copy of the demo with one chunk
//! damaged and run the readers of docs/SEMANTICS.md's "Reading safely"
//! against it: those it recommends (and the example programs) must see
//! the error, and those it warns of must still do what it says (np.fromfile
//! returns an array, memmap dies of SIGBUS, GDAL reads zeros), so the
//! warning is noticed when a new NumPy or GDAL changes that.
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
    common::python::Python::new()
        .arg("-c")
        .arg(script)
        .args(args)
        .run()
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
    // It writes tas.tif where it runs.
    let work = tempfile::tempdir().unwrap();
    let out = stdout(&run(Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())));
    assert!(out.contains("NoData Value=-32768"), "{out}");
    assert!(work.path().join("tas.tif").is_file(), "{out}");
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

// ---------------------------------------------------------------------------
// A corrupt chunk: docs/SEMANTICS.md, "Reading safely"
// ---------------------------------------------------------------------------

/// The chunk of the demo's `tas` (12 x 73 x 144 float32 in chunks of
/// 3 x 37 x 72) that [`mount_corrupt_demo`] damages: months 4 to 6,
/// latitudes 37 to 72, longitudes 72 to 143.
const BAD_CHUNK: &str = "climate.zarr/tas/c/1/1/1";

/// Bytes of one month of `tas`: a 73 x 144 float32 field.
const MONTH: usize = 73 * 144 * 4;

/// A copy of the demo (written by zarr-python) with [`BAD_CHUNK`] damaged
/// as tests/it/bad_input.rs damages a zstd chunk (the byte in the middle
/// and the last one flipped: zstd reports corrupt data), mounted with every
/// view. The tempdir holds the copy.
fn mount_corrupt_demo() -> (tempfile::TempDir, Mount) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("demo");
    common::mount::copy_tree(&demo(), &src);
    let chunk = src.join(BAD_CHUNK);
    let mut bytes = std::fs::read(&chunk).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    bytes[n - 1] ^= 0xff;
    std::fs::write(&chunk, bytes).unwrap();
    let m = Mount::start(&src, &["--views", "raw,json,npy,hdr"]);
    (tmp, m)
}

/// The mount's log names the damaged chunk's file and grid coordinates.
fn assert_logged_bad_chunk(m: &Mount) {
    let log = m.log();
    assert!(
        log.contains("read failed: climate.zarr/tas")
            && log.contains(&format!("{BAD_CHUNK}: chunk [1, 1, 1]")),
        "{log}"
    );
}

/// Every Python reader of docs/SEMANTICS.md's "Reading safely" table, in
/// one process (Python's start-up is a cost of the suite): the recipes it
/// recommends, as it shows them (`whole`, `into`, `read_part`; checked by
/// [`semantics_reading_safely_recipes_are_the_tested_ones`]), the unsafe
/// readers, and examples/readers/read_numpy.py. Arguments: the corrupt
/// mount, a healthy mount of the demo, the demo, the example localised to
/// the corrupt mount. Prints one JSON object: an outcome per reader.
/// Expected bytes are zarr-python's, read from the demo itself.
const SAFE_READING_SCRIPT: &str = r#"
import contextlib, io, json, os, resource, shutil, sys
import numpy as np

bad_mnt, good_mnt, demo, example = sys.argv[1:5]
MONTH = 73 * 144 * 4
# The first page holding bytes of the bad chunk: (month 4, lat 37, lon 72).
FIRST_BAD_PAGE = ((3 * 73 + 37) * 144 + 72) * 4 // 4096 * 4096

# The recipes of docs/SEMANTICS.md, "Reading safely".
def whole(path, dtype, shape):
    a = np.frombuffer(open(path, "rb").read(), dtype=dtype).reshape(shape)
    return a

def into(path, dtype, shape):
    a = np.empty(shape, dtype)
    with open(path, "rb") as f:
        if f.readinto(a) != a.nbytes:
            raise OSError(f"{path}: short read")
    return a

def read_part(path, dtype, offset, nbytes):
    with open(path, "rb") as f:
        f.seek(offset)
        b = f.read(nbytes)
    if len(b) != nbytes:
        raise OSError(f"{path}: short read")
    part = np.frombuffer(b, dtype=dtype)
    return part

def outcome(f, want=None):
    """What f() did: raised (which, errno), or returned (size, equal to want,
    how many leading bytes equal want's)."""
    try:
        a = f()
    except OSError as e:
        return {"raised": "OSError", "errno": e.errno}
    except Exception as e:
        return {"raised": type(e).__name__, "message": str(e)}
    if not isinstance(a, np.ndarray):
        return {"returned": repr(a)}
    r = {"size": int(a.size)}
    if want is not None:
        got, exp = a.tobytes(), want.tobytes()
        r["equal"] = got == exp
        n = min(len(got), len(exp))
        diff = np.frombuffer(got[:n], "u1") != np.frombuffer(exp[:n], "u1")
        r["equal_prefix"] = int(diff.argmax()) if diff.any() else n
    return r

def in_child(f):
    """Run f in a forked child (a SIGBUS kills only the child): the signal
    that ended it, or its exit status."""
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dump
        try:
            f()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"exit": os.WEXITSTATUS(status)}

bad = f"{bad_mnt}/climate.zarr/tas"
meta = json.load(open(bad + ".json"))
dtype, shape = meta["dtype"], tuple(meta["shape"])
R = {}

# Mappings first, before zarr starts its threads: fork keeps only this one.
mm = lambda: np.memmap(bad, dtype=dtype, mode="r", shape=shape)
R["memmap_bad_month"] = in_child(lambda: float(mm()[4].sum()))
R["memmap_good_month"] = in_child(lambda: float(mm()[0].sum()))
R["npy_mmap_bad_month"] = in_child(lambda: float(np.load(bad + ".npy", mmap_mode="r")[4].sum()))

import zarr

def want(store, array):
    return np.ascontiguousarray(zarr.open_array(f"{demo}/{store}", path=array, mode="r")[...])

tas = want("climate.zarr", "tas")
flat = tas.reshape(-1)

# The recommended recipes on the corrupt array.
R["whole"] = outcome(lambda: whole(bad, dtype, shape))
R["into"] = outcome(lambda: into(bad, dtype, shape))
R["part_bad"] = outcome(lambda: read_part(bad, dtype, 4 * MONTH, MONTH))
R["part_months_1_3"] = outcome(lambda: read_part(bad, dtype, 0, 3 * MONTH), tas[:3])
R["part_months_8_12"] = outcome(lambda: read_part(bad, dtype, 7 * MONTH, 5 * MONTH), tas[7:])
R["npy_load"] = outcome(lambda: np.load(bad + ".npy"))
def run_example():
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(open(example).read(), example, "exec"), {"__name__": "__main__"})
R["example"] = outcome(run_example)
R["copyfile"] = outcome(lambda: shutil.copyfile(bad, os.path.join(os.path.dirname(example), "copy")))

# The readers that do not raise.
R["fromfile"] = outcome(lambda: np.fromfile(bad, dtype=dtype), flat)
R["fromfile_count"] = outcome(lambda: np.fromfile(bad, dtype=dtype, count=flat.size), flat)
R["fromfile_at_bad_page"] = outcome(
    lambda: np.fromfile(bad, dtype=dtype, count=10, offset=FIRST_BAD_PAGE))
def unbuffered():
    a = np.empty(shape, dtype)
    with open(bad, "rb", buffering=0) as f:
        first = f.readinto(a)
        try:
            f.readinto(memoryview(a).cast("B")[first:])
            again = None
        except OSError as e:
            again = e.errno
    return {"first": first, "again": again}
R["unbuffered_readinto"] = unbuffered()
fd = os.open(bad, os.O_RDONLY)
first = len(os.pread(fd, MONTH, 3 * MONTH))
R["pread"] = {"first": first, "again": outcome(lambda: os.pread(fd, MONTH, 3 * MONTH + first))}
os.close(fd)

# Healthy arrays: the same recipes give zarr-python's bytes.
healthy = {}
for mnt, rel, store, array in [
    (good_mnt, "climate.zarr/tas", "climate.zarr", "tas"),
    (bad_mnt, "climate.zarr/lat", "climate.zarr", "lat"),
    (bad_mnt, "climate.zarr/time", "climate.zarr", "time"),
    (bad_mnt, "elevation.zarr", "elevation.zarr", ""),
]:
    w = want(store, array)
    path = f"{mnt}/{rel}"
    m = json.load(open(path + ".json"))
    dt, sh = m["dtype"], tuple(m["shape"])
    healthy[rel] = {
        "whole": outcome(lambda: whole(path, dt, sh), w),
        "into": outcome(lambda: into(path, dt, sh), w),
        "part": outcome(lambda: read_part(path, dt, w.itemsize, w.nbytes - w.itemsize), w.reshape(-1)[1:]),
        "fromfile": outcome(lambda: np.fromfile(path, dtype=dt), w.reshape(-1)),
        "memmap": outcome(lambda: np.array(np.memmap(path, dtype=dt, mode="r", shape=sh)), w),
        "npy_load": outcome(lambda: np.load(path + ".npy"), w),
    }
R["healthy"] = healthy
R["numpy"] = np.__version__
print(json.dumps(R))
"#;

/// `outcome` of [`SAFE_READING_SCRIPT`] is an OSError with errno EIO.
fn assert_eio(r: &Value, what: &str) {
    assert_eq!(r["raised"], "OSError", "{what}: {r}");
    assert_eq!(r["errno"], libc::EIO, "{what}: {r}");
}

/// The recommended Python recipes raise OSError (EIO) on a read that
/// touches a corrupt chunk, and so does examples/readers/read_numpy.py;
/// the readers docs/SEMANTICS.md warns of do what it says (np.fromfile
/// returns an array, memmap dies of SIGBUS, unbuffered reads return a
/// short count); on healthy arrays every recipe gives zarr-python's bytes.
#[test]
fn corrupt_chunk_python_recipes_raise_and_fromfile_does_not() {
    let (tmp, bad) = mount_corrupt_demo();
    let good = mount_demo(&["--views", "raw,json,npy"]);
    let example = tmp.path().join("read_numpy.py");
    let src = std::fs::read_to_string(readers().join("read_numpy.py")).unwrap();
    std::fs::write(&example, localise(&bad, &src)).unwrap();
    let out = stdout(&py(
        SAFE_READING_SCRIPT,
        &[
            bad.mnt.to_str().unwrap(),
            good.mnt.to_str().unwrap(),
            demo().to_str().unwrap(),
            example.to_str().unwrap(),
        ],
    ));
    let r: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out}"));
    let numpy = &r["numpy"];

    // Safe: they raise.
    for key in ["whole", "into", "part_bad", "example", "copyfile"] {
        assert_eio(&r[key], key);
    }
    assert_eq!(r["npy_load"]["raised"], "ValueError", "{}", r["npy_load"]);
    // Reads that touch no page of the bad chunk are unaffected.
    for key in ["part_months_1_3", "part_months_8_12"] {
        assert_eq!(r[key]["equal"], true, "{key}: {}", r[key]);
    }

    // Unsafe, as the docs say. If NumPy starts raising, this fails: then
    // docs/SEMANTICS.md's table is out of date (say from which version).
    let ff = &r["fromfile"];
    assert!(
        ff.get("raised").is_none(),
        "np.fromfile raised with NumPy {numpy}: update docs/SEMANTICS.md: {ff}"
    );
    assert_eq!(ff["size"], 12 * 73 * 144, "np.fromfile's size: {ff}");
    assert_eq!(ff["equal"], false, "{ff}");
    let prefix = ff["equal_prefix"].as_u64().unwrap() as usize;
    assert!(
        (3 * MONTH..4 * MONTH).contains(&prefix),
        "np.fromfile: right up to the failure, months 1 to 3: {ff}"
    );
    let fc = &r["fromfile_count"];
    assert!(fc.get("raised").is_none(), "NumPy {numpy}: {fc}");
    let short = fc["size"].as_u64().unwrap() as usize;
    assert!(
        short < 12 * 73 * 144 && fc["equal_prefix"] == short * 4,
        "{fc}"
    );
    assert_eq!(
        r["fromfile_at_bad_page"]["size"], 0,
        "{}",
        r["fromfile_at_bad_page"]
    );
    // SIGBUS, and only for pages of the bad chunk.
    assert_eq!(r["memmap_bad_month"]["signal"], libc::SIGBUS, "{r}");
    assert_eq!(r["npy_mmap_bad_month"]["signal"], libc::SIGBUS, "{r}");
    assert_eq!(r["memmap_good_month"]["exit"], 0, "{r}");
    // A short count first, EIO when asked again.
    for key in ["unbuffered_readinto", "pread"] {
        let first = r[key]["first"].as_u64().unwrap() as usize;
        assert!(first > 0 && first < 12 * MONTH, "{key}: {}", r[key]);
    }
    assert_eq!(r["unbuffered_readinto"]["again"], libc::EIO, "{r}");
    assert_eq!(
        r["pread"]["first"], 21312,
        "month 4 up to its first bad page"
    );
    assert_eio(&r["pread"]["again"], "pread again");

    // Healthy arrays.
    let healthy = r["healthy"].as_object().unwrap();
    assert_eq!(healthy.len(), 4);
    for (rel, readers) in healthy {
        for (reader, o) in readers.as_object().unwrap() {
            assert_eq!(o["equal"], true, "{rel} by {reader}: {o}");
        }
    }
    assert_logged_bad_chunk(&bad);
}

/// dd, cat and the Fortran example fail on a read that touches a corrupt
/// chunk (dd with count= only with iflag=fullblock); GDAL reads it as
/// zeros and exits 0, and examples/readers/gdal.sh's check of
/// `.slabfs/stats` catches that. Healthy months read as zarr-python reads
/// them.
#[test]
fn corrupt_chunk_through_dd_fortran_and_gdal() {
    let (_tmp, m) = mount_corrupt_demo();
    let tas_bytes = zarr_bytes("climate.zarr", "tas");
    let tas = f32s(&tas_bytes);
    let path = m.path("climate.zarr/tas");
    let failed = |out: &Output, what: &str, needle: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(needle),
            "{what} exited with {} on a corrupt chunk: {err}",
            out.status
        );
    };

    let work = tempfile::tempdir().unwrap();
    // The od reads 16 bytes from the first bad one (month 4, lat 37, lon 72).
    let p = path.to_str().unwrap();
    for args in [
        vec!["cat", p],
        vec!["cp", p, "copy"],
        vec!["head", "-c", "300000", p],
        vec!["od", "-j", "147744", "-N", "16", p],
    ] {
        let out = Command::new(args[0])
            .args(&args[1..])
            .current_dir(work.path())
            .stdout(Stdio::null())
            .output()
            .unwrap();
        failed(&out, args[0], "Input/output error");
    }

    // examples/readers/dd_od.sh: month 1 is copied; the whole copy fails.
    let script = localise(
        &m,
        &std::fs::read_to_string(readers().join("dd_od.sh")).unwrap(),
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(work.path())
        .output()
        .unwrap();
    failed(&out, "dd_od.sh", "Input/output error");
    let month1 = std::fs::read(work.path().join("tas-month1.f32")).unwrap();
    assert!(month1 == tas_bytes[..MONTH], "dd of month 1 differs");

    // dd count=1 of month 4 without iflag=fullblock: the bytes before the
    // first bad page, exit 0 (what the docs warn of); with it, exit 1.
    let dd = |extra: &[&str]| {
        Command::new("dd")
            .arg(format!("if={}", path.display()))
            .args(["of=month4.f32", "bs=42048", "skip=3", "count=1"])
            .args(extra)
            .current_dir(work.path())
            .output()
            .unwrap()
    };
    let out = dd(&[]);
    let copied = std::fs::metadata(work.path().join("month4.f32"))
        .unwrap()
        .len() as usize;
    assert!(
        out.status.success() && copied < MONTH,
        "dd count=1 without iflag=fullblock: {}, {copied} bytes; docs/SEMANTICS.md says exit 0 and short",
        out.status
    );
    let month4 = std::fs::read(work.path().join("month4.f32")).unwrap();
    assert!(month4 == tas_bytes[3 * MONTH..3 * MONTH + copied]);
    failed(
        &dd(&["iflag=fullblock"]),
        "dd iflag=fullblock",
        "Input/output error",
    );

    if have(
        "gfortran",
        "corrupt_chunk_through_dd_fortran_and_gdal (Fortran)",
    ) {
        let exe = work.path().join("read_tas");
        run(Command::new("gfortran")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(readers().join("read_tas.f90"))
            .current_dir(work.path()));
        let out = Command::new(&exe)
            .arg(m.path("climate.zarr"))
            .output()
            .unwrap();
        failed(&out, "read_tas", "tas, month 4: Input/output error");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        // Months 1 to 3 before it, as zarr-python reads them.
        let rows: Vec<Vec<String>> = stdout(&out)
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect();
        assert_eq!(rows.len(), 3, "{out:?}");
        for (t, row) in rows.iter().enumerate() {
            assert_eq!(row[1].parse::<f32>().unwrap(), tas_at(&tas, t, 36, 0));
            assert_eq!(row[2].parse::<f32>().unwrap(), tas_at(&tas, t, 0, 0));
        }
    }

    if have(
        "gdalinfo",
        "corrupt_chunk_through_dd_fortran_and_gdal (GDAL)",
    ) {
        // Pixel (100, 60) lies in the bad chunk in months 4 to 6: GDAL
        // gives 0 for them and exits 0 (what the docs warn of).
        let out = run(Command::new("gdallocationinfo")
            .arg("-valonly")
            .arg(&path)
            .args(["100", "60"]));
        let got: Vec<f32> = stdout(&out)
            .lines()
            .map(|v| v.trim().parse::<f64>().unwrap() as f32)
            .collect();
        let want: Vec<f32> = (0..12)
            .map(|t| {
                if (3..6).contains(&t) {
                    0.0
                } else {
                    tas_at(&tas, t, 60, 100)
                }
            })
            .collect();
        assert_eq!(got, want, "GDAL did not read the bad months as 0");
        assert!((3..6).all(|t| tas_at(&tas, t, 60, 100) != 0.0));
        run(Command::new("gdalinfo")
            .arg("-stats")
            .arg(&path)
            .stdout(Stdio::null()));
        // examples/readers/gdal.sh: its errors.EIO check fails the run.
        let script = localise(
            &m,
            &std::fs::read_to_string(readers().join("gdal.sh")).unwrap(),
        );
        let out = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(work.path())
            .output()
            .unwrap();
        failed(
            &out,
            "gdal.sh",
            "slabfs: reads failed during gdal_translate",
        );
    }
    assert_logged_bad_chunk(&m);
}

/// Every code line of docs/SEMANTICS.md's "Reading safely" is run by the
/// tests above: it is in [`SAFE_READING_SCRIPT`] or in one of the
/// example programs they run.
#[test]
fn semantics_reading_safely_recipes_are_the_tested_ones() {
    let doc = std::fs::read_to_string(repo().join("docs/SEMANTICS.md")).unwrap();
    let section = doc
        .split("\n## Reading safely")
        .nth(1)
        .expect("docs/SEMANTICS.md has a '## Reading safely' section");
    let section = section.split("\n## ").next().unwrap();
    let mut tested = SAFE_READING_SCRIPT.to_string();
    for name in ["read_numpy.py", "read_tas.f90", "dd_od.sh", "gdal.sh"] {
        tested += &std::fs::read_to_string(readers().join(name)).unwrap();
    }
    let mut in_code = false;
    let mut checked = 0;
    for line in section.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            in_code = ["sh", "python", "fortran"].contains(&lang);
            continue;
        }
        let line = line.trim();
        if !in_code || line.is_empty() {
            continue;
        }
        assert!(
            tested.contains(line),
            "docs/SEMANTICS.md line not run by the tests: {line}"
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} code lines found");
}
