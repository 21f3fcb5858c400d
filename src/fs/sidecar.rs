//! What the mount says about an array besides its bytes: the `NAME.json`
//! sidecar file and the `user.slabfs.*` extended attributes.
//!
//! A raw file has no header, so everything a reader needs to interpret it
//! (shape, NumPy typestr in the byte order actually served, dimension
//! names) is published next to it, once as a JSON document a script can
//! load, once as xattrs a shell can query (`getfattr -n user.slabfs.shape`).
//! Both are computed once at mount time.
//!
//! The sidecar of a `<f8` array of shape 10x7:
//!
//! ```json
//! {
//!   "shape": [10, 7],
//!   "dtype": "<f8",
//!   "byte_order": "little",
//!   "order": "C",
//!   "itemsize": 8,
//!   "nbytes": 560,
//!   "dimension_names": ["y", "x"],
//!   "chunk_shape": [4, 3],
//!   "fill_value": "NaN",
//!   "attributes": {"units": "K"},
//!   "source": "/data/basic.zarr/g1/sub/temp"
//! }
//! ```
//!
//! # Directories
//!
//! A directory with attributes (a file's global attributes, a group's, a
//! Zarr group's, a descriptor's: [`crate::formats::dataset::Directory`])
//! has a sidecar too, the file `.json` inside it (the sidecar of the
//! empty name, as `NAME.json` is the sidecar of `NAME`; the mount root's
//! is `/.json`), and the xattr `user.slabfs.attributes` on the directory
//! itself (the attributes as one compact JSON object). Its document is
//! the `attributes` object of a variable's sidecar and the `source` the
//! attributes were read from, and for a netCDF file or group its own
//! dimensions (netCDF's length: the records of an unlimited one; a
//! classic file's in definition order, a netCDF-4 file's by name):
//!
//! ```json
//! {
//!   "attributes": {"title": "runs", "Conventions": "CF-1.8"},
//!   "dimensions": [{"name": "time", "size": 3, "unlimited": true}],
//!   "source": "/data/runs/a.nc"
//! }
//! ```
//!
//! A netCDF file or group with dimensions but no attributes has the
//! sidecar (with `"attributes": {}`) and no xattr.
//!
//! Linux refuses xattr values over 64 KiB (`XATTR_SIZE_MAX`: `getxattr`
//! fails with E2BIG whatever the buffer), so attributes whose JSON is
//! longer are only in the sidecar, with a debug line.
//!
//! Fill values are decoded from the element's native-order bytes: numbers
//! as JSON numbers, non-finite floats as `"NaN"`, `"Infinity"`,
//! `"-Infinity"` (the Zarr convention), complex as `[re, im]`, bool as
//! `true`/`false`, datetimes as their int64 count (`"NaT"` for NaT), byte
//! strings and raw types as base64 (as Zarr v2 writes them), UCS-4 strings
//! as a string without trailing NULs.

use base64::Engine;
use half::f16;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::dtype::{DataType, Endian};
use crate::engine::array::ArrayMeta;
use crate::formats::dataset::Directory;

/// Names of the extended attributes of an array file.
pub const XATTR_SHAPE: &str = "user.slabfs.shape";
pub const XATTR_DTYPE: &str = "user.slabfs.dtype";
pub const XATTR_DIMS: &str = "user.slabfs.dims";
/// The attributes of a directory, as a compact JSON object.
pub const XATTR_ATTRIBUTES: &str = "user.slabfs.attributes";

/// The name of a directory's sidecar inside it.
pub const DIRECTORY_SIDECAR: &str = ".json";

/// The largest xattr value Linux passes (`XATTR_SIZE_MAX`).
pub const XATTR_SIZE_MAX: usize = 64 * 1024;

#[derive(Serialize)]
struct Sidecar<'a> {
    shape: &'a [u64],
    dtype: String,
    byte_order: &'static str,
    order: &'static str,
    itemsize: usize,
    nbytes: u64,
    dimension_names: &'a [Option<String>],
    chunk_shape: Option<&'a [u64]>,
    fill_value: Value,
    attributes: &'a Map<String, Value>,
    source: &'a str,
}

/// The sidecar document of an array served in byte order `order`,
/// pretty-printed with a final newline.
pub fn sidecar_json(meta: &ArrayMeta, order: Endian) -> Vec<u8> {
    let doc = Sidecar {
        shape: &meta.shape,
        dtype: meta.dtype.numpy_typestr(order),
        byte_order: match order {
            Endian::Little => "little",
            Endian::Big => "big",
        },
        order: "C",
        itemsize: meta.item_size(),
        nbytes: meta.nbytes(),
        dimension_names: &meta.dimension_names,
        chunk_shape: meta.chunk_shape.as_deref(),
        fill_value: fill_value_json(&meta.dtype, &meta.fill_value),
        attributes: &meta.attributes,
        source: &meta.source,
    };
    let mut out = serde_json::to_vec_pretty(&doc).expect("a sidecar always serializes");
    out.push(b'\n');
    out
}

/// The xattrs of an array file, by name: shape and dims as compact JSON
/// (`[10,7]`, `["y","x"]`, `null` for an unnamed dimension), dtype as the
/// NumPy typestr of the served bytes.
pub fn xattrs(meta: &ArrayMeta, order: Endian) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            XATTR_SHAPE,
            serde_json::to_vec(&meta.shape).expect("serializes"),
        ),
        (XATTR_DTYPE, meta.dtype.numpy_typestr(order).into_bytes()),
        (
            XATTR_DIMS,
            serde_json::to_vec(&meta.dimension_names).expect("serializes"),
        ),
    ]
}

#[derive(Serialize)]
struct DirectorySidecar<'a> {
    attributes: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dimensions: Vec<Value>,
    source: &'a str,
}

/// The sidecar document of a directory, pretty-printed with a final
/// newline (see the module docs).
pub fn directory_json(dir: &Directory) -> Vec<u8> {
    let doc = DirectorySidecar {
        attributes: &dir.attributes,
        dimensions: dir
            .dimensions
            .iter()
            .map(|(name, size, unlimited)| json!({"name": name, "size": size, "unlimited": unlimited}))
            .collect(),
        source: &dir.source,
    };
    let mut out = serde_json::to_vec_pretty(&doc).expect("a sidecar always serializes");
    out.push(b'\n');
    out
}

/// The xattrs of the directory at mount path `path`: its attributes as
/// compact JSON, unless longer than Linux passes (then none, with a debug
/// line naming it).
pub fn directory_xattrs(path: &str, dir: &Directory) -> Vec<(&'static str, Vec<u8>)> {
    if dir.attributes.is_empty() {
        return Vec::new();
    }
    let value = serde_json::to_vec(&dir.attributes).expect("serializes");
    if value.len() > XATTR_SIZE_MAX {
        log::debug!(
            "no {XATTR_ATTRIBUTES} on /{path}: {} bytes of attributes, over Linux's {XATTR_SIZE_MAX}; \
             they are in its {DIRECTORY_SIDECAR}",
            value.len()
        );
        return Vec::new();
    }
    vec![(XATTR_ATTRIBUTES, value)]
}

/// One element (native byte order) as JSON, per the module docs.
pub fn fill_value_json(dtype: &DataType, bytes: &[u8]) -> Value {
    use DataType::*;
    let b = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&bytes[..n]);
        a
    };
    if bytes.len() != dtype.size() {
        // ArrayMeta::new guarantees the size; never panic on it anyway.
        return Value::Null;
    }
    match dtype {
        Bool => Value::Bool(bytes[0] != 0),
        Int8 => json!(bytes[0] as i8),
        UInt8 => json!(bytes[0]),
        Int16 => json!(i16::from_ne_bytes([bytes[0], bytes[1]])),
        UInt16 => json!(u16::from_ne_bytes([bytes[0], bytes[1]])),
        Int32 => json!(i32::from_ne_bytes(bytes.try_into().expect("4 bytes"))),
        UInt32 => json!(u32::from_ne_bytes(bytes.try_into().expect("4 bytes"))),
        Int64 => json!(i64::from_ne_bytes(b(8))),
        UInt64 => json!(u64::from_ne_bytes(b(8))),
        DateTime64(_) | TimeDelta64(_) => match i64::from_ne_bytes(b(8)) {
            i64::MIN => json!("NaT"),
            v => json!(v),
        },
        Float16 | Float32 | Float64 => float_json(bytes),
        X87Extended => float_json(&crate::dtype::x87_to_f64(bytes).to_ne_bytes()),
        Complex64 | Complex128 => {
            let half = bytes.len() / 2;
            json!([float_json(&bytes[..half]), float_json(&bytes[half..])])
        }
        Unicode(_) => {
            let s: String = bytes
                .chunks_exact(4)
                .map(|c| u32::from_ne_bytes(c.try_into().expect("4 bytes")))
                .take_while(|&cp| cp != 0)
                .map(|cp| char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect();
            json!(s)
        }
        FixedBytes(_) | RawBits(_) => {
            json!(base64::engine::general_purpose::STANDARD.encode(bytes))
        }
    }
}

/// A float of 2, 4 or 8 native-order bytes.
fn float_json(bytes: &[u8]) -> Value {
    let v = match bytes.len() {
        2 => f16::from_ne_bytes([bytes[0], bytes[1]]).to_f64(),
        4 => f32::from_ne_bytes(bytes.try_into().expect("4 bytes")) as f64,
        8 => f64::from_ne_bytes(bytes.try_into().expect("8 bytes")),
        _ => return Value::Null,
    };
    if v.is_nan() {
        json!("NaN")
    } else if v == f64::INFINITY {
        json!("Infinity")
    } else if v == f64::NEG_INFINITY {
        json!("-Infinity")
    } else if bytes.len() == 4 {
        // Print the f32 as its shortest f32 decimal (0.1f32, not
        // 0.10000000149011612).
        let f = f32::from_ne_bytes(bytes.try_into().expect("4 bytes"));
        json!(f.to_string().parse::<f64>().unwrap_or(v))
    } else {
        json!(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_values() {
        let f = |dt: DataType, b: Vec<u8>| fill_value_json(&dt, &b);
        assert_eq!(
            f(DataType::Float64, f64::NAN.to_ne_bytes().to_vec()),
            json!("NaN")
        );
        assert_eq!(
            f(DataType::Float32, f32::NEG_INFINITY.to_ne_bytes().to_vec()),
            json!("-Infinity")
        );
        assert_eq!(
            f(DataType::Float32, 0.1f32.to_ne_bytes().to_vec()),
            json!(0.1)
        );
        assert_eq!(
            f(DataType::Float16, f16::from_f32(1.5).to_ne_bytes().to_vec()),
            json!(1.5)
        );
        assert_eq!(
            f(DataType::Int16, (-7i16).to_ne_bytes().to_vec()),
            json!(-7)
        );
        assert_eq!(
            f(DataType::UInt64, u64::MAX.to_ne_bytes().to_vec()),
            json!(u64::MAX)
        );
        assert_eq!(f(DataType::Bool, vec![1]), json!(true));
        assert_eq!(
            f(
                DataType::DateTime64("ns".into()),
                i64::MIN.to_ne_bytes().to_vec()
            ),
            json!("NaT")
        );
        let mut c = 1.0f32.to_ne_bytes().to_vec();
        c.extend(f32::NAN.to_ne_bytes());
        assert_eq!(f(DataType::Complex64, c), json!([1.0, "NaN"]));
        assert_eq!(f(DataType::FixedBytes(3), b"ab\0".to_vec()), json!("YWIA"));
        let mut u = Vec::new();
        for cp in ['h' as u32, 'é' as u32, 0] {
            u.extend(cp.to_ne_bytes());
        }
        assert_eq!(f(DataType::Unicode(3), u), json!("hé"));
    }

    #[test]
    fn sidecar_names_the_served_byte_order() {
        let mut meta = ArrayMeta::new(
            "store/temp",
            vec![10, 7],
            DataType::Float64,
            f64::NAN.to_ne_bytes().to_vec(),
        )
        .unwrap();
        meta.dimension_names = vec![Some("y".into()), None];
        meta.chunk_shape = Some(vec![4, 3]);
        meta.attributes.insert("units".into(), json!("K"));
        let doc: Value = serde_json::from_slice(&sidecar_json(&meta, Endian::Big)).unwrap();
        assert_eq!(doc["shape"], json!([10, 7]));
        assert_eq!(doc["dtype"], json!(">f8"));
        assert_eq!(doc["byte_order"], json!("big"));
        assert_eq!(doc["nbytes"], json!(560));
        assert_eq!(doc["dimension_names"], json!(["y", null]));
        assert_eq!(doc["chunk_shape"], json!([4, 3]));
        assert_eq!(doc["fill_value"], json!("NaN"));
        assert_eq!(doc["attributes"]["units"], json!("K"));
        let x = xattrs(&meta, Endian::Little);
        assert_eq!(x[0], (XATTR_SHAPE, b"[10,7]".to_vec()));
        assert_eq!(x[1], (XATTR_DTYPE, b"<f8".to_vec()));
        assert_eq!(x[2], (XATTR_DIMS, b"[\"y\",null]".to_vec()));
    }
}
