//! Fractal heaps (`hdf5::dense::objects`): the heap header, the doubling
//! table of direct and indirect blocks, managed, tiny and huge object
//! IDs, looked up for every record of the name index (a v2 B-tree of
//! link or attribute name records), and each object decoded as the
//! caller does: selector bit 0 clear as a link message (`meta::link`),
//! set as an attribute message (`meta::attribute`).
//!
//! Input: `slabfs_fuzz::H5Input` (`addr` the heap header, `addr2` the
//! name index), then the file. Checked: no panic; an attribute that
//! decodes holds exactly `elements x size` bytes. Seeds: the dense link
//! and attribute storage of small files h5py writes with
//! `libver="latest"`, huge attributes among them (`make_seeds.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::formats::hdf5::{dense, meta};
use slabfs_fuzz::H5Input;

fuzz_target!(|data: &[u8]| {
    let Some(input) = H5Input::parse(data) else {
        return;
    };
    let f = input.file(input.rest);
    let Ok(objects) = dense::objects(&f, input.addr, input.addr2, "fuzz") else {
        return;
    };
    for o in objects {
        if input.selector() & 1 == 0 {
            let _ = meta::link(&f, &o, "fuzz");
        } else if let Ok(a) = meta::attribute(&f, &o, "fuzz") {
            let n = a.space.num_elements().unwrap() * a.size as u64;
            assert_eq!(a.data.len() as u64, n, "attribute {:?}", a.name);
        }
    }
});
