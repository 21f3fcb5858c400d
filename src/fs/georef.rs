//! The coordinates behind a `.hdr`'s `map info`: for an array whose last
//! two dimensions are named, find each dimension's coordinate variable
//! among the dataset's arrays, read it, and tell whether the two make a
//! regular latitude / longitude grid ([`views::GeoGrid`]; what counts and
//! what the header says is in the module doc of [`views`]).
//!
//! This runs when an array's [`super::tree::Tracked`] is built: when its
//! dataset is opened (at mount for a mount of one dataset, on the first
//! lookup in an archive) and when a refresh rebuilds it. So a coordinate
//! is read on the thread that opens the dataset, through the same read
//! path as a FUSE read ([`crate::engine::read::read_at`]), once per tree
//! build however many arrays share it ([`Coordinates`] keeps what it
//! read). Only with the hdr view: without it nothing here runs.
//!
//! Nothing here fails the mount or the header: a coordinate that is
//! missing, not a latitude or longitude, irregular, too large to read
//! ([`MAX_COORDINATE_BYTES`]) or unreadable leaves the header without
//! `map info`, with a debug line (an info line for one too large, a
//! warning for a failed read, naming the coordinate and an array on it).
//!
//! Which array is a dimension's coordinate variable: the nearest array
//! named like the dimension, looking in the array's own directory and
//! then in each one above it, as netCDF-4 groups see the dimensions of
//! their ancestors. The nearest one decides: if it is not a coordinate
//! (not 1-D, not named by its own dimension, not CF latitude/longitude),
//! no farther one is tried. The paths looked at are kept
//! ([`Coordinates::grid`]) so that a refresh that changes, adds or
//! removes one of them rebuilds the header of the arrays that looked
//! ([`super::reconcile`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::paths::{child_path, name_of, parent_of};
use super::views::{self, GeoAxis, GeoGrid, RegularAxis};
use crate::dtype::{DataType, Endian};
use crate::engine::array::{ArrayMeta, ArraySource};
use crate::engine::read::read_at;

/// The largest coordinate variable read: 8 MiB, a million float64
/// points (a global axis at 0.00036°, about 40 m), far beyond any
/// lat/lon grid GDAL would be asked to place. A coordinate is read whole
/// when its dataset opens, in an archive on the FUSE thread of the lookup
/// that opened it, and the regularity check needs every value: a larger
/// one (a 1-D variable that merely shares a dimension's name) is not
/// read, and its arrays get no `map info`.
pub(super) const MAX_COORDINATE_BYTES: u64 = 8 << 20;

/// The arrays of one tree being built, and the coordinate axes read from
/// them so far (by path; `None`: not a regular latitude or longitude).
/// Used by one thread for one build, hence the `RefCell`.
pub(super) struct Coordinates<'a> {
    arrays: Option<&'a BTreeMap<String, Arc<dyn ArraySource>>>,
    axes: RefCell<HashMap<String, Option<(GeoAxis, RegularAxis)>>>,
}

impl<'a> Coordinates<'a> {
    /// Coordinates looked up among `arrays` (mount paths, as the tree
    /// holds them).
    pub fn new(arrays: &'a BTreeMap<String, Arc<dyn ArraySource>>) -> Coordinates<'a> {
        Coordinates {
            arrays: Some(arrays),
            axes: RefCell::new(HashMap::new()),
        }
    }

    /// No coordinates: every header without `map info`.
    #[cfg(test)]
    pub fn none() -> Coordinates<'static> {
        Coordinates {
            arrays: None,
            axes: RefCell::new(HashMap::new()),
        }
    }

    /// The grid of the array at `path` with metadata `meta`, if its last
    /// two dimensions have regular latitude (`lines`) and longitude
    /// (`samples`) coordinates; and the paths looked at to decide (where
    /// a coordinate was or could have been).
    pub fn grid(&self, path: &str, meta: &ArrayMeta) -> (Option<GeoGrid>, Vec<String>) {
        let mut looked = Vec::new();
        let Some(arrays) = self.arrays else {
            return (None, looked);
        };
        let ([.., Some(y), Some(x)], [.., ny, nx]) =
            (meta.dimension_names.as_slice(), meta.shape.as_slice())
        else {
            return (None, looked);
        };
        if y == x {
            return (None, looked);
        }
        let Some(lat) = self.axis(arrays, path, y, *ny, GeoAxis::Latitude, &mut looked) else {
            return (None, looked);
        };
        let Some(lon) = self.axis(arrays, path, x, *nx, GeoAxis::Longitude, &mut looked) else {
            return (None, looked);
        };
        let grid = GeoGrid::new(lat, lon);
        if grid.is_none() {
            log::debug!("no map info in {path}.hdr: its latitudes pass ±90");
        }
        (grid, looked)
    }

    /// The regular `want` axis of length `n` that is the coordinate of
    /// dimension `dim` of the array at `path`, noting in `looked` the
    /// paths looked at.
    fn axis(
        &self,
        arrays: &BTreeMap<String, Arc<dyn ArraySource>>,
        path: &str,
        dim: &str,
        n: u64,
        want: GeoAxis,
        looked: &mut Vec<String>,
    ) -> Option<RegularAxis> {
        let mut dir = parent_of(path);
        let (at, coordinate) = loop {
            let candidate = child_path(dir, dim);
            looked.push(candidate.clone());
            if let Some(c) = arrays.get(&candidate) {
                break (candidate, c);
            }
            if dir.is_empty() {
                log::debug!("no map info in {path}.hdr: no coordinate variable {dim}");
                return None;
            }
            dir = parent_of(dir);
        };
        if at == path {
            return None; // the array itself (not 1-D, so not a coordinate)
        }
        let found = *self
            .axes
            .borrow_mut()
            .entry(at.clone())
            .or_insert_with(|| read_axis(&at, coordinate.as_ref(), path));
        match found {
            Some((role, axis)) if role == want && axis.len == n => Some(axis),
            Some(_) => {
                let want = match want {
                    GeoAxis::Latitude => "latitude (the lines' axis)",
                    GeoAxis::Longitude => "longitude (the samples' axis)",
                };
                log::debug!("no map info in {path}.hdr: {at} is not its {want} of {n} points");
                None
            }
            None => None,
        }
    }
}

/// The coordinate variable at `path` as a geographic axis, if it is a
/// regular CF latitude or longitude; `for_path` is an array whose header
/// asked, for the logs.
fn read_axis(
    path: &str,
    coordinate: &dyn ArraySource,
    for_path: &str,
) -> Option<(GeoAxis, RegularAxis)> {
    let meta = coordinate.meta();
    let why = |why: &str| log::debug!("no map info in {for_path}.hdr: {path} {why}");
    if meta.rank() != 1 {
        why("is not 1-D");
        return None;
    }
    if let Some(Some(own)) = meta.dimension_names.first()
        && own != name_of(path)
    {
        why("is not a coordinate variable (its dimension has another name)");
        return None;
    }
    let Some(role) = views::geo_axis(meta) else {
        why("is not a CF latitude or longitude in degrees");
        return None;
    };
    // Served as stored: its values would need unpacking first.
    if meta.attributes.contains_key("scale_factor") || meta.attributes.contains_key("add_offset") {
        why("is packed (scale_factor / add_offset)");
        return None;
    }
    if decode(&meta.dtype, &[]).is_none() {
        why("is not of a real number type");
        return None;
    }
    if meta.nbytes() > MAX_COORDINATE_BYTES {
        log::info!(
            "no map info in {for_path}.hdr (nor other arrays on {path}): the coordinate {path} has {} bytes, more than the {MAX_COORDINATE_BYTES} read for one",
            meta.nbytes()
        );
        return None;
    }
    let mut bytes = vec![0u8; meta.nbytes() as usize];
    match read_at(coordinate, 0, &mut bytes, Endian::NATIVE) {
        Ok(n) if n == bytes.len() => {}
        Ok(n) => {
            log::warn!(
                "no map info in {for_path}.hdr (nor other arrays on {path}): reading the coordinate {path} gave {n} of {} bytes",
                bytes.len()
            );
            return None;
        }
        Err(e) => {
            log::warn!(
                "no map info in {for_path}.hdr (nor other arrays on {path}): reading the coordinate {path} failed: {e}"
            );
            return None;
        }
    }
    let values = decode(&meta.dtype, &bytes)?;
    let axis = views::regular_axis(&values, meta.dtype == DataType::Float32);
    if axis.is_none() {
        why("is not evenly spaced");
    }
    axis.map(|a| (role, a))
}

/// Native-order elements of a real number type as f64 (integers above
/// 2^53 rounded, which no coordinate in degrees is), read by the codecs'
/// element reader; `None` for other types (booleans, complex, opaque).
fn decode(dtype: &DataType, bytes: &[u8]) -> Option<Vec<f64>> {
    use crate::codec::numeric::{Element, Prim};
    let prim = Prim::of(dtype).filter(|p| !matches!(p, Prim::Bool | Prim::C64 | Prim::C128))?;
    let el = Element {
        prim,
        endian: crate::dtype::Endian::NATIVE,
    };
    Some(
        bytes
            .chunks_exact(el.size())
            .map(|b| el.read(b).as_f64())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::index::Region;
    use crate::error::{Error, Result};
    use serde_json::json;

    /// A 1-D float64 array of `values`, or one whose reads fail.
    struct Coord {
        meta: ArrayMeta,
        values: Option<Vec<f64>>,
    }

    impl ArraySource for Coord {
        fn meta(&self) -> &ArrayMeta {
            &self.meta
        }
        fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
            let Some(values) = &self.values else {
                return Err(Error::metadata(&self.meta.source, "chunk lost"));
            };
            let start = region.start[0] as usize;
            for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
                chunk.copy_from_slice(&values[start + i].to_ne_bytes());
            }
            Ok(())
        }
    }

    fn array(
        path: &str,
        shape: &[u64],
        dims: &[&str],
        units: &str,
        values: Option<Vec<f64>>,
    ) -> Arc<dyn ArraySource> {
        let mut meta = ArrayMeta::new(path, shape.to_vec(), DataType::Float64, vec![0; 8]).unwrap();
        meta.dimension_names = dims.iter().map(|d| Some(d.to_string())).collect();
        if !units.is_empty() {
            meta.attributes.insert("units".into(), json!(units));
        }
        Arc::new(Coord { meta, values })
    }

    fn steps(first: f64, step: f64, n: usize) -> Option<Vec<f64>> {
        Some((0..n).map(|i| first + i as f64 * step).collect())
    }

    /// `file.nc/g/t` on (lat, lon) of the root, its sibling `u` on the
    /// group's own `lat`, which is not a latitude.
    fn dataset(lat: Option<Vec<f64>>) -> BTreeMap<String, Arc<dyn ArraySource>> {
        let mut a: BTreeMap<String, Arc<dyn ArraySource>> = BTreeMap::new();
        a.insert(
            "file.nc/lat".into(),
            array("lat", &[3], &["lat"], "degrees_north", lat),
        );
        a.insert(
            "file.nc/lon".into(),
            array("lon", &[4], &["lon"], "degrees_east", steps(10.0, 0.5, 4)),
        );
        a.insert(
            "file.nc/g/t".into(),
            array("t", &[2, 3, 4], &["time", "lat", "lon"], "K", None),
        );
        a
    }

    #[test]
    fn coordinates_are_found_in_the_directories_above() {
        let arrays = dataset(steps(-1.0, 1.0, 3));
        let coords = Coordinates::new(&arrays);
        let meta = arrays["file.nc/g/t"].meta().clone();
        let (grid, looked) = coords.grid("file.nc/g/t", &meta);
        let grid = grid.unwrap();
        assert_eq!(
            (grid.lat.first, grid.lat.step, grid.lat.len),
            (-1.0, 1.0, 3)
        );
        assert_eq!(
            (grid.lon.first, grid.lon.step, grid.lon.len),
            (10.0, 0.5, 4)
        );
        assert_eq!(
            looked,
            [
                "file.nc/g/lat",
                "file.nc/lat",
                "file.nc/g/lon",
                "file.nc/lon"
            ]
        );
        // The nearest one decides: a `lat` in the group that is not a
        // latitude hides the root's.
        let mut arrays = arrays;
        arrays.insert(
            "file.nc/g/lat".into(),
            array("lat", &[3], &["lat"], "m", steps(0.0, 1.0, 3)),
        );
        let coords = Coordinates::new(&arrays);
        let (grid, looked) = coords.grid("file.nc/g/t", &meta);
        assert_eq!(grid, None);
        assert_eq!(looked, ["file.nc/g/lat"]);
    }

    #[test]
    fn a_coordinate_that_cannot_be_read_leaves_no_map_info() {
        let arrays = dataset(None);
        let coords = Coordinates::new(&arrays);
        let meta = arrays["file.nc/g/t"].meta().clone();
        assert_eq!(coords.grid("file.nc/g/t", &meta).0, None);
        // Read once per build, whatever asks again.
        assert_eq!(coords.axes.borrow().get("file.nc/lat"), Some(&None));
    }

    #[test]
    fn coordinates_of_the_wrong_length_role_or_size_are_not_used() {
        // lat of 3 points, an array on a (lat=3, lat=3) or (lon, lat) grid.
        let mut arrays = dataset(steps(-1.0, 1.0, 3));
        arrays.insert(
            "file.nc/v".into(),
            array("v", &[4, 3], &["lon", "lat"], "", None),
        );
        arrays.insert(
            "file.nc/w".into(),
            array("w", &[3, 3], &["lat", "lat"], "", None),
        );
        let coords = Coordinates::new(&arrays);
        for p in ["file.nc/v", "file.nc/w"] {
            assert_eq!(coords.grid(p, arrays[p].meta()).0, None, "{p}");
        }
        // A coordinate larger than MAX_COORDINATE_BYTES is not read,
        // regular as it is; one point less is.
        let n = MAX_COORDINATE_BYTES / 8 + 1;
        let step = 90.0 / n as f64;
        let mut big = BTreeMap::new();
        big.insert(
            "lat".to_string(),
            array(
                "lat",
                &[n],
                &["lat"],
                "degrees_north",
                steps(-45.0, step, n as usize),
            ),
        );
        big.insert(
            "lon".to_string(),
            array("lon", &[2], &["lon"], "degrees_east", steps(0.0, 1.0, 2)),
        );
        let meta = array("t", &[n, 2], &["lat", "lon"], "", None)
            .meta()
            .clone();
        assert_eq!(Coordinates::new(&big).grid("t", &meta).0, None);
        let n = n - 1;
        big.insert(
            "lat".to_string(),
            array(
                "lat",
                &[n],
                &["lat"],
                "degrees_north",
                steps(-45.0, step, n as usize),
            ),
        );
        let meta = array("t", &[n, 2], &["lat", "lon"], "", None)
            .meta()
            .clone();
        assert!(Coordinates::new(&big).grid("t", &meta).0.is_some());
    }
}
