//! The netCDF family by its magic number: which reader opens a file.
//!
//! A file named `*.nc` may be a classic netCDF file (`CDF\x01`, `\x02`,
//! `\x05`: [`netcdf3`]), a blocked archive of one (`SLABNC3\0`:
//! [`packed`]), or netCDF-4, which is HDF5 (`\x89HDF\r\n\x1a\n` at 0 or,
//! after a user block, at 512, 1024, 2048...: [`hdf5`]). The readers do not
//! know about each other (an archive is built on the classic reader, not
//! the reverse); this module is the one place that looks at the first
//! bytes and chooses, for dataset discovery ([`super::dataset`]) and for
//! aggregations whose fragments are netCDF files ([`super::nca`]).

use std::path::Path;
use std::sync::Arc;

use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::hdf5;
use crate::formats::netcdf3::{self, Format};
use crate::formats::packed;
use crate::storage::local::OsFiles;
use crate::storage::{Files, ReadAt};

/// What the first bytes of a file say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `CDF\x01`, `CDF\x02` or `CDF\x05`.
    Classic(Format),
    /// `\x89HDF\r\n\x1a\n` at 0 or at a user-block offset: HDF5, which
    /// netCDF-4 files are ([`hdf5`]).
    Hdf5,
    /// `SLABNC3\0`: a blocked-compressed archive ([`packed`]).
    Packed,
    Other,
}

/// What [`open`] says of a netCDF-4 (HDF5) file, which it does not read
/// (callers that take netCDF-4 too use [`open_any`]; aggregations
/// `nca::ncfile::NcFile`).
pub const NETCDF4_UNSUPPORTED: &str = "netCDF-4 (HDF5) file: not read here, where only \
     classic netCDF files and blocked archives are (convert it with `nccopy -k nc5 IN OUT` \
     or to Zarr)";

/// Sniff the magic number of the file at `path`.
pub fn sniff(path: &Path) -> std::io::Result<Kind> {
    kind_of(OsFiles::unconfined().open(path)?.as_ref())
}

/// The kind of the open file `file`, from its first 8 bytes (and, for
/// HDF5 behind a user block, 8 bytes at each power of two from 512).
pub fn kind_of(file: &dyn ReadAt) -> std::io::Result<Kind> {
    let mut magic = [0u8; 8];
    let n = file.size()?.min(magic.len() as u64) as usize;
    file.read_exact_at(&mut magic[..n], 0)?;
    let magic = &magic[..n];
    Ok(match Format::from_magic(&magic[..n.min(4)]) {
        Some(format) => Kind::Classic(format),
        None if magic == hdf5::io::SIGNATURE => Kind::Hdf5,
        None if magic == packed::MAGIC => Kind::Packed,
        None if hdf5::find_signature(file)?.is_some() => Kind::Hdf5,
        None => Kind::Other,
    })
}

/// Open the netCDF file `path` through `files`: a classic file, or a
/// blocked archive of one whose blocks decode through `cache` (a private
/// cache when `None`). A netCDF-4 file is an error saying so: it has
/// groups and types a classic file has not, and opens with
/// [`open_any`] (or [`hdf5::open`]) instead.
pub fn open(
    path: &Path,
    files: &dyn Files,
    cache: Option<&Arc<ChunkCache>>,
) -> Result<netcdf3::File> {
    let name = path.display().to_string();
    let io = |source| Error::Io {
        path: name.clone(),
        source,
    };
    let file = files.open(path).map_err(io)?;
    match kind_of(file.as_ref()).map_err(io)? {
        Kind::Packed => packed::reader::open_file(name, file, cache),
        Kind::Hdf5 => Err(Error::metadata(name, NETCDF4_UNSUPPORTED)),
        // Not a classic file either: the classic reader says what is wrong.
        Kind::Classic(_) | Kind::Other => netcdf3::File::from_reader(name, file, cache),
    }
}

/// What a netCDF-family file turned out to be, opened.
pub enum Opened {
    /// A classic file or a blocked archive of one (boxed: a parsed header
    /// is large).
    Netcdf3(Box<netcdf3::File>),
    /// netCDF-4 or plain HDF5: its datasets.
    Hdf5(hdf5::Contents),
    /// No netCDF or HDF5 magic number.
    Other,
}

/// Open `path` through `files` once and read it with the reader its magic
/// number calls for (dataset discovery: a netCDF-4 file is a dataset of
/// its own there, not an error).
pub fn open_any(path: &Path, files: &dyn Files, cache: &Arc<ChunkCache>) -> Result<Opened> {
    open_any_with(path, files, cache, None)
}

/// [`open_any`], an HDF5 file's virtual datasets and external storage reading
/// other files through `sources` ([`hdf5::from_reader_with`]).
pub fn open_any_with(
    path: &Path,
    files: &dyn Files,
    cache: &Arc<ChunkCache>,
    sources: Option<hdf5::vds::Sources>,
) -> Result<Opened> {
    let name = path.display().to_string();
    let io = |source| Error::Io {
        path: name.clone(),
        source,
    };
    let file = files.open(path).map_err(io)?;
    open_reader(name, file, cache, sources)
}

/// [`open_any_with`] of a file already open, named `name` in messages.
pub fn open_reader(
    name: String,
    file: Arc<dyn ReadAt>,
    cache: &Arc<ChunkCache>,
    sources: Option<hdf5::vds::Sources>,
) -> Result<Opened> {
    let kind = kind_of(file.as_ref()).map_err(|source| Error::Io {
        path: name.clone(),
        source,
    })?;
    Ok(match kind {
        Kind::Classic(_) => Opened::Netcdf3(Box::new(netcdf3::File::from_reader(
            name,
            file,
            Some(cache),
        )?)),
        Kind::Packed => Opened::Netcdf3(Box::new(packed::reader::open_file(
            name,
            file,
            Some(cache),
        )?)),
        Kind::Hdf5 => Opened::Hdf5(hdf5::from_reader_with(name, file, cache.clone(), sources)?),
        Kind::Other => Opened::Other,
    })
}

/// [`open`] unconfined with a private cache (`slabfs cat`, tests).
pub fn open_path(path: &Path) -> Result<netcdf3::File> {
    open(path, &OsFiles::unconfined(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        let tmp = tempfile::tempdir().unwrap();
        let check = |bytes: &[u8], want: Kind| {
            let p = tmp.path().join("f");
            std::fs::write(&p, bytes).unwrap();
            assert_eq!(sniff(&p).unwrap(), want);
        };
        check(b"CDF\x02rest", Kind::Classic(Format::Offset64));
        check(b"\x89HDF\r\n\x1a\n", Kind::Hdf5);
        // Behind a user block of 512 or 1024 bytes.
        for at in [512usize, 1024] {
            let mut b = vec![0u8; at];
            b.extend_from_slice(b"\x89HDF\r\n\x1a\n");
            check(&b, Kind::Hdf5);
        }
        // Only at powers of two: 600 is no user-block size.
        let mut b = vec![0u8; 600];
        b.extend_from_slice(b"\x89HDF\r\n\x1a\n");
        check(&b, Kind::Other);
        check(b"\x89HDF", Kind::Other);
        check(b"SLABNC3\0rest", Kind::Packed);
        check(b"SLABNC3", Kind::Other);
        check(b"CD", Kind::Other);
        check(b"CDF\x03", Kind::Other);
    }
}
