//! kerchunk / fsspec reference files (`kerchunk::refs`: versions 0 and 1,
//! inline, base64 and url refs, `templates`, `gen` with the Jinja subset of
//! `kerchunk::template`; `kerchunk::store`: url resolution and
//! confinement; the Zarr metadata inside), opened as a dataset and read.
//!
//! Input: the references JSON, written as `fuzz.json` into a copy of
//! `tests/fixtures/kerchunk/data`, where the netCDF-3, HDF5 and raw files
//! the seeds (the fixtures' reference files) point into live. Checked: no
//! panic, reads return what `read_at` promises, and parsing the same
//! document directly (`refs::parse`) agrees with what loading it did:
//! a document `parse` rejects never loads.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = slabfs::formats::kerchunk::refs::parse(doc);
    }
    slabfs_fuzz::open_and_probe("kerchunk/data", "fuzz.json", data);
});
