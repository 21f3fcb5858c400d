//! Zarr v3 metadata: a `zarr.json` document parsed (`zarr::v3`: data
//! types, regular and rectilinear chunk grids, key encodings, fill values,
//! extension objects, the codec list with sharding), the array opened and
//! read through `read_at`.
//!
//! Input: the `zarr.json` text, optionally followed by a NUL byte and the
//! stored bytes of chunk 0 (put under every key chunk 0 can have; for a
//! sharded array that is the shard, index included). Seeds: `zarr.json` +
//! chunk files of `tests/fixtures/zarr`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::storage::testing::MemoryStore;
use slabfs_fuzz::{first_chunk_keys, open_store_and_probe, split_metadata};

fuzz_target!(|data: &[u8]| {
    let (meta, chunk) = split_metadata(data);
    let store = MemoryStore::new();
    store.set("zarr.json", meta);
    if let Some(chunk) = chunk {
        for key in first_chunk_keys() {
            store.set(&key, chunk);
        }
    }
    open_store_and_probe(store);
});
