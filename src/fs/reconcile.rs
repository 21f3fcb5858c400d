//! What a refresh changes: a fresh load of a dataset against the tree that
//! serves it, the new tree, and what the kernel is told. Plain functions of
//! the trees and the inode table; when to refresh and what to load is
//! [`super::refresh`]'s (scheduling only).
//!
//! Operators keep mounts alive for months while writers append time steps,
//! rewrite chunks and add datasets. The refresh thread finds what changed
//! ([`super::refresh`], "Finding changes"), loads it again, and hands the
//! result to [`SlabFs::refresh`] (a whole source) of a mount of one
//! dataset, or asks [`SlabFs::refresh_archive`] to open the
//! changed datasets of an archive again, which:
//!
//! 1. **Compares** each array path with the tree it serves. An array is
//!    *unchanged* when its metadata ([`crate::engine::array::ArrayMeta`]: shape,
//!    dtype, fill value, attributes...) is equal and its data
//!    [`ChangeStamp`] is the same (for Zarr: a hash of the name, length,
//!    mtime, ctime and inode of every file under the array's prefix, see
//!    [`crate::storage::Store::change_stamp`]). An unchanged array keeps its
//!    existing source object, so its decoded chunks in the cache stay
//!    valid and nothing is invalidated. A changed array takes the freshly
//!    opened source (a new cache identity). Paths that appear are added,
//!    paths that vanish are removed.
//! 2. **Swaps** in a new [`Tree`] built from that registry. Inode numbers
//!    are a function of the path ([`super::inodes`]), so open file
//!    descriptors and the kernel's dentries stay valid.
//! 3. **Invalidates** the kernel's caches through [`Invalidate`] (in the
//!    mount, fuser's `Notifier`), for what the kernel holds only (the
//!    inode table knows): the attributes and pages of every inode whose
//!    content changed (a changed array file, its views and sidecar, a
//!    directory whose listing changed), and the directory entry of every
//!    removed or re-kinded name ([`tree::diff`]). A dataset of an archive
//!    that changed while it was not open has every node the kernel holds
//!    of it invalidated, and its entry in its directory. The swap happens first, so a
//!    request arriving after an invalidation is answered from the new
//!    tree; a read already in flight holds its page locked, and the
//!    kernel's invalidation waits for it and then drops that page too, so
//!    no stale page survives in the page cache or in a `mmap`.
//! 4. **Forgets** the replaced sources' chunks in the cache
//!    ([`crate::engine::cache::ChunkCache::forget_source`]) after the
//!    invalidations, once reads that started on the old tree are done.
//!
//! A chunk rewritten in place while it is read is handled a level below:
//! the store re-reads a file whose identity changed during the read (see
//! [`crate::storage::local::fs_store`]), so a read never mixes two versions of one chunk.
//!
//! # Failures
//!
//! A source that cannot be re-opened at all (unreadable, mid-rewrite
//! metadata) keeps serving the previous tree, with a warning when the
//! reason changes. An array missing from a re-open that *reported
//! failures* is kept as it was when its metadata file still exists (a
//! `stat`; a HEAD for a URL source): its
//! dataset failed to open this time (a half-written `zarr.json`), which is
//! no reason to make its files vanish under running programs. It is
//! dropped once a re-open succeeds without it or its metadata file is gone.
//!
//! # What the kernel sees
//!
//! - A grown array: `stat` shows the new size as soon as the refresh ran
//!   (attributes invalidated); an open file descriptor reads the new bytes.
//! - A rewritten chunk: the new values on the next read through any
//!   descriptor, `mmap` included (pages invalidated).
//! - A removed array: ENOENT on lookup; a descriptor still open on it gets
//!   ENOENT on read (NFS-style "stale" semantics), until a file of that
//!   path appears again: the same number, the new file's bytes.
//!

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::datasets::Datasets;
use super::georef::Coordinates;
use super::tree::{self, DirDoc, Tracked, Tree, name_of, parent_of, usable_entries};
use super::{Kind, SlabFs, failures};
use crate::engine::array::{ArraySource, ChangeStamp};
use crate::formats::dataset::Dataset;
use crate::storage::remote::{self, Remote};

/// What a refresh tells the kernel. The mount passes fuser's `Notifier`
/// (see [`super::fuse`]); tests record the calls.
pub trait Invalidate: Send + Sync {
    /// Drop the cached attributes and all cached pages of `ino`.
    fn inode(&self, ino: u64) -> io::Result<()>;
    /// Drop the cached directory entry `name` of directory `parent`.
    fn entry(&self, parent: u64, name: &str) -> io::Result<()>;
}

/// What one refresh found, by array path (sorted).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    /// Missing from the re-open, but kept: their dataset failed to open.
    pub kept: Vec<String>,
    /// Directories whose attributes appeared, changed or went away.
    pub attributes: Vec<String>,
    /// Invalidations the kernel refused (other than "not cached").
    pub failed_invalidations: usize,
    /// Open datasets of an archive opened again to compare (those whose
    /// version did not say they were unchanged).
    pub reopened: usize,
}

impl Changes {
    /// Nothing was added, removed or changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.attributes.is_empty()
    }

    /// Paths added, removed or changed.
    pub fn count(&self) -> usize {
        self.added.len() + self.removed.len() + self.changed.len() + self.attributes.len()
    }
}

/// Whether an array with metadata and stamp `new` is the one `old` serves.
fn unchanged(old: &Tracked, new: &dyn ArraySource, stamp: &ChangeStamp) -> bool {
    let same_data = match (old.stamp.data, stamp.data) {
        (Some(a), Some(b)) => a == b,
        // Could not look this time (a transient error): trust the old.
        (_, None) => true,
        // Could not look before, can now: we cannot know what was cached.
        (None, Some(_)) => false,
    };
    same_data && old.array.meta() == new.meta()
}

impl SlabFs {
    /// Bring the tree of a mount of one dataset in step with `ds`, a fresh
    /// `Opener::open` of the source, telling the kernel what changed
    /// through `inval`. See the module docs. (An archive's datasets are
    /// refreshed by [`SlabFs::refresh_archive`].)
    pub fn refresh(&self, ds: &Dataset, inval: &dyn Invalidate) -> Changes {
        let _one_at_a_time = self.refresh_lock.lock();
        let Datasets::Whole(whole) = &self.datasets else {
            log::debug!("refresh of a whole dataset asked of an archive: ignored");
            return Changes::default();
        };
        let old = whole.read().clone();
        let (mut changes, new, stale) = self.reconcile(&old, ds);
        if let Some(new) = new {
            let new = Arc::new(new);
            *whole.write() = new.clone();
            changes.failed_invalidations = self.invalidate(&old, &new, inval);
            self.forget_stale(&stale);
        }
        self.loaded_failures("", ds, &changes);
        changes
    }

    /// Tell `.slabfs/errors` that the dataset at `unit` loaded again as
    /// `ds`, with `changes`: its open and refresh failures, and the
    /// skipped ones it no longer skips, are resolved; so are the read
    /// failures of the arrays replaced or removed (new data, or none).
    fn loaded_failures(&self, unit: &str, ds: &Dataset, changes: &Changes) {
        let now = SystemTime::now();
        let reasons = super::skipped_reasons(ds);
        self.failures
            .loaded(&failures::mount_path(unit), &reasons, now);
        for path in changes.changed.iter().chain(&changes.removed) {
            self.failures.replaced(&failures::mount_path(path), now);
        }
    }

    /// Bring the archive's datasets at or under the mount paths `units`
    /// (datasets or plain directories the watcher saw change; `""`: all)
    /// in step with the disk: each one open is opened again and compared
    /// with the tree it serves, which the new one replaces; one not open
    /// costs nothing but telling the kernel to forget what it holds of it
    /// (its entry in its directory, the attributes and pages of its nodes),
    /// so that its next use opens it as it is now.
    pub fn refresh_archive(&self, units: &BTreeSet<String>, inval: &dyn Invalidate) -> Changes {
        self.archive_pass(units, inval, true)
    }

    /// The open datasets at or under `units` compared with their versions
    /// now (and opened again if changed), nothing else: a directory just
    /// watched, whose open datasets may have changed between their open
    /// and the watch.
    pub fn recheck_open(&self, units: &BTreeSet<String>, inval: &dyn Invalidate) -> Changes {
        self.archive_pass(units, inval, false)
    }

    fn archive_pass(
        &self,
        units: &BTreeSet<String>,
        inval: &dyn Invalidate,
        closed_too: bool,
    ) -> Changes {
        let _one_at_a_time = self.refresh_lock.lock();
        let Datasets::Archive(lazy) = &self.datasets else {
            log::debug!("refresh of an archive asked of a whole dataset: ignored");
            return Changes::default();
        };
        let units: BTreeSet<&str> = units.iter().map(String::as_str).collect();
        let mut changes = Changes::default();
        let mut failed = 0;
        let now = SystemTime::now();
        let all = units.contains("");
        for (unit, old, version) in lazy.opened() {
            if !all && !under_any(&unit, &units) {
                continue;
            }
            let found = lazy.archive.find(&unit).filter(|f| f.is_dataset());
            // Its version, told without opening it: the same, nothing to do.
            let now_version = found.and_then(|f| lazy.archive.version(&unit, f));
            if version.is_some() && now_version == version {
                continue;
            }
            changes.reopened += 1;
            let opened = match found {
                None => Ok(None),
                Some(found) => crate::logging::loading(|| lazy.archive.open(&unit, found)),
            };
            let ds = match opened {
                Ok(Some(ds)) => ds,
                // Gone (or no dataset any more): everything it showed goes.
                Ok(None) => {
                    self.failures.gone(&failures::mount_path(&unit), now);
                    lazy.close(&unit);
                    changes.removed.extend(old.arrays.keys().cloned());
                    let empty = Tree::build(
                        &unit,
                        BTreeMap::new(),
                        BTreeMap::new(),
                        &self.config,
                        None,
                        now,
                    );
                    failed += self.invalidate(&old, &empty, inval);
                    self.forget_stale(&old.arrays.values().map(|t| t.stamp).collect::<Vec<_>>());
                    continue;
                }
                Err(e) => {
                    self.stats.record_refresh_failure();
                    log::warn!("refresh could not re-open /{unit}: {e}; it stays shown as it was");
                    let (at, reason) = (failures::mount_path(&unit), failures::reason(&e));
                    self.failures
                        .record(failures::Kind::Refresh, &at, &reason, SystemTime::now());
                    changes.kept.extend(old.arrays.keys().cloned());
                    continue;
                }
            };
            let (mut c, new, stale) = self.reconcile(&old, &ds);
            self.ask_recheck(&unit, ds.recheck_in);
            let new = new.map(Arc::new);
            // The version taken before this open goes with the tree served
            // (an unchanged one too: the next pass need not open it), not
            // when something failed (tried again at the next pass).
            let served = new.clone().unwrap_or(old.clone());
            let version =
                super::datasets::told_by(now_version, &served).filter(|_| ds.skipped.is_empty());
            let swapped = lazy.replace(&unit, &old, served, version, ds.skipped.len());
            if let Some(new) = new {
                if swapped {
                    failed += self.invalidate(&old, &new, inval);
                } else {
                    // Closed (or opened again) by a request meanwhile: what
                    // the kernel holds of it may be of the old version.
                    failed += self.invalidate_held(&unit, |_| true, inval);
                }
                self.forget_stale(&stale);
            }
            self.loaded_failures(&unit, &ds, &c);
            changes.added.append(&mut c.added);
            changes.removed.append(&mut c.removed);
            changes.changed.append(&mut c.changed);
            changes.kept.append(&mut c.kept);
            changes.attributes.append(&mut c.attributes);
        }
        // What the kernel holds of the datasets that are not open, and the
        // names themselves (added, removed, or changed what they are).
        // A dataset closed to make room may have changed since (on disk, a
        // directory moved in): its nodes the kernel holds are invalidated,
        // for a changed path, a changed directory (every dataset under it)
        // and a full pass (`""`: those the kernel may keep content of,
        // unless its version when it was closed is its version now).
        // A full pass does not know what changed: it asks.
        let changed = units.contains("").then(|| self.closed_changed(lazy));
        for unit in units.iter().filter(|_| closed_too) {
            failed += self.invalidate_held(
                unit,
                |u| lazy.peek(u).is_none() && changed.as_ref().is_none_or(|c| c(u)),
                inval,
            );
            if unit.is_empty() {
                continue;
            }
            if let Some(parent) = self.inodes.held(parent_of(unit), Kind::Directory) {
                failed +=
                    count_failed(&format!("entry {unit}"), inval.entry(parent, name_of(unit)));
            }
        }
        if closed_too {
            failed += self.retry_failed(lazy, &units, inval);
        }
        for list in [
            &mut changes.added,
            &mut changes.removed,
            &mut changes.changed,
            &mut changes.kept,
            &mut changes.attributes,
        ] {
            list.sort();
        }
        changes.failed_invalidations = failed;
        changes
    }

    /// The datasets at or under `units` (`""`: all) whose last open
    /// failed, tried again when their version says they changed (or
    /// cannot say), forgotten when gone: a dataset fixed leaves
    /// `.slabfs/errors` at the refresh that sees it, not at the next
    /// request for it. What the kernel holds of one that opens now (its
    /// failed sidecar's attributes, its directory's entry) is dropped.
    /// Returns the invalidations that failed.
    fn retry_failed(
        &self,
        lazy: &super::datasets::Lazy,
        units: &BTreeSet<&str>,
        inval: &dyn Invalidate,
    ) -> usize {
        let mut failed = 0;
        for (unit, then) in lazy.failed() {
            if !units.contains("") && !under_any(&unit, units) {
                continue;
            }
            let Some(found) = lazy.archive.find(&unit).filter(|f| f.is_dataset()) else {
                lazy.forget_failed(&unit);
                self.failures
                    .gone(&failures::mount_path(&unit), SystemTime::now());
                continue;
            };
            if then.is_some() && lazy.archive.version(&unit, found) == then {
                continue;
            }
            // A failure again is recorded by the open, which logs it.
            if let Ok(Some(_)) = self.open_unit(lazy, &unit, Some(found)) {
                log::info!("refresh: /{unit} opens now");
                failed += self.invalidate_held(&unit, |_| true, inval);
                if let Some(parent) = self.inodes.held(parent_of(&unit), Kind::Directory) {
                    let entry = inval.entry(parent, name_of(&unit));
                    failed += count_failed(&format!("entry {unit}"), entry);
                }
            }
        }
        failed
    }

    /// What re-loading gave (`ds`) against the tree `old` serves: the
    /// changes, the tree to serve instead (`None`: nothing changed) and
    /// the stamps of the sources it no longer serves. With `units`, `ds`
    /// covers those mount paths only and the rest of `old` stays.
    fn reconcile(&self, old: &Tree, ds: &Dataset) -> (Changes, Option<Tree>, Vec<ChangeStamp>) {
        let mut changes = Changes::default();
        let mut stale: Vec<ChangeStamp> = Vec::new();
        let mut arrays: BTreeMap<String, Tracked> = BTreeMap::new();
        let usable = usable_entries(&ds.entries, false);
        let coords = Coordinates::new(&usable);
        for (path, array) in &usable {
            let stamp = array.change_stamp();
            let tracked = match old.arrays.get(path) {
                Some(t) if unchanged(t, array.as_ref(), &stamp) => t.clone(),
                Some(t) => {
                    changes.changed.push(path.clone());
                    stale.push(t.stamp);
                    Tracked::new(path, array.clone(), stamp, &self.config, &coords)
                }
                None => {
                    changes.added.push(path.clone());
                    Tracked::new(path, array.clone(), stamp, &self.config, &coords)
                }
            };
            arrays.insert(path.clone(), tracked);
        }
        for (path, t) in &old.arrays {
            if arrays.contains_key(path) {
                continue;
            }
            if !ds.skipped.is_empty() && source_exists(&t.array.meta().source, self.remote()) {
                changes.kept.push(path.clone());
                arrays.insert(path.clone(), t.clone());
            } else {
                changes.removed.push(path.clone());
                stale.push(t.stamp);
            }
        }
        // An unchanged array whose `.hdr` coordinates changed, came or
        // went gets its header built again (same source, same stamp).
        let moved: BTreeSet<&str> = [&changes.changed, &changes.added, &changes.removed]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        for (path, t) in arrays.iter_mut() {
            if !moved.contains(path.as_str())
                && t.georef_from.iter().any(|p| moved.contains(p.as_str()))
            {
                *t = Tracked::new(path, t.array.clone(), t.stamp, &self.config, &coords);
            }
        }
        // Directories' attributes: the same rules, compared by value.
        let mut directories: BTreeMap<String, Arc<DirDoc>> = BTreeMap::new();
        for (path, d) in &ds.directories {
            let doc = match old.directories.get(path) {
                Some(o) if o.dir == *d => o.clone(),
                _ => {
                    changes.attributes.push(path.clone());
                    DirDoc::new(path, d.clone(), &self.config)
                }
            };
            directories.insert(path.clone(), doc);
        }
        for (path, o) in &old.directories {
            if directories.contains_key(path) {
                continue;
            }
            // Its file failed to open this time and still exists: kept as
            // it was.
            if !ds.skipped.is_empty() && source_exists(&o.dir.source, self.remote()) {
                directories.insert(path.clone(), o.clone());
            } else {
                changes.attributes.push(path.clone());
            }
        }
        changes.attributes.sort();
        if changes.is_empty() {
            return (changes, None, stale);
        }
        let new = Tree::build(
            &old.root,
            arrays,
            directories,
            &self.config,
            Some(old),
            SystemTime::now(),
        );
        (changes, Some(new), stale)
    }

    /// Which datasets that are not open a full pass tells the kernel
    /// about: those it may keep content of ([`super::inodes::Known::cached`]:
    /// pages of a file read, a listing; attributes and names expire by
    /// themselves and are asked again, of a fresh open), unless closed to
    /// make room with a version ([`super::datasets::Lazy::closed_version`])
    /// that is still its version now. A changed one's version now is kept
    /// for the next pass (the caller tells the kernel); the versions of
    /// the others are forgotten.
    fn closed_changed(&self, lazy: &super::datasets::Lazy) -> impl Fn(&str) -> bool + use<> {
        let cached = self.inodes.cached_units_under("");
        let mut same: BTreeSet<Arc<str>> = BTreeSet::new();
        let mut now = BTreeMap::new();
        if lazy.any_closed() {
            for unit in &cached {
                let Some(then) = lazy.closed_version(unit) else {
                    continue;
                };
                let Some(v) = lazy
                    .archive
                    .find(unit)
                    .filter(|f| f.is_dataset())
                    .and_then(|f| lazy.archive.version(unit, f))
                else {
                    continue;
                };
                if v == then {
                    same.insert(unit.clone());
                }
                now.insert(unit.clone(), v);
            }
        }
        lazy.keep_closed(|u| now.contains_key(u), |u| now.get(u).copied());
        move |u: &str| cached.contains(u) && !same.contains(u)
    }

    /// Invalidate the attributes and pages of every node the kernel holds
    /// in the datasets at or under `unit` for which `closed` holds;
    /// returns how many notifications failed.
    fn invalidate_held(
        &self,
        unit: &str,
        closed: impl Fn(&str) -> bool,
        inval: &dyn Invalidate,
    ) -> usize {
        let mut failed = 0;
        for (ino, known) in self.inodes.in_units_under(unit) {
            if known.unit.as_deref().is_some_and(&closed) {
                failed += count_failed(&format!("inode {ino} ({})", known.path), inval.inode(ino));
            }
        }
        failed
    }

    /// Drop the cached chunks of sources a refresh replaced (after the
    /// kernel was told, once reads that started on the old tree are done).
    fn forget_stale(&self, stale: &[ChangeStamp]) {
        if let Some(cache) = &self.cache {
            for id in stale.iter().filter_map(|s| s.cache_id) {
                cache.forget_source(id);
            }
        }
    }

    /// Tell the kernel what differs between `old` and `new` (one
    /// dataset's trees), of what it holds; returns how many notifications
    /// failed.
    fn invalidate(&self, old: &Tree, new: &Tree, inval: &dyn Invalidate) -> usize {
        let tree::Diff { gone, changed } = tree::diff(old, new);
        let mut failed = 0;
        // Names that went away, or changed kind: forget the dentry so the
        // next lookup asks us.
        for (path, kind) in gone {
            if self.inodes.held(path, kind).is_none() {
                continue; // never looked up: no dentry to drop
            }
            if let Some(parent) = self.inodes.held(parent_of(path), Kind::Directory) {
                failed +=
                    count_failed(&format!("entry {path}"), inval.entry(parent, name_of(path)));
            }
        }
        // Nodes that stay but whose bytes, size or listing changed.
        for (path, kind) in changed {
            if let Some(ino) = self.inodes.held(path, kind) {
                let what = if path.is_empty() { "/" } else { path };
                failed += count_failed(&format!("inode {ino} ({what})"), inval.inode(ino));
            }
        }
        failed
    }
}

/// 1 if the notification `what` failed for another reason than the kernel
/// not holding it (ENOENT), else 0; logged at debug.
pub(super) fn count_failed(what: &str, r: io::Result<()>) -> usize {
    match r {
        Ok(()) => 0,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => 0,
        Err(e) => {
            log::debug!("invalidating {what}: {e}");
            1
        }
    }
}

/// Whether the metadata file or object an array was read from (its
/// [`crate::engine::array::ArrayMeta::source`]) still exists: a `stat`
/// on disk, a HEAD for a URL. A HEAD that fails (a server down, a timeout)
/// answers "yes": not knowing is no reason to make files vanish under
/// running programs; the next pass asks again.
fn source_exists(source: &str, remote: Option<&Remote>) -> bool {
    if !remote::is_url(source) {
        return Path::new(source).exists();
    }
    // A URL with no remote state to ask through: not knowing.
    let Some(remote) = remote else { return true };
    let exists = remote::Location::parse(source)
        .and_then(|loc| remote.connect(&loc))
        .and_then(|r| remote::RemoteStore::new(r).exists(""));
    match exists {
        Ok(e) => e,
        Err(e) => {
            log::debug!("refresh: whether {source} still exists: {e}; assuming it does");
            true
        }
    }
}

pub(super) fn under_any(path: &str, units: &BTreeSet<&str>) -> bool {
    let mut p = path;
    loop {
        if units.contains(p) {
            return true;
        }
        match p.rsplit_once('/') {
            Some((parent, _)) => p = parent,
            None => return false,
        }
    }
}
