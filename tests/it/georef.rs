//! The georeferenced ENVI view: through a real mount with `--views
//! raw,json,hdr`, GDAL places the arrays of regular latitude / longitude
//! grids on the globe (the `map info` of `NAME.hdr`, module doc of
//! `src/fs/views.rs`): `gdalinfo` reports the corners and pixel size the
//! coordinates imply, in WGS 84, and `gdallocationinfo -wgs84 LON LAT`
//! finds the value netCDF4-python (or zarr-python) reads at that point.
//! Arrays on grids that are not regular lat/lon get no geotransform.
//!
//! Fixtures: `tests/fixtures/georef/generate.py` (netCDF4-python): a
//! south-up netCDF-4 file (latitude ascending, float32 coordinates, a
//! group on the root's dimensions), a north-up netCDF-3 one (latitude
//! descending, told by `axis` only), and one of grids that must not be
//! placed (Gaussian latitudes, projected metres, transposed). And the
//! demo's `climate.zarr` (zarr-python), whose `tas` is on a 2.5-degree
//! grid. Expected values always come from the writers' own libraries
//! reading the files and from the coordinates they hold, never from
//! slabfs.
//!
//! Needs: /dev/fuse, the project venv (netCDF4, zarr); GDAL
//! (`gdalinfo`, `gdallocationinfo`, Debian `gdal-bin`), skipped with a
//! message when absent.

use crate::common;
use common::mount::Mount;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    repo().join("tests/fixtures/georef/data")
}

/// Whether GDAL's tools run; if not, say the test is skipped.
fn have_gdal(test: &str) -> bool {
    let ok = ["gdalinfo", "gdallocationinfo"].iter().all(|tool| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !ok {
        eprintln!("SKIPPED {test}: GDAL (gdalinfo, gdallocationinfo) is not installed");
    }
    ok
}

fn check(cmd: &Command, out: &Output) {
    assert!(
        out.status.success(),
        "{cmd:?} exited with {}:\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    check(cmd, &out);
    out
}

/// What the writer's library reads: a JSON document printed by `script`
/// run with the venv's python and `args`.
fn python_json(script: &str, args: &[&str]) -> Value {
    let out = common::python::Python::new()
        .args(["-W", "ignore", "-c", script])
        .args(args)
        .run();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every variable of a netCDF file as netCDF4-python reads it (mask and
/// scale off), by path in the file (`ocean/sst`), as nested lists of
/// float64. `float()` of a float32 is exact, and JSON carries a double
/// exactly (Python prints the shortest repr that reads back).
fn netcdf(file: &str) -> Value {
    let script = r#"
import json, sys, netCDF4
out = {}
def walk(g, prefix):
    for name, v in g.variables.items():
        v.set_auto_maskandscale(False)
        out[prefix + name] = v[...].astype("f8").tolist()
    for name, sub in g.groups.items():
        walk(sub, prefix + name + "/")
with netCDF4.Dataset(sys.argv[1]) as ds:
    walk(ds, "")
print(json.dumps(out))
"#;
    python_json(script, &[fixtures().join(file).to_str().unwrap()])
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// `gdalinfo -json` of `path`.
fn gdalinfo(path: &std::path::Path) -> Value {
    let out = run(Command::new("gdalinfo").arg("-json").arg(path));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A regular axis as the test sees it from the writer's coordinates: the
/// first and last values and the signed step between neighbours, taken
/// over the whole axis (float32 coordinates are not exactly even).
struct Axis {
    first: f64,
    last: f64,
    step: f64,
}

impl Axis {
    fn of(values: &[f64]) -> Axis {
        let (first, last) = (values[0], *values.last().unwrap());
        Axis {
            first,
            last,
            step: (last - first) / (values.len() - 1) as f64,
        }
    }

    /// The outer edges of the first and last cells: half a step beyond
    /// the first and last coordinates.
    fn edges(&self) -> (f64, f64) {
        (self.first - self.step / 2.0, self.last + self.step / 2.0)
    }
}

/// `got` within `tolerance` of `want`.
fn close(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: gdalinfo says {got}, the coordinates {want}"
    );
}

/// The geotransform in `gdalinfo -json` is printed in full (a double
/// round trips); allow for the arithmetic of the edges only.
const EXACT: f64 = 1e-9;

/// `gdalinfo -json` rounds corner coordinates to 7 decimals (as its text
/// output prints them).
const CORNER: f64 = 1e-7;

/// `gdalinfo` of the raster at `path` (the raw file of an array on
/// `lat` x `lon`): WGS 84, pixel size = the coordinates' steps (the y
/// one signed as the rows go: positive when row 0 is the southern one),
/// and corners half a step beyond the first and last coordinates: image
/// row 0 / column 0 is "upper left" whichever way the latitudes run.
fn assert_placed(path: &std::path::Path, lat: &[f64], lon: &[f64]) -> Value {
    let info = gdalinfo(path);
    let what = path.display();
    assert_eq!(info["driverShortName"], "ENVI", "{what}: {info}");
    assert_eq!(
        info["size"],
        serde_json::json!([lon.len(), lat.len()]),
        "{what}"
    );
    let wkt = info["coordinateSystem"]["wkt"].as_str().unwrap_or_default();
    assert!(
        wkt.contains("GEOGCRS[\"WGS 84\"") && wkt.contains("ID[\"EPSG\",4326]"),
        "{what}: {wkt}"
    );
    let (y, x) = (Axis::of(lat), Axis::of(lon));
    let gt = floats(&info["geoTransform"]);
    let (west, east) = x.edges();
    let (row0, row_last) = y.edges();
    close(gt[0], west, EXACT, &format!("{what} origin x"));
    close(gt[1], x.step, EXACT, &format!("{what} pixel width"));
    close(gt[3], row0, EXACT, &format!("{what} origin y"));
    close(gt[5], y.step, EXACT, &format!("{what} pixel height"));
    assert_eq!((gt[2], gt[4]), (0.0, 0.0), "{what}: no rotation");
    let corners = &info["cornerCoordinates"];
    for (corner, (cx, cy)) in [
        ("upperLeft", (west, row0)),
        ("upperRight", (east, row0)),
        ("lowerLeft", (west, row_last)),
        ("lowerRight", (east, row_last)),
    ] {
        let got = floats(&corners[corner]);
        close(got[0], cx, CORNER, &format!("{what} {corner} longitude"));
        close(got[1], cy, CORNER, &format!("{what} {corner} latitude"));
    }
    info
}

/// `gdallocationinfo -valonly -wgs84` of `points` (longitude, latitude),
/// all in one run (it reads the points from its input): the values it
/// prints, one line per band per point.
fn values_at(path: &std::path::Path, points: &[(f64, f64)]) -> Vec<f64> {
    let mut cmd = Command::new("gdallocationinfo");
    cmd.args(["-valonly", "-wgs84"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let input: String = points.iter().map(|(x, y)| format!("{x} {y}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    check(&cmd, &out);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|v| v.trim().parse().unwrap_or_else(|e| panic!("{v:?}: {e}")))
        .collect()
}

/// A point (longitude, latitude) and the cell `[j, i]` it is in.
type Probe = ((f64, f64), (usize, usize));

/// For every cell `[j, i]` of the grid, the cell's centre and a point
/// 0.3 of a step away from it in both directions (still inside it).
fn probes(lat: &[f64], lon: &[f64]) -> Vec<Probe> {
    let (dy, dx) = (Axis::of(lat).step, Axis::of(lon).step);
    let mut out = Vec::new();
    for (j, &y) in lat.iter().enumerate() {
        for (i, &x) in lon.iter().enumerate() {
            out.push(((x, y), (j, i)));
            out.push(((x + 0.3 * dx, y - 0.3 * dy), (j, i)));
        }
    }
    out
}

/// `values[band][j][i]` of a 2-D (one band) or 3-D variable.
fn bands(v: &Value) -> Vec<Vec<Vec<f64>>> {
    let rows = |m: &Value| -> Vec<Vec<f64>> { m.as_array().unwrap().iter().map(floats).collect() };
    let a = v.as_array().unwrap();
    if a[0][0].is_array() {
        a.iter().map(rows).collect()
    } else {
        vec![rows(v)]
    }
}

/// GDAL finds at every point the value the writer's library reads in the
/// cell the point is in (every band).
fn assert_values(path: &std::path::Path, lat: &[f64], lon: &[f64], data: &Value) {
    let probes = probes(lat, lon);
    let pts: Vec<(f64, f64)> = probes.iter().map(|p| p.0).collect();
    let got = values_at(path, &pts);
    let bands = bands(data);
    let want: Vec<f64> = probes
        .iter()
        .flat_map(|&(_, (j, i))| bands.iter().map(move |b| b[j][i]))
        .collect();
    assert_eq!(got, want, "{}", path.display());
}

/// Latitude ascending (the common netCDF layout), float32 coordinates
/// with a 0.1-degree longitude step: GDAL reports a south-up image (a
/// positive pixel height), its corners where the coordinates say, and
/// finds every cell's value; also for a variable in a group on the
/// root's coordinates, and for an int16 one.
#[test]
fn south_up_grid_is_placed_on_the_globe() {
    if !have_gdal("south_up_grid_is_placed_on_the_globe") {
        return;
    }
    let nc = netcdf("south_up.nc");
    let (lat, lon) = (floats(&nc["lat"]), floats(&nc["lon"]));
    assert!(lat[1] > lat[0], "the fixture's latitudes ascend");
    let m = Mount::start(&fixtures(), &["--views", "raw,json,hdr"]);
    for var in ["tas", "elev", "ocean/sst"] {
        let path = m.path(&format!("south_up.nc/{var}"));
        let info = assert_placed(&path, &lat, &lon);
        let height = floats(&info["geoTransform"])[5];
        assert!(height > 0.0, "{var}: south-up, pixel height {height}");
        assert_values(&path, &lat, &lon, &nc[var]);
    }
    assert_eq!(
        gdalinfo(&m.path("south_up.nc/tas"))["bands"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

/// Latitude descending, coordinates told by `axis` and `units = degrees`
/// only, in a netCDF-3 file: GDAL's usual north-up geotransform.
#[test]
fn north_up_grid_is_placed_on_the_globe() {
    if !have_gdal("north_up_grid_is_placed_on_the_globe") {
        return;
    }
    let nc = netcdf("north_up.nc");
    let (lat, lon) = (floats(&nc["lat"]), floats(&nc["lon"]));
    assert!(lat[1] < lat[0], "the fixture's latitudes descend");
    let m = Mount::start(&fixtures(), &["--views", "raw,json,hdr"]);
    let path = m.path("north_up.nc/z");
    let info = assert_placed(&path, &lat, &lon);
    assert!(floats(&info["geoTransform"])[5] < 0.0, "north-up");
    assert_values(&path, &lat, &lon, &nc["z"]);
}

/// Gaussian latitudes, projected metres, a transposed (lon, lat) array:
/// a header GDAL opens, without a geotransform or a coordinate system;
/// and the 1-D coordinates themselves get none either.
#[test]
fn other_grids_are_not_placed() {
    if !have_gdal("other_grids_are_not_placed") {
        return;
    }
    let m = Mount::start(&fixtures(), &["--views", "raw,json,hdr"]);
    for var in [
        "irregular.nc/g",
        "irregular.nc/xy",
        "irregular.nc/tr",
        "south_up.nc/lat",
    ] {
        let hdr = std::fs::read_to_string(m.path(&format!("{var}.hdr"))).unwrap();
        assert!(!hdr.contains("map info"), "{var}.hdr:\n{hdr}");
        let info = gdalinfo(&m.path(var));
        assert_eq!(info["driverShortName"], "ENVI", "{var}: {info}");
        assert!(info.get("geoTransform").is_none(), "{var}: {info}");
        assert!(
            info["coordinateSystem"]["wkt"]
                .as_str()
                .unwrap_or_default()
                .is_empty(),
            "{var}: {info}"
        );
    }
}

/// The demo's `tas` (Zarr v3, float64 coordinates from -90 to 90 and 0
/// to 357.5, the README's GDAL example): south-up, its polar rows' edges
/// half a step past the poles, and values where zarr-python reads them.
#[test]
fn demo_temperatures_are_placed_on_the_globe() {
    if !have_gdal("demo_temperatures_are_placed_on_the_globe") {
        return;
    }
    let demo = repo().join("examples/demo/data");
    let script = r#"
import json, sys, zarr
g = zarr.open_group(sys.argv[1], mode="r")
print(json.dumps({k: g[k][...].astype("f8").tolist() for k in ("lat", "lon", "tas")}))
"#;
    let z = python_json(script, &[demo.join("climate.zarr").to_str().unwrap()]);
    let (lat, lon) = (floats(&z["lat"]), floats(&z["lon"]));
    let m = Mount::start(&demo, &["--views", "raw,json,hdr"]);
    let path = m.path("climate.zarr/tas");
    assert_placed(&path, &lat, &lon);
    // A few cells (the whole grid is 10,512 of them, 12 bands each).
    let bands = bands(&z["tas"]);
    let cells = [(0, 0), (36, 0), (36, 100), (72, 143), (60, 17)];
    let pts: Vec<(f64, f64)> = cells.iter().map(|&(j, i)| (lon[i], lat[j])).collect();
    let want: Vec<f64> = cells
        .iter()
        .flat_map(|&(j, i)| bands.iter().map(move |b| b[j][i]))
        .collect();
    // gdallocationinfo prints 15 significant digits: enough to round back
    // to the float32 exactly.
    let got: Vec<f32> = values_at(&path, &pts).iter().map(|v| *v as f32).collect();
    let want: Vec<f32> = want.iter().map(|v| *v as f32).collect();
    assert_eq!(got, want);
}
