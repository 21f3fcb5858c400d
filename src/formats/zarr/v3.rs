//! Zarr v3 array metadata (`zarr.json` with `node_type: "array"`).
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html>.
//! Extension points (data type, chunk grid, chunk key encoding, codecs) are
//! `{"name", "configuration"}` objects or bare names; an unknown one is an
//! error unless it says `"must_understand": false`, and unknown top-level
//! keys follow the same rule. Non-empty `storage_transformers` are refused:
//! none is defined, so we cannot know what one would do to the bytes.

use serde_json::{Map, Value};

use super::fill::parse_fill;
use super::json::{field, obj, u64_list};
use super::shard;
use super::v2::dimension_names;
use crate::codec::v3_extension;
use crate::dtype::DataType;
use crate::engine::array::ArrayMeta;
use crate::engine::index::tiling::DimTiling;
use crate::error::{Error, Result};
use crate::formats::chunked::shard::Sharding;
use crate::formats::chunked::{ArraySpec, ChunkKeyEncoding};

const KNOWN_KEYS: &[&str] = &[
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "storage_transformers",
    "dimension_names",
];

/// Parse an array's `zarr.json`. `source` names the file in errors.
pub fn parse_array(source: &str, doc: &Value) -> Result<ArraySpec> {
    let meta_err = |detail: String| Error::metadata(source, detail);
    let o = obj(source, doc)?;
    for (k, v) in o {
        let optional = v.get("must_understand").and_then(Value::as_bool) == Some(false);
        if !KNOWN_KEYS.contains(&k.as_str()) && !optional {
            return Err(meta_err(format!("unsupported metadata key \"{k}\"")));
        }
    }
    let shape = u64_list(source, field(source, o, "shape")?, "shape")?;
    let dtype = data_type(field(source, o, "data_type")?).map_err(&meta_err)?;
    let grid = chunk_grid(field(source, o, "chunk_grid")?, &shape).map_err(&meta_err)?;
    let keys = key_encoding(field(source, o, "chunk_key_encoding")?).map_err(&meta_err)?;
    let fill = parse_fill(field(source, o, "fill_value")?, &dtype).map_err(&meta_err)?;
    match o.get("storage_transformers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(other) => {
            return Err(meta_err(format!(
                "storage_transformers {other} are not supported"
            )));
        }
    }
    // Sharding needs the shard shape, which only a regular grid has.
    let shard_shape: Option<Vec<u64>> = grid
        .iter()
        .map(|g| match g {
            DimTiling::Regular(n) => Some(*n),
            DimTiling::Explicit(_) => None,
        })
        .collect();
    let codecs = shard::parse_codecs(field(source, o, "codecs")?, shard_shape.as_deref(), &dtype)
        .map_err(&meta_err)?;
    let chunk_shape: Vec<u64> = grid.iter().map(|g| g.tile_len(0)).collect();
    // A sharded array is read by its innermost chunks, unless its shards
    // are decoded whole (see `shard`).
    let grid = match codecs.sharding.as_ref().and_then(Sharding::read_shape) {
        Some(leaf) => leaf.into_iter().map(DimTiling::Regular).collect(),
        None => grid,
    };

    let mut meta = ArrayMeta::new(source, shape, dtype, fill)?;
    meta.chunk_shape = Some(chunk_shape);
    match o.get("dimension_names") {
        None | Some(Value::Null) => {}
        Some(names) => meta.dimension_names = dimension_names(source, names, meta.rank())?,
    }
    if let Some(attrs) = o.get("attributes") {
        meta.attributes = obj(source, attrs)?.clone();
    }
    Ok(ArraySpec {
        meta,
        grid,
        keys,
        chain: codecs.chain,
        codec_names: codecs.names,
        sharding: codecs.sharding,
    })
}

/// A core data type name, or one of zarr-python's NumPy-derived extension
/// types.
fn data_type(value: &Value) -> Result<DataType, String> {
    let (name, config, _) = v3_extension(value)?;
    if let Some(dt) = DataType::from_zarr_v3(name) {
        return Ok(dt);
    }
    let empty = Map::new();
    let config = config.and_then(Value::as_object).unwrap_or(&empty);
    let int = |key: &str| {
        config
            .get(key)
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| format!("data type {value} needs a positive \"{key}\""))
    };
    let unit = || -> Result<String, String> {
        let unit = config
            .get("unit")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty() && u.chars().all(|c| c.is_ascii_alphabetic()))
            .ok_or_else(|| format!("data type {value} needs a \"unit\""))?;
        Ok(match config.get("scale_factor").and_then(Value::as_u64) {
            None | Some(1) => unit.to_string(),
            Some(n) => format!("{n}{unit}"),
        })
    };
    match name {
        "numpy.datetime64" => Ok(DataType::DateTime64(unit()?)),
        "numpy.timedelta64" => Ok(DataType::TimeDelta64(unit()?)),
        "null_terminated_bytes" | "fixed_length_bytes" => {
            Ok(DataType::FixedBytes(int("length_bytes")?))
        }
        "raw_bytes" | "numpy.void" => Ok(DataType::RawBits(int("length_bytes")?)),
        "fixed_length_utf32" => {
            let n = int("length_bytes")?;
            if n % 4 != 0 {
                return Err(format!(
                    "data type {value}: length_bytes is not a multiple of 4"
                ));
            }
            Ok(DataType::Unicode(n / 4))
        }
        _ => Err(format!("unsupported data type {value}")),
    }
}

/// `regular` and the zarr-extensions `rectilinear` grid (with ZEP0003's
/// plain list form).
fn chunk_grid(value: &Value, shape: &[u64]) -> Result<Vec<DimTiling>, String> {
    let (name, config, _) = v3_extension(value)?;
    let config = config.ok_or_else(|| format!("chunk_grid {value} has no configuration"))?;
    let grid = match name {
        "regular" => {
            let chunks = config
                .get("chunk_shape")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
                .ok_or_else(|| {
                    format!("chunk_grid {value}: chunk_shape is not a list of integers")
                })?;
            if chunks.contains(&0) {
                return Err(format!("chunk_grid {value}: a chunk length is zero"));
            }
            chunks
                .into_iter()
                .map(DimTiling::Regular)
                .collect::<Vec<_>>()
        }
        "rectilinear" => {
            if let Some(kind) = config.get("kind")
                && kind != "inline"
            {
                return Err(format!(
                    "rectilinear chunk_grid kind {kind} is not supported"
                ));
            }
            let dims = config
                .get("chunk_shapes")
                .or_else(|| config.get("chunk_shape"))
                .and_then(Value::as_array)
                .ok_or_else(|| format!("chunk_grid {value}: chunk_shapes is not a list"))?;
            if dims.len() != shape.len() {
                return Err(format!(
                    "chunk_grid {value} does not match rank {}",
                    shape.len()
                ));
            }
            dims.iter()
                .zip(shape)
                .map(|(d, &extent)| rectilinear_dim(d, extent))
                .collect::<Result<Vec<_>, String>>()
                .map_err(|e| format!("chunk_grid {value}: {e}"))?
        }
        other => return Err(format!("unsupported chunk_grid \"{other}\"")),
    };
    if grid.len() != shape.len() {
        return Err(format!(
            "chunk_grid {value} does not match rank {}",
            shape.len()
        ));
    }
    Ok(grid)
}

/// One dimension of a rectilinear grid: an integer (regular step) or a list
/// of lengths and `[length, count]` run-length pairs, summing to at least
/// the dimension's extent.
fn rectilinear_dim(d: &Value, extent: u64) -> Result<DimTiling, String> {
    if let Some(step) = d.as_u64() {
        return match step {
            0 => Err("a chunk length is zero".into()),
            s => Ok(DimTiling::Regular(s)),
        };
    }
    let items = d
        .as_array()
        .ok_or_else(|| format!("{d} is not a chunk length list"))?;
    let mut lengths = Vec::new();
    for item in items {
        match item {
            Value::Number(n) => lengths.push(n.as_u64().ok_or_else(|| format!("bad length {n}"))?),
            Value::Array(pair) if pair.len() == 2 => {
                let (len, count) = (pair[0].as_u64(), pair[1].as_u64());
                let (Some(len), Some(count)) = (len, count) else {
                    return Err(format!("bad run-length pair {item}"));
                };
                // Cap the expansion: more tiles than elements is nonsense.
                if count > extent.max(1) {
                    return Err(format!(
                        "run-length pair {item} has more chunks than elements"
                    ));
                }
                lengths.extend(std::iter::repeat_n(len, count as usize));
            }
            _ => return Err(format!("bad chunk length entry {item}")),
        }
        if lengths.len() as u64 > extent.max(1) {
            return Err("more chunks than elements".into());
        }
    }
    let tiling = DimTiling::from_lengths(&lengths)?;
    if !tiling.covers(extent) {
        return Err(format!(
            "chunk lengths {d} do not cover the extent {extent}"
        ));
    }
    Ok(tiling)
}

fn key_encoding(value: &Value) -> Result<ChunkKeyEncoding, String> {
    let (name, config, _) = v3_extension(value)?;
    let sep = match config.and_then(|c| c.get("separator")) {
        None => None,
        Some(Value::String(s)) if s == "/" => Some('/'),
        Some(Value::String(s)) if s == "." => Some('.'),
        Some(other) => return Err(format!("chunk key separator {other} is not \"/\" or \".\"")),
    };
    match name {
        "default" => Ok(ChunkKeyEncoding::Default {
            separator: sep.unwrap_or('/'),
        }),
        "v2" => Ok(ChunkKeyEncoding::V2 {
            separator: sep.unwrap_or('.'),
        }),
        other => Err(format!("unsupported chunk_key_encoding \"{other}\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rectilinear_forms() {
        let shape = [6, 6, 6, 6, 6];
        let g = chunk_grid(
            &json!({"name":"rectilinear","configuration":{"kind":"inline",
                "chunk_shapes":[4, [1,2,3], [[4,2]], [[1,3],3], [4,4,4]]}}),
            &shape,
        )
        .unwrap();
        assert_eq!(g[0], DimTiling::Regular(4));
        assert_eq!(g[1], DimTiling::Explicit(vec![1, 3, 6]));
        assert_eq!(g[2], DimTiling::Explicit(vec![4, 8]));
        assert_eq!(g[3], DimTiling::Explicit(vec![1, 2, 3, 6]));
        assert_eq!(g[4], DimTiling::Explicit(vec![4, 8, 12]));
        // Not covering, zero lengths, absurd run lengths: errors.
        for bad in [
            json!([[1, 2]]),
            json!([0, 6]),
            json!([[1, 1000000000000u64]]),
        ] {
            let v = json!({"name":"rectilinear","configuration":{"kind":"inline","chunk_shapes":[bad]}});
            assert!(chunk_grid(&v, &[6]).is_err(), "{v}");
        }
    }

    #[test]
    fn unknown_extensions() {
        assert!(data_type(&json!("float128")).is_err());
        assert_eq!(
            data_type(
                &json!({"name":"numpy.datetime64","configuration":{"unit":"ns","scale_factor":1}})
            )
            .unwrap(),
            DataType::DateTime64("ns".into())
        );
        assert!(key_encoding(&json!({"name":"hilbert"})).is_err());
        assert_eq!(
            key_encoding(&json!({"name":"v2","configuration":{"separator":"/"}})).unwrap(),
            ChunkKeyEncoding::V2 { separator: '/' }
        );
    }
}
