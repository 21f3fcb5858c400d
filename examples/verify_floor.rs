//! The least a verified disk cache can cost: read every block file under
//! a `--disk-cache` directory and check a CRC32C over it, nothing else
//! (no FUSE, no chunk decoding, no copies out). `scripts/bench_disk_cache.py`
//! runs it on the cache a cold run filled, the page cache dropped, to set
//! the warm read's time beside what reading and checking its blocks costs
//! this machine at the least.
//!
//! ```sh
//! cargo run --release --example verify_floor -- DIR
//! ```
//!
//! Prints one JSON line: `{"files", "bytes", "wall_s", "cpu_s"}`.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            files(&e.path(), out)?;
        } else {
            out.push(e.path());
        }
    }
    Ok(())
}

fn cpu_s() -> f64 {
    // SAFETY: `u` is a valid rusage for getrusage to fill.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: verify_floor DIR")?;
    let mut all = Vec::new();
    files(&Path::new(&dir).join("v1"), &mut all)?;
    all.sort();
    let (t0, c0) = (Instant::now(), cpu_s());
    // Every file asked for at once: the kernel reads ahead as it can.
    for p in &all {
        let f = std::fs::File::open(p)?;
        // SAFETY: a hint about an open descriptor's pages.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
    }
    let (mut bytes, mut sum) = (0u64, 0u32);
    for p in &all {
        let data = std::fs::read(p)?;
        bytes += data.len() as u64;
        sum ^= crc32c::crc32c(&data);
    }
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
    println!(
        "{{\"files\": {}, \"bytes\": {bytes}, \"wall_s\": {wall:.4}, \"cpu_s\": {cpu:.4}, \"xor\": {sum}}}",
        all.len()
    );
    Ok(())
}
