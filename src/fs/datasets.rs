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
//!   [`crate::logging`]) and the next one tries again. The failure goes to
//!   `.slabfs/errors` ([`super::failures`]: each attempt counted, resolved
//!   by the open that succeeds), and the dataset's version then is kept
//!   (at most [`MAX_FAILED`] datasets), so that a refresh that finds it
//!   changed tries again without waiting for a request
//!   ([`Lazy::failed`]).
//!
//! Two requests opening one dataset at once may both open it; the first
//! tree stored wins and the other is dropped, so every request afterwards
//! sees one tree.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use lru::LruCache;
use parking_lot::{Mutex, RwLock};

use super::failures::{Failures, Kind as FailureKind, mount_path, reason};
use super::georef::Coordinates;
use super::tree::{DirDoc, Tracked, Tree, usable_entries};
use super::{FsConfig, FsError, FsResult};
use crate::engine::array::ChangeStamp;
use crate::formats::dataset::Dataset;
use crate::formats::dataset::Found;
use crate::formats::dataset::archive::Archive;

/// Datasets opened at once by default (`--max-open-datasets`): a small
/// netCDF file's tree is a few KiB, a Zarr store's with its chunk index a
/// few tens; the bound keeps a walk of a large archive from holding all
/// of them.
pub const DEFAULT_MAX_OPEN: usize = crate::formats::entry::DEFAULT_MAX_OPEN;

/// Most `*.json` files remembered as holding no references.
const NOT_REFERENCES: usize = 4096;

/// Most datasets that failed to open remembered with their version, for
/// a refresh to try again those that changed (as many as
/// `.slabfs/errors` shows).
pub const MAX_FAILED: usize = super::failures::MAX_ENTRIES;

/// The mount's trees. See the module docs.
pub(super) enum Datasets {
    Whole(RwLock<Arc<Tree>>),
    Archive(Box<Lazy>),
}

/// An archive's datasets, opened on demand.
pub(super) struct Lazy {
    pub archive: Archive,
    open: Mutex<LruCache<String, Opened>>,
    /// The versions ([`Archive::version`]) of datasets closed to make
    /// room, for a refresh to tell whether what the kernel still holds of
    /// them changed; pruned by [`Lazy::keep_closed`] to those it holds.
    closed: Mutex<HashMap<String, u64>>,
    /// `*.json` files found to hold no references, with their modification
    /// time and length then: not read again at each listing while those
    /// stay the same.
    not_references: Mutex<LruCache<String, (SystemTime, u64)>>,
    /// Datasets whose last open failed, with their version then (`None`
    /// when not told, or changes are not tracked).
    failed: Mutex<LruCache<String, Option<u64>>>,
    /// Opens that succeeded, failed, and datasets closed to make room.
    opens: AtomicU64,
    failures: AtomicU64,
    evictions: AtomicU64,
}

/// An open dataset: its tree, and its version when it was opened
/// ([`Archive::version`], `None` when not told).
struct Opened {
    tree: Arc<Tree>,
    version: Option<u64>,
    /// Its arrays (and files) that could not be loaded, not shown.
    not_shown: usize,
}

/// What `.slabfs/stats` shows of an archive's datasets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LazyStats {
    pub open: usize,
    pub max_open: usize,
    pub opens: u64,
    pub failures: u64,
    pub evictions: u64,
    /// Arrays and files of the open datasets not shown (they could not be
    /// loaded).
    pub not_shown: u64,
}

impl Lazy {
    pub fn new(archive: Archive, max_open: usize) -> Lazy {
        let cap = NonZeroUsize::new(max_open.max(1)).expect("at least one");
        Lazy {
            archive,
            open: Mutex::new(LruCache::new(cap)),
            closed: Mutex::new(HashMap::new()),
            not_references: Mutex::new(LruCache::new(
                NonZeroUsize::new(NOT_REFERENCES).expect("not zero"),
            )),
            failed: Mutex::new(LruCache::new(
                NonZeroUsize::new(MAX_FAILED).expect("not zero"),
            )),
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
            not_shown: open.iter().map(|(_, o)| o.not_shown as u64).sum(),
        }
    }

    /// The tree of the dataset at `unit` if it is open (marked used).
    pub fn get(&self, unit: &str) -> Option<Arc<Tree>> {
        self.open.lock().get(unit).map(|o| o.tree.clone())
    }

    /// The tree of the dataset at `unit` if it is open, without marking
    /// it used (a refresh looking is no use).
    pub fn peek(&self, unit: &str) -> Option<Arc<Tree>> {
        self.open.lock().peek(unit).map(|o| o.tree.clone())
    }

    /// The datasets open now, by mount path, with their versions.
    pub fn opened(&self) -> Vec<(String, Arc<Tree>, Option<u64>)> {
        self.open
            .lock()
            .iter()
            .map(|(u, o)| (u.clone(), o.tree.clone(), o.version))
            .collect()
    }

    /// The version of the dataset at `unit` when it was closed to make
    /// room, if told.
    pub fn closed_version(&self, unit: &str) -> Option<u64> {
        self.closed.lock().get(unit).copied()
    }

    /// Whether any closed dataset's version is kept.
    pub fn any_closed(&self) -> bool {
        !self.closed.lock().is_empty()
    }

    /// Forget the closed datasets' versions but those `keep` says (the
    /// kernel still holds something of them), each kept one `now`'s when
    /// it says.
    pub fn keep_closed(&self, keep: impl Fn(&str) -> bool, now: impl Fn(&str) -> Option<u64>) {
        self.closed.lock().retain(|u, v| {
            if let Some(n) = now(u) {
                *v = n;
            }
            keep(u)
        });
    }

    /// The datasets whose last open failed, with their versions then.
    pub fn failed(&self) -> Vec<(String, Option<u64>)> {
        self.failed
            .lock()
            .iter()
            .map(|(u, v)| (u.clone(), *v))
            .collect()
    }

    /// Forget that the dataset at `unit` failed (it is gone).
    pub fn forget_failed(&self, unit: &str) {
        self.failed.lock().pop(unit);
    }

    /// The tree of the dataset at `unit`, opened if it is not (`found`:
    /// what the archive says it is). `Ok(None)`: there is no dataset at
    /// `unit` (a plain directory, or a JSON file that holds no
    /// references). A failure, or the open that ends one, is told to
    /// `failures`.
    pub fn open(
        &self,
        unit: &str,
        found: Found,
        config: &FsConfig,
        failures: &Failures,
        now: SystemTime,
    ) -> FsResult<Option<Arc<Tree>>> {
        if let Some(t) = self.get(unit) {
            return Ok(Some(t));
        }
        if !found.is_dataset() {
            return Ok(None);
        }
        let json_stamp = found
            .by_content()
            .then(|| self.archive.stamp(unit))
            .flatten();
        if let Some(stamp) = json_stamp
            && self.not_references.lock().get(unit) == Some(&stamp)
        {
            return Ok(None);
        }
        // Taken before the open: a change meanwhile makes the next
        // refresh open it again, never one missed.
        let version = config
            .track_changes
            .then(|| self.archive.version(unit, found))
            .flatten();
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
        let (at, done) = (mount_path(unit), SystemTime::now());
        match &opened {
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                self.failed.lock().put(unit.to_string(), version);
                failures.record(FailureKind::Open, &at, &reason(e), done);
            }
            Ok(opened) => {
                self.failed.lock().pop(unit);
                match opened {
                    Some(ds) => failures.loaded(&at, &super::skipped_reasons(ds), done),
                    // No dataset (any more) at its name.
                    None => failures.gone(&at, done),
                }
            }
        }
        let Some(ds) = opened.map_err(|e| FsError::Dataset {
            path: unit.to_string(),
            source: Box::new(e),
        })?
        else {
            if let Some(stamp) = json_stamp {
                self.not_references.lock().put(unit.to_string(), stamp);
            }
            return Ok(None);
        };
        // Its nodes' time: the dataset's own on disk (the same at every
        // open, as `stat` of a file is), until a refresh sees a change.
        let mtime = self.archive.stamp(unit).map_or(now, |(m, _)| m);
        let tree = Arc::new(tree_of(unit, &ds, config, None, mtime));
        let version = told_by(version, &tree).filter(|_| ds.skipped.is_empty());
        let mut open = self.open.lock();
        if let Some(o) = open.get(unit) {
            return Ok(Some(o.tree.clone())); // opened meanwhile: one tree
        }
        self.opens.fetch_add(1, Ordering::Relaxed);
        let mut closed = self.closed.lock();
        closed.remove(unit);
        let pushed = open.push(
            unit.to_string(),
            Opened {
                tree: tree.clone(),
                version,
                not_shown: ds.skipped.len(),
            },
        );
        if let Some((evicted, o)) = pushed {
            log::debug!("closed /{evicted} to make room for /{unit}");
            self.evictions.fetch_add(1, Ordering::Relaxed);
            if let Some(v) = o.version {
                closed.insert(evicted, v);
            }
        }
        Ok(Some(tree))
    }

    /// Put `new` (of version `version`, with `not_shown` arrays or files
    /// it could not load) in place of `old` as the tree of `unit`, if
    /// `old` is still the one open (a refresh; not if it was evicted
    /// meanwhile).
    pub fn replace(
        &self,
        unit: &str,
        old: &Arc<Tree>,
        new: Arc<Tree>,
        version: Option<u64>,
        not_shown: usize,
    ) -> bool {
        let mut open = self.open.lock();
        match open.peek_mut(unit) {
            Some(o) if Arc::ptr_eq(&o.tree, old) => {
                *o = Opened {
                    tree: new,
                    version,
                    not_shown,
                };
                true
            }
            _ => false,
        }
    }

    /// Close the dataset at `unit` (a refresh found it gone).
    pub fn close(&self, unit: &str) {
        self.open.lock().pop(unit);
        self.closed.lock().remove(unit);
    }
}

/// `version` if it tells whether the dataset whose tree is `tree`
/// changed: not when an array reads other files (an aggregation, a
/// virtual dataset), whose changes its dataset's version does not show.
pub(super) fn told_by(version: Option<u64>, tree: &Tree) -> Option<u64> {
    version.filter(|_| !tree.arrays.values().any(|t| t.stamp.elsewhere))
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
    let usable = usable_entries(&ds.entries, prev.is_none());
    let coords = Coordinates::new(&usable);
    let arrays = usable
        .iter()
        .map(|(path, array)| {
            let stamp = if config.track_changes {
                array.change_stamp()
            } else {
                ChangeStamp::default()
            };
            let t = Tracked::new(path, array.clone(), stamp, config, &coords);
            (path.clone(), t)
        })
        .collect();
    let mut tree = Tree::build(unit, arrays, directories, config, prev, now);
    tree.watch = ds.watch.clone();
    tree.recheck_in = ds.recheck_in;
    tree
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use parking_lot::Mutex as PlMutex;

    use super::super::tests::{config, lookup_path, names, read_all};
    use super::super::{Kind, SlabFs, Views};
    use super::*;
    use crate::engine::cache::ChunkCache;
    use crate::fs::reconcile::Invalidate;

    /// The inodes a refresh invalidated (entries are not recorded).
    #[derive(Default)]
    struct Inodes(PlMutex<Vec<u64>>);

    impl Invalidate for Inodes {
        fn inode(&self, ino: u64) -> std::io::Result<()> {
            self.0.lock().push(ino);
            Ok(())
        }
        fn entry(&self, _: u64, _: &str) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A Zarr v2 array of `values` (uint8, one uncompressed chunk) at
    /// `dir`: the layout zarr-python writes, by hand (the bytes are the
    /// test's own).
    fn array_store(dir: &Path, values: &[u8]) {
        std::fs::create_dir_all(dir).unwrap();
        let zarray = serde_json::json!({
            "zarr_format": 2, "shape": [values.len()], "chunks": [values.len()],
            "dtype": "|u1", "compressor": null, "fill_value": 0, "filters": null,
            "order": "C"
        });
        std::fs::write(dir.join(".zarray"), zarray.to_string()).unwrap();
        std::fs::write(dir.join("0"), values).unwrap();
    }

    fn archive_fs(root: &Path, max_open: usize) -> SlabFs {
        let cache = Arc::new(ChunkCache::new(1 << 20));
        let archive = crate::formats::dataset::Opener::new(cache)
            .archive(root)
            .unwrap()
            .unwrap();
        SlabFs::of_archive(archive, max_open, config(Views::default()))
    }

    /// Regression (review of issue 26): a full pass invalidated nothing of
    /// the datasets closed to make room, so pages the kernel kept of one
    /// that changed meanwhile stayed (on file systems that cannot be
    /// watched, the pass is the only way a change is found).
    #[test]
    fn a_full_pass_reaches_the_datasets_closed_to_make_room() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        array_store(&root.join("s1"), &[1, 2]);
        array_store(&root.join("s2"), &[3, 4]);
        array_store(&root.join("s3"), &[5, 6]);
        let fs = archive_fs(&root, 1);
        assert_eq!(read_all(&fs, "s1"), [1, 2]);
        let s1 = lookup_path(&fs, "s1").unwrap().ino;
        assert_eq!(read_all(&fs, "s2"), [3, 4]); // closes s1
        let s2 = lookup_path(&fs, "s2").unwrap().ino;
        assert_eq!(read_all(&fs, "s3"), [5, 6]); // closes s2
        assert!(!fs.is_open("s1") && !fs.is_open("s2"));
        // s1 changes while it is closed: a full pass tells the kernel;
        // s2, unchanged since it was closed, is left alone.
        std::fs::write(root.join("s1/0"), [7, 8, 9]).unwrap();
        let rec = Inodes::default();
        fs.refresh_archive(&[String::new()].into(), &rec);
        assert!(rec.0.lock().contains(&s1), "{:?}", rec.0.lock());
        assert!(!rec.0.lock().contains(&s2), "{:?}", rec.0.lock());
        // Told once: the next pass finds s1 as it was then.
        let rec = Inodes::default();
        fs.refresh_archive(&[String::new()].into(), &rec);
        assert!(rec.0.lock().is_empty(), "{:?}", rec.0.lock());
        // Looked up, never read (no pages kept): nothing to drop, its
        // attributes expire by themselves.
        array_store(&root.join("s4"), &[1]);
        let s4 = lookup_path(&fs, "s4").unwrap().ino;
        assert_eq!(read_all(&fs, "s2"), [3, 4]); // closes s4
        std::fs::write(root.join("s4/0"), [2]).unwrap();
        let rec = Inodes::default();
        fs.refresh_archive(&[String::new()].into(), &rec);
        assert!(!rec.0.lock().contains(&s4), "{:?}", rec.0.lock());
        // And under a changed directory: every changed dataset in it.
        std::fs::write(root.join("s1/0"), [1, 1]).unwrap();
        let rec = Inodes::default();
        fs.refresh_archive(&["s1".to_string()].into(), &rec);
        assert!(rec.0.lock().contains(&s1));
        assert_eq!(read_all(&fs, "s1"), [1, 1]);
    }

    /// A refresh pass opens again only the open datasets whose version
    /// changed: an unchanged one keeps its tree (the same object), a
    /// rewritten one shows its new bytes.
    #[test]
    fn a_pass_opens_only_the_changed_open_datasets() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        array_store(&root.join("s1"), &[1, 2]);
        array_store(&root.join("s2"), &[3, 4]);
        let fs = archive_fs(&root, 10);
        assert_eq!(read_all(&fs, "s1"), [1, 2]);
        assert_eq!(read_all(&fs, "s2"), [3, 4]);
        let Datasets::Archive(lazy) = &fs.datasets else {
            unreachable!()
        };
        let before = lazy.peek("s1").unwrap();
        std::fs::write(root.join("s2/0"), [9, 9]).unwrap();
        let rec = Inodes::default();
        let changes = fs.refresh_archive(&[String::new()].into(), &rec);
        assert_eq!(changes.changed, ["s2"], "{changes:?}");
        assert_eq!(changes.reopened, 1, "{changes:?}");
        assert!(Arc::ptr_eq(&before, &lazy.peek("s1").unwrap()));
        assert_eq!(read_all(&fs, "s2"), [9, 9]);
        // Nothing changed: nothing opened.
        let changes = fs.refresh_archive(&[String::new()].into(), &rec);
        assert_eq!(changes.reopened, 0, "{changes:?}");
    }

    /// A netCDF file holding an aggregation variable (CF-1.13, written by
    /// cf-python): its own version does not show a fragment's change, so
    /// a pass opens it again every time (its change stamp covers the
    /// fragments).
    #[test]
    fn a_file_aggregating_others_is_opened_again_at_every_pass() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nca/cf313");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("frag")).unwrap();
        for f in ["plain.nc", "frag/q_0.nc", "frag/q_1.nc"] {
            std::fs::copy(fixtures.join(f), root.join(f)).unwrap();
        }
        let expected = std::fs::read(fixtures.join("expected/plain.bin")).unwrap();
        let fs = archive_fs(&root, 10);
        assert_eq!(read_all(&fs, "plain.nc/q"), expected);
        let rec = Inodes::default();
        let changes = fs.refresh_archive(&[String::new()].into(), &rec);
        assert_eq!(changes.reopened, 1, "{changes:?}");
        assert!(changes.changed.is_empty(), "{changes:?}");
    }

    /// Regression (review of issue 26): a directory the kernel held as a
    /// plain directory stayed one after it became a Zarr group.
    #[test]
    fn a_directory_that_becomes_a_store_is_served_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("g")).unwrap();
        let fs = archive_fs(&root, 10);
        let g = lookup_path(&fs, "g").unwrap().ino;
        assert!(names(&fs, "g").is_empty());
        std::fs::write(root.join("g/.zgroup"), r#"{"zarr_format": 2}"#).unwrap();
        std::fs::write(root.join("g/.zattrs"), r#"{"title": "t"}"#).unwrap();
        array_store(&root.join("g/a"), &[7]);
        fs.refresh_archive(&["g".to_string()].into(), &Inodes::default());
        assert_eq!(lookup_path(&fs, "g").unwrap().ino, g);
        // The group's sidecar: only the store's tree has it.
        assert_eq!(names(&fs, "g"), [".json", "a", "a.json"]);
        assert_eq!(read_all(&fs, "g/a"), [7]);
        assert!(fs.is_open("g") && !fs.is_open("g/a"));
    }

    /// Regression (review of issue 26): a dataset open since before it
    /// changed what it is (a single-array store that became a group) was
    /// answered from its old tree: a file under a directory's number.
    #[test]
    fn a_dataset_that_changed_kind_is_opened_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        array_store(&root.join("s"), &[1]);
        let fs = archive_fs(&root, 10);
        assert_eq!(read_all(&fs, "s"), [1]);
        std::fs::remove_file(root.join("s/.zarray")).unwrap();
        std::fs::remove_file(root.join("s/0")).unwrap();
        std::fs::write(root.join("s/.zgroup"), r#"{"zarr_format": 2}"#).unwrap();
        array_store(&root.join("s/x"), &[2]);
        let s = lookup_path(&fs, "s").unwrap();
        assert_eq!(s.kind, Kind::Directory);
        assert_eq!(names(&fs, "s"), ["x", "x.json"]);
        assert_eq!(read_all(&fs, "s/x"), [2]);
    }

    /// A dataset that fails to open (issue 42): its listing still fails
    /// (EIO), but its sidecar reads why (`NAME/.json` for a directory,
    /// `NAME.json` for a single-array store), its directory carries the
    /// xattr `user.slabfs.error`, and `.slabfs/errors` lists it, each
    /// attempt counted. A refresh that does not see it change does not
    /// try again; one that does opens it, resolves its failure and tells
    /// the kernel to drop the failed sidecar it holds.
    #[test]
    fn a_dataset_that_fails_to_open_says_why() {
        use super::super::failures::XATTR_ERROR;
        use super::super::{FsError, ROOT_INO, XattrReply};
        use std::ffi::OsStr;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        array_store(&root.join("s1"), &[1, 2]);
        std::fs::write(root.join("bad.nc"), b"these bytes are no netCDF file").unwrap();
        std::fs::create_dir(root.join("broken.zarr")).unwrap();
        std::fs::write(root.join("broken.zarr/.zarray"), br#"{"zarr_format": 2, "#).unwrap();
        let fs = archive_fs(&root, 10);
        let doc = |bytes: &[u8]| -> serde_json::Value { serde_json::from_slice(bytes).unwrap() };
        let bad = lookup_path(&fs, "bad.nc").unwrap();
        assert_eq!(bad.kind, Kind::Directory);
        let mut sink: Vec<(u64, u64, Kind, String)> = Vec::new();
        let listed = fs.readdir(bad.ino, 0, 0, &mut sink).unwrap_err();
        assert!(matches!(listed, FsError::Dataset { .. }), "{listed}");
        assert_eq!(listed.errno(), libc::EIO);
        assert_eq!(lookup_path(&fs, "bad.nc/x").unwrap_err().errno(), libc::EIO);
        // A probe for an xattr not of slabfs opens nothing.
        let selinux = fs.getxattr(bad.ino, OsStr::new("security.selinux"), 64);
        assert_eq!(selinux.unwrap_err().errno(), libc::ENODATA);
        let count = |fs: &SlabFs, path: &str| {
            fs.failures()
                .current(FailureKind::Open, path)
                .map(|f| f.count)
        };
        assert_eq!(count(&fs, "/bad.nc"), Some(2));

        let side = lookup_path(&fs, "bad.nc/.json").unwrap();
        assert_eq!((side.kind, side.size, side.perm), (Kind::File, 0, 0o444));
        assert!(fs.open(side.ino, libc::O_RDONLY).unwrap().direct_io);
        let why = doc(&read_all(&fs, "bad.nc/.json"));
        let reason = why["error"].as_str().unwrap().to_string();
        let file = root.join("bad.nc").display().to_string();
        assert!(
            reason.starts_with(&format!("{file}: not a netCDF file")),
            "{why}"
        );
        assert_eq!(
            (&why["kind"], &why["path"]),
            (&"open".into(), &"/bad.nc".into())
        );
        assert!(why["count"].as_u64().unwrap() >= 3, "{why}");
        assert!(why["time"].as_str().unwrap() >= why["first"].as_str().unwrap());
        let xattr = fs.getxattr(bad.ino, OsStr::new(XATTR_ERROR), 4096).unwrap();
        assert_eq!(xattr, XattrReply::Data(reason.clone().into_bytes()));
        assert_eq!(
            fs.listxattr(bad.ino, 4096).unwrap(),
            XattrReply::Data(b"user.slabfs.error\0".to_vec())
        );
        // Only the dataset's own sidecar, only with the json view.
        let root_json = fs.lookup(ROOT_INO, OsStr::new(".json")).unwrap_err();
        assert_eq!(root_json.errno(), libc::ENOENT);
        let no_json = SlabFs::of_archive(
            crate::formats::dataset::Opener::new(Arc::new(ChunkCache::new(1 << 20)))
                .archive(&root)
                .unwrap()
                .unwrap(),
            10,
            config(Views {
                json: false,
                ..Views::default()
            }),
        );
        let e = lookup_path(&no_json, "bad.nc/.json").unwrap_err();
        assert_eq!(e.errno(), libc::EIO);

        // A single-array store: itself EIO, its sidecar why.
        assert_eq!(
            lookup_path(&fs, "broken.zarr").unwrap_err().errno(),
            libc::EIO
        );
        let why = doc(&read_all(&fs, "broken.zarr.json"));
        assert!(why["error"].as_str().unwrap().contains(".zarray"), "{why}");
        assert_eq!(why["path"], "/broken.zarr");

        let errors = doc(&read_all(&fs, ".slabfs/errors"));
        let mut paths: Vec<&str> = errors["failures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        paths.sort();
        assert_eq!(paths, ["/bad.nc", "/broken.zarr"], "{errors}");
        assert_eq!(errors["unresolved"], 2);
        assert_eq!(read_all(&fs, "s1"), [1, 2]);

        // Unchanged: a refresh does not open it again.
        let before = count(&fs, "/bad.nc");
        fs.refresh_archive(&[String::new()].into(), &Inodes::default());
        assert_eq!(count(&fs, "/bad.nc"), before);
        // Fixed (a netCDF-3 file of netCDF4-python's): a full pass (which
        // drops nothing of datasets not open whose content the kernel
        // keeps no page of) opens it, the failure is resolved, the kernel
        // drops the failed sidecar.
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/netcdf3/data/classic_types.nc");
        std::fs::copy(fixture, root.join("bad.nc")).unwrap();
        let rec = Inodes::default();
        fs.refresh_archive(&[String::new()].into(), &rec);
        assert!(rec.0.lock().contains(&side.ino), "{:?}", rec.0.lock());
        assert!(fs.is_open("bad.nc"));
        assert_eq!(count(&fs, "/bad.nc"), None);
        let errors = doc(&read_all(&fs, ".slabfs/errors"));
        let fixed = errors["failures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "/bad.nc")
            .unwrap();
        assert!(fixed["resolved"].is_string(), "{errors}");
        assert_eq!(errors["unresolved"], 1);
        // Its sidecar is its attributes again.
        let attrs = doc(&read_all(&fs, "bad.nc/.json"));
        assert!(
            attrs.get("error").is_none() && attrs["attributes"].is_object(),
            "{attrs}"
        );
        // A failed dataset that is removed leaves the list too.
        std::fs::remove_dir_all(root.join("broken.zarr")).unwrap();
        fs.refresh_archive(&[String::new()].into(), &Inodes::default());
        assert_eq!(doc(&read_all(&fs, ".slabfs/errors"))["unresolved"], 0);
    }

    /// Regression (review of issue 26): a `*.json` that holds no references
    /// hid the sidecar of the single-array store beside it (the eager tree
    /// shows the sidecar), and was read again at every listing.
    #[test]
    fn a_json_file_that_is_no_references_hides_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        array_store(&root.join("x"), &[5, 6]);
        std::fs::write(root.join("x.json"), r#"{"not": "references"}"#).unwrap();
        let fs = archive_fs(&root, 10);
        assert_eq!(names(&fs, ""), [".slabfs", "x", "x.json"]);
        let side: serde_json::Value = serde_json::from_slice(&read_all(&fs, "x.json")).unwrap();
        assert_eq!(side["shape"], serde_json::json!([2]));
        let Datasets::Archive(lazy) = &fs.datasets else {
            unreachable!()
        };
        assert!(lazy.not_references.lock().contains("x.json"));
    }
}
