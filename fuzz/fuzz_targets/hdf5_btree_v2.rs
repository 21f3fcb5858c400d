//! Version 2 B-trees: the chunk index of layout version 4
//! (`index::chunks` with `ChunkIndex::BTreeV2`, record types 10 and 11,
//! filtered or not), or, selector bit 0 set, any v2 B-tree walked record
//! by record as the name index of dense links and attributes is
//! (`dense::btree_records`: header, internal and leaf nodes, the record
//! count widths derived from the node size, depth, cycles).
//!
//! Input: `slabfs_fuzz::H5Input` (`addr` the B-tree header), then for a
//! chunk index the dataset's geometry (`slabfs_fuzz::Geom`), then the
//! file. Checked: no panic; chunks inside the grid
//! (`slabfs_fuzz::check_chunk_index`); every record of a walk has the
//! same type and size. Seeds: the v2 B-trees of small files h5py writes
//! with `libver="latest"` (`make_seeds.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::formats::hdf5::dense::btree_records;
use slabfs::formats::hdf5::meta::ChunkIndex;
use slabfs_fuzz::{Geom, H5Input, check_chunk_index};

fuzz_target!(|data: &[u8]| {
    let Some(input) = H5Input::parse(data) else {
        return;
    };
    if input.selector() & 1 != 0 {
        let f = input.file(input.rest);
        let mut out = Vec::new();
        if btree_records(&f, input.addr, "fuzz", &mut out).is_ok()
            && let Some((kind, first)) = out.first()
        {
            for (k, rec) in &out {
                assert_eq!(k, kind, "records of two types");
                assert_eq!(rec.len(), first.len(), "records of two sizes");
            }
        }
        return;
    }
    let Some((g, file)) = Geom::parse(input.rest) else {
        return;
    };
    let f = input.file(file);
    check_chunk_index(&f, &ChunkIndex::BTreeV2 { addr: input.addr }, &g);
});
