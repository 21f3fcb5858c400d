//! A [`Series`] as an NCA JSON descriptor (docs/AGGREGATION.md), which
//! slabfs reads as `NAME.nca.json`.
//!
//! Every joined variable is partitioned along the join dimension, one
//! partition per member; every other variable is one partition, the
//! first member's. Master attributes are the first member's. A
//! partition's units default to its file's own, so a member whose join
//! coordinate is in other units (its own `days since`) is converted to
//! the master's (the first member's) as it is read.
//!
//! NCA unpacks and masks its netCDF partitions (x × `scale_factor` +
//! `add_offset`, `_FillValue`, `missing_value` and `valid_*` elements
//! become the master's fill value), as netCDF4-python reads them. A
//! packed variable's master is therefore float64, without the packing
//! attributes (and so with netCDF's default double fill).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Series, Variable, location};
use crate::dtype::{DataType, Endian};

/// The attributes of a packed variable that describe its packed values.
const PACKING: [&str; 7] = [
    "scale_factor",
    "add_offset",
    "_FillValue",
    "missing_value",
    "valid_range",
    "valid_min",
    "valid_max",
];

/// The keys of an NCA master variable that are not attributes.
const RESERVED: [&str; 3] = ["dtype", "nca_dimensions", "nca_array"];

/// The descriptor of `series`, its file locations relative to `dir` (the
/// directory it is written to).
pub fn write(series: &Series, dir: &Path) -> Value {
    let mut dims = Map::new();
    for v in &series.variables {
        for (i, d) in v.dims.iter().enumerate() {
            let n = match v.joined && i == 0 {
                true => series.len(),
                false => v.shape[i],
            };
            dims.entry(d.clone()).or_insert(json!(n));
        }
    }
    let mut vars = Map::new();
    for v in &series.variables {
        vars.insert(v.name.clone(), Value::Object(master(series, v, dir)));
    }
    json!({
        "attributes": Value::Object(series.attributes.clone()),
        "dimensions": Value::Object(dims),
        "variables": Value::Object(vars),
    })
}

fn master(series: &Series, v: &Variable, dir: &Path) -> Map<String, Value> {
    let packed =
        v.attributes.contains_key("scale_factor") || v.attributes.contains_key("add_offset");
    let mut m = Map::new();
    let dtype = match packed {
        true => DataType::Float64,
        false => v.dtype.clone(),
    };
    m.insert("dtype".into(), json!(dtype.numpy_typestr(Endian::Little)));
    m.insert("nca_dimensions".into(), json!(v.dims.join(" ")));
    for (k, a) in &v.attributes {
        if RESERVED.contains(&k.as_str()) || (packed && PACKING.contains(&k.as_str())) {
            continue;
        }
        m.insert(k.clone(), a.clone());
    }
    let whole = |len0: u64, start: u64| -> Vec<Value> {
        v.shape
            .iter()
            .enumerate()
            .map(|(i, &n)| match i {
                0 if v.joined => json!([start, start + len0]),
                _ => json!([0, n]),
            })
            .collect()
    };
    let data = |path: &Path| json!({"file": location(path, dir), "ncvar": v.name});
    let array = if v.joined {
        let mut start = 0;
        let mut parts = Vec::new();
        for m in series.members.iter().filter(|m| m.len > 0) {
            parts.push(json!({
                "index": [parts.len()],
                "location": whole(m.len, start),
                "data": data(&m.path),
            }));
            start += m.len;
        }
        json!({"pdimensions": [v.dims[0]], "pshape": [parts.len()], "Partitions": parts})
    } else {
        let first = &series.members[0];
        json!({
            "pdimensions": [],
            "pshape": [],
            "Partitions": [{"index": [], "location": whole(0, 0), "data": data(&first.path)}],
        })
    };
    m.insert("nca_array".into(), array);
    m
}

/// `v` as indented JSON, but every value whose one-line form fits in
/// [`LINE`] characters on one line: a partition is one line, so a
/// descriptor of 10,000 members stays readable (and 8 times smaller than
/// fully indented).
pub fn to_text(v: &Value) -> String {
    let mut out = String::new();
    pretty(v, 0, &mut out);
    out.push('\n');
    out
}

/// The widest value kept on one line.
const LINE: usize = 120;

fn pretty(v: &Value, indent: usize, out: &mut String) {
    let flat = v.to_string();
    if flat.len() + indent <= LINE {
        out.push_str(&flat);
        return;
    }
    let pad = |n: usize, out: &mut String| out.extend(std::iter::repeat_n(' ', n));
    match v {
        Value::Array(a) => {
            out.push_str("[\n");
            for (i, x) in a.iter().enumerate() {
                pad(indent + 2, out);
                pretty(x, indent + 2, out);
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            pad(indent, out);
            out.push(']');
        }
        Value::Object(o) => {
            out.push_str("{\n");
            for (i, (k, x)) in o.iter().enumerate() {
                pad(indent + 2, out);
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                pretty(x, indent + 2, out);
                out.push_str(if i + 1 < o.len() { ",\n" } else { "\n" });
            }
            pad(indent, out);
            out.push('}');
        }
        _ => out.push_str(&flat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_one_line_and_the_text_is_the_same_json() {
        let v = json!({"a": {"Partitions": [{"index": [0], "location": [[0, 3], [0, 4]],
            "data": {"file": "x.nc", "ncvar": "tas"}}]}, "long": vec!["y".repeat(30); 5]});
        let t = to_text(&v);
        assert!(
            t.contains(
                r#"{"data":{"file":"x.nc","ncvar":"tas"},"index":[0],"location":[[0,3],[0,4]]}"#
            ),
            "{t}"
        );
        assert!(t.contains("\"long\": [\n"), "{t}");
        assert_eq!(serde_json::from_str::<Value>(&t).unwrap(), v);
    }
}
