//! numcodecs `shuffle`: byte shuffle with a fixed element size.
//!
//! ```json
//! {"id": "shuffle", "elementsize": 4}
//! ```
//!
//! Encoding groups byte `j` of every element together: with `n` elements
//! of `s` bytes, `enc[j*n + i] = dec[i*s + j]` (numcodecs `_doShuffle`).
//! numcodecs refuses a buffer that is not a whole number of elements
//! ("Shuffle buffer is not an integer multiple of elementsize", unlike
//! Blosc, which copies such a tail unshuffled), so such a buffer is corrupt
//! here too. An element size of 0 or 1 is the identity (numcodecs copies).
//! The default element size, as in numcodecs, is 4.
//!
//! HDF5's own shuffle filter is more lenient: it shuffles the whole
//! elements and copies a tail of fewer than `elementsize` bytes as it is
//! (`H5Z__filter_shuffle`), which happens when a filter that changes the
//! size runs before it (netCDF-4 puts fletcher32 first, so the shuffled
//! buffer is the chunk plus its 4-byte checksum). [`Shuffle::hdf5`] is that
//! variant; the HDF5 reader builds it for filter id 2.

use serde_json::Value;

use super::entry::{CodecEntry, Hdf5Filter, Numcodecs, json_param};
use super::numeric::config_int;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "shuffle";

/// numcodecs' default element size.
const DEFAULT_ELEMENTSIZE: u32 = 4;

/// numcodecs `shuffle`, and HDF5's shuffle filter (2), which stores the
/// element size as `cd_values[0]` (netcdf-c `NCZ_shuffle_codec`: no
/// parameter reads as element size 0, a copy). zarr-python's v3
/// `numcodecs.shuffle` is a bytes→bytes codec too.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Bytes(|c| Ok(Box::new(Shuffle::from_v2(c)?))),
    )),
    v3: None,
    hdf5: Some(Hdf5Filter {
        id: 2,
        to_json: |p| {
            Ok(serde_json::json!({"id": NAME, "elementsize": p.first().copied().unwrap_or(0)}))
        },
        to_params: |c| {
            Ok(vec![json_param(
                NAME,
                c,
                "elementsize",
                Some(DEFAULT_ELEMENTSIZE),
            )?])
        },
    }),
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shuffle {
    elementsize: usize,
    /// HDF5's rule: a tail that is not a whole element is copied as is.
    copy_tail: bool,
}

impl Shuffle {
    pub fn new(elementsize: usize) -> Self {
        Shuffle {
            elementsize,
            copy_tail: false,
        }
    }

    /// HDF5's shuffle filter: like numcodecs', except that a buffer that
    /// is not a whole number of elements keeps its tail unshuffled.
    pub fn hdf5(elementsize: usize) -> Self {
        Shuffle {
            elementsize,
            copy_tail: true,
        }
    }

    /// The whole-element part of a buffer of `len` bytes, or the error
    /// numcodecs gives for a partial element.
    fn whole(&self, len: usize) -> Result<usize, CodecError> {
        let s = self.elementsize;
        if len.is_multiple_of(s) || self.copy_tail {
            Ok(len - len % s)
        } else {
            Err(CodecError::corrupt(
                NAME,
                format!("{len} bytes is not a whole number of {s}-byte elements"),
            ))
        }
    }

    /// From the numcodecs object `{"id": "shuffle", "elementsize": n}`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let elementsize = match config_int(NAME, config, "elementsize")? {
            None => 4,
            Some(n) if n <= 1 => 1,
            Some(n) => usize::try_from(n).map_err(|_| {
                CodecError::config(NAME, format!("\"elementsize\" {n} is too large"))
            })?,
        };
        Ok(Shuffle::new(elementsize))
    }
}

impl BytesToBytesCodec for Shuffle {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        Some(decoded_size)
    }

    fn is_size_preserving_filter(&self) -> bool {
        true
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        size.check(NAME, encoded.len())?;
        let s = self.elementsize;
        if s <= 1 || encoded.is_empty() {
            return Ok(encoded);
        }
        let whole = self.whole(encoded.len())?;
        let mut out = vec![0u8; encoded.len()];
        unshuffle_into(&encoded[..whole], &mut out[..whole], s, false);
        out[whole..].copy_from_slice(&encoded[whole..]);
        Ok(out)
    }

    /// Unshuffle straight into `out`: how a shuffled, compressed chunk
    /// decodes without a second buffer ([`super::CodecChain::decode_into`]).
    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        self.unshuffle_checked(encoded, out, false)
    }

    /// Unshuffle and swap each element's bytes in one pass, when the swap
    /// unit is the element size (a big-endian float array shuffled as
    /// 4-byte elements, as `slabfs pack` writes them).
    fn decode_into_swapped(
        &self,
        encoded: &[u8],
        out: &mut [u8],
        unit: usize,
    ) -> Option<Result<(), CodecError>> {
        (unit == self.elementsize && unit > 1)
            .then(|| self.unshuffle_checked(encoded, out, true))?
    }
}

impl Shuffle {
    fn unshuffle_checked(
        &self,
        encoded: &[u8],
        out: &mut [u8],
        swap: bool,
    ) -> Option<Result<(), CodecError>> {
        let s = self.elementsize;
        Some(if encoded.len() != out.len() {
            Err(CodecError::WrongSize {
                codec: NAME,
                expected: out.len(),
                actual: encoded.len(),
            })
        } else if s <= 1 || encoded.is_empty() {
            out.copy_from_slice(encoded);
            Ok(())
        } else {
            match self.whole(encoded.len()) {
                // A swapped tail would not be an element: only whole ones.
                Ok(whole) if whole == encoded.len() || !swap => {
                    unshuffle_into(&encoded[..whole], &mut out[..whole], s, swap);
                    out[whole..].copy_from_slice(&encoded[whole..]);
                    Ok(())
                }
                Ok(_) => Err(CodecError::corrupt(
                    NAME,
                    "a partial element cannot be byte-swapped",
                )),
                Err(e) => Err(e),
            }
        })
    }
}

/// `out[i * s + j] = enc[j * n + i]`: element `i`'s byte `j` from stream
/// `j`. With `swap`, each element's bytes come out reversed (stream `j`
/// feeds byte `s - 1 - j`): the unshuffle and the byte swap of a
/// big-endian array in one pass, at no extra cost.
pub(crate) fn unshuffle_into(enc: &[u8], out: &mut [u8], s: usize, swap: bool) {
    debug_assert_eq!(enc.len(), out.len());
    let n = enc.len() / s;
    match s {
        2 => unshuffle::<2>(enc, out, n, swap),
        4 => unshuffle::<4>(enc, out, n, swap),
        8 => unshuffle::<8>(enc, out, n, swap),
        16 => unshuffle::<16>(enc, out, n, swap),
        _ => {
            // Write the output in order, gathering one byte from each of
            // the `s` streams.
            for (i, elem) in out.chunks_exact_mut(s).enumerate() {
                for (j, b) in elem.iter_mut().enumerate() {
                    let stream = if swap { s - 1 - j } else { j };
                    *b = enc[stream * n + i];
                }
            }
        }
    }
}

/// Unshuffle `N`-byte elements: the SIMD interleave for whole blocks of 16
/// elements where there is one, then one pass over the rest of the output,
/// reading the `N` streams side by side.
fn unshuffle<const N: usize>(enc: &[u8], out: &mut [u8], n: usize, swap: bool) {
    let mut streams: [&[u8]; N] = std::array::from_fn(|j| &enc[j * n..(j + 1) * n]);
    if swap {
        streams.reverse();
    }
    let done = interleave::<N>(&streams, &mut out[..n * N]);
    for (i, elem) in out[done * N..n * N].chunks_exact_mut(N).enumerate() {
        for j in 0..N {
            elem[j] = streams[j][done + i];
        }
    }
}

/// Interleave the first multiple of 16 elements of `N` equal-length byte
/// streams into `out` (`out[i * N + j] = streams[j][i]`); returns how many
/// elements it wrote. SSE2 (every x86-64 target but bare-metal ones) for 2, 4 and 8 streams,
/// which is what float, int and double arrays need; 0 elsewhere, and the
/// scalar loop does them all.
fn interleave<const N: usize>(streams: &[&[u8]; N], out: &mut [u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        debug_assert!(streams.iter().all(|s| s.len() == streams[0].len()));
        debug_assert_eq!(out.len(), streams[0].len() * N);
        match N {
            2 => sse2::interleave2([streams[0], streams[1]], out),
            4 => sse2::interleave4([streams[0], streams[1], streams[2], streams[3]], out),
            8 => sse2::interleave8(std::array::from_fn(|j| streams[j]), out),
            _ => 0,
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        let _ = (streams, out);
        0
    }
}

/// Byte interleaving with SSE2 unpack instructions, as Blosc's
/// `shuffle-sse2.c` does: `unpacklo/hi_epi8` pairs bytes of two streams,
/// `_epi16` pairs those pairs, `_epi32` pairs the quads. Every load and
/// store goes through `chunks_exact` pieces of exactly 16 bytes, so the
/// bounds are the iterators'.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    // The register operations need `unsafe` here too: a caller may call
    // them safely only if it is itself `#[target_feature(enable = "sse2")]`
    // (since Rust 1.87), and SSE2 being on for the whole build (x86-64's
    // baseline) does not count.

    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpackhi_epi16,
        _mm_unpackhi_epi32, _mm_unpacklo_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
    };

    fn load(b: &[u8]) -> __m128i {
        assert_eq!(b.len(), 16);
        // SAFETY: `b` holds 16 readable bytes (asserted); the load is
        // unaligned; SSE2 is part of the x86-64 baseline.
        unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
    }

    fn store(b: &mut [u8], v: __m128i) {
        assert_eq!(b.len(), 16);
        // SAFETY: `b` holds 16 writable bytes (asserted); unaligned store;
        // SSE2 is part of the x86-64 baseline.
        unsafe { _mm_storeu_si128(b.as_mut_ptr().cast(), v) }
    }

    pub fn interleave2(s: [&[u8]; 2], out: &mut [u8]) -> usize {
        let blocks = s[0].len() / 16;
        let s0 = s[0].chunks_exact(16);
        let s1 = s[1].chunks_exact(16);
        for ((a, b), o) in s0.zip(s1).zip(out.chunks_exact_mut(32)) {
            let (a, b) = (load(a), load(b));
            // SAFETY: SSE2 register operations only.
            let (lo, hi) = unsafe { (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)) };
            let (o0, o1) = o.split_at_mut(16);
            store(o0, lo);
            store(o1, hi);
        }
        blocks * 16
    }

    pub fn interleave4(s: [&[u8]; 4], out: &mut [u8]) -> usize {
        let blocks = s[0].len() / 16;
        for (b, o) in (0..blocks).zip(out.chunks_exact_mut(64)) {
            let r = b * 16..b * 16 + 16;
            let v: [__m128i; 4] = std::array::from_fn(|j| load(&s[j][r.clone()]));
            // SAFETY: SSE2 register operations only.
            let q = unsafe {
                let ab_lo = _mm_unpacklo_epi8(v[0], v[1]);
                let ab_hi = _mm_unpackhi_epi8(v[0], v[1]);
                let cd_lo = _mm_unpacklo_epi8(v[2], v[3]);
                let cd_hi = _mm_unpackhi_epi8(v[2], v[3]);
                [
                    _mm_unpacklo_epi16(ab_lo, cd_lo),
                    _mm_unpackhi_epi16(ab_lo, cd_lo),
                    _mm_unpacklo_epi16(ab_hi, cd_hi),
                    _mm_unpackhi_epi16(ab_hi, cd_hi),
                ]
            };
            for (piece, v) in o.chunks_exact_mut(16).zip(q) {
                store(piece, v);
            }
        }
        blocks * 16
    }

    pub fn interleave8(s: [&[u8]; 8], out: &mut [u8]) -> usize {
        let blocks = s[0].len() / 16;
        for (b, o) in (0..blocks).zip(out.chunks_exact_mut(128)) {
            let r = b * 16..b * 16 + 16;
            let v: [__m128i; 8] = std::array::from_fn(|j| load(&s[j][r.clone()]));
            // SAFETY: SSE2 register operations only.
            let e = unsafe {
                // Pairs of bytes (streams 2k, 2k+1) for elements 0-7 and 8-15.
                let p: [[__m128i; 2]; 4] = std::array::from_fn(|k| {
                    [
                        _mm_unpacklo_epi8(v[2 * k], v[2 * k + 1]),
                        _mm_unpackhi_epi8(v[2 * k], v[2 * k + 1]),
                    ]
                });
                // Quads: streams 0-3 (q[0]) and 4-7 (q[1]) for elements
                // 0-3, 4-7, 8-11, 12-15.
                let q: [[__m128i; 4]; 2] = std::array::from_fn(|h| {
                    let (x, y) = (p[2 * h], p[2 * h + 1]);
                    [
                        _mm_unpacklo_epi16(x[0], y[0]),
                        _mm_unpackhi_epi16(x[0], y[0]),
                        _mm_unpacklo_epi16(x[1], y[1]),
                        _mm_unpackhi_epi16(x[1], y[1]),
                    ]
                });
                // Whole elements, two per register.
                let mut e = [q[0][0]; 8];
                for g in 0..4 {
                    e[2 * g] = _mm_unpacklo_epi32(q[0][g], q[1][g]);
                    e[2 * g + 1] = _mm_unpackhi_epi32(q[0][g], q[1][g]);
                }
                e
            };
            for (piece, v) in o.chunks_exact_mut(16).zip(e) {
                store(piece, v);
            }
        }
        blocks * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn shuffle(dec: &[u8], s: usize) -> Vec<u8> {
        let n = dec.len() / s;
        let mut enc = vec![0; dec.len()];
        for i in 0..n {
            for j in 0..s {
                enc[j * n + i] = dec[i * s + j];
            }
        }
        enc
    }

    #[test]
    fn known_value() {
        let c = Shuffle::from_v2(&json!({"id": "shuffle", "elementsize": 4})).unwrap();
        let enc = vec![1, 5, 2, 6, 3, 7, 4, 8];
        assert_eq!(
            c.decode(enc, DecodedSize::Exact(8)).unwrap(),
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(
            Shuffle::from_v2(&json!({"id": "shuffle"})).unwrap(),
            Shuffle::new(4)
        );
    }

    /// HDF5's shuffle of 2 four-byte elements plus a 3-byte tail (what
    /// netCDF-4 writes when fletcher32 runs first), decoded both ways.
    #[test]
    fn hdf5_copies_a_partial_tail() {
        let c = Shuffle::hdf5(4);
        let enc = vec![1, 5, 2, 6, 3, 7, 4, 8, 9, 10, 11];
        let want = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        assert_eq!(c.decode(enc.clone(), DecodedSize::Exact(11)).unwrap(), want);
        let mut out = vec![0; 11];
        c.decode_into(&enc, &mut out).unwrap().unwrap();
        assert_eq!(out, want);
        // numcodecs' rule still refuses it.
        assert!(Shuffle::new(4).decode(enc, DecodedSize::Exact(11)).is_err());
    }

    #[test]
    fn tail_and_size_errors() {
        let c = Shuffle::new(4);
        assert!(matches!(
            c.decode(vec![0; 5], DecodedSize::Exact(5)),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            c.decode(vec![0; 8], DecodedSize::Exact(4)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            c.decode(vec![0; 8], DecodedSize::AtMost(4)),
            Err(CodecError::TooLarge { .. })
        ));
        let one = Shuffle::from_v2(&json!({"id": "shuffle", "elementsize": 1})).unwrap();
        assert_eq!(
            one.decode(vec![1, 2, 3], DecodedSize::Exact(3)).unwrap(),
            [1, 2, 3]
        );
        assert!(Shuffle::from_v2(&json!({"id": "shuffle", "elementsize": "4"})).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(n in 0usize..50, s in 1usize..20, seed in any::<u8>()) {
            let dec: Vec<u8> = (0..n * s).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
            let c = Shuffle::new(s);
            prop_assert_eq!(c.decode(shuffle(&dec, s), DecodedSize::Exact(dec.len())).unwrap(), dec);
        }

        /// The SIMD kernels (2, 4 and 8 streams, blocks of 16 elements)
        /// and their scalar tails, plain and byte-swapping, against the
        /// definition, at lengths around the block size.
        #[test]
        fn unshuffle_matches_definition(
            n in 0usize..100,
            s in prop::sample::select(vec![1usize, 2, 3, 4, 8, 16, 5]),
            swap in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let enc: Vec<u8> = (0..n * s)
                .map(|i| (seed.wrapping_mul(i as u64 + 1) >> 17) as u8)
                .collect();
            let mut want = vec![0u8; n * s];
            for i in 0..n {
                for j in 0..s {
                    let b = if swap { s - 1 - j } else { j };
                    want[i * s + b] = enc[j * n + i];
                }
            }
            let mut out = vec![0xAAu8; n * s];
            unshuffle_into(&enc, &mut out, s, swap);
            prop_assert_eq!(out, want);
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100), s in 0usize..40) {
            if let Ok(out) = Shuffle::new(s).decode(data.clone(), DecodedSize::AtMost(100)) {
                prop_assert_eq!(out.len(), data.len());
            }
        }
    }
}
