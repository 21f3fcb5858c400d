//! Datasets at a URL: the same discovery as on disk, over an object store.
//!
//! A SOURCE that is a URL (`s3://bucket/runs/`, `https://host/x.zarr`,
//! [`crate::storage::remote::is_url`]) opens here instead of through the
//! file system:
//!
//! - **a prefix of a bucket** (S3, GCS, Azure) is walked like a
//!   directory, one delimiter listing per level: a level holding
//!   `zarr.json`, `.zgroup`, `.zarray` or `.zmetadata` is a Zarr store,
//!   one holding `snapshots/` and `refs/` (or `repo`) an Icechunk
//!   repository (the hierarchy of its snapshot, [`icechunk`]),
//!   an object with a netCDF extension ([`super::NETCDF_EXTENSIONS`]) is a
//!   netCDF-3 file or blocked archive, and every other prefix is a
//!   directory of datasets. Names and paths are the ones the same tree
//!   has on disk (`runs/a.zarr/temp`, `runs/b.nc/temp`).
//! - **one object** (any store) is a dataset file, its variables at the
//!   root.
//! - **HTTP** cannot list: the URL names one dataset, a Zarr store (a
//!   single array, or a group with consolidated metadata) or a file.
//!
//! NCA descriptors (`*.nca.json`) and kerchunk reference files (any
//! other `*.json`, recognised by content: one that is not references is
//! passed over) are datasets here as on disk, and so are CF-1.13 and
//! CFA-0.4 aggregation variables in netCDF objects. Their references are
//! resolved against their own URL ([`crate::storage::scope`]).
//!
//! The formats read through [`RemoteFiles`](crate::storage::remote::RemoteFiles), which answers their paths
//! (the URL joined with names, as `Path`s) with ranged GETs and keys, and
//! refuses any location outside the source's bucket and prefix (or host
//! and path) unless `--allow-outside URL` admits it, and any local path
//! at all.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Backend, Dataset, Found, GroupSource, MAX_DEPTH, push_hierarchy};
use crate::engine::cache::ChunkCache;
use crate::error::{Error, Result};
use crate::formats::{Options, icechunk, nca, zarr};
use crate::storage::location::{Location, url_of};
use crate::storage::{ByteRange, Listed, Network, Store, UrlFiles};

use crate::formats::zarr::STORE_KEYS as ZARR_KEYS;

/// Open the dataset(s) at the URL `url`; `allow_outside` URLs are further
/// locations references may read (local paths are ignored: a remote
/// source never reads local files).
pub(super) fn open(
    url: &str,
    reference: Option<&str>,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<&dyn Network>,
) -> Result<Dataset> {
    let network = super::need_network(network, url)?;
    let root = Location::parse(url)?;
    let extra = outside_urls(&root, allow_outside)?;
    // What references may read: under the source, or, when the source
    // is one object, under the prefix holding it (as a file SOURCE on
    // disk may read its directory); and the `--allow-outside` URLs.
    let options = |within: &Location| options_within(within, &extra, &cache, network);
    let opts = options(&root)?;
    let files = opts.remote.clone().expect("set above");
    let io = |loc: &Location| {
        let shown = loc.display();
        move |source| Error::Io {
            path: shown.clone(),
            source,
        }
    };
    let store = files.store_at(&root).map_err(io(&root))?;
    let name = root.name().unwrap_or_else(|| "array".to_string());
    let mut ds = Dataset::default();
    // A version was asked for: only a repository has them.
    let no_versions = || {
        Error::metadata(
            root.display(),
            format!(
                "--ref {}: a branch, tag or snapshot of an Icechunk repository, and this is no \
                 Icechunk repository",
                reference.unwrap_or_default()
            ),
        )
    };
    if root.scheme().lists() {
        let listing = store.list_dir("")?;
        let repository = is_repository(&listing);
        if reference.is_some() && !repository {
            return Err(no_versions());
        }
        if is_store(&listing) {
            let h = hierarchy(&root, store, repository, reference, &opts)?;
            push_hierarchy(&mut ds, h, "", &name, &root.display(), GroupSource::Nested);
        } else if listing.is_empty() {
            if !exists(store.as_ref(), "")? {
                return Err(Error::Io {
                    path: root.display(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "no such object or prefix",
                    ),
                });
            }
            add_object(&mut ds, &root, "", &options(&root.parent())?)?;
        } else {
            walk(&mut ds, files.as_ref(), &root, listing, "", &opts, 0);
        }
    } else if exists(store.as_ref(), icechunk::FIRST_SNAPSHOT_KEY)? {
        // A repository over HTTP: no listing, its first snapshot asked.
        let h = hierarchy(&root, store, true, reference, &opts)?;
        push_hierarchy(&mut ds, h, "", &name, &root.display(), GroupSource::Nested);
    } else if reference.is_some() {
        return Err(no_versions());
    } else if probe_store(store.as_ref())? {
        push_hierarchy(
            &mut ds,
            zarr::open_store(store, opts.cache.clone())?,
            "",
            &name,
            &root.display(),
            GroupSource::Nested,
        );
    } else {
        add_object(&mut ds, &root, "", &options(&root.parent())?)?;
    }
    ds.entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ds)
}

/// Whether a prefix listed as `listing` holds one hierarchy: a Zarr
/// store or an Icechunk repository.
/// The `--allow-outside` URLs (a local path is ignored for a remote
/// source, with a warning).
fn outside_urls(root: &Location, allow_outside: &[PathBuf]) -> Result<Vec<Location>> {
    let mut extra = Vec::new();
    for r in allow_outside {
        match url_of(r) {
            Some(s) => extra.push(Location::parse(s)?),
            None => log::warn!(
                "--allow-outside {}: a local path, ignored for the remote source {}",
                r.display(),
                root.display()
            ),
        }
    }
    Ok(extra)
}

/// The options of datasets whose references may read under `within` and
/// the `extra` URLs.
fn options_within(
    within: &Location,
    extra: &[Location],
    cache: &Arc<ChunkCache>,
    network: &dyn Network,
) -> Result<Options> {
    let mut roots = vec![within.clone()];
    roots.extend(extra.iter().cloned());
    let files = network.files(roots)?;
    Ok(Options {
        roots: Vec::new(),
        remote: Some(files.clone()),
        cache: cache.clone(),
        files: files as Arc<dyn crate::storage::Files>,
    })
}

/// The options of the datasets of the URL SOURCE `url` ([`open`]'s).
pub(super) fn options(
    url: &str,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<&dyn Network>,
) -> Result<Options> {
    let network = super::need_network(network, url)?;
    let root = Location::parse(url)?;
    let extra = outside_urls(&root, allow_outside)?;
    options_within(&root, &extra, &cache, network)
}

fn is_store(listing: &[(String, bool)]) -> bool {
    is_repository(listing)
        || listing
            .iter()
            .any(|(n, is_dir)| !is_dir && ZARR_KEYS.contains(&n.as_str()))
}

fn is_repository(listing: &[(String, bool)]) -> bool {
    icechunk::is_repository_listing(listing.iter().map(|(n, d)| (n.as_str(), *d)))
}

/// The hierarchy of the store at `loc` (`store`): an Icechunk
/// repository's at `reference`, or the Zarr store's.
fn hierarchy(
    loc: &Location,
    store: Arc<dyn Store>,
    repository: bool,
    reference: Option<&str>,
    opts: &Options,
) -> Result<zarr::Hierarchy> {
    let store: Arc<dyn Store> = if repository {
        let dir = PathBuf::from(loc.display());
        Arc::new(icechunk::IcechunkStore::open(&dir, reference, opts)?)
    } else {
        store
    };
    zarr::open_store(store, opts.cache.clone())
}

/// The entries of `listing` (sorted by name, as a store lists) named
/// `name`: an object, a prefix, or both. A binary search: a refresh asks
/// after every dataset in use of a directory of thousands.
fn named<'a>(listing: &'a [Listed], name: &str) -> &'a [Listed] {
    let from = listing.partition_point(|l| l.name.as_str() < name);
    let to = from + listing[from..].partition_point(|l| l.name == name);
    &listing[from..to]
}

/// [`is_store`] of a listing with versions.
fn holds_store(listing: &[Listed]) -> bool {
    holds_repository(listing)
        || listing
            .iter()
            .any(|l| !l.is_dir && ZARR_KEYS.contains(&l.name.as_str()))
}

/// [`is_repository`] of a listing with versions.
fn holds_repository(listing: &[Listed]) -> bool {
    icechunk::is_repository_listing(listing.iter().map(|l| (l.name.as_str(), l.is_dir)))
}

/// Whether a store that cannot list has Zarr metadata at its root (a
/// HEAD per key until one answers).
fn probe_store(store: &dyn Store) -> Result<bool> {
    for k in ZARR_KEYS {
        if exists(store, k)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether `key` exists in `store`: a read of no bytes, which a remote
/// store answers with a HEAD.
fn exists(store: &dyn Store, key: &str) -> Result<bool> {
    Ok(store
        .get_range(key, ByteRange::At { offset: 0, len: 0 })?
        .is_some())
}

/// Add the dataset file at `loc` under the mount path `prefix`.
fn add_object(ds: &mut Dataset, loc: &Location, prefix: &str, opts: &Options) -> Result<()> {
    let name = loc.name().unwrap_or_default();
    // The URL as the formats' path: the UrlFiles map it back.
    let path = PathBuf::from(loc.display());
    if nca::is_descriptor(Path::new(&name)) {
        return super::add_descriptor(ds, &path, prefix, opts);
    }
    // netCDF-3, blocked archive or netCDF-4/HDF5, by the magic number:
    // the same reader a file on disk gets; else references.
    if super::add_file(ds, &path, prefix, opts)? || super::add_references(ds, &path, prefix, opts)?
    {
        Ok(())
    } else {
        Err(Error::metadata(
            loc.display(),
            "not a dataset (a netCDF, netCDF-4/HDF5 or blocked netCDF-3 archive, an NCA \
             descriptor or a kerchunk references file)",
        ))
    }
}

/// Walk the prefix `dir` (whose listing is `listing`) as a directory of
/// datasets at the mount path `prefix`. Anything that fails is skipped
/// with its error, as on disk.
fn walk(
    ds: &mut Dataset,
    files: &dyn UrlFiles,
    dir: &Location,
    listing: Vec<(String, bool)>,
    prefix: &str,
    opts: &Options,
    depth: usize,
) {
    for (name, is_dir) in listing {
        if name.starts_with('.') {
            continue;
        }
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let result = dir.child(&name).and_then(|loc| {
            if is_dir {
                let store = files.store_at(&loc).map_err(|source| Error::Io {
                    path: loc.display(),
                    source,
                })?;
                let sub = store.list_dir("")?;
                if is_store(&sub) {
                    let h = hierarchy(&loc, store, is_repository(&sub), None, opts)?;
                    push_hierarchy(ds, h, &rel, &name, &loc.display(), GroupSource::Nested);
                } else if depth < MAX_DEPTH {
                    walk(ds, files, &loc, sub, &rel, opts, depth + 1);
                }
                Ok(())
            } else {
                match super::found_by_name(&name) {
                    Some(Found::Descriptor) => {
                        super::add_descriptor(ds, Path::new(&loc.display()), &rel, opts)
                    }
                    Some(Found::File) => add_object(ds, &loc, &rel, opts),
                    // Ok(false): some other JSON document, not a dataset.
                    Some(Found::Json) => {
                        super::add_references(ds, Path::new(&loc.display()), &rel, opts).map(|_| ())
                    }
                    _ => Ok(()),
                }
            }
        });
        if let Err(e) = result {
            log::debug!("skipping dataset {}: {e}", dir.display());
            ds.skipped.push(e);
        }
    }
}

/// How long a prefix's listing is used again before it is asked anew: the
/// kernel's `lookup`s of the names a `readdir` returned, and a listing's
/// own classification of its sub-prefixes, come within it.
const LISTING_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// Most listings kept (each the names of one prefix).
const LISTINGS: usize = 256;

type Listing = Arc<Vec<Listed>>;

/// A bucket prefix holding a directory of datasets, read lazily
/// ([`super::archive`]): each level is one delimiter listing (kept
/// [`LISTING_TTL`]), a sub-prefix is classified (plain, Zarr store, a
/// store whose root is an array) by its own listing, and a dataset is
/// opened only when asked for, the way [`open`]'s walk opens it.
pub(crate) struct RemoteArchive {
    root: Location,
    shown: PathBuf,
    files: Arc<dyn UrlFiles>,
    opts: Options,
    listings: parking_lot::Mutex<lru::LruCache<String, (std::time::Instant, Listing)>>,
    /// The heads of the repositories in use, for their versions.
    heads: icechunk::Heads,
}

/// The archive of the URL `url` when it is a listable prefix holding a
/// directory of datasets (not one store, not one object); `None`
/// otherwise (open it whole with [`open`]).
pub(super) fn archive(
    url: &str,
    cache: Arc<ChunkCache>,
    allow_outside: &[PathBuf],
    network: Option<&dyn Network>,
) -> Result<Option<RemoteArchive>> {
    let network = super::need_network(network, url)?;
    let root = Location::parse(url)?;
    if !root.scheme().lists() {
        return Ok(None);
    }
    let mut roots = vec![root.clone()];
    let mut local = Vec::new();
    for r in allow_outside {
        match url_of(r) {
            Some(s) => roots.push(Location::parse(s)?),
            None => local.push(r),
        }
    }
    let files = network.files(roots)?;
    let store = files.store_at(&root).map_err(|source| Error::Io {
        path: root.display(),
        source,
    })?;
    let listing = store.list_dir_versions("")?;
    if listing.is_empty() || holds_store(&listing) {
        return Ok(None);
    }
    for r in local {
        log::warn!(
            "--allow-outside {}: a local path, ignored for the remote source {}",
            r.display(),
            root.display()
        );
    }
    let opts = Options {
        roots: Vec::new(),
        remote: Some(files.clone()),
        cache,
        files: files.clone() as Arc<dyn crate::storage::Files>,
    };
    let a = RemoteArchive {
        shown: PathBuf::from(root.display()),
        root,
        files,
        opts,
        listings: parking_lot::Mutex::new(lru::LruCache::new(
            std::num::NonZeroUsize::new(LISTINGS).expect("not zero"),
        )),
        heads: icechunk::Heads::default(),
    };
    a.listings.lock().put(
        String::new(),
        (std::time::Instant::now(), Arc::new(listing)),
    );
    Ok(Some(a))
}

impl RemoteArchive {
    fn location(&self, rel: &str) -> Result<Location> {
        self.root.child(rel)
    }

    /// The names under the prefix `rel`, with whether each is a prefix.
    fn listing(&self, rel: &str) -> Result<Listing> {
        if let Some((at, l)) = self.listings.lock().get(rel)
            && at.elapsed() < LISTING_TTL
        {
            return Ok(l.clone());
        }
        let loc = self.location(rel)?;
        let store = self.files.store_at(&loc).map_err(|source| Error::Io {
            path: loc.display(),
            source,
        })?;
        let l: Listing = Arc::new(store.list_dir_versions("")?);
        self.listings
            .lock()
            .put(rel.to_string(), (std::time::Instant::now(), l.clone()));
        Ok(l)
    }

    /// What the walk makes of `name` (a prefix: `is_dir`) in the prefix
    /// `dir`, `depth` levels below the source.
    fn classify(&self, dir: &str, name: &str, is_dir: bool, depth: usize) -> Option<Found> {
        if name.starts_with('.') {
            return None;
        }
        let rel = super::join(dir, name);
        if is_dir {
            // A prefix that cannot be listed now is shown as a directory:
            // listing it says why.
            let Ok(sub) = self.listing(&rel) else {
                return (depth < MAX_DEPTH).then_some(Found::Directory);
            };
            if holds_repository(&sub) {
                return Some(Found::Repository);
            }
            if holds_store(&sub) {
                return Some(Found::Store {
                    array: self.root_is_array(&rel, &sub),
                });
            }
            return (depth < MAX_DEPTH).then_some(Found::Directory);
        }
        super::found_by_name(name)
    }

    /// Whether the store at `rel` (listed as `sub`) has an array at its
    /// root: `.zarray`, or a `zarr.json` whose `node_type` is `array` (one
    /// GET).
    fn root_is_array(&self, rel: &str, sub: &[Listed]) -> bool {
        let has = |k: &str| sub.iter().any(|l| !l.is_dir && l.name == k);
        if has("zarr.json") {
            let doc = self.location(rel).ok().and_then(|loc| {
                let store = self.files.store_at(&loc).ok()?;
                let bytes = store.get("zarr.json", 1 << 20).ok()??;
                serde_json::from_slice::<serde_json::Value>(&bytes).ok()
            });
            return doc.is_some_and(|d| d["node_type"] == "array");
        }
        has(".zarray")
    }
}

impl Backend for RemoteArchive {
    fn source(&self) -> &Path {
        &self.shown
    }

    fn forget_listings(&self) {
        self.listings.lock().clear();
    }

    fn list(&self, rel: &str) -> Result<Vec<(String, Found)>> {
        let depth = if rel.is_empty() {
            0
        } else {
            rel.matches('/').count() + 1
        };
        let mut out: Vec<(String, Found)> = self
            .listing(rel)?
            .iter()
            .filter_map(|l| {
                self.classify(rel, &l.name, l.is_dir, depth)
                    .map(|f| (l.name.clone(), f))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        Ok(out)
    }

    fn find(&self, rel: &str) -> Option<Found> {
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let depth = rel.matches('/').count();
        if rel.is_empty() || depth > MAX_DEPTH || rel.split('/').any(|c| c.starts_with('.')) {
            return None;
        }
        let listing = self.listing(dir).ok()?;
        // A name both an object and a prefix: the prefix, as listed.
        let is_dir = named(&listing, name).iter().map(|l| l.is_dir).max()?;
        self.classify(dir, name, is_dir, depth)
    }

    /// An object's version from its prefix's listing (shared by every
    /// dataset of that prefix: one listing per directory in use); a
    /// store's, one recursive listing of its prefix. References and
    /// aggregations read other objects: `None` (re-opened each time).
    fn version(&self, rel: &str, found: Found) -> Option<u64> {
        match found {
            Found::Store { .. } => {
                let loc = self.location(rel).ok()?;
                let store = self.files.store_at(&loc).ok()?;
                store.change_stamp("").ok().flatten()
            }
            // Served at `main`: one read of its head, not a listing of
            // every chunk object.
            Found::Repository => {
                let loc = self.location(rel).ok()?;
                let store = self.files.store_at(&loc).ok()?;
                self.heads.version(rel, Arc::new(store), None)
            }
            Found::File => {
                let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
                let listing = self.listing(dir).ok()?;
                named(&listing, name)
                    .iter()
                    .find(|l| !l.is_dir)
                    .and_then(|l| l.version)
            }
            Found::Directory | Found::Descriptor | Found::Json => None,
        }
    }

    fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>> {
        let loc = self.location(rel)?;
        let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
        let shown = PathBuf::from(loc.display());
        let mut ds = Dataset::default();
        match found {
            Found::Directory => {
                return Err(Error::metadata(
                    loc.display(),
                    "a plain prefix, not a dataset",
                ));
            }
            Found::Store { .. } => {
                let store = self.files.store_at(&loc).map_err(|source| Error::Io {
                    path: loc.display(),
                    source,
                })?;
                let h = zarr::open_store(store, self.opts.cache.clone())?;
                push_hierarchy(&mut ds, h, rel, name, &loc.display(), GroupSource::Nested);
            }
            Found::Repository => {
                let store = self.files.store_at(&loc).map_err(|source| Error::Io {
                    path: loc.display(),
                    source,
                })?;
                let h = hierarchy(&loc, Arc::new(store), true, None, &self.opts)?;
                push_hierarchy(&mut ds, h, rel, name, &loc.display(), GroupSource::Nested);
            }
            Found::Descriptor => super::add_descriptor(&mut ds, &shown, rel, &self.opts)?,
            Found::File => add_object(&mut ds, &loc, rel, &self.opts)?,
            Found::Json => {
                if !super::add_references(&mut ds, &shown, rel, &self.opts)? {
                    return Ok(None);
                }
            }
        }
        ds.entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Some(ds))
    }
}
