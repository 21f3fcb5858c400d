//! A `format: raw` sub-array: a C-order block of fixed-size elements
//! `file_offset` bytes into a file, in the byte order its `dtype` names.
//!
//! Reads are positioned reads of exactly the runs a box needs, computed
//! and merged by the netCDF-3 reader's layout code ([`VarLayout::runs`],
//! [`coalesce`](crate::formats::netcdf3::layout::coalesce)): a fixed netCDF-3 variable is the same thing, big-endian.
//! The bytes are then swapped to native order once.

use std::path::Path;
use std::sync::Arc;

use crate::dtype::{DataType, Endian, swap_in_place};
use crate::engine::array::{ArrayMeta, ArraySource, ChangeStamp};
use crate::engine::index::{Region, checked_num_elements};
use crate::error::{Error, Result};
use crate::formats::netcdf3::layout::{VarLayout, read_runs};
use crate::formats::netcdf3::variable::{MAX_GAP, MAX_WINDOW};
use crate::storage::ReadAt;

pub struct RawArray {
    meta: ArrayMeta,
    path: String,
    file: Arc<dyn ReadAt>,
    layout: VarLayout,
    order: Endian,
}

impl std::fmt::Debug for RawArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawArray")
            .field("path", &self.path)
            .field("layout", &self.layout)
            .finish()
    }
}

impl RawArray {
    /// Open `path` as `shape` elements of `dtype` in byte order `order`
    /// from `offset`; the file must hold them all.
    pub fn open(
        file: Arc<dyn ReadAt>,
        path: &Path,
        offset: u64,
        shape: Vec<u64>,
        dtype: DataType,
        order: Endian,
    ) -> Result<RawArray> {
        let name = path.display().to_string();
        let io = |e| Error::Io {
            path: name.clone(),
            source: e,
        };
        let len = file.size().map_err(io)?;
        let item = dtype.size() as u64;
        let nbytes = checked_num_elements(&shape)
            .and_then(|n| n.checked_mul(item))
            .and_then(|n| n.checked_add(offset))
            .ok_or_else(|| Error::metadata(&name, format!("raw shape {shape:?} overflows")))?;
        if nbytes > len {
            return Err(Error::metadata(
                &name,
                format!(
                    "raw data of shape {shape:?} ({dtype}) at offset {offset} needs {nbytes} bytes; \
                     the file has {len}"
                ),
            ));
        }
        let mut strides = vec![item; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        let meta = ArrayMeta::new(name.clone(), shape.clone(), dtype, vec![0; item as usize])?;
        Ok(RawArray {
            meta,
            path: name,
            file,
            layout: VarLayout {
                begin: offset,
                shape,
                strides,
                item,
                is_record: false,
                vsize: nbytes - offset,
            },
            order,
        })
    }

    fn pread(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| Error::Io {
            path: format!(
                "{} (raw bytes {offset}..{})",
                self.path,
                offset + buf.len() as u64
            ),
            source: e,
        })
    }
}

impl ArraySource for RawArray {
    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    /// The file's identity and times (nothing is cached, so no cache id).
    fn change_stamp(&self) -> ChangeStamp {
        ChangeStamp {
            cache_id: None,
            data: self
                .file
                .stamp()
                .or_else(|| super::file_stamp(Path::new(&self.path))),
            elsewhere: false,
        }
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        read_runs(
            self.layout.runs(region),
            MAX_GAP,
            MAX_WINDOW,
            out,
            |buf, offset| self.pread(buf, offset),
        )?;
        if self.order != Endian::NATIVE {
            swap_in_place(out, self.meta.dtype.swap_unit());
        }
        Ok(())
    }
}
