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
//! the extra roots given to [`open_with_roots`] (`--allow-outside`).
//!
//! A SOURCE that is a URL is read from its server the same way
//! ([`remote`]: a bucket prefix walked like a directory, or one dataset),
//! aggregations and references included. Where references may lead,
//! local or remote, is decided in one place ([`crate::storage::scope`]);
//! a local SOURCE's `--allow-outside` URLs are connected at open and its
//! files routed through [`WithUrls`].
//!
//! Dataset files are recognised by content, not name: SOURCE itself is
//! sniffed whatever its name, and inside a directory every regular file
//! with a netCDF extension ([`NETCDF_EXTENSIONS`]) is. Sniffing every file
//! of a directory would open each of them on every listing and refresh;
//! the extensions keep that to the files that claim to be netCDF (and
//! HDF5: [`HDF5_EXTENSIONS`]).
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

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::engine::array::ArraySource;
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::{Options, hdf5, icechunk, kerchunk, nca, netcdf, packed, zarr};
use crate::storage::local;
use crate::storage::local::confine::Roots;
use crate::storage::location::{Location, url_of};
use crate::storage::scope::WithUrls;
use crate::storage::{Files, Network};

pub mod archive;
mod refs;
mod remote;

/// What the walk makes of one directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A plain directory: walked for datasets.
    Directory,
    /// A Zarr store; `array`: its root is an array (the store shows as
    /// one file), else a group (a directory).
    Store { array: bool },
    /// An Icechunk repository (a directory or prefix): the Zarr hierarchy
    /// of its snapshot, a directory; its version is its head's
    /// ([`icechunk::head_version`]), not every object's.
    Repository,
    /// A file with a netCDF or HDF5 extension.
    File,
    /// An NCA descriptor (`*.nca.json`).
    Descriptor,
    /// Another `*.json` file: kerchunk references, or no dataset at all
    /// (only reading it tells).
    Json,
}

impl Found {
    /// Whether the entry is a dataset of its own (opened as a whole).
    pub fn is_dataset(self) -> bool {
        self != Found::Directory
    }
}

/// Where an archive's listings, lookups and opens go: a directory on
/// disk (`archive::Local`) or a bucket prefix (`super::remote`).
pub(crate) trait Backend: Send + Sync {
    fn source(&self) -> &Path;
    fn stamp(&self, _rel: &str) -> Option<(std::time::SystemTime, u64)> {
        None
    }
    fn find(&self, rel: &str) -> Option<Found>;
    fn list(&self, rel: &str) -> Result<Vec<(String, Found)>>;
    fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>>;
    fn forget_listings(&self) {}
    fn version(&self, _rel: &str, _found: Found) -> Option<u64> {
        None
    }
}

/// One array of a dataset and its path in the mount.
#[derive(Clone)]
pub struct Entry {
    pub path: String,
    pub array: Arc<dyn ArraySource>,
}

/// The attributes of one directory of the mount (a file, a group, a
/// descriptor) and where they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct Directory {
    pub attributes: Map<String, Value>,
    /// A netCDF file's or group's own dimensions (name, length: netCDF's,
    /// the records for an unlimited one; unlimited): a classic file's in
    /// definition order, a netCDF-4 (HDF5) file's by name (its dimension
    /// scales'); empty for every other format.
    pub dimensions: Vec<(String, u64, bool)>,
    /// The file (or Zarr group) the attributes come from: a path that
    /// exists while they do (a kerchunk group's is its references file),
    /// for a refresh to tell a failed re-open from a removal.
    pub source: String,
}

/// The arrays found under a source, sorted by path, the attributes of its
/// directories and what was skipped.
#[derive(Default)]
pub struct Dataset {
    pub entries: Vec<Entry>,
    /// Directories with attributes or dimensions, by mount path (`""`:
    /// the root).
    pub directories: BTreeMap<String, Directory>,
    /// Datasets or arrays that could not be opened.
    pub skipped: Vec<Error>,
}

impl Dataset {
    pub fn get(&self, path: &str) -> Option<&Entry> {
        let path = path.trim_matches('/');
        self.entries.iter().find(|e| e.path == path)
    }

    /// Record the attributes and dimensions of the directory at mount
    /// path `path` (neither: nothing recorded); the first of two at one
    /// path stays.
    fn add_directory(&mut self, path: String, dir: Directory) {
        if !dir.attributes.is_empty() || !dir.dimensions.is_empty() {
            self.directories.entry(path).or_insert(dir);
        }
    }
}

/// `prefix/rel`, either side possibly empty.
fn join(prefix: &str, rel: &str) -> String {
    match (prefix.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}/{rel}"),
    }
}

/// Directories deeper than this are not searched (symlink loops).
pub const MAX_DEPTH: usize = 32;

/// Open `source` (a Zarr store, a netCDF-3 file, an NCA descriptor or a
/// directory of datasets).
pub fn open(source: &Path, cache: Arc<ChunkCache>) -> Result<Dataset> {
    open_with_roots(source, cache, &[])
}

/// [`open`], letting aggregations also reference files under
/// `allow_outside` (besides SOURCE).
pub fn open_with_roots(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
) -> Result<Dataset> {
    open_in(source, cache, allow_outside, None)
}

/// [`open_with_roots`], reaching URLs (a URL SOURCE, `--allow-outside`
/// URLs) through `network`; without one, a URL is an error. The daemon's
/// is its [`crate::storage::remote::Remote`].
pub fn open_in(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<Arc<dyn Network>>,
) -> Result<Dataset> {
    // A URL (s3://, gs://, az://, http(s)://...) is read from its server.
    if let Some(url) = url_of(source) {
        return remote::open(url, None, cache, allow_outside, network.as_deref());
    }
    let roots = Roots::new(allowed_roots(source, allow_outside));
    open_files(
        source,
        cache,
        allow_outside,
        local::confined(roots),
        network.as_deref(),
    )
}

/// [`open_in`], or [`open_repository`] at `reference` when one is given.
pub fn open_version(
    source: &Path,
    reference: Option<&str>,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<Arc<dyn Network>>,
) -> Result<Dataset> {
    match reference {
        Some(r) => open_repository(source, r, cache, allow_outside, network),
        None => open_in(source, cache, allow_outside, network),
    }
}

/// [`open_in`] of an Icechunk repository at `reference` (a branch, a tag
/// or a snapshot id; `--ref`) instead of the tip of `main`. An error when
/// `source` is no repository (only a repository has versions).
pub fn open_repository(
    source: &Path,
    reference: &str,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<Arc<dyn Network>>,
) -> Result<Dataset> {
    if let Some(url) = url_of(source) {
        let network = network.as_deref();
        return remote::open(url, Some(reference), cache, allow_outside, network);
    }
    if !icechunk::is_source(source) {
        return Err(Error::metadata(
            source.display().to_string(),
            format!(
                "--ref {reference}: a branch, tag or snapshot of an Icechunk repository, and \
                 this is no local Icechunk repository"
            ),
        ));
    }
    let roots = Roots::new(allowed_roots(source, allow_outside));
    let opts = local_options(
        source,
        cache,
        allow_outside,
        local::confined(roots),
        network.as_deref(),
    )?;
    let mut ds = Dataset::default();
    let name = root_name(source);
    add_hierarchy(&mut ds, source, "", &name, &opts, Some(reference))?;
    ds.entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ds)
}

/// The network `network`, or the error of a URL read without one.
fn need_network<'a>(network: Option<&'a dyn Network>, url: &str) -> Result<&'a dyn Network> {
    network.ok_or_else(|| Error::Io {
        path: crate::storage::location::strip_secrets(url),
        source: std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "a URL, and no network to reach it was given",
        ),
    })
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

/// The options a local SOURCE's datasets open with: its local roots, its
/// `--allow-outside` URLs (connected now, so a bad one fails at mount),
/// and `files` (local paths) routed with those URLs.
fn local_options(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    files: Arc<dyn Files>,
    network: Option<&dyn Network>,
) -> Result<Options> {
    let mut opts = Options::new(allowed_roots(source, allow_outside), cache);
    opts.files = files;
    let urls = allow_outside
        .iter()
        .filter_map(|r| url_of(r))
        .map(Location::parse)
        .collect::<Result<Vec<_>>>()?;
    if let Some(first) = urls.first() {
        let remote = need_network(network, &first.display())?.files(urls)?;
        opts.files = Arc::new(WithUrls {
            local: opts.files,
            remote: remote.clone(),
        });
        opts.remote = Some(remote);
    }
    Ok(opts)
}

/// The roots of the local SOURCE `source` and the options its datasets
/// open with ([`local_options`]), every file read confined to the roots.
fn confined_options(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<&dyn Network>,
) -> Result<(Options, Roots)> {
    let roots = Roots::new(allowed_roots(source, allow_outside));
    let files = local::confined(roots.clone());
    let opts = local_options(source, cache, allow_outside, files, network)?;
    Ok((opts, roots))
}

/// [`open_with_roots`], reading every data file and store through `files`
/// (the daemon's is confined to the roots; tests pass one that injects
/// faults). The walk of a directory SOURCE is confined to the roots
/// whatever `files` is.
pub fn open_with(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    files: Arc<dyn Files>,
) -> Result<Dataset> {
    open_files(source, cache, allow_outside, files, None)
}

/// [`open_with`], `--allow-outside` URLs reached through `network`.
fn open_files(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    files: Arc<dyn Files>,
    network: Option<&dyn Network>,
) -> Result<Dataset> {
    let meta = std::fs::metadata(source).map_err(|e| Error::Io {
        path: source.display().to_string(),
        source: e,
    })?;
    let opts = local_options(source, cache, allow_outside, files, network)?;
    let mut ds = Dataset::default();
    if meta.is_dir() && is_store_dir(source) {
        add_store(&mut ds, source, "", &root_name(source), &opts)?;
    } else if meta.is_dir() {
        let roots = Roots::new(opts.roots.clone());
        walk(&mut ds, source, "", &opts, &roots, 0)?;
    } else if nca::is_descriptor(source) {
        add_descriptor(&mut ds, source, "", &opts)?;
    } else if !add_file(&mut ds, source, "", &opts)? && !add_references(&mut ds, source, "", &opts)?
    {
        return Err(Error::metadata(
            source.display().to_string(),
            "not a dataset (expected a Zarr store, a netCDF-3 file or a directory of datasets)",
        ));
    }
    ds.entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ds)
}

/// Every version of the Icechunk repository `source` (a directory or a
/// URL) as a directory of datasets (`--all-refs`, [`refs`]): its
/// branches, tags and snapshots, each opened when first used.
pub fn refs_archive(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<Arc<dyn Network>>,
) -> Result<archive::Archive> {
    let opts = match url_of(source) {
        Some(url) => remote::options(url, cache, allow_outside, network.as_deref())?,
        None if icechunk::is_source(source) => {
            confined_options(source, cache, allow_outside, network.as_deref())?.0
        }
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

/// [`for_each_in`] of every version of the repository `source`
/// ([`refs_archive`]): `slabfs ls --all-refs`.
pub fn for_each_version(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<Arc<dyn Network>>,
    each: &mut dyn FnMut(Dataset) -> ControlFlow<()>,
) -> Result<()> {
    let a = refs_archive(source, cache, allow_outside, network)?;
    archive_each(a.backend(), "", each).map(|_| ())
}

/// The archive `source` is, when it is a directory of datasets: a plain
/// local directory, or a listable bucket prefix that is neither one store
/// nor one object; `None` for one dataset (open it with [`open_in`]).
pub fn archive_of(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<Arc<dyn Network>>,
) -> Result<Option<archive::Archive>> {
    if let Some(url) = url_of(source) {
        return Ok(
            remote::archive(url, cache, allow_outside, network.as_deref())?
                .map(|r| archive::Archive::with(Box::new(r))),
        );
    }
    if source.is_dir() && !is_store_dir(source) {
        return archive::Archive::new(source, cache, allow_outside, network).map(Some);
    }
    Ok(None)
}

/// [`open_in`], one dataset at a time: `each` is given every dataset
/// found (its entries sorted, what it skipped) in the order of their
/// paths, and nothing is kept, so `slabfs ls` of an archive of any size
/// prints as it goes in bounded memory; `each` returning `Break` ends the
/// walk (the reader went away). A SOURCE that is not a plain local
/// directory is one call with all of it.
pub fn for_each_in(
    source: &Path,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<Arc<dyn Network>>,
    each: &mut dyn FnMut(Dataset) -> ControlFlow<()>,
) -> Result<()> {
    if let Some(url) = url_of(source) {
        // A prefix of datasets: level by level, as the mount lists it.
        return match remote::archive(url, cache.clone(), allow_outside, network.as_deref())? {
            Some(a) => archive_each(&a, "", each).map(|_| ()),
            None => {
                let _ = each(open_in(source, cache, allow_outside, network)?);
                Ok(())
            }
        };
    }
    let plain_dir = source.is_dir() && !is_store_dir(source);
    if !plain_dir {
        let _ = each(open_in(source, cache, allow_outside, network)?);
        return Ok(());
    }
    let (opts, roots) = confined_options(source, cache, allow_outside, network.as_deref())?;
    walk_each(source, "", &opts, &roots, 0, each).map(|_| ())
}

/// [`walk_each`] over an archive's backend (a bucket prefix): its levels
/// as listed, in the order of their paths; a dataset that fails to open
/// is handed on as skipped.
fn archive_each(
    a: &dyn Backend,
    dir: &str,
    each: &mut dyn FnMut(Dataset) -> ControlFlow<()>,
) -> Result<ControlFlow<()>> {
    let mut found: Vec<(String, String, Found)> = a
        .list(dir)?
        .into_iter()
        .map(|(n, f)| {
            let key = match f {
                Found::Store { array: true } => n.clone(),
                _ => format!("{n}/"),
            };
            (key, n, f)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, name, f) in found {
        let rel = join(dir, &name);
        let flow = match f {
            Found::Directory => archive_each(a, &rel, each)?,
            _ => match a.open(&rel, f) {
                Ok(Some(ds)) => each(ds),
                Ok(None) => ControlFlow::Continue(()),
                Err(e) => each(Dataset {
                    skipped: vec![e],
                    ..Dataset::default()
                }),
            },
        };
        if flow.is_break() {
            return Ok(flow);
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// [`walk`], handing each dataset to `each` as it is found. Entries are
/// visited in the order their paths sort in: a container (a directory, a
/// dataset file) by its name and a `/`, a single-array store (one file)
/// by its name, so that `a.nc/v` comes before `a/b.nc/v` as in a sorted
/// list of paths.
fn walk_each(
    dir: &Path,
    prefix: &str,
    opts: &Options,
    roots: &Roots,
    depth: usize,
    each: &mut dyn FnMut(Dataset) -> ControlFlow<()>,
) -> Result<ControlFlow<()>> {
    let io_err = |e| Error::Io {
        path: dir.display().to_string(),
        source: e,
    };
    let mut names: Vec<(String, String)> = std::fs::read_dir(dir)
        .map_err(io_err)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .map(|n| {
            let leaf = zarr::store_root(&dir.join(&n)) == Some(true);
            (if leaf { n.clone() } else { format!("{n}/") }, n)
        })
        .collect();
    names.sort();
    for (_, name) in names {
        let path = dir.join(&name);
        let plain = path.is_dir() && !is_store_dir(&path) && roots.check(&path).is_ok();
        if plain {
            if depth < MAX_DEPTH
                && walk_each(&path, &join(prefix, &name), opts, roots, depth + 1, each)?.is_break()
            {
                return Ok(ControlFlow::Break(()));
            }
            continue;
        }
        let mut part = Dataset::default();
        add_named(&mut part, dir, &name, prefix, opts, roots, depth)?;
        if !part.entries.is_empty() || !part.skipped.is_empty() || !part.directories.is_empty() {
            part.entries.sort_by(|a, b| a.path.cmp(&b.path));
            if each(part).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Whether the directory `dir` holds one Zarr hierarchy: a Zarr store,
/// or an Icechunk repository (read as the store of its snapshot).
pub fn is_store_dir(dir: &Path) -> bool {
    zarr::is_store(dir) || icechunk::is_repository(dir)
}

/// Add the arrays of the store at `dir`, under the mount path `prefix`. A
/// store whose root is an array appears as one file named `root_name`.
fn add_store(
    ds: &mut Dataset,
    dir: &Path,
    prefix: &str,
    root_name: &str,
    opts: &Options,
) -> Result<()> {
    add_hierarchy(ds, dir, prefix, root_name, opts, None)
}

/// The name a store's root array takes when the store is SOURCE.
fn root_name(source: &Path) -> String {
    source
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "array".to_string())
}

/// [`add_store`], an Icechunk repository at `reference` (`None`: the tip
/// of `main`).
fn add_hierarchy(
    ds: &mut Dataset,
    dir: &Path,
    prefix: &str,
    root_name: &str,
    opts: &Options,
    reference: Option<&str>,
) -> Result<()> {
    let store: Arc<dyn crate::storage::Store> = if icechunk::is_repository(dir) {
        Arc::new(icechunk::IcechunkStore::open(dir, reference, opts)?)
    } else {
        opts.files.store(dir)
    };
    let h = zarr::open_store(store, opts.cache.clone())?;
    let source = dir.display().to_string();
    push_hierarchy(ds, h, prefix, root_name, &source, GroupSource::Nested);
    Ok(())
}

/// Where a hierarchy's groups are read from, for their
/// [`Directory::source`] (shown in the sidecar, and what a refresh that
/// met failures checks still exists before keeping a group's attributes).
#[derive(Clone, Copy)]
enum GroupSource {
    /// A Zarr store: each group is its own directory (or prefix) in it.
    Nested,
    /// A kerchunk references file: every group is in the one file
    /// (`refs.json/grp` is no path).
    Whole,
}

/// Add the arrays of a Zarr hierarchy under the mount path `prefix` (a
/// root array is the file `prefix`, or `root_name` at the top), and its
/// groups' attributes (`source`: where the store is).
fn push_hierarchy(
    ds: &mut Dataset,
    h: zarr::Hierarchy,
    prefix: &str,
    root_name: &str,
    source: &str,
    groups: GroupSource,
) {
    for node in h.nodes {
        if node.array.is_none() {
            // v2 groups' are already without NCZarr's bookkeeping; v3
            // groups' and references' not.
            let mut attributes = node.attributes;
            zarr::nczarr::hide_bookkeeping(&mut attributes);
            ds.add_directory(
                join(prefix, &node.path),
                Directory {
                    attributes,
                    dimensions: Vec::new(),
                    source: match groups {
                        GroupSource::Nested => join(source, &node.path),
                        GroupSource::Whole => source.to_string(),
                    },
                },
            );
        }
        if let Some(array) = node.array {
            let rel = if node.path.is_empty() {
                root_name
            } else {
                &node.path
            };
            let path = if prefix.is_empty() {
                rel.to_string()
            } else if node.path.is_empty() {
                // A single-array store inside a directory: the store's own
                // directory name is the file name.
                prefix.to_string()
            } else {
                format!("{prefix}/{rel}")
            };
            ds.entries.push(Entry { path, array });
        }
    }
    ds.skipped.extend(h.skipped);
}

/// Add the arrays of the kerchunk references file `file` under `prefix`;
/// `Ok(false)` when the file holds no references.
fn add_references(ds: &mut Dataset, file: &Path, prefix: &str, opts: &Options) -> Result<bool> {
    let Some(h) = kerchunk::open(file, opts)? else {
        return Ok(false);
    };
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    let source = file.display().to_string();
    let root_name = name.as_deref().unwrap_or("array");
    push_hierarchy(ds, h, prefix, root_name, &source, GroupSource::Whole);
    Ok(true)
}

/// File name extensions (case-insensitive) of files sniffed for a dataset
/// while walking a directory.
pub const NETCDF_EXTENSIONS: &[&str] = &["nc", "nc3", "nc4", "cdf", "netcdf", packed::EXTENSION];

/// File name extensions (case-insensitive) of HDF5 files sniffed while
/// walking a directory (h5py's and the HDF Group's usual names).
pub const HDF5_EXTENSIONS: &[&str] = &["h5", "hdf5", "he5", "hdf"];

fn has_dataset_extension(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && NETCDF_EXTENSIONS
                .iter()
                .chain(HDF5_EXTENSIONS)
                .any(|e| ext.eq_ignore_ascii_case(e))
    })
}

/// What a regular file named `name` is to the walk, by its name alone:
/// an NCA descriptor, a netCDF or HDF5 file, a `*.json` that may hold
/// references; `None`: not looked at.
fn found_by_name(name: &str) -> Option<Found> {
    if nca::is_descriptor(Path::new(name)) {
        Some(Found::Descriptor)
    } else if has_dataset_extension(name) {
        Some(Found::File)
    } else if kerchunk::has_json_extension(name) {
        Some(Found::Json)
    } else {
        None
    }
}

/// Add the dataset `found` at the local `path` (named `name`) under the
/// mount path `rel`. `Ok(false)`: a JSON file holding no references (no
/// dataset); a file that is no netCDF file despite its name is an error.
fn add_found(
    ds: &mut Dataset,
    path: &Path,
    rel: &str,
    name: &str,
    found: Found,
    opts: &Options,
) -> Result<bool> {
    match found {
        Found::Directory => Err(Error::metadata(
            path.display().to_string(),
            "a plain directory, not a dataset",
        )),
        Found::Store { .. } => add_store(ds, path, rel, name, opts).map(|()| true),
        Found::Repository => add_hierarchy(ds, path, rel, name, opts, None).map(|()| true),
        Found::File if add_file(ds, path, rel, opts)? => Ok(true),
        Found::File => Err(Error::metadata(
            path.display().to_string(),
            "not a netCDF file (no CDF or HDF5 magic number)",
        )),
        Found::Descriptor => add_descriptor(ds, path, rel, opts).map(|()| true),
        Found::Json => add_references(ds, path, rel, opts),
    }
}

/// Add the arrays of the dataset file `file` under the mount path `prefix`
/// (its variables at the root when `prefix` is empty). `Ok(false)` when
/// the file is no dataset at all.
fn add_file(ds: &mut Dataset, file: &Path, prefix: &str, opts: &Options) -> Result<bool> {
    // A virtual dataset's sources: through the same files, confined as
    // every other reference of this file.
    let sources = hdf5::vds::Sources {
        files: opts.files.clone(),
        scope: opts.scope_for(file),
        path: file.to_path_buf(),
    };
    match netcdf::open_any_with(file, opts.files.as_ref(), &opts.cache, Some(sources))? {
        netcdf::Opened::Netcdf3(nc) => {
            // NCA variables assembled, `nca_private` ones hidden.
            let vars = nca::netcdf::variables(Arc::new(*nc), opts);
            push_variables(ds, prefix, vars, file);
            Ok(true)
        }
        netcdf::Opened::Hdf5(h) => {
            // netCDF-4: aggregation variables assembled too.
            let nc = nca::ncfile::NcFile::hdf5(file.display().to_string(), h);
            let vars = nca::netcdf::file_variables(Arc::new(nc), opts);
            push_variables(ds, prefix, vars, file);
            Ok(true)
        }
        netcdf::Opened::Other => Ok(false),
    }
}

/// Add the variables of an NCA descriptor under `prefix`.
fn add_descriptor(ds: &mut Dataset, file: &Path, prefix: &str, opts: &Options) -> Result<()> {
    push_variables(ds, prefix, nca::open_json(file, opts)?, file);
    Ok(())
}

/// Add the variables of the file `file` under `prefix`, and its groups'
/// attributes and dimensions (its global ones at `prefix`).
fn push_variables(ds: &mut Dataset, prefix: &str, vars: nca::Variables, file: &Path) {
    let source = file.display().to_string();
    let mut groups: BTreeMap<String, Directory> = BTreeMap::new();
    for (group, attributes) in vars.groups {
        groups.entry(group).or_insert(Directory {
            attributes,
            dimensions: Vec::new(),
            source: source.clone(),
        });
    }
    for d in vars.dimensions {
        let (group, name) = d.name.rsplit_once('/').unwrap_or(("", &d.name));
        groups
            .entry(group.to_string())
            .or_insert_with(|| Directory {
                attributes: Map::new(),
                dimensions: Vec::new(),
                source: source.clone(),
            })
            .dimensions
            .push((name.to_string(), d.len, d.is_unlimited));
    }
    for (group, dir) in groups {
        ds.add_directory(join(prefix, &group), dir);
    }
    for (name, array) in vars.arrays {
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        ds.entries.push(Entry { path, array });
    }
    ds.skipped.extend(vars.skipped);
}

fn walk(
    ds: &mut Dataset,
    dir: &Path,
    prefix: &str,
    opts: &Options,
    roots: &Roots,
    depth: usize,
) -> Result<()> {
    let io_err = |e| Error::Io {
        path: dir.display().to_string(),
        source: e,
    };
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(io_err)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    for name in names {
        add_named(ds, dir, &name, prefix, opts, roots, depth)?;
    }
    Ok(())
}

/// What the walk of `dir` finds at its entry `name` (mount path `prefix`
/// + `name`): a dataset, or, for a plain directory, everything under it.
fn add_named(
    ds: &mut Dataset,
    dir: &Path,
    name: &str,
    prefix: &str,
    opts: &Options,
    roots: &Roots,
    depth: usize,
) -> Result<()> {
    let path = dir.join(name);
    let rel = if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    };
    let by_name = found_by_name(name);
    if !path.is_dir() && by_name.is_none() {
        return Ok(()); // not a dataset by its name: not looked at
    }
    // A symlink may lead anywhere: only what resolves under the roots
    // is a dataset of this mount (devices and FIFOs never are).
    if let Err(real) = roots.check(&path) {
        ds.skipped.push(Error::metadata(
            path.display().to_string(),
            format!(
                "resolves to {}, outside the allowed roots ({}): not shown",
                real.display(),
                roots.describe()
            ),
        ));
        return Ok(());
    }
    if !path.is_dir() {
        if let Some(found) = by_name.filter(|_| path.is_file())
            && let Err(e) = add_found(ds, &path, &rel, name, found, opts)
        {
            log::debug!("skipping dataset {}: {e}", path.display());
            ds.skipped.push(e);
        }
        return Ok(());
    }
    if is_store_dir(&path) {
        let store = Found::Store { array: false };
        if let Err(e) = add_found(ds, &path, &rel, name, store, opts) {
            log::debug!("skipping dataset {}: {e}", path.display());
            ds.skipped.push(e);
        }
    } else if depth < MAX_DEPTH {
        walk(ds, &path, &rel, opts, roots, depth + 1)?;
    }
    Ok(())
}
