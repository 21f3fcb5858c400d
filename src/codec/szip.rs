//! HDF5 filter 4: szip, that is CCSDS 121.0-B adaptive entropy coding
//! (Rice coding with a predictor) as HDF5 writes it with libaec's `szlib`
//! compatibility layer.
//!
//! Parameters after the library's `set_local` (`H5Zszip.c`): `[options
//! mask, pixels per block, bits per pixel, pixels per scanline]`. The
//! options are szlib's: `SZ_MSB_OPTION_MASK` (16, big-endian samples),
//! `SZ_NN_OPTION_MASK` (32, the nearest-neighbour predictor; its absence
//! is entropy coding, `SZ_EC_OPTION_MASK`), and the ones the decoder does
//! not need (`ALLOW_K13` 1, `LSB` 8, `RAW` 128). A chunk is a 4-byte
//! little-endian decoded size, then the AEC stream.
//!
//! libaec's `SZ_BufftoBuffDecompress` (`src/sz_compat.c`), which this
//! follows step by step:
//!
//! - AEC block size = pixels per block; reference sample interval =
//!   ⌈pixels per scanline / pixels per block⌉ blocks; flags: MSB →
//!   `AEC_DATA_MSB`, NN → `AEC_DATA_PREPROCESS`;
//! - 32- and 64-bit pixels are coded as 8-bit samples in byte planes
//!   (all first bytes, then all second bytes...), interleaved back after;
//!   other widths are samples of 1, 2 or 4 bytes;
//! - when a scanline is not a whole number of blocks, every scanline was
//!   padded to whole blocks before coding, and the padding is dropped.
//!
//! The AEC decoder is `rust-aec` (pure Rust, MIT; written to match libaec
//! byte for byte), **vendored** in `vendor/rust-aec` with one change:
//! rust-aec 0.1.1 refuses every block size but the CCSDS standard's 8, 16,
//! 32 and 64 (all GRIB2, its purpose, uses), while HDF5 lets a writer
//! choose any even pixels per block up to 32 and libaec writes them
//! (`sz_compat.c` sets `AEC_NOT_ENFORCE`; libaec's decoder never checks
//! the block size). Nothing else in rust-aec depends on the block size
//! being standard, so the vendored copy takes every even size up to 64
//! (`vendor/rust-aec/VENDORED.md`), checked against chunks h5py (HDF5
//! 2.0) and h5repack (HDF5 1.10.8) wrote through libaec for every even
//! block size from 2 to 32 with both codings, every bit width HDF5
//! writes (1 to 24, 32 and 64) and both byte orders
//! (`tests/it/hdf5/codec.rs`). Vendoring the fix beat the
//! alternatives: libaec's own crate (`libaec-sys`) needs CMake and
//! bindgen's libclang to build, which the default build must not; we
//! found no other pure-Rust AEC decoder; and a decoder of our own would
//! redo rust-aec's 1,400 lines to change one. rust-aec is young (one
//! author, December 2025) but small, safe Rust and checked here against
//! HDF5's own output and damaged input; its one-shot decoder prints a
//! debugging trace to stderr when `RUST_AEC_TRACE_SAMPLE` is set in the
//! environment (slabfs never sets it). RAW (128, no szip header) is what
//! every HDF5 writer sets and what libaec always does; the other option
//! bits are ignored, as libaec ignores them.
//!
//! Bounds: the stated size must be the chunk's before anything is
//! allocated; HDF5 never writes a scanline shorter than a block (its
//! `set_local` refuses), so the padded buffer is under twice the chunk,
//! and parameters that would make it larger are refused.

use super::entry::{Hdf5OnlyFilter, hdf5_param};
use super::{BytesToBytesCodec, CodecError, DecodedSize};
use rust_aec::{AecFlags, AecParams};

const NAME: &str = "szip";

/// HDF5 filter 4.
pub const HDF5: Hdf5OnlyFilter = Hdf5OnlyFilter {
    id: 4,
    name: NAME,
    build: |p| Ok(Box::new(Szip::from_hdf5(p)?)),
};

const MSB_OPTION_MASK: u32 = 16;
const NN_OPTION_MASK: u32 = 32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Szip {
    options: u32,
    pixels_per_block: u32,
    bits_per_pixel: u32,
    pixels_per_scanline: u32,
}

impl Szip {
    /// From the HDF5 parameters.
    pub fn from_hdf5(p: &[u32]) -> Result<Self, CodecError> {
        let s = Szip {
            options: hdf5_param(NAME, p, 0)?,
            pixels_per_block: hdf5_param(NAME, p, 1)?,
            bits_per_pixel: hdf5_param(NAME, p, 2)?,
            pixels_per_scanline: hdf5_param(NAME, p, 3)?,
        };
        let bad = |d: String| Err(CodecError::config(NAME, d));
        // szlib's limits: even block sizes up to 32, 1..=32 or 64 bits.
        if !(2..=32).contains(&s.pixels_per_block) || !s.pixels_per_block.is_multiple_of(2) {
            return bad(format!("{} pixels per block", s.pixels_per_block));
        }
        if !matches!(s.bits_per_pixel, 1..=32 | 64) {
            return bad(format!("{} bits per pixel", s.bits_per_pixel));
        }
        if s.pixels_per_scanline < s.pixels_per_block || s.pixels_per_scanline > 128 * 32 {
            return bad(format!(
                "{} pixels per scanline with {} per block",
                s.pixels_per_scanline, s.pixels_per_block
            ));
        }
        Ok(s)
    }

    /// Decode the AEC stream into all of `out` (the stated size).
    fn decode_to(&self, stream: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
        let planes = matches!(self.bits_per_pixel, 32 | 64);
        let bits = if planes { 8 } else { self.bits_per_pixel };
        let pixel = match bits {
            17.. => 4,
            9..=16 => 2,
            _ => 1,
        };
        let ppb = self.pixels_per_block as usize;
        let ppsl = self.pixels_per_scanline as usize;
        let rsi = ppsl.div_ceil(ppb);
        let mut flags = AecFlags::empty();
        if self.options & MSB_OPTION_MASK != 0 {
            flags |= AecFlags::MSB;
        }
        if self.options & NN_OPTION_MASK != 0 {
            flags |= AecFlags::DATA_PREPROCESS;
        }
        let params = AecParams::new(bits as u8, ppb as u32, rsi as u32, flags);
        let corrupt = |e: rust_aec::AecError| CodecError::corrupt(NAME, e.to_string());
        let padded = rsi * ppb != ppsl;
        if !padded && !planes {
            if !out.len().is_multiple_of(pixel) {
                return Err(CodecError::corrupt(NAME, "size is not whole pixels"));
            }
            return rust_aec::decode_into(stream, params, out.len() / pixel, out).map_err(corrupt);
        }
        let mut buf = if padded {
            let scanlines = (out.len() / pixel).div_ceil(ppsl);
            let samples = rsi * ppb * scanlines;
            let mut buf = rust_aec::decode(stream, params, samples).map_err(corrupt)?;
            // Drop each scanline's padding.
            let line = ppsl * pixel;
            let padded_line = rsi * ppb * pixel;
            let mut i = line;
            let mut j = padded_line;
            while j < buf.len() {
                buf.copy_within(j..j + line, i);
                i += line;
                j += padded_line;
            }
            buf.truncate(out.len());
            buf
        } else {
            if !out.len().is_multiple_of(pixel) {
                return Err(CodecError::corrupt(NAME, "size is not whole pixels"));
            }
            rust_aec::decode(stream, params, out.len() / pixel).map_err(corrupt)?
        };
        if buf.len() < out.len() {
            return Err(CodecError::corrupt(NAME, "stream decodes short"));
        }
        if planes {
            let w = (self.bits_per_pixel / 8) as usize;
            let n = out.len() / w;
            for i in 0..n {
                for j in 0..w {
                    out[i * w + j] = buf[j * n + i];
                }
            }
            // A partial last pixel (not written by HDF5) stays as decoded.
            let (whole, len) = (n * w, out.len());
            out[whole..].copy_from_slice(&buf[whole..len]);
        } else {
            buf.truncate(out.len());
            out.copy_from_slice(&buf);
        }
        Ok(())
    }
}

/// The stated size and the stream after it.
fn header(encoded: &[u8]) -> Result<(usize, &[u8]), CodecError> {
    let Some((size, stream)) = encoded.split_first_chunk::<4>() else {
        return Err(CodecError::corrupt(
            NAME,
            format!("{} bytes cannot hold the 4-byte size", encoded.len()),
        ));
    };
    Ok((u32::from_le_bytes(*size) as usize, stream))
}

impl BytesToBytesCodec for Szip {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let (n, stream) = header(&encoded)?;
        size.check(NAME, n)?;
        let mut out = vec![0; n];
        self.decode_to(stream, &mut out)?;
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        Some(header(encoded).and_then(|(n, stream)| {
            DecodedSize::Exact(out.len()).check(NAME, n)?;
            self.decode_to(stream, out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters() {
        assert!(Szip::from_hdf5(&[169, 8, 32, 30]).is_ok());
        assert!(Szip::from_hdf5(&[169, 8, 64, 600]).is_ok());
        for bad in [
            &[169, 8, 32][..],
            &[169, 7, 32, 30],
            &[169, 64, 32, 64],
            &[169, 8, 33, 30],
            &[169, 8, 0, 30],
            &[169, 8, 32, 4],
        ] {
            assert!(Szip::from_hdf5(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sizes_are_checked_first() {
        let c = Szip::from_hdf5(&[169, 8, 16, 32]).unwrap();
        let mut enc = 1_000_000_000u32.to_le_bytes().to_vec();
        enc.extend([0; 16]);
        assert!(matches!(
            c.decode(enc, DecodedSize::Exact(64)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(c.decode(vec![1, 2], DecodedSize::Exact(64)).is_err());
    }

    #[test]
    fn garbage_is_an_error_or_the_right_size() {
        // Every parameter shape (padded, byte planes, plain), streams of
        // pseudo-random bytes and cut streams: never a panic.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for p in [
            [169, 8, 32, 30],
            [141, 32, 16, 600],
            [169, 16, 8, 100],
            [169, 32, 64, 600],
            [153, 8, 12, 64],
            // Block sizes other than the standard's (libaec's
            // AEC_NOT_ENFORCE), with and without padding.
            [169, 2, 16, 30],
            [141, 4, 1, 32],
            [177, 6, 3, 30],
            [141, 14, 24, 30],
            [169, 30, 64, 30],
        ] {
            let c = Szip::from_hdf5(&p).unwrap();
            for len in [0, 1, 5, 40, 300] {
                let mut enc = 480u32.to_le_bytes().to_vec();
                for _ in 0..len {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    enc.push(x as u8);
                }
                if let Ok(v) = c.decode(enc, DecodedSize::Exact(480)) {
                    assert_eq!(v.len(), 480);
                }
            }
        }
    }
}
