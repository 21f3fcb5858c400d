//! slabfs: chunked, compressed and aggregated arrays as flat raw files.
//!
//! The library is the whole read path; the binary is a thin CLI over it.
//! Its folders are its layers, each importing only the ones below it
//! (`tests/it/layers.rs` checks it; `docs/ARCHITECTURE.md` tells the story):
//!
//! ```text
//! fs        the mounted tree, its views, refresh, the FUSE adapter
//! formats   zarr, netcdf3, packed, nca, kerchunk: each an ArraySource;
//!           dataset discovery
//! engine    read planning, index arithmetic, cache, readahead    codec  the codec chain
//! storage   files and key-value stores, confinement, fault injection
//! base      error, dtype, logging, histogram, metrics (the series, as Prometheus text and OTLP)
//! ```
//!
//! A read:
//!
//! ```text
//! read(offset, len) ─ engine::read::read_at ─ engine::index::linear  byte range → ≤2R-1 boxes
//!                     └ ArraySource::read_region(box)           (a format)
//!                       └ engine::pieces::read_pieces: the piece loop
//!                         engine::index::tiling: the box over the chunk grid
//!                         engine::index::disjoint: one view of the reply buffer per piece
//!                           └ engine::cache::ChunkCache ─ storage + codec::CodecChain
//!                         engine::index::copy: strided copy / fill into the piece's view
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod codec;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod formats;
pub mod fs;
pub mod histogram;
pub mod logging;
pub mod metrics;
pub mod storage;

pub use engine::array::{ArrayMeta, ArraySource};
pub use error::{Error, Result};
