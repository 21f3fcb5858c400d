//! `slabfs aggregate` on files netCDF4-python wrote
//! (tests/fixtures/series/generate.py): the NcML and NCA descriptors it
//! writes read, through `slabfs cat`, a mount and xncml, as netCDF4-python
//! reads the member files joined (expected bytes from netCDF4-python and
//! cftime, never from slabfs); and sets of files that do not fit are
//! refused naming the file and what differs, with nothing written.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/series")
}

fn manifest() -> Value {
    serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap()
}

const VARS: [&str; 6] = ["time", "lat", "lon", "crs", "tas", "pr"];

fn slabfs(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn aggregate(args: &[&str], inputs: &[PathBuf]) -> Output {
    let mut all: Vec<&std::ffi::OsStr> = vec!["aggregate".as_ref()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    all.extend(inputs.iter().map(|p| p.as_os_str()));
    slabfs(&all)
}

fn expected(kind: &str, var: &str) -> Vec<u8> {
    let mut b = std::fs::read(fixtures().join(format!("expected/{kind}/{var}.bin"))).unwrap();
    if cfg!(target_endian = "big") {
        let size = match var {
            "pr" if kind == "nca" => 8,
            "pr" => 2,
            _ => 4,
        };
        slabfs::dtype::swap_in_place(&mut b, size);
    }
    b
}

/// A directory with the daily files under `daily/`.
fn copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    common::mount::copy_tree(&fixtures().join("daily"), &dir.path().join("daily"));
    dir
}

fn cat(descriptor: &Path, var: &str) -> Vec<u8> {
    let out = slabfs(&["cat".as_ref(), descriptor.as_os_str(), var.as_ref()]);
    assert!(
        out.status.success(),
        "cat {} {var}: {}",
        descriptor.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn aggregate_writes_ncml_and_nca_that_read_as_the_members_joined() {
    let dir = copy();
    let daily = dir.path().join("daily");
    // Given in another order than time's: the series is ordered by time.
    let mut files: Vec<PathBuf> = manifest()["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| daily.join(n.as_str().unwrap()))
        .collect();
    files.reverse();
    files.swap(0, 2);
    for (name, kind, inputs) in [
        ("series.ncml", "ncml", files.clone()),
        ("series.nca.json", "nca", vec![daily.clone()]),
    ] {
        let out_path = dir.path().join(name);
        let out = aggregate(
            &["--dim", "time", "-o", out_path.to_str().unwrap()],
            &inputs,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        assert!(
            err.contains("5 files joined along time, 10 steps")
                && err.contains("4 files' coordinates put on the first's units"),
            "{err}"
        );
        let text = std::fs::read_to_string(&out_path).unwrap();
        assert!(
            text.contains("daily/tas_20010101.nc"),
            "relative locations: {text}"
        );
        assert!(!text.contains(dir.path().to_str().unwrap()), "{text}");
        for var in VARS {
            assert_eq!(cat(&out_path, var), expected(kind, var), "{name} {var}");
        }
    }
}

#[test]
fn xncml_reads_the_written_ncml_as_netcdf4_python_reads_the_members() {
    let dir = copy();
    let out_path = dir.path().join("series.ncml");
    let out = aggregate(
        &["--dim", "time", "-o", out_path.to_str().unwrap()],
        &[dir.path().join("daily")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // xncml (through xarray) masks and scales: its pr is NCA's expected
    // values with NaN for the fill.
    let code = r#"
import sys, numpy as np, xncml
ds = xncml.open_ncml(sys.argv[1])
exp = sys.argv[2]
def want(kind, name, dtype):
    return np.fromfile(f"{exp}/{kind}/{name}.bin", dtype=dtype)
assert (ds["time"].values == want("ncml", "time", "<i4")).all(), ds["time"].values
assert (ds["tas"].values.ravel() == want("ncml", "tas", "<f4")).all()
pr = want("nca", "pr", "<f8")
got = ds["pr"].values.ravel()
fill = pr > 1e36
assert (np.isnan(got) == fill).all() and (got[~fill] == pr[~fill]).all(), (got, pr)
assert (ds["lat"].values == want("ncml", "lat", "<f4")).all()
"#;
    common::python::Python::new()
        .args(["-W", "ignore", "-c", code])
        .arg(&out_path)
        .arg(fixtures().join("expected"))
        .run();
}

#[test]
fn files_that_do_not_fit_are_named_and_nothing_is_written() {
    let m = manifest();
    let dir = tempfile::tempdir().unwrap();
    for (case, expect) in m["bad"].as_object().unwrap() {
        let out_path = dir.path().join(format!("{case}.ncml"));
        let out = aggregate(
            &["--dim", "time", "-o", out_path.to_str().unwrap()],
            &[fixtures().join("bad").join(case)],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{case}: accepted\n{err}");
        for e in expect.as_array().unwrap() {
            assert!(
                err.contains(e.as_str().unwrap()),
                "{case}: no {e} in\n{err}"
            );
        }
        assert!(!out_path.exists(), "{case}: written anyway");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{case}: left {left:?}");
    }
    // A gap is joined when asked; the missing day is simply not there.
    common::mount::copy_tree(&fixtures().join("bad/gap"), &dir.path().join("gap"));
    let out_path = dir.path().join("gap.nca.json");
    let out = aggregate(
        &[
            "--dim",
            "time",
            "--allow-gaps",
            "-o",
            out_path.to_str().unwrap(),
        ],
        &[dir.path().join("gap")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let time = cat(&out_path, "time");
    let time: Vec<i32> = time
        .chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(time, [0, 12, 24, 36, 72, 84]);
}

#[test]
fn a_directory_s_files_are_chosen_by_suffix_or_pattern_and_never_the_output() {
    let dir = copy();
    let daily = dir.path().join("daily");
    std::fs::write(daily.join("notes.txt"), "not a dataset").unwrap();
    // An earlier run's output in the directory is no member.
    for name in ["old.ncml", "all.nca.json"] {
        let out_path = daily.join(name);
        let out = aggregate(
            &["--dim", "time", "-o", out_path.to_str().unwrap()],
            std::slice::from_ref(&daily),
        );
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Only the first three days.
    let out_path = daily.join("three.ncml");
    let out = aggregate(
        &[
            "--dim",
            "time",
            "--regexp",
            r"tas_2001010[1-3]\.nc",
            "-o",
            out_path.to_str().unwrap(),
        ],
        std::slice::from_ref(&daily),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        cat(&out_path, "tas"),
        expected("ncml", "tas")[..3 * 2 * 9 * 4]
    );
    // A suffix that selects nothing is an error naming the directory.
    let out = aggregate(
        &[
            "--dim",
            "time",
            "--suffix",
            ".grib2",
            "-o",
            "/tmp/never.ncml",
        ],
        std::slice::from_ref(&daily),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no files to aggregate"),
        "{err}"
    );
    // An output name that says no format.
    let out = aggregate(
        &["--dim", "time", "-o", "/tmp/series.xml"],
        std::slice::from_ref(&daily),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--format ncml"),
        "{err}"
    );
}

/// The written descriptors through a real mount: `stat` sizes and reads at
/// offsets (dd's way) of the joined files.
#[test]
fn a_mount_serves_the_written_series() {
    let _g = common::side_by_side();
    let dir = copy();
    for name in ["series.ncml", "series.nca.json"] {
        let out_path = dir.path().join(name);
        let out = aggregate(
            &["--dim", "time", "-o", out_path.to_str().unwrap()],
            &[dir.path().join("daily")],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mount = common::mount::Mount::start(dir.path(), &[]);
    for (name, kind) in [("series.ncml", "ncml"), ("series.nca.json", "nca")] {
        for var in ["tas", "pr", "time"] {
            let want = expected(kind, var);
            let path = mount.path(&format!("{name}/{var}"));
            let len = std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), mount.log()))
                .len();
            assert_eq!(len, want.len() as u64, "{name} {var}");
            use std::os::unix::fs::FileExt;
            let f = std::fs::File::open(&path).unwrap();
            let (at, n) = (want.len() / 2 + 1, want.len() / 3);
            let mut buf = vec![0u8; n];
            f.read_exact_at(&mut buf, at as u64).unwrap();
            assert_eq!(buf, want[at..at + n], "{name} {var} at {at}");
            assert_eq!(std::fs::read(&path).unwrap(), want, "{name} {var}");
        }
    }
    mount.stop();
}

/// `--scan`: the NcML scans the directory (with timeUnitsChange, as the
/// members' units differ) and reads as the listed form does; refused
/// where a scan would join otherwise than the checks did.
#[test]
fn scan_writes_a_live_ncml_that_reads_the_same() {
    let dir = copy();
    let daily = dir.path().join("daily");
    let out_path = dir.path().join("live.ncml");
    let out = aggregate(
        &[
            "--dim",
            "time",
            "--scan",
            "--suffix",
            ".nc",
            "-o",
            out_path.to_str().unwrap(),
        ],
        std::slice::from_ref(&daily),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        text.contains(r#"timeUnitsChange="true""#)
            && text.contains(r#"<scan location="daily" suffix=".nc" subdirs="false"/>"#),
        "{text}"
    );
    for var in VARS {
        assert_eq!(cat(&out_path, var), expected("ncml", var), "{var}");
    }
    // Without a suffix or pattern a scan would take every file there.
    let out = aggregate(
        &["--dim", "time", "--scan", "-o", out_path.to_str().unwrap()],
        std::slice::from_ref(&daily),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--suffix or --regexp"),
        "{err}"
    );
    // Names that sort otherwise than times.
    std::fs::rename(daily.join("tas_20010101.nc"), daily.join("tas_z.nc")).unwrap();
    let out = aggregate(
        &[
            "--dim",
            "time",
            "--scan",
            "--suffix",
            ".nc",
            "-o",
            out_path.to_str().unwrap(),
        ],
        std::slice::from_ref(&daily),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("do not sort by name"),
        "{err}"
    );
}
