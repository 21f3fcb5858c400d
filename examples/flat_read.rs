//! Read a byte range of an array's flat file through the library, as the
//! mount does for every `read(2)`.
//!
//! ```sh
//! cargo run --example flat_read -- tests/fixtures/zarr v3/root_array.zarr 0 64
//! ```

use std::sync::Arc;

use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: flat_read SOURCE ARRAY OFFSET LENGTH");
        std::process::exit(2);
    }
    let ds = dataset::Opener::new(Arc::new(ChunkCache::new(64 << 20))).open(args[1].as_ref())?;
    let entry = ds
        .get(&args[2])
        .ok_or_else(|| format!("{}: no array {}", args[1], args[2]))?;
    let meta = entry.array.meta();
    println!(
        "{}: {} {:?}, {} bytes, chunks {:?}",
        entry.path,
        meta.dtype.numpy_typestr(Endian::NATIVE),
        meta.shape,
        meta.nbytes(),
        meta.chunk_shape
    );
    let mut buf = vec![0u8; args[4].parse()?];
    let n = read_at(
        entry.array.as_ref(),
        args[3].parse()?,
        &mut buf,
        Endian::NATIVE,
    )?;
    for line in buf[..n].chunks(16) {
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        println!("{}", hex.join(" "));
    }
    Ok(())
}
