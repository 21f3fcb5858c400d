//! HDF5 filter 6: scale-offset, HDF5's own (`src/H5Zscaleoffset.c`).
//!
//! h5py writes it for `create_dataset(..., scaleoffset=n)`: integers
//! stored as their offset from the chunk's minimum in the fewest bits
//! that hold the chunk's range (lossless), floats scaled by `10^D`,
//! rounded, and stored the same way (lossy: the decoded values are what
//! HDF5 decodes, not what was written).
//!
//! Parameters (`cd_values`, filled in by the library per dataset): `[scale
//! type (0 float D-scale, 1 float E-scale, 2 integer), scale factor (D, or
//! the integer minimum bits: 0 = find per chunk), elements per chunk,
//! class (0 integer, 1 float), element size, sign (0 unsigned, 1 signed),
//! byte order (0 little, 1 big), fill value defined (0/1), fill value
//! bytes (little-endian, 4 per parameter)...]`.
//!
//! A chunk is a 21-byte header (`minbits` as a little-endian `u32`, the
//! byte count of `minval`, `minval` little-endian, zero padding), then
//! every element's `minbits`-bit value, most significant bit first, packed
//! with no gaps. Decoding, as `H5Z__filter_scaleoffset` does:
//!
//! - `minbits` equal to the element's bits: the elements follow as they
//!   are (in the writer's memory order: little-endian);
//! - integers: `value + minval` in the type's width (wrapping), except that
//!   the all-ones value is the fill value when one is defined; an integer
//!   scale factor equal to the element's bits means the filter did nothing;
//! - floats (D-scale): `(float)(int)value / 10^D + min`, in the element's
//!   own precision, with `min` the float whose bits are `minval`; all ones
//!   is the fill value when defined;
//! - `minbits` 0: every value is 0 before the step above.
//!
//! The result is converted to the dataset's byte order. The output size
//! (elements × size, from the parameters) is checked against the chunk's
//! before allocating, and a packed stream shorter than its elements (which
//! the C code would read past) is corrupt.

use super::entry::{Hdf5OnlyFilter, hdf5_param};
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "scaleoffset";

/// HDF5 filter 6.
pub const HDF5: Hdf5OnlyFilter = Hdf5OnlyFilter {
    id: 6,
    name: NAME,
    build: |p| Ok(Box::new(ScaleOffset::from_hdf5(p)?)),
};

/// Bytes before the packed values.
const HEADER: usize = 21;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Int {
        signed: bool,
    },
    /// D-scale floats with this decimal scale factor.
    Float {
        d: i32,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScaleOffset {
    kind: Kind,
    nelmts: usize,
    size: usize,
    big_endian: bool,
    /// The fill value's bits, if the dataset defines one.
    fill: Option<u64>,
    /// An integer scale factor of the element's full width: the filter
    /// left the chunk as it was.
    identity: bool,
}

impl ScaleOffset {
    /// From the HDF5 parameters.
    pub fn from_hdf5(p: &[u32]) -> Result<Self, CodecError> {
        let param = |i| hdf5_param(NAME, p, i);
        let scale_type = param(0)?;
        let factor = param(1)? as i32;
        let nelmts = param(2)? as usize;
        let class = param(3)?;
        let size = param(4)? as usize;
        let signed = param(5)? == 1;
        let big_endian = param(6)? == 1;
        let fill_defined = param(7)? == 1;
        let bad = |d: String| Err(CodecError::config(NAME, d));
        let kind = match (class, scale_type) {
            (0, 2) => {
                if ![1, 2, 4, 8].contains(&size) {
                    return bad(format!("integer size {size}"));
                }
                Kind::Int { signed }
            }
            (1, 0) => {
                if size != 4 && size != 8 {
                    return bad(format!("float size {size}"));
                }
                Kind::Float { d: factor }
            }
            (1, 1) => return bad("E-scale (HDF5 does not implement it)".into()),
            (c, t) => return bad(format!("class {c} with scale type {t}")),
        };
        let bits = (size * 8) as i32;
        let identity = matches!(kind, Kind::Int { .. }) && factor == bits;
        if matches!(kind, Kind::Int { .. }) && factor > bits {
            return bad(format!("minimum bits {factor} exceed the {bits}-bit type"));
        }
        let fill = if fill_defined {
            let mut v = 0u64;
            for b in 0..size {
                let word = param(8 + b / 4)? as u64;
                v |= (word >> (8 * (b % 4)) & 0xff) << (8 * b);
            }
            Some(v)
        } else {
            None
        };
        Ok(ScaleOffset {
            kind,
            nelmts,
            size,
            big_endian,
            fill,
            identity,
        })
    }

    fn decode_to(&self, enc: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
        if self.identity {
            if enc.len() != out.len() {
                return Err(CodecError::WrongSize {
                    codec: NAME,
                    expected: out.len(),
                    actual: enc.len(),
                });
            }
            out.copy_from_slice(enc);
            return Ok(());
        }
        if enc.len() < HEADER {
            return Err(CodecError::corrupt(
                NAME,
                format!("{} bytes cannot hold the 21-byte header", enc.len()),
            ));
        }
        let size = self.size;
        let minbits = u32::from_le_bytes(enc[..4].try_into().expect("4 bytes")) as usize;
        let mut minval = 0u64;
        for (i, &b) in enc[5..5 + (enc[4] as usize).min(8)].iter().enumerate() {
            minval |= (b as u64) << (8 * i);
        }
        let body = &enc[HEADER..];
        if minbits > size * 8 {
            return Err(CodecError::corrupt(
                NAME,
                format!("{minbits} bits per {size}-byte element"),
            ));
        }
        if minbits == size * 8 {
            let src = body
                .get(..out.len())
                .ok_or_else(|| CodecError::corrupt(NAME, "fewer elements than the chunk"))?;
            out.copy_from_slice(src);
        } else {
            let needed = (self.nelmts * minbits).div_ceil(8);
            if body.len() < needed {
                return Err(CodecError::corrupt(
                    NAME,
                    format!("{} packed bytes, {needed} needed", body.len()),
                ));
            }
            let all_ones = (1u64 << minbits) - 1;
            let width_mask = if size == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * size)) - 1
            };
            let mut bits = BitReader::new(body);
            for o in out.chunks_exact_mut(size) {
                let v = bits.read(minbits);
                let fill = self.fill.filter(|_| v == all_ones);
                let value = match (self.kind, fill) {
                    (_, Some(f)) => f,
                    (Kind::Int { .. }, None) => v.wrapping_add(minval) & width_mask,
                    (Kind::Float { d }, None) if size == 4 => {
                        let min = f32::from_bits(minval as u32);
                        ((v as i32 as f32) / 10f32.powf(d as f32) + min).to_bits() as u64
                    }
                    (Kind::Float { d }, None) => {
                        let min = f64::from_bits(minval);
                        ((v as i64 as f64) / 10f64.powf(d as f64) + min).to_bits()
                    }
                };
                o.copy_from_slice(&value.to_le_bytes()[..size]);
            }
        }
        if self.big_endian {
            for o in out.chunks_exact_mut(size) {
                o.reverse();
            }
        }
        Ok(())
    }
}

/// Most-significant-bit-first reader over a buffer long enough for every
/// read (checked by the caller).
struct BitReader<'a> {
    data: &'a [u8],
    bit: usize,
}

impl<'a> BitReader<'a> {
    fn new(data: &'a [u8]) -> Self {
        BitReader { data, bit: 0 }
    }

    /// The next `n` (< 64) bits as a number.
    fn read(&mut self, n: usize) -> u64 {
        let mut v = 0u64;
        let mut left = n;
        while left > 0 {
            let byte = self.data[self.bit / 8];
            let avail = 8 - self.bit % 8;
            let take = avail.min(left);
            let part = (byte as u64 >> (avail - take)) & ((1 << take) - 1);
            v = (v << take) | part;
            left -= take;
            self.bit += take;
        }
        v
    }
}

impl BytesToBytesCodec for ScaleOffset {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        self.identity.then_some(decoded_size)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let n = self.nelmts.saturating_mul(self.size);
        size.check(NAME, n)?;
        let mut out = vec![0; n];
        self.decode_to(&encoded, &mut out)?;
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        Some(
            DecodedSize::Exact(out.len())
                .check(NAME, self.nelmts.saturating_mul(self.size))
                .and_then(|()| self.decode_to(encoded, out)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk as `H5Z__filter_scaleoffset` writes it: the header, then
    /// `values` packed in `minbits` bits, most significant first.
    fn chunk(minbits: u32, minval: u64, values: &[u64]) -> Vec<u8> {
        let mut v = minbits.to_le_bytes().to_vec();
        v.push(8);
        v.extend(minval.to_le_bytes());
        v.resize(HEADER, 0);
        let mut acc = 0u128;
        let mut nbits = 0;
        for &x in values {
            acc = (acc << minbits) | x as u128;
            nbits += minbits;
            while nbits >= 8 {
                v.push((acc >> (nbits - 8)) as u8);
                nbits -= 8;
            }
        }
        if nbits > 0 {
            v.push((acc << (8 - nbits)) as u8);
        }
        v
    }

    fn params(kind: &[u32], n: u32, size: u32, sign: u32, be: u32, fill: &[u32]) -> Vec<u32> {
        let mut p = vec![
            kind[0],
            kind[1],
            n,
            kind[2],
            size,
            sign,
            be,
            !fill.is_empty() as u32,
        ];
        p.extend(fill);
        p.resize(20, 0);
        p
    }

    #[test]
    fn integers_with_offset_and_fill() {
        // i2, 3 bits, minimum -3: values -3..=3; all ones (7) is the fill 99.
        let p = params(&[2, 0, 0], 5, 2, 1, 0, &[99]);
        let mut p = p;
        p[2] = 5;
        let c = ScaleOffset::from_hdf5(&p).unwrap();
        let enc = chunk(3, (-3i64) as u64, &[0, 1, 6, 7, 3]);
        let got = c.decode(enc, DecodedSize::Exact(10)).unwrap();
        let want: Vec<u8> = [-3i16, -2, 3, 99, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(got, want);
        // Big-endian dataset: the same values, swapped.
        p[6] = 1;
        let c = ScaleOffset::from_hdf5(&p).unwrap();
        let got = c
            .decode(
                chunk(3, (-3i64) as u64, &[0, 1, 6, 7, 3]),
                DecodedSize::Exact(10),
            )
            .unwrap();
        let want: Vec<u8> = [-3i16, -2, 3, 99, 0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn zero_and_full_bits() {
        let p = params(&[2, 0, 0], 4, 4, 0, 0, &[]);
        let c = ScaleOffset::from_hdf5(&p).unwrap();
        let got = c.decode(chunk(0, 42, &[]), DecodedSize::Exact(16)).unwrap();
        assert_eq!(got, [42u8, 0, 0, 0].repeat(4));
        let mut full = chunk(32, 0, &[]);
        full.extend([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
        let got = c.decode(full, DecodedSize::Exact(16)).unwrap();
        assert_eq!(got, [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
        // A scale factor of the full width: the chunk is as written.
        let mut p = p;
        p[1] = 32;
        let c = ScaleOffset::from_hdf5(&p).unwrap();
        assert_eq!(
            c.decode(vec![7; 16], DecodedSize::Exact(16)).unwrap(),
            [7; 16]
        );
    }

    #[test]
    fn floats_d_scale() {
        let mut p = params(&[0, 2, 1], 3, 8, 0, 0, &[]);
        p[1] = 2;
        let c = ScaleOffset::from_hdf5(&p).unwrap();
        let enc = chunk(5, 1.5f64.to_bits(), &[0, 25, 31]);
        let got = c.decode(enc, DecodedSize::Exact(24)).unwrap();
        let want: Vec<u8> = [1.5f64, 0.25 + 1.5, 0.31 + 1.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bad_parameters_and_chunks() {
        for bad in [
            params(&[1, 3, 1], 4, 4, 0, 0, &[]), // E-scale
            params(&[2, 0, 0], 4, 3, 0, 0, &[]), // 3-byte integers
            params(&[0, 0, 1], 4, 2, 0, 0, &[]), // 2-byte floats
            params(&[2, 40, 0], 4, 4, 0, 0, &[]),
        ] {
            assert!(ScaleOffset::from_hdf5(&bad).is_err(), "{bad:?}");
        }
        assert!(ScaleOffset::from_hdf5(&[2, 0, 4]).is_err());
        let c = ScaleOffset::from_hdf5(&params(&[2, 0, 0], 4, 4, 0, 0, &[])).unwrap();
        // Wrong element count for the chunk: refused before decoding.
        assert!(matches!(
            c.decode(chunk(3, 0, &[1, 2, 3, 4]), DecodedSize::Exact(20)),
            Err(CodecError::WrongSize { .. })
        ));
        // Short header, too few packed bytes, impossible bit counts.
        assert!(c.decode(vec![0; 20], DecodedSize::Exact(16)).is_err());
        let mut short = chunk(12, 0, &[1, 2, 3, 4]);
        short.pop();
        assert!(c.decode(short, DecodedSize::Exact(16)).is_err());
        assert!(c.decode(chunk(33, 0, &[]), DecodedSize::Exact(16)).is_err());
        assert!(c.decode(chunk(32, 0, &[]), DecodedSize::Exact(16)).is_err());
    }
}
