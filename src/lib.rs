//! slabfs: chunked, compressed and aggregated arrays as flat raw files.
//!
//! The library is the whole read path; the binary is a thin CLI over it.
//! Its folders are its layers, each importing only the ones below it
//! (`tests/it/layers.rs` checks it; `docs/ARCHITECTURE.md` tells the story):
//!
//! ```text
//! fs        the mounted tree, its views, refresh, the FUSE adapter
//! formats   zarr, netcdf3, hdf5, packed, nca, kerchunk, icechunk: each an
//!           ArraySource; dataset discovery
//! engine    read planning, index arithmetic, cache, readahead   ┐
//! codec     the codec chain                                     ├ peers
//! storage   files and key-value stores (local, remote), scope   ┘
//! base      error, dtype, logging, histogram, metrics (the series, as Prometheus text and OTLP)
//! ```
//!
//! Engine, codec and storage import none of one another; the formats
//! combine them.
//!
//! The docs are built with private items (`.ci/run`: `cargo doc
//! --document-private-items`, warnings as errors): module docs are design
//! notes that link the private types they describe, and those links
//! resolve in that build, so linking a private item from a public one is
//! allowed below; a broken link fails.
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
#![allow(rustdoc::private_intra_doc_links)]

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
