//! Command-line interface: parsing only. Each subcommand converts its
//! arguments into plain library calls; the library never sees clap.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};

use slabfs::cache::ChunkCache;
use slabfs::dataset;
use slabfs::dtype::Endian;
use slabfs::fs::mount::MountConfig;
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
    /// `mount` logs at info unless this is given.
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
    /// Mount SOURCE read-only at MOUNTPOINT: every array becomes a flat
    /// row-major raw file (plus a NAME.json sidecar) at the path `slabfs ls`
    /// prints. Runs in the foreground until SIGTERM, SIGINT or
    /// `fusermount3 -u MOUNTPOINT`, then unmounts and exits 0.
    Mount(MountArgs),
}

/// `slabfs mount` arguments (see docs/CONFIGURATION.md).
#[derive(Args, Debug)]
pub struct MountArgs {
    /// A Zarr store or a directory of datasets.
    pub source: PathBuf,
    /// Where to mount it; created if missing. A stale mount left there by
    /// a killed slabfs is detached first.
    pub mountpoint: PathBuf,
    #[command(flatten)]
    pub common: Common,
    /// Byte order of the served files (and of the dtype in sidecars and
    /// xattrs).
    #[arg(long, value_enum, default_value_t = ByteOrder::Native, help_heading = "Reading")]
    pub byte_order: ByteOrder,
    /// Threads serving FUSE requests [default: the number of CPU cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), help_heading = "Mount")]
    pub threads: Option<u16>,
    /// Let other users (and root) use the mount. Non-root users need
    /// `user_allow_other` in /etc/fuse.conf.
    #[arg(long, help_heading = "Mount")]
    pub allow_other: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    /// The machine's own order (little-endian on x86-64 and ARM).
    Native,
    Little,
    Big,
}

impl ByteOrder {
    fn endian(self) -> Endian {
        match self {
            ByteOrder::Native => Endian::NATIVE,
            ByteOrder::Little => Endian::Little,
            ByteOrder::Big => Endian::Big,
        }
    }
}

impl MountArgs {
    /// The plain configuration the library runs with.
    pub fn mount_config(&self) -> MountConfig {
        MountConfig {
            source: self.source.clone(),
            mountpoint: self.mountpoint.clone(),
            cache_size: usize::try_from(self.common.cache_size).unwrap_or(usize::MAX),
            byte_order: self.byte_order.endian(),
            threads: match self.threads {
                Some(n) => n as usize,
                None => std::thread::available_parallelism().map_or(1, |n| n.get()),
            },
            allow_other: self.allow_other,
            views: slabfs::fs::views::Views::default(),
            uid: None,
            gid: None,
            refresh: Some(std::time::Duration::from_secs(5)),
            read_ahead_kb: None,
        }
    }
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
        Command::Mount(args) => Ok(slabfs::fs::mount::run(args.mount_config())?),
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

    #[test]
    fn mount_args() {
        let cli = Cli::try_parse_from([
            "slabfs",
            "mount",
            "--cache-size",
            "1GiB",
            "--byte-order",
            "big",
            "--threads",
            "3",
            "--allow-other",
            "src",
            "mnt",
        ])
        .unwrap();
        let Command::Mount(args) = cli.command else {
            panic!("not a mount")
        };
        let cfg = args.mount_config();
        assert_eq!(cfg.cache_size, 1 << 30);
        assert_eq!(cfg.byte_order, Endian::Big);
        assert_eq!(cfg.threads, 3);
        assert!(cfg.allow_other);
        assert_eq!(cfg.mountpoint, PathBuf::from("mnt"));

        let cli = Cli::try_parse_from(["slabfs", "mount", "src", "mnt"]).unwrap();
        let Command::Mount(args) = cli.command else {
            panic!("not a mount")
        };
        let cfg = args.mount_config();
        assert_eq!(cfg.byte_order, Endian::NATIVE);
        assert_eq!(cfg.cache_size, 512 << 20);
        assert!(cfg.threads >= 1);
        assert!(!cfg.allow_other);
        assert!(Cli::try_parse_from(["slabfs", "mount", "--threads", "0", "s", "m"]).is_err());
        assert!(
            Cli::try_parse_from(["slabfs", "mount", "--byte-order", "middle", "s", "m"]).is_err()
        );
    }
}
