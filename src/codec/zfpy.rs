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
//! # The decoder
//!
//! Decoding is [`zfp-rs`](https://github.com/LDeakin/zfp-rs) (by the
//! author of zarrs): a pure-Rust zfp whose output is bit-for-bit that of
//! LLNL's C library on little-endian machines, checked against it by its
//! own test suite, and which never panics and never reads past its buffer
//! (a stream that ends early is an error, `Truncated`). So it is part of
//! the default build: no C compiler, no bindgen. (The C library through
//! `zfp-sys-cc` needed libclang at build time, which a fresh machine does
//! not have.)
//!
//! The header is read first; its type must be the array's and its
//! dimensions must hold exactly the chunk's element count before the
//! output (exactly the chunk) is allocated, so a hostile header cannot
//! make it allocate more.

use serde_json::Value;

use super::entry::{CodecEntry, Numcodecs};
use super::{ArrayToBytesCodec, ChunkRepr, CodecError};
use crate::dtype::DataType;

pub const NAME: &str = "zfpy";

/// numcodecs `zfpy`; v3 `numcodecs.zfpy` (array→bytes in both).
pub const ENTRY: CodecEntry = CodecEntry {
    numcodecs: Some((NAME, Numcodecs::Array(|c| Ok(Box::new(Zfpy::from_v2(c)?))))),
    v3: None,
    hdf5: None,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Zfpy {
    mode: Option<i64>,
}

impl Zfpy {
    /// From the numcodecs object `{"id": "zfpy", "mode": m, ...}`: the
    /// keys are the writer's, `mode` only checked to be zfpy's 1 to 5 if
    /// given.
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
        decode(&encoded, &decoded.dtype, n)
    }
}

/// Decode a zfp stream with a full header into `n` elements of `dtype`,
/// native order.
fn decode(encoded: &[u8], dtype: &DataType, n: usize) -> Result<Vec<u8>, CodecError> {
    use zfp_rs::{ZfpBitStream, ZfpHeaderMask, ZfpScalarType};
    let corrupt = |detail: String| CodecError::corrupt(NAME, detail);
    let mut stream =
        ZfpBitStream::from_bytes(encoded).map_err(|e| CodecError::corrupt(NAME, format!("{e}")))?;
    let header = stream
        .read_header(ZfpHeaderMask::FULL)
        .map_err(|e| corrupt(format!("{e}")))?;
    let (Some(meta), Some(config)) = (header.metadata, header.config) else {
        return Err(corrupt("the header has no field or mode".into()));
    };
    let want = match dtype {
        DataType::Int32 => ZfpScalarType::I32,
        DataType::Int64 => ZfpScalarType::I64,
        DataType::Float32 => ZfpScalarType::F32,
        DataType::Float64 => ZfpScalarType::F64,
        other => {
            return Err(CodecError::config(
                NAME,
                format!("no zfp type for {other:?}"),
            ));
        }
    };
    if meta.scalar_type != want {
        return Err(corrupt(format!(
            "stream holds zfp type {:?}, the array is {dtype:?}",
            meta.scalar_type
        )));
    }
    let ndims = meta.dims.iter().take_while(|&&d| d != 0).count();
    let count = meta.dims[..ndims]
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if ndims == 0 || count != Some(n) {
        return Err(corrupt(format!(
            "stream holds an array of {:?} values, the chunk has {n}",
            &meta.dims[..ndims]
        )));
    }
    let dims = meta.dims;
    match want {
        ZfpScalarType::I32 => decode_as::<i32>(&mut stream, &config, dims, ndims, n),
        ZfpScalarType::I64 => decode_as::<i64>(&mut stream, &config, dims, ndims, n),
        ZfpScalarType::F32 => decode_as::<f32>(&mut stream, &config, dims, ndims, n),
        _ => decode_as::<f64>(&mut stream, &config, dims, ndims, n),
    }
}

/// The elements zfp can hold, as native-order bytes.
trait Element: zfp_rs::ZfpScalar + Default + Clone {
    fn extend_ne(out: &mut Vec<u8>, values: &[Self]);
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn extend_ne(out: &mut Vec<u8>, values: &[Self]) {
                for v in values {
                    out.extend_from_slice(&v.to_ne_bytes());
                }
            }
        }
    )*};
}
element!(i32, i64, f32, f64);

/// Decode the rest of `stream` (after its header) as `n` values of `T`
/// in an array of `dims` (zfp's order, fastest first).
fn decode_as<T: Element>(
    stream: &mut zfp_rs::ZfpBitStream,
    config: &zfp_rs::ZfpConfig,
    dims: [usize; 4],
    ndims: usize,
    n: usize,
) -> Result<Vec<u8>, CodecError> {
    use zfp_rs::ZfpFieldMut;
    let mut values = vec![T::default(); n];
    let bad = |e: &dyn std::fmt::Display| CodecError::corrupt(NAME, format!("{e}"));
    {
        let mut field = match ndims {
            1 => ZfpFieldMut::new(&mut values, [dims[0]]),
            2 => ZfpFieldMut::new(&mut values, [dims[0], dims[1]]),
            3 => ZfpFieldMut::new(&mut values, [dims[0], dims[1], dims[2]]),
            _ => ZfpFieldMut::new(&mut values, dims),
        }
        .map_err(|e| bad(&e))?;
        stream.decompress(config, &mut field).map_err(|e| bad(&e))?;
    }
    let mut out = Vec::with_capacity(n * std::mem::size_of::<T>());
    T::extend_ne(&mut out, &values);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configuration_is_checked() {
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
        assert_eq!(r.unwrap().mode(), Some(4));
    }

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
