//! `zstd`: Zstandard frames (RFC 8878).
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/zstd>;
//! numcodecs `Zstd`.
//!
//! ```json
//! {"name": "zstd", "configuration": {"level": 0, "checksum": false}}
//! {"id": "zstd", "level": 0, "checksum": false}
//! ```
//!
//! HDF5 filter 32015 stores the same frames (`cd_values = [level]`).
//!
//! Level and checksum only matter to the writer (a frame that carries a
//! checksum is always verified).
//!
//! # Decoding
//!
//! Like numcodecs, the input may hold several frames back to back
//! (skippable frames included); their contents are concatenated. numcodecs
//! writes one frame with its content size (`ZSTD_compress2`); streaming
//! writers may leave the size out. So:
//!
//! - if every frame states its size, the total is checked against the
//!   expectation *before* anything is allocated, and the frames are decoded
//!   in one shot straight into a buffer of that size (zstd fails rather
//!   than write past it);
//! - otherwise the frames are streamed into a buffer that stops one byte
//!   past the limit, with the decoder's window capped so a frame header
//!   cannot make it allocate a large window for a small chunk.

use std::io::Read;

use serde_json::Value;

use super::entry::{CodecEntry, Hdf5Filter, Numcodecs, hdf5_param, json_param};
use super::entry::{bounded_vec, finish, read_bounded};
use super::numeric::{config_int, config_object, reject_unknown_keys};
use super::{BytesToBytesCodec, Codec, CodecError, DecodedSize};

const NAME: &str = "zstd";

/// numcodecs' default level, for a JSON object without one.
const DEFAULT_LEVEL: u32 = 0;

/// numcodecs `zstd`, Zarr v3 `zstd`, and HDF5 filter 32015 with
/// `cd_values = [level]` (netcdf-c `NCZ_zstd_codec`: a negative level has
/// no HDF5 form, and the level comes back as an unsigned number).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Bytes(|c| Ok(Box::new(Zstd::from_config(c)?))),
    )),
    v3: Some((NAME, |c| {
        Ok(Codec::BytesToBytes(Box::new(Zstd::from_config(c)?)))
    })),
    hdf5: Some(Hdf5Filter {
        id: 32015,
        to_json: |p| Ok(serde_json::json!({"id": NAME, "level": hdf5_param(NAME, p, 0)?})),
        to_params: |c| Ok(vec![json_param(NAME, c, "level", Some(DEFAULT_LEVEL))?]),
    }),
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zstd {
    level: Option<i64>,
    checksum: bool,
}

impl Zstd {
    /// From a v3 configuration (`{"level": n, "checksum": bool}`) or a
    /// numcodecs object (`{"id": "zstd", "level": n, "checksum": bool}`).
    pub fn from_config(config: &Value) -> Result<Self, CodecError> {
        let obj = config_object(NAME, config)?;
        if !obj.contains_key("id") {
            reject_unknown_keys(NAME, config, &["level", "checksum"])?;
        }
        let checksum = match obj.get("checksum") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(CodecError::config(
                    NAME,
                    format!("\"checksum\" must be a boolean, found {v}"),
                ));
            }
        };
        Ok(Zstd {
            level: config_int(NAME, config, "level")?,
            checksum,
        })
    }

    pub fn level(&self) -> Option<i64> {
        self.level
    }

    pub fn checksum(&self) -> bool {
        self.checksum
    }
}

/// The sum of the content sizes of the frames in `src`, None if a frame
/// does not state its size.
fn total_content_size(src: &[u8]) -> Result<Option<u64>, CodecError> {
    let mut total: u64 = 0;
    let mut rest = src;
    if rest.is_empty() {
        return Err(CodecError::corrupt(NAME, "no zstd frame"));
    }
    while !rest.is_empty() {
        let n = zstd::zstd_safe::find_frame_compressed_size(rest).map_err(|code| {
            CodecError::corrupt(
                NAME,
                format!("bad frame: {}", zstd::zstd_safe::get_error_name(code)),
            )
        })?;
        if n == 0 || n > rest.len() {
            return Err(CodecError::corrupt(NAME, "bad frame length"));
        }
        match zstd::zstd_safe::get_frame_content_size(&rest[..n]) {
            Ok(Some(size)) => total = total.saturating_add(size),
            Ok(None) => return Ok(None),
            Err(_) => return Err(CodecError::corrupt(NAME, "bad frame header")),
        }
        rest = &rest[n..];
    }
    Ok(Some(total))
}

/// log2 of the largest window the streaming decoder may allocate for a
/// chunk of at most `limit` bytes: enough for the chunk itself, never
/// below 2^23 (what zstd's own levels up to 19 use, so real streams always
/// fit) nor above zstd's default cap of 2^27.
fn window_log_max(limit: usize) -> u32 {
    let needed = usize::BITS - limit.saturating_sub(1).leading_zeros();
    needed.clamp(23, 27)
}

impl BytesToBytesCodec for Zstd {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded_size: usize) -> Option<usize> {
        None
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        let limit = size.limit();
        match total_content_size(&encoded)? {
            Some(total) => {
                let total = usize::try_from(total)
                    .ok()
                    .filter(|&t| t <= limit)
                    .ok_or(CodecError::TooLarge { codec: NAME, limit })?;
                size.check(NAME, total)?;
                let mut out = Vec::new();
                out.try_reserve_exact(total)
                    .map_err(|_| CodecError::TooLarge { codec: NAME, limit })?;
                with_decompressor(|d| d.decompress_to_buffer(&encoded, &mut out))?;
                size.check(NAME, out.len())?;
                Ok(out)
            }
            None => {
                let mut d =
                    zstd::stream::read::Decoder::with_buffer(&encoded[..]).map_err(|e| {
                        CodecError::corrupt(NAME, format!("cannot create a decoder: {e}"))
                    })?;
                d.window_log_max(window_log_max(limit))
                    .map_err(|e| CodecError::corrupt(NAME, e.to_string()))?;
                let mut out = bounded_vec(NAME, size)?;
                read_bounded(NAME, &mut d.by_ref(), limit, &mut out)?;
                size.check(NAME, out.len())?;
                Ok(finish(out, size))
            }
        }
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        let total = match total_content_size(encoded) {
            Ok(Some(total)) => total,
            // Frames without a content size go through the bounded stream.
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        Some((|| {
            let size = DecodedSize::Exact(out.len());
            size.check(NAME, usize::try_from(total).unwrap_or(usize::MAX))?;
            let n = with_decompressor(|d| d.decompress_to_buffer(encoded, &mut *out))?;
            size.check(NAME, n)
        })())
    }
}

thread_local! {
    /// One decompression context per thread, reused: creating one costs an
    /// allocation of its tables for every chunk otherwise.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Run `f` with this thread's decompressor, mapping its error.
fn with_decompressor<T>(
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> std::io::Result<T>,
) -> Result<T, CodecError> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot =
                Some(zstd::bulk::Decompressor::new().map_err(|e| {
                    CodecError::corrupt(NAME, format!("cannot create a decoder: {e}"))
                })?);
        }
        let d = slot.as_mut().expect("just set");
        f(d).map_err(|e| CodecError::corrupt(NAME, e.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use std::io::Write;

    fn sample() -> Vec<u8> {
        (0..10_000u32).flat_map(|i| (i / 7).to_le_bytes()).collect()
    }

    fn codec() -> Zstd {
        Zstd::from_config(&json!({"level": 0, "checksum": false})).unwrap()
    }

    /// A frame without a content size, as a streaming writer makes it.
    fn streamed(data: &[u8], level: i32, checksum: bool) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), level).unwrap();
        e.include_checksum(checksum).unwrap();
        e.include_contentsize(false).unwrap();
        e.write_all(data).unwrap();
        let out = e.finish().unwrap();
        assert!(matches!(
            zstd::zstd_safe::get_frame_content_size(&out),
            Ok(None)
        ));
        out
    }

    #[test]
    fn round_trip_with_and_without_content_size() {
        let data = sample();
        let known = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(
            codec()
                .decode(known.clone(), DecodedSize::Exact(data.len()))
                .unwrap(),
            data
        );
        assert_eq!(
            codec().decode(known, DecodedSize::AtMost(1 << 20)).unwrap(),
            data
        );
        let unknown = streamed(&data, 3, true);
        assert_eq!(
            codec()
                .decode(unknown.clone(), DecodedSize::Exact(data.len()))
                .unwrap(),
            data
        );
        assert_eq!(
            codec()
                .decode(unknown, DecodedSize::AtMost(1 << 20))
                .unwrap(),
            data
        );
        let empty = zstd::bulk::compress(b"", 3).unwrap();
        assert_eq!(codec().decode(empty, DecodedSize::Exact(0)).unwrap(), b"");
    }

    #[test]
    fn concatenated_frames() {
        let mut two = zstd::bulk::compress(b"abc", 1).unwrap();
        two.extend(zstd::bulk::compress(b"def", 1).unwrap());
        assert_eq!(
            codec().decode(two.clone(), DecodedSize::Exact(6)).unwrap(),
            b"abcdef"
        );
        two.extend(streamed(b"ghi", 1, false));
        assert_eq!(
            codec().decode(two, DecodedSize::Exact(9)).unwrap(),
            b"abcdefghi"
        );
    }

    #[test]
    fn configs() {
        assert!(Zstd::from_config(&json!({"id": "zstd", "level": 0, "checksum": false})).is_ok());
        assert!(Zstd::from_config(&json!({"id": "zstd", "level": 3})).is_ok());
        assert!(Zstd::from_config(&json!({"level": 3})).is_ok());
        assert!(Zstd::from_config(&json!({"level": 3, "foo": 1})).is_err());
        assert!(Zstd::from_config(&json!({"level": 3, "checksum": 1})).is_err());
        assert!(Zstd::from_config(&json!({"level": "x"})).is_err());
    }

    #[test]
    fn truncated_corrupt_and_wrong_size() {
        let data = sample();
        for enc in [
            zstd::bulk::compress(&data, 3).unwrap(),
            streamed(&data, 3, true),
        ] {
            for cut in [0, 3, 4, 8, enc.len() / 2, enc.len() - 1] {
                let r = codec().decode(enc[..cut].to_vec(), DecodedSize::Exact(data.len()));
                assert!(
                    matches!(r, Err(CodecError::Corrupt { .. })),
                    "cut {cut}: {r:?}"
                );
            }
            let mut bad = enc.clone();
            let n = bad.len();
            bad[n - 2] ^= 0x55; // checksum or last block
            assert!(codec().decode(bad, DecodedSize::Exact(data.len())).is_err());
            let mut junk = enc.clone();
            junk.extend(b"junk");
            assert!(matches!(
                codec().decode(junk, DecodedSize::Exact(data.len())),
                Err(CodecError::Corrupt { .. })
            ));
        }
        let known = zstd::bulk::compress(&data, 3).unwrap();
        assert!(matches!(
            codec().decode(known.clone(), DecodedSize::Exact(data.len() + 1)),
            Err(CodecError::WrongSize { .. })
        ));
        assert!(matches!(
            codec().decode(known, DecodedSize::Exact(data.len() - 1)),
            Err(CodecError::TooLarge { .. })
        ));
        let unknown = streamed(&data, 3, false);
        assert!(matches!(
            codec().decode(unknown.clone(), DecodedSize::Exact(data.len() - 1)),
            Err(CodecError::TooLarge { .. })
        ));
        assert!(matches!(
            codec().decode(unknown, DecodedSize::Exact(data.len() + 1)),
            Err(CodecError::WrongSize { .. })
        ));
    }

    #[test]
    fn bomb_stops_at_the_limit() {
        let block = vec![0u8; 1 << 20];
        // With the size in the header: refused before decoding.
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
        e.set_pledged_src_size(Some(100 << 20)).unwrap();
        for _ in 0..100 {
            e.write_all(&block).unwrap();
        }
        let known = e.finish().unwrap();
        assert!(matches!(
            zstd::zstd_safe::get_frame_content_size(&known),
            Ok(Some(n)) if n == 100 << 20
        ));
        let r = codec().decode(known, DecodedSize::AtMost(1 << 20));
        assert!(
            matches!(r, Err(CodecError::TooLarge { limit, .. }) if limit == 1 << 20),
            "{r:?}"
        );
        // Without: stopped while streaming.
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
        e.include_contentsize(false).unwrap();
        for _ in 0..100 {
            e.write_all(&block).unwrap();
        }
        let unknown = e.finish().unwrap();
        assert!(unknown.len() < 100_000);
        let r = codec().decode(unknown, DecodedSize::Exact(1 << 20));
        assert!(matches!(r, Err(CodecError::TooLarge { .. })), "{r:?}");
    }

    #[test]
    fn lying_content_size_is_caught() {
        // Patch a 1-byte... content size field: frame says 3 bytes, holds 4.
        let mut enc = zstd::bulk::compress(b"abcd", 1).unwrap();
        // Frame header descriptor 0x20 = single segment, 1-byte FCS at [5].
        assert_eq!(enc[4] & 0xe0, 0x20);
        enc[5] = 3;
        let r = codec().decode(enc, DecodedSize::AtMost(100));
        assert!(matches!(r, Err(CodecError::Corrupt { .. })), "{r:?}");
    }

    #[test]
    fn window_caps() {
        assert_eq!(window_log_max(0), 23);
        assert_eq!(window_log_max(1 << 20), 23);
        assert_eq!(window_log_max((1 << 25) + 1), 26);
        assert_eq!(window_log_max(usize::MAX), 27);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(out) = codec().decode(data, DecodedSize::AtMost(4096)) {
                prop_assert!(out.len() <= 4096);
            }
        }

        #[test]
        fn mutated_frames_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            stream in any::<bool>(),
        ) {
            let data = sample();
            let mut enc = if stream { streamed(&data, 3, false) } else { zstd::bulk::compress(&data, 3).unwrap() };
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
