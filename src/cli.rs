//! Command-line interface: parsing only. Each subcommand converts its
//! arguments into plain library calls; the library never sees clap.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use slabfs::cache::ChunkCache;
use slabfs::dataset;
use slabfs::dtype::Endian;
use slabfs::read::read_at;

#[derive(Parser, Debug)]
#[command(
    name = "slabfs",
    version,
    about = "Chunked, compressed and aggregated array datasets as flat row-major raw files",
    long_about = "slabfs shows every variable of a Zarr store (and, later, netCDF files and \
                  aggregations) as one flat, row-major raw binary file, so tools that only read \
                  raw binary can use chunked, compressed data without converting it."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Log level: error, warn, info, debug or trace (RUST_LOG overrides).
    #[arg(long, global = true, default_value = "warn")]
    pub log_level: String,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the arrays of SOURCE: path (as the mount shows it), NumPy
    /// dtype, shape and size in bytes, one per line.
    Ls {
        /// A Zarr store or a directory of datasets.
        source: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Write the flat row-major bytes of one array to stdout, exactly the
    /// bytes the mount serves for that file.
    Cat {
        /// A Zarr store or a directory of datasets.
        source: PathBuf,
        /// The array's path as `slabfs ls` prints it.
        array: String,
        /// First byte to write.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Number of bytes to write (default: to the end of the file).
        #[arg(long)]
        length: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args, Debug)]
#[command(next_help_heading = "Reading")]
pub struct Common {
    /// Byte budget of the decoded-chunk cache, e.g. 512MiB, 2GiB, 100000000.
    #[arg(long, default_value = "512MiB", value_parser = parse_size)]
    pub cache_size: u64,
}

/// Parse a size with an optional binary (KiB, MiB, GiB, TiB) or decimal
/// (K, M, G, T, KB, MB, ...) suffix.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return Err(format!("{s:?}: unknown size unit {unit:?}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn cache(common: &Common) -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(
        usize::try_from(common.cache_size).unwrap_or(usize::MAX),
    ))
}

/// Run a parsed command; errors are reported by `main`.
pub fn run(cli: Cli) -> anyhow_free::Result<()> {
    match cli.command {
        Command::Ls { source, common } => {
            let ds = dataset::open(&source, cache(&common))?;
            let mut out = std::io::stdout().lock();
            for e in &ds.entries {
                let m = e.array.meta();
                writeln!(
                    out,
                    "{}\t{}\t{:?}\t{}",
                    e.path,
                    m.dtype.numpy_typestr(Endian::NATIVE),
                    m.shape,
                    m.nbytes()
                )?;
            }
            for s in &ds.skipped {
                eprintln!("slabfs: skipped: {s}");
            }
            Ok(())
        }
        Command::Cat {
            source,
            array,
            offset,
            length,
            common,
        } => {
            let ds = dataset::open(&source, cache(&common))?;
            let entry = ds
                .get(&array)
                .ok_or_else(|| slabfs::Error::NotFound(format!("{}: {array}", source.display())))?;
            let size = entry.array.meta().nbytes();
            let end = match length {
                Some(l) => offset.saturating_add(l).min(size),
                None => size,
            };
            // Large blocks let one read decode many chunks in parallel,
            // while bounding memory.
            const BLOCK: u64 = 32 << 20;
            let mut buf = vec![0u8; BLOCK.min(end.saturating_sub(offset)) as usize];
            let mut out = std::io::stdout().lock();
            let mut pos = offset;
            while pos < end {
                let want = (end - pos).min(BLOCK) as usize;
                let n = read_at(entry.array.as_ref(), pos, &mut buf[..want], Endian::NATIVE)?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n])?;
                pos += n as u64;
            }
            out.flush()?;
            Ok(())
        }
    }
}

/// A tiny boxed-error result for the binary (no anyhow dependency).
pub mod anyhow_free {
    pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("99999999999TiB").is_err());
    }
}
