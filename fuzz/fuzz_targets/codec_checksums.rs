//! The checksum framings (`codec::{crc32c, crc32, adler32, fletcher32,
//! jenkins_lookup3}` over `codec::checksum32`): Zarr v3 `crc32c` and the
//! numcodecs checksums at the start or the end of the payload.
//!
//! Input: a selector byte (low four bits, modulo 9: which codec and
//! location; bit 4: "fix up", the target first writes the right checksum
//! into the frame, so that the payload side is explored too), then the
//! frame. Checked against bitwise reference implementations written here
//! from the algorithms' definitions (CRC-32C, CRC-32, Adler-32, HDF5's
//! Fletcher-32): a decode succeeds exactly when the stored value is the
//! checksum of the payload, and yields the payload; for lookup3 (no
//! reference here) a success must still yield the payload. A wrong
//! expected size is always an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use slabfs::codec::{BytesToBytesCodec, Codec, DecodedSize, from_v2, from_v3};

#[derive(Clone, Copy, PartialEq)]
enum At {
    Start,
    End,
}

/// A checksum function, when the target has a reference for it.
type Reference = Option<fn(&[u8]) -> u32>;

fn variant(v: u8) -> (Value, At, Reference) {
    match v % 9 {
        0 => (json!({"name": "crc32c"}), At::End, Some(crc32c)),
        1 => (json!({"id": "crc32c"}), At::End, Some(crc32c)),
        2 => (
            json!({"id": "crc32c", "location": "start"}),
            At::Start,
            Some(crc32c),
        ),
        3 => (json!({"id": "crc32"}), At::Start, Some(crc32)),
        4 => (
            json!({"id": "crc32", "location": "end"}),
            At::End,
            Some(crc32),
        ),
        5 => (json!({"id": "adler32"}), At::Start, Some(adler32)),
        6 => (
            json!({"id": "adler32", "location": "end"}),
            At::End,
            Some(adler32),
        ),
        7 => (json!({"id": "fletcher32"}), At::End, Some(fletcher32)),
        _ => (json!({"id": "jenkins_lookup3"}), At::End, None),
    }
}

fn build(config: &Value) -> Box<dyn BytesToBytesCodec> {
    if config.get("name").is_some() {
        match from_v3(config).expect("a valid v3 codec") {
            Some(Codec::BytesToBytes(c)) => c,
            _ => panic!("crc32c is a bytes->bytes codec"),
        }
    } else {
        from_v2(config).expect("a valid numcodecs codec")
    }
}

/// Reflected CRC-32 with polynomial `poly`, bit by bit.
fn crc_reflected(data: &[u8], poly: u32) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn crc32c(data: &[u8]) -> u32 {
    crc_reflected(data, 0x82F6_3B78)
}

fn crc32(data: &[u8]) -> u32 {
    crc_reflected(data, 0xEDB8_8320)
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    b << 16 | a
}

/// HDF5's `H5_checksum_fletcher32`: big-endian 16-bit words, an odd last
/// byte as a high half, sums from 0 folded to 16 bits every 360 words.
fn fletcher32(data: &[u8]) -> u32 {
    let fold = |x: u32| (x & 0xffff) + (x >> 16);
    let (mut s1, mut s2) = (0u32, 0u32);
    for block in data.chunks(720) {
        for w in block.chunks(2) {
            let word = if w.len() == 2 {
                (w[0] as u32) << 8 | w[1] as u32
            } else {
                (w[0] as u32) << 8
            };
            s1 += word;
            s2 += s1;
        }
        s1 = fold(s1);
        s2 = fold(s2);
    }
    s1 = fold(s1);
    s2 = fold(s2);
    s2 << 16 | s1
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    let (config, at, reference) = variant(selector & 0x0f);
    let codec = build(&config);
    let mut frame = frame.to_vec();
    let Some(payload_len) = frame.len().checked_sub(4) else {
        assert!(
            codec.decode(frame, DecodedSize::AtMost(1 << 20)).is_err(),
            "a frame shorter than its checksum decoded"
        );
        return;
    };
    let (sum_at, payload_at) = match at {
        At::Start => (0..4, 4..frame.len()),
        At::End => (payload_len..frame.len(), 0..payload_len),
    };
    if selector & 0x10 != 0
        && let Some(f) = reference
    {
        let sum = f(&frame[payload_at.clone()]);
        frame[sum_at.clone()].copy_from_slice(&sum.to_le_bytes());
    }
    let payload = frame[payload_at.clone()].to_vec();
    let stored = u32::from_le_bytes(frame[sum_at].try_into().unwrap());
    let got = codec.decode(frame.clone(), DecodedSize::Exact(payload_len));
    if let Ok(out) = &got {
        assert_eq!(out, &payload, "decoded bytes are not the payload");
    }
    if let Some(f) = reference {
        assert_eq!(
            got.is_ok(),
            stored == f(&payload),
            "accepted or refused against the reference checksum: {got:?}"
        );
    }
    let at_most = codec.decode(frame.clone(), DecodedSize::AtMost(payload_len));
    assert_eq!(at_most.ok(), got.ok());
    assert!(
        codec
            .decode(frame, DecodedSize::Exact(payload_len + 1))
            .is_err()
    );
});
