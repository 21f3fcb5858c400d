//! HDF5 filter 32008: bitshuffle, alone or with LZ4 or Zstandard.
//!
//! Kiyoshi Masui's bitshuffle (`src/bshuf_h5filter.c`, `bitshuffle.c`,
//! `bitshuffle_core.c`; hdf5plugin writes it as `hdf5plugin.Bitshuffle()`).
//! Parameters, as the filter's `set_local` completes them: `[major,
//! minor, element size, block size (elements; 0: the default), compression
//! (0 none, 2 LZ4, 3 Zstandard), Zstandard level]`.
//!
//! The chunk is cut into blocks of `block size` elements (a multiple of
//! 8), then one block of the remaining elements rounded down to a multiple
//! of 8; the last `n % 8` elements are stored as they are, after the
//! blocks. Each block is bit-transposed: for every bit `k` of every byte
//! `j` of an element (in memory order), a row holding that bit of every
//! element of the block, least significant bit first. Without
//! compression, the blocks follow each other with no header. With LZ4 or
//! Zstandard, the chunk starts with a big-endian `u64` decoded size and a
//! big-endian `u32` block size in bytes (which overrides the parameter),
//! and each block is a big-endian `u32` stored length then one LZ4 block
//! or one Zstandard frame of the transposed block; the raw tail is not
//! compressed.
//!
//! The stated size is checked against the chunk's before anything is
//! allocated; each block decodes into one reused buffer of exactly its
//! size (`lz4_flex`, safe Rust; the `zstd` crate, which refuses to write
//! past a slice) and must fill it. The inverse transpose works on 8x8 bit
//! tiles (the C library's `TRANS_BIT_8X8`); its output is checked against
//! the definition in the tests and against hdf5plugin-written chunks in
//! the fixtures.

use super::entry::{Hdf5OnlyFilter, hdf5_param};
use super::hdf5_lz4::header;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "bitshuffle";

/// HDF5 filter 32008.
pub const HDF5: Hdf5OnlyFilter = Hdf5OnlyFilter {
    id: 32008,
    name: NAME,
    build: |p| Ok(Box::new(Bitshuffle::from_hdf5(p)?)),
};

/// Blocks (and the rounding of the last one) are multiples of this many
/// elements (`BSHUF_BLOCKED_MULT`).
const BLOCKED_MULT: usize = 8;

/// What follows the transpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitshuffle {
    elem_size: usize,
    /// Elements per block from the parameters (0: the default).
    block_size: usize,
    compression: Compression,
}

/// `bshuf_default_block_size`: about 8 KiB of elements, a multiple of 8,
/// at least 128.
fn default_block_size(elem_size: usize) -> usize {
    let n = 8192 / elem_size;
    (n / BLOCKED_MULT * BLOCKED_MULT).max(128)
}

impl Bitshuffle {
    /// From the HDF5 parameters.
    pub fn from_hdf5(p: &[u32]) -> Result<Self, CodecError> {
        let elem_size = hdf5_param(NAME, p, 2)? as usize;
        if elem_size == 0 {
            return Err(CodecError::config(NAME, "element size 0"));
        }
        let block_size = p.get(3).copied().unwrap_or(0) as usize;
        let compression = match p.get(4).copied().unwrap_or(0) {
            0 => Compression::None,
            2 => Compression::Lz4,
            3 => Compression::Zstd,
            c => {
                return Err(CodecError::config(
                    NAME,
                    format!("compression {c} (expected 0 none, 2 lz4 or 3 zstd)"),
                ));
            }
        };
        Ok(Bitshuffle {
            elem_size,
            block_size,
            compression,
        })
    }
}

/// Transpose an 8x8 bit matrix held as 8 bytes (byte `r`, bit `c`) into
/// byte `c`, bit `r` (bitshuffle's `TRANS_BIT_8X8`).
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x = x ^ t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x = x ^ t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

/// Undo the bit transpose of one block of `out.len() / elem_size`
/// elements (a multiple of 8): `input` bit `(8 j + k) n + i` (rows of `n`
/// bits, least significant first) is bit `k` of byte `j` of element `i`.
pub fn untranspose_block(input: &[u8], out: &mut [u8], elem_size: usize) {
    debug_assert_eq!(input.len(), out.len());
    let n = out.len() / elem_size;
    debug_assert!(n.is_multiple_of(BLOCKED_MULT));
    let row = n / 8;
    for j in 0..elem_size {
        let rows = &input[8 * j * row..8 * (j + 1) * row];
        for b in 0..row {
            let mut x = 0u64;
            for k in 0..8 {
                x |= (rows[k * row + b] as u64) << (8 * k);
            }
            let y = transpose8(x).to_le_bytes();
            for (t, &byte) in y.iter().enumerate() {
                out[(8 * b + t) * elem_size + j] = byte;
            }
        }
    }
}

impl Bitshuffle {
    /// Decode the blocks in `input` into all of `out` (whole elements),
    /// with `block` elements per block.
    fn decode_blocks(&self, input: &[u8], out: &mut [u8], block: usize) -> Result<(), CodecError> {
        let es = self.elem_size;
        if block == 0 || !block.is_multiple_of(BLOCKED_MULT) {
            return Err(CodecError::corrupt(
                NAME,
                format!("block size {block} is not a positive multiple of 8 elements"),
            ));
        }
        let n = out.len() / es;
        let tail = n % BLOCKED_MULT * es;
        let (body, raw) = out.split_at_mut(out.len() - tail);
        let mut tmp = Vec::new();
        let mut pos = 0;
        let mut done = 0;
        while done < body.len() {
            let len = (block * es).min(body.len() - done);
            let dst = &mut body[done..done + len];
            let src: &[u8] = match self.compression {
                Compression::None => {
                    let s = input.get(pos..pos + len).ok_or_else(|| {
                        CodecError::corrupt(NAME, "the chunk ends inside a block")
                    })?;
                    pos += len;
                    s
                }
                Compression::Lz4 | Compression::Zstd => {
                    let stored = input
                        .get(pos..pos + 4)
                        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
                        .ok_or_else(|| {
                            CodecError::corrupt(NAME, "the chunk ends before a block")
                        })?;
                    let s = input
                        .get(pos + 4..pos + 4 + stored)
                        .ok_or_else(|| CodecError::corrupt(NAME, "a block runs past the chunk"))?;
                    pos += 4 + stored;
                    tmp.resize(len, 0);
                    let got = match self.compression {
                        Compression::Lz4 => lz4_flex::block::decompress_into(s, &mut tmp)
                            .map_err(|e| CodecError::corrupt(NAME, format!("lz4 block: {e}")))?,
                        _ => zstd::bulk::decompress_to_buffer(s, &mut tmp[..])
                            .map_err(|e| CodecError::corrupt(NAME, format!("zstd block: {e}")))?,
                    };
                    if got != len {
                        return Err(CodecError::corrupt(
                            NAME,
                            format!("a block decoded to {got} bytes, expected {len}"),
                        ));
                    }
                    &tmp
                }
            };
            untranspose_block(src, dst, es);
            done += len;
        }
        let rest = input
            .get(pos..pos + tail)
            .ok_or_else(|| CodecError::corrupt(NAME, "the chunk ends before its last elements"))?;
        raw.copy_from_slice(rest);
        Ok(())
    }

    /// Decode `encoded` into all of `out`, whose length the caller checked
    /// is the chunk's.
    fn decode_to(&self, encoded: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
        let (body, block) = match self.compression {
            Compression::None => {
                let block = match self.block_size {
                    0 => default_block_size(self.elem_size),
                    b => b,
                };
                (encoded, block)
            }
            _ => {
                let (_, block_bytes, body) = header(NAME, encoded)?;
                (body, block_bytes / self.elem_size)
            }
        };
        self.decode_blocks(body, out, block)
    }

    /// The decoded size: stated in the header, or the stored size.
    fn decoded_len(&self, encoded: &[u8]) -> Result<u64, CodecError> {
        let n = match self.compression {
            Compression::None => encoded.len() as u64,
            _ => header(NAME, encoded)?.0,
        };
        if !n.is_multiple_of(self.elem_size as u64) {
            return Err(CodecError::corrupt(
                NAME,
                format!("{n} bytes are not whole {}-byte elements", self.elem_size),
            ));
        }
        Ok(n)
    }
}

impl BytesToBytesCodec for Bitshuffle {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        (self.compression == Compression::None).then_some(decoded_size)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let n = self.decoded_len(&encoded)?;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        size.check(NAME, n)?;
        let mut out = vec![0; n];
        self.decode_to(&encoded, &mut out)?;
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        Some(self.decoded_len(encoded).and_then(|n| {
            DecodedSize::Exact(out.len()).check(NAME, usize::try_from(n).unwrap_or(usize::MAX))?;
            self.decode_to(encoded, out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bitshuffle of one block, by its definition.
    fn transpose_naive(data: &[u8], es: usize) -> Vec<u8> {
        let n = data.len() / es;
        let mut out = vec![0u8; data.len()];
        for i in 0..n {
            for j in 0..es {
                for k in 0..8 {
                    if data[i * es + j] >> k & 1 == 1 {
                        let bit = (8 * j + k) * n + i;
                        out[bit / 8] |= 1 << (bit % 8);
                    }
                }
            }
        }
        out
    }

    /// A whole chunk as the filter writes it, from the definition.
    fn encode(data: &[u8], es: usize, block: usize, c: Compression) -> Vec<u8> {
        let n = data.len() / es;
        let mut blocks = Vec::new();
        let mut i = 0;
        while n - i >= BLOCKED_MULT {
            let m = block.min((n - i) / BLOCKED_MULT * BLOCKED_MULT);
            blocks.push(transpose_naive(&data[i * es..(i + m) * es], es));
            i += m;
        }
        let mut out = Vec::new();
        if c != Compression::None {
            out.extend((data.len() as u64).to_be_bytes());
            out.extend(((block * es) as u32).to_be_bytes());
        }
        for b in blocks {
            match c {
                Compression::None => out.extend(b),
                Compression::Lz4 => {
                    let z = lz4_flex::block::compress(&b);
                    out.extend((z.len() as u32).to_be_bytes());
                    out.extend(z);
                }
                Compression::Zstd => {
                    let z = zstd::bulk::compress(&b, 3).unwrap();
                    out.extend((z.len() as u32).to_be_bytes());
                    out.extend(z);
                }
            }
        }
        out.extend(&data[i * es..]);
        out
    }

    fn data(n: usize, es: usize) -> Vec<u8> {
        (0..n * es)
            .map(|i| ((i / es) as u32).wrapping_mul(40503) as u8 ^ (i % es) as u8)
            .collect()
    }

    #[test]
    fn transpose_matches_the_definition() {
        for es in [1, 2, 3, 4, 8] {
            for n in [8, 16, 64, 136] {
                let d = data(n, es);
                let mut back = vec![0; d.len()];
                untranspose_block(&transpose_naive(&d, es), &mut back, es);
                assert_eq!(back, d, "{es} {n}");
            }
        }
    }

    #[test]
    fn decodes_every_compression_with_a_partial_tail() {
        for (c, code) in [
            (Compression::None, 0),
            (Compression::Lz4, 2),
            (Compression::Zstd, 3),
        ] {
            for (es, n, block) in [(4, 1000, 128), (8, 37, 16), (2, 5, 8), (1, 4096, 0)] {
                let b = Bitshuffle::from_hdf5(&[0, 4, es as u32, block as u32, code]).unwrap();
                let eff = if block == 0 {
                    default_block_size(es)
                } else {
                    block
                };
                let d = data(n, es);
                let enc = encode(&d, es, eff, c);
                let got = b.decode(enc.clone(), DecodedSize::Exact(d.len())).unwrap();
                assert_eq!(got, d, "{c:?} {es} {n}");
                let mut out = vec![0; d.len()];
                b.decode_into(&enc, &mut out).unwrap().unwrap();
                assert_eq!(out, d);
            }
        }
    }

    #[test]
    fn parameters() {
        assert!(Bitshuffle::from_hdf5(&[0, 4]).is_err());
        assert!(Bitshuffle::from_hdf5(&[0, 4, 0]).is_err());
        assert!(Bitshuffle::from_hdf5(&[0, 4, 4, 0, 1]).is_err());
        assert_eq!(default_block_size(4), 2048);
        assert_eq!(default_block_size(128), 128);
        // A block size that is not a multiple of 8 is refused when used.
        let b = Bitshuffle::from_hdf5(&[0, 4, 1, 12, 0]).unwrap();
        assert!(b.decode(vec![0; 24], DecodedSize::Exact(24)).is_err());
    }

    #[test]
    fn corrupt_chunks_are_errors() {
        let d = data(1000, 4);
        for (c, code) in [(Compression::Lz4, 2), (Compression::Zstd, 3)] {
            let b = Bitshuffle::from_hdf5(&[0, 4, 4, 128, code]).unwrap();
            let enc = encode(&d, 4, 128, c);
            // Header size disagrees with the chunk: refused before decoding.
            assert!(matches!(
                b.decode(enc.clone(), DecodedSize::Exact(d.len() + 4)),
                Err(CodecError::WrongSize { .. })
            ));
            let mut huge = enc.clone();
            huge[..8].copy_from_slice(&(u64::MAX - 7).to_be_bytes());
            assert!(b.decode(huge, DecodedSize::AtMost(1 << 20)).is_err());
            for cut in [0, 11, 12, 14, 100, enc.len() - 1] {
                assert!(
                    b.decode(enc[..cut].to_vec(), DecodedSize::Exact(d.len()))
                        .is_err(),
                    "{c:?} {cut}"
                );
            }
            for i in 0..enc.len().min(300) {
                let mut bad = enc.clone();
                bad[i] ^= 0x33;
                if let Ok(v) = b.decode(bad, DecodedSize::Exact(d.len())) {
                    assert_eq!(v.len(), d.len());
                }
            }
        }
        // Uncompressed: the stored size is the decoded size.
        let b = Bitshuffle::from_hdf5(&[0, 4, 4, 0, 0]).unwrap();
        assert!(b.decode(vec![0; 10], DecodedSize::Exact(10)).is_err());
        assert!(matches!(
            b.decode(vec![0; 12], DecodedSize::Exact(16)),
            Err(CodecError::WrongSize { .. })
        ));
    }
}
