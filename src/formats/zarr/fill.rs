//! Zarr fill values: JSON → one element in native byte order.
//!
//! Zarr v2 (`.zarray` `fill_value`): a number, `"NaN"`, `"Infinity"`,
//! `"-Infinity"`, a `[re, im]` pair for complex types, base64 for byte
//! strings and raw types, `null` (undefined contents, which slabfs serves as
//! zarr-python does: zeros, or NaT for datetimes). Zarr v3 (`zarr.json`) adds the hex bit
//! pattern `"0x7fc00000"` for floats (and for each half of a complex pair)
//! and byte arrays for `r<N>`. Anything else is an error naming the value.

use base64::Engine;
use half::f16;
use serde_json::Value;

use crate::dtype::{DataType, NumericKind};

/// Encode a fill value for `dtype`. `Err` is a message for the caller to
/// wrap with the metadata file's path.
pub fn parse_fill(value: &Value, dtype: &DataType) -> Result<Vec<u8>, String> {
    let size = dtype.size();
    let bad = || format!("fill_value {value} is not a valid {dtype}");
    if value.is_null() {
        // "Undefined": serve what zarr-python reads, the dtype's default,
        // which is NaT for datetimes and zero for everything else.
        return Ok(match dtype {
            DataType::DateTime64(_) | DataType::TimeDelta64(_) => i64::MIN.to_ne_bytes().to_vec(),
            _ => vec![0; size],
        });
    }
    match dtype.kind() {
        NumericKind::Bool => match value {
            Value::Bool(b) => Ok(vec![u8::from(*b)]),
            Value::Number(n) if n.as_u64() == Some(0) || n.as_u64() == Some(1) => {
                Ok(vec![n.as_u64().unwrap_or(0) as u8])
            }
            _ => Err(bad()),
        },
        NumericKind::Int | NumericKind::UInt => {
            let v = int_value(value).ok_or_else(bad)?;
            let (min, max) = int_bounds(dtype);
            if v < min || v > max {
                return Err(format!("fill_value {value} is out of range for {dtype}"));
            }
            // Two's-complement truncation to the element size.
            Ok((v as u128).to_ne_bytes()[native_low_bytes(size)].to_vec())
        }
        NumericKind::Float => float_bytes(value, size).ok_or_else(bad),
        NumericKind::Complex => {
            let half = size / 2;
            match value {
                Value::Array(parts) if parts.len() == 2 => {
                    let mut out = float_bytes(&parts[0], half).ok_or_else(bad)?;
                    out.extend(float_bytes(&parts[1], half).ok_or_else(bad)?);
                    Ok(out)
                }
                // A plain number: the real part.
                Value::Number(_) | Value::String(_) => {
                    let mut out = float_bytes(value, half).ok_or_else(bad)?;
                    out.extend(vec![0; half]);
                    Ok(out)
                }
                _ => Err(bad()),
            }
        }
        NumericKind::Opaque => {
            let bytes = match value {
                Value::String(s) => base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|_| bad())?,
                Value::Array(items) => items
                    .iter()
                    .map(|v| v.as_u64().filter(|&b| b < 256).map(|b| b as u8))
                    .collect::<Option<Vec<u8>>>()
                    .ok_or_else(bad)?,
                Value::Number(n) if n.as_u64() == Some(0) => vec![],
                _ => return Err(bad()),
            };
            if bytes.len() > size {
                return Err(format!("fill_value {value} is longer than {size} bytes"));
            }
            // NumPy pads short byte strings with NULs.
            let mut out = bytes;
            out.resize(size, 0);
            if let DataType::Unicode(_) = dtype {
                // base64 of UCS-4 little-endian code points.
                if cfg!(target_endian = "big") {
                    crate::dtype::swap_in_place(&mut out, 4);
                }
            }
            Ok(out)
        }
    }
}

/// Where the `size` low-order bytes of a native u128 are.
fn native_low_bytes(size: usize) -> std::ops::Range<usize> {
    if cfg!(target_endian = "little") {
        0..size
    } else {
        16 - size..16
    }
}

fn int_value(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| {
                // Integral floats such as 1.0 or -9999.0.
                let f = n.as_f64()?;
                (f.fract() == 0.0 && f.abs() < 1.8e19).then_some(f as i128)
            }),
        // NumPy's NaT.
        Value::String(s) if s == "NaT" => Some(i128::from(i64::MIN)),
        _ => None,
    }
}

fn int_bounds(dtype: &DataType) -> (i128, i128) {
    let bits = dtype.size() as u32 * 8;
    match dtype.kind() {
        NumericKind::UInt => (0, (1i128 << bits) - 1),
        _ => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
    }
}

/// A float of `size` bytes (2, 4 or 8) from a JSON number or one of the
/// special strings, in native byte order.
fn float_bytes(value: &Value, size: usize) -> Option<Vec<u8>> {
    if let Value::String(s) = value
        && let Some(hex) = s.strip_prefix("0x")
    {
        if hex.len() != size * 2 {
            return None;
        }
        let bits = u64::from_str_radix(hex, 16).ok()?;
        return Some(match size {
            2 => (bits as u16).to_ne_bytes().to_vec(),
            4 => (bits as u32).to_ne_bytes().to_vec(),
            8 => bits.to_ne_bytes().to_vec(),
            _ => return None,
        });
    }
    let f = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => f64::NAN,
            "Infinity" | "inf" => f64::INFINITY,
            "-Infinity" | "-inf" => f64::NEG_INFINITY,
            _ => return None,
        },
        _ => return None,
    };
    Some(match size {
        2 => f16::from_f64(f).to_bits().to_ne_bytes().to_vec(),
        4 => (f as f32).to_ne_bytes().to_vec(),
        8 => f.to_ne_bytes().to_vec(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fill(v: Value, dt: DataType) -> Result<Vec<u8>, String> {
        parse_fill(&v, &dt)
    }

    #[test]
    fn numbers_and_specials() {
        assert_eq!(
            fill(json!(-9999), DataType::Int32).unwrap(),
            (-9999i32).to_ne_bytes()
        );
        assert_eq!(
            fill(json!(65535), DataType::UInt16).unwrap(),
            65535u16.to_ne_bytes()
        );
        assert!(fill(json!(65536), DataType::UInt16).is_err());
        assert!(fill(json!(-1), DataType::UInt8).is_err());
        assert_eq!(
            fill(json!(u64::MAX), DataType::UInt64).unwrap(),
            u64::MAX.to_ne_bytes()
        );
        assert_eq!(
            fill(json!(1.5), DataType::Float64).unwrap(),
            1.5f64.to_ne_bytes()
        );
        let nan = fill(json!("NaN"), DataType::Float32).unwrap();
        assert!(f32::from_ne_bytes(nan.try_into().unwrap()).is_nan());
        assert_eq!(
            fill(json!("-Infinity"), DataType::Float64).unwrap(),
            f64::NEG_INFINITY.to_ne_bytes()
        );
        assert_eq!(
            fill(json!("0x7fc00001"), DataType::Float32).unwrap(),
            0x7fc0_0001u32.to_ne_bytes()
        );
        assert!(fill(json!("0x7fc0"), DataType::Float32).is_err());
        assert_eq!(
            fill(json!(1.0), DataType::Float16).unwrap(),
            0x3c00u16.to_ne_bytes()
        );
        assert_eq!(fill(json!(null), DataType::Float64).unwrap(), vec![0; 8]);
        assert_eq!(fill(json!(true), DataType::Bool).unwrap(), vec![1]);
        assert!(fill(json!("x"), DataType::Int8).is_err());
    }

    #[test]
    fn complex_and_bytes() {
        let mut want = 1.0f32.to_ne_bytes().to_vec();
        want.extend(f32::NAN.to_ne_bytes());
        let got = fill(json!([1.0, "NaN"]), DataType::Complex64).unwrap();
        assert_eq!(&got[..4], &want[..4]);
        assert!(f32::from_ne_bytes(got[4..].try_into().unwrap()).is_nan());
        assert_eq!(
            fill(json!("YWJj"), DataType::FixedBytes(5)).unwrap(),
            b"abc\0\0"
        );
        assert!(fill(json!("YWJjZGVmZw=="), DataType::FixedBytes(5)).is_err());
        assert_eq!(
            fill(json!([1, 2]), DataType::RawBits(2)).unwrap(),
            vec![1, 2]
        );
    }
}
