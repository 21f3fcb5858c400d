//! The HDF5-only filters (`codec::{szip, nbit, scaleoffset, lzf, hdf5_lz4,
//! bitshuffle}`): their framing (size headers, block lengths, packed bits)
//! and the size checks that keep a damaged chunk from costing more than
//! one chunk.
//!
//! Input: a selector byte (which filter and parameter vector, modulo the
//! table's length), then the chunk. Checked: no panic; `AtMost(n)` never
//! yields more than `n` bytes; a chunk that decodes to `k` bytes decodes
//! to the same bytes with `Exact(k)` and through `decode_into` (when the
//! codec has it). Parameters are those HDF5 and hdf5plugin write for the
//! datasets of `tests/fixtures/hdf5/data/filters.h5` and the chunks of
//! `tests/fixtures/hdf5/codec_chunks.json` (szip block sizes, nbit).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::codec::{DecodedSize, from_hdf5};

const LIMIT: usize = 1 << 20;

const FILTERS: &[(u32, &[u32])] = &[
    (4, &[169, 8, 32, 30]),
    (4, &[141, 32, 16, 600]),
    (4, &[169, 16, 8, 100]),
    (4, &[169, 32, 64, 600]),
    (4, &[169, 2, 16, 30]),
    (4, &[177, 6, 32, 30]),
    (4, &[177, 30, 64, 32]),
    (5, &[8, 0, 60, 1, 2, 0, 12, 2]),
    (5, &[8, 0, 60, 1, 8, 1, 50, 7]),
    (5, &[8, 0, 32, 1, 4, 0, 16, 5]),
    (5, &[8, 1, 60, 1, 4, 0, 32, 0]),
    (
        6,
        &[2, 0, 300, 0, 4, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ),
    (
        6,
        &[2, 0, 128, 0, 2, 0, 0, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ),
    (
        6,
        &[0, 2, 150, 1, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ),
    (
        6,
        &[
            0, 3, 600, 1, 8, 0, 1, 1, 0, 3220176896, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
    ),
    (32000, &[4, 261, 2000]),
    (32004, &[1024]),
    (32008, &[0, 4, 4, 0, 0]),
    (32008, &[0, 4, 2, 16, 2]),
    (32008, &[0, 4, 8, 0, 3, 3]),
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let (id, params) = FILTERS[selector as usize % FILTERS.len()];
    let codec = from_hdf5(id, params).expect("valid parameters");
    let Ok(out) = codec.decode(stream.to_vec(), DecodedSize::AtMost(LIMIT)) else {
        return;
    };
    assert!(out.len() <= LIMIT, "{} bytes past the limit", out.len());
    let k = out.len();
    let exact = codec
        .decode(stream.to_vec(), DecodedSize::Exact(k))
        .expect("a chunk that decodes, decoded at its exact size");
    assert_eq!(exact, out);
    let mut into = vec![0u8; k];
    if let Some(r) = codec.decode_into(stream, &mut into) {
        r.expect("decode_into of a chunk that decodes");
        assert_eq!(into, out);
    }
});
