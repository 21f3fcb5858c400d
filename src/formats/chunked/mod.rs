//! The chunked array: the one engine every chunked format reads through.
//!
//! A [`ChunkedArray`] is a regular or rectilinear grid of chunks, each
//! stored under a key of a [`Store`](crate::storage::Store) and
//! decoded by a [`CodecChain`](crate::codec::CodecChain). Five formats are
//! one of these once their metadata is read:
//!
//! | format | its chunks | its store |
//! | --- | --- | --- |
//! | Zarr v2/v3, NCZarr (`formats::zarr`) | the chunk grid, or a shard's inner chunks | the store's directory or bucket |
//! | kerchunk (`formats::kerchunk`) | the references' chunk keys | ranges of the referenced files |
//! | HDF5 / netCDF-4 (`formats::hdf5`) | the dataset's chunk index | ranges of the file (`RangedStore`) |
//! | netCDF-3 over an object store (`formats::netcdf3::blocks`) | 1 MiB blocks of the file | ranges of the object (`RangedStore`) |
//! | blocked archives (`formats::packed`) | the compressed blocks | ranges of the archive, by its block table (`RangedStore`) |
//!
//! The last three are one store, [`crate::storage::ranged::RangedStore`]:
//! the format says where chunk `c` is ([`crate::storage::ranged::Locate`]),
//! and [`ChunkedArray::ranged`] hands it each chunk's coordinates as they
//! are (a Zarr-style key is made only for key-value stores, and for
//! messages).
//!
//! A format says what it knows in an [`ArraySpec`] (metadata, grid, key
//! encoding, chain, and for Zarr v3 sharding how shards are read) and hands
//! over a store; everything else is here: the piece loop through the
//! engine's driver ([`crate::engine::pieces`]), fetches batched over an
//! object store, the shared chunk cache, decoding into place, lent replies,
//! prefetch for readahead, and reading inner chunks of shards through
//! their index ([`shard`]).
//!
//! # Why here, the bottom format
//!
//! It needs both peers of the layer below formats: codecs (the chain) and
//! the engine (the cache, the piece loop, index arithmetic), plus stores.
//! Engine and codec never import each other, so it cannot sit in
//! `engine/`; a layer of its own between them and `formats/` would hold one
//! module. As the bottom format (rank 0 in `tests/it/layers.rs`) every format
//! may build on it, and it on none: it knows no metadata dialect. Zarr's
//! dialects (v2, v3, NCZarr, consolidated metadata, the `sharding_indexed`
//! configuration) stay in `formats::zarr`, which is now a format like the
//! others, and HDF5 and netCDF-3 no longer import Zarr to read chunks.

pub mod array;
pub mod shard;

pub use array::{ArraySpec, ChunkKeyEncoding, ChunkedArray, MAX_CHUNK_BYTES};
