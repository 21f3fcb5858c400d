//! numcodecs `lzma`: xz (or legacy `.lzma`) streams.
//!
//! numcodecs `LZMA` (Python's `lzma` module, on liblzma); zarr-python 3
//! writes it into Zarr v3 metadata as `numcodecs.lzma`.
//!
//! ```json
//! {"id": "lzma", "format": 1, "check": -1, "preset": null, "filters": null}
//! {"name": "numcodecs.lzma", "configuration": {"format": 1, "check": -1, "preset": null, "filters": null}}
//! ```
//!
//! `format` is Python's constant: 1 `FORMAT_XZ` (numcodecs' default), 2
//! `FORMAT_ALONE` (`.lzma`), 0 `FORMAT_AUTO` (either). `check` and
//! `preset` only matter to the writer: an xz stream names its own check
//! and filter chain. `filters` (a custom chain, which Python's
//! `decompress` accepts only with `FORMAT_RAW`, 3) is refused, and so is
//! format 3: raw streams carry no header and are not supported here.
//!
//! Decoding is liblzma itself (the `liblzma` crate, built from its bundled
//! xz sources), called as Python's `lzma.decompress` calls it: one stream
//! decoder after another, their outputs concatenated; after the first
//! stream, bytes that are not a valid stream end the data and are
//! ignored, while a stream that starts but stops short is an error, as is
//! an empty input. Every check an xz stream carries (CRC32, CRC64,
//! SHA-256) is verified.
//!
//! # Bounds
//!
//! Output goes into a buffer reserved for the expected size plus one byte
//! and never grown: a bomb stops there ([`CodecError::TooLarge`]). The
//! decoder's own memory is dominated by the dictionary the stream's header
//! asks for; liblzma refuses streams whose decoder would need more than
//! [`MEMLIMIT`] (every xz preset, `-9e` included, uses at most a 64 MiB
//! dictionary), so a forged header cannot make it allocate gigabytes.

use liblzma::stream::{Action, Error as LzmaError, Status, Stream};
use serde_json::Value;

use super::entry::{CodecEntry, Numcodecs};
use super::entry::{bounded_vec, finish};
use super::numeric::{config_int, config_object};
use super::{BytesToBytesCodec, CodecError, DecodedSize};

const NAME: &str = "lzma";

/// Most memory a stream's decoder may use: twice the largest preset
/// dictionary (64 MiB), room for liblzma's own tables.
pub const MEMLIMIT: u64 = 128 << 20;

/// numcodecs `lzma`; v3 `numcodecs.lzma`.
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Bytes(|c| Ok(Box::new(Lzma::from_v2(c)?))))),
    v3: None,
    hdf5: None,
};

/// The container, Python's `lzma.FORMAT_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `FORMAT_AUTO` (0): xz or `.lzma`, whichever the header says.
    Auto,
    /// `FORMAT_XZ` (1).
    Xz,
    /// `FORMAT_ALONE` (2): the legacy `.lzma` container.
    Alone,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lzma {
    format: Format,
}

impl Lzma {
    pub fn new(format: Format) -> Self {
        Lzma { format }
    }

    /// From the numcodecs object.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let format = match config_int(NAME, config, "format")? {
            None | Some(1) => Format::Xz,
            Some(0) => Format::Auto,
            Some(2) => Format::Alone,
            Some(3) => {
                return Err(CodecError::config(
                    NAME,
                    "format 3 (raw LZMA streams, no header) is not supported",
                ));
            }
            Some(f) => return Err(CodecError::config(NAME, format!("unknown format {f}"))),
        };
        match config_object(NAME, config)?.get("filters") {
            None | Some(Value::Null) => {}
            Some(f) => {
                return Err(CodecError::config(
                    NAME,
                    format!("a custom \"filters\" chain is not supported: {f}"),
                ));
            }
        }
        // Checked for sense only: they do not change decoding.
        config_int(NAME, config, "check")?;
        config_int(NAME, config, "preset")?;
        Ok(Lzma::new(format))
    }

    pub fn format(&self) -> Format {
        self.format
    }

    fn decoder(&self) -> Result<Stream, LzmaError> {
        match self.format {
            Format::Xz => Stream::new_stream_decoder(MEMLIMIT, 0),
            Format::Auto => Stream::new_auto_decoder(MEMLIMIT, 0),
            Format::Alone => Stream::new_lzma_decoder(MEMLIMIT),
        }
    }

    /// Decode the stream at the start of `input`, appending to `out`
    /// (never past `limit` bytes in all); returns the input it used.
    fn decode_stream(
        &self,
        input: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<usize, StreamError> {
        let mut d = self.decoder().map_err(StreamError::Lzma)?;
        loop {
            let (used, produced) = (d.total_in(), d.total_out());
            // `total_in` never exceeds the input it was given.
            let rest = &input[used as usize..];
            let status = d
                .process_vec(rest, out, Action::Run)
                .map_err(StreamError::Lzma)?;
            if out.len() > limit {
                return Err(StreamError::TooLarge);
            }
            if let Status::StreamEnd = status {
                return Ok(d.total_in() as usize);
            }
            if (d.total_in(), d.total_out()) == (used, produced) {
                // No progress: the input is used up, or the output buffer
                // (reserved for limit + 1 bytes) is full.
                return Err(if out.len() == out.capacity() {
                    StreamError::TooLarge
                } else {
                    StreamError::Truncated
                });
            }
        }
    }
}

/// How decoding one stream failed.
enum StreamError {
    Lzma(LzmaError),
    Truncated,
    TooLarge,
}

impl BytesToBytesCodec for Lzma {
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
        loop {
            let mark = out.len();
            match self.decode_stream(rest, &mut out, limit) {
                Ok(used) => rest = &rest[used..],
                // Python drops what follows the first stream when it is
                // not a stream.
                Err(StreamError::Lzma(_)) if !first => {
                    out.truncate(mark);
                    break;
                }
                Err(StreamError::Lzma(LzmaError::MemLimit)) => {
                    return Err(CodecError::corrupt(
                        NAME,
                        format!(
                            "the stream's decoder needs more than {} MiB",
                            MEMLIMIT >> 20
                        ),
                    ));
                }
                Err(StreamError::Lzma(e)) => return Err(CodecError::corrupt(NAME, e.to_string())),
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
            if rest.is_empty() {
                break;
            }
        }
        size.check(NAME, out.len())?;
        Ok(finish(out, size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use liblzma::stream::{Check, LzmaOptions};
    use proptest::prelude::*;
    use serde_json::json;

    fn xz(data: &[u8], preset: u32) -> Vec<u8> {
        let mut s = Stream::new_easy_encoder(preset, Check::Crc64).unwrap();
        let mut out = Vec::with_capacity(data.len() + 1024);
        let st = s.process_vec(data, &mut out, Action::Finish).unwrap();
        assert!(matches!(st, Status::StreamEnd));
        out
    }

    fn alone(data: &[u8]) -> Vec<u8> {
        let opts = LzmaOptions::new_preset(6).unwrap();
        let mut s = Stream::new_lzma_encoder(&opts).unwrap();
        let mut out = Vec::with_capacity(data.len() + 1024);
        let st = s.process_vec(data, &mut out, Action::Finish).unwrap();
        assert!(matches!(st, Status::StreamEnd));
        out
    }

    fn sample() -> Vec<u8> {
        (0..10_000u32)
            .flat_map(|i| (i / 11).to_le_bytes())
            .collect()
    }

    fn codec() -> Lzma {
        Lzma::from_v2(
            &json!({"id": "lzma", "format": 1, "check": -1, "preset": null, "filters": null}),
        )
        .unwrap()
    }

    #[test]
    fn formats() {
        let data = sample();
        let x = xz(&data, 6);
        let a = alone(&data);
        for size in [DecodedSize::Exact(data.len()), DecodedSize::AtMost(1 << 20)] {
            assert_eq!(codec().decode(x.clone(), size).unwrap(), data);
            let auto = Lzma::from_v2(&json!({"id": "lzma", "format": 0})).unwrap();
            assert_eq!(auto.decode(x.clone(), size).unwrap(), data);
            assert_eq!(auto.decode(a.clone(), size).unwrap(), data);
            let al = Lzma::from_v2(&json!({"id": "lzma", "format": 2})).unwrap();
            assert_eq!(al.format(), Format::Alone);
            assert_eq!(al.decode(a.clone(), size).unwrap(), data);
            assert!(al.decode(x.clone(), size).is_err());
        }
        assert!(codec().decode(a, DecodedSize::AtMost(1 << 20)).is_err());
        assert_eq!(
            codec().decode(xz(b"", 1), DecodedSize::Exact(0)).unwrap(),
            b""
        );
        assert!(matches!(
            codec().decode(vec![], DecodedSize::Exact(0)),
            Err(CodecError::Corrupt { .. })
        ));
    }

    #[test]
    fn configs() {
        assert_eq!(
            Lzma::from_v2(&json!({"id": "lzma"})).unwrap().format(),
            Format::Xz
        );
        for bad in [
            json!({"id": "lzma", "format": 3, "filters": [{"id": 33}]}),
            json!({"id": "lzma", "format": 1, "filters": [{"id": 33}]}),
            json!({"id": "lzma", "format": 7}),
            json!({"id": "lzma", "format": "xz"}),
            json!({"id": "lzma", "preset": "x"}),
        ] {
            assert!(
                matches!(Lzma::from_v2(&bad), Err(CodecError::Config { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn concatenation_and_trailing_bytes() {
        let mut two = xz(b"abc", 1);
        two.extend(xz(b"def", 1));
        assert_eq!(
            codec().decode(two.clone(), DecodedSize::Exact(6)).unwrap(),
            b"abcdef"
        );
        // xz stream padding and junk are not streams: ignored, as Python.
        let mut padded = two.clone();
        padded.extend([0u8; 8]);
        padded.extend(b"junk");
        assert_eq!(
            codec().decode(padded, DecodedSize::Exact(6)).unwrap(),
            b"abcdef"
        );
        let second = xz(b"def", 1);
        let mut cut = xz(b"abc", 1);
        cut.extend(&second[..second.len() - 4]);
        assert!(matches!(
            codec().decode(cut, DecodedSize::AtMost(100)),
            Err(CodecError::Corrupt { .. })
        ));
    }

    #[test]
    fn corrupt_truncated_and_wrong_size() {
        let data = sample();
        let enc = xz(&data, 6);
        for cut in [1, 6, 12, enc.len() / 2, enc.len() - 1] {
            let r = codec().decode(enc[..cut].to_vec(), DecodedSize::Exact(data.len()));
            assert!(
                matches!(r, Err(CodecError::Corrupt { .. })),
                "cut {cut}: {r:?}"
            );
        }
        let mut bad = enc.clone();
        let n = bad.len();
        bad[n / 2] ^= 0x40;
        assert!(codec().decode(bad, DecodedSize::Exact(data.len())).is_err());
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
        // 8 MiB of zeros in about a kilobyte, against a 64 KiB limit.
        let zeros = vec![0u8; 8 << 20];
        let enc = xz(&zeros, 1);
        assert!(enc.len() < 10_000, "{}", enc.len());
        let r = codec().decode(enc, DecodedSize::AtMost(64 << 10));
        assert!(
            matches!(r, Err(CodecError::TooLarge { limit, .. }) if limit == 64 << 10),
            "{r:?}"
        );
    }

    #[test]
    fn huge_dictionary_is_refused() {
        // A .lzma header asking for a 1.5 GiB dictionary.
        let mut a = alone(b"abc");
        a[1..5].copy_from_slice(&(1536u32 << 20).to_le_bytes());
        let al = Lzma::new(Format::Alone);
        let r = al.decode(a, DecodedSize::AtMost(100));
        assert!(
            matches!(&r, Err(CodecError::Corrupt { detail, .. }) if detail.contains("MiB")),
            "{r:?}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            for c in [codec(), Lzma::new(Format::Auto), Lzma::new(Format::Alone)] {
                if let Ok(out) = c.decode(data.clone(), DecodedSize::AtMost(4096)) {
                    prop_assert!(out.len() <= 4096);
                }
            }
        }

        #[test]
        fn mutated_streams_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let data = sample();
            let mut enc = xz(&data[..4000], 1);
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
