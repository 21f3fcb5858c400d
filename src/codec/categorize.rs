//! numcodecs `categorize`: strings stored as small integers indexing a
//! list of labels.
//!
//! numcodecs `Categorize` (`numcodecs/categorize.py`).
//!
//! ```json
//! {"id": "categorize", "labels": ["female", "male"], "dtype": "<U6", "astype": "|u1"}
//! ```
//!
//! Value `k` (1-based) decodes to `labels[k-1]`; anything else (0 for a
//! value that was not a label when writing) to the empty string. numcodecs
//! compares with `enc == k`, so float or bool codes work the same way
//! (`1.0` and `True` are label 1). The output is NumPy's fixed-width
//! `dtype`: UCS-4 code points in its byte order, a label longer than the
//! width cut, a shorter one padded with zeros, as assigning a `str` into a
//! `<U<n>` array does. numcodecs' other choice, `dtype` object, has no flat
//! representation and is refused.

use serde_json::Value;

use super::array_filter::ArrayFilter;
use super::entry::{CodecEntry, Numcodecs};
use super::numeric::{Element, Value as Num, config_object, config_required_str, config_str};
use super::numeric::{filter_elements, filter_encoded_size};
use super::{BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};
use crate::dtype::{DataType, Endian};

const NAME: &str = "categorize";

/// numcodecs `categorize` (a filter: array→array as v3
/// `numcodecs.categorize`, a name zarr-python does not register).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Filter(|c| Ok(Box::new(Categorize::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Categorize {
    /// Each label as the `width` code points it decodes to.
    labels: Vec<Vec<u32>>,
    /// Code points per decoded element.
    width: usize,
    endian: Endian,
    astype: Element,
}

impl Categorize {
    /// From the numcodecs object.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let dtype = config_required_str(NAME, config, "dtype")?;
        let (width, endian) = match DataType::from_numpy(dtype) {
            Ok((DataType::Unicode(n), endian)) => (n, endian),
            _ => {
                return Err(CodecError::config(
                    NAME,
                    format!("dtype {dtype:?} is not a fixed-width unicode type (<U<n>)"),
                ));
            }
        };
        let astype =
            Element::from_numpy(NAME, config_str(NAME, config, "astype")?.unwrap_or("|u1"))?;
        let labels = config_object(NAME, config)?
            .get("labels")
            .and_then(Value::as_array)
            .ok_or_else(|| CodecError::config(NAME, "\"labels\" must be a list of strings"))?
            .iter()
            .map(|l| {
                let s = l.as_str().ok_or_else(|| {
                    CodecError::config(NAME, format!("label {l} is not a string"))
                })?;
                let mut cps: Vec<u32> = s.chars().take(width).map(u32::from).collect();
                cps.resize(width, 0);
                Ok(cps)
            })
            .collect::<Result<Vec<_>, CodecError>>()?;
        Ok(Categorize {
            labels,
            width,
            endian,
            astype,
        })
    }

    fn element_size(&self) -> usize {
        self.width * 4
    }

    /// The label stored value `v` selects, if any.
    fn label_of(&self, v: Num) -> Option<&[u32]> {
        // Labels are few (far below 2^53), so comparing as f64 is exact
        // for every value that could select one.
        let k = match v {
            Num::Bool(b) => b as u8 as f64,
            Num::Int(i) => i as f64,
            Num::UInt(u) => u as f64,
            Num::Float(f) => f,
            Num::Complex(re, 0.0) => re,
            Num::Complex(..) => return None,
        };
        if k.fract() != 0.0 || !(1.0..=self.labels.len() as f64).contains(&k) {
            return None;
        }
        self.labels.get(k as usize - 1).map(Vec::as_slice)
    }
}

impl BytesToBytesCodec for Categorize {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        filter_encoded_size(decoded_size, self.element_size(), self.astype.size())
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let (es, ds) = (self.astype.size(), self.element_size());
        if ds == 0 {
            // `<U0`: every element is empty, and their number unknowable.
            return Err(CodecError::config(NAME, "dtype of width 0"));
        }
        let n = filter_elements(NAME, encoded.len(), es, ds, size)?;
        let mut out = vec![0u8; n * ds];
        for (src, dst) in encoded.chunks_exact(es).zip(out.chunks_exact_mut(ds)) {
            if let Some(label) = self.label_of(self.astype.read(src)) {
                for (&cp, b) in label.iter().zip(dst.chunks_exact_mut(4)) {
                    b.copy_from_slice(&match self.endian {
                        Endian::Little => cp.to_le_bytes(),
                        Endian::Big => cp.to_be_bytes(),
                    });
                }
            }
        }
        Ok(out)
    }
}

impl ArrayFilter for Categorize {
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        if decoded.dtype != DataType::Unicode(self.width) {
            return Err(CodecError::config(
                NAME,
                format!(
                    "its dtype is {:?} but the array's data type is {:?}",
                    DataType::Unicode(self.width),
                    decoded.dtype
                ),
            ));
        }
        Ok(ChunkRepr {
            shape: decoded.shape.clone(),
            dtype: self.astype.prim.data_type(),
            fill: vec![0; self.astype.size()],
        })
    }

    fn native(&self) -> Box<dyn ArrayFilter> {
        Box::new(Categorize {
            endian: Endian::NATIVE,
            astype: self.astype.native(),
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn utf32(s: &[&str], width: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for s in s {
            let mut cps: Vec<u32> = s.chars().map(u32::from).collect();
            cps.resize(width, 0);
            v.extend(cps.iter().flat_map(|c| c.to_le_bytes()));
        }
        v
    }

    #[test]
    fn numcodecs_docstring_example() {
        // Categorize(labels=['female', 'male'], dtype='<U10').encode(
        //     ['male', 'female', 'female', 'male', 'unexpected']) == [2, 1, 1, 2, 0]
        let c = Categorize::from_v2(
            &json!({"id": NAME, "labels": ["female", "male"], "dtype": "<U10", "astype": "|u1"}),
        )
        .unwrap();
        let out = c
            .decode(vec![2, 1, 1, 2, 0], DecodedSize::Exact(200))
            .unwrap();
        assert_eq!(out, utf32(&["male", "female", "female", "male", ""], 10));
        assert_eq!(c.encoded_size(200), Some(5));
    }

    #[test]
    fn truncation_codes_and_byte_order() {
        let c = Categorize::from_v2(
            &json!({"id": NAME, "labels": ["été", "b"], "dtype": ">U2", "astype": "<f4"}),
        )
        .unwrap();
        let enc: Vec<u8> = [1.0f32, 2.0, 2.5, 3.0, -1.0, 0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = c.decode(enc, DecodedSize::Exact(48)).unwrap();
        let mut want = Vec::new();
        for cps in [[0xe9, 0x74], [0x62, 0], [0, 0], [0, 0], [0, 0], [0, 0]] {
            for cp in cps {
                want.extend((cp as u32).to_be_bytes());
            }
        }
        assert_eq!(out, want);
        let c = Categorize::from_v2(
            &json!({"id": NAME, "labels": ["x"], "dtype": "<U1", "astype": "|b1"}),
        )
        .unwrap();
        assert_eq!(
            c.decode(vec![1, 0], DecodedSize::Exact(8)).unwrap(),
            [b'x', 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn bad_configs_and_sizes() {
        for bad in [
            json!({"id": NAME, "labels": ["a"], "dtype": "|O"}),
            json!({"id": NAME, "labels": ["a"], "dtype": "<i4"}),
            json!({"id": NAME, "labels": "a", "dtype": "<U1"}),
            json!({"id": NAME, "labels": [1], "dtype": "<U1"}),
            json!({"id": NAME, "labels": ["a"], "dtype": "<U1", "astype": "|S1"}),
        ] {
            assert!(Categorize::from_v2(&bad).is_err(), "{bad}");
        }
        let c = Categorize::from_v2(
            &json!({"id": NAME, "labels": ["a"], "dtype": "<U1", "astype": "<u2"}),
        )
        .unwrap();
        assert!(matches!(
            c.decode(vec![1, 0, 1], DecodedSize::AtMost(100)),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            c.decode(vec![1, 0, 1, 0], DecodedSize::Exact(4)),
            Err(CodecError::WrongSize { .. })
        ));
    }
}
