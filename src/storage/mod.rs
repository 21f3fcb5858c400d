//! Storage: where bytes come from.
//!
//! The bottom layer of the read path. It owns how a file or a key is
//! opened and read, and nothing about what the bytes mean:
//!
//! - [`contract`]: the seam every data read goes through, in one leaf
//!   file: [`Files`] opens single files for positioned reads ([`ReadAt`]:
//!   netCDF-3 files, HDF5 files, blocked archives, raw fragments) and
//!   key-value stores ([`Store`]: Zarr hierarchies), and the contract
//!   says what every implementation promises (ranges past the end, empty
//!   ranges, missing keys, listing, concurrency, errors). Re-exported
//!   here: `crate::storage::{Files, ReadAt, Store, ByteRange}`.
//! - [`local`]: the local file system as implementations of the
//!   contract: the directory store ([`local::FsStore`]), the OS files
//!   ([`local::OsFiles`]), confinement ([`local::confine`]: which files
//!   may be opened, pure policy) and the descriptor cache
//!   ([`local::descriptors`]: the only code that opens a file).
//! - [`remote`]: object stores (S3, GCS, Azure) and HTTP(S) as more
//!   implementations of the same traits, so formats never learn where
//!   their bytes live. Its state is one value ([`remote::Remote`]) that
//!   the CLI creates and hands down; formats see it only as a
//!   [`Network`] (checked by `tests/it/layers.rs`).
//! - [`location`]: URLs parsed into locations, with no remote state; URL
//!   confinement ([`location::Location::within`]) sits next to
//!   [`local::confine`]'s, and the redaction of secrets from every message.
//! - [`scope`]: where the references one file makes may lead (local
//!   roots, URL roots), resolved and checked in one place for every
//!   format.
//! - [`disk_cache`]: remote bytes kept on local disk across restarts and
//!   shared by a node's processes (`--disk-cache`), verified on every
//!   read; the remote adapter reads through it.
//! - [`ranged`]: byte ranges of one file or object as a [`Store`]
//!   ([`ranged::RangedStore`]): the store of every format whose chunks
//!   are ranges of its own container (HDF5, blocked archives, remote
//!   netCDF-3 blocks); the format says where chunk `c` is
//!   ([`ranged::Locate`]), the store reads batches with one
//!   [`ReadAt::read_many`] of merged ranges.
//! - [`paths`] (helpers over any [`Files`], local or remote:
//!   stamps, existence, small documents), [`read_cache`] (a block cache
//!   over any [`ReadAt`] for metadata parsing), [`fan_out`] (threads for
//!   the contract's default batched gets).
//! - `testing` (only under `cfg(test)` or the `testing` feature, which
//!   `cargo test` turns on; never in the daemon): the in-memory and
//!   counting stores, the fault-injecting wrappers, and the conformance
//!   test every implementation runs.
//!
//! Imports inside storage run one way: `contract` and `fan_out` are
//! leaves; `local`, `remote` and `ranged` build on them; `scope` on
//! `local` and `remote`.
//!
//! May import: the base modules ([`crate::error`]; the remote stores'
//! series, [`remote::metrics`], use [`crate::histogram`] and
//! [`crate::metrics`]), never the engine, the codecs or a format: the
//! three are peers, and formats combine them (checked by
//! `tests/it/layers.rs`).

pub mod contract;
pub mod disk_cache;
pub mod fan_out;
pub mod local;
pub mod location;
pub mod paths;
pub mod ranged;
pub mod read_cache;
pub mod remote;
pub mod scope;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use contract::{ByteRange, Files, Listed, Network, ObjectVersion, ReadAt, Store, UrlFiles};
pub use read_cache::ReadCache;
