//! netCDF-4 and HDF5 files (`formats::hdf5`): the signature search, the
//! superblock, object headers and their continuation blocks, groups
//! (symbol tables, link messages, dense storage: fractal heaps and v2
//! B-trees), attributes (the global heap), every chunk index, and the
//! chunk reads, through `dataset::open` and `read_at`.
//!
//! Input: an HDF5 file. Version 2 structures carry Jenkins checksums that
//! random mutations rarely get right, so the target also opens a copy in
//! which every checksum the input declares is recomputed: for each
//! signature the reader checks (`OHDR`, `OCHK`, `FRHP`, `FHIB`, `BTHD`,
//! `BTIN`, `BTLF`, `FAHD`, `FADB`, `EAHD`, `EAIB`, `EASB`, `EADB`) found in
//! the input, the 4 bytes before the next such signature (or the end)
//! are set to the lookup3 hash of the bytes from the signature to there.
//! That is only right for structures laid out back to back, which is what
//! small files mostly hold, and lets the fuzzer reach behind them.
//!
//! Checked: no panic; reads return exactly the bytes up to EOF (the
//! probe). Seeds: the small files of `tests/fixtures/hdf5/data` (written
//! by netCDF4-python and h5py).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs_fuzz::hdf5_with_checksums as with_checksums;

fuzz_target!(|data: &[u8]| {
    slabfs_fuzz::open_and_probe("hdf5/data", "fuzz.h5", data);
    let fixed = with_checksums(data);
    if fixed != data {
        slabfs_fuzz::open_and_probe("hdf5/data", "fuzz.h5", &fixed);
    }
});
