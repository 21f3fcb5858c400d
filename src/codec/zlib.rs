//! numcodecs `zlib`: one DEFLATE stream in a zlib wrapper (RFC 1950).
//!
//! ```json
//! {"id": "zlib", "level": 1}
//! ```
//!
//! HDF5's `deflate` filter (id 1, `cd_values = [level]`) stores the same
//! zlib streams, so it maps here (see [`super::registry`]).
//!
//! The level only matters to the writer. Decoding follows numcodecs
//! (Python's `zlib.decompress`): the stream must be complete and its
//! Adler-32 must match; bytes after the end of the stream are ignored.
//! Output is capped at the expected size as in [`super::gzip`].

use flate2::bufread::ZlibDecoder;
use serde_json::Value;

use super::entry::{CodecEntry, Hdf5Filter, Numcodecs, hdf5_param, json_param};
use super::entry::{bounded_vec, finish, read_bounded};
use super::numeric::config_int;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "zlib";

/// numcodecs' default level, for a JSON object without one.
const DEFAULT_LEVEL: u32 = 1;

/// numcodecs `zlib`; HDF5's deflate filter (1) writes the same zlib
/// streams, with `cd_values = [level]` (netcdf-c `NCZ_zlib_codec`).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Bytes(|c| Ok(Box::new(Zlib::from_v2(c)?))))),
    v3: None,
    hdf5: Some(Hdf5Filter {
        id: 1,
        to_json: |p| Ok(serde_json::json!({"id": NAME, "level": hdf5_param(NAME, p, 0)?})),
        to_params: |c| Ok(vec![json_param(NAME, c, "level", Some(DEFAULT_LEVEL))?]),
    }),
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zlib {
    level: Option<i64>,
}

impl Zlib {
    /// From the numcodecs object `{"id": "zlib", "level": n}`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        Ok(Zlib {
            level: config_int(NAME, config, "level")?,
        })
    }

    /// The writer's compression level, if the metadata gave one.
    pub fn level(&self) -> Option<i64> {
        self.level
    }
}

impl BytesToBytesCodec for Zlib {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let mut out = bounded_vec(NAME, size)?;
        read_bounded(
            NAME,
            &mut ZlibDecoder::new(&encoded[..]),
            size.limit(),
            &mut out,
        )?;
        size.check(NAME, out.len())?;
        Ok(finish(out, size))
    }

    /// One pass of the inflater straight into `out`: the stream must end
    /// exactly when `out` is full (more output is a bomb or a wrong
    /// size, less is a short chunk).
    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        use flate2::{Decompress, FlushDecompress, Status};
        let mut d = Decompress::new(true);
        Some(match d.decompress(encoded, out, FlushDecompress::Finish) {
            Ok(Status::StreamEnd) if d.total_out() == out.len() as u64 => Ok(()),
            Ok(Status::StreamEnd) => Err(CodecError::WrongSize {
                codec: NAME,
                expected: out.len(),
                actual: d.total_out() as usize,
            }),
            Ok(_) if d.total_out() == out.len() as u64 => Err(CodecError::corrupt(
                NAME,
                format!(
                    "the stream holds more than the {} bytes expected",
                    out.len()
                ),
            )),
            Ok(_) => Err(CodecError::corrupt(NAME, "the stream ends early")),
            Err(e) => Err(CodecError::corrupt(NAME, e.to_string())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::ZlibEncoder;
    use proptest::prelude::*;
    use serde_json::json;
    use std::io::Write;

    fn zl(data: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::new(6));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn sample() -> Vec<u8> {
        (0..10_000u32).flat_map(|i| (i / 7).to_le_bytes()).collect()
    }

    fn codec() -> Zlib {
        Zlib::from_v2(&json!({"id": "zlib", "level": 1})).unwrap()
    }

    #[test]
    fn round_trip_and_trailing_bytes() {
        let data = sample();
        assert_eq!(
            codec()
                .decode(zl(&data), DecodedSize::Exact(data.len()))
                .unwrap(),
            data
        );
        let mut trailing = zl(&data);
        trailing.extend(b"junk");
        assert_eq!(
            codec()
                .decode(trailing, DecodedSize::Exact(data.len()))
                .unwrap(),
            data
        );
        assert_eq!(codec().decode(zl(b""), DecodedSize::Exact(0)).unwrap(), b"");
    }

    #[test]
    fn truncated_and_corrupt() {
        let data = sample();
        let enc = zl(&data);
        for cut in [0, 1, 2, 10, enc.len() / 2, enc.len() - 4, enc.len() - 1] {
            let r = codec().decode(enc[..cut].to_vec(), DecodedSize::Exact(data.len()));
            assert!(
                matches!(r, Err(CodecError::Corrupt { .. })),
                "cut {cut}: {r:?}"
            );
        }
        let mut bad = enc.clone();
        let n = bad.len();
        bad[n - 1] ^= 1; // Adler-32
        let r = codec().decode(bad, DecodedSize::Exact(data.len()));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
        let mut bad = enc.clone();
        bad[0] = 0x77; // not a zlib header
        assert!(codec().decode(bad, DecodedSize::Exact(data.len())).is_err());
        assert!(matches!(
            codec().decode(enc, DecodedSize::Exact(data.len() - 1)),
            Err(CodecError::TooLarge { .. })
        ));
    }

    #[test]
    fn bomb_stops_at_the_limit() {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::new(9));
        let block = vec![0u8; 1 << 20];
        for _ in 0..100 {
            e.write_all(&block).unwrap();
        }
        let bomb = e.finish().unwrap();
        let r = codec().decode(bomb, DecodedSize::AtMost(1 << 20));
        assert!(
            matches!(r, Err(CodecError::TooLarge { limit, .. }) if limit == 1 << 20),
            "{r:?}"
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(out) = codec().decode(data, DecodedSize::AtMost(4096)) {
                prop_assert!(out.len() <= 4096);
            }
        }

        #[test]
        fn mutated_streams_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        ) {
            let data = sample();
            let mut enc = zl(&data);
            for (i, b) in flips {
                let i = i.index(enc.len());
                enc[i] ^= b;
            }
            if let Ok(out) = codec().decode(enc, DecodedSize::Exact(data.len())) {
                prop_assert_eq!(out.len(), data.len());
            }
        }
    }
}
