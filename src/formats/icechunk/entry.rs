//! Icechunk as discovery sees it ([`crate::formats::entry`]): a
//! directory (or prefix) holding a repository, read as the Zarr hierarchy
//! of one snapshot (the tip of `main`, or `--ref`).

use std::sync::Arc;

use super::{FIRST_SNAPSHOT_KEY, IcechunkStore};
use crate::error::Result;
use crate::formats::entry::{
    At, Dataset, FormatEntry, Layout, Probe, Stamp, claims_nothing, never_single,
};
use crate::formats::zarr::{self, Groups, STORE_KEYS};

pub const ENTRY: FormatEntry = FormatEntry {
    name: "icechunk",
    noun: "an Icechunk repository",
    summary: "Icechunk repositories, a version at a time (--ref) or all (--all-refs); virtual references into netCDF and HDF5 files",
    layout: Layout::Directory,
    claims: claims_nothing,
    sniff: None,
    probe: Some(probe),
    single: never_single,
    versioned: true,
    by_content: false,
    last_resort: false,
    // Served at `main` (or a branch): one read of its head, not a
    // listing of every chunk object.
    stamp: Stamp::Head,
    open,
};

/// The first snapshot, whose id is Icechunk's signature (a directory that
/// happens to hold `refs/` and `snapshots/` is no repository), and either
/// `refs/` (spec 1) or the `repo` object (spec 2). Where that snapshot
/// cannot be seen without a request (a bucket prefix, listed once), the
/// listing's shape decides: `snapshots/`, `refs/` or `repo`, and no Zarr
/// metadata (a Zarr store may have groups named `refs` and `snapshots`);
/// a prefix of that shape that is no repository fails to open, naming it.
/// Plain HTTP cannot list: the first snapshot alone (one HEAD).
fn probe(dir: &dyn Probe) -> bool {
    let refs = || dir.has_dir("refs") || dir.has_file("repo");
    match dir.holds(FIRST_SNAPSHOT_KEY) {
        Some(false) => false,
        Some(true) => !dir.lists() || refs(),
        None => dir.has_dir("snapshots") && refs() && !STORE_KEYS.iter().any(|k| dir.has_file(k)),
    }
}

fn open(at: &At<'_>) -> Result<Option<Dataset>> {
    let store = IcechunkStore::open(at.path, at.reference, at.opts)?;
    let h = zarr::open_store(Arc::new(store), at.opts.cache.clone())?;
    Ok(Some(h.into_dataset(at, &at.shown(), Groups::Nested)))
}
