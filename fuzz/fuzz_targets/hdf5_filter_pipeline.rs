//! The HDF5 filter pipeline message (`hdf5::meta::filters`, versions 1
//! and 2) and the codecs built from it (`codec::registry::from_hdf5`,
//! HDF5's shuffle), as a chunked dataset's codec chain is.
//!
//! Input: the message's bytes. Checked: no panic; a pipeline that parses
//! has as many filters as its count byte says, and round-trips: encoded
//! again here from the spec (section IV.A.2.l) as version 1 and as
//! version 2, it parses to the same filters (version 2 keeps no name for
//! ids below 256); building a codec from each filter never panics.
//! Seeds: the pipelines (deflate, shuffle, fletcher32, zstd, bzip2,
//! blosc) of the files in `tests/fixtures/hdf5/data` (`make_seeds.py`).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use slabfs::codec::shuffle::Shuffle;
use slabfs::codec::{BytesToBytesCodec, DecodedSize, registry};
use slabfs::formats::hdf5::io::H5File;
use slabfs::formats::hdf5::meta::{Filter, filters};
use slabfs_fuzz::MemFile;

fn encode(version: u8, list: &[Filter]) -> Option<Vec<u8>> {
    let mut out = vec![version, u8::try_from(list.len()).ok()?];
    if version == 1 {
        out.extend([0; 6]);
    }
    let u16le = |out: &mut Vec<u8>, v: usize| -> Option<()> {
        out.extend(u16::try_from(v).ok()?.to_le_bytes());
        Some(())
    };
    for f in list {
        u16le(&mut out, f.id as usize)?;
        // The name with its NUL, padded to 8 bytes in version 1; version 2
        // stores none for the ids HDF5 defines (below 256).
        let mut name = f.name.as_bytes().to_vec();
        name.push(0);
        if version == 1 {
            name.resize(name.len().div_ceil(8) * 8, 0);
        }
        let with_name = version == 1 || f.id >= 256;
        if with_name {
            u16le(&mut out, name.len())?;
        }
        u16le(&mut out, f.optional as usize)?;
        u16le(&mut out, f.params.len())?;
        if with_name {
            out.extend(&name);
        }
        for p in &f.params {
            out.extend(p.to_le_bytes());
        }
        if version == 1 && f.params.len() % 2 == 1 {
            out.extend([0; 4]);
        }
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let f = H5File {
        file: Arc::new(MemFile(Vec::new())),
        base: 0,
        len: 0,
        sizeof_addr: 8,
        sizeof_len: 8,
        shared: Default::default(),
    };
    let Ok(list) = filters(&f, data, "fuzz") else {
        return;
    };
    assert_eq!(list.len(), data[1] as usize, "filter count");
    for version in [1, 2] {
        let Some(bytes) = encode(version, &list) else {
            continue;
        };
        let again = filters(&f, &bytes, "fuzz").expect("a re-encoded pipeline parses");
        let expected: Vec<Filter> = list
            .iter()
            .map(|x| Filter {
                name: if version == 2 && x.id < 256 {
                    String::new()
                } else {
                    x.name.clone()
                },
                ..x.clone()
            })
            .collect();
        assert_eq!(again, expected, "version {version} round trip");
    }
    for x in &list {
        if x.id == 2 {
            let size = x.params.first().copied().unwrap_or(4) as usize;
            // Unshuffle the message's own bytes: any element size,
            // partial tail or not.
            let _ = Shuffle::hdf5(size).decode(data.to_vec(), DecodedSize::Exact(data.len()));
        } else {
            let _ = registry::from_hdf5(x.id, &x.params);
            let _ = registry::hdf5_to_json(x.id, &x.params);
        }
    }
});
