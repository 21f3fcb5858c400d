//! NCA variables inside netCDF files (the seed's own form), classic or
//! netCDF-4 ([`super::ncfile::NcFile`]).
//!
//! An NCA file is a netCDF file some of whose (scalar) variables carry
//! `nca_dimensions` (the master's dimension names, defined in the file)
//! and `nca_array` (the JSON parameters); its other variables are ordinary
//! data, and those flagged `nca_private` (non-zero) exist only to be
//! referenced by partitions (a partition without `file` reads from the
//! NCA file itself). The mount shows the ordinary variables as the
//! netCDF-3 or HDF5 reader serves them (netCDF-4 `string` variables not
//! at all, as ever), each NCA variable as its assembled master
//! array (dtype and `_FillValue` those of the scalar variable), and hides
//! the private ones. CF-1.13 aggregation variables in the same file are
//! assembled too ([`super::cf`]), their definition variables hidden, and
//! so are CFA-0.4 variables ([`super::cfa04`]), their `cfa_private`
//! sub-arrays hidden.

use std::path::Path;
use std::sync::Arc;

use super::Variables;
use super::aggregate::Aggregation;
use super::descriptor::{MasterSpec, master_fill, parse_nca_array};
use super::error::NcaError;
use super::fragment::Context;
use super::ncfile::{NcFile, Var};
use crate::engine::array::ArraySource;
use crate::error::Result;
use crate::formats::Options;
use crate::formats::netcdf3;
use crate::storage::paths;

/// Whether `v` is an NCA (aggregation) variable.
pub fn is_nca_variable(v: &Var) -> bool {
    v.attributes.contains_key("nca_array")
}

/// Whether `v` is a private sub-array of an NCA file.
pub fn is_private(v: &Var) -> bool {
    match v.attributes.get("nca_private") {
        Some(serde_json::Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        Some(serde_json::Value::Array(a)) => {
            a.first().and_then(|x| x.as_f64()).is_some_and(|x| x != 0.0)
        }
        Some(serde_json::Value::String(s)) => !matches!(s.trim(), "" | "0"),
        _ => false,
    }
}

/// Whether the file holds any NCA variable.
pub fn is_nca_file(file: &NcFile) -> bool {
    file.variables().iter().any(is_nca_variable)
}

/// The variables of the open classic netCDF file `file` as the mount
/// shows them (see the module doc). A variable that fails is in `skipped`.
pub fn variables(file: Arc<netcdf3::File>, opts: &Options) -> Variables {
    file_variables(Arc::new(NcFile::classic(file)), opts)
}

/// [`variables`] of any open netCDF file, classic or netCDF-4.
pub fn file_variables(file: Arc<NcFile>, opts: &Options) -> Variables {
    let path = Path::new(file.path()).to_path_buf();
    let real = paths::real_path(&path).unwrap_or_else(|_| path.clone());
    let scope = opts.scope_for(&real);
    let mut dimensions = file.dimensions().to_vec();
    if file.is_hdf5() {
        // netCDF's order (dimids) is not known to the HDF5 reader: by
        // name, whatever order the file's links have.
        dimensions.sort_by(|a, b| a.name.cmp(&b.name));
    }
    let mut out = Variables {
        groups: file.groups().to_vec(),
        dimensions,
        ..Variables::default()
    };
    let definitions = super::cf::definition_variables(&file);
    // What is skipped is returned, not logged: the caller says it once,
    // in its own words ("not shown" in a mount, "skipped" by `ls`), each
    // error naming the file and the object.
    out.skipped.extend(file.take_skipped());
    for v in file.variables() {
        if v.not_shown.is_some() {
            continue;
        }
        if is_private(v) || super::cfa04::is_private(v) || definitions.contains(&v.name) {
            continue;
        }
        if v.is_strings() {
            // netCDF-4 `string` variables: no flat file carries them.
            if let Err(e) = file.array(&v.name) {
                out.skipped.push(e);
            }
            continue;
        }
        let cfa04 = !is_nca_variable(v)
            && !super::cf::is_aggregation_variable(v)
            && super::cfa04::is_cfa_variable(v);
        let assembled = is_nca_variable(v) || super::cf::is_aggregation_variable(v) || cfa04;
        let array = if assembled {
            let ctx = Context::new(
                scope.clone(),
                opts.cache.clone(),
                opts.files.clone(),
                opts.formats.clone(),
                real.clone(),
                Some(file.clone()),
                vec![(real.clone(), v.name.clone())],
                super::nest,
            );
            if is_nca_variable(v) {
                aggregation(&file, &v.name, Arc::new(ctx))
            } else if cfa04 {
                super::cfa04::aggregation(&file, &v.name, Arc::new(ctx))
            } else {
                super::cf::aggregation(&file, &v.name, Arc::new(ctx))
            }
        } else {
            file.array(&v.name)
        };
        match array {
            Ok(a) => out.arrays.push((v.name.clone(), a)),
            Err(e) => out.skipped.push(e),
        }
    }
    out
}

/// Build the NCA variable `var` of `file`.
pub(crate) fn aggregation(
    file: &Arc<NcFile>,
    var: &str,
    ctx: Arc<Context>,
) -> Result<Arc<dyn ArraySource>> {
    let name = format!("{}: {var}", file.path());
    let spec = master(file, var).map_err(|e| e.at(&name))?;
    Ok(Arc::new(Aggregation::new(spec, &name, ctx)?))
}

/// The master of the NCA variable `var`.
fn master(file: &NcFile, var: &str) -> Result<MasterSpec, NcaError> {
    let v = file
        .variable(var)
        .ok_or_else(|| NcaError::Missing(format!("variable {var}")))?;
    let attr_str = |k: &str| -> Result<Option<String>, NcaError> {
        match v.attributes.get(k) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(NcaError::invalid(k, format!("{other} is not text"))),
        }
    };
    let dims_attr = attr_str("nca_dimensions")?.unwrap_or_default();
    let dims: Vec<String> = dims_attr.split_whitespace().map(String::from).collect();
    let mut shape = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        if dims[..i].contains(d) {
            return Err(NcaError::invalid(
                "nca_dimensions",
                format!("{d:?} listed twice"),
            ));
        }
        let len = file
            .dimensions()
            .iter()
            .find(|x| &x.name == d)
            .ok_or_else(|| {
                NcaError::invalid(
                    "nca_dimensions",
                    format!("{d:?} is not a dimension of the file"),
                )
            })?
            .len;
        shape.push(len);
    }
    let array_attr = v
        .attributes
        .get("nca_array")
        .ok_or_else(|| NcaError::Missing("nca_array".into()))?;
    let array = parse_nca_array(array_attr, &dims, &shape)?;
    let mut attributes = v.attributes.clone();
    attributes.remove("nca_array");
    attributes.remove("nca_dimensions");
    let dtype = v.dtype();
    // The netCDF reader already settled the fill value; fall back to
    // parsing for safety if its size disagrees.
    let fill = if v.fill_value.len() == dtype.size() {
        v.fill_value.clone()
    } else {
        master_fill(&attributes, &dtype)?
    };
    Ok(MasterSpec {
        name: var.to_string(),
        units: attr_str("units")?,
        calendar: attr_str("calendar")?,
        dims,
        shape,
        dtype,
        fill,
        attributes,
        array,
    })
}

/// Open the netCDF file at `path` (classic or netCDF-4) and list its
/// variables, aggregation ones assembled. `Err` only when the file itself
/// cannot be opened.
pub fn open(path: &Path, opts: &Options) -> Result<Variables> {
    let file = Arc::new(NcFile::open(path, opts.files.as_ref(), &opts.cache)?);
    Ok(file_variables(file, opts))
}
