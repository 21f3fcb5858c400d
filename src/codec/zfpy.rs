//! numcodecs `zfpy`: arrays compressed by LLNL's zfp, with zfp's header.
//!
//! numcodecs `ZFPY` (`numcodecs/zfpy.py`) hands the chunk, as a C-order
//! array, to `zfpy.compress_numpy(..., write_header=True)`: one zfp stream
//! ([format](https://zfp.readthedocs.io/en/release1.0.0/)) whose header
//! gives the element type, the dimensions and the mode, then the 4^d-value
//! blocks in zfp's order. zarr-python 3 writes it into Zarr v3 metadata as
//! the array→bytes codec `numcodecs.zfpy`:
//!
//! ```json
//! {"id": "zfpy", "mode": 4, "tolerance": 0.001, "rate": -1.0, "precision": -1}
//! {"name": "numcodecs.zfpy", "configuration": {"mode": 2, "rate": 12.0, ...}}
//! ```
//!
//! Modes (numcodecs' `mode` numbers are zfpy's): 2 fixed rate, 3 fixed
//! precision, 4 fixed accuracy, and reversible (lossless; what zfpy writes
//! with no parameter). The configuration only steers the writer: the
//! stream's header says how to decode, so decoding reads the header and
//! nothing else. Lossy modes decode to what zfp decodes, which is what
//! zarr-python returns.
//!
//! zfp keeps the array's type (f32, f64, i32, i64) and shape (1 to 4
//! dimensions), so this is an array→bytes codec in place of `bytes`, in
//! Zarr v2 too, where it is the `compressor` (see [`super::v2_chain`];
//! numcodecs refuses F-order arrays, and so does the chain). Like
//! zarr-python, which reshapes what zfpy returns, the header's dimensions
//! must hold exactly the chunk's element count; its type must be the
//! array's (zarr-python would reinterpret the bits; this refuses).
//!
//! # The C library, and bounds
//!
//! Decoding is zfp 1.0's own C code, built by the optional `zfp-sys-cc`
//! crate (cargo feature `zfp`): the crate compiles zfp's sources with
//! `cc`, but generates its bindings with bindgen, which needs libclang at
//! build time (Debian: `libclang-dev`). Without the feature this codec is
//! registered all the same and every array using it fails to open with a
//! configuration error that says so.
//!
//! zfp's bit reader does no bounds checking: it reads whole 64-bit words
//! wherever the stream's contents lead it. So before zfp sees a stream,
//! the header is read from a padded copy of its first bytes, and the most
//! bits the blocks can consume is computed from it: per block, at most
//! `intprec * (3 * 4^d + 1)` bits of bit planes (each plane reads at most
//! its `4^d` value bits and two group-test bits per value, plus one; see
//! `decode_ints` in zfp's `src/template/decode.c`) plus a few header bits,
//! or the mode's `minbits` if larger (fixed rate). A stream shorter than
//! its `minbits` allow is corrupt; otherwise zfp decodes from a
//! word-aligned copy zero-padded to that bound, so no read can leave it,
//! and a stream whose blocks went on into the padding (zfp tells how many
//! words it read) is corrupt too: zfpy itself would have read past its
//! buffer.
//! The padding is at most about four times the chunk's decoded size. The
//! output buffer is exactly the chunk, whose count the header must match
//! before anything is allocated for it.

use serde_json::Value;

use super::registry::{CodecEntry, Numcodecs};
use super::{ArrayToBytesCodec, ChunkRepr, CodecError};
use crate::dtype::DataType;

pub const NAME: &str = "zfpy";

/// numcodecs `zfpy`; v3 `numcodecs.zfpy` (array→bytes in both).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Array(|c| Ok(Box::new(Zfpy::from_v2(c)?))))),
    v3: None,
    hdf5: None,
};

/// Whether this build can decode zfp streams (cargo feature `zfp`).
pub const AVAILABLE: bool = cfg!(feature = "zfp");

#[derive(Debug, Clone, PartialEq)]
pub struct Zfpy {
    mode: Option<i64>,
}

impl Zfpy {
    /// From the numcodecs object `{"id": "zfpy", "mode": m, ...}`: the
    /// keys are the writer's, `mode` only checked to be zfpy's 1 to 5 if
    /// given. Without the `zfp` feature, a configuration error.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let object = config
            .as_object()
            .ok_or_else(|| CodecError::config(NAME, format!("expected an object: {config}")))?;
        let mode = match object.get("mode") {
            None | Some(Value::Null) => None,
            Some(m) => match m.as_i64() {
                Some(m @ 1..=5) => Some(m),
                _ => {
                    return Err(CodecError::config(
                        NAME,
                        format!("\"mode\" {m} is not a zfp mode (1 to 5)"),
                    ));
                }
            },
        };
        if !AVAILABLE {
            return Err(CodecError::config(
                NAME,
                "this slabfs was built without zfp (cargo feature \"zfp\", which needs libclang to build)",
            ));
        }
        Ok(Zfpy { mode })
    }

    /// The writer's mode, if the metadata gave one.
    pub fn mode(&self) -> Option<i64> {
        self.mode
    }
}

impl ArrayToBytesCodec for Zfpy {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded: &ChunkRepr) -> Option<usize> {
        None
    }

    fn validate(&self, decoded: &ChunkRepr) -> Result<(), CodecError> {
        if !matches!(
            decoded.dtype,
            DataType::Float32 | DataType::Float64 | DataType::Int32 | DataType::Int64
        ) {
            return Err(CodecError::config(
                NAME,
                format!(
                    "zfp has no type for {:?} (it has f32, f64, i32, i64)",
                    decoded.dtype
                ),
            ));
        }
        if !(1..=4).contains(&decoded.shape.len()) {
            return Err(CodecError::config(
                NAME,
                format!(
                    "zfp arrays have 1 to 4 dimensions, not {}",
                    decoded.shape.len()
                ),
            ));
        }
        Ok(())
    }

    fn decode(&self, encoded: Vec<u8>, decoded: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        self.validate(decoded)?;
        let n = decoded
            .num_elements()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| CodecError::Chain("chunk too large".into()))?;
        #[cfg(feature = "zfp")]
        {
            ffi::decode(&encoded, &decoded.dtype, n)
        }
        #[cfg(not(feature = "zfp"))]
        {
            let _ = (encoded, n);
            Err(CodecError::config(NAME, "built without zfp"))
        }
    }
}

/// The most bits zfp can read for one block of `4^dims` values of
/// `intprec`-bit integers, whatever the stream says: every bit plane
/// reads at most its value bits and two group-test bits per value, plus
/// one; a block starts with at most 2 flag bits, an 11-bit exponent and a
/// 6-bit precision (reversible mode), rounded up to 64.
pub fn max_block_bits(dims: u32, intprec: u64) -> u64 {
    let size = 4u64.pow(dims);
    64 + intprec * (3 * size + 1)
}

#[cfg(feature = "zfp")]
mod ffi {
    use std::marker::PhantomData;
    use std::os::raw::{c_int, c_uint, c_void};

    use zfp_sys_cc as z;

    use super::{NAME, max_block_bits};
    use crate::codec::CodecError;
    use crate::dtype::DataType;

    /// zfp's header is at most this many bits (`ZFP_HEADER_MAX_BITS`).
    const HEADER_MAX_BITS: usize = 148;

    /// What the header says.
    struct Header {
        /// Bits the header took.
        bits: u64,
        ztype: z::zfp_type,
        /// nx, ny, nz, nw (unused ones 0).
        dims: [usize; 4],
        ndims: u32,
        count: usize,
        minbits: u64,
    }

    /// A bit stream, zfp stream and field over the words it borrows,
    /// freed on drop.
    struct Stream<'a> {
        bits: *mut z::bitstream,
        zfp: *mut z::zfp_stream,
        field: *mut z::zfp_field,
        _words: PhantomData<&'a mut [u64]>,
    }

    impl<'a> Stream<'a> {
        /// Open zfp over `words`, which must hold every bit zfp will read
        /// (the borrow keeps them alive and unmoved while the stream is).
        fn open(words: &'a mut [u64]) -> Result<Stream<'a>, CodecError> {
            // SAFETY: `words` is a live, writable, 8-byte aligned buffer of
            // exactly this many bytes; the stream only points into it and
            // the caller keeps it alive (and unmoved) while the stream is.
            let bits =
                unsafe { z::stream_open(words.as_mut_ptr().cast::<c_void>(), words.len() * 8) };
            let zfp = if bits.is_null() {
                std::ptr::null_mut()
            } else {
                // SAFETY: `bits` is a bit stream zfp just made; the zfp
                // stream only stores it.
                unsafe { z::zfp_stream_open(bits) }
            };
            // SAFETY: allocation only.
            let field = unsafe { z::zfp_field_alloc() };
            let s = Stream {
                bits,
                zfp,
                field,
                _words: PhantomData,
            };
            if s.bits.is_null() || s.zfp.is_null() || s.field.is_null() {
                return Err(CodecError::corrupt(
                    NAME,
                    "zfp could not allocate its stream",
                ));
            }
            Ok(s)
        }

        fn read_header(&self) -> Result<Header, CodecError> {
            // SAFETY: the stream and field are valid (open checked them);
            // the header is at most HEADER_MAX_BITS bits, and every buffer
            // this is called on holds at least that plus a word.
            let bits = unsafe { z::zfp_read_header(self.zfp, self.field, z::ZFP_HEADER_FULL) };
            if bits == 0 {
                return Err(CodecError::corrupt(NAME, "no valid zfp header"));
            }
            let mut size = [0usize; 4];
            // SAFETY: valid field; `size` has room for the 4 dimensions
            // zfp_field_size writes at most.
            let (ztype, ndims, count) = unsafe {
                (
                    z::zfp_field_type(self.field),
                    z::zfp_field_dimensionality(self.field),
                    z::zfp_field_size(self.field, size.as_mut_ptr()),
                )
            };
            let (mut minbits, mut maxbits, mut maxprec, mut minexp): (
                c_uint,
                c_uint,
                c_uint,
                c_int,
            ) = (0, 0, 0, 0);
            // SAFETY: valid stream; four out-parameters of the right types.
            unsafe {
                z::zfp_stream_params(
                    self.zfp,
                    &mut minbits,
                    &mut maxbits,
                    &mut maxprec,
                    &mut minexp,
                )
            };
            Ok(Header {
                bits: bits as u64,
                ztype,
                dims: size,
                ndims,
                count,
                minbits: minbits.into(),
            })
        }
    }

    impl Drop for Stream<'_> {
        fn drop(&mut self) {
            // SAFETY: each pointer came from its zfp constructor (or is
            // null, which is skipped) and is freed once, here.
            unsafe {
                if !self.field.is_null() {
                    z::zfp_field_free(self.field);
                }
                if !self.zfp.is_null() {
                    z::zfp_stream_close(self.zfp);
                }
                if !self.bits.is_null() {
                    z::stream_close(self.bits);
                }
            }
        }
    }

    /// `bytes` as native 64-bit words (zfp's stream words), zero-padded to
    /// `len_words`.
    fn words(bytes: &[u8], len_words: usize) -> Vec<u64> {
        let mut w = vec![0u64; len_words.max(bytes.len().div_ceil(8))];
        for (word, chunk) in w.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_ne_bytes(b);
        }
        w
    }

    /// Decode a zfp stream with a full header into `n` elements of
    /// `dtype`, native order.
    pub(super) fn decode(
        encoded: &[u8],
        dtype: &DataType,
        n: usize,
    ) -> Result<Vec<u8>, CodecError> {
        // The header, from a copy padded to a header and a word.
        let head = {
            let mut w = words(
                &encoded[..encoded.len().min(64)],
                HEADER_MAX_BITS.div_ceil(64) + 2,
            );
            Stream::open(&mut w)?.read_header()?
        };
        let (want_type, intprec, size) = match dtype {
            DataType::Int32 => (z::zfp_type_zfp_type_int32, 32, 4),
            DataType::Int64 => (z::zfp_type_zfp_type_int64, 64, 8),
            DataType::Float32 => (z::zfp_type_zfp_type_float, 32, 4),
            DataType::Float64 => (z::zfp_type_zfp_type_double, 64, 8),
            other => {
                return Err(CodecError::config(
                    NAME,
                    format!("no zfp type for {other:?}"),
                ));
            }
        };
        if head.ztype != want_type {
            return Err(CodecError::corrupt(
                NAME,
                format!(
                    "stream holds zfp type {}, the array is {dtype:?}",
                    head.ztype
                ),
            ));
        }
        if !(1..=4).contains(&head.ndims) || head.count != n {
            return Err(CodecError::corrupt(
                NAME,
                format!(
                    "stream holds a {}-dimensional array of {:?} ({} values), the chunk has {n}",
                    head.ndims,
                    &head.dims[..(head.ndims as usize).min(4)],
                    head.count
                ),
            ));
        }
        // The most bits zfp may read: see the module doc.
        let blocks: u128 = head.dims[..head.ndims as usize]
            .iter()
            .map(|&d| (d as u128).div_ceil(4))
            .product();
        let natural = u128::from(max_block_bits(head.ndims, intprec));
        let minbits = u128::from(head.minbits);
        let available = encoded.len() as u128 * 8;
        // zfp writes at least minbits per block (fixed rate: exactly).
        if u128::from(head.bits) + blocks * minbits > available {
            return Err(CodecError::corrupt(
                NAME,
                format!(
                    "{} bytes cannot hold {blocks} blocks of at least {minbits} bits",
                    encoded.len()
                ),
            ));
        }
        let bound_bits = u128::from(head.bits) + blocks * natural.max(minbits);
        // One word of slack: zfp reads the word under its position ahead.
        let bound_words = usize::try_from(bound_bits.div_ceil(64) + 1)
            .ok()
            .filter(|&w| w.checked_mul(8).is_some())
            .ok_or(CodecError::TooLarge {
                codec: NAME,
                limit: n * size,
            })?;
        let mut stream_words = words(encoded, bound_words);
        let stream = Stream::open(&mut stream_words)?;
        stream.read_header()?;
        // Aligned for every element type.
        let mut out = vec![0u64; (n * size).div_ceil(8)];
        // SAFETY: the field's type and dimensions were checked above: it
        // describes `n` contiguous elements of `size` bytes, and `out`
        // holds at least n * size bytes, 8-byte aligned. Every bit zfp can
        // read lies inside `stream_words` (bound above), which outlives
        // the stream.
        let consumed = unsafe {
            z::zfp_field_set_pointer(stream.field, out.as_mut_ptr().cast::<c_void>());
            z::zfp_decompress(stream.zfp, stream.field)
        };
        drop(stream);
        if consumed == 0 {
            return Err(CodecError::corrupt(NAME, "zfp failed to decompress"));
        }
        // zfp reports the whole words it read; a stream that ends before
        // its blocks do had zfp read the zero padding.
        if consumed > encoded.len().next_multiple_of(8) {
            return Err(CodecError::corrupt(
                NAME,
                format!(
                    "{} bytes end before the blocks do ({consumed} bytes read)",
                    encoded.len()
                ),
            ));
        }
        let mut bytes: Vec<u8> = out.iter().flat_map(|w| w.to_ne_bytes()).collect();
        bytes.truncate(n * size);
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configuration_is_checked_and_features_named() {
        for bad in [
            json!({"id": "zfpy", "mode": 9}),
            json!({"id": "zfpy", "mode": "x"}),
            json!(3),
        ] {
            assert!(
                matches!(Zfpy::from_v2(&bad), Err(CodecError::Config { .. })),
                "{bad}"
            );
        }
        let r = Zfpy::from_v2(&json!({"id": "zfpy", "mode": 4, "tolerance": 0.5}));
        if AVAILABLE {
            assert_eq!(r.unwrap().mode(), Some(4));
        } else {
            let e = r.unwrap_err();
            assert!(e.to_string().contains("feature \"zfp\""), "{e}");
        }
    }

    #[test]
    fn block_bound_covers_the_largest_block() {
        // zfp's own ZFP_MAX_BITS (16658) bounds a 4-D block of doubles in
        // its non-reversible modes; the bound here must not be smaller.
        assert!(max_block_bits(4, 64) >= 16658);
        assert_eq!(max_block_bits(1, 32), 64 + 32 * 13);
    }

    #[cfg(feature = "zfp")]
    #[test]
    fn validate_refuses_what_zfp_cannot_hold() {
        let z = Zfpy::from_v2(&json!({"id": "zfpy"})).unwrap();
        let r = |dtype: DataType, shape: &[u64]| ChunkRepr {
            shape: shape.to_vec(),
            fill: vec![0; dtype.size()],
            dtype,
        };
        assert!(z.validate(&r(DataType::Float32, &[4, 4])).is_ok());
        assert!(z.validate(&r(DataType::Int16, &[4, 4])).is_err());
        assert!(z.validate(&r(DataType::Float64, &[2, 2, 2, 2, 2])).is_err());
        assert!(z.validate(&r(DataType::Float64, &[])).is_err());
    }

    #[cfg(feature = "zfp")]
    #[test]
    fn garbage_is_an_error_not_a_crash() {
        let z = Zfpy::from_v2(&json!({"id": "zfpy"})).unwrap();
        let repr = ChunkRepr {
            shape: vec![7, 9],
            dtype: DataType::Float64,
            fill: vec![0; 8],
        };
        assert!(z.decode(Vec::new(), &repr).is_err());
        assert!(z.decode(b"zfp".to_vec(), &repr).is_err());
        assert!(z.decode(vec![0xff; 100], &repr).is_err());
    }
}
