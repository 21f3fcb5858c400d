//! NcML files (`ncml::model`, `ncml::build`, `ncml::members`,
//! `ncml::join`, `ncml::values`): an `*.ncml` opened the way `slabfs mount`
//! opens it and every variable read.
//!
//! Input: the NcML text, written as `fuzz.ncml` into a copy of
//! `tests/fixtures/ncml`, so the members the seeds (the fixtures' own NcML
//! files) name are really there: netCDF-3 and netCDF-4 members, scans,
//! joinExisting, joinNew, union, nested. Checked: no panic, and reads
//! return what `read_at` promises.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    slabfs_fuzz::open_and_probe("ncml", "fuzz.ncml", data);
});
