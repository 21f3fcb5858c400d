//! numcodecs `fletcher32`: HDF5's Fletcher-32 checksum after the data.
//!
//! numcodecs `Fletcher32` (`numcodecs/fletcher32.pyx`, converted from
//! HDF5's `H5_checksum_fletcher32`); zarr-python 3 writes it into Zarr v3
//! metadata as `numcodecs.fletcher32`; HDF5's own `fletcher32` filter (id
//! 3, no parameters: netcdf-c `NCZ_fletcher32_codec`) stores the same
//! bytes.
//!
//! ```json
//! {"id": "fletcher32"}
//! {"name": "numcodecs.fletcher32", "configuration": {}}
//! ```
//!
//! The payload is summed as big-endian 16-bit words (an odd last byte is
//! the high half of a word), both sums starting at 0 rather than the
//! textbook 0xffff and folded to 16 bits every 360 words; the checksum
//! `sum2 << 16 | sum1` follows the data as a little-endian `u32`.
//!
//! HDF5 itself also accepts the checksum with the bytes of each 16-bit
//! half swapped, written by HDF5 before 1.6.3 (2004); numcodecs does not,
//! and neither does this.

use serde_json::Value;

use super::checksum32::{Location, strip};
use super::entry::{CodecEntry, Hdf5Filter, Numcodecs};
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "fletcher32";

/// numcodecs `fletcher32`; v3 `numcodecs.fletcher32`; HDF5 filter 3.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Bytes(|c| Ok(Box::new(Fletcher32::from_v2(c)?))),
    )),
    v3: None,
    hdf5: Some(Hdf5Filter {
        id: 3,
        to_json: |_| Ok(serde_json::json!({"id": NAME})),
        to_params: |_| Ok(Vec::new()),
    }),
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fletcher32;

impl Fletcher32 {
    /// From the numcodecs object `{"id": "fletcher32"}` (no options).
    pub fn from_v2(_config: &Value) -> Result<Self, CodecError> {
        Ok(Fletcher32)
    }
}

/// HDF5's `H5_checksum_fletcher32`.
pub fn checksum(data: &[u8]) -> u32 {
    // 360 words is the most that can be summed before `sum2` could
    // overflow 32 bits.
    const BLOCK: usize = 360 * 2;
    let fold = |s: u32| (s & 0xffff) + (s >> 16);
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let words = &data[..data.len() & !1];
    for block in words.chunks(BLOCK) {
        for w in block.chunks_exact(2) {
            sum1 += u16::from_be_bytes([w[0], w[1]]) as u32;
            sum2 += sum1;
        }
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    if data.len() % 2 == 1 {
        sum1 += (data[data.len() - 1] as u32) << 8;
        sum2 += sum1;
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    sum1 = fold(sum1);
    sum2 = fold(sum2);
    (sum2 << 16) | sum1
}

impl BytesToBytesCodec for Fletcher32 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        decoded_size.checked_add(4)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        strip(NAME, encoded, size, Location::End, checksum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// The textbook definition (sums mod 65535 of big-endian words, the
    /// odd byte padded with zero), which HDF5's folding computes except
    /// that a sum of exactly 65535 may stay 65535 instead of becoming 0.
    fn reference(data: &[u8]) -> u32 {
        let (mut a, mut b) = (0u64, 0u64);
        for w in data.chunks(2) {
            let v = ((w[0] as u64) << 8) | w.get(1).copied().unwrap_or(0) as u64;
            a = (a + v) % 65535;
            b = (b + a) % 65535;
        }
        ((b << 16) | a) as u32
    }

    #[test]
    fn known_values() {
        // numcodecs.Fletcher32().encode(b"abcde")[-4:] == bytes.fromhex("c729f04f")
        assert_eq!(checksum(b"abcde"), 0x4ff0_29c7);
        assert_eq!(checksum(b""), 0);
        let c = Fletcher32::from_v2(&json!({"id": "fletcher32"})).unwrap();
        let enc = [b"abcde".as_slice(), &[0xc7, 0x29, 0xf0, 0x4f]].concat();
        assert_eq!(c.decode(enc, DecodedSize::Exact(5)).unwrap(), b"abcde");
        let bad = [b"abcdf".as_slice(), &[0xc7, 0x29, 0xf0, 0x4f]].concat();
        assert!(matches!(
            c.decode(bad, DecodedSize::Exact(5)),
            Err(CodecError::Checksum { .. })
        ));
        assert_eq!(c.encoded_size(5), Some(9));
    }

    proptest! {
        #[test]
        fn matches_the_textbook_sum_mod_65535(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let got = checksum(&data);
            let want = reference(&data);
            let canon = |x: u32| ((x & 0xffff) % 65535) | (((x >> 16) % 65535) << 16);
            prop_assert_eq!(canon(got), want);
        }
    }
}
