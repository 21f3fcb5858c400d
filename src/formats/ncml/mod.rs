//! NcML (netCDF-Java's NetCDF Markup Language, schema 2.2): the XML
//! files THREDDS servers and data centres keep beside their netCDF files
//! to show one dataset made from others, served like any other dataset.
//!
//! An NcML file is one `<netcdf>` element: a dataset read from its
//! `location`, or made by its `<aggregation>` of member datasets
//! (joinExisting, joinNew, union; members listed or found by `<scan>`),
//! then changed by the elements inside it (attributes added or changed,
//! variables and dimensions renamed with `orgName`, new variables with
//! `<values>`, `<remove>`s). Members are any dataset slabfs reads:
//! netCDF-3, netCDF-4/HDF5, Zarr, another NcML file.
//!
//! ```text
//! *.ncml ─ read ─ model: XML (roxmltree) → typed elements; unsupported → refused
//!                  └ build: <netcdf> → View (dimensions, attributes, variables)
//!                      ├ members: locations confined, scans listed, members
//!                      │   opened by their format (the registry), once, lazily
//!                      ├ join: joinExisting / joinNew variables (a tiling over
//!                      │   members, read by the engine's piece loop)
//!                      ├ values: <values>, coordValue, typed attributes
//!                      └ view: View → the mount's Dataset (Shown: renamed)
//! ```
//!
//! Nothing is read whole: a joined variable's read is projected over its
//! members and each member reads only its box, through its own format's
//! array (chunks through the shared cache).
//!
//! What slabfs does not serve (an FMRC aggregation, groups, `enhance`,
//! ) refuses the whole file with a line naming
//! the element: an NcML file is never served with part of its meaning
//! dropped. A member that is missing or out of reach (an OPeNDAP URL)
//! fails the load when its length is needed and cannot be told, and
//! otherwise the reads that touch it, naming it (docs/AGGREGATION.md).

pub mod build;
pub mod dates;
pub mod error;
pub mod join;
pub mod members;
pub mod model;
pub mod tiled;
pub mod values;
pub mod view;

use std::path::Path;
use std::sync::Arc;

pub use error::NcmlError;

use crate::error::{Error, Result};
use crate::formats::Options;
use crate::formats::entry::{At, Dataset, FormatEntry, Layout, Stamp, has_extension, never_single};
use crate::storage::paths;

/// NcML files larger than this are refused (a listed joinExisting over
/// 10^5 files is about 10 MB).
pub const MAX_NCML_BYTES: u64 = 64 << 20;

pub const ENTRY: FormatEntry = FormatEntry {
    name: "ncml",
    noun: "an NcML file",
    summary: "NcML files (*.ncml): netCDF-Java's wrappers and aggregations (joinExisting, joinNew, union, scans) of any dataset slabfs reads",
    layout: Layout::File,
    claims: |name| has_extension(name, &["ncml"]),
    sniff: None,
    probe: None,
    single: never_single,
    versioned: false,
    by_content: false,
    last_resort: false,
    // Its data is in other files.
    stamp: Stamp::Reopen,
    open,
};

/// Whether `path` names an NcML file (`*.ncml`).
pub fn is_ncml(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| has_extension(n, &["ncml"]))
}

/// Read and parse the NcML file at `path` (a local path or a URL).
pub fn read(path: &Path, opts: &Options) -> Result<model::Netcdf> {
    let name = path.display().to_string();
    let text = paths::read_document(opts.files.as_ref(), path, MAX_NCML_BYTES, |_| true)?
        .expect("every document is wanted");
    let text = String::from_utf8(text)
        .map_err(|_| Error::metadata(name.clone(), "not UTF-8 text (NcML is XML in UTF-8)"))?;
    model::parse(&text).map_err(|e| e.at(name))
}

fn open(at: &At<'_>) -> Result<Option<Dataset>> {
    let real = paths::real_path(at.path).map_err(|e| Error::Io {
        path: at.shown(),
        source: e,
    })?;
    let doc = read(&real, at.opts)?;
    let ctx = Arc::new(members::Ctx {
        opts: at.opts.clone(),
        scope: at.opts.scope_for(&real),
        file: real.clone(),
        chain: vec![real.clone()],
        build: build::build,
        change: build::change,
        open: parking_lot::Mutex::default(),
    });
    let view = build::build(&doc, &ctx)?;
    Ok(Some(view.into_dataset(at.prefix, &real)))
}
