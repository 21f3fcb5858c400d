//! Value conversion from a fragment's elements to the master's.
//!
//! A partition's values may need, in this order:
//!
//! 1. **masking**: an element equal to one of the fragment's missing
//!    values (its `_FillValue` and `missing_value`, compared after casting
//!    them to the fragment's type, NaN matching NaN) or outside its valid
//!    range (`valid_range`, `valid_min`, `valid_max`) becomes the master's
//!    fill value, whatever steps follow;
//! 2. **unpacking**: `x * scale_factor + add_offset`;
//! 3. **units**: the affine map of [`super::units`];
//! 4. **casting** to the master's dtype with NumPy's `astype` semantics
//!    ([`crate::codec::numeric`]: round to nearest for floats, truncation
//!    toward zero for float to integer, wrapping between integers).
//!
//! Steps 2 and 3 compute in `f64`, one multiply-add each, and cast once at
//! the end, so a partition that needs only a dtype change is an exact
//! NumPy cast, and the common case, no step at all, is recognised up
//! front ([`Conversion::is_identity`]) so that reads can copy bytes
//! straight into place.

use crate::codec::numeric::{self, BLOCK, Element, Prim, Value};
use crate::dtype::{DataType, Endian};

use super::units::Affine;

/// How one partition's elements become master elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversion {
    pub src: DataType,
    pub dst: DataType,
    /// Values (already cast to `src`) that mean "missing".
    pub missing: Vec<Value>,
    /// `(scale_factor, add_offset)`.
    pub pack: Option<(f64, f64)>,
    pub units: Affine,
    /// The master's fill value (native bytes), written for missing values.
    pub fill: Vec<u8>,
    /// Values outside `[lo, hi]` are missing (bounds cast to `src`).
    pub valid: Option<(f64, f64)>,
}

impl Conversion {
    /// Check that the conversion is possible: identity for opaque types,
    /// arithmetic only on real numbers. `Err` is a message.
    pub fn new(
        src: DataType,
        dst: DataType,
        missing: Vec<Value>,
        pack: Option<(f64, f64)>,
        units: Affine,
        fill: Vec<u8>,
    ) -> Result<Conversion, String> {
        let arithmetic = pack.is_some() || !units.is_identity();
        let (sp, dp) = (Prim::of(&src), Prim::of(&dst));
        match (sp, dp) {
            _ if src == dst && !arithmetic => {}
            (Some(s), Some(d)) => {
                if arithmetic
                    && (matches!(s, Prim::C64 | Prim::C128) || matches!(d, Prim::C64 | Prim::C128))
                {
                    return Err(format!(
                        "cannot apply units or packing to complex values ({src} to {dst})"
                    ));
                }
            }
            _ => {
                return Err(format!(
                    "cannot convert {src} to {dst}{}",
                    if arithmetic {
                        " with units or packing"
                    } else {
                        ""
                    }
                ));
            }
        }
        let missing = match sp {
            Some(p) => missing.into_iter().map(|v| numeric::cast(v, p)).collect(),
            None => Vec::new(),
        };
        Ok(Conversion {
            src,
            dst,
            missing,
            pack,
            units,
            fill,
            valid: None,
        })
    }

    /// Mask values below `lo` or above `hi` (either may be absent), the
    /// bounds first cast to the fragment's type as netCDF4-python does.
    pub fn with_valid_range(mut self, lo: Option<f64>, hi: Option<f64>) -> Conversion {
        let Some(p) = Prim::of(&self.src) else {
            return self;
        };
        if lo.is_none() && hi.is_none() {
            return self;
        }
        let cast = |x: f64| numeric::cast(Value::Float(x), p).as_f64();
        self.valid = Some((
            lo.map_or(f64::NEG_INFINITY, cast),
            hi.map_or(f64::INFINITY, cast),
        ));
        self
    }

    /// Whether elements can be copied unchanged: same type, no arithmetic,
    /// and every missing value already is the master's fill value.
    pub fn is_identity(&self) -> bool {
        if self.src != self.dst
            || self.pack.is_some()
            || !self.units.is_identity()
            || self.valid.is_some()
        {
            return false;
        }
        let Some(p) = Prim::of(&self.src) else {
            return true;
        };
        let e = native(p);
        self.missing.iter().all(|&m| {
            let mut b = vec![0u8; e.size()];
            e.write(m, &mut b);
            b == self.fill
        })
    }

    /// Convert `src` (elements of `self.src`, native order) into `dst`
    /// (as many elements of `self.dst`).
    pub fn apply(&self, src: &[u8], dst: &mut [u8]) {
        let (Some(sp), Some(dp)) = (Prim::of(&self.src), Prim::of(&self.dst)) else {
            // Opaque types only ever convert to themselves.
            dst.copy_from_slice(src);
            return;
        };
        let (se, de) = (native(sp), native(dp));
        let arithmetic = self.pack.is_some() || !self.units.is_identity();
        if self.missing.is_empty() && self.valid.is_none() && !arithmetic {
            numeric::convert(se, src, de, dst);
            return;
        }
        let mut vals = vec![Value::Bool(false); BLOCK];
        let dsize = de.size();
        for (s, d) in src
            .chunks(BLOCK * se.size())
            .zip(dst.chunks_mut(BLOCK * dsize))
        {
            let v = &mut vals[..s.len() / se.size()];
            se.read_slice(s, v);
            for (x, out) in v.iter().zip(d.chunks_exact_mut(dsize)) {
                let invalid = self
                    .valid
                    .is_some_and(|(lo, hi)| x.as_f64() < lo || x.as_f64() > hi);
                if invalid || self.missing.iter().any(|m| same(*x, *m)) {
                    out.copy_from_slice(&self.fill);
                    continue;
                }
                let y = if arithmetic {
                    let mut f = x.as_f64();
                    if let Some((scale, offset)) = self.pack {
                        f = f * scale + offset;
                    }
                    Value::Float(self.units.apply(f))
                } else {
                    numeric::cast_from(*x, sp, dp)
                };
                de.write(y, out);
            }
        }
    }
}

fn native(prim: Prim) -> Element {
    Element {
        prim,
        endian: Endian::NATIVE,
    }
}

/// Value equality for missing-value tests: NaN matches NaN.
fn same(x: Value, m: Value) -> bool {
    match (x, m) {
        (Value::Float(a), Value::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
        (Value::Complex(a, b), Value::Complex(c, d)) => a == c && b == d,
        (a, b) => a == b,
    }
}

/// A JSON attribute value (a number, `"NaN"`, or a list of them) as
/// values, for missing-value lists. Anything else is ignored.
pub fn json_values(v: &serde_json::Value) -> Vec<Value> {
    use serde_json::Value as J;
    match v {
        J::Array(a) => a.iter().flat_map(json_values).collect(),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                vec![Value::Int(i)]
            } else if let Some(u) = n.as_u64() {
                vec![Value::UInt(u)]
            } else {
                n.as_f64().map(Value::Float).into_iter().collect()
            }
        }
        J::String(s) => match s.as_str() {
            "NaN" | "nan" => vec![Value::Float(f64::NAN)],
            "Infinity" | "inf" => vec![Value::Float(f64::INFINITY)],
            "-Infinity" | "-inf" => vec![Value::Float(f64::NEG_INFINITY)],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(b: &[u8]) -> Vec<f64> {
        b.chunks(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn masks_unpacks_converts_and_casts() {
        let fill = 1e20f64.to_ne_bytes().to_vec();
        let c = Conversion::new(
            DataType::Int16,
            DataType::Float64,
            vec![Value::Int(-999)],
            Some((0.5, 10.0)),
            Affine { a: 1.0, b: -273.15 },
            fill,
        )
        .unwrap();
        assert!(!c.is_identity());
        let src: Vec<u8> = [2i16, -999, 4]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let mut dst = vec![0u8; 24];
        c.apply(&src, &mut dst);
        assert_eq!(f64s(&dst), [11.0 - 273.15, 1e20, 12.0 - 273.15]);
    }

    #[test]
    fn identity_and_casts() {
        let fill = (-1i32).to_ne_bytes().to_vec();
        let same_fill = Conversion::new(
            DataType::Int32,
            DataType::Int32,
            vec![Value::Int(-1)],
            None,
            Affine::IDENTITY,
            fill.clone(),
        )
        .unwrap();
        assert!(same_fill.is_identity());
        let other_fill = Conversion::new(
            DataType::Int32,
            DataType::Int32,
            vec![Value::Int(7)],
            None,
            Affine::IDENTITY,
            fill.clone(),
        )
        .unwrap();
        assert!(!other_fill.is_identity());
        let mut dst = vec![0u8; 8];
        let src: Vec<u8> = [7i32, 8].iter().flat_map(|x| x.to_ne_bytes()).collect();
        other_fill.apply(&src, &mut dst);
        assert_eq!(&dst[..4], &fill[..]);
        // float64 -> int16: truncation toward zero, as NumPy.
        let cast = Conversion::new(
            DataType::Float64,
            DataType::Int16,
            vec![],
            None,
            Affine::IDENTITY,
            vec![0; 2],
        )
        .unwrap();
        let src: Vec<u8> = [2.9f64, -2.9]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let mut dst = vec![0u8; 4];
        cast.apply(&src, &mut dst);
        assert_eq!(
            dst,
            [2i16, -2]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect::<Vec<_>>()
        );
        assert!(
            Conversion::new(
                DataType::FixedBytes(1),
                DataType::Float32,
                vec![],
                None,
                Affine::IDENTITY,
                vec![0; 4]
            )
            .is_err()
        );
        // NaN missing values match any NaN.
        let nan = Conversion::new(
            DataType::Float32,
            DataType::Float32,
            json_values(&serde_json::json!("NaN")),
            None,
            Affine::IDENTITY,
            0f32.to_ne_bytes().to_vec(),
        )
        .unwrap();
        let mut out = [1u8; 4];
        nan.apply(&f32::NAN.to_ne_bytes(), &mut out);
        assert_eq!(f32::from_ne_bytes(out), 0.0);
    }
}
