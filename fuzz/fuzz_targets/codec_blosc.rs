//! Blosc1 frames (`codec::blosc`): the header checks that guard the call
//! into C-Blosc, and C-Blosc itself (byte shuffle, bit shuffle, blosclz,
//! lz4, zlib, zstd, split blocks) behind them.
//!
//! Input: one frame. Checked: decoding never panics (nor, under the
//! address sanitizer, reads or writes out of bounds, in C-Blosc too: the
//! `cc` crate compiles C with `-fsanitize=address` when rustc sanitizes,
//! docs/DEVELOPMENT.md); a result respects the size
//! the caller asked for; `decode` with an exact size and `decode_into`
//! agree; a size other than the one the header states is an error; a
//! non-empty uncompressed ("memcpyed") frame decodes to the bytes after its
//! 16-byte header, as the frame format says. Seeds: numcodecs-written frames of
//! `tests/fixtures/codecs`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use slabfs::codec::{DecodedSize, from_v2};

/// Largest decoded size tried: far above the seeds' 80 000 bytes.
const LIMIT: usize = 1 << 20;
/// Blosc header: 16 bytes; flags at 2, `nbytes` (LE u32) at 4.
const HEADER: usize = 16;
const FLAG_MEMCPYED: u8 = 0x02;

fuzz_target!(|data: &[u8]| {
    let codec = from_v2(&json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}))
        .expect("a valid blosc configuration");
    let at_most = codec.decode(data.to_vec(), DecodedSize::AtMost(LIMIT));
    if let Ok(out) = &at_most {
        assert!(out.len() <= LIMIT);
    }
    if data.len() < HEADER {
        assert!(at_most.is_err(), "a frame shorter than its header decoded");
        return;
    }
    let nbytes = u32::from_le_bytes(data[4..8].try_into().unwrap()) as usize;
    if nbytes > LIMIT {
        return;
    }
    let exact = codec.decode(data.to_vec(), DecodedSize::Exact(nbytes));
    let mut out = vec![0u8; nbytes];
    let into = codec
        .decode_into(data, &mut out)
        .expect("blosc decodes into a buffer");
    match (&exact, &into, &at_most) {
        (Ok(e), Ok(()), Ok(a)) => {
            assert_eq!(e, &out, "decode and decode_into differ");
            assert_eq!(e, a, "decode with an exact and a maximum size differ");
            // A frame of no bytes decodes to nothing whatever follows its
            // header, as in C-Blosc, which returns before looking.
            if data[2] & FLAG_MEMCPYED != 0 && nbytes > 0 {
                assert_eq!(e.as_slice(), &data[HEADER..], "memcpyed frame");
            }
        }
        (Err(_), Err(_), Err(_)) => {}
        _ => panic!(
            "exact {:?}, into {:?}, at most {:?} disagree",
            exact.as_ref().map(Vec::len),
            into,
            at_most.as_ref().map(Vec::len)
        ),
    }
    // The header states the size: any other exact size is refused.
    for wrong in [nbytes.wrapping_sub(1), nbytes + 1] {
        if wrong <= LIMIT {
            assert!(
                codec
                    .decode(data.to_vec(), DecodedSize::Exact(wrong))
                    .is_err(),
                "a {nbytes}-byte frame decoded to {wrong} bytes"
            );
        }
    }
});
