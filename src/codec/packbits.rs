//! numcodecs `packbits`: booleans stored eight to a byte.
//!
//! numcodecs `PackBits` (`numcodecs/packbits.py`); zarr-python 3 knows it
//! as the array→array codec `numcodecs.packbits` (its encoded array is the
//! `uint8` vector below).
//!
//! ```json
//! {"id": "packbits"}
//! ```
//!
//! The first byte is the number of padding bits in the last byte, then
//! `np.packbits` of the flattened booleans: most significant bit first.
//! Decoding unpacks every bit to a `0`/`1` byte and drops the padding
//! from the end, exactly as numcodecs (`dec[:-n_bits_padded]`, so a
//! padding count above 7 drops that many booleans). The decoded size
//! follows from the length, and is checked before anything is allocated.

use serde_json::Value;

use super::array_filter::ArrayFilter;
use super::entry::{CodecEntry, Numcodecs};
use super::{BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};
use crate::dtype::DataType;

const NAME: &str = "packbits";

/// numcodecs `packbits` (a filter: array→array as v3 `numcodecs.packbits`).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Filter(|c| Ok(Box::new(PackBits::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackBits;

impl PackBits {
    /// From the numcodecs object `{"id": "packbits"}` (no options).
    pub fn from_v2(_config: &Value) -> Result<Self, CodecError> {
        Ok(PackBits)
    }
}

impl BytesToBytesCodec for PackBits {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        decoded_size.div_ceil(8).checked_add(1)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let Some((&padding, packed)) = encoded.split_first() else {
            return Err(CodecError::corrupt(NAME, "no padding byte"));
        };
        let bits = packed.len().checked_mul(8).ok_or(CodecError::TooLarge {
            codec: NAME,
            limit: size.limit(),
        })?;
        let n = bits.saturating_sub(padding as usize);
        size.check(NAME, n)?;
        let mut out = Vec::with_capacity(n);
        for &byte in packed {
            out.extend((0..8).rev().map(|bit| (byte >> bit) & 1));
        }
        out.truncate(n);
        Ok(out)
    }
}

impl ArrayFilter for PackBits {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        if decoded.dtype != DataType::Bool {
            return Err(CodecError::config(
                NAME,
                format!("needs a bool array, not {:?}", decoded.dtype),
            ));
        }
        let n = decoded
            .num_elements()
            .ok_or_else(|| CodecError::Chain("chunk too large".into()))?;
        Ok(ChunkRepr {
            shape: vec![1 + n.div_ceil(8)],
            dtype: DataType::UInt8,
            fill: vec![0],
        })
    }

    fn native(&self) -> Box<dyn ArrayFilter> {
        Box::new(PackBits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numcodecs_docstring_example() {
        // PackBits().encode([True, False, False, True]) == [4, 144]
        let out = PackBits
            .decode(vec![4, 144], DecodedSize::Exact(4))
            .unwrap();
        assert_eq!(out, [1, 0, 0, 1]);
        assert_eq!(PackBits.encoded_size(4), Some(2));
        assert_eq!(PackBits.encoded_size(16), Some(3));
        assert_eq!(
            PackBits.decode(vec![0], DecodedSize::Exact(0)).unwrap(),
            b""
        );
        // Padding beyond the data drops everything, as `dec[:-n]` does.
        assert_eq!(
            PackBits
                .decode(vec![9, 255], DecodedSize::Exact(0))
                .unwrap(),
            b""
        );
    }

    #[test]
    fn errors() {
        assert!(matches!(
            PackBits.decode(vec![], DecodedSize::AtMost(10)),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            PackBits.decode(vec![4, 144], DecodedSize::Exact(5)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            PackBits.decode(vec![0, 1, 2, 3], DecodedSize::AtMost(16)),
            Err(CodecError::TooLarge { .. })
        ));
        let r = ChunkRepr {
            shape: vec![3, 7],
            dtype: DataType::Bool,
            fill: vec![0],
        };
        let e = PackBits.encoded_repr(&r).unwrap();
        assert_eq!((e.shape, e.dtype), (vec![4], DataType::UInt8));
        let r = ChunkRepr {
            dtype: DataType::UInt8,
            ..r
        };
        assert!(PackBits.encoded_repr(&r).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(bools in proptest::collection::vec(any::<bool>(), 0..100)) {
            let n = bools.len();
            let mut enc = vec![((8 - n % 8) % 8) as u8];
            for chunk in bools.chunks(8) {
                let mut b = 0u8;
                for (i, &x) in chunk.iter().enumerate() {
                    b |= (x as u8) << (7 - i);
                }
                enc.push(b);
            }
            let out = PackBits.decode(enc, DecodedSize::Exact(n)).unwrap();
            prop_assert_eq!(out, bools.iter().map(|&b| b as u8).collect::<Vec<_>>());
        }
    }
}
