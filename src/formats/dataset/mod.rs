//! Datasets as the mount shows them: a tree of named arrays.
//!
//! `open(SOURCE)` decides what SOURCE is and lists its arrays by the path
//! each will have in the mount (and in `slabfs ls`):
//!
//! - a Zarr store holding a hierarchy: its arrays at their paths inside the
//!   store (`temp`, `group/sub/temp`);
//! - a Zarr store that is a single array: one file named after SOURCE's
//!   last path component;
//! - a dataset file, a classic netCDF file (netCDF-3: CDF-1, CDF-2, CDF-5)
//!   or a blocked archive of one ([`crate::formats::packed`], `*.ncb`): its
//!   variables by name (`temp`);
//! - a plain directory: every dataset found inside it, recursively, at its
//!   relative path (`runs/a.zarr/temp`, `runs/b.nc/temp`: a dataset file is
//!   a directory of its variables). A dataset that fails to open is
//!   skipped with a warning, never the whole directory.
//!
//! - an NCA descriptor (`*.nca.json`, [`crate::formats::nca`]): its variables,
//!   each assembled from its partitions; inside a directory, a directory
//!   of its variables like a netCDF file (`runs/agg.nca.json/tas`). NCA
//!   variables of a netCDF file are assembled the same way.
//!
//! - a kerchunk / fsspec references file (JSON, [`crate::formats::kerchunk`]): its
//!   arrays, read through the references; inside a directory, a
//!   directory of its arrays (`runs/refs.json/temp`). Recognised by
//!   content: inside a directory every `*.json` file is looked at, and
//!   one that is not references (version 1 `{"version": 1, "refs": ...}`
//!   or a version-0 dict of Zarr keys) is no dataset, silently.
//!
//! Every file an aggregation or a references file points to must resolve
//! under SOURCE (or SOURCE's directory when it is a file), or under one of
//! the extra roots given to [`Opener::allow_outside`] (`--allow-outside`).
//!
//! A SOURCE that is a URL is read from its server the same way
//! ([`remote`]: a bucket prefix walked like a directory, or one dataset),
//! aggregations and references included. Where references may lead,
//! local or remote, is decided in one place ([`crate::storage::scope`]);
//! a local SOURCE's `--allow-outside` URLs are connected at open and its
//! files routed through [`WithUrls`].
//!
//! What a file or directory is, is decided by the format registry
//! ([`crate::formats::entry`], [`crate::formats::registry`]): SOURCE
//! itself is sniffed whatever its name, inside a directory a file is
//! looked at when a format claims its name and opened by the format its
//! first bytes name, and a directory is a dataset when a directory
//! format's probe recognises it. Every walk (this eager one, the lazy
//! [`archive::Archive`], a bucket's) asks the same [`Formats`].
//!
//! Everything an open needs (the chunk cache, `--allow-outside`, the
//! network, `--ref`, the formats) travels in one value, [`Opener`].
//!
//! Beside its arrays, a dataset reports the attributes of its directories
//! ([`Dataset::directories`], by mount path): a file's global attributes
//! at the file's path (`runs/a.nc`, `""` when SOURCE is the file), a
//! netCDF-4/HDF5 group's or a Zarr group's at the group's path, an NCA
//! descriptor's `attributes` at the descriptor's path, and a netCDF
//! file's or group's own dimensions at its path. Values follow the
//! variables' attribute conventions, bookkeeping hidden as for variables
//! (netCDF-4's [`crate::formats::hdf5::HIDDEN_ATTRIBUTES`], NCZarr's
//! `_nczarr_*` and `_NCProperties`); a directory with neither attributes
//! nor dimensions is not listed. A plain directory has none.
//!
//! - a netCDF-4 or other HDF5 file ([`crate::formats::hdf5`]), whatever its
//!   name when it is SOURCE: its datasets at their paths in the file
//!   (`temp`, `grp/temp`); inside a directory, a directory of them
//!   (`runs/c.nc/grp/temp`). A dataset that cannot be shown is reported as
//!   skipped, naming it and why; the rest of the file mounts.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::Options;
use crate::formats::entry::{At, DirProbe, FormatEntry, Formats, Layout};
use crate::formats::registry;
use crate::storage::local;
use crate::storage::local::confine::Roots;
use crate::storage::location::{Location, url_of};
use crate::storage::scope::WithUrls;
use crate::storage::{Files, Network};

pub mod archive;
mod refs;
mod remote;

pub use crate::formats::entry::{Dataset, Directory, Entry, Found};

/// A directory's entries the walk looks at, sorted by name, and what it
/// refuses to show there ([`Backend::list`]).
pub(crate) type Listing = (Vec<(String, Found)>, Vec<Error>);

/// Where an archive's listings, lookups and opens go: a directory on
/// disk ([`archive`]'s `Local`), a bucket prefix (`super::remote`), the
/// versions of a repository (`refs`).
pub(crate) trait Backend: Send + Sync {
    fn source(&self) -> &Path;
    fn stamp(&self, _rel: &str) -> Option<(std::time::SystemTime, u64)> {
        None
    }
    fn find(&self, rel: &str) -> Option<Found>;
    /// The entries of the directory `rel` the walk looks at, sorted by
    /// name, and what it refuses to show there (a symlink leading outside
    /// the roots), for `slabfs ls` to say.
    fn list(&self, rel: &str) -> Result<Listing>;
    fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>>;
    fn forget_listings(&self) {}
    fn version(&self, _rel: &str, _found: Found) -> Option<u64> {
        None
    }
}

/// Directories deeper than this are not searched (symlink loops).
pub const MAX_DEPTH: usize = 32;

/// What every open of a SOURCE needs, in one value: the chunk cache
/// every array reads through, the extra roots references may read
/// (`--allow-outside`, paths or URLs), the network that reaches URLs
/// (without one a URL is an error; the daemon's is its
/// [`crate::storage::remote::Remote`]), the version asked for (`--ref`),
/// the formats known ([`registry::builtin`] unless told), and, for tests,
/// the files every read goes through (the daemon's are confined to the
/// roots; a test passes ones that inject faults).
#[derive(Clone)]
pub struct Opener {
    cache: Arc<ChunkCache>,
    allow_outside: Vec<PathBuf>,
    network: Option<Arc<dyn Network>>,
    reference: Option<String>,
    formats: Formats,
    files: Option<Arc<dyn Files>>,
    max_open: usize,
}

impl Opener {
    /// Local sources only, the built-in formats, no extra root.
    pub fn new(cache: Arc<ChunkCache>) -> Opener {
        Opener {
            cache,
            allow_outside: Vec::new(),
            network: None,
            reference: None,
            formats: registry::builtin(),
            files: None,
            max_open: crate::formats::entry::DEFAULT_MAX_OPEN,
        }
    }

    /// The datasets an aggregation keeps open at once
    /// (`--max-open-datasets`; [`Options::max_open`]).
    pub fn max_open(mut self, n: usize) -> Opener {
        self.max_open = n.max(1);
        self
    }

    /// References may also read under these (`--allow-outside`): local
    /// directories, or URLs reached through the network.
    pub fn allow_outside(mut self, roots: &[PathBuf]) -> Opener {
        self.allow_outside = roots.to_vec();
        self
    }

    /// URLs (a URL SOURCE, `--allow-outside` URLs) reached through
    /// `network`.
    pub fn network(mut self, network: Option<Arc<dyn Network>>) -> Opener {
        self.network = network;
        self
    }

    /// A version of an Icechunk repository (a branch, a tag or a snapshot
    /// id; `--ref`) instead of the tip of `main`; a SOURCE without
    /// versions is then an error.
    pub fn reference(mut self, reference: Option<&str>) -> Opener {
        self.reference = reference.map(str::to_string);
        self
    }

    /// The formats known (tests add their own to [`registry::builtin`]).
    pub fn formats(mut self, formats: Formats) -> Opener {
        self.formats = formats;
        self
    }

    /// Every data file and store of a local SOURCE read through `files`
    /// (tests: faults injected); the walk of a directory SOURCE is still
    /// confined to the roots.
    pub fn files(mut self, files: Arc<dyn Files>) -> Opener {
        self.files = Some(files);
        self
    }

    pub fn cache(&self) -> &Arc<ChunkCache> {
        &self.cache
    }

    /// Open `source` whole: a dataset (a Zarr store, a netCDF file, an
    /// NCA descriptor, a repository...), or every dataset under a
    /// directory or bucket prefix, sorted by path.
    pub fn open(&self, source: &Path) -> Result<Dataset> {
        if let Some(url) = url_of(source) {
            return remote::open(self, url);
        }
        let (opts, roots) = self.local_options(source)?;
        let meta = std::fs::metadata(source).map_err(|e| Error::Io {
            path: source.display().to_string(),
            source: e,
        })?;
        let name = root_name(source);
        let at = At {
            reference: self.reference.as_deref(),
            ..At::new(source, "", &name, &opts)
        };
        let found = meta
            .is_dir()
            .then(|| {
                self.formats
                    .classify_dir(&DirProbe::new(source, &opts), false)
            })
            .flatten();
        if self.reference.is_some() && !found.is_some_and(versioned) {
            return Err(Error::metadata(
                source.display().to_string(),
                format!(
                    "--ref {}: a branch, tag or snapshot of an Icechunk repository, and this is \
                     no local Icechunk repository",
                    self.reference.as_deref().unwrap_or_default()
                ),
            ));
        }
        if let Some(found) = found {
            return open_found(found, &at).map(Option::unwrap_or_default);
        }
        if meta.is_dir() {
            let local = archive::Local::new(source, opts, roots);
            let mut ds = Dataset::default();
            let _ = archive_each(&local, "", &mut |part| {
                ds.extend(part);
                ControlFlow::Continue(())
            })?;
            return Ok(ds.sorted());
        }
        let claimed = self.told_by_name(source);
        match self.formats.open_file(&at, claimed)? {
            Some(ds) => Ok(ds.sorted()),
            None => Err(Error::metadata(
                source.display().to_string(),
                format!("not a dataset (expected {})", self.expected()),
            )),
        }
    }

    /// The archive `source` is, when it is a directory of datasets: a
    /// plain local directory, or a listable bucket prefix that is neither
    /// one store nor one object, each dataset opened on demand; `None`
    /// for one dataset (open it with [`Opener::open`]).
    pub fn archive(&self, source: &Path) -> Result<Option<archive::Archive>> {
        if let Some(url) = url_of(source) {
            let a = remote::archive(self, url)?;
            return Ok(a.map(|r| archive::Archive::with(Box::new(r))));
        }
        if !source.is_dir() || self.is_dataset_dir(source) {
            return Ok(None);
        }
        let (opts, roots) = self.local_options(source)?;
        let local = archive::Local::new(source, opts, roots);
        Ok(Some(archive::Archive::with(Box::new(local))))
    }

    /// Every version of the Icechunk repository `source` (a directory or
    /// a URL) as a directory of datasets (`--all-refs`, [`refs`]): its
    /// branches, tags and snapshots, each opened when first used.
    pub fn versions(&self, source: &Path) -> Result<archive::Archive> {
        let opts = match url_of(source) {
            Some(url) => remote::options(self, url)?,
            None if self.is_repository(source) => self.local_options(source)?.0,
            None => {
                return Err(Error::metadata(
                    source.display().to_string(),
                    "--all-refs: the versions of an Icechunk repository, and this is no local \
                     Icechunk repository",
                ));
            }
        };
        let refs = refs::Refs::new(source, opts)?;
        Ok(archive::Archive::with(Box::new(refs)))
    }

    /// [`Opener::open`], one dataset at a time: `each` is given every
    /// dataset found (its entries sorted, what it skipped) in the order
    /// of their paths, and nothing is kept, so `slabfs ls` of an archive
    /// of any size prints as it goes in bounded memory; `each` returning
    /// `Break` ends the walk (the reader went away). A SOURCE that is one
    /// dataset is one call with all of it.
    pub fn for_each(
        &self,
        source: &Path,
        each: &mut dyn FnMut(Dataset) -> ControlFlow<()>,
    ) -> Result<()> {
        if self.reference.is_none()
            && let Some(a) = self.archive(source)?
        {
            return archive_each(a.backend(), "", each).map(|_| ());
        }
        let _ = each(self.open(source)?);
        Ok(())
    }

    /// [`Opener::for_each`] of every version of the repository `source`
    /// ([`Opener::versions`]): `slabfs ls --all-refs`.
    pub fn for_each_version(
        &self,
        source: &Path,
        each: &mut dyn FnMut(Dataset) -> ControlFlow<()>,
    ) -> Result<()> {
        let a = self.versions(source)?;
        archive_each(a.backend(), "", each).map(|_| ())
    }

    /// Whether the local directory `dir` is one dataset (a directory
    /// format's: a Zarr store, an Icechunk repository), not a directory
    /// of them.
    pub fn is_dataset_dir(&self, dir: &Path) -> bool {
        classify_local(&self.formats, dir).is_some()
    }

    fn is_repository(&self, dir: &Path) -> bool {
        classify_local(&self.formats, dir).is_some_and(versioned)
    }

    /// The format a file SOURCE named as `source` is, by its name alone,
    /// when that is how the format is told (an NCA descriptor); else its
    /// content decides.
    fn told_by_name(&self, source: &Path) -> Option<&'static FormatEntry> {
        let name = source.file_name()?.to_str()?;
        match self.formats.classify_file(name)? {
            Found::Dataset { format, .. } if format.sniff.is_none() => Some(format),
            _ => None,
        }
    }

    /// What a SOURCE may be, for the message when it is nothing.
    fn expected(&self) -> String {
        let nouns: Vec<&str> = self.formats.iter().map(|f| f.noun).collect();
        format!("{} or a directory of datasets", nouns.join(", "))
    }

    /// The roots of the local SOURCE `source` and the options its
    /// datasets open with: its local roots, its `--allow-outside` URLs
    /// (connected now, so a bad one fails at mount), and the files
    /// (confined to the roots unless [`Opener::files`] says otherwise)
    /// routed with those URLs.
    fn local_options(&self, source: &Path) -> Result<(Options, Roots)> {
        let allowed = allowed_roots(source, &self.allow_outside);
        let roots = Roots::new(allowed.clone());
        let files = match &self.files {
            Some(f) => f.clone(),
            None => local::confined(roots.clone()),
        };
        let mut opts = Options::new(allowed, self.cache.clone(), self.formats.clone());
        opts.files = files;
        opts.max_open = self.max_open;
        let urls = self
            .allow_outside
            .iter()
            .filter_map(|r| url_of(r))
            .map(Location::parse)
            .collect::<Result<Vec<_>>>()?;
        if let Some(first) = urls.first() {
            let remote = self.need_network(&first.display())?.files(urls)?;
            opts.files = Arc::new(WithUrls {
                local: opts.files,
                remote: remote.clone(),
            });
            opts.remote = Some(remote);
        }
        Ok((opts, roots))
    }

    /// The network, or the error of a URL read without one.
    fn need_network(&self, url: &str) -> Result<&dyn Network> {
        self.network.as_deref().ok_or_else(|| Error::Io {
            path: crate::storage::location::strip_secrets(url),
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a URL, and no network to reach it was given",
            ),
        })
    }
}

/// Whether `found` is of a format with versions (`--ref`).
fn versioned(found: Found) -> bool {
    matches!(found, Found::Dataset { format, .. } if format.versioned)
}

/// Whether the local directory `dir` is one dataset of a built-in
/// directory format (a Zarr store, an Icechunk repository).
pub fn is_store_dir(dir: &Path) -> bool {
    classify_local(&registry::builtin(), dir).is_some()
}

/// What `formats` make of the local directory `dir` as a SOURCE (read
/// unconfined: it is SOURCE itself, or a path under it the caller
/// checked).
fn classify_local(formats: &Formats, dir: &Path) -> Option<Found> {
    let files = local::os();
    formats.classify_dir(&DirProbe::with_files(dir, files.as_ref()), false)
}

/// Open the dataset `found` at `at`: a directory format by its own open,
/// a file by the format its first bytes name ([`Formats::open_file`]).
/// `Ok(None)`: a file whose content says it is no dataset (a JSON file
/// holding no references).
pub(crate) fn open_found(found: Found, at: &At<'_>) -> Result<Option<Dataset>> {
    match found {
        Found::Directory => Err(Error::metadata(
            at.shown(),
            "a plain directory, not a dataset",
        )),
        Found::Dataset { format, .. } if format.layout == Layout::File => {
            at.opts.formats.open_file(at, Some(format))
        }
        Found::Dataset { format, .. } => (format.open)(at),
    }
    .map(|ds| ds.map(Dataset::sorted))
}

/// The roots everything read must resolve under: SOURCE if it is a
/// directory, else its directory (both where the name is and where it
/// points, when it is a symlink: the operator named it), and the
/// `--allow-outside` roots.
fn allowed_roots(source: &Path, allow_outside: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if source.is_dir() {
        roots.push(source.to_path_buf());
    } else {
        for p in [Some(source.to_path_buf()), source.canonicalize().ok()]
            .into_iter()
            .flatten()
        {
            roots.push(match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            });
        }
    }
    roots.extend(
        allow_outside
            .iter()
            .filter(|r| url_of(r).is_none())
            .cloned(),
    );
    roots
}

/// The name a store's root array takes when the store is SOURCE.
fn root_name(source: &Path) -> String {
    source
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "array".to_string())
}

/// Walk an archive's backend from its directory `dir`: each dataset
/// handed to `each` in the order of their paths (a container, a
/// directory or a dataset that is one, by its name and a `/`; a
/// single-array store, one file, by its name, so that `a.nc/v` comes
/// before `a/b.nc/v` as in a sorted list of paths); a dataset that fails
/// to open, and an entry refused (outside the roots), handed on as
/// skipped. The eager walks (`slabfs ls`, a mount's load of a directory)
/// are this over the same backends the lazy tree uses.
fn archive_each(
    a: &dyn Backend,
    dir: &str,
    each: &mut dyn FnMut(Dataset) -> ControlFlow<()>,
) -> Result<ControlFlow<()>> {
    let (listed, refused) = a.list(dir)?;
    if !refused.is_empty() {
        let flow = each(Dataset {
            skipped: refused,
            ..Dataset::default()
        });
        if flow.is_break() {
            return Ok(flow);
        }
    }
    let mut found: Vec<(String, String, Found)> = listed
        .into_iter()
        .map(|(n, f)| {
            let key = if f.is_single() {
                n.clone()
            } else {
                format!("{n}/")
            };
            (key, n, f)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, name, f) in found {
        let rel = crate::formats::entry::join(dir, &name);
        let flow = match f {
            Found::Directory => archive_each(a, &rel, each)?,
            _ => match a.open(&rel, f) {
                Ok(Some(ds)) if ds.is_empty() => ControlFlow::Continue(()),
                Ok(Some(ds)) => each(ds),
                Ok(None) => ControlFlow::Continue(()),
                Err(e) => {
                    log::debug!("skipping dataset {}/{rel}: {e}", a.source().display());
                    each(Dataset {
                        skipped: vec![e],
                        ..Dataset::default()
                    })
                }
            },
        };
        if flow.is_break() {
            return Ok(flow);
        }
    }
    Ok(ControlFlow::Continue(()))
}
