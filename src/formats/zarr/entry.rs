//! Zarr as discovery sees it ([`crate::formats::entry`]): a directory (or
//! prefix) holding a metadata key at its root (`zarr.json`, `.zmetadata`,
//! `.zgroup`, `.zarray`), shown as one file when that root is an array.

use std::sync::Arc;

use super::json::MAX_METADATA_BYTES;
use super::{Hierarchy, STORE_KEYS, open_store};
use crate::error::Result;
use crate::formats::entry::{
    At, Dataset, Directory, Entry, FormatEntry, Layout, Probe, Stamp, claims_nothing, join,
};

pub const ENTRY: FormatEntry = FormatEntry {
    name: "zarr",
    noun: "a Zarr store",
    summary: "Zarr v2 and v3 stores and groups (directories), sharded or not, NCZarr",
    layout: Layout::Directory,
    claims: claims_nothing,
    sniff: None,
    probe: Some(probe),
    single,
    versioned: false,
    by_content: false,
    last_resort: false,
    stamp: Stamp::Store,
    open,
};

/// A metadata key (a file) at the root.
fn probe(dir: &dyn Probe) -> bool {
    STORE_KEYS.iter().any(|k| dir.has_file(k))
}

/// `.zarray`, or a `zarr.json` whose `node_type` is `array` (read with
/// the bound of any metadata), in the order [`open_store`] tries them.
fn single(dir: &dyn Probe) -> bool {
    if dir.has_file("zarr.json") {
        return dir
            .read("zarr.json", MAX_METADATA_BYTES)
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["node_type"] == "array");
    }
    dir.has_file(".zarray")
}

fn open(at: &At<'_>) -> Result<Option<Dataset>> {
    let h = open_store(at.store(), at.opts.cache.clone())?;
    Ok(Some(h.into_dataset(at, &at.shown(), Groups::Nested)))
}

/// Where a hierarchy's groups are read from, for their
/// [`Directory::source`] (shown in the sidecar, and what a refresh that
/// met failures checks still exists before keeping a group's attributes).
#[derive(Clone, Copy)]
pub enum Groups {
    /// A Zarr store: each group is its own directory (or prefix) in it.
    Nested,
    /// A references file: every group is in the one file (`refs.json/grp`
    /// is no path).
    Whole,
}

impl Hierarchy {
    /// The hierarchy's arrays at their mount paths under `at.prefix` (a
    /// root array is the file `at.prefix`, or `at.name` at the top), its
    /// groups' attributes (`source`: where the store is) and what it
    /// skipped.
    pub fn into_dataset(self, at: &At<'_>, source: &str, groups: Groups) -> Dataset {
        let mut ds = Dataset::default();
        for node in self.nodes {
            if node.array.is_none() {
                // v2 groups' are already without NCZarr's bookkeeping; v3
                // groups' and references' not.
                let mut attributes = node.attributes;
                super::nczarr::hide_bookkeeping(&mut attributes);
                ds.add_directory(
                    at.mount_path(&node.path),
                    Directory {
                        attributes,
                        dimensions: Vec::new(),
                        source: match groups {
                            Groups::Nested => join(source, &node.path),
                            Groups::Whole => source.to_string(),
                        },
                    },
                );
            }
            if let Some(array) = node.array {
                let path = match (at.prefix.is_empty(), node.path.is_empty()) {
                    (true, true) => at.name.to_string(),
                    // A single-array store inside a directory: the
                    // store's own directory name is the file name.
                    (false, true) => at.prefix.to_string(),
                    _ => at.mount_path(&node.path),
                };
                ds.entries.push(Entry {
                    path,
                    array: array as Arc<dyn crate::engine::array::ArraySource>,
                });
            }
        }
        ds.skipped.extend(self.skipped);
        ds.sorted()
    }
}
