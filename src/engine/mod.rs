//! The engine: format-independent read planning.
//!
//! Everything between "the kernel asks for bytes `offset..offset+len` of a
//! flat file" and "a source, fill this box of your index space":
//!
//! - [`array`](mod@array): the one trait every format implements,
//!   [`array::ArraySource`] (metadata, `read_region` of a box into a
//!   strided destination, lent replies, change stamps, prefetch).
//! - [`index`]: pure index arithmetic: a linear byte range as a few
//!   hyperslabs ([`index::linear`]), the projection of a box over a
//!   rectilinear tiling ([`index::tiling`]: chunk grids, shard grids and
//!   aggregation partition matrices alike), strided copies
//!   ([`index::copy`]).
//! - [`pieces`]: the piece loop every tiled source reads a box with
//!   ([`pieces::PieceSource`], [`pieces::read_pieces`]): the box projected
//!   over the tiling, the pieces' fetches batched, the output split into
//!   disjoint views ([`index::disjoint`]), the pieces read in parallel.
//! - [`read`]: the read path itself: bytes → boxes → the source → byte
//!   order of the flat file.
//! - [`cache`]: decoded chunks under a byte budget, one decode per key,
//!   the use-once rule, loans of cached chunks to replies.
//! - [`readahead`]: sequential-read detection and background prefetch.
//! - [`decodes`]: decodes counted by codec chain (count, bytes, time).
//!
//! May import: the base modules ([`crate::dtype`], [`crate::error`],
//! [`crate::histogram`], [`crate::metrics`]). Never storage, a codec or a
//! format: the three are peers, and formats combine them (a format
//! fetches a chunk from storage, decodes it with a codec chain, keeps it
//! in the engine's cache) and plug in through [`array::ArraySource`]
//! (checked by `tests/it/layers.rs`).

pub mod array;
pub mod buffers;
pub mod cache;
pub mod decodes;
pub mod index;
pub mod pieces;
pub mod read;
pub mod readahead;
