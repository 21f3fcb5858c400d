//! HDF5 filter 32000: h5py's LZF.
//!
//! h5py ships this filter (`lzf/lzf_filter.c`, with Marc Lehmann's liblzf
//! 3.x) and writes it for `compression="lzf"`. A chunk is one raw LZF
//! stream with no header; the parameters are `[filter revision, liblzf
//! version, chunk bytes]`, the last only a hint for the output buffer.
//! h5py registers the filter as optional: a chunk that LZF would not make
//! smaller is stored as it is, with the filter's bit set in the chunk's
//! filter mask (the HDF5 reader skips it, and so does ours).
//!
//! The stream is a sequence of runs, each led by a control byte `c`:
//!
//! - `c < 32`: `c + 1` literal bytes follow;
//! - otherwise a back reference: length `c >> 5` (7 means "7 plus the
//!   next byte"), plus 2; distance `((c & 31) << 8 | next byte) + 1`
//!   back from the end of the output, the copy may overlap itself.
//!
//! Decoding stops at the output limit (the chunk's size) with an error,
//! and a reference before the start of the output or a run past the end
//! of the input is corrupt, as in liblzf's `lzf_decompress` (`E2BIG`,
//! `EINVAL`). The only crate, `lzf`, is deprecated by its author; the
//! decoder is twenty lines.

use super::entry::Hdf5OnlyFilter;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "lzf";

/// HDF5 filter 32000.
pub const HDF5: Hdf5OnlyFilter = Hdf5OnlyFilter {
    id: 32000,
    name: NAME,
    build: |_| Ok(Box::new(Lzf)),
};

/// The LZF decoder (no parameters matter to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lzf;

/// Decode one LZF stream, producing at most `limit` bytes.
pub fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve_exact(limit)
        .map_err(|_| CodecError::TooLarge { codec: NAME, limit })?;
    let too_large = || CodecError::TooLarge { codec: NAME, limit };
    let truncated = || CodecError::corrupt(NAME, "stream ends inside a run");
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let run = input.get(i..i + n).ok_or_else(truncated)?;
            if out.len() + n > limit {
                return Err(too_large());
            }
            out.extend_from_slice(run);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i).ok_or_else(truncated)? as usize;
                i += 1;
            }
            len += 2;
            let low = *input.get(i).ok_or_else(truncated)? as usize;
            i += 1;
            let distance = ((ctrl & 0x1f) << 8 | low) + 1;
            if distance > out.len() {
                return Err(CodecError::corrupt(
                    NAME,
                    format!(
                        "back reference {distance} bytes back with {} decoded",
                        out.len()
                    ),
                ));
            }
            if out.len() + len > limit {
                return Err(too_large());
            }
            let from = out.len() - distance;
            if distance >= len {
                out.extend_from_within(from..from + len);
            } else {
                // Overlapping: each byte may be one this copy wrote.
                for k in 0..len {
                    out.push(out[from + k]);
                }
            }
        }
    }
    Ok(out)
}

impl BytesToBytesCodec for Lzf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let out = decompress(&encoded, size.limit())?;
        size.check(NAME, out.len())?;
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        // The output must be searchable backwards, so decode into a
        // vector of the exact size and copy: LZF chunks are small.
        Some(decompress(encoded, out.len()).and_then(|v| {
            DecodedSize::Exact(out.len()).check(NAME, v.len())?;
            out.copy_from_slice(&v);
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "abcabcabcabc" + "xyz": three literals, a back reference of 9 bytes
    /// at distance 3 (overlapping), three literals. Written by hand from
    /// liblzf's format; the fixtures hold h5py-written chunks.
    const STREAM: &[u8] = &[2, b'a', b'b', b'c', 7 << 5, 0, 2, 2, b'x', b'y', b'z'];

    #[test]
    fn decodes_literals_and_overlapping_references() {
        let out = decompress(STREAM, 100).unwrap();
        assert_eq!(out, b"abcabcabcabcxyz");
        let got = Lzf.decode(STREAM.to_vec(), DecodedSize::Exact(15)).unwrap();
        assert_eq!(got, b"abcabcabcabcxyz");
        let mut buf = [0u8; 15];
        Lzf.decode_into(STREAM, &mut buf).unwrap().unwrap();
        assert_eq!(&buf, b"abcabcabcabcxyz");
        // A short reference (length 3, distance 1): run-length.
        let rle = [0, b'q', 1 << 5, 0];
        assert_eq!(decompress(&rle, 10).unwrap(), b"qqqq");
    }

    #[test]
    fn bounded_and_checked() {
        assert!(matches!(
            decompress(STREAM, 14),
            Err(CodecError::TooLarge { limit: 14, .. })
        ));
        assert!(matches!(
            Lzf.decode(STREAM.to_vec(), DecodedSize::Exact(16)),
            Err(CodecError::WrongSize { .. })
        ));
        let mut small = [0u8; 10];
        assert!(Lzf.decode_into(STREAM, &mut small).unwrap().is_err());
    }

    #[test]
    fn corrupt_streams_are_errors() {
        // A reference before the start.
        assert!(matches!(
            decompress(&[1 << 5, 0], 10),
            Err(CodecError::Corrupt { .. })
        ));
        // Cut literals, a cut reference, a missing long-length byte.
        for bad in [&[5u8, 1, 2][..], &[0, 1, 1 << 5], &[0, 1, 7 << 5]] {
            assert!(
                matches!(decompress(bad, 100), Err(CodecError::Corrupt { .. })),
                "{bad:?}"
            );
        }
        // Every truncation of a valid stream: an error or a shorter output,
        // never a panic.
        for n in 0..STREAM.len() {
            let _ = decompress(&STREAM[..n], 100);
        }
        assert_eq!(decompress(&[], 10).unwrap(), b"");
    }
}
