//! numcodecs `lz4`: one LZ4 block after its decoded size.
//!
//! numcodecs `LZ4` (`numcodecs/lz4.pyx`); zarr-python 3 writes it into
//! Zarr v3 metadata as `numcodecs.lz4`.
//!
//! ```json
//! {"id": "lz4", "acceleration": 1}
//! {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}
//! ```
//!
//! The stored form is a 4-byte little-endian decoded size followed by one
//! raw LZ4 block (`LZ4_compress_fast`), not an LZ4 frame. `acceleration`
//! only matters to the writer.
//!
//! Decoding follows numcodecs' `decompress`: the size is read as a signed
//! 32-bit number and must be positive (so numcodecs cannot decode the
//! empty buffers it writes for empty input, and neither can this), the
//! block must decode to exactly that size. The size is checked against
//! the expected decoded size before anything is allocated, so a header
//! claiming gigabytes costs nothing, and `lz4_flex` (safe Rust, bounds
//! checked) never writes past the buffer it is given.
//!
//! HDF5's LZ4 filter (32004) frames its blocks differently (big-endian
//! total size, block size, and a length before every block): it is not
//! this codec and is not registered under that id.

use serde_json::Value;

use super::entry::{CodecEntry, Numcodecs};
use super::numeric::config_int;
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "lz4";

/// numcodecs `lz4`; v3 `numcodecs.lz4`.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Bytes(|c| Ok(Box::new(Lz4::from_v2(c)?))))),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lz4 {
    acceleration: Option<i64>,
}

impl Lz4 {
    /// From the numcodecs object `{"id": "lz4", "acceleration": n}`.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        Ok(Lz4 {
            acceleration: config_int(NAME, config, "acceleration")?,
        })
    }

    /// The writer's acceleration, if the metadata gave one.
    pub fn acceleration(&self) -> Option<i64> {
        self.acceleration
    }
}

/// The decoded size the header states, and the block after it.
fn split(encoded: &[u8]) -> Result<(usize, &[u8]), CodecError> {
    let Some((header, block)) = encoded.split_first_chunk::<4>() else {
        return Err(CodecError::corrupt(
            NAME,
            format!("{} bytes cannot hold the 4-byte size", encoded.len()),
        ));
    };
    // numcodecs reads it into a C `int`: 2^31 and above are negative.
    let n = i32::from_le_bytes(*header);
    if n <= 0 {
        return Err(CodecError::corrupt(
            NAME,
            format!("stated decoded size {n} is not positive"),
        ));
    }
    Ok((n as usize, block))
}

/// Decode `block` into all of `out`.
fn decompress_exact(block: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let n = lz4_flex::block::decompress_into(block, out)
        .map_err(|e| CodecError::corrupt(NAME, e.to_string()))?;
    if n != out.len() {
        return Err(CodecError::corrupt(
            NAME,
            format!("block decoded to {n} bytes, its header says {}", out.len()),
        ));
    }
    Ok(())
}

impl BytesToBytesCodec for Lz4 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let (n, block) = split(&encoded)?;
        size.check(NAME, n)?;
        let mut out = Vec::new();
        out.try_reserve_exact(n).map_err(|_| CodecError::TooLarge {
            codec: NAME,
            limit: size.limit(),
        })?;
        out.resize(n, 0);
        decompress_exact(block, &mut out)?;
        Ok(out)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        Some(split(encoded).and_then(|(n, block)| {
            DecodedSize::Exact(out.len()).check(NAME, n)?;
            decompress_exact(block, out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn sample() -> Vec<u8> {
        (0..5_000u32).flat_map(|i| (i / 9).to_le_bytes()).collect()
    }

    /// The numcodecs framing.
    fn frame(data: &[u8]) -> Vec<u8> {
        let mut v = (data.len() as u32).to_le_bytes().to_vec();
        v.extend(lz4_flex::block::compress(data));
        v
    }

    fn codec() -> Lz4 {
        Lz4::from_v2(&json!({"id": "lz4", "acceleration": 1})).unwrap()
    }

    #[test]
    fn round_trip_both_paths() {
        let data = sample();
        let enc = frame(&data);
        assert!(enc.len() < data.len() / 4);
        assert_eq!(
            codec()
                .decode(enc.clone(), DecodedSize::Exact(data.len()))
                .unwrap(),
            data
        );
        assert_eq!(
            codec()
                .decode(enc.clone(), DecodedSize::AtMost(1 << 20))
                .unwrap(),
            data
        );
        let mut out = vec![0; data.len()];
        codec().decode_into(&enc, &mut out).unwrap().unwrap();
        assert_eq!(out, data);
        assert_eq!(codec().acceleration(), Some(1));
        assert!(Lz4::from_v2(&json!({"id": "lz4", "acceleration": "x"})).is_err());
    }

    #[test]
    fn header_is_checked_before_allocating() {
        let data = sample();
        let mut enc = frame(&data);
        enc[..4].copy_from_slice(&(1u32 << 30).to_le_bytes());
        assert!(matches!(
            codec().decode(enc.clone(), DecodedSize::Exact(data.len())),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            codec().decode(enc.clone(), DecodedSize::AtMost(data.len())),
            Err(CodecError::TooLarge { .. })
        ));
        let mut out = vec![0; data.len()];
        assert!(matches!(
            codec().decode_into(&enc, &mut out),
            Some(Err(CodecError::WrongSize { .. }))
        ));
        for bad in [0u32, 0x8000_0000, u32::MAX] {
            enc[..4].copy_from_slice(&bad.to_le_bytes());
            assert!(matches!(
                codec().decode(enc.clone(), DecodedSize::AtMost(1 << 20)),
                Err(CodecError::Corrupt { .. })
            ));
        }
        assert!(matches!(
            codec().decode(vec![1, 0, 0], DecodedSize::AtMost(10)),
            Err(CodecError::Corrupt { .. })
        ));
    }

    #[test]
    fn short_long_and_truncated_blocks() {
        let data = sample();
        let good = frame(&data);
        // The header promises one byte more than the block holds.
        let mut short = good.clone();
        short[..4].copy_from_slice(&(data.len() as u32 + 1).to_le_bytes());
        assert!(matches!(
            codec().decode(short, DecodedSize::AtMost(1 << 20)),
            Err(CodecError::Corrupt { .. })
        ));
        // ... one byte less.
        let mut long = good.clone();
        long[..4].copy_from_slice(&(data.len() as u32 - 1).to_le_bytes());
        assert!(matches!(
            codec().decode(long, DecodedSize::AtMost(1 << 20)),
            Err(CodecError::Corrupt { .. })
        ));
        for cut in [4, 5, good.len() / 2, good.len() - 1] {
            let r = codec().decode(good[..cut].to_vec(), DecodedSize::Exact(data.len()));
            assert!(
                matches!(r, Err(CodecError::Corrupt { .. })),
                "cut {cut}: {r:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(out) = codec().decode(data, DecodedSize::AtMost(4096)) {
                prop_assert!(out.len() <= 4096);
            }
        }

        #[test]
        fn mutated_blocks_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ) {
            let data = sample();
            let mut enc = frame(&data);
            for (i, b) in flips {
                let i = i.index(enc.len());
                enc[i] ^= b;
            }
            if let Ok(out) = codec().decode(enc.clone(), DecodedSize::Exact(data.len())) {
                prop_assert_eq!(out.len(), data.len());
            }
            let mut out = vec![0; data.len()];
            let _ = codec().decode_into(&enc, &mut out);
        }
    }
}
