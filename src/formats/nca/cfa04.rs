//! CFA-0.4 (`cfa_array`): the legacy aggregation form that cf-python 3.0
//! to 3.13 wrote (`cf.write(..., fmt="CFA3")`), read into the NCA model.
//!
//! A CFA variable is a scalar netCDF variable with
//!
//! - `cf_role = "cfa_variable"` (`"cfa_private"` marks the sub-arrays
//!   stored in the CFA file itself, which are hidden like NCA's
//!   `nca_private` ones);
//! - `cfa_dimensions`: the master's blank-separated dimension names
//!   (absent or blank: a scalar master);
//! - `cfa_array`: a JSON string with `pmdimensions`, `pmshape`, `base`
//!   and `Partitions`, each partition with `index`, `location`,
//!   `pdimensions`, `reverse`, `punits`, `pcalendar`, `part` and
//!   `subarray` (`format`, `shape`, `file`, `dtype`, `ncvar`, `varid`,
//!   `file_offset`).
//!
//! Each partition becomes a [`PartitionSpec`], so the assembly, the
//! conforming, the checks, confinement and missing files are exactly
//! NCA's ([`super::aggregate`], [`super::partition`]). What differs is
//! only the notation, converted here:
//!
//! | CFA-0.4 | NCA model |
//! | --- | --- |
//! | `location` `[start, stop]`, stop **inclusive** | `[start, stop + 1)` |
//! | `part` `[start, stop, step]`, stop an **inclusive** bound | `range(start, stop + 1, step)`; negative step: `range(start, stop - 1, step)`, or down to 0 when stop is 0 |
//! | `part` `(i, j, ...)`: an index list (`(i,)` for one) | `[i, j, ...]` |
//! | `part` `"[]"`: the whole sub-array | no `part` |
//! | `pdimensions`, `reverse` (dimension names), `punits`, `pcalendar` | `dimensions`, `directions` (`false` for the reversed ones), `units`, `calendar` |
//! | `subarray.file` relative to `base` | `data.file` relative to the CFA file |
//! | `subarray.dtype`: netCDF type names (`float` is 32 bits, `int` 32 bits) | the dtype |
//!
//! # What was checked against which source
//!
//! The conventions document (NCAS-CMS/cfa-conventions,
//! `deprecated_versions/0.5/source/cfa_attributes.rst`: the repository
//! has no `deprecated_versions/0.4` directory; 0.5 is the attribute
//! reference of the JSON form that cf-python called CFA-0.4, and the
//! 0.3 document has the same rules for `location` and `part`) and the
//! code of cf-python v3.0.0 and v3.13.1 (`cf/read_write/netcdf/
//! netcdfread.py` `_create_data`, `netcdfwrite.py` `_write_cfa_data`,
//! `cf/data/data.py` `dumpd` / `loadd`):
//!
//! - `location` is inclusive: the document says "the range `[3, 5]` is
//!   equivalent to indices 3, 4 and 5"; the writer stores
//!   `(x[0], x[1] - 1)` and the reader adds 1 to the stop. (The
//!   document's own examples still show half-open locations, e.g.
//!   `[[0, 12], ...]` for a sub-array of 12: they contradict its text
//!   and the code, and are not followed.)
//! - `part`: square brackets are `[start, stop, step]` ranges with an
//!   inclusive stop bound ("`[0, 3, 1]` is equivalent to `(0, 1, 2,
//!   3)`", "`[10, 4, -2]` to `(10, 8, 6, 4)`"), round brackets index
//!   lists. The writer stores `slice.indices(n)` as `[start, stop - 1,
//!   step]` for positive steps, `[start, stop + 1, step]` for negative
//!   ones (`[start, 0, step]` when the slice runs to the start), lists as
//!   Python tuples (`str(tuple)`, so `(3,)` for one index); the reader
//!   inverts exactly that, which is what this module does.
//! - `pmshape` absent: every partition-matrix dimension has size 1;
//!   `index` absent: the single partition; `location` absent: the whole
//!   master; `pdimensions` absent: the master's dimensions; `punits` /
//!   `pcalendar` absent: the master's; `subarray.format` absent: netCDF
//!   (the reader's default, and the CFA file's own format);
//!   `subarray.file` absent or `""`: the CFA file itself; `ncvar` wins
//!   over `varid`.
//! - `base`: relative to the CFA file's directory (the reader joins it to
//!   `dirname(cfa_file)`; `""` is that directory); `file` is joined to
//!   `base` (an absolute `file` stays absolute).
//! - cf-python recognises a CFA file by "CFA" in the global
//!   `Conventions` and a CFA variable by `cf_role`; slabfs needs only
//!   the variable's attributes (`cfa_array` cannot mean anything else).
//!
//! And by running cf-python 3.13.1 (tests/fixtures/nca/cf313 and
//! generate_cf313.py): files its writer made (inclusive locations, `part`
//! from slices with steps, `reverse`, `pdimensions`, `"varid": null`,
//! `base: ""`) read here exactly as it computed the data in memory; its
//! reader reads the netCDF4-python-written fixtures exactly as expected
//! except where `reverse` is used. Its writer could not write partitions
//! whose dtype differs (it calls a method that does not exist) nor
//! in-memory partitions (`KeyError` on the private dimensions); its
//! reader fails on a partition without `file` (a private variable) or
//! `location`, and on a partition matrix with a hole. slabfs reads all
//! of these.
//!
//! Where slabfs departs from cf-python 3.x's reader, on purpose:
//!
//! - cf-python's `loadd` looks for the partition units under `p_units`
//!   and the reversed dimensions under `flip`, while its `netcdfread`
//!   stores them as `Units` and `reverse`: it ignores `punits`,
//!   `pcalendar` and `reverse` and serves such partitions unconverted
//!   and unreversed. slabfs applies them as the document says.
//! - cf-python reads `subarray.dtype` with `numpy.dtype(...)`, for which
//!   `float` is 64 bits; the document says netCDF type names, so slabfs
//!   reads `float` as 32 bits (and checks it against the fragment).
//! - `file` relative while `base` is absent: the document says names
//!   are then absolute, cf-python opens them relative to its working
//!   directory; slabfs resolves them against the CFA file's directory
//!   (the only stable anchor), under the usual confinement.
//! - `punits` absent: the document says the master's units. slabfs, as
//!   for NCA partitions, uses the fragment's own `units` attribute when
//!   it has one (converting, or refusing units it cannot convert) rather
//!   than serving values it knows to be in other units; where a
//!   fragment's units equal the master's (everything cf-python could
//!   aggregate without `punits`) this is the same.
//!
//! Refused with an error naming the key: `PP`/`UM` sub-arrays, a
//! `varid` without `ncvar`, remote (`http`...) files or bases, keys that
//! are not CFA-0.4 (with a hint when they are NCA's or an earlier
//! draft's spelling: `data`, `dimensions`, `flip`, `units`...), and
//! cf-python's `_auxiliary_mask` (a mask it never applied on read).
//! cf-python's `_HDF_chunks` (a chunking hint) is ignored.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::aggregate::Aggregation;
use super::descriptor::{
    ArraySpec, DataSpec, Format, MAX_PARTITIONS, MasterSpec, PartitionSpec, brief, check_keys,
    dim_positions, master_fill, names, obj, parse_dtype, str_of, u64_list, u64_of,
};
use super::error::NcaError;
use super::fragment::Context;
use super::ncfile::{NcFile, Var};
use super::part::Sel;
use crate::dtype::{DataType, Endian};
use crate::engine::array::ArraySource;
use crate::error::Result;

/// Whether `v` is a CFA-0.4 variable (`cfa_array`, or `cf_role =
/// "cfa_variable"`, which without `cfa_array` is a load error).
pub fn is_cfa_variable(v: &Var) -> bool {
    !is_private(v) && (v.attributes.contains_key("cfa_array") || role(v) == Some("cfa_variable"))
}

/// Whether `v` is a CFA private variable (a sub-array stored in the CFA
/// file, not shown).
pub fn is_private(v: &Var) -> bool {
    role(v) == Some("cfa_private")
}

fn role(v: &Var) -> Option<&str> {
    v.attributes.get("cf_role")?.as_str().map(str::trim)
}

/// Build the CFA-0.4 variable `var` of `file`.
pub(crate) fn aggregation(
    file: &Arc<NcFile>,
    var: &str,
    ctx: Arc<Context>,
) -> Result<Arc<dyn ArraySource>> {
    let name = format!("{}: {var}", file.path());
    let spec = master(file, var).map_err(|e| e.at(&name))?;
    Ok(Arc::new(Aggregation::new(spec, &name, ctx)?))
}

/// The master of the CFA variable `var`.
fn master(file: &NcFile, var: &str) -> Result<MasterSpec, NcaError> {
    let v = file
        .variable(var)
        .ok_or_else(|| NcaError::Missing(format!("variable {var}")))?;
    if let Some(r) = role(v)
        && r != "cfa_variable"
    {
        return Err(NcaError::invalid(
            "cf_role",
            format!("{r:?} on a variable with cfa_array; a CFA variable has \"cfa_variable\""),
        ));
    }
    if !v.dimensions.is_empty() {
        return Err(NcaError::invalid(
            "cfa_dimensions",
            format!(
                "the CFA variable has dimensions {:?}; CFA-0.4 stores a master in a scalar \
                 variable whose dimensions are cfa_dimensions",
                v.dimensions
            ),
        ));
    }
    let attr_str = |k: &str| -> Result<Option<String>, NcaError> {
        match v.attributes.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(NcaError::invalid(
                k,
                format!("{} is not text", brief(other)),
            )),
        }
    };
    let dims: Vec<String> = attr_str("cfa_dimensions")?
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let file_dims: Vec<String> = file.dimensions().iter().map(|d| d.name.clone()).collect();
    let mut shape = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        if dims[..i].contains(d) {
            return Err(NcaError::invalid(
                "cfa_dimensions",
                format!("{d:?} listed twice"),
            ));
        }
        let len = file
            .dimensions()
            .iter()
            .find(|x| &x.name == d)
            .ok_or_else(|| {
                NcaError::invalid(
                    "cfa_dimensions",
                    format!("{d:?} is not a dimension of the file"),
                )
            })?
            .len;
        shape.push(len);
    }
    let text = attr_str("cfa_array")?.ok_or_else(|| {
        NcaError::Missing("cfa_array (the variable's cf_role is \"cfa_variable\")".into())
    })?;
    let units = attr_str("units")?;
    let array = parse_cfa_array(&text, &dims, &shape, units.as_deref(), &file_dims)?;
    let mut attributes = v.attributes.clone();
    for k in ["cf_role", "cfa_array", "cfa_dimensions"] {
        attributes.remove(k);
    }
    let dtype = v.dtype();
    let fill = if v.fill_value.len() == dtype.size() {
        v.fill_value.clone()
    } else {
        master_fill(&attributes, &dtype)?
    };
    Ok(MasterSpec {
        name: var.to_string(),
        units,
        calendar: attr_str("calendar")?,
        dims,
        shape,
        dtype,
        fill,
        attributes,
        array,
    })
}

/// A key's value, JSON `null` read as absent (cf-python writes
/// `"varid": null`).
fn get<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    o.get(k).filter(|v| !v.is_null())
}

/// Keys that are not CFA-0.4 but are someone's spelling of one.
fn hint(k: &str) -> Option<&'static str> {
    Some(match k {
        "data" => "CFA-0.4 calls it `subarray` (`data` is NCA's or an earlier CFA draft's)",
        "dimensions" | "axes" => "CFA-0.4 calls it `pdimensions`",
        "directions" | "flip" => "CFA-0.4 lists reversed dimensions in `reverse`",
        "units" | "Units" => "CFA-0.4 calls it `punits`",
        "calendar" => "CFA-0.4 calls it `pcalendar`",
        "format" => "in CFA-0.4 `format` belongs in `subarray`",
        "pshape" => "CFA-0.4 calls it `pmshape`",
        "pdimensions" => "CFA-0.4 calls the partition matrix's dimensions `pmdimensions`",
        _ => return None,
    })
}

fn strict_keys(o: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), NcaError> {
    for k in o.keys() {
        if !allowed.contains(&k.as_str())
            && let Some(h) = hint(k)
        {
            return Err(NcaError::invalid(
                format!("{at}.{k}"),
                format!("unknown key: {h}"),
            ));
        }
    }
    check_keys(o, allowed, at)
}

/// Decode a `cfa_array` JSON text for a master with dimensions `dims` of
/// extents `shape` and units `units`, in a file whose dimensions are
/// `file_dims`.
pub fn parse_cfa_array(
    text: &str,
    dims: &[String],
    shape: &[u64],
    units: Option<&str>,
    file_dims: &[String],
) -> Result<ArraySpec, NcaError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| NcaError::invalid("cfa_array", format!("not valid JSON: {e}")))?;
    let o = obj(&v, "cfa_array")?;
    if o.contains_key("_auxiliary_mask") {
        return Err(NcaError::invalid(
            "cfa_array._auxiliary_mask",
            "cf-python's auxiliary mask is not part of CFA-0.4 (cf-python's own reader \
             ignores it too): the data it masks cannot be reproduced",
        ));
    }
    strict_keys(
        o,
        &[
            "pmdimensions",
            "pmshape",
            "base",
            "Partitions",
            "_HDF_chunks",
        ],
        "cfa_array",
    )?;
    let pm_names = match get(o, "pmdimensions") {
        None => Vec::new(),
        Some(x) => names(x, "cfa_array.pmdimensions")?,
    };
    let pdims = dim_positions(
        &pm_names,
        dims,
        "cfa_array.pmdimensions",
        "one of cfa_dimensions",
    )?;
    let pshape = match get(o, "pmshape") {
        None => vec![1; pdims.len()],
        Some(x) => u64_list(x, "cfa_array.pmshape")?,
    };
    if pshape.len() != pdims.len() {
        return Err(NcaError::invalid(
            "cfa_array.pmshape",
            format!("{} sizes for {} pmdimensions", pshape.len(), pdims.len()),
        ));
    }
    if pshape.contains(&0) {
        return Err(NcaError::invalid("cfa_array.pmshape", "a size of 0"));
    }
    let base = get(o, "base")
        .map(|b| {
            let s = str_of(b, "cfa_array.base")?;
            local_path(s).map_err(|e| NcaError::invalid("cfa_array.base", e))
        })
        .transpose()?;
    let list = get(o, "Partitions")
        .ok_or_else(|| NcaError::Missing("cfa_array.Partitions".into()))?
        .as_array()
        .ok_or_else(|| NcaError::invalid("cfa_array.Partitions", "not a list"))?;
    if list.len() > MAX_PARTITIONS {
        return Err(NcaError::invalid(
            "cfa_array.Partitions",
            format!("{} partitions, more than {MAX_PARTITIONS}", list.len()),
        ));
    }
    let ctx = Ctx {
        dims,
        shape,
        file_dims,
        pshape: &pshape,
        base: base.as_deref(),
        units,
    };
    let mut partitions = Vec::with_capacity(list.len());
    let mut seen = HashMap::new();
    for (i, p) in list.iter().enumerate() {
        let spec = ctx.partition(p, i)?;
        if let Some(j) = seen.insert(spec.index.clone(), i) {
            return Err(NcaError::invalid(
                format!("cfa_array.Partitions[{i}].index"),
                format!("{:?} is also the index of Partitions[{j}]", spec.index),
            ));
        }
        partitions.push(spec);
    }
    Ok(ArraySpec {
        directions: vec![true; dims.len()],
        pdims,
        pshape,
        partitions,
    })
}

/// A `file` or `base` as a local path: plain paths, `file://` URIs;
/// other schemes are refused.
fn local_path(s: &str) -> Result<String, String> {
    if crate::storage::location::is_url(s) {
        let scheme = s.split_once("://").map_or(s, |(k, _)| k);
        return Err(format!(
            "{s:?}: {scheme} URLs are not read in CFA-0.4 files (local files only; CF-1.13 \
             aggregations may name URLs)"
        ));
    }
    if s.contains("://") || s.starts_with("file:") {
        super::fragment::uri_path(s)
    } else {
        Ok(s.to_string())
    }
}

/// What every partition of one `cfa_array` is checked against.
struct Ctx<'a> {
    dims: &'a [String],
    shape: &'a [u64],
    file_dims: &'a [String],
    pshape: &'a [u64],
    base: Option<&'a str>,
    /// The master's units.
    units: Option<&'a str>,
}

impl Ctx<'_> {
    fn partition(&self, v: &Value, i: usize) -> Result<PartitionSpec, NcaError> {
        let at = format!("cfa_array.Partitions[{i}]");
        let o = obj(v, &at)?;
        strict_keys(
            o,
            &[
                "index",
                "location",
                "pdimensions",
                "reverse",
                "punits",
                "pcalendar",
                "part",
                "subarray",
            ],
            &at,
        )?;
        let key = |k: &str| format!("{at}.{k}");
        let index = match get(o, "index") {
            None => vec![0; self.pshape.len()],
            Some(x) => u64_list(x, &key("index"))?,
        };
        if index.len() != self.pshape.len() {
            return Err(NcaError::invalid(
                key("index"),
                format!(
                    "{} indices for {} pmdimensions",
                    index.len(),
                    self.pshape.len()
                ),
            ));
        }
        for (k, (&x, &n)) in index.iter().zip(self.pshape).enumerate() {
            if x >= n {
                return Err(NcaError::invalid(
                    format!("{at}.index[{k}]"),
                    format!(
                        "{x} is outside the partition matrix (pmshape {:?})",
                        self.pshape
                    ),
                ));
            }
        }
        let label = format!("Partitions[{i}] (index {index:?})");
        let location = self.location(get(o, "location"), &key("location"))?;
        let dimensions = get(o, "pdimensions")
            .map(|x| names(x, &key("pdimensions")))
            .transpose()?;
        if let Some(ds) = &dimensions {
            for (k, n) in ds.iter().enumerate() {
                if ds[..k].contains(n) {
                    return Err(NcaError::invalid(
                        key("pdimensions"),
                        format!("{n:?} listed twice"),
                    ));
                }
                if !self.file_dims.contains(n) {
                    return Err(NcaError::invalid(
                        key("pdimensions"),
                        format!("{n:?} is not a dimension of the CFA file"),
                    ));
                }
            }
        }
        // Reversed: named among the partition's dimensions; the master's
        // run forwards (cf-python moves a master's flips into its
        // partitions before writing), so a reversed master dimension
        // has direction `false`. Reversing an extra size-1 dimension
        // changes nothing.
        let mut directions = BTreeMap::new();
        if let Some(r) = get(o, "reverse") {
            let rev = names(r, &key("reverse"))?;
            let own: &[String] = dimensions.as_deref().unwrap_or(self.dims);
            for (k, n) in rev.iter().enumerate() {
                if rev[..k].contains(n) {
                    return Err(NcaError::invalid(
                        key("reverse"),
                        format!("{n:?} listed twice"),
                    ));
                }
                if !own.contains(n) {
                    return Err(NcaError::invalid(
                        key("reverse"),
                        format!("{n:?} is not one of the partition's dimensions {own:?}"),
                    ));
                }
                if self.dims.contains(n) {
                    directions.insert(n.clone(), false);
                }
            }
        }
        let text = |k: &str| -> Result<Option<String>, NcaError> {
            get(o, k)
                .map(|x| str_of(x, &key(k)).map(String::from))
                .transpose()
        };
        let calendar = text("pcalendar")?;
        // A calendar alone qualifies the master's units (the default
        // punits), so that a calendar difference is not lost.
        let units = match text("punits")? {
            None if calendar.is_some() => self.units.map(String::from),
            u => u,
        };
        let part = text("part")?
            .map(|s| parse_part(&s).map_err(|e| NcaError::invalid(key("part"), e)))
            .transpose()?
            .filter(|p| !p.is_empty());
        let sub = get(o, "subarray").ok_or_else(|| NcaError::Missing(key("subarray")))?;
        let data = self.subarray(sub, &key("subarray"))?;
        Ok(PartitionSpec {
            label,
            index,
            location,
            dimensions,
            directions,
            units,
            calendar,
            part,
            format: Some(Format::NetCdf),
            data,
        })
    }

    /// Inclusive `[start, stop]` per master dimension → half-open.
    fn location(&self, v: Option<&Value>, at: &str) -> Result<Vec<(u64, u64)>, NcaError> {
        let Some(v) = v else {
            return Ok(self.shape.iter().map(|&n| (0, n)).collect());
        };
        let loc = v
            .as_array()
            .ok_or_else(|| NcaError::invalid(at, format!("{} is not a list", brief(v))))?;
        if loc.len() != self.dims.len() {
            return Err(NcaError::invalid(
                at,
                format!(
                    "{} ranges for {} master dimensions",
                    loc.len(),
                    self.dims.len()
                ),
            ));
        }
        let mut out = Vec::with_capacity(loc.len());
        for (d, r) in loc.iter().enumerate() {
            let at_d = format!("{at}[{d}]");
            let pair = u64_list(r, &at_d)?;
            let [a, b] = pair[..] else {
                return Err(NcaError::invalid(at_d, "not a [start, stop] pair"));
            };
            let n = self.shape[d];
            if a > b || b >= n {
                return Err(NcaError::invalid(
                    at_d,
                    format!(
                        "[{a}, {b}] is not an inclusive range inside [0, {}] ({} has {n} \
                         elements; CFA-0.4 locations include their stop index)",
                        n as i128 - 1,
                        self.dims[d]
                    ),
                ));
            }
            out.push((a, b + 1));
        }
        Ok(out)
    }

    fn subarray(&self, v: &Value, at: &str) -> Result<DataSpec, NcaError> {
        let o = obj(v, at)?;
        let key = |k: &str| format!("{at}.{k}");
        if let Some(f) = get(o, "format") {
            let f = str_of(f, &key("format"))?;
            match f.to_ascii_lowercase().as_str() {
                "netcdf" => {}
                "pp" | "um" => {
                    return Err(NcaError::invalid(
                        key("format"),
                        format!("{f:?} sub-arrays (PP/UM fields) are not supported"),
                    ));
                }
                _ => {
                    return Err(NcaError::invalid(
                        key("format"),
                        format!("{f:?} is not a CFA-0.4 sub-array format (netCDF)"),
                    ));
                }
            }
        }
        check_keys(
            o,
            &[
                "format",
                "shape",
                "file",
                "dtype",
                "ncvar",
                "varid",
                "file_offset",
            ],
            at,
        )?;
        let shape = u64_list(
            get(o, "shape").ok_or_else(|| NcaError::Missing(key("shape")))?,
            &key("shape"),
        )?;
        let text = |k: &str| -> Result<Option<&str>, NcaError> {
            get(o, k).map(|x| str_of(x, &key(k))).transpose()
        };
        let file = match text("file")? {
            None | Some("") => None,
            Some(f) => Some(
                self.file(f)
                    .map_err(|e| NcaError::invalid(key("file"), e))?,
            ),
        };
        let dtype = text("dtype")?
            .map(|s| nc_dtype(s).map_err(|e| NcaError::invalid(key("dtype"), e)))
            .transpose()?;
        let ncvar = match (text("ncvar")?, get(o, "varid")) {
            (Some(n), _) => n.to_string(),
            (None, Some(id)) => {
                return Err(NcaError::invalid(
                    key("varid"),
                    format!(
                        "{} without ncvar: naming a variable by its netCDF id is not \
                         supported, give ncvar",
                        brief(id)
                    ),
                ));
            }
            (None, None) => return Err(NcaError::Missing(key("ncvar"))),
        };
        // netCDF sub-arrays only: file_offset has no meaning there.
        if let Some(x) = get(o, "file_offset") {
            u64_of(x, &key("file_offset"))?;
        }
        Ok(DataSpec {
            shape: Some(shape),
            file,
            dtype,
            ncvar: Some(ncvar),
            ..DataSpec::default()
        })
    }

    /// `file` joined to `base`, as a path for [`Context::target`]
    /// (relative ones are relative to the CFA file's directory).
    fn file(&self, f: &str) -> Result<String, String> {
        let f = local_path(f)?;
        if Path::new(&f).is_absolute() {
            return Ok(f);
        }
        Ok(match self.base {
            Some(b) if !b.is_empty() => Path::new(b).join(&f).to_string_lossy().into_owned(),
            _ => f,
        })
    }
}

/// A CFA-0.4 `subarray.dtype`: netCDF type names (`float` is 32 bits,
/// `int` and `long` 32), else NumPy names.
fn nc_dtype(s: &str) -> Result<(DataType, Endian), String> {
    let dt = match s {
        "float" => DataType::Float32,
        "int" | "long" => DataType::Int32,
        "int64" => DataType::Int64,
        "uint64" => DataType::UInt64,
        other => return parse_dtype(other),
    };
    Ok((dt, Endian::NATIVE))
}

/// Parse a CFA-0.4 `part` string into the NCA model's selections:
/// `[start, stop, step]` (stop an inclusive bound) and `(i, j, ...)`
/// index lists (see the module doc). `"[]"` is an empty list: the whole
/// sub-array.
pub fn parse_part(s: &str) -> Result<Vec<Sel>, String> {
    let mut p = Scan {
        s: s.as_bytes(),
        i: 0,
    };
    p.expect(b'[')?;
    let mut out = Vec::new();
    loop {
        match p.peek() {
            Some(b']') => {
                p.i += 1;
                break;
            }
            Some(b'[') => {
                p.i += 1;
                let a = p.int()?;
                p.expect(b',')?;
                let b = p.int()?;
                p.expect(b',')?;
                let step = p.int()?;
                p.expect(b']')?;
                out.push(inclusive_range(a, b, step)?);
            }
            Some(b'(') => {
                p.i += 1;
                let mut v = Vec::new();
                loop {
                    if p.peek() == Some(b')') && !v.is_empty() {
                        p.i += 1;
                        break;
                    }
                    let x = p.int()?;
                    v.push(u64::try_from(x).map_err(|_| format!("negative index {x}"))?);
                    match p.next() {
                        Some(b',') => {}
                        Some(b')') => break,
                        _ => return Err(p.unexpected("',' or ')'")),
                    }
                }
                out.push(Sel::List(v));
            }
            _ => {
                return Err(p.unexpected(
                    "'[start, stop, step]' (inclusive range), '(i, j, ...)' (indices) or ']'",
                ));
            }
        }
        match p.next() {
            Some(b',') => {}
            Some(b']') => break,
            _ => return Err(p.unexpected("',' or ']'")),
        }
    }
    if p.peek().is_some() {
        return Err(p.unexpected("the end"));
    }
    Ok(out)
}

/// `[a, b, step]` with `b` an inclusive bound, as a Python range.
fn inclusive_range(a: i64, b: i64, step: i64) -> Result<Sel, String> {
    let show = format!("[{a}, {b}, {step}]");
    if a < 0 || b < 0 {
        return Err(format!("{show}: negative index"));
    }
    if step == 0 {
        return Err(format!("{show}: a step of 0"));
    }
    if (step > 0 && a > b) || (step < 0 && a < b) {
        return Err(format!(
            "{show} selects nothing (CFA-0.4 ranges are [start, stop, step] with stop \
             inclusive)"
        ));
    }
    let stop = if step > 0 {
        Some(b + 1)
    } else if b == 0 {
        None // down to index 0 inclusive
    } else {
        Some(b - 1)
    };
    Ok(Sel::Range {
        start: Some(a),
        stop,
        step: Some(step),
    })
}

struct Scan<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn peek(&mut self) -> Option<u8> {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        self.i += usize::from(c.is_some());
        c
    }

    fn unexpected(&self, want: &str) -> String {
        format!(
            "expected {want} at character {} of {:?}",
            self.i,
            String::from_utf8_lossy(self.s)
        )
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.next() == Some(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{}'", c as char)))
        }
    }

    fn int(&mut self) -> Result<i64, String> {
        self.peek();
        let start = self.i;
        if matches!(self.s.get(self.i), Some(b'-' | b'+')) {
            self.i += 1;
        }
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
            .ok_or_else(|| self.unexpected("an integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::nca::part::Seq;
    use serde_json::json;

    fn values(s: &Seq) -> Vec<u64> {
        (0..s.len()).map(|j| s.get(j)).collect()
    }

    fn sel(s: &str, n: u64) -> Result<Vec<Vec<u64>>, String> {
        parse_part(s)?
            .iter()
            .map(|x| x.resolve(n).map(|q| values(&q)))
            .collect()
    }

    #[test]
    fn part_follows_the_cfa_04_document_and_cf_python() {
        // The document's examples.
        assert_eq!(
            sel("[[2, 5, 1], (1, 3, 4, 7), [0, 11, 2]]", 12).unwrap(),
            [vec![2, 3, 4, 5], vec![1, 3, 4, 7], vec![0, 2, 4, 6, 8, 10]]
        );
        assert_eq!(sel("[[0, 3, 1]]", 4).unwrap(), [vec![0, 1, 2, 3]]);
        assert_eq!(sel("[[10, 4, -2]]", 11).unwrap(), [vec![10, 8, 6, 4]]);
        assert_eq!(sel("[(4, 2, 1)]", 5).unwrap(), [vec![4, 2, 1]]);
        assert_eq!(sel("[[5, 1, -4]]", 6).unwrap(), [vec![5, 1]]);
        assert_eq!(sel("[[0, 0, 1]]", 6).unwrap(), [vec![0]]);
        // What cf-python's writer makes of slices (slice.indices(n)):
        // slice(None, None, -1) on 4 -> (3, -1, -1) -> "[3, 0, -1]".
        assert_eq!(sel("[[3, 0, -1]]", 4).unwrap(), [vec![3, 2, 1, 0]]);
        // slice(0, 10, 3) -> "[0, 9, 3]"; slice(0, 11, 3) -> "[0, 10, 3]".
        assert_eq!(sel("[[0, 9, 3]]", 11).unwrap(), [vec![0, 3, 6, 9]]);
        assert_eq!(sel("[[0, 10, 3]]", 11).unwrap(), [vec![0, 3, 6, 9]]);
        // slice(5, 1, -2) -> "[5, 2, -2]".
        assert_eq!(sel("[[5, 2, -2]]", 6).unwrap(), [vec![5, 3]]);
        // A one-element tuple as Python prints it.
        assert_eq!(sel("[(3,)]", 4).unwrap(), [vec![3]]);
        assert!(parse_part("[]").unwrap().is_empty());
        assert_eq!(parse_part(" [ ( 1 , 2 ) , [0,1,1] ] ").unwrap().len(), 2);
    }

    #[test]
    fn bad_parts_are_refused() {
        for (s, why) in [
            ("", "'['"),
            ("[[0, 2]]", "','"),
            ("[[0, 2, 1, 4]]", "']'"),
            ("[[3, 1, 1]]", "selects nothing"),
            ("[[1, 3, -1]]", "selects nothing"),
            ("[[0, 3, 0]]", "step of 0"),
            ("[[-1, 3, 1]]", "negative"),
            ("[(1, -2)]", "negative"),
            ("[()]", "integer"),
            ("[(0, 2, 1)] x", "the end"),
            ("[1]", "inclusive range"),
            ("[(None, 2)]", "integer"),
            ("[[0, 99999999999999999999, 1]]", "integer"),
        ] {
            let e = parse_part(s).unwrap_err();
            assert!(e.contains(why), "{s:?}: {e}");
        }
        // Out of the extent: found when the sub-array's extent is known.
        assert!(sel("[[0, 9, 3]]", 9).unwrap_err().contains("outside"));
    }

    fn dims() -> (Vec<String>, Vec<u64>, Vec<String>) {
        let d: Vec<String> = ["time", "lat"].iter().map(|s| s.to_string()).collect();
        let mut f = d.clone();
        f.push("level".into());
        (d, vec![4, 3], f)
    }

    fn parse(v: Value) -> Result<ArraySpec, NcaError> {
        let (d, s, f) = dims();
        parse_cfa_array(&v.to_string(), &d, &s, Some("days since 2000-01-01"), &f)
    }

    fn two() -> Value {
        json!({"pmdimensions": ["time"], "pmshape": [2], "Partitions": [
            {"index": [0], "location": [[0, 1], [0, 2]],
             "subarray": {"file": "a.nc", "ncvar": "v", "shape": [2, 3], "varid": null}},
            {"index": [1], "location": [[2, 3], [0, 2]], "reverse": ["lat"],
             "pdimensions": ["lat", "level", "time"], "part": "[(2, 1, 0), [0, 0, 1], [1, 0, -1]]",
             "punits": "degC", "pcalendar": "noleap",
             "subarray": {"file": "b.nc", "ncvar": "w", "shape": [3, 1, 2], "dtype": "float",
                          "format": "netCDF"}}
        ]})
    }

    #[test]
    fn maps_onto_the_nca_model() {
        let a = parse(two()).unwrap();
        assert_eq!(a.pdims, [0]);
        assert_eq!(a.pshape, [2]);
        let [p, q] = &a.partitions[..] else { panic!() };
        // Inclusive locations, half-open inside.
        assert_eq!(p.location, [(0, 2), (0, 3)]);
        assert_eq!(q.location, [(2, 4), (0, 3)]);
        assert_eq!(p.extents(), [2, 3]);
        assert_eq!(p.data.file.as_deref(), Some("a.nc"));
        assert_eq!(p.data.shape.as_deref(), Some(&[2, 3][..]));
        assert_eq!(p.part, None);
        assert!(p.directions.is_empty());
        assert_eq!(
            q.dimensions.as_deref(),
            Some(&["lat".to_string(), "level".into(), "time".into()][..])
        );
        assert_eq!(q.directions.get("lat"), Some(&false));
        assert_eq!(q.units.as_deref(), Some("degC"));
        assert_eq!(q.calendar.as_deref(), Some("noleap"));
        assert_eq!(q.data.dtype, Some((DataType::Float32, Endian::NATIVE)));
        let part = q.part.as_ref().unwrap();
        assert_eq!(values(&part[0].resolve(3).unwrap()), [2, 1, 0]);
        assert_eq!(values(&part[1].resolve(1).unwrap()), [0]);
        assert_eq!(values(&part[2].resolve(2).unwrap()), [1, 0]);
    }

    #[test]
    fn defaults() {
        // No pmdimensions/pmshape/index/location: one partition, the
        // whole master; "[]" part: the whole sub-array.
        let a = parse(json!({"Partitions": [
            {"part": "[]", "subarray": {"ncvar": "p", "shape": [4, 3]}}
        ]}))
        .unwrap();
        assert!(a.pdims.is_empty() && a.pshape.is_empty());
        let p = &a.partitions[0];
        assert_eq!(p.index, Vec::<u64>::new());
        assert_eq!(p.location, [(0, 4), (0, 3)]);
        assert_eq!(p.part, None);
        assert_eq!(p.data.file, None, "no file: the CFA file itself");
        // pmshape defaults to ones.
        let a = parse(json!({"pmdimensions": ["lat"], "Partitions": [
            {"index": [0], "subarray": {"file": "", "ncvar": "p", "shape": [4, 3]}}
        ]}))
        .unwrap();
        assert_eq!(a.pshape, [1]);
        assert_eq!(a.partitions[0].data.file, None);
        // pcalendar alone qualifies the master's units.
        let a = parse(json!({"Partitions": [
            {"pcalendar": "noleap", "subarray": {"ncvar": "p", "shape": [4, 3]}}
        ]}))
        .unwrap();
        assert_eq!(
            a.partitions[0].units.as_deref(),
            Some("days since 2000-01-01")
        );
    }

    #[test]
    fn base_and_files() {
        let with = |base: Value, file: &str| {
            let mut v = json!({"Partitions": [{"subarray": {"ncvar": "p", "shape": [4, 3], "file": file}}]});
            if !base.is_null() {
                v["base"] = base;
            }
            parse(v).map(|a| a.partitions[0].data.file.clone().unwrap())
        };
        assert_eq!(with(json!("frag"), "a.nc").unwrap(), "frag/a.nc");
        assert_eq!(with(json!("../x/"), "a.nc").unwrap(), "../x/a.nc");
        assert_eq!(with(json!("/data"), "a.nc").unwrap(), "/data/a.nc");
        assert_eq!(with(json!(""), "a.nc").unwrap(), "a.nc");
        assert_eq!(with(Value::Null, "a.nc").unwrap(), "a.nc");
        assert_eq!(with(json!("frag"), "/abs/a.nc").unwrap(), "/abs/a.nc");
        assert_eq!(with(json!("file:///data"), "a.nc").unwrap(), "/data/a.nc");
        assert_eq!(
            with(Value::Null, "file:///d/a%20b.nc").unwrap(),
            "/d/a b.nc"
        );
        let e = with(json!("http://archive/files"), "a.nc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cfa_array.base") && e.contains("http"), "{e}");
        let e = with(Value::Null, "s3://bucket/a.nc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("subarray.file") && e.contains("s3"), "{e}");
    }

    #[test]
    fn malformed_metadata_names_the_key() {
        let err = |v: Value| parse(v).unwrap_err().to_string();
        let mut cases: Vec<(Value, Vec<&str>)> = Vec::new();
        let mut v = two();
        v["Partitions"][1]["location"] = json!([[2, 4], [0, 2]]);
        cases.push((
            v,
            vec!["Partitions[1].location[0]", "[2, 4]", "inclusive", "[0, 3]"],
        ));
        let mut v = two();
        v["Partitions"][0]["location"] = json!([[1, 0], [0, 2]]);
        cases.push((v, vec!["Partitions[0].location[0]", "[1, 0]"]));
        let mut v = two();
        v["Partitions"][0]["location"] = json!([[0, 1]]);
        cases.push((v, vec!["Partitions[0].location", "1 ranges for 2"]));
        let mut v = two();
        v["Partitions"][0]["location"] = json!([[0, 1, 2], [0, 2]]);
        cases.push((v, vec!["Partitions[0].location[0]", "pair"]));
        let mut v = two();
        v["Partitions"][1]["part"] = json!("[(2, 6, 1), [0, 2]]");
        cases.push((v, vec!["Partitions[1].part", "','"]));
        let mut v = two();
        v["Partitions"][1]["reverse"] = json!(["lon"]);
        cases.push((v, vec!["Partitions[1].reverse", "\"lon\""]));
        let mut v = two();
        v["Partitions"][1]["reverse"] = json!(["lat", "lat"]);
        cases.push((v, vec!["Partitions[1].reverse", "twice"]));
        let mut v = two();
        v["Partitions"][1]["pdimensions"] = json!(["lat", "height", "time"]);
        cases.push((v, vec!["Partitions[1].pdimensions", "\"height\""]));
        let mut v = two();
        v["Partitions"][0]["data"] = v["Partitions"][0]["subarray"].take();
        v["Partitions"][0]
            .as_object_mut()
            .unwrap()
            .remove("subarray");
        cases.push((v, vec!["Partitions[0].data", "unknown key", "subarray"]));
        let mut v = two();
        v["Partitions"][0]["flip"] = json!(["lat"]);
        cases.push((v, vec!["Partitions[0].flip", "reverse"]));
        let mut v = two();
        v["Partitions"][0]["zap"] = json!(1);
        cases.push((v, vec!["Partitions[0].zap", "unknown key"]));
        let mut v = two();
        v["Partitions"][0]
            .as_object_mut()
            .unwrap()
            .remove("subarray");
        cases.push((v, vec!["missing cfa_array.Partitions[0].subarray"]));
        let mut v = two();
        v["Partitions"][0]["subarray"]["format"] = json!("PP");
        cases.push((v, vec!["subarray.format", "PP", "not supported"]));
        let mut v = two();
        v["Partitions"][0]["subarray"]["format"] = json!("zarr");
        cases.push((v, vec!["subarray.format", "zarr"]));
        let mut v = two();
        v["Partitions"][0]["subarray"]
            .as_object_mut()
            .unwrap()
            .remove("shape");
        cases.push((v, vec!["missing", "subarray.shape"]));
        let mut v = two();
        v["Partitions"][0]["subarray"]
            .as_object_mut()
            .unwrap()
            .remove("ncvar");
        cases.push((v, vec!["missing", "subarray.ncvar"]));
        let mut v = two();
        v["Partitions"][0]["subarray"]["ncvar"] = Value::Null;
        v["Partitions"][0]["subarray"]["varid"] = json!(3);
        cases.push((v, vec!["subarray.varid", "give ncvar"]));
        let mut v = two();
        v["Partitions"][0]["subarray"]["dtype"] = json!("quad");
        cases.push((v, vec!["subarray.dtype", "quad"]));
        let mut v = two();
        v["Partitions"][1]["index"] = json!([0]);
        cases.push((
            v,
            vec!["Partitions[1].index", "also the index of Partitions[0]"],
        ));
        let mut v = two();
        v["Partitions"][1]["index"] = json!([2]);
        cases.push((
            v,
            vec!["Partitions[1].index[0]", "outside the partition matrix"],
        ));
        let mut v = two();
        v["pmshape"] = json!([2, 1]);
        cases.push((v, vec!["cfa_array.pmshape", "2 sizes for 1"]));
        let mut v = two();
        v["pmdimensions"] = json!(["lon"]);
        cases.push((v, vec!["cfa_array.pmdimensions[0]", "\"lon\""]));
        let mut v = two();
        v["pshape"] = json!([2]);
        cases.push((v, vec!["cfa_array.pshape", "pmshape"]));
        let mut v = two();
        v["_auxiliary_mask"] = json!([]);
        cases.push((v, vec!["_auxiliary_mask"]));
        cases.push((json!({"base": ""}), vec!["missing cfa_array.Partitions"]));
        cases.push((json!([1, 2]), vec!["cfa_array", "not an object"]));
        for (v, words) in cases {
            let e = err(v.clone());
            for w in words {
                assert!(e.contains(w), "{v}\n-> {e}\n(lacks {w:?})");
            }
        }
        let (d, s, f) = dims();
        let e = parse_cfa_array("{'Partitions': []}", &d, &s, None, &f)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cfa_array") && e.contains("not valid JSON"),
            "{e}"
        );
        // cf-python's chunking hint is harmless.
        let mut v = two();
        v["_HDF_chunks"] = json!({"time": 2});
        parse(v).unwrap();
    }

    #[test]
    fn netcdf_type_names() {
        assert_eq!(nc_dtype("float").unwrap().0, DataType::Float32);
        assert_eq!(nc_dtype("int").unwrap().0, DataType::Int32);
        assert_eq!(nc_dtype("double").unwrap().0, DataType::Float64);
        assert_eq!(nc_dtype("short").unwrap().0, DataType::Int16);
        assert_eq!(nc_dtype("byte").unwrap().0, DataType::Int8);
        assert_eq!(nc_dtype("char").unwrap().0, DataType::FixedBytes(1));
        assert_eq!(nc_dtype("int64").unwrap().0, DataType::Int64);
        assert!(nc_dtype("quad").is_err());
    }
}
