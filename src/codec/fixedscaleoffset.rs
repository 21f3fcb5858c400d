//! numcodecs `fixedscaleoffset`: values stored as `round((x - offset) * scale)`.
//!
//! ```json
//! {"id": "fixedscaleoffset", "offset": 1000, "scale": 10, "dtype": "<f8", "astype": "|u1"}
//! ```
//!
//! `dtype` is the decoded type, `astype` the stored one (default: `dtype`),
//! each in its own byte order.
//!
//! numcodecs decodes with `((enc / scale) + offset).astype(dtype)`, where
//! `scale` and `offset` are Python numbers, which NumPy treats as "weak":
//! they take the array's type. So the arithmetic runs in `astype` when
//! that is a float type (float32 data divides in float32, rounding after
//! the division and again after the addition) and in float64 when it is an
//! integer or bool (`true_divide` of integers gives float64). The result
//! is then cast to `dtype` (truncation toward zero for integer types).
//! Checked against NumPy 2 in the fixtures. Complex `astype` is refused.

use serde_json::Value;

use super::array_filter::{ArrayFilter, retyped};
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::{
    BLOCK, Element, Prim, Value as Num, cast_slice, config_number, config_required_str, config_str,
    div, filter_elements, filter_encoded_size, round_to, specialise,
};
use super::{BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};
use crate::dtype::NumericKind;

const NAME: &str = "fixedscaleoffset";

/// numcodecs `fixedscaleoffset` (a filter: array→array as v3
/// `numcodecs.fixedscaleoffset`).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Filter(|c| Ok(Box::new(FixedScaleOffset::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq)]
pub struct FixedScaleOffset {
    offset: f64,
    scale: f64,
    dtype: Element,
    astype: Element,
    /// The float type the arithmetic runs in.
    calc: Prim,
}

impl FixedScaleOffset {
    pub fn new(
        offset: f64,
        scale: f64,
        dtype: Element,
        astype: Element,
    ) -> Result<Self, CodecError> {
        let calc = match astype.prim.kind() {
            NumericKind::Float => astype.prim,
            NumericKind::Complex => {
                return Err(CodecError::config(
                    NAME,
                    "complex \"astype\" is not supported",
                ));
            }
            _ => Prim::F64,
        };
        Ok(FixedScaleOffset {
            offset: round_to(calc, offset),
            scale: round_to(calc, scale),
            dtype,
            astype,
            calc,
        })
    }

    /// From the numcodecs object.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let dtype = Element::from_numpy(NAME, config_required_str(NAME, config, "dtype")?)?;
        let astype = match config_str(NAME, config, "astype")? {
            Some(s) => Element::from_numpy(NAME, s)?,
            None => dtype,
        };
        let offset = config_number(NAME, config, "offset")?;
        let scale = config_number(NAME, config, "scale")?;
        Self::new(offset, scale, dtype, astype)
    }
}

impl BytesToBytesCodec for FixedScaleOffset {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        filter_encoded_size(decoded_size, self.dtype.size(), self.astype.size())
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let (es, ds) = (self.astype.size(), self.dtype.size());
        let n = filter_elements(NAME, encoded.len(), es, ds, size)?;
        let mut out = vec![0u8; n * ds];
        let mut vals = vec![Num::Bool(false); BLOCK];
        for (src, dst) in encoded.chunks(BLOCK * es).zip(out.chunks_mut(BLOCK * ds)) {
            let v = &mut vals[..src.len() / es];
            self.astype.read_slice(src, v);
            cast_slice(v, self.astype.prim, self.calc);
            specialise!(self.calc, |p| {
                for x in v.iter_mut() {
                    let y = round_to(p, div(x.as_f64(), self.scale, p) + self.offset);
                    *x = Num::Float(y);
                }
            });
            cast_slice(v, self.calc, self.dtype.prim);
            self.dtype.write_slice(v, dst);
        }
        Ok(out)
    }
}

impl ArrayFilter for FixedScaleOffset {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        retyped(NAME, decoded, self.dtype, self.astype)
    }

    fn native(&self) -> Box<dyn ArrayFilter> {
        Box::new(FixedScaleOffset {
            dtype: self.dtype.native(),
            astype: self.astype.native(),
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn f8s(b: &[u8]) -> Vec<f64> {
        b.chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn numcodecs_docstring_example() {
        let c = FixedScaleOffset::from_v2(
            &json!({"id": "fixedscaleoffset", "offset": 1000, "scale": 10, "dtype": "<f8", "astype": "|u1"}),
        )
        .unwrap();
        let out = c
            .decode(vec![0, 1, 2, 3, 4, 6, 7, 8, 9, 10], DecodedSize::Exact(80))
            .unwrap();
        let want: Vec<f64> = [0u8, 1, 2, 3, 4, 6, 7, 8, 9, 10]
            .iter()
            .map(|&e| e as f64 / 10.0 + 1000.0)
            .collect();
        assert_eq!(f8s(&out), want);
        assert_eq!(f8s(&out)[1], 1000.1);
    }

    #[test]
    fn float32_arithmetic_and_int_result() {
        // astype f4: computed in float32, then cast to f8.
        let c = FixedScaleOffset::from_v2(
            &json!({"id": "fixedscaleoffset", "offset": 0.1, "scale": 3, "dtype": "<f8", "astype": "<f4"}),
        )
        .unwrap();
        let out = c
            .decode(1.0f32.to_le_bytes().to_vec(), DecodedSize::Exact(8))
            .unwrap();
        let want = ((1.0f32 / 3.0f32) + 0.1f32) as f64;
        assert_eq!(f8s(&out), [want]);
        // dtype i2: truncated.
        let c = FixedScaleOffset::from_v2(
            &json!({"id": "fixedscaleoffset", "offset": -5.5, "scale": 2, "dtype": ">i2", "astype": "|u1"}),
        )
        .unwrap();
        let out = c.decode(vec![0, 3, 30], DecodedSize::Exact(6)).unwrap();
        assert_eq!(
            out,
            [
                (-5i16).to_be_bytes(),
                (-4i16).to_be_bytes(),
                9i16.to_be_bytes()
            ]
            .concat()
        );
    }

    #[test]
    fn configs_and_sizes() {
        for bad in [
            json!({"id": "fixedscaleoffset", "offset": 0, "scale": 1}),
            json!({"id": "fixedscaleoffset", "offset": 0, "dtype": "<f8"}),
            json!({"id": "fixedscaleoffset", "offset": "x", "scale": 1, "dtype": "<f8"}),
            json!({"id": "fixedscaleoffset", "offset": 0, "scale": 1, "dtype": "<f8", "astype": "<c8"}),
        ] {
            assert!(FixedScaleOffset::from_v2(&bad).is_err(), "{bad}");
        }
        let c = FixedScaleOffset::from_v2(
            &json!({"id": "fixedscaleoffset", "offset": 0, "scale": 1, "dtype": "<f8"}),
        )
        .unwrap();
        assert_eq!(c.encoded_size(16), Some(16));
        assert!(matches!(
            c.decode(vec![0; 7], DecodedSize::Exact(8)),
            Err(CodecError::Corrupt { .. })
        ));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..200),
            d in prop::sample::select(vec!["|i1", "<i2", ">u4", "<i8", "<f2", ">f4", "<f8", "<c8", "|b1"]),
            a in prop::sample::select(vec!["|i1", "<i2", ">u4", "<i8", "<f2", ">f4", "<f8", "|b1", "|u1"]),
            scale in any::<f64>(),
            offset in any::<f64>(),
        ) {
            let c = FixedScaleOffset::new(offset, scale, Element::from_numpy(NAME, d).unwrap(), Element::from_numpy(NAME, a).unwrap()).unwrap();
            if let Ok(out) = c.decode(data.clone(), DecodedSize::AtMost(1000)) {
                prop_assert_eq!(out.len(), data.len() / c.astype.size() * c.dtype.size());
            }
        }
    }
}
