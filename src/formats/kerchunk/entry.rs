//! kerchunk references as discovery sees them ([`crate::formats::entry`]):
//! any `*.json` file inside a walked directory is looked at, and its
//! content decides (one that is not references is no dataset, silently);
//! a SOURCE file of any name that no other format knows is tried too.

use crate::error::Result;
use crate::formats::entry::{At, Dataset, FormatEntry, Layout, Stamp, never_single};
use crate::formats::zarr::Groups;

pub const ENTRY: FormatEntry = FormatEntry {
    name: "kerchunk",
    noun: "a kerchunk references file",
    summary: "kerchunk reference files (JSON, versions 0 and 1)",
    layout: Layout::File,
    claims: super::has_json_extension,
    sniff: None,
    probe: None,
    single: never_single,
    versioned: false,
    by_content: true,
    last_resort: true,
    // Its chunks are in other files.
    stamp: Stamp::Reopen,
    open,
};

fn open(at: &At<'_>) -> Result<Option<Dataset>> {
    let Some(h) = super::open(at.path, at.opts)? else {
        return Ok(None);
    };
    // A root array is named after the references file.
    let name = at
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let at = At {
        name: name.as_deref().unwrap_or("array"),
        file: None,
        store: None,
        ..at.borrowed()
    };
    Ok(Some(h.into_dataset(&at, &at.shown(), Groups::Whole)))
}
