//! numcodecs `pcodec`: numbers compressed by pco, the "standalone" format.
//!
//! numcodecs `PCodec` (`numcodecs/pcodec.py`) hands the chunk, as an array
//! of its own element type, to the `pcodec` Python package
//! (`standalone.simple_compress`), which is built from the Rust crate
//! [pco](https://github.com/pcodec/pcodec) (format:
//! `docs/format.md` there). zarr-python 3 writes it into Zarr v3 metadata
//! as the array→bytes codec `numcodecs.pcodec`:
//!
//! ```json
//! {"id": "pcodec", "level": 8, "mode_spec": "auto", "delta_spec": "auto",
//!  "paging_spec": "equal_pages_up_to", "delta_encoding_order": null,
//!  "equal_pages_up_to": 262144}
//! {"name": "numcodecs.pcodec", "configuration": {"level": 8, ...}}
//! ```
//!
//! Every key only steers the writer; the stream says all a reader needs
//! (the number type, each chunk's count, its modes and deltas), so the
//! configuration is accepted as it comes.
//!
//! pco encodes numbers, not bytes: the element type must be one pco has
//! (numcodecs 0.16 writes u16, u32, u64, i16, i32, i64, f16, f32, f64;
//! pco 1 adds u8 and i8), and it is the array's own type, so this is an
//! array→bytes codec in place of `bytes` (in Zarr v2 too, where it is the
//! `compressor`: see [`super::v2_chain`]). The stream's number type must
//! match; a big-endian v2 dtype changes nothing (the values are stored,
//! not their bytes; numcodecs refuses to write one).
//!
//! # Bounds
//!
//! A standalone file is a header (with an untrusted size hint, ignored),
//! then chunks that each state their count of numbers. Each count is
//! checked against what is left of the chunk's known element count
//! before pco decodes it, so the output never grows past the chunk
//! (`TooLarge`), and a stream that ends early is `WrongSize`. Decoding
//! runs under `catch_unwind`: pco is safe Rust over a bit reader with
//! `unsafe` inside, and a panic on a corrupt chunk must be that chunk's
//! error, not the reader thread's end.
//!
//! The crate is pco 1, which reads every earlier format: what numcodecs
//! 0.16.6 writes through pcodec 0.3 (pco 0.4, format up to 4.0) and what
//! pcodec 1 writes (format 4.1).

use std::panic::{AssertUnwindSafe, catch_unwind};

use pco::data_types::Number;
use pco::standalone::{DecompressorItem, FileDecompressor};
use serde_json::Value;

use super::entry::{CodecEntry, Numcodecs};
use super::{ArrayToBytesCodec, ChunkRepr, CodecError};
use crate::dtype::DataType;

pub const NAME: &str = "pcodec";

/// numcodecs `pcodec`; v3 `numcodecs.pcodec` (array→bytes in both).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((
        NAME,
        Numcodecs::Array(|c| Ok(Box::new(Pcodec::from_v2(c)?))),
    )),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Pcodec {
    level: Option<i64>,
}

impl Pcodec {
    /// From the numcodecs object `{"id": "pcodec", ...}`; the keys are the
    /// writer's, only checked to be an object.
    pub fn from_v2(config: &Value) -> Result<Self, CodecError> {
        let object = config
            .as_object()
            .ok_or_else(|| CodecError::config(NAME, format!("expected an object: {config}")))?;
        Ok(Pcodec {
            level: object.get("level").and_then(Value::as_i64),
        })
    }

    /// The writer's compression level, if the metadata gave one.
    pub fn level(&self) -> Option<i64> {
        self.level
    }
}

/// Whether pco has a number type for `dtype`.
fn supported(dtype: &DataType) -> bool {
    matches!(
        dtype,
        DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
    )
}

impl ArrayToBytesCodec for Pcodec {
    fn name(&self) -> &'static str {
        NAME
    }

    fn encoded_size(&self, _decoded: &ChunkRepr) -> Option<usize> {
        None
    }

    fn validate(&self, decoded: &ChunkRepr) -> Result<(), CodecError> {
        if supported(&decoded.dtype) {
            Ok(())
        } else {
            Err(CodecError::config(
                NAME,
                format!(
                    "pco has no number type for {:?} (it has u8, u16, u32, u64, i8, i16, i32, i64, f16, f32, f64)",
                    decoded.dtype
                ),
            ))
        }
    }

    fn decode(&self, encoded: Vec<u8>, decoded: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        self.validate(decoded)?;
        let n = decoded
            .num_elements()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| CodecError::Chain("chunk too large".into()))?;
        match decoded.dtype {
            DataType::UInt8 => decode_as::<u8>(&encoded, n),
            DataType::UInt16 => decode_as::<u16>(&encoded, n),
            DataType::UInt32 => decode_as::<u32>(&encoded, n),
            DataType::UInt64 => decode_as::<u64>(&encoded, n),
            DataType::Int8 => decode_as::<i8>(&encoded, n),
            DataType::Int16 => decode_as::<i16>(&encoded, n),
            DataType::Int32 => decode_as::<i32>(&encoded, n),
            DataType::Int64 => decode_as::<i64>(&encoded, n),
            DataType::Float16 => decode_as::<half::f16>(&encoded, n),
            DataType::Float32 => decode_as::<f32>(&encoded, n),
            DataType::Float64 => decode_as::<f64>(&encoded, n),
            _ => unreachable!("validated"),
        }
    }
}

/// A pco number with its native-order bytes.
trait NativeBytes: Number {
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! native_bytes {
    ($($t:ty),*) => {$(
        impl NativeBytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
native_bytes!(u8, u16, u32, u64, i8, i16, i32, i64, half::f16, f32, f64);

/// Decode a standalone pco file of exactly `n` numbers of type `T` into
/// their native-order bytes.
fn decode_as<T: NativeBytes>(encoded: &[u8], n: usize) -> Result<Vec<u8>, CodecError> {
    let numbers = catch_unwind(AssertUnwindSafe(|| decode_numbers::<T>(encoded, n)))
        .map_err(|_| CodecError::corrupt(NAME, "pco panicked on this stream"))??;
    let mut out = Vec::new();
    out.try_reserve_exact(n * T::SIZE)
        .map_err(|_| CodecError::TooLarge {
            codec: NAME,
            limit: n * T::SIZE,
        })?;
    for x in numbers {
        x.put(&mut out);
    }
    Ok(out)
}

fn corrupt(e: pco::errors::PcoError) -> CodecError {
    CodecError::corrupt(NAME, e.to_string())
}

fn decode_numbers<T: NativeBytes>(encoded: &[u8], n: usize) -> Result<Vec<T>, CodecError> {
    let (file, mut src) = FileDecompressor::new(encoded).map_err(corrupt)?;
    let mut numbers: Vec<T> = Vec::new();
    numbers
        .try_reserve_exact(n)
        .map_err(|_| CodecError::TooLarge {
            codec: NAME,
            limit: n * T::SIZE,
        })?;
    numbers.resize(n, T::default());
    let mut done = 0;
    loop {
        match file.chunk_decompressor::<T, &[u8]>(src).map_err(corrupt)? {
            DecompressorItem::EndOfData(_) => break,
            DecompressorItem::Chunk(mut chunk) => {
                let m = chunk.n();
                if m > n - done {
                    return Err(CodecError::TooLarge {
                        codec: NAME,
                        limit: n * T::SIZE,
                    });
                }
                let progress = chunk.read(&mut numbers[done..done + m]).map_err(corrupt)?;
                if progress.n_processed != m || !progress.finished {
                    return Err(CodecError::corrupt(
                        NAME,
                        format!(
                            "a pco chunk of {m} numbers decoded {}",
                            progress.n_processed
                        ),
                    ));
                }
                done += m;
                src = chunk.into_src();
            }
        }
    }
    if done != n {
        return Err(CodecError::WrongSize {
            codec: NAME,
            expected: n * T::SIZE,
            actual: done * T::SIZE,
        });
    }
    Ok(numbers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repr(dtype: DataType, shape: &[u64]) -> ChunkRepr {
        ChunkRepr {
            shape: shape.to_vec(),
            fill: vec![0; dtype.size()],
            dtype,
        }
    }

    fn codec() -> Pcodec {
        Pcodec::from_v2(&json!({"id": "pcodec", "level": 8, "mode_spec": "auto"})).unwrap()
    }

    fn compress<T: Number>(values: &[T]) -> Vec<u8> {
        pco::standalone::simple_compress(values, &pco::ChunkConfig::default()).unwrap()
    }

    #[test]
    fn round_trip_every_type() {
        let v: Vec<i64> = (0..1000).map(|i| (i * i) % 977 - 400).collect();
        let i32s: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        let enc = compress(&i32s);
        let out = codec()
            .decode(enc, &repr(DataType::Int32, &[10, 100]))
            .unwrap();
        let want: Vec<u8> = i32s.iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert_eq!(out, want);
        let f: Vec<f32> = v.iter().map(|&x| x as f32 / 8.0).collect();
        let out = codec()
            .decode(compress(&f), &repr(DataType::Float32, &[1000]))
            .unwrap();
        assert_eq!(
            out,
            f.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()
        );
        let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f64(x as f64)).collect();
        let out = codec()
            .decode(compress(&h), &repr(DataType::Float16, &[1000]))
            .unwrap();
        assert_eq!(
            out,
            h.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn counts_and_types_must_match() {
        let v: Vec<u32> = (0..500).collect();
        let enc = compress(&v);
        // Fewer numbers than the chunk: the stream ended early.
        let e = codec()
            .decode(enc.clone(), &repr(DataType::UInt32, &[501]))
            .unwrap_err();
        assert!(matches!(e, CodecError::WrongSize { .. }), "{e}");
        // More numbers than the chunk holds: refused before decoding them.
        let e = codec()
            .decode(enc.clone(), &repr(DataType::UInt32, &[499]))
            .unwrap_err();
        assert!(matches!(e, CodecError::TooLarge { .. }), "{e}");
        // Another number type.
        let e = codec()
            .decode(enc.clone(), &repr(DataType::Int32, &[500]))
            .unwrap_err();
        assert!(matches!(e, CodecError::Corrupt { .. }), "{e}");
        // A type pco has not.
        let e = codec()
            .validate(&repr(DataType::Complex64, &[500]))
            .unwrap_err();
        assert!(matches!(e, CodecError::Config { .. }), "{e}");
        assert!(codec().validate(&repr(DataType::Int16, &[5])).is_ok());
    }

    /// A file of several pco chunks (numcodecs' writer makes one per
    /// 2^18 numbers), with a lying size hint.
    fn two_chunks(a: &[u16], b: &[u16], hint: usize) -> Vec<u8> {
        let config = pco::ChunkConfig::default();
        let file = pco::standalone::FileCompressor::default().with_n_hint(hint);
        let mut dst = file.write_header(Vec::new()).unwrap();
        for part in [a, b] {
            let mut chunk = file.chunk_compressor(part, &config).unwrap();
            dst = chunk.write(dst).unwrap();
        }
        file.write_footer(dst).unwrap()
    }

    #[test]
    fn several_chunks_fill_one_array_chunk() {
        let a: Vec<u16> = (0..300).collect();
        let b: Vec<u16> = (0..200).map(|i| 60_000 - i * 7).collect();
        let enc = two_chunks(&a, &b, usize::MAX >> 8);
        let out = codec()
            .decode(enc.clone(), &repr(DataType::UInt16, &[20, 25]))
            .unwrap();
        let want: Vec<u8> = a.iter().chain(&b).flat_map(|x| x.to_ne_bytes()).collect();
        assert_eq!(out, want);
        // The second chunk overflows a 400-number array chunk: refused
        // before it is decoded.
        let e = codec()
            .decode(enc, &repr(DataType::UInt16, &[400]))
            .unwrap_err();
        assert!(matches!(e, CodecError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn damaged_streams_are_errors() {
        let v: Vec<f64> = (0..600).map(|i| (i as f64 * 0.01).sin()).collect();
        let enc = compress(&v);
        let r = repr(DataType::Float64, &[600]);
        for cut in [0, 1, 4, 10, enc.len() / 2, enc.len() - 1] {
            assert!(
                codec().decode(enc[..cut].to_vec(), &r).is_err(),
                "cut {cut}"
            );
        }
        // Every byte flipped in turn: an error or some decoded numbers,
        // never a panic.
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x5a;
            let _ = codec().decode(bad, &r);
        }
    }
}
