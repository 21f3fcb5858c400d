//! Formats: each one turns files into [`ArraySource`]s.
//!
//! One folder per format, each implementing
//! [`crate::engine::array::ArraySource`] for its arrays and reading its
//! bytes through [`crate::storage`] and its chunks through [`crate::codec`]
//! and the engine's cache:
//!
//! - [`chunked`]: the chunked array that Zarr, kerchunk, HDF5, remote
//!   netCDF-3 files and blocked archives are read through once their
//!   metadata is parsed (grid, chain, store, cache; shard indexes); the
//!   bottom format, knowing no metadata dialect;
//! - [`zarr`]: Zarr v2 and v3 stores (sharding, rectilinear grids, NCZarr);
//! - [`netcdf3`]: classic netCDF files (CDF-1, CDF-2, CDF-5);
//! - [`packed`]: blocked-compressed archives of netCDF-3 files, built on
//!   [`netcdf3`] (it reads the classic header and serves the variables
//!   from compressed blocks);
//! - [`nca`]: aggregations (NCA descriptors, CF-1.13 and CFA-0.4 netCDF
//!   files) whose partitions are arrays of any other format;
//! - [`ncml`]: NcML files (netCDF-Java's wrappers and aggregations)
//!   whose members are datasets of any other format;
//! - [`kerchunk`]: kerchunk / fsspec references into other files;
//! - [`hdf5`]: netCDF-4 and other HDF5 files, each dataset a chunked
//!   array over the file's chunk index;
//! - [`icechunk`]: Icechunk repositories at one snapshot, as a Zarr v3
//!   store (native, inline and virtual chunks).
//!
//! [`series`] is no format: `slabfs aggregate` checks that files of any
//! format are one series along a dimension and writes the NcML or NCA
//! descriptor that joins them.
//!
//! Discovery knows a format by its entry alone ([`entry::FormatEntry`]:
//! the names it claims, its magic sniff or directory probe, its open),
//! every entry listed once in [`registry`]; [`dataset`] finds every
//! dataset under a mount's source by asking the list
//! ([`entry::Formats`]), and [`netcdf`] picks the reader of a
//! netCDF-family file (classic, blocked archive or HDF5) for the netCDF
//! entry and for aggregations. A new format lands in its own folder here
//! with its entry and takes one line in the registry (see
//! [`registry`]).
//!
//! May import: the engine, the codecs, storage and the base modules, and
//! one format another only downwards (`zarr`, `hdf5`, `netcdf3` and
//! `packed` use `chunked`: a remote classic file is read in blocks through
//! a `ChunkedArray`; `packed` and `nca` use `netcdf3`; `kerchunk`,
//! `icechunk` and `nca` use `zarr`); never
//! [`crate::fs`] (checked by `tests/it/layers.rs`).
//!
//! No `unsafe` here (the compiler holds that, `forbid(unsafe_code)`): a
//! format that writes its pieces from several threads does so through the
//! engine's piece loop and its disjoint views ([`crate::engine::pieces`]).
//!
//! [`ArraySource`]: crate::engine::array::ArraySource

#![forbid(unsafe_code)]

pub mod chunked;
pub mod dataset;
pub mod entry;
pub mod hdf5;
pub mod icechunk;
pub mod kerchunk;
pub mod nca;
pub mod ncml;
pub mod netcdf;
pub mod netcdf3;
pub mod packed;
pub mod registry;
pub mod series;
pub mod zarr;

pub use entry::Options;
