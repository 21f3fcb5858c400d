//! numcodecs `astype`: values stored converted to another type.
//!
//! ```json
//! {"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}
//! ```
//!
//! Decoding is `enc.astype(decode_dtype)`: every element of
//! `encode_dtype` converted as [`super::numeric`] describes (NumPy's unsafe
//! casting), each side in its own byte order. Between two typestrs of the
//! same type it is a copy or a byte swap.

use serde_json::Value;

use super::array_filter::{ArrayFilter, retyped};
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::{Element, config_required_str, convert, filter_elements, filter_encoded_size};
use super::{BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};
use crate::dtype::swap_in_place;

const NAME: &str = "astype";

/// numcodecs `astype` (a filter: array→array as v3 `numcodecs.astype`).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Filter(|c| Ok(Box::new(AsType::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsType {
    encode: Element,
    decode: Element,
}

impl AsType {
    pub fn new(encode: Element, decode: Element) -> Self {
        AsType { encode, decode }
    }

    /// From the numcodecs object.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let encode = Element::from_numpy(NAME, config_required_str(NAME, config, "encode_dtype")?)?;
        let decode = Element::from_numpy(NAME, config_required_str(NAME, config, "decode_dtype")?)?;
        Ok(AsType::new(encode, decode))
    }
}

impl BytesToBytesCodec for AsType {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        filter_encoded_size(decoded_size, self.decode.size(), self.encode.size())
    }

    fn decode(&self, mut encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let (es, ds) = (self.encode.size(), self.decode.size());
        let n = filter_elements(NAME, encoded.len(), es, ds, size)?;
        if self.encode.prim == self.decode.prim {
            if self.encode.endian != self.decode.endian {
                // Complex numbers swap each half.
                let unit = if self.encode.prim.kind() == crate::dtype::NumericKind::Complex {
                    es / 2
                } else {
                    es
                };
                swap_in_place(&mut encoded, unit);
            }
            return Ok(encoded);
        }
        let mut out = vec![0u8; n * ds];
        convert(self.encode, &encoded, self.decode, &mut out);
        Ok(out)
    }
}

impl ArrayFilter for AsType {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        retyped(NAME, decoded, self.decode, self.encode)
    }

    fn native(&self) -> Box<dyn ArrayFilter> {
        Box::new(AsType::new(self.encode.native(), self.decode.native()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn codec(enc: &str, dec: &str) -> AsType {
        AsType::from_v2(&json!({"id": "astype", "encode_dtype": enc, "decode_dtype": dec})).unwrap()
    }

    #[test]
    fn widen_and_narrow() {
        let c = codec("<f4", "<f8");
        let out = c
            .decode(1.5f32.to_le_bytes().to_vec(), DecodedSize::Exact(8))
            .unwrap();
        assert_eq!(out, 1.5f64.to_le_bytes());
        let c = codec("<f8", ">i2");
        let enc: Vec<u8> = [-2.9f64, 40000.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = c.decode(enc, DecodedSize::Exact(4)).unwrap();
        assert_eq!(
            out,
            [(-2i16).to_be_bytes(), (-25536i16).to_be_bytes()].concat()
        );
        assert_eq!(c.encoded_size(4), Some(16));
    }

    #[test]
    fn same_type_is_a_swap() {
        let c = codec(">c8", "<c8");
        let mut enc = 1.0f32.to_be_bytes().to_vec();
        enc.extend(2.0f32.to_be_bytes());
        let out = c.decode(enc, DecodedSize::Exact(8)).unwrap();
        assert_eq!(out, [1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat());
        let c = codec("<u2", "<u2");
        assert_eq!(c.decode(vec![1, 2], DecodedSize::Exact(2)).unwrap(), [1, 2]);
    }

    #[test]
    fn bad_inputs() {
        assert!(AsType::from_v2(&json!({"id": "astype", "encode_dtype": "<f4"})).is_err());
        assert!(
            AsType::from_v2(&json!({"id": "astype", "encode_dtype": "<f4", "decode_dtype": "|S4"}))
                .is_err()
        );
        let c = codec("<f4", "<f8");
        assert!(matches!(
            c.decode(vec![0; 5], DecodedSize::Exact(10)),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            c.decode(vec![0; 4], DecodedSize::Exact(4)),
            Err(CodecError::WrongSize { .. })
        ));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..200),
            d in prop::sample::select(vec!["|i1", "<i2", ">u4", "<i8", "<f2", ">f4", "<f8", "<c8", "|b1", ">c16"]),
            e in prop::sample::select(vec!["|i1", "<i2", ">u4", "<i8", "<f2", ">f4", "<f8", "<c8", "|b1", "|u1"]),
        ) {
            let c = codec(e, d);
            if let Ok(out) = c.decode(data.clone(), DecodedSize::AtMost(1000)) {
                prop_assert_eq!(out.len(), data.len() / c.encode.size() * c.decode.size());
            }
        }
    }
}
