//! Icechunk repositories (earth-mover/icechunk): a transactional,
//! versioned store of a Zarr v3 hierarchy, with branches, tags and
//! snapshots, whose chunks are *inline* (in the manifest), *native*
//! (objects under `chunks/` of the repository) or *virtual* (a byte range
//! of another file: netCDF-4/HDF5, netCDF-3, raw).
//!
//! # Who reads what
//!
//! The `icechunk` crate reads the repository's metadata, both on-disk
//! spec versions (1.x, written by icechunk-python 1.x, and 2.x): its
//! refs, snapshots and manifests, and answers for every chunk of an array
//! its reference without fetching chunk data
//! (`Session::get_chunk_ref`). Everything else is slabfs's: the
//! repository at a snapshot is a [`Store`] ([`IcechunkStore`]) whose keys
//! are the hierarchy's (`a/zarr.json`, `a/c/0/1`), so the Zarr reader,
//! the codecs, the engine, the chunk cache and readahead serve it as any
//! Zarr v3 store; a native chunk's bytes are read through slabfs's own
//! store of the repository's directory, a virtual chunk's through the
//! confined files every reference goes through.
//!
//! # Virtual chunks and confinement
//!
//! A virtual reference is read only when both admit its location: the
//! repository's virtual chunk containers (a URL prefix each; `vcc://`
//! locations are expanded against them) and slabfs's roots (the
//! repository's own directory, and `--allow-outside` locations). Anything
//! else fails that chunk's reads (EIO) with a message naming the
//! location. A reference's checksum is verified before its bytes are
//! used: a last-modified time (the file must not be newer) or an ETag (a
//! local file's, as object stores compute it); a file changed since the
//! reference was written fails the read, never gives other bytes.
//!
//! # Versions
//!
//! A mount serves one snapshot: the tip of `main` unless asked otherwise
//! (a branch, a tag or a snapshot id).

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use icechunk::format::manifest::{Checksum, ChunkPayload};
use icechunk::format::snapshot::NodeData;
use icechunk::format::{ChunkIndices, SnapshotId};
use icechunk::repository::VersionInfo;
use icechunk::session::Session;

use crate::error::{Error, Result};
use crate::formats::Options;
use crate::storage::local::confine::Roots;
use crate::storage::local::descriptors::CachedFile;
use crate::storage::scope::Scope;
use crate::storage::{ByteRange, ReadAt, Store};

pub mod entry;
mod storage;
pub use entry::ENTRY;
pub use storage::MAX_OBJECT_BYTES;

/// The id of every repository's first snapshot (its creation), in both
/// spec versions: Icechunk's signature, so that a directory that happens
/// to hold `refs/` and `snapshots/` is not taken for a repository.
const FIRST_SNAPSHOT: &str = "1CECHNKREP0F1RSTCMT0";

/// [`FIRST_SNAPSHOT`]'s key in a repository.
pub const FIRST_SNAPSHOT_KEY: &str = "snapshots/1CECHNKREP0F1RSTCMT0";

/// Whether the listing of a prefix (each name with whether it is itself
/// a prefix) is an Icechunk repository's root: `snapshots/` and either
/// `refs/` (spec 1) or the `repo` object (spec 2), and no Zarr metadata
/// (a Zarr store may have groups named `refs` and `snapshots`). For
/// object storage, where asking for the first snapshot too would cost a
/// request per prefix classified; a prefix of that shape that is no
/// repository fails to open, naming it.
pub fn is_repository_listing<'a>(names: impl IntoIterator<Item = (&'a str, bool)>) -> bool {
    let (mut snapshots, mut refs, mut zarr) = (false, false, false);
    for (name, is_dir) in names {
        match (name, is_dir) {
            ("snapshots", true) => snapshots = true,
            ("refs", true) | ("repo", false) => refs = true,
            (n, false) if crate::formats::zarr::STORE_KEYS.contains(&n) => zarr = true,
            _ => {}
        }
    }
    snapshots && refs && !zarr
}

/// The key whose value changes when the branch `reference` (`None`:
/// `main`) of the repository in `store` gets a new commit: the `repo`
/// object that holds every ref (spec 2, also in a repository migrated
/// from spec 1, whose old refs stay behind unchanged), else the branch's
/// ref (spec 1, `refs/branch.NAME/ref.json`). `None` when nothing can
/// change what is served: `reference` is a tag or a snapshot id. Asked
/// once (the crate tells a branch from a tag); then [`head_version`]
/// tells a refresh whether to open the repository again, instead of a
/// listing of every object.
pub fn head_key(store: Arc<dyn Store>, reference: Option<&str>) -> Result<Option<String>> {
    let name = reference.unwrap_or("main");
    let shown = store.describe("");
    let at = At::Named(name.to_string());
    let version = runtime().block_on(async {
        let repo = open_repository(store.clone())
            .await
            .map_err(|e| crate_message(&e))?;
        version_of(&repo, &at).await
    });
    let version = version.map_err(|e| {
        Error::metadata(
            shown,
            format!("Icechunk repository: cannot look up {name:?}: {e}"),
        )
    })?;
    if !matches!(version, Some(VersionInfo::BranchTipRef(_))) {
        return Ok(None);
    }
    let exists = |key: &str| -> Result<bool> {
        Ok(store
            .get_range(key, ByteRange::At { offset: 0, len: 0 })?
            .is_some())
    };
    if exists("repo")? {
        return Ok(Some("repo".to_string()));
    }
    Ok(Some(format!("refs/branch.{name}/ref.json")))
}

/// The version of the repository's head [`head_key`] names, as one
/// number: the version its directory's listing gives it (one listing,
/// however large the object: a spec-2 `repo` object grows with every
/// commit), or a hash of its value where listings carry no versions (a
/// local directory). `key == None` (pinned): always the same, no request.
/// An error when the key is gone (a repository migrated since: ask
/// [`head_key`] again).
pub fn head_version(store: &dyn Store, key: Option<&str>) -> Result<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    let Some(key) = key else {
        return Ok(h.finish());
    };
    let (dir, name) = key.rsplit_once('/').unwrap_or(("", key));
    let gone = || Error::Io {
        path: store.describe(key),
        source: io::Error::new(io::ErrorKind::NotFound, "the repository's head is gone"),
    };
    let listed = store.list_dir_versions(dir)?;
    let entry = listed
        .iter()
        .find(|l| !l.is_dir && l.name == name)
        .ok_or_else(gone)?;
    match entry.version {
        Some(v) => v.hash(&mut h),
        None => store
            .get(key, MAX_OBJECT_BYTES)?
            .ok_or_else(gone)?
            .hash(&mut h),
    }
    Ok(h.finish())
}

/// The head keys ([`head_key`]) of the repositories a refresh asks after,
/// each found once and kept (at most [`HEADS`]): then a pass costs one
/// listing per repository in use ([`head_version`]).
pub struct Heads(parking_lot::Mutex<lru::LruCache<String, Option<String>>>);

/// Most head keys kept.
const HEADS: usize = 4096;

impl Default for Heads {
    fn default() -> Heads {
        Heads(parking_lot::Mutex::new(lru::LruCache::new(
            std::num::NonZeroUsize::new(HEADS).expect("not zero"),
        )))
    }
}

impl Heads {
    /// The version of the head of `reference` (`None`: `main`) of the
    /// repository in `store`, known as `id`; `None` when it cannot be
    /// told now (the caller opens the repository again), and its key is
    /// found anew next time.
    pub fn version(&self, id: &str, store: Arc<dyn Store>, reference: Option<&str>) -> Option<u64> {
        let known = self.0.lock().get(id).cloned();
        let key = match known {
            Some(k) => k,
            None => {
                let k = head_key(store.clone(), reference)
                    .inspect_err(|e| log::debug!("{e}"))
                    .ok()?;
                self.0.lock().put(id.to_string(), k.clone());
                k
            }
        };
        head_version(store.as_ref(), key.as_deref())
            .inspect_err(|e| {
                log::debug!("{e}");
                self.0.lock().pop(id);
            })
            .ok()
    }
}

/// The runtime the crate's calls run on: one for the process, one worker
/// (its work is metadata decoding, which it hands to blocking threads),
/// whatever the number of repositories.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            // The crate's decoding, and slabfs's store reads (each a
            // blocking request with its deadline): one slow repository
            // must not queue every other's reads behind it. Idle threads
            // go after ten seconds.
            .max_blocking_threads(64)
            .thread_name("slabfs-icechunk")
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// The crate's caches, bounded: its defaults keep up to 15 million chunk
/// references and 500,000 nodes per open repository (gigabytes for a
/// large virtual store, times the repositories open at once). Layered on
/// the repository's own configuration.
fn bounded_caches() -> icechunk::RepositoryConfig {
    icechunk::RepositoryConfig {
        caching: Some(icechunk::config::CachingConfig {
            num_snapshot_nodes: Some(50_000),
            num_chunk_refs: Some(500_000),
            num_transaction_changes: Some(0),
            num_bytes_attributes: Some(1 << 20),
            num_bytes_chunks: Some(0),
        }),
        ..Default::default()
    }
}

/// A version of a repository, as asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// A name (`--ref`): a branch, else a tag, else a snapshot id.
    Named(String),
    Branch(String),
    Tag(String),
    Snapshot(String),
}

impl At {
    fn name(&self) -> &str {
        match self {
            At::Named(n) | At::Branch(n) | At::Tag(n) | At::Snapshot(n) => n,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            At::Named(_) => "branch, tag or snapshot",
            At::Branch(_) => "branch",
            At::Tag(_) => "tag",
            At::Snapshot(_) => "snapshot",
        }
    }
}

/// The version `at` names, `None` if the repository has no such ref; an
/// error when asking failed (a ref unreadable, the store down), which is
/// not "no such branch".
async fn version_of(
    repo: &icechunk::Repository,
    at: &At,
) -> std::result::Result<Option<VersionInfo>, String> {
    use icechunk::refs::RefErrorKind;
    use icechunk::repository::RepositoryErrorKind;
    let name = at.name();
    let found = |r: icechunk::repository::RepositoryResult<SnapshotId>| match r {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.kind,
                RepositoryErrorKind::Ref(RefErrorKind::RefNotFound(_))
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(crate_message(&e)),
    };
    let branch = || async { found(repo.lookup_branch(name).await) };
    let tag = || async { found(repo.lookup_tag(name).await) };
    let snapshot = || SnapshotId::try_from(name).ok().map(VersionInfo::SnapshotId);
    let branch_tip = || VersionInfo::BranchTipRef(name.to_string());
    let tagged = || VersionInfo::TagRef(name.to_string());
    Ok(match at {
        At::Branch(_) => branch().await?.then(branch_tip),
        At::Tag(_) => tag().await?.then(tagged),
        At::Snapshot(_) => snapshot(),
        At::Named(_) if branch().await? => Some(branch_tip()),
        At::Named(_) if tag().await? => Some(tagged()),
        At::Named(_) => snapshot(),
    })
}

/// The repository whose objects `store` holds, read through it (module
/// `storage`), with the crate's caches bounded.
async fn open_repository(
    store: Arc<dyn Store>,
) -> std::result::Result<icechunk::Repository, icechunk::repository::RepositoryError> {
    let storage: Arc<dyn icechunk::Storage + Send + Sync> =
        Arc::new(storage::StoreStorage::new(store));
    icechunk::Repository::open(storage)
        .config(bounded_caches())
        .execute()
        .await
}

/// Whether `id` is a snapshot id (20 characters of Crockford base32).
pub fn is_snapshot_id(id: &str) -> bool {
    SnapshotId::try_from(id).is_ok()
}

/// The branches and the tags of the repository in `dir`, each sorted.
pub fn refs(dir: &Path, opts: &Options) -> Result<(Vec<String>, Vec<String>)> {
    let shown = dir.display().to_string();
    let fail = |e: &dyn std::fmt::Display| {
        Error::metadata(
            shown.clone(),
            format!(
                "Icechunk repository: cannot list its refs: {}",
                crate_message(e)
            ),
        )
    };
    runtime().block_on(async {
        let repo = open_repository(opts.files.store(dir))
            .await
            .map_err(|e| fail(&e))?;
        let branches = repo.list_branches().await.map_err(|e| fail(&e))?;
        let tags = repo.list_tags().await.map_err(|e| fail(&e))?;
        Ok((branches.into_iter().collect(), tags.into_iter().collect()))
    })
}

/// One node of the hierarchy: its `zarr.json` and whether it is an array.
struct Node {
    zarr_json: Vec<u8>,
    array: bool,
}

/// A repository at one snapshot, as a Zarr v3 store. See the module docs.
pub struct IcechunkStore {
    dir: PathBuf,
    session: Session,
    snapshot: String,
    /// By path in the hierarchy, without the leading `/` (`""`: the root).
    nodes: BTreeMap<String, Node>,
    /// The repository's directory (confined like every store): where
    /// native chunks are.
    objects: Arc<dyn Store>,
    /// The virtual chunk containers' URL prefixes (parsed once: they are
    /// matched for every virtual chunk read).
    containers: Vec<url::Url>,
    scope: Arc<Scope>,
    /// `scope`'s local roots, shared with the local files kept open.
    roots: Arc<Roots>,
    /// Objects of virtual chunks open now, by URL ([`OPEN_OBJECTS`]).
    opened: parking_lot::Mutex<lru::LruCache<String, Arc<dyn ReadAt>>>,
    /// Local files of virtual chunks open now, by the path their URL
    /// names ([`OPEN_OBJECTS`]; see [`IcechunkStore::read_local`]).
    local_files: parking_lot::Mutex<lru::LruCache<PathBuf, Arc<CachedFile>>>,
}

/// An empty table of [`OPEN_OBJECTS`] open things.
fn open_at_most<K: std::hash::Hash + Eq, V>() -> parking_lot::Mutex<lru::LruCache<K, V>> {
    parking_lot::Mutex::new(lru::LruCache::new(
        std::num::NonZeroUsize::new(OPEN_OBJECTS).expect("not zero"),
    ))
}

/// The most objects or local files of virtual chunks kept open per
/// repository, each kind (an object: a HEAD saved for its next chunks; a
/// file: its path, identity and a slot in the process's bounded
/// descriptor cache, which decides how many are really open; a few
/// hundred bytes each).
const OPEN_OBJECTS: usize = 256;

impl std::fmt::Debug for IcechunkStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcechunkStore")
            .field("dir", &self.dir)
            .field("snapshot", &self.snapshot)
            .finish()
    }
}

impl IcechunkStore {
    /// Open the repository in the directory `dir` at `reference` (a
    /// branch, a tag or a snapshot id; `None`: the tip of `main`).
    pub fn open(dir: &Path, reference: Option<&str>, opts: &Options) -> Result<IcechunkStore> {
        let at = At::Named(reference.unwrap_or("main").to_string());
        IcechunkStore::open_at(dir, &at, opts)
    }

    /// [`IcechunkStore::open`] at the version `at`.
    pub fn open_at(dir: &Path, at: &At, opts: &Options) -> Result<IcechunkStore> {
        let shown = dir.display().to_string();
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            let e = crate_message(e);
            Error::metadata(shown.clone(), format!("Icechunk repository: {what}: {e}"))
        };
        let reference = at.name();
        // Every object the crate reads comes through slabfs's store of
        // the repository (module `storage`), as its chunks do.
        let objects = opts.files.store(dir);
        let (session, containers, nodes) = runtime().block_on(async {
            let repo = open_repository(objects.clone())
                .await
                .map_err(|e| fail("cannot open it", &e))?;
            let version = version_of(&repo, at)
                .await
                .map_err(|e| fail(&format!("cannot look up {reference:?}"), &e))?
                .ok_or_else(|| {
                    Error::metadata(
                        shown.clone(),
                        format!("Icechunk repository: no {} named {reference:?}", at.kind()),
                    )
                })?;
            let session = repo
                .readonly_session(&version)
                .await
                .map_err(|e| fail(&format!("cannot read {reference:?}"), &e))?;
            // A prefix that is no URL can hold no location.
            let containers: Vec<url::Url> = repo
                .config()
                .virtual_chunk_containers()
                .filter_map(|c| url::Url::parse(c.url_prefix()).ok())
                .collect();
            let mut nodes = BTreeMap::new();
            let listed = session
                .list_nodes(&icechunk::format::Path::root())
                .await
                .map_err(|e| fail("cannot list its nodes", &e))?;
            for n in listed {
                let n = n.map_err(|e| fail("cannot list its nodes", &e))?;
                let path = n.path.to_string().trim_start_matches('/').to_string();
                let array = matches!(n.node_data, NodeData::Array { .. });
                nodes.insert(
                    path,
                    Node {
                        zarr_json: n.user_data.to_vec(),
                        array,
                    },
                );
            }
            Ok::<_, Error>((session, containers, nodes))
        })?;
        let snapshot = session.snapshot_id().to_string();
        log::debug!("{shown}: Icechunk {reference:?} is snapshot {snapshot}");
        let scope = opts.scope_for(dir);
        Ok(IcechunkStore {
            dir: dir.to_path_buf(),
            session,
            snapshot,
            nodes,
            objects,
            containers,
            roots: Arc::new(scope.local().clone()),
            scope,
            opened: open_at_most(),
            local_files: open_at_most(),
        })
    }

    /// The snapshot served.
    pub fn snapshot(&self) -> &str {
        &self.snapshot
    }

    /// The array and chunk indices a chunk key names (`a/c/0/1`, `c.0.1`
    /// with the `.` separator, `a/c` for a scalar), if any.
    fn chunk_of(&self, key: &str) -> Option<(String, Vec<u32>)> {
        // The longest array path the key is under: a lookup per `/` of
        // the key (this runs for every chunk fetched), then the root.
        let is_array = |p: &str| self.nodes.get(p).is_some_and(|n| n.array);
        let (array, rest) = key
            .rmatch_indices('/')
            .map(|(i, _)| (&key[..i], &key[i + 1..]))
            .find(|(p, _)| is_array(p))
            .or_else(|| is_array("").then_some(("", key)))?;
        let array = array.to_string();
        let coords = rest.strip_prefix('c')?;
        if coords.is_empty() {
            return Some((array, Vec::new()));
        }
        let sep = coords.chars().next()?;
        if sep != '/' && sep != '.' {
            return None;
        }
        let idx = coords[1..]
            .split(sep)
            .map(|c| c.parse::<u32>().ok())
            .collect::<Option<Vec<u32>>>()?;
        Some((array, idx))
    }

    fn error(&self, key: &str, why: impl std::fmt::Display) -> Error {
        Error::Io {
            path: self.describe(key),
            source: io::Error::other(crate_message(&why)),
        }
    }

    /// The bytes of the chunk `idx` of `array` (`key` for messages): all
    /// of them (at most `limit`), or their `range` alone (a sharded
    /// array's inner chunk or index: only those bytes are read).
    fn chunk(
        &self,
        key: &str,
        array: &str,
        idx: Vec<u32>,
        limit: u64,
        range: Option<ByteRange>,
    ) -> Result<Option<Vec<u8>>> {
        let path = icechunk::format::Path::try_from(format!("/{array}").as_str())
            .map_err(|e| self.error(key, e))?;
        let payload = runtime()
            .block_on(self.session.get_chunk_ref(&path, &ChunkIndices(idx)))
            .map_err(|e| self.error(key, e))?;
        // Nothing read beyond the caller's limit (a reference's length is
        // bounded only by its file's).
        let length = match &payload {
            Some(ChunkPayload::Inline(b)) => b.len() as u64,
            Some(ChunkPayload::Ref(r)) => r.length,
            Some(ChunkPayload::Virtual(v)) => v.length,
            _ => 0,
        };
        if payload.is_some() && range.is_none() && length > limit {
            return Err(Error::TooLarge {
                path: self.describe(key),
                size: length,
                limit,
            });
        }
        let (start, end) = match range {
            None => (0, length),
            Some(r) => r
                .resolve(length)
                .ok_or_else(|| r.out_of_bounds(&self.describe(key), length))?,
        };
        // Where the part asked for starts in the referenced object.
        let from = |offset: u64| {
            offset
                .checked_add(start)
                .ok_or_else(|| self.error(key, "a reference's offset past 2^64"))
        };
        match payload {
            None => Ok(None),
            Some(ChunkPayload::Inline(bytes)) => {
                Ok(Some(bytes[start as usize..end as usize].to_vec()))
            }
            Some(ChunkPayload::Ref(r)) => {
                let object = format!("chunks/{}", r.id);
                let range = ByteRange::At {
                    offset: from(r.offset)?,
                    len: end - start,
                };
                // A chunk object never changes (named by a unique id).
                match self.objects.get_immutable(&object, Some(range), u64::MAX)? {
                    Some(v) => Ok(Some(v)),
                    None => Err(self.error(key, format!("its chunk object {object} is missing"))),
                }
            }
            Some(ChunkPayload::Virtual(v)) => {
                let url = self
                    .session
                    .resolve_virtual_location(&v.location)
                    .map_err(|e| self.error(key, e))?;
                let offset = from(v.offset)?;
                self.read_virtual(key, &url, offset, end - start, v.checksum.as_ref())
                    .map(Some)
            }
            Some(other) => Err(self.error(
                key,
                format!("a chunk reference this version cannot read: {other:?}"),
            )),
        }
    }

    /// `len` bytes at `offset` of the file `url` names, if both the
    /// repository's containers and slabfs's roots admit it, and if it is
    /// the version `checksum` says. The file is checked as it is opened
    /// (a symlink or FIFO swapped in is refused), the checksum and range
    /// against the open file, and the read is retried when the file
    /// changed during it: never bytes of another version.
    fn read_virtual(
        &self,
        key: &str,
        url: &str,
        offset: u64,
        len: u64,
        checksum: Option<&Checksum>,
    ) -> Result<Vec<u8>> {
        let refuse = |why: String| self.error(key, format!("virtual chunk in {url}: {why}"));
        let parsed = url::Url::parse(url).map_err(|e| refuse(format!("not a URL: {e}")))?;
        let contained = self.containers.iter().any(|c| {
            c.scheme() == parsed.scheme()
                && c.host() == parsed.host()
                && c.port_or_known_default() == parsed.port_or_known_default()
                && c.username() == parsed.username()
                && parsed.path().starts_with(c.path().trim_end_matches('/'))
                && parsed.path()[c.path().trim_end_matches('/').len()..].starts_with('/')
        });
        if !contained {
            return Err(refuse(
                "no virtual chunk container of the repository holds it".into(),
            ));
        }
        if parsed.scheme() != "file" {
            return self.read_remote(url, offset, len, checksum).map_err(refuse);
        }
        if !matches!(parsed.host_str(), None | Some("") | Some("localhost")) {
            return Err(refuse("a file URL of another host".into()));
        }
        let path = parsed
            .to_file_path()
            .map_err(|()| refuse("not a local file path".into()))?;
        let pick = |meta: &std::fs::Metadata| -> std::result::Result<(u64, u64), String> {
            let modified = (meta.mtime(), meta.mtime_nsec());
            same_version(checksum, Some(&local_etag(meta)), Some(modified))?;
            within(offset, len, meta.len())
        };
        self.read_local(&path, pick).map_err(refuse)
    }

    /// The bytes `pick` chooses of the local file `path` (a virtual
    /// chunk's), from its metadata as the file is now: `pick` checks the
    /// reference's checksum and range.
    ///
    /// The file is kept open for the next chunks (a virtual repository
    /// reads hundreds of chunks of each file, and opening one checked
    /// costs its path resolved, a `/proc` lookup and the kernel's
    /// read-ahead state of the file started again): [`OPEN_OBJECTS`] per
    /// repository, each through the process's bounded descriptor cache
    /// ([`CachedFile`]). A file kept is read only while its path still
    /// names it (a `stat` of the path, the same device and inode as the
    /// descriptor's): a file replaced, or a symlink or FIFO swapped in,
    /// is opened anew through the checks of a first open, which refuse
    /// what they always refused; and every read checks the checksum
    /// against the descriptor's metadata now and is read again when the
    /// file changed during it, so bytes are always of the version checked.
    fn read_local(
        &self,
        path: &Path,
        pick: impl Fn(&std::fs::Metadata) -> std::result::Result<(u64, u64), String>,
    ) -> std::result::Result<Vec<u8>, String> {
        use crate::storage::local::read_open_verified;
        let io_err = |e: io::Error| e.to_string();
        let kept = self.local_files.lock().get(path).cloned();
        if let Some(file) = kept {
            let same_file = || -> io::Result<Option<Arc<std::fs::File>>> {
                let named = std::fs::metadata(path)?;
                let open = file.descriptor()?;
                let meta = open.metadata()?;
                Ok(((named.dev(), named.ino()) == (meta.dev(), meta.ino())).then_some(open))
            };
            match same_file() {
                Ok(Some(open)) => {
                    let read = read_open_verified(&open, path, &pick, io_err);
                    if read.is_err() {
                        // Nothing failed is kept: the next read opens it again.
                        self.local_files.lock().pop(path);
                    }
                    return read;
                }
                // Replaced, gone, or its descriptor could not be had
                // again: opened as if for the first time.
                _ => {
                    self.local_files.lock().pop(path);
                }
            }
        }
        let real = self.roots.check(path).map_err(|real| {
            format!(
                "outside the allowed locations ({}): it resolves to {}",
                self.scope.describe(),
                real.display()
            )
        })?;
        let file = CachedFile::open_admitted(&real, self.roots.clone()).map_err(io_err)?;
        let open = file.descriptor().map_err(io_err)?;
        let read = read_open_verified(&open, &real, &pick, io_err)?;
        self.local_files
            .lock()
            .put(path.to_path_buf(), Arc::new(file));
        Ok(read)
    }

    /// [`Self::read_virtual`] of an object-store or HTTP location: opened
    /// through the URL roots (`--allow-outside URL`, or the repository's
    /// own bucket), its version checked against `checksum`, and read
    /// pinned to that version (`If-Match`), so every byte is of the
    /// version checked. The first chunk of an object opens it and reads
    /// in one request ([`crate::storage::Files::open_and_read`]: its answer tells the
    /// version, no HEAD first), and its bytes are used only once the
    /// version checks. Open objects are kept ([`OPEN_OBJECTS`] of them)
    /// for the next chunks of the same file; a failed one is dropped.
    fn read_remote(
        &self,
        url: &str,
        offset: u64,
        len: u64,
        checksum: Option<&Checksum>,
    ) -> std::result::Result<Vec<u8>, String> {
        let files = self.scope.remote().ok_or_else(|| {
            format!(
                "no URL may be read here (allowed: {}); --allow-outside URL admits one",
                self.scope.describe()
            )
        })?;
        let cached = self.opened.lock().get(url).cloned();
        let (file, first) = match cached {
            Some(f) => (f, None),
            None => {
                let n = usize::try_from(len).map_err(|_| format!("{len} bytes are too many"))?;
                let (f, bytes) = files
                    .open_and_read(Path::new(url), offset, n)
                    .map_err(|e| e.to_string())?;
                self.opened.lock().put(url.to_string(), f.clone());
                (f, Some(bytes))
            }
        };
        let read = || -> std::result::Result<Vec<u8>, String> {
            let version = file.version();
            let e_tag = version.as_ref().and_then(|v| v.e_tag.as_deref());
            let modified = version
                .as_ref()
                .and_then(|v| v.modified_ns)
                .map(|ns| (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000)));
            same_version(checksum, e_tag, modified)?;
            let (start, end) = within(offset, len, file.size().map_err(|e| e.to_string())?)?;
            if let Some(bytes) = first {
                return Ok(bytes.into());
            }
            let mut buf = vec![0u8; (end - start) as usize];
            file.read_exact_at(&mut buf, start)
                .map_err(|e| e.to_string())?;
            Ok(buf)
        };
        read().inspect_err(|_| {
            // Nothing failed is kept: the next read opens it again.
            self.opened.lock().pop(url);
        })
    }
}

/// An error of the crate as one message: without the span trace its
/// errors append after a blank line (`context:`), which says nothing to
/// an operator and would spread one failure over several log lines.
fn crate_message(e: &dyn std::fmt::Display) -> String {
    let s = e.to_string();
    match s.find("\n\ncontext:") {
        Some(i) => s[..i].trim_end().to_string(),
        None => s,
    }
}

/// Whether a file whose ETag is `e_tag` and modification time
/// `modified` (seconds, nanoseconds) is the version a reference's
/// `checksum` recorded: the same ETag (quotes ignored), or not modified
/// after the recorded time.
fn same_version(
    checksum: Option<&Checksum>,
    e_tag: Option<&str>,
    modified: Option<(i64, i64)>,
) -> std::result::Result<(), String> {
    match checksum {
        Some(Checksum::LastModified(secs)) => {
            let (s, ns) =
                modified.ok_or("no modification time to check the reference's against")?;
            if s > i64::from(secs.0) || (s == i64::from(secs.0) && ns > 0) {
                return Err(format!(
                    "changed since the reference was written (modified at {s} s, the \
                     reference is of {} s)",
                    secs.0
                ));
            }
        }
        Some(Checksum::ETag(tag)) => {
            let now = e_tag.ok_or("no ETag to check the reference's against")?;
            if tag.0.trim_matches('"') != now.trim_matches('"') {
                return Err(format!(
                    "changed since the reference was written (ETag {now}, the reference has {})",
                    tag.0
                ));
            }
        }
        None => {}
    }
    Ok(())
}

/// `[offset, offset + len)` if it lies inside a file of `size` bytes.
fn within(offset: u64, len: u64, size: u64) -> std::result::Result<(u64, u64), String> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok((offset, end)),
        _ => Err(format!(
            "bytes {offset}..+{len} lie past its end ({size} bytes)"
        )),
    }
}

/// The ETag object stores give a local file (object_store's
/// `LocalFileSystem`, which Icechunk's writers use): inode, modification
/// time in microseconds and size, in hex.
fn local_etag(m: &std::fs::Metadata) -> String {
    let micros = m.mtime() as i128 * 1_000_000 + i128::from(m.mtime_nsec() / 1000);
    format!("{:x}-{:x}-{:x}", m.ino(), micros, m.len())
}

impl IcechunkStore {
    /// The value of `key` ([`Store::get`]), or its `range`
    /// ([`Store::get_range`]).
    fn value(&self, key: &str, limit: u64, range: Option<ByteRange>) -> Result<Option<Vec<u8>>> {
        let node = match key.strip_suffix("zarr.json") {
            Some("") => Some(""),
            Some(p) => p.strip_suffix('/'),
            None => None,
        };
        if let Some(path) = node {
            let Some(doc) = self.nodes.get(path).map(|n| &n.zarr_json) else {
                return Ok(None);
            };
            let size = doc.len() as u64;
            // A document is held in memory already, but the caller's
            // limit is the contract's all the same (a Zarr reader bounds
            // metadata by it, and sees the same answer from every store).
            if range.is_none() && size > limit {
                return Err(Error::TooLarge {
                    path: self.describe(key),
                    size,
                    limit,
                });
            }
            let (start, end) = match range {
                Some(r) => r
                    .resolve(size)
                    .ok_or_else(|| r.out_of_bounds(&self.describe(key), size))?,
                None => (0, size),
            };
            return Ok(Some(doc[start as usize..end as usize].to_vec()));
        }
        let Some((array, idx)) = self.chunk_of(key) else {
            return Ok(None);
        };
        self.chunk(key, &array, idx, limit, range)
    }
}

impl Store for IcechunkStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.value(key, limit, None)
    }

    /// Only the bytes asked for are read (a sharded array's inner chunk,
    /// its index), wherever the chunk lives.
    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        self.value(key, u64::MAX, Some(range))
    }

    /// The repository's store's: a repository in object storage has its
    /// chunks read many at once (the contract's defaults fan them out),
    /// not one round trip after another.
    fn latency(&self) -> Option<std::time::Duration> {
        self.objects.latency()
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let dir = dir.trim_end_matches('/');
        let mut out: Vec<(String, bool)> = Vec::new();
        if self.nodes.contains_key(dir) {
            out.push(("zarr.json".to_string(), false));
        }
        for path in self.nodes.keys() {
            let rest = if dir.is_empty() {
                Some(path.as_str())
            } else {
                path.strip_prefix(dir).and_then(|r| r.strip_prefix('/'))
            };
            if let Some(rest) = rest.filter(|r| !r.is_empty()) {
                let name = rest.split('/').next().unwrap_or(rest);
                out.push((name.to_string(), true));
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn describe(&self, key: &str) -> String {
        format!(
            "{} (Icechunk snapshot {}) {key}",
            self.dir.display(),
            self.snapshot
        )
    }

    /// The snapshot served: it never changes (a refresh asks the branch).
    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        (&self.snapshot, prefix).hash(&mut h);
        Ok(Some(h.finish()))
    }
}
