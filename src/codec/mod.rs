//! The codec chain: how a stored chunk becomes a decoded array.
//!
//! Modelled on the Zarr v3 spec (and zarrs): three families of codecs,
//!
//! ```text
//!  decoded array ──[array→array]*──> array ──[array→bytes]──> bytes ──[bytes→bytes]*──> stored
//!  (transpose)                              (bytes, endian)          (gzip, zstd, blosc, crc32c)
//! ```
//!
//! and decoding runs the chain backwards. Zarr v2 maps onto the same chain:
//! `order: "F"` is a transpose with reversed axes, the dtype's byte order is
//! the `bytes` codec, and the numcodecs filters and compressor are
//! bytes→bytes codecs that know their own element types (they operate on
//! the flat buffer in memory order, exactly as numcodecs does). In Zarr v3
//! zarr-python writes the same filters as array→array codecs
//! (`numcodecs.delta`...), which [`array_filter`] adapts.
//!
//! Every decoded buffer is in the machine's native byte order and C order.
//!
//! Sizes are checked at every step. Before decoding, the chain walks
//! forward from the chunk's known decoded size to compute the size every
//! intermediate buffer must have ([`DecodedSize`]); a compressor is told how
//! much it may produce and stops there, so a decompression bomb costs at
//! most one chunk's worth of memory, and a short or oversized result is an
//! error instead of wrong bytes.
//!
//! # Names
//!
//! Every codec is registered once in the [`registry`] under the names the
//! formats give it: its numcodecs id (Zarr v2, NCZarr, kerchunk, and
//! zarr-python's v3 `numcodecs.<id>`), its Zarr v3 spec name, and its HDF5
//! filter id with netcdf-c's conversion between HDF5 parameter vectors
//! and codec JSON. [`from_v2`], [`from_v3`] and [`v2_chain`] are the
//! registry's, re-exported here; an unknown codec is an error naming it.
//! `docs/CODECS.md` tables them all.
//!
//! Adding a codec is one file implementing one of the three traits (or
//! [`array_filter::ArrayFilter`] for a numcodecs filter) with a `pub const
//! ENTRY` (an [`entry::CodecEntry`]), its `pub mod` line here, and one line
//! in [`registry::CODECS`].
//!
//! The files of this folder import one another in a line, never in a
//! circle (`tests/it/layers.rs`): this file holds the words every codec
//! shares (the traits, [`CodecError`], [`CodecChain`]) and uses no codec
//! file but for a re-export and [`hdf5_plugin`]'s error; a codec file uses
//! those words and [`entry`] (what it declares about itself, and the shared
//! helpers), never the [`registry`], which alone uses every codec file.

use std::fmt::Debug;

use serde_json::Value;

use crate::dtype::DataType;

pub mod adler32;
pub mod array_filter;
pub mod astype;
pub mod bitround;
pub mod bitshuffle;
pub mod blosc;
pub mod bytes;
pub mod bz2;
pub mod categorize;
pub mod checksum32;
pub mod crc32;
pub mod crc32c;
pub mod delta;
pub mod entry;
pub mod fixedscaleoffset;
pub mod fletcher32;
pub mod gzip;
pub mod hdf5_lz4;
pub mod hdf5_plugin;
pub mod jenkins_lookup3;
pub mod lz4;
pub mod lzf;
pub mod lzma;
pub mod nbit;
pub mod numeric;
pub mod packbits;
pub mod pcodec;
pub mod quantize;
pub mod registry;
pub mod scaleoffset;
pub mod sharding;
pub mod shuffle;
pub mod szip;
pub mod transpose;
pub mod zfpy;
pub mod zlib;
pub mod zstd;

// Building codecs is the registry's job; the folder's front door names it.
pub use registry::{from_hdf5, from_v2, from_v3, hdf5_to_json, json_to_hdf5, v2_chain};

/// A failure to decode a chunk or to understand a codec's configuration.
/// The caller adds which file and chunk it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    #[error("{codec}: corrupt data: {detail}")]
    Corrupt { codec: &'static str, detail: String },
    #[error("{codec}: decoded to {actual} bytes, expected {expected}")]
    WrongSize {
        codec: &'static str,
        expected: usize,
        actual: usize,
    },
    #[error(
        "{codec}: decoded data exceeds the expected {limit} bytes (corrupt chunk or decompression bomb)"
    )]
    TooLarge { codec: &'static str, limit: usize },
    #[error("{codec}: checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        codec: &'static str,
        stored: u32,
        computed: u32,
    },
    #[error("invalid configuration for codec {codec}: {detail}")]
    Config { codec: String, detail: String },
    #[error("unsupported codec {0:?}")]
    Unknown(String),
    #[error("unsupported HDF5 filter {id}{}", known_as.map(|n| format!(" ({n})")).unwrap_or_default())]
    UnknownHdf5Filter {
        id: u32,
        /// The filter's registered name, when slabfs knows it.
        known_as: Option<&'static str>,
    },
    #[error("invalid codec chain: {0}")]
    Chain(String),
    /// A filter plugin failed ([`hdf5_plugin`]).
    #[error(transparent)]
    Plugin(#[from] hdf5_plugin::PluginError),
    /// A filter that cannot be decoded here, and why (naming the filter
    /// and where its plugin was looked for).
    #[error("{0}")]
    Unavailable(String),
}

impl CodecError {
    pub fn corrupt(codec: &'static str, detail: impl Into<String>) -> Self {
        CodecError::Corrupt {
            codec,
            detail: detail.into(),
        }
    }

    pub fn config(codec: impl Into<String>, detail: impl Into<String>) -> Self {
        CodecError::Config {
            codec: codec.into(),
            detail: detail.into(),
        }
    }
}

/// Largest decoded chunk slabfs accepts: a chunk is decoded whole into
/// memory, so a chunk shape beyond this is refused at open time
/// (`formats::chunked`) rather than exhausting memory on the first read,
/// and a shard's index beyond it is refused by [`sharding::index_layout`].
pub const MAX_CHUNK_BYTES: u64 = 4 << 30;

/// The shape and element type of a chunk at some point of the chain, with
/// its fill value (native byte order, one element).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRepr {
    pub shape: Vec<u64>,
    pub dtype: DataType,
    pub fill: Vec<u8>,
}

impl ChunkRepr {
    pub fn num_elements(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// Size in bytes of the whole chunk, or None if it does not fit a usize.
    pub fn nbytes(&self) -> Option<usize> {
        let n = self.num_elements()?.checked_mul(self.dtype.size() as u64)?;
        usize::try_from(n).ok()
    }
}

/// What a decoder must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodedSize {
    /// Exactly this many bytes; anything else is an error.
    Exact(usize),
    /// Unknown, but never more than this many bytes.
    AtMost(usize),
}

impl DecodedSize {
    /// The most bytes a decoder may produce; it must stop and fail past this.
    pub fn limit(self) -> usize {
        match self {
            DecodedSize::Exact(n) | DecodedSize::AtMost(n) => n,
        }
    }

    /// Check a finished decode's length against the expectation.
    pub fn check(self, codec: &'static str, actual: usize) -> Result<(), CodecError> {
        match self {
            DecodedSize::Exact(expected) if actual != expected => Err(CodecError::WrongSize {
                codec,
                expected,
                actual,
            }),
            DecodedSize::AtMost(limit) if actual > limit => {
                Err(CodecError::TooLarge { codec, limit })
            }
            _ => Ok(()),
        }
    }
}

/// array → array: changes layout or type, e.g. `transpose`.
pub trait ArrayToArrayCodec: Send + Sync + Debug {
    fn name(&self) -> &'static str;
    /// The representation of this codec's output when encoding `decoded`.
    fn encoded_repr(&self, decoded: &ChunkRepr) -> Result<ChunkRepr, CodecError>;
    /// Undo the codec: `encoded` is a native-order C-order array of
    /// `encoded_repr`; return the same for `decoded_repr`.
    fn decode(
        &self,
        encoded: Vec<u8>,
        encoded_repr: &ChunkRepr,
        decoded_repr: &ChunkRepr,
    ) -> Result<Vec<u8>, CodecError>;
}

/// array → bytes: serialises an array, e.g. `bytes` (and later sharding).
pub trait ArrayToBytesCodec: Send + Sync + Debug {
    fn name(&self) -> &'static str;
    /// The serialised size of `decoded`, if fixed.
    fn encoded_size(&self, decoded: &ChunkRepr) -> Option<usize>;
    /// Deserialise into a native-order C-order array of `decoded`, whose
    /// length must be exactly `decoded.nbytes()`.
    fn decode(&self, encoded: Vec<u8>, decoded: &ChunkRepr) -> Result<Vec<u8>, CodecError>;
    /// Check, once at open time, that this codec can decode chunks of
    /// `decoded` (e.g. `bytes` needs an `endian` for multi-byte types).
    fn validate(&self, decoded: &ChunkRepr) -> Result<(), CodecError> {
        let _ = decoded;
        Ok(())
    }
    /// Whether [`decode_in_place`](Self::decode_in_place) works: the
    /// serialised form is the array's bytes up to byte order.
    fn supports_in_place(&self) -> bool {
        false
    }
    /// Deserialise `buf` (exactly `decoded.nbytes()` bytes) in place. Only
    /// called when [`supports_in_place`](Self::supports_in_place) is true.
    fn decode_in_place(&self, buf: &mut [u8], decoded: &ChunkRepr) -> Result<(), CodecError> {
        let _ = (buf, decoded);
        Err(CodecError::Chain(format!(
            "{} cannot decode in place",
            self.name()
        )))
    }
    /// When [`decode_in_place`](Self::decode_in_place) of `decoded` does
    /// nothing but reverse the bytes of every `unit`-byte group (`bytes` of
    /// a non-native byte order; its length check is the caller's, which
    /// has sized the buffer to `decoded`), that `unit`: a filter decoded
    /// just before may then swap as it writes
    /// ([`BytesToBytesCodec::decode_into_swapped`]) and save the chain a
    /// pass over the chunk. `None` otherwise.
    fn in_place_swap_unit(&self, decoded: &ChunkRepr) -> Option<usize> {
        let _ = decoded;
        None
    }
}

/// bytes → bytes: compressors, checksums, and numcodecs filters.
pub trait BytesToBytesCodec: Send + Sync + Debug {
    fn name(&self) -> &'static str;
    /// The encoded size of a `decoded_size`-byte input, if it is fixed
    /// (checksums, filters), or None (compressors).
    fn encoded_size(&self, decoded_size: usize) -> Option<usize>;
    /// Undo the codec, producing what `size` says and never allocating or
    /// producing more than `size.limit()` bytes.
    fn decode(&self, encoded: Vec<u8>, size: DecodedSize) -> Result<Vec<u8>, CodecError>;
    /// Undo the codec straight into `out`, whose length is the exact
    /// decoded size, without an intermediate buffer. `None` when this codec
    /// cannot for this input (then nothing was written and the caller uses
    /// [`decode`](Self::decode)); compressors that know their output size
    /// implement it.
    fn decode_into(&self, encoded: &[u8], out: &mut [u8]) -> Option<Result<(), CodecError>> {
        let _ = (encoded, out);
        None
    }
    /// Whether this is a filter that keeps the size and always decodes
    /// into a buffer ([`decode_into`](Self::decode_into) never `None`), so
    /// [`CodecChain::decode_into`] may decode a compressor over it through
    /// a scratch buffer without risking wasted work.
    fn is_size_preserving_filter(&self) -> bool {
        false
    }
    /// [`decode_into`](Self::decode_into), and also reverse the bytes of
    /// every `unit`-byte group of `out`, in the same pass: `shuffle` with
    /// element size `unit` does both by reading its byte streams in reverse
    /// order. `None` when this codec cannot (nothing was written).
    fn decode_into_swapped(
        &self,
        encoded: &[u8],
        out: &mut [u8],
        unit: usize,
    ) -> Option<Result<(), CodecError>> {
        let _ = (encoded, out, unit);
        None
    }
}

/// Where [`CodecChain::decode_into`] gets the intermediate buffer of a
/// two-codec chain (a compressor's output, a filter's input): the caller
/// runs the closure with a buffer it may resize, and keeps that buffer for
/// the next chunk so a scan faults in no fresh pages. The read path lends
/// its buffer pool's per-thread scratch (`engine::buffers`, one cap and
/// counted in the stats); the codecs cannot reach that pool themselves,
/// engine and codec being peers, so the caller hands it down. A caller
/// without a pool passes [`fresh_scratch`].
pub type Scratch<'a> = &'a dyn Fn(&mut dyn FnMut(&mut Vec<u8>));

/// A [`Scratch`] that allocates a new buffer each time.
pub fn fresh_scratch(f: &mut dyn FnMut(&mut Vec<u8>)) {
    f(&mut Vec::new())
}

/// One codec of any family.
#[derive(Debug)]
pub enum Codec {
    ArrayToArray(Box<dyn ArrayToArrayCodec>),
    ArrayToBytes(Box<dyn ArrayToBytesCodec>),
    BytesToBytes(Box<dyn BytesToBytesCodec>),
}

/// A complete chain: array→array codecs, one array→bytes codec, bytes→bytes
/// codecs, in encoding order.
#[derive(Debug)]
pub struct CodecChain {
    array_to_array: Vec<Box<dyn ArrayToArrayCodec>>,
    array_to_bytes: Box<dyn ArrayToBytesCodec>,
    bytes_to_bytes: Vec<Box<dyn BytesToBytesCodec>>,
}

/// Bound on an intermediate buffer whose size cannot be predicted (only
/// when a size-changing codec such as a compressor is followed, in encoding
/// order, by another codec that needs a bound): the chunk's decoded size
/// twice over plus 64 KiB covers every real compressor's worst-case
/// expansion while keeping a bomb's cost within the same order as one chunk.
pub(crate) fn unknown_size_bound(decoded_nbytes: usize) -> usize {
    decoded_nbytes.saturating_mul(2).saturating_add(64 << 10)
}

/// Undo the bytes→bytes `codecs` (in encoding order) on `buf`, last to
/// first, each checked against the size its input had when encoding:
/// known from `first` (the first codec's input, when known) through the
/// codecs that fix their output size, else at most
/// [`unknown_size_bound`]`(nbytes)` (`nbytes`: the decoded chunk's size).
pub(crate) fn undo_bytes_to_bytes<'a, C>(
    codecs: &[C],
    first: Option<usize>,
    nbytes: usize,
    mut buf: Vec<u8>,
) -> Result<Vec<u8>, CodecError>
where
    C: std::ops::Deref<Target = dyn BytesToBytesCodec + 'a>,
{
    // sizes[j] = size of the input to codecs[j] when encoding.
    let mut sizes = Vec::with_capacity(codecs.len() + 1);
    sizes.push(first);
    for c in codecs {
        let next = sizes
            .last()
            .copied()
            .flatten()
            .and_then(|s| c.encoded_size(s));
        sizes.push(next);
    }
    for (j, c) in codecs.iter().enumerate().rev() {
        let size = match sizes[j] {
            Some(n) => DecodedSize::Exact(n),
            None => DecodedSize::AtMost(unknown_size_bound(nbytes)),
        };
        buf = c.decode(buf, size)?;
        size.check(c.name(), buf.len())?;
    }
    Ok(buf)
}

impl CodecChain {
    /// Build a chain from codecs in encoding order, checking the families
    /// come in the order the spec requires.
    pub fn new(codecs: Vec<Codec>) -> Result<Self, CodecError> {
        let mut array_to_array = Vec::new();
        let mut array_to_bytes: Option<Box<dyn ArrayToBytesCodec>> = None;
        let mut bytes_to_bytes = Vec::new();
        for codec in codecs {
            match codec {
                Codec::ArrayToArray(c) => {
                    if array_to_bytes.is_some() {
                        return Err(CodecError::Chain(format!(
                            "array->array codec {} after the array->bytes codec",
                            c.name()
                        )));
                    }
                    array_to_array.push(c);
                }
                Codec::ArrayToBytes(c) => {
                    if let Some(prev) = &array_to_bytes {
                        return Err(CodecError::Chain(format!(
                            "two array->bytes codecs: {} and {}",
                            prev.name(),
                            c.name()
                        )));
                    }
                    array_to_bytes = Some(c);
                }
                Codec::BytesToBytes(c) => {
                    if array_to_bytes.is_none() {
                        return Err(CodecError::Chain(format!(
                            "bytes->bytes codec {} before the array->bytes codec",
                            c.name()
                        )));
                    }
                    bytes_to_bytes.push(c);
                }
            }
        }
        let array_to_bytes = array_to_bytes
            .ok_or_else(|| CodecError::Chain("no array->bytes codec (such as \"bytes\")".into()))?;
        Ok(CodecChain {
            array_to_array,
            array_to_bytes,
            bytes_to_bytes,
        })
    }

    /// Names of the codecs in encoding order, for sidecars and logs.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.array_to_array.iter().map(|c| c.name()).collect();
        v.push(self.array_to_bytes.name());
        v.extend(self.bytes_to_bytes.iter().map(|c| c.name()));
        v
    }

    /// Check that the chain accepts chunks of `repr` (transpose orders
    /// match the rank, sizes fit memory...). Called once at open time so a
    /// misconfigured array fails to load instead of failing every read.
    pub fn validate(&self, repr: &ChunkRepr) -> Result<(), CodecError> {
        let reprs = self.reprs(repr)?;
        self.array_to_bytes
            .validate(reprs.last().expect("non-empty"))
    }

    /// The stored size of a chunk of `repr` when every codec's output
    /// size is fixed (no compressor), such as a shard index's chain.
    pub fn encoded_size(&self, repr: &ChunkRepr) -> Option<usize> {
        let reprs = self.reprs(repr).ok()?;
        let mut size = self.array_to_bytes.encoded_size(reprs.last()?)?;
        for c in &self.bytes_to_bytes {
            size = c.encoded_size(size)?;
        }
        Some(size)
    }

    fn reprs(&self, decoded: &ChunkRepr) -> Result<Vec<ChunkRepr>, CodecError> {
        let mut reprs = vec![decoded.clone()];
        for c in &self.array_to_array {
            let next = c.encoded_repr(reprs.last().expect("non-empty"))?;
            reprs.push(next);
        }
        for r in &reprs {
            r.nbytes().ok_or_else(|| {
                CodecError::Chain(format!("chunk shape {:?} is too large", r.shape))
            })?;
        }
        Ok(reprs)
    }

    /// Decode one stored chunk straight into `out` (exactly
    /// `repr.nbytes()` bytes) when the chain allows it: no array->array
    /// codec, an array->bytes codec that works in place (`bytes`), and
    /// bytes->bytes codecs that can write into a given buffer: one (a
    /// compressor), or a compressor over a size-preserving filter such as
    /// `shuffle`, decoded through the caller's `scratch` buffer, reused
    /// from chunk to chunk. A filter that can also do `bytes`' swap
    /// to native order (`shuffle` of a big-endian array) does it as it
    /// writes. This is the fast path of large reads:
    /// no allocation (after a thread's first chunk) and no extra copy per
    /// chunk. `None` when the chain cannot (nothing was written to `out`;
    /// use [`decode`](Self::decode)).
    pub fn decode_into(
        &self,
        encoded: &[u8],
        repr: &ChunkRepr,
        out: &mut [u8],
        scratch: Scratch<'_>,
    ) -> Option<Result<(), CodecError>> {
        if !self.array_to_array.is_empty()
            || !self.array_to_bytes.supports_in_place()
            || repr.nbytes() != Some(out.len())
        {
            return None;
        }
        // Set when the filter also did the array->bytes codec's byte swap.
        let mut swapped = false;
        let decoded = match self.bytes_to_bytes.as_slice() {
            [c] => c.decode_into(encoded, out)?,
            [inner, outer] if inner.is_size_preserving_filter() => {
                let mut decoded = None;
                scratch(&mut |scratch| {
                    if scratch.len() != out.len() {
                        scratch.resize(out.len(), 0);
                    }
                    decoded = match outer.decode_into(encoded, scratch) {
                        None => None,
                        Some(Ok(())) => {
                            let unit = self.array_to_bytes.in_place_swap_unit(repr);
                            match unit.and_then(|u| inner.decode_into_swapped(scratch, out, u)) {
                                Some(r) => {
                                    swapped = true;
                                    Some(r)
                                }
                                None => inner.decode_into(scratch, out),
                            }
                        }
                        Some(Err(e)) => Some(Err(e)),
                    };
                });
                decoded?
            }
            [] if encoded.len() == out.len() => {
                out.copy_from_slice(encoded);
                Ok(())
            }
            [] => Err(CodecError::WrongSize {
                codec: self.array_to_bytes.name(),
                expected: out.len(),
                actual: encoded.len(),
            }),
            _ => return None,
        };
        Some(decoded.and_then(|()| {
            if swapped {
                Ok(())
            } else {
                self.array_to_bytes.decode_in_place(out, repr)
            }
        }))
    }

    /// Decode one stored chunk into a native-order C-order array of `repr`.
    pub fn decode(&self, encoded: Vec<u8>, repr: &ChunkRepr) -> Result<Vec<u8>, CodecError> {
        let reprs = self.reprs(repr)?;
        let array_repr = reprs.last().expect("non-empty");
        let total = repr.nbytes().expect("checked by reprs");

        let first = self.array_to_bytes.encoded_size(array_repr);
        let mut buf = undo_bytes_to_bytes(&self.bytes_to_bytes, first, total, encoded)?;
        if let Some(expected) = first
            && buf.len() != expected
        {
            return Err(CodecError::WrongSize {
                codec: self.array_to_bytes.name(),
                expected,
                actual: buf.len(),
            });
        }
        buf = self.array_to_bytes.decode(buf, array_repr)?;
        for (i, c) in self.array_to_array.iter().enumerate().rev() {
            buf = c.decode(buf, &reprs[i + 1], &reprs[i])?;
        }
        DecodedSize::Exact(total).check("codec chain", buf.len())?;
        Ok(buf)
    }
}

/// The `name` and `configuration` of a Zarr v3 extension object, which is
/// either `{"name": ..., "configuration": {...}}` or a bare name string.
/// Returns `(name, configuration, must_understand)`.
pub fn v3_extension(value: &Value) -> Result<(&str, Option<&Value>, bool), String> {
    match value {
        Value::String(name) => Ok((name, None, true)),
        Value::Object(obj) => {
            let name = obj
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("extension object without a \"name\": {value}"))?;
            let must = obj
                .get("must_understand")
                .map(|v| v.as_bool().unwrap_or(true))
                .unwrap_or(true);
            Ok((name, obj.get("configuration"), must))
        }
        other => Err(format!("expected an extension object, found {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{DataType, Endian};
    use serde_json::json;
    use std::io::Write;

    /// `values` (big-endian u32) shuffled then compressed with zlib or
    /// zstd, as numcodecs' `Shuffle(4)` then `Zlib`/`Zstd` write them.
    fn encoded(values: &[u32], zstd: bool) -> Vec<u8> {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        let n = values.len();
        let mut shuffled = vec![0u8; raw.len()];
        for i in 0..n {
            for j in 0..4 {
                shuffled[j * n + i] = raw[i * 4 + j];
            }
        }
        if zstd {
            ::zstd::bulk::compress(&shuffled, 3).unwrap()
        } else {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
            e.write_all(&shuffled).unwrap();
            e.finish().unwrap()
        }
    }

    #[test]
    fn shuffle_under_a_compressor_decodes_into_the_destination() {
        let values: Vec<u32> = (0..1000u32)
            .map(|i| i.wrapping_mul(2654435761) % 100_003)
            .collect();
        let repr = ChunkRepr {
            shape: vec![1000],
            dtype: DataType::UInt32,
            fill: vec![0; 4],
        };
        let want: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        for zstd in [false, true] {
            let compressor = match zstd {
                true => json!({"id": "zstd", "level": 3}),
                false => json!({"id": "zlib", "level": 6}),
            };
            let shuffle = [json!({"id": "shuffle", "elementsize": 4})];
            let chain = v2_chain(1, false, Endian::Big, &shuffle, Some(&compressor)).unwrap();
            let enc = encoded(&values, zstd);
            let mut out = vec![0u8; 4000];
            chain
                .decode_into(&enc, &repr, &mut out, &fresh_scratch)
                .unwrap()
                .unwrap();
            assert_eq!(out, want, "zstd {zstd}");
            assert_eq!(chain.decode(enc.clone(), &repr).unwrap(), want);
            // A damaged or short stream is an error, not wrong bytes.
            let cut = &enc[..enc.len() / 2];
            assert!(matches!(
                chain.decode_into(cut, &repr, &mut out, &fresh_scratch),
                Some(Err(_))
            ));
            let mut small = vec![0u8; 3996];
            let r3996 = ChunkRepr {
                shape: vec![999],
                ..repr.clone()
            };
            assert!(matches!(
                chain.decode_into(&enc, &r3996, &mut small, &fresh_scratch),
                Some(Err(_))
            ));
        }
    }

    /// The fused unshuffle + swap to native order (big-endian stored) and
    /// the plain unshuffle (native stored) give the same native bytes as
    /// the step-by-step `decode`, for 2-, 4- and 8-byte types, at lengths
    /// on and off the 16-element SIMD blocks.
    #[test]
    fn shuffled_chunks_of_either_byte_order_decode_to_native() {
        for (dtype, size) in [
            (DataType::UInt16, 2usize),
            (DataType::Float32, 4),
            (DataType::Float64, 8),
        ] {
            for n in [1usize, 15, 16, 17, 1000] {
                for endian in [Endian::Big, Endian::Little] {
                    // Native bytes: element i's byte j is a function of both.
                    let native: Vec<u8> = (0..n * size)
                        .map(|k| ((k / size) as u8).wrapping_mul(13) ^ ((k % size) as u8) << 5)
                        .collect();
                    let mut stored = native.clone();
                    if endian != Endian::NATIVE {
                        stored.chunks_exact_mut(size).for_each(|e| e.reverse());
                    }
                    let mut shuffled = vec![0u8; stored.len()];
                    for i in 0..n {
                        for j in 0..size {
                            shuffled[j * n + i] = stored[i * size + j];
                        }
                    }
                    let enc = ::zstd::bulk::compress(&shuffled, 1).unwrap();
                    let repr = ChunkRepr {
                        shape: vec![n as u64],
                        dtype: dtype.clone(),
                        fill: vec![0; size],
                    };
                    let shuffle = [json!({"id": "shuffle", "elementsize": size})];
                    let zstd = json!({"id": "zstd", "level": 1});
                    let chain = v2_chain(1, false, endian, &shuffle, Some(&zstd)).unwrap();
                    let mut out = vec![0u8; n * size];
                    chain
                        .decode_into(&enc, &repr, &mut out, &fresh_scratch)
                        .unwrap()
                        .unwrap();
                    assert_eq!(out, native, "{dtype} n {n} {endian:?}");
                    assert_eq!(chain.decode(enc, &repr).unwrap(), native);
                }
            }
        }
    }
}
