//! HDF5 object headers (`hdf5::meta::object_header`): version 1 and 2
//! headers, their message lists, continuation blocks (cycles, counts),
//! and every message slabfs reads decoded by its parser
//! (`slabfs_fuzz::parse_messages`: dataspace, datatype, fill value,
//! layout, filter pipeline, attribute, link, link and attribute info,
//! symbol table).
//!
//! Input: `slabfs_fuzz::H5Input` (flags, `addr` the object header, an
//! unused second address, then the file). Checked: no panic; no NIL or
//! continuation message is returned; the promises of `parse_messages`.
//! Seeds: object headers of files h5py and netCDF4-python write (version
//! 1 and 2 headers, with continuations), made by `make_seeds.py`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::formats::hdf5::meta;
use slabfs_fuzz::{H5Input, parse_messages};

fuzz_target!(|data: &[u8]| {
    let Some(input) = H5Input::parse(data) else {
        return;
    };
    let f = input.file(input.rest);
    if let Ok(messages) = meta::object_header(&f, input.addr, "fuzz") {
        parse_messages(&f, &messages);
    }
});
