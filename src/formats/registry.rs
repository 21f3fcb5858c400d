//! The format registry: every format slabfs reads, once each, in the
//! order discovery tries them ([`super::entry`] says what an entry is and
//! how the walks use it).
//!
//! Order matters where two entries could both answer: Icechunk before
//! Zarr (a repository's snapshot is read as a Zarr hierarchy, but the
//! directory holds no Zarr metadata, and a Zarr store is no repository
//! even with groups named `refs` and `snapshots`); NCA descriptors
//! (`*.nca.json`) before kerchunk (every other `*.json`); kerchunk, tried
//! by content, last.
//!
//! # Adding a format
//!
//! Its folder under `src/formats/` with a `pub const ENTRY: FormatEntry`
//! (the type is [`super::entry`]'s, so a format never imports this table
//! that imports it), its `pub mod` line in `formats/mod.rs`, its rank in
//! `tests/it/layers.rs`, and one line in [`FORMATS`] below. A test
//! (`tests/it/registry.rs`) plugs a format of its own in the same way and
//! finds it on disk, in a bucket, inside a mounted archive and as an
//! aggregation's fragment.

use super::entry::{FormatEntry, Formats};
use super::{icechunk, kerchunk, nca, ncml, zarr};

/// Every format slabfs reads, in the order they are tried.
pub static FORMATS: &[&FormatEntry] = &[
    // Directories.
    &icechunk::ENTRY,
    &zarr::ENTRY,
    // Files by their magic number (classic netCDF, blocked archives,
    // netCDF-4/HDF5).
    &nca::NETCDF,
    // Files by their name, content checked at open.
    &nca::DESCRIPTOR,
    &ncml::ENTRY,
    &kerchunk::ENTRY,
];

/// [`FORMATS`] as the list a mount opens with.
pub fn builtin() -> Formats {
    Formats::new(FORMATS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = FORMATS.iter().map(|f| f.name).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "{names:?}");
    }

    #[test]
    fn every_entry_is_found_one_way() {
        use super::super::entry::Layout;
        for f in FORMATS {
            match f.layout {
                Layout::Directory => assert!(f.probe.is_some(), "{}", f.name),
                Layout::File => assert!(f.probe.is_none(), "{}", f.name),
            }
        }
    }

    #[test]
    fn names_pick_the_entry() {
        let f = builtin();
        let name = |n: &str| match f.classify_file(n) {
            Some(super::super::entry::Found::Dataset { format, .. }) => Some(format.name),
            _ => None,
        };
        assert_eq!(name("a.nc"), Some("netcdf"));
        assert_eq!(name("A.H5"), Some("netcdf"));
        assert_eq!(name("a.ncb"), Some("netcdf"));
        assert_eq!(name("agg.nca.json"), Some("nca"));
        assert_eq!(name("refs.json"), Some("kerchunk"));
        assert_eq!(name("agg.ncml"), Some("ncml"));
        assert_eq!(name("AGG.NCML"), Some("ncml"));
        assert_eq!(name(".nc"), None);
        assert_eq!(name("a.zarr"), None);
        assert_eq!(name("readme.txt"), None);
    }
}
