//! A directory SOURCE read lazily: what [`super::Opener::open`] of a directory
//! finds, one directory and one dataset at a time.
//!
//! The walk meets each entry of a directory by its name and kind, as the
//! format registry classifies it ([`crate::formats::entry::Formats`]): a
//! plain directory is walked, a directory a directory format recognises
//! (a Zarr store, an Icechunk repository), and a file a format claims by
//! name (a netCDF or HDF5 file, an NCA descriptor, a `*.json` file that
//! may hold kerchunk references) are datasets, anything else is not
//! looked at. [`Archive`] applies the
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

use super::{Backend, Dataset, Found, Listing, MAX_DEPTH, open_found};
use crate::error::{Error, Result};
use crate::formats::Options;
use crate::formats::entry::{At, DirProbe, Stamp};
use crate::formats::{icechunk, zarr};
use crate::storage::Store;
use crate::storage::local::confine::Roots;
use crate::storage::local::fs_store::FsStore;

/// A directory SOURCE, or a bucket prefix, and how its datasets open. See
/// the module docs.
pub struct Archive {
    inner: Box<dyn Backend>,
}

impl Archive {
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
        self.inner.list(rel).map(|(listed, _)| listed)
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
pub(super) struct Local {
    source: PathBuf,
    opts: Options,
    roots: Roots,
    /// The heads of the repositories in use, for their versions.
    heads: icechunk::Heads,
}

impl Local {
    /// The archive of the directory `source`: its datasets open with
    /// `opts`, and only what resolves under `roots` is looked at.
    pub(super) fn new(source: &Path, opts: Options, roots: Roots) -> Local {
        Local {
            source: source.to_path_buf(),
            opts,
            roots,
            heads: icechunk::Heads::default(),
        }
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
            let probe = DirProbe::new(path, &self.opts);
            return match self.opts.formats.classify_dir(&probe, true) {
                Some(found) => Some(found),
                None if depth < MAX_DEPTH => Some(Found::Directory),
                None => None,
            };
        }
        if !kind.is_file() {
            return None;
        }
        self.opts.formats.classify_file(name)
    }

    /// Why a symlink that resolves outside the roots (or to a special
    /// file) is not an entry of this mount; `None` when it is one.
    fn outside(&self, path: &Path) -> Option<Error> {
        let real = self.roots.check(path).err()?;
        log::debug!(
            "not shown: {} resolves to {}, outside the allowed roots ({})",
            path.display(),
            real.display(),
            self.roots.describe()
        );
        Some(Error::metadata(
            path.display().to_string(),
            format!(
                "resolves to {}, outside the allowed roots ({})",
                real.display(),
                self.roots.describe()
            ),
        ))
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
    /// stamp of every file in it (a walk, [`Store::change_stamp`]); a
    /// repository's, its head's.
    fn version(&self, rel: &str, found: Found) -> Option<u64> {
        use std::hash::{DefaultHasher, Hash, Hasher};
        use std::os::unix::fs::MetadataExt;
        match found.stamp() {
            Stamp::File => {
                let m = std::fs::metadata(self.path(rel)).ok()?;
                let mut h = DefaultHasher::new();
                (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()).hash(&mut h);
                (m.ctime(), m.ctime_nsec()).hash(&mut h);
                Some(h.finish())
            }
            Stamp::Store => FsStore::new(self.path(rel)).change_stamp("").ok().flatten(),
            // Read through the confined store like the rest of the
            // repository.
            Stamp::Head => {
                let store = self.opts.files.store(&self.path(rel));
                self.heads.version(rel, store, None)
            }
            Stamp::Reopen => None,
        }
    }

    fn find(&self, rel: &str) -> Option<Found> {
        let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
        let depth = rel.matches('/').count();
        if rel.is_empty() || depth > MAX_DEPTH || rel.split('/').any(|c| c.starts_with('.')) {
            return None;
        }
        let path = self.path(rel);
        let mut kind = std::fs::symlink_metadata(&path).ok()?.file_type();
        if kind.is_symlink() {
            if self.outside(&path).is_some() {
                return None;
            }
            kind = std::fs::metadata(&path).ok()?.file_type();
        }
        self.classify(&path, name, depth, kind)
    }

    fn list(&self, rel: &str) -> Result<Listing> {
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
        let mut refused = Vec::new();
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
                // A symlink may lead anywhere: only what resolves under
                // the roots is a dataset of this mount (devices and FIFOs
                // never are). Said only of a name the walk would look at.
                if let Some(why) = self.outside(&path) {
                    if self.opts.formats.classify_file(&name).is_some() || path.is_dir() {
                        refused.push(why);
                    }
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
        Ok((out, refused))
    }

    fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>> {
        let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
        let path = self.path(rel);
        open_found(found, &At::new(&path, rel, name, &self.opts))
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
