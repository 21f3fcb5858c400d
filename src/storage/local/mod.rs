//! The local file system as implementations of the storage contract
//! ([`crate::storage::contract`]), beside [`crate::storage::remote`].
//!
//! Imports run one way, policy to opening to adapters:
//!
//! ```text
//! files (OsFiles) ──> fs_store (FsStore) ──> descriptors ──> confine
//!        └──────────────────────────────────────┘ (CachedFile)
//! ```
//!
//! - [`confine`]: which files a dataset may read (pure policy: it
//!   decides, it opens nothing).
//! - [`descriptors`]: the only code that opens a local file: confined
//!   and unconfined opens, retried when out of descriptors, and the
//!   bounded cache of open data files ([`descriptors::CachedFile`]).
//! - [`fs_store`]: [`FsStore`], a directory as a [`crate::storage::Store`].
//! - [`files`]: [`OsFiles`], the real file system as a
//!   [`crate::storage::Files`].
//! - [`output`]: [`TempOutput`], the only code that creates a local file
//!   (`slabfs pack` and `unpack` write their outputs through it).

pub mod confine;
pub mod descriptors;
pub mod files;
pub mod fs_store;
pub mod output;

pub use files::{OsFiles, confined, os};
pub use fs_store::{FsStore, TORN_READ_RETRIES, file_identity, read_open_verified, read_verified};
pub use output::TempOutput;
