//! The external types of classic netCDF (`nc_type`): codes, sizes, the
//! element type served for each, default fill values, and attribute values
//! as JSON; and the three format variants ([`Format`]), which decide the
//! types a file may hold and the widths of its header's fields. Both are
//! words the header parser ([`super::header`]) and the rest of the folder
//! use; this file uses none of theirs.
//!
//! | nc_type | code | served as | default fill (`NC_FILL_*`) |
//! | --- | --- | --- | --- |
//! | NC_BYTE | 1 | int8 | -127 |
//! | NC_CHAR | 2 | `\|S1` (one raw byte) | 0 |
//! | NC_SHORT | 3 | int16 | -32767 |
//! | NC_INT | 4 | int32 | -2147483647 |
//! | NC_FLOAT | 5 | float32 | 9.9692099683868690e+36 |
//! | NC_DOUBLE | 6 | float64 | 9.9692099683868690e+36 |
//! | NC_UBYTE (CDF-5) | 7 | uint8 | 255 |
//! | NC_USHORT (CDF-5) | 8 | uint16 | 65535 |
//! | NC_UINT (CDF-5) | 9 | uint32 | 4294967295 |
//! | NC_INT64 (CDF-5) | 10 | int64 | -9223372036854775806 |
//! | NC_UINT64 (CDF-5) | 11 | uint64 | 18446744073709551614 |
//!
//! Values on disk are big-endian two's complement / IEEE 754. Attributes
//! become JSON the way the sidecars show every format's attributes: one
//! element as a scalar, several as an array, NC_CHAR as a string (invalid
//! UTF-8 replaced by U+FFFD, trailing NULs dropped), non-finite floats as
//! the Zarr strings `"NaN"`, `"Infinity"`, `"-Infinity"`.

use std::fmt;

use serde_json::{Number, Value};

use crate::dtype::DataType;

/// The three classic format variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// CDF-1, `CDF\x01`: 32-bit offsets.
    Classic,
    /// CDF-2, `CDF\x02`: 64-bit offsets.
    Offset64,
    /// CDF-5, `CDF\x05`: 64-bit counts and offsets, unsigned and 64-bit types.
    Data64,
}

impl Format {
    /// The format of a file starting with `magic`, if it is classic netCDF.
    pub fn from_magic(magic: &[u8]) -> Option<Format> {
        match magic {
            [b'C', b'D', b'F', 1, ..] => Some(Format::Classic),
            [b'C', b'D', b'F', 2, ..] => Some(Format::Offset64),
            [b'C', b'D', b'F', 5, ..] => Some(Format::Data64),
            _ => None,
        }
    }

    /// The name netCDF4-python's `data_model` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Classic => "NETCDF3_CLASSIC",
            Format::Offset64 => "NETCDF3_64BIT_OFFSET",
            Format::Data64 => "NETCDF3_64BIT_DATA",
        }
    }

    /// Width of counts, lengths, dimids and vsize.
    pub(super) fn size_width(self) -> u64 {
        if self == Format::Data64 { 8 } else { 4 }
    }

    /// Width of `begin`.
    pub(super) fn offset_width(self) -> u64 {
        if self == Format::Classic { 4 } else { 8 }
    }
}

/// A classic netCDF external type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NcType {
    Byte,
    Char,
    Short,
    Int,
    Float,
    Double,
    UByte,
    UShort,
    UInt,
    Int64,
    UInt64,
}

impl NcType {
    /// The type with header code `code`, if `format` allows it: CDF-1 and
    /// CDF-2 know only the six classic types.
    pub fn from_code(code: u32, format: Format) -> Option<NcType> {
        use NcType::*;
        let t = match code {
            1 => Byte,
            2 => Char,
            3 => Short,
            4 => Int,
            5 => Float,
            6 => Double,
            7 => UByte,
            8 => UShort,
            9 => UInt,
            10 => Int64,
            11 => UInt64,
            _ => return None,
        };
        (code <= 6 || format == Format::Data64).then_some(t)
    }

    /// Size of one value in bytes.
    pub fn size(self) -> usize {
        use NcType::*;
        match self {
            Byte | Char | UByte => 1,
            Short | UShort => 2,
            Int | UInt | Float => 4,
            Double | Int64 | UInt64 => 8,
        }
    }

    /// The element type of the flat file.
    pub fn dtype(self) -> DataType {
        use NcType::*;
        match self {
            Byte => DataType::Int8,
            Char => DataType::FixedBytes(1),
            Short => DataType::Int16,
            Int => DataType::Int32,
            Float => DataType::Float32,
            Double => DataType::Float64,
            UByte => DataType::UInt8,
            UShort => DataType::UInt16,
            UInt => DataType::UInt32,
            Int64 => DataType::Int64,
            UInt64 => DataType::UInt64,
        }
    }

    /// netCDF's default fill value (`NC_FILL_*` of netcdf.h) in native
    /// byte order: what netcdf-c writes into never-written regions when a
    /// variable has no `_FillValue`.
    pub fn default_fill(self) -> Vec<u8> {
        use NcType::*;
        // 9.9692099683868690e+36 is 15 * 2^119: exact in both widths.
        const NC_FILL_REAL: f64 = 9.969_209_968_386_869e36;
        match self {
            Byte => (-127i8).to_ne_bytes().to_vec(),
            Char => vec![0],
            Short => (-32767i16).to_ne_bytes().to_vec(),
            Int => (-2_147_483_647i32).to_ne_bytes().to_vec(),
            Float => (NC_FILL_REAL as f32).to_ne_bytes().to_vec(),
            Double => NC_FILL_REAL.to_ne_bytes().to_vec(),
            UByte => vec![255],
            UShort => 65535u16.to_ne_bytes().to_vec(),
            UInt => 4_294_967_295u32.to_ne_bytes().to_vec(),
            Int64 => (-9_223_372_036_854_775_806i64).to_ne_bytes().to_vec(),
            UInt64 => 18_446_744_073_709_551_614u64.to_ne_bytes().to_vec(),
        }
    }

    /// Attribute values stored big-endian in `raw` (exactly `n * size`
    /// bytes, padding removed) as JSON.
    pub fn values_json(self, raw: &[u8]) -> Value {
        use NcType::*;
        if self == Char {
            let end = raw.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            return Value::String(String::from_utf8_lossy(&raw[..end]).into_owned());
        }
        let mut values: Vec<Value> = raw
            .chunks_exact(self.size())
            .map(|b| match self {
                Byte => Value::from(b[0] as i8),
                UByte => Value::from(b[0]),
                Short => Value::from(i16::from_be_bytes([b[0], b[1]])),
                UShort => Value::from(u16::from_be_bytes([b[0], b[1]])),
                Int => Value::from(i32::from_be_bytes(arr(b))),
                UInt => Value::from(u32::from_be_bytes(arr(b))),
                Int64 => Value::from(i64::from_be_bytes(arr(b))),
                UInt64 => Value::from(u64::from_be_bytes(arr(b))),
                Float => float_json(f32::from_be_bytes(arr(b)) as f64),
                Double => float_json(f64::from_be_bytes(arr(b))),
                Char => unreachable!("handled above"),
            })
            .collect();
        if values.len() == 1 {
            values.pop().expect("one value")
        } else {
            Value::Array(values)
        }
    }

    /// The CDL name, for messages.
    pub fn name(self) -> &'static str {
        use NcType::*;
        match self {
            Byte => "byte",
            Char => "char",
            Short => "short",
            Int => "int",
            Float => "float",
            Double => "double",
            UByte => "ubyte",
            UShort => "ushort",
            UInt => "uint",
            Int64 => "int64",
            UInt64 => "uint64",
        }
    }
}

impl fmt::Display for NcType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The first `N` bytes of `b` (callers pass chunks of exactly `N`).
fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    b.try_into().expect("chunk of the type's size")
}

fn float_json(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::from("NaN"),
        None if x > 0.0 => Value::from("Infinity"),
        None => Value::from("-Infinity"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codes_by_format() {
        assert_eq!(NcType::from_code(6, Format::Classic), Some(NcType::Double));
        assert_eq!(NcType::from_code(7, Format::Offset64), None);
        assert_eq!(NcType::from_code(11, Format::Data64), Some(NcType::UInt64));
        assert_eq!(NcType::from_code(0, Format::Data64), None);
        assert_eq!(NcType::from_code(12, Format::Data64), None);
    }

    #[test]
    fn attribute_json() {
        assert_eq!(NcType::Short.values_json(&[0xff, 0xfe]), json!(-2));
        assert_eq!(
            NcType::UInt64.values_json(&[0xff; 16]),
            json!([u64::MAX, u64::MAX])
        );
        assert_eq!(NcType::Char.values_json(b"K\xc3\xa9\0\0"), json!("Ké"));
        assert_eq!(NcType::Char.values_json(b"\xff"), json!("\u{fffd}"));
        assert_eq!(
            NcType::Float.values_json(&[0x7f, 0xc0, 0, 0, 0xff, 0x80, 0, 0, 0x3f, 0xc0, 0, 0]),
            json!(["NaN", "-Infinity", 1.5])
        );
        assert_eq!(NcType::Double.values_json(&[]), json!([]));
    }

    #[test]
    fn default_fills() {
        assert_eq!(
            f32::from_ne_bytes(NcType::Float.default_fill().try_into().unwrap()),
            9.969_21e36_f32
        );
        assert_eq!(
            f64::from_ne_bytes(NcType::Double.default_fill().try_into().unwrap()),
            9.969_209_968_386_869e36
        );
        for t in [NcType::Byte, NcType::Char, NcType::Int64, NcType::UShort] {
            assert_eq!(t.default_fill().len(), t.size());
        }
    }
}
