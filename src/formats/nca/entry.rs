//! netCDF files and NCA descriptors as discovery sees them
//! ([`crate::formats::entry`]).
//!
//! A netCDF-family file is one entry, whichever reader its magic number
//! picks ([`crate::formats::netcdf`]: classic, a blocked archive of one,
//! or netCDF-4/HDF5), because a netCDF file is shown with its conventions
//! applied: its NCA, CF-1.13 and CFA-0.4 aggregation variables assembled,
//! `nca_private` ones hidden ([`super::netcdf`]). That is this folder's
//! work, so the entry is here, above the three readers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Map;

use super::Variables;
use super::ncfile::NcFile;
use crate::error::{Error, Result};
use crate::formats::entry::{
    At, Dataset, Directory, Entry, FormatEntry, Layout, Stamp, has_extension, join, never_single,
};
use crate::formats::netcdf::{self, Opened};
use crate::formats::{hdf5, packed};
use crate::storage::ReadAt;

/// File name extensions (case-insensitive) of the files a walk sniffs for
/// a netCDF-family file: netCDF's, the blocked archive's, and HDF5's
/// (h5py's and the HDF Group's usual names).
pub const EXTENSIONS: &[&str] = &[
    "nc",
    "nc3",
    "nc4",
    "cdf",
    "netcdf",
    packed::EXTENSION,
    "h5",
    "hdf5",
    "he5",
    "hdf",
];

pub const NETCDF: FormatEntry = FormatEntry {
    name: "netcdf",
    noun: "a netCDF file",
    summary: "netCDF-3 (CDF-1, -2, -5), netCDF-4 and HDF5 files (by their first bytes), blocked archives (.ncb, slabfs pack); CF-1.13 and CFA-0.4 aggregations inside them",
    layout: Layout::File,
    claims: |name| has_extension(name, EXTENSIONS),
    sniff: Some(sniff),
    probe: None,
    single: never_single,
    versioned: false,
    by_content: false,
    last_resort: false,
    stamp: Stamp::File,
    open: open_netcdf,
};

pub const DESCRIPTOR: FormatEntry = FormatEntry {
    name: "nca",
    noun: "an NCA descriptor",
    summary: "NCA aggregation descriptors (*.nca.json)",
    layout: Layout::File,
    claims: |name| super::is_descriptor(Path::new(name)),
    sniff: None,
    probe: None,
    single: never_single,
    versioned: false,
    by_content: false,
    last_resort: false,
    // Its partitions are in other files.
    stamp: Stamp::Reopen,
    open: open_descriptor,
};

/// `CDF\x01`, `\x02`, `\x05`, `SLABNC3\0`, or HDF5's signature.
fn sniff(file: &dyn ReadAt) -> std::io::Result<bool> {
    Ok(netcdf::kind_of(file)? != netcdf::Kind::Other)
}

fn open_netcdf(at: &At<'_>) -> Result<Option<Dataset>> {
    // A virtual dataset's sources: through the same files, confined as
    // every other reference of this file.
    let sources = hdf5::vds::Sources {
        files: at.opts.files.clone(),
        scope: at.opts.scope_for(at.path),
        path: at.path.to_path_buf(),
    };
    let opts = at.opts;
    let vars = match netcdf::open_reader(at.shown(), at.file()?, &opts.cache, Some(sources))? {
        // NCA variables assembled, `nca_private` ones hidden.
        Opened::Netcdf3(nc) => super::netcdf::variables(Arc::new(*nc), opts),
        // netCDF-4: aggregation variables assembled too.
        Opened::Hdf5(h) => {
            let nc = NcFile::hdf5(at.shown(), h);
            super::netcdf::file_variables(Arc::new(nc), opts)
        }
        Opened::Other => {
            return Err(Error::metadata(
                at.shown(),
                "not a netCDF file (no CDF or HDF5 magic number)",
            ));
        }
    };
    Ok(Some(vars.into_dataset(at.prefix, at.path)))
}

fn open_descriptor(at: &At<'_>) -> Result<Option<Dataset>> {
    let vars = super::open_json(at.path, at.opts)?;
    Ok(Some(vars.into_dataset(at.prefix, at.path)))
}

impl Variables {
    /// The variables at their mount paths under `prefix`, and the groups'
    /// attributes and dimensions of the file `file` they came from (its
    /// global ones at `prefix`).
    pub fn into_dataset(self, prefix: &str, file: &Path) -> Dataset {
        let source = file.display().to_string();
        let mut ds = Dataset::default();
        let mut groups: BTreeMap<String, Directory> = BTreeMap::new();
        for (group, attributes) in self.groups {
            groups.entry(group).or_insert(Directory {
                attributes,
                dimensions: Vec::new(),
                source: source.clone(),
            });
        }
        for d in self.dimensions {
            let (group, name) = d.name.rsplit_once('/').unwrap_or(("", &d.name));
            groups
                .entry(group.to_string())
                .or_insert_with(|| Directory {
                    attributes: Map::new(),
                    dimensions: Vec::new(),
                    source: source.clone(),
                })
                .dimensions
                .push((name.to_string(), d.len, d.is_unlimited));
        }
        for (group, dir) in groups {
            ds.add_directory(join(prefix, &group), dir);
        }
        for (name, array) in self.arrays {
            ds.entries.push(Entry {
                path: join(prefix, &name),
                array,
            });
        }
        ds.skipped.extend(self.skipped);
        ds.sorted()
    }
}
