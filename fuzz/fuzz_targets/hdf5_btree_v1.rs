//! Version 1 B-trees (`hdf5::index`): the chunk index of layout message
//! version 3 (`index::chunks` with `ChunkIndex::BTreeV1`: keys, filter
//! masks, the chunk offsets checked against the grid), or, selector bit 0
//! set, an old-style group (`index::symbol_table_group`: group nodes,
//! symbol table nodes, the local heap of names).
//!
//! Input: `slabfs_fuzz::H5Input` (`addr` the B-tree's root node, `addr2`
//! a group's local heap), then for a chunk index the dataset's geometry
//! (`slabfs_fuzz::Geom`), then the file. Checked: no panic; the chunks
//! found lie inside the grid, no more of them than it holds
//! (`slabfs_fuzz::check_chunk_index`); a group's members have an address
//! each. Seeds: the chunk B-trees and root groups of small files h5py
//! writes with `libver="earliest"` (`make_seeds.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::formats::hdf5::index::symbol_table_group;
use slabfs::formats::hdf5::meta::ChunkIndex;
use slabfs_fuzz::{Geom, H5Input, check_chunk_index};

fuzz_target!(|data: &[u8]| {
    let Some(input) = H5Input::parse(data) else {
        return;
    };
    if input.selector() & 1 != 0 {
        let f = input.file(input.rest);
        let _ = symbol_table_group(&f, input.addr, input.addr2, "fuzz");
        return;
    }
    let Some((g, file)) = Geom::parse(input.rest) else {
        return;
    };
    let f = input.file(file);
    check_chunk_index(&f, &ChunkIndex::BTreeV1 { addr: input.addr }, &g);
});
