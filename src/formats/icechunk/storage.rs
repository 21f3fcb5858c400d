//! The `icechunk` crate's `Storage`, answered by a slabfs [`Store`]: every
//! object the crate reads (config, refs, snapshots, manifests) comes
//! through the same store as the repository's chunks, so a repository in
//! a local directory is read confined to slabfs's roots (a FIFO or a
//! symlink leading out is refused, as for every other store), and one in
//! object storage with slabfs's connections, credentials, deadlines,
//! retries, request limits and counters, whatever the crate's own
//! storages would configure. Read-only: every write is refused.
//!
//! The crate's calls are async, slabfs's stores blocking: each read runs
//! on the runtime's blocking threads ([`tokio::task::spawn_blocking`]).
//!
//! The crate marks its `Storage` trait as not for implementing outside it
//! (a `#[doc(hidden)]` public `Sealed` supertrait, for its own freedom to
//! add methods): implementing it here binds slabfs to the crate's minor
//! version (`icechunk = "~2.3"` in Cargo.toml), which is the price of one
//! storage contract; the alternative, the crate's own object-store
//! storages, would read with a second HTTP stack that none of slabfs's
//! limits, credentials or counters reach.

use std::fmt;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, Stream, StreamExt};
use icechunk::storage::{
    DeleteObjectsResult, GetModifiedResult, ListInfo, RepositoryCreation, Settings, Storage,
    StorageContext, StorageError, StorageErrorKind, StorageInfo, StorageResult, VersionInfo,
    VersionedUpdateResult,
};
use icechunk_storage::sealed;
use serde::{Deserialize, Serialize};

use crate::storage::{ByteRange, Store};

/// The most bytes one repository object (a snapshot, a manifest) may hold
/// when read whole: a manifest of ten million virtual references is about
/// half of it. Larger is refused (a bad or hostile repository must not
/// make the daemon allocate without bound).
pub const MAX_OBJECT_BYTES: u64 = 1 << 30;

/// A read-only `Storage` over a slabfs store of the repository's root.
pub struct StoreStorage {
    store: Arc<dyn Store>,
}

/// Whether the repository object at `key` never changes once written:
/// the spec names snapshots, manifests, transaction logs and chunks by
/// unique ids and never rewrites them. All but the first commit's: its
/// id is the same in every repository ([`super::FIRST_SNAPSHOT`]), so a
/// repository created again at the same place has another object under
/// that name (a disk cache kept the old one, and served it, by name).
pub fn is_immutable(key: &str) -> bool {
    let first = key.rsplit('/').next() == Some(super::FIRST_SNAPSHOT);
    !first
        && ["snapshots/", "manifests/", "transactions/", "chunks/"]
            .iter()
            .any(|p| key.starts_with(p))
}

impl StoreStorage {
    pub fn new(store: Arc<dyn Store>) -> StoreStorage {
        StoreStorage { store }
    }

    /// `f` on the store, on a blocking thread; the store's error as the
    /// crate's (a missing object as `ObjectNotFound`, which the crate
    /// tells apart: a missing ref is "no such branch").
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Store) -> crate::error::Result<Option<T>> + Send + 'static,
    ) -> StorageResult<T> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(store.as_ref())).await {
            Ok(Ok(Some(v))) => Ok(v),
            Ok(Ok(None)) => Err(StorageError::capture(StorageErrorKind::ObjectNotFound)),
            Ok(Err(e)) => Err(StorageError::capture(StorageErrorKind::ObjectStore(
                Box::new(e),
            ))),
            Err(e) => Err(StorageError::capture(StorageErrorKind::Other(format!(
                "a read of the repository failed: {e}"
            )))),
        }
    }

    /// The value of `path`, whole or its `range`. Snapshots, manifests,
    /// transaction logs and chunks never change once written (each is
    /// named by a unique id): read as such ([`Store::get_immutable`]: a
    /// disk cache keeps them without learning a version); refs, `repo`,
    /// the config and the first snapshot ([`is_immutable`]) do change.
    async fn read(&self, path: &str, range: Option<&Range<u64>>) -> StorageResult<Bytes> {
        let key = path.to_string();
        let range = range.map(|r| ByteRange::At {
            offset: r.start,
            len: r.end.saturating_sub(r.start),
        });
        self.blocking(move |s| {
            if is_immutable(&key) {
                return s.get_immutable(&key, range, MAX_OBJECT_BYTES);
            }
            match range {
                Some(r) => s.get_range(&key, r),
                None => s.get(&key, MAX_OBJECT_BYTES),
            }
        })
        .await
        .map(Bytes::from)
    }

    fn read_only() -> StorageError {
        StorageError::capture(StorageErrorKind::Other(
            "slabfs reads repositories and never writes them".to_string(),
        ))
    }
}

impl fmt::Debug for StoreStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreStorage({})", self.store.describe(""))
    }
}

impl fmt::Display for StoreStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.store.describe(""))
    }
}

/// The crate serialises a storage only when a repository is pickled or
/// saved (never on slabfs's read path): it is written as its location and
/// cannot be read back.
impl Serialize for StoreStorage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.store.describe(""))
    }
}

impl<'de> Deserialize<'de> for StoreStorage {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "a slabfs store cannot be deserialised",
        ))
    }
}

impl sealed::Sealed for StoreStorage {}

#[async_trait]
#[typetag::serde]
impl Storage for StoreStorage {
    fn storage_info(&self) -> StorageInfo {
        StorageInfo {
            backend_type: "slabfs",
            fields: vec![("location", self.store.describe(""))],
        }
    }

    async fn can_write(&self) -> StorageResult<bool> {
        Ok(false)
    }

    async fn can_create_repository(&self) -> StorageResult<RepositoryCreation> {
        Err(Self::read_only())
    }

    async fn get_object_range(
        &self,
        _ctx: &StorageContext<'_>,
        path: &str,
        range: Option<&Range<u64>>,
    ) -> StorageResult<(
        Pin<Box<dyn Stream<Item = Result<Bytes, StorageError>> + Send>>,
        VersionInfo,
    )> {
        let bytes = self.read(path, range).await?;
        Ok((
            stream::once(async move { Ok(bytes) }).boxed(),
            VersionInfo::for_creation(),
        ))
    }

    /// Always the object (slabfs's stores have no conditional reads): the
    /// crate asks this of spec 2's `repo` object.
    async fn get_object_conditional(
        &self,
        _ctx: &StorageContext<'_>,
        path: &str,
        _previous_version: Option<&VersionInfo>,
    ) -> StorageResult<GetModifiedResult> {
        let bytes = self.read(path, None).await?;
        Ok(GetModifiedResult::Modified {
            data: Box::pin(std::io::Cursor::new(bytes)),
            new_version: VersionInfo::for_creation(),
        })
    }

    async fn get_object_last_modified(
        &self,
        _ctx: &StorageContext<'_>,
        path: &str,
    ) -> StorageResult<DateTime<Utc>> {
        Err(StorageError::capture(StorageErrorKind::Other(format!(
            "{path}: slabfs does not ask an object's time"
        ))))
    }

    /// Every object under `prefix`, by its key relative to `prefix`: a
    /// walk of the store's listings (the crate lists `refs/` to name the
    /// branches and tags, one prefix per ref).
    async fn list_objects<'a>(
        &'a self,
        _ctx: &StorageContext<'_>,
        prefix: &str,
    ) -> StorageResult<BoxStream<'a, StorageResult<ListInfo<String>>>> {
        let prefix = prefix.trim_end_matches('/').to_string();
        let ids = self
            .blocking(move |s| {
                let mut ids = Vec::new();
                let mut dirs = vec![String::new()];
                while let Some(rel) = dirs.pop() {
                    let full = [prefix.as_str(), rel.as_str()]
                        .iter()
                        .filter(|p| !p.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join("/");
                    for (name, is_dir) in s.list_dir(&full)? {
                        let id = if rel.is_empty() {
                            name
                        } else {
                            format!("{rel}/{name}")
                        };
                        if is_dir {
                            dirs.push(id);
                        } else {
                            ids.push(id);
                        }
                    }
                }
                Ok(Some(ids))
            })
            .await?;
        let infos = ids.into_iter().map(|id| {
            Ok(ListInfo {
                id,
                created_at: DateTime::<Utc>::UNIX_EPOCH,
                size_bytes: 0,
            })
        });
        Ok(stream::iter(infos).boxed())
    }

    async fn put_object(
        &self,
        _ctx: &StorageContext<'_>,
        _path: &str,
        _bytes: Bytes,
        _content_type: Option<&str>,
        _metadata: Vec<(String, String)>,
        _previous_version: Option<&VersionInfo>,
    ) -> StorageResult<VersionedUpdateResult> {
        Err(Self::read_only())
    }

    async fn copy_object(
        &self,
        _ctx: &StorageContext<'_>,
        _from: &str,
        _to: &str,
        _content_type: Option<&str>,
        _version: &VersionInfo,
    ) -> StorageResult<VersionedUpdateResult> {
        Err(Self::read_only())
    }

    async fn delete_batch(
        &self,
        _ctx: &StorageContext<'_>,
        _prefix: &str,
        _batch: Vec<(String, u64)>,
    ) -> StorageResult<DeleteObjectsResult> {
        Err(Self::read_only())
    }

    async fn default_settings(&self) -> StorageResult<Settings> {
        Ok(Settings::default())
    }
}

#[cfg(test)]
mod tests {
    use super::is_immutable;

    /// Regression (review of the disk cache): the first snapshot's name is
    /// the same in every repository, so it was kept by name and a
    /// repository created again at the same prefix was served its
    /// predecessor's.
    #[test]
    fn the_first_snapshot_is_not_immutable() {
        assert!(!is_immutable(super::super::FIRST_SNAPSHOT_KEY));
        assert!(!is_immutable("transactions/1CECHNKREP0F1RSTCMT0"));
        assert!(is_immutable("snapshots/VNKW2P5H8SF5SW3K4QXG"));
        assert!(is_immutable("manifests/0G6KZ8F7C4PBDSJ0TVQ0"));
        assert!(is_immutable("chunks/5PNTJR7NZ2ZQ9AXGMD90"));
        assert!(!is_immutable("refs/branch.main/ref.json"));
        assert!(!is_immutable("repo"));
    }
}
