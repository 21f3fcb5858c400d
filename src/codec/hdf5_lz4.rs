//! HDF5 filter 32004: LZ4 in HDF5's block framing.
//!
//! The HDF Group's registered LZ4 filter (`H5Zlz4.c` in hdf5_plugins,
//! also shipped by hdf5plugin as `hdf5plugin.LZ4()`). Not numcodecs'
//! `lz4` ([`super::lz4`]), which stores one block after a little-endian
//! size. A chunk is:
//!
//! ```text
//! u64 BE   decoded size of the chunk
//! u32 BE   block size (decoded bytes per block; the last may be shorter)
//! then for every block:
//!   u32 BE   stored size of the block
//!   bytes    one raw LZ4 block, or the block's bytes as they are when
//!            the stored size equals the block's decoded size
//! ```
//!
//! The parameter (`cd_values[0]`) is the writer's block size and does not
//! matter here: the header says it. The stated decoded size is checked
//! against the chunk's before anything is allocated, each block decodes
//! into its own part of the output (`lz4_flex`, safe Rust, never writing
//! past it) and must fill it exactly, and a block size of 0 for a
//! non-empty chunk (on which the C filter would loop forever) is corrupt.

use super::entry::Hdf5OnlyFilter;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "lz4 (HDF5)";

/// HDF5 filter 32004.
pub const HDF5: Hdf5OnlyFilter = Hdf5OnlyFilter {
    id: 32004,
    name: NAME,
    build: |_| Ok(Box::new(Hdf5Lz4)),
};

/// The decoder (the parameter only matters to the writer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hdf5Lz4;

/// The header of HDF5's block framing (this filter's and bitshuffle's):
/// the stated decoded size (8 bytes, big-endian), the block size (4
/// bytes, big-endian), then the blocks. `codec` names the errors.
pub(crate) fn header<'a>(
    codec: &'static str,
    encoded: &'a [u8],
) -> Result<(u64, usize, &'a [u8]), CodecError> {
    if encoded.len() < 12 {
        return Err(CodecError::corrupt(
            codec,
            format!("{} bytes cannot hold the 12-byte header", encoded.len()),
        ));
    }
    let total = u64::from_be_bytes(encoded[..8].try_into().expect("8 bytes"));
    let block = u32::from_be_bytes(encoded[8..12].try_into().expect("4 bytes")) as usize;
    Ok((total, block, &encoded[12..]))
}

/// Decode the blocks into all of `out` (the stated size, checked).
fn decode_blocks(mut blocks: &[u8], block: usize, out: &mut [u8]) -> Result<(), CodecError> {
    if block == 0 && !out.is_empty() {
        return Err(CodecError::corrupt(NAME, "block size 0"));
    }
    for (i, part) in out.chunks_mut(block.max(1)).enumerate() {
        let Some((len, rest)) = blocks.split_first_chunk::<4>() else {
            return Err(CodecError::corrupt(
                NAME,
                format!("the chunk ends before block {i}"),
            ));
        };
        let len = u32::from_be_bytes(*len) as usize;
        let Some(stored) = rest.get(..len) else {
            return Err(CodecError::corrupt(
                NAME,
                format!("block {i} of {len} bytes runs past the chunk"),
            ));
        };
        if len == part.len() {
            part.copy_from_slice(stored);
        } else {
            let n = lz4_flex::block::decompress_into(stored, part)
                .map_err(|e| CodecError::corrupt(NAME, format!("block {i}: {e}")))?;
            if n != part.len() {
                return Err(CodecError::corrupt(
                    NAME,
                    format!("block {i} decoded to {n} bytes, expected {}", part.len()),
                ));
            }
        }
        blocks = &rest[len..];
    }
    Ok(())
}

impl BytesToBytesCodec for Hdf5Lz4 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let (total, block, blocks) = header(NAME, &encoded)?;
        let n = usize::try_from(total).map_err(|_| CodecError::TooLarge {
            codec: NAME,
            limit: size.limit(),
        })?;
        size.check(NAME, n)?;
        let mut out = vec![0; n];
        decode_blocks(blocks, block, &mut out)?;
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        Some(header(NAME, encoded).and_then(|(total, block, blocks)| {
            let n = usize::try_from(total).unwrap_or(usize::MAX);
            DecodedSize::Exact(out.len()).check(NAME, n)?;
            decode_blocks(blocks, block, out)
        }))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// HDF5 LZ4 framing around `data` cut into `block`-byte blocks, each
    /// compressed by `lz4_flex` or stored raw when that is no smaller, as
    /// `H5Zlz4.c` writes (its output is in the fixtures; this is for
    /// damaging).
    pub(crate) fn frame(data: &[u8], block: usize) -> Vec<u8> {
        let mut v = (data.len() as u64).to_be_bytes().to_vec();
        v.extend((block as u32).to_be_bytes());
        for part in data.chunks(block) {
            let c = lz4_flex::block::compress(part);
            let stored = if c.len() >= part.len() { part } else { &c };
            v.extend((stored.len() as u32).to_be_bytes());
            v.extend(stored);
        }
        v
    }

    fn sample() -> Vec<u8> {
        let mut data: Vec<u8> = (0..3000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
        // A last block of noise, stored raw.
        data.extend((0..100u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8));
        data
    }

    #[test]
    fn decodes_compressed_and_raw_blocks() {
        let data = sample();
        let enc = frame(&data, 4096);
        assert_eq!(
            Hdf5Lz4
                .decode(enc.clone(), DecodedSize::Exact(data.len()))
                .unwrap(),
            data
        );
        let mut out = vec![0; data.len()];
        Hdf5Lz4.decode_into(&enc, &mut out).unwrap().unwrap();
        assert_eq!(out, data);
        // One block larger than the chunk.
        let enc = frame(&data, 1 << 30);
        assert_eq!(
            Hdf5Lz4.decode(enc, DecodedSize::Exact(data.len())).unwrap(),
            data
        );
    }

    #[test]
    fn sizes_are_checked_before_allocating() {
        let data = sample();
        let mut enc = frame(&data, 4096);
        assert!(matches!(
            Hdf5Lz4.decode(enc.clone(), DecodedSize::Exact(data.len() - 1)),
            Err(CodecError::WrongSize { .. })
        ));
        enc[..8].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(Hdf5Lz4.decode(enc, DecodedSize::Exact(data.len())).is_err());
    }

    #[test]
    fn corrupt_chunks_are_errors() {
        let data = sample();
        let enc = frame(&data, 4096);
        let n = data.len();
        for cut in [0, 5, 12, 15, 20, enc.len() - 1] {
            let e = Hdf5Lz4.decode(enc[..cut].to_vec(), DecodedSize::Exact(n));
            assert!(matches!(e, Err(CodecError::Corrupt { .. })), "{cut}: {e:?}");
        }
        let mut zero = enc.clone();
        zero[8..12].copy_from_slice(&0u32.to_be_bytes());
        assert!(Hdf5Lz4.decode(zero, DecodedSize::Exact(n)).is_err());
        // Flipped bytes: an error or some output of the right size.
        for i in 12..enc.len().min(200) {
            let mut bad = enc.clone();
            bad[i] ^= 0x5a;
            if let Ok(v) = Hdf5Lz4.decode(bad, DecodedSize::Exact(n)) {
                assert_eq!(v.len(), n);
            }
        }
    }
}
