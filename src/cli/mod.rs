//! Command-line interface: parsing only. Each subcommand converts its
//! arguments into plain library calls; the library never sees clap.
//! [`helper`] parses the `mount.slabfs` form (mount(8)'s helper interface)
//! into the same [`MountArgs`].

pub mod helper;
pub mod options;
pub mod remote;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use slabfs::codec::hdf5_plugin;
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;
use slabfs::formats::packed;
use slabfs::fs::mount::daemon::{self, Detached};
use slabfs::fs::mount::notify::SdNotify;
use slabfs::fs::mount::{MountConfig, Readiness};
use slabfs::fs::views::Views;
use slabfs::storage::local::descriptors;

#[derive(Parser, Debug)]
#[command(
    name = "slabfs",
    version,
    about = "Chunked, compressed and aggregated array datasets as flat row-major raw files",
    long_about = "slabfs shows every variable of a dataset as one flat, row-major raw binary \
                  file, so tools that only read raw binary (dd, numpy.fromfile/memmap, Fortran \
                  direct access, IDL, GrADS, GDAL's ENVI driver) can use chunked, compressed \
                  and aggregated data without converting it. `slabfs mount` shows them as \
                  files; `ls` and `cat` read them without mounting."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Log level: error, warn, info, debug or trace (RUST_LOG overrides)
    /// [default: info for mount, warn for the other commands].
    #[arg(long, global = true, value_name = "LEVEL", help_heading = "Logging",
          value_parser = ["error", "warn", "info", "debug", "trace"])]
    pub log_level: Option<String>,
    /// Log more: one level per -v (-v: info for ls and cat, debug for
    /// mount).
    #[arg(short, long, global = true, action = clap::ArgAction::Count,
          conflicts_with = "log_level", help_heading = "Logging")]
    pub verbose: u8,
    /// Log errors only.
    #[arg(short, long, global = true, conflicts_with_all = ["log_level", "verbose"],
          help_heading = "Logging")]
    pub quiet: bool,
}

impl Cli {
    /// The log level asked for: `--log-level`, else `-q` (error), else the
    /// command's own level (info for a daemon's log, warn for `ls`/`cat`,
    /// which say what they find wrong) raised by one per `-v`.
    pub fn log_level(&self) -> &str {
        if let Some(level) = &self.log_level {
            return level;
        }
        if self.quiet {
            return "error";
        }
        const LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];
        let base = match self.command {
            Command::Mount(_) => 2,
            _ => 1,
        };
        LEVELS[(base + self.verbose as usize).min(LEVELS.len() - 1)]
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the arrays of SOURCE: path (as the mount shows it), NumPy
    /// dtype, shape and size in bytes, one per line.
    Ls {
        /// A dataset or a directory of datasets, a path or a URL (formats:
        /// `slabfs --help`).
        source: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Write the flat row-major bytes of one array to stdout, exactly the
    /// bytes the mount serves for that file.
    Cat {
        /// A dataset or a directory of datasets, a path or a URL (formats:
        /// `slabfs --help`).
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
    /// Pack a classic netCDF file (CDF-1, -2 or -5) into a blocked-compressed
    /// archive: every variable cut into equal blocks, each compressed on its
    /// own, with an index for random access (docs/FORMAT-BLOCKED-NC3.md).
    /// Mounted, or read by `ls`/`cat`, an archive shows the same variables as
    /// the original. OUTPUT is written through a temporary file and renamed
    /// into place; an existing OUTPUT is replaced only on success.
    Pack {
        /// The classic netCDF file.
        input: PathBuf,
        /// The archive to write (by convention `NAME.ncb`).
        output: PathBuf,
        /// Uncompressed bytes per block, e.g. 1MiB, 256KiB (rounded down to a
        /// multiple of 8). Smaller blocks make small random reads cheaper;
        /// larger ones compress better.
        #[arg(long, default_value = "1MiB", value_parser = parse_size)]
        block_size: u64,
        /// Block compression.
        #[arg(long, value_enum, default_value_t = PackCodec::Zstd)]
        codec: PackCodec,
        /// Compression level: zstd -7..=22 (default 3), deflate 0..=9 (default 6).
        #[arg(long, allow_negative_numbers = true)]
        level: Option<i32>,
        /// Do not shuffle the bytes of multi-byte elements before compressing
        /// (shuffling groups the slowly varying high bytes of numbers, which
        /// usually compresses better and decompresses faster).
        #[arg(long)]
        no_shuffle: bool,
    },
    /// Unpack a blocked archive into the classic netCDF file it was packed
    /// from (same header, same variable data).
    Unpack {
        /// The archive.
        input: PathBuf,
        /// The classic netCDF file to write.
        output: PathBuf,
    },
    /// Join files that are one series along a dimension (daily files
    /// along time, say) into one descriptor, after checking that they fit:
    /// the same variables, dtypes and shapes but along DIM, the same
    /// coordinates, and the join coordinate increasing from file to file
    /// without overlaps or gaps once put on the first file's units. Writes
    /// an NcML file (OUTPUT.ncml) or an NCA JSON descriptor
    /// (OUTPUT.nca.json), through a temporary file renamed into place;
    /// mount OUTPUT's directory to see the series as one flat file per
    /// variable. Whatever does not fit is named, and nothing is written
    /// (docs/AGGREGATION.md, "slabfs aggregate").
    Aggregate(AggregateArgs),
    /// Print a completion script for SHELL, e.g. `source <(slabfs
    /// completions bash)`, or save it where the shell looks
    /// (/usr/share/bash-completion/completions/slabfs).
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Write the man pages (slabfs.1, slabfs-mount.1, ...) into DIR, made
    /// from the same definitions as --help.
    #[command(hide = true)]
    Man {
        /// Directory to write the pages into (created if missing).
        dir: PathBuf,
    },
}

/// The command line's definition, with the formats of the registry in
/// the top-level help (and the man page).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command().after_help(formats_help())
}

/// What SOURCE may be: every format of the registry, one line each.
fn formats_help() -> String {
    let mut out = String::from(
        "Sources: a dataset or a directory of datasets (walked recursively), as a path or a \
         URL (s3://, gs://, az://, http(s)://). Formats:\n",
    );
    let width = slabfs::formats::registry::FORMATS
        .iter()
        .map(|f| f.name.len())
        .max()
        .unwrap_or(0);
    for f in slabfs::formats::registry::FORMATS {
        out += &format!("  {:width$}  {}\n", f.name, f.summary);
    }
    out
}

/// `slabfs completions SHELL`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

/// `slabfs aggregate`'s arguments.
#[derive(Args, Debug)]
pub struct AggregateArgs {
    /// The member files, or one directory: its files of a dataset
    /// format by name (*.nc, *.h5, ...), or those --suffix and
    /// --regexp select.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub inputs: Vec<PathBuf>,
    /// The dimension to join along (the first dimension of every
    /// variable it joins).
    #[arg(long, value_name = "DIM")]
    pub dim: String,
    /// The descriptor to write; member paths in it are relative to its
    /// directory when under it.
    #[arg(short, long, value_name = "OUTPUT")]
    pub output: PathBuf,
    /// The descriptor's format [default: from OUTPUT's name: *.ncml is
    /// NcML, *.json NCA].
    #[arg(long, value_enum)]
    pub format: Option<DescriptorFormat>,
    /// In a directory: only the files whose name ends with SUFFIX
    /// (NcML's `<scan suffix>`).
    #[arg(long)]
    pub suffix: Option<String>,
    /// In a directory: only the files whose whole name the regular
    /// expression matches (NcML's `<scan regExp>`).
    #[arg(long, value_name = "REGEX")]
    pub regexp: Option<String>,
    /// In a directory: the files of its subdirectories too.
    #[arg(long)]
    pub subdirs: bool,
    /// NcML: write a `<scan>` of the directory instead of the list of
    /// its files, so that a mount follows it as files come and go (the
    /// checks are of the files there now). Needs one directory whose
    /// files sort by name as by time, and --suffix or --regexp.
    #[arg(long)]
    pub scan: bool,
    /// Join across a step of the join coordinate larger than 1.5 times
    /// the series' usual step (otherwise refused as a missing file).
    #[arg(long)]
    pub allow_gaps: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `slabfs aggregate --format`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescriptorFormat {
    /// NcML (netCDF-Java's, THREDDS's, xncml's): a joinExisting aggregation.
    Ncml,
    /// An NCA JSON descriptor (slabfs's *.nca.json).
    Nca,
}

/// `slabfs pack --codec`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackCodec {
    Zstd,
    /// zlib-wrapped deflate, readable by any zlib.
    Deflate,
}

/// `slabfs mount` arguments (see docs/CONFIGURATION.md).
/// The refresh interval when `--refresh` is not given: 5 s for a local
/// SOURCE (watched by inotify, or walked); 30 s for a URL, where a check
/// of an idle bucket prefix is one LIST request per 1,000 objects, so an
/// idle mount of 10,000 objects costs 10 LISTs every 30 s, a third of a
/// request per second (docs/REMOTE.md has the arithmetic).
pub const DEFAULT_REFRESH_LOCAL: Duration = Duration::from_secs(5);
pub const DEFAULT_REFRESH_REMOTE: Duration = Duration::from_secs(30);

fn default_refresh(source: &std::path::Path) -> Duration {
    if slabfs::storage::location::url_of(source).is_some() {
        DEFAULT_REFRESH_REMOTE
    } else {
        DEFAULT_REFRESH_LOCAL
    }
}

#[derive(Args, Debug, Clone)]
pub struct MountArgs {
    /// A dataset or a directory of datasets, a path or a URL (formats:
    /// `slabfs --help`).
    pub source: PathBuf,
    /// Where to mount it: an empty directory (see --create-mountpoint and
    /// --allow-non-empty). A stale mount left there by a killed slabfs is
    /// detached first.
    pub mountpoint: PathBuf,
    /// Mount options in fstab's spelling, as the mount.slabfs helper
    /// takes them: every long option below with _ for - (cache_size=2GiB,
    /// allow_other, views=raw+json with + between views), and ro,
    /// nonempty, x-mount.mkdir; repeatable.
    #[arg(short = 'o', long = "options", value_name = "OPTION[,OPTION...]")]
    pub options: Vec<String>,
    #[command(flatten)]
    pub common: Common,
    /// Byte order of the served files (and of the dtype in sidecars and
    /// xattrs).
    #[arg(long, value_enum, default_value_t = ByteOrder::Native, help_heading = "Layout and views")]
    pub byte_order: ByteOrder,
    /// Check the sources for changes (grown arrays, rewritten chunks,
    /// added or removed datasets) every SECONDS; 0 = never [default: 5
    /// for a local SOURCE, 30 for a URL, where a check of an idle prefix
    /// costs one LIST request per 1,000 objects (docs/REMOTE.md)].
    #[arg(long, value_name = "SECONDS", help_heading = "Refresh")]
    pub refresh: Option<u64>,
    /// How live refresh finds changes in a directory SOURCE on a local
    /// file system: `inotify` watches its directories and re-loads only
    /// what changed (a change shows within a second; an idle mount costs
    /// nothing); `walk` re-opens everything every --refresh SECONDS.
    /// Sources inotify cannot watch (NFS, Lustre, too many directories)
    /// are walked anyway.
    #[arg(long, value_enum, default_value_t = WatchMode::Inotify, help_heading = "Refresh")]
    pub watch: WatchMode,
    /// While watching, also walk the whole source every SECONDS, a safety
    /// net for what inotify cannot see (files outside SOURCE that
    /// aggregations read); 0 = never.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 900,
        help_heading = "Refresh"
    )]
    pub rescan: u64,
    /// Watch at most N directories, else walk every --refresh SECONDS
    /// [default: half of /proc/sys/fs/inotify/max_user_watches].
    #[arg(long, value_name = "N", help_heading = "Refresh")]
    pub max_watches: Option<usize>,
    /// Keep at most N datasets of a directory SOURCE open (parsed headers,
    /// sidecars), and at most N members of each NcML aggregation; the
    /// least recently used is closed and opened again on its next use,
    /// with the same inode numbers.
    #[arg(long, value_name = "N", default_value_t = slabfs::fs::DEFAULT_MAX_OPEN,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..),
          help_heading = "Caching")]
    pub max_open_datasets: usize,
    /// Files shown for each array, a comma-separated list of: raw (NAME,
    /// the flat file), json (NAME.json sidecar), npy (NAME.npy: NumPy
    /// header + data), hdr (NAME.hdr: ENVI header for NAME).
    #[arg(long, value_name = "LIST", default_value = "raw,json", value_parser = parse_views, help_heading = "Layout and views")]
    pub views: Views,
    /// Owner of every file and directory [default: the user who mounts].
    #[arg(long, value_name = "UID", help_heading = "Mount point and access")]
    pub uid: Option<u32>,
    /// Group of every file and directory [default: the mounting user's
    /// group].
    #[arg(long, value_name = "GID", help_heading = "Mount point and access")]
    pub gid: Option<u32>,
    /// Let other users (and root) use the mount. Non-root users need
    /// `user_allow_other` in /etc/fuse.conf.
    #[arg(long, help_heading = "Mount point and access")]
    pub allow_other: bool,
    /// Create MOUNTPOINT, and its missing parents, if it does not exist
    /// (fstab: x-mount.mkdir). Without it a missing MOUNTPOINT is an error:
    /// usually a typo.
    #[arg(long, help_heading = "Mount point and access")]
    pub create_mountpoint: bool,
    /// Mount over a MOUNTPOINT that has files or directories in it, hiding
    /// them until the unmount (fstab: nonempty). Without it a non-empty
    /// MOUNTPOINT is an error.
    #[arg(long, help_heading = "Mount point and access")]
    pub allow_non_empty: bool,
    /// Detach once the mount is live (exit 0), or exit 1 with the reason
    /// if mounting failed. Once live the daemon holds none of the caller's
    /// descriptors: its log goes to --log-file, else to the system log
    /// (/dev/log, the journal).
    #[arg(long, help_heading = "Daemon")]
    pub daemon: bool,
    /// Append the log to PATH instead of writing it to stderr.
    #[arg(long, value_name = "PATH", help_heading = "Logging")]
    pub log_file: Option<PathBuf>,
    /// Threads serving FUSE requests [default: the number of CPU cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), help_heading = "Daemon")]
    pub threads: Option<u16>,
    /// Set the mount's kernel readahead (/sys/class/bdi/MAJ:MIN/read_ahead_kb)
    /// to N KiB once mounted; root only. Larger helps long sequential
    /// reads and hurts random mmap access [default: the kernel's, 128].
    #[arg(long, value_name = "N", help_heading = "Caching")]
    pub read_ahead_kb: Option<u32>,
    /// Serve Prometheus metrics at http://ADDR/metrics: FUSE requests,
    /// bytes served, caches, decodes, remote requests, refresh
    /// (docs/OPERATIONS.md). ADDR is HOST:PORT, or a bare PORT (or :PORT)
    /// for 127.0.0.1:PORT; the endpoint has no authentication, so keep it
    /// on loopback unless the network is trusted.
    #[arg(long, value_name = "ADDR", value_parser = parse_metrics_addr, help_heading = "Metrics")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Push the same series to an OpenTelemetry collector (OTLP/HTTP,
    /// protobuf) at URL, such as http://127.0.0.1:4318/v1/metrics (a URL
    /// without a path gets /v1/metrics), every --metrics-otlp-interval.
    /// A collector that is down or slow never slows reads; failures are
    /// logged, a line every 10 minutes at most (docs/OPERATIONS.md).
    #[arg(long, value_name = "URL", value_parser = parse_otlp_url, help_heading = "Metrics")]
    pub metrics_otlp: Option<String>,
    /// A label KEY=VALUE on every series of this mount's metrics, so that
    /// several mounts of one node scrape (or push) apart, e.g.
    /// `--metrics-label mount=archive`; repeatable (fstab
    /// `metrics_label=mount=archive`).
    #[arg(long, value_name = "KEY=VALUE", value_parser = slabfs::metrics::parse_label, help_heading = "Metrics")]
    pub metrics_label: Vec<(String, String)>,
    /// Seconds between pushes to --metrics-otlp (one more at unmount).
    #[arg(long, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..), help_heading = "Metrics")]
    pub metrics_otlp_interval: u64,
}

/// `slabfs mount --watch`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchMode {
    /// Watch with inotify where possible.
    Inotify,
    /// Never watch: walk every --refresh SECONDS.
    Walk,
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
    /// Whether the mount may read from the network: its source or an
    /// `--allow-outside` root is a URL.
    fn reads_urls(&self) -> bool {
        let url = |p: &std::path::Path| p.to_str().is_some_and(slabfs::storage::location::is_url);
        url(&self.source) || self.common.allow_outside.iter().any(|p| url(p))
    }

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
            // Reads of a URL source may wait on the network: each on a
            // thread of its own, as many as can have a request in flight.
            wait_threads: if self.reads_urls() {
                self.common.remote.max_requests as usize
            } else {
                0
            },
            allow_other: self.allow_other,
            mountpoint_policy: slabfs::fs::mount::MountpointPolicy {
                create: self.create_mountpoint,
                allow_non_empty: self.allow_non_empty,
            },
            views: self.views,
            uid: self.uid,
            gid: self.gid,
            refresh: match self.refresh {
                Some(0) => None,
                Some(s) => Some(Duration::from_secs(s)),
                None => Some(default_refresh(&self.source)),
            },
            watch: self.watch == WatchMode::Inotify,
            rescan: (self.rescan > 0).then(|| Duration::from_secs(self.rescan)),
            max_watches: self.max_watches,
            max_open_datasets: self.max_open_datasets,
            read_ahead_kb: self.read_ahead_kb,
            allow_outside: self.common.allow_outside.clone(),
            reference: self.common.reference.clone(),
            all_refs: self.common.all_refs,
            remote: slabfs::storage::remote::Remote::new(self.common.remote.config()),
            metrics: self.metrics,
            metrics_labels: self.metrics_label.clone(),
            metrics_otlp: self
                .metrics_otlp
                .as_deref()
                .map(|url| slabfs::fs::mount::push::Config {
                    endpoint: slabfs::fs::mount::push::endpoint(url)
                        .expect("checked when parsed (parse_otlp_url)"),
                    interval: Duration::from_secs(self.metrics_otlp_interval),
                }),
        }
    }
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Sources")]
pub struct Common {
    /// Let aggregations and reference files read files under PATH too
    /// (by default only files under SOURCE); repeatable.
    #[arg(long, value_name = "PATH")]
    pub allow_outside: Vec<PathBuf>,
    /// The version of an Icechunk repository SOURCE to serve: a branch, a
    /// tag or a snapshot id [default: the tip of main] (docs/ICECHUNK.md).
    #[arg(long = "ref", value_name = "BRANCH|TAG|SNAPSHOT")]
    pub reference: Option<String>,
    /// Every version of an Icechunk repository SOURCE at once (mount, ls):
    /// directories branches/NAME, tags/NAME and snapshots/ID, each opened
    /// when first used (docs/ICECHUNK.md).
    #[arg(long, conflicts_with = "reference")]
    pub all_refs: bool,
    /// Data files (netCDF-3 files, blocked archives, raw fragments) kept
    /// open at once; the others are opened again when read [default: half
    /// the open-file limit, which slabfs raises to the hard limit, at most
    /// 4096].
    #[arg(long, value_name = "N", help_heading = "Caching")]
    pub max_open_files: Option<usize>,
    /// Decode HDF5 filters slabfs has no codec for (zfp, SZ3...) with HDF5
    /// filter plugin libraries, from the directories of HDF5_PLUGIN_PATH
    /// (unset: /usr/local/hdf5/lib/plugin) or --hdf5-plugin-path. A plugin
    /// is native code run inside slabfs (docs/SECURITY.md), so this is off
    /// by default: datasets that need one are listed, and their reads fail.
    #[arg(long)]
    pub hdf5_plugins: bool,
    /// The plugin directories (`:`-separated) instead of HDF5_PLUGIN_PATH.
    #[arg(long, value_name = "DIRS", requires = "hdf5_plugins")]
    pub hdf5_plugin_path: Option<std::ffi::OsString>,
    /// Byte budget of the decoded-chunk cache, e.g. 512MiB, 2GiB, 100000000.
    #[arg(long, default_value = "512MiB", value_parser = parse_size, help_heading = "Caching")]
    pub cache_size: u64,
    #[command(flatten)]
    pub remote: remote::RemoteArgs,
}

impl Common {
    /// The HDF5 filter-plugin settings these flags ask for.
    pub fn hdf5_plugins(&self) -> hdf5_plugin::Config {
        match &self.hdf5_plugin_path {
            Some(p) => hdf5_plugin::Config::with_path(self.hdf5_plugins, p),
            None => hdf5_plugin::Config::from_env(self.hdf5_plugins),
        }
    }
}

/// The datasets of `source` for `ls` and `cat`, URLs reached through a
/// remote state of their own, made from the remote options.
fn open_source(source: &std::path::Path, common: &Common) -> slabfs::Result<dataset::Dataset> {
    opener(common).open(source)
}

/// The opener of `ls` and `cat`: their cache, `--allow-outside` and
/// `--ref`, URLs reached through a remote state of their own, made from
/// the remote options.
fn opener(common: &Common) -> dataset::Opener {
    let network = std::sync::Arc::new(slabfs::storage::remote::Remote::new(common.remote.config()));
    dataset::Opener::new(cache(common))
        .allow_outside(&common.allow_outside)
        .network(Some(network))
        .reference(common.reference.as_deref())
}

/// `cat --all-refs`: the version of the repository `source` the path
/// `array` is in (`branches/NAME/...`, `tags/NAME/...`,
/// `snapshots/ID/...`), alone.
fn open_version_of(
    source: &std::path::Path,
    array: &str,
    common: &Common,
) -> slabfs::Result<dataset::Dataset> {
    let versions = opener(common).versions(source)?;
    let unit = array.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
    let not_found = || slabfs::Error::NotFound(format!("{}: {array}", source.display()));
    let found = versions.find(&unit).ok_or_else(not_found)?;
    versions.open(&unit, found)?.ok_or_else(not_found)
}

/// Set the process-wide settings every command reading datasets shares.
/// (The remote settings are no such thing: each command creates its
/// [`slabfs::storage::remote::Remote`] from them, [`open_source`].)
fn configure(common: &Common) {
    let plugins = common.hdf5_plugins();
    if plugins.enabled {
        log::info!(
            "HDF5 filter plugins enabled: searching {}",
            plugins.describe_dirs()
        );
    }
    hdf5_plugin::configure(plugins);
}

/// Parse `--views`: a comma-separated list of view names, each at most
/// once. The list replaces the default (`raw,json`), so it must name every
/// view wanted.
pub fn parse_views(s: &str) -> Result<Views, String> {
    let mut v = Views {
        raw: false,
        json: false,
        npy: false,
        hdr: false,
    };
    for name in s.split(',').map(str::trim) {
        let flag = match name {
            "raw" => &mut v.raw,
            "json" => &mut v.json,
            "npy" => &mut v.npy,
            "hdr" => &mut v.hdr,
            "" => {
                return Err(format!(
                    "{s:?}: empty view name (a list such as raw,json,npy)"
                ));
            }
            _ => {
                return Err(format!(
                    "unknown view {name:?} (choose from raw, json, npy, hdr)"
                ));
            }
        };
        if std::mem::replace(flag, true) {
            return Err(format!("view {name:?} given twice"));
        }
    }
    Ok(v)
}

/// Parse `--metrics`: `PORT` or `:PORT` (loopback, 127.0.0.1), an
/// address `IP:PORT` (`[IPv6]:PORT`), or `HOST:PORT` resolved now (its
/// first address). Loopback unless the address says otherwise.
pub fn parse_metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
    let s = s.trim();
    let port = s.strip_prefix(':').unwrap_or(s);
    if let Ok(port) = port.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if !s.contains(':') {
        return Err(format!(
            "{s:?}: give a PORT, or HOST:PORT (such as 127.0.0.1:9108)"
        ));
    }
    s.to_socket_addrs()
        .map_err(|e| format!("{s:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{s:?}: the host has no address"))
}

/// Parse `--metrics-otlp`: an `http` or `https` URL without credentials
/// or query string (`slabfs::fs::mount::push::endpoint`), kept as text
/// (a `Url` made `mount`'s arguments too large beside the other
/// commands' for clippy's `large_enum_variant`).
pub fn parse_otlp_url(s: &str) -> Result<String, String> {
    slabfs::fs::mount::push::endpoint(s).map(String::from)
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

/// Raise the soft open-file limit to the hard one (as daemons that hold
/// many files do) and size the cache of open data files from it, or from
/// `--max-open-files`.
fn size_descriptor_cache(common: &Common) {
    let limits = match descriptors::raise_nofile_limit() {
        Ok((soft, hard)) => format!("open-file limit {soft} (hard {hard})"),
        Err(e) => {
            log::warn!("could not raise the open-file limit: {e}");
            "open-file limit unknown".to_string()
        }
    };
    let n = common
        .max_open_files
        .unwrap_or_else(descriptors::default_capacity);
    descriptors::global().set_capacity(n);
    log::debug!(
        "keeping at most {} data files open ({limits})",
        descriptors::global().capacity()
    );
}

/// Run a parsed command; errors are reported by `main`.
pub fn run(cli: Cli) -> anyhow_free::Result<()> {
    if let Command::Ls { common, .. } | Command::Cat { common, .. } = &cli.command {
        size_descriptor_cache(common);
        configure(common);
    }
    match cli.command {
        Command::Ls { source, common } => {
            // Printed as each dataset is found: an archive of any size in
            // bounded memory.
            let network = slabfs::storage::remote::Remote::new(common.remote.config());
            let mut out = std::io::stdout().lock();
            let mut failed: Option<std::io::Error> = None;
            let mut print = |ds: dataset::Dataset| {
                for e in &ds.entries {
                    let m = e.array.meta();
                    let line = writeln!(
                        out,
                        "{}\t{}\t{:?}\t{}",
                        e.path,
                        m.dtype.numpy_typestr(Endian::NATIVE),
                        m.shape,
                        m.nbytes()
                    );
                    if let Err(e) = line {
                        failed = Some(e);
                        return std::ops::ControlFlow::Break(());
                    }
                }
                for s in &ds.skipped {
                    eprintln!("slabfs: skipped: {s}");
                }
                std::ops::ControlFlow::Continue(())
            };
            let opener = dataset::Opener::new(cache(&common))
                .allow_outside(&common.allow_outside)
                .network(Some(std::sync::Arc::new(network)))
                .reference(common.reference.as_deref());
            match common.all_refs {
                true => opener.for_each_version(&source, &mut print)?,
                false => opener.for_each(&source, &mut print)?,
            }
            match failed {
                Some(e) => Err(e.into()),
                None => Ok(()),
            }
        }
        Command::Cat {
            source,
            array,
            offset,
            length,
            common,
        } => {
            let ds = match common.all_refs {
                true => open_version_of(&source, &array, &common)?,
                false => open_source(&source, &common)?,
            };
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
        Command::Mount(args) => mount(&args, "slabfs", 1),
        Command::Pack {
            input,
            output,
            block_size,
            codec,
            level,
            no_shuffle,
        } => {
            let opts = packed::PackOptions {
                shuffle: !no_shuffle,
                block_size,
                codec: match codec {
                    PackCodec::Zstd => packed::BlockCodec::Zstd,
                    PackCodec::Deflate => packed::BlockCodec::Deflate,
                },
                level,
            };
            let start = std::time::Instant::now();
            let stats = packed::pack(&input, &output, &opts)?;
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "slabfs: packed {} variables ({} blocks) in {secs:.2} s: {} -> {} bytes (ratio {:.2})",
                stats.variables,
                stats.blocks,
                stats.input_bytes,
                stats.archive_bytes,
                stats.input_bytes as f64 / stats.archive_bytes.max(1) as f64
            );
            Ok(())
        }
        Command::Unpack { input, output } => {
            let stats = packed::unpack(&input, &output)?;
            eprintln!(
                "slabfs: unpacked {}: {} bytes",
                slabfs::logging::count(stats.variables, "variable", "variables"),
                stats.output_bytes
            );
            Ok(())
        }
        Command::Aggregate(args) => {
            configure(&args.common);
            aggregate(&args)
        }
        Command::Completions { shell } => {
            use clap_complete::Shell as S;
            let shell = match shell {
                Shell::Bash => S::Bash,
                Shell::Zsh => S::Zsh,
                Shell::Fish => S::Fish,
                Shell::Elvish => S::Elvish,
                Shell::Powershell => S::PowerShell,
            };
            clap_complete::generate(shell, &mut command(), "slabfs", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { dir } => {
            std::fs::create_dir_all(&dir)?;
            write_man_pages(&command(), &dir)?;
            Ok(())
        }
    }
}

/// `slabfs.1` and one page per subcommand (`slabfs-mount.1`...), as
/// clap_mangen renders them, into `dir`.
/// `slabfs aggregate`: plan the series, write its descriptor.
fn aggregate(args: &AggregateArgs) -> anyhow_free::Result<()> {
    use slabfs::formats::series;
    let select = series::Select {
        suffix: args.suffix.clone(),
        regexp: args
            .regexp
            .as_ref()
            .map(|r| regex::Regex::new(r).map_err(|e| format!("--regexp {r:?}: {e}")))
            .transpose()?,
        subdirs: args.subdirs,
    };
    let select = &select;
    let (inputs, dim, output, common) = (&args.inputs[..], &args.dim, &args.output, &args.common);
    let (format, scan, allow_gaps) = (args.format, args.scan, args.allow_gaps);
    let name = output
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let format = match format {
        Some(f) => f,
        None if name.ends_with(".ncml") => DescriptorFormat::Ncml,
        None if name.ends_with(".json") => DescriptorFormat::Nca,
        None => {
            return Err(format!(
                "{}: say --format ncml or --format nca (or name it *.ncml or *.nca.json)",
                output.display()
            )
            .into());
        }
    };
    // One opener (one cache, one remote state) for the listing and every
    // member.
    let opener = opener(common);
    let files = match inputs {
        [dir] if dir.is_dir() && !opener.is_dataset_dir(dir) => {
            // Not the descriptor itself, written there before.
            let same = |a: &std::path::Path| {
                let c = |p: &std::path::Path| std::fs::canonicalize(p).ok();
                c(a).is_some() && c(a) == c(output)
            };
            let mut files = series::files_in(dir, select)?;
            files.retain(|f| !same(f));
            if files.is_empty() {
                return Err(format!("{}: no files to aggregate in it", dir.display()).into());
            }
            files
        }
        _ => inputs.to_vec(),
    };
    let opts = series::Options {
        dim: dim.to_string(),
        allow_gaps,
    };
    let plan = series::plan(&opener, &files, &opts)?;
    let scan = match (scan, inputs) {
        (false, _) => None,
        (true, _) if format != DescriptorFormat::Ncml => {
            return Err("--scan writes NcML (an NCA descriptor lists its files)".into());
        }
        (true, [d]) if d.is_dir() => {
            if select.suffix.is_none() && select.regexp.is_none() {
                return Err(
                    "--scan: say which files the scan takes, by --suffix or --regexp".into(),
                );
            }
            let by_name = plan.members.windows(2).all(|w| w[0].path <= w[1].path);
            if !by_name {
                return Err(format!(
                    "--scan: {}'s files do not sort by name as by {dim}, and a scan joins them by name",
                    d.display()
                )
                .into());
            }
            Some(series::ncml::Scan {
                dir: d.clone(),
                suffix: select.suffix.clone(),
                regexp: select.regexp.as_ref().map(|r| r.as_str().to_string()),
                subdirs: select.subdirs,
            })
        }
        (true, _) => return Err("--scan needs one directory, not a list of files".into()),
    };
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let note = format!(
        "Written by slabfs aggregate {}: {} joined along {dim}",
        env!("CARGO_PKG_VERSION"),
        slabfs::logging::count(plan.members.len(), "file", "files")
    );
    let text = match format {
        DescriptorFormat::Ncml => series::ncml::write_with(&plan, &dir, &note, scan.as_ref()),
        DescriptorFormat::Nca => series::nca::to_text(&series::nca::write(&plan, &dir)),
    };
    let out = slabfs::storage::local::TempOutput::create(output)?;
    {
        use std::io::Write;
        let mut f = out.file();
        f.write_all(text.as_bytes())
            .map_err(|e| format!("{}: {}", output.display(), slabfs::error::os_words(&e)))?;
    }
    out.commit()?;
    let units = plan
        .coordinate
        .as_ref()
        .and_then(|c| c.units.as_deref())
        .map(|u| format!(", {dim} in {u}"))
        .unwrap_or_default();
    let converted = plan.members.iter().filter(|m| m.converted).count();
    let converted = match converted {
        0 => String::new(),
        n => format!(
            " ({} put on the first's units)",
            slabfs::logging::count(n, "file's coordinate", "files' coordinates")
        ),
    };
    let outside: Vec<&std::path::Path> = plan
        .members
        .iter()
        .filter_map(|m| m.path.parent())
        .filter(|p| {
            let c = |p: &std::path::Path| std::fs::canonicalize(p).ok();
            c(p).zip(c(&dir)).is_none_or(|(p, d)| !p.starts_with(d))
        })
        .collect();
    if let Some(p) = outside.first() {
        eprintln!(
            "slabfs: note: members are outside {}'s directory: mount or read it with \
             --allow-outside {}",
            output.display(),
            p.display()
        );
    }
    eprintln!(
        "slabfs: wrote {}: {} joined along {dim}, {} steps{units}{converted}",
        output.display(),
        slabfs::logging::count(plan.members.len(), "file", "files"),
        plan.len()
    );
    Ok(())
}

fn write_man_pages(cmd: &clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    let cmd = cmd.clone().disable_help_subcommand(true);
    let mut built = cmd.clone();
    built.build();
    let page = |c: clap::Command, name: &str| -> std::io::Result<()> {
        let mut out = Vec::new();
        clap_mangen::Man::new(c).render(&mut out)?;
        std::fs::write(dir.join(format!("{name}.1")), out)
    };
    page(cmd, "slabfs")?;
    for sub in built.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("slabfs-{}", sub.get_name());
        page(sub.clone().name(name.clone()), &name)?;
    }
    Ok(())
}

/// `slabfs mount` (and `mount.slabfs`): detach first if asked, then mount
/// and serve. `prog` prefixes the messages a detached parent prints, and
/// it exits with `fail_code` when the mount failed (mount(8) expects 32
/// from its helpers).
pub fn mount(args: &MountArgs, prog: &str, fail_code: i32) -> anyhow_free::Result<()> {
    if args.daemon {
        // First, before this process opens anything of its own.
        daemon::close_inherited()?;
    }
    let log_file = match &args.log_file {
        None => None,
        Some(path) => {
            let file =
                open_log_file(path).map_err(|e| format!("--log-file {}: {e}", path.display()))?;
            if slabfs::logging::log_to_file(file.try_clone()?).is_err() {
                log::warn!(
                    "a log file was already set; not logging to {}",
                    path.display()
                );
            }
            Some(file)
        }
    };
    size_descriptor_cache(&args.common);
    configure(&args.common);
    let mut cfg = args.mount_config();
    let systemd = match SdNotify::from_env() {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(e)) => {
            log::warn!("not notifying systemd: {e}");
            None
        }
    };
    let parent = if args.daemon {
        // The daemon moves to `/`: relative paths must not change meaning.
        if !cfg
            .source
            .to_str()
            .is_some_and(slabfs::storage::location::is_url)
        {
            cfg.source = std::path::absolute(&cfg.source)?;
        }
        cfg.mountpoint = std::path::absolute(&cfg.mountpoint)?;
        // Said on success only: when mounting fails, the reason is what
        // the caller needs to read.
        let mut no_log = None;
        let output = match log_file {
            Some(file) => daemon::Output::File(file),
            // systemd's journal stream: nobody waits for it to close.
            None if crate::stderr_is_journal() => daemon::Output::Keep,
            None => daemon::Output::syslog().unwrap_or_else(|e| {
                no_log = Some(format!(
                    "{prog}: warning: no system log ({}: {}): the daemon's log is discarded; \
                     give --log-file PATH to keep it",
                    daemon::SYSLOG_SOCKET,
                    slabfs::error::os_words(&e)
                ));
                daemon::Output::Discard
            }),
        };
        // A daemon that mounts prints nothing on its caller's terminal:
        // the lines below `warn` wait for the daemon's own log.
        if !matches!(output, daemon::Output::File(_) | daemon::Output::Keep) {
            slabfs::logging::hold_quiet_lines();
        }
        match daemon::detach(output)? {
            Detached::Child(pipe) => Some(pipe),
            Detached::Parent(Ok(())) => {
                if let Some(warning) = no_log {
                    eprintln!("{warning}");
                }
                std::process::exit(0)
            }
            Detached::Parent(Err(reason)) => {
                eprintln!("{prog}: {reason}");
                std::process::exit(fail_code);
            }
        }
    } else {
        None
    };
    let ready = Arc::new(Readiness::new(parent, systemd));
    match slabfs::fs::mount::run(cfg, ready.clone()) {
        Ok(()) => Ok(()),
        // The waiting parent prints it (once, on the caller's stderr).
        Err(e) if ready.failed(&e) => std::process::exit(fail_code),
        Err(e) => Err(e.into()),
    }
}

/// Open (create) `path` for appending log lines; readable by the owner's
/// group, as system logs are.
fn open_log_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::File::options()
        .append(true)
        .create(true)
        .mode(0o640)
        .open(path)
}

/// The names of the subcommands (and `help`), which a mount helper's
/// SOURCE is told apart from.
pub fn subcommands() -> Vec<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    cmd.get_subcommands()
        .map(|c| c.get_name().to_string())
        .chain(["help".to_string()])
        .collect()
}

/// A tiny boxed-error result for the binary (no anyhow dependency).
pub mod anyhow_free {
    pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_help_lists_every_format_of_the_registry() {
        let help = command().render_long_help().to_string();
        for f in slabfs::formats::registry::FORMATS {
            assert!(help.contains(f.summary), "{}: {help}", f.name);
        }
    }

    #[test]
    fn man_pages_and_completions_come_from_the_same_definitions() {
        let dir = tempfile::tempdir().unwrap();
        write_man_pages(&command(), dir.path()).unwrap();
        let mount = std::fs::read_to_string(dir.path().join("slabfs-mount.1")).unwrap();
        let cmd = command();
        let mount_cmd = cmd.find_subcommand("mount").unwrap();
        for arg in mount_cmd.get_arguments() {
            if let Some(long) = arg.get_long() {
                // roff escapes '-' as "\-".
                let shown = format!("\\-\\-{}", long.replace('-', "\\-"));
                assert!(mount.contains(&shown), "--{long} not in slabfs-mount.1");
            }
        }
        for page in ["slabfs.1", "slabfs-ls.1", "slabfs-cat.1", "slabfs-pack.1"] {
            assert!(dir.path().join(page).exists(), "{page}");
        }
        assert!(
            !dir.path().join("slabfs-man.1").exists(),
            "a hidden command"
        );
        let mut bash = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut command(),
            "slabfs",
            &mut bash,
        );
        let bash = String::from_utf8(bash).unwrap();
        assert!(bash.contains("--create-mountpoint") && bash.contains("completions"));
    }

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

    #[test]
    fn metrics_addresses_are_loopback_unless_said() {
        let addr = |s: &str| parse_metrics_addr(s).map(|a| a.to_string());
        assert_eq!(addr("9108").unwrap(), "127.0.0.1:9108");
        assert_eq!(addr(":9108").unwrap(), "127.0.0.1:9108");
        assert_eq!(addr("0.0.0.0:9108").unwrap(), "0.0.0.0:9108");
        assert_eq!(addr("10.1.2.3:80").unwrap(), "10.1.2.3:80");
        assert_eq!(addr("[::1]:9108").unwrap(), "[::1]:9108");
        let local = parse_metrics_addr("localhost:9108").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 9108, "{local}");
        for bad in ["", "x", "70000", ":x", "1.2.3.4", "127.0.0.1:99999"] {
            assert!(parse_metrics_addr(bad).is_err(), "{bad:?}");
        }
        let cfg = mount_config(&["--metrics", "9108"]).unwrap();
        assert_eq!(cfg.metrics, Some("127.0.0.1:9108".parse().unwrap()));
        assert_eq!(cfg.metrics_otlp, None);
    }

    #[test]
    fn otlp_push_flags() {
        let cfg = mount_config(&["--metrics-otlp", "http://127.0.0.1:4318/v1/metrics"]).unwrap();
        let otlp = cfg.metrics_otlp.unwrap();
        assert_eq!(otlp.endpoint.as_str(), "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(otlp.interval, slabfs::fs::mount::push::DEFAULT_INTERVAL);
        let cfg = mount_config(&[
            "--metrics-otlp",
            "https://collector:4318",
            "--metrics-otlp-interval",
            "15",
        ])
        .unwrap();
        let otlp = cfg.metrics_otlp.unwrap();
        assert_eq!(otlp.endpoint.as_str(), "https://collector:4318/v1/metrics");
        assert_eq!(otlp.interval, Duration::from_secs(15));
        for bad in [
            &["--metrics-otlp", "127.0.0.1:4318"][..],
            &["--metrics-otlp", "http://u:p@c:4318/v1/metrics"],
            &["--metrics-otlp", "http://c:4318/v1/metrics?key=k"],
            &["--metrics-otlp", "http://c", "--metrics-otlp-interval", "0"],
            &[
                "--metrics-otlp",
                "http://c",
                "--metrics-otlp-interval",
                "1m",
            ],
        ] {
            assert!(mount_config(bad).is_err(), "{bad:?} accepted");
        }
    }

    fn mount_config(args: &[&str]) -> Result<MountConfig, clap::Error> {
        let argv = ["slabfs", "mount"].iter().chain(args).chain(&["s", "m"]);
        let Command::Mount(args) = Cli::try_parse_from(argv)?.command else {
            panic!("not a mount")
        };
        Ok(args.mount_config())
    }

    #[test]
    fn operations_flags() {
        let cfg = mount_config(&[]).unwrap();
        assert_eq!(cfg.views, Views::default());
        assert_eq!(cfg.refresh, Some(Duration::from_secs(5)));
        assert_eq!((cfg.uid, cfg.gid, cfg.read_ahead_kb), (None, None, None));

        let cfg = mount_config(&[
            "--views",
            "raw,npy,hdr",
            "--refresh",
            "0",
            "--uid",
            "1000",
            "--gid",
            "100",
            "--read-ahead-kb",
            "4096",
        ])
        .unwrap();
        assert_eq!(
            cfg.views,
            Views {
                raw: true,
                json: false,
                npy: true,
                hdr: true
            }
        );
        assert_eq!(cfg.refresh, None);
        assert_eq!((cfg.uid, cfg.gid), (Some(1000), Some(100)));
        assert_eq!(cfg.read_ahead_kb, Some(4096));
        assert_eq!(cfg.metrics, None);
        assert_eq!(
            mount_config(&["--refresh", "30"]).unwrap().refresh,
            Some(Duration::from_secs(30))
        );
        // A URL source checks less often by default (docs/REMOTE.md).
        let remote = |args: &[&str]| {
            let argv = ["slabfs", "mount"]
                .iter()
                .chain(args)
                .chain(&["s3://bucket/runs", "m"]);
            let Command::Mount(args) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("not a mount")
            };
            args.mount_config().refresh
        };
        assert_eq!(remote(&[]), Some(Duration::from_secs(30)));
        assert_eq!(remote(&["--refresh", "5"]), Some(Duration::from_secs(5)));
        assert_eq!(remote(&["--refresh", "0"]), None);
        for bad in [
            &["--views", "raw,tiff"][..],
            &["--views", ""],
            &["--refresh", "-1"],
            &["--uid", "root"],
            &["--read-ahead-kb", "4M"],
        ] {
            assert!(mount_config(bad).is_err(), "{bad:?} accepted");
        }
        let err = mount_config(&["--views", "raw,tiff"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown view \"tiff\" (choose from raw, json, npy, hdr)"),
            "{err}"
        );
    }

    #[test]
    fn views_lists() {
        assert_eq!(parse_views("raw,json").unwrap(), Views::default());
        assert_eq!(parse_views(" json , raw ").unwrap(), Views::default());
        let npy = parse_views("npy").unwrap();
        assert!(npy.npy && !npy.raw && !npy.json && !npy.hdr);
        assert!(parse_views("raw,,json").is_err());
        assert!(parse_views("raw,raw").unwrap_err().contains("twice"));
        assert!(parse_views("RAW").is_err());
    }
}
