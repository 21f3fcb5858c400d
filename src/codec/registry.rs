//! The codec registry: every codec slabfs decodes, registered once under
//! each name the formats give it.
//!
//! A codec has up to three names (seed 004, "NCZarr Support for Zarr
//! Filters"; netcdf-c `plugins/NCZhdf5filters.c`, `NCZstdfilters.c`):
//!
//! - its **numcodecs id** (`{"id": "zlib", "level": 1}`): Zarr v2's
//!   `compressor` and `filters`, NCZarr, kerchunk. zarr-python 3 also
//!   writes every numcodecs codec into Zarr v3 metadata as
//!   `{"name": "numcodecs.<id>", "configuration": {...the same keys}}`, so
//!   each id is also reachable under that v3 name;
//! - its **Zarr v3 name** with a configuration of its own, for codecs the
//!   v3 spec or zarr-extensions define (`gzip`, `zstd`, `blosc`, `crc32c`,
//!   `bytes`, `transpose`);
//! - its **HDF5 filter id** with a vector of `u32` parameters
//!   (`cd_values`), for codecs whose stored bytes are what the HDF5 filter
//!   writes. netcdf-c converts between that vector and the numcodecs JSON
//!   in both directions; [`hdf5_to_json`] and [`json_to_hdf5`] do the same,
//!   each codec file holding its own pair of conversions.
//!
//! A numcodecs id names either a bytes→bytes codec (a compressor or a
//! checksum: [`Numcodecs::Bytes`]) or a *filter* that knows its element
//! types ([`Numcodecs::Filter`]): in Zarr v2 a filter runs on the flat
//! chunk buffer as a bytes→bytes codec (numcodecs' own view); under
//! zarr-python's `numcodecs.<id>` v3 name it is an array→array codec,
//! which [`super::array_filter`] adapts. A few numcodecs compressors
//! need the array itself, not its bytes (`pcodec`, `zfpy`: they read the
//! element type, and zfp the shape): [`Numcodecs::Array`], an array→bytes
//! codec that takes the place of `bytes` in the chain, as zarr-python 3
//! places them in Zarr v3 (`_NumcodecsArrayBytesCodec`) and as
//! [`super::v2_chain`] places a Zarr v2 compressor of that kind.
//!
//! # Adding a codec
//!
//! One file in `src/codec/` with the codec and a `pub const ENTRY:
//! CodecEntry` (the type is [`super::entry`]'s, re-exported here, so that a
//! codec file never imports the registry that imports it) naming it and its constructors (and HDF5 conversions, if
//! it has a filter id); its `pub mod` line in `mod.rs`; one line in
//! [`CODECS`] below; one row in `docs/CODECS.md` (a test checks the table
//! names every registered codec). `from_v2`, `from_v3`, the `numcodecs.*`
//! v3 name and the HDF5 conversions then all work.
//!
//! An HDF5 filter that no Zarr codec shares (szip, scaleoffset, LZF,
//! HDF5-framed LZ4, bitshuffle) is a `pub const HDF5: Hdf5OnlyFilter` in
//! its file and one line in [`HDF5_FILTERS`]; [`from_hdf5`] builds it from
//! the parameters directly, and its `docs/CODECS.md` row goes in the
//! "HDF5-only filters" table.
//!
//! Lookups scan the table (two dozen entries, once per array opened).

use serde_json::{Map, Value};

use crate::dtype::Endian;

use super::array_filter::{FilterArrayCodec, FilterBytesCodec};
pub use super::entry::{
    CodecEntry, FromHdf5, FromNumcodecs, FromNumcodecsArray, FromNumcodecsFilter, FromV3,
    Hdf5Filter, Hdf5OnlyFilter, NUMCODECS_PREFIX, Numcodecs,
};
pub use super::hdf5_plugin::hdf5_filter_name;
use super::{
    BytesToBytesCodec, Codec, CodecChain, CodecError, adler32, astype, bitround, bitshuffle, blosc,
    bytes, bz2, categorize, crc32, crc32c, delta, fixedscaleoffset, fletcher32, gzip, hdf5_lz4,
    jenkins_lookup3, lz4, lzf, lzma, nbit, packbits, pcodec, quantize, scaleoffset, shuffle, szip,
    transpose, v3_extension, zfpy, zlib, zstd,
};

/// Every codec slabfs knows, once each.
pub static CODECS: &[CodecEntry] = &[
    bytes::ENTRY,
    transpose::ENTRY,
    // Compressors.
    zlib::ENTRY,
    gzip::ENTRY,
    zstd::ENTRY,
    blosc::ENTRY,
    lz4::ENTRY,
    bz2::ENTRY,
    lzma::ENTRY,
    // Compressors that need the array (array->bytes).
    pcodec::ENTRY,
    zfpy::ENTRY,
    // Checksums.
    crc32c::ENTRY,
    crc32::ENTRY,
    adler32::ENTRY,
    fletcher32::ENTRY,
    jenkins_lookup3::ENTRY,
    // Filters.
    shuffle::ENTRY,
    delta::ENTRY,
    fixedscaleoffset::ENTRY,
    astype::ENTRY,
    quantize::ENTRY,
    bitround::ENTRY,
    packbits::ENTRY,
    categorize::ENTRY,
];

/// HDF5 filters that no Zarr codec shares: built from their HDF5 id and
/// parameters alone ([`from_hdf5`]). Their stored bytes are framed the
/// HDF5 way (a big-endian size header, the library's own bit packing...),
/// so they have no numcodecs id or Zarr v3 name, and netcdf-c has no
/// NCZarr form for them.
pub static HDF5_FILTERS: &[Hdf5OnlyFilter] = &[
    lzf::HDF5,
    hdf5_lz4::HDF5,
    bitshuffle::HDF5,
    scaleoffset::HDF5,
    nbit::HDF5,
    szip::HDF5,
];

/// The codec with numcodecs id `id`.
pub fn by_id(id: &str) -> Option<&'static CodecEntry> {
    CODECS.iter().find(|e| e.id() == Some(id))
}

/// The codec with Zarr v3 name `name`: a spec name, or `numcodecs.<id>`.
pub fn by_v3_name(name: &str) -> Option<&'static CodecEntry> {
    CODECS
        .iter()
        .find(|e| e.v3_name() == Some(name))
        .or_else(|| by_id(name.strip_prefix(NUMCODECS_PREFIX)?))
}

/// The codec HDF5 filter `id` writes.
pub fn by_hdf5_id(id: u32) -> Option<&'static CodecEntry> {
    CODECS.iter().find(|e| e.hdf5.is_some_and(|h| h.id == id))
}

/// Build a bytes→bytes codec from a numcodecs `{"id": ...}` object (a
/// Zarr v2 compressor or filter); an unknown id is
/// [`CodecError::Unknown`] naming it.
pub fn from_v2(value: &Value) -> Result<Box<dyn BytesToBytesCodec>, CodecError> {
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| CodecError::config("?", format!("codec without an \"id\": {value}")))?;
    let entry = by_id(id).ok_or_else(|| CodecError::Unknown(id.to_string()))?;
    match entry.numcodecs {
        Some((_, Numcodecs::Bytes(build))) => build(value),
        Some((_, Numcodecs::Filter(build))) => Ok(Box::new(FilterBytesCodec::new(build(value)?))),
        Some((_, Numcodecs::Array(_))) => Err(CodecError::Chain(format!(
            "{id} encodes the array, not bytes: it can only be the compressor of an array"
        ))),
        None => unreachable!("by_id found an entry with an id"),
    }
}

/// Build a Zarr v2 compressor: a bytes→bytes codec, or an array→bytes one
/// for the numcodecs compressors that need the array ([`Numcodecs::Array`]).
pub fn from_v2_compressor(value: &Value) -> Result<Codec, CodecError> {
    if let Some(entry) = value.get("id").and_then(Value::as_str).and_then(by_id)
        && let Some((_, Numcodecs::Array(build))) = entry.numcodecs
    {
        return Ok(Codec::ArrayToBytes(build(value)?));
    }
    Ok(Codec::BytesToBytes(from_v2(value)?))
}

/// Build a Zarr v2 filter as the array→array codec it is when an
/// array→bytes compressor follows it: only numcodecs filters, which know
/// their element types, can be.
pub fn from_v2_array_filter(value: &Value) -> Result<Codec, CodecError> {
    let id = value.get("id").and_then(Value::as_str).unwrap_or("?");
    match by_id(id).and_then(|e| e.numcodecs) {
        Some((_, Numcodecs::Filter(build))) => Ok(Codec::ArrayToArray(Box::new(
            FilterArrayCodec::new(build(value)?),
        ))),
        Some(_) => Err(CodecError::Chain(format!(
            "filter {id} works on bytes, but the compressor after it encodes an array"
        ))),
        None => Err(CodecError::Unknown(id.to_string())),
    }
}

/// Build a codec from its Zarr v3 metadata: a spec name (`gzip`) or
/// zarr-python's `numcodecs.<id>`. `Ok(None)` means an unknown codec
/// marked `"must_understand": false`, which is skipped; any other unknown
/// codec is [`CodecError::Unknown`] naming it.
pub fn from_v3(value: &Value) -> Result<Option<Codec>, CodecError> {
    let (name, config, must_understand) =
        v3_extension(value).map_err(|e| CodecError::config("?", e))?;
    let empty = Value::Object(Map::new());
    let config = config.unwrap_or(&empty);
    if let Some(entry) = CODECS.iter().find(|e| e.v3_name() == Some(name)) {
        let (_, build) = entry.v3.expect("found by its v3 name");
        return build(config).map(Some);
    }
    let entry = name
        .strip_prefix(NUMCODECS_PREFIX)
        .and_then(|id| by_id(id).map(|e| (id, e)));
    let Some((id, entry)) = entry else {
        if must_understand {
            return Err(CodecError::Unknown(name.to_string()));
        }
        return Ok(None);
    };
    // zarr-python stores the numcodecs object minus its "id"; an "id" that
    // is there must agree with the name.
    let mut object = config
        .as_object()
        .ok_or_else(|| {
            CodecError::config(name, format!("configuration must be an object: {config}"))
        })?
        .clone();
    match object.get("id") {
        None => {
            object.insert("id".into(), Value::String(id.to_string()));
        }
        Some(v) if v.as_str() == Some(id) => {}
        Some(v) => {
            return Err(CodecError::config(
                name,
                format!("configuration \"id\" {v} does not match the name"),
            ));
        }
    }
    let object = Value::Object(object);
    Ok(Some(match entry.numcodecs.expect("found by its id").1 {
        Numcodecs::Bytes(build) => Codec::BytesToBytes(build(&object)?),
        Numcodecs::Filter(build) => {
            Codec::ArrayToArray(Box::new(FilterArrayCodec::new(build(&object)?)))
        }
        Numcodecs::Array(build) => Codec::ArrayToBytes(build(&object)?),
    }))
}

/// The chain a Zarr v2 array describes: `order`, the dtype's byte order,
/// `filters` (applied in list order when encoding) and `compressor`.
pub fn v2_chain(
    rank: usize,
    order_f: bool,
    endian: Endian,
    filters: &[Value],
    compressor: Option<&Value>,
) -> Result<CodecChain, CodecError> {
    let mut codecs = Vec::new();
    if order_f && rank > 1 {
        codecs.push(Codec::ArrayToArray(Box::new(
            transpose::Transpose::reversed(rank),
        )));
    }
    let compressor = compressor.map(from_v2_compressor).transpose()?;
    if let Some(Codec::ArrayToBytes(serializer)) = compressor {
        // A compressor that encodes the array (pcodec, zfpy) gets it as
        // numcodecs does: in memory order, after the filters, as values
        // (the dtype's byte order is NumPy's business, not the stream's).
        // zfp keeps the shape, and numcodecs refuses to give it an F-order
        // array, so there is no such stream to read.
        if order_f && rank > 1 && serializer.name() == zfpy::NAME {
            return Err(CodecError::config(
                zfpy::NAME,
                "numcodecs' ZFPY cannot write arrays of order \"F\"",
            ));
        }
        for f in filters {
            codecs.push(from_v2_array_filter(f)?);
        }
        codecs.push(Codec::ArrayToBytes(serializer));
        return CodecChain::new(codecs);
    }
    codecs.push(Codec::ArrayToBytes(Box::new(bytes::BytesCodec::new(Some(
        endian,
    )))));
    for f in filters {
        codecs.push(Codec::BytesToBytes(from_v2(f)?));
    }
    codecs.extend(compressor);
    CodecChain::new(codecs)
}

/// The numcodecs JSON for HDF5 filter `id` with parameters `params`, as
/// netcdf-c writes it into NCZarr metadata.
pub fn hdf5_to_json(id: u32, params: &[u32]) -> Result<Value, CodecError> {
    if let Some(f) = hdf5_only(id) {
        return Err(CodecError::config(
            f.name,
            format!("HDF5 filter {id} has no numcodecs form"),
        ));
    }
    let hdf5 = by_hdf5_id(id)
        .and_then(|e| e.hdf5)
        .ok_or(CodecError::UnknownHdf5Filter {
            id,
            known_as: hdf5_filter_name(id),
        })?;
    (hdf5.to_json)(params)
}

/// The HDF5 filter id and parameters for a numcodecs JSON codec.
pub fn json_to_hdf5(codec: &Value) -> Result<(u32, Vec<u32>), CodecError> {
    let id = codec
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| CodecError::config("?", format!("codec without an \"id\": {codec}")))?;
    let entry = by_id(id).ok_or_else(|| CodecError::Unknown(id.to_string()))?;
    let hdf5 = entry
        .hdf5
        .ok_or_else(|| CodecError::config(id, "has no HDF5 filter"))?;
    Ok((hdf5.id, (hdf5.to_params)(codec)?))
}

/// The HDF5-only filter with id `id`.
pub fn hdf5_only(id: u32) -> Option<&'static Hdf5OnlyFilter> {
    HDF5_FILTERS.iter().find(|f| f.id == id)
}

/// Build the codec that undoes HDF5 filter `id` with parameters `params`:
/// an HDF5-only filter from its parameters, any other through its
/// numcodecs JSON.
pub fn from_hdf5(id: u32, params: &[u32]) -> Result<Box<dyn BytesToBytesCodec>, CodecError> {
    if let Some(f) = hdf5_only(id) {
        return (f.build)(params);
    }
    from_v2(&hdf5_to_json(id, params)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_name_is_registered_once() {
        let mut ids = Vec::new();
        let mut v3 = Vec::new();
        let mut hdf5 = Vec::new();
        for e in CODECS {
            assert!(e.numcodecs.is_some() || e.v3.is_some(), "{e:?}");
            ids.extend(e.id());
            v3.extend(e.v3_names());
            hdf5.extend(e.hdf5.map(|h| h.id));
        }
        for list in [
            ids.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            v3.clone(),
            hdf5.iter().map(|i| i.to_string()).collect(),
        ] {
            let mut sorted = list.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), list.len(), "duplicate in {list:?}");
        }
        assert!(ids.len() >= 20, "{ids:?}");
        assert_eq!(hdf5.len(), 6, "{hdf5:?}");
        hdf5.extend(HDF5_FILTERS.iter().map(|f| f.id));
        let mut sorted = hdf5.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), hdf5.len(), "duplicate in {hdf5:?}");
        // The names of unsupported filters leave out the supported ones.
        for id in hdf5 {
            assert_eq!(hdf5_filter_name(id), None, "{id}");
        }
    }

    #[test]
    fn array_encoding_compressors_take_the_place_of_bytes() {
        use crate::dtype::Endian;
        let pcodec = json!({"id": "pcodec", "level": 8});
        // Not a bytes->bytes codec: only a compressor.
        assert!(matches!(from_v2(&pcodec), Err(CodecError::Chain(_))));
        assert!(matches!(
            from_v2_compressor(&pcodec),
            Ok(Codec::ArrayToBytes(_))
        ));
        let chain = super::super::v2_chain(
            2,
            true,
            Endian::Big,
            &[json!({"id": "delta", "dtype": "<i4"})],
            Some(&pcodec),
        )
        .unwrap();
        assert_eq!(chain.names(), ["transpose", "delta", "pcodec"]);
        // A filter that works on bytes cannot come before it.
        let e = super::super::v2_chain(
            1,
            false,
            Endian::Little,
            &[json!({"id": "shuffle", "elementsize": 4})],
            Some(&pcodec),
        )
        .unwrap_err();
        assert!(matches!(e, CodecError::Chain(_)), "{e}");
        // numcodecs cannot write zfpy in F order.
        let zfpy = json!({"id": "zfpy", "mode": 4, "tolerance": 0.1});
        let e = super::super::v2_chain(2, true, Endian::Little, &[], Some(&zfpy)).unwrap_err();
        assert!(matches!(e, CodecError::Config { .. }), "{e}");
        assert!(e.to_string().contains("order"), "{e}");
    }

    #[test]
    fn lookups() {
        assert_eq!(by_id("lz4").unwrap().name(), "lz4");
        assert_eq!(by_v3_name("numcodecs.lz4").unwrap().name(), "lz4");
        assert_eq!(by_v3_name("gzip").unwrap().id(), Some("gzip"));
        assert_eq!(
            by_v3_name("numcodecs.gzip").unwrap().v3_name(),
            Some("gzip")
        );
        assert_eq!(by_v3_name("bytes").unwrap().id(), None);
        assert_eq!(by_hdf5_id(1).unwrap().id(), Some("zlib"));
        assert_eq!(by_hdf5_id(307).unwrap().id(), Some("bz2"));
        assert_eq!(by_hdf5_id(32015).unwrap().id(), Some("zstd"));
        assert!(by_id("bytes").is_none());
        assert!(by_id("numcodecs.lz4").is_none());
        assert!(by_v3_name("lz4").is_none());
        assert!(by_v3_name("numcodecs.").is_none());
        assert!(by_v3_name("numcodecs.bytes").is_none());
        assert!(by_hdf5_id(32004).is_none());
        assert_eq!(
            by_v3_name("numcodecs.zstd").unwrap().v3_names(),
            ["zstd", "numcodecs.zstd"]
        );
    }

    #[test]
    fn unknown_codecs_are_named() {
        let e = from_v2(&json!({"id": "jpeg2k", "level": 4})).unwrap_err();
        assert!(matches!(&e, CodecError::Unknown(n) if n == "jpeg2k"), "{e}");
        assert_eq!(e.to_string(), "unsupported codec \"jpeg2k\"");
        let e = from_v3(&json!({"name": "numcodecs.jpeg2k", "configuration": {}})).unwrap_err();
        assert!(
            matches!(&e, CodecError::Unknown(n) if n == "numcodecs.jpeg2k"),
            "{e}"
        );
        let e = from_v3(&json!({"name": "lz4"})).unwrap_err();
        assert!(matches!(&e, CodecError::Unknown(n) if n == "lz4"), "{e}");
        assert!(
            from_v3(&json!({"name": "numcodecs.jpeg2k", "must_understand": false}))
                .unwrap()
                .is_none()
        );
        assert!(
            from_v3(&json!({"name": "x.y", "configuration": {}, "must_understand": false}))
                .unwrap()
                .is_none()
        );
        // Known codecs are built even when they could be skipped.
        assert!(
            from_v3(&json!({"name": "numcodecs.crc32", "must_understand": false}))
                .unwrap()
                .is_some()
        );
        assert!(matches!(
            from_v2(&json!({"level": 1})),
            Err(CodecError::Config { .. })
        ));
        assert!(matches!(
            from_v2(&json!({"id": 5})),
            Err(CodecError::Config { .. })
        ));
        let e = hdf5_to_json(305, &[32, 32]).unwrap_err();
        assert!(
            matches!(
                e,
                CodecError::UnknownHdf5Filter {
                    id: 305,
                    known_as: Some("lzo")
                }
            ),
            "{e}"
        );
        assert_eq!(e.to_string(), "unsupported HDF5 filter 305 (lzo)");
        let e = from_hdf5(32013, &[0]).unwrap_err();
        assert_eq!(e.to_string(), "unsupported HDF5 filter 32013 (zfp)");
        let e = hdf5_to_json(40000, &[]).unwrap_err();
        assert_eq!(e.to_string(), "unsupported HDF5 filter 40000");
        let e = json_to_hdf5(&json!({"id": "lz4"})).unwrap_err();
        assert!(matches!(e, CodecError::Config { .. }), "{e}");
        let e = json_to_hdf5(&json!({"id": "nope"})).unwrap_err();
        assert!(matches!(e, CodecError::Unknown(_)), "{e}");
    }

    #[test]
    fn numcodecs_v3_names() {
        // Bytes codecs keep their family; filters become array->array.
        for (v, family) in [
            (
                json!({"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}),
                "b",
            ),
            (
                json!({"name": "numcodecs.zlib", "configuration": {"level": 1}}),
                "b",
            ),
            (json!({"name": "numcodecs.crc32"}), "b"),
            (
                json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}),
                "b",
            ),
            (
                json!({"name": "numcodecs.blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}}),
                "b",
            ),
            (
                json!({"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}),
                "a",
            ),
            (
                json!({"name": "numcodecs.bitround", "configuration": {"keepbits": 3}}),
                "a",
            ),
        ] {
            let got = match from_v3(&v).unwrap().unwrap() {
                Codec::BytesToBytes(_) => "b",
                Codec::ArrayToArray(_) => "a",
                Codec::ArrayToBytes(_) => "ab",
            };
            assert_eq!(got, family, "{v}");
        }
        // The configuration is numcodecs' (integer shuffle), not v3 blosc's.
        assert!(
            from_v3(&json!({"name": "numcodecs.blosc", "configuration": {"cname": "lz4", "shuffle": "shuffle"}}))
                .is_err()
        );
        assert!(from_v3(&json!({"name": "numcodecs.lz4", "configuration": {"id": "lz4"}})).is_ok());
        assert!(
            from_v3(&json!({"name": "numcodecs.lz4", "configuration": {"id": "zstd"}})).is_err()
        );
        assert!(from_v3(&json!({"name": "numcodecs.lz4", "configuration": [1]})).is_err());
    }

    /// Every codec with an HDF5 filter: JSON -> parameters -> JSON gives
    /// back the same codec, and the parameters are netcdf-c's.
    #[test]
    fn hdf5_round_trips() {
        let cases: &[(Value, u32, &[u32], Value)] = &[
            (
                json!({"id": "zlib", "level": 4}),
                1,
                &[4],
                json!({"id": "zlib", "level": 4}),
            ),
            (
                json!({"id": "shuffle", "elementsize": 8}),
                2,
                &[8],
                json!({"id": "shuffle", "elementsize": 8}),
            ),
            (
                json!({"id": "fletcher32"}),
                3,
                &[],
                json!({"id": "fletcher32"}),
            ),
            (
                json!({"id": "bz2", "level": 9}),
                307,
                &[9],
                json!({"id": "bz2", "level": 9}),
            ),
            (
                json!({"id": "zstd", "level": 19, "checksum": false}),
                32015,
                &[19],
                json!({"id": "zstd", "level": 19}),
            ),
            (
                json!({"id": "blosc", "cname": "zstd", "clevel": 5, "shuffle": 2, "blocksize": 0}),
                32001,
                &[0, 0, 0, 0, 5, 2, 5],
                json!({"id": "blosc", "clevel": 5, "blocksize": 0, "cname": "zstd", "shuffle": 2}),
            ),
        ];
        for (json, id, params, back) in cases {
            let (got_id, got) = json_to_hdf5(json).unwrap();
            assert_eq!((got_id, got.as_slice()), (*id, *params), "{json}");
            assert_eq!(&hdf5_to_json(*id, params).unwrap(), back, "{id} {params:?}");
            // And the JSON builds the codec.
            from_hdf5(*id, params).unwrap();
        }
        let with_hdf5 = CODECS.iter().filter(|e| e.hdf5.is_some()).count();
        assert_eq!(with_hdf5, cases.len());
    }

    #[test]
    fn hdf5_edge_cases() {
        // netcdf-c refuses a deflate, bzip2 or zstd filter without its level.
        for id in [1, 307, 32015] {
            let e = hdf5_to_json(id, &[]).unwrap_err();
            assert!(matches!(e, CodecError::Config { .. }), "{id}: {e}");
        }
        // Shuffle without parameters: element size 0, which decodes as a copy.
        assert_eq!(
            hdf5_to_json(2, &[]).unwrap(),
            json!({"id": "shuffle", "elementsize": 0})
        );
        from_hdf5(2, &[]).unwrap();
        // Fletcher32 ignores parameters.
        assert_eq!(hdf5_to_json(3, &[9]).unwrap(), json!({"id": "fletcher32"}));
        // Blosc: the working parameters netcdf-c writes (filter revision 2,
        // format 2, type size 4, chunk bytes 40000), lz4hc.
        assert_eq!(
            hdf5_to_json(32001, &[2, 2, 4, 40000, 9, 1, 2]).unwrap(),
            json!({"id": "blosc", "clevel": 9, "blocksize": 40000, "cname": "lz4hc", "shuffle": 1})
        );
        // Fewer than seven: H5Zblosc.c's defaults.
        assert_eq!(
            hdf5_to_json(32001, &[2, 2, 4, 40000]).unwrap(),
            json!({"id": "blosc", "clevel": 5, "blocksize": 40000, "cname": "blosclz", "shuffle": 1})
        );
        assert!(hdf5_to_json(32001, &[]).is_err());
        assert!(hdf5_to_json(32001, &[2, 2, 4, 0, 5, 1, 6]).is_err());
        // Snappy converts, but this build cannot decode it.
        let snappy = hdf5_to_json(32001, &[2, 2, 4, 0, 5, 1, 3]).unwrap();
        assert_eq!(snappy["cname"], "snappy");
        assert!(matches!(
            from_hdf5(32001, &[2, 2, 4, 0, 5, 1, 3]),
            Err(CodecError::Config { .. })
        ));
        // JSON without the optional keys: numcodecs' defaults.
        assert_eq!(
            json_to_hdf5(&json!({"id": "blosc"})).unwrap(),
            (32001, vec![0, 0, 0, 0, 5, 1, 1])
        );
        assert_eq!(json_to_hdf5(&json!({"id": "zlib"})).unwrap(), (1, vec![1]));
        assert_eq!(
            json_to_hdf5(&json!({"id": "zstd"})).unwrap(),
            (32015, vec![0])
        );
        assert_eq!(json_to_hdf5(&json!({"id": "bz2"})).unwrap(), (307, vec![1]));
        assert_eq!(
            json_to_hdf5(&json!({"id": "shuffle"})).unwrap(),
            (2, vec![4])
        );
        // What has no HDF5 form.
        for bad in [
            json!({"id": "zstd", "level": -5}),
            json!({"id": "blosc", "shuffle": -1}),
            json!({"id": "blosc", "cname": "brotli"}),
            json!({"id": "zlib", "level": "9"}),
            json!({"level": 9}),
        ] {
            assert!(json_to_hdf5(&bad).is_err(), "{bad}");
        }
    }

    /// HDF5-only filters are built from their parameters and have no
    /// numcodecs form.
    #[test]
    fn hdf5_only_filters() {
        for f in HDF5_FILTERS {
            assert!(by_hdf5_id(f.id).is_none(), "{}", f.id);
            let e = hdf5_to_json(f.id, &[]).unwrap_err();
            assert!(matches!(e, CodecError::Config { .. }), "{e}");
        }
        assert_eq!(from_hdf5(32000, &[4, 261, 600]).unwrap().name(), "lzf");
        assert_eq!(from_hdf5(32004, &[0]).unwrap().name(), "lz4 (HDF5)");
        assert_eq!(
            from_hdf5(32008, &[0, 4, 4, 0, 2]).unwrap().name(),
            "bitshuffle"
        );
        // Parameters are checked.
        assert!(from_hdf5(32008, &[0, 4]).is_err());
    }
}
