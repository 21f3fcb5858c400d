//! Small helpers for reading metadata JSON with errors that name the file.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The largest metadata document slabfs parses (consolidated metadata of
/// big hierarchies runs to megabytes; hundreds would be hostile).
pub const MAX_METADATA_BYTES: u64 = 256 << 20;

pub fn parse(source: &str, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::metadata(source, format!("invalid JSON: {e}")))
}

pub fn obj<'a>(source: &str, v: &'a Value) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| Error::metadata(source, "expected a JSON object"))
}

pub fn field<'a>(source: &str, o: &'a Map<String, Value>, key: &str) -> Result<&'a Value> {
    o.get(key)
        .ok_or_else(|| Error::metadata(source, format!("missing \"{key}\"")))
}

pub fn u64_list(source: &str, v: &Value, what: &str) -> Result<Vec<u64>> {
    v.as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
        .ok_or_else(|| {
            Error::metadata(
                source,
                format!("{what} {v} is not a list of non-negative integers"),
            )
        })
}
