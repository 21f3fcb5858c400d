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
use crate::storage::local::FsStore;
use crate::storage::location::url_of;
use crate::storage::scope::Scope;
use crate::storage::{ByteRange, Store};

/// Whether the directory `dir` holds an Icechunk repository: its
/// `snapshots/` and either `refs/` (spec 1) or the `repo` object (spec 2).
pub fn is_repository(dir: &Path) -> bool {
    dir.join("snapshots").is_dir() && (dir.join("refs").is_dir() || dir.join("repo").is_file())
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
    /// The repository's directory: where native chunks are.
    objects: FsStore,
    /// The virtual chunk containers' URL prefixes.
    containers: Vec<String>,
    scope: Arc<Scope>,
    files: Arc<dyn crate::storage::Files>,
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
            objects: FsStore::new(dir),
            containers,
            scope: opts.scope_for(dir),
            files: opts.files.clone(),
        })
    }

    /// The snapshot served.
    pub fn snapshot(&self) -> &str {
        &self.snapshot
    }

    /// The array and chunk indices a chunk key names (`a/c/0/1`, `c.0.1`
    /// with the `.` separator, `a/c` for a scalar), if any.
    fn chunk_of(&self, key: &str) -> Option<(String, Vec<u32>)> {
        // The longest array path the key is under.
        let (array, rest) = self
            .nodes
            .iter()
            .filter(|(_, n)| n.array)
            .filter_map(|(p, _)| {
                let rest = if p.is_empty() {
                    Some(key)
                } else {
                    key.strip_prefix(p.as_str())?.strip_prefix('/')
                };
                rest.map(|r| (p.clone(), r))
            })
            .max_by_key(|(p, _)| p.len())?;
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
    fn chunk(&self, key: &str, array: &str, idx: Vec<u32>) -> Result<Option<Vec<u8>>> {
        let path = icechunk::format::Path::try_from(format!("/{array}").as_str())
            .map_err(|e| self.error(key, e))?;
        let payload = runtime()
            .block_on(self.session.get_chunk_ref(&path, &ChunkIndices(idx)))
            .map_err(|e| self.error(key, e))?;
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
    /// the version `checksum` says.
    fn read_virtual(
        &self,
        key: &str,
        url: &str,
        offset: u64,
        len: u64,
        checksum: Option<&Checksum>,
    ) -> Result<Vec<u8>> {
        let refuse = |why: String| self.error(key, format!("virtual chunk in {url}: {why}"));
        if !self.containers.iter().any(|p| url.starts_with(p.as_str())) {
            return Err(refuse(
                "no virtual chunk container of the repository holds it".into(),
            ));
        }
        let Some(path) = url.strip_prefix("file://") else {
            return Err(refuse(
                "only file:// locations are read yet (object-store locations: a later release)"
                    .into(),
            ));
        };
        let path = PathBuf::from(path);
        let real = self.scope.check(&path).map_err(|r| {
            refuse(format!(
                "outside the allowed locations ({}): {r:?}",
                self.scope.describe()
            ))
        })?;
        let meta = std::fs::metadata(&real).map_err(|e| refuse(e.to_string()))?;
        match checksum {
            None => {}
            Some(Checksum::LastModified(secs)) if meta.mtime() > i64::from(secs.0) => {
                return Err(refuse(format!(
                    "changed since the reference was written (modified at {} s, the \
                     reference is of {} s)",
                    meta.mtime(),
                    secs.0
                )));
            }
            Some(Checksum::LastModified(_)) => {}
            Some(Checksum::ETag(tag)) => {
                let now = local_etag(&meta);
                if tag.0.trim_matches('"') != now {
                    return Err(refuse(format!(
                        "changed since the reference was written (ETag {now}, the reference \
                         has {})",
                        tag.0
                    )));
                }
            }
        }
        if offset.checked_add(len).is_none_or(|end| end > meta.len()) {
            return Err(refuse(format!(
                "bytes {offset}..+{len} lie past its end ({} bytes)",
                meta.len()
            )));
        }
        let file = self.files.open(&real).map_err(|e| refuse(e.to_string()))?;
        let mut buf = vec![0u8; len as usize];
        file.read_exact_at(&mut buf, offset)
            .map_err(|e| refuse(e.to_string()))?;
        Ok(buf)
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
        let v = self.chunk(key, &array, idx)?;
        if let Some(v) = &v
            && v.len() as u64 > limit
        {
            return Err(self.error(
                key,
                format!("{} bytes, more than the {limit} allowed", v.len()),
            ));
        }
        Ok(v)
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
