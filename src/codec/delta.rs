//! numcodecs `delta`: each element stored as its difference from the
//! previous one.
//!
//! ```json
//! {"id": "delta", "dtype": "<i4", "astype": "<i2"}
//! ```
//!
//! `dtype` is the decoded element type and `astype` the stored one
//! (default: `dtype`); each typestr carries its own byte order, which is
//! honoured on both sides, so the output is exactly numcodecs'.
//!
//! numcodecs decodes with `np.cumsum(enc, out=dec)`. NumPy runs that
//! accumulation in the *promoted* type of the two (`np.result_type(astype,
//! dtype)`), keeps the running sum in it, and casts each partial sum to
//! `dtype` when storing it. Checked against NumPy 2: `f8` differences into
//! `i4` give `[1.7, 2.6, 3.9] -> [1, 4, 8]` (a float running sum,
//! truncated), `u8` into `i8` accumulates in `f8`. Integer sums wrap.
//! Conversions follow [`super::numeric`].

use serde_json::Value;

use super::array_filter::{ArrayFilter, retyped};
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::{
    BLOCK, Element, Prim, Value as Num, cast_slice, config_required_str, config_str, cumsum_slice,
    filter_elements, filter_encoded_size, specialise,
};
use super::{BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};
use crate::dtype::NumericKind;

const NAME: &str = "delta";

/// numcodecs `delta` (a filter: array→array as v3 `numcodecs.delta`).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Filter(|c| Ok(Box::new(Delta::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    dtype: Element,
    astype: Element,
    /// The type NumPy accumulates in.
    acc: Prim,
}

impl Delta {
    pub fn new(dtype: Element, astype: Element) -> Self {
        Delta {
            dtype,
            astype,
            acc: Prim::promote(astype.prim, dtype.prim),
        }
    }

    /// From the numcodecs object `{"id": "delta", "dtype": .., "astype": ..}`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let dtype = Element::from_numpy(NAME, config_required_str(NAME, config, "dtype")?)?;
        let astype = match config_str(NAME, config, "astype")? {
            Some(s) => Element::from_numpy(NAME, s)?,
            None => dtype,
        };
        Ok(Delta::new(dtype, astype))
    }
}

impl BytesToBytesCodec for Delta {
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
        let kind = self.dtype.prim.kind();
        if self.astype.prim == self.dtype.prim
            && matches!(kind, NumericKind::Int | NumericKind::UInt)
        {
            // The common case (same integer type on both sides): one pass,
            // a wrapping sum of the raw bits.
            specialise!(self.dtype.prim, |p| {
                let (from, to) = (
                    Element {
                        prim: p,
                        ..self.astype
                    },
                    Element {
                        prim: p,
                        ..self.dtype
                    },
                );
                let mut acc = 0u64;
                for (src, dst) in encoded.chunks_exact(es).zip(out.chunks_exact_mut(ds)) {
                    let x = match from.read(src) {
                        Num::Int(i) => i as u64,
                        Num::UInt(u) => u,
                        other => unreachable!("{other:?} from an integer type"),
                    };
                    acc = acc.wrapping_add(x);
                    let v = if kind == NumericKind::Int {
                        Num::Int(acc as i64)
                    } else {
                        Num::UInt(acc)
                    };
                    to.write(v, dst);
                }
            });
            return Ok(out);
        }
        let mut vals = vec![Num::Bool(false); BLOCK];
        let mut sum: Option<Num> = None;
        for (src, dst) in encoded.chunks(BLOCK * es).zip(out.chunks_mut(BLOCK * ds)) {
            let v = &mut vals[..src.len() / es];
            self.astype.read_slice(src, v);
            cast_slice(v, self.astype.prim, self.acc);
            cumsum_slice(v, &mut sum, self.acc);
            cast_slice(v, self.acc, self.dtype.prim);
            self.dtype.write_slice(v, dst);
        }
        Ok(out)
    }
}

impl ArrayFilter for Delta {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        retyped(NAME, decoded, self.dtype, self.astype)
    }

    fn native(&self) -> Box<dyn ArrayFilter> {
        Box::new(Delta::new(self.dtype.native(), self.astype.native()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn codec(dtype: &str, astype: &str) -> Delta {
        Delta::from_v2(&json!({"id": "delta", "dtype": dtype, "astype": astype})).unwrap()
    }

    #[test]
    fn numcodecs_docstring_example() {
        // numcodecs.Delta(dtype='i2', astype='i1') on arange(100, 120, 2)
        let c = codec("<i2", "|i1");
        let enc: Vec<u8> = [100i8, 2, 2, 2, 2, 2, 2, 2, 2, 2]
            .iter()
            .map(|&v| v as u8)
            .collect();
        let out = c.decode(enc, DecodedSize::Exact(20)).unwrap();
        let got: Vec<i16> = out
            .chunks(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, (100..120).step_by(2).collect::<Vec<i16>>());
    }

    #[test]
    fn numpy_accumulation_type() {
        // Checked with NumPy 2.4: np.cumsum(enc, out=dec).
        let c = codec(">i4", "<f8");
        let enc: Vec<u8> = [1.7f64, 2.6, 3.9]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = c.decode(enc, DecodedSize::Exact(12)).unwrap();
        let got: Vec<i32> = out
            .chunks(4)
            .map(|b| i32::from_be_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got, [1, 4, 8]);
        // int8 differences into int32 do not wrap at 127.
        let c = codec("<i4", "|i1");
        let out = c
            .decode(vec![100, 100, 100], DecodedSize::Exact(12))
            .unwrap();
        let got: Vec<i32> = out
            .chunks(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got, [100, 200, 300]);
        // int32 differences into int16 wrap.
        let c = codec("<i2", "<i4");
        let enc: Vec<u8> = [70000i32, 70000]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = c.decode(enc, DecodedSize::Exact(4)).unwrap();
        assert_eq!(out, [4464i16.to_le_bytes(), 8928i16.to_le_bytes()].concat());
        // astype defaults to dtype.
        let c = Delta::from_v2(&json!({"id": "delta", "dtype": "<u2"})).unwrap();
        assert_eq!(c.encoded_size(10), Some(10));
        let out = c
            .decode(vec![0xff, 0xff, 2, 0], DecodedSize::Exact(4))
            .unwrap();
        assert_eq!(out, [0xff, 0xff, 1, 0]);
    }

    #[test]
    fn sizes_and_configs() {
        let c = codec("<i4", "<i2");
        assert_eq!(c.encoded_size(40), Some(20));
        assert_eq!(c.encoded_size(41), None);
        assert!(matches!(
            c.decode(vec![0; 3], DecodedSize::Exact(6)),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            c.decode(vec![0; 4], DecodedSize::Exact(4)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            c.decode(vec![0; 4], DecodedSize::AtMost(4)),
            Err(CodecError::TooLarge { .. })
        ));
        for bad in [
            json!({"id": "delta"}),
            json!({"id": "delta", "dtype": "<S4"}),
            json!({"id": "delta", "dtype": "<M8[ns]"}),
            json!({"id": "delta", "dtype": "<i4", "astype": "x"}),
        ] {
            assert!(Delta::from_v2(&bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn integer_round_trip(vals in proptest::collection::vec(any::<i32>(), 0..100)) {
            // Encode as numcodecs does (wrapping differences in i4).
            let mut enc = Vec::new();
            let mut prev = 0i32;
            for (i, &v) in vals.iter().enumerate() {
                let d = if i == 0 { v } else { v.wrapping_sub(prev) };
                enc.extend_from_slice(&d.to_be_bytes());
                prev = v;
            }
            let c = codec("<i4", ">i4");
            let out = c.decode(enc, DecodedSize::Exact(vals.len() * 4)).unwrap();
            let want: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            prop_assert_eq!(out, want);
        }

        #[test]
        fn random_bytes_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..200),
            d in prop::sample::select(vec!["|i1", "<i2", ">u4", "<i8", "<f2", ">f4", "<f8", "<c8", "|b1", ">u8"]),
            a in prop::sample::select(vec!["|i1", "<i2", ">u4", "<i8", "<f2", ">f4", "<f8", "<c16", "|b1", "|u1"]),
        ) {
            let c = codec(d, a);
            if let Ok(out) = c.decode(data.clone(), DecodedSize::AtMost(1000)) {
                prop_assert_eq!(out.len(), data.len() / c.astype.size() * c.dtype.size());
            }
        }
    }
}
