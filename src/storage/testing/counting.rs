//! A store wrapper that counts what is read through it: how tests prove
//! a cache or a readahead reads each chunk once (zarrs tests its cache the
//! same way).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::storage::contract::{ByteRange, Store};

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

    fn get_range(&self, key: &str, range: ByteRange) -> Result<Option<Vec<u8>>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let v = self.inner.get_range(key, range)?;
        if let Some(v) = &v {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        Ok(v)
    }

    fn get_ranges(
        &self,
        requests: &[(String, Vec<Range<u64>>)],
    ) -> Vec<Result<Option<Vec<Vec<u8>>>>> {
        let n: usize = requests.iter().map(|(_, r)| r.len()).sum();
        self.gets.fetch_add(n as u64, Ordering::SeqCst);
        let got = self.inner.get_ranges(requests);
        for v in got.iter().flatten().flatten().flatten() {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        got
    }

    fn get_many(&self, keys: &[(String, u64)]) -> Vec<Result<Option<Vec<u8>>>> {
        self.gets.fetch_add(keys.len() as u64, Ordering::SeqCst);
        let got = self.inner.get_many(keys);
        for v in got.iter().flatten().flatten() {
            self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
        }
        got
    }

    fn get_each(
        &self,
        keys: &[(String, u64)],
        each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>),
    ) {
        self.gets.fetch_add(keys.len() as u64, Ordering::SeqCst);
        self.inner.get_each(keys, &mut |i, got| {
            if let Ok(Some(v)) = &got {
                self.bytes.fetch_add(v.len() as u64, Ordering::SeqCst);
            }
            each(i, got)
        })
    }

    fn latency(&self) -> Option<std::time::Duration> {
        self.inner.latency()
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        self.inner.list_dir(dir)
    }

    fn describe(&self, key: &str) -> String {
        self.inner.describe(key)
    }

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        self.inner.change_stamp(prefix)
    }
}
