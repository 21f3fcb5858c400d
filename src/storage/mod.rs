//! Storage: where bytes come from.
//!
//! The bottom layer of the read path. It owns how a file or a key is
//! opened and read, and nothing about what the bytes mean:
//!
//! - [`files`]: the seam every data read goes through. [`files::Files`]
//!   opens single files for positioned reads ([`files::ReadAt`]: netCDF-3
//!   files, blocked archives, raw fragments) and key-value stores
//!   ([`store::Store`]: Zarr hierarchies).
//! - [`store`]: the key-value [`store::Store`] trait and its directory,
//!   in-memory and counting implementations.
//! - [`confine`]: which files may be opened at all (under an allowed root,
//!   regular files only), checked race-free at open.
//! - [`descriptors`]: the bounded cache of open data files, so an archive
//!   of any size mounts at an ordinary descriptor limit.
//! - [`faults`]: wrappers of both seams that inject I/O errors, short
//!   reads, delays and flipped bytes, for tests.
//!
//! - [`remote`]: object stores (S3, GCS, Azure) and HTTP(S) as more
//!   implementations of the same two traits, so formats never learn where
//!   their bytes live. Its state is one value ([`remote::Remote`]) that
//!   the CLI creates and hands down; formats see it only as a
//!   [`files::Network`] (checked by `tests/layers.rs`).
//! - [`location`]: URLs parsed into locations, with no remote state; URL
//!   confinement ([`location::Location::within`]) sits next to
//!   [`confine`]'s, and the redaction of secrets from every message.
//! - [`scope`]: where the references one file makes may lead (local
//!   roots, URL roots), resolved and checked in one place for every
//!   format.
//!
//! May import: [`crate::error`] and nothing else of the crate (checked by
//! `tests/layers.rs`).

pub mod confine;
pub mod descriptors;
pub mod faults;
pub mod files;
pub mod location;
pub mod remote;
pub mod scope;
pub mod store;
