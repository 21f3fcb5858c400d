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
//!
//! # Names
//!
//! Names are read as netCDF-C reads them, the bytes before the first NUL
//! ([`header`]), and netCDF-C checks nothing else when reading: a header
//! may hold any name. Each variable becomes a file of the mount, so a
//! variable is **not shown** (its file's other variables are) when its
//! name cannot be a file name: not UTF-8, empty, `.` or `..`, or
//! containing `/` (which would make a directory). Of two variables with
//! one name, the last is shown: netCDF-C's name lookup is a hash map
//! filled in header order, later entries overwriting earlier ones
//! (`v1h_get_NC_vararray`, `NC_hashmapadd`), and netCDF4-python's
//! `variables` dict ends the same way. A variable not shown keeps its place
//! in the layout (record variables share the records) and is reported by
//! [`File::skipped`], naming the file, its index and its name's bytes.
//! Looking a variable up by name ([`File::variable`], a fragment's
//! `ncvar`) finds what netCDF-C's `nc_inq_varid` finds, shown or not: the
//! last variable of that name, never an empty name. Dimension and
//! attribute names are metadata, never file names: they are kept whatever
//! they hold.

pub mod blocks;
pub mod header;
pub mod layout;
pub mod types;
pub mod variable;

use std::any::Any;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::dtype::DataType;
use crate::engine::array::{ArrayMeta, ArraySource};
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::storage::local::OsFiles;
use crate::storage::{Files, ReadAt};
pub use header::{Header, HeaderError};
use layout::{Layout, VarLayout};
pub use types::{Format, NcType};
use variable::{Netcdf3Array, Shared};

/// The first read of a header; most headers are a few KiB.
const FIRST_HEADER_READ: u64 = 64 << 10;

/// Headers longer than this are refused: real ones are kilobytes, and a
/// corrupt count must not make us read gigabytes into memory.
pub const MAX_HEADER_BYTES: u64 = 64 << 20;

/// The chunk cache of a remote classic file opened without one (`slabfs
/// cat`, a library caller): a readahead window's worth.
const PRIVATE_CACHE: usize = 64 << 20;

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
    /// As netCDF-C reads it (see the module doc).
    pub name: String,
    /// Its position in the header.
    pub index: usize,
    /// Why the mount cannot show it (see the module doc); `None` for
    /// almost every variable.
    pub not_shown: Option<String>,
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
    /// Name → index in `variables`, as netCDF-C's lookup finds it.
    by_name: HashMap<String, usize>,
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
        File::from_reader(name, file, None)
    }

    /// The classic file `name`, already open as `file`. A remote object
    /// is read in blocks through `cache` ([`blocks`]; a private cache
    /// when `None`).
    pub fn from_reader(
        name: String,
        file: Arc<dyn ReadAt>,
        cache: Option<&Arc<ChunkCache>>,
    ) -> Result<File> {
        let file_len = file.size().map_err(|e| Error::Io {
            path: name.clone(),
            source: e,
        })?;
        let header = read_header(file.as_ref(), &name, file_len)?;
        let layout = Layout::new(&header, file_len).map_err(|d| Error::metadata(&name, d))?;
        let blocks = match file.latency() {
            Some(_) if file_len > 0 => {
                let cache = cache
                    .cloned()
                    .unwrap_or_else(|| Arc::new(ChunkCache::new(PRIVATE_CACHE)));
                Some(blocks::byte_view(&name, file.clone(), file_len, cache)?)
            }
            _ => None,
        };
        File::from_parts(
            Shared {
                path: name,
                file,
                blocks,
            },
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
            Shared {
                path: name,
                file,
                blocks: None,
            },
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
        // What a name finds: netCDF-C's hash map, filled in header order,
        // later entries overwriting earlier ones, empty names never added
        // (v1h_get_NC_vararray, NC_hashmapadd).
        let mut by_name = HashMap::new();
        for (i, v) in header.vars.iter().enumerate() {
            if let Ok(n) = std::str::from_utf8(header::c_name(&v.raw_name))
                && !n.is_empty()
            {
                by_name.insert(n.to_string(), i);
            }
        }
        for (i, (v, l)) in header.vars.iter().zip(layout.vars).enumerate() {
            let bytes = v.raw_name.escape_ascii();
            let not_shown = match unshowable(&v.raw_name) {
                Some(why) => Some(format!(
                    "variable {i} (name bytes b\"{bytes}\") cannot be a file of the mount: \
                     {why}"
                )),
                // A showable name is UTF-8 and not empty: it is in the map.
                None if by_name[&v.name] != i => Some(format!(
                    "variable {i} (name bytes b\"{bytes}\"): variable {} has the same name \
                     (netCDF-C's lookup finds that one)",
                    by_name[&v.name]
                )),
                None => None,
            };
            variables.push(Variable {
                name: v.name.clone(),
                index: i,
                not_shown,
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
            by_name,
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

    /// Every variable in header order, those the mount does not show
    /// included ([`Variable::not_shown`]).
    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }

    /// The variable the name `name` finds, as netCDF-C's lookup does: the
    /// last of that name. It may be one the mount does not show (a `/` in
    /// a name is no obstacle to a fragment's `ncvar`), never an earlier
    /// one of two with one name.
    pub fn variable(&self, name: &str) -> Option<&Variable> {
        self.by_name.get(name).map(|&i| &self.variables[i])
    }

    /// The variables the mount does not show, each as an error naming the
    /// file and saying why.
    pub fn skipped(&self) -> Vec<Error> {
        self.variables
            .iter()
            .filter_map(|v| v.not_shown.as_ref())
            .map(|why| Error::metadata(&self.shared.path, why))
            .collect()
    }

    /// The parsed header, with attribute types, for callers that need more
    /// than JSON values.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The variable `name` finds ([`File::variable`]) as an array source
    /// reading from this file.
    pub fn array(&self, name: &str) -> Result<Arc<dyn ArraySource>> {
        let v = self
            .variable(name)
            .ok_or_else(|| Error::NotFound(format!("{}: {name}", self.shared.path)))?;
        self.array_at(v.index)
    }

    /// Variable number `index` of the header as an array source, shown or
    /// not (a byte-for-byte copy of the file needs them all).
    pub fn array_at(&self, index: usize) -> Result<Arc<dyn ArraySource>> {
        let v = self
            .variables
            .get(index)
            .ok_or_else(|| Error::NotFound(format!("{}: variable {index}", self.shared.path)))?;
        let name = &v.name;
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

/// Why a variable whose name has the declared bytes `raw` cannot be a
/// file of the mount, if it cannot (see the module doc).
fn unshowable(raw: &[u8]) -> Option<&'static str> {
    match std::str::from_utf8(header::c_name(raw)) {
        Err(_) => Some("its name is not UTF-8"),
        Ok("") => Some("its name is empty"),
        Ok("." | "..") => Some("its name is `.` or `..`"),
        Ok(n) if n.contains('/') => Some("its name contains '/'"),
        Ok(_) => None,
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

    /// An attribute by its raw name and value bytes.
    type Attr<'a> = (&'a [u8], &'a [u8]);

    /// A CDF-2 file with fixed `short` variables of 2 elements over `x`,
    /// named by their raw bytes, each with attributes given by raw names
    /// (NC_CHAR values), and the data `[i, 10 + i]` for variable `i`.
    fn named(vars: &[(&[u8], &[Attr<'_>])], dim: &[u8]) -> Vec<u8> {
        let mut w = Writer::new(Format::Offset64, 0);
        w.u32(0x0A).size(1).name(dim).size(2);
        w.absent();
        w.u32(0x0B).size(vars.len() as u64);
        let mut begins = Vec::new();
        for (name, attrs) in vars {
            w.name(name).size(1).size(0);
            if attrs.is_empty() {
                w.absent();
            } else {
                w.u32(0x0C).size(attrs.len() as u64);
                for (n, v) in *attrs {
                    w.name(n);
                    if n.starts_with(b"_FillValue") {
                        w.u32(3).size(1).buf.extend(*v);
                        w.pad();
                    } else {
                        w.u32(2).name(v);
                    }
                }
            }
            w.u32(3).size(4);
            begins.push(w.buf.len());
            w.offset(0);
        }
        for (i, at) in begins.into_iter().enumerate() {
            let begin = w.buf.len() as u64;
            w.buf[at..at + 8].copy_from_slice(&begin.to_be_bytes());
            w.buf.extend((i as i16).to_be_bytes());
            w.buf.extend((10 + i as i16).to_be_bytes());
        }
        w.buf
    }

    fn open_bytes(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("n.nc");
        std::fs::write(&p, bytes).unwrap();
        let f = File::open(&p).unwrap();
        (tmp, f)
    }

    /// NUL padding in names is padding, as netCDF-C reads it: netCDF-C
    /// itself leaves `units\0` behind when it renames `unitsx` to `units`
    /// outside define mode, and `_FillValue\0\0` is the fill value.
    #[test]
    fn nul_padded_names_are_what_netcdf_c_reads() {
        let fill = (-5i16).to_be_bytes();
        let bytes = named(
            &[(
                b"yy\0",
                &[
                    (b"units\0", b"K"),
                    (b"_FillValue\0\0", &fill),
                    (b"units", b"second"),
                ],
            )],
            b"x\0\0",
        );
        let (_tmp, f) = open_bytes(&bytes);
        assert_eq!(f.dimensions()[0].name, "x");
        let v = f.variable("yy").expect("yy");
        assert_eq!(v.dimensions, ["x"]);
        // Two attributes named `units`: the first wins (`NC_findattr`).
        assert_eq!(
            Value::Object(v.attributes.clone()),
            serde_json::json!({"units": "K", "_FillValue": -5})
        );
        assert_eq!(v.fill_value, (-5i16).to_ne_bytes());
        let a = f.array("yy").unwrap();
        let mut out = [0u8; 4];
        crate::engine::read::read_at(a.as_ref(), 0, &mut out, Endian::Big).unwrap();
        assert_eq!(out, [0, 0, 0, 10]);
        assert!(f.skipped().is_empty());
    }

    /// A name that cannot be a file name hides its variable, not the file;
    /// dimension names that are not UTF-8 are kept, lossily.
    #[test]
    fn unshowable_names_skip_one_variable() {
        let none: &[Attr] = &[];
        let bytes = named(
            &[
                (b"ok", none),
                (b"bad\xff", none),
                (b"a/b", none),
                (b"\0\0", none),
                (b"..", none),
                (b"tab\there", none),
                (b"ok\0", none),
            ],
            b"x\xfe",
        );
        let (_tmp, f) = open_bytes(&bytes);
        assert_eq!(f.dimensions()[0].name, "x\u{fffd}");
        let shown: Vec<(&str, usize)> = f
            .variables()
            .iter()
            .filter(|v| v.not_shown.is_none())
            .map(|v| (v.name.as_str(), v.index))
            .collect();
        // A tab is a legal (if unkind) file name; netCDF-C reads it.
        assert_eq!(shown, [("tab\there", 5), ("ok", 6)]);
        let skipped: Vec<String> = f.skipped().iter().map(|e| e.to_string()).collect();
        let path = f.path().to_string();
        let want = [
            r#"variable 0 (name bytes b"ok"): variable 6 has the same name"#,
            r#"variable 1 (name bytes b"bad\xff") cannot be a file of the mount: its name is not UTF-8"#,
            r#"variable 2 (name bytes b"a/b") cannot be a file of the mount: its name contains '/'"#,
            r#"variable 3 (name bytes b"\x00\x00") cannot be a file of the mount: its name is empty"#,
            r#"variable 4 (name bytes b"..") cannot be a file of the mount: its name is `.` or `..`"#,
        ];
        assert_eq!(skipped.len(), want.len(), "{skipped:#?}");
        for (s, w) in skipped.iter().zip(want) {
            assert!(s.starts_with(&path) && s.contains(w), "{s}\nlacks {w}");
        }
        // `ok` is the last of that name, with its own data.
        let mut out = [0u8; 4];
        let a = f.array("ok").unwrap();
        crate::engine::read::read_at(a.as_ref(), 0, &mut out, Endian::Big).unwrap();
        assert_eq!(out, [0, 6, 0, 16]);
        // By name, as netCDF-C finds them: `a/b` too, never the empty name.
        let a = f.array("a/b").unwrap();
        crate::engine::read::read_at(a.as_ref(), 0, &mut out, Endian::Big).unwrap();
        assert_eq!(out, [0, 2, 0, 12]);
        assert!(matches!(f.array(""), Err(Error::NotFound(_))));
        // By index, every variable reads (a byte copy of the file).
        let a = f.array_at(0).unwrap();
        crate::engine::read::read_at(a.as_ref(), 0, &mut out, Endian::Big).unwrap();
        assert_eq!(out, [0, 0, 0, 10]);
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
