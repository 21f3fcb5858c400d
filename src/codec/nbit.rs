//! HDF5 filter 5: N-bit, HDF5's own (`src/H5Znbit.c`).
//!
//! A datatype may use fewer bits than its size: a precision (the bits that
//! carry the value) at an offset (the lowest of them) inside the element,
//! the rest padding (a 12-bit integer in 2 bytes, HDF5's test floats with
//! 20 significant bits at offset 7 in 4 bytes). N-bit stores only the
//! significant bits: for each element in turn, its `precision` bits from
//! the most significant down, packed most significant bit first into
//! bytes with no gaps. Decoding puts each element's bits back at their
//! offset in the element's byte order and leaves the padding zero, as
//! HDF5 does (it zeroes its output first). Trailing bytes after the last
//! element are ignored (the writer's buffer is rounded up).
//!
//! Parameters (`cd_values`), all written by the library's `set_local`
//! (`H5Pset_nbit` itself passes none): `[0]` their count, `[1]` "need not
//! compress" (every member is full precision at offset 0: the chunk was
//! stored as it is and decodes to itself), `[2]` elements in the chunk,
//! `[3]` the type's class (1 integer or float, 2 array, 3 compound, 4
//! other), then for an integer or float `[4]` size in bytes, `[5]` byte
//! order (0 little, 1 big), `[6]` precision, `[7]` offset in bits. Array
//! and compound types have their members' parameters nested after (their
//! class, size, and each member's offset and own parameters); they are
//! refused: a flat file cannot carry those types (docs/HDF5.md).
//!
//! The no-op form is accepted with any parameters after `[1]` (HDF5
//! before 1.14 wrote three for an enum or string and read them as no-op).
//!
//! Bounds: the output is `[2] × [4]` bytes, checked against the chunk's
//! size before anything is allocated; a packed stream shorter than its
//! elements is corrupt (HDF5 checks every byte it reads too).

use super::entry::{Hdf5OnlyFilter, hdf5_param};
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "nbit";

/// HDF5 filter 5.
pub const HDF5: Hdf5OnlyFilter = Hdf5OnlyFilter {
    id: 5,
    name: NAME,
    build: |p| Ok(Box::new(Nbit::from_hdf5(p)?)),
};

/// `cd_values[3]`: the datatype classes of `H5Znbit.c`.
const ATOMIC: u32 = 1;
const ARRAY: u32 = 2;
const COMPOUND: u32 = 3;

/// The widest element decoded, in bytes: x87 long double stored in 16
/// bytes, the widest atomic type the reader serves.
const MAX_SIZE: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nbit {
    /// Every member at full precision: the chunk is stored unchanged.
    NoOp,
    /// An integer or floating-point type with its significant bits packed.
    Atomic {
        /// Elements in a chunk.
        nelmts: usize,
        /// Element size in bytes (1 ..= `MAX_SIZE`).
        size: usize,
        big_endian: bool,
        /// Significant bits (≥ 1).
        precision: u32,
        /// The lowest significant bit's position (precision + offset ≤
        /// 8 × size).
        offset: u32,
    },
}

impl Nbit {
    /// From the HDF5 parameters.
    pub fn from_hdf5(p: &[u32]) -> Result<Self, CodecError> {
        let bad = |d: String| Err(CodecError::config(NAME, d));
        let count = hdf5_param(NAME, p, 0)?;
        if count as usize != p.len() {
            return bad(format!(
                "the parameters say there are {count} of them, not {}",
                p.len()
            ));
        }
        if hdf5_param(NAME, p, 1)? != 0 {
            return Ok(Nbit::NoOp);
        }
        let nelmts = hdf5_param(NAME, p, 2)? as usize;
        match hdf5_param(NAME, p, 3)? {
            ATOMIC => {}
            class @ (ARRAY | COMPOUND) => {
                let what = if class == ARRAY { "array" } else { "compound" };
                return bad(format!(
                    "{what} types are not decoded (a flat file cannot carry them)"
                ));
            }
            class => return bad(format!("datatype class {class} is not an nbit class")),
        }
        if p.len() != 8 {
            return bad(format!(
                "{} parameters for an integer or float type (8 expected)",
                p.len()
            ));
        }
        let (size, order, precision, offset) = (p[4], p[5], p[6], p[7]);
        let big_endian = match order {
            0 => false,
            1 => true,
            o => return bad(format!("byte order {o} (0 little, 1 big expected)")),
        };
        // The widest atomic type served is 16 bytes (x87 long double,
        // docs/HDF5.md): a larger element size is no type this reader
        // knows, and bounding it here keeps `unpack`'s per-element plan a
        // fixed array and its bit arithmetic far from overflow.
        if size as usize > MAX_SIZE || precision as usize > 8 * MAX_SIZE {
            return bad(format!(
                "precision {precision} at offset {offset} in {size}-byte elements \
                 (at most {MAX_SIZE}-byte elements, {} bits, are decoded)",
                8 * MAX_SIZE
            ));
        }
        let bits = u64::from(size) * 8;
        if size == 0 || precision == 0 || u64::from(precision) + u64::from(offset) > bits {
            return bad(format!(
                "precision {precision} at offset {offset} in {size}-byte elements"
            ));
        }
        if nelmts.checked_mul(size as usize).is_none() {
            return bad(format!("{nelmts} elements of {size} bytes"));
        }
        Ok(Nbit::Atomic {
            nelmts,
            size: size as usize,
            big_endian,
            precision,
            offset,
        })
    }

    /// The decoded size: `None` for the no-op form (the stored size).
    fn output_len(&self) -> Option<usize> {
        match self {
            Nbit::NoOp => None,
            // Checked not to overflow when built.
            Nbit::Atomic { nelmts, size, .. } => Some(nelmts * size),
        }
    }

    /// Unpack into all of `out` (zeroed by the caller; the output size).
    fn unpack(&self, packed: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
        let Nbit::Atomic {
            nelmts,
            size,
            big_endian,
            precision,
            offset,
        } = *self
        else {
            return Ok(());
        };
        // Each element byte that holds significant bits, most significant
        // first: (its index in the element, how many bits, their shift).
        // At most `MAX_SIZE` of them (checked in `from_hdf5`, with
        // precision + offset ≤ 8 × size), so a fixed array: nothing sized
        // by the parameters is allocated before the input is read.
        let (lo, hi) = (offset as usize, offset as usize + precision as usize);
        let mut plan = [(0usize, 0u32, 0u32); MAX_SIZE];
        let mut len = 0;
        for b in (lo / 8..=(hi - 1) / 8).rev() {
            let from = lo.max(b * 8);
            let to = hi.min(b * 8 + 8);
            let at = if big_endian { size - 1 - b } else { b };
            plan[len] = (at, (to - from) as u32, (from - b * 8) as u32);
            len += 1;
        }
        let plan = &plan[..len];
        let mut bits = BitReader::new(packed);
        for (i, element) in out.chunks_exact_mut(size).enumerate() {
            for &(at, n, shift) in plan {
                let Some(v) = bits.read(n) else {
                    return Err(CodecError::corrupt(
                        NAME,
                        format!(
                            "{} bytes of packed values end in element {i} of {nelmts}",
                            packed.len()
                        ),
                    ));
                };
                element[at] = (v << shift) as u8;
            }
        }
        Ok(())
    }
}

/// Bits, most significant first.
struct BitReader<'a> {
    bytes: &'a [u8],
    next: usize,
    acc: u64,
    /// Bits in `acc` not yet read (its low ones).
    have: u32,
}

impl<'a> BitReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        BitReader {
            bytes,
            next: 0,
            acc: 0,
            have: 0,
        }
    }

    /// The next `n` (≤ 8) bits, or `None` past the end.
    fn read(&mut self, n: u32) -> Option<u32> {
        if self.have < n {
            // Refill whole bytes while they fit (at most 56 + 8 bits).
            while self.have <= 56 {
                let Some(&b) = self.bytes.get(self.next) else {
                    break;
                };
                self.acc = (self.acc << 8) | u64::from(b);
                self.next += 1;
                self.have += 8;
            }
            if self.have < n {
                return None;
            }
        }
        self.have -= n;
        Some(((self.acc >> self.have) & ((1 << n) - 1)) as u32)
    }
}

impl BytesToBytesCodec for Nbit {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let Some(n) = self.output_len() else {
            size.check(NAME, encoded.len())?;
            return Ok(encoded);
        };
        size.check(NAME, n)?;
        let mut out = vec![0; n];
        self.unpack(&encoded, &mut out)?;
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        let n = self.output_len().unwrap_or(encoded.len());
        Some(DecodedSize::Exact(out.len()).check(NAME, n).and_then(|()| {
            if matches!(self, Nbit::NoOp) {
                out.copy_from_slice(encoded);
                return Ok(());
            }
            out.fill(0);
            self.unpack(encoded, out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters() {
        // h5py's 12-bit integers at offset 2 in little-endian u16, 300 per
        // chunk; the no-op form; HDF5's own nbit example (h5ex_d_nbit).
        assert!(Nbit::from_hdf5(&[8, 0, 300, 1, 2, 0, 12, 2]).is_ok());
        assert_eq!(
            Nbit::from_hdf5(&[8, 1, 300, 1, 4, 0, 32, 0]).unwrap(),
            Nbit::NoOp
        );
        assert_eq!(Nbit::from_hdf5(&[3, 1, 300]).unwrap(), Nbit::NoOp);
        assert!(Nbit::from_hdf5(&[8, 0, 32, 1, 4, 0, 16, 5]).is_ok());
        for bad in [
            &[][..],
            &[8, 0, 300, 1, 2, 0, 12][..],
            &[7, 0, 300, 1, 2, 0, 12, 2],
            &[8, 0, 300, 1, 2, 2, 12, 2],
            &[8, 0, 300, 1, 2, 0, 0, 2],
            &[8, 0, 300, 1, 2, 0, 12, 5],
            &[8, 0, 300, 1, 0, 0, 1, 0],
            &[8, 0, 300, 1, 2, 0, 17, 0],
            &[8, 0, 300, 9, 2, 0, 12, 2],
            // A compound of two ints: refused by name.
            &[19, 0, 10, 3, 8, 2, 0, 1, 4, 0, 32, 0, 4, 1, 4, 0, 20, 0, 0],
        ] {
            assert!(Nbit::from_hdf5(bad).is_err(), "{bad:?}");
        }
        let e = Nbit::from_hdf5(&[13, 0, 10, 2, 8, 1, 4, 0, 20, 0, 0, 0, 0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("array types"), "{e}");
    }

    #[test]
    fn unpacks_bits_to_their_offset() {
        // Three 5-bit values 0b10110, 0b00001, 0b11111 at offset 3 in
        // big-endian u16: packed 10110 00001 11111 (+ a zero bit).
        let c = Nbit::from_hdf5(&[8, 0, 3, 1, 2, 1, 5, 3]).unwrap();
        let packed = vec![0b1011_0000, 0b0111_1110];
        let out = c.decode(packed, DecodedSize::Exact(6)).unwrap();
        assert_eq!(out, [0x00, 0xb0, 0x00, 0x08, 0x00, 0xf8]);
        // The same little-endian, 12 bits across a byte boundary.
        let c = Nbit::from_hdf5(&[8, 0, 1, 1, 2, 0, 12, 3]).unwrap();
        let out = c.decode(vec![0xab, 0xc0], DecodedSize::Exact(2)).unwrap();
        assert_eq!(u16::from_le_bytes([out[0], out[1]]), 0xabc << 3);
    }

    #[test]
    fn sizes_and_short_streams_are_errors() {
        let c = Nbit::from_hdf5(&[8, 0, 1000, 1, 4, 0, 20, 0]).unwrap();
        assert!(matches!(
            c.decode(vec![0; 2500], DecodedSize::Exact(400)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            c.decode(vec![0; 2500], DecodedSize::AtMost(3999)),
            Err(CodecError::TooLarge { .. })
        ));
        // 1000 × 20 bits = 2500 bytes: one short is corrupt.
        assert!(c.decode(vec![0; 2500], DecodedSize::Exact(4000)).is_ok());
        assert!(matches!(
            c.decode(vec![0; 2499], DecodedSize::Exact(4000)),
            Err(CodecError::Corrupt { .. })
        ));
        let noop = Nbit::from_hdf5(&[8, 1, 4, 1, 4, 0, 32, 0]).unwrap();
        assert_eq!(
            noop.decode(vec![1; 16], DecodedSize::Exact(16)).unwrap(),
            [1; 16]
        );
        assert!(noop.decode(vec![1; 15], DecodedSize::Exact(16)).is_err());
        let mut out = [0; 16];
        assert!(noop.decode_into(&[1; 15], &mut out).unwrap().is_err());
        // A huge stated element count is refused by the size check, with
        // nothing allocated.
        let huge = Nbit::from_hdf5(&[8, 0, u32::MAX, 1, 8, 0, 64, 0]).unwrap();
        assert!(
            huge.decode(vec![0; 8], DecodedSize::AtMost(1 << 20))
                .is_err()
        );
    }

    #[test]
    fn element_sizes_past_sixteen_bytes_are_refused() {
        // The reviewer's input: 1-byte elements claimed as 512 MiB ones
        // with a 2^32 - 1 bit precision at offset 1 (overflowed u32 in
        // unpack) and the same at offset 0 (an 8 GiB plan).
        for bad in [
            [8, 0, 1, 1, 536_870_912, 0, u32::MAX, 1],
            [8, 0, 1, 1, 536_870_912, 0, u32::MAX, 0],
            [8, 0, 1, 1, 17, 0, 8, 0],
            [8, 0, 1, 1, 17, 0, 129, 0],
        ] {
            let e = Nbit::from_hdf5(&bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{}-byte elements", bad[4])), "{e}");
        }
        // The widest accepted: a 16-byte element at full precision, and
        // an x87 long double's 80 bits at offset 0 in 16 bytes.
        let c = Nbit::from_hdf5(&[8, 0, 1, 1, 16, 0, 128, 0]).unwrap();
        let out = c.decode((0..16).collect(), DecodedSize::Exact(16)).unwrap();
        let want: Vec<u8> = (0..16).rev().collect();
        assert_eq!(out, want);
        let c = Nbit::from_hdf5(&[8, 0, 1, 1, 16, 0, 80, 0]).unwrap();
        let out = c.decode(vec![0xff; 10], DecodedSize::Exact(16)).unwrap();
        assert_eq!(out, [[0xff; 10].as_slice(), &[0; 6]].concat());
    }
}
