//! What a codec file declares about itself, and the helpers every codec
//! file shares: the leaf the codec files and the [`registry`](super::registry)
//! both build on.
//!
//! A codec file names itself with a `pub const ENTRY: CodecEntry` (its
//! numcodecs id, Zarr v3 name and HDF5 filter, each with its constructor
//! or conversions) or a `pub const HDF5: Hdf5OnlyFilter`; the registry
//! lists those constants in its tables and looks codecs up in them. The
//! types live here, not in the registry, so that a codec file does not
//! import the registry that imports it: the files of `codec/` import one
//! another in a line (codec file -> `entry` -> `numeric`, `array_filter`),
//! never in a circle (`tests/it/layers.rs` checks it).
//!
//! The helpers are the small pieces several codec files repeat: reading an
//! HDF5 parameter or a numcodecs key as one (`hdf5_param`,
//! `json_param`), and the bounded output buffer of the streaming
//! decompressors (`bounded_vec`, `read_bounded`, `finish`: gzip,
//! zlib, zstd, bz2, lzma).

use std::io::Read;

use serde_json::Value;

use super::array_filter::ArrayFilter;
use super::numeric::config_int;
use super::{ArrayToBytesCodec, BytesToBytesCodec, Codec, CodecError, DecodedSize};

/// The prefix zarr-python 3 gives numcodecs ids in Zarr v3 metadata.
pub const NUMCODECS_PREFIX: &str = "numcodecs.";

pub type FromNumcodecs = fn(&Value) -> Result<Box<dyn BytesToBytesCodec>, CodecError>;
pub type FromNumcodecsFilter = fn(&Value) -> Result<Box<dyn ArrayFilter>, CodecError>;
pub type FromNumcodecsArray = fn(&Value) -> Result<Box<dyn ArrayToBytesCodec>, CodecError>;
pub type FromV3 = fn(&Value) -> Result<Codec, CodecError>;
pub type FromHdf5 = fn(&[u32]) -> Result<Box<dyn BytesToBytesCodec>, CodecError>;

/// How a codec is built from its numcodecs JSON (the whole object, `id`
/// included).
#[derive(Debug, Clone, Copy)]
pub enum Numcodecs {
    /// A compressor or checksum: bytes→bytes everywhere.
    Bytes(FromNumcodecs),
    /// A numcodecs filter: bytes→bytes on the flat buffer in Zarr v2,
    /// array→array as zarr-python's v3 `numcodecs.<id>`.
    Filter(FromNumcodecsFilter),
    /// A compressor that encodes the array, not its bytes (it needs the
    /// element type or the shape): array→bytes in place of `bytes`, in
    /// both Zarr versions.
    Array(FromNumcodecsArray),
}

/// A codec's HDF5 filter and netcdf-c's conversions for it.
#[derive(Debug, Clone, Copy)]
pub struct Hdf5Filter {
    /// The filter id registered with The HDF Group.
    pub id: u32,
    /// HDF5 parameters (`cd_values`) to the numcodecs JSON netcdf-c writes
    /// for them (`NCZ_hdf5_to_codec`).
    pub to_json: fn(&[u32]) -> Result<Value, CodecError>,
    /// numcodecs JSON to HDF5 parameters (`NCZ_codec_to_hdf5`, then the
    /// per-variable completion netcdf-c does where it can without the
    /// variable).
    pub to_params: fn(&Value) -> Result<Vec<u32>, CodecError>,
}

/// An HDF5 filter with no other name ([`HDF5_FILTERS`](super::registry::HDF5_FILTERS)).
#[derive(Debug, Clone, Copy)]
pub struct Hdf5OnlyFilter {
    /// The filter id registered with The HDF Group.
    pub id: u32,
    /// Its name, for messages and `docs/CODECS.md`.
    pub name: &'static str,
    /// Build the decoder from the filter's parameters (`cd_values`, as
    /// the writer's `set_local` completed them).
    pub build: FromHdf5,
}

/// One registered codec.
#[derive(Debug, Clone, Copy)]
pub struct CodecEntry {
    /// The numcodecs id and constructor (Zarr v2, NCZarr, kerchunk, and
    /// zarr-python's v3 `numcodecs.<id>`), if numcodecs has this codec.
    pub numcodecs: Option<(&'static str, Numcodecs)>,
    /// The Zarr v3 name with a spec-defined configuration, and its
    /// constructor (given the configuration, `{}` when absent).
    pub v3: Option<(&'static str, FromV3)>,
    /// The HDF5 filter whose output is this codec's stored form.
    pub hdf5: Option<Hdf5Filter>,
}

impl CodecEntry {
    /// The numcodecs id, if any.
    pub fn id(&self) -> Option<&'static str> {
        self.numcodecs.map(|(id, _)| id)
    }

    /// The spec's Zarr v3 name, if any.
    pub fn v3_name(&self) -> Option<&'static str> {
        self.v3.map(|(name, _)| name)
    }

    /// Every name this codec has in Zarr v3 metadata.
    pub fn v3_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.v3_name().into_iter().map(String::from).collect();
        names.extend(self.id().map(|id| format!("{NUMCODECS_PREFIX}{id}")));
        names
    }

    /// The codec's name for messages: its numcodecs id or v3 name.
    pub fn name(&self) -> &'static str {
        self.id().or(self.v3_name()).unwrap_or("?")
    }
}

/// Parameter `i` of an HDF5 filter, or an error naming the filter.
pub(crate) fn hdf5_param(codec: &str, params: &[u32], i: usize) -> Result<u32, CodecError> {
    params.get(i).copied().ok_or_else(|| {
        CodecError::config(
            codec,
            format!(
                "HDF5 parameters {params:?}: expected at least {} values",
                i + 1
            ),
        )
    })
}

/// An integer key of a numcodecs object as an HDF5 parameter: `default`
/// when absent, an error when negative or too large (netcdf-c refuses the
/// same: `jc.ival < 0 || jc.ival > NC_MAX_UINT`).
pub(crate) fn json_param(
    codec: &str,
    config: &Value,
    key: &str,
    default: Option<u32>,
) -> Result<u32, CodecError> {
    match config_int(codec, config, key)? {
        Some(v) => u32::try_from(v).map_err(|_| {
            CodecError::config(
                codec,
                format!("{key:?} {v} does not fit an HDF5 parameter (0..=4294967295)"),
            )
        }),
        None => default.ok_or_else(|| CodecError::config(codec, format!("missing {key:?}"))),
    }
}

// ---------------------------------------------------------------------
// The bounded output of the streaming decompressors.

/// An empty buffer with room for the most a decoder may produce plus the
/// one byte that proves it went past (reserved fallibly: a corrupt size
/// must not abort the process).
pub(crate) fn bounded_vec(codec: &'static str, size: DecodedSize) -> Result<Vec<u8>, CodecError> {
    let mut v = Vec::new();
    v.try_reserve_exact(size.limit().saturating_add(1))
        .map_err(|_| CodecError::TooLarge {
            codec,
            limit: size.limit(),
        })?;
    Ok(v)
}

/// Append everything `reader` yields to `out`, failing once `out` would
/// grow past `limit` bytes. I/O errors from a decoder are corrupt data.
pub(crate) fn read_bounded(
    codec: &'static str,
    reader: &mut impl Read,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let room = (limit - out.len().min(limit)) as u64;
    reader
        .take(room + 1)
        .read_to_end(out)
        .map_err(|e| CodecError::corrupt(codec, e.to_string()))?;
    if out.len() > limit {
        return Err(CodecError::TooLarge { codec, limit });
    }
    Ok(())
}

/// Give back the unused reservation of an `AtMost` decode (an `Exact`
/// one used all of it but the probe byte).
pub(crate) fn finish(mut out: Vec<u8>, size: DecodedSize) -> Vec<u8> {
    if matches!(size, DecodedSize::AtMost(_)) && out.capacity() > out.len().saturating_mul(2) {
        out.shrink_to_fit();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_params() {
        let c = json!({"id": "x", "a": 3, "n": -1, "big": 1u64 << 33, "s": "1"});
        assert_eq!(json_param("x", &c, "a", None).unwrap(), 3);
        assert_eq!(json_param("x", &c, "missing", Some(7)).unwrap(), 7);
        assert!(json_param("x", &c, "missing", None).is_err());
        assert!(json_param("x", &c, "n", None).is_err());
        assert!(json_param("x", &c, "big", None).is_err());
        assert!(json_param("x", &c, "s", None).is_err());
        assert_eq!(hdf5_param("x", &[1, 2], 1).unwrap(), 2);
        assert!(hdf5_param("x", &[1, 2], 2).is_err());
    }
}
