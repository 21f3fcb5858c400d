//! `crc32c`: a CRC-32C (Castagnoli) checksum stored next to the data.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/crc32c/index.html>;
//! numcodecs `CRC32C` (`numcodecs/checksum32.py`).
//!
//! ```json
//! {"name": "crc32c"}
//! {"id": "crc32c"}
//! {"id": "crc32c", "location": "start"}
//! ```
//!
//! The checksum of the payload is a little-endian `u32`. Zarr v3 appends it;
//! numcodecs' `CRC32C` also defaults to the end (`location = 'end'`, unlike
//! its `crc32` and `adler32`, which default to the start) and writes a
//! `location` key only when it was given, so a v2 object without one means
//! the end. Decoding verifies the checksum and strips it: a mismatch is
//! [`CodecError::Checksum`]. The layout is shared with numcodecs' other
//! checksums ([`super::checksum32`]).

use serde_json::Value;

pub use super::checksum32::Location;
use super::checksum32::{Algorithm, Checksum32};
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::reject_unknown_keys;
use super::{BytesToBytesCodec, Codec, CodecError, DecodedSize};

const NAME: &str = "crc32c";

static ALGORITHM: Algorithm = Algorithm {
    name: NAME,
    default_location: Location::End,
    checksum: crc32c::crc32c,
};

/// numcodecs `crc32c` and Zarr v3 `crc32c`.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Bytes(|c| Ok(Box::new(Crc32c::from_v2(c)?))),
    )),
    v3: Some((NAME, |c| {
        Ok(Codec::BytesToBytes(Box::new(Crc32c::from_v3(c)?)))
    })),
    hdf5: None,
};

#[derive(Debug, Clone)]
pub struct Crc32c(Checksum32);

impl Crc32c {
    pub fn new(location: Location) -> Self {
        Crc32c(Checksum32::new(&ALGORITHM, location))
    }

    /// The v3 codec, which has no configuration.
    pub fn from_v3(config: &Value) -> Result<Self, CodecError> {
        reject_unknown_keys(NAME, config, &[])?;
        Ok(Crc32c::new(Location::End))
    }

    /// From the numcodecs object `{"id": "crc32c"}`, optionally with
    /// `"location": "start" | "end"`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        Ok(Crc32c(Checksum32::from_v2(&ALGORITHM, config)?))
    }

    pub fn location(&self) -> Location {
        self.0.location()
    }
}

impl BytesToBytesCodec for Crc32c {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        self.0.encoded_size(decoded_size)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        self.0.decode(encoded, size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn known_value() {
        // numcodecs.CRC32C().encode(b"abc") == b"abc" + bytes.fromhex("b73f4b36")
        let c = Crc32c::from_v2(&json!({"id": "crc32c"})).unwrap();
        let enc = [b"abc".as_slice(), &[0xb7, 0x3f, 0x4b, 0x36]].concat();
        assert_eq!(c.decode(enc, DecodedSize::Exact(3)).unwrap(), b"abc");
        let s = Crc32c::from_v2(&json!({"id": "crc32c", "location": "start"})).unwrap();
        let enc = [[0xb7, 0x3f, 0x4b, 0x36].as_slice(), b"abc"].concat();
        assert_eq!(s.decode(enc, DecodedSize::AtMost(3)).unwrap(), b"abc");
        let v3 = Crc32c::from_v3(&json!({})).unwrap();
        assert_eq!(v3.location(), Location::End);
        assert_eq!(v3.encoded_size(10), Some(14));
        assert_eq!(
            v3.decode(vec![0, 0, 0, 0], DecodedSize::Exact(0)).unwrap(),
            b""
        );
    }

    #[test]
    fn mismatch_short_and_wrong_size() {
        let c = Crc32c::from_v3(&json!({})).unwrap();
        let enc = [b"abc".as_slice(), &[0xb7, 0x3f, 0x4b, 0x37]].concat();
        assert!(matches!(
            c.decode(enc, DecodedSize::Exact(3)),
            Err(CodecError::Checksum {
                stored: 0x374b3fb7,
                computed: 0x364b3fb7,
                ..
            })
        ));
        assert!(matches!(
            c.decode(vec![1, 2, 3], DecodedSize::AtMost(10)),
            Err(CodecError::Corrupt { .. })
        ));
        let enc = [b"abc".as_slice(), &[0xb7, 0x3f, 0x4b, 0x36]].concat();
        assert!(matches!(
            c.decode(enc.clone(), DecodedSize::Exact(4)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            c.decode(enc, DecodedSize::AtMost(2)),
            Err(CodecError::TooLarge { .. })
        ));
    }

    #[test]
    fn bad_configs() {
        assert!(Crc32c::from_v3(&json!({"location": "end"})).is_err());
        assert!(Crc32c::from_v2(&json!({"id": "crc32c", "location": "middle"})).is_err());
    }

    proptest! {
        #[test]
        fn round_trip_and_any_flip_is_caught(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
            start in any::<bool>(),
        ) {
            let loc = if start { Location::Start } else { Location::End };
            let c = Crc32c::new(loc);
            let crc = crc32c::crc32c(&data).to_le_bytes();
            let enc = if start { [&crc[..], &data].concat() } else { [&data, &crc[..]].concat() };
            prop_assert_eq!(c.decode(enc.clone(), DecodedSize::Exact(data.len())).unwrap(), data.clone());
            let mut bad = enc;
            let i = flip.index(bad.len());
            bad[i] ^= 1 << bit;
            let r = c.decode(bad, DecodedSize::Exact(data.len()));
            prop_assert!(matches!(r, Err(CodecError::Checksum { .. })), "{:?}", r);
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let c = Crc32c::from_v3(&json!({})).unwrap();
            if let Ok(out) = c.decode(data.clone(), DecodedSize::AtMost(64)) {
                prop_assert_eq!(out.len() + 4, data.len());
            }
        }
    }
}
