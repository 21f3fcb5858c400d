//! The layout numcodecs' 32-bit checksum codecs share: a little-endian
//! `u32` checksum of the payload stored before or after it.
//!
//! numcodecs (`numcodecs/checksum32.py`, class `Checksum32`) gives `crc32`,
//! `adler32` and `crc32c` one `location` option, `"start"` or `"end"`, with
//! a default that differs per codec: `crc32` and `adler32` put the
//! checksum first, `crc32c` last (as the Zarr v3 `crc32c` codec does). It
//! writes `location` into the codec's JSON only when it was given, so a
//! missing key means the codec's default. `fletcher32` and
//! `jenkins_lookup3` are separate classes with no `location`: always last.
//!
//! Each checksum codec file supplies its [`Algorithm`]; decoding is shared
//! here ([`Checksum32`], [`strip`]): check the payload length against the
//! expected decoded size *before* computing anything, verify, and strip
//! the four bytes in place (no new buffer).

use serde_json::Value;

use super::numeric::config_str;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

/// Where the checksum sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Start,
    End,
}

impl Location {
    /// The numcodecs `location` key of `config`, or `default`.
    pub fn from_config(
        codec: &str,
        config: &Value,
        default: Location,
    ) -> Result<Location, CodecError> {
        match config_str(codec, config, "location")? {
            None => Ok(default),
            Some("start") => Ok(Location::Start),
            Some("end") => Ok(Location::End),
            Some(other) => Err(CodecError::config(
                codec,
                format!("\"location\" must be \"start\" or \"end\", found {other:?}"),
            )),
        }
    }
}

/// One checksum function and its numcodecs defaults.
#[derive(Debug)]
pub struct Algorithm {
    pub name: &'static str,
    pub default_location: Location,
    pub checksum: fn(&[u8]) -> u32,
}

/// A numcodecs `Checksum32` codec: an [`Algorithm`] at a [`Location`].
#[derive(Debug, Clone)]
pub struct Checksum32 {
    algorithm: &'static Algorithm,
    location: Location,
}

impl Checksum32 {
    pub fn new(algorithm: &'static Algorithm, location: Location) -> Self {
        Checksum32 {
            algorithm,
            location,
        }
    }

    /// From the numcodecs object `{"id": ..., "location": ...}`.
    pub fn from_v2(algorithm: &'static Algorithm, config: &Value) -> Result<Self, CodecError> {
        let location = Location::from_config(algorithm.name, config, algorithm.default_location)?;
        Ok(Checksum32::new(algorithm, location))
    }

    pub fn location(&self) -> Location {
        self.location
    }
}

impl BytesToBytesCodec for Checksum32 {
    fn name(&self) -> &'static str {
        self.algorithm.name
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        decoded_size.checked_add(4)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        strip(
            self.algorithm.name,
            encoded,
            size,
            self.location,
            self.algorithm.checksum,
        )
    }
}

/// Verify the little-endian checksum at `location` of `encoded` and return
/// the payload (the same buffer, shortened).
pub fn strip(
    codec: &'static str,
    mut encoded: Vec<u8>,
    size: DecodedSize,
    location: Location,
    checksum: impl FnOnce(&[u8]) -> u32,
) -> Result<Vec<u8>, CodecError> {
    let Some(payload_len) = encoded.len().checked_sub(4) else {
        return Err(CodecError::corrupt(
            codec,
            format!("{} bytes cannot hold a 4-byte checksum", encoded.len()),
        ));
    };
    size.check(codec, payload_len)?;
    let (payload, stored) = match location {
        Location::End => encoded.split_at(payload_len),
        Location::Start => {
            let (stored, payload) = encoded.split_at(4);
            (payload, stored)
        }
    };
    let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
    let computed = checksum(payload);
    if stored != computed {
        return Err(CodecError::Checksum {
            codec,
            stored,
            computed,
        });
    }
    match location {
        Location::End => encoded.truncate(payload_len),
        Location::Start => {
            encoded.drain(..4);
        }
    }
    Ok(encoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sum(b: &[u8]) -> u32 {
        b.iter().map(|&x| x as u32).sum()
    }

    static SUM: Algorithm = Algorithm {
        name: "sum",
        default_location: Location::Start,
        checksum: sum,
    };

    #[test]
    fn both_locations() {
        let start = Checksum32::from_v2(&SUM, &json!({"id": "sum"})).unwrap();
        assert_eq!(start.location(), Location::Start);
        assert_eq!(start.encoded_size(3), Some(7));
        let out = start
            .decode(vec![6, 0, 0, 0, 1, 2, 3], DecodedSize::Exact(3))
            .unwrap();
        assert_eq!(out, [1, 2, 3]);
        let end = Checksum32::from_v2(&SUM, &json!({"id": "sum", "location": "end"})).unwrap();
        let out = end
            .decode(vec![1, 2, 3, 6, 0, 0, 0], DecodedSize::AtMost(3))
            .unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert!(Checksum32::from_v2(&SUM, &json!({"id": "sum", "location": 1})).is_err());
        assert!(Checksum32::from_v2(&SUM, &json!({"id": "sum", "location": "mid"})).is_err());
    }

    #[test]
    fn errors() {
        let c = Checksum32::new(&SUM, Location::End);
        assert!(matches!(
            c.decode(vec![1, 2, 3, 7, 0, 0, 0], DecodedSize::Exact(3)),
            Err(CodecError::Checksum {
                codec: "sum",
                stored: 7,
                computed: 6
            })
        ));
        assert!(matches!(
            c.decode(vec![0, 0, 0], DecodedSize::AtMost(3)),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            c.decode(vec![1, 2, 3, 6, 0, 0, 0], DecodedSize::Exact(4)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            c.decode(vec![1, 2, 3, 6, 0, 0, 0], DecodedSize::AtMost(2)),
            Err(CodecError::TooLarge { .. })
        ));
        assert_eq!(
            c.decode(vec![0, 0, 0, 0], DecodedSize::Exact(0)).unwrap(),
            b""
        );
    }
}
