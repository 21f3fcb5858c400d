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
//!   repository (the hierarchy of its snapshot), an object a format
//!   claims by name is a dataset file (read by the format its first bytes
//!   name), and every other prefix is a directory of datasets: the format
//!   registry's rules ([`crate::formats::entry`]), its probes answered
//!   from the prefix's one listing ([`ListingProbe`]). Names and paths are the ones the same tree
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

use super::{Backend, Dataset, Found, MAX_DEPTH, Opener, archive_each, open_found, versioned};
use crate::error::{Error, Result};
use crate::formats::Options;
use crate::formats::entry::{At, Probe, Stamp, join};
use crate::formats::icechunk;
use crate::storage::location::{Location, url_of};
use crate::storage::{ByteRange, Listed, Store, UrlFiles};

/// Open the dataset(s) at the URL `url`; the opener's `--allow-outside`
/// URLs are further locations references may read (local paths are
/// ignored: a remote source never reads local files).
pub(super) fn open(opener: &Opener, url: &str) -> Result<Dataset> {
    let root = Location::parse(url)?;
    // What references may read: under the source, or, when the source
    // is one object, under the prefix holding it (as a file SOURCE on
    // disk may read its directory); and the `--allow-outside` URLs.
    let opts = options_within(opener, &root)?;
    let files = opts.remote.clone().expect("set by options_within");
    let store = files.store_at(&root).map_err(|source| Error::Io {
        path: root.display(),
        source,
    })?;
    let name = root.name().unwrap_or_else(|| "array".to_string());
    let shown = PathBuf::from(root.display());
    let reference = opener.reference.as_deref();
    let at = |opts| At {
        path: &shown,
        prefix: "",
        name: &name,
        file: None,
        store: Some(store.clone()),
        reference,
        opts,
    };
    let listing = match root.scheme().lists() {
        true => Some(store.list_dir_versions("")?),
        false => None,
    };
    let found = match &listing {
        Some(l) => opts
            .formats
            .classify_dir(&ListingProbe::new(l, store.as_ref()), false),
        // Plain HTTP: no listing, the keys asked for (a HEAD each).
        None => opts.formats.classify_dir(&HttpProbe(store.as_ref()), false),
    };
    if reference.is_some() && !found.is_some_and(versioned) {
        return Err(Error::metadata(
            root.display(),
            format!(
                "--ref {}: a branch, tag or snapshot of an Icechunk repository, and this is \
                 no Icechunk repository",
                reference.unwrap_or_default()
            ),
        ));
    }
    if let Some(found) = found {
        return open_found(found, &at(&opts)).map(Option::unwrap_or_default);
    }
    match listing {
        Some(l) if !l.is_empty() => {
            let archive = RemoteArchive::new(root, files, opts, l);
            let mut ds = Dataset::default();
            let _ = archive_each(&archive, "", &mut |part| {
                ds.extend(part);
                std::ops::ControlFlow::Continue(())
            })?;
            Ok(ds.sorted())
        }
        Some(_) if !exists(store.as_ref(), "")? => Err(Error::Io {
            path: root.display(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such object or prefix"),
        }),
        // One object.
        _ => {
            let opts = options_within(opener, &root.parent())?;
            let at = At {
                store: None,
                ..at(&opts)
            };
            let claimed = opener.told_by_name(Path::new(&name));
            match opts.formats.open_file(&at, claimed)? {
                Some(ds) => Ok(ds.sorted()),
                None => Err(Error::metadata(
                    root.display(),
                    format!("not a dataset (expected {})", opener.expected()),
                )),
            }
        }
    }
}

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
/// the opener's `--allow-outside` URLs.
fn options_within(opener: &Opener, within: &Location) -> Result<Options> {
    let network = opener.need_network(&within.display())?;
    let mut roots = vec![within.clone()];
    roots.extend(outside_urls(within, &opener.allow_outside)?);
    let files = network.files(roots)?;
    Ok(Options {
        roots: Vec::new(),
        remote: Some(files.clone()),
        cache: opener.cache.clone(),
        files: files as Arc<dyn crate::storage::Files>,
        formats: opener.formats.clone(),
        max_open: opener.max_open,
    })
}

/// The options of the datasets of the URL SOURCE `url` ([`open`]'s).
pub(super) fn options(opener: &Opener, url: &str) -> Result<Options> {
    options_within(opener, &Location::parse(url)?)
}

/// The entries of `listing` (sorted by name, as a store lists) named
/// `name`: an object, a prefix, or both. A binary search: a refresh asks
/// after every dataset in use of a directory of thousands.
fn named<'a>(listing: &'a [Listed], name: &str) -> &'a [Listed] {
    let from = listing.partition_point(|l| l.name.as_str() < name);
    let to = from + listing[from..].partition_point(|l| l.name == name);
    &listing[from..to]
}

/// A bucket prefix as a probe sees it: its one listing, and a GET for a
/// small object a probe reads.
struct ListingProbe<'a> {
    listing: &'a [Listed],
    store: &'a dyn Store,
}

impl<'a> ListingProbe<'a> {
    fn new(listing: &'a [Listed], store: &'a dyn Store) -> ListingProbe<'a> {
        ListingProbe { listing, store }
    }
}

impl Probe for ListingProbe<'_> {
    fn has_file(&self, name: &str) -> bool {
        named(self.listing, name).iter().any(|l| !l.is_dir)
    }

    fn has_dir(&self, name: &str) -> bool {
        named(self.listing, name).iter().any(|l| l.is_dir)
    }

    /// Below a prefix not listed: only a request would tell.
    fn holds(&self, key: &str) -> Option<bool> {
        (!key.contains('/')).then(|| self.has_file(key))
    }

    fn read(&self, name: &str, limit: u64) -> Option<Vec<u8>> {
        self.store.get(name, limit).ok().flatten()
    }
}

/// A store that cannot list (plain HTTP) as a probe sees it: each name
/// asked for (a HEAD), no directories.
struct HttpProbe<'a>(&'a dyn Store);

impl Probe for HttpProbe<'_> {
    fn has_file(&self, name: &str) -> bool {
        exists(self.0, name).unwrap_or(false)
    }

    fn has_dir(&self, _name: &str) -> bool {
        false
    }

    fn holds(&self, key: &str) -> Option<bool> {
        Some(self.has_file(key))
    }

    fn read(&self, name: &str, limit: u64) -> Option<Vec<u8>> {
        self.0.get(name, limit).ok().flatten()
    }

    fn lists(&self) -> bool {
        false
    }
}

/// Whether `key` exists in `store`: a read of no bytes, which a remote
/// store answers with a HEAD.
fn exists(store: &dyn Store, key: &str) -> Result<bool> {
    Ok(store
        .get_range(key, ByteRange::At { offset: 0, len: 0 })?
        .is_some())
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
/// [`LISTING_TTL`]), a sub-prefix is classified by the registry's probes
/// over its own listing, and a dataset is opened only when asked for. The
/// eager [`open`] of such a prefix walks it through the same backend.
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
pub(super) fn archive(opener: &Opener, url: &str) -> Result<Option<RemoteArchive>> {
    let root = Location::parse(url)?;
    if !root.scheme().lists() {
        return Ok(None);
    }
    let network = opener.need_network(url)?;
    let mut roots = vec![root.clone()];
    let mut local = Vec::new();
    for r in &opener.allow_outside {
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
    let probe = ListingProbe::new(&listing, store.as_ref());
    if listing.is_empty() || opener.formats.classify_dir(&probe, false).is_some() {
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
        cache: opener.cache.clone(),
        files: files.clone() as Arc<dyn crate::storage::Files>,
        formats: opener.formats.clone(),
        max_open: opener.max_open,
    };
    Ok(Some(RemoteArchive::new(root, files, opts, listing)))
}

impl RemoteArchive {
    /// The archive of the prefix `root`, listed as `listing`.
    fn new(
        root: Location,
        files: Arc<dyn UrlFiles>,
        opts: Options,
        listing: Vec<Listed>,
    ) -> RemoteArchive {
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
        a
    }

    fn location(&self, rel: &str) -> Result<Location> {
        self.root.child(rel)
    }

    fn store(&self, loc: &Location) -> Result<Arc<dyn Store>> {
        self.files.store_at(loc).map_err(|source| Error::Io {
            path: loc.display(),
            source,
        })
    }

    /// The names under the prefix `rel`, with whether each is a prefix.
    fn listing(&self, rel: &str) -> Result<Listing> {
        if let Some((at, l)) = self.listings.lock().get(rel)
            && at.elapsed() < LISTING_TTL
        {
            return Ok(l.clone());
        }
        let loc = self.location(rel)?;
        let l: Listing = Arc::new(self.store(&loc)?.list_dir_versions("")?);
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
        if !is_dir {
            return self.opts.formats.classify_file(name);
        }
        let rel = join(dir, name);
        // A prefix that cannot be listed now is shown as a directory:
        // listing it says why.
        let found = match (self.listing(&rel), self.location(&rel)) {
            (Ok(sub), Ok(loc)) => match self.store(&loc) {
                Ok(store) => {
                    let probe = ListingProbe::new(&sub, store.as_ref());
                    self.opts.formats.classify_dir(&probe, true)
                }
                Err(_) => None,
            },
            _ => None,
        };
        found.or((depth < MAX_DEPTH).then_some(Found::Directory))
    }
}

impl Backend for RemoteArchive {
    fn source(&self) -> &Path {
        &self.shown
    }

    fn forget_listings(&self) {
        self.listings.lock().clear();
    }

    fn list(&self, rel: &str) -> Result<super::Listing> {
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
        Ok((out, Vec::new()))
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
    /// store's, one recursive listing of its prefix; a repository's, its
    /// head's. References and aggregations read other objects: `None`
    /// (re-opened each time).
    fn version(&self, rel: &str, found: Found) -> Option<u64> {
        match found.stamp() {
            Stamp::Store => {
                let store = self.store(&self.location(rel).ok()?).ok()?;
                store.change_stamp("").ok().flatten()
            }
            // Served at `main`: one read of its head, not a listing of
            // every chunk object.
            Stamp::Head => {
                let store = self.store(&self.location(rel).ok()?).ok()?;
                self.heads.version(rel, store, None)
            }
            Stamp::File => {
                let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
                let listing = self.listing(dir).ok()?;
                named(&listing, name)
                    .iter()
                    .find(|l| !l.is_dir)
                    .and_then(|l| l.version)
            }
            Stamp::Reopen => None,
        }
    }

    fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>> {
        let loc = self.location(rel)?;
        let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
        let shown = PathBuf::from(loc.display());
        let store = match found {
            Found::Dataset { .. } if found.is_directory_dataset() => Some(self.store(&loc)?),
            _ => None,
        };
        let at = At {
            path: &shown,
            prefix: rel,
            name,
            file: None,
            store,
            reference: None,
            opts: &self.opts,
        };
        open_found(found, &at).map_err(|e| match found {
            Found::Directory => Error::metadata(loc.display(), "a plain prefix, not a dataset"),
            _ => e,
        })
    }
}
