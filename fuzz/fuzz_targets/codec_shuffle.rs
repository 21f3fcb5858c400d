//! numcodecs `shuffle` (`codec::shuffle`), checked against an
//! element-by-element reference of the numcodecs definition
//! (`enc[j*n + i] = dec[i*s + j]` for `n` elements of `s` bytes; element
//! sizes 0 and 1 copy; a buffer that is not whole elements is refused).
//! Blosc's own byte and bit shuffles run in C inside `codec_blosc`.
//!
//! Input: the element size byte, then the shuffled bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use slabfs::codec::{DecodedSize, from_v2};

fuzz_target!(|data: &[u8]| {
    let Some((&s, enc)) = data.split_first() else {
        return;
    };
    let s = s as usize;
    let codec = from_v2(&json!({"id": "shuffle", "elementsize": s})).expect("a valid shuffle");
    let got = codec.decode(enc.to_vec(), DecodedSize::Exact(enc.len()));
    let expected = if s <= 1 || enc.is_empty() {
        Some(enc.to_vec())
    } else if enc.len() % s != 0 {
        None
    } else {
        let n = enc.len() / s;
        let mut dec = vec![0u8; enc.len()];
        for i in 0..n {
            for j in 0..s {
                dec[i * s + j] = enc[j * n + i];
            }
        }
        Some(dec)
    };
    match (got, expected) {
        (Ok(g), Some(e)) => assert_eq!(g, e),
        (Err(_), None) => {}
        (g, e) => panic!(
            "shuffle {s} of {} bytes: got {g:?}, expected {e:?}",
            enc.len()
        ),
    }
    // A size that is not the input's is refused (a filter keeps sizes).
    assert!(
        codec
            .decode(enc.to_vec(), DecodedSize::Exact(enc.len() + 1))
            .is_err()
    );
});
