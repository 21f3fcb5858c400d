//! NCA JSON descriptors (`nca::descriptor`, `nca::part`, `nca::aggregate`,
//! `nca::partition`, `nca::convert`, `nca::units`, `nca::fragment`): a
//! `*.nca.json` opened the way `slabfs mount` opens it and every variable
//! read.
//!
//! Input: the descriptor's text, written as `fuzz.nca.json` into a copy of
//! `tests/fixtures/nca/data`, so the fragments the seeds (the fixtures'
//! own descriptors) name are really there: netCDF, raw, Zarr and nested
//! descriptor fragments, with units, directions, `part` selections,
//! holes. Checked: no panic, and reads return what `read_at` promises.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    slabfs_fuzz::open_and_probe("nca/data", "fuzz.nca.json", data);
});
