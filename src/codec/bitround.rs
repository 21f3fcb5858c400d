//! numcodecs `bitround`: floats stored with the low mantissa bits rounded
//! away.
//!
//! numcodecs `BitRound` (`numcodecs/bitround.py`, after Klöwer et al.
//! 2021); zarr-python 3 writes it into Zarr v3 metadata as the
//! array→array codec `numcodecs.bitround`.
//!
//! ```json
//! {"id": "bitround", "keepbits": 10}
//! ```
//!
//! The rounding is lossy and happens only when writing; the stored values
//! are ordinary floats of the same type, so decoding is the identity
//! (numcodecs reinterprets the buffer as floats of the same width).
//! `keepbits` is checked to be a non-negative integer, as numcodecs does.

use serde_json::Value;

use super::array_filter::ArrayFilter;
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::config_int;
use super::{BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};

const NAME: &str = "bitround";

/// numcodecs `bitround` (a filter: array→array as v3 `numcodecs.bitround`).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Filter(|c| Ok(Box::new(BitRound::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitRound {
    keepbits: u32,
}

impl BitRound {
    /// From the numcodecs object `{"id": "bitround", "keepbits": n}`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let keepbits = config_int(NAME, config, "keepbits")?
            .ok_or_else(|| CodecError::config(NAME, "missing \"keepbits\""))?;
        let keepbits = u32::try_from(keepbits).map_err(|_| {
            CodecError::config(
                NAME,
                format!("\"keepbits\" {keepbits} must be zero or positive"),
            )
        })?;
        Ok(BitRound { keepbits })
    }

    pub fn keepbits(&self) -> u32 {
        self.keepbits
    }
}

impl BytesToBytesCodec for BitRound {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        Some(decoded_size)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        size.check(NAME, encoded.len())?;
        Ok(encoded)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        Some(
            DecodedSize::Exact(out.len())
                .check(NAME, encoded.len())
                .map(|()| out.copy_from_slice(encoded)),
        )
    }
}

impl ArrayFilter for BitRound {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        Ok(decoded.clone())
    }

    fn native(&self) -> Box<dyn ArrayFilter> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_with_size_checks() {
        let c = BitRound::from_v2(&json!({"id": NAME, "keepbits": 7})).unwrap();
        assert_eq!(c.keepbits(), 7);
        assert_eq!(
            c.decode(vec![1, 2, 3, 4], DecodedSize::Exact(4)).unwrap(),
            [1, 2, 3, 4]
        );
        assert!(matches!(
            c.decode(vec![1, 2, 3], DecodedSize::Exact(4)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            c.decode(vec![1, 2, 3], DecodedSize::AtMost(2)),
            Err(CodecError::TooLarge { .. })
        ));
        let mut out = [0; 4];
        c.decode_into(&[5, 6, 7, 8], &mut out).unwrap().unwrap();
        assert_eq!(out, [5, 6, 7, 8]);
        assert!(c.decode_into(&[5, 6, 7], &mut out).unwrap().is_err());
        for bad in [json!({"id": NAME}), json!({"id": NAME, "keepbits": -1})] {
            assert!(BitRound::from_v2(&bad).is_err(), "{bad}");
        }
    }
}
