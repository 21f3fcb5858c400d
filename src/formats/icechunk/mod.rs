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
use crate::storage::location::url_of;
use crate::storage::scope::Scope;
use crate::storage::{ByteRange, Store};

/// The id of every repository's first snapshot (its creation), in both
/// spec versions: Icechunk's signature, so that a directory that happens
/// to hold `refs/` and `snapshots/` is not taken for a repository.
const FIRST_SNAPSHOT: &str = "1CECHNKREP0F1RSTCMT0";

/// Whether the directory `dir` holds an Icechunk repository: its first
/// snapshot, and either `refs/` (spec 1) or the `repo` object (spec 2).
pub fn is_repository(dir: &Path) -> bool {
    dir.join("snapshots").join(FIRST_SNAPSHOT).is_file()
        && (dir.join("refs").is_dir() || dir.join("repo").is_file())
}

/// The runtime the crate's calls run on: one for the process, one worker
/// (its work is metadata decoding, which it hands to blocking threads),
/// whatever the number of repositories.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(4)
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

/// What `reference` names: a branch, else a tag, else a snapshot id.
async fn version_of(repo: &icechunk::Repository, reference: &str) -> Option<VersionInfo> {
    if repo.lookup_branch(reference).await.is_ok() {
        return Some(VersionInfo::BranchTipRef(reference.to_string()));
    }
    if repo.lookup_tag(reference).await.is_ok() {
        return Some(VersionInfo::TagRef(reference.to_string()));
    }
    SnapshotId::try_from(reference)
        .ok()
        .map(VersionInfo::SnapshotId)
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
    /// The virtual chunk containers' URL prefixes.
    containers: Vec<String>,
    scope: Arc<Scope>,
}

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
        let shown = dir.display().to_string();
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Error::metadata(shown.clone(), format!("Icechunk repository: {what}: {e}"))
        };
        let reference = reference.unwrap_or("main");
        let (session, containers, nodes) = runtime().block_on(async {
            let storage = icechunk::new_local_filesystem_storage(dir)
                .await
                .map_err(|e| fail("cannot open its storage", &e))?;
            let repo = icechunk::Repository::open(storage)
                .config(bounded_caches())
                .execute()
                .await
                .map_err(|e| fail("cannot open it", &e))?;
            let version = version_of(&repo, reference).await.ok_or_else(|| {
                Error::metadata(
                    shown.clone(),
                    format!("Icechunk repository: no branch, tag or snapshot named {reference:?}"),
                )
            })?;
            let session = repo
                .readonly_session(&version)
                .await
                .map_err(|e| fail(&format!("cannot read {reference:?}"), &e))?;
            let containers: Vec<String> = repo
                .config()
                .virtual_chunk_containers()
                .map(|c| c.url_prefix().to_string())
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
        Ok(IcechunkStore {
            dir: dir.to_path_buf(),
            session,
            snapshot,
            nodes,
            objects: opts.files.store(dir),
            containers,
            scope: opts.scope_for(dir),
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
            source: io::Error::other(why.to_string()),
        }
    }

    /// The bytes of the chunk `idx` of `array` (`key` for messages).
    fn chunk(&self, key: &str, array: &str, idx: Vec<u32>, limit: u64) -> Result<Option<Vec<u8>>> {
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
        if length > limit {
            return Err(Error::TooLarge {
                path: self.describe(key),
                size: length,
                limit,
            });
        }
        match payload {
            None => Ok(None),
            Some(ChunkPayload::Inline(bytes)) => Ok(Some(bytes.to_vec())),
            Some(ChunkPayload::Ref(r)) => {
                let object = format!("chunks/{}", r.id);
                let range = ByteRange::At {
                    offset: r.offset,
                    len: r.length,
                };
                match self.objects.get_range(&object, range)? {
                    Some(v) => Ok(Some(v)),
                    None => Err(self.error(key, format!("its chunk object {object} is missing"))),
                }
            }
            Some(ChunkPayload::Virtual(v)) => {
                let url = self
                    .session
                    .resolve_virtual_location(&v.location)
                    .map_err(|e| self.error(key, e))?;
                self.read_virtual(key, &url, v.offset, v.length, v.checksum.as_ref())
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
        let contained = self.containers.iter().any(|p| {
            url::Url::parse(p).is_ok_and(|c| {
                c.scheme() == parsed.scheme()
                    && c.host() == parsed.host()
                    && parsed.path().starts_with(c.path().trim_end_matches('/'))
                    && parsed.path()[c.path().trim_end_matches('/').len()..].starts_with('/')
            })
        });
        if !contained {
            return Err(refuse(
                "no virtual chunk container of the repository holds it".into(),
            ));
        }
        if parsed.scheme() != "file" {
            return Err(refuse(
                "only file:// locations are read yet (object-store locations: a later release)"
                    .into(),
            ));
        }
        if !matches!(parsed.host_str(), None | Some("") | Some("localhost")) {
            return Err(refuse("a file URL of another host".into()));
        }
        let path = parsed
            .to_file_path()
            .map_err(|()| refuse("not a local file path".into()))?;
        let real = self.scope.local().check(&path).map_err(|real| {
            refuse(format!(
                "outside the allowed locations ({}): it resolves to {}",
                self.scope.describe(),
                real.display()
            ))
        })?;
        let pick = |meta: &std::fs::Metadata| -> std::result::Result<(u64, u64), String> {
            match checksum {
                Some(Checksum::LastModified(secs)) => {
                    let modified = meta.mtime() as f64 + meta.mtime_nsec() as f64 * 1e-9;
                    if modified > f64::from(secs.0) {
                        return Err(format!(
                            "changed since the reference was written (modified at {} s, the \
                             reference is of {} s)",
                            meta.mtime(),
                            secs.0
                        ));
                    }
                }
                Some(Checksum::ETag(tag)) => {
                    let now = local_etag(meta);
                    if tag.0.trim_matches('"') != now {
                        return Err(format!(
                            "changed since the reference was written (ETag {now}, the \
                             reference has {})",
                            tag.0
                        ));
                    }
                }
                None => {}
            }
            if offset.checked_add(len).is_none_or(|end| end > meta.len()) {
                return Err(format!(
                    "bytes {offset}..+{len} lie past its end ({} bytes)",
                    meta.len()
                ));
            }
            Ok((offset, offset + len))
        };
        crate::storage::local::read_verified(self.scope.local(), &real, pick, |e| e.to_string())
            .map_err(refuse)
    }
}

/// The ETag object stores give a local file (object_store's
/// `LocalFileSystem`, which Icechunk's writers use): inode, modification
/// time in microseconds and size, in hex.
fn local_etag(m: &std::fs::Metadata) -> String {
    let micros = m.mtime() as i128 * 1_000_000 + i128::from(m.mtime_nsec() / 1000);
    format!("{:x}-{:x}-{:x}", m.ino(), micros, m.len())
}

impl Store for IcechunkStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let node = match key.strip_suffix("zarr.json") {
            Some("") => Some(""),
            Some(p) => p.strip_suffix('/'),
            None => None,
        };
        if let Some(path) = node {
            return Ok(self.nodes.get(path).map(|n| n.zarr_json.clone()));
        }
        let Some((array, idx)) = self.chunk_of(key) else {
            return Ok(None);
        };
        self.chunk(key, &array, idx, limit)
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

/// Whether `source` names a repository this module opens: a local
/// directory for now (object-store prefixes: a later release).
pub fn is_source(source: &Path) -> bool {
    url_of(source).is_none() && is_repository(source)
}
