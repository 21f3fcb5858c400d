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
use slabfs::codec::jenkins_lookup3::hashlittle;

const SIGNATURES: &[&[u8; 4]] = &[
    b"OHDR", b"OCHK", b"FRHP", b"FHIB", b"BTHD", b"BTIN", b"BTLF", b"FAHD", b"FADB", b"EAHD",
    b"EAIB", b"EASB", b"EADB",
];

/// `data` with the checksum of every structure that starts with a known
/// signature recomputed (see the module doc).
fn with_checksums(data: &[u8]) -> Vec<u8> {
    let mut file = data.to_vec();
    let starts: Vec<usize> = (0..file.len().saturating_sub(3))
        .filter(|&i| SIGNATURES.iter().any(|s| &file[i..i + 4] == *s))
        .collect();
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(file.len());
        if end >= start + 8 {
            let sum = hashlittle(&file[start..end - 4], 0);
            file[end - 4..end].copy_from_slice(&sum.to_le_bytes());
        }
    }
    file
}

fuzz_target!(|data: &[u8]| {
    slabfs_fuzz::open_and_probe("hdf5/data", "fuzz.h5", data);
    let fixed = with_checksums(data);
    if fixed != data {
        slabfs_fuzz::open_and_probe("hdf5/data", "fuzz.h5", &fixed);
    }
});
