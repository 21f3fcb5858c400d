//! Blocked-compressed netCDF-3 archives: `slabfs pack`, `slabfs unpack`,
//! and reading archives as datasets.
//!
//! An archive holds a classic netCDF file's header unchanged and each
//! variable's data as one linear byte stream cut into equal blocks (the
//! last shorter), each compressed on its own (zstd or deflate) and listed
//! with its offset and CRC-32C in an index at the end of the file. The
//! format is specified in `docs/FORMAT-BLOCKED-NC3.md`; [`format`] is its
//! code.
//!
//! - [`pack()`](pack::pack) reads a classic file through the ordinary
//!   netCDF-3 reader, compresses blocks on all cores and writes the
//!   archive through a temporary file renamed into place.
//! - Reading ([`reader`]): [`crate::netcdf3::File::open`] recognises the
//!   magic and serves each variable as a one-dimensional Zarr-like array
//!   of blocks over the shared chunk cache, reshaped to the variable's
//!   shape; every netCDF-3 consumer (the mount, `slabfs cat`, NCA
//!   fragments) reads archives without knowing.
//! - [`unpack()`](unpack::unpack) reads every variable back through that
//!   same reader and lays the classic file out again.
//!
//! Both directions go through the flat view of [`crate::read::read_at`] in
//! big-endian order, which is exactly the stored byte stream of a
//! variable, so packing and unpacking need no layout code of their own
//! beyond placing record slabs.

pub mod format;
pub mod pack;
pub mod reader;
pub mod unpack;

pub use format::{BlockCodec, MAGIC};
pub use pack::{PackOptions, PackStats, pack};
pub use reader::Archive;
pub use unpack::{UnpackStats, unpack};

/// The file name extension of archives inside a mounted directory (a file
/// with a netCDF extension is recognised by its magic too).
pub const EXTENSION: &str = "ncb";
