//! NCZarr: the Zarr v2 dialect netcdf-c writes (`nccopy ... '#mode=nczarr'`).
//!
//! NCZarr stores are valid Zarr v2, plus netCDF bookkeeping in extra keys.
//! Three layouts exist, and slabfs reads all of them:
//!
//! - netcdf-c 4.8/4.9.0 (Debian's netcdf-bin): upper-case keys inside the
//!   Zarr documents: `_NCZARR_ARRAY: {dimrefs, storage}` in `.zarray`,
//!   `_NCZARR_GROUP`/`_NCZARR_SUPERBLOCK` in `.zgroup`, `_NCZARR_ATTR` in
//!   `.zattrs`;
//! - netcdf-c 4.9.x: the same keys in lower case;
//! - NCZarr 2.0 (netcdf-c 4.10): everything in `.zattrs`:
//!   `_nczarr_array: {dimension_references, storage}`, `_nczarr_group`,
//!   `_nczarr_superblock`, `_nczarr_attr`.
//!
//! What that changes for the flat view ([`adapt`], applied to every v2
//! array before parsing):
//!
//! - dimension names come from the dimension references (`/grp/lat` ->
//!   `lat`), which NCZarr writes for every variable, where xarray's
//!   `_ARRAY_DIMENSIONS` is only written at the root;
//! - a netCDF scalar is stored as shape `[1]` with `storage: "scalar"` (or
//!   `scalar: 1`): it is served as a 0-d array (its chunk key, `0`, is the
//!   same);
//! - netcdf-c 4.9.0 writes `NC_CHAR` variables with dtype `<U1` but one
//!   byte per character (4.10 writes `>S1`): served as `|S1`;
//! - the fill value: 4.9.0 writes `fill_value: null` and keeps the netCDF
//!   fill in the `_FillValue` attribute, and netcdf-c reads a missing chunk
//!   as that (or as netCDF's default fill for the type when there is no
//!   attribute), not as zeros as plain Zarr would;
//! - netcdf-c writes the shuffle filter's HDF5 parameter as is, so
//!   `elementsize: 0` means the element size;
//! - the bookkeeping keys (and `_NCProperties`) are hidden from the
//!   attributes users see ([`hide_bookkeeping`]).

use serde_json::{Map, Value, json};

use crate::dtype::DataType;

/// Whether a key is netcdf-c bookkeeping, not a user attribute.
fn is_bookkeeping(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    lower.starts_with("_nczarr_") || key == "_NCProperties"
}

/// Remove netcdf-c's bookkeeping keys from `attrs` (of an array or group).
pub fn hide_bookkeeping(attrs: &mut Map<String, Value>) {
    attrs.retain(|k, _| !is_bookkeeping(k));
}

/// The NCZarr array record, from `.zarray` (4.8/4.9) or `.zattrs` (2.0).
fn array_record<'a>(zarray: &'a Value, attrs: &'a Map<String, Value>) -> Option<&'a Value> {
    zarray
        .get("_NCZARR_ARRAY")
        .or_else(|| zarray.get("_nczarr_array"))
        .or_else(|| attrs.get("_nczarr_array"))
}

/// Rewrite an NCZarr array's `.zarray` (`doc`) and `.zattrs` (`attrs`)
/// into the plain Zarr v2 that means the same thing (see the module doc).
/// Plain Zarr arrays are left alone.
pub fn adapt(doc: &mut Value, attrs: &mut Map<String, Value>) {
    let Some(record) = array_record(doc, attrs).cloned() else {
        return;
    };
    let refs = record
        .get("dimrefs")
        .or_else(|| record.get("dimension_references"))
        .and_then(Value::as_array);
    if let Some(refs) = refs {
        let names: Vec<Value> = refs
            .iter()
            .map(|r| match r.as_str() {
                Some(s) => json!(s.rsplit('/').next().unwrap_or(s)),
                None => Value::Null,
            })
            .collect();
        attrs.insert("_ARRAY_DIMENSIONS".into(), Value::Array(names));
    }
    let scalar = record.get("storage").and_then(Value::as_str) == Some("scalar")
        || record.get("scalar").and_then(Value::as_u64) == Some(1);
    if let Some(o) = doc.as_object_mut() {
        if scalar && o.get("shape") == Some(&json!([1])) {
            o.insert("shape".into(), json!([]));
            o.insert("chunks".into(), json!([]));
            attrs.insert("_ARRAY_DIMENSIONS".into(), json!([]));
        }
        if let Some(Value::String(t)) = o.get("dtype")
            && matches!(t.as_str(), "<U1" | ">U1" | "|U1")
        {
            o.insert("dtype".into(), json!("|S1"));
        }
        // netcdf-c writes HDF5's shuffle parameter as is: 0 means "the
        // element size", which numcodecs spells out.
        let item = o
            .get("dtype")
            .and_then(Value::as_str)
            .and_then(|t| DataType::from_numpy(t).ok())
            .map(|(dt, _)| dt.size());
        if let (Some(item), Some(Value::Array(filters))) = (item, o.get_mut("filters")) {
            for f in filters.iter_mut() {
                if f.get("id").and_then(Value::as_str) == Some("shuffle")
                    && f.get("elementsize").and_then(Value::as_u64) == Some(0)
                {
                    f["elementsize"] = json!(item);
                }
            }
        }
        if o.get("fill_value").is_none_or(Value::is_null) {
            let fill = match attrs.get("_FillValue") {
                Some(Value::Array(a)) if a.len() == 1 => Some(a[0].clone()),
                Some(v @ (Value::Number(_) | Value::String(_))) => Some(v.clone()),
                _ => None,
            };
            let fill = fill.or_else(|| {
                let typestr = o.get("dtype")?.as_str()?;
                default_fill(&DataType::from_numpy(typestr).ok()?.0)
            });
            if let Some(fill) = fill {
                o.insert("fill_value".into(), fill);
            }
        }
    }
    hide_bookkeeping(attrs);
    if let Some(o) = doc.as_object_mut() {
        o.retain(|k, _| !is_bookkeeping(k));
    }
}

/// netCDF's default fill value (`NC_FILL_*`) for a type, as the JSON a
/// v2 `fill_value` would hold; `None` where netCDF has none.
fn default_fill(dtype: &DataType) -> Option<Value> {
    /// NC_FILL_FLOAT and NC_FILL_DOUBLE (netcdf.h).
    const NC_FILL_REAL: f64 = 9.969_209_968_386_869e36;
    Some(match dtype {
        DataType::Int8 => json!(-127),
        DataType::UInt8 => json!(255),
        DataType::Int16 => json!(-32767),
        DataType::UInt16 => json!(65535),
        DataType::Int32 => json!(-2147483647),
        DataType::UInt32 => json!(4294967295u64),
        DataType::Int64 => json!(-9223372036854775806i64),
        DataType::UInt64 => json!(18446744073709551614u64),
        DataType::Float32 | DataType::Float64 => json!(NC_FILL_REAL),
        // NC_FILL_CHAR is NUL: base64 of one zero byte.
        DataType::FixedBytes(1) => json!("AA=="),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netcdf_c_4_9_0_layout() {
        // As Debian's nccopy 4.9.0 writes them.
        let mut doc = json!({"zarr_format": 2, "shape": [5], "dtype": "<U1", "chunks": [5],
            "fill_value": null, "order": "C", "compressor": null, "filters": null,
            "_NCZARR_ARRAY": {"dimrefs": ["/g/nchar"], "storage": "chunked"}});
        let mut attrs = json!({"units": "1", "_NCZARR_ATTR": {"types": {"units": "<U1"}}})
            .as_object()
            .unwrap()
            .clone();
        adapt(&mut doc, &mut attrs);
        assert_eq!(doc["dtype"], "|S1");
        assert_eq!(doc["fill_value"], "AA==");
        assert!(doc.get("_NCZARR_ARRAY").is_none());
        assert_eq!(attrs["_ARRAY_DIMENSIONS"], json!(["nchar"]));
        assert!(attrs.get("_NCZARR_ATTR").is_none());
        assert_eq!(attrs["units"], "1");
    }

    #[test]
    fn scalars_fills_and_the_2_0_layout() {
        let mut doc = json!({"zarr_format": 2, "shape": [1], "dtype": "<i4", "chunks": [1],
            "fill_value": null});
        let mut attrs = json!({"_FillValue": -5,
            "_nczarr_array": {"dimension_references": [], "storage": "scalar"}})
        .as_object()
        .unwrap()
        .clone();
        adapt(&mut doc, &mut attrs);
        assert_eq!(doc["shape"], json!([]));
        assert_eq!(doc["fill_value"], -5);
        assert!(attrs.get("_nczarr_array").is_none());

        // No _FillValue: netCDF's default for the type.
        let mut doc = json!({"shape": [3], "dtype": "<f4", "chunks": [3], "fill_value": null,
            "_nczarr_array": {"dimrefs": ["/x"]}});
        let mut attrs = Map::new();
        adapt(&mut doc, &mut attrs);
        assert_eq!(doc["fill_value"].as_f64().unwrap() as f32, 9.96921e36_f32);

        // Plain Zarr is untouched.
        let plain = json!({"shape": [1], "dtype": "<U1", "chunks": [1], "fill_value": null});
        let mut doc = plain.clone();
        adapt(&mut doc, &mut Map::new());
        assert_eq!(doc, plain);
    }
}
