//! Where a sequential reader of a remote array waits (issue 41), counted.
//!
//! The read path driven as the mount drives it for `dd bs=1M` (each read
//! of 1 MiB told to the readahead, then asked whether it waits, then
//! read), over a store or file that holds every request 20 ms before it
//! answers and reports that latency, as a remote one does
//! (`storage::testing::latent`): a Zarr array (each chunk a key of the
//! store) and a filtered netCDF-4/HDF5 dataset (the chunks ranges of one
//! object). What is counted: the requests, the reads that would have gone
//! to the waiting pool (their chunks not all decoded yet:
//! `engine::read::cached_at`), and the most requests in flight at once,
//! which is a timing, printed, never asserted. The assertions are the
//! counts the design fixes: every chunk fetched once, and a read ahead
//! that knows the source is remote.
//!
//! `cargo test --test it latency:: -- --nocapture` prints the figures
//! docs/perf/remote.md quotes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use slabfs::dtype::Endian;
use slabfs::engine::array::ArraySource;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::{cached_at, read_at};
use slabfs::engine::readahead::Readahead;
use slabfs::storage::testing::{Flight, LatentFile, LatentStore, MemoryStore};

const LATENCY: Duration = Duration::from_millis(20);

/// What one sequential pass counted.
#[derive(Debug)]
struct Pass {
    reads: u64,
    /// Reads whose chunks were not all decoded when they arrived.
    waited: u64,
    requests: u64,
    peak: u64,
    secs: f64,
}

impl Pass {
    fn line(&self) -> String {
        format!(
            "{} reads, {} waited, {} requests, at most {} in flight, {:.3} s",
            self.reads, self.waited, self.requests, self.peak, self.secs
        )
    }
}

/// Read `array` whole, in order, 1 MiB at a time, as a mount serves `dd`,
/// the readahead at its default window; the bytes read.
fn sequential(array: &Arc<dyn ArraySource>, flight: &Flight) -> (Pass, Vec<u8>) {
    flight.reset();
    let readahead = Readahead::new(slabfs::engine::readahead::DEFAULT_MAX_WINDOW);
    let size = array.meta().nbytes();
    let mut out = vec![0u8; size as usize];
    let (mut reads, mut waited) = (0, 0);
    let t = Instant::now();
    for (i, buf) in out.chunks_mut(1 << 20).enumerate() {
        let offset = (i as u64) << 20;
        readahead.on_read(1, array, offset, buf.len() as u64);
        reads += 1;
        waited += !cached_at(array.as_ref(), offset, buf.len() as u64) as u64;
        read_at(array.as_ref(), offset, buf, Endian::Little).unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    let pass = Pass {
        reads,
        waited,
        requests: flight.requests(),
        peak: flight.peak(),
        secs,
    };
    (pass, out)
}

/// A Zarr v2 array of 32 uncompressed 1 MiB chunks, float32 values `i`.
#[test]
fn a_remote_zarr_array_read_in_order() {
    let chunks = 32u64;
    let per = (1 << 20) / 4;
    let mem = MemoryStore::new();
    mem.set(
        ".zarray",
        serde_json::json!({
            "zarr_format": 2, "shape": [chunks * per], "chunks": [per], "dtype": "<f4",
            "compressor": null, "fill_value": 0, "order": "C", "filters": null,
        })
        .to_string(),
    );
    let values: Vec<u8> = (0..chunks * per)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    for (i, c) in values.chunks(per as usize * 4).enumerate() {
        mem.set(&i.to_string(), c);
    }
    let flight = Flight::new();
    let store = Arc::new(LatentStore::new(mem, LATENCY, flight.clone()));
    let h = slabfs::formats::zarr::open_store(store, Arc::new(ChunkCache::new(256 << 20))).unwrap();
    let array: Arc<dyn ArraySource> = h.nodes[0].array.clone().expect("an array");
    assert_eq!(array.fetch_latency(), Some(LATENCY));
    let (pass, got) = sequential(&array, &flight);
    eprintln!("zarr, 32 chunks of 1 MiB, 20 ms: {}", pass.line());
    assert!(got == values);
    assert_eq!(pass.requests, chunks, "every chunk fetched once: {pass:?}");
    // Only the first reads, before the stream is found sequential and its
    // first prefetch is in, wait (a timing, but one with 20 ms of slack a
    // read: far fewer than half wait however loaded the machine).
    assert!(pass.waited < pass.reads / 2, "{pass:?}");
}

/// A netCDF-4 variable of 32 chunks of 512 KiB, shuffled and zstd-compressed as in the benchmark (a filtered
/// dataset: `MaskAware` over its two chunked arrays), in one object.
#[test]
fn a_remote_netcdf4_dataset_read_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("field.nc");
    let raw = tmp.path().join("field.bin");
    let code = format!(
        "import netCDF4, numpy as np\n\
         d = netCDF4.Dataset({p:?}, 'w')\n\
         d.createDimension('t', 32); d.createDimension('y', 128); d.createDimension('x', 1024)\n\
         v = d.createVariable('field', 'f4', ('t', 'y', 'x'), compression='zstd', complevel=1, shuffle=True, chunksizes=(1, 128, 1024))\n\
         a = np.arange(32 * 128 * 1024, dtype='<f4').reshape(32, 128, 1024)\n\
         v[:] = a\n\
         d.close()\n\
         open({r:?}, 'wb').write(a.tobytes())\n",
        p = path.display().to_string(),
        r = raw.display().to_string(),
    );
    crate::common::run_python(&["-c".as_ref(), code.as_ref()]);
    let want = std::fs::read(&raw).unwrap();
    let flight = Flight::new();
    let local = slabfs::storage::local::os().open(&path).unwrap();
    let file = Arc::new(LatentFile::new(local, LATENCY, flight.clone()));
    let contents = slabfs::formats::hdf5::from_reader(
        path.display().to_string(),
        file,
        Arc::new(ChunkCache::new(256 << 20)),
    )
    .unwrap();
    let (_, array) = contents
        .arrays
        .iter()
        .find(|(n, _)| n == "field")
        .expect("field");
    assert_eq!(array.fetch_latency(), Some(LATENCY));
    let (pass, got) = sequential(array, &flight);
    eprintln!("netCDF-4, 32 chunks of 512 KiB, 20 ms: {}", pass.line());
    assert!(got == want);
    assert!(pass.waited < pass.reads / 2, "{pass:?}");
}
