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

use serde_json::Value;

use super::numeric::config_int;
use super::registry::{CodecEntry, Hdf5Filter, Numcodecs, json_param};
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
}

impl Shuffle {
    pub fn new(elementsize: usize) -> Self {
        Shuffle { elementsize }
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
        if encoded.len() % s != 0 {
            return Err(CodecError::corrupt(
                NAME,
                format!(
                    "{} bytes is not a whole number of {s}-byte elements",
                    encoded.len()
                ),
            ));
        }
        let mut out = vec![0u8; encoded.len()];
        unshuffle_into(&encoded, &mut out, s);
        Ok(out)
    }

    /// Unshuffle straight into `out`: how a shuffled, compressed chunk
    /// decodes without a second buffer ([`super::CodecChain::decode_into`]).
    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
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
        } else if encoded.len() % s != 0 {
            Err(CodecError::corrupt(
                NAME,
                format!(
                    "{} bytes is not a whole number of {s}-byte elements",
                    encoded.len()
                ),
            ))
        } else {
            unshuffle_into(encoded, out, s);
            Ok(())
        })
    }
}

/// `out[i * s + j] = enc[j * n + i]`: element `i`'s byte `j` from stream `j`.
fn unshuffle_into(enc: &[u8], out: &mut [u8], s: usize) {
    let n = enc.len() / s;
    match s {
        2 => unshuffle::<2>(enc, out, n),
        4 => unshuffle::<4>(enc, out, n),
        8 => unshuffle::<8>(enc, out, n),
        16 => unshuffle::<16>(enc, out, n),
        _ => {
            // Write the output in order, gathering one byte from each of
            // the `s` streams.
            for (i, elem) in out.chunks_exact_mut(s).enumerate() {
                for (j, b) in elem.iter_mut().enumerate() {
                    *b = enc[j * n + i];
                }
            }
        }
    }
}

/// Unshuffle `N`-byte elements: one pass over the output, reading the `N`
/// streams side by side.
fn unshuffle<const N: usize>(enc: &[u8], out: &mut [u8], n: usize) {
    let streams: [&[u8]; N] = std::array::from_fn(|j| &enc[j * n..(j + 1) * n]);
    for (i, elem) in out.chunks_exact_mut(N).enumerate() {
        for j in 0..N {
            elem[j] = streams[j][i];
        }
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

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..100), s in 0usize..40) {
            if let Ok(out) = Shuffle::new(s).decode(data.clone(), DecodedSize::AtMost(100)) {
                prop_assert_eq!(out.len(), data.len());
            }
        }
    }
}
