//! Live refresh: the mount follows sources that change under it. This
//! module schedules: it finds what changed and loads it again; comparing
//! the load with what the mount serves, swapping trees and telling the
//! kernel is [`super::reconcile`]'s.
//!
//! # Finding changes
//!
//! Re-opening everything finds every change but costs a `Opener::open`
//! per dataset per pass (about 45 µs of CPU for a small netCDF file: an
//! idle mount of 100,000 files re-opened every 5 s spends most of a
//! core, for ever). So a directory SOURCE (an archive, [`super::datasets`])
//! is *watched* ([`super::watch`]: inotify, the directories in use) and a
//! pass looks only at what changed:
//!
//! - Each changed path maps to the *unit* the dataset walk would meet it
//!   as ([`unit_of`]): the outermost Zarr store above it, else the file or
//!   directory itself. Units are datasets' mount paths, so the open
//!   datasets at or under a unit are opened again and compared
//!   ([`SlabFs::refresh_archive`]), and the kernel is told to drop what
//!   it holds of the closed ones there; a new or removed file needs
//!   nothing (directories are listed from the disk when read). A Zarr
//!   metadata key appearing or vanishing outside any store names its whole
//!   directory, which may have become or stopped being a store.
//! - Aggregations and references read fragments anywhere under the roots;
//!   which ones is theirs to know. The rule: every pass also re-opens the
//!   open datasets whose format's change is told by a re-open
//!   ([`crate::formats::entry::Stamp::Reopen`]: NCA descriptors, kerchunk
//!   references, NcML files); their change stamps cover their fragments'
//!   files, so an unchanged one stays as it was. The directories an NcML
//!   scan lists are watched once it is open
//!   ([`crate::formats::entry::Dataset::watch`]), so a file landing there
//!   starts a pass. NCA variables inside netCDF files are
//!   re-loaded when their own file changes, and otherwise by the
//!   safety-net walk.
//! - A full pass (below) asks each open dataset its version
//!   ([`crate::formats::dataset::archive::Archive::version`]: a `stat`, a
//!   store's walk, in a bucket its prefix's listing) and opens again only
//!   those that changed. A bucket prefix cannot be watched: its passes are
//!   all full, and cost by what is in use, never the whole prefix.
//! - A mount of one dataset (a Zarr store, a file, a URL) re-opens it
//!   whole when it changed (a URL source: when its [`remote_stamp`] did).
//! - Events arriving within [`SETTLE`] of the first are handled together;
//!   more than [`MAX_DIRTY`] changed paths at once make one full walk.
//! - A full walk still runs: once when the watches are in place (changes
//!   between the mount's load and the watches), after lost events (the
//!   kernel's queue overflowed, or ours), every `--rescan` (a safety net:
//!   files outside SOURCE, symlinked directories seen twice), and every
//!   `--refresh` when the source cannot be watched at all (network file
//!   systems, too many directories, the kernel's watch limit: one warning,
//!   then periodic walks, as before watching existed).
//!
//! # Failures
//!
//! What a pass cannot load goes to `.slabfs/errors` ([`super::failures`]):
//! a source or an open dataset that cannot be re-opened (`refresh`, still
//! served as it was), what a load skipped (`skipped`). A dataset of an
//! archive that failed to open is not open, so nothing above would look
//! at it again: a pass also tries again the failed datasets at or under
//! the units it handles whose version changed since they failed
//! ([`SlabFs::refresh_archive`]), so that a file fixed (rewritten,
//! replaced) opens and its failure is resolved at that pass. A load that
//! succeeds resolves its dataset's failures.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::SlabFs;
pub use super::reconcile::{Changes, Invalidate};
use super::watch::{self, Seen};
use crate::engine::cache::{ChunkCache, DEFAULT_BUDGET};
use crate::formats::dataset;
use crate::formats::dataset::archive::unit_of;
use crate::formats::icechunk;
use crate::storage::local::confine::Roots;
use crate::storage::remote::{self, Remote};

/// What a URL source holds, hashed, for a refresh to tell whether it
/// changed: the key, size, ETag and time of every object under its prefix
/// (one recursive LIST per 1,000 objects,
/// [`crate::storage::Store::change_stamp`]) and, when the URL names
/// one object, its version (a HEAD, and a second one when it exists). A
/// source that cannot be listed and is no object (an HTTP Zarr store):
/// the versions of its root metadata keys ([`crate::formats::zarr::STORE_KEYS`]), asked
/// with conditional GETs against the ETags in `seen` (a `304` each while
/// unchanged). `None` when that cannot be told (not a URL; a failed
/// request): the caller walks.
fn remote_stamp(
    source: &str,
    remote: Option<&Remote>,
    seen: &mut HashMap<String, String>,
) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};

    use crate::storage::ReadAt;
    use crate::storage::Store;
    let remote = remote.filter(|_| remote::is_url(source))?;
    let mut stamp = || -> crate::error::Result<Option<u64>> {
        let loc = remote::Location::parse(source)?;
        let at = remote.connect(&loc)?;
        let store = remote::RemoteStore::new(at.clone());
        let listed = store.change_stamp("")?;
        // The bucket's root is no object (a HEAD of it asks the bucket).
        let named = loc.name().is_some();
        let object = match named.then(|| remote::RemoteFile::open(at)) {
            None => None,
            Some(Ok(f)) => Some(f.stamp()),
            Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => None,
            Some(Err(e)) => {
                return Err(crate::error::Error::Io {
                    path: loc.display(),
                    source: e,
                });
            }
        };
        let keys = match (listed, object) {
            (None, None) => Some(store.versions(&crate::formats::zarr::STORE_KEYS, seen)?),
            _ => None,
        };
        Ok(match (listed, object, keys) {
            // An object that cannot say its version.
            (_, Some(None), _) => None,
            (l, o, k) => {
                let mut h = DefaultHasher::new();
                (l, o, k).hash(&mut h);
                Some(h.finish())
            }
        })
    };
    stamp().unwrap_or_else(|e| {
        log::debug!("refresh of {source}: cannot tell whether it changed: {e}");
        None
    })
}

/// Whether a URL SOURCE is an Icechunk repository: asked at its first
/// pass (a listing, or over HTTP a HEAD of its first snapshot), then kept
/// (a repository stays one).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Head {
    Unasked,
    NotRepository,
    Repository,
}

/// A URL SOURCE that is an Icechunk repository: the version of its
/// followed branch's head ([`icechunk::Heads`]: one listing of the ref's
/// prefix a pass; a tag or a snapshot: no request at all), instead of
/// [`remote_stamp`]'s listing of every chunk object. `None`: no
/// repository (ask [`remote_stamp`]); `Some(None)`: cannot tell now (the
/// pass walks).
fn repository_stamp(
    source: &str,
    remote: Option<&Remote>,
    reference: Option<&str>,
    head: &mut Head,
    heads: &icechunk::Heads,
) -> Option<Option<u64>> {
    use crate::storage::{ByteRange, Store};
    if *head == Head::NotRepository {
        return None;
    }
    let remote = remote.filter(|_| remote::is_url(source))?;
    let mut stamp = || -> crate::error::Result<Option<u64>> {
        let loc = remote::Location::parse(source)?;
        let store = remote::RemoteStore::new(remote.connect(&loc)?);
        if *head == Head::Unasked {
            let repository = if loc.scheme().lists() {
                let listing = store.list_dir("")?;
                icechunk::is_repository_listing(listing.iter().map(|(n, d)| (n.as_str(), *d)))
            } else {
                let first = ByteRange::At { offset: 0, len: 0 };
                store
                    .get_range(icechunk::FIRST_SNAPSHOT_KEY, first)?
                    .is_some()
            };
            *head = match repository {
                true => Head::Repository,
                false => Head::NotRepository,
            };
        }
        Ok(match *head {
            Head::Repository => heads.version(source, Arc::new(store), reference),
            _ => None,
        })
    };
    match stamp() {
        Ok(s) if *head == Head::Repository => Some(s),
        Ok(_) => None,
        Err(e) => {
            log::debug!("refresh of {source}: cannot tell whether it changed: {e}");
            Some(None)
        }
    }
}

/// At most this many paths per list in the refresh log line.
const LOG_PATHS: usize = 8;

fn list(paths: &[String]) -> String {
    let mut s = paths
        .iter()
        .take(LOG_PATHS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > LOG_PATHS {
        s += &format!(" and {} more", paths.len() - LOG_PATHS);
    }
    s
}

/// The refresh log line: one per refresh that changed something.
fn describe(c: &Changes) -> String {
    let mut parts = Vec::new();
    for (what, paths) in [
        ("added", &c.added),
        ("removed", &c.removed),
        ("changed", &c.changed),
        ("attributes of", &c.attributes),
    ] {
        if !paths.is_empty() {
            parts.push(format!("{what} {}: {}", paths.len(), list(paths)));
        }
    }
    parts.join("; ")
}

/// How the refresh thread finds changes (`slabfs mount` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshConfig {
    /// Walk the whole source this often when changes are not watched
    /// (`--refresh`).
    pub every: Duration,
    /// Watch a directory source with inotify when it can be (`--watch`).
    pub watch: bool,
    /// While watching, walk the whole source this often anyway, a safety
    /// net (`--rescan`); `None` = never.
    pub rescan: Option<Duration>,
    /// Most directories watched (`--max-watches`); `None` = half of
    /// `fs.inotify.max_user_watches`.
    pub max_watches: Option<usize>,
    /// The version of an Icechunk repository SOURCE served (`--ref`): a
    /// walk opens that one again (a branch: its tip now).
    pub reference: Option<String>,
}

impl RefreshConfig {
    /// Periodic walks every `every`, nothing watched (the behaviour before
    /// watching existed).
    pub fn walk_every(every: Duration) -> RefreshConfig {
        RefreshConfig {
            every,
            watch: false,
            rescan: None,
            max_watches: None,
            reference: None,
        }
    }
}

/// Changes seen within this long of the first are re-loaded together: a
/// writer's burst (a Zarr array's chunks, a netCDF file written in pieces)
/// costs one re-load, and a new file shows well within a second.
const SETTLE: Duration = Duration::from_millis(250);

/// More changed paths than this waiting for one pass (a tree copied in, an
/// archive unpacked): one full walk instead, so the set stays small.
const MAX_DIRTY: usize = 10_000;

/// "Never", for a walk that is not due: a year (Instant + it cannot
/// overflow).
const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// The refresh thread. Dropping it (or [`Refresher::stop`]) stops it and
/// waits for a refresh in progress to finish.
pub struct Refresher {
    stop: Arc<AtomicBool>,
    wake: SyncSender<Seen>,
    thread: Option<JoinHandle<()>>,
}

impl Refresher {
    pub fn stop(self) {}
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Full: the thread is busy and looks at the flag before waiting.
        let _ = self.wake.try_send(Seen::Wake);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Start refreshing `fs` from `source` as `cfg` says. `known_skipped` are
/// the messages of what the mount already reported as not shown, so they
/// are not warned about again.
pub fn spawn(
    fs: Arc<SlabFs>,
    source: PathBuf,
    cfg: RefreshConfig,
    inval: Box<dyn Invalidate>,
    known_skipped: Vec<String>,
    allow_outside: Vec<PathBuf>,
) -> io::Result<Refresher> {
    let stop = Arc::new(AtomicBool::new(false));
    let cache = fs
        .cache()
        .cloned()
        .unwrap_or_else(|| Arc::new(ChunkCache::new(DEFAULT_BUDGET)));
    fs.stats().set_refresh_interval(Some(cfg.every));
    let channel = watch::Channel::new();
    let wake = channel.tx.clone();
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("slabfs-refresh".into())
            .spawn(move || {
                let mut pass = Pass {
                    fs: &fs,
                    source: &source,
                    allow_outside: &allow_outside,
                    reference: cfg.reference.clone(),
                    cache: &cache,
                    inval: inval.as_ref(),
                    warned: known_skipped.into_iter().collect(),
                    quiet: None,
                    walked: Instant::now(),
                    rescan: cfg.rescan,
                    etags: HashMap::new(),
                    head: Head::Unasked,
                    heads: icechunk::Heads::default(),
                };
                run(&mut pass, &cfg, &channel, &stop);
            })?
    };
    Ok(Refresher {
        stop,
        wake,
        thread: Some(thread),
    })
}

/// What a refresh pass works with.
struct Pass<'a> {
    fs: &'a SlabFs,
    source: &'a Path,
    allow_outside: &'a [PathBuf],
    /// `--ref` of a repository SOURCE.
    reference: Option<String>,
    cache: &'a Arc<ChunkCache>,
    inval: &'a dyn Invalidate,
    /// The failure messages already logged, so a persistent failure is
    /// reported once, not every pass.
    warned: BTreeSet<String>,
    /// A URL source: its [`remote_stamp`] when it was last walked with
    /// nothing skipped; a pass that finds the same stamp does no walk.
    quiet: Option<u64>,
    /// When the last walk ran, and how often one runs even so (`--rescan`:
    /// what a URL source's stamp cannot see, fragments under
    /// `--allow-outside` locations).
    walked: Instant,
    rescan: Option<Duration>,
    /// The ETags of an HTTP Zarr store's metadata keys, for the
    /// conditional GETs of [`remote_stamp`] (at most four entries).
    etags: HashMap<String, String>,
    /// A URL source: whether it is an Icechunk repository, and its head.
    head: Head,
    heads: icechunk::Heads,
}

impl Pass<'_> {
    /// Run `f` (a pass). A panic (a bug; re-opening parses whatever the
    /// source holds now) must not end the refreshes for the rest of the
    /// mount's life: log it, try again later.
    fn guarded(&mut self, f: impl FnOnce(&mut Self)) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self)));
        if let Err(panic) = r {
            self.fs.stats().record_refresh_failure();
            log::error!(
                "refresh of {}: internal error, keeping the previous state (please report this \
                 bug): {}",
                self.source.display(),
                crate::error::panic_message(panic.as_ref())
            );
        }
    }
}

/// The refresh thread's loop: watch if it can, walk when it must.
fn run(pass: &mut Pass, cfg: &RefreshConfig, ch: &watch::Channel, stop: &AtomicBool) {
    let source = pass.source;
    let roots = Roots::new(
        std::iter::once(source.to_path_buf())
            .chain(pass.allow_outside.iter().cloned())
            .collect::<Vec<_>>(),
    );
    let mut watcher = None;
    // An archive watches the directories it uses (as it begins to use
    // them: `Seen::Touched`), not the whole tree.
    let archive = pass.fs.is_archive();
    let watch_source = |w: &mut watch::Watcher| {
        if archive {
            w.watch_dir(source, &roots)
        } else {
            w.watch_tree(source, &roots, 0)
        }
    };
    if cfg.watch && source.is_dir() {
        let started = Instant::now();
        if archive {
            pass.fs.report_touched(ch.tx.clone());
        }
        let watched = watch::Watcher::new(ch.tx.clone(), ch.lost.clone(), cfg.max_watches)
            .and_then(|mut w| watch_source(&mut w).map(|()| w));
        match watched {
            Ok(w) => {
                log::info!(
                    "watching {} for changes: {} in {:?}",
                    source.display(),
                    crate::logging::count(w.len(), "directory", "directories"),
                    started.elapsed()
                );
                pass.fs.stats().set_watching(Some(w.len()));
                watcher = Some(w);
            }
            Err(why) => not_watching(source, &why, cfg.every),
        }
    }
    // Whatever changed between the mount's load and the watches being in
    // place was not seen: one walk now catches it.
    let mut walk_due = watcher.is_some();
    let period = |watching: bool| {
        if watching {
            cfg.rescan.unwrap_or(NEVER)
        } else {
            cfg.every
        }
    };
    let mut next_walk = Instant::now() + period(watcher.is_some());
    let mut dirty: BTreeSet<PathBuf> = BTreeSet::new();
    let mut recheck: BTreeSet<String> = BTreeSet::new();
    let mut dirty_since: Option<Instant> = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if !walk_due {
            let until = match dirty_since {
                Some(t) => next_walk.min(t + SETTLE),
                None => next_walk,
            };
            let until = pass.fs.next_recheck().map_or(until, |r| until.min(r));
            let seen = ch
                .rx
                .recv_timeout(until.saturating_duration_since(Instant::now()));
            if stop.load(Ordering::SeqCst) {
                return;
            }
            match seen {
                Ok(Seen::Changed { path, dir, gone }) => {
                    if let Some(w) = &mut watcher {
                        if gone {
                            w.forget(&path);
                        }
                        let depth = path
                            .strip_prefix(source)
                            .map_or(0, |r| r.components().count());
                        // A new directory of an archive is watched once it
                        // is used, unless it is in an open Zarr store.
                        let wanted =
                            !archive || unit_of(source, &path).is_some_and(|u| pass.fs.is_open(&u));
                        if dir
                            && wanted
                            && let Err(why) = w.watch_tree(&path, &roots, depth)
                        {
                            not_watching(source, &why, cfg.every);
                            watcher = None;
                            walk_due = true;
                        }
                    }
                    dirty.insert(path);
                    dirty_since.get_or_insert_with(Instant::now);
                    if dirty.len() > MAX_DIRTY {
                        walk_due = true;
                    }
                }
                Ok(Seen::Failed(why)) => {
                    if watcher.take().is_some() {
                        not_watching(source, &watch::Unwatchable(why), cfg.every);
                        walk_due = true;
                    }
                }
                Ok(Seen::Touched { dir, tree }) => {
                    if let Some(w) = &mut watcher {
                        let depth = dir
                            .strip_prefix(source)
                            .map_or(0, |r| r.components().count());
                        let before = w.len();
                        let watched = if tree {
                            w.watch_tree(&dir, &roots, depth)
                        } else {
                            w.watch_dir(&dir, &roots)
                        };
                        if let Err(why) = watched {
                            not_watching(source, &why, cfg.every);
                            watcher = None;
                            walk_due = true;
                        } else {
                            pass.fs.stats().set_watching(Some(w.len()));
                            // Newly watched: what changed in it between
                            // the request that used it and now was not
                            // seen. Its open datasets are checked.
                            if w.len() > before
                                && let Some(u) = unit_of(source, &dir)
                            {
                                recheck.insert(u);
                                dirty_since.get_or_insert_with(Instant::now);
                            }
                        }
                    }
                }
                Ok(Seen::Wake) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        if ch.lost.swap(false, Ordering::Relaxed) && watcher.is_some() {
            log::info!(
                "refresh of {}: change events were lost (too many at once); walking everything",
                source.display()
            );
            walk_due = true;
        }
        let now = Instant::now();
        if walk_due || now >= next_walk {
            pass.guarded(|p| p.walk());
            if let Some(w) = &mut watcher {
                // Directories whose creation was lost with the events.
                if let Err(why) = watch_source(w) {
                    not_watching(source, &why, cfg.every);
                    watcher = None;
                }
            }
            match &watcher {
                Some(w) => pass.fs.stats().set_watching(Some(w.len())),
                None => pass.fs.stats().set_watching(None),
            }
            walk_due = false;
            dirty.clear();
            recheck.clear();
            dirty_since = None;
            next_walk = Instant::now() + period(watcher.is_some());
        } else if dirty_since.is_some_and(|t| now >= t + SETTLE) {
            let paths = std::mem::take(&mut dirty);
            let units = std::mem::take(&mut recheck);
            dirty_since = None;
            if !units.is_empty() {
                pass.guarded(|p| p.recheck(&units));
            }
            if !paths.is_empty() {
                pass.guarded(|p| p.reload(&paths));
            }
            if let Some(w) = &watcher {
                pass.fs.stats().set_watching(Some(w.len()));
            }
        }
        // Datasets that asked to be opened again by now (what they hold
        // changes with time alone: an NcML scan's olderThan).
        let due = pass.fs.take_due_rechecks(Instant::now());
        if !due.is_empty() {
            pass.guarded(|p| p.recheck(&due));
        }
    }
}

/// Say, once, why the source is walked periodically instead.
fn not_watching(source: &Path, why: &watch::Unwatchable, every: Duration) {
    log::warn!(
        "not watching {} for changes: {why}; walking it every {} s instead",
        source.display(),
        every.as_secs_f64()
    );
}

impl Pass<'_> {
    /// A full pass: re-open the whole source, apply, log.
    fn walk(&mut self) {
        let started = Instant::now();
        let (fs, source) = (self.fs, self.source);
        if fs.is_archive() {
            // Its directories are listed when read: only the datasets
            // open now, and those the kernel holds something of, have
            // anything to compare, each by its own version (in a bucket:
            // its prefix's listing, a store's own), never the whole
            // archive's.
            self.walked = Instant::now();
            fs.stats().record_full_walk();
            fs.forget_listings();
            let changes = fs.refresh_archive(&BTreeSet::from([String::new()]), self.inval);
            return self.done(&changes, started);
        }
        // A URL source: one listing says whether anything changed, which
        // costs far fewer requests than re-opening every dataset.
        let stamp = source.to_str().and_then(|s| {
            let reference = self.reference.as_deref();
            repository_stamp(s, fs.remote(), reference, &mut self.head, &self.heads)
                .unwrap_or_else(|| remote_stamp(s, fs.remote(), &mut self.etags))
        });
        let rescan_due = self.rescan.is_some_and(|r| self.walked.elapsed() >= r);
        if stamp.is_some() && stamp == self.quiet && !rescan_due {
            log::debug!("refresh of {}: unchanged", source.display());
            fs.stats().record_refresh(0, started.elapsed());
            return;
        }
        self.quiet = None;
        self.walked = Instant::now();
        fs.stats().record_full_walk();
        // What the loaders log is logged once an hour, not every pass
        // (crate::logging).
        let opener = dataset::Opener::new(self.cache.clone())
            .allow_outside(self.allow_outside)
            .network(fs.network())
            .reference(self.reference.as_deref());
        let opened = crate::logging::loading(|| opener.open(source));
        let ds = match opened {
            Ok(ds) => ds,
            Err(e) => {
                fs.stats().record_refresh_failure();
                // In `.slabfs/errors` too, resolved by the pass that loads.
                let reason = super::failures::reason(&e);
                let kind = super::failures::Kind::Refresh;
                fs.failures()
                    .record(kind, "/", &reason, std::time::SystemTime::now());
                let msg = e.to_string();
                if self.warned.insert(msg.clone()) {
                    log::warn!(
                        "refresh of {}: {msg}; still serving the previous tree",
                        source.display()
                    );
                }
                return;
            }
        };
        let now: BTreeSet<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
        // A dataset that failed to load is tried again next pass, changed
        // or not (its failure may have been the server's).
        if ds.skipped.is_empty() {
            self.quiet = stamp;
        }
        let changes = fs.refresh(&ds, self.inval);
        fs.stats().set_not_shown(now.len());
        for msg in now.difference(&self.warned) {
            skipped_warning(msg, &changes);
        }
        self.warned = now;
        self.done(&changes, started);
    }

    /// The open datasets at or under `units` (directories just watched)
    /// compared with their versions now.
    fn recheck(&mut self, units: &BTreeSet<String>) {
        let started = Instant::now();
        let changes = self.fs.recheck_open(units, self.inval);
        if !changes.is_empty() {
            self.done(&changes, started);
        }
    }

    /// A partial pass: re-load the datasets at or around `paths` (absolute
    /// paths the watcher saw change), apply, log.
    fn reload(&mut self, paths: &BTreeSet<PathBuf>) {
        let started = Instant::now();
        let (fs, source) = (self.fs, self.source);
        let mut units: BTreeSet<String> = paths.iter().filter_map(|p| unit_of(source, p)).collect();
        if units.contains("") || dataset::is_store_dir(source) {
            // The source itself changed, or it is one dataset.
            return self.walk();
        }
        if units.is_empty() {
            return; // only hidden names changed
        }
        if fs.is_archive() {
            // References and aggregations read fragments anywhere: the
            // open ones are compared on every pass (their stamps cover
            // their fragments).
            units.extend(fs.open_reopened_units());
            let changes = fs.refresh_archive(&units, self.inval);
            return self.done(&changes, started);
        }
        // One dataset (a Zarr store; a file is not watched): walked.
        self.walk()
    }

    fn done(&self, changes: &Changes, started: Instant) {
        self.fs
            .stats()
            .record_refresh(changes.count(), started.elapsed());
        if !changes.kept.is_empty() {
            log::debug!(
                "refresh: kept {} (their dataset failed to open)",
                list(&changes.kept)
            );
        }
        if !changes.is_empty() {
            log::info!(
                "refresh of {} in {:?}: {}{}",
                self.source.display(),
                started.elapsed(),
                describe(changes),
                match changes.failed_invalidations {
                    0 => String::new(),
                    n => format!(" ({n} kernel cache invalidations failed)"),
                }
            );
        }
    }
}

/// The warning for `msg`, a dataset (or array) a refresh pass could not
/// open, once the pass applied `changes` ([`skipped_message`]).
fn skipped_warning(msg: &str, changes: &Changes) {
    log::warn!("{}", skipped_message(msg, &changes.kept));
}

/// What to say of `msg`, a dataset a refresh pass could not open, given
/// the arrays the pass `kept` because it could not re-open them (their
/// objects still exist: the failure may be the server's, and they are
/// tried again next pass). If some of them are the failed dataset's (the
/// message names the directory they are in), what it served before is
/// still shown and the line says so; otherwise (a dataset that never
/// loaded, or one whose objects are gone) it is "not shown".
fn skipped_message(msg: &str, kept: &[String]) -> String {
    let ours = kept
        .iter()
        .filter(|path| {
            path.rsplit_once('/')
                .is_some_and(|(dir, _)| names(msg, dir))
        })
        .count();
    if ours == 0 {
        format!("not shown: {msg}")
    } else {
        format!(
            "refresh could not re-open: {msg}; the arrays it served before stay shown as they \
             were ({ours} kept, tried again next pass)"
        )
    }
}

/// Whether `msg` names the path `dir` whole: preceded by its start or a
/// `/`, followed by its end or a character no name here ends with.
fn names(msg: &str, dir: &str) -> bool {
    msg.match_indices(dir).any(|(at, _)| {
        let before = msg[..at].chars().next_back();
        let after = msg[at + dir.len()..].chars().next();
        matches!(before, None | Some('/' | ' ' | '"' | '\''))
            && matches!(after, None | Some('/' | ':' | ' ' | '"' | '\'' | ','))
    })
}

#[cfg(test)]
mod tests {
    use crate::formats::dataset::Dataset;
    /// A refresh that keeps arrays it could not re-open says so only of
    /// the dataset they belong to; another dataset that failed is "not
    /// shown" (issue 29: every line said "not shown" though the arrays
    /// stayed, and then every line said "stay shown").
    #[test]
    fn a_failed_reopen_says_what_stays_shown() {
        let kept = vec![
            "classic_types.nc/fixed_i1".to_string(),
            "classic_types.nc/fixed_i2".to_string(),
            "store.zarr/g/a".to_string(),
        ];
        let failed = "s3://b/nc3/classic_types.nc: not a netCDF-3 file: bad magic";
        let msg = skipped_message(failed, &kept);
        assert!(
            msg.starts_with("refresh could not re-open: s3://b/nc3/classic_types.nc"),
            "{msg}"
        );
        assert!(
            msg.contains("stay shown") && msg.contains("(2 kept"),
            "{msg}"
        );
        let group = skipped_message("/data/store.zarr/g/a: chunk grid: bad shape", &kept);
        assert!(group.contains("(1 kept"), "{group}");
        for other in [
            "s3://b/nc3/new.nc: not a netCDF-3 file",
            "s3://b/nc3/xclassic_types.nc: truncated header",
            "s3://b/nc3/classic_types.nc.bak: truncated header",
        ] {
            assert_eq!(skipped_message(other, &kept), format!("not shown: {other}"));
        }
        assert_eq!(skipped_message(failed, &[]), format!("not shown: {failed}"));
    }

    use super::super::ROOT_INO;
    use super::*;
    use crate::dtype::DataType;
    use crate::engine::array::ArrayMeta;
    use crate::engine::array::{ArraySource, ChangeStamp};
    use crate::engine::cache::ChunkKey;
    use crate::engine::index::Region;
    use crate::error::{Error, Result};
    use crate::formats::dataset::Entry;
    use crate::fs::Views;
    use crate::fs::tests::{config, lookup_path, names, read_all};
    use parking_lot::Mutex;
    use std::ffi::OsStr;

    /// A 1-D uint8 array of `n` elements all equal to `value`, with a
    /// settable data stamp and its own cache id.
    struct Fake {
        meta: ArrayMeta,
        value: u8,
        stamp: Option<u64>,
        id: u64,
    }

    impl ArraySource for Fake {
        fn meta(&self) -> &ArrayMeta {
            &self.meta
        }
        fn change_stamp(&self) -> ChangeStamp {
            ChangeStamp {
                cache_id: Some(self.id),
                data: self.stamp,
                elsewhere: false,
            }
        }
        fn read_region(&self, _: &Region, out: &mut [u8]) -> Result<()> {
            out.fill(self.value);
            Ok(())
        }
    }

    fn fake(n: u64, value: u8, stamp: u64, id: u64, source: &str) -> Arc<dyn ArraySource> {
        let meta = ArrayMeta::new(source, vec![n], DataType::UInt8, vec![0]).unwrap();
        Arc::new(Fake {
            meta,
            value,
            stamp: Some(stamp),
            id,
        })
    }

    fn entry(path: &str, array: Arc<dyn ArraySource>) -> Entry {
        Entry {
            path: path.into(),
            array,
        }
    }

    fn ds(entries: Vec<Entry>) -> Dataset {
        Dataset {
            entries,
            ..Dataset::default()
        }
    }

    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
    enum Call {
        Inode(u64),
        Entry(u64, String),
    }

    /// Records the invalidations, as the kernel would receive them.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<Call>>);

    /// A [`Recorder`] the test keeps while the refresher owns its handle.
    struct Shared(Arc<Recorder>);

    impl Invalidate for Shared {
        fn inode(&self, ino: u64) -> io::Result<()> {
            self.0.inode(ino)
        }
        fn entry(&self, parent: u64, name: &str) -> io::Result<()> {
            self.0.entry(parent, name)
        }
    }

    impl Invalidate for Recorder {
        fn inode(&self, ino: u64) -> io::Result<()> {
            self.0.lock().push(Call::Inode(ino));
            Ok(())
        }
        fn entry(&self, parent: u64, name: &str) -> io::Result<()> {
            self.0.lock().push(Call::Entry(parent, name.into()));
            Ok(())
        }
    }

    impl Recorder {
        fn take(&self) -> Vec<Call> {
            let mut v = std::mem::take(&mut *self.0.lock());
            v.sort();
            v
        }
    }

    fn sorted<const N: usize>(calls: [Call; N]) -> Vec<Call> {
        let mut v = calls.to_vec();
        v.sort();
        v
    }

    /// An archive mount of the directory `root`, as `slabfs mount` makes
    /// one (tracking changes).
    fn archive_fs(root: &Path) -> Arc<SlabFs> {
        let cache = Arc::new(ChunkCache::new(1 << 20));
        let archive = crate::formats::dataset::Opener::new(cache.clone())
            .archive(root)
            .unwrap()
            .unwrap();
        Arc::new(SlabFs::of_archive(archive, 100, config(Views::default())).with_cache(cache))
    }

    fn ino(fs: &SlabFs, path: &str) -> u64 {
        lookup_path(fs, path).unwrap().ino
    }

    /// Cache an entry for source `id`, as reading its chunk would.
    fn cache_chunk(cache: &ChunkCache, id: u64) {
        let key = ChunkKey {
            source: id,
            version: 0,
            coords: vec![0].into(),
        };
        cache.get_or_load(&key, || Ok(Some(vec![0u8; 10]))).unwrap();
    }

    #[test]
    fn unchanged_sources_keep_everything() {
        let a = fake(10, 1, 100, 1, "a");
        let fs = SlabFs::new(&[entry("d/a", a.clone())], config(Views::default()));
        let before = fs.paths();
        let tree = fs.whole_tree();
        let rec = Recorder::default();
        // Re-opened: a new source object with the same metadata and stamp.
        let changes = fs.refresh(&ds(vec![entry("d/a", fake(10, 9, 100, 2, "a"))]), &rec);
        assert!(changes.is_empty(), "{changes:?}");
        assert!(rec.take().is_empty());
        assert!(Arc::ptr_eq(&tree, &fs.whole_tree()), "no new tree");
        assert_eq!(fs.paths(), before);
        // Still the old source's bytes (its cache is still valid).
        assert_eq!(read_all(&fs, "d/a"), vec![1u8; 10]);
    }

    #[test]
    fn rewritten_data_replaces_the_source_and_invalidates_its_files() {
        let cache = Arc::new(ChunkCache::new(1 << 20));
        let fs = SlabFs::new(
            &[
                entry("a", fake(10, 1, 100, 1, "a")),
                entry("b", fake(10, 5, 7, 3, "b")),
            ],
            config(Views::default()),
        )
        .with_cache(cache.clone());
        let (a, a_json, b) = (ino(&fs, "a"), ino(&fs, "a.json"), ino(&fs, "b"));
        let mtime = fs.getattr(a).unwrap().mtime;
        cache_chunk(&cache, 1);
        cache_chunk(&cache, 3);
        assert_eq!(cache.stats().entries, 2);

        let rec = Recorder::default();
        // Same metadata, new stamp: chunks were rewritten.
        let changes = fs.refresh(
            &ds(vec![
                entry("a", fake(10, 2, 101, 2, "a")),
                entry("b", fake(10, 6, 7, 4, "b")),
            ]),
            &rec,
        );
        assert_eq!(changes.changed, ["a"]);
        assert!(changes.added.is_empty() && changes.removed.is_empty());
        // Only the raw file's pages: the sidecar did not change.
        assert_eq!(rec.take(), [Call::Inode(a)]);
        assert_eq!(
            (ino(&fs, "a"), ino(&fs, "a.json"), ino(&fs, "b")),
            (a, a_json, b)
        );
        // The kernel re-reads through the same inode and gets new bytes.
        assert_eq!(fs.read(a, 0, 0, 100).unwrap(), vec![2u8; 10]);
        assert_eq!(fs.read(b, 0, 0, 100).unwrap(), vec![5u8; 10]);
        assert!(fs.getattr(a).unwrap().mtime >= mtime);
        // The old source's chunks are gone from the cache, b's are not.
        assert_eq!(cache.stats().entries, 1);
    }

    #[test]
    fn grown_array_changes_size_and_sidecar() {
        let fs = SlabFs::new(
            &[entry("a", fake(10, 1, 100, 1, "a"))],
            config(Views::default()),
        );
        let (a, a_json) = (ino(&fs, "a"), ino(&fs, "a.json"));
        let rec = Recorder::default();
        let changes = fs.refresh(&ds(vec![entry("a", fake(25, 1, 101, 2, "a"))]), &rec);
        assert_eq!(changes.changed, ["a"]);
        assert_eq!(rec.take(), sorted([Call::Inode(a), Call::Inode(a_json)]));
        assert_eq!(fs.getattr(a).unwrap().size, 25);
        let side: serde_json::Value = serde_json::from_slice(&read_all(&fs, "a.json")).unwrap();
        assert_eq!(side["shape"], serde_json::json!([25]));
        assert_eq!(fs.read(a, 0, 20, 100).unwrap(), vec![1u8; 5]);
        // Metadata alone differing (same stamp) is a change too.
        let changes = fs.refresh(&ds(vec![entry("a", fake(30, 1, 101, 3, "a"))]), &rec);
        assert_eq!(changes.changed, ["a"]);
        assert_eq!(fs.getattr(a).unwrap().size, 30);
    }

    #[test]
    fn added_and_removed_paths() {
        let cache = Arc::new(ChunkCache::new(1 << 20));
        let fs = SlabFs::new(
            &[
                entry("keep", fake(4, 1, 1, 1, "keep")),
                entry("old/x", fake(4, 2, 2, 2, "old/x")),
            ],
            config(Views::default()),
        )
        .with_cache(cache.clone());
        let keep = ino(&fs, "keep");
        let (old, old_x) = (ino(&fs, "old"), ino(&fs, "old/x"));
        cache_chunk(&cache, 2);
        let rec = Recorder::default();
        let changes = fs.refresh(
            &ds(vec![
                entry("keep", fake(4, 1, 1, 11, "keep")),
                entry("new/y", fake(4, 3, 3, 13, "new/y")),
            ]),
            &rec,
        );
        assert_eq!(changes.added, ["new/y"]);
        assert_eq!(changes.removed, ["old/x"]);
        assert_eq!(changes.count(), 2);
        // The removed names the kernel holds are forgotten (`old/x.json`
        // was never looked up); the root's listing changed.
        assert_eq!(
            rec.take(),
            sorted([
                Call::Inode(ROOT_INO),
                Call::Entry(ROOT_INO, "old".into()),
                Call::Entry(old, "x".into()),
            ])
        );
        assert_eq!(names(&fs, ""), [".slabfs", "keep", "keep.json", "new"]);
        assert_eq!(ino(&fs, "keep"), keep);
        // New paths get the numbers of their paths.
        let y = ino(&fs, "new/y");
        assert_eq!(
            y,
            super::super::inodes::ino_of("new/y", crate::fs::Kind::File)
        );
        assert_eq!(fs.read(y, 0, 0, 10).unwrap(), vec![3u8; 4]);
        // A removed node the kernel still holds is gone (a stale handle:
        // ENOENT).
        assert_eq!(fs.getattr(old_x).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(fs.read(old_x, 0, 0, 1).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(cache.stats().entries, 0);

        // Back again later: the same path, the same number, its new bytes.
        fs.refresh(
            &ds(vec![
                entry("keep", fake(4, 1, 1, 11, "keep")),
                entry("new/y", fake(4, 3, 3, 13, "new/y")),
                entry("old/x", fake(4, 2, 2, 14, "old/x")),
            ]),
            &rec,
        );
        assert_eq!(ino(&fs, "old/x"), old_x);
        assert_eq!(fs.read(old_x, 0, 0, 10).unwrap(), vec![2u8; 4]);
    }

    #[test]
    fn a_path_that_changes_kind_gets_a_new_inode() {
        let fs = SlabFs::new(
            &[entry("x", fake(4, 1, 1, 1, "x"))],
            config(Views::default()),
        );
        let x = ino(&fs, "x");
        ino(&fs, "x.json"); // the kernel holds it too
        let rec = Recorder::default();
        fs.refresh(&ds(vec![entry("x/y", fake(4, 1, 1, 2, "x/y"))]), &rec);
        let new_x = ino(&fs, "x");
        assert_ne!(new_x, x);
        assert!(fs.opendir(new_x).is_ok());
        let calls = rec.take();
        assert!(
            calls.contains(&Call::Entry(ROOT_INO, "x".into())),
            "{calls:?}"
        );
        assert!(
            calls.contains(&Call::Entry(ROOT_INO, "x.json".into())),
            "{calls:?}"
        );
    }

    #[test]
    fn arrays_of_a_dataset_that_failed_to_reopen_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let meta_file = dir.path().join("zarr.json");
        std::fs::write(&meta_file, b"{").unwrap();
        let src = meta_file.to_str().unwrap();
        let fs = SlabFs::new(
            &[
                entry("a", fake(4, 1, 1, 1, src)),
                entry("b", fake(4, 2, 2, 2, "/nonexistent/b")),
            ],
            config(Views::default()),
        );
        let rec = Recorder::default();
        let failed = Dataset {
            skipped: vec![Error::metadata(src, "truncated JSON")],
            ..Dataset::default()
        };
        let changes = fs.refresh(&failed, &rec);
        // a's metadata file is still there: kept. b's is gone: removed.
        assert_eq!(changes.kept, ["a"]);
        assert_eq!(changes.removed, ["b"]);
        assert_eq!(read_all(&fs, "a"), vec![1u8; 4]);
        assert!(lookup_path(&fs, "b").is_err());
        // A clean re-open without it removes it.
        let changes = fs.refresh(&ds(Vec::new()), &rec);
        assert_eq!(changes.removed, ["a"]);
        assert_eq!(names(&fs, ""), [".slabfs"]);
    }

    #[test]
    fn unknown_stamps() {
        // A source that cannot tell (no stamp): only metadata counts.
        let meta = |n| ArrayMeta::new("s", vec![n], DataType::UInt8, vec![0]).unwrap();
        let blind = |n, value| -> Arc<dyn ArraySource> {
            Arc::new(Fake {
                meta: meta(n),
                value,
                stamp: None,
                id: 1,
            })
        };
        let fs = SlabFs::new(&[entry("s", blind(4, 1))], config(Views::default()));
        let rec = Recorder::default();
        assert!(
            fs.refresh(&ds(vec![entry("s", blind(4, 2))]), &rec)
                .is_empty()
        );
        assert_eq!(
            fs.refresh(&ds(vec![entry("s", blind(5, 2))]), &rec).changed,
            ["s"]
        );
        // Unknown before, known now: cannot vouch for the cache: changed.
        assert_eq!(
            fs.refresh(&ds(vec![entry("s", fake(5, 3, 9, 2, "s"))]), &rec)
                .changed,
            ["s"]
        );
        // Known before, unknown now (a transient error): unchanged.
        assert!(
            fs.refresh(&ds(vec![entry("s", blind(5, 4))]), &rec)
                .is_empty()
        );
        assert_eq!(read_all(&fs, "s"), vec![3u8; 5]);
    }

    #[test]
    fn views_follow_the_array() {
        let views = Views {
            raw: true,
            json: false,
            npy: true,
            hdr: false,
        };
        let fs = SlabFs::new(&[entry("a", fake(10, 1, 1, 1, "a"))], config(views));
        let (a, npy) = (ino(&fs, "a"), ino(&fs, "a.npy"));
        let size = fs.getattr(npy).unwrap().size;
        let rec = Recorder::default();
        fs.refresh(&ds(vec![entry("a", fake(20, 2, 2, 2, "a"))]), &rec);
        assert_eq!(rec.take(), sorted([Call::Inode(a), Call::Inode(npy)]));
        let grown = fs.getattr(npy).unwrap().size;
        assert!(grown >= size + 10, "{size} -> {grown}");
        let data = read_all(&fs, "a.npy");
        assert!(data.ends_with(&[2u8; 20]) && data.starts_with(b"\x93NUMPY"));
    }

    /// A float64 CF coordinate `first + i * step` of `n` points named
    /// `name` (its own dimension), with data stamp `stamp`.
    struct Coordinate {
        meta: ArrayMeta,
        first: f64,
        step: f64,
        stamp: u64,
    }

    impl ArraySource for Coordinate {
        fn meta(&self) -> &ArrayMeta {
            &self.meta
        }
        fn change_stamp(&self) -> ChangeStamp {
            ChangeStamp {
                cache_id: None,
                data: Some(self.stamp),
                elsewhere: false,
            }
        }
        fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
            for (i, v) in out.chunks_exact_mut(8).enumerate() {
                let k = (region.start[0] + i as u64) as f64;
                v.copy_from_slice(&(self.first + k * self.step).to_ne_bytes());
            }
            Ok(())
        }
    }

    fn coordinate(name: &str, units: &str, n: u64, first: f64, stamp: u64) -> Arc<dyn ArraySource> {
        let mut meta = ArrayMeta::new(name, vec![n], DataType::Float64, vec![0; 8]).unwrap();
        meta.dimension_names = vec![Some(name.into())];
        meta.attributes.insert("units".into(), units.into());
        Arc::new(Coordinate {
            meta,
            first,
            step: 1.0,
            stamp,
        })
    }

    /// A refresh that changes, removes or adds a coordinate and leaves
    /// the array on it as it was rebuilds the array's `.hdr`: its map
    /// info follows the coordinates, and the kernel is told.
    #[test]
    fn a_header_follows_its_coordinates() {
        let views = Views {
            raw: true,
            json: false,
            npy: false,
            hdr: true,
        };
        let mut meta = ArrayMeta::new("t", vec![2, 3], DataType::UInt8, vec![0]).unwrap();
        meta.dimension_names = vec![Some("lat".into()), Some("lon".into())];
        let t: Arc<dyn ArraySource> = Arc::new(Fake {
            meta,
            value: 1,
            stamp: Some(1),
            id: 1,
        });
        let lon = coordinate("lon", "degrees_east", 3, 0.0, 1);
        let entries = |lat: Option<Arc<dyn ArraySource>>| {
            let mut e = vec![entry("t", t.clone()), entry("lon", lon.clone())];
            e.extend(lat.map(|lat| entry("lat", lat)));
            ds(e)
        };
        let map_info = |fs: &SlabFs| {
            let hdr = String::from_utf8(read_all(fs, "t.hdr")).unwrap();
            hdr.lines()
                .find_map(|l| l.strip_prefix("map info = ").map(String::from))
        };
        let lat = coordinate("lat", "degrees_north", 2, -1.0, 1);
        let fs = SlabFs::new(&entries(Some(lat)).entries, config(views));
        let hdr = ino(&fs, "t.hdr");
        assert_eq!(
            map_info(&fs).as_deref(),
            Some("{Geographic Lat/Lon, 1, 1, -0.5, -1.5, 1, -1, WGS-84}")
        );
        let rec = Recorder::default();
        let moved = coordinate("lat", "degrees_north", 2, 10.0, 2);
        let changes = fs.refresh(&entries(Some(moved)), &rec);
        assert_eq!(changes.changed, ["lat"]);
        assert!(rec.take().contains(&Call::Inode(hdr)));
        assert_eq!(
            map_info(&fs).as_deref(),
            Some("{Geographic Lat/Lon, 1, 1, -0.5, 9.5, 1, -1, WGS-84}")
        );
        fs.refresh(&entries(None), &rec);
        assert!(rec.take().contains(&Call::Inode(hdr)));
        assert_eq!(map_info(&fs), None);
        let back = coordinate("lat", "degrees_north", 2, 20.0, 3);
        fs.refresh(&entries(Some(back)), &rec);
        assert!(rec.take().contains(&Call::Inode(hdr)));
        assert_eq!(
            map_info(&fs).as_deref(),
            Some("{Geographic Lat/Lon, 1, 1, -0.5, 19.5, 1, -1, WGS-84}")
        );
    }

    #[test]
    fn stats_count_refreshes_and_lookups_see_the_swap() {
        let fs = SlabFs::new(
            &[entry("a", fake(1, 1, 1, 1, "a"))],
            config(Views::default()),
        );
        let rec = Recorder::default();
        let root_listing = names(&fs, "");
        fs.refresh(&ds(vec![entry("b", fake(1, 1, 1, 2, "b"))]), &rec);
        assert_ne!(names(&fs, ""), root_listing);
        assert!(fs.lookup(ROOT_INO, OsStr::new("a")).is_err());
        assert!(fs.lookup(ROOT_INO, OsStr::new("b")).is_ok());
        assert_eq!(
            describe(&Changes {
                added: vec!["b".into()],
                removed: vec!["a".into()],
                ..Changes::default()
            }),
            "added 1: b; removed 1: a"
        );
        let many: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
        assert_eq!(list(&many), "p0, p1, p2, p3, p4, p5, p6, p7 and 2 more");
    }

    /// The thread: a real directory source, changes picked up within a
    /// few intervals, and it stops when dropped.
    #[test]
    fn refresher_thread_follows_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.zarr");
        std::fs::create_dir(&store).unwrap();
        let zarr_json = |shape: u64| {
            format!(
                r#"{{"zarr_format":3,"node_type":"array","shape":[{shape}],"data_type":"uint8",
                "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[4]}}}},
                "chunk_key_encoding":{{"name":"default"}},"fill_value":7,
                "codecs":[{{"name":"bytes"}}]}}"#
            )
        };
        std::fs::write(store.join("zarr.json"), zarr_json(4)).unwrap();
        let fs = archive_fs(dir.path());
        assert_eq!(read_all(&fs, "s.zarr"), vec![7u8; 4]);
        let rec: Arc<Recorder> = Arc::new(Recorder::default());
        let refresher = spawn(
            fs.clone(),
            dir.path().to_path_buf(),
            RefreshConfig::walk_every(Duration::from_millis(20)),
            Box::new(Shared(rec.clone())),
            Vec::new(),
            Vec::new(),
        )
        .unwrap();
        // Grow it and write its first chunk (renamed into place).
        std::fs::create_dir(store.join("c")).unwrap();
        std::fs::write(store.join("c/.tmp"), [1u8, 2, 3, 4]).unwrap();
        std::fs::rename(store.join("c/.tmp"), store.join("c/0")).unwrap();
        std::fs::write(store.join(".zarr.json.tmp"), zarr_json(6)).unwrap();
        std::fs::rename(store.join(".zarr.json.tmp"), store.join("zarr.json")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while read_all(&fs, "s.zarr") != [1, 2, 3, 4, 7, 7] {
            assert!(
                Instant::now() < deadline,
                "not refreshed: {:?}",
                read_all(&fs, "s.zarr")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(refresher);
        let runs = fs.stats().to_json(None)["refresh"]["runs"]
            .as_u64()
            .unwrap();
        assert!(runs >= 1);
        assert!(rec.take().contains(&Call::Inode(ino(&fs, "s.zarr"))));
        // Stopped: no more passes.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            fs.stats().to_json(None)["refresh"]["runs"]
                .as_u64()
                .unwrap(),
            runs
        );
    }

    #[test]
    fn units_follow_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        let store = src.join("runs/s.zarr");
        std::fs::create_dir_all(store.join("t/c/0")).unwrap();
        std::fs::write(store.join("zarr.json"), "{}").unwrap();
        std::fs::write(store.join("t/zarr.json"), "{}").unwrap();
        std::fs::create_dir_all(src.join("runs/plain/deeper")).unwrap();
        std::fs::create_dir_all(src.join(".hidden")).unwrap();
        let unit = |rel: &str| unit_of(src, &src.join(rel));
        // Inside a store: the outermost store.
        assert_eq!(unit("runs/s.zarr/t/c/0/1").as_deref(), Some("runs/s.zarr"));
        assert_eq!(
            unit("runs/s.zarr/t/zarr.json").as_deref(),
            Some("runs/s.zarr")
        );
        // A file, new or gone, in plain directories: itself.
        assert_eq!(unit("runs/plain/x.nc").as_deref(), Some("runs/plain/x.nc"));
        assert_eq!(unit("runs/gone/x.nc").as_deref(), Some("runs/gone"));
        // A plain directory itself: all of it.
        assert_eq!(
            unit("runs/plain/deeper").as_deref(),
            Some("runs/plain/deeper")
        );
        // Zarr metadata appearing or vanishing in a plain directory: the
        // directory (it may have become or stopped being a store).
        assert_eq!(unit("runs/plain/zarr.json").as_deref(), Some("runs/plain"));
        assert_eq!(unit("runs/plain/.zarray").as_deref(), Some("runs/plain"));
        assert_eq!(unit("zarr.json").as_deref(), Some(""));
        // Hidden names are never walked; the source itself.
        assert_eq!(unit(".hidden/x.nc"), None);
        assert_eq!(unit("runs/.tmp.nc"), None);
        assert_eq!(unit("").as_deref(), Some(""));
        assert_eq!(unit_of(src, Path::new("/elsewhere/x.nc")), None);
    }

    /// The thread with a real inotify watch: a change is picked up with
    /// the periodic walk an hour away, by re-loading only what changed.
    #[test]
    fn refresher_thread_watches_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().canonicalize().unwrap();
        if watch::local_fs(&src).is_err() {
            eprintln!("skipped: {} cannot be watched", src.display());
            return;
        }
        let zarr_json = |shape: u64| {
            format!(
                r#"{{"zarr_format":3,"node_type":"array","shape":[{shape}],"data_type":"uint8",
                "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[4]}}}},
                "chunk_key_encoding":{{"name":"default"}},"fill_value":7,
                "codecs":[{{"name":"bytes"}}]}}"#
            )
        };
        std::fs::create_dir_all(src.join("d/a.zarr")).unwrap();
        std::fs::write(src.join("d/a.zarr/zarr.json"), zarr_json(4)).unwrap();
        let fs = archive_fs(&src);
        let refresher = spawn(
            fs.clone(),
            src.clone(),
            RefreshConfig {
                every: Duration::from_secs(3600),
                watch: true,
                rescan: None,
                max_watches: None,
                reference: None,
            },
            Box::new(Recorder::default()),
            Vec::new(),
            Vec::new(),
        )
        .unwrap();
        let refresh = |key: &str| fs.stats().to_json(None)["refresh"][key].clone();
        let wait = |what: &str, done: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !done() {
                assert!(
                    Instant::now() < deadline,
                    "{what}: {}",
                    fs.stats().to_json(None)
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        wait("watching and caught up", &|| {
            refresh("watching") == true && refresh("walks") == 1 && refresh("runs") == 1
        });
        // A new store in a new directory, a chunk of the old one.
        std::fs::create_dir_all(src.join("e/b.zarr")).unwrap();
        std::fs::write(src.join("e/b.zarr/zarr.json"), zarr_json(2)).unwrap();
        std::fs::create_dir_all(src.join("d/a.zarr/c")).unwrap();
        std::fs::write(src.join("d/a.zarr/c/0"), [1u8, 2, 3, 4]).unwrap();
        wait("new store and chunk", &|| {
            lookup_path(&fs, "e/b.zarr").is_ok() && read_all(&fs, "d/a.zarr") == [1, 2, 3, 4]
        });
        assert_eq!(read_all(&fs, "e/b.zarr"), [7, 7]);
        // The new directory is watched: a change inside it shows too.
        std::fs::write(src.join("e/b.zarr/zarr.json"), zarr_json(3)).unwrap();
        wait("grown", &|| read_all(&fs, "e/b.zarr") == [7, 7, 7]);
        std::fs::remove_dir_all(src.join("d")).unwrap();
        wait("removed", &|| lookup_path(&fs, "d").is_err());
        assert_eq!(refresh("walks"), 1, "no walk but the first");
        // The first walk and the growth of the open store: the new store,
        // the chunk of a store first read after it was written and the
        // removal show from the disk, no pass needed.
        assert!(
            refresh("runs").as_u64().unwrap() >= 2,
            "{}",
            fs.stats().to_json(None)
        );
        drop(refresher);
    }

    /// A fragment changed: the references file that points into it is
    /// re-loaded with it (watched, no walk), so the kernel is told to drop
    /// its cached pages (the bytes themselves are read from the fragment
    /// at each uncached read, so only the invalidation shows the re-load).
    #[test]
    fn watched_fragment_change_reaches_the_references_file() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().canonicalize().unwrap();
        if watch::local_fs(&src).is_err() {
            eprintln!("skipped: {} cannot be watched", src.display());
            return;
        }
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kerchunk/data");
        std::fs::create_dir(src.join("refs")).unwrap();
        for name in ["classic.json", "classic.nc"] {
            std::fs::copy(data.join(name), src.join("refs").join(name)).unwrap();
        }
        let fs = archive_fs(&src);
        let rec: Arc<Recorder> = Arc::new(Recorder::default());
        let refresher = spawn(
            fs.clone(),
            src.clone(),
            RefreshConfig {
                every: Duration::from_secs(3600),
                watch: true,
                rescan: None,
                max_watches: None,
                reference: None,
            },
            Box::new(Shared(rec.clone())),
            Vec::new(),
            Vec::new(),
        )
        .unwrap();
        let refresh = |key: &str| fs.stats().to_json(None)["refresh"][key].clone();
        let deadline = Instant::now() + Duration::from_secs(10);
        while refresh("runs") != 1 {
            assert!(Instant::now() < deadline, "no catch-up walk");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Used once the refresher runs, as in a mount (an archive watches
        // the directories in use).
        let before = read_all(&fs, "refs/classic.json/scale");
        assert_eq!(before, read_all(&fs, "refs/classic.nc/scale"));
        let refs_scale = ino(&fs, "refs/classic.json/scale");
        assert!(rec.take().is_empty(), "nothing changed yet");
        // Rewrite `scale`'s 8 bytes in the netCDF file, in place.
        let nc = src.join("refs/classic.nc");
        let mut bytes = std::fs::read(&nc).unwrap();
        for b in &mut bytes[712..720] {
            *b ^= 0x11;
        }
        std::fs::write(&nc, &bytes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut calls = Vec::new();
        while !calls.contains(&Call::Inode(refs_scale)) {
            assert!(
                Instant::now() < deadline,
                "references file not re-loaded: {calls:?}; {}",
                fs.stats().to_json(None)
            );
            std::thread::sleep(Duration::from_millis(10));
            calls.extend(rec.take());
        }
        assert_eq!(ino(&fs, "refs/classic.json/scale"), refs_scale);
        let netcdf = read_all(&fs, "refs/classic.nc/scale");
        assert_ne!(netcdf, before);
        assert_eq!(read_all(&fs, "refs/classic.json/scale"), netcdf);
        assert_eq!(refresh("walks"), 1, "found by a walk");
        drop(refresher);
    }
}
