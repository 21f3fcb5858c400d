//! numcodecs filters, which are bytes→bytes codecs in Zarr v2 and
//! array→array codecs in Zarr v3.
//!
//! A numcodecs filter (`delta`, `fixedscaleoffset`, `astype`, `quantize`,
//! `bitround`, `packbits`, `categorize`) decodes a buffer of elements of
//! one type into elements of another, each type named by a NumPy typestr
//! with its own byte order. Zarr v2 runs it on the flat chunk buffer, in
//! memory order, between the compressor and the dtype: a bytes→bytes
//! codec here, exactly numcodecs' view.
//!
//! zarr-python 3 writes the same filters into Zarr v3 metadata as
//! `numcodecs.<id>` array→array codecs (`zarr/codecs/numcodecs/_codecs.py`):
//! before the array→bytes codec, on the chunk as an array whose data type
//! is the filter's encoded type (`resolve_metadata`). [`FilterArrayCodec`]
//! adapts a filter to that place in the chain. Two things differ from v2:
//!
//! - the chain hands array→array codecs native-order arrays, so the filter
//!   is rebuilt with every typestr in native order ([`ArrayFilter::native`]):
//!   values, not byte patterns, go through (zarr-python agrees whenever the
//!   `bytes` codec's byte order is the typestrs' own, which is how it
//!   writes them);
//! - the encoded array's shape and type must be known before decoding
//!   ([`ArrayFilter::encoded_repr`]), and the filter's decoded type must be
//!   the array's (a mismatch is a configuration error at open time).

use std::fmt::Debug;

use super::numeric::{Element, Prim, convert};
use super::{ArrayToArrayCodec, BytesToBytesCodec, ChunkRepr, CodecError, DecodedSize};
use crate::dtype::Endian;

/// A numcodecs filter: a bytes→bytes codec that also knows the array it
/// makes.
pub trait ArrayFilter: BytesToBytesCodec {
    /// The encoded array of a chunk of `decoded`: its shape, type and fill
    /// value (the decoded fill converted, as zarr-python casts it).
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError>;
    /// The same filter with every typestr in the machine's byte order.
    fn native(&self) -> Box<dyn ArrayFilter>;
}

/// A filter as the bytes→bytes codec Zarr v2 uses.
#[derive(Debug)]
pub struct FilterBytesCodec(Box<dyn ArrayFilter>);

impl FilterBytesCodec {
    pub fn new(filter: Box<dyn ArrayFilter>) -> Self {
        FilterBytesCodec(filter)
    }
}

impl BytesToBytesCodec for FilterBytesCodec {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn encoded_size(&self, decoded_size: usize) -> Option<usize> {
        self.0.encoded_size(decoded_size)
    }

    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
        self.0.decode(encoded, size)
    }

    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        self.0.decode_into(encoded, out)
    }
}

/// A filter as the array→array codec zarr-python's `numcodecs.<id>` is.
#[derive(Debug)]
pub struct FilterArrayCodec(Box<dyn ArrayFilter>);

impl FilterArrayCodec {
    pub fn new(filter: Box<dyn ArrayFilter>) -> Self {
        FilterArrayCodec(filter.native())
    }
}

impl ArrayToArrayCodec for FilterArrayCodec {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError> {
        self.0.encoded_repr(decoded)
    }

    fn decode(
        &self,
        encoded: Vec<u8>,
        _encoded_repr: &ChunkRepr,
        decoded_repr: &ChunkRepr,
    ) -> Result<Vec<u8>, CodecError> {
        let n = decoded_repr
            .nbytes()
            .ok_or_else(|| CodecError::Chain("chunk too large".into()))?;
        self.0.decode(encoded, DecodedSize::Exact(n))
    }
}

/// The encoded array of an element-wise filter from `dtype` (which must be
/// the array's type) to `astype`: same shape, the fill value converted.
pub(crate) fn retyped(
    codec: &'static str,
    decoded: &ChunkRepr,
    dtype: Element,
    astype: Element,
) -> Result<ChunkRepr, CodecError> {
    if Prim::of(&decoded.dtype) != Some(dtype.prim) {
        return Err(CodecError::config(
            codec,
            format!(
                "its dtype is {:?} but the array's data type is {:?}",
                dtype.prim.data_type(),
                decoded.dtype
            ),
        ));
    }
    let native = |p: Prim| Element {
        prim: p,
        endian: Endian::NATIVE,
    };
    let mut fill = vec![0u8; astype.size()];
    if decoded.fill.len() == dtype.size() {
        convert(
            native(dtype.prim),
            &decoded.fill,
            native(astype.prim),
            &mut fill,
        );
    }
    Ok(ChunkRepr {
        shape: decoded.shape.clone(),
        dtype: astype.prim.data_type(),
        fill,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::delta::Delta;
    use crate::dtype::DataType;

    fn el(s: &str) -> Element {
        Element::from_numpy("test", s).unwrap()
    }

    #[test]
    fn retyped_checks_the_type_and_converts_the_fill() {
        let decoded = ChunkRepr {
            shape: vec![2, 3],
            dtype: DataType::Int32,
            fill: 300i32.to_ne_bytes().to_vec(),
        };
        let r = retyped("t", &decoded, el(">i4"), el("<i2")).unwrap();
        assert_eq!(r.shape, [2, 3]);
        assert_eq!(r.dtype, DataType::Int16);
        assert_eq!(r.fill, 300i16.to_ne_bytes());
        let e = retyped("t", &decoded, el("<f4"), el("<i2")).unwrap_err();
        assert!(matches!(e, CodecError::Config { .. }), "{e}");
    }

    #[test]
    fn array_codec_decodes_native_values() {
        // A big-endian delta filter, used as an array->array codec, reads
        // and writes native-order values.
        let f = FilterArrayCodec::new(Box::new(Delta::new(el(">i4"), el(">i2"))));
        let decoded = ChunkRepr {
            shape: vec![3],
            dtype: DataType::Int32,
            fill: vec![0; 4],
        };
        let enc_repr = f.encoded_repr(&decoded).unwrap();
        assert_eq!(enc_repr.dtype, DataType::Int16);
        let enc: Vec<u8> = [5i16, 1, -2].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let out = f.decode(enc, &enc_repr, &decoded).unwrap();
        let want: Vec<u8> = [5i32, 6, 4].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(out, want);
        let bytes = FilterBytesCodec::new(Box::new(Delta::new(el(">i4"), el(">i2"))));
        assert_eq!(bytes.name(), "delta");
        assert_eq!(bytes.encoded_size(12), Some(6));
    }
}
