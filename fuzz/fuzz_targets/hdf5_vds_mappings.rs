//! A virtual dataset's mappings (`hdf5::vds::mappings`: the global heap
//! object of its layout message, with the serialized selections) and the
//! index arithmetic built on them (`lattice`, `runs`, `pair_runs`).
//!
//! Input: the heap object without its checksum (the target appends it,
//! so mutations reach the entries). Checked: no panic; a selection that
//! is a lattice has indices whose positions increase and `index_ge`
//! inverts `pos`; runs stay within their cap. Seeds: the mappings of
//! `tests/fixtures/hdf5` (`data/vds.h5`, `vds_bad/missing.h5`).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use slabfs::codec::jenkins_lookup3::hashlittle;
use slabfs::formats::hdf5::io::H5File;
use slabfs::formats::hdf5::vds::{lattice, mappings, pair_runs, runs};
use slabfs_fuzz::MemFile;

fuzz_target!(|data: &[u8]| {
    let f = H5File {
        file: Arc::new(MemFile(Vec::new())),
        base: 0,
        len: 0,
        sizeof_addr: 8,
        sizeof_len: 8,
        shared: Default::default(),
    };
    let mut block = data.to_vec();
    block.extend(hashlittle(data, 0).to_le_bytes());
    let Ok(maps) = mappings(&f, &block, "fuzz") else {
        return;
    };
    for m in &maps {
        for sel in [&m.source, &m.virt] {
            let rank = sel.rank().unwrap_or(2);
            let dims = vec![13u64; rank];
            if let Some(lat) = lattice(sel, &dims, Some(9)) {
                for d in lat
                    .iter()
                    .filter(|d| d.end().is_some_and(|e| e < u64::MAX / 2))
                {
                    let n = d.len.min(64);
                    for i in 1..n {
                        assert!(d.pos(i) > d.pos(i - 1), "{d:?}");
                    }
                    for i in 0..n {
                        assert_eq!(d.index_ge(d.pos(i)), i, "{d:?}");
                    }
                }
            }
        }
        let v = runs(&m.virt, &[13, 13], Some(9), 4096);
        let s = runs(&m.source, &[13, 13], Some(9), 4096);
        if let (Some(v), Some(s)) = (v, s) {
            assert!(v.len() <= 4096 && s.len() <= 4096);
            let _ = pair_runs(&v, &s, 4096);
        }
    }
});
