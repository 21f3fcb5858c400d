//! Optional per-array views beside the raw file: `NAME.npy` (a NumPy
//! header followed by the raw data, so `np.load(mmap_mode="r")` works) and
//! `NAME.hdr` (an ENVI header, so GDAL opens `NAME` as ENVI raw).
//!
//! This module is pure: it turns an [`ArrayMeta`] and the served byte
//! order into header bytes. The tree ([`super::SlabFs`]) places them: the
//! `.npy` file is [`npy_header`] followed by exactly the bytes of the raw
//! file, the `.hdr` file is the text of [`envi_header`].
//!
//! # The `.npy` header
//!
//! We write what `numpy.save` writes, byte for byte (NumPy's
//! `numpy/lib/_format_impl.py`, `_write_array_header`), so that a reader
//! cannot tell the view from a file NumPy saved:
//!
//! ```text
//! \x93NUMPY \x01 \x00 <u16 LE header length>
//! {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }<spaces>\n
//! ```
//!
//! - The dict is Python `repr` text with the keys sorted; `descr` is the
//!   NumPy typestr in the served byte order (`|` for single bytes),
//!   `shape` a Python tuple: `()`, `(5,)`, `(3, 4)`.
//! - NumPy appends `21 - len(str(shape[0]))` spaces (room to grow the
//!   first axis in place; 21 digits hold any 64-bit size) for rank > 0.
//! - Then spaces and a final `\n` so that magic + length field + header
//!   is a multiple of 64 bytes (`ARRAY_ALIGN`): the data starts aligned,
//!   which `np.load(mmap_mode="r")` needs for an aligned `mmap` view.
//!   When the header is already aligned NumPy still pads a full 64 bytes,
//!   and so do we.
//! - Version 1.0 stores the header length in 2 bytes; a header longer
//!   than 65535 bytes (only arrays of rank > ~21000, which Zarr allows)
//!   switches to version 2.0 and a 4-byte length, as NumPy does. Note that
//!   `np.load` refuses headers above 10000 bytes unless asked
//!   (`max_header_size`), which only concerns ranks in the thousands.
//!
//! The header's length depends only on the metadata, so the `.npy` file's
//! size is known at mount time and a read at offset `o` of it is a read of
//! the raw file at `o - header.len()`.
//!
//! # The `.hdr` header
//!
//! ENVI describes a 3-D cube of `bands x lines x samples`; with
//! `interleave = bsq` (band sequential) that cube is exactly a row-major
//! array of shape `[bands, lines, samples]`, so the raw file itself is the
//! ENVI data file with `header offset = 0`. Ranks map as:
//!
//! | rank | shape | samples | lines | bands |
//! | --- | --- | --- | --- | --- |
//! | 0 | `[]` | 1 | 1 | 1 |
//! | 1 | `[x]` | x | 1 | 1 |
//! | 2 | `[y, x]` | x | y | 1 |
//! | 3 | `[b, y, x]` | x | y | b |
//! | n > 3 | `[a, .., b, y, x]` | x | y | a x .. x b (leading axes folded, row-major) |
//!
//! `data type` codes are ENVI's: 1 = uint8 (also used for bool, whose
//! bytes are 0 or 1), 2 = int16, 3 = int32, 4 = float32, 5 = float64,
//! 6 = complex64, 9 = complex128, 12 = uint16, 13 = uint32, 14 = int64
//! (also datetime64/timedelta64, whose bytes are int64 counts; the unit is
//! in the description), 15 = uint64 (14 and 15 are in ENVI's own
//! specification, but GDAL's ENVI driver did not read them as of GDAL 3.6,
//! Debian 12's: it refuses such files with "does not have a value for the
//! data_type that is recognised"). ENVI has no signed 8-bit, half-float,
//! string or opaque type: those arrays get no `.hdr` ([`envi_header`]
//! returns why). Serving int8 as code 1 would make GDAL read -1 as 255,
//! a silent wrong answer, which is worse than no header. GDAL's ENVI
//! driver also reads `samples`, `lines` and `bands` into C `int`s, so an
//! array needing more than 2^31 - 1 of any (or none at all: an empty
//! array) is refused too.
//!
//! `byte order` is 0 for little-endian, 1 for big-endian: the order the
//! mount serves (`--byte-order`). `data ignore value` (GDAL's nodata) is
//! written only when the array carries a numeric CF `_FillValue` or
//! `missing_value` attribute: the Zarr `fill_value` alone says what
//! unwritten chunks read as (often 0), not that the value means "missing".
//! Band names are not written: they would only repeat the band index, and
//! their size would grow with the number of bands.

use serde_json::Value;

use crate::dtype::{DataType, Endian};
use crate::engine::array::ArrayMeta;

/// Which files each array shows (`--views`, default `raw,json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Views {
    /// `NAME`: the flat row-major raw file.
    pub raw: bool,
    /// `NAME.json`: the sidecar.
    pub json: bool,
    /// `NAME.npy`: NumPy header + data.
    pub npy: bool,
    /// `NAME.hdr`: ENVI header describing `NAME`.
    pub hdr: bool,
}

impl Default for Views {
    fn default() -> Views {
        Views {
            raw: true,
            json: true,
            npy: false,
            hdr: false,
        }
    }
}

/// `\x93NUMPY`: the `.npy` magic string.
const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// NumPy's `ARRAY_ALIGN`: the data starts at a multiple of this.
const NPY_ALIGN: usize = 64;

/// NumPy's `GROWTH_AXIS_MAX_DIGITS`: spaces reserved after the dict so the
/// first axis can grow in place (`len(str(8 * 2**64 - 1))`).
const NPY_GROWTH_DIGITS: usize = 21;

/// The `.npy` header (magic, version, header dict, padding) for the array
/// served in `order`; the data follows it directly. Its length is a
/// multiple of 64.
pub fn npy_header(meta: &ArrayMeta, order: Endian) -> Vec<u8> {
    let shape = python_tuple(&meta.shape);
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        meta.dtype.numpy_typestr(order)
    );
    if let Some(first) = meta.shape.first() {
        let digits = first.to_string().len();
        dict.extend(std::iter::repeat_n(
            ' ',
            NPY_GROWTH_DIGITS.saturating_sub(digits),
        ));
    }
    // Version 1.0 if the padded header fits its 2-byte length, else 2.0.
    wrap_npy(&dict, 1, 2)
        .or_else(|| wrap_npy(&dict, 2, 4))
        .expect("an npy header of more than 4 GiB")
}

/// Magic, version, length field (`len_bytes` wide, little-endian), `dict`,
/// then spaces and `\n` up to the next multiple of [`NPY_ALIGN`] (always
/// at least the `\n`, and a whole 64 bytes when already aligned, as NumPy
/// does). `None` if the length does not fit the field.
fn wrap_npy(dict: &str, major: u8, len_bytes: usize) -> Option<Vec<u8>> {
    let prefix = NPY_MAGIC.len() + 2 + len_bytes;
    let hlen = dict.len() + 1; // + the final '\n'
    let pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    let total = hlen + pad;
    let len_field: Vec<u8> = match len_bytes {
        2 => u16::try_from(total).ok()?.to_le_bytes().to_vec(),
        _ => u32::try_from(total).ok()?.to_le_bytes().to_vec(),
    };
    let mut out = Vec::with_capacity(prefix + total);
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[major, 0]);
    out.extend_from_slice(&len_field);
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + pad, b' ');
    out.push(b'\n');
    Some(out)
}

/// Python's `repr` of a tuple of ints: `()`, `(5,)`, `(3, 4)`.
fn python_tuple(shape: &[u64]) -> String {
    match shape {
        [] => "()".into(),
        [n] => format!("({n},)"),
        _ => {
            let items: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", items.join(", "))
        }
    }
}

/// GDAL's ENVI driver reads `samples`, `lines` and `bands` as C `int`.
const ENVI_MAX_EXTENT: u64 = i32::MAX as u64;

/// The ENVI `.hdr` text for the raw file of `meta` served in `order`, or
/// why ENVI cannot describe it (a dtype ENVI lacks, such as strings).
pub fn envi_header(meta: &ArrayMeta, order: Endian) -> Result<String, String> {
    let code = envi_data_type(&meta.dtype).ok_or_else(|| {
        format!(
            "ENVI has no data type for {} (array {})",
            meta.dtype, meta.source
        )
    })?;
    let (bands, lines, samples) = envi_extents(&meta.shape).ok_or_else(|| {
        format!(
            "array {} has no elements, ENVI needs at least one",
            meta.source
        )
    })?;
    for (what, n) in [("samples", samples), ("lines", lines), ("bands", bands)] {
        if n > ENVI_MAX_EXTENT {
            return Err(format!(
                "array {} of shape {:?} needs {n} {what}, more than the {ENVI_MAX_EXTENT} GDAL's ENVI driver reads",
                meta.source, meta.shape
            ));
        }
    }
    let mut out = String::from("ENVI\n");
    out += &format!("description = {{{}}}\n", envi_description(meta));
    out += &format!("samples = {samples}\nlines = {lines}\nbands = {bands}\n");
    out += "header offset = 0\nfile type = ENVI Standard\n";
    out += &format!("data type = {code}\ninterleave = bsq\n");
    let byte_order = match order {
        Endian::Little => 0,
        Endian::Big => 1,
    };
    out += &format!("byte order = {byte_order}\n");
    if let Some(nodata) = cf_missing_value(meta) {
        out += &format!("data ignore value = {nodata}\n");
    }
    Ok(out)
}

/// ENVI's `data type` code for `dtype`, if it has one.
fn envi_data_type(dtype: &DataType) -> Option<u8> {
    use DataType::*;
    Some(match dtype {
        // bool is stored as bytes 0/1: a faithful uint8.
        Bool | UInt8 => 1,
        Int16 => 2,
        Int32 => 3,
        Float32 => 4,
        Float64 => 5,
        Complex64 => 6,
        Complex128 => 9,
        UInt16 => 12,
        UInt32 => 13,
        // Datetimes and durations are int64 counts of their unit.
        Int64 | DateTime64(_) | TimeDelta64(_) => 14,
        UInt64 => 15,
        _ => return None,
    })
}

/// `(bands, lines, samples)` of a shape, per the table in the module doc;
/// `None` for an empty array.
fn envi_extents(shape: &[u64]) -> Option<(u64, u64, u64)> {
    if shape.contains(&0) {
        return None;
    }
    // The product of non-zero dims is bounded by the file size, which
    // ArrayMeta checked fits a u64.
    Some(match shape {
        [] => (1, 1, 1),
        [x] => (1, 1, *x),
        [lead @ .., y, x] => (lead.iter().product(), *y, *x),
    })
}

/// One line saying what the cube is: the dtype, named axes and source.
/// ENVI ends the description at the first `}`, so braces are replaced,
/// and so are control characters (line breaks would end the line; a NUL
/// ends a C reader's string, losing the closing brace).
fn envi_description(meta: &ArrayMeta) -> String {
    let axes: Vec<String> = meta
        .shape
        .iter()
        .zip(&meta.dimension_names)
        .map(|(n, name)| match name {
            Some(name) => format!("{name}={n}"),
            None => n.to_string(),
        })
        .collect();
    format!(
        "slabfs: {} [{}] from {}",
        meta.dtype,
        axes.join(", "),
        meta.source
    )
    .replace(['{', '}'], "")
    .replace(|c: char| c.is_control(), " ")
}

/// The CF `_FillValue` (else `missing_value`) attribute, if it is a
/// number: the value the data's writer declared as "missing".
fn cf_missing_value(meta: &ArrayMeta) -> Option<String> {
    ["_FillValue", "missing_value"]
        .iter()
        .find_map(|key| match meta.attributes.get(*key)? {
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(shape: &[u64], dtype: DataType) -> ArrayMeta {
        let fill = vec![0; dtype.size()];
        ArrayMeta::new("/data/x.zarr/v", shape.to_vec(), dtype, fill).unwrap()
    }

    /// What NumPy writes: `total` bytes, version 1.0, `dict` then spaces
    /// and `\n`. The dicts and totals below are NumPy 2.4's output, from
    /// (`.venv/bin/python`):
    ///
    /// ```python
    /// import io, numpy as np
    /// b = io.BytesIO(); np.save(b, np.zeros(shape, dtype))
    /// print(len(b.getvalue()) - np.zeros(shape, dtype).nbytes, b.getvalue()[10:80])
    /// ```
    fn numpy_v1(total: usize, dict: &str) -> Vec<u8> {
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&((total - 10) as u16).to_le_bytes());
        v.extend_from_slice(dict.as_bytes());
        v.resize(total - 1, b' ');
        v.push(b'\n');
        v
    }

    #[test]
    fn npy_headers_match_numpy() {
        let cases: &[(&[u64], DataType, Endian, &str)] = &[
            (
                &[3, 4],
                DataType::Float32,
                Endian::Little,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            ),
            (
                &[5],
                DataType::Int16,
                Endian::Big,
                "{'descr': '>i2', 'fortran_order': False, 'shape': (5,), }",
            ),
            (
                &[],
                DataType::Float64,
                Endian::Little,
                "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
            ),
            (
                &[0, 7],
                DataType::UInt8,
                Endian::Big,
                "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 7), }",
            ),
            (
                &[2, 3],
                DataType::DateTime64("ns".into()),
                Endian::Little,
                "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2, 3), }",
            ),
            (
                &[2],
                DataType::FixedBytes(5),
                Endian::Little,
                "{'descr': '|S5', 'fortran_order': False, 'shape': (2,), }",
            ),
            (
                &[4],
                DataType::Unicode(3),
                Endian::Little,
                "{'descr': '<U3', 'fortran_order': False, 'shape': (4,), }",
            ),
            (
                &[1, 2, 3],
                DataType::Bool,
                Endian::Little,
                "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 2, 3), }",
            ),
            (
                &[1152921504606846975],
                DataType::Complex128,
                Endian::Little,
                "{'descr': '<c16', 'fortran_order': False, 'shape': (1152921504606846975,), }",
            ),
        ];
        for (shape, dtype, order, dict) in cases {
            let got = npy_header(&meta(shape, dtype.clone()), *order);
            assert_eq!(got, numpy_v1(128, dict), "{dtype} {shape:?}");
        }
    }

    #[test]
    fn npy_header_lengths_are_multiples_of_64() {
        for rank in 0..40 {
            for extent in [1u64, 9, 10, 12345, 1 << 40] {
                let shape = vec![extent; rank];
                if crate::engine::index::checked_num_elements(&shape).is_none_or(|n| n > 1 << 60) {
                    continue;
                }
                let h = npy_header(&meta(&shape, DataType::Float32), Endian::Little);
                assert_eq!(h.len() % 64, 0, "rank {rank} extent {extent}");
                assert_eq!(h.last(), Some(&b'\n'));
                let declared = u16::from_le_bytes([h[8], h[9]]) as usize;
                assert_eq!(declared + 10, h.len());
            }
        }
    }

    /// NumPy switches to version 2.0 (4-byte length) when the padded
    /// header exceeds 65535 bytes. Lengths from NumPy's own
    /// `_write_array_header(fp, d, None)` with `shape = (1,) * n`: 65536
    /// bytes (version 1.0, length field 0xfff6) for n = 21800 and 65600
    /// bytes (version 2.0) for n = 21830.
    #[test]
    fn npy_header_switches_to_version_2_like_numpy() {
        let h = npy_header(&meta(&vec![1; 21800], DataType::Float32), Endian::Little);
        assert_eq!(h.len(), 65536);
        assert_eq!(&h[6..10], &[1, 0, 0xf6, 0xff]);
        let h = npy_header(&meta(&vec![1; 21830], DataType::Float32), Endian::Little);
        assert_eq!(h.len(), 65600);
        assert_eq!(&h[6..8], &[2, 0]);
        assert_eq!(u32::from_le_bytes(h[8..12].try_into().unwrap()), 65600 - 12);
        assert!(h[12..].starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, "));
        assert_eq!(h.last(), Some(&b'\n'));
    }

    fn field<'a>(hdr: &'a str, key: &str) -> Option<&'a str> {
        hdr.lines()
            .find_map(|l| l.strip_prefix(key)?.trim_start().strip_prefix('='))
            .map(str::trim)
    }

    #[test]
    fn envi_header_of_a_3d_float_cube() {
        let mut m = meta(&[12, 90, 180], DataType::Float32);
        m.dimension_names = vec![Some("time".into()), Some("lat".into()), Some("lon".into())];
        let h = envi_header(&m, Endian::Little).unwrap();
        assert_eq!(
            h,
            "ENVI\n\
             description = {slabfs: float32 [time=12, lat=90, lon=180] from /data/x.zarr/v}\n\
             samples = 180\n\
             lines = 90\n\
             bands = 12\n\
             header offset = 0\n\
             file type = ENVI Standard\n\
             data type = 4\n\
             interleave = bsq\n\
             byte order = 0\n"
        );
        assert_eq!(
            field(&envi_header(&m, Endian::Big).unwrap(), "byte order"),
            Some("1")
        );
    }

    #[test]
    fn envi_extents_by_rank() {
        // shape, then (samples, lines, bands)
        type Case<'a> = (&'a [u64], (&'a str, &'a str, &'a str));
        let cases: &[Case] = &[
            (&[], ("1", "1", "1")),
            (&[7], ("7", "1", "1")),
            (&[5, 7], ("7", "5", "1")),
            (&[3, 5, 7], ("7", "5", "3")),
            (&[2, 3, 5, 7], ("7", "5", "6")),
            (&[2, 2, 3, 5, 7], ("7", "5", "12")),
        ];
        for (shape, (samples, lines, bands)) in cases {
            let h = envi_header(&meta(shape, DataType::Int16), Endian::Little).unwrap();
            assert_eq!(field(&h, "samples"), Some(*samples), "{shape:?}");
            assert_eq!(field(&h, "lines"), Some(*lines), "{shape:?}");
            assert_eq!(field(&h, "bands"), Some(*bands), "{shape:?}");
        }
    }

    #[test]
    fn envi_data_type_codes() {
        use DataType::*;
        let cases = [
            (Bool, "1"),
            (UInt8, "1"),
            (Int16, "2"),
            (Int32, "3"),
            (Float32, "4"),
            (Float64, "5"),
            (Complex64, "6"),
            (Complex128, "9"),
            (UInt16, "12"),
            (UInt32, "13"),
            (Int64, "14"),
            (DateTime64("s".into()), "14"),
            (TimeDelta64("ms".into()), "14"),
            (UInt64, "15"),
        ];
        for (dt, code) in cases {
            let h = envi_header(&meta(&[2, 2], dt.clone()), Endian::Little).unwrap();
            assert_eq!(field(&h, "data type"), Some(code), "{dt}");
        }
    }

    #[test]
    fn envi_refuses_what_it_cannot_describe() {
        use DataType::*;
        for dt in [Int8, Float16, FixedBytes(4), Unicode(2), RawBits(2)] {
            let err = envi_header(&meta(&[2, 2], dt.clone()), Endian::Little).unwrap_err();
            assert!(err.contains(&dt.to_string()), "{err}");
            assert!(err.contains("/data/x.zarr/v"), "{err}");
        }
        let err = envi_header(&meta(&[3, 0, 2], Float32), Endian::Little).unwrap_err();
        assert!(err.contains("no elements"), "{err}");
        let err = envi_header(&meta(&[1 << 31], UInt8), Endian::Little).unwrap_err();
        assert!(err.contains("samples"), "{err}");
        let err = envi_header(&meta(&[1 << 16, 1 << 16, 2, 1], UInt8), Endian::Little).unwrap_err();
        assert!(err.contains("bands"), "{err}");
        // Exactly INT_MAX is fine.
        assert!(envi_header(&meta(&[(1 << 31) - 1], UInt8), Endian::Little).is_ok());
    }

    #[test]
    fn envi_nodata_from_cf_attributes_only() {
        let mut m = meta(&[4, 4], DataType::Int16);
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little).unwrap(),
                "data ignore value"
            ),
            None
        );
        m.attributes.insert("missing_value".into(), (-9999).into());
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little).unwrap(),
                "data ignore value"
            ),
            Some("-9999")
        );
        m.attributes.insert("_FillValue".into(), 1.5e20.into());
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little).unwrap(),
                "data ignore value"
            ),
            Some("1.5e+20")
        );
        m.attributes.insert("_FillValue".into(), "NaN".into());
        m.attributes.remove("missing_value");
        assert_eq!(
            field(
                &envi_header(&m, Endian::Little).unwrap(),
                "data ignore value"
            ),
            None
        );
    }

    #[test]
    fn envi_description_cannot_end_early() {
        let mut m = meta(&[2], DataType::UInt8);
        m.source = "/odd/{dir}\nname".into();
        m.dimension_names = vec![Some("x}".into())];
        let h = envi_header(&m, Endian::Little).unwrap();
        let line = h.lines().nth(1).unwrap();
        assert_eq!(
            line,
            "description = {slabfs: uint8 [x=2] from /odd/dir name}"
        );
    }
}
