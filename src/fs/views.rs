//! Optional per-array views beside the raw file: `NAME.npy` (a NumPy
//! header followed by the raw data, so `np.load(mmap_mode="r")` works) and
//! `NAME.hdr` (an ENVI header, so GDAL opens `NAME` as ENVI raw).
//!
//! This module is pure: it turns an [`ArrayMeta`] and the served byte
//! order into header bytes. The tree ([`super::SlabFs`]) places them: the
//! `.npy` file is [`npy_header`] followed by exactly the bytes of the raw
//! file, the `.hdr` file is the text of [`envi_header`].
//!
//! # The `.npy` header
//!
//! We write what `numpy.save` writes, byte for byte (NumPy's
//! `numpy/lib/_format_impl.py`, `_write_array_header`), so that a reader
//! cannot tell the view from a file NumPy saved:
//!
//! ```text
//! \x93NUMPY \x01 \x00 <u16 LE header length>
//! {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }<spaces>\n
//! ```
//!
//! - The dict is Python `repr` text with the keys sorted; `descr` is the
//!   NumPy typestr in the served byte order (`|` for single bytes),
//!   `shape` a Python tuple: `()`, `(5,)`, `(3, 4)`.
//! - NumPy appends `21 - len(str(shape[0]))` spaces (room to grow the
//!   first axis in place; 21 digits hold any 64-bit size) for rank > 0.
//! - Then spaces and a final `\n` so that magic + length field + header
//!   is a multiple of 64 bytes (`ARRAY_ALIGN`): the data starts aligned,
//!   which `np.load(mmap_mode="r")` needs for an aligned `mmap` view.
//!   When the header is already aligned NumPy still pads a full 64 bytes,
//!   and so do we.
//! - Version 1.0 stores the header length in 2 bytes; a header longer
//!   than 65535 bytes (only arrays of rank > ~21000, which Zarr allows)
//!   switches to version 2.0 and a 4-byte length, as NumPy does. Note that
//!   `np.load` refuses headers above 10000 bytes unless asked
//!   (`max_header_size`), which only concerns ranks in the thousands.
//!
//! The header's length depends only on the metadata, so the `.npy` file's
//! size is known at mount time and a read at offset `o` of it is a read of
//! the raw file at `o - header.len()`.
//!
//! # The `.hdr` header
//!
//! ENVI describes a 3-D cube of `bands x lines x samples`; with
//! `interleave = bsq` (band sequential) that cube is exactly a row-major
//! array of shape `[bands, lines, samples]`, so the raw file itself is the
//! ENVI data file with `header offset = 0`. Ranks map as:
//!
//! | rank | shape | samples | lines | bands |
//! | --- | --- | --- | --- | --- |
//! | 0 | `[]` | 1 | 1 | 1 |
//! | 1 | `[x]` | x | 1 | 1 |
//! | 2 | `[y, x]` | x | y | 1 |
//! | 3 | `[b, y, x]` | x | y | b |
//! | n > 3 | `[a, .., b, y, x]` | x | y | a x .. x b (leading axes folded, row-major) |
//!
//! `data type` codes are ENVI's: 1 = uint8 (also used for bool, whose
//! bytes are 0 or 1), 2 = int16, 3 = int32, 4 = float32, 5 = float64,
//! 6 = complex64, 9 = complex128, 12 = uint16, 13 = uint32, 14 = int64
//! (also datetime64/timedelta64, whose bytes are int64 counts; the unit is
//! in the description), 15 = uint64 (14 and 15 are in ENVI's own
//! specification, but GDAL's ENVI driver did not read them as of GDAL 3.6,
//! Debian 12's: it refuses such files with "does not have a value for the
//! data_type that is recognised"). ENVI has no signed 8-bit, half-float,
//! string or opaque type: those arrays get no `.hdr` ([`envi_header`]
//! returns why). Serving int8 as code 1 would make GDAL read -1 as 255,
//! a silent wrong answer, which is worse than no header. GDAL's ENVI
//! driver also reads `samples`, `lines` and `bands` into C `int`s, so an
//! array needing more than 2^31 - 1 of any (or none at all: an empty
//! array) is refused too.
//!
//! `byte order` is 0 for little-endian, 1 for big-endian: the order the
//! mount serves (`--byte-order`). `data ignore value` (GDAL's nodata) is
//! written only when the array carries a numeric CF `_FillValue` or
//! `missing_value` attribute: the Zarr `fill_value` alone says what
//! unwritten chunks read as (often 0), not that the value means "missing".
//! Band names are not written: they would only repeat the band index, and
//! their size would grow with the number of bands.
//!
//! # Georeferencing: `map info`
//!
//! When the last two dimensions of an array (`lines`, `samples`) are a
//! regular latitude / longitude grid, the header also carries
//!
//! ```text
//! map info = {Geographic Lat/Lon, 1, 1, X0, Y0, DX, DY, WGS-84}
//! coordinate system string = {GEOGCS["GCS_WGS_1984",DATUM[...]...]}
//! ```
//!
//! so that GDAL places the image on the globe ([`GeoGrid`], built by
//! [`super::georef`], which finds and reads the coordinates).
//!
//! **Which arrays.** Dimension `lines` must have a CF latitude coordinate
//! and `samples` a CF longitude coordinate: a 1-D array named like the
//! dimension ([`geo_axis`]: `units` `degrees_north` / `degrees_east` or a
//! CF spelling of them, or `standard_name` `latitude` / `longitude`, or
//! `axis` `Y` / `X` with `units` `degrees`; every clue it carries must
//! agree, its units must be degrees, and another `standard_name`, such as
//! a rotated pole's `grid_latitude`, rules it out). Its values must be
//! evenly spaced ([`regular_axis`]: at least 2 points, finite, a non-zero
//! step, each within 1 % of a step of its place, plus two float32 ulps
//! for float32 coordinates, whose rounding alone can exceed 1 % of a fine
//! step), latitudes within ±90°. Anything else (a Gaussian grid, a
//! transposed `[lon, lat]` array, projected `x`/`y` in metres, longitudes
//! that wrap inside the axis such as `350, 355, 0, 5`) gets the header
//! without `map info`, never an error. The datum is assumed to be WGS 84,
//! as GDAL's netCDF driver assumes for lat/lon without a `grid_mapping`
//! (which is not read).
//!
//! **The numbers.** ENVI's reference pixel `1, 1` is 1-based and names
//! the upper-left *corner* of the first pixel, not its centre: GDAL's
//! ENVI driver (`ENVIDataset::ProcessMapinfo` in
//! `frmts/raw/envidataset.cpp`) turns a `map info` without `rotation=`
//! into the geotransform
//!
//! ```text
//! gt[0] = X0 - (xref - 1) * DX      gt[1] = DX
//! gt[3] = Y0 + (yref - 1) * DY      gt[5] = -DY
//! ```
//!
//! So `X0` and `Y0` are the edges of the first pixel: the first
//! longitude and latitude less half a step, and `DX` is the longitude
//! step. `DY` is the latitude step with its sign flipped, because ENVI's
//! y pixel size counts southwards:
//!
//! - latitude descending (north first): `DY` > 0, GDAL's usual north-up
//!   geotransform with a negative pixel height;
//! - latitude ascending (south first, the common netCDF case): row 0 is
//!   the southern row and `DY` < 0. GDAL then reports a positive pixel
//!   height, a *south-up* image, and that geotransform describes the
//!   served layout exactly: `gdalinfo`'s "Upper Left" is the south-west
//!   corner (image row 0), its "Lower Left" the north-west one, and
//!   `gdallocationinfo -wgs84 LON LAT` finds the right pixel. The bytes
//!   cannot be served north-up (the `.hdr` describes the raw file beside
//!   it, which is row-major in the store's order); a reader that needs
//!   north-up rows gets them from `gdalwarp`; a program that draws rows
//!   top to bottom without looking at the geotransform shows it upside
//!   down.
//!
//! Why a negative `DY` rather than `rotation=180`: GDAL's ENVI writer
//! (`WriteProjectionInfo`) spells a south-up geotransform as positive
//! sizes with `rotation=180`, and its reader special-cases exactly that
//! spelling (`bUpsideDown`: y flipped, x kept). GDAL 3.6.2 (Debian 12's)
//! reads both spellings as the same geotransform (checked by hand with
//! `gdalinfo`). The negative size goes through the plain formula above,
//! which every version of the driver we read has (the GDAL 1.x one
//! without `rotation=` support too: `gt[5] = -DY`); `rotation=180` needs
//! the special case: the general rotated formula (`gt[1] = cos(r) * DX`)
//! would flip x as well, and a reader that ignores `rotation=` would put
//! the image north-up from its southern edge.

use serde_json::Value;

use crate::dtype::{DataType, Endian};
use crate::engine::array::ArrayMeta;

/// Which files each array shows (`--views`, default `raw,json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Views {
    /// `NAME`: the flat row-major raw file.
    pub raw: bool,
    /// `NAME.json`: the sidecar.
    pub json: bool,
    /// `NAME.npy`: NumPy header + data.
    pub npy: bool,
    /// `NAME.hdr`: ENVI header describing `NAME`.
    pub hdr: bool,
}

impl Default for Views {
    fn default() -> Views {
        Views {
            raw: true,
            json: true,
            npy: false,
            hdr: false,
        }
    }
}

/// `\x93NUMPY`: the `.npy` magic string.
const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// NumPy's `ARRAY_ALIGN`: the data starts at a multiple of this.
const NPY_ALIGN: usize = 64;

/// NumPy's `GROWTH_AXIS_MAX_DIGITS`: spaces reserved after the dict so the
/// first axis can grow in place (`len(str(8 * 2**64 - 1))`).
const NPY_GROWTH_DIGITS: usize = 21;

/// The `.npy` header (magic, version, header dict, padding) for the array
/// served in `order`; the data follows it directly. Its length is a
/// multiple of 64.
pub fn npy_header(meta: &ArrayMeta, order: Endian) -> Vec<u8> {
    let shape = python_tuple(&meta.shape);
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        meta.dtype.numpy_typestr(order)
    );
    if let Some(first) = meta.shape.first() {
        let digits = first.to_string().len();
        dict.extend(std::iter::repeat_n(
            ' ',
            NPY_GROWTH_DIGITS.saturating_sub(digits),
        ));
    }
    // Version 1.0 if the padded header fits its 2-byte length, else 2.0.
    wrap_npy(&dict, 1, 2)
        .or_else(|| wrap_npy(&dict, 2, 4))
        .expect("an npy header of more than 4 GiB")
}

/// Magic, version, length field (`len_bytes` wide, little-endian), `dict`,
/// then spaces and `\n` up to the next multiple of [`NPY_ALIGN`] (always
/// at least the `\n`, and a whole 64 bytes when already aligned, as NumPy
/// does). `None` if the length does not fit the field.
fn wrap_npy(dict: &str, major: u8, len_bytes: usize) -> Option<Vec<u8>> {
    let prefix = NPY_MAGIC.len() + 2 + len_bytes;
    let hlen = dict.len() + 1; // + the final '\n'
    let pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    let total = hlen + pad;
    let len_field: Vec<u8> = match len_bytes {
        2 => u16::try_from(total).ok()?.to_le_bytes().to_vec(),
        _ => u32::try_from(total).ok()?.to_le_bytes().to_vec(),
    };
    let mut out = Vec::with_capacity(prefix + total);
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[major, 0]);
    out.extend_from_slice(&len_field);
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + pad, b' ');
    out.push(b'\n');
    Some(out)
}

/// Python's `repr` of a tuple of ints: `()`, `(5,)`, `(3, 4)`.
fn python_tuple(shape: &[u64]) -> String {
    match shape {
        [] => "()".into(),
        [n] => format!("({n},)"),
        _ => {
            let items: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", items.join(", "))
        }
    }
}

/// GDAL's ENVI driver reads `samples`, `lines` and `bands` as C `int`.
const ENVI_MAX_EXTENT: u64 = i32::MAX as u64;

/// The ENVI `.hdr` text for the raw file of `meta` served in `order`,
/// placed on the globe by `grid` when its last two dimensions are a
/// regular latitude / longitude grid (module doc), or why ENVI cannot
/// describe it (a dtype ENVI lacks, such as strings).
pub fn envi_header(
    meta: &ArrayMeta,
    order: Endian,
    grid: Option<&GeoGrid>,
) -> Result<String, String> {
    let code = envi_data_type(&meta.dtype).ok_or_else(|| {
        format!(
            "ENVI has no data type for {} (array {})",
            meta.dtype, meta.source
        )
    })?;
    let (bands, lines, samples) = envi_extents(&meta.shape).ok_or_else(|| {
        format!(
            "array {} has no elements, ENVI needs at least one",
            meta.source
        )
    })?;
    for (what, n) in [("samples", samples), ("lines", lines), ("bands", bands)] {
        if n > ENVI_MAX_EXTENT {
            return Err(format!(
                "array {} of shape {:?} needs {n} {what}, more than the {ENVI_MAX_EXTENT} GDAL's ENVI driver reads",
                meta.source, meta.shape
            ));
        }
    }
    let mut out = String::from("ENVI\n");
    out += &format!("description = {{{}}}\n", envi_description(meta));
    out += &format!("samples = {samples}\nlines = {lines}\nbands = {bands}\n");
    out += "header offset = 0\nfile type = ENVI Standard\n";
    out += &format!("data type = {code}\ninterleave = bsq\n");
    let byte_order = match order {
        Endian::Little => 0,
        Endian::Big => 1,
    };
    out += &format!("byte order = {byte_order}\n");
    if let Some(nodata) = cf_missing_value(meta) {
        out += &format!("data ignore value = {nodata}\n");
    }
    if let Some(grid) = grid {
        out += &grid.map_info();
    }
    Ok(out)
}

/// ENVI's `data type` code for `dtype`, if it has one.
fn envi_data_type(dtype: &DataType) -> Option<u8> {
    use DataType::*;
    Some(match dtype {
        // bool is stored as bytes 0/1: a faithful uint8.
        Bool | UInt8 => 1,
        Int16 => 2,
        Int32 => 3,
        Float32 => 4,
        Float64 => 5,
        Complex64 => 6,
        Complex128 => 9,
        UInt16 => 12,
        UInt32 => 13,
        // Datetimes and durations are int64 counts of their unit.
        Int64 | DateTime64(_) | TimeDelta64(_) => 14,
        UInt64 => 15,
        _ => return None,
    })
}

/// `(bands, lines, samples)` of a shape, per the table in the module doc;
/// `None` for an empty array.
fn envi_extents(shape: &[u64]) -> Option<(u64, u64, u64)> {
    if shape.contains(&0) {
        return None;
    }
    // The product of non-zero dims is bounded by the file size, which
    // ArrayMeta checked fits a u64.
    Some(match shape {
        [] => (1, 1, 1),
        [x] => (1, 1, *x),
        [lead @ .., y, x] => (lead.iter().product(), *y, *x),
    })
}

/// One line saying what the cube is: the dtype, named axes and source.
/// ENVI ends the description at the first `}`, so braces are replaced,
/// and so are control characters (line breaks would end the line; a NUL
/// ends a C reader's string, losing the closing brace).
fn envi_description(meta: &ArrayMeta) -> String {
    let axes: Vec<String> = meta
        .shape
        .iter()
        .zip(&meta.dimension_names)
        .map(|(n, name)| match name {
            Some(name) => format!("{name}={n}"),
            None => n.to_string(),
        })
        .collect();
    format!(
        "slabfs: {} [{}] from {}",
        meta.dtype,
        axes.join(", "),
        meta.source
    )
    .replace(['{', '}'], "")
    .replace(|c: char| c.is_control(), " ")
}

/// The CF `_FillValue` (else `missing_value`) attribute, if it is a
/// number: the value the data's writer declared as "missing".
fn cf_missing_value(meta: &ArrayMeta) -> Option<String> {
    ["_FillValue", "missing_value"]
        .iter()
        .find_map(|key| match meta.attributes.get(*key)? {
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

/// Which geographic axis a coordinate variable is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeoAxis {
    Latitude,
    Longitude,
}

/// CF's spellings of latitude's units (CF conventions, section 4.1).
const LATITUDE_UNITS: [&str; 6] = [
    "degrees_north",
    "degree_north",
    "degree_N",
    "degrees_N",
    "degreeN",
    "degreesN",
];

/// CF's spellings of longitude's units (section 4.2).
const LONGITUDE_UNITS: [&str; 6] = [
    "degrees_east",
    "degree_east",
    "degree_E",
    "degrees_E",
    "degreeE",
    "degreesE",
];

/// Units that say degrees without a direction: enough with `axis`.
const PLAIN_DEGREES: [&str; 2] = ["degrees", "degree"];

/// Whether the 1-D array `meta` is a CF latitude or longitude coordinate
/// in degrees, from its `units`, `standard_name` and `axis` attributes
/// (module doc, "Which arrays"). Its name and shape are the caller's to
/// check.
pub fn geo_axis(meta: &ArrayMeta) -> Option<GeoAxis> {
    let text = |key: &str| match meta.attributes.get(key) {
        Some(Value::String(s)) => Some(s.trim()),
        _ => None,
    };
    let units = text("units")?;
    let mut clues: Vec<GeoAxis> = Vec::new();
    if LATITUDE_UNITS.contains(&units) {
        clues.push(GeoAxis::Latitude);
    } else if LONGITUDE_UNITS.contains(&units) {
        clues.push(GeoAxis::Longitude);
    } else if !PLAIN_DEGREES.contains(&units) {
        return None; // not degrees: metres of a projection, radians...
    }
    match text("standard_name") {
        Some("latitude") => clues.push(GeoAxis::Latitude),
        Some("longitude") => clues.push(GeoAxis::Longitude),
        // grid_latitude (a rotated pole), projection_x_coordinate...
        Some(_) => return None,
        None => {}
    }
    match text("axis") {
        Some(a) if a.eq_ignore_ascii_case("Y") => clues.push(GeoAxis::Latitude),
        Some(a) if a.eq_ignore_ascii_case("X") => clues.push(GeoAxis::Longitude),
        _ => {}
    }
    let first = *clues.first()?;
    clues.iter().all(|c| *c == first).then_some(first)
}

/// An evenly spaced axis: coordinate `i` is `first + i * step`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegularAxis {
    pub first: f64,
    pub step: f64,
    pub len: u64,
}

/// How far a coordinate may be from its regular place, in steps: a pixel
/// placed within 1 % of its size of where its coordinate says.
const REGULAR_TOLERANCE: f64 = 0.01;

/// `values` as a [`RegularAxis`], if they are evenly spaced (module doc):
/// at least 2, finite, a non-zero step, each within
/// [`REGULAR_TOLERANCE`] of a step of `first + i * step`, where `step`
/// joins the first and last values. `float32`: the values were float32,
/// whose rounding (up to half an ulp, so about 6e-8 of the value) the
/// tolerance also allows, twice over: the ends that set the step are
/// rounded too. Without that, a 0.001-degree grid near longitude 180,
/// whose float32 ulp is 1.5e-5 degrees, would fail at 1 %.
pub fn regular_axis(values: &[f64], float32: bool) -> Option<RegularAxis> {
    let (&first, &last) = (values.first()?, values.last()?);
    if values.len() < 2 || !values.iter().all(|v| v.is_finite()) {
        return None;
    }
    let step = (last - first) / (values.len() - 1) as f64;
    if step == 0.0 || !step.is_finite() {
        return None;
    }
    let largest = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let rounding = if float32 {
        2.0 * largest * f64::from(f32::EPSILON)
    } else {
        0.0
    };
    let tolerance = REGULAR_TOLERANCE * step.abs() + rounding;
    let even = values
        .iter()
        .enumerate()
        .all(|(i, v)| (v - (first + i as f64 * step)).abs() <= tolerance);
    even.then_some(RegularAxis {
        first,
        step,
        len: values.len() as u64,
    })
}

/// A regular latitude / longitude grid: the coordinates of the last two
/// dimensions of an array (`lines`, `samples`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoGrid {
    pub lat: RegularAxis,
    pub lon: RegularAxis,
}

/// WGS 84 geographic, as GDAL's ENVI writer spells it (ESRI WKT 1, what
/// `exportToWkt` with `FORMAT=WKT1_ESRI` gives for EPSG:4326): GDAL's
/// reader finds EPSG:4326 from it.
const WGS84_ESRI_WKT: &str = r#"GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]"#;

impl GeoGrid {
    /// The grid of `lat` (the `lines` axis) and `lon` (`samples`), if
    /// the latitudes are latitudes (within ±90°, with the tolerance of
    /// [`regular_axis`] at the poles).
    pub fn new(lat: RegularAxis, lon: RegularAxis) -> Option<GeoGrid> {
        let last = lat.first + (lat.len - 1) as f64 * lat.step;
        let slack = REGULAR_TOLERANCE * lat.step.abs() + 2.0 * 90.0 * f64::from(f32::EPSILON);
        let within = |v: f64| v.abs() <= 90.0 + slack;
        (within(lat.first) && within(last)).then_some(GeoGrid { lat, lon })
    }

    /// The `map info` and `coordinate system string` lines (module doc,
    /// "The numbers"): the reference pixel `1, 1` is the first pixel's
    /// outer corner, half a step before the first coordinates; the y
    /// size is the latitude step negated (ENVI's y counts southwards).
    fn map_info(&self) -> String {
        let x0 = self.lon.first - self.lon.step / 2.0;
        let y0 = self.lat.first - self.lat.step / 2.0;
        let (dx, dy) = (self.lon.step, -self.lat.step);
        // Rust's f64 Display is the shortest text that reads back as the
        // same double, never with an exponent: GDAL's CPLAtof reads it.
        format!(
            "map info = {{Geographic Lat/Lon, 1, 1, {x0}, {y0}, {dx}, {dy}, WGS-84}}\n\
             coordinate system string = {{{WGS84_ESRI_WKT}}}\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(shape: &[u64], dtype: DataType) -> ArrayMeta {
        let fill = vec![0; dtype.size()];
        ArrayMeta::new("/data/x.zarr/v", shape.to_vec(), dtype, fill).unwrap()
    }

    /// What NumPy writes: `total` bytes, version 1.0, `dict` then spaces
    /// and `\n`. The dicts and totals below are NumPy 2.4's output, from
    /// (`.venv/bin/python`):
    ///
    /// ```python
    /// import io, numpy as np
    /// b = io.BytesIO(); np.save(b, np.zeros(shape, dtype))
    /// print(len(b.getvalue()) - np.zeros(shape, dtype).nbytes, b.getvalue()[10:80])
    /// ```
    fn numpy_v1(total: usize, dict: &str) -> Vec<u8> {
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&((total - 10) as u16).to_le_bytes());
        v.extend_from_slice(dict.as_bytes());
        v.resize(total - 1, b' ');
        v.push(b'\n');
        v
    }

    #[test]
    fn npy_headers_match_numpy() {
        let cases: &[(&[u64], DataType, Endian, &str)] = &[
            (
                &[3, 4],
                DataType::Float32,
                Endian::Little,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            ),
            (
                &[5],
                DataType::Int16,
                Endian::Big,
                "{'descr': '>i2', 'fortran_order': False, 'shape': (5,), }",
            ),
            (
                &[],
                DataType::Float64,
                Endian::Little,
                "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
            ),
            (
                &[0, 7],
                DataType::UInt8,
                Endian::Big,
                "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 7), }",
            ),
            (
                &[2, 3],
                DataType::DateTime64("ns".into()),
                Endian::Little,
                "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2, 3), }",
            ),
            (
                &[2],
                DataType::FixedBytes(5),
                Endian::Little,
                "{'descr': '|S5', 'fortran_order': False, 'shape': (2,), }",
            ),
            (
                &[4],
                DataType::Unicode(3),
                Endian::Little,
                "{'descr': '<U3', 'fortran_order': False, 'shape': (4,), }",
            ),
            (
                &[1, 2, 3],
                DataType::Bool,
                Endian::Little,
                "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 2, 3), }",
            ),
            (
                &[1152921504606846975],
                DataType::Complex128,
                Endian::Little,
                "{'descr': '<c16', 'fortran_order': False, 'shape': (1152921504606846975,), }",
            ),
        ];
        for (shape, dtype, order, dict) in cases {
            let got = npy_header(&meta(shape, dtype.clone()), *order);
            assert_eq!(got, numpy_v1(128, dict), "{dtype} {shape:?}");
        }
    }

    #[test]
    fn npy_header_lengths_are_multiples_of_64() {
        for rank in 0..40 {
            for extent in [1u64, 9, 10, 12345, 1 << 40] {
                let shape = vec![extent; rank];
                if crate::engine::index::checked_num_elements(&shape).is_none_or(|n| n > 1 << 60) {
                    continue;
                }
                let h = npy_header(&meta(&shape, DataType::Float32), Endian::Little);
                assert_eq!(h.len() % 64, 0, "rank {rank} extent {extent}");
                assert_eq!(h.last(), Some(&b'\n'));
                let declared = u16::from_le_bytes([h[8], h[9]]) as usize;
                assert_eq!(declared + 10, h.len());
            }
        }
    }

    /// NumPy switches to version 2.0 (4-byte length) when the padded
    /// header exceeds 65535 bytes. Lengths from NumPy's own
    /// `_write_array_header(fp, d, None)` with `shape = (1,) * n`: 65536
    /// bytes (version 1.0, length field 0xfff6) for n = 21800 and 65600
    /// bytes (version 2.0) for n = 21830.
    #[test]
    fn npy_header_switches_to_version_2_like_numpy() {
        let h = npy_header(&meta(&vec![1; 21800], DataType::Float32), Endian::Little);
        assert_eq!(h.len(), 65536);
        assert_eq!(&h[6..10], &[1, 0, 0xf6, 0xff]);
        let h = npy_header(&meta(&vec![1; 21830], DataType::Float32), Endian::Little);
        assert_eq!(h.len(), 65600);
        assert_eq!(&h[6..8], &[2, 0]);
        assert_eq!(u32::from_le_bytes(h[8..12].try_into().unwrap()), 65600 - 12);
        assert!(h[12..].starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, "));
        assert_eq!(h.last(), Some(&b'\n'));
    }

    fn field<'a>(hdr: &'a str, key: &str) -> Option<&'a str> {
        hdr.lines()
            .find_map(|l| l.strip_prefix(key)?.trim_start().strip_prefix('='))
            .map(str::trim)
    }

    #[test]
    fn envi_header_of_a_3d_float_cube() {
        let mut m = meta(&[12, 90, 180], DataType::Float32);
        m.dimension_names = vec![Some("time".into()), Some("lat".into()), Some("lon".into())];
        let h = envi_header(&m, Endian::Little, None).unwrap();
        assert_eq!(
            h,
            "ENVI\n\
             description = {slabfs: float32 [time=12, lat=90, lon=180] from /data/x.zarr/v}\n\
             samples = 180\n\
             lines = 90\n\
             bands = 12\n\
             header offset = 0\n\
             file type = ENVI Standard\n\
             data type = 4\n\
             interleave = bsq\n\
             byte order = 0\n"
        );
        assert_eq!(
            field(&envi_header(&m, Endian::Big, None).unwrap(), "byte order"),
            Some("1")
        );
    }

    #[test]
    fn envi_extents_by_rank() {
        // shape, then (samples, lines, bands)
        type Case<'a> = (&'a [u64], (&'a str, &'a str, &'a str));
        let cases: &[Case] = &[
            (&[], ("1", "1", "1")),
            (&[7], ("7", "1", "1")),
            (&[5, 7], ("7", "5", "1")),
            (&[3, 5, 7], ("7", "5", "3")),
            (&[2, 3, 5, 7], ("7", "5", "6")),
            (&[2, 2, 3, 5, 7], ("7", "5", "12")),
        ];
        for (shape, (samples, lines, bands)) in cases {
            let h = envi_header(&meta(shape, DataType::Int16), Endian::Little, None).unwrap();
            assert_eq!(field(&h, "samples"), Some(*samples), "{shape:?}");
            assert_eq!(field(&h, "lines"), Some(*lines), "{shape:?}");
            assert_eq!(field(&h, "bands"), Some(*bands), "{shape:?}");
        }
    }

    #[test]
    fn envi_data_type_codes() {
        use DataType::*;
        let cases = [
            (Bool, "1"),
            (UInt8, "1"),
            (Int16, "2"),
            (Int32, "3"),
            (Float32, "4"),
            (Float64, "5"),
            (Complex64, "6"),
            (Complex128, "9"),
            (UInt16, "12"),
            (UInt32, "13"),
            (Int64, "14"),
            (DateTime64("s".into()), "14"),
            (TimeDelta64("ms".into()), "14"),
            (UInt64, "15"),
        ];
        for (dt, code) in cases {
            let h = envi_header(&meta(&[2, 2], dt.clone()), Endian::Little, None).unwrap();
            assert_eq!(field(&h, "data type"), Some(code), "{dt}");
        }
    }

    #[test]
    fn envi_refuses_what_it_cannot_describe() {
        use DataType::*;
        for dt in [Int8, Float16, FixedBytes(4), Unicode(2), RawBits(2)] {
            let err = envi_header(&meta(&[2, 2], dt.clone()), Endian::Little, None).unwrap_err();
            assert!(err.contains(&dt.to_string()), "{err}");
            assert!(err.contains("/data/x.zarr/v"), "{err}");
        }
        let err = envi_header(&meta(&[3, 0, 2], Float32), Endian::Little, None).unwrap_err();
        assert!(err.contains("no elements"), "{err}");
        let err = envi_header(&meta(&[1 << 31], UInt8), Endian::Little, None).unwrap_err();
        assert!(err.contains("samples"), "{err}");
        let err = envi_header(
            &meta(&[1 << 16, 1 << 16, 2, 1], UInt8),
            Endian::Little,
            None,
        )
        .unwrap_err();
        assert!(err.contains("bands"), "{err}");
        // Exactly INT_MAX is fine.
        assert!(envi_header(&meta(&[(1 << 31) - 1], UInt8), Endian::Little, None).is_ok());
    }

    #[test]
    fn envi_nodata_from_cf_attributes_only() {
        let mut m = meta(&[4, 4], DataType::Int16);
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little, None).unwrap(),
                "data ignore value"
            ),
            None
        );
        m.attributes.insert("missing_value".into(), (-9999).into());
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little, None).unwrap(),
                "data ignore value"
            ),
            Some("-9999")
        );
        m.attributes.insert("_FillValue".into(), 1.5e20.into());
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little, None).unwrap(),
                "data ignore value"
            ),
            Some("1.5e+20")
        );
        m.attributes.insert("_FillValue".into(), "NaN".into());
        m.attributes.remove("missing_value");
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little, None).unwrap(),
                "data ignore value"
            ),
            None
        );
    }

    fn axis(first: f64, step: f64, len: u64) -> RegularAxis {
        RegularAxis { first, step, len }
    }

    const WGS84_LINE: &str = "coordinate system string = {GEOGCS[\"GCS_WGS_1984\",DATUM[\"D_WGS_1984\",SPHEROID[\"WGS_1984\",6378137.0,298.257223563]],PRIMEM[\"Greenwich\",0.0],UNIT[\"Degree\",0.0174532925199433]]}";

    /// Latitude ascending (row 0 the southernmost): the reference pixel
    /// is the south-west corner of the first pixel and the y size is
    /// negative, so GDAL's geotransform is south-up with a positive pixel
    /// height (module doc).
    #[test]
    fn envi_header_of_a_south_up_grid() {
        let mut m = meta(&[2, 4, 6], DataType::Float32);
        m.dimension_names = vec![Some("time".into()), Some("lat".into()), Some("lon".into())];
        m.attributes.insert("_FillValue".into(), (-999).into());
        let grid = GeoGrid::new(axis(-45.0, 1.5, 4), axis(100.25, 0.5, 6)).unwrap();
        let h = envi_header(&m, Endian::Little, Some(&grid)).unwrap();
        assert_eq!(
            h,
            format!(
                "ENVI\n\
                 description = {{slabfs: float32 [time=2, lat=4, lon=6] from /data/x.zarr/v}}\n\
                 samples = 6\n\
                 lines = 4\n\
                 bands = 2\n\
                 header offset = 0\n\
                 file type = ENVI Standard\n\
                 data type = 4\n\
                 interleave = bsq\n\
                 byte order = 0\n\
                 data ignore value = -999\n\
                 map info = {{Geographic Lat/Lon, 1, 1, 100, -45.75, 0.5, -1.5, WGS-84}}\n\
                 {WGS84_LINE}\n"
            )
        );
        // Without a grid, the same header without the two lines.
        let plain = envi_header(&m, Endian::Little, None).unwrap();
        assert_eq!(field(&plain, "map info"), None);
        assert!(h.starts_with(&plain));
    }

    /// Latitude descending (north first): the reference pixel is the
    /// north-west corner, the y size positive: GDAL's usual north-up.
    #[test]
    fn envi_header_of_a_north_up_grid() {
        let m = meta(&[3, 4], DataType::Float64);
        let grid = GeoGrid::new(axis(60.0, -2.5, 3), axis(-180.0, 2.5, 4)).unwrap();
        let h = envi_header(&m, Endian::Big, Some(&grid)).unwrap();
        assert_eq!(
            field(&h, "map info"),
            Some("{Geographic Lat/Lon, 1, 1, -181.25, 61.25, 2.5, 2.5, WGS-84}")
        );
        assert!(h.ends_with(&format!("{WGS84_LINE}\n")), "{h}");
        // Steps that are not short decimals are written exactly: the text
        // reads back as the same doubles.
        let step = f64::from(0.1f32);
        let grid = GeoGrid::new(axis(-0.05, step, 3), axis(0.05, step, 4)).unwrap();
        let h = envi_header(&m, Endian::Little, Some(&grid)).unwrap();
        let info = field(&h, "map info").unwrap();
        let numbers: Vec<f64> = info
            .trim_matches(['{', '}'])
            .split(',')
            .skip(3)
            .take(4)
            .map(|v| v.trim().parse().unwrap())
            .collect();
        assert_eq!(
            numbers,
            [0.05 - step / 2.0, -0.05 - step / 2.0, step, -step]
        );
    }

    #[test]
    fn latitudes_past_the_poles_are_not_a_grid() {
        let lon = axis(0.0, 1.0, 2);
        // A pole-centred grid is fine (its edges pass ±90, its points not).
        assert!(GeoGrid::new(axis(-90.0, 2.5, 73), lon).is_some());
        assert!(GeoGrid::new(axis(90.0, -2.5, 73), lon).is_some());
        assert!(GeoGrid::new(axis(-90.0, 2.5, 74), lon).is_none());
        assert!(GeoGrid::new(axis(-100.0, 10.0, 3), lon).is_none());
    }

    #[test]
    fn geo_axes_the_cf_way() {
        use GeoAxis::*;
        // Attributes, then what they make of the array.
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<GeoAxis>);
        let cases: &[Case] = &[
            (&[("units", "degrees_north")], Some(Latitude)),
            (&[("units", "degreesN")], Some(Latitude)),
            (&[("units", "degree_E")], Some(Longitude)),
            (&[("units", "degrees_east"), ("axis", "X")], Some(Longitude)),
            (
                &[("units", "degrees"), ("standard_name", "latitude")],
                Some(Latitude),
            ),
            (&[("units", "degrees"), ("axis", "X")], Some(Longitude)),
            (&[("units", "degree"), ("axis", "y")], Some(Latitude)),
            // Not enough, or not degrees, or not geographic.
            (&[("units", "degrees")], None),
            (&[("axis", "Y")], None),
            (&[("standard_name", "latitude")], None),
            (&[("units", "m"), ("axis", "X")], None),
            (
                &[("units", "radians"), ("standard_name", "longitude")],
                None,
            ),
            (
                &[
                    ("units", "degrees"),
                    ("standard_name", "grid_latitude"),
                    ("axis", "Y"),
                ],
                None,
            ),
            (
                &[
                    ("units", "degrees_north"),
                    ("standard_name", "grid_latitude"),
                ],
                None,
            ),
            // Clues that disagree.
            (&[("units", "degrees_north"), ("axis", "X")], None),
            (
                &[("units", "degrees_east"), ("standard_name", "latitude")],
                None,
            ),
        ];
        for (attrs, want) in cases {
            let mut m = meta(&[3], DataType::Float64);
            for (k, v) in *attrs {
                m.attributes.insert(k.to_string(), (*v).into());
            }
            assert_eq!(geo_axis(&m), *want, "{attrs:?}");
        }
        let mut m = meta(&[3], DataType::Float64);
        m.attributes.insert("units".into(), 1.into());
        assert_eq!(geo_axis(&m), None);
    }

    #[test]
    fn regular_axes_within_a_tolerance_of_the_step() {
        let even: Vec<f64> = (0..10).map(|i| -4.5 + i as f64).collect();
        assert_eq!(regular_axis(&even, false), Some(axis(-4.5, 1.0, 10)));
        let down: Vec<f64> = even.iter().rev().copied().collect();
        assert_eq!(regular_axis(&down, false), Some(axis(4.5, -1.0, 10)));
        // Off by 0.9 % of a step: regular; by 1.1 %: not.
        let mut near = even.clone();
        near[4] += 0.009;
        assert!(regular_axis(&near, false).is_some());
        near[4] += 0.002;
        assert_eq!(regular_axis(&near, false), None);
        // Gaussian-like latitudes: denser towards the poles.
        let gauss: Vec<f64> = (0..8)
            .map(|i| {
                (((i as f64 + 0.5) / 8.0 * 2.0 - 1.0) * 1.4)
                    .sin()
                    .to_degrees()
            })
            .collect();
        assert_eq!(regular_axis(&gauss, false), None);
        // Too few, a zero step, not finite, a wrap inside the axis.
        assert_eq!(regular_axis(&[5.0], false), None);
        assert_eq!(regular_axis(&[], false), None);
        assert_eq!(regular_axis(&[1.0, 1.0, 1.0], false), None);
        assert_eq!(regular_axis(&[0.0, f64::NAN, 2.0], false), None);
        assert_eq!(regular_axis(&[0.0, 1.0, f64::INFINITY], false), None);
        assert_eq!(regular_axis(&[350.0, 355.0, 0.0, 5.0], false), None);
        // A 0.001-degree grid near 180 stored as float32: its rounding
        // is 1.5 % of a step, allowed for float32 only.
        let fine: Vec<f64> = (0..2000)
            .map(|i| f64::from((178.0 + i as f64 * 0.001) as f32))
            .collect();
        let a = regular_axis(&fine, true).unwrap();
        assert!((a.step - 0.001).abs() < 1e-6, "{a:?}");
        assert_eq!(regular_axis(&fine, false), None);
    }

    #[test]
    fn envi_description_cannot_end_early() {
        let mut m = meta(&[2], DataType::UInt8);
        m.source = "/odd/{dir}\nname".into();
        m.dimension_names = vec![Some("x}".into())];
        let h = envi_header(&m, Endian::Little, None).unwrap();
        let line = h.lines().nth(1).unwrap();
        assert_eq!(
            line,
            "description = {slabfs: uint8 [x=2] from /odd/dir name}"
        );
    }
}
