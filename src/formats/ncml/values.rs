//! Data written in the NcML file itself: `<values>` (a list, or `start`
//! and `increment`), a joinNew's `coordValue`s, attribute values; and the
//! array that serves them.
//!
//! Values are parsed as netCDF-Java parses them (`Array.makeArray`): a
//! list split at the `separator` (else at whitespace), each token read as
//! a double and narrowed to the variable's type toward zero (an `int`
//! given `1.7` holds 1), 64-bit integers read as integers; a value out of
//! the type's range is an error here where Java would wrap it;
//! `start + i * increment` computed in double and cast. A `char`
//! variable's list is its text, one byte per element; a `String`
//! variable is served as fixed-length bytes as long as its longest value
//! (NUL-padded), as netCDF-4 strings are elsewhere in slabfs.

use serde_json::Value;

use super::error::{NcmlError, Pos};
use super::model::{self, AttrType, VarType};
use crate::dtype::DataType;
use crate::engine::array::{ArrayMeta, ArraySource};
use crate::engine::index::Region;
use crate::engine::index::copy::copy_region;
use crate::error::Result;

/// Values held in memory larger than this are refused (a coordinate
/// written out in the NcML file is kilobytes; this is a hostile file).
pub const MAX_VALUES_BYTES: u64 = 64 << 20;

/// An array whose elements are in memory: C order, native byte order.
#[derive(Debug)]
pub struct InMemory {
    meta: ArrayMeta,
    data: Vec<u8>,
}

impl InMemory {
    /// `data` holds every element of `meta` (checked).
    pub fn new(meta: ArrayMeta, data: Vec<u8>) -> Result<InMemory> {
        if data.len() as u64 != meta.nbytes() {
            return Err(crate::Error::metadata(
                meta.source.clone(),
                format!(
                    "{} bytes of values for {} elements of {}",
                    data.len(),
                    meta.num_elements(),
                    meta.dtype
                ),
            ));
        }
        Ok(InMemory { meta, data })
    }
}

impl ArraySource for InMemory {
    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        if region.num_elements() == 0 {
            return Ok(());
        }
        let zeros = vec![0; region.count.len()];
        copy_region(
            &self.data,
            &self.meta.shape,
            &region.start,
            out,
            &region.count,
            &zeros,
            &region.count,
            self.meta.item_size(),
        );
        Ok(())
    }
}

/// The tokens of a `<values>` list or a `coordValue`: split at
/// `separator`, else at whitespace (a coordValue also at commas, as
/// netCDF-Java splits it).
pub fn tokens<'a>(text: &'a str, separator: Option<&str>) -> Vec<&'a str> {
    match separator {
        Some(s) if !s.is_empty() => text.split(s).collect(),
        _ => text.split_whitespace().collect(),
    }
}

/// One element of `dtype` (a number type) from `token`, native order.
pub fn number(dtype: &DataType, token: &str) -> std::result::Result<Vec<u8>, String> {
    let t = token.trim();
    let bad = || format!("{t:?} is not a {dtype} value");
    // Java's Long.parseLong for 64-bit types, Double.parseDouble narrowed
    // toward zero for the others.
    let int = || -> std::result::Result<i128, String> {
        if matches!(dtype, DataType::Int64 | DataType::UInt64) {
            return t.parse::<i128>().map_err(|_| bad());
        }
        let x = t.parse::<f64>().map_err(|_| bad())?;
        if !x.is_finite() {
            return Err(bad());
        }
        Ok(x.trunc() as i128)
    };
    let float = || -> std::result::Result<f64, String> {
        match t.to_ascii_lowercase().as_str() {
            "nan" => Ok(f64::NAN),
            "inf" | "infinity" | "+inf" => Ok(f64::INFINITY),
            "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
            _ => t.parse::<f64>().map_err(|_| bad()),
        }
    };
    macro_rules! int_as {
        ($t:ty) => {{
            let v = int()?;
            <$t>::try_from(v)
                .map_err(|_| format!("{t} is out of range for {dtype}"))?
                .to_ne_bytes()
                .to_vec()
        }};
    }
    Ok(match dtype {
        DataType::Int8 => int_as!(i8),
        DataType::UInt8 => int_as!(u8),
        DataType::Int16 => int_as!(i16),
        DataType::UInt16 => int_as!(u16),
        DataType::Int32 => int_as!(i32),
        DataType::UInt32 => int_as!(u32),
        DataType::Int64 => int_as!(i64),
        DataType::UInt64 => int_as!(u64),
        DataType::Float32 => (float()? as f32).to_ne_bytes().to_vec(),
        DataType::Float64 => float()?.to_ne_bytes().to_vec(),
        d => return Err(format!("values of {d} cannot be written in NcML")),
    })
}

/// `start + i * increment` for `n` elements of `dtype`, native order.
pub fn ramp(
    dtype: &DataType,
    start: f64,
    increment: f64,
    n: u64,
) -> std::result::Result<Vec<u8>, String> {
    if n.saturating_mul(dtype.size() as u64) > MAX_VALUES_BYTES {
        return Err(format!(
            "{n} values are more than slabfs holds from an NcML file"
        ));
    }
    let mut out = Vec::with_capacity(n as usize * dtype.size());
    for i in 0..n {
        let v = start + i as f64 * increment;
        let b = match dtype {
            DataType::Float32 => (v as f32).to_ne_bytes().to_vec(),
            DataType::Float64 => v.to_ne_bytes().to_vec(),
            // Java's cast of a double to an integer type: toward zero.
            d => number(d, &format!("{}", v.trunc() as i128))?,
        };
        out.extend_from_slice(&b);
    }
    Ok(out)
}

/// The elements of `<values>` for a variable of `kind` with `n` elements
/// (`None`: the count is the list's), with the dtype they are served as
/// (a `String` variable's width is its longest value's).
pub fn of_values(
    v: &model::Values,
    kind: &VarType,
    n: Option<u64>,
) -> std::result::Result<(DataType, Vec<u8>), NcmlError> {
    let err = |d: String| NcmlError::invalid(v.pos, d);
    if let (Some(start), Some(inc)) = (v.start, v.increment) {
        let VarType::Number(dtype) = kind else {
            return Err(err("start/increment values are for number variables".into()));
        };
        let count = n.or(v.npts).ok_or_else(|| {
            err("start/increment values need npts or the variable's shape".into())
        })?;
        if let (Some(npts), Some(n)) = (v.npts, n)
            && npts != n
        {
            return Err(err(format!(
                "npts=\"{npts}\" but the variable has {n} elements"
            )));
        }
        return ramp(dtype, start, inc, count)
            .map(|b| (dtype.clone(), b))
            .map_err(err);
    }
    let (dtype, data, count) = match kind {
        VarType::Char => {
            let bytes = v.text.as_bytes().to_vec();
            let count = bytes.len() as u64;
            (DataType::FixedBytes(1), bytes, count)
        }
        VarType::String => {
            let toks = tokens(&v.text, v.separator.as_deref());
            let (dtype, data) = strings(&toks);
            (dtype, data, toks.len() as u64)
        }
        VarType::Number(dtype) => {
            let toks = tokens(&v.text, v.separator.as_deref());
            let mut data = Vec::with_capacity(toks.len() * dtype.size());
            for t in &toks {
                data.extend(number(dtype, t).map_err(err)?);
            }
            (dtype.clone(), data, toks.len() as u64)
        }
    };
    if data.len() as u64 > MAX_VALUES_BYTES {
        return Err(err("more values than slabfs holds from an NcML file".into()));
    }
    if let Some(n) = n
        && n != count
        // A char variable's text may be shorter than its shape: NUL-padded.
        && !(matches!(kind, VarType::Char) && count < n)
    {
        return Err(err(format!(
            "{count} values for a variable of {n} elements"
        )));
    }
    let mut data = data;
    if let (VarType::Char, Some(n)) = (kind, n) {
        data.resize(n as usize, 0);
    }
    Ok((dtype, data))
}

/// Strings as fixed-length bytes as wide as the longest (at least 1).
pub fn strings(values: &[&str]) -> (DataType, Vec<u8>) {
    let width = values.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
    let mut data = Vec::with_capacity(width * values.len());
    for s in values {
        data.extend_from_slice(s.as_bytes());
        data.resize(data.len() + width - s.len(), 0);
    }
    (DataType::FixedBytes(width), data)
}

/// An attribute's value as the sidecars show attributes: text as a
/// string, one number as a number, several as a list.
pub fn attribute_json(a: &model::Attribute, pos: Pos) -> std::result::Result<Value, NcmlError> {
    let text = a.value.as_deref().or(a.text.as_deref()).unwrap_or_default();
    match &a.kind {
        AttrType::String => Ok(Value::String(text.to_string())),
        AttrType::Number(dtype) => {
            let toks = tokens(text, a.separator.as_deref());
            let mut out = Vec::with_capacity(toks.len());
            for t in toks {
                let b = number(dtype, t)
                    .map_err(|d| NcmlError::invalid(pos, format!("attribute {}: {d}", a.name)))?;
                out.push(number_json(dtype, &b));
            }
            Ok(match out.len() {
                1 => out.pop().expect("one"),
                _ => Value::Array(out),
            })
        }
    }
}

/// One element of `dtype` (native order) as JSON, as the sidecars show
/// numbers (non-finite floats as strings).
fn number_json(dtype: &DataType, b: &[u8]) -> Value {
    macro_rules! ne {
        ($t:ty) => {
            <$t>::from_ne_bytes(b.try_into().expect("one element"))
        };
    }
    let float = |x: f64| match serde_json::Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::from("NaN"),
        None if x > 0.0 => Value::from("Infinity"),
        None => Value::from("-Infinity"),
    };
    match dtype {
        DataType::Int8 => Value::from(ne!(i8)),
        DataType::UInt8 => Value::from(ne!(u8)),
        DataType::Int16 => Value::from(ne!(i16)),
        DataType::UInt16 => Value::from(ne!(u16)),
        DataType::Int32 => Value::from(ne!(i32)),
        DataType::UInt32 => Value::from(ne!(u32)),
        DataType::Int64 => Value::from(ne!(i64)),
        DataType::UInt64 => Value::from(ne!(u64)),
        DataType::Float32 => float(ne!(f32) as f64),
        DataType::Float64 => float(ne!(f64)),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(
        text: &str,
        kind: VarType,
        n: Option<u64>,
    ) -> std::result::Result<(DataType, Vec<u8>), NcmlError> {
        let v = model::Values {
            pos: Pos::default(),
            start: None,
            increment: None,
            npts: None,
            text: text.into(),
            separator: None,
        };
        of_values(&v, &kind, n)
    }

    #[test]
    fn lists_are_typed_as_java_parses_them() {
        let (d, b) = list(" 1 2\n 3 ", VarType::Number(DataType::Int16), Some(3)).unwrap();
        assert_eq!(d, DataType::Int16);
        assert_eq!(
            b,
            [1i16, 2, 3]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<_>>()
        );
        let (_, b) = list("1.7 -2.9", VarType::Number(DataType::Int32), None).unwrap();
        assert_eq!(
            b,
            [1i32, -2]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<_>>()
        );
        assert!(list("1.5", VarType::Number(DataType::Int64), None).is_err());
        assert!(list("300", VarType::Number(DataType::Int8), None).is_err());
        assert!(list("1 2", VarType::Number(DataType::Int32), Some(3)).is_err());
        let (_, b) = list("NaN 2.5", VarType::Number(DataType::Float32), None).unwrap();
        assert!(f32::from_ne_bytes(b[..4].try_into().unwrap()).is_nan());
        let (d, b) = list("ab c", VarType::String, None).unwrap();
        assert_eq!(d, DataType::FixedBytes(2));
        assert_eq!(b, b"abc\0");
        let (d, b) = list("hi", VarType::Char, Some(4)).unwrap();
        assert_eq!((d, b), (DataType::FixedBytes(1), b"hi\0\0".to_vec()));
    }

    #[test]
    fn ramps_are_computed_in_double_and_cast() {
        let b = ramp(&DataType::Int32, 0.0, 2.5, 4).unwrap();
        let v: Vec<i32> = b
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v, [0, 2, 5, 7]);
        assert!(ramp(&DataType::Float64, 0.0, 1.0, u64::MAX).is_err());
    }

    #[test]
    fn in_memory_reads_a_box() {
        let data: Vec<u8> = (0u8..12).collect();
        let meta = ArrayMeta::new("t", vec![3, 4], DataType::UInt8, vec![0]).unwrap();
        let a = InMemory::new(meta, data).unwrap();
        let mut out = vec![0; 4];
        a.read_region(
            &Region {
                start: vec![1, 1],
                count: vec![2, 2],
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [5, 6, 9, 10]);
    }
}
