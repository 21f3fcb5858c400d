//! Element types and byte order.
//!
//! slabfs serves every variable as a flat run of fixed-size elements, so all
//! it needs to know about a type is its size, how to byte-swap it, and how to
//! name it (NumPy typestr for sidecars, Zarr names for parsing). Values are
//! never interpreted on the read path except by codecs that compute
//! (delta, fixedscaleoffset, astype), which work through [`DataType::kind`].
//!
//! Byte order is carried separately ([`Endian`]): decoded chunks are kept in
//! the machine's native order and converted once, at the output boundary.

use std::fmt;

/// Byte order of multi-byte elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    /// The byte order of the machine slabfs runs on.
    pub const NATIVE: Endian = if cfg!(target_endian = "little") {
        Endian::Little
    } else {
        Endian::Big
    };

    /// The NumPy typestr character for this order.
    pub fn numpy_char(self) -> char {
        match self {
            Endian::Little => '<',
            Endian::Big => '>',
        }
    }
}

/// An element type. Sizes are in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float16,
    Float32,
    Float64,
    Complex64,
    Complex128,
    /// The x87 80-bit extended float (sign, 15-bit exponent, 64-bit
    /// mantissa with its leading bit stored) in 16 bytes, the last 6
    /// padding: NumPy's `longdouble` on x86-64 (typestr `f16`), what h5py
    /// reads HDF5 long doubles and other floats too wide for float64 as.
    /// Only the HDF5 reader produces it; no codec computes on it.
    X87Extended,
    /// NumPy `datetime64[unit]`, stored as int64.
    DateTime64(String),
    /// NumPy `timedelta64[unit]`, stored as int64.
    TimeDelta64(String),
    /// Fixed-size byte strings (`|S<n>`), never swapped.
    FixedBytes(usize),
    /// Fixed-size UCS-4 strings (`<U<n>`): `n` code points of 4 bytes each.
    Unicode(usize),
    /// Opaque raw bits (Zarr v3 `r<bits>`, NumPy `|V<n>`), never swapped.
    RawBits(usize),
}

/// How a codec that computes should see an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumericKind {
    Bool,
    Int,
    UInt,
    Float,
    Complex,
    /// Not a number: bytes, strings, raw bits.
    Opaque,
}

impl DataType {
    /// The standard integer of `size` bytes (1, 2, 4 or 8), signed or
    /// not; `None` for any other size.
    pub fn integer(size: usize, signed: bool) -> Option<DataType> {
        Some(match (size, signed) {
            (1, true) => DataType::Int8,
            (2, true) => DataType::Int16,
            (4, true) => DataType::Int32,
            (8, true) => DataType::Int64,
            (1, false) => DataType::UInt8,
            (2, false) => DataType::UInt16,
            (4, false) => DataType::UInt32,
            (8, false) => DataType::UInt64,
            _ => return None,
        })
    }

    /// netCDF's default fill value for this type (`NC_FILL_*` of
    /// netcdf.h), native byte order; zeros for types netCDF does not have.
    /// What every netCDF-family reader (netCDF-4, NCA, NCZarr) uses when
    /// a variable declares no `_FillValue`.
    pub fn netcdf_default_fill(&self) -> Vec<u8> {
        const NC_FILL_REAL: f64 = 9.969_209_968_386_869e36;
        match self {
            DataType::Int8 => (-127i8).to_ne_bytes().to_vec(),
            DataType::Int16 => (-32767i16).to_ne_bytes().to_vec(),
            DataType::Int32 => (-2_147_483_647i32).to_ne_bytes().to_vec(),
            DataType::Int64 => (-9_223_372_036_854_775_806i64).to_ne_bytes().to_vec(),
            DataType::UInt8 => vec![255],
            DataType::UInt16 => 65535u16.to_ne_bytes().to_vec(),
            DataType::UInt32 => u32::MAX.to_ne_bytes().to_vec(),
            DataType::UInt64 => (u64::MAX - 1).to_ne_bytes().to_vec(),
            DataType::Float32 => (NC_FILL_REAL as f32).to_ne_bytes().to_vec(),
            DataType::Float64 => NC_FILL_REAL.to_ne_bytes().to_vec(),
            other => vec![0; other.size()],
        }
    }

    /// Size of one element in bytes.
    pub fn size(&self) -> usize {
        use DataType::*;
        match self {
            Bool | Int8 | UInt8 => 1,
            Int16 | UInt16 | Float16 => 2,
            Int32 | UInt32 | Float32 => 4,
            Int64 | UInt64 | Float64 | Complex64 | DateTime64(_) | TimeDelta64(_) => 8,
            Complex128 | X87Extended => 16,
            FixedBytes(n) | RawBits(n) => *n,
            Unicode(n) => n * 4,
        }
    }

    /// The unit a byte swap reverses: the whole element for scalars, each
    /// half of a complex number, each code point of a UCS-4 string, and 1
    /// (nothing to swap) for single bytes and opaque types.
    pub fn swap_unit(&self) -> usize {
        use DataType::*;
        match self {
            Complex64 => 4,
            Complex128 => 8,
            Unicode(_) => 4,
            FixedBytes(_) | RawBits(_) => 1,
            other => other.size(),
        }
    }

    pub fn kind(&self) -> NumericKind {
        use DataType::*;
        match self {
            Bool => NumericKind::Bool,
            Int8 | Int16 | Int32 | Int64 | DateTime64(_) | TimeDelta64(_) => NumericKind::Int,
            UInt8 | UInt16 | UInt32 | UInt64 => NumericKind::UInt,
            Float16 | Float32 | Float64 | X87Extended => NumericKind::Float,
            Complex64 | Complex128 => NumericKind::Complex,
            FixedBytes(_) | Unicode(_) | RawBits(_) => NumericKind::Opaque,
        }
    }

    /// Parse a NumPy typestr such as `<f8`, `>i4`, `|b1`, `|S12`, `<M8[ns]`.
    ///
    /// Returns the type and the byte order the typestr names (`|` and `=` are
    /// read as native: they only occur where order does not matter or means
    /// the writer's machine, which for every writer we know is little-endian
    /// hardware, but native is the only safe reading of `=`).
    pub fn from_numpy(typestr: &str) -> Result<(DataType, Endian), String> {
        let bad = || format!("unsupported NumPy dtype {typestr:?}");
        let mut chars = typestr.chars();
        let order = match chars.next().ok_or_else(bad)? {
            '<' => Endian::Little,
            '>' => Endian::Big,
            '|' | '=' => Endian::NATIVE,
            _ => return Err(bad()),
        };
        let rest = chars.as_str();
        let kind = rest.chars().next().ok_or_else(bad)?;
        let tail = &rest[1..];
        let num = |s: &str| s.parse::<usize>().map_err(|_| bad());
        use DataType::*;
        let dt = match kind {
            'b' if tail == "1" => Bool,
            'i' => match num(tail)? {
                1 => Int8,
                2 => Int16,
                4 => Int32,
                8 => Int64,
                _ => return Err(bad()),
            },
            'u' => match num(tail)? {
                1 => UInt8,
                2 => UInt16,
                4 => UInt32,
                8 => UInt64,
                _ => return Err(bad()),
            },
            'f' => match num(tail)? {
                2 => Float16,
                4 => Float32,
                // `f16` (longdouble) is not parsed: no Zarr or NCA array
                // has it; only the HDF5 reader serves it.
                8 => Float64,
                _ => return Err(bad()),
            },
            'c' => match num(tail)? {
                8 => Complex64,
                16 => Complex128,
                _ => return Err(bad()),
            },
            'S' | 'a' => FixedBytes(positive(num(tail)?).ok_or_else(bad)?),
            'V' => RawBits(positive(num(tail)?).ok_or_else(bad)?),
            'U' => Unicode(positive(num(tail)?).ok_or_else(bad)?),
            'M' | 'm' => {
                let unit = tail
                    .strip_prefix("8[")
                    .and_then(|u| u.strip_suffix(']'))
                    .filter(|u| !u.is_empty() && u.chars().all(|c| c.is_ascii_alphanumeric()))
                    .ok_or_else(bad)?
                    .to_string();
                if kind == 'M' {
                    DateTime64(unit)
                } else {
                    TimeDelta64(unit)
                }
            }
            _ => return Err(bad()),
        };
        Ok((dt, order))
    }

    /// The NumPy typestr of this type in the given byte order (`|` where
    /// order is meaningless).
    pub fn numpy_typestr(&self, order: Endian) -> String {
        use DataType::*;
        let o = if self.swap_unit() == 1 {
            '|'
        } else {
            order.numpy_char()
        };
        match self {
            Bool => "|b1".into(),
            Int8 => "|i1".into(),
            UInt8 => "|u1".into(),
            Int16 | Int32 | Int64 => format!("{o}i{}", self.size()),
            UInt16 | UInt32 | UInt64 => format!("{o}u{}", self.size()),
            Float16 | Float32 | Float64 | X87Extended => format!("{o}f{}", self.size()),
            Complex64 | Complex128 => format!("{o}c{}", self.size()),
            DateTime64(u) => format!("{o}M8[{u}]"),
            TimeDelta64(u) => format!("{o}m8[{u}]"),
            FixedBytes(n) => format!("|S{n}"),
            RawBits(n) => format!("|V{n}"),
            Unicode(n) => format!("{o}U{n}"),
        }
    }

    /// Parse a Zarr v3 core data type name (`float32`, `r16`, ...).
    pub fn from_zarr_v3(name: &str) -> Option<DataType> {
        use DataType::*;
        Some(match name {
            "bool" => Bool,
            "int8" => Int8,
            "int16" => Int16,
            "int32" => Int32,
            "int64" => Int64,
            "uint8" => UInt8,
            "uint16" => UInt16,
            "uint32" => UInt32,
            "uint64" => UInt64,
            "float16" => Float16,
            "float32" => Float32,
            "float64" => Float64,
            "complex64" => Complex64,
            "complex128" => Complex128,
            _ => {
                let bits: usize = name.strip_prefix('r')?.parse().ok()?;
                if bits == 0 || !bits.is_multiple_of(8) {
                    return None;
                }
                RawBits(bits / 8)
            }
        })
    }
}

fn positive(n: usize) -> Option<usize> {
    (n > 0).then_some(n)
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DataType::*;
        match self {
            Bool => f.write_str("bool"),
            Int8 => f.write_str("int8"),
            Int16 => f.write_str("int16"),
            Int32 => f.write_str("int32"),
            Int64 => f.write_str("int64"),
            UInt8 => f.write_str("uint8"),
            UInt16 => f.write_str("uint16"),
            UInt32 => f.write_str("uint32"),
            UInt64 => f.write_str("uint64"),
            Float16 => f.write_str("float16"),
            Float32 => f.write_str("float32"),
            Float64 => f.write_str("float64"),
            X87Extended => f.write_str("longdouble"),
            Complex64 => f.write_str("complex64"),
            Complex128 => f.write_str("complex128"),
            DateTime64(u) => write!(f, "datetime64[{u}]"),
            TimeDelta64(u) => write!(f, "timedelta64[{u}]"),
            FixedBytes(n) => write!(f, "bytes{n}"),
            Unicode(n) => write!(f, "unicode{n}"),
            RawBits(n) => write!(f, "r{}", n * 8),
        }
    }
}

/// An x87 extended float ([`DataType::X87Extended`], native order) as
/// the nearest f64, for JSON: infinities and NaN kept, values beyond
/// f64's range infinite or zero.
pub fn x87_to_f64(bytes: &[u8]) -> f64 {
    let mut b = [0u8; 16];
    let n = bytes.len().min(16);
    b[..n].copy_from_slice(&bytes[..n]);
    let v = if cfg!(target_endian = "big") {
        u128::from_be_bytes(b)
    } else {
        u128::from_le_bytes(b)
    };
    let mant = v as u64;
    let exp = ((v >> 64) & 0x7FFF) as i32;
    let sign = if (v >> 79) & 1 == 1 { -1.0 } else { 1.0 };
    if exp == 0x7FFF {
        return if mant << 1 == 0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    // mant * 2^(exp - 16383 - 63), denormals with exponent 1.
    let mut k = exp.max(1) - 16383 - 63;
    let mut x = mant as f64;
    while k > 1000 && x.is_finite() {
        x *= 2f64.powi(1000);
        k -= 1000;
    }
    while k < -1000 && x != 0.0 {
        x *= 2f64.powi(-1000);
        k += 1000;
    }
    sign * x * 2f64.powi(k)
}

/// Reverse the byte order of every `unit`-byte group of `buf` in place.
/// `unit` 1 is a no-op; `buf.len()` must be a multiple of `unit`.
pub fn swap_in_place(buf: &mut [u8], unit: usize) {
    match unit {
        0 | 1 => {}
        2 => buf.chunks_exact_mut(2).for_each(|c| c.swap(0, 1)),
        4 => buf.chunks_exact_mut(4).for_each(|c| {
            let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]).swap_bytes();
            c.copy_from_slice(&v.to_ne_bytes());
        }),
        8 => buf.chunks_exact_mut(8).for_each(|c| {
            let v = u64::from_ne_bytes(c.try_into().expect("chunk of 8")).swap_bytes();
            c.copy_from_slice(&v.to_ne_bytes());
        }),
        n => buf.chunks_exact_mut(n).for_each(|c| c.reverse()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_typestrs_round_trip() {
        for s in [
            "|b1", "|i1", "<i2", ">i4", "<i8", "|u1", ">u2", "<u4", "<u8", "<f2", ">f4", "<f8",
            "<c8", ">c16", "|S7", "|V3", "<U5", "<M8[ns]", ">m8[s]",
        ] {
            let (dt, order) = DataType::from_numpy(s).unwrap();
            assert_eq!(dt.numpy_typestr(order), s, "{s}");
        }
    }

    #[test]
    fn bad_typestrs_are_errors() {
        for s in [
            "", "f8", "<f3", "<i16", "|S0", "<M8", "<M8[]", "O", "|O8", "<x4",
        ] {
            assert!(DataType::from_numpy(s).is_err(), "{s}");
        }
    }

    #[test]
    fn swap_units() {
        let mut b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        swap_in_place(&mut b, 4);
        assert_eq!(b, [4, 3, 2, 1, 8, 7, 6, 5]);
        swap_in_place(&mut b, 8);
        assert_eq!(b, [5, 6, 7, 8, 1, 2, 3, 4]);
        let mut c = [1u8, 2, 3];
        swap_in_place(&mut c, 3);
        assert_eq!(c, [3, 2, 1]);
        assert_eq!(DataType::Complex128.swap_unit(), 8);
        assert_eq!(DataType::X87Extended.swap_unit(), 16);
        let x87 = |bytes: [u8; 10]| {
            let mut b = [0u8; 16];
            b[..10].copy_from_slice(&bytes);
            if cfg!(target_endian = "big") {
                b.reverse();
            }
            x87_to_f64(&b)
        };
        assert_eq!(x87([0, 0, 0, 0, 0, 0, 0, 0x80, 0xFF, 0x3F]), 1.0);
        assert_eq!(x87([0, 0, 0, 0, 0, 0, 0, 0xC0, 0x00, 0xC0]), -3.0);
        assert_eq!(
            x87([0, 0, 0, 0, 0, 0, 0, 0x80, 0xFF, 0xFF]),
            f64::NEG_INFINITY
        );
        assert!(x87([0, 0, 0, 0, 0, 0, 0, 0xC0, 0xFF, 0x7F]).is_nan());
        // 2^-1074 (f64's smallest denormal), 2^-1100 (under it), 2^2000.
        assert_eq!(x87([0, 0, 0, 0, 0, 0, 0, 0x80, 0xCD, 0x3B]), 5e-324);
        assert_eq!(x87([0, 0, 0, 0, 0, 0, 0, 0x80, 0xB3, 0x3B]), 0.0);
        assert_eq!(x87([0, 0, 0, 0, 0, 0, 0, 0x80, 0xCF, 0x47]), f64::INFINITY);
        assert_eq!(DataType::X87Extended.numpy_typestr(Endian::Big), ">f16");
        assert_eq!(DataType::from_zarr_v3("r24"), Some(DataType::RawBits(3)));
        assert_eq!(DataType::from_zarr_v3("r7"), None);
    }
}
