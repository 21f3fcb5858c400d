//! Running the mount: the daemon's life from mount point to exit.
//!
//! [`run`] does, in order:
//!
//! 1. Blocks SIGINT, SIGTERM and SIGHUP in the calling thread before any
//!    other thread exists, so every thread inherits the mask and the
//!    signals are only ever taken by one dedicated thread (`sigwait`).
//!    Their default action would kill the daemon without unmounting and
//!    leave "Transport endpoint is not connected" behind.
//! 2. Checks `--allow-other` is permitted and SOURCE exists, then prepares
//!    the mount point: creates it if missing; if a daemon that
//!    died (SIGKILL, OOM, crash) left a stale FUSE mount there, detaches it
//!    lazily (`umount2(MNT_DETACH)`, or `fusermount3 -uz` when not root)
//!    with a log line; refuses a mount point another live FUSE daemon
//!    serves.
//! 3. Opens the dataset and builds the tree ([`SlabFs`]).
//!    With `--metrics ADDR` the address is bound before this (a port in
//!    use fails the mount) and served from here on ([`exporter`]); with
//!    `--metrics-otlp URL` the pushes start here ([`push`]).
//! 4. Mounts (`ro`, `default_permissions`) with `fuser::Session::new`,
//!    which also completes the FUSE INIT handshake, and hands an unmounter
//!    to the signal thread. The mount is live from here on: the kernel
//!    queues requests until the workers start. Then it sets the mount's
//!    readahead if asked ([`kernel_readahead`]) and tells whoever waits for it
//!    ([`Readiness`]): the `--daemon` parent ([`daemon`]) and systemd
//!    ([`notify`], `READY=1`).
//! 5. Serves requests on `threads` threads (`fuser::Config::n_threads`)
//!    until the filesystem is unmounted: by a signal (the signal thread
//!    unmounts; if files are open it detaches lazily and the daemon exits
//!    once they are closed), or from outside (`fusermount3 -u`, `umount`).
//!    Either way `run` returns `Ok` and the process exits 0 (systemd is
//!    told `STOPPING=1` first). A second signal while waiting exits at once
//!    (status 1).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fuser::{MountOption, Session, SessionACL, SessionUnmounter};
use parking_lot::Mutex;

use super::fuse::FuseFs;
use super::{FsConfig, SlabFs};
use crate::dtype::Endian;
use crate::engine::cache::ChunkCache;
use crate::formats::dataset;

pub mod daemon;
pub mod exporter;
pub mod kernel_readahead;
pub mod notify;
pub mod push;

/// Everything `slabfs mount` needs, free of clap.
#[derive(Debug, Clone)]
pub struct MountConfig {
    /// A Zarr store or a directory of datasets.
    pub source: PathBuf,
    pub mountpoint: PathBuf,
    /// Byte budget of the decoded-chunk cache.
    pub cache_size: usize,
    /// Byte order of the served files.
    pub byte_order: Endian,
    /// Threads serving FUSE requests (at least 1).
    pub threads: usize,
    /// Most threads serving reads that may wait on the network, apart
    /// from the FUSE ones ([`super::waiting`]); 0 = none, every read is
    /// served on a FUSE thread (a mount that reads no URL).
    pub wait_threads: usize,
    /// Let users other than the mounting one see the mount.
    pub allow_other: bool,
    /// Which files each array shows (raw, NAME.json, NAME.npy, NAME.hdr).
    pub views: super::views::Views,
    /// Owner of every node; `None` = the mounting user / group.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// How often sources are walked for changes when they are not
    /// watched; `None` = never (no live refresh at all).
    pub refresh: Option<std::time::Duration>,
    /// Watch a directory source for changes (inotify) instead of walking
    /// it every `refresh`.
    pub watch: bool,
    /// While watching, walk the whole source this often anyway; `None` =
    /// never.
    pub rescan: Option<std::time::Duration>,
    /// Most directories watched; `None` = half the kernel's per-user limit.
    pub max_watches: Option<usize>,
    /// Most datasets of a directory SOURCE open at once
    /// (`--max-open-datasets`).
    pub max_open_datasets: usize,
    /// Labels on every series of the metrics (`--metrics-label`).
    pub metrics_labels: Vec<(String, String)>,
    /// Set the mount's `/sys/class/bdi/<dev>/read_ahead_kb` to this after
    /// mounting (root only); `None` = leave the kernel's value.
    pub read_ahead_kb: Option<u32>,
    /// Directories outside SOURCE that aggregations and references may
    /// read files from (`--allow-outside`).
    pub allow_outside: Vec<PathBuf>,
    /// The version of an Icechunk repository SOURCE (`--ref`); `None`:
    /// the tip of `main`.
    pub reference: Option<String>,
    /// Every version of an Icechunk repository SOURCE at once
    /// (`--all-refs`): `branches/NAME`, `tags/NAME`, `snapshots/ID`.
    pub all_refs: bool,
    /// How URLs are reached (the CLI's remote options): the mount's whole
    /// remote state, its limits and counters.
    pub remote: crate::storage::remote::Remote,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (`--metrics`);
    /// `None`: no endpoint.
    pub metrics: Option<std::net::SocketAddr>,
    /// Push the same series to an OpenTelemetry collector
    /// (`--metrics-otlp`, `--metrics-otlp-interval`); `None`: no push.
    pub metrics_otlp: Option<push::Config>,
    /// What a missing or non-empty mount point gets ([`prepare_mountpoint`]).
    pub mountpoint_policy: MountpointPolicy,
}

/// What [`prepare_mountpoint`] does with a mount point that is not an
/// empty directory. Both off by default, as libfuse, sshfs and rclone
/// have it: a missing mount point is usually a typo (creating it, with its
/// parents, would leave a directory tree behind), and mounting over files
/// hides them until the unmount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MountpointPolicy {
    /// Create a missing mount point, and its missing parents
    /// (`--create-mountpoint`; fstab's `x-mount.mkdir`, which mount(8)
    /// itself honours).
    pub create: bool,
    /// Mount over a directory that has entries (`--allow-non-empty`; fstab
    /// `nonempty`).
    pub allow_non_empty: bool,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    #[error("mount point {path}: {}", crate::error::os_words(source))]
    MountPoint {
        path: String,
        #[source]
        source: io::Error,
    },
    /// Missing, not empty, or served by a live FUSE daemon: `detail` says
    /// which, and what to do.
    #[error("mount point {path}: {detail}")]
    MountPointRefused { path: String, detail: String },
    #[error(transparent)]
    Dataset(#[from] crate::Error),
    #[error("{0}")]
    Config(String),
    #[error("mounting {path}: {}", crate::error::os_words(source))]
    Mount {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("serving {path}: {}", crate::error::os_words(source))]
    Serve {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("signal handling: {}", crate::error::os_words(.0))]
    Signals(#[source] io::Error),
    #[error("--metrics {addr}: {}", crate::error::os_words(source))]
    Metrics {
        addr: std::net::SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("--metrics-otlp {url}: {source}")]
    MetricsOtlp {
        url: String,
        #[source]
        source: io::Error,
    },
}

/// Who waits for the mount to go live: the `--daemon` parent (through a
/// pipe) and systemd (`$NOTIFY_SOCKET`). [`run`] tells both once, right
/// after the kernel accepted the mount, so whoever waits can use the files
/// the moment it is told; the caller reports a failure with
/// [`Readiness::failed`]. Shared with the signal thread, which announces
/// `STOPPING=1`.
#[derive(Debug, Default)]
pub struct Readiness {
    parent: Mutex<Option<daemon::ReadyPipe>>,
    systemd: Option<notify::SdNotify>,
    stopping: AtomicBool,
}

impl Readiness {
    pub fn new(parent: Option<daemon::ReadyPipe>, systemd: Option<notify::SdNotify>) -> Readiness {
        Readiness {
            parent: Mutex::new(parent),
            systemd,
            stopping: AtomicBool::new(false),
        }
    }

    /// The mount is live: release the parent, send `READY=1`.
    fn live(&self, status: &str) {
        if let Some(pipe) = self.parent.lock().take() {
            pipe.ready();
        }
        self.tell_systemd(&format!("READY=1\nSTATUS={status}"));
    }

    /// Mounting failed: hand the reason to the waiting parent. Returns
    /// whether there was one (it then prints the reason; nobody else need).
    pub fn failed(&self, reason: &dyn std::fmt::Display) -> bool {
        match self.parent.lock().take() {
            Some(pipe) => {
                pipe.failed(&reason.to_string());
                true
            }
            None => false,
        }
    }

    /// The unmount has begun (once, however many times it is called).
    fn stopping(&self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            self.tell_systemd("STOPPING=1");
        }
    }

    fn tell_systemd(&self, state: &str) {
        if let Some(n) = &self.systemd
            && let Err(e) = n.send(state)
        {
            log::warn!("notifying systemd at {}: {e}", n.name());
        }
    }
}

/// Where the daemon is, as the signal thread sees it.
enum Phase {
    /// Not mounted yet: a signal just ends the process.
    Starting,
    /// Serving: a signal unmounts.
    Mounted(SessionUnmounter),
    /// A signal already asked to unmount: another one exits at once.
    Stopping,
}

/// Mount `cfg.source` at `cfg.mountpoint` and serve it until unmounted,
/// telling `ready` when the mount is live and when it stops. Returns `Ok`
/// after a clean unmount (signal or external).
pub fn run(cfg: MountConfig, ready: Arc<Readiness>) -> Result<(), MountError> {
    // The counters start from zero about now: the start of the cumulative
    // series pushed with --metrics-otlp.
    let started = std::time::SystemTime::now();
    let signals = Signals::block().map_err(MountError::Signals)?;
    let mnt = cfg.mountpoint.clone();
    let phase = Arc::new(Mutex::new(Phase::Starting));
    {
        let phase = phase.clone();
        let mnt = mnt.clone();
        let ready = ready.clone();
        let remote = cfg.remote.clone();
        std::thread::Builder::new()
            .name("slabfs-signals".into())
            .spawn(move || signal_loop(&signals, &phase, &mnt, &ready, &remote))
            .map_err(MountError::Signals)?;
    }

    check_allow_other(cfg.allow_other)?;
    // Taken now: a port in use fails the mount before anything is opened.
    let metrics = cfg
        .metrics
        .map(|addr| {
            exporter::bind(addr)
                .map(|l| (addr, l))
                .map_err(|source| MountError::Metrics { addr, source })
        })
        .transpose()?;
    // Absolute, so sidecars and logs name files unambiguously.
    // A URL is no path: it stays as given.
    let source = if cfg
        .source
        .to_str()
        .is_some_and(crate::storage::location::is_url)
    {
        cfg.source.clone()
    } else {
        cfg.source.canonicalize().map_err(|e| crate::Error::Io {
            path: cfg.source.display().to_string(),
            source: e,
        })?
    };
    prepare_mountpoint(&mnt, cfg.mountpoint_policy)?;
    // Resolved now: once mounted, resolving it would ask this very daemon,
    // which does not serve until the session runs.
    let canonical_mnt = mnt
        .canonicalize()
        .map_err(|source| MountError::MountPoint {
            path: mnt.display().to_string(),
            source,
        })?;
    let cache = Arc::new(ChunkCache::new(cfg.cache_size));
    // SAFETY: getuid/getgid cannot fail and have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let (uid, gid) = (cfg.uid.unwrap_or(uid), cfg.gid.unwrap_or(gid));
    let fs_config = FsConfig {
        byte_order: cfg.byte_order,
        uid,
        gid,
        views: cfg.views,
        track_changes: cfg.refresh.is_some(),
    };
    let network: Arc<dyn crate::storage::Network> = Arc::new(cfg.remote.clone());
    // A directory of datasets: each opened on first use (ready at once,
    // whatever its size). One dataset (a file, a store, a URL): loaded now.
    // A version of a repository (`--ref`) is one dataset.
    let opener = dataset::Opener::new(cache.clone())
        .allow_outside(&cfg.allow_outside)
        .network(Some(network))
        .reference(cfg.reference.as_deref())
        .max_open(cfg.max_open_datasets);
    let archive = match cfg.reference {
        _ if cfg.all_refs => Some(opener.versions(&source)?),
        Some(_) => None,
        None => opener.archive(&source)?,
    };
    let (core, shown, skipped) = if let Some(archive) = archive {
        let core = SlabFs::of_archive(archive, cfg.max_open_datasets, fs_config);
        let shown = format!("the datasets of {} as they are used", source.display());
        (core, shown, Vec::new())
    } else {
        // A load: its log lines are not repeated by the refreshes that follow.
        let ds = crate::logging::loading(|| opener.open(&source))?;
        for s in &ds.skipped {
            log::warn!("not shown: {s}");
        }
        if ds.entries.is_empty() {
            log::warn!(
                "{}: no arrays found; mounting an empty tree",
                source.display()
            );
        }
        let core = SlabFs::of_dataset(&ds, fs_config);
        let arrays = crate::logging::count(ds.entries.len(), "array", "arrays");
        let shown = format!("{arrays} of {}", source.display());
        let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
        (core, shown, skipped)
    };
    let core = Arc::new(
        core.with_cache(cache)
            .with_waiting_threads(cfg.wait_threads)
            .with_remote(cfg.remote.clone()),
    );
    core.stats().set_not_shown(skipped.len());
    // One registry for the endpoint and the push: the same series.
    let registry = (metrics.is_some() || cfg.metrics_otlp.is_some())
        .then(|| Arc::new(collectors(&core, &cfg.remote, &cfg.metrics_labels)));
    if let (Some((addr, listener)), Some(registry)) = (metrics, &registry) {
        exporter::serve(listener, registry.clone())
            .map_err(|source| MountError::Metrics { addr, source })?;
    }
    // Stopped, after one last push, when dropped: at the end of the
    // session below (or if mounting fails).
    let pusher = match (&cfg.metrics_otlp, &registry) {
        (Some(otlp), Some(registry)) => Some(
            push::start(
                otlp,
                registry.clone(),
                push::resource(&canonical_mnt),
                started,
            )
            .map_err(|source| MountError::MetricsOtlp {
                url: otlp.endpoint.to_string(),
                source,
            })?,
        ),
        _ => None,
    };

    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
        // The kernel checks the 0444/0555 modes itself instead of asking.
        MountOption::DefaultPermissions,
        MountOption::Subtype("slabfs".into()),
        MountOption::FSName(fsname(&source)),
    ];
    config.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(cfg.threads.max(1));

    // Hold the phase lock across the mount so a signal arriving meanwhile
    // waits and then finds the unmounter.
    let session = {
        let mut phase = phase.lock();
        let mut session = Session::new(FuseFs::new(core.clone()), &mnt, &config).map_err(|e| {
            MountError::Mount {
                path: mnt.display().to_string(),
                source: e,
            }
        })?;
        *phase = Phase::Mounted(session.unmount_callable());
        session
    };
    log::info!(
        "mounted {} at {}: serving {shown}, {} threads{}, {} byte order, cache {} MiB",
        source.display(),
        mnt.display(),
        cfg.threads.max(1),
        match cfg.wait_threads {
            0 => String::new(),
            n => format!(" (and up to {n} for reads waiting on the network)"),
        },
        match cfg.byte_order {
            Endian::Little => "little",
            Endian::Big => "big",
        },
        cfg.cache_size >> 20,
    );
    if let Some(kb) = cfg.read_ahead_kb {
        tune_read_ahead(&canonical_mnt, kb);
    }
    ready.live(&format!("serving {shown} at {}", mnt.display()));
    // Live refresh: its own thread, telling the kernel what changed
    // through the session's notifier. Dropped (stopped) once unmounted.
    let refresher = cfg.refresh.and_then(|every| {
        let notifier = Box::new(super::fuse::KernelNotifier(session.notifier()));
        super::refresh::spawn(
            core.clone(),
            source.clone(),
            super::refresh::RefreshConfig {
                every,
                // The versions of a repository are no directories to
                // watch: each pass asks the open ones' heads.
                watch: cfg.watch && !cfg.all_refs,
                rescan: cfg.rescan,
                max_watches: cfg.max_watches,
                reference: cfg.reference.clone(),
            },
            notifier,
            skipped,
            cfg.allow_outside.clone(),
        )
        .map_err(|e| log::warn!("live refresh not started: {e}"))
        .ok()
    });
    let stop_requested = || matches!(*phase.lock(), Phase::Stopping);
    let served = session_ended(session.run(), stop_requested()).map_err(|e| MountError::Serve {
        path: mnt.display().to_string(),
        source: e,
    });
    ready.stopping();
    drop(refresher);
    // Blocks read and not yet written to the disk cache: written before
    // the process ends (a restart keeps what was read), bounded in time.
    if cfg.remote.flush_disk_cache(DISK_CACHE_FLUSH) == Some(false) {
        log::warn!(
            "disk cache: blocks still being written after {} s; left out",
            DISK_CACHE_FLUSH.as_secs()
        );
    }
    // The last push: the final counts, the disk cache's writes included.
    drop(pusher);
    served?;
    log::info!("unmounted {}", mnt.display());
    Ok(())
}

/// How long an unmount waits for the disk cache's pending blocks (at most
/// 64 MiB: well under a second on any disk that works).
const DISK_CACHE_FLUSH: std::time::Duration = std::time::Duration::from_secs(10);

/// What the metrics endpoint shows ([`exporter`]): the collector of each
/// subsystem ([`crate::metrics::Collect`]), each reading the counters its
/// part of `.slabfs/stats` shows. A subsystem's series are one more line
/// here (the module docs of [`crate::metrics`]). Every series carries
/// `labels` (`--metrics-label`).
pub fn collectors(
    core: &Arc<SlabFs>,
    remote: &crate::storage::remote::Remote,
    labels: &[(String, String)],
) -> crate::metrics::Registry {
    let registry = crate::metrics::Registry::with_labels(labels.to_vec());
    // fs: FUSE requests by operation, bytes served, errors, refresh
    // passes, datasets open, failing or not shown.
    registry.register(core.clone());
    // engine: the chunk cache, the buffer pool, decodes by codec chain.
    if let Some(cache) = core.cache() {
        registry.register(cache.clone());
    }
    // storage::remote: requests, bytes, errors, retries, latency by store;
    // the throttle and hedges.
    registry.register(Arc::new(remote.clone()));
    // storage::disk_cache (`--disk-cache`): its counters as .slabfs/stats
    // shows them (written here: storage imports nothing of the crate
    // above it).
    let r = remote.clone();
    registry.register(Arc::new(move |out: &mut crate::metrics::Out<'_>| {
        let Some(s) = r.disk_cache() else {
            return Ok(());
        };
        out.counter(
            "slabfs_disk_cache_hits",
            "Blocks reads took from the disk cache.",
            s.hits,
        )?;
        out.counter(
            "slabfs_disk_cache_misses",
            "Blocks reads fetched from the store, not in the disk cache.",
            s.misses,
        )?;
        out.counter(
            "slabfs_disk_cache_evictions",
            "Blocks removed to stay under --disk-cache-size.",
            s.evictions,
        )?;
        out.counter(
            "slabfs_disk_cache_corrupt",
            "Blocks found damaged, removed and read again.",
            s.corrupt,
        )?;
        out.counter(
            "slabfs_disk_cache_read_bytes",
            "Bytes served from the disk cache.",
            s.bytes_read,
        )?;
        out.counter(
            "slabfs_disk_cache_written_bytes",
            "Bytes written to the disk cache.",
            s.bytes_written,
        )?;
        out.counter(
            "slabfs_disk_cache_write_errors",
            "Writes that failed (each turns writes off for a minute).",
            s.write_errors,
        )?;
        out.gauge(
            "slabfs_disk_cache_bytes",
            "Bytes the disk cache directory holds.",
            s.bytes_held as f64,
        )
    }));
    registry
}

/// How the FUSE session's end is taken. After a signal asked for the
/// unmount, the kernel may end the connection with `ECONNABORTED` rather
/// than the `ENODEV` fuser takes for an unmount (a race between the
/// unmount and the session's next read, seen in tests/it/security.rs as a
/// daemon exiting 1 on SIGTERM): that is the unmount it asked for, not an
/// error.
fn session_ended(served: io::Result<()>, stop_requested: bool) -> io::Result<()> {
    match served {
        Err(e) if stop_requested && e.raw_os_error() == Some(libc::ECONNABORTED) => {
            log::debug!("the session ended with \"{e}\" after the unmount was asked for");
            Ok(())
        }
        other => other,
    }
}

/// `--read-ahead-kb`: set and log it; a failure leaves the kernel's value
/// and is only a warning (the mount works, reads are just smaller).
fn tune_read_ahead(mnt: &Path, kb: u32) {
    match kernel_readahead::set(mnt, kb) {
        Ok(r) if r.after_kb == kb => log::info!(
            "read_ahead_kb of {} (bdi {}): {} -> {} KiB",
            mnt.display(),
            r.bdi,
            r.before_kb,
            r.after_kb
        ),
        Ok(r) => log::warn!(
            "read_ahead_kb of {} (bdi {}): asked {kb} KiB, the kernel kept {} KiB",
            mnt.display(),
            r.bdi,
            r.after_kb
        ),
        Err(e) => log::warn!("--read-ahead-kb {kb} not applied: {e}"),
    }
}

/// The `fsname` shown in /proc/mounts: the source path when it is a plain
/// one (mount options are comma-separated, so no commas, backslashes or
/// whitespace), else just "slabfs".
fn fsname(source: &Path) -> String {
    let s = source.display().to_string();
    if s.chars()
        .any(|c| c == ',' || c == '\\' || c.is_whitespace() || c.is_control())
    {
        "slabfs".into()
    } else {
        s
    }
}

fn signal_loop(
    signals: &Signals,
    phase: &Mutex<Phase>,
    mnt: &Path,
    ready: &Readiness,
    remote: &crate::storage::remote::Remote,
) {
    loop {
        let sig = signals.wait();
        let name = signal_name(sig);
        let mut p = phase.lock();
        match std::mem::replace(&mut *p, Phase::Stopping) {
            Phase::Starting => {
                log::info!("{name} before the mount was live: exiting");
                std::process::exit(0);
            }
            Phase::Mounted(mut unmounter) => {
                log::info!("{name}: unmounting {}", mnt.display());
                ready.stopping();
                // Reads waiting on a remote server end now (EIO), so they
                // do not hold the unmount until the server times out.
                remote.cancel_all();
                if let Err(e) = unmounter.unmount() {
                    log::warn!(
                        "unmounting {} failed ({e}), probably files are open: detaching it \
                         lazily; slabfs exits when the last one is closed (signal again to \
                         exit now)",
                        mnt.display()
                    );
                    if let Err(e) = lazy_unmount(mnt) {
                        log::error!("lazy unmount of {} failed: {e}", mnt.display());
                    }
                }
            }
            Phase::Stopping => {
                log::warn!("second {name}: exiting without waiting for open files");
                std::process::exit(1);
            }
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// The set of signals that mean "unmount and exit", blocked in the
/// creating thread and waited for with `sigwait`.
struct Signals(libc::sigset_t);

impl Signals {
    fn block() -> io::Result<Signals> {
        // SAFETY: sigset_t is plain data; sigemptyset initializes it fully
        // before any other use, and pthread_sigmask only reads it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, sig);
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(Signals(set))
        }
    }

    fn wait(&self) -> i32 {
        let mut sig = 0;
        // SAFETY: the set is initialized and outlives the call; sig is a
        // valid out pointer. sigwait only fails for an invalid set.
        unsafe { libc::sigwait(&self.0, &mut sig) };
        sig
    }
}

/// Non-root users may only use allow_other when /etc/fuse.conf says so;
/// fusermount3's own message is cryptic, so say it first.
fn check_allow_other(allow_other: bool) -> Result<(), MountError> {
    // SAFETY: geteuid cannot fail.
    if !allow_other || unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let allowed = std::fs::read_to_string("/etc/fuse.conf")
        .map(|s| s.lines().any(|l| l.trim() == "user_allow_other"))
        .unwrap_or(false);
    if allowed {
        Ok(())
    } else {
        Err(MountError::Config(
            "--allow-other needs the line 'user_allow_other' in /etc/fuse.conf when not \
             mounting as root (add it as root, or mount without --allow-other)"
                .into(),
        ))
    }
}

/// Check the mount point: clear a stale FUSE mount left there by a
/// daemon that died; refuse one served by a live FUSE daemon, a missing
/// one (unless `policy.create`: then create it) and one with entries
/// (unless `policy.allow_non_empty`), each with a message saying what to
/// do.
pub fn prepare_mountpoint(mnt: &Path, policy: MountpointPolicy) -> Result<(), MountError> {
    let err = |source: io::Error| MountError::MountPoint {
        path: mnt.display().to_string(),
        source,
    };
    let refused = |detail: String| MountError::MountPointRefused {
        path: mnt.display().to_string(),
        detail,
    };
    // statfs always reaches the FUSE daemon (stat may be answered from the
    // kernel's attribute cache), so it tells a dead one reliably.
    match statfs(mnt) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)) => {
            log::warn!(
                "{} is a stale FUSE mount (\"{e}\"): its daemon died; detaching it",
                mnt.display()
            );
            lazy_unmount(mnt).map_err(err)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound && policy.create => {
            std::fs::create_dir_all(mnt).map_err(err)?;
            log::info!("created mount point {}", mnt.display());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(refused(format!(
                "no such directory; create it first (mkdir -p {}), or pass \
                 --create-mountpoint (fstab: x-mount.mkdir)",
                mnt.display()
            )));
        }
        Err(e) => return Err(err(e)),
        Ok(()) => {}
    }
    if !std::fs::metadata(mnt).map_err(err)?.is_dir() {
        return Err(err(io::Error::from_raw_os_error(libc::ENOTDIR)));
    }
    let canonical = mnt.canonicalize().map_err(err)?;
    if let Some((fstype, source)) = mount_at(&canonical)
        && (fstype == "fuse" || fstype.starts_with("fuse."))
    {
        return Err(refused(format!(
            "already a live FUSE mount ({fstype} of {source}); unmount it first \
             (fusermount3 -u {})",
            mnt.display()
        )));
    }
    if !policy.allow_non_empty {
        let mut entries = std::fs::read_dir(mnt).map_err(err)?;
        if let Some(first) = entries.next() {
            let first = first.map_err(err)?.file_name();
            let more = entries.count();
            let what = if more == 0 {
                format!("{first:?}")
            } else {
                format!("{first:?} and {more} more")
            };
            return Err(refused(format!(
                "not empty ({what}): mounting would hide its files until the unmount; \
                 choose an empty directory, or pass --allow-non-empty (fstab: nonempty) \
                 to mount over them"
            )));
        }
    }
    Ok(())
}

fn statfs(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statfs is plain data the call fills; c is a valid path.
    let rc = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Detach the mount at `mnt` now, even if busy (`umount -l`): as root with
/// `umount2(MNT_DETACH)`, otherwise through the setuid `fusermount3 -uz`
/// (which only unmounts the user's own FUSE mounts).
pub fn lazy_unmount(mnt: &Path) -> io::Result<()> {
    let c = CString::new(mnt.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: c is a valid NUL-terminated path that outlives the call.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    let first = io::Error::last_os_error();
    for bin in ["fusermount3", "fusermount"] {
        let status = std::process::Command::new(bin)
            .args(["-u", "-z", "-q", "--"])
            .arg(mnt)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if matches!(status, Ok(s) if s.success()) {
            return Ok(());
        }
    }
    Err(first)
}

/// The filesystem type and source of the topmost mount at `path` (which
/// must be canonical), from /proc/self/mountinfo.
pub fn mount_at(path: &Path) -> Option<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    parse_mountinfo(&info, path.as_os_str().as_bytes()).map(|m| (m.fstype, m.source))
}

/// One line of /proc/self/mountinfo, the fields slabfs uses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountInfo {
    /// `MAJ:MIN` of the mounted device (anonymous for FUSE).
    dev: String,
    fstype: String,
    source: String,
}

/// The last (topmost) mountinfo line whose mount point is `path`. Mount
/// points escape space, tab, newline and backslash as `\ooo`.
fn parse_mountinfo(info: &str, path: &[u8]) -> Option<MountInfo> {
    info.lines()
        .rev()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut left = left.split(' ');
            let dev = left.nth(2)?.to_string();
            let point = left.nth(1)?;
            let mut right = right.split(' ');
            let fstype = right.next()?.to_string();
            let source = right.next().unwrap_or("").to_string();
            (unescape(point) == path).then_some(MountInfo {
                dev,
                fstype,
                source,
            })
        })
        .next()
}

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (a daemon exiting 1 on SIGTERM in a CI run of
    /// tests/it/security.rs: "serving ...: Software caused connection abort"):
    /// `ECONNABORTED` after a requested unmount is a clean end; without a
    /// request, and any other error, it stays an error.
    #[test]
    fn a_connection_aborted_by_the_requested_unmount_is_a_clean_end() {
        let aborted = || Err(io::Error::from_raw_os_error(libc::ECONNABORTED));
        assert!(session_ended(aborted(), true).is_ok());
        assert!(session_ended(aborted(), false).is_err());
        let other = Err(io::Error::from_raw_os_error(libc::EIO));
        assert!(session_ended(other, true).is_err());
        assert!(session_ended(Ok(()), false).is_ok());
    }

    #[test]
    fn mountinfo_lines() {
        let info = "\
22 1 0:21 / /proc rw,nosuid - proc proc rw
90 22 0:50 / /tmp/a\\040b rw,nosuid,nodev - fuse /data/x.zarr rw,user_id=0
91 22 0:51 / /tmp/c rw - tmpfs tmpfs rw
92 91 0:52 / /tmp/c rw - fuse.slabfs slabfs rw
";
        assert_eq!(
            parse_mountinfo(info, b"/tmp/a b"),
            Some(MountInfo {
                dev: "0:50".into(),
                fstype: "fuse".into(),
                source: "/data/x.zarr".into()
            })
        );
        assert_eq!(
            parse_mountinfo(info, b"/tmp/c"),
            Some(MountInfo {
                dev: "0:52".into(),
                fstype: "fuse.slabfs".into(),
                source: "slabfs".into()
            })
        );
        assert_eq!(parse_mountinfo(info, b"/tmp"), None);
        assert_eq!(unescape("a\\134b\\011"), b"a\\b\t");
    }

    #[test]
    fn fsnames() {
        assert_eq!(fsname(Path::new("/no/such/plain")), "/no/such/plain");
        assert_eq!(fsname(Path::new("/no/such/a,b")), "slabfs");
        assert_eq!(fsname(Path::new("/no/such/a b")), "slabfs");
    }

    #[test]
    fn a_missing_mountpoint_is_refused_unless_asked_to_create_it() {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("a/b");
        let e = prepare_mountpoint(&mnt, MountpointPolicy::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no such directory") && e.contains("--create-mountpoint"),
            "{e}"
        );
        assert!(!dir.path().join("a").exists(), "nothing created");
        let create = MountpointPolicy {
            create: true,
            ..Default::default()
        };
        prepare_mountpoint(&mnt, create).unwrap();
        assert!(mnt.is_dir());
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        assert!(prepare_mountpoint(&file, create).is_err());
    }

    #[test]
    fn a_non_empty_mountpoint_is_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        prepare_mountpoint(dir.path(), MountpointPolicy::default()).unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let e = prepare_mountpoint(dir.path(), MountpointPolicy::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not empty") && e.contains("and 1 more") && e.contains("--allow-non-empty"),
            "{e}"
        );
        let allow = MountpointPolicy {
            allow_non_empty: true,
            ..Default::default()
        };
        prepare_mountpoint(dir.path(), allow).unwrap();
    }
}
