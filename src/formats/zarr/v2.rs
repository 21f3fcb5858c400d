//! Zarr v2 array metadata (`.zarray` + `.zattrs`).
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html>.
//! The dtype typestr carries the byte order; `order: "F"` means each chunk
//! is stored in Fortran order; `filters` then `compressor` were applied when
//! writing, so decoding runs the compressor first and the filters in
//! reverse (all expressed as one [`CodecChain`](crate::codec::CodecChain)).
//! xarray's `_ARRAY_DIMENSIONS` attribute names the dimensions. Unknown
//! keys are ignored, as the spec asks.

use serde_json::{Map, Value};

use super::fill::parse_fill;
use super::json::{field, obj, u64_list};
use crate::codec::v2_chain;
use crate::dtype::DataType;
use crate::engine::array::ArrayMeta;
use crate::engine::index::tiling::DimTiling;
use crate::error::{Error, Result};
use crate::formats::chunked::{ArraySpec, ChunkKeyEncoding};

/// Parse a `.zarray` document (`doc`) with its `.zattrs` (`attrs`).
/// `source` names the `.zarray` file in errors.
pub fn parse_array(source: &str, doc: &Value, attrs: Map<String, Value>) -> Result<ArraySpec> {
    let meta_err = |detail: String| Error::metadata(source, detail);
    let o = obj(source, doc)?;
    match o.get("zarr_format").and_then(Value::as_u64) {
        Some(2) => {}
        other => return Err(meta_err(format!("zarr_format is {other:?}, expected 2"))),
    }
    let shape = u64_list(source, field(source, o, "shape")?, "shape")?;
    let chunks = u64_list(source, field(source, o, "chunks")?, "chunks")?;
    if chunks.len() != shape.len() {
        return Err(meta_err(format!(
            "chunks {chunks:?} and shape {shape:?} differ in rank"
        )));
    }
    if chunks.contains(&0) {
        return Err(meta_err(format!("chunks {chunks:?} has a zero length")));
    }
    let dtype_value = field(source, o, "dtype")?;
    let typestr = dtype_value.as_str().ok_or_else(|| {
        meta_err(format!(
            "dtype {dtype_value} is not supported (structured dtypes are not)"
        ))
    })?;
    let (dtype, endian) = DataType::from_numpy(typestr).map_err(meta_err)?;
    let order_f = match o.get("order").and_then(Value::as_str) {
        Some("C") | None => false,
        Some("F") => true,
        Some(other) => {
            return Err(meta_err(format!(
                "order {other:?} is neither \"C\" nor \"F\""
            )));
        }
    };
    let separator = match o.get("dimension_separator") {
        None | Some(Value::Null) => '.',
        Some(Value::String(s)) if s == "." => '.',
        Some(Value::String(s)) if s == "/" => '/',
        Some(other) => {
            return Err(meta_err(format!(
                "dimension_separator {other} is not \".\" or \"/\""
            )));
        }
    };
    let filters: Vec<Value> = match o.get("filters") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(a)) => a.clone(),
        Some(other) => return Err(meta_err(format!("filters {other} is not a list"))),
    };
    let compressor = match o.get("compressor") {
        None | Some(Value::Null) => None,
        Some(c) => Some(c),
    };
    let chain = v2_chain(shape.len(), order_f, endian, &filters, compressor)
        .map_err(|e| meta_err(e.to_string()))?;
    let fill = parse_fill(o.get("fill_value").unwrap_or(&Value::Null), &dtype).map_err(meta_err)?;

    let mut meta = ArrayMeta::new(source, shape, dtype, fill)?;
    meta.chunk_shape = Some(chunks.clone());
    let mut attrs = attrs;
    if let Some(dims) = attrs.remove("_ARRAY_DIMENSIONS") {
        meta.dimension_names = dimension_names(source, &dims, meta.rank())?;
    }
    meta.attributes = attrs;
    let codec_names = chain.names().into_iter().map(String::from).collect();
    Ok(ArraySpec {
        meta,
        grid: chunks.into_iter().map(DimTiling::Regular).collect(),
        keys: ChunkKeyEncoding::V2 { separator },
        chain,
        codec_names,
        sharding: None,
    })
}

/// Dimension names from a JSON list of strings (or nulls), one per dimension.
pub fn dimension_names(source: &str, value: &Value, rank: usize) -> Result<Vec<Option<String>>> {
    let bad = || {
        Error::metadata(
            source,
            format!("dimension names {value} do not fit rank {rank}"),
        )
    };
    let list = value.as_array().ok_or_else(bad)?;
    if list.len() != rank {
        return Err(bad());
    }
    list.iter()
        .map(|v| match v {
            Value::String(s) => Ok(Some(s.clone())),
            Value::Null => Ok(None),
            _ => Err(bad()),
        })
        .collect()
}
