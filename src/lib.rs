//! slabfs: chunked, compressed and aggregated arrays as flat raw files.
//!
//! The library is the whole read path; the binary is a thin CLI over it.
//!
//! ```text
//! read(offset, len) ─ read::read_at ─ index::linear   byte range → ≤2R-1 contiguous boxes
//!                                   └ ArraySource::read_region(box)
//!                                       zarr::ZarrArray: index::tiling projection over the chunk grid
//!                                         └ cache::ChunkCache ─ store::Store + codec::CodecChain
//!                                       index::copy: strided copy / fill into the reply buffer
//! ```
//!
//! Sources: [`zarr`] (v2, v3, sharding, NCZarr), [`netcdf3`] (classic files
//! and, through [`packed`], blocked-compressed archives of them), [`nca`]
//! (aggregations of any of these), [`kerchunk`] (references into other
//! files). [`dataset`] finds them under a mount's source; every data file
//! and store is opened through [`files`], the seam tests inject faults at.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod array;
pub mod cache;
pub mod codec;
pub mod dataset;
pub mod dtype;
pub mod error;
pub mod faults;
pub mod files;
pub mod fs;
pub mod index;
pub mod kerchunk;
pub mod logging;
pub mod nca;
pub mod netcdf3;
pub mod packed;
pub mod read;
pub mod readahead;
pub mod store;
pub mod zarr;

pub use array::{ArrayMeta, ArraySource};
pub use error::{Error, Result};
