//! Test stores: compiled only under `cfg(test)` or the `testing` feature
//! (which `cargo test` turns on through the crate's dev-dependency on
//! itself; the daemon never has them).
//!
//! - [`memory`]: [`MemoryStore`] and [`InMemory`], a store and a file
//!   held in memory;
//! - [`counting`]: [`CountingStore`], which counts what is read through
//!   it;
//! - [`faults`]: wrappers of both seams that inject I/O errors, short
//!   reads, delays and flipped bytes;
//! - [`latent`]: a file and a store that wait and report a latency, as
//!   remote ones do, counting requests and the batches they came in;
//! - [`conformance`]: the checks every [`crate::storage::Store`] and
//!   [`crate::storage::Files`] implementation runs.

pub mod conformance;
pub mod counting;
pub mod faults;
pub mod latent;
pub mod memory;

pub use counting::CountingStore;
pub use latent::{Flight, LatentFile, LatentStore};
pub use memory::{InMemory, MemoryStore};
