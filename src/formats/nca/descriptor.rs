//! The NCA parameters, parsed and checked into a typed model.
//!
//! Both ways in end here: a `*.nca.json` descriptor ([`json_masters`])
//! and a netCDF variable carrying `nca_dimensions` / `nca_array`
//! attributes (built by [`super::netcdf`] with [`parse_nca_array`]). What
//! comes out is a [`MasterSpec`]: the master array (dimensions, shape,
//! dtype, fill value, units, calendar, directions) and one
//! [`PartitionSpec`] per partition, every key checked against the seed's
//! rules. Nothing here opens a file; checks that need a fragment (its
//! shape, dtype, attributes) happen when the partition is resolved
//! ([`super::partition`]).
//!
//! Keys are strict: an unknown key in the parameters, a partition or its
//! `data` is an error, because a misspelt `dimensions` or `directions`
//! would otherwise silently give a differently arranged array. At the top
//! level, beside `dimensions`, `variables` and `attributes`, only the
//! global `Conventions` the seed gives every NCA file is accepted
//! ([`global_attributes`]). The seed's
//! examples use Python literals (single quotes); real descriptors must be
//! strict JSON, and the error says so.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::NcaError;
use super::part::{self, Sel};
use crate::dtype::{DataType, Endian};

/// Where a partition's sub-array is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A classic netCDF file (`data.ncvar` names the variable).
    NetCdf,
    /// Raw binary: `data.dtype` (with byte order) and `data.shape`, C
    /// order, `data.file_offset` bytes into the file.
    Raw,
    /// A Zarr store (`data.ncvar`, if given, is the array's path in it).
    Zarr,
    /// Another JSON descriptor (`data.ncvar` names its variable).
    Nca,
    /// One value everywhere (`data.value`): CF-1.13 `unique_values`
    /// fragments. Not a descriptor format.
    Constant,
    /// A file of another format the registry knows, told by its content
    /// (a fragment without `format`): `data.ncvar` names an array of the
    /// dataset it opens into. Not a descriptor format.
    Other(&'static crate::formats::entry::FormatEntry),
}

impl Format {
    fn parse(s: &str) -> Option<Format> {
        Some(match s.to_ascii_lowercase().as_str() {
            "netcdf" | "netcdf3" | "netcdf-3" | "nc" => Format::NetCdf,
            "raw" | "binary" => Format::Raw,
            "zarr" => Format::Zarr,
            "nca" | "json" | "nca.json" => Format::Nca,
            _ => return None,
        })
    }
}

/// A partition's `data`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DataSpec {
    /// Shape of the whole sub-array.
    pub shape: Option<Vec<u64>>,
    /// Relative to the descriptor's directory; `None`: the NCA file itself.
    pub file: Option<String>,
    /// With the byte order it names (native for names without one).
    pub dtype: Option<(DataType, Endian)>,
    pub ncvar: Option<String>,
    pub file_offset: Option<u64>,
    pub scale_factor: Option<f64>,
    pub add_offset: Option<f64>,
    /// For [`Format::Constant`]: one element of `dtype`, native order.
    pub value: Option<Vec<u8>>,
}

/// One partition, as the descriptor states it.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionSpec {
    /// `Partitions[3] (index [0, 1])`, for messages.
    pub label: String,
    pub index: Vec<u64>,
    /// Half-open `[start, stop)` per master dimension.
    pub location: Vec<(u64, u64)>,
    /// The sub-array's dimension names; `None`: the master's.
    pub dimensions: Option<Vec<String>>,
    /// Directions that differ from the master's are reversed.
    pub directions: BTreeMap<String, bool>,
    pub units: Option<String>,
    pub calendar: Option<String>,
    pub part: Option<Vec<Sel>>,
    pub format: Option<Format>,
    pub data: DataSpec,
}

impl PartitionSpec {
    /// The partition's extent along each master dimension.
    pub fn extents(&self) -> Vec<u64> {
        self.location.iter().map(|&(a, b)| b - a).collect()
    }
}

/// The decoded `nca_array`.
#[derive(Debug, Clone, PartialEq)]
pub struct ArraySpec {
    /// Per master dimension: true = increasing.
    pub directions: Vec<bool>,
    /// Indices of the partitioned master dimensions.
    pub pdims: Vec<usize>,
    pub pshape: Vec<u64>,
    pub partitions: Vec<PartitionSpec>,
}

/// A master array: everything needed to build it but its fragments.
#[derive(Debug, Clone, PartialEq)]
pub struct MasterSpec {
    pub name: String,
    pub dims: Vec<String>,
    pub shape: Vec<u64>,
    pub dtype: DataType,
    /// One element, native byte order.
    pub fill: Vec<u8>,
    pub units: Option<String>,
    pub calendar: Option<String>,
    /// The variable's attributes, `nca_*` removed: the sidecar's.
    pub attributes: Map<String, Value>,
    pub array: ArraySpec,
}

/// More partitions than this is a hostile or broken descriptor.
pub const MAX_PARTITIONS: usize = 1 << 20;

/// Parse a dtype name: NumPy names (`float64`), NumPy typestrs (`<f8`,
/// whose byte order is returned) and the unambiguous C / netCDF names
/// (`double`, `short`, `byte`, ...). `float` and `int` are refused: they
/// mean 32 bits in netCDF and 64 in NumPy.
pub fn parse_dtype(s: &str) -> Result<(DataType, Endian), String> {
    if let Some(c) = s.chars().next()
        && "<>|=".contains(c)
    {
        return DataType::from_numpy(s);
    }
    let dt = match s {
        "float" | "int" => {
            return Err(format!(
                "dtype {s:?} is ambiguous (32 bits in netCDF, 64 in NumPy): \
                 write float32/float64 or int32/int64"
            ));
        }
        "double" | "f8" => DataType::Float64,
        "f4" | "single" => DataType::Float32,
        "short" | "i2" => DataType::Int16,
        "byte" | "i1" => DataType::Int8,
        "ubyte" | "u1" => DataType::UInt8,
        "ushort" | "u2" => DataType::UInt16,
        "uint" | "u4" => DataType::UInt32,
        "i4" => DataType::Int32,
        "i8" => DataType::Int64,
        "u8" => DataType::UInt64,
        "char" | "S1" => DataType::FixedBytes(1),
        other => DataType::from_zarr_v3(other)
            .filter(|d| !matches!(d, DataType::RawBits(_)))
            .ok_or_else(|| format!("unknown dtype {s:?}"))?,
    };
    Ok((dt, Endian::NATIVE))
}

pub(crate) fn u64_of(v: &Value, at: &str) -> Result<u64, NcaError> {
    v.as_u64()
        .ok_or_else(|| NcaError::invalid(at, format!("{v} is not a non-negative integer")))
}

pub(crate) fn u64_list(v: &Value, at: &str) -> Result<Vec<u64>, NcaError> {
    let list = v
        .as_array()
        .ok_or_else(|| NcaError::invalid(at, format!("{} is not a list", brief(v))))?;
    list.iter()
        .enumerate()
        .map(|(i, x)| u64_of(x, &format!("{at}[{i}]")))
        .collect()
}

pub(crate) fn str_of<'a>(v: &'a Value, at: &str) -> Result<&'a str, NcaError> {
    v.as_str()
        .ok_or_else(|| NcaError::invalid(at, format!("{} is not a string", brief(v))))
}

fn f64_of(v: &Value, at: &str) -> Result<f64, NcaError> {
    match v {
        Value::Number(n) => n.as_f64(),
        // netCDF attributes holding one value arrive as lists of one.
        Value::Array(a) if a.len() == 1 => a[0].as_f64(),
        _ => None,
    }
    .filter(|x| x.is_finite())
    .ok_or_else(|| NcaError::invalid(at, format!("{} is not a finite number", brief(v))))
}

/// A value for messages, shortened.
pub(crate) fn brief(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

/// A list of dimension names: a JSON list of strings, or one string of
/// blank-separated names.
/// The position of dimension `name` in `dims` (`what` they are, for the
/// error at `at`).
pub(crate) fn dim_position(
    name: &str,
    dims: &[String],
    at: &str,
    what: &str,
) -> Result<usize, NcaError> {
    dims.iter()
        .position(|d| d == name)
        .ok_or_else(|| NcaError::invalid(at, format!("{name:?} is not {what} ({dims:?})")))
}

/// The positions in `dims` of the partition-matrix dimensions `names`
/// listed under `key`, each at most once.
pub(crate) fn dim_positions(
    names: &[String],
    dims: &[String],
    key: &str,
    what: &str,
) -> Result<Vec<usize>, NcaError> {
    let mut out = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let d = dim_position(n, dims, &format!("{key}[{i}]"), what)?;
        if out.contains(&d) {
            return Err(NcaError::invalid(key, format!("{n:?} listed twice")));
        }
        out.push(d);
    }
    Ok(out)
}

pub(crate) fn names(v: &Value, at: &str) -> Result<Vec<String>, NcaError> {
    match v {
        Value::String(s) => Ok(s.split_whitespace().map(String::from).collect()),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| str_of(x, &format!("{at}[{i}]")).map(String::from))
            .collect(),
        _ => Err(NcaError::invalid(at, "not a list of dimension names")),
    }
}

pub(crate) fn obj<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, NcaError> {
    v.as_object()
        .ok_or_else(|| NcaError::invalid(at, format!("{} is not an object", brief(v))))
}

pub(crate) fn check_keys(
    o: &Map<String, Value>,
    allowed: &[&str],
    at: &str,
) -> Result<(), NcaError> {
    for k in o.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(NcaError::invalid(
                format!("{at}.{k}"),
                format!("unknown key (expected one of {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

/// Parse a JSON text, with a hint when it looks like the seed's Python
/// literals.
pub fn parse_json(text: &str) -> Result<Value, NcaError> {
    serde_json::from_str(text).map_err(|e| {
        let hint = if text.contains('\'') {
            " (single quotes: descriptors must be strict JSON, not Python literals)"
        } else {
            ""
        };
        NcaError::Json(format!("{e}{hint}"))
    })
}

/// Decode `nca_array` (an object, or a string holding one) for a master
/// with dimensions `dims` of extents `shape`.
pub fn parse_nca_array(v: &Value, dims: &[String], shape: &[u64]) -> Result<ArraySpec, NcaError> {
    let parsed;
    let v = match v {
        Value::String(s) => {
            parsed = parse_json(s)?;
            &parsed
        }
        other => other,
    };
    let o = obj(v, "nca_array")?;
    check_keys(
        o,
        &["directions", "pdimensions", "pshape", "Partitions"],
        "nca_array",
    )?;
    let rank = dims.len();
    const WHAT: &str = "a master dimension";
    let dim_index = |name: &str, at: &str| dim_position(name, dims, at, WHAT);
    let mut directions = vec![true; rank];
    match o.get("directions") {
        None => {}
        Some(Value::Bool(b)) if rank == 0 => {
            let _ = b;
        }
        Some(d) => {
            for (k, x) in obj(d, "nca_array.directions")? {
                let at = format!("nca_array.directions.{k}");
                let i = dim_index(k, &at)?;
                directions[i] = x
                    .as_bool()
                    .ok_or_else(|| NcaError::invalid(&at, "not true or false"))?;
            }
        }
    }
    let pdim_names = names(
        o.get("pdimensions")
            .ok_or_else(|| NcaError::Missing("nca_array.pdimensions".into()))?,
        "nca_array.pdimensions",
    )?;
    let pdims = dim_positions(&pdim_names, dims, "nca_array.pdimensions", WHAT)?;
    let pshape = u64_list(
        o.get("pshape")
            .ok_or_else(|| NcaError::Missing("nca_array.pshape".into()))?,
        "nca_array.pshape",
    )?;
    if pshape.len() != pdims.len() {
        return Err(NcaError::invalid(
            "nca_array.pshape",
            format!(
                "{} sizes for {} partitioned dimensions",
                pshape.len(),
                pdims.len()
            ),
        ));
    }
    if pshape.contains(&0) {
        return Err(NcaError::invalid("nca_array.pshape", "a size of 0"));
    }
    let list = o
        .get("Partitions")
        .ok_or_else(|| NcaError::Missing("nca_array.Partitions".into()))?
        .as_array()
        .ok_or_else(|| NcaError::invalid("nca_array.Partitions", "not a list"))?;
    if list.len() > MAX_PARTITIONS {
        return Err(NcaError::invalid(
            "nca_array.Partitions",
            format!("{} partitions, more than {MAX_PARTITIONS}", list.len()),
        ));
    }
    let mut partitions = Vec::with_capacity(list.len());
    let mut seen = std::collections::HashMap::new();
    for (i, p) in list.iter().enumerate() {
        let spec = parse_partition(p, i, dims, shape, &pshape)?;
        if let Some(j) = seen.insert(spec.index.clone(), i) {
            return Err(NcaError::invalid(
                format!("Partitions[{i}].index"),
                format!("{:?} is also the index of Partitions[{j}]", spec.index),
            ));
        }
        partitions.push(spec);
    }
    Ok(ArraySpec {
        directions,
        pdims,
        pshape,
        partitions,
    })
}

fn parse_partition(
    v: &Value,
    i: usize,
    dims: &[String],
    shape: &[u64],
    pshape: &[u64],
) -> Result<PartitionSpec, NcaError> {
    let at = format!("Partitions[{i}]");
    let o = obj(v, &at)?;
    check_keys(
        o,
        &[
            "index",
            "location",
            "dimensions",
            "format",
            "directions",
            "units",
            "calendar",
            "part",
            "data",
        ],
        &at,
    )?;
    let key = |k: &str| format!("{at}.{k}");
    let need = |k: &str| o.get(k).ok_or_else(|| NcaError::Missing(key(k)));
    let index = u64_list(need("index")?, &key("index"))?;
    if index.len() != pshape.len() {
        return Err(NcaError::invalid(
            key("index"),
            format!(
                "{} indices for {} partitioned dimensions",
                index.len(),
                pshape.len()
            ),
        ));
    }
    for (k, (&x, &n)) in index.iter().zip(pshape).enumerate() {
        if x >= n {
            return Err(NcaError::invalid(
                format!("{at}.index[{k}]"),
                format!("{x} is outside the partition matrix (pshape {pshape:?})"),
            ));
        }
    }
    let label = format!("{at} (index {index:?})");
    let loc = need("location")?
        .as_array()
        .ok_or_else(|| NcaError::invalid(key("location"), "not a list"))?;
    if loc.len() != dims.len() {
        return Err(NcaError::invalid(
            key("location"),
            format!("{} ranges for {} master dimensions", loc.len(), dims.len()),
        ));
    }
    let mut location = Vec::with_capacity(loc.len());
    for (d, r) in loc.iter().enumerate() {
        let at_d = format!("{at}.location[{d}]");
        let pair = u64_list(r, &at_d)?;
        let [a, b] = pair[..] else {
            return Err(NcaError::invalid(at_d, "not a [start, stop] pair"));
        };
        if a >= b || b > shape[d] {
            return Err(NcaError::invalid(
                at_d,
                format!(
                    "[{a}, {b}] is not a non-empty half-open range inside 0..{} ({})",
                    shape[d], dims[d]
                ),
            ));
        }
        location.push((a, b));
    }
    let dimensions = o
        .get("dimensions")
        .map(|v| names(v, &key("dimensions")))
        .transpose()?;
    if let Some(ds) = &dimensions {
        for (k, n) in ds.iter().enumerate() {
            if ds[..k].contains(n) {
                return Err(NcaError::invalid(
                    key("dimensions"),
                    format!("{n:?} listed twice"),
                ));
            }
        }
    }
    let mut directions = BTreeMap::new();
    if let Some(d) = o.get("directions") {
        for (k, x) in obj(d, &key("directions"))? {
            let b = x.as_bool().ok_or_else(|| {
                NcaError::invalid(format!("{at}.directions.{k}"), "not true or false")
            })?;
            directions.insert(k.clone(), b);
        }
    }
    let text = |k: &str| -> Result<Option<String>, NcaError> {
        o.get(k)
            .map(|v| str_of(v, &key(k)).map(String::from))
            .transpose()
    };
    let units = text("units")?;
    let calendar = text("calendar")?;
    let part = text("part")?
        .map(|s| part::parse(&s).map_err(|e| NcaError::invalid(key("part"), e)))
        .transpose()?;
    let format = text("format")?
        .map(|s| {
            Format::parse(&s).ok_or_else(|| {
                NcaError::invalid(
                    key("format"),
                    format!("format {s:?} is not supported (netCDF, raw, zarr or nca)"),
                )
            })
        })
        .transpose()?;
    let data = parse_data(need("data")?, &key("data"))?;
    Ok(PartitionSpec {
        label,
        index,
        location,
        dimensions,
        directions,
        units,
        calendar,
        part,
        format,
        data,
    })
}

fn parse_data(v: &Value, at: &str) -> Result<DataSpec, NcaError> {
    let o = obj(v, at)?;
    check_keys(
        o,
        &[
            "shape",
            "file",
            "dtype",
            "ncvar",
            "file_offset",
            "lbpack",
            "scale_factor",
            "add_offset",
        ],
        at,
    )?;
    let key = |k: &str| format!("{at}.{k}");
    if let Some(p) = o.get("lbpack")
        && u64_of(p, &key("lbpack"))? != 0
    {
        return Err(NcaError::invalid(
            key("lbpack"),
            "PP packing is not supported (only 0, unpacked)",
        ));
    }
    let text = |k: &str| -> Result<Option<String>, NcaError> {
        o.get(k)
            .map(|v| str_of(v, &key(k)).map(String::from))
            .transpose()
    };
    Ok(DataSpec {
        shape: o
            .get("shape")
            .map(|v| u64_list(v, &key("shape")))
            .transpose()?,
        file: text("file")?,
        dtype: text("dtype")?
            .map(|s| parse_dtype(&s).map_err(|e| NcaError::invalid(key("dtype"), e)))
            .transpose()?,
        ncvar: text("ncvar")?,
        file_offset: o
            .get("file_offset")
            .map(|v| u64_of(v, &key("file_offset")))
            .transpose()?,
        scale_factor: o
            .get("scale_factor")
            .map(|v| f64_of(v, &key("scale_factor")))
            .transpose()?,
        add_offset: o
            .get("add_offset")
            .map(|v| f64_of(v, &key("add_offset")))
            .transpose()?,
        value: None,
    })
}

/// The master fill value: `_FillValue` of the master's type, else
/// netCDF's default fill for it (an NCA master is a netCDF variable).
pub fn master_fill(attrs: &Map<String, Value>, dtype: &DataType) -> Result<Vec<u8>, NcaError> {
    match attrs.get("_FillValue") {
        Some(v) => {
            let v = match v {
                Value::Array(a) if a.len() == 1 => &a[0],
                other => other,
            };
            crate::formats::zarr::fill::parse_fill(v, dtype)
                .map_err(|e| NcaError::invalid("_FillValue", e))
        }
        None => Ok(default_fill(dtype)),
    }
}

/// netCDF's default fill value for a type ([`DataType::netcdf_default_fill`]).
pub fn default_fill(dtype: &DataType) -> Vec<u8> {
    dtype.netcdf_default_fill()
}

/// Top-level keys of a descriptor.
const TOP_LEVEL_KEYS: &[&str] = &["dimensions", "variables", "attributes", "Conventions"];

/// The global attributes of a parsed `*.nca.json` document: its
/// `attributes` object, with a top-level `Conventions` folded in, and a
/// note to log when the two spellings of `Conventions` disagreed.
///
/// The seed has an NCA file carry "CF" and "NCA" in its global
/// conventions attribute, so a descriptor written from one naturally says
/// `"Conventions": "CF-1.6 NCA"` beside `dimensions`; it means the same as
/// `attributes.Conventions`. When both are given and differ, nothing is
/// dropped: the value is `attributes.Conventions` followed by the
/// top-level names it lacks (both are blank- or comma-separated lists of
/// convention names, CF section 2.6.1), and the note says so.
#[allow(clippy::type_complexity)]
pub fn global_attributes(doc: &Value) -> Result<(Map<String, Value>, Option<String>), NcaError> {
    let o = obj(doc, "the descriptor")?;
    check_top_level_keys(o)?;
    let mut attrs = match o.get("attributes") {
        Some(a) => obj(a, "attributes")?.clone(),
        None => Map::new(),
    };
    let Some(top) = o.get("Conventions") else {
        return Ok((attrs, None));
    };
    let top = str_of(top, "Conventions")?;
    let note = match attrs.get("Conventions") {
        None => {
            attrs.insert("Conventions".into(), Value::from(top));
            None
        }
        Some(Value::String(inner)) if inner == top => None,
        Some(Value::String(inner)) => {
            let words = |s: &str| -> Vec<String> {
                s.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|w| !w.is_empty())
                    .map(String::from)
                    .collect()
            };
            let mut merged = words(inner);
            for w in words(top) {
                if !merged.contains(&w) {
                    merged.push(w);
                }
            }
            let merged = merged.join(" ");
            let note = format!(
                "Conventions {top:?} and attributes.Conventions {inner:?} differ; \
                 using {merged:?}"
            );
            attrs.insert("Conventions".into(), Value::from(merged));
            Some(note)
        }
        Some(other) => {
            return Err(NcaError::invalid(
                "attributes.Conventions",
                format!(
                    "{} is not a string, and Conventions {top:?} is also given",
                    brief(other)
                ),
            ));
        }
    };
    Ok((attrs, note))
}

/// Only [`TOP_LEVEL_KEYS`] at the top: a misspelt `variables` must not
/// read as an empty descriptor.
fn check_top_level_keys(o: &Map<String, Value>) -> Result<(), NcaError> {
    for k in o.keys() {
        if !TOP_LEVEL_KEYS.contains(&k.as_str()) {
            return Err(NcaError::invalid(
                format!("the descriptor.{k}"),
                format!(
                    "unknown top-level key (expected one of {}; other global attributes go \
                     under \"attributes\")",
                    TOP_LEVEL_KEYS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The masters of a parsed `*.nca.json` document, one per variable, each
/// as a result (a broken variable does not hide the others). `Err` if the
/// document as a whole is malformed (including its global attributes,
/// [`global_attributes`]).
#[allow(clippy::type_complexity)]
pub fn json_masters(doc: &Value) -> Result<Vec<(String, Result<MasterSpec, NcaError>)>, NcaError> {
    global_attributes(doc)?;
    let o = obj(doc, "the descriptor")?;
    let dims_obj = obj(
        o.get("dimensions")
            .ok_or_else(|| NcaError::Missing("dimensions".into()))?,
        "dimensions",
    )?;
    let mut dims = BTreeMap::new();
    for (k, v) in dims_obj {
        dims.insert(k.clone(), u64_of(v, &format!("dimensions.{k}"))?);
    }
    let vars = obj(
        o.get("variables")
            .ok_or_else(|| NcaError::Missing("variables".into()))?,
        "variables",
    )?;
    Ok(vars
        .iter()
        .map(|(name, v)| (name.clone(), json_master(name, v, &dims)))
        .collect())
}

fn json_master(
    name: &str,
    v: &Value,
    dims: &BTreeMap<String, u64>,
) -> Result<MasterSpec, NcaError> {
    let at = format!("variables.{name}");
    let o = obj(v, &at)?;
    let key = |k: &str| format!("{at}.{k}");
    let need = |k: &str| o.get(k).ok_or_else(|| NcaError::Missing(key(k)));
    let (dtype, _) = parse_dtype(str_of(need("dtype")?, &key("dtype"))?)
        .map_err(|e| NcaError::invalid(key("dtype"), e))?;
    let dim_names = names(need("nca_dimensions")?, &key("nca_dimensions"))?;
    let mut shape = Vec::with_capacity(dim_names.len());
    for (i, d) in dim_names.iter().enumerate() {
        if dim_names[..i].contains(d) {
            return Err(NcaError::invalid(
                key("nca_dimensions"),
                format!("{d:?} listed twice"),
            ));
        }
        shape.push(*dims.get(d).ok_or_else(|| {
            NcaError::invalid(
                key("nca_dimensions"),
                format!("{d:?} is not in the descriptor's dimensions"),
            )
        })?);
    }
    let array = parse_nca_array(need("nca_array")?, &dim_names, &shape)?;
    let mut attributes = Map::new();
    for (k, v) in o {
        if !matches!(k.as_str(), "dtype" | "nca_dimensions" | "nca_array") {
            attributes.insert(k.clone(), v.clone());
        }
    }
    let fill = master_fill(&attributes, &dtype).map_err(|e| match e {
        NcaError::Invalid { detail, .. } => NcaError::invalid(key("_FillValue"), detail),
        other => other,
    })?;
    let string_attr = |k: &str| -> Result<Option<String>, NcaError> {
        attributes
            .get(k)
            .map(|v| str_of(v, &key(k)).map(String::from))
            .transpose()
    };
    Ok(MasterSpec {
        name: name.to_string(),
        units: string_attr("units")?,
        calendar: string_attr("calendar")?,
        dims: dim_names,
        shape,
        dtype,
        fill,
        attributes,
        array,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(partitions: Value) -> Value {
        json!({
            "dimensions": {"t": 4, "x": 3},
            "variables": {"v": {
                "dtype": "float64", "nca_dimensions": "t x", "units": "K",
                "nca_array": {"pdimensions": ["t"], "pshape": [2], "Partitions": partitions}
            }}
        })
    }

    fn part(index: u64, loc: Value) -> Value {
        json!({"index": [index], "location": loc, "data": {"file": "a.nc", "ncvar": "v"}})
    }

    fn one(d: &Value) -> Result<MasterSpec, NcaError> {
        let mut m = json_masters(d).unwrap();
        m.remove(0).1
    }

    #[test]
    fn parses_a_descriptor() {
        let d = doc(json!([
            part(0, json!([[0, 2], [0, 3]])),
            part(1, json!([[2, 4], [0, 3]]))
        ]));
        let m = one(&d).unwrap();
        assert_eq!(m.shape, vec![4, 3]);
        assert_eq!(m.units.as_deref(), Some("K"));
        assert_eq!(m.array.partitions[1].location, vec![(2, 4), (0, 3)]);
        assert_eq!(m.fill, 9.969_209_968_386_869e36f64.to_ne_bytes());
        // The same as a JSON string.
        let mut s = d.clone();
        let arr = s["variables"]["v"]["nca_array"].to_string();
        s["variables"]["v"]["nca_array"] = Value::String(arr);
        assert_eq!(one(&s).unwrap(), m);
    }

    #[test]
    fn rejects_bad_partitions() {
        let err = |p: Value| one(&doc(json!([p]))).unwrap_err().to_string();
        assert!(err(json!({"index": [0], "data": {}})).contains("Partitions[0].location"));
        assert!(err(part(0, json!([[0, 5], [0, 3]]))).contains("inside 0..4"));
        assert!(err(part(0, json!([[2, 2], [0, 3]]))).contains("non-empty"));
        assert!(err(part(2, json!([[0, 2], [0, 3]]))).contains("outside the partition matrix"));
        assert!(err(part(0, json!([[0, 2]]))).contains("1 ranges for 2"));
        let mut p = part(0, json!([[0, 2], [0, 3]]));
        p["dimension"] = json!(["t", "x"]);
        assert!(err(p).contains("unknown key"));
        let mut p = part(0, json!([[0, 2], [0, 3]]));
        p["part"] = json!("[(0, 2), [0, 1, 2]");
        assert!(err(p).contains("Partitions[0].part"));
        let mut p = part(0, json!([[0, 2], [0, 3]]));
        p["data"]["dtype"] = json!("float");
        assert!(err(p).contains("ambiguous"));
        let mut p = part(0, json!([[0, 2], [0, 3]]));
        p["data"]["lbpack"] = json!(1);
        assert!(err(p).contains("PP packing"));
        let twice = one(&doc(json!([
            part(0, json!([[0, 2], [0, 3]])),
            part(0, json!([[2, 4], [0, 3]]))
        ])))
        .unwrap_err()
        .to_string();
        assert!(twice.contains("also the index of Partitions[0]"), "{twice}");
    }

    #[test]
    fn rejects_bad_masters() {
        let mut d = doc(json!([]));
        d["variables"]["v"]["nca_dimensions"] = json!("t y");
        assert!(one(&d).unwrap_err().to_string().contains("\"y\""));
        let mut d = doc(json!([]));
        d["variables"]["v"]["_FillValue"] = json!("x");
        assert!(one(&d).unwrap_err().to_string().contains("_FillValue"));
        let mut d = doc(json!([]));
        d["variables"]["v"]["nca_array"]["directions"] = json!({"z": true});
        assert!(
            one(&d)
                .unwrap_err()
                .to_string()
                .contains("not a master dimension")
        );
        assert!(json_masters(&json!({"variables": {}})).is_err());
        let e = parse_json("{'a': 1}").unwrap_err().to_string();
        assert!(e.contains("strict JSON"), "{e}");
    }

    /// Issue 16, item 6: the seed's global `Conventions` at the top level.
    #[test]
    fn top_level_conventions_is_a_global_attribute() {
        let plain = doc(json!([part(0, json!([[0, 4], [0, 3]]))]));
        let mut d = plain.clone();
        d["Conventions"] = json!("CF-1.6 NCA");
        assert_eq!(one(&d).unwrap(), one(&plain).unwrap());
        let (attrs, note) = global_attributes(&d).unwrap();
        assert_eq!(attrs["Conventions"], json!("CF-1.6 NCA"));
        assert_eq!(note, None);
        // Said twice alike: one value, nothing to note.
        d["attributes"] = json!({"Conventions": "CF-1.6 NCA", "title": "t"});
        let (attrs, note) = global_attributes(&d).unwrap();
        assert_eq!(
            attrs,
            *json!({"Conventions": "CF-1.6 NCA", "title": "t"})
                .as_object()
                .unwrap()
        );
        assert_eq!(note, None);
        // Differently: both kept, attributes' names first, and a note.
        d["attributes"] = json!({"Conventions": "CF-1.8, ACDD-1.3"});
        let (attrs, note) = global_attributes(&d).unwrap();
        assert_eq!(attrs["Conventions"], json!("CF-1.8 ACDD-1.3 CF-1.6 NCA"));
        let note = note.unwrap();
        assert!(
            note.contains("\"CF-1.6 NCA\"") && note.contains("ACDD-1.3"),
            "{note}"
        );
        assert!(json_masters(&d).unwrap()[0].1.is_ok());
        // Not a string; or beside a non-string attributes.Conventions.
        d["Conventions"] = json!(["CF-1.6", "NCA"]);
        let e = json_masters(&d).unwrap_err().to_string();
        assert!(
            e.contains("Conventions") && e.contains("not a string"),
            "{e}"
        );
        d["Conventions"] = json!("CF-1.6 NCA");
        d["attributes"] = json!({"Conventions": 3});
        let e = json_masters(&d).unwrap_err().to_string();
        assert!(e.contains("attributes.Conventions"), "{e}");
    }

    /// Strict elsewhere: other top-level keys, and every key inside
    /// `nca_array`, its partitions and their `data`.
    #[test]
    fn unknown_keys_are_named() {
        let plain = doc(json!([part(0, json!([[0, 4], [0, 3]]))]));
        for key in ["conventions", "title", "variable"] {
            let mut d = plain.clone();
            d[key] = json!("x");
            let e = json_masters(&d).unwrap_err().to_string();
            assert!(
                e.contains(&format!("the descriptor.{key}")) && e.contains("unknown top-level key"),
                "{e}"
            );
            assert!(e.contains("\"attributes\""), "{e}");
        }
        let mut d = plain.clone();
        d["Conventions"] = json!("CF-1.6 NCA");
        d["variables"]["v"]["nca_array"]["Conventions"] = json!("CF-1.6 NCA");
        let e = one(&d).unwrap_err().to_string();
        assert!(e.contains("nca_array.Conventions: unknown key"), "{e}");
        let mut d = plain.clone();
        d["variables"]["v"]["nca_array"]["pdimension"] = json!(["t"]);
        assert!(
            one(&d)
                .unwrap_err()
                .to_string()
                .contains("nca_array.pdimension")
        );
        let mut d = plain;
        d["variables"]["v"]["nca_array"]["Partitions"][0]["data"]["ncvars"] = json!("v");
        let e = one(&d).unwrap_err().to_string();
        assert!(e.contains("Partitions[0].data.ncvars: unknown key"), "{e}");
    }

    #[test]
    fn dtypes() {
        assert_eq!(parse_dtype("double").unwrap().0, DataType::Float64);
        assert_eq!(parse_dtype(">i2").unwrap(), (DataType::Int16, Endian::Big));
        assert_eq!(parse_dtype("uint8").unwrap().0, DataType::UInt8);
        assert!(parse_dtype("int").is_err());
        assert!(parse_dtype("r16").is_err());
    }
}
