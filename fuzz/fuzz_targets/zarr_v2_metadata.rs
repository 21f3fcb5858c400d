//! Zarr v2 metadata: a `.zarray` document parsed (with NCZarr's
//! adaptations, `zarr::v2::parse_array` and the codec registry), the array
//! opened (`ChunkedArray::new`: grid, chunk size limit, chain validation) and
//! read through `read_at`.
//!
//! Input: the `.zarray` text, optionally followed by a NUL byte and the
//! stored bytes of chunk 0 (put under every key chunk 0 can have), so the
//! compressor and filters the metadata names decode real bytes. Seeds:
//! `.zarray` + chunk files of `tests/fixtures/zarr`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slabfs::storage::testing::MemoryStore;
use slabfs_fuzz::{first_chunk_keys, open_store_and_probe, split_metadata};

fuzz_target!(|data: &[u8]| {
    let (meta, chunk) = split_metadata(data);
    let store = MemoryStore::new();
    store.set(".zarray", meta);
    if let Some(chunk) = chunk {
        for key in first_chunk_keys() {
            store.set(&key, chunk);
        }
    }
    open_store_and_probe(store);
});
