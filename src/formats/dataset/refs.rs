//! Every version of an Icechunk repository in one mount (`--all-refs`):
//! the repository as a directory of datasets, one per version,
//!
//! ```text
//! branches/NAME/   the tip of each branch (followed: a refresh opens a
//!                  branch again when its ref moves)
//! tags/NAME/       each tag (never changes)
//! snapshots/ID/    any snapshot, by its id; not listed (a repository
//!                  has one per commit), found when looked up
//! ```
//!
//! each the Zarr hierarchy of that version. It is an archive backend
//! ([`super::Backend`]), so a version is opened only when a request
//! reaches it, at most `--max-open-datasets` are open at once, and a
//! refresh compares only the open ones, each by its head
//! ([`icechunk::head_version`]: one read of the branch's ref).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Backend, Dataset, Found, Listing};
use crate::error::{Error, Result};
use crate::formats::icechunk::{self, At, IcechunkStore};
use crate::formats::zarr::{self, Groups};
use crate::formats::{Options, entry};
use crate::storage::ByteRange;

/// The three directories of versions.
/// What every version is: the repository, at that version.
const VERSION: Found = Found::Dataset {
    format: &icechunk::ENTRY,
    single: false,
};

const BRANCHES: &str = "branches";
const TAGS: &str = "tags";
const SNAPSHOTS: &str = "snapshots";

/// How long the list of branches and tags answers again without asking
/// the repository: listing a repository's refs costs a request per ref
/// (spec 1: one prefix each) and two per tag; a new branch or tag shows
/// within this.
const REFS_TTL: Duration = Duration::from_secs(10);

type Listed = Arc<(Vec<String>, Vec<String>)>;

/// See the module docs.
pub(crate) struct Refs {
    /// The repository: a directory, or a URL as a path.
    dir: PathBuf,
    opts: Options,
    listed: parking_lot::Mutex<Option<(Instant, Listed)>>,
    /// The heads of the branches in use, for their versions.
    heads: icechunk::Heads,
}

impl Refs {
    pub(super) fn new(dir: &Path, opts: Options) -> Result<Refs> {
        let refs = Refs {
            dir: dir.to_path_buf(),
            opts,
            listed: parking_lot::Mutex::new(None),
            heads: icechunk::Heads::default(),
        };
        // A repository that cannot say its refs fails the mount now.
        refs.refs()?;
        Ok(refs)
    }

    /// The branches and tags, each sorted.
    fn refs(&self) -> Result<Listed> {
        if let Some((at, l)) = &*self.listed.lock()
            && at.elapsed() < REFS_TTL
        {
            return Ok(l.clone());
        }
        let (branches, tags) = icechunk::refs(&self.dir, &self.opts)?;
        let l: Listed = Arc::new((self.names(branches), self.names(tags)));
        *self.listed.lock() = Some((Instant::now(), l.clone()));
        Ok(l)
    }

    /// The refs that can be a directory's name: not empty, not `.` or
    /// `..`, no `/` or NUL, at most 255 bytes (Icechunk allows more; those
    /// are left out, logged, rather than failing the whole listing).
    fn names(&self, refs: Vec<String>) -> Vec<String> {
        refs.into_iter()
            .filter(|n| {
                let ok = !n.is_empty()
                    && n != "."
                    && n != ".."
                    && !n.contains(['/', '\0'])
                    && n.len() <= 255;
                if !ok {
                    log::debug!(
                        "{}: the ref {n:?} cannot be a directory's name",
                        self.dir.display()
                    );
                }
                ok
            })
            .collect()
    }

    /// The version the dataset `rel` (`KIND/NAME`) is.
    fn at(rel: &str) -> Option<At> {
        let (kind, name) = rel.split_once('/')?;
        if name.is_empty() || name.contains('/') {
            return None;
        }
        let name = name.to_string();
        match kind {
            BRANCHES => Some(At::Branch(name)),
            TAGS => Some(At::Tag(name)),
            SNAPSHOTS => Some(At::Snapshot(name)),
            _ => None,
        }
    }
}

impl Backend for Refs {
    fn source(&self) -> &Path {
        &self.dir
    }

    /// The refs stay until [`REFS_TTL`] (a pass every second must not
    /// list every ref every second).
    fn forget_listings(&self) {}

    fn list(&self, rel: &str) -> Result<Listing> {
        let names = |v: &[String]| v.iter().map(|n| (n.clone(), VERSION)).collect();
        let listed = match rel {
            "" => Ok([BRANCHES, SNAPSHOTS, TAGS]
                .iter()
                .map(|d| (d.to_string(), Found::Directory))
                .collect()),
            BRANCHES => Ok(names(&self.refs()?.0)),
            TAGS => Ok(names(&self.refs()?.1)),
            // Found when looked up by id, never listed.
            SNAPSHOTS => Ok(Vec::new()),
            _ => Err(Error::Io {
                path: format!("{}/{rel}", self.dir.display()),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            }),
        };
        listed.map(|l| (l, Vec::new()))
    }

    fn find(&self, rel: &str) -> Option<Found> {
        if [BRANCHES, TAGS, SNAPSHOTS].contains(&rel) {
            return Some(Found::Directory);
        }
        let there = match Refs::at(rel)? {
            At::Branch(n) => self.refs().ok()?.0.contains(&n),
            At::Tag(n) => self.refs().ok()?.1.contains(&n),
            At::Snapshot(id) => {
                let store = self.opts.files.store(&self.dir);
                let key = format!("{SNAPSHOTS}/{id}");
                // Only a valid id (Crockford base32) is asked of the store.
                icechunk::is_snapshot_id(&id)
                    && store
                        .get_range(&key, ByteRange::At { offset: 0, len: 0 })
                        .ok()
                        .flatten()
                        .is_some()
            }
            At::Named(_) => false,
        };
        there.then_some(VERSION)
    }

    fn open(&self, rel: &str, found: Found) -> Result<Option<Dataset>> {
        let at = Refs::at(rel).filter(|_| found == VERSION);
        let Some(at) = at else {
            return Err(Error::metadata(
                format!("{}/{rel}", self.dir.display()),
                "a directory of versions, not a version",
            ));
        };
        let store = IcechunkStore::open_at(&self.dir, &at, &self.opts)?;
        let h = zarr::open_store(Arc::new(store), self.opts.cache.clone())?;
        let name = rel.rsplit_once('/').map_or(rel, |(_, n)| n);
        let at = entry::At::new(&self.dir, rel, name, &self.opts);
        let source = self.dir.display().to_string();
        Ok(Some(h.into_dataset(&at, &source, Groups::Nested)))
    }

    /// A branch: its ref's version (one read); a tag or a snapshot never
    /// changes.
    fn version(&self, rel: &str, _found: Found) -> Option<u64> {
        match Refs::at(rel)? {
            At::Branch(name) => {
                let store = self.opts.files.store(&self.dir);
                self.heads.version(rel, store, Some(&name))
            }
            _ => Some(0),
        }
    }
}
