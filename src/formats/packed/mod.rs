//! Blocked-compressed netCDF-3 archives: `slabfs pack`, `slabfs unpack`,
//! and reading archives as datasets.
//!
//! An archive holds a classic netCDF file's header unchanged and each
//! variable's data as one linear byte stream cut into equal blocks (the
//! last shorter), each compressed on its own (zstd or deflate) and listed
//! with its offset and CRC-32C in an index at the end of the file. The
//! format is specified in `docs/FORMAT-BLOCKED-NC3.md`; [`format`](mod@format) is its
//! code.
//!
//! - [`pack()`](pack::pack) reads a classic file through the ordinary
//!   netCDF-3 reader, compresses blocks on all cores and writes the
//!   archive through a temporary file renamed into place.
//! - Reading ([`reader`]): an archive opens as the [`netcdf3::File`] it
//!   stands for, whose body ([`netcdf3::Body`]) serves each variable as a
//!   one-dimensional Zarr-like array of blocks over the shared chunk cache,
//!   reshaped to the variable's shape. [`crate::formats::netcdf::open`]
//!   recognises the magic, so every netCDF consumer (the mount,
//!   `slabfs cat`, NCA fragments) reads archives without knowing; the
//!   classic reader itself knows nothing of archives.
//! - [`unpack()`](unpack::unpack) reads every variable back through that
//!   same reader and lays the classic file out again.
//!
//! Both directions go through the flat view of [`crate::engine::read::read_at`] in
//! big-endian order, which is exactly the stored byte stream of a
//! variable, so packing and unpacking need no layout code of their own
//! beyond placing record slabs.

pub mod format;
pub mod pack;
pub mod reader;
pub mod unpack;

pub use format::{BlockCodec, MAGIC};
pub use pack::{PackOptions, PackStats, pack};
pub use reader::{Archive, archive_of};
pub use unpack::{UnpackStats, unpack};

use std::path::Path;

use crate::error::{Error, Result};
use crate::formats::netcdf3;
use crate::storage::local::OsFiles;
use crate::storage::{Files, ReadAt};

/// Open the archive `path` (unconfined, with a private cache: for
/// `unpack`, `slabfs cat` and tests) as the netCDF-3 file it stands for.
/// A file that is no archive is an error saying so.
pub fn open(path: &Path) -> Result<netcdf3::File> {
    let name = path.display().to_string();
    let io = |source| Error::Io {
        path: name.clone(),
        source,
    };
    let file = OsFiles::unconfined().open(path).map_err(io)?;
    if !is_archive(file.as_ref()).map_err(io)? {
        return Err(Error::metadata(
            name,
            "not a blocked archive (no SLABNC3 magic number; a classic netCDF file?)",
        ));
    }
    reader::open_file(name, file, None)
}

/// Whether `file` starts with the archive magic number.
pub fn is_archive(file: &dyn ReadAt) -> std::io::Result<bool> {
    let mut magic = [0u8; MAGIC.len()];
    if file.size()? < magic.len() as u64 {
        return Ok(false);
    }
    file.read_exact_at(&mut magic, 0)?;
    Ok(magic == MAGIC)
}

/// The file name extension of archives inside a mounted directory (a file
/// with a netCDF extension is recognised by its magic too).
pub const EXTENSION: &str = "ncb";
