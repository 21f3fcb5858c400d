//! numcodecs `bz2`: bzip2 streams.
//!
//! numcodecs `BZ2` (Python's `bz2` module); zarr-python 3 writes it into
//! Zarr v3 metadata as `numcodecs.bz2`; HDF5 filter 307 (PyTables'
//! `H5Zbzip2.c`, netcdf-c `NCZ_bzip2_codec`) stores the same streams with
//! `cd_values = [level]`.
//!
//! ```json
//! {"id": "bz2", "level": 1}
//! {"name": "numcodecs.bz2", "configuration": {"level": 1}}
//! ```
//!
//! The level only matters to the writer.
//!
//! Decoding reads like Python's `bz2.decompress`: streams one after
//! another are concatenated; after the first, bytes that are not a valid
//! stream end the data and are ignored, while a stream that starts but
//! stops short is an error; an empty input decodes to nothing. The
//! decoder (`bzip2`, a Rust port of libbz2) writes into a buffer reserved
//! for the expected size plus one byte and never grows it, so a bomb
//! stops at the limit ([`CodecError::TooLarge`]); its own working memory
//! is fixed by the stream's block size (at most about 3.6 MB). One
//! consequence: trailing bytes that start like a stream but fail only at
//! the end of a block (a block CRC) are ignored by Python, whereas here
//! they may first overflow the limit and make the chunk
//! [`CodecError::TooLarge`]. Only a damaged chunk can look like that;
//! refusing it is the bounded-memory answer (found by the
//! `codec_compressors` fuzz target).

use bzip2::{Decompress, Status};
use serde_json::Value;

use super::entry::{CodecEntry, Hdf5Filter, Numcodecs, hdf5_param, json_param};
use super::entry::{bounded_vec, finish};
use super::numeric::config_int;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "bz2";

/// numcodecs' default level, for a JSON object without one.
const DEFAULT_LEVEL: u32 = 1;

/// numcodecs `bz2`; v3 `numcodecs.bz2`; HDF5 filter 307, `[level]`.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Bytes(|c| Ok(Box::new(Bz2::from_v2(c)?))))),
    v3: None,
    hdf5: Some(Hdf5Filter {
        id: 307,
        to_json: |p| Ok(serde_json::json!({"id": NAME, "level": hdf5_param(NAME, p, 0)?})),
        to_params: |c| Ok(vec![json_param(NAME, c, "level", Some(DEFAULT_LEVEL))?]),
    }),
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bz2 {
    level: Option<i64>,
}

impl Bz2 {
    /// From the numcodecs object `{"id": "bz2", "level": n}`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        Ok(Bz2 {
            level: config_int(NAME, config, "level")?,
        })
    }

    /// The writer's level, if the metadata gave one.
    pub fn level(&self) -> Option<i64> {
        self.level
    }
}

/// How decoding one stream failed.
enum StreamError {
    /// Not bzip2 data (bad magic, bad block, CRC mismatch).
    Invalid(String),
    /// The input ended inside the stream.
    Truncated,
    /// The output would pass the limit.
    TooLarge,
}

/// Decode the stream at the start of `input`, appending to `out` (never
/// past `limit` bytes in all); returns the bytes of input it used.
fn decode_stream(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<usize, StreamError> {
    let mut d = Decompress::new(false);
    loop {
        let (used, produced) = (d.total_in(), d.total_out());
        // `total_in` never exceeds the input it was given.
        let rest = &input[used as usize..];
        let status = d
            .decompress_vec(rest, out)
            .map_err(|e| StreamError::Invalid(e.to_string()))?;
        if out.len() > limit {
            return Err(StreamError::TooLarge);
        }
        if let Status::StreamEnd = status {
            return Ok(d.total_in() as usize);
        }
        if (d.total_in(), d.total_out()) == (used, produced) {
            // No progress: either the input is used up, or the output
            // buffer (reserved for limit + 1 bytes) is full.
            return Err(if out.len() == out.capacity() {
                StreamError::TooLarge
            } else {
                StreamError::Truncated
            });
        }
    }
}

impl BytesToBytesCodec for Bz2 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let limit = size.limit();
        let mut out = bounded_vec(NAME, size)?;
        let mut rest = &encoded[..];
        let mut first = true;
        while !rest.is_empty() {
            let mark = out.len();
            match decode_stream(rest, &mut out, limit) {
                Ok(used) => rest = &rest[used..],
                // Python drops what follows the first stream when it is
                // not a stream.
                Err(StreamError::Invalid(_)) if !first => {
                    out.truncate(mark);
                    break;
                }
                Err(StreamError::Invalid(e)) => return Err(CodecError::corrupt(NAME, e)),
                Err(StreamError::Truncated) => {
                    return Err(CodecError::corrupt(
                        NAME,
                        "data ended before the end-of-stream marker",
                    ));
                }
                Err(StreamError::TooLarge) => {
                    return Err(CodecError::TooLarge { codec: NAME, limit });
                }
            }
            first = false;
        }
        size.check(NAME, out.len())?;
        Ok(finish(out, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bzip2::Compression;
    use bzip2::write::BzEncoder;
    use proptest::prelude::*;
    use serde_json::json;
    use std::io::Write;

    fn bz(data: &[u8], level: u32) -> Vec<u8> {
        let mut e = BzEncoder::new(Vec::new(), Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn sample() -> Vec<u8> {
        (0..20_000u32)
            .flat_map(|i| (i / 13).to_le_bytes())
            .collect()
    }

    fn codec() -> Bz2 {
        Bz2::from_v2(&json!({"id": "bz2", "level": 1})).unwrap()
    }

    #[test]
    fn round_trip_and_concatenation() {
        let data = sample();
        let enc = bz(&data, 9);
        for size in [DecodedSize::Exact(data.len()), DecodedSize::AtMost(1 << 20)] {
            assert_eq!(codec().decode(enc.clone(), size).unwrap(), data);
        }
        let mut two = bz(b"abc", 1);
        two.extend(bz(b"def", 5));
        assert_eq!(
            codec().decode(two.clone(), DecodedSize::Exact(6)).unwrap(),
            b"abcdef"
        );
        // Junk after a stream is ignored, as Python does...
        let mut junk = two.clone();
        junk.extend(b"junk after the streams");
        assert_eq!(
            codec().decode(junk, DecodedSize::Exact(6)).unwrap(),
            b"abcdef"
        );
        // ...but not a second stream cut short.
        let mut cut = bz(b"abc", 1);
        let second = bz(b"def", 1);
        cut.extend(&second[..second.len() - 3]);
        assert!(matches!(
            codec().decode(cut, DecodedSize::AtMost(100)),
            Err(CodecError::Corrupt { .. })
        ));
        assert_eq!(codec().decode(vec![], DecodedSize::Exact(0)).unwrap(), b"");
        assert_eq!(
            codec().decode(bz(b"", 1), DecodedSize::Exact(0)).unwrap(),
            b""
        );
        assert_eq!(codec().level(), Some(1));
    }

    #[test]
    fn corrupt_truncated_and_wrong_size() {
        let data = sample();
        let enc = bz(&data, 9);
        for cut in [1, 4, 10, enc.len() / 2, enc.len() - 1] {
            let r = codec().decode(enc[..cut].to_vec(), DecodedSize::Exact(data.len()));
            assert!(
                matches!(r, Err(CodecError::Corrupt { .. })),
                "cut {cut}: {r:?}"
            );
        }
        assert!(matches!(
            codec().decode(b"not bzip2".to_vec(), DecodedSize::AtMost(100)),
            Err(CodecError::Corrupt { .. })
        ));
        let mut bad = enc.clone();
        let n = bad.len();
        bad[n - 3] ^= 0x10; // the stream CRC
        assert!(matches!(
            codec().decode(bad, DecodedSize::Exact(data.len())),
            Err(CodecError::Corrupt { .. })
        ));
        assert!(matches!(
            codec().decode(enc.clone(), DecodedSize::Exact(data.len() + 1)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            codec().decode(enc, DecodedSize::Exact(data.len() - 1)),
            Err(CodecError::TooLarge { .. })
        ));
    }

    #[test]
    fn bomb_stops_at_the_limit() {
        // 2 MiB of zeros in a few hundred bytes, against a 64 KiB limit.
        let zeros = vec![0u8; 2 << 20];
        let enc = bz(&zeros, 9);
        assert!(enc.len() < 1000, "{}", enc.len());
        let r = codec().decode(enc, DecodedSize::AtMost(64 << 10));
        assert!(
            matches!(r, Err(CodecError::TooLarge { limit, .. }) if limit == 64 << 10),
            "{r:?}"
        );
    }

    /// 4000 bytes of the sample in one stream, compressed once.
    fn stream_4000() -> &'static Vec<u8> {
        static S: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        S.get_or_init(|| bz(&sample()[..4000], 1))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(out) = codec().decode(data, DecodedSize::AtMost(4096)) {
                prop_assert!(out.len() <= 4096);
            }
        }

        #[test]
        fn mutated_streams_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut enc = stream_4000().clone();
            for (i, b) in flips {
                let i = i.index(enc.len());
                enc[i] ^= b;
            }
            if let Ok(out) = codec().decode(enc, DecodedSize::Exact(4000)) {
                prop_assert_eq!(out.len(), 4000);
            }
        }
    }
}
