//! Classic netCDF files (netCDF-3: CDF-1, CDF-2 and CDF-5), read in pure
//! Rust. Each variable is an [`ArraySource`]; the aggregation readers and
//! the blocked-archive format build on [`File`].
//!
//! # The format, as far as a reader cares
//!
//! A file is a header ([`header`]) followed by the data: first every
//! *fixed* variable, each one contiguous, row-major and big-endian at its
//! `begin` offset (padded to 4 bytes); then the *records*. A record holds
//! one slice — everything but the first index — of every *record variable*
//! (those whose first dimension is the unlimited one), in header order,
//! each padded to 4 bytes. Reading a record variable therefore means one
//! read per record: its slices are `recsize` bytes apart. Two special
//! cases matter:
//!
//! - **A lone record variable is not padded.** With exactly one record
//!   variable, `recsize` is its unpadded slice size, so a `short v(t, 3)`
//!   advances 6 bytes per record, not 8 (netcdf-c's rule, which we copy).
//! - **Streaming numrecs.** `numrecs` all ones (`0xFFFFFFFF`, or 8 bytes of
//!   `0xFF` in CDF-5) means the writer could not seek back to the header:
//!   the number of records is however many whole records fit between the
//!   first record variable's `begin` and the end of the file.
//!
//! The variants differ only in integer widths and types: CDF-1 has 32-bit
//! offsets; CDF-2 64-bit `begin` offsets; CDF-5 also has 64-bit counts,
//! lengths, dimension ids and `numrecs`, and adds NC_UBYTE, NC_USHORT,
//! NC_UINT, NC_INT64 and NC_UINT64 ([`types`]). The header's `vsize` is
//! redundant (and 2^32-1 for large variables in CDF-1/2), so the layout is
//! recomputed from the shapes ([`layout`]).
//!
//! Values are served as stored: `scale_factor`/`add_offset` and
//! `_FillValue` are attributes in the sidecar, never applied. NC_CHAR is
//! `|S1` (one raw byte per element). The fill value reported is
//! `_FillValue` if the variable has one of its own type, else netCDF's
//! default for the type; data on disk is always complete (netcdf-c writes
//! the fill value into regions never written), so fill only informs.
//!
//! # I/O
//!
//! [`File::open`] reads the header with as few reads as it needs (64 KiB
//! first, more only if the header is longer) and checks every count and
//! offset before trusting it: a corrupt header is an
//! [`Error::Metadata`] naming the file, never a panic or a huge
//! allocation. The open file is shared by all variables (`Arc`); reads use
//! positioned I/O (`pread`) for exactly the runs a request needs, merged
//! where the region covers whole inner dimensions, and small gaps between
//! record slices read through rather than split into many calls
//! ([`variable`]). A file shorter than its header implies gives an error
//! naming the file and variable for reads past its end; the rest reads.

pub mod header;
pub mod layout;
pub mod types;
pub mod variable;

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::dtype::DataType;
use crate::engine::array::{ArrayMeta, ArraySource};
use crate::error::{Error, Result};
use crate::storage::files::{Files, OsFiles, ReadAt};
pub use header::{Format, Header, HeaderError};
use layout::{Layout, VarLayout};
pub use types::NcType;
use variable::{Netcdf3Array, Shared};

/// The first read of a header; most headers are a few KiB.
const FIRST_HEADER_READ: u64 = 64 << 10;

/// Headers longer than this are refused: real ones are kilobytes, and a
/// corrupt count must not make us read gigabytes into memory.
pub const MAX_HEADER_BYTES: u64 = 64 << 20;

/// A dimension of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimension {
    pub name: String,
    /// The number of records for the unlimited dimension.
    pub len: u64,
    pub is_unlimited: bool,
}

/// A variable of a file, as its sidecar describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub name: String,
    /// Dimension names, outermost first (empty for scalars).
    pub dimensions: Vec<String>,
    /// The record dimension's length is the number of records.
    pub shape: Vec<u64>,
    pub nc_type: NcType,
    pub attributes: Map<String, Value>,
    /// One element in native byte order (see the module doc).
    pub fill_value: Vec<u8>,
    /// Whether the first dimension is the unlimited one.
    pub is_record: bool,
    /// Where the data is (for the archive format and diagnostics).
    pub layout: VarLayout,
}

impl Variable {
    /// The element type of the flat file.
    pub fn dtype(&self) -> DataType {
        self.nc_type.dtype()
    }
}

/// Variable data stored some other way than the classic layout: the
/// blocked archive ([`crate::formats::packed`]) keeps a classic header and
/// serves each variable from compressed blocks. This file only knows that
/// such a body can turn a variable into an [`ArraySource`]; who builds
/// one is decided by whoever opens the file ([`crate::formats::netcdf`]).
pub trait Body: std::fmt::Debug + Send + Sync + 'static {
    /// Variable number `index` of the header (named `name`, with the
    /// metadata `meta`) as an array source.
    fn array(&self, index: usize, name: &str, meta: ArrayMeta) -> Result<Arc<dyn ArraySource>>;

    /// For the body's owner to get its own type back.
    fn as_any(&self) -> &dyn Any;
}

/// Where a file's variable data is.
#[derive(Debug)]
enum Storage {
    /// In the classic layout, read in place.
    Classic,
    /// Elsewhere, served by the body.
    Body(Arc<dyn Body>),
}

/// An open classic netCDF file, or a blocked archive of one: the same
/// header, dimensions, attributes and variables, whichever way the data is
/// stored.
#[derive(Debug)]
pub struct File {
    shared: Arc<Shared>,
    storage: Storage,
    header: Header,
    numrecs: u64,
    dimensions: Vec<Dimension>,
    global_attributes: Map<String, Value>,
    variables: Vec<Variable>,
}

impl File {
    /// Open the classic file `path` and parse its header. Errors name the
    /// file. (A blocked archive of one is opened by
    /// [`crate::formats::netcdf::open`], which tells them apart.)
    pub fn open(path: &Path) -> Result<File> {
        File::open_with(path, &OsFiles::unconfined())
    }

    /// Open the classic file `path` through `files`.
    pub fn open_with(path: &Path, files: &dyn Files) -> Result<File> {
        let name = path.display().to_string();
        let file = files.open(path).map_err(|e| Error::Io {
            path: name.clone(),
            source: e,
        })?;
        File::from_reader(name, file)
    }

    /// The classic file `name`, already open as `file`.
    pub fn from_reader(name: String, file: Arc<dyn ReadAt>) -> Result<File> {
        let file_len = file.size().map_err(|e| Error::Io {
            path: name.clone(),
            source: e,
        })?;
        let header = read_header(file.as_ref(), &name, file_len)?;
        let layout = Layout::new(&header, file_len).map_err(|d| Error::metadata(&name, d))?;
        File::from_parts(
            Shared { path: name, file },
            Storage::Classic,
            header,
            layout,
        )
    }

    /// A file whose header and layout (relative to the classic file it
    /// stands for) were read elsewhere and whose variables `body` serves.
    pub fn with_body(
        name: String,
        file: Arc<dyn ReadAt>,
        header: Header,
        layout: Layout,
        body: Arc<dyn Body>,
    ) -> Result<File> {
        File::from_parts(
            Shared { path: name, file },
            Storage::Body(body),
            header,
            layout,
        )
    }

    fn from_parts(
        shared: Shared,
        storage: Storage,
        header: Header,
        layout: Layout,
    ) -> Result<File> {
        let dimensions = header
            .dims
            .iter()
            .map(|d| Dimension {
                name: d.name.clone(),
                len: if d.len == 0 { layout.numrecs } else { d.len },
                is_unlimited: d.len == 0,
            })
            .collect();
        let mut variables = Vec::with_capacity(header.vars.len());
        for (v, l) in header.vars.iter().zip(layout.vars) {
            variables.push(Variable {
                name: v.name.clone(),
                dimensions: v
                    .dimids
                    .iter()
                    .map(|&i| header.dims[i as usize].name.clone())
                    .collect(),
                shape: l.shape.clone(),
                nc_type: v.nc_type,
                attributes: header::attrs_json(&v.attrs),
                fill_value: fill_value(&shared.path, v),
                is_record: l.is_record,
                layout: l,
            });
        }
        log::debug!(
            "opened {} ({}): {} dimensions, {} variables, {} records",
            shared.path,
            header.format.name(),
            header.dims.len(),
            variables.len(),
            layout.numrecs
        );
        Ok(File {
            global_attributes: header::attrs_json(&header.attrs),
            shared: Arc::new(shared),
            storage,
            numrecs: layout.numrecs,
            dimensions,
            variables,
            header,
        })
    }

    pub fn path(&self) -> &str {
        &self.shared.path
    }

    pub fn format(&self) -> Format {
        self.header.format
    }

    /// What serves the variables when the data is not in the classic
    /// layout (a blocked archive's blocks).
    pub fn body(&self) -> Option<&Arc<dyn Body>> {
        match &self.storage {
            Storage::Classic => None,
            Storage::Body(body) => Some(body),
        }
    }

    /// The number of records (computed from the file size for a streaming
    /// header).
    pub fn numrecs(&self) -> u64 {
        self.numrecs
    }

    pub fn dimensions(&self) -> &[Dimension] {
        &self.dimensions
    }

    pub fn global_attributes(&self) -> &Map<String, Value> {
        &self.global_attributes
    }

    /// The variables in header order.
    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }

    pub fn variable(&self, name: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// The parsed header, with attribute types, for callers that need more
    /// than JSON values.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The variable `name` as an array source reading from this file.
    pub fn array(&self, name: &str) -> Result<Arc<dyn ArraySource>> {
        let (index, v) = self
            .variables
            .iter()
            .enumerate()
            .find(|(_, v)| v.name == name)
            .ok_or_else(|| Error::NotFound(format!("{}: {name}", self.shared.path)))?;
        let mut meta = ArrayMeta::new(
            self.shared.path.clone(),
            v.shape.clone(),
            v.dtype(),
            v.fill_value.clone(),
        )
        .map_err(|e| Error::metadata(&self.shared.path, format!("variable {name:?}: {e}")))?;
        meta.dimension_names = v.dimensions.iter().cloned().map(Some).collect();
        meta.attributes = v.attributes.clone();
        match &self.storage {
            Storage::Classic => Ok(Arc::new(Netcdf3Array::new(
                meta,
                v.name.clone(),
                v.layout.clone(),
                self.shared.clone(),
            ))),
            Storage::Body(body) => body.array(index, &v.name, meta),
        }
    }
}

/// Read and parse the header, growing the read until the header fits.
fn read_header(file: &dyn ReadAt, path: &str, file_len: u64) -> Result<Header> {
    let mut buf = Vec::new();
    let mut want = file_len.min(FIRST_HEADER_READ);
    loop {
        let have = buf.len();
        buf.resize(want as usize, 0);
        file.read_exact_at(&mut buf[have..], have as u64)
            .map_err(|e| Error::Io {
                path: path.to_string(),
                source: e,
            })?;
        match header::parse(&buf, file_len) {
            Ok(h) => return Ok(h),
            Err(HeaderError::Short { needed, .. }) => {
                if needed > MAX_HEADER_BYTES {
                    return Err(Error::TooLarge {
                        path: format!("{path} (netCDF header)"),
                        size: needed,
                        limit: MAX_HEADER_BYTES,
                    });
                }
                // The parser never asks for more than the file holds.
                want = needed.max(want * 2).min(MAX_HEADER_BYTES).min(file_len);
            }
            Err(e) => return Err(Error::metadata(path, e.to_string())),
        }
    }
}

/// `_FillValue` if the variable has one of its own type, else the default.
fn fill_value(path: &str, v: &header::Var) -> Vec<u8> {
    let size = v.nc_type.size();
    match v.attrs.iter().find(|a| a.name == "_FillValue") {
        Some(a) if a.nc_type == v.nc_type && a.data.len() >= size => {
            let mut fill = a.data[..size].to_vec();
            if cfg!(target_endian = "little") {
                fill.reverse();
            }
            fill
        }
        Some(a) => {
            log::warn!(
                "{path}: variable {:?}: ignoring _FillValue of type {} with {} values \
                 (the variable is {}); using the default fill",
                v.name,
                a.nc_type,
                a.count,
                v.nc_type
            );
            v.nc_type.default_fill()
        }
        None => v.nc_type.default_fill(),
    }
}

#[cfg(test)]
mod tests {
    use super::header::tests::Writer;
    use super::*;
    use crate::dtype::Endian;
    use crate::engine::index::Region;

    /// A CDF-1 file: `short s(t, 3)` and `byte b(t)` interleaved, 2 records.
    fn two_record_vars() -> Vec<u8> {
        let mut w = Writer::new(Format::Classic, 2);
        w.dims(&[("t", 0), ("x", 3)]);
        w.absent();
        let begin = w.buf.len() as u64 + 2 * (4 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 4) + 4 + 4 + 4;
        w.vars(&[("s", &[0, 1], 3, begin), ("b", &[0], 1, begin + 8)]);
        assert_eq!(w.buf.len() as u64, begin, "header size");
        // record 0: s = 1 2 3 (+2 pad), b = -1 (+3 pad); record 1: 4 5 6, -2
        for (s, b) in [([1i16, 2, 3], -1i8), ([4, 5, 6], -2)] {
            for x in s {
                w.buf.extend(x.to_be_bytes());
            }
            w.buf.extend([0, 0, b as u8, 0, 0, 0]);
        }
        w.buf
    }

    #[test]
    fn interleaved_records_read_in_native_order() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("r.nc");
        std::fs::write(&p, two_record_vars()).unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(f.numrecs(), 2);
        assert_eq!(f.dimensions()[0].len, 2);
        assert!(f.dimensions()[0].is_unlimited);
        let s = f.array("s").unwrap();
        assert_eq!(s.meta().shape, vec![2, 3]);
        assert_eq!(s.meta().fill_value, (-32767i16).to_ne_bytes());
        let mut out = vec![0u8; 12];
        crate::engine::read::read_at(s.as_ref(), 0, &mut out, Endian::Little).unwrap();
        let want: Vec<u8> = [1i16, 2, 3, 4, 5, 6]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(out, want);
        let b = f.array("b").unwrap();
        let mut out = vec![0u8; 2];
        b.read_region(&Region::whole(&[2]), &mut out).unwrap();
        assert_eq!(out, [0xff, 0xfe]);
        assert!(matches!(f.array("nope"), Err(Error::NotFound(_))));
    }

    #[test]
    fn truncated_data_is_an_error_naming_file_and_variable() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("r.nc");
        let mut bytes = two_record_vars();
        bytes.truncate(bytes.len() - 5);
        std::fs::write(&p, bytes).unwrap();
        let f = File::open(&p).unwrap();
        let b = f.array("b").unwrap();
        let mut out = [0u8; 2];
        let err = b
            .read_region(&Region::whole(&[2]), &mut out)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&p.display().to_string()), "{err}");
        assert!(
            err.contains("variable \"b\"") && err.contains("truncated"),
            "{err}"
        );
        // Record 0 is still there.
        let mut one = [0u8; 1];
        b.read_region(
            &Region {
                start: vec![0],
                count: vec![1],
            },
            &mut one,
        )
        .unwrap();
        assert_eq!(one, [0xff]);
    }
}
