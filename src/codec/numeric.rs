//! Reading, converting and computing with numeric elements exactly as
//! NumPy does, for the numcodecs filters that compute (`delta`,
//! `fixedscaleoffset`, `astype`).
//!
//! A value is read from its bytes into a [`Value`] that holds it without
//! loss (every NumPy numeric type fits `i64`, `u64`, `f64` or a pair of
//! `f64`), converted with [`cast`] (one rounding, as NumPy's C casts do),
//! and written back with [`Element::write`]. Arithmetic ([`add`], [`div`])
//! happens in a [`Prim`] "loop type" and rounds to it after every
//! operation, which reproduces NumPy's float32 and float16 loops bit for
//! bit: computing in `f64` and rounding once to a format of `p` bits is
//! exact for `+`, `-`, `*`, `/` whenever `53 >= 2p + 2` (Figueroa), true
//! for float32 (`p` = 24) and float16 (`p` = 11).
//!
//! # Conversions (`ndarray.astype`, unsafe casting)
//!
//! | from \ to | bool | integer | float | complex |
//! |---|---|---|---|---|
//! | bool | – | 0 / 1 | 0.0 / 1.0 | (0 or 1, 0) |
//! | integer | `!= 0` | two's-complement wrap to the target width | round to nearest (even) | (x, 0) |
//! | float | `!= 0` (NaN is true) | truncate toward zero, see below | round to nearest (even) | (x, 0) |
//! | complex | either part `!= 0` | real part, as float | real part | round each part |
//!
//! Float to integer is exact truncation toward zero for every value that
//! fits the target. For NaN, infinities and values out of range, C leaves
//! the result undefined and NumPy's answer depends on the machine; we
//! reproduce what NumPy 2 gives on x86-64 (where nearly all data is
//! written), checked against it in the tests and the fixtures:
//! - to int8/int16/uint8/uint16: convert to int32 (out of range gives
//!   `i32::MIN`), then wrap, so `300.7 -> int8` is 44 and `1e20 -> int8` 0;
//! - to int32 / int64: out of range gives `i32::MIN` / `i64::MIN`;
//! - to uint32 / uint64: values `>= 2^31` / `>= 2^63` are converted as
//!   `x - 2^31` / `x - 2^63` with the top bit flipped back; anything else
//!   as signed, then reinterpreted (so `-1.0 -> uint8` is 255 and
//!   `-1.0 -> uint64` is `2^64 - 1`, NaN -> uint64 is `2^63`).
//!
//! (See [`cast_from`] for float16 to uint32, which differs.)
//!
//! Integer to float16 goes through float32 as NumPy does (identical to a
//! direct rounding: every integer that float32 cannot hold exactly
//! overflows float16 anyway). float64 to float16 rounds once, correctly
//! (NumPy's `npy_doublebits_to_halfbits`; the `half` crate's `from_f64`
//! rounds twice on x86 and is not used for it).
//!
//! Bools are read as `byte != 0`. Datetimes and timedeltas are not numbers
//! here (NumPy refuses most arithmetic on them); the filters reject them.

use serde_json::{Map, Value as Json};

use super::CodecError;
use crate::dtype::{DataType, Endian, NumericKind};

/// A NumPy numeric type, as an element type and as the type a ufunc loop
/// computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prim {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
    C64,
    C128,
}

/// One element's value, held without loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Complex(f64, f64),
}

impl Prim {
    /// The primitive of a numeric [`DataType`]; None for opaque types and
    /// for datetimes/timedeltas.
    pub fn of(dtype: &DataType) -> Option<Prim> {
        use DataType as D;
        Some(match dtype {
            D::Bool => Prim::Bool,
            D::Int8 => Prim::I8,
            D::Int16 => Prim::I16,
            D::Int32 => Prim::I32,
            D::Int64 => Prim::I64,
            D::UInt8 => Prim::U8,
            D::UInt16 => Prim::U16,
            D::UInt32 => Prim::U32,
            D::UInt64 => Prim::U64,
            D::Float16 => Prim::F16,
            D::Float32 => Prim::F32,
            D::Float64 => Prim::F64,
            D::Complex64 => Prim::C64,
            D::Complex128 => Prim::C128,
            _ => return None,
        })
    }

    #[inline]
    pub fn size(self) -> usize {
        match self {
            Prim::Bool | Prim::I8 | Prim::U8 => 1,
            Prim::I16 | Prim::U16 | Prim::F16 => 2,
            Prim::I32 | Prim::U32 | Prim::F32 => 4,
            Prim::I64 | Prim::U64 | Prim::F64 | Prim::C64 => 8,
            Prim::C128 => 16,
        }
    }

    #[inline]
    pub fn kind(self) -> NumericKind {
        match self {
            Prim::Bool => NumericKind::Bool,
            Prim::I8 | Prim::I16 | Prim::I32 | Prim::I64 => NumericKind::Int,
            Prim::U8 | Prim::U16 | Prim::U32 | Prim::U64 => NumericKind::UInt,
            Prim::F16 | Prim::F32 | Prim::F64 => NumericKind::Float,
            Prim::C64 | Prim::C128 => NumericKind::Complex,
        }
    }

    /// The array data type holding elements of this type.
    pub fn data_type(self) -> DataType {
        use DataType as D;
        match self {
            Prim::Bool => D::Bool,
            Prim::I8 => D::Int8,
            Prim::I16 => D::Int16,
            Prim::I32 => D::Int32,
            Prim::I64 => D::Int64,
            Prim::U8 => D::UInt8,
            Prim::U16 => D::UInt16,
            Prim::U32 => D::UInt32,
            Prim::U64 => D::UInt64,
            Prim::F16 => D::Float16,
            Prim::F32 => D::Float32,
            Prim::F64 => D::Float64,
            Prim::C64 => D::Complex64,
            Prim::C128 => D::Complex128,
        }
    }

    /// Bits of an integer type.
    fn bits(self) -> u32 {
        self.size() as u32 * 8
    }

    /// `numpy.result_type(a, b)` for two array dtypes (no weak scalars).
    pub fn promote(a: Prim, b: Prim) -> Prim {
        use NumericKind as K;
        use Prim::*;
        if a == b {
            return a;
        }
        let float_of = |bytes: usize| match bytes {
            2 => F16,
            4 => F32,
            _ => F64,
        };
        // The smallest float that holds every value of an integer type
        // exactly, as NumPy defines it: (u)int8 -> f16, (u)int16 -> f32,
        // wider -> f64.
        let int_float_bytes = |p: Prim| match p.size() {
            1 => 2,
            2 => 4,
            _ => 8,
        };
        match (a.kind(), b.kind()) {
            (K::Bool, _) => b,
            (_, K::Bool) => a,
            (K::Int, K::Int) | (K::UInt, K::UInt) => {
                if a.size() >= b.size() {
                    a
                } else {
                    b
                }
            }
            (K::Int, K::UInt) | (K::UInt, K::Int) => {
                let (s, u) = if a.kind() == K::Int { (a, b) } else { (b, a) };
                if s.size() > u.size() {
                    s
                } else {
                    match u.size() {
                        1 => I16,
                        2 => I32,
                        4 => I64,
                        _ => F64,
                    }
                }
            }
            (K::Float, K::Float) => {
                if a.size() >= b.size() {
                    a
                } else {
                    b
                }
            }
            (K::Float, _) | (_, K::Float) => {
                let (f, i) = if a.kind() == K::Float { (a, b) } else { (b, a) };
                match i.kind() {
                    K::Complex => promote_complex(f.size(), i),
                    _ => float_of(f.size().max(int_float_bytes(i))),
                }
            }
            (K::Complex, K::Complex) => {
                if a.size() >= b.size() {
                    a
                } else {
                    b
                }
            }
            (K::Complex, _) => promote_complex(int_float_bytes(b), a),
            (_, K::Complex) => promote_complex(int_float_bytes(a), b),
            // Prim has no opaque kind.
            _ => F64,
        }
    }
}

/// A complex type holding `c` and a real of `real_bytes` bytes.
fn promote_complex(real_bytes: usize, c: Prim) -> Prim {
    if real_bytes > 4 || c == Prim::C128 {
        Prim::C128
    } else {
        Prim::C64
    }
}

/// An element type with its byte order: how to read and write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element {
    pub prim: Prim,
    pub endian: Endian,
}

impl Element {
    /// Parse a NumPy typestr (`<f8`, `|u1`...) of a numeric type.
    ///
    /// NumPy's names (`float64`) and typestrs without a byte order (`f8`)
    /// are accepted too, in the machine's order: zarr-python stores the
    /// options of its `numcodecs.*` v3 codecs as they were given, and
    /// fills in a missing `dtype` from `str(numpy.dtype)`, a name.
    pub fn from_numpy(codec: &'static str, typestr: &str) -> Result<Element, CodecError> {
        let (dtype, endian) = DataType::from_numpy(typestr)
            .or_else(|e| numpy_name(typestr).ok_or(e))
            .map_err(|e| CodecError::config(codec, e))?;
        let prim = Prim::of(&dtype).ok_or_else(|| {
            CodecError::config(
                codec,
                format!("{typestr:?} is not a numeric type it can compute with"),
            )
        })?;
        Ok(Element { prim, endian })
    }

    #[inline]
    pub fn size(self) -> usize {
        self.prim.size()
    }

    /// The same type in the machine's byte order.
    pub fn native(self) -> Element {
        Element {
            endian: Endian::NATIVE,
            ..self
        }
    }

    /// Read one element from the first `size()` bytes of `b`.
    #[inline]
    pub fn read(self, b: &[u8]) -> Value {
        let big = self.endian == Endian::Big;
        macro_rules! rd {
            ($t:ty, $n:expr) => {{
                let a: [u8; $n] = b[..$n].try_into().expect("slice of the right length");
                if big {
                    <$t>::from_be_bytes(a)
                } else {
                    <$t>::from_le_bytes(a)
                }
            }};
        }
        match self.prim {
            Prim::Bool => Value::Bool(b[0] != 0),
            Prim::I8 => Value::Int(b[0] as i8 as i64),
            Prim::I16 => Value::Int(rd!(i16, 2) as i64),
            Prim::I32 => Value::Int(rd!(i32, 4) as i64),
            Prim::I64 => Value::Int(rd!(i64, 8)),
            Prim::U8 => Value::UInt(b[0] as u64),
            Prim::U16 => Value::UInt(rd!(u16, 2) as u64),
            Prim::U32 => Value::UInt(rd!(u32, 4) as u64),
            Prim::U64 => Value::UInt(rd!(u64, 8)),
            Prim::F16 => Value::Float(f16_bits_to_f64(rd!(u16, 2))),
            Prim::F32 => Value::Float(f32::from_bits(rd!(u32, 4)) as f64),
            Prim::F64 => Value::Float(f64::from_bits(rd!(u64, 8))),
            Prim::C64 => {
                let e = Element {
                    prim: Prim::F32,
                    endian: self.endian,
                };
                Value::Complex(e.read(b).as_f64(), e.read(&b[4..]).as_f64())
            }
            Prim::C128 => {
                let e = Element {
                    prim: Prim::F64,
                    endian: self.endian,
                };
                Value::Complex(e.read(b).as_f64(), e.read(&b[8..]).as_f64())
            }
        }
    }

    /// Write `v` into the first `size()` bytes of `out`, converting it
    /// first (a no-op when `v` already came from [`cast`] to this type).
    #[inline]
    pub fn write(self, v: Value, out: &mut [u8]) {
        let v = cast(v, self.prim);
        let big = self.endian == Endian::Big;
        macro_rules! wr {
            ($x:expr, $n:expr) => {{
                let x = $x;
                let a = if big {
                    x.to_be_bytes()
                } else {
                    x.to_le_bytes()
                };
                out[..$n].copy_from_slice(&a);
            }};
        }
        match (self.prim, v) {
            (Prim::Bool, Value::Bool(b)) => out[0] = b as u8,
            (Prim::I8, Value::Int(i)) => out[0] = i as u8,
            (Prim::I16, Value::Int(i)) => wr!(i as i16, 2),
            (Prim::I32, Value::Int(i)) => wr!(i as i32, 4),
            (Prim::I64, Value::Int(i)) => wr!(i, 8),
            (Prim::U8, Value::UInt(u)) => out[0] = u as u8,
            (Prim::U16, Value::UInt(u)) => wr!(u as u16, 2),
            (Prim::U32, Value::UInt(u)) => wr!(u as u32, 4),
            (Prim::U64, Value::UInt(u)) => wr!(u, 8),
            (Prim::F16, Value::Float(f)) => wr!(f64_to_f16_bits(f), 2),
            (Prim::F32, Value::Float(f)) => wr!(f as f32, 4),
            (Prim::F64, Value::Float(f)) => wr!(f, 8),
            (Prim::C64, Value::Complex(re, im)) => {
                let e = Element {
                    prim: Prim::F32,
                    endian: self.endian,
                };
                e.write(Value::Float(re), out);
                e.write(Value::Float(im), &mut out[4..]);
            }
            (Prim::C128, Value::Complex(re, im)) => {
                let e = Element {
                    prim: Prim::F64,
                    endian: self.endian,
                };
                e.write(Value::Float(re), out);
                e.write(Value::Float(im), &mut out[8..]);
            }
            (p, v) => unreachable!("cast({v:?}, {p:?}) returned another kind"),
        }
    }
}

/// Elements per block in the slice functions below: 16 KiB of values,
/// which stay in L1 between the read, convert and write passes.
pub const BLOCK: usize = 1024;

/// A numeric NumPy dtype given by name or by a typestr without its byte
/// order, in the machine's order.
fn numpy_name(name: &str) -> Option<(DataType, Endian)> {
    let code = match name {
        "bool" => "b1",
        "int8" => "i1",
        "int16" => "i2",
        "int32" => "i4",
        "int64" => "i8",
        "uint8" => "u1",
        "uint16" => "u2",
        "uint32" => "u4",
        "uint64" => "u8",
        "float16" => "f2",
        "float32" => "f4",
        "float64" => "f8",
        "complex64" => "c8",
        "complex128" => "c16",
        code if code.starts_with(|c: char| c.is_ascii_lowercase()) => code,
        _ => return None,
    };
    DataType::from_numpy(&format!("={code}")).ok()
}

/// Run `$body` with `$c` bound to `$p` as a constant: one arm per type, so
/// that after inlining every per-element `match` on the type folds away and
/// each loop is specialised (measured 3-5x faster than matching per element).
macro_rules! specialise {
    ($p:expr, |$c:ident| $body:expr) => {
        match $p {
            Prim::Bool => {
                let $c = Prim::Bool;
                $body
            }
            Prim::I8 => {
                let $c = Prim::I8;
                $body
            }
            Prim::I16 => {
                let $c = Prim::I16;
                $body
            }
            Prim::I32 => {
                let $c = Prim::I32;
                $body
            }
            Prim::I64 => {
                let $c = Prim::I64;
                $body
            }
            Prim::U8 => {
                let $c = Prim::U8;
                $body
            }
            Prim::U16 => {
                let $c = Prim::U16;
                $body
            }
            Prim::U32 => {
                let $c = Prim::U32;
                $body
            }
            Prim::U64 => {
                let $c = Prim::U64;
                $body
            }
            Prim::F16 => {
                let $c = Prim::F16;
                $body
            }
            Prim::F32 => {
                let $c = Prim::F32;
                $body
            }
            Prim::F64 => {
                let $c = Prim::F64;
                $body
            }
            Prim::C64 => {
                let $c = Prim::C64;
                $body
            }
            Prim::C128 => {
                let $c = Prim::C128;
                $body
            }
        }
    };
}
pub(crate) use specialise;

impl Element {
    /// Read `out.len()` elements from the start of `src`.
    pub fn read_slice(self, src: &[u8], out: &mut [Value]) {
        specialise!(self.prim, |p| {
            let e = Element {
                prim: p,
                endian: self.endian,
            };
            for (o, c) in out.iter_mut().zip(src.chunks_exact(e.size())) {
                *o = e.read(c);
            }
        })
    }

    /// Write `vals` (converted to this type if they are not already) to the
    /// start of `dst`.
    pub fn write_slice(self, vals: &[Value], dst: &mut [u8]) {
        specialise!(self.prim, |p| {
            let e = Element {
                prim: p,
                endian: self.endian,
            };
            for (v, c) in vals.iter().zip(dst.chunks_exact_mut(e.size())) {
                e.write(*v, c);
            }
        })
    }
}

/// [`cast_from`] every value of `vals` in place.
pub fn cast_slice(vals: &mut [Value], from: Prim, to: Prim) {
    specialise!(to, |t| {
        for v in vals.iter_mut() {
            *v = cast_from(*v, from, t);
        }
    })
}

/// Running sum of `vals` in loop type `p` (values already cast to `p`),
/// continuing from `*state` (the sum so far; None before the first
/// element) and leaving the last sum there: `np.cumsum` across blocks.
pub fn cumsum_slice(vals: &mut [Value], state: &mut Option<Value>, p: Prim) {
    let mut it = vals.iter_mut();
    let mut sum = match *state {
        Some(s) => s,
        None => match it.next() {
            Some(first) => *first,
            None => return,
        },
    };
    match p.kind() {
        // Integers: wrapping sums of the raw bits, wrapped to the width
        // when stored (the same as wrapping at every step).
        NumericKind::Int | NumericKind::UInt => {
            let bits = |v: Value| match v {
                Value::Int(i) => i as u64,
                Value::UInt(u) => u,
                other => unreachable!("{other:?} in an integer sum"),
            };
            let mut acc = bits(sum);
            specialise!(p, |t| {
                for x in it {
                    acc = acc.wrapping_add(bits(*x));
                    *x = wrap_int(acc, t);
                }
            });
            sum = wrap_int(acc, p);
        }
        NumericKind::Float => {
            let mut acc = sum.as_f64();
            specialise!(p, |t| {
                for x in it {
                    acc = round_to(t, acc + x.as_f64());
                    *x = Value::Float(acc);
                }
            });
            sum = Value::Float(acc);
        }
        _ => {
            for x in it {
                sum = add(sum, *x, p);
                *x = sum;
            }
        }
    }
    *state = Some(sum);
}

/// Convert every element of `src` (type `from`) into `dst` (type `to`), as
/// `ndarray.astype`. `dst` must hold as many elements as `src`.
pub fn convert(from: Element, src: &[u8], to: Element, dst: &mut [u8]) {
    let mut vals = vec![Value::Bool(false); BLOCK];
    for (s, d) in src
        .chunks(BLOCK * from.size())
        .zip(dst.chunks_mut(BLOCK * to.size()))
    {
        let v = &mut vals[..s.len() / from.size()];
        from.read_slice(s, v);
        cast_slice(v, from.prim, to.prim);
        to.write_slice(v, d);
    }
}

impl Value {
    /// The value as a float (real part of a complex), for arithmetic.
    #[inline]
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Bool(b) => b as u8 as f64,
            Value::Int(i) => i as f64,
            Value::UInt(u) => u as f64,
            Value::Float(f) | Value::Complex(f, _) => f,
        }
    }
}

/// Convert `v` to type `to` as `ndarray.astype(to)` does (see the module
/// documentation). The result is `to`'s canonical variant: `Int` for
/// signed, `UInt` for unsigned, `Float` rounded to `to`'s precision...
#[inline]
pub fn cast(v: Value, to: Prim) -> Value {
    use NumericKind as K;
    match to.kind() {
        K::Bool => Value::Bool(match v {
            Value::Bool(b) => b,
            Value::Int(i) => i != 0,
            Value::UInt(u) => u != 0,
            Value::Float(f) => f != 0.0,
            Value::Complex(re, im) => re != 0.0 || im != 0.0,
        }),
        K::Int | K::UInt => {
            let bits = match v {
                Value::Bool(b) => b as u64,
                Value::Int(i) => i as u64,
                Value::UInt(u) => u,
                Value::Float(f) | Value::Complex(f, _) => float_to_int_bits(f, to),
            };
            wrap_int(bits, to)
        }
        K::Float => Value::Float(match v {
            Value::Bool(b) => b as u8 as f64,
            Value::Int(i) => int_to_float(i as f64, i as f32, to),
            Value::UInt(u) => int_to_float(u as f64, u as f32, to),
            Value::Float(f) | Value::Complex(f, _) => round_to(to, f),
        }),
        K::Complex => {
            let part = if to == Prim::C64 {
                Prim::F32
            } else {
                Prim::F64
            };
            match v {
                Value::Complex(re, im) => Value::Complex(round_to(part, re), round_to(part, im)),
                real => match cast(real, part) {
                    Value::Float(f) => Value::Complex(f, 0.0),
                    _ => unreachable!("cast to a float type gives a Float"),
                },
            }
        }
        K::Opaque => unreachable!("Prim has no opaque kind"),
    }
}

/// [`cast`] from a value known to be of type `from`: the same except for
/// one case where NumPy's answer depends on the source type. float16 to
/// uint32 runs NumPy's scalar loop (float, then C's `(uint32_t)` which
/// x86-64 compilers emit as a 64-bit truncation keeping the low 32 bits:
/// NaN and infinities give 0), while float32/float64 to uint32 run a
/// vectorised loop with the `x - 2^31` trick described in the module
/// documentation. (NumPy is not even consistent there: the last few
/// elements of an array, after the vectorised part, go through the scalar
/// loop. Only NaN, infinities and values outside `(-2^31, 2^32)` are
/// affected; we follow the vectorised loop, which converts the bulk.)
#[inline]
pub fn cast_from(v: Value, from: Prim, to: Prim) -> Value {
    if let (Prim::F16, Prim::U32, Value::Float(f)) = (from, to, v) {
        return Value::UInt(cvtt64(f) as u64 & 0xffff_ffff);
    }
    cast(v, to)
}

/// `a + b` in loop type `p` (both already cast to `p`): wrapping for
/// integers, logical or for bools, rounded to `p` for floats.
#[inline]
pub fn add(a: Value, b: Value, p: Prim) -> Value {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => Value::Bool(x | y),
        (Value::Int(x), Value::Int(y)) => wrap_int(x.wrapping_add(y) as u64, p),
        (Value::UInt(x), Value::UInt(y)) => wrap_int(x.wrapping_add(y), p),
        (Value::Float(x), Value::Float(y)) => Value::Float(round_to(p, x + y)),
        (Value::Complex(xr, xi), Value::Complex(yr, yi)) => {
            let part = if p == Prim::C64 { Prim::F32 } else { Prim::F64 };
            Value::Complex(round_to(part, xr + yr), round_to(part, xi + yi))
        }
        (a, b) => add(cast(a, p), cast(b, p), p),
    }
}

/// `a / b` for a float loop type `p` (NumPy's `true_divide`).
#[inline]
pub fn div(a: f64, b: f64, p: Prim) -> f64 {
    round_to(p, a / b)
}

/// Round `x` to the precision of float type `p` (identity for other types).
#[inline]
pub fn round_to(p: Prim, x: f64) -> f64 {
    match p {
        Prim::F16 => f16_bits_to_f64(f64_to_f16_bits(x)),
        Prim::F32 | Prim::C64 => x as f32 as f64,
        _ => x,
    }
}

#[inline]
fn int_to_float(as64: f64, as32: f32, to: Prim) -> f64 {
    match to {
        Prim::F16 => f16_bits_to_f64(f64_to_f16_bits(as32 as f64)),
        Prim::F32 => as32 as f64,
        _ => as64,
    }
}

/// Keep the low bits of `bits` that integer type `p` holds, sign-extended
/// for signed types.
#[inline]
fn wrap_int(bits: u64, p: Prim) -> Value {
    let shift = 64 - p.bits();
    match p.kind() {
        NumericKind::Int => Value::Int(((bits << shift) as i64) >> shift),
        _ => Value::UInt((bits << shift) >> shift),
    }
}

const TWO_31: f64 = 2147483648.0;
const TWO_63: f64 = 9223372036854775808.0;

/// x86-64 `cvttsd2si` to 32 bits: truncation, or `i32::MIN` when the
/// result does not fit (NaN included).
#[inline]
fn cvtt32(f: f64) -> i32 {
    // Not `contains`: the lower bound is exclusive (-2^31 - 0.5 truncates
    // to -2^31, which fits).
    if f > -TWO_31 - 1.0 && f < TWO_31 {
        f as i32
    } else {
        i32::MIN
    }
}

/// x86-64 `cvttsd2si` to 64 bits.
#[inline]
fn cvtt64(f: f64) -> i64 {
    if (-TWO_63..TWO_63).contains(&f) {
        f as i64
    } else {
        i64::MIN
    }
}

/// The bits NumPy (x86-64) produces converting float `f` to integer type
/// `p`, before wrapping to `p`'s width.
#[inline]
fn float_to_int_bits(f: f64, p: Prim) -> u64 {
    match p {
        Prim::I64 => cvtt64(f) as u64,
        Prim::U64 => {
            if f >= TWO_63 {
                (cvtt64(f - TWO_63) as u64) ^ (1 << 63)
            } else {
                cvtt64(f) as u64
            }
        }
        Prim::U32 => {
            if f >= TWO_31 {
                ((cvtt32(f - TWO_31) as u32) ^ (1 << 31)) as u64
            } else {
                cvtt32(f) as u32 as u64
            }
        }
        _ => cvtt32(f) as i64 as u64,
    }
}

/// float16 bits to f64 (exact).
#[inline]
pub fn f16_bits_to_f64(h: u16) -> f64 {
    half::f16::from_bits(h).to_f64()
}

/// f64 to float16 bits, rounding once to nearest even, overflowing to
/// infinity, keeping NaNs NaN (NumPy's `npy_doublebits_to_halfbits`).
#[inline]
pub fn f64_to_f16_bits(x: f64) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 48) & 0x8000) as u16;
    let exp = ((b >> 52) & 0x7ff) as i32;
    let man = b & ((1u64 << 52) - 1);
    if exp == 0x7ff {
        if man == 0 {
            return sign | 0x7c00;
        }
        // NaN: keep the top mantissa bits, and at least one.
        let m = (man >> 42) as u16;
        return sign | 0x7c00 | if m == 0 { 1 } else { m };
    }
    if exp == 0 {
        // Zero or an f64 subnormal: far below float16's smallest value.
        return sign;
    }
    let e = exp - 1023;
    if e > 15 {
        return sign | 0x7c00;
    }
    let sig = man | (1u64 << 52);
    // Bits of `sig` below float16's last place: 42 for normal results,
    // more for subnormal ones (float16's smallest step is 2^-24).
    let shift = if e >= -14 { 42 } else { (28 - e) as u32 };
    if shift >= 54 {
        // Below half the smallest subnormal (ties go to even, i.e. zero).
        return sign;
    }
    let mut q = sig >> shift;
    let rem = sig & ((1u64 << shift) - 1);
    let halfway = 1u64 << (shift - 1);
    if rem > halfway || (rem == halfway && q & 1 == 1) {
        q += 1;
    }
    let bits = if e >= -14 {
        // q has 11 or (after a carry) 12 significant bits; adding it to the
        // biased exponent field lets a carry bump the exponent naturally.
        (((e + 14) as u64) << 10) + q
    } else {
        // Subnormal; a carry into bit 10 yields the smallest normal.
        q
    };
    if bits >= 0x7c00 {
        return sign | 0x7c00;
    }
    sign | bits as u16
}

// ---------------------------------------------------------------------
// Reading codec configurations. Shared by every codec file: a v3
// configuration must not carry keys the codec does not know (they might
// change the meaning of the data), while numcodecs objects are read
// leniently, as numcodecs itself passes unknown keys to constructors that
// would reject them only on the writer's side.

/// The configuration as a JSON object, or a config error.
pub(crate) fn config_object<'a>(
    codec: &str,
    config: &'a Json,
) -> Result<&'a Map<String, Json>, CodecError> {
    config.as_object().ok_or_else(|| {
        CodecError::config(
            codec,
            format!("configuration must be an object, found {config}"),
        )
    })
}

/// Fail if `config` has a key outside `known`.
pub(crate) fn reject_unknown_keys(
    codec: &str,
    config: &Json,
    known: &[&str],
) -> Result<(), CodecError> {
    for key in config_object(codec, config)?.keys() {
        if !known.contains(&key.as_str()) {
            return Err(CodecError::config(
                codec,
                format!("unknown configuration key {key:?}"),
            ));
        }
    }
    Ok(())
}

/// An optional integer field.
pub(crate) fn config_int(codec: &str, config: &Json, key: &str) -> Result<Option<i64>, CodecError> {
    match config_object(codec, config)?.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            CodecError::config(codec, format!("{key:?} must be an integer, found {v}"))
        }),
    }
}

/// An optional string field.
pub(crate) fn config_str<'a>(
    codec: &str,
    config: &'a Json,
    key: &str,
) -> Result<Option<&'a str>, CodecError> {
    match config_object(codec, config)?.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or_else(|| {
            CodecError::config(codec, format!("{key:?} must be a string, found {v}"))
        }),
    }
}

/// A required string field.
pub(crate) fn config_required_str<'a>(
    codec: &str,
    config: &'a Json,
    key: &str,
) -> Result<&'a str, CodecError> {
    config_str(codec, config, key)?
        .ok_or_else(|| CodecError::config(codec, format!("missing {key:?}")))
}

/// A required number, which JSON may spell as an integer or a float (or,
/// as Python's `json` writes them, `NaN` / `Infinity` strings).
pub(crate) fn config_number(codec: &str, config: &Json, key: &str) -> Result<f64, CodecError> {
    let v = config_object(codec, config)?
        .get(key)
        .ok_or_else(|| CodecError::config(codec, format!("missing {key:?}")))?;
    match v {
        Json::Number(n) => n.as_f64(),
        Json::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| CodecError::config(codec, format!("{key:?} must be a number, found {v}")))
}

/// Sizes of a filter that maps `n` elements of `enc` bytes to `n` elements
/// of `dec` bytes: check the encoded length and the expected decoded size
/// before anything is allocated. Returns the element count.
pub(crate) fn filter_elements(
    codec: &'static str,
    encoded_len: usize,
    enc: usize,
    dec: usize,
    size: super::DecodedSize,
) -> Result<usize, CodecError> {
    if !encoded_len.is_multiple_of(enc) {
        return Err(CodecError::corrupt(
            codec,
            format!("{encoded_len} bytes is not a whole number of {enc}-byte elements"),
        ));
    }
    let n = encoded_len / enc;
    let out = n.checked_mul(dec).ok_or(CodecError::TooLarge {
        codec,
        limit: size.limit(),
    })?;
    size.check(codec, out)?;
    Ok(n)
}

/// The encoded size of a filter mapping `dec`-byte elements to `enc`-byte
/// ones, or None when `decoded` is not a whole number of elements (decode
/// then reports the mismatch).
pub(crate) fn filter_encoded_size(decoded: usize, dec: usize, enc: usize) -> Option<usize> {
    if !decoded.is_multiple_of(dec) {
        return None;
    }
    (decoded / dec).checked_mul(enc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn el(s: &str) -> Element {
        Element::from_numpy("test", s).unwrap()
    }

    #[test]
    fn float_to_int_matches_numpy_x86() {
        // Expected values printed by NumPy 2.4 on x86-64 for
        // np.array(x, 'f8').astype(t).
        let x = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e20,
            -1e20,
            300.7,
            -300.7,
            2147483653.5,
            -2147483653.5,
            4294967299.0,
            9223372036854775808.0,
            18446744073709568000.0,
            -1.9,
            1.9,
            255.9,
            65535.9,
            -0.5,
        ];
        let cases: &[(Prim, &[i128])] = &[
            (
                Prim::I8,
                &[0, 0, 0, 0, 0, 44, -44, 0, 0, 0, 0, 0, -1, 1, -1, -1, 0],
            ),
            (
                Prim::U8,
                &[0, 0, 0, 0, 0, 44, 212, 0, 0, 0, 0, 0, 255, 1, 255, 255, 0],
            ),
            (
                Prim::I16,
                &[0, 0, 0, 0, 0, 300, -300, 0, 0, 0, 0, 0, -1, 1, 255, -1, 0],
            ),
            (
                Prim::U16,
                &[
                    0, 0, 0, 0, 0, 300, 65236, 0, 0, 0, 0, 0, 65535, 1, 255, 65535, 0,
                ],
            ),
            (
                Prim::I32,
                &[
                    -2147483648,
                    -2147483648,
                    -2147483648,
                    -2147483648,
                    -2147483648,
                    300,
                    -300,
                    -2147483648,
                    -2147483648,
                    -2147483648,
                    -2147483648,
                    -2147483648,
                    -1,
                    1,
                    255,
                    65535,
                    0,
                ],
            ),
            (
                Prim::U32,
                &[
                    2147483648, 0, 2147483648, 0, 2147483648, 300, 4294966996, 2147483653,
                    2147483648, 0, 0, 0, 4294967295, 1, 255, 65535, 0,
                ],
            ),
            (
                Prim::I64,
                &[
                    i64::MIN as i128,
                    i64::MIN as i128,
                    i64::MIN as i128,
                    i64::MIN as i128,
                    i64::MIN as i128,
                    300,
                    -300,
                    2147483653,
                    -2147483653,
                    4294967299,
                    i64::MIN as i128,
                    i64::MIN as i128,
                    -1,
                    1,
                    255,
                    65535,
                    0,
                ],
            ),
            (
                Prim::U64,
                &[
                    9223372036854775808,
                    0,
                    9223372036854775808,
                    0,
                    9223372036854775808,
                    300,
                    18446744073709551316,
                    2147483653,
                    18446744071562067963,
                    4294967299,
                    9223372036854775808,
                    0,
                    18446744073709551615,
                    1,
                    255,
                    65535,
                    0,
                ],
            ),
        ];
        for (p, want) in cases {
            for (xi, w) in x.iter().zip(want.iter()) {
                let got = match cast(Value::Float(*xi), *p) {
                    Value::Int(i) => i as i128,
                    Value::UInt(u) => u as i128,
                    other => panic!("{other:?}"),
                };
                assert_eq!(got, *w, "{xi} -> {p:?}");
            }
        }
        assert_eq!(cast(Value::Float(f64::NAN), Prim::Bool), Value::Bool(true));
        // float16 -> uint32 goes through NumPy's scalar loop.
        let h = |f: f64| cast_from(Value::Float(f), Prim::F16, Prim::U32);
        assert_eq!(h(f64::NAN), Value::UInt(0));
        assert_eq!(h(f64::NEG_INFINITY), Value::UInt(0));
        assert_eq!(h(-65504.0), Value::UInt(4294901792));
        assert_eq!(
            cast_from(Value::Float(f64::NAN), Prim::F32, Prim::U32),
            Value::UInt(1 << 31)
        );
        assert_eq!(cast(Value::Float(-0.0), Prim::Bool), Value::Bool(false));
    }

    #[test]
    fn int_conversions_wrap() {
        assert_eq!(cast(Value::Int(300), Prim::I8), Value::Int(44));
        assert_eq!(cast(Value::Int(-1), Prim::U16), Value::UInt(65535));
        assert_eq!(cast(Value::UInt(u64::MAX), Prim::I64), Value::Int(-1));
        assert_eq!(cast(Value::UInt(200), Prim::I8), Value::Int(-56));
        assert_eq!(cast(Value::Bool(true), Prim::F32), Value::Float(1.0));
        // int64 -> float32 rounds once (2^60 + 2^36 + 1 is just above a tie).
        let i = (1i64 << 60) + (1 << 36) + 1;
        assert_eq!(
            cast(Value::Int(i), Prim::F32),
            Value::Float(((1i64 << 60) + (1 << 37)) as f64)
        );
    }

    #[test]
    fn f16_rounding_is_single_and_to_even() {
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to even (1.0).
        assert_eq!(f64_to_f16_bits(1.0 + 2f64.powi(-11)), 0x3c00);
        // Slightly above the tie: up. float32 would round this to the tie
        // first and then to 1.0 (the double rounding NumPy avoids).
        assert_eq!(
            f64_to_f16_bits(1.0 + 2f64.powi(-11) + 2f64.powi(-40)),
            0x3c01
        );
        assert_eq!(f64_to_f16_bits(65504.0), 0x7bff);
        assert_eq!(f64_to_f16_bits(65519.99), 0x7bff);
        assert_eq!(f64_to_f16_bits(65520.0), 0x7c00);
        assert_eq!(f64_to_f16_bits(-1e300), 0xfc00);
        assert_eq!(f64_to_f16_bits(2f64.powi(-24)), 0x0001);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25)), 0x0000);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25) * 1.5), 0x0001);
        assert_eq!(
            f64_to_f16_bits(2f64.powi(-14) * (1.0 - 2f64.powi(-12))),
            0x0400
        );
        assert_eq!(f64_to_f16_bits(1e-300), 0);
        assert!(f16_bits_to_f64(f64_to_f16_bits(f64::NAN)).is_nan());
        assert_eq!(f64_to_f16_bits(0.1), 0x2e66);
    }

    proptest! {
        #[test]
        fn f16_rounds_to_nearest_even(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            let h = f64_to_f16_bits(x);
            if x.is_nan() {
                prop_assert!(f16_bits_to_f64(h).is_nan());
                return Ok(());
            }
            prop_assert_eq!(h & 0x8000 != 0, x.is_sign_negative());
            let ax = x.abs();
            let hm = h & 0x7fff;
            if ax >= 65520.0 {
                prop_assert_eq!(hm, 0x7c00);
                return Ok(());
            }
            // No float16 magnitude is closer to |x|, and ties go to even.
            let d = (ax - f16_bits_to_f64(hm)).abs();
            let up = (ax - f16_bits_to_f64(hm + 1)).abs();
            prop_assert!(d <= up);
            if hm > 0 {
                let down = (ax - f16_bits_to_f64(hm - 1)).abs();
                prop_assert!(d <= down);
                if d == down {
                    prop_assert_eq!(hm & 1, 0);
                }
            }
            if d == up {
                prop_assert_eq!(hm & 1, 0);
            }
        }

        #[test]
        fn f16_agrees_with_half_from_f32(f in any::<f32>()) {
            // half's f32 conversion rounds once; so must ours.
            let ours = f64_to_f16_bits(f as f64);
            let theirs = half::f16::from_f32(f).to_bits();
            if f.is_nan() {
                prop_assert!(half::f16::from_bits(ours).is_nan());
            } else {
                prop_assert_eq!(ours, theirs);
            }
        }

        #[test]
        fn read_write_round_trip(bytes in proptest::collection::vec(any::<u8>(), 16)) {
            for s in ["|i1", "<i2", ">i4", "<i8", "|u1", ">u2", "<u4", ">u8", "<f4", ">f8", "<c8", ">c16"] {
                let e = el(s);
                let v = e.read(&bytes);
                let mut out = vec![0u8; e.size()];
                e.write(v, &mut out);
                let nan = match v {
                    Value::Float(f) => f.is_nan(),
                    Value::Complex(re, im) => re.is_nan() || im.is_nan(),
                    _ => false,
                };
                // NaNs stay NaN (the hardware may quiet a signalling one).
                if nan {
                    prop_assert!(matches!(e.read(&out), Value::Float(f) if f.is_nan())
                        || matches!(e.read(&out), Value::Complex(..)));
                } else {
                    prop_assert_eq!(&out[..], &bytes[..e.size()], "{}", s);
                }
            }
        }
    }

    #[test]
    fn promotion_matches_numpy() {
        use Prim::*;
        // From numpy.result_type.
        let cases = [
            (I8, I32, I32),
            (U8, I8, I16),
            (U16, I16, I32),
            (U32, I32, I64),
            (U64, I64, F64),
            (U64, I8, F64),
            (I64, U32, I64),
            (U8, F16, F16),
            (I16, F16, F32),
            (I32, F16, F64),
            (I32, F32, F64),
            (U16, F32, F32),
            (F32, F64, F64),
            (C64, F64, C128),
            (C64, I16, C64),
            (C64, I32, C128),
            (C64, F16, C64),
            (Bool, I8, I8),
            (Bool, Bool, Bool),
            (Bool, F16, F16),
        ];
        for (a, b, want) in cases {
            assert_eq!(Prim::promote(a, b), want, "{a:?} {b:?}");
            assert_eq!(Prim::promote(b, a), want, "{b:?} {a:?}");
        }
    }
}
