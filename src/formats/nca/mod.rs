//! NCA and CF-1.13 aggregations: master arrays stitched from sub-arrays
//! in other files, served as one flat file and conformed on the fly.
//!
//! The convention is the NCA proposal (netCDF aggregate, v0.1): a master
//! array is cut into a hyperrectangular matrix of *partitions*, each of
//! which refers to (part of) a *sub-array* stored elsewhere, possibly with
//! its dimensions in another order, running the other way, with extra or
//! missing size-1 dimensions, in other units or another dtype, or packed.
//! docs/AGGREGATION.md is the user's reference; this is how it is built:
//!
//! CF-1.13 aggregation variables ([`cf`]: `aggregated_dimensions` /
//! `aggregated_data`) are read into the same model, one partition per
//! fragment; so are the legacy CFA-0.4 variables ([`cfa04`]:
//! `cf_role = "cfa_variable"`, `cfa_array`), whose inclusive locations
//! and `part` ranges are converted to the model's half-open ones.
//!
//! ```text
//! *.nca.json ──┐                       descriptor: JSON / attributes → MasterSpec
//! NCA netCDF ──┤                       cf: CF-1.13 map / uris / identifiers → MasterSpec
//! CF-1.13 ─────┤                       cfa04: CFA-0.4 cfa_array (inclusive) → MasterSpec
//! CFA-0.4 ─────┴─ open ─ Aggregation ─ aggregate: partition matrix as a tiling,
//!                          │                      overlap check, holes = fill
//!                          └ Partition ─ partition: geometry (part, order, direction,
//!                              │                    size-1 dims), gather, fast path
//!                              ├ convert: missing values, packing, units, dtype
//!                              │   └ units: the supported unit subset
//!                              └ fragment: locate (confine) and open the sub-array
//!                                  ├ ncfile::NcFile (netCDF-3 or netCDF-4) / raw::RawArray
//!                                  │   / zarr / nested
//!                                  │   / constant (CF unique_values)
//!                                  └ storage::local::confine: every file under an allowed root
//! ```
//!
//! "nested" is a recursion: a fragment that is itself an aggregation
//! (a netCDF variable carrying `nca_array`, CF-1.13 or CFA-0.4 attributes,
//! or a variable of another descriptor) is built by [`netcdf`], [`cf`],
//! [`cfa04`] or [`open_json`]'s code, whose partitions are opened by
//! [`fragment`] again. The recursion runs through a value, not through
//! imports: every [`fragment::Context`] carries `nest`, the function that
//! builds a nested aggregation, handed in where the outermost context is
//! made (here and in [`netcdf`]). So `fragment` names none of the builders
//! and the files of this folder import one another in a line, never in a
//! circle (`tests/it/layers.rs` checks it).
//!
//! A netCDF file, as the home of aggregation variables or as a fragment,
//! is an [`ncfile::NcFile`]: the classic reader's file or the HDF5
//! reader's contents behind one summary of dimensions, variables and
//! attributes, so [`netcdf`], [`cf`] and [`cfa04`] do not know which.
//!
//! Nothing is materialised whole: a read of the master is projected over
//! the partition matrix with the chunk-grid code, and each partition
//! reads only the box of its sub-array that the read needs, through the
//! sub-array's own [`ArraySource`] (Zarr chunks through the shared cache,
//! netCDF with positioned reads). Partitions of one read are read in
//! parallel.
//!
//! Errors: a malformed descriptor, an overlap, a reference outside the
//! allowed roots, a fragment that does not match its partition, units
//! that cannot be converted, a cycle of nested descriptors: the variable
//! does not load ([`crate::Error::Format`] wrapping an
//! [`NcaError`]), the other variables of the file still do. A fragment
//! file that does not exist: the variable loads, and reads that touch it
//! fail (EIO at the mount) naming the file, until it appears.

pub mod aggregate;
pub mod cf;
pub mod cfa04;

pub mod constant;
pub mod convert;
pub mod descriptor;
pub mod entry;
pub mod error;
pub mod fragment;
pub mod ncfile;
pub mod netcdf;
pub mod part;
pub mod partition;
pub mod raw;
pub mod units;

use std::path::Path;
use std::sync::Arc;

pub use aggregate::Aggregation;
pub use entry::{DESCRIPTOR, NETCDF};
pub use error::NcaError;

use crate::engine::array::ArraySource;
use crate::error::{Error, Result};
use crate::formats::Options;
use crate::storage::{Files, paths};
use fragment::Context;
use ncfile::NcFile;

/// Descriptor files larger than this are refused (a real one with a
/// million partitions is a few hundred MB; ours are kilobytes).
pub const MAX_DESCRIPTOR_BYTES: u64 = 256 << 20;

/// The variables of a descriptor or NCA file, by name.
#[derive(Default)]
pub struct Variables {
    pub arrays: Vec<(String, Arc<dyn ArraySource>)>,
    /// Variables that could not be built, with why.
    pub skipped: Vec<Error>,
    /// The attributes of the file's groups by path in the file (`""`:
    /// the global attributes, `grp/sub` a netCDF-4 group's), bookkeeping
    /// hidden as for variables.
    pub groups: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
    /// A netCDF file's dimensions, named by path in the file (`grp/n`
    /// below the root group).
    pub dimensions: Vec<crate::formats::netcdf3::Dimension>,
}

/// Whether `path` names a JSON descriptor (`*.nca.json`).
pub fn is_descriptor(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".nca.json"))
}

/// Read and parse the descriptor at `path` (a local path or a URL)
/// through `files`.
fn read_descriptor(path: &Path, files: &dyn Files) -> Result<serde_json::Value> {
    let name = path.display().to_string();
    let text = paths::read_document(files, path, MAX_DESCRIPTOR_BYTES, |_| true)?
        .expect("every document is wanted");
    let text = String::from_utf8(text)
        .map_err(|_| Error::metadata(name.clone(), "not UTF-8 text (a JSON descriptor must be)"))?;
    descriptor::parse_json(&text).map_err(|e| e.at(&name))
}

/// Open the JSON descriptor at `path` (a local path or a URL): every
/// variable it defines, each assembled from its partitions. `Err` when
/// the descriptor as a whole cannot be read or parsed; a variable that
/// fails is in `skipped`.
pub fn open_json(path: &Path, opts: &Options) -> Result<Variables> {
    let real = paths::real_path(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let doc = read_descriptor(&real, opts.files.as_ref())?;
    let name = real.display().to_string();
    let masters = descriptor::json_masters(&doc).map_err(|e| e.at(&name))?;
    let mut out = Variables::default();
    // json_masters checked them: global attributes, with a line when the
    // two spellings of Conventions disagree.
    if let Ok((attrs, note)) = descriptor::global_attributes(&doc) {
        if let Some(note) = note {
            log::warn!("{name}: {note}");
        }
        out.groups.push((String::new(), attrs));
    }
    let scope = opts.scope_for(&real);
    for (var, spec) in masters {
        let vname = format!("{name}: {var}");
        let built = spec.map_err(|e| e.at(&vname)).and_then(|spec| {
            let ctx = Context::new(
                scope.clone(),
                opts.cache.clone(),
                opts.files.clone(),
                opts.formats.clone(),
                real.clone(),
                None,
                vec![(real.clone(), var.clone())],
                nest,
            );
            Aggregation::new(spec, &vname, Arc::new(ctx))
        });
        match built {
            Ok(a) => out.arrays.push((var, Arc::new(a))),
            // Returned, not logged: the caller says it once.
            Err(e) => out.skipped.push(e),
        }
    }
    Ok(out)
}

/// Build the nested aggregation `var` of `path` under a context nested in
/// `ctx` ([`fragment::Nest`]: every context of this folder carries this
/// function): a variable of the netCDF file `file` that is an NCA, CF-1.13
/// or CFA-0.4 aggregation (`Ok(None)` when it is none), or a variable of
/// the JSON descriptor at `path` when `file` is `None`.
pub(crate) fn nest(
    ctx: &Context,
    path: &Path,
    var: &str,
    file: Option<&Arc<NcFile>>,
) -> Result<Option<Arc<dyn ArraySource>>> {
    let Some(file) = file else {
        let nested = ctx.nested(path, var, None)?;
        return json_variable(path, var, nested).map(Some);
    };
    let Some(v) = file.variable(var) else {
        return Ok(None);
    };
    let build = if v.attributes.contains_key("nca_array") {
        netcdf::aggregation
    } else if cf::is_aggregation_variable(v) {
        cf::aggregation
    } else if cfa04::is_cfa_variable(v) {
        cfa04::aggregation
    } else {
        return Ok(None);
    };
    let nested = ctx.nested(path, var, Some(file.clone()))?;
    build(file, var, Arc::new(nested)).map(Some)
}

/// The variable `var` of the descriptor at `path` (canonical), for a
/// nested aggregation opened under `ctx`.
fn json_variable(path: &Path, var: &str, ctx: Context) -> Result<Arc<dyn ArraySource>> {
    let doc = read_descriptor(path, ctx.files.as_ref())?;
    let name = format!("{}: {var}", path.display());
    let masters = descriptor::json_masters(&doc).map_err(|e| e.at(&name))?;
    let spec = masters
        .into_iter()
        .find(|(v, _)| v == var)
        .ok_or_else(|| Error::NotFound(name.clone()))?
        .1
        .map_err(|e| e.at(&name))?;
    Ok(Arc::new(Aggregation::new(spec, &name, Arc::new(ctx))?))
}

pub(crate) use crate::storage::paths::file_stamp;
