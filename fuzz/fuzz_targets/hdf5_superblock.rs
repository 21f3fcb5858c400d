//! The HDF5 superblock (`hdf5::find_signature`, `hdf5::meta::superblock`,
//! versions 0 to 3, after a user block or not) and the root group's object
//! header (`meta::object_header`, continuations followed), every message
//! of it decoded by its parser (`slabfs_fuzz::parse_messages`).
//!
//! Input: an HDF5 file. It is parsed as is and again with its checksums
//! recomputed (`slabfs_fuzz::hdf5_with_checksums`, plus the superblock's
//! own for versions 2 and 3), so that mutations behind a checksum are
//! explored too. Checked: no panic; a signature only at 0 or a power of
//! two from 512; a superblock that parses has addresses and lengths of 2,
//! 4 or 8 bytes, a version of 0 to 3 and a defined root address; the
//! promises `parse_messages` checks. Seeds: the files of
//! `tests/fixtures/hdf5/data` up to 12 KiB, and the first 12 KiB of the
//! others.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use slabfs::codec::jenkins_lookup3::hashlittle;
use slabfs::formats::hdf5::{find_signature, meta};
use slabfs_fuzz::{MemFile, hdf5_with_checksums, parse_messages};

fn check(data: &[u8]) {
    let file = Arc::new(MemFile(data.to_vec()));
    let Ok(Some(base)) = find_signature(file.as_ref()) else {
        return;
    };
    assert!(
        base == 0 || (base >= 512 && base.is_power_of_two()),
        "signature at {base}"
    );
    let Ok((f, sb)) = meta::superblock(file, base, data.len() as u64) else {
        return;
    };
    for size in [f.sizeof_addr, f.sizeof_len] {
        assert!([2, 4, 8].contains(&size), "{size}-byte fields");
    }
    assert!(sb.version <= 3);
    assert!(!f.undefined(sb.root));
    if let Ok(messages) = meta::object_header(&f, sb.root, "root group") {
        parse_messages(&f, &messages);
    }
}

/// `data` with the checksums of its version 2 structures and of a
/// version 2 or 3 superblock (at 0) recomputed.
fn fixed(data: &[u8]) -> Vec<u8> {
    let mut file = hdf5_with_checksums(data);
    if file.len() > 13 && matches!(file[8], 2 | 3) {
        // Signature, version, the two sizes, flags, four addresses.
        let a = file[9] as usize;
        let end = 12 + 4 * a;
        if file.len() >= end + 4 {
            let sum = hashlittle(&file[..end], 0);
            file[end..end + 4].copy_from_slice(&sum.to_le_bytes());
        }
    }
    file
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let f = fixed(data);
    if f != data {
        slabfs_fuzz::dump("superblock.h5", &f);
        check(&f);
    }
});
