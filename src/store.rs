//! Key-value access to the files of a dataset.
//!
//! A [`Store`] maps Zarr-style keys (`a/b/.zarray`, `temp/c/0/1`) to bytes.
//! [`FsStore`] reads a directory; [`MemoryStore`] and [`CountingStore`]
//! exist so that every layer above can be tested without files and with
//! exact counts of what was read.
//!
//! Every read takes a size limit: the caller knows the most bytes a value
//! can legitimately hold (a chunk's worst-case encoded size, a metadata
//! document's sanity bound), so a huge or hostile file is refused before it
//! is read into memory.

use std::collections::HashMap;
use std::fmt::Debug;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::error::{Error, Result};

pub trait Store: Send + Sync + Debug {
    /// The whole value of `key`, `None` if it does not exist, an error if it
    /// holds more than `limit` bytes.
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>>;

    /// The names directly under the prefix `dir` ("" for the root), with
    /// whether each is itself a directory. Used to discover hierarchies
    /// that have no consolidated metadata.
    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>>;

    /// Where `key` lives, for error messages (a file path for [`FsStore`]).
    fn describe(&self, key: &str) -> String;
}

/// A directory on the local file system.
#[derive(Debug, Clone)]
pub struct FsStore {
    root: PathBuf,
}

impl FsStore {
    pub fn new(root: impl Into<PathBuf>) -> FsStore {
        FsStore { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of `key`, refusing keys that would leave the root (`..`,
    /// absolute paths): keys can come from metadata, which is input.
    fn path(&self, key: &str) -> Result<PathBuf> {
        let rel = Path::new(key);
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(Error::metadata(
                self.root.display().to_string(),
                format!("key {key:?} escapes the store"),
            ));
        }
        Ok(self.root.join(rel))
    }
}

impl Store for FsStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let path = self.path(key)?;
        let io_err = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // A directory where a chunk file should be (e.g. "c" of a v3
            // "default" key on a 0-d array): no such value.
            Err(e) if e.kind() == io::ErrorKind::IsADirectory => return Ok(None),
            Err(e) => return Err(io_err(e)),
        };
        let meta = file.metadata().map_err(io_err)?;
        if meta.is_dir() {
            return Ok(None);
        }
        if meta.len() > limit {
            return Err(Error::TooLarge {
                path: path.display().to_string(),
                size: meta.len(),
                limit,
            });
        }
        let mut buf = Vec::with_capacity(meta.len() as usize);
        // `take` guards against a file that grows between stat and read.
        file.take(limit.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(io_err)?;
        if buf.len() as u64 > limit {
            return Err(Error::TooLarge {
                path: path.display().to_string(),
                size: buf.len() as u64,
                limit,
            });
        }
        Ok(Some(buf))
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let path = self.path(dir)?;
        let io_err = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(io_err)? {
            let entry = entry.map_err(io_err)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // not valid UTF-8: cannot be a Zarr node name
            };
            // Follow symlinks, as the user's tools would.
            let is_dir = std::fs::metadata(entry.path())
                .map(|m| m.is_dir())
                .unwrap_or(false);
            out.push((name, is_dir));
        }
        out.sort();
        Ok(out)
    }

    fn describe(&self, key: &str) -> String {
        self.root.join(key).display().to_string()
    }
}

/// An in-memory store, for tests.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: RwLock<HashMap<String, Vec<u8>>>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    pub fn set(&self, key: &str, value: impl Into<Vec<u8>>) {
        self.map.write().insert(key.to_string(), value.into());
    }

    pub fn remove(&self, key: &str) {
        self.map.write().remove(key);
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        match self.map.read().get(key) {
            None => Ok(None),
            Some(v) if v.len() as u64 > limit => Err(Error::TooLarge {
                path: self.describe(key),
                size: v.len() as u64,
                limit,
            }),
            Some(v) => Ok(Some(v.clone())),
        }
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{}/", dir.trim_end_matches('/'))
        };
        let mut out: Vec<(String, bool)> = self
            .map
            .read()
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .map(|rest| match rest.split_once('/') {
                Some((first, _)) => (first.to_string(), true),
                None => (rest.to_string(), false),
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn describe(&self, key: &str) -> String {
        format!("memory:{key}")
    }
}

/// Wraps a store and counts the values read through it.
#[derive(Debug)]
pub struct CountingStore<S> {
    inner: S,
    gets: AtomicU64,
    bytes: AtomicU64,
}

impl<S: Store> CountingStore<S> {
    pub fn new(inner: S) -> CountingStore<S> {
        CountingStore {
            inner,
            gets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Number of `get` calls that found a value or failed (misses for absent
    /// keys are counted too: they are requests to the store).
    pub fn gets(&self) -> u64 {
        self.gets.load(Ordering::SeqCst)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Store> Store for CountingStore<S> {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let v = self.inner.get(key, limit)?;
        if let Some(v) = &v {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        Ok(v)
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        self.inner.list_dir(dir)
    }

    fn describe(&self, key: &str) -> String {
        self.inner.describe(key)
    }
}

impl<T: Store + ?Sized> Store for std::sync::Arc<T> {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        (**self).get(key, limit)
    }
    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        (**self).list_dir(dir)
    }
    fn describe(&self, key: &str) -> String {
        (**self).describe(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_store_refuses_escaping_keys_and_large_values() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"12345").unwrap();
        let s = FsStore::new(dir.path());
        assert_eq!(s.get("a", 5).unwrap().unwrap(), b"12345");
        assert!(matches!(
            s.get("a", 4),
            Err(Error::TooLarge { size: 5, .. })
        ));
        assert!(s.get("missing", 10).unwrap().is_none());
        assert!(s.get("../etc/passwd", 10).is_err());
        assert!(s.get("/etc/passwd", 10).is_err());
    }

    #[test]
    fn memory_store_lists_like_a_directory() {
        let s = MemoryStore::new();
        s.set("g/.zgroup", "{}");
        s.set("g/a/.zarray", "{}");
        s.set("x", "1");
        assert_eq!(
            s.list_dir("").unwrap(),
            vec![("g".to_string(), true), ("x".to_string(), false)]
        );
        assert_eq!(
            s.list_dir("g").unwrap(),
            vec![(".zgroup".to_string(), false), ("a".to_string(), true)]
        );
    }
}
