//! numcodecs `quantize`: floats stored rounded to a number of decimal
//! digits, possibly in a narrower float type.
//!
//! numcodecs `Quantize` (`numcodecs/quantize.py`); zarr-python 3 writes it
//! into Zarr v3 metadata as the array→array codec `numcodecs.quantize`.
//!
//! ```json
//! {"id": "quantize", "digits": 3, "dtype": "<f8", "astype": "<f4"}
//! ```
//!
//! The rounding is lossy and happens only when writing: decoding is
//! `enc.view(astype).astype(dtype)`, the float conversion of
//! [`super::astype`] (each typestr in its own byte order). numcodecs
//! refuses non-float types, and so does this; `digits` is checked to be an
//! integer and otherwise unused.

use serde_json::Value;

use super::array_filter::{ArrayFilter, retyped};
use super::astype::AsType;
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::{Element, config_int, config_required_str, config_str};
use super::{BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};
use crate::dtype::NumericKind;

const NAME: &str = "quantize";

/// numcodecs `quantize` (a filter: array→array as v3 `numcodecs.quantize`).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Filter(|c| Ok(Box::new(Quantize::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantize {
    digits: i64,
    dtype: Element,
    astype: Element,
    cast: AsType,
}

impl Quantize {
    pub fn new(digits: i64, dtype: Element, astype: Element) -> Result<Self, CodecError> {
        for e in [dtype, astype] {
            if e.prim.kind() != NumericKind::Float {
                return Err(CodecError::config(
                    NAME,
                    format!(
                        "only floating point types are supported, not {:?}",
                        e.prim.data_type()
                    ),
                ));
            }
        }
        Ok(Quantize {
            digits,
            dtype,
            astype,
            cast: AsType::new(astype, dtype),
        })
    }

    /// From the numcodecs object.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let digits = config_int(NAME, config, "digits")?
            .ok_or_else(|| CodecError::config(NAME, "missing \"digits\""))?;
        let dtype = Element::from_numpy(NAME, config_required_str(NAME, config, "dtype")?)?;
        let astype = match config_str(NAME, config, "astype")? {
            Some(s) => Element::from_numpy(NAME, s)?,
            None => dtype,
        };
        Quantize::new(digits, dtype, astype)
    }

    pub fn digits(&self) -> i64 {
        self.digits
    }
}

impl BytesToBytesCodec for Quantize {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        self.cast.encoded_size(decoded_size)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        self.cast.decode(encoded, size)
    }
}

impl ArrayFilter for Quantize {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        retyped(NAME, decoded, self.dtype, self.astype)
    }

    fn native(&self) -> Box<dyn ArrayFilter> {
        Box::new(
            Quantize::new(self.digits, self.dtype.native(), self.astype.native())
                .expect("same types, other byte order"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decode_is_a_float_conversion() {
        let c =
            Quantize::from_v2(&json!({"id": NAME, "digits": 2, "dtype": "<f8", "astype": ">f4"}))
                .unwrap();
        assert_eq!(c.digits(), 2);
        let enc: Vec<u8> = [0.109375f32, -2.5]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let out = c.decode(enc, DecodedSize::Exact(16)).unwrap();
        let want: Vec<u8> = [0.109375f64, -2.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(out, want);
        assert_eq!(c.encoded_size(16), Some(8));
        // astype defaults to dtype: the identity.
        let c = Quantize::from_v2(&json!({"id": NAME, "digits": 1, "dtype": "<f4"})).unwrap();
        assert_eq!(
            c.decode(vec![1, 2, 3, 4], DecodedSize::Exact(4)).unwrap(),
            [1, 2, 3, 4]
        );
    }

    #[test]
    fn bad_configs() {
        for bad in [
            json!({"id": NAME, "dtype": "<f8"}),
            json!({"id": NAME, "digits": 1}),
            json!({"id": NAME, "digits": 1.5, "dtype": "<f8"}),
            json!({"id": NAME, "digits": 1, "dtype": "<i4"}),
            json!({"id": NAME, "digits": 1, "dtype": "<f8", "astype": "<i2"}),
        ] {
            assert!(
                matches!(Quantize::from_v2(&bad), Err(CodecError::Config { .. })),
                "{bad}"
            );
        }
    }
}
