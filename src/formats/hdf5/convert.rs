//! Stored element types a flat file cannot show as they are, converted
//! on the read path as HDF5 converts them to the memory type h5py and
//! netCDF4-python read them as: integers with padding bits or an unusual
//! size ([`PaddedInt`], `H5T__conv_i_i`) and floating point of any layout
//! other than IEEE's of its size ([`FloatType`], `H5T__conv_f_f`).
//!
//! An HDF5 integer type has a size in bytes, a byte order, and the
//! `precision` significant bits starting at bit `offset`; the other bits
//! are padding. Standard types use every bit; an nbit-reduced type, or a
//! hand-made one (`H5Tset_precision`, `H5Tset_offset`, `H5Tset_size`),
//! does not, and may be 3, 5, 6 or 7 bytes wide. A flat file needs a
//! standard size, so such a dataset is served as the next standard size
//! (1, 2, 4 or 8 bytes, never narrower than it is stored): each element's
//! significant bits shifted down to bit 0, sign-extended from bit
//! `precision - 1` when signed, zero-extended when not, padding dropped.
//! That is HDF5's conversion to the native type of that size, so the bytes
//! are those h5py reads (with a native integer memory type where NumPy has
//! no type of the stored size).
//!
//! An HDF5 float type places a sign bit, an exponent (position, size,
//! bias) and a mantissa (position, size, leading bit implied or stored)
//! anywhere in its `precision` bits at `offset`: an nbit-reduced float
//! (HDF5's test files: 20 bits at offset 7 of a 4-byte element, exponent
//! of 6 bits), the x87 80-bit extended "long double" in 12 or 16 bytes,
//! or a VAX float. Such a dataset is served as the NumPy type h5py picks
//! for it (`TypeFloatID.py_dtype`: the first of float16, float32, float64,
//! longdouble at least as wide as the stored element whose mantissa and
//! exponent range hold the stored ones), in native order, each element
//! converted bit by bit as `H5T__conv_f_f` does (H5Tconv_float.c):
//! signed zeros and infinities kept, every NaN made the quiet NaN with
//! all mantissa bits set, denormals normalised, rounding half up where
//! the mantissa is cut, overflow to infinity. The longdouble served is
//! x87 extended in 16 little-endian bytes ([`DataType::X87Extended`]),
//! NumPy's `longdouble` on x86-64; its 6 padding bytes are zero. A stored
//! element already of the served layout is copied (reordered), as HDF5's
//! no-op and byte-order conversions do, with its padding zeroed.
//!
//! The conversion is the array's array-to-bytes codec ([`ConvertCodec`],
//! in place of `bytes`): it runs after the filter pipeline, on whole
//! chunks, so chunked, contiguous and compact storage and the engine's
//! cache all see the served type. Fill values go through the same
//! conversion.

use crate::codec::{ArrayToBytesCodec, ChunkRepr, CodecError};
use crate::dtype::DataType;

/// An integer type with padding bits or an unusual size, and the standard
/// size it is served as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaddedInt {
    /// Stored size in bytes (1 to 8).
    pub size: usize,
    pub signed: bool,
    pub big: bool,
    pub offset: u32,
    pub precision: u32,
}

impl PaddedInt {
    /// `None` when no standard integer holds the type: wider than 8
    /// bytes, no significant bits, or bits past the end of the element.
    pub fn new(size: usize, signed: bool, big: bool, offset: u32, precision: u32) -> Option<Self> {
        let ok = (1..=8).contains(&size)
            && precision > 0
            && offset.checked_add(precision)? <= 8 * size as u32;
        ok.then_some(PaddedInt {
            size,
            signed,
            big,
            offset,
            precision,
        })
    }

    /// The standard size served: the stored size rounded up to 1, 2, 4 or 8.
    pub fn served_size(&self) -> usize {
        self.size.next_power_of_two()
    }

    /// The served element type.
    pub fn dtype(&self) -> DataType {
        // The served size is 1, 2, 4 or 8 (sizes up to 8, rounded up).
        DataType::integer(self.served_size(), self.signed).unwrap_or(if self.signed {
            DataType::Int64
        } else {
            DataType::UInt64
        })
    }

    /// One stored element's value, as a 64-bit two's complement pattern.
    pub fn value(&self, el: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        b[..self.size].copy_from_slice(&el[..self.size]);
        if self.big {
            b[..self.size].reverse();
        }
        let raw = u64::from_le_bytes(b) >> self.offset;
        let unused = 64 - self.precision;
        if self.signed {
            (((raw << unused) as i64) >> unused) as u64
        } else {
            (raw << unused) >> unused
        }
    }

    /// Convert stored elements `src` into native served elements `dst`.
    pub fn convert(&self, src: &[u8], dst: &mut [u8]) {
        let out = self.served_size();
        for (s, d) in src.chunks_exact(self.size).zip(dst.chunks_exact_mut(out)) {
            let v = self.value(s).to_ne_bytes();
            // The low `out` bytes of the value, in native order.
            if cfg!(target_endian = "little") {
                d.copy_from_slice(&v[..out]);
            } else {
                d.copy_from_slice(&v[8 - out..]);
            }
        }
    }
}

/// A stored element type served converted: its stored size, the served
/// type, and the conversion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Convert {
    Int(PaddedInt),
    Float(FloatType),
}

impl Convert {
    /// Stored element size in bytes.
    pub fn size(&self) -> usize {
        match self {
            Convert::Int(t) => t.size,
            Convert::Float(t) => t.size,
        }
    }

    /// Served element size in bytes.
    pub fn served_size(&self) -> usize {
        self.dtype().size()
    }

    /// The served element type (native byte order).
    pub fn dtype(&self) -> DataType {
        match self {
            Convert::Int(t) => t.dtype(),
            Convert::Float(t) => t.served().dtype(),
        }
    }

    /// Convert stored elements `src` into native served elements `dst`.
    pub fn convert(&self, src: &[u8], dst: &mut [u8]) {
        match self {
            Convert::Int(t) => t.convert(src, dst),
            Convert::Float(t) => t.convert(src, dst),
        }
    }
}

/// The array-to-bytes codec of a dataset of a [`Convert`] type: stored
/// elements in, native served elements out.
#[derive(Debug)]
pub struct ConvertCodec(pub Convert);

impl ArrayToBytesCodec for ConvertCodec {
    fn name(&self) -> &'static str {
        "hdf5_convert"
    }

    fn encoded_size(&self, decoded: &ChunkRepr) -> Option<usize> {
        usize::try_from(decoded.num_elements()?)
            .ok()?
            .checked_mul(self.0.size())
    }

    fn decode(&self, encoded: Vec<u8>, decoded: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        let n = decoded
            .num_elements()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| CodecError::Chain("chunk too large".into()))?;
        if encoded.len() != n * self.0.size() {
            return Err(CodecError::Chain(format!(
                "{} bytes for {n} elements of {} bytes",
                encoded.len(),
                self.0.size()
            )));
        }
        let mut out = vec![0u8; n * self.0.served_size()];
        self.0.convert(&encoded, &mut out);
        Ok(out)
    }

    fn validate(&self, decoded: &ChunkRepr) -> Result<(), CodecError> {
        if decoded.dtype != self.0.dtype() {
            return Err(CodecError::Chain(format!(
                "{} served as {}",
                decoded.dtype,
                self.0.dtype()
            )));
        }
        Ok(())
    }
}

/// Byte order of a stored float (`H5T_ORDER_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatOrder {
    Little,
    Big,
    /// VAX order: 16-bit words, most significant first, each little-endian.
    Vax,
}

/// Mantissa normalisation (`H5T_NORM_*`). HDF5 cannot convert the third,
/// `msb set`, so no such type is a [`FloatType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    /// The leading 1 is not stored (IEEE).
    Implied,
    /// The leading bit is stored (x87 extended).
    None,
}

/// The bits of a float type, as `H5Tget_fields`, `H5Tget_ebias`,
/// `H5Tget_norm` give them; positions count from bit 0 of the element
/// in little-endian order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloatBits {
    pub precision: u32,
    pub offset: u32,
    pub sign: u32,
    pub epos: u32,
    pub esize: u32,
    pub ebias: u64,
    pub mpos: u32,
    pub msize: u32,
    pub norm: Norm,
}

/// A stored floating-point type served converted ([`Convert::Float`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloatType {
    /// Stored size in bytes (1 to 16).
    pub size: usize,
    pub order: FloatOrder,
    pub bits: FloatBits,
}

/// A type served for a [`FloatType`]: the NumPy float h5py reads it as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    F16,
    F32,
    F64,
    /// NumPy's longdouble on x86-64: x87 extended in 16 bytes.
    X87,
}

impl Served {
    pub fn dtype(self) -> DataType {
        match self {
            Served::F16 => DataType::Float16,
            Served::F32 => DataType::Float32,
            Served::F64 => DataType::Float64,
            Served::X87 => DataType::X87Extended,
        }
    }

    /// Its bits, as HDF5 describes the native type.
    pub fn bits(self) -> FloatBits {
        let ieee = |size: u32, esize: u32, msize: u32| FloatBits {
            precision: 8 * size,
            offset: 0,
            sign: 8 * size - 1,
            epos: msize,
            esize,
            ebias: (1 << (esize - 1)) - 1,
            mpos: 0,
            msize,
            norm: Norm::Implied,
        };
        match self {
            Served::F16 => ieee(2, 5, 10),
            Served::F32 => ieee(4, 8, 23),
            Served::F64 => ieee(8, 11, 52),
            Served::X87 => FloatBits {
                precision: 80,
                offset: 0,
                sign: 79,
                epos: 64,
                esize: 15,
                ebias: 16383,
                mpos: 0,
                msize: 64,
                norm: Norm::None,
            },
        }
    }

    fn size(self) -> usize {
        self.dtype().size()
    }
}

/// Why a float description cannot be served ([`FloatType::new`]).
pub type FloatRefusal = &'static str;

impl FloatType {
    /// Check a stored description (from the file, so possibly corrupt):
    /// every field inside the element and inside the significant bits,
    /// no two fields overlapping, an exponent HDF5 converts (1 to 63
    /// bits), a NumPy type that holds it.
    pub fn new(size: usize, order: FloatOrder, bits: FloatBits) -> Result<Self, FloatRefusal> {
        let b = &bits;
        if !(1..=16).contains(&size) {
            return Err("floating point wider than 16 bytes");
        }
        let end = b.offset.checked_add(b.precision);
        if b.precision == 0 || end.is_none_or(|e| e > 8 * size as u32) {
            return Err("floating point with its precision past the end of the element");
        }
        let (lo, hi) = (b.offset, b.offset + b.precision);
        let inside = |pos: u32, n: u32| pos >= lo && pos.checked_add(n).is_some_and(|e| e <= hi);
        if !(1..=63).contains(&b.esize) || b.msize == 0 || b.msize > 127 {
            return Err("floating point with an exponent or mantissa size HDF5 cannot convert");
        }
        if !inside(b.sign, 1) || !inside(b.epos, b.esize) || !inside(b.mpos, b.msize) {
            return Err("floating point with a field outside its significant bits");
        }
        let overlap = |p: u32, n: u32, q: u32, m: u32| p < q + m && q < p + n;
        if overlap(b.sign, 1, b.epos, b.esize)
            || overlap(b.sign, 1, b.mpos, b.msize)
            || overlap(b.epos, b.esize, b.mpos, b.msize)
        {
            return Err("floating point with overlapping fields");
        }
        if order == FloatOrder::Vax && !size.is_multiple_of(2) {
            return Err("floating point of VAX order and an odd size");
        }
        let t = FloatType { size, order, bits };
        t.pick()
            .ok_or("floating point no NumPy type holds (h5py refuses it too)")?;
        Ok(t)
    }

    /// h5py's choice (`TypeFloatID.py_dtype`): the first NumPy float at
    /// least as wide whose mantissa holds `msize` bits and whose exponent
    /// range holds the stored one (NumPy's `finfo`, the x87 mantissa
    /// counted with its explicit bit as h5py does).
    fn pick(&self) -> Option<Served> {
        let b = &self.bits;
        // (type, nmant, maxexp, minexp)
        let table = [
            (Served::F16, 10i128, 16i128, -14i128),
            (Served::F32, 23, 128, -126),
            (Served::F64, 52, 1024, -1022),
            (Served::X87, 64, 16384, -16382),
        ];
        let ebias = i128::from(b.ebias);
        table.into_iter().find_map(|(t, nmant, maxexp, minexp)| {
            let ok = t.size() >= self.size
                && i128::from(b.msize) <= nmant
                && (1i128 << b.esize) - ebias - 1 <= maxexp
                && 1 - ebias >= minexp;
            ok.then_some(t)
        })
    }

    /// The served type.
    pub fn served(&self) -> Served {
        self.pick().expect("checked by FloatType::new")
    }

    /// Whether the served elements are the stored ones reordered (the
    /// x87 long double in 16 bytes).
    pub fn served_as_stored(&self) -> bool {
        let to = self.served();
        self.bits == to.bits() && self.size == to.size()
    }

    /// One stored element, its bits in little-endian order as a number.
    fn load(&self, el: &[u8]) -> u128 {
        let mut b = [0u8; 16];
        b[..self.size].copy_from_slice(&el[..self.size]);
        let v = &mut b[..self.size];
        match self.order {
            FloatOrder::Little => {}
            FloatOrder::Big => v.reverse(),
            // As H5T__conv_f_f_loop puts a VAX float in little-endian order:
            // its loop runs over the whole element (i < size, by 4), so
            // for 8 bytes the second step swaps the middle words back into
            // [w3, w2, w1, w0]. Mirrored exactly, odd as it is for other
            // sizes (6 bytes come out unchanged), to read what HDF5 reads.
            FloatOrder::Vax => {
                let n = v.len();
                let mut i = 0;
                while i < n {
                    v.swap(i, n - 2 - i);
                    v.swap(i + 1, n - 1 - i);
                    i += 4;
                }
            }
        }
        u128::from_le_bytes(b)
    }

    /// Convert stored elements `src` into native served elements `dst`.
    pub fn convert(&self, src: &[u8], dst: &mut [u8]) {
        let to = self.served();
        let (tb, out) = (to.bits(), to.size());
        // HDF5's no-op and byte-order conversions: the same bits in the
        // same size (the x87 long double in 16 bytes).
        let same = self.served_as_stored();
        for (s, d) in src.chunks_exact(self.size).zip(dst.chunks_exact_mut(out)) {
            let v = self.load(s);
            let r = if same {
                v & mask(tb.precision)
            } else {
                convert_bits(&self.bits, v, &tb)
            };
            let le = r.to_le_bytes();
            d.copy_from_slice(&le[..out]);
            if cfg!(target_endian = "big") {
                d.reverse();
            }
        }
    }

    /// One stored element as an f64 (for attributes in JSON), converted
    /// as HDF5 converts it to `double`.
    pub fn to_f64(&self, el: &[u8]) -> f64 {
        let r = convert_bits(&self.bits, self.load(el), &Served::F64.bits());
        f64::from_bits(r as u64)
    }
}

/// Low `n` bits set.
fn mask(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

fn get(v: u128, pos: u32, n: u32) -> u128 {
    if pos >= 128 { 0 } else { (v >> pos) & mask(n) }
}

/// `v` with bits `pos..pos + n` set to the low bits of `x`.
fn set(v: u128, pos: u32, n: u32, x: u128) -> u128 {
    if pos >= 128 || n == 0 {
        return v;
    }
    let m = mask(n) << pos;
    (v & !m) | ((x << pos) & m)
}

/// The most significant set bit of field `pos..pos + n`, relative to `pos`.
fn msb(v: u128, pos: u32, n: u32) -> Option<u32> {
    let f = get(v, pos, n);
    (f != 0).then(|| 127 - f.leading_zeros())
}

/// `H5T__conv_f_f`'s conversion of one element (sign, exponent and
/// mantissa moved bit by bit; no exception callback, so HDF5's defaults:
/// infinities and NaN kept, overflow to infinity). Padding is zero.
fn convert_bits(src: &FloatBits, s: u128, dst: &FloatBits) -> u128 {
    let mut s = s;
    let sign = get(s, src.sign, 1);
    let mut d = set(0, dst.sign, 1, sign);
    let mant = get(s, src.mpos, src.msize);
    let exp = get(s, src.epos, src.esize);
    let ones = mask(src.esize);
    // H5T__conv_float_find_special.
    if mant == 0 && exp == 0 {
        return d;
    }
    let low_zero = get(s, src.mpos, src.msize - 1) == 0;
    let inf = exp == ones && (mant == 0 || (src.norm == Norm::None && low_zero));
    if inf || exp == ones {
        d = set(d, dst.epos, dst.esize, u128::MAX);
        if inf {
            if dst.norm == Norm::None {
                d = set(d, dst.mpos + dst.msize - 1, 1, 1);
            }
        } else {
            d = set(d, dst.mpos, dst.msize, u128::MAX);
        }
        return d;
    }
    let mut expo = exp as i128;
    let mut denormalized = expo == 0;
    let mut implied: u128 = 1;
    let mpos = src.mpos;
    let mut mrsh: i128 = 0;
    let mut msize: i128 = 0;
    if expo == 0 || src.norm == Norm::None {
        // The first set bit is the leading 1.
        let bitno = msb(s, mpos, src.msize).map_or(-1, i128::from);
        if bitno > 0 {
            msize = bitno;
        } else if bitno == 0 {
            msize = 1;
            s = set(s, mpos, 1, 0);
        }
        expo -= (i128::from(src.ebias) - 1) + (i128::from(src.msize) - bitno);
    } else {
        msize = i128::from(src.msize);
        expo -= i128::from(src.ebias);
    }
    if dst.norm == Norm::None {
        mrsh += 1;
    }
    expo += i128::from(dst.ebias);
    let expo_max = (1i128 << dst.esize) - 1;
    let dm = i128::from(dst.msize);
    if expo < -dm {
        expo = 0;
        msize = 0;
    } else if expo <= 0 {
        mrsh += 1 - expo;
        expo = 0;
        denormalized = true;
    } else if expo >= expo_max {
        expo = expo_max;
        msize = 0;
    }
    // Round half up where the mantissa is cut.
    let mut carry = false;
    if msize > 0 && mrsh <= dm && mrsh + msize > dm {
        let bitno = (mrsh + msize - dm) as u32;
        let cut = get(s, mpos + bitno - 1, 1) == 1;
        let field = (mpos + bitno - 1, 1 + msize as u32 - bitno);
        let inc = |s: u128| {
            let f = get(s, field.0, field.1) + 1;
            (set(s, field.0, field.1, f), f >> field.1 != 0)
        };
        if cut && !denormalized {
            let rest_not_all_ones =
                get(s, mpos + bitno, msize as u32 - bitno) != mask(msize as u32 - bitno);
            if rest_not_all_ones || expo < expo_max - 1 {
                let (n, c) = inc(s);
                s = n;
                carry = c;
                if carry {
                    implied = 2;
                }
            }
        } else if cut {
            s = inc(s).0;
        }
    }
    // The mantissa.
    let dpos = dst.mpos;
    d = set(d, dpos, dst.msize, 0);
    if mrsh > dm + 1 {
        // Too small: the mantissa stays zero.
    } else if mrsh == dm + 1 {
        d = set(d, dpos, 1, 1);
    } else if mrsh == dm {
        d = set(d, dpos, dst.msize.min(2), implied);
    } else {
        let (mr, ms) = (mrsh as u32, msize as u32);
        if mr > 0 {
            d = set(d, dpos + dst.msize - mr, 2, implied);
        }
        if mrsh + msize >= dm {
            let n = dst.msize - mr;
            d = set(d, dpos, n, get(s, mpos + ms + mr - dst.msize, n));
        } else {
            d = set(d, dpos + dst.msize - (mr + ms), ms, get(s, mpos, ms));
        }
    }
    if carry {
        expo += 1;
        if expo >= expo_max {
            expo = expo_max;
            d = set(d, dpos, dst.msize, 0);
        }
    }
    d = set(d, dst.epos, dst.esize, expo as u128);
    d & mask(dst.offset + dst.precision) & !mask(dst.offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_shifted_masked_and_sign_extended() {
        // 12 bits at offset 0 of a little-endian int16: bit 11 is the sign.
        let t = PaddedInt::new(2, true, false, 0, 12).unwrap();
        assert_eq!(t.value(&[0x00, 0x07]) as i64, 0x700);
        assert_eq!(t.value(&[0x00, 0x08]) as i64, -2048);
        assert_eq!(t.value(&[0xFF, 0xFF]) as i64, -1);
        // Unsigned: the padding above bit 11 is dropped.
        let u = PaddedInt::new(2, false, false, 0, 12).unwrap();
        assert_eq!(u.value(&[0xFF, 0xFF]), 0xFFF);
        // Offset 3: bits 3..15.
        let o = PaddedInt::new(2, true, false, 3, 12).unwrap();
        assert_eq!(o.value(&[0x00, 0x07]) as i64, 0xE0);
        // A 3-byte big-endian int served as 4 bytes.
        let b = PaddedInt::new(3, true, true, 0, 24).unwrap();
        assert_eq!(b.served_size(), 4);
        let mut out = [0u8; 8];
        b.convert(&[0xFF, 0xFF, 0xFE, 0x00, 0x01, 0x00], &mut out);
        let got: Vec<i32> = out
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [-2, 256]);
        assert!(PaddedInt::new(9, true, false, 0, 64).is_none());
        assert!(PaddedInt::new(2, true, false, 8, 12).is_none());
        assert!(PaddedInt::new(2, true, false, 0, 0).is_none());
    }

    /// HDF5's nbit test float: 20 bits at offset 7 of 4 little-endian
    /// bytes, exponent 6 bits (bias 31), mantissa 13 bits.
    fn nbit() -> FloatType {
        let bits = FloatBits {
            precision: 20,
            offset: 7,
            sign: 26,
            epos: 20,
            esize: 6,
            ebias: 31,
            mpos: 7,
            msize: 13,
            norm: Norm::Implied,
        };
        FloatType::new(4, FloatOrder::Little, bits).unwrap()
    }

    fn x87(size: usize) -> FloatType {
        FloatType::new(size, FloatOrder::Little, Served::X87.bits()).unwrap()
    }

    // Expected values: HDF5 2.0's `H5Tconvert` through h5py
    // (`h5py.h5t.convert`) on the same stored bits.

    #[test]
    fn nbit_floats_convert_as_hdf5_converts_them() {
        let t = nbit();
        assert_eq!(t.served(), Served::F32);
        let nb = |sign: u32, exp: u32, mant: u32| (sign << 26) | (exp << 20) | (mant << 7);
        let cases = [
            (nb(0, 0, 0), 0x0000_0000u32),    // +0
            (nb(1, 0, 0), 0x8000_0000),       // -0
            (nb(0, 63, 0), 0x7f80_0000),      // +inf
            (nb(1, 63, 0), 0xff80_0000),      // -inf
            (nb(0, 63, 5), 0x7fff_ffff),      // NaN: all mantissa bits set
            (nb(1, 63, 1), 0xffff_ffff),      // negative NaN
            (nb(0, 31, 0), 0x3f80_0000),      // 1.0
            (nb(0, 0, 1), 0x2a00_0000),       // smallest denormal: normal in f32
            (nb(0, 0, 0x1000), 0x3000_0000),  // largest power-of-two denormal
            (nb(1, 62, 0x1fff), 0xcf7f_fc00), // most negative finite
            // Padding bits are ignored.
            (nb(0, 31, 0) | 0x7f | (0x1f << 27), 0x3f80_0000),
        ];
        for (raw, want) in cases {
            let mut out = [0u8; 4];
            t.convert(&raw.to_le_bytes(), &mut out);
            assert_eq!(u32::from_ne_bytes(out), want, "{raw:#x}");
        }
        // Big-endian storage: the same bits byte-swapped.
        let be = FloatType {
            order: FloatOrder::Big,
            ..t
        };
        let mut out = [0u8; 4];
        be.convert(&nb(1, 62, 0x1fff).to_be_bytes(), &mut out);
        assert_eq!(u32::from_ne_bytes(out), 0xcf7f_fc00);
    }

    #[test]
    fn vax_floats_convert_as_hdf5_converts_them() {
        // HDF5's VAX F-float (`H5T_VAX_F32`: IEEE's fields, bias 129, VAX
        // word order). h5py cannot name a dtype for VAX order (its
        // `py_dtype` has no entry for it); by its rule for other layouts
        // (exponent range: 1 - 129 is below float32's -126) it is
        // float64. HDF5's `H5Tconvert` to `H5T_NATIVE_DOUBLE` gives these.
        let bits = FloatBits {
            ebias: 129,
            ..Served::F32.bits()
        };
        let t = FloatType::new(4, FloatOrder::Vax, bits).unwrap();
        assert_eq!(t.served(), Served::F64);
        let cases = [
            ([0x80, 0x40, 0, 0], 0x3ff0_0000_0000_0000u64), // 1.0
            ([0, 0, 0, 0], 0),
            ([0x08, 0x42, 0, 0], 0x4021_0000_0000_0000), // 8.5
            ([0xc0, 0xc1, 0, 0], 0xc018_0000_0000_0000), // -6.0
            ([0x80, 0x40, 1, 0], 0x3ff0_0000_2000_0000),
        ];
        for (raw, want) in cases {
            let mut out = [0u8; 8];
            t.convert(&raw, &mut out);
            assert_eq!(u64::from_ne_bytes(out), want, "{raw:?}");
        }
    }

    #[test]
    fn vax_doubles_reverse_all_four_words() {
        // HDF5's VAX G-float (`H5T_VAX_F64`: sign 63, exponent at 52 of 11
        // bits, mantissa 52, bias 1025; 16-bit words most significant
        // first, each little-endian). Its exponent range (1 - 1025 is
        // below double's -1022) makes it a long double by h5py's rule.
        // Expected: `h5py.h5t.convert` of the same bytes to
        // `NATIVE_LDOUBLE` (x87, 16 bytes) and `NATIVE_DOUBLE` (HDF5
        // 2.0). A reorder that swaps only the outer words read 1 + 2^-20
        // as 1 + 2^-36.
        let bits = FloatBits {
            ebias: 1025,
            ..Served::F64.bits()
        };
        let t = FloatType::new(8, FloatOrder::Vax, bits).unwrap();
        assert_eq!(t.served(), Served::X87);
        let cases: [([u8; 8], [u8; 10], u64); 3] = [
            (
                [0x10, 0x40, 1, 0, 0, 0, 0, 0], // 1 + 2^-20
                [0, 0, 0, 0, 0, 8, 0, 128, 255, 63],
                0x3ff0_0001_0000_0000,
            ),
            (
                [0x10, 0x40, 0, 0, 1, 0, 0, 0], // 1 + 2^-36
                [0, 0, 0, 8, 0, 0, 0, 128, 255, 63],
                0x3ff0_0000_0001_0000,
            ),
            (
                [0x25, 0x40, 2, 0, 3, 0, 4, 0],
                [0, 32, 0, 24, 0, 16, 0, 168, 0, 64],
                0x4005_0002_0003_0004,
            ),
        ];
        for (raw, x87, double) in cases {
            let mut out = [0u8; 16];
            t.convert(&raw, &mut out);
            if cfg!(target_endian = "big") {
                out.reverse();
            }
            assert_eq!(out, [&x87[..], &[0; 6]].concat().as_slice(), "{raw:?}");
            assert_eq!(t.to_f64(&raw).to_bits(), double, "{raw:?}");
        }
    }

    #[test]
    fn long_doubles_convert_to_double_as_hdf5_converts_them() {
        // 12-byte x87 elements (bytes 10 and 11 are padding, left
        // non-zero) and HDF5's double for each: rounding half up (not to
        // even), overflow to infinity, underflow to zero, HDF5's
        // denormal rounding (1.5 x 2^-1074 gives 2^-1074), NaN with
        // every mantissa bit set.
        let t = x87(12);
        let cases: [([u8; 12], u64); 8] = [
            (
                [171, 170, 170, 170, 170, 170, 170, 170, 253, 63, 14, 208],
                0x3fd5_5555_5555_5555,
            ),
            (
                [0, 0, 0, 0, 0, 0, 0, 128, 159, 79, 14, 208],
                0x7ff0_0000_0000_0000,
            ),
            ([0, 0, 0, 0, 0, 0, 0, 128, 95, 48, 14, 208], 0),
            ([32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 14, 208], 0),
            (
                [0, 0, 0, 0, 0, 0, 0, 128, 255, 255, 14, 208],
                0xfff0_0000_0000_0000,
            ),
            (
                [0, 0, 0, 0, 0, 0, 0, 192, 255, 127, 14, 208],
                0x7fff_ffff_ffff_ffff,
            ),
            ([0, 0, 0, 0, 0, 0, 0, 192, 205, 59, 14, 208], 1),
            (
                [0, 4, 0, 0, 0, 0, 0, 128, 255, 63, 14, 208],
                0x3ff0_0000_0000_0001,
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(t.to_f64(&raw).to_bits(), want, "{raw:?}");
        }
    }

    #[test]
    fn long_doubles_are_served_in_16_bytes_padding_zeroed() {
        // 12 bytes to 16: the value's 10 bytes, then zeros.
        let t = x87(12);
        assert_eq!(t.served(), Served::X87);
        assert!(!t.served_as_stored());
        let raw = [171, 170, 170, 170, 170, 170, 170, 170, 253, 63, 14, 208];
        let mut out = [0xEEu8; 16];
        t.convert(&raw, &mut out);
        let mut want = [0u8; 16];
        want[..10].copy_from_slice(&raw[..10]);
        if cfg!(target_endian = "big") {
            want.reverse();
        }
        assert_eq!(out, want);
        // 16 big-endian bytes: reordered, a NaN's payload kept (HDF5's
        // byte-order conversion, no float arithmetic), padding zeroed.
        let be = FloatType {
            order: FloatOrder::Big,
            ..x87(16)
        };
        assert!(be.served_as_stored());
        let mut stored = [0u8; 16];
        stored[..10].copy_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0xC0, 0xFF, 0x7F]);
        stored[12] = 9;
        stored.reverse();
        be.convert(&stored, &mut out);
        let mut want = [0u8; 16];
        want[..10].copy_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0xC0, 0xFF, 0x7F]);
        if cfg!(target_endian = "big") {
            want.reverse();
        }
        assert_eq!(out, want);
    }

    #[test]
    fn served_types_are_h5pys() {
        let custom = |size, esize, msize, ebias| {
            let bits = FloatBits {
                precision: 8 * size as u32,
                offset: 0,
                sign: 8 * size as u32 - 1,
                epos: msize,
                esize,
                ebias,
                mpos: 0,
                msize,
                norm: Norm::Implied,
            };
            FloatType::new(size, FloatOrder::Little, bits).map(|t| t.served())
        };
        // A 3-byte float (7-bit exponent, 16-bit mantissa): float32.
        assert_eq!(custom(3, 7, 16, 63), Ok(Served::F32));
        // float64's exponent in 4 bytes: float64, wider than stored.
        assert_eq!(custom(4, 11, 20, 1023), Ok(Served::F64));
        // bfloat16: float32. An 8-bit float (4-bit exponent): float16.
        assert_eq!(custom(2, 8, 7, 127), Ok(Served::F32));
        assert_eq!(custom(1, 4, 3, 7), Ok(Served::F16));
        let fp8 = FloatType::new(1, FloatOrder::Little, {
            let mut b = Served::F16.bits();
            (b.precision, b.sign, b.epos, b.esize, b.msize, b.ebias) = (8, 7, 3, 4, 3, 7);
            b
        })
        .unwrap();
        let mut out = [0u8; 4];
        // 1.0 and -1.5 as IEEE halves.
        fp8.convert(&[0x38, 0xBC], &mut out);
        assert_eq!(
            [
                u16::from_ne_bytes([out[0], out[1]]),
                u16::from_ne_bytes([out[2], out[3]])
            ],
            [0x3C00, 0xBE00]
        );
        // An exponent wider than longdouble's: no NumPy type (h5py's
        // ValueError), refused.
        assert!(custom(8, 16, 47, 32767).is_err());
    }

    #[test]
    fn corrupt_float_descriptions_are_refused() {
        let good = nbit().bits;
        let bad = [
            FloatBits { esize: 0, ..good },
            FloatBits { esize: 64, ..good },
            FloatBits { msize: 0, ..good },
            FloatBits { epos: 200, ..good },
            FloatBits { mpos: 250, ..good },
            FloatBits { sign: 40, ..good },
            FloatBits { sign: 21, ..good },
            FloatBits { mpos: 16, ..good },
            FloatBits {
                precision: 200,
                ..good
            },
            FloatBits {
                precision: 0,
                ..good
            },
            FloatBits {
                offset: u32::MAX,
                ..good
            },
            FloatBits {
                epos: u32::MAX,
                ..good
            },
        ];
        for b in bad {
            assert!(FloatType::new(4, FloatOrder::Little, b).is_err(), "{b:?}");
        }
        assert!(FloatType::new(17, FloatOrder::Little, good).is_err());
        assert!(FloatType::new(3, FloatOrder::Vax, good).is_err());
        assert!(FloatType::new(0, FloatOrder::Little, good).is_err());
    }
}
