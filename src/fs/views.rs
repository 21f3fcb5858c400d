//! Optional per-array views beside the raw file: `NAME.npy` (a NumPy
//! header followed by the raw data, so `np.load(mmap_mode="r")` works) and
//! `NAME.hdr` (an ENVI header, so GDAL opens `NAME` as ENVI raw).
//!
//! This module is pure: it turns an [`ArrayMeta`] and the served byte
//! order into header bytes. The tree ([`super::SlabFs`]) places them.

use crate::array::ArrayMeta;
use crate::dtype::Endian;

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

/// The `.npy` header (magic, version, header dict, padding) for the array
/// served in `order`; the data follows it directly. Its length is a
/// multiple of 64.
pub fn npy_header(meta: &ArrayMeta, order: Endian) -> Vec<u8> {
    let _ = (meta, order);
    unimplemented!("views::npy_header")
}

/// The ENVI `.hdr` text for the raw file of `meta` served in `order`, or
/// why ENVI cannot describe it (a dtype ENVI lacks, such as strings).
pub fn envi_header(meta: &ArrayMeta, order: Endian) -> Result<String, String> {
    let _ = (meta, order);
    Err("views::envi_header: not written yet".into())
}
