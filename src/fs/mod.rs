//! The filesystem: a dataset's arrays as a read-only tree of flat files.
//!
//! This module is the pure core. [`SlabFs`] answers `lookup`, `getattr`,
//! `readdir`, `open`, `read`, `release`, `getxattr`, `listxattr` and
//! `statfs` in plain Rust, returning [`FsResult`]; [`fuse`] is the thin
//! `fuser::Filesystem` adapter that converts types, replies and logs;
//! [`mount`] runs the daemon (mount point checks, signals, unmount);
//! [`refresh`] keeps the tree in step with sources that change; [`stats`]
//! counts what the mount does; [`waiting`] holds the threads that serve
//! reads which may wait on the network ([`SlabFs::serve_read`]), so that
//! the FUSE threads never wait on a server. The core's tests call it directly, without
//! mounting; `tests/it/mount.rs` and `tests/it/mount_live.rs` mount for real.
//!
//! # Layout
//!
//! The tree mirrors [`crate::formats::dataset::Opener::open`]: each entry's path components
//! become directories and the array is a file at its path, exactly the
//! paths `slabfs ls` prints (in an archive, a plain directory shows even
//! when no dataset is under it: knowing would mean walking it). Beside each array `NAME`, depending on
//! [`Views`] (`--views`, default `raw,json`):
//!
//! - `NAME` (raw): the flat row-major bytes;
//! - `NAME.json` (json): its sidecar ([`sidecar`]);
//! - `NAME.npy` (npy): [`views::npy_header`] followed by the raw bytes, so
//!   `np.load(NAME.npy, mmap_mode="r")` works. It is the raw file with a
//!   byte prefix: a read of `[o, o+n)` copies the part that falls in the
//!   header and reads the rest from the array at `o - header.len()`;
//! - `NAME.hdr` (hdr): an ENVI header ([`views::envi_header`]) describing
//!   `NAME`, left out (with a debug log) for arrays ENVI cannot describe,
//!   and when the raw view is off (it would describe no file). It places
//!   the array on the globe when its last two dimensions have regular
//!   latitude / longitude coordinates, which [`georef`] finds among the
//!   dataset's arrays and reads when the tree is built.
//!
//! The raw file and the `.npy` view carry the `user.slabfs.*` xattrs.
//!
//! A directory with attributes ([`crate::formats::dataset::Directory`]: a
//! file's global attributes, a group's; or a netCDF group's dimensions)
//! carries the xattr `user.slabfs.attributes` (when it has attributes)
//! and, with the json view, the sidecar `.json` inside it ([`sidecar`],
//! the root's being `/.json`). Such a directory is shown even when it
//! holds no array (a file of global attributes only, an empty group). Names go to arrays first: an array (or a
//! directory) whose name is `.json` keeps it and the directory's sidecar
//! is left out with an info line; netCDF names never start with a dot,
//! so only an HDF5 or Zarr name can take it. Attributes at the path of an
//! array (or below one) are not shown, with a warning.
//!
//! A view is only placed when no array, directory or earlier view already
//! has its name (an array `x.json` wins over the sidecar of `x`) and the
//! name fits in 255 bytes. An entry whose path is also a directory (an
//! array `a` beside an array `a/b`) or is not a clean relative path (an
//! empty, `.` or `..` component, a NUL, a component over 255 bytes: names
//! come from dataset metadata) is left out with a warning. Headers and
//! sidecars are computed once per opened array, not per read.
//!
//! The root also holds a hidden directory `.slabfs` with the files `stats`
//! ([`stats`]) and `errors` (the recent failures, [`failures`]), unless a
//! dataset already uses the name `.slabfs`. Their
//! content is generated when opened and that snapshot is what the
//! open file reads, so one `cat` sees one consistent document. Since its
//! length is only known at open, `stat` reports size 0 and the file is
//! opened `direct_io` (as `/proc` files are): the kernel then passes reads
//! through instead of clamping them at the size, so `cat` and
//! `json.load(open(...))` read the whole document. It cannot be `mmap`ed.
//! The sidecar of a dataset that fails to open is generated the same way
//! (below).
//!
//! # Datasets open when used
//!
//! A mount of one dataset (a file, a Zarr store, a URL) or of arrays given
//! directly holds one tree. A mount of a directory is an archive
//! ([`datasets`] keeps its open datasets, [`archive`] answers lookups and
//! listings in its directories): its directories are listed from the disk when read and
//! each dataset is opened on first use, at most `--max-open-datasets` kept
//! open, so the mount is ready at once and holds what is used, whatever
//! the archive's size. In an archive, a directory of the archive and a
//! dataset that is a directory report a link count of 1 ("not counted":
//! counting means listing or opening); a dataset that fails to open is
//! listed, and what is inside it fails with EIO (each request tries to
//! open it again), except where a user looks for why: its sidecar (a
//! dataset that is a directory: `NAME/.json`; a single-array store:
//! `NAME.json`) reads its failure (`{"error": REASON, "time": ...}`,
//! [`failures::failed_sidecar`]), and its directory carries the xattr
//! `user.slabfs.error` (the reason). `statfs` counts the open datasets.
//! Every failure (a dataset's open, a read, what a load skipped, a
//! refresh, a listing) is in `.slabfs/errors` ([`failures`]).
//!
//! # Inodes
//!
//! A node's number is a hash of its path and kind ([`inodes`]): the same
//! on every mount and across evictions and refreshes, whatever was opened
//! first. The daemon keeps a path only for the numbers the kernel holds
//! (looked up, not yet forgotten), with the kernel's count. A removed
//! path that the kernel still holds answers ENOENT; created again, it
//! has its number back.
//!
//! # Trees are swapped, never edited
//!
//! Each dataset's nodes live in an immutable [`tree::Tree`], shared as an
//! `Arc`. A request clones the `Arc` of the tree it needs (the lock is
//! held for that clone only) and works on that snapshot without further
//! locking; a refresh builds a complete new tree of the dataset and swaps
//! the pointer. A request that started before a swap finishes on the old
//! tree, a consistent view of the past.
//!
//! # Semantics
//!
//! Read-only: everything that would change the tree is [`FsError::ReadOnly`]
//! (EROFS), and the mount is also `ro` so the kernel refuses most of it
//! before asking. Files are 0444 and directories 0555, owned by the
//! configured uid/gid; `st_size` is exact (elements x item size, plus the
//! header for `.npy`), `st_blocks` is the size in 512-byte units; `st_mtime`
//! is the mount time, or the time a refresh last saw the node change; in
//! an archive, a directory's and a dataset's nodes' time is the
//! directory's or the dataset's own on disk (the same at every open)
//! until a refresh sees a change. Reads
//! are clamped at EOF by [`crate::engine::read::read_at`]; a failed read is
//! [`FsError::Read`], carrying the path, offset, size and the library error
//! (which names the chunk file).

mod archive;
pub mod datasets;
pub mod error;
pub mod failures;
pub mod fuse;
mod georef;
pub mod inodes;
pub mod mount;
mod paths;
pub mod reconcile;
pub mod refresh;
pub mod sidecar;
pub mod stats;
mod tree;
pub mod views;
pub mod waiting;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use parking_lot::{Mutex, RwLock};

use crate::engine::array::ArraySource;
use crate::engine::cache::{ChunkCache, SharedBytes};
use crate::engine::read::{cached_at, read_at, read_shared_at};
use crate::engine::readahead::{DEFAULT_MAX_WINDOW, Readahead};
use crate::formats::dataset::archive::Archive;
use crate::formats::dataset::{Dataset, Entry};
pub use datasets::DEFAULT_MAX_OPEN;
use datasets::Datasets;
use inodes::Inodes;
use tree::{Content, NAME_MAX, Node, Tree, Xattrs, child_path, parent_of};
pub use tree::{FsConfig, Kind};

pub use error::{FsError, FsResult};
use failures::{Failure, Failures};
pub use stats::Stats;
pub use views::Views;

/// The bytes of one read: a buffer of its own, or a range of a decoded
/// chunk lent by the cache so the reply needs no copy.
pub enum ReadData {
    Owned(Vec<u8>),
    Shared(SharedBytes),
}

impl std::ops::Deref for ReadData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ReadData::Owned(v) => v,
            ReadData::Shared(s) => s,
        }
    }
}

/// The root directory's inode number (the kernel's `FUSE_ROOT_ID`).
pub const ROOT_INO: u64 = 1;

/// `st_blksize` of every file: the "preferred I/O size" that stdio, Fortran
/// runtimes and `cp` size their buffers by. 128 KiB is the kernel's default
/// FUSE readahead, so a buffered reader asks for what one request carries
/// instead of 4 KiB at a time.
pub const BLKSIZE: u32 = 128 * 1024;

/// The hidden control directory at the root, and its files: the stats
/// and the recent failures ([`failures`]).
pub const CONTROL_DIR: &str = ".slabfs";
pub const STATS_FILE: &str = "stats";
pub const ERRORS_FILE: &str = "errors";

/// What `stat` shows for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    /// 512-byte blocks.
    pub blocks: u64,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Modification (and access, change) time: the mount time, or when a
    /// refresh last changed the node.
    pub mtime: SystemTime,
    pub blksize: u32,
}

/// What `statfs` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statfs {
    /// Total size of all files, in `bsize` units; nothing is free.
    pub blocks: u64,
    pub files: u64,
    pub bsize: u32,
    pub namelen: u32,
}

/// How a file was opened: the handle the kernel passes back on reads, and
/// whether reads must bypass the page cache (only the stats file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    pub direct_io: bool,
}

/// How a directory was opened: the handle the kernel passes back on
/// `readdir`, and whether it may cache the listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenedDir {
    pub fh: u64,
    pub cache: bool,
}

/// Where `readdir` puts entries: the FUSE reply buffer in the adapter, a
/// `Vec` in tests. `add` returns true when the buffer is full (the entry
/// was not added).
pub trait DirSink {
    fn add(&mut self, ino: u64, next_offset: u64, kind: Kind, name: &str) -> bool;
}

/// The answer to `getxattr`/`listxattr` for a caller buffer of `size`
/// bytes: the size it needs (when it asked with 0) or the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrReply {
    Size(u32),
    Data(Vec<u8>),
}

/// What an inode number stands for, resolved for one request.
enum Place {
    /// A node of a dataset's tree (the whole mount's, for a mount of one
    /// dataset).
    Node { tree: Arc<Tree>, path: Arc<str> },
    /// A plain directory of an archive, listed from the disk.
    Listed(Arc<str>),
    /// A dataset of an archive that is a directory, not opened for this
    /// request (`stat` needs nothing of it).
    Closed(Arc<str>),
    /// `.slabfs`.
    ControlDir,
    /// `.slabfs/stats`.
    StatsFile,
    /// `.slabfs/errors`.
    ErrorsFile,
    /// The sidecar (`path`) of a dataset of an archive that fails to open:
    /// the failure instead of its attributes.
    Failed { path: Arc<str>, failure: Failure },
}

impl Place {
    /// Whether it is a file generated when opened, read from its snapshot
    /// (`direct_io`, size 0).
    fn generated(&self) -> bool {
        matches!(
            self,
            Place::StatsFile | Place::ErrorsFile | Place::Failed { .. }
        )
    }
}

/// The path of `place` for messages.
fn place_path(place: &Place) -> String {
    match place {
        Place::Node { path, .. }
        | Place::Listed(path)
        | Place::Closed(path)
        | Place::Failed { path, .. } => path.to_string(),
        Place::ControlDir => CONTROL_DIR.to_string(),
        Place::StatsFile => format!("{CONTROL_DIR}/{STATS_FILE}"),
        Place::ErrorsFile => format!("{CONTROL_DIR}/{ERRORS_FILE}"),
    }
}

/// One entry of a directory listing: name, kind, and (for a listing of
/// an archive) the dataset it belongs to.
type Listed = (String, Kind, Option<Arc<str>>);

/// The entries of one directory listing.
type Listing = Arc<Vec<Listed>>;

/// The mounted filesystem. Every method takes `&self` and requests run on
/// any number of threads: each works on a snapshot of the trees it needs
/// (see the module docs); the chunk cache inside the sources does its own
/// locking and the counters are atomics.
pub struct SlabFs {
    datasets: Datasets,
    inodes: Inodes,
    config: FsConfig,
    /// When the mount started: the mtime of the archive's directories.
    mounted: SystemTime,
    cache: Option<Arc<ChunkCache>>,
    stats: Stats,
    /// The recent failures (`.slabfs/errors`).
    failures: Failures,
    /// Open generated files (the control files, a failed dataset's
    /// sidecar): handle -> the document generated at open.
    snapshots: Mutex<HashMap<u64, Arc<[u8]>>>,
    /// Open directories of an archive: handle -> the listing taken at
    /// `opendir`, so that the kernel's `readdir` calls, which resume at
    /// an offset, see one listing (and a directory of 10^5 names is read
    /// once, not once per reply buffer).
    listings: Mutex<HashMap<u64, Listing>>,
    next_fh: AtomicU64,
    /// Serialises refreshes (there is one refresh thread; tests call
    /// [`SlabFs::refresh`] directly).
    refresh_lock: Mutex<()>,
    /// Sequential readahead into the chunk cache (off without a cache).
    readahead: Readahead,
    /// Threads for reads that may wait on the network
    /// ([`SlabFs::serve_read`]); `None`: every read is answered on the
    /// caller's thread (a mount that reads no URL).
    waiting: Option<waiting::Waiting>,
    /// The remote state the mount reads URLs through (its refresh asks
    /// the source's objects again through it); `None`: no URL.
    remote: Option<crate::storage::remote::Remote>,
    /// Where an archive says which directories it began to use, for the
    /// refresh thread to watch ([`watch::Seen::Touched`]); `None`: no
    /// refresh watches this mount.
    touched: Mutex<Option<std::sync::mpsc::SyncSender<watch::Seen>>>,
    /// Open datasets to open again at a time, whatever is seen to change
    /// ([`crate::formats::entry::Dataset::recheck_in`]), by mount path.
    rechecks: Mutex<BTreeMap<String, std::time::Instant>>,
}

impl SlabFs {
    /// Build the tree of `entries` (as `Opener::open` lists them).
    pub fn new(entries: &[Entry], config: FsConfig) -> SlabFs {
        let ds = Dataset {
            entries: entries.to_vec(),
            ..Dataset::default()
        };
        SlabFs::of_dataset(&ds, config)
    }

    #[cfg(test)]
    fn with_directories(
        entries: &[Entry],
        directories: &std::collections::BTreeMap<String, crate::formats::dataset::Directory>,
        config: FsConfig,
    ) -> SlabFs {
        let ds = Dataset {
            entries: entries.to_vec(),
            directories: directories.clone(),
            ..Dataset::default()
        };
        SlabFs::of_dataset(&ds, config)
    }

    /// Build the tree of a whole dataset: its arrays and its directories'
    /// attributes (what it skipped goes to `.slabfs/errors`).
    pub fn of_dataset(ds: &Dataset, config: FsConfig) -> SlabFs {
        let now = SystemTime::now();
        let tree = datasets::tree_of("", ds, &config, None, now);
        let fs = SlabFs::with(Datasets::Whole(RwLock::new(Arc::new(tree))), config, now);
        fs.failures.loaded("/", &skipped_reasons(ds), now);
        fs
    }

    /// The filesystem of the directory `archive`, each dataset opened on
    /// first use and at most `max_open` kept open ([`datasets`]).
    pub fn of_archive(archive: Archive, max_open: usize, config: FsConfig) -> SlabFs {
        let lazy = datasets::Lazy::new(archive, max_open);
        SlabFs::with(Datasets::Archive(Box::new(lazy)), config, SystemTime::now())
    }

    fn with(datasets: Datasets, config: FsConfig, mounted: SystemTime) -> SlabFs {
        SlabFs {
            datasets,
            inodes: Inodes::default(),
            config,
            mounted,
            cache: None,
            stats: Stats::new(),
            failures: Failures::default(),
            snapshots: Mutex::new(HashMap::new()),
            listings: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            refresh_lock: Mutex::new(()),
            readahead: Readahead::new(0),
            waiting: None,
            remote: None,
            touched: Mutex::new(None),
            rechecks: Mutex::new(BTreeMap::new()),
        }
    }

    /// Tell `tx` (the refresh thread's events) which directories of an
    /// archive the mount begins to use, so that only they are watched.
    pub fn report_touched(&self, tx: std::sync::mpsc::SyncSender<watch::Seen>) {
        *self.touched.lock() = Some(tx);
    }

    /// Open the dataset at `unit` again in `after` (none: nothing asked),
    /// waking the refresh thread to take the new deadline.
    fn ask_recheck(&self, unit: &str, after: Option<std::time::Duration>) {
        let Some(after) = after else { return };
        let at = std::time::Instant::now() + after;
        let mut r = self.rechecks.lock();
        let due = r.entry(unit.to_string()).or_insert(at);
        *due = (*due).min(at);
        drop(r);
        if let Some(tx) = &*self.touched.lock() {
            let _ = tx.try_send(watch::Seen::Wake);
        }
    }

    /// When the next recheck is due.
    pub fn next_recheck(&self) -> Option<std::time::Instant> {
        self.rechecks.lock().values().min().copied()
    }

    /// The rechecks due at `now`, taken.
    pub fn take_due_rechecks(&self, now: std::time::Instant) -> BTreeSet<String> {
        let mut r = self.rechecks.lock();
        let due: BTreeSet<String> = r
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(u, _)| u.clone())
            .collect();
        for u in &due {
            r.remove(u);
        }
        due
    }

    /// The archive's directory `rel` (with what is under it: `tree`) is
    /// in use: watch it. Never waits (a FUSE thread calls it): a full
    /// queue drops the request, and the directory is not watched (its
    /// open datasets are still compared at every `--rescan`).
    fn touch(&self, rel: &str, tree: bool) {
        let Datasets::Archive(lazy) = &self.datasets else {
            return;
        };
        if let Some(tx) = &*self.touched.lock() {
            let dir = lazy.archive.source().join(rel);
            if tx.try_send(watch::Seen::Touched { dir, tree }).is_err() {
                log::debug!("not watching /{rel}: the refresh thread's queue is full");
            }
        }
    }

    /// Report `cache` in the stats file and drop its stale chunks when a
    /// refresh replaces an array.
    pub fn with_cache(mut self, cache: Arc<ChunkCache>) -> SlabFs {
        // Readahead decodes into the cache: keep its window a small part
        // of the budget so prefetched chunks live until they are read.
        let window = (cache.budget() as u64 / 8).min(DEFAULT_MAX_WINDOW);
        self.readahead = Readahead::new(window);
        self.cache = Some(cache);
        self
    }

    /// Answer reads that may wait on the network on up to `threads`
    /// threads of their own ([`SlabFs::serve_read`]); 0 = never (every
    /// read on the caller's thread).
    pub fn with_waiting_threads(mut self, threads: usize) -> SlabFs {
        self.waiting = (threads > 0).then(|| waiting::Waiting::new(threads));
        self
    }

    /// Read URLs through `remote` (the refresh), and show its counters in
    /// `.slabfs/stats`.
    pub fn with_remote(mut self, remote: crate::storage::remote::Remote) -> SlabFs {
        self.stats.set_remote(remote.clone());
        self.remote = Some(remote);
        self
    }

    /// The remote state the mount reads URLs through, if any.
    pub fn remote(&self) -> Option<&crate::storage::remote::Remote> {
        self.remote.as_ref()
    }

    /// [`SlabFs::remote`] as the formats see it.
    pub fn network(&self) -> Option<Arc<dyn crate::storage::Network>> {
        self.remote
            .clone()
            .map(|r| Arc::new(r) as Arc<dyn crate::storage::Network>)
    }

    pub fn cache(&self) -> Option<&Arc<ChunkCache>> {
        self.cache.as_ref()
    }

    pub fn config(&self) -> &FsConfig {
        &self.config
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The recent failures (`.slabfs/errors`).
    pub fn failures(&self) -> &Failures {
        &self.failures
    }

    /// Whether the mount is an archive whose datasets open on demand.
    pub fn is_archive(&self) -> bool {
        matches!(self.datasets, Datasets::Archive(_))
    }

    /// The trees open now: the whole mount's, or the archive's open
    /// datasets'.
    fn trees(&self) -> Vec<Arc<Tree>> {
        match &self.datasets {
            Datasets::Whole(t) => vec![t.read().clone()],
            Datasets::Archive(lazy) => lazy.opened().into_iter().map(|(_, t, _)| t).collect(),
        }
    }

    /// Count a failed request by its errno.
    fn counted<T>(&self, r: FsResult<T>) -> FsResult<T> {
        if let Err(e) = &r {
            self.stats.record_error(e.errno());
        }
        r
    }

    /// The path of `ino` for logs (`?` for an unknown inode).
    pub fn path(&self, ino: u64) -> String {
        if ino == ROOT_INO {
            return String::new();
        }
        self.inodes
            .get(ino)
            .map(|k| k.path.to_string())
            .unwrap_or_else(|| "?".into())
    }

    /// Number of nodes of the open trees (the control files and, in an
    /// archive, its directories not counted).
    pub fn len(&self) -> usize {
        self.trees().iter().map(|t| t.nodes.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every path of the open trees (and the control files) with its
    /// inode number, sorted by path (root first).
    pub fn paths(&self) -> Vec<(u64, String)> {
        let mut out: Vec<(u64, String)> = Vec::new();
        for t in self.trees() {
            for (p, kind) in t.paths() {
                out.push((self.inodes.peek(p, kind), p.to_string()));
            }
        }
        if self.has_control() {
            let dir = (CONTROL_DIR.to_string(), Kind::Directory);
            let stats = (format!("{CONTROL_DIR}/{STATS_FILE}"), Kind::File);
            let errors = (format!("{CONTROL_DIR}/{ERRORS_FILE}"), Kind::File);
            for (p, kind) in [dir, errors, stats] {
                out.push((self.inodes.peek(&p, kind), p));
            }
        }
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }

    /// The tree of a mount of one dataset (empty for an archive).
    #[cfg(test)]
    fn whole_tree(&self) -> Arc<Tree> {
        match &self.datasets {
            Datasets::Whole(t) => t.read().clone(),
            Datasets::Archive(_) => Arc::new(Tree::build(
                "",
                Default::default(),
                Default::default(),
                &self.config,
                None,
                self.mounted,
            )),
        }
    }

    /// Forget an archive's listings kept for a moment (a bucket's): a
    /// refresh saw the source change.
    pub fn forget_listings(&self) {
        if let Datasets::Archive(lazy) = &self.datasets {
            lazy.archive.forget_listings();
        }
    }

    /// The mount paths of an archive's datasets open now.
    pub fn open_units(&self) -> Vec<String> {
        match &self.datasets {
            Datasets::Whole(_) => Vec::new(),
            Datasets::Archive(lazy) => lazy.opened().into_iter().map(|(u, _, _)| u).collect(),
        }
    }

    /// The open datasets whose change only a re-open tells
    /// ([`crate::formats::entry::Stamp::Reopen`]: references and
    /// aggregations, which read files elsewhere).
    pub fn open_reopened_units(&self) -> Vec<String> {
        match &self.datasets {
            Datasets::Whole(_) => Vec::new(),
            Datasets::Archive(lazy) => lazy
                .opened()
                .into_iter()
                .map(|(u, _, _)| u)
                .filter(|u| {
                    lazy.archive
                        .find(u)
                        .is_some_and(|f| f.stamp() == crate::formats::entry::Stamp::Reopen)
                })
                .collect(),
        }
    }

    /// Whether the root shows `.slabfs`: unless the mount's one dataset
    /// has a node of that name (an archive's listing hides dot names).
    fn has_control(&self) -> bool {
        match &self.datasets {
            Datasets::Whole(t) => !t.read().nodes.contains_key(CONTROL_DIR),
            Datasets::Archive(_) => true,
        }
    }

    /// Whether the archive's dataset at `unit` is open.
    pub fn is_open(&self, unit: &str) -> bool {
        match &self.datasets {
            Datasets::Whole(_) => true,
            Datasets::Archive(lazy) => lazy.peek(unit).is_some(),
        }
    }

    /// The tree of the dataset at `unit`, opened if needed.
    fn unit_tree(&self, unit: &str) -> FsResult<Arc<Tree>> {
        match &self.datasets {
            Datasets::Whole(t) => Ok(t.read().clone()),
            Datasets::Archive(lazy) => self
                .open_unit(lazy, unit, None)?
                .ok_or_else(|| FsError::NotFound(unit.to_string())),
        }
    }

    /// What `ino` stands for. `open`: a dataset of an archive is opened
    /// for its root too (else its root resolves to [`Place::Closed`]).
    fn resolve(&self, ino: u64, open: bool) -> FsResult<Place> {
        if ino == ROOT_INO {
            return Ok(match &self.datasets {
                Datasets::Whole(t) => Place::Node {
                    tree: t.read().clone(),
                    path: Arc::from(""),
                },
                Datasets::Archive(_) => Place::Listed(Arc::from("")),
            });
        }
        let known = self.inodes.get(ino).ok_or(FsError::NoInode(ino))?;
        let Some(unit) = &known.unit else {
            return Ok(match (known.path.as_ref(), known.kind) {
                (CONTROL_DIR, Kind::Directory) => Place::ControlDir,
                (p, Kind::File) if p == format!("{CONTROL_DIR}/{STATS_FILE}") => Place::StatsFile,
                (p, Kind::File) if p == format!("{CONTROL_DIR}/{ERRORS_FILE}") => Place::ErrorsFile,
                _ => Place::Listed(known.path),
            });
        };
        if let Datasets::Archive(lazy) = &self.datasets
            && !open
            && known.kind == Kind::Directory
            && known.path == *unit
            && lazy.get(unit).is_none()
        {
            return Ok(Place::Closed(known.path));
        }
        let tree = match self.unit_tree(unit) {
            Ok(tree) => tree,
            // The sidecar of a dataset that fails to open: its failure.
            Err(FsError::Dataset { source, .. })
                if known.kind == Kind::File && self.is_failed_sidecar(unit, &known.path) =>
            {
                return Ok(Place::Failed {
                    failure: self.open_failure(unit, &source),
                    path: known.path,
                });
            }
            Err(e) => return Err(e),
        };
        match tree.node(&known.path) {
            Some(n) if n.kind() == known.kind => Ok(Place::Node {
                tree,
                path: known.path,
            }),
            // Gone since the kernel looked it up (a refresh; a dataset
            // that re-opened without it).
            _ => Err(FsError::NotFound(known.path.to_string())),
        }
    }

    /// The attributes of a directory without a tree node (an archive's
    /// directory, a dataset not opened, `.slabfs`). Its link count is 1,
    /// "unknown" (as btrfs and others report), since counting its
    /// subdirectories would mean listing or opening it.
    fn dir_attr(&self, ino: u64) -> Attr {
        Attr {
            ino,
            kind: Kind::Directory,
            size: 0,
            blocks: 0,
            perm: 0o555,
            nlink: 1,
            uid: self.config.uid,
            gid: self.config.gid,
            mtime: self.mounted,
            blksize: BLKSIZE,
        }
    }

    /// The modification time on disk of the archive's entry `rel` (the
    /// mount time when it cannot be read).
    fn disk_mtime(&self, rel: &str) -> SystemTime {
        match &self.datasets {
            Datasets::Archive(lazy) => lazy.archive.stamp(rel).map_or(self.mounted, |(m, _)| m),
            Datasets::Whole(_) => self.mounted,
        }
    }

    fn attr(&self, ino: u64, place: &Place) -> Attr {
        let node = match place {
            // `resolve` checked the node is in this very tree.
            Place::Node { tree, path } => tree.node(path).expect("resolved"),
            Place::StatsFile | Place::ErrorsFile | Place::Failed { .. } => {
                return Attr {
                    kind: Kind::File,
                    perm: 0o444,
                    ..self.dir_attr(ino)
                };
            }
            Place::ControlDir => {
                return Attr {
                    nlink: 2,
                    ..self.dir_attr(ino)
                };
            }
            Place::Listed(path) | Place::Closed(path) => {
                return Attr {
                    mtime: self.disk_mtime(path),
                    ..self.dir_attr(ino)
                };
            }
        };
        let size = node.size();
        let (perm, nlink) = match &node.content {
            Content::Dir(children) => {
                let mut subdirs = children
                    .iter()
                    .filter(|(_, kind)| *kind == Kind::Directory)
                    .count();
                if ino == ROOT_INO && self.has_control() {
                    subdirs += 1;
                }
                // "." and the entry in the parent, plus each subdir's "..".
                (0o555, 2 + subdirs as u32)
            }
            _ => (0o444, 1),
        };
        Attr {
            ino,
            kind: node.kind(),
            size,
            blocks: size.div_ceil(512),
            perm,
            nlink,
            uid: self.config.uid,
            gid: self.config.gid,
            mtime: node.mtime,
            blksize: BLKSIZE,
        }
    }

    pub fn getattr(&self, ino: u64) -> FsResult<Attr> {
        let r = self.resolve(ino, false).map(|p| self.attr(ino, &p));
        self.counted(r)
    }

    /// Forget `n` of the kernel's references to `ino` (its `forget`).
    pub fn forget(&self, ino: u64, n: u64) {
        self.inodes.forget(ino, n);
    }

    pub fn lookup(&self, parent: u64, name: &OsStr) -> FsResult<Attr> {
        let r = (|| {
            let dir = match self.resolve(parent, true) {
                Ok(dir) => dir,
                // In a dataset that fails to open, its sidecar is there,
                // saying why.
                Err(e) => {
                    let dir = self.path(parent);
                    let path = child_path(&dir, &name.to_string_lossy());
                    return self.failed_sidecar_attr(&dir, &path, e);
                }
            };
            let dir_path = place_path(&dir);
            let not_found = || FsError::NotFound(child_path(&dir_path, &name.to_string_lossy()));
            // Every name in the tree is UTF-8: anything else is absent.
            let name = name.to_str().ok_or_else(not_found)?;
            if name == CONTROL_DIR && parent == ROOT_INO && self.has_control() {
                let ino = self.inodes.remember(CONTROL_DIR, Kind::Directory, None);
                return Ok(self.attr(ino, &Place::ControlDir));
            }
            match &dir {
                Place::Node { tree, path } => {
                    let children = tree
                        .children(path)
                        .ok_or_else(|| FsError::NotDir(path.to_string()))?;
                    let i = children
                        .binary_search_by(|(n, _)| n.as_str().cmp(name))
                        .map_err(|_| not_found())?;
                    let child: Arc<str> = Arc::from(child_path(path, name));
                    let kind = children[i].1;
                    let ino = self.inodes.remember(&child, kind, Some(&tree.root));
                    let place = Place::Node {
                        tree: tree.clone(),
                        path: child,
                    };
                    Ok(self.attr(ino, &place))
                }
                Place::Listed(dir) => self.lookup_listed(dir, name).ok_or_else(not_found)?,
                Place::ControlDir => {
                    let place = match name {
                        STATS_FILE => Place::StatsFile,
                        ERRORS_FILE => Place::ErrorsFile,
                        _ => return Err(not_found()),
                    };
                    let ino = self.inodes.remember(&place_path(&place), Kind::File, None);
                    Ok(self.attr(ino, &place))
                }
                Place::StatsFile | Place::ErrorsFile | Place::Failed { .. } => {
                    Err(FsError::NotDir(dir_path.clone()))
                }
                Place::Closed(_) => unreachable!("resolved with open"),
            }
        })();
        self.counted(r)
    }

    /// The entries of directory `place` (without `.` and `..`).
    fn listing(&self, place: &Place) -> FsResult<Listing> {
        let mut out: Vec<Listed> = Vec::new();
        match place {
            Place::Node { tree, path } => {
                let children = tree
                    .children(path)
                    .ok_or_else(|| FsError::NotDir(path.to_string()))?;
                let unit: Arc<str> = Arc::from(tree.root.as_str());
                out.extend(
                    children
                        .iter()
                        .map(|(n, k)| (n.clone(), *k, Some(unit.clone()))),
                );
                if path.is_empty() && self.has_control() {
                    push_sorted(&mut out, CONTROL_DIR, Kind::Directory);
                }
            }
            Place::Listed(dir) => {
                let Datasets::Archive(lazy) = &self.datasets else {
                    unreachable!("listed only in an archive")
                };
                out = self.archive_listing(lazy, dir)?;
            }
            Place::ControlDir => {
                for name in [ERRORS_FILE, STATS_FILE] {
                    out.push((name.to_string(), Kind::File, None));
                }
            }
            Place::StatsFile | Place::ErrorsFile | Place::Failed { .. } => {
                return Err(FsError::NotDir(place_path(place)));
            }
            Place::Closed(_) => unreachable!("resolved with open"),
        }
        Ok(Arc::new(out))
    }

    /// List directory `ino` (opened as `fh`: its listing from `opendir`;
    /// 0: listed now) from position `offset`: 0 is ".", 1 "..", then the
    /// children by name. Each entry carries the offset of the next, as
    /// the kernel expects.
    pub fn readdir(&self, ino: u64, fh: u64, offset: u64, sink: &mut dyn DirSink) -> FsResult<()> {
        let r = (|| {
            let held = self.listings.lock().get(&fh).cloned();
            let (list, path) = match held {
                Some(list) => (list, self.path(ino)),
                None => {
                    let place = self.resolve(ino, true)?;
                    (self.listing(&place)?, place_path(&place))
                }
            };
            let parent = if ino == ROOT_INO {
                ROOT_INO
            } else {
                self.inodes.peek(parent_of(&path), Kind::Directory)
            };
            let dots = [
                (".".to_string(), ino, Kind::Directory),
                ("..".to_string(), parent, Kind::Directory),
            ];
            let entries = dots.into_iter().chain(list.iter().map(|(n, k, _)| {
                let p = child_path(&path, n);
                (n.clone(), self.inodes.peek(&p, *k), *k)
            }));
            for (pos, (name, child, kind)) in entries.enumerate().skip(offset as usize) {
                if sink.add(child, pos as u64 + 1, kind, &name) {
                    break;
                }
            }
            Ok(())
        })();
        self.counted(r)
    }

    /// An `opendir` of `ino`: its handle, and whether the kernel may keep
    /// the listing (a dataset's, which only a refresh changes and then
    /// invalidates) or must ask again (an archive's directory, listed
    /// from the disk, which changes without a word to the kernel).
    pub fn opendir(&self, ino: u64) -> FsResult<OpenedDir> {
        let r = (|| {
            let place = self.resolve(ino, true)?;
            match &place {
                Place::Node { tree, path } => match tree.children(path) {
                    Some(_) => {
                        self.inodes.mark_cached(ino);
                        Ok(OpenedDir { fh: 0, cache: true })
                    }
                    None => Err(FsError::NotDir(path.to_string())),
                },
                Place::ControlDir => Ok(OpenedDir { fh: 0, cache: true }),
                Place::Listed(_) => {
                    let list = self.listing(&place)?;
                    let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                    self.listings.lock().insert(fh, list);
                    Ok(OpenedDir { fh, cache: false })
                }
                Place::StatsFile | Place::ErrorsFile | Place::Failed { .. } => {
                    Err(FsError::NotDir(place_path(&place)))
                }
                Place::Closed(_) => unreachable!("resolved with open"),
            }
        })();
        self.counted(r)
    }

    /// The kernel closed directory handle `fh`.
    pub fn releasedir(&self, fh: u64) {
        if fh != 0 {
            self.listings.lock().remove(&fh);
        }
    }

    /// An `open(2)` of file `ino` with `flags`: anything but a read-only
    /// open is EROFS. Opening a generated file (the stats, the failures, a
    /// failed dataset's sidecar) takes its snapshot.
    pub fn open(&self, ino: u64, flags: i32) -> FsResult<Opened> {
        let r = (|| {
            let place = self.resolve(ino, true)?;
            let is_dir = match &place {
                Place::Node { tree, path } => {
                    tree.node(path).expect("resolved").kind() == Kind::Directory
                }
                p => !p.generated(),
            };
            if is_dir {
                return Err(FsError::IsDir(place_path(&place)));
            }
            if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
                return Err(FsError::ReadOnly {
                    op: "open for writing",
                });
            }
            if let Some(doc) = self.generated_doc(&place) {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.snapshots.lock().insert(fh, doc);
                return Ok(Opened {
                    fh,
                    direct_io: true,
                });
            }
            // Its pages may be kept by the kernel from now on.
            self.inodes.mark_cached(ino);
            // Each open is its own readahead stream.
            Ok(Opened {
                fh: self.next_fh.fetch_add(1, Ordering::Relaxed),
                direct_io: false,
            })
        })();
        self.counted(r)
    }

    /// The stats document ([`stats`]), with the archive's datasets.
    pub fn stats_json(&self) -> serde_json::Value {
        let mut doc = self.stats.to_json(self.cache.as_deref());
        if let Datasets::Archive(lazy) = &self.datasets {
            let s = lazy.stats();
            doc["datasets"] = serde_json::json!({
                "open": s.open,
                "max_open": s.max_open,
                "opens": s.opens,
                "failures": s.failures,
                "evictions": s.evictions,
            });
        }
        doc["not_shown"] = serde_json::json!(self.not_shown());
        doc["inodes"] = serde_json::json!(self.inodes.len());
        doc
    }

    /// The arrays, files and datasets that could not be loaded at their
    /// dataset's last load (`not_shown` in [`stats`]).
    fn not_shown(&self) -> u64 {
        match &self.datasets {
            Datasets::Archive(lazy) => lazy.stats().not_shown,
            Datasets::Whole(_) => self.stats.not_shown(),
        }
    }

    fn stats_doc(&self) -> Arc<[u8]> {
        let mut out =
            serde_json::to_vec_pretty(&self.stats_json()).expect("stats always serialize");
        out.push(b'\n');
        out.into()
    }

    /// The document of a generated file, made now (`None`: `place` is
    /// not one).
    fn generated_doc(&self, place: &Place) -> Option<Arc<[u8]>> {
        Some(match place {
            Place::StatsFile => self.stats_doc(),
            Place::ErrorsFile => self.failures.render().into(),
            Place::Failed { failure, .. } => failures::failed_sidecar(failure).into(),
            _ => return None,
        })
    }

    /// Whether `path` is the sidecar of the dataset at `unit`: `UNIT/.json`
    /// for a dataset that is a directory, `UNIT.json` for one that is a
    /// file (a single-array store), with the json view.
    fn is_failed_sidecar(&self, unit: &str, path: &str) -> bool {
        self.config.views.json
            && (path == child_path(unit, sidecar::DIRECTORY_SIDECAR)
                || path.strip_suffix(".json") == Some(unit))
    }

    /// The failure of the dataset of an archive at `unit` that `source`
    /// (its open's error) reports, as `.slabfs/errors` has it (the open
    /// recorded it).
    fn open_failure(&self, unit: &str, source: &crate::error::Error) -> Failure {
        let path = failures::mount_path(unit);
        let reason = failures::reason(source);
        let kind = failures::Kind::Open;
        self.failures.find(kind, &path, &reason).unwrap_or_else(|| {
            self.failures
                .record(kind, &path, &reason, SystemTime::now())
        })
    }

    /// The attributes of the sidecar `path` of the dataset at `unit` that
    /// failed to open with `err` (a generated file, size 0), or `err`
    /// when `path` is no such sidecar.
    fn failed_sidecar_attr(&self, unit: &str, path: &str, err: FsError) -> FsResult<Attr> {
        match &err {
            FsError::Dataset { path: p, source }
                if p == unit && self.is_failed_sidecar(unit, path) =>
            {
                let failure = self.open_failure(unit, source);
                let ino = self.inodes.remember(path, Kind::File, Some(unit));
                let place = Place::Failed {
                    path: Arc::from(path),
                    failure,
                };
                Ok(self.attr(ino, &place))
            }
            _ => Err(err),
        }
    }

    /// The kernel closed handle `fh` (its last reference).
    pub fn release(&self, _ino: u64, fh: u64) {
        if fh != 0 {
            self.snapshots.lock().remove(&fh);
            self.readahead.forget(fh);
        }
    }

    /// Up to `size` bytes of file `ino` (opened as `fh`) from `offset`:
    /// fewer only at EOF, none at or past it.
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        self.read_data(ino, fh, offset, size).map(|d| d.to_vec())
    }

    /// Run `serve`, which reads `[offset, offset + size)` of `ino` and
    /// answers the request: here, on the caller's thread, when the read
    /// waits on nothing (a directory, sidecar or stats file, an array
    /// range whose chunks are all decoded in the cache:
    /// [`ArraySource::cached`]), else on a thread of the waiting pool
    /// ([`with_waiting_threads`](Self::with_waiting_threads)), returning at
    /// once. The FUSE adapter serves every read this way, so that its few
    /// threads never wait on a remote fetch, a stalled server or a retry's
    /// back-off while other requests queue behind them ([`waiting`]).
    /// Without a pool, always here.
    ///
    /// A chunk evicted between the check and the read is fetched on the
    /// caller's thread: the check reads the cache without a lock held
    /// across the read, and holding one would serialise every read.
    pub fn serve_read(
        self: &Arc<Self>,
        ino: u64,
        offset: u64,
        size: u32,
        serve: impl FnOnce() + Send + 'static,
    ) {
        match &self.waiting {
            Some(pool) if self.read_waits(ino, offset, size) => {
                self.stats.read_deferred();
                let fs = self.clone();
                pool.run(move || {
                    /// Counts the read answered however `serve` ends.
                    struct Done(Arc<SlabFs>);
                    impl Drop for Done {
                        fn drop(&mut self) {
                            self.0.stats.deferred_read_done();
                        }
                    }
                    let _done = Done(fs);
                    serve()
                });
            }
            _ => serve(),
        }
    }

    /// Whether reading `[offset, offset + size)` of `ino` may wait: some
    /// of an array's bytes whose chunks are not all decoded in the cache
    /// (or a dataset to open again).
    fn read_waits(&self, ino: u64, offset: u64, size: u32) -> bool {
        let Ok(Place::Node { tree, path }) = self.resolve(ino, true) else {
            return false;
        };
        let Some(Node {
            content: Content::Array { array, header },
            ..
        }) = tree.node(&path)
        else {
            return false;
        };
        let hlen = header.len() as u64;
        let start = offset.max(hlen) - hlen;
        let end = offset.saturating_add(size as u64).saturating_sub(hlen);
        end > start && !cached_at(array.as_ref(), start, end - start)
    }

    /// [`read`](Self::read), with the bytes lent from a cached chunk when
    /// they lie in one ([`ReadData::Shared`]): what the FUSE adapter sends.
    pub fn read_data(&self, ino: u64, fh: u64, offset: u64, size: u32) -> FsResult<ReadData> {
        let started = Instant::now();
        let r = (|| {
            let place = self.resolve(ino, true)?;
            let (tree, path) = match &place {
                Place::Node { tree, path } => (tree, path),
                p if p.generated() => {
                    let snapshot = self.snapshots.lock().get(&fh).cloned();
                    let doc = snapshot
                        .or_else(|| self.generated_doc(p))
                        .expect("generated");
                    return Ok(ReadData::Owned(slice_at(&doc, offset, size)));
                }
                _ => return Err(FsError::IsDir(place_path(&place))),
            };
            match &tree.node(path).expect("resolved").content {
                Content::Dir(_) => Err(FsError::IsDir(path.to_string())),
                Content::Bytes(b) => Ok(ReadData::Owned(slice_at(b, offset, size))),
                Content::Array { array, header } => {
                    // Start decoding what a sequential reader asks next
                    // before serving this read, so the two overlap.
                    let hlen = header.len() as u64;
                    let data_start = offset.max(hlen) - hlen;
                    let data_end = offset.saturating_add(size as u64).saturating_sub(hlen);
                    if data_end > data_start {
                        self.readahead
                            .on_read(fh, array, data_start, data_end - data_start);
                    }
                    if offset >= hlen
                        && let Some(r) = read_shared_at(
                            array.as_ref(),
                            offset - hlen,
                            size as usize,
                            self.config.byte_order,
                        )
                    {
                        return r
                            .map(ReadData::Shared)
                            .map_err(|e| FsError::read(path, offset, size, e));
                    }
                    self.read_array(path, array.as_ref(), header, offset, size)
                        .map(ReadData::Owned)
                }
            }
        })();
        match &r {
            Ok(data) => self.stats.record_read(data.len(), started.elapsed()),
            Err(e) => {
                self.stats.record_failed_read(started.elapsed());
                if let FsError::Read { path, source, .. } = e {
                    let (path, reason) = (failures::mount_path(path), failures::reason(source));
                    let now = SystemTime::now();
                    self.failures
                        .record(failures::Kind::Read, &path, &reason, now);
                }
            }
        }
        self.counted(r)
    }

    /// Bytes `[offset, offset+size)` of `header` followed by the flat file
    /// of `array`, clamped at the end.
    fn read_array(
        &self,
        path: &str,
        array: &dyn ArraySource,
        header: &[u8],
        offset: u64,
        size: u32,
    ) -> FsResult<Vec<u8>> {
        let hlen = header.len() as u64;
        let total = hlen.saturating_add(array.meta().nbytes());
        let end = offset.saturating_add(size as u64).min(total);
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; (end - offset) as usize];
        let mut filled = 0;
        if offset < hlen {
            filled = (hlen.min(end) - offset) as usize;
            buf[..filled].copy_from_slice(&header[offset as usize..][..filled]);
        }
        if filled < buf.len() {
            let data_offset = offset + filled as u64 - hlen;
            let n = read_at(
                array,
                data_offset,
                &mut buf[filled..],
                self.config.byte_order,
            )
            .map_err(|e| FsError::read(path, offset, size, e))?;
            buf.truncate(filled + n);
        }
        Ok(buf)
    }

    /// The xattrs of `ino`. A dataset not opened has only `user.slabfs.*`
    /// ones, so a probe for another name (`ls -l` asks every file for its
    /// ACL and SELinux label) opens nothing.
    fn xattrs(&self, ino: u64, name: Option<&OsStr>) -> FsResult<(String, Xattrs)> {
        let open = name.is_none_or(|n| n.as_encoded_bytes().starts_with(b"user.slabfs."));
        let place = match self.resolve(ino, open) {
            Ok(place) => place,
            // A dataset that fails to open carries why, on its directory.
            Err(FsError::Dataset { path, source }) if path == self.path(ino) => {
                let reason = self.open_failure(&path, &source).reason;
                let xattrs: Xattrs = Arc::from(vec![(failures::XATTR_ERROR, reason.into_bytes())]);
                return Ok((path, xattrs));
            }
            Err(e) => return Err(e),
        };
        let xattrs = match &place {
            Place::Node { tree, path } => tree.node(path).expect("resolved").xattrs.clone(),
            _ => Arc::from(Vec::new()),
        };
        Ok((place_path(&place), xattrs))
    }

    pub fn getxattr(&self, ino: u64, name: &OsStr, size: u32) -> FsResult<XattrReply> {
        let r = self.xattrs(ino, Some(name)).and_then(|(path, xattrs)| {
            let value = xattrs
                .iter()
                .find(|(n, _)| OsStr::new(n) == name)
                .map(|(_, v)| v)
                .ok_or_else(|| FsError::NoXattr {
                    path: path.clone(),
                    name: name.to_string_lossy().into_owned(),
                })?;
            fit(&path, value.clone(), size)
        });
        self.counted(r)
    }

    /// The NUL-terminated names of the xattrs of `ino`.
    pub fn listxattr(&self, ino: u64, size: u32) -> FsResult<XattrReply> {
        let r = self.xattrs(ino, None).and_then(|(path, xattrs)| {
            let mut list = Vec::new();
            for (n, _) in xattrs.iter() {
                list.extend_from_slice(n.as_bytes());
                list.push(0);
            }
            fit(&path, list, size)
        });
        self.counted(r)
    }

    /// What `statfs` shows: the open trees' bytes and nodes (an archive's
    /// datasets not opened are not counted: that would mean opening them).
    pub fn statfs(&self) -> Statfs {
        const BSIZE: u32 = 4096;
        let trees = self.trees();
        let bytes = trees
            .iter()
            .map(|t| t.total_bytes)
            .fold(0u64, u64::saturating_add);
        let nodes: usize = trees.iter().map(|t| t.nodes.len()).sum();
        Statfs {
            blocks: bytes.div_ceil(BSIZE as u64),
            files: nodes as u64 + 3 * u64::from(self.has_control()),
            bsize: BSIZE,
            namelen: NAME_MAX,
        }
    }
}

/// The mount's series for the metrics endpoint: its [`Stats`] (FUSE
/// requests, bytes served, refresh) and what [`SlabFs::stats_json`] adds
/// (datasets, what is not shown, inodes), from the same counters. The
/// chunk cache and the remote stores are collectors of their own
/// (registered beside this one by `mount::collectors`).
impl crate::metrics::Collect for SlabFs {
    fn collect(&self, out: &mut crate::metrics::Out<'_>) -> std::fmt::Result {
        self.stats.collect(out)?;
        out.gauge(
            "slabfs_not_shown",
            "Arrays, files and datasets that could not be loaded at their dataset's last \
             load (each logged as \"not shown\").",
            self.not_shown() as f64,
        )?;
        out.gauge(
            "slabfs_inodes",
            "Nodes the kernel holds (looked up and not forgotten).",
            self.inodes.len() as f64,
        )?;
        if let Datasets::Archive(lazy) = &self.datasets {
            let s = lazy.stats();
            out.gauge(
                "slabfs_datasets_open",
                "Datasets of the directory SOURCE open now.",
                s.open as f64,
            )?;
            out.gauge(
                "slabfs_datasets_open_max",
                "Most datasets kept open (--max-open-datasets).",
                s.max_open as f64,
            )?;
            out.counter(
                "slabfs_dataset_opens",
                "Datasets opened (on first use, or again after being closed).",
                s.opens,
            )?;
            out.counter(
                "slabfs_dataset_open_failures",
                "Opens of a dataset that failed (its requests got EIO).",
                s.failures,
            )?;
            out.counter(
                "slabfs_dataset_evictions",
                "Datasets closed to make room for others.",
                s.evictions,
            )?;
        }
        Ok(())
    }
}

/// What `ds` skipped, as failure reasons ([`failures::reason`]).
fn skipped_reasons(ds: &Dataset) -> Vec<String> {
    ds.skipped.iter().map(failures::reason).collect()
}

/// Add `name` (of no dataset) to the sorted listing `out`.
fn push_sorted(out: &mut Vec<(String, Kind, Option<Arc<str>>)>, name: &str, kind: Kind) {
    let at = out.partition_point(|(n, _, _)| n.as_str() < name);
    out.insert(at, (name.to_string(), kind, None));
}

/// `bytes[offset .. offset+size]`, clamped at the end.
fn slice_at(bytes: &[u8], offset: u64, size: u32) -> Vec<u8> {
    let len = bytes.len() as u64;
    let start = offset.min(len) as usize;
    let end = offset.saturating_add(size as u64).min(len) as usize;
    bytes[start..end].to_vec()
}

/// getxattr/listxattr size protocol: 0 asks for the size; a buffer too
/// small is ERANGE.
fn fit(path: &str, value: Vec<u8>, size: u32) -> FsResult<XattrReply> {
    if size == 0 {
        Ok(XattrReply::Size(value.len() as u32))
    } else if value.len() > size as usize {
        Err(FsError::XattrRange {
            path: path.to_string(),
            len: value.len(),
            size,
        })
    } else {
        Ok(XattrReply::Data(value))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::dtype::DataType;
    use crate::dtype::Endian;
    use crate::engine::array::ArrayMeta;
    use crate::engine::index::Region;
    use crate::error::{Error, Result};
    use crate::formats::dataset::Directory;

    /// A 1-D uint16 array whose element i is i (native order); reads of
    /// elements at or past `bad_from` fail like a corrupt chunk.
    struct Ramp {
        meta: ArrayMeta,
        bad_from: u64,
    }

    impl ArraySource for Ramp {
        fn meta(&self) -> &ArrayMeta {
            &self.meta
        }
        fn read_region(&self, r: &Region, out: &mut [u8]) -> Result<()> {
            let (start, count) = (r.start[0], r.count[0]);
            if start + count > self.bad_from {
                return Err(Error::metadata("ramp/c/9", "corrupt chunk"));
            }
            for (k, o) in out.chunks_exact_mut(2).enumerate() {
                o.copy_from_slice(&((start + k as u64) as u16).to_ne_bytes());
            }
            Ok(())
        }
    }

    fn ramp(n: u64, bad_from: u64) -> Arc<dyn ArraySource> {
        let meta = ArrayMeta::new("ramp", vec![n], DataType::UInt16, vec![0, 0]).unwrap();
        Arc::new(Ramp { meta, bad_from })
    }

    /// The little-endian bytes of a ramp of `n` elements.
    fn ramp_bytes(n: u64) -> Vec<u8> {
        (0..n).flat_map(|i| (i as u16).to_le_bytes()).collect()
    }

    fn entry(path: &str, array: Arc<dyn ArraySource>) -> Entry {
        Entry {
            path: path.into(),
            array,
        }
    }

    pub(crate) fn config(views: Views) -> FsConfig {
        FsConfig {
            byte_order: Endian::Little,
            uid: 1234,
            gid: 5678,
            views,
            track_changes: true,
        }
    }

    fn fs(entries: &[Entry]) -> SlabFs {
        SlabFs::new(entries, config(Views::default()))
    }

    impl DirSink for Vec<(u64, u64, Kind, String)> {
        fn add(&mut self, ino: u64, next: u64, kind: Kind, name: &str) -> bool {
            self.push((ino, next, kind, name.to_string()));
            false
        }
    }

    /// Takes at most `cap` entries, like a small kernel buffer.
    struct Small(Vec<String>, usize);
    impl DirSink for Small {
        fn add(&mut self, _: u64, _: u64, _: Kind, name: &str) -> bool {
            if self.0.len() == self.1 {
                return true;
            }
            self.0.push(name.to_string());
            false
        }
    }

    pub(crate) fn lookup_path(fs: &SlabFs, path: &str) -> FsResult<Attr> {
        let mut attr = fs.getattr(ROOT_INO)?;
        for c in path.split('/') {
            attr = fs.lookup(attr.ino, OsStr::new(c))?;
        }
        Ok(attr)
    }

    /// The names in directory `path` ("" for the root), without . and ..
    pub(crate) fn names(fs: &SlabFs, path: &str) -> Vec<String> {
        let ino = if path.is_empty() {
            ROOT_INO
        } else {
            lookup_path(fs, path).unwrap().ino
        };
        let mut all: Vec<(u64, u64, Kind, String)> = Vec::new();
        fs.readdir(ino, 0, 2, &mut all).unwrap();
        all.into_iter().map(|e| e.3).collect()
    }

    /// The whole content of file `path`.
    pub(crate) fn read_all(fs: &SlabFs, path: &str) -> Vec<u8> {
        let ino = lookup_path(fs, path).unwrap().ino;
        let opened = fs.open(ino, libc::O_RDONLY).unwrap();
        let data = fs.read(ino, opened.fh, 0, u32::MAX).unwrap();
        fs.release(ino, opened.fh);
        data
    }

    #[test]
    fn layout_inodes_and_attrs() {
        let fs = fs(&[
            entry("runs/b.zarr/temp", ramp(10, u64::MAX)),
            entry("runs/a.zarr", ramp(3, u64::MAX)),
            entry("top", ramp(1, u64::MAX)),
        ]);
        let paths = fs.paths();
        let paths: Vec<(u64, &str)> = paths.iter().map(|(i, p)| (*i, p.as_str())).collect();
        // Every path, sorted; each number the hash of its path and kind.
        let dir = |p: &'static str| (inodes::ino_of(p, Kind::Directory), p);
        let file = |p: &'static str| (inodes::ino_of(p, Kind::File), p);
        assert_eq!(
            paths,
            vec![
                (1, ""),
                dir(".slabfs"),
                file(".slabfs/errors"),
                file(".slabfs/stats"),
                dir("runs"),
                file("runs/a.zarr"),
                file("runs/a.zarr.json"),
                dir("runs/b.zarr"),
                file("runs/b.zarr/temp"),
                file("runs/b.zarr/temp.json"),
                file("top"),
                file("top.json"),
            ]
        );
        let root = fs.getattr(ROOT_INO).unwrap();
        assert_eq!(
            (root.kind, root.perm, root.nlink, root.uid, root.gid),
            (Kind::Directory, 0o555, 4, 1234, 5678)
        );
        let temp = lookup_path(&fs, "runs/b.zarr/temp").unwrap();
        assert_eq!(
            (
                temp.ino,
                temp.kind,
                temp.size,
                temp.blocks,
                temp.perm,
                temp.nlink
            ),
            (file("runs/b.zarr/temp").0, Kind::File, 20, 1, 0o444, 1)
        );
        let runs = lookup_path(&fs, "runs").unwrap().ino;
        assert_eq!(fs.getattr(runs).unwrap().nlink, 3); // runs: a.zarr is a file
        assert!(matches!(
            lookup_path(&fs, "runs/nope"),
            Err(FsError::NotFound(p)) if p == "runs/nope"
        ));
        let top = lookup_path(&fs, "top").unwrap().ino;
        assert!(matches!(
            fs.lookup(top, OsStr::new("x")),
            Err(FsError::NotDir(_))
        ));
        // A number the kernel was never given (or forgot) is no node.
        assert!(matches!(fs.getattr(99), Err(FsError::NoInode(99))));
        fs.forget(top, 1);
        assert!(matches!(fs.getattr(top), Err(FsError::NoInode(_))));
        assert_eq!(lookup_path(&fs, "top").unwrap().ino, top);

        // Same entries in another order: same inode numbers.
        let again = self::fs(&[
            entry("top", ramp(1, u64::MAX)),
            entry("runs/a.zarr", ramp(3, u64::MAX)),
            entry("runs/b.zarr/temp", ramp(10, u64::MAX)),
        ]);
        assert_eq!(fs.paths(), again.paths());

        let st = fs.statfs();
        let side: u64 = ["runs/a.zarr.json", "runs/b.zarr/temp.json", "top.json"]
            .iter()
            .map(|p| lookup_path(&fs, p).unwrap().size)
            .sum();
        assert_eq!(st.blocks, (20 + 6 + 2 + side).div_ceil(4096));
        assert_eq!(st.files, 12);
    }

    /// A ramp that says whether its reads are cached, and counts them.
    struct Flagged {
        ramp: Arc<dyn ArraySource>,
        cached: bool,
    }

    impl ArraySource for Flagged {
        fn meta(&self) -> &ArrayMeta {
            self.ramp.meta()
        }
        fn read_region(&self, r: &Region, out: &mut [u8]) -> Result<()> {
            self.ramp.read_region(r, out)
        }
        fn cached(&self, _: &Region) -> bool {
            self.cached
        }
    }

    /// With a waiting pool, a read whose chunks are not all cached is
    /// served on another thread and counted as deferred; a cached one, a
    /// sidecar, or any read without a pool is served on the caller's.
    #[test]
    fn reads_that_may_wait_are_served_on_waiting_threads() {
        let flagged = |cached| -> Arc<dyn ArraySource> {
            Arc::new(Flagged {
                ramp: ramp(100, u64::MAX),
                cached,
            })
        };
        let entries = [entry("far", flagged(false)), entry("near", flagged(true))];
        let serve = |fs: &Arc<SlabFs>, path: &str, offset| {
            let ino = lookup_path(fs, path).unwrap().ino;
            let (tx, rx) = std::sync::mpsc::channel();
            let core = fs.clone();
            fs.serve_read(ino, offset, 64, move || {
                let data = core.read_data(ino, 0, offset, 64).map(|d| d.to_vec());
                tx.send((std::thread::current().id(), data.unwrap()))
                    .unwrap();
            });
            let (thread, data) = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
            if !path.ends_with(".json") {
                assert_eq!(data, ramp_bytes(100)[offset as usize..][..64], "{path}");
            }
            thread != std::thread::current().id()
        };
        let pooled = Arc::new(fs(&entries).with_waiting_threads(2));
        assert!(serve(&pooled, "far", 0), "an uncached read is deferred");
        assert!(!serve(&pooled, "near", 0), "a cached read is served here");
        assert!(!serve(&pooled, "far.json", 0), "a sidecar is served here");
        // Past the end: nothing to wait for.
        let ino = lookup_path(&pooled, "far").unwrap().ino;
        assert!(!pooled.read_waits(ino, 200, 64));
        let doc = pooled.stats().to_json(None);
        assert_eq!(doc["reads"]["deferred"], 1, "{doc}");
        // The deferred read is counted answered once its job has ended,
        // just after it sent its answer.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while pooled.stats().to_json(None)["reads"]["waiting"] != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "a deferred read still waiting"
            );
            std::thread::yield_now();
        }
        let plain = Arc::new(fs(&entries));
        assert!(!serve(&plain, "far", 0), "no pool: served here");
    }

    #[test]
    fn readdir_offsets_resume() {
        let fs = fs(&[
            entry("d/x", ramp(1, u64::MAX)),
            entry("d/y", ramp(1, u64::MAX)),
        ]);
        let d = lookup_path(&fs, "d").unwrap().ino;
        let mut all: Vec<(u64, u64, Kind, String)> = Vec::new();
        fs.readdir(d, 0, 0, &mut all).unwrap();
        let names: Vec<&str> = all.iter().map(|e| e.3.as_str()).collect();
        assert_eq!(names, [".", "..", "x", "x.json", "y", "y.json"]);
        assert_eq!(all[1].0, ROOT_INO);
        assert_eq!(
            all.iter().map(|e| e.1).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        // Resume from each entry's offset, two at a time.
        let mut got = Vec::new();
        let mut offset = 0;
        loop {
            let mut small = Small(Vec::new(), 2);
            fs.readdir(d, 0, offset, &mut small).unwrap();
            if small.0.is_empty() {
                break;
            }
            offset += small.0.len() as u64;
            got.extend(small.0);
        }
        assert_eq!(got, names);
        assert!(matches!(
            fs.readdir(lookup_path(&fs, "d/x").unwrap().ino, 0, 0, &mut all),
            Err(FsError::NotDir(_))
        ));
    }

    #[test]
    fn conflicts_and_bad_paths_are_left_out() {
        let fs = fs(&[
            entry("a", ramp(1, u64::MAX)),
            entry("a/b", ramp(1, u64::MAX)),
            entry("c", ramp(1, u64::MAX)),
            entry("c.json", ramp(2, u64::MAX)),
            entry("../up", ramp(1, u64::MAX)),
            entry("x//y", ramp(1, u64::MAX)),
        ]);
        let paths: Vec<String> = fs.paths().into_iter().map(|(_, p)| p).collect();
        assert_eq!(
            paths,
            [
                "",
                ".slabfs",
                ".slabfs/errors",
                ".slabfs/stats",
                "a",
                "a/b",
                "a/b.json",
                "c",
                "c.json",
                "c.json.json"
            ]
        );
        // c.json is the array, not c's sidecar.
        assert_eq!(lookup_path(&fs, "c.json").unwrap().size, 4);
    }

    #[test]
    fn reads_clamp_and_report_errors() {
        let fs = fs(&[entry("r", ramp(100, 50))]);
        let r = lookup_path(&fs, "r").unwrap().ino;
        let head = fs.read(r, 0, 0, 8).unwrap();
        assert_eq!(head, [0, 0, 1, 0, 2, 0, 3, 0]);
        assert_eq!(fs.read(r, 0, 3, 2).unwrap(), [0, 2]); // mid-element
        assert!(fs.read(r, 0, 0, 0).unwrap().is_empty());
        assert!(fs.read(r, 0, 200, 10).unwrap().is_empty());
        assert!(fs.read(r, 0, u64::MAX, 10).unwrap().is_empty());
        // Element 50 onwards is "corrupt": EIO with the whole story.
        assert_eq!(fs.read(r, 0, 90, 10).unwrap().len(), 10);
        let err = fs.read(r, 0, 96, 1 << 17).unwrap_err();
        assert_eq!(err.errno(), libc::EIO);
        let msg = err.to_string();
        assert!(
            msg.contains("r offset 96 size 131072: ") && msg.contains("ramp/c/9"),
            "{msg}"
        );
        // The sidecar reads as its document, clamped too.
        let side = lookup_path(&fs, "r.json").unwrap();
        let doc = fs.read(side.ino, 0, 0, 1 << 20).unwrap();
        assert_eq!(doc.len() as u64, side.size);
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(v["dtype"], "<u2");
        assert_eq!(fs.read(side.ino, 0, side.size - 1, 10).unwrap(), b"\n");
        assert!(matches!(fs.read(ROOT_INO, 0, 0, 1), Err(FsError::IsDir(_))));
    }

    #[test]
    fn big_endian_reads_swap() {
        let fs = SlabFs::new(
            &[entry("r", ramp(4, u64::MAX))],
            FsConfig {
                byte_order: Endian::Big,
                ..config(Views::default())
            },
        );
        let r = lookup_path(&fs, "r").unwrap().ino;
        assert_eq!(fs.read(r, 0, 0, 8).unwrap(), [0, 0, 0, 1, 0, 2, 0, 3]);
        assert_eq!(
            fs.getxattr(r, OsStr::new(sidecar::XATTR_DTYPE), 64)
                .unwrap(),
            XattrReply::Data(b">u2".to_vec())
        );
    }

    #[test]
    fn open_is_read_only() {
        let fs = fs(&[entry("r", ramp(4, u64::MAX))]);
        let r = lookup_path(&fs, "r").unwrap().ino;
        // Each open is its own handle (a readahead stream), page-cached.
        let (a, b) = (
            fs.open(r, libc::O_RDONLY).unwrap(),
            fs.open(r, libc::O_RDONLY).unwrap(),
        );
        assert!(!a.direct_io && !b.direct_io);
        assert!(a.fh != 0 && b.fh != 0 && a.fh != b.fh);
        for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_RDONLY | libc::O_TRUNC] {
            assert_eq!(fs.open(r, flags).unwrap_err().errno(), libc::EROFS);
        }
        assert!(matches!(
            fs.open(ROOT_INO, libc::O_RDONLY),
            Err(FsError::IsDir(_))
        ));
        assert!(fs.opendir(ROOT_INO).is_ok());
        assert!(matches!(fs.opendir(r), Err(FsError::NotDir(_))));
    }

    #[test]
    fn xattrs() {
        let fs = fs(&[entry("r", ramp(4, u64::MAX))]);
        let r = lookup_path(&fs, "r").unwrap().ino;
        let shape = OsStr::new(sidecar::XATTR_SHAPE);
        assert_eq!(fs.getxattr(r, shape, 0).unwrap(), XattrReply::Size(3));
        assert_eq!(
            fs.getxattr(r, shape, 3).unwrap(),
            XattrReply::Data(b"[4]".to_vec())
        );
        assert_eq!(fs.getxattr(r, shape, 2).unwrap_err().errno(), libc::ERANGE);
        assert_eq!(
            fs.getxattr(r, OsStr::new("user.other"), 10)
                .unwrap_err()
                .errno(),
            libc::ENODATA
        );
        assert_eq!(
            fs.getxattr(ROOT_INO, shape, 10).unwrap_err().errno(),
            libc::ENODATA
        );
        let XattrReply::Data(list) = fs.listxattr(r, 1000).unwrap() else {
            panic!()
        };
        assert_eq!(
            list,
            b"user.slabfs.shape\0user.slabfs.dtype\0user.slabfs.dims\0"
        );
        assert_eq!(fs.listxattr(ROOT_INO, 0).unwrap(), XattrReply::Size(0));
    }

    const ALL_VIEWS: Views = Views {
        raw: true,
        json: true,
        npy: true,
        hdr: true,
    };

    #[test]
    fn views_are_placed_where_their_names_are_free() {
        let a = ramp(10, u64::MAX);
        let hdr = views::envi_header(a.meta(), Endian::Little, None);
        let fs = SlabFs::new(
            &[
                entry("d/a", a.clone()),
                // An array whose name is a's npy view: the array wins.
                entry("d/a.npy", ramp(3, u64::MAX)),
            ],
            config(ALL_VIEWS),
        );
        let mut want = vec!["a", "a.json", "a.npy", "a.npy.json", "a.npy.npy"];
        if hdr.is_ok() {
            want.extend(["a.hdr", "a.npy.hdr"]);
        }
        want.sort();
        assert_eq!(names(&fs, "d"), want);
        assert_eq!(lookup_path(&fs, "d/a.npy").unwrap().size, 6);
        if let Ok(text) = hdr {
            assert_eq!(read_all(&fs, "d/a.hdr"), text.as_bytes());
        }
        // The npy view of the raw array carries its xattrs.
        let npy = lookup_path(&fs, "d/a.npy.npy").unwrap().ino;
        assert_eq!(
            fs.getxattr(npy, OsStr::new(sidecar::XATTR_SHAPE), 64)
                .unwrap(),
            XattrReply::Data(b"[3]".to_vec())
        );

        // Without the raw view, the other views still appear, except the
        // ENVI header, which would describe a file that is not there.
        let fs = SlabFs::new(
            &[entry("a", ramp(10, u64::MAX))],
            config(Views {
                raw: false,
                json: true,
                npy: true,
                hdr: true,
            }),
        );
        assert_eq!(names(&fs, ""), [".slabfs", "a.json", "a.npy"]);
        // Only raw: no sidecars at all.
        let fs = SlabFs::new(
            &[entry("a", ramp(10, u64::MAX))],
            config(Views {
                raw: true,
                json: false,
                npy: false,
                hdr: false,
            }),
        );
        assert_eq!(names(&fs, ""), [".slabfs", "a"]);
    }

    #[test]
    fn npy_view_is_the_header_then_the_data_across_the_boundary() {
        let n = 1000;
        let a = ramp(n, u64::MAX);
        let header = views::npy_header(a.meta(), Endian::Little);
        let fs = SlabFs::new(&[entry("a", a)], config(ALL_VIEWS));
        let mut want = header.clone();
        want.extend(ramp_bytes(n));
        let npy = lookup_path(&fs, "a.npy").unwrap();
        assert_eq!(npy.size, want.len() as u64);
        assert_eq!(read_all(&fs, "a.npy"), want);
        // Every read that starts within a few bytes of the boundary, of
        // every small length, odd offsets (mid-element) included.
        let h = header.len() as u64;
        for offset in h.saturating_sub(5)..h + 5 {
            for len in 1..12u32 {
                let got = fs.read(npy.ino, 0, offset, len).unwrap();
                let end = (offset + len as u64).min(want.len() as u64) as usize;
                assert_eq!(got, want[offset as usize..end], "@{offset}+{len}");
            }
        }
        // Near EOF and past it.
        let size = want.len() as u64;
        assert_eq!(
            fs.read(npy.ino, 0, size - 3, 10).unwrap(),
            want[size as usize - 3..]
        );
        assert!(fs.read(npy.ino, 0, size, 10).unwrap().is_empty());
        // A read failing in the data part names the npy file.
        let fs = SlabFs::new(&[entry("b", ramp(100, 10))], config(ALL_VIEWS));
        let b = lookup_path(&fs, "b.npy").unwrap().ino;
        let err = fs.read(b, 0, 0, 1 << 16).unwrap_err();
        assert!(err.to_string().starts_with("b.npy offset 0"), "{err}");
    }

    #[test]
    fn stats_file_is_a_snapshot_per_open_and_counts() {
        let fs = fs(&[entry("r", ramp(100, 50))]);
        let stats = lookup_path(&fs, ".slabfs/stats").unwrap();
        assert_eq!((stats.kind, stats.size, stats.perm), (Kind::File, 0, 0o444));
        assert_eq!(names(&fs, ".slabfs"), ["errors", "stats"]);
        let doc = |bytes: &[u8]| -> serde_json::Value { serde_json::from_slice(bytes).unwrap() };
        let before = doc(&read_all(&fs, ".slabfs/stats"));
        let reads0 = before["reads"]["requests"].as_u64().unwrap();

        let r = lookup_path(&fs, "r").unwrap().ino;
        let opened = fs.open(stats.ino, libc::O_RDONLY).unwrap();
        assert!(opened.direct_io && opened.fh != 0);
        assert_eq!(fs.read(r, 0, 0, 16).unwrap().len(), 16);
        assert_eq!(fs.read(r, 0, 150, 100).unwrap_err().errno(), libc::EIO);
        // The open handle still reads the snapshot taken at its open, in
        // pieces that fit together.
        let first = fs.read(stats.ino, opened.fh, 0, 10).unwrap();
        let rest = fs.read(stats.ino, opened.fh, 10, 1 << 20).unwrap();
        let snap = doc(&[first, rest].concat());
        assert_eq!(snap["errors"], serde_json::json!({}));
        fs.release(stats.ino, opened.fh);
        assert!(fs.snapshots.lock().is_empty());

        let after = doc(&read_all(&fs, ".slabfs/stats"));
        // The snapshot reads above, then the two array reads.
        assert!(after["reads"]["requests"].as_u64().unwrap() >= reads0 + 2);
        assert!(after["reads"]["bytes"].as_u64().unwrap() >= 16);
        assert_eq!(after["errors"]["EIO"], 1);
        assert!(after["read_latency_us"]["count"].as_u64().unwrap() >= 3);
        let _ = lookup_path(&fs, "nope");
        let again = doc(&read_all(&fs, ".slabfs/stats"));
        assert_eq!(again["errors"]["ENOENT"], 1);
    }

    fn dir(attrs: serde_json::Value) -> Directory {
        Directory {
            attributes: attrs.as_object().unwrap().clone(),
            dimensions: Vec::new(),
            source: "/data/f.nc".into(),
        }
    }

    #[test]
    fn directories_with_attributes() {
        let big = "x".repeat(sidecar::XATTR_SIZE_MAX);
        let dirs: BTreeMap<String, Directory> = [
            ("", serde_json::json!({"title": "root"})),
            ("d", serde_json::json!({"n": [1, 2]})),
            // Attributes only: still a directory.
            ("e/f", serde_json::json!({"only": true})),
            // At an array's path, or below one: not shown.
            ("a", serde_json::json!({"no": 1})),
            ("a/b", serde_json::json!({"no": 2})),
            ("big", serde_json::json!({"text": big})),
        ]
        .into_iter()
        .map(|(p, a)| (p.to_string(), dir(a)))
        .collect();
        let entries = [
            entry("a", ramp(1, u64::MAX)),
            entry("d/x", ramp(1, u64::MAX)),
            // An array named like d's sidecar keeps the name.
            entry("d/.json", ramp(2, u64::MAX)),
        ];
        let fs = SlabFs::with_directories(&entries, &dirs, config(Views::default()));
        assert_eq!(
            names(&fs, ""),
            [".json", ".slabfs", "a", "a.json", "big", "d", "e"]
        );
        assert_eq!(names(&fs, "d"), [".json", ".json.json", "x", "x.json"]);
        assert_eq!(names(&fs, "e"), ["f"]);
        assert_eq!(names(&fs, "e/f"), [".json"]);
        let doc: serde_json::Value = serde_json::from_slice(&read_all(&fs, ".json")).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"attributes": {"title": "root"}, "source": "/data/f.nc"})
        );
        assert_eq!(lookup_path(&fs, "d/.json").unwrap().size, 4); // the array
        let attrs = OsStr::new(sidecar::XATTR_ATTRIBUTES);
        let d = lookup_path(&fs, "d").unwrap().ino;
        assert_eq!(
            fs.getxattr(d, attrs, 100).unwrap(),
            XattrReply::Data(br#"{"n":[1,2]}"#.to_vec())
        );
        assert_eq!(
            fs.listxattr(d, 100).unwrap(),
            XattrReply::Data(b"user.slabfs.attributes\0".to_vec())
        );
        // Over Linux's xattr size: only the sidecar carries them.
        let big_ino = lookup_path(&fs, "big").unwrap().ino;
        assert_eq!(fs.listxattr(big_ino, 0).unwrap(), XattrReply::Size(0));
        assert!(read_all(&fs, "big/.json").len() > sidecar::XATTR_SIZE_MAX);
        // Without the json view: the xattr only.
        let fs = SlabFs::with_directories(
            &entries,
            &dirs,
            config(Views {
                json: false,
                ..Views::default()
            }),
        );
        assert_eq!(names(&fs, "e/f"), Vec::<String>::new());
        let root = fs.getxattr(ROOT_INO, attrs, 100).unwrap();
        assert_eq!(root, XattrReply::Data(br#"{"title":"root"}"#.to_vec()));
    }

    #[test]
    fn a_dataset_named_slabfs_wins_over_the_control_dir() {
        let fs = fs(&[entry(".slabfs/x", ramp(1, u64::MAX))]);
        assert_eq!(names(&fs, ".slabfs"), ["x", "x.json"]);
        assert!(lookup_path(&fs, ".slabfs/stats").is_err());
        assert!(lookup_path(&fs, ".slabfs/errors").is_err());
    }

    /// Failed reads are in `.slabfs/errors`: the array's path and the
    /// library error (naming the chunk), not the offset, so the same
    /// failure read again is one entry with a count; another chunk is
    /// another. The file is generated at open, like the stats file; what
    /// a load of a mount of one dataset skipped is there too.
    #[test]
    fn failures_are_in_the_errors_file() {
        let ds = Dataset {
            entries: vec![entry("d/r", ramp(100, 50))],
            skipped: vec![Error::metadata("/data/f.nc: variable v", "unknown dtype")],
            ..Dataset::default()
        };
        let fs = SlabFs::of_dataset(
            &ds,
            config(Views {
                npy: true,
                ..Views::default()
            }),
        );
        let errors = lookup_path(&fs, ".slabfs/errors").unwrap();
        assert_eq!(
            (errors.kind, errors.size, errors.perm),
            (Kind::File, 0, 0o444)
        );
        let opened = fs.open(errors.ino, libc::O_RDONLY).unwrap();
        assert!(opened.direct_io);
        let doc = |bytes: &[u8]| -> serde_json::Value { serde_json::from_slice(bytes).unwrap() };
        let skipped = doc(&read_all(&fs, ".slabfs/errors"));
        assert_eq!(
            skipped["failures"].as_array().unwrap().len(),
            1,
            "{skipped}"
        );
        let s = &skipped["failures"][0];
        assert_eq!((&s["kind"], &s["path"]), (&"skipped".into(), &"/".into()));
        assert_eq!(s["reason"], "/data/f.nc: variable v: unknown dtype");

        let r = lookup_path(&fs, "d/r").unwrap().ino;
        for offset in [96, 100, 150] {
            assert_eq!(fs.read(r, 0, offset, 64).unwrap_err().errno(), libc::EIO);
        }
        let npy = lookup_path(&fs, "d/r.npy").unwrap().ino;
        assert!(fs.read(npy, 0, 0, 1 << 16).is_err());
        assert_eq!(fs.read(r, 0, 0, 16).unwrap().len(), 16);
        // The open handle reads its snapshot: no read failure yet.
        let snap = doc(&fs.read(errors.ino, opened.fh, 0, 1 << 20).unwrap());
        assert_eq!(snap, skipped);
        fs.release(errors.ino, opened.fh);
        let now = doc(&read_all(&fs, ".slabfs/errors"));
        let f = now["failures"].as_array().unwrap();
        let brief: Vec<(&str, &str, u64)> = f
            .iter()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap();
                (s("kind"), s("path"), e["count"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(
            brief,
            [
                ("read", "/d/r.npy", 1),
                ("read", "/d/r", 3),
                ("skipped", "/", 1)
            ],
            "{now}"
        );
        assert_eq!(f[1]["reason"], "ramp/c/9: corrupt chunk");
        assert!(f[1]["first"].as_str().unwrap() <= f[1]["last"].as_str().unwrap());
        assert_eq!(
            (&now["recorded"], &now["unresolved"]),
            (&5.into(), &3.into())
        );
    }

    /// The value of the sample `series` (name and labels, as written) in
    /// the text format `text`.
    fn sample(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn the_metrics_endpoint_reads_the_counters_of_the_stats_file() {
        let cache = Arc::new(ChunkCache::new(1 << 20));
        let fs = Arc::new(fs(&[entry("a", ramp(1000, 600))]).with_cache(cache));
        let remote = crate::storage::remote::Remote::default();
        remote.state().metrics.source("s3://bucket");
        let a = lookup_path(&fs, "a").unwrap();
        let fh = fs.open(a.ino, libc::O_RDONLY).unwrap().fh;
        assert_eq!(fs.read(a.ino, fh, 0, 300).unwrap().len(), 300);
        assert_eq!(fs.read(a.ino, fh, 300, 900).unwrap().len(), 900);
        assert!(fs.read(a.ino, fh, 1500, 100).is_err()); // past bad_from: EIO
        fs.stats()
            .record_op(stats::Op::Read, std::time::Duration::from_micros(70));
        fs.stats()
            .record_op(stats::Op::Getattr, std::time::Duration::from_micros(3));
        let text = mount::collectors(&fs, &remote, &[]).render().unwrap();
        let doc = fs.stats_json();
        assert_eq!(doc["reads"]["bytes"], 1200);
        assert_eq!(sample(&text, "slabfs_read_bytes_total"), 1200.0);
        assert_eq!(sample(&text, "slabfs_reads_total"), 2.0);
        assert_eq!(
            sample(&text, "slabfs_fuse_errors_total{errno=\"EIO\"}"),
            1.0
        );
        let count = |op: &str| {
            let series = format!("slabfs_fuse_request_duration_seconds_count{{op=\"{op}\"}}");
            sample(&text, &series)
        };
        assert_eq!(
            (count("read"), count("getattr"), count("lookup")),
            (1.0, 1.0, 0.0)
        );
        assert_eq!(doc["fuse_latency_us"]["read"]["count"], 1);
        assert!(doc["fuse_latency_us"].get("lookup").is_none());
        assert_eq!(
            sample(
                &text,
                "slabfs_remote_requests_total{store=\"s3://bucket\",kind=\"GET\"}"
            ),
            0.0
        );
        assert_eq!(
            sample(&text, "slabfs_chunk_cache_budget_bytes"),
            (1 << 20) as f64
        );
        assert_eq!(sample(&text, "slabfs_not_shown"), 0.0);
        // Each family once (Prometheus rejects a scrape that repeats one),
        // every series named slabfs_*.
        let mut seen = std::collections::BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(seen.insert(name.to_string()), "{name} twice");
            } else if !line.starts_with('#') {
                assert!(line.starts_with("slabfs_"), "{line}");
            }
        }
        assert!(seen.len() > 30, "{seen:?}");
    }
}
