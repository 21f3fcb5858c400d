//! What a datatype message's version changes in how its bits read.
//!
//! A float's class bit 6 is VAX byte order only from datatype message
//! version 3 on (`H5O__dtype_decode_helper`, H5Odtype.c); in versions 1
//! and 2 HDF5 ignores it and bit 0 alone gives the byte order.

use super::storage::corpus_reads_as_h5py_reads_it;
use super::*;

/// `floats_earliest.h5` (datatype messages of version 1, no checksums)
/// with bit 6 set and bit 0 cleared in the class bits of `nbit_le`,
/// `nbit_be` and `nbit_le`'s attribute: HDF5 reads both datasets as
/// little-endian floats (`nbit_be`'s values change), and so must slabfs,
/// through the library, `slabfs cat` and a mount, against h5py's read of
/// the edited file now. Reading the bit as VAX order in every version
/// skipped both ("floating point of an unknown byte order").
#[test]
fn a_vax_bit_before_datatype_version_3_is_ignored_as_hdf5_ignores_it() {
    let mut bytes = std::fs::read(data("floats_earliest.h5")).unwrap();
    // offset 7, precision 20, exponent at 20 of 6 bits, mantissa at 7 of
    // 13 bits, bias 31: the properties of both nbit datasets, 7 bytes
    // after their class bits.
    let props = [7u8, 0, 20, 0, 20, 6, 7, 13, 31, 0, 0, 0];
    let at: Vec<usize> = bytes
        .windows(props.len())
        .enumerate()
        .filter(|(_, w)| *w == props)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 3, "nbit_le, nbit_be and nbit_le's attribute");
    for &i in &at {
        // Version 1, class 1 (floating point) before the class bits.
        assert_eq!(bytes[i - 8], 0x11);
        bytes[i - 7] = 0x60; // implied normalisation, "VAX", little-endian
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("floats_vax_bit_v1.h5");
    std::fs::write(&p, &bytes).unwrap();
    // Absolute: `corpus` joins it as it is.
    corpus_reads_as_h5py_reads_it(&[p.to_str().unwrap()], 7, Some("floating point"));
}
