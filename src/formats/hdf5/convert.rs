//! Integers with padding bits or an unusual size, converted as HDF5
//! converts them to a native integer (`H5T__conv_i_i`, which h5py and
//! netCDF4-python read through).
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
//! The conversion is the array's array-to-bytes codec
//! ([`PaddedIntCodec`], in place of `bytes`): it runs after the filter
//! pipeline, on whole chunks, so chunked, contiguous and compact storage
//! and the engine's cache all see the served type.

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
        match (self.served_size(), self.signed) {
            (1, true) => DataType::Int8,
            (2, true) => DataType::Int16,
            (4, true) => DataType::Int32,
            (8, true) => DataType::Int64,
            (1, false) => DataType::UInt8,
            (2, false) => DataType::UInt16,
            (4, false) => DataType::UInt32,
            _ => DataType::UInt64,
        }
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

/// The array-to-bytes codec of a dataset of a [`PaddedInt`] type: stored
/// elements in, native served elements out.
#[derive(Debug)]
pub struct PaddedIntCodec(pub PaddedInt);

impl ArrayToBytesCodec for PaddedIntCodec {
    fn name(&self) -> &'static str {
        "hdf5_padded_int"
    }

    fn encoded_size(&self, decoded: &ChunkRepr) -> Option<usize> {
        usize::try_from(decoded.num_elements()?)
            .ok()?
            .checked_mul(self.0.size)
    }

    fn decode(&self, encoded: Vec<u8>, decoded: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        let n = decoded
            .num_elements()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| CodecError::Chain("chunk too large".into()))?;
        if encoded.len() != n * self.0.size {
            return Err(CodecError::Chain(format!(
                "{} bytes for {n} integers of {} bytes",
                encoded.len(),
                self.0.size
            )));
        }
        let mut out = vec![0u8; n * self.0.served_size()];
        self.0.convert(&encoded, &mut out);
        Ok(out)
    }

    fn validate(&self, decoded: &ChunkRepr) -> Result<(), CodecError> {
        if decoded.dtype.size() != self.0.served_size() {
            return Err(CodecError::Chain(format!(
                "{} served as {}",
                decoded.dtype,
                self.0.dtype()
            )));
        }
        Ok(())
    }
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
}
