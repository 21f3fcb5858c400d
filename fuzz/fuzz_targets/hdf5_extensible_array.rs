//! The extensible array (header `EAHD`, index block `EAIB`, secondary blocks `EASB`, data blocks `EADB`, filtered entries or not, one unlimited dimension or none) chunk index of layout version 4, through
//! `index::chunks` with `ChunkIndex::ExtensibleArray`.
//!
//! Input: `slabfs_fuzz::H5Input` (`addr` the index header), then the
//! dataset's geometry (`slabfs_fuzz::Geom`), then the file. Checked: no
//! panic; the chunks found lie inside the grid, no more of them than it
//! holds (`slabfs_fuzz::check_chunk_index`). Seeds: the indexes of small
//! files h5py writes with `libver="latest"` (`make_seeds.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::formats::hdf5::meta::ChunkIndex;
use slabfs_fuzz::{Geom, H5Input, check_chunk_index};

fuzz_target!(|data: &[u8]| {
    let Some(input) = H5Input::parse(data) else {
        return;
    };
    let Some((g, file)) = Geom::parse(input.rest) else {
        return;
    };
    let f = input.file(file);
    check_chunk_index(&f, &ChunkIndex::ExtensibleArray { addr: input.addr }, &g);
});
