//! `gzip`: DEFLATE in a gzip container (RFC 1952).
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/gzip/index.html>;
//! numcodecs `GZip`.
//!
//! ```json
//! {"name": "gzip", "configuration": {"level": 5}}
//! {"id": "gzip", "level": 1}
//! ```
//!
//! The level only matters to the writer; it is checked to be an integer.
//!
//! Decoding reads like numcodecs (Python's `gzip` module): several members
//! one after another are concatenated, and zero bytes between or after
//! members are skipped; anything else after a member is an error. Every
//! member's CRC-32 and length are verified (by `flate2`). Output is capped
//! at the expected size: the decoder asks for one byte more than the limit
//! and fails with [`CodecError::TooLarge`] if it gets it, so a bomb costs at
//! most the limit.

use flate2::bufread::GzDecoder;
use serde_json::Value;

use super::entry::{CodecEntry, Numcodecs, bounded_vec, finish, read_bounded};
use super::numeric::{config_int, reject_unknown_keys};
use super::{BytesToBytesCodec, Codec, CodecError, DecodedSize};

const NAME: &str = "gzip";

/// numcodecs `gzip` and Zarr v3 `gzip`. (HDF5's deflate filter writes
/// zlib streams, not gzip members: it maps to [`super::zlib`].)
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Bytes(|c| Ok(Box::new(Gzip::from_v2(c)?))))),
    v3: Some((NAME, |c| {
        Ok(Codec::BytesToBytes(Box::new(Gzip::from_v3(c)?)))
    })),
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gzip {
    level: Option<i64>,
}

impl Gzip {
    /// From the v3 configuration `{"level": n}`.
    pub fn from_v3(config: &Value) -> Result<Self, CodecError> {
        reject_unknown_keys(NAME, config, &["level"])?;
        Ok(Gzip {
            level: config_int(NAME, config, "level")?,
        })
    }

    /// From the numcodecs object `{"id": "gzip", "level": n}`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        Ok(Gzip {
            level: config_int(NAME, config, "level")?,
        })
    }

    /// The writer's compression level, if the metadata gave one.
    pub fn level(&self) -> Option<i64> {
        self.level
    }
}

impl BytesToBytesCodec for Gzip {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let limit = size.limit();
        let mut out = bounded_vec(NAME, size)?;
        let mut rest: &[u8] = &encoded;
        loop {
            let zeros = rest.iter().take_while(|&&b| b == 0).count();
            rest = &rest[zeros..];
            if rest.is_empty() {
                break;
            }
            let mut member = GzDecoder::new(rest);
            read_bounded(NAME, &mut member, limit, &mut out)?;
            rest = member.into_inner();
        }
        size.check(NAME, out.len())?;
        Ok(finish(out, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use proptest::prelude::*;
    use serde_json::json;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::new(6));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn sample() -> Vec<u8> {
        (0..10_000u32).flat_map(|i| (i / 7).to_le_bytes()).collect()
    }

    #[test]
    fn round_trip() {
        let data = sample();
        let c = Gzip::from_v3(&json!({"level": 5})).unwrap();
        assert_eq!(
            c.decode(gz(&data), DecodedSize::Exact(data.len())).unwrap(),
            data
        );
        assert_eq!(
            c.decode(gz(&data), DecodedSize::AtMost(data.len() * 2))
                .unwrap(),
            data
        );
        assert_eq!(c.decode(gz(&[]), DecodedSize::Exact(0)).unwrap(), b"");
    }

    #[test]
    fn members_concatenate_and_zero_padding_is_skipped() {
        let c = Gzip::from_v2(&json!({"id": "gzip", "level": 1})).unwrap();
        let mut two = gz(b"abc");
        two.extend(gz(b"def"));
        assert_eq!(
            c.decode(two.clone(), DecodedSize::Exact(6)).unwrap(),
            b"abcdef"
        );
        two.extend([0, 0, 0]);
        assert_eq!(
            c.decode(two.clone(), DecodedSize::Exact(6)).unwrap(),
            b"abcdef"
        );
        two.extend(b"junk");
        assert!(matches!(
            c.decode(two, DecodedSize::Exact(6)),
            Err(CodecError::Corrupt { .. })
        ));
    }

    #[test]
    fn truncated_and_corrupt() {
        let data = sample();
        let c = Gzip::from_v3(&json!({})).unwrap();
        let enc = gz(&data);
        for cut in [1, 5, 10, enc.len() / 2, enc.len() - 4, enc.len() - 1] {
            let r = c.decode(enc[..cut].to_vec(), DecodedSize::Exact(data.len()));
            assert!(
                matches!(r, Err(CodecError::Corrupt { .. })),
                "cut {cut}: {r:?}"
            );
        }
        // Flip a bit in the stored CRC.
        let mut bad = enc.clone();
        let n = bad.len();
        bad[n - 6] ^= 1;
        assert!(matches!(
            c.decode(bad, DecodedSize::Exact(data.len())),
            Err(CodecError::Corrupt { .. })
        ));
        // Wrong expected size.
        assert!(matches!(
            c.decode(enc, DecodedSize::Exact(data.len() + 1)),
            Err(CodecError::WrongSize { .. })
        ));
    }

    #[test]
    fn bomb_stops_at_the_limit() {
        // 100 MB of zeros compress to ~100 KB.
        let mut e = GzEncoder::new(Vec::new(), Compression::new(9));
        let block = vec![0u8; 1 << 20];
        for _ in 0..100 {
            e.write_all(&block).unwrap();
        }
        let bomb = e.finish().unwrap();
        assert!(bomb.len() < 200_000);
        let c = Gzip::from_v3(&json!({"level": 9})).unwrap();
        let r = c.decode(bomb.clone(), DecodedSize::Exact(1 << 20));
        assert!(
            matches!(r, Err(CodecError::TooLarge { limit, .. }) if limit == 1 << 20),
            "{r:?}"
        );
        let r = c.decode(bomb, DecodedSize::AtMost(1 << 20));
        assert!(matches!(r, Err(CodecError::TooLarge { .. })));
    }

    #[test]
    fn bad_configs() {
        assert!(Gzip::from_v3(&json!({"level": "high"})).is_err());
        assert!(Gzip::from_v3(&json!({"level": 1, "foo": 2})).is_err());
        assert!(Gzip::from_v2(&json!({"id": "gzip", "level": 1.5})).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let c = Gzip::from_v3(&json!({})).unwrap();
            if let Ok(out) = c.decode(data, DecodedSize::AtMost(4096)) {
                prop_assert!(out.len() <= 4096);
            }
        }

        #[test]
        fn mutated_frames_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let data = sample();
            let mut enc = gz(&data);
            for (i, b) in flips {
                let i = i.index(enc.len());
                enc[i] ^= b;
            }
            let keep = enc.len() - cut.index(enc.len() / 4 + 1);
            enc.truncate(keep);
            let c = Gzip::from_v3(&json!({})).unwrap();
            if let Ok(out) = c.decode(enc, DecodedSize::Exact(data.len())) {
                prop_assert_eq!(out.len(), data.len());
            }
        }
    }
}
