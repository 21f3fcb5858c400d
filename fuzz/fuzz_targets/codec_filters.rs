//! Any numcodecs codec by its JSON (`codec::from_v2` through the
//! registry): mostly the filters (delta, fixedscaleoffset, astype,
//! quantize, bitround, packbits, categorize, shuffle), whose
//! configurations (dtypes, scales, labels) are themselves input.
//!
//! Input: the codec's JSON object, a NUL byte, the encoded bytes. Checked:
//! no panic building or decoding; `AtMost(n)` never yields more than `n`
//! bytes; a codec with a fixed encoded size (every filter but packbits,
//! see below) only decodes an input of exactly the size its output
//! encodes to; `Exact(k)` of a
//! `k`-byte result gives the same bytes. Seeds: the codec vectors of
//! `tests/fixtures/codecs`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::codec::{DecodedSize, from_v2};

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some(nul) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let Ok(config) = serde_json::from_slice(&data[..nul]) else {
        return;
    };
    let encoded = &data[nul + 1..];
    let Ok(codec) = from_v2(&config) else {
        return;
    };
    let Ok(out) = codec.decode(encoded.to_vec(), DecodedSize::AtMost(LIMIT)) else {
        return;
    };
    assert!(out.len() <= LIMIT);
    // packbits takes its padding count from the data and, as numcodecs
    // does, accepts counts above 7 (codec::packbits documents it): its
    // input may be longer than what its output encodes to.
    if let Some(n) = codec.encoded_size(out.len())
        && codec.name() != "packbits"
    {
        assert_eq!(
            n,
            encoded.len(),
            "{config}: {} bytes decoded to {} bytes, which encode to {n}",
            encoded.len(),
            out.len()
        );
    }
    let exact = codec
        .decode(encoded.to_vec(), DecodedSize::Exact(out.len()))
        .expect("the size it decoded to is accepted as exact");
    assert_eq!(exact, out, "{config}");
});
