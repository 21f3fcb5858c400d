//! An in-memory store and an in-memory file, for tests: every layer
//! above storage can be tested without files, and the fuzz targets feed
//! them arbitrary bytes.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::storage::contract::{ReadAt, Store};

/// An in-memory store, for tests. Every value remembers which write put
/// it there (a store-wide counter), which is what its change stamps hash.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: RwLock<HashMap<String, (Vec<u8>, u64)>>,
    writes: AtomicU64,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    pub fn set(&self, key: &str, value: impl Into<Vec<u8>>) {
        let generation = self.writes.fetch_add(1, Ordering::SeqCst);
        self.map
            .write()
            .insert(key.to_string(), (value.into(), generation));
    }

    pub fn remove(&self, key: &str) {
        self.map.write().remove(key);
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        match self.map.read().get(key).map(|(v, _)| v) {
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

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        let map = self.map.read();
        let mut under: Vec<(&String, u64)> = map
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, (_, generation))| (k, *generation))
            .collect();
        under.sort();
        let mut h = DefaultHasher::new();
        under.hash(&mut h);
        Ok(Some(h.finish()))
    }
}

/// A file held in memory, for unit tests of readers that parse through
/// [`ReadAt`]. Reads past its end are `UnexpectedEof`, as a short file's.
#[derive(Debug)]
pub struct InMemory(pub Vec<u8>);

impl ReadAt for InMemory {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.0.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_stamps_count_writes() {
        let s = MemoryStore::new();
        s.set("a/zarr.json", "{}");
        s.set("b/zarr.json", "{}");
        let stamp = |p: &str| s.change_stamp(p).unwrap().unwrap();
        let (a0, b0) = (stamp("a/"), stamp("b/"));
        s.set("a/c/0", "x");
        assert_ne!(stamp("a/"), a0);
        assert_eq!(stamp("b/"), b0);
        let a1 = stamp("a/");
        s.set("a/c/0", "x"); // the same bytes written again: a new write
        assert_ne!(stamp("a/"), a1);
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
