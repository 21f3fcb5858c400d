//! Aggregations stored in netCDF-3 files: NCA variables (`nca_dimensions`
//! / `nca_array` attributes, `nca::netcdf`), CF-1.13 aggregation
//! variables (`nca::cf`: `aggregated_dimensions`, `aggregated_data`, the
//! `map` / `uris` / `identifiers` / `unique_values` fragment variables) and
//! CFA-0.4 (`nca::cfa04`: `cf_role = "cfa_variable"`, the `cfa_array`
//! JSON, `part` strings), opened as a dataset and read.
//!
//! Input: a directory selector byte (modulo 8), then the netCDF file,
//! written as `fuzz.nc` into that directory of a copy of
//! `tests/fixtures/nca/data`, where the fragments of the seed aggregation
//! of that directory live:
//!
//! 0 `frag` (NCA netCDF), 1..=6 `cf/{basic, grid2d, missing, size1,
//! unique, units}`, 7 `cfa04`.
//!
//! Checked: no panic, and reads return what `read_at` promises.
#![no_main]

use libfuzzer_sys::fuzz_target;

const DIRS: [&str; 8] = [
    "nca/data/frag",
    "nca/data/cf/basic",
    "nca/data/cf/grid2d",
    "nca/data/cf/missing",
    "nca/data/cf/size1",
    "nca/data/cf/unique",
    "nca/data/cf/units",
    "nca/data/cfa04",
];

fuzz_target!(|data: &[u8]| {
    let Some((&dir, file)) = data.split_first() else {
        return;
    };
    slabfs_fuzz::open_and_probe(DIRS[dir as usize % DIRS.len()], "fuzz.nc", file);
});
