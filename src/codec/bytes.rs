//! `bytes`: the array→bytes codec that lays an array out as its elements'
//! bytes in C order, in a stated byte order.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/bytes/index.html>
//!
//! ```json
//! {"name": "bytes", "configuration": {"endian": "little"}}
//! ```
//!
//! `endian` may be absent only when no element needs swapping (1-byte
//! types, byte strings, raw bits). Whether it is needed depends on the
//! array's data type, which the codec does not see when it is built, so a
//! missing `endian` for a multi-byte type is reported by
//! [`ArrayToBytesCodec::validate`] when the array is opened (the array is
//! then skipped with the error), and again by any decode. Zarr v2 arrays get this
//! codec from their dtype's byte order ([`BytesCodec::new`]).
//!
//! Decoding checks the length and byte-swaps in place to native order: no
//! copy when the stored order is already native.

use serde_json::Value;

use super::entry::CodecEntry;
use super::numeric::{config_str, reject_unknown_keys};
use super::{ArrayToBytesCodec, ChunkRepr, Codec, CodecError};
use crate::dtype::{Endian, swap_in_place};

const NAME: &str = "bytes";

/// Zarr v3 `bytes` (Zarr v2 expresses it through the dtype's byte order).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: None,
    v3: Some((NAME, |c| {
        Ok(Codec::ArrayToBytes(Box::new(BytesCodec::from_v3(c)?)))
    })),
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BytesCodec {
    endian: Option<Endian>,
}

impl BytesCodec {
    pub fn new(endian: Option<Endian>) -> Self {
        BytesCodec { endian }
    }

    /// From the v3 configuration `{"endian": "little" | "big"}` (or `{}`).
    pub fn from_v3(config: &Value) -> Result<Self, CodecError> {
        reject_unknown_keys(NAME, config, &["endian"])?;
        let endian = match config_str(NAME, config, "endian")? {
            None => None,
            Some("little") => Some(Endian::Little),
            Some("big") => Some(Endian::Big),
            Some(other) => {
                return Err(CodecError::config(
                    NAME,
                    format!("endian must be \"little\" or \"big\", found {other:?}"),
                ));
            }
        };
        Ok(BytesCodec { endian })
    }
}

impl ArrayToBytesCodec for BytesCodec {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded: &ChunkRepr) -> Option<usize> {
        decoded.nbytes()
    }

    fn decode(&self, mut encoded: Vec<u8>, decoded: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        self.decode_in_place(&mut encoded, decoded)?;
        Ok(encoded)
    }

    fn validate(&self, decoded: &ChunkRepr) -> Result<(), CodecError> {
        if self.endian.is_none() && decoded.dtype.swap_unit() > 1 {
            return Err(CodecError::config(
                NAME,
                format!("\"endian\" is required for data type {}", decoded.dtype),
            ));
        }
        Ok(())
    }

    fn supports_in_place(&self) -> bool {
        true
    }

    fn in_place_swap_unit(&self, decoded: &ChunkRepr) -> Option<usize> {
        let unit = decoded.dtype.swap_unit();
        match self.endian {
            Some(e) if e != Endian::NATIVE && unit > 1 => Some(unit),
            _ => None,
        }
    }

    fn decode_in_place(&self, encoded: &mut [u8], decoded: &ChunkRepr) -> Result<(), CodecError> {
        let expected = decoded.nbytes().ok_or_else(|| {
            CodecError::Chain(format!("chunk shape {:?} is too large", decoded.shape))
        })?;
        if encoded.len() != expected {
            return Err(CodecError::WrongSize {
                codec: NAME,
                expected,
                actual: encoded.len(),
            });
        }
        let unit = decoded.dtype.swap_unit();
        if unit > 1 {
            match self.endian {
                None => {
                    return Err(CodecError::config(
                        NAME,
                        format!("\"endian\" is required for data type {}", decoded.dtype),
                    ));
                }
                Some(e) if e != Endian::NATIVE => swap_in_place(encoded, unit),
                Some(_) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Codec, CodecChain};
    use crate::dtype::DataType;
    use serde_json::json;

    fn repr(shape: &[u64], dtype: DataType) -> ChunkRepr {
        let fill = vec![0; dtype.size()];
        ChunkRepr {
            shape: shape.to_vec(),
            dtype,
            fill,
        }
    }

    #[test]
    fn swaps_big_endian_to_native() {
        let c = BytesCodec::from_v3(&json!({"endian": "big"})).unwrap();
        let r = repr(&[2], DataType::Int32);
        let mut stored = Vec::new();
        stored.extend_from_slice(&1i32.to_be_bytes());
        stored.extend_from_slice(&(-2i32).to_be_bytes());
        let out = c.decode(stored, &r).unwrap();
        assert_eq!(out[..4], 1i32.to_ne_bytes());
        assert_eq!(out[4..], (-2i32).to_ne_bytes());
    }

    #[test]
    fn complex_swaps_each_half() {
        let c = BytesCodec::new(Some(Endian::Big));
        let r = repr(&[1], DataType::Complex64);
        let mut stored = 1.5f32.to_be_bytes().to_vec();
        stored.extend_from_slice(&(-3.0f32).to_be_bytes());
        let out = c.decode(stored, &r).unwrap();
        assert_eq!(out[..4], 1.5f32.to_ne_bytes());
        assert_eq!(out[4..], (-3.0f32).to_ne_bytes());
    }

    #[test]
    fn little_endian_is_untouched() {
        let c = BytesCodec::from_v3(&json!({"endian": "little"})).unwrap();
        let r = repr(&[3], DataType::UInt16);
        let stored: Vec<u8> = [1u16, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = c.decode(stored, &r).unwrap();
        let back: Vec<u16> = out
            .chunks(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(back, [1, 2, 3]);
    }

    #[test]
    fn endian_optional_only_for_single_bytes() {
        let c = BytesCodec::from_v3(&json!({})).unwrap();
        assert_eq!(
            c.decode(vec![1, 2], &repr(&[2], DataType::UInt8)).unwrap(),
            [1, 2]
        );
        assert_eq!(
            c.decode(vec![1, 2], &repr(&[1], DataType::FixedBytes(2)))
                .unwrap(),
            [1, 2]
        );
        assert!(matches!(
            c.decode(vec![1, 2], &repr(&[1], DataType::Int16)),
            Err(CodecError::Config { .. })
        ));
        // And at open time, through the chain.
        let chain = CodecChain::new(vec![Codec::ArrayToBytes(Box::new(c))]).unwrap();
        assert!(chain.validate(&repr(&[2], DataType::UInt8)).is_ok());
        assert!(matches!(
            chain.validate(&repr(&[2], DataType::Int16)),
            Err(CodecError::Config { .. })
        ));
    }

    #[test]
    fn bad_configs_and_sizes() {
        assert!(BytesCodec::from_v3(&json!({"endian": "middle"})).is_err());
        assert!(BytesCodec::from_v3(&json!({"endian": 1})).is_err());
        assert!(BytesCodec::from_v3(&json!({"endian": "big", "extra": 1})).is_err());
        assert!(BytesCodec::from_v3(&json!([1])).is_err());
        let c = BytesCodec::new(Some(Endian::Little));
        assert!(matches!(
            c.decode(vec![0; 7], &repr(&[2], DataType::Int32)),
            Err(CodecError::WrongSize {
                expected: 8,
                actual: 7,
                ..
            })
        ));
    }
}
