//! A directory SOURCE read lazily: what [`super::open`] of a directory
//! finds, one directory and one dataset at a time.
//!
//! The walk of [`super::open`] meets each entry of a directory by its name
//! and kind: a plain directory is walked, a Zarr store (a directory with a
//! metadata key), a file with a netCDF or HDF5 extension, an NCA
//! descriptor and a `*.json` file (kerchunk references, if it holds them)
//! are datasets, anything else is not looked at. [`Archive`] applies the
//! same rules to one directory ([`Archive::list`]) or one entry
//! ([`Archive::find`]) without opening anything but a store's root
//! metadata, and opens one dataset on demand ([`Archive::open`]): the
//! mount's lazy tree is built on it, and its datasets are exactly the
//! ones the walk would find, at the same mount paths.
//!
//! A bucket prefix holding a directory of datasets is an archive too
//! ([`super::remote::RemoteArchive`]): a directory is one delimiter
//! listing of its prefix, kept a moment so the lookups that follow a
//! listing do not list again; a sub-prefix's kind (plain, Zarr store,
//! single-array store) is its own listing's (and a `zarr.json`'s GET).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Backend, Dataset, Found, MAX_DEPTH, add_found, confined_options, found_by_name};
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::{Options, icechunk, zarr};
use crate::storage::local::confine::Roots;
use crate::storage::local::fs_store::FsStore;
use crate::storage::{Network, Store};

/// A directory SOURCE, or a bucket prefix, and how its datasets open. See
/// the module docs.
pub struct Archive {
    inner: Box<dyn Backend>,
}

impl Archive {
    /// The archive of the directory `source`: its datasets open with the
    /// cache, roots and `--allow-outside` locations [`super::open_in`]
    /// would use (URL roots connected now, so a bad one fails at mount).
    pub fn new(
        source: &Path,
        cache: Arc<ChunkCache>,
        allow_outside: &[PathBuf],
        network: Option<Arc<dyn Network>>,
    ) -> Result<Archive> {
        Local::new(source, cache, allow_outside, network).map(|l| Archive::with(Box::new(l)))
    }

    pub(super) fn with(inner: Box<dyn Backend>) -> Archive {
        Archive { inner }
    }

    pub(super) fn backend(&self) -> &dyn Backend {
        self.inner.as_ref()
    }

    /// The directory the archive is (a bucket prefix: its URL).
    pub fn source(&self) -> &Path {
        self.inner.source()
    }

    /// The modification time and length of the entry `rel`, to tell
    /// whether it changed since it was looked at (`None` in a bucket).
    pub fn stamp(&self, rel: &str) -> Option<(std::time::SystemTime, u64)> {
        self.inner.stamp(rel)
    }

    /// What the walk makes of the entry `rel` (a `/`-separated path under
    /// the source whose parent is a plain directory the walk enters):
    /// `None` when it does not look at it (a hidden or unknown name, gone,
    /// too deep, a special file, a symlink leading outside the roots).
    pub fn find(&self, rel: &str) -> Option<Found> {
        self.inner.find(rel)
    }

    /// The entries of the plain directory `rel` ("" the source) the walk
    /// looks at, sorted by name. An error: the directory cannot be read.
    pub fn list(&self, rel: &str) -> Result<Vec<(String, Found)>> {
        self.inner.list(rel)
    }

    /// Open the dataset `rel` found as `found`, its arrays and directories
    /// at their mount paths (under `rel`). `Ok(None)`: a JSON file that
    /// holds no references (no dataset, not shown).
    pub fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>> {
        self.inner.open(rel, found)
    }

    /// Forget what was listed: the next look at a directory asks again (a
    /// refresh saw the source change).
    pub fn forget_listings(&self) {
        self.inner.forget_listings();
    }

    /// A number that changes when the dataset `rel` (found as `found`)
    /// changes, told without opening it: a refresh compares it with the
    /// one taken before the dataset was opened and skips an unchanged
    /// dataset. `None` when that cannot be told cheaply (references and
    /// aggregations, whose fragments are elsewhere): the refresh opens it
    /// again and compares.
    pub fn version(&self, rel: &str, found: Found) -> Option<u64> {
        self.inner.version(rel, found)
    }
}

/// A directory on disk.
struct Local {
    source: PathBuf,
    opts: Options,
    roots: Roots,
    /// The heads of the repositories in use, for their versions.
    heads: icechunk::Heads,
}

impl Local {
    /// The archive of the directory `source`: its datasets open with the
    /// cache, roots and `--allow-outside` locations [`super::open_in`]
    /// would use (URL roots connected now, so a bad one fails at mount).
    fn new(
        source: &Path,
        cache: Arc<ChunkCache>,
        allow_outside: &[PathBuf],
        network: Option<Arc<dyn Network>>,
    ) -> Result<Local> {
        let (opts, roots) = confined_options(source, cache, allow_outside, network.as_deref())?;
        Ok(Local {
            source: source.to_path_buf(),
            opts,
            roots,
            heads: icechunk::Heads::default(),
        })
    }

    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.source.clone()
        } else {
            self.source.join(rel)
        }
    }

    /// The walk's rule for the entry `name` at `path`, `depth` directories
    /// below the source, of (followed) type `kind`.
    fn classify(
        &self,
        path: &Path,
        name: &str,
        depth: usize,
        kind: std::fs::FileType,
    ) -> Option<Found> {
        if kind.is_dir() {
            if icechunk::is_repository(path) {
                return Some(Found::Repository);
            }
            return match zarr::store_root(path) {
                Some(array) => Some(Found::Store { array }),
                None if depth < MAX_DEPTH => Some(Found::Directory),
                None => None,
            };
        }
        if !kind.is_file() {
            return None;
        }
        found_by_name(name)
    }

    /// A symlink that resolves outside the roots (or to a special file):
    /// not an entry of this mount. Logged at debug; `slabfs ls` says it.
    fn outside(&self, path: &Path) -> bool {
        match self.roots.check(path) {
            Ok(_) => false,
            Err(real) => {
                log::debug!(
                    "not shown: {} resolves to {}, outside the allowed roots ({})",
                    path.display(),
                    real.display(),
                    self.roots.describe()
                );
                true
            }
        }
    }
}

impl Backend for Local {
    fn source(&self) -> &Path {
        &self.source
    }

    /// The modification time and length of the entry `rel`, to tell
    /// whether it changed since it was looked at.
    fn stamp(&self, rel: &str) -> Option<(std::time::SystemTime, u64)> {
        let m = std::fs::metadata(self.path(rel)).ok()?;
        Some((m.modified().ok()?, m.len()))
    }

    /// A file's identity, size and times (one `stat`); a store's, the
    /// stamp of every file in it (a walk, [`Store::change_stamp`]).
    fn version(&self, rel: &str, found: Found) -> Option<u64> {
        use std::hash::{DefaultHasher, Hash, Hasher};
        use std::os::unix::fs::MetadataExt;
        match found {
            Found::File => {
                let m = std::fs::metadata(self.path(rel)).ok()?;
                let mut h = DefaultHasher::new();
                (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()).hash(&mut h);
                (m.ctime(), m.ctime_nsec()).hash(&mut h);
                Some(h.finish())
            }
            Found::Store { .. } => FsStore::new(self.path(rel)).change_stamp("").ok().flatten(),
            // Its head (served at `main`), read through the confined
            // store like the rest of the repository.
            Found::Repository => {
                let store = self.opts.files.store(&self.path(rel));
                self.heads.version(rel, store, None)
            }
            Found::Directory | Found::Descriptor | Found::Json => None,
        }
    }

    /// What the walk makes of the entry `rel` (a `/`-separated path under
    /// the source whose parent is a plain directory the walk enters):
    /// `None` when it does not look at it (a hidden or unknown name, gone,
    /// too deep, a special file, a symlink leading outside the roots).
    fn find(&self, rel: &str) -> Option<Found> {
        let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
        let depth = rel.matches('/').count();
        if rel.is_empty() || depth > MAX_DEPTH || rel.split('/').any(|c| c.starts_with('.')) {
            return None;
        }
        let path = self.path(rel);
        let mut kind = std::fs::symlink_metadata(&path).ok()?.file_type();
        if kind.is_symlink() {
            if self.outside(&path) {
                return None;
            }
            kind = std::fs::metadata(&path).ok()?.file_type();
        }
        self.classify(&path, name, depth, kind)
    }

    /// The entries of the plain directory `rel` ("" the source) the walk
    /// looks at, sorted by name. An error: the directory cannot be read.
    fn list(&self, rel: &str) -> Result<Vec<(String, Found)>> {
        let dir = self.path(rel);
        let depth = if rel.is_empty() {
            0
        } else {
            rel.matches('/').count() + 1
        };
        let io_err = |e| Error::Io {
            path: dir.display().to_string(),
            source: e,
        };
        let mut out = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(io_err)? {
            let Ok(e) = e else { continue };
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let Ok(mut kind) = e.file_type() else {
                continue;
            };
            let path = e.path();
            if kind.is_symlink() {
                if self.outside(&path) {
                    continue;
                }
                match std::fs::metadata(&path) {
                    Ok(m) => kind = m.file_type(),
                    Err(_) => continue,
                }
            }
            if let Some(found) = self.classify(&path, &name, depth, kind) {
                out.push((name, found));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Open the dataset `rel` found as `found`, its arrays and directories
    /// at their mount paths (under `rel`). `Ok(None)`: a JSON file that
    /// holds no references (no dataset, not shown).
    fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>> {
        let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
        let mut ds = Dataset::default();
        if !add_found(&mut ds, &self.path(rel), rel, name, found, &self.opts)? {
            return Ok(None);
        }
        ds.entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Some(ds))
    }
}

/// The mount path whose re-load covers a change at `path` (absolute, under
/// the directory `source`), the way the dataset walk would meet it: the
/// outermost Zarr store above it, or the file or directory itself. A Zarr
/// metadata key outside any store re-loads its whole directory (which may
/// have become, or stopped being, a store). `Some("")`: the source itself;
/// `None`: nothing the walk looks at (a hidden name, too deep, not UTF-8,
/// outside the source).
pub fn unit_of(source: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(source).ok()?;
    let comps: Vec<&str> = rel
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    let mut prefix = String::new();
    for (i, c) in comps.iter().enumerate() {
        if i + 1 == comps.len() && zarr::METADATA_KEYS.contains(c) {
            return Some(prefix);
        }
        if c.starts_with('.') || i > MAX_DEPTH {
            return None;
        }
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(c);
        let here = source.join(&prefix);
        if !here.is_dir() || super::is_store_dir(&here) {
            return Some(prefix);
        }
    }
    Some(prefix)
}
