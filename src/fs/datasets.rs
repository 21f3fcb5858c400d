//! Where the mount's trees come from: one tree for the whole mount, or an
//! archive whose datasets are opened on first use and kept in a bounded
//! cache.
//!
//! A mount of one dataset (a file, a Zarr store, a URL), or of arrays a
//! caller built ([`super::SlabFs::new`]), holds one [`Tree`] for good
//! ([`Datasets::Whole`]). A mount of a directory holds an [`Archive`] and
//! the trees of the datasets opened so far ([`Datasets::Archive`]):
//!
//! - A directory of the archive is listed from the disk when it is read
//!   (`readdir`), never kept: a file added or removed shows at the next
//!   listing, and a directory no one lists costs nothing.
//! - A dataset is opened (its header parsed, its arrays' sidecars made)
//!   the first time something inside it is asked for, or its own `stat`
//!   when it is one file (a single-array Zarr store). `stat` of a dataset
//!   that is a directory needs no open, so `ls -l` of a directory of
//!   datasets opens none of them.
//! - At most `max_open` datasets stay open, least recently used first out.
//!   Inode numbers are a function of the path ([`super::inodes`]), so a
//!   dataset evicted and opened again shows the same numbers; what an
//!   eviction costs is that open again (and its arrays' decoded chunks,
//!   which the chunk cache keys by source and drops in time).
//! - A dataset that fails to open is not kept: the request fails (EIO,
//!   with a warning naming the file and why, once an hour per message:
//!   [`crate::logging`]) and the next one tries again.
//!
//! Two requests opening one dataset at once may both open it; the first
//! tree stored wins and the other is dropped, so every request afterwards
//! sees one tree.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use lru::LruCache;
use parking_lot::{Mutex, RwLock};

use super::tree::{DirDoc, Tracked, Tree, usable_entries};
use super::{FsConfig, FsError, FsResult};
use crate::engine::array::ChangeStamp;
use crate::formats::dataset::Dataset;
use crate::formats::dataset::archive::{Archive, Found};

/// Datasets opened at once by default (`--max-open-datasets`): a small
/// netCDF file's tree is a few KiB, a Zarr store's with its chunk index a
/// few tens; the bound keeps a walk of a large archive from holding all
/// of them.
pub const DEFAULT_MAX_OPEN: usize = 1000;

/// The mount's trees. See the module docs.
pub(super) enum Datasets {
    Whole(RwLock<Arc<Tree>>),
    Archive(Lazy),
}

/// An archive's datasets, opened on demand.
pub(super) struct Lazy {
    pub archive: Archive,
    open: Mutex<LruCache<String, Arc<Tree>>>,
    /// Opens that succeeded, failed, and datasets closed to make room.
    opens: AtomicU64,
    failures: AtomicU64,
    evictions: AtomicU64,
}

/// What `.slabfs/stats` shows of an archive's datasets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LazyStats {
    pub open: usize,
    pub max_open: usize,
    pub opens: u64,
    pub failures: u64,
    pub evictions: u64,
}

impl Lazy {
    pub fn new(archive: Archive, max_open: usize) -> Lazy {
        let cap = NonZeroUsize::new(max_open.max(1)).expect("at least one");
        Lazy {
            archive,
            open: Mutex::new(LruCache::new(cap)),
            opens: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> LazyStats {
        let open = self.open.lock();
        LazyStats {
            open: open.len(),
            max_open: open.cap().get(),
            opens: self.opens.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }

    /// The tree of the dataset at `unit` if it is open (marked used).
    pub fn get(&self, unit: &str) -> Option<Arc<Tree>> {
        self.open.lock().get(unit).cloned()
    }

    /// The tree of the dataset at `unit` if it is open, without marking
    /// it used (a refresh looking is no use).
    pub fn peek(&self, unit: &str) -> Option<Arc<Tree>> {
        self.open.lock().peek(unit).cloned()
    }

    /// The datasets open now, by mount path.
    pub fn opened(&self) -> Vec<(String, Arc<Tree>)> {
        self.open
            .lock()
            .iter()
            .map(|(u, t)| (u.clone(), t.clone()))
            .collect()
    }

    /// The tree of the dataset at `unit`, opened if it is not (`found`:
    /// what the archive says it is). `Ok(None)`: there is no dataset at
    /// `unit` (a plain directory, or a JSON file that holds no
    /// references).
    pub fn open(
        &self,
        unit: &str,
        found: Found,
        config: &FsConfig,
        now: SystemTime,
    ) -> FsResult<Option<Arc<Tree>>> {
        if let Some(t) = self.get(unit) {
            return Ok(Some(t));
        }
        if !found.is_dataset() {
            return Ok(None);
        }
        let opened = crate::logging::loading(|| {
            let r = self.archive.open(unit, found);
            if let Err(e) = &r {
                log::warn!("not shown: {e}");
            }
            if let Ok(Some(ds)) = &r {
                for s in &ds.skipped {
                    log::warn!("not shown: {s}");
                }
            }
            r
        });
        if opened.is_err() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        let Some(ds) = opened.map_err(|e| FsError::Dataset {
            path: unit.to_string(),
            source: Box::new(e),
        })?
        else {
            return Ok(None);
        };
        let tree = Arc::new(tree_of(unit, &ds, config, None, now));
        let mut open = self.open.lock();
        if let Some(t) = open.get(unit) {
            return Ok(Some(t.clone())); // opened meanwhile: one tree
        }
        self.opens.fetch_add(1, Ordering::Relaxed);
        if let Some((evicted, _)) = open.push(unit.to_string(), tree.clone()) {
            log::debug!("closed /{evicted} to make room for /{unit}");
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Some(tree))
    }

    /// Put `new` in place of `old` as the tree of `unit`, if `old` is
    /// still the one open (a refresh; not if it was evicted meanwhile).
    pub fn replace(&self, unit: &str, old: &Arc<Tree>, new: Arc<Tree>) -> bool {
        let mut open = self.open.lock();
        match open.peek_mut(unit) {
            Some(t) if Arc::ptr_eq(t, old) => {
                *t = new;
                true
            }
            _ => false,
        }
    }

    /// Close the dataset at `unit` (a refresh found it gone).
    pub fn close(&self, unit: &str) {
        self.open.lock().pop(unit);
    }
}

/// The tree of the dataset `ds` at mount path `unit` (a first open when
/// `prev` is `None`).
pub(super) fn tree_of(
    unit: &str,
    ds: &Dataset,
    config: &FsConfig,
    prev: Option<&Tree>,
    now: SystemTime,
) -> Tree {
    let directories = ds
        .directories
        .iter()
        .map(|(path, d)| (path.clone(), DirDoc::new(path, d.clone(), config)))
        .collect();
    let arrays = usable_entries(&ds.entries, prev.is_none())
        .into_iter()
        .map(|(path, array)| {
            let stamp = if config.track_changes {
                array.change_stamp()
            } else {
                ChangeStamp::default()
            };
            let t = Tracked::new(&path, array, stamp, config);
            (path, t)
        })
        .collect();
    Tree::build(unit, arrays, directories, config, prev, now)
}
