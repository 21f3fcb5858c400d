//! A file and a store that behave as remote ones do to their callers: each
//! request waits a fixed latency before it answers, they report that
//! latency ([`ReadAt::latency`], [`Store::latency`]) so readers batch and
//! read ahead as over the network, and they count what was asked: requests,
//! the batches they were asked in, and the most in flight at once
//! ([`Flight`]).
//!
//! What tests built on them assert is counts: requests, and the sizes of
//! the batches a reader asked for together (one `read_many`, `get_many`
//! or `get_each`: the requests it lets overlap), which do not depend on
//! how loaded the machine is. The wait makes requests overlap in time
//! the way round trips do, so the peak in flight is worth printing when
//! looking into a read, but it is a timing and no test asserts on it.
//!
//! A [`LatentFile`]'s [`read_many`](ReadAt::read_many) waits once for the
//! lot, as a remote object's does (it issues them all at once on its
//! runtime); a [`LatentStore`]'s batches fan out on threads as the
//! contract's default does for a store with a latency
//! ([`crate::storage::fan_out`]).

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::Result;
use crate::storage::fan_out::{fan_out, fan_out_each};
use crate::storage::{ReadAt, Store};

/// Requests counted as they start and end: how many in all, how many at
/// once at most.
#[derive(Debug, Default)]
pub struct Flight {
    requests: AtomicU64,
    now: AtomicU64,
    peak: AtomicU64,
    batches: Mutex<Vec<u64>>,
}

impl Flight {
    pub fn new() -> Arc<Flight> {
        Arc::default()
    }

    /// Requests started.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// The most requests in flight at one time.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::SeqCst)
    }

    /// The size of each batch asked for, in order (a single request is a
    /// batch of one).
    pub fn batches(&self) -> Vec<u64> {
        self.batches.lock().unwrap().clone()
    }

    /// Forget what was counted (the peak included).
    pub fn reset(&self) {
        self.requests.store(0, Ordering::SeqCst);
        self.peak
            .store(self.now.load(Ordering::SeqCst), Ordering::SeqCst);
        self.batches.lock().unwrap().clear();
    }

    fn batch(&self, n: usize) {
        self.batches.lock().unwrap().push(n as u64);
    }

    /// `n` requests in flight for `wait`.
    fn fly(&self, n: u64, wait: Duration) {
        self.requests.fetch_add(n, Ordering::SeqCst);
        let now = self.now.fetch_add(n, Ordering::SeqCst) + n;
        self.peak.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(wait);
        self.now.fetch_sub(n, Ordering::SeqCst);
    }
}

/// A file whose every request waits `latency` first, and which reports it.
pub struct LatentFile {
    inner: Arc<dyn ReadAt>,
    latency: Duration,
    flight: Arc<Flight>,
}

impl LatentFile {
    pub fn new(inner: Arc<dyn ReadAt>, latency: Duration, flight: Arc<Flight>) -> LatentFile {
        LatentFile {
            inner,
            latency,
            flight,
        }
    }
}

impl fmt::Debug for LatentFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatentFile")
            .field("latency", &self.latency)
            .finish()
    }
}

impl ReadAt for LatentFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.flight.batch(1);
        self.flight.fly(1, self.latency);
        self.inner.read_exact_at(buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn stamp(&self) -> Option<u64> {
        self.inner.stamp()
    }

    fn version(&self) -> Option<crate::storage::ObjectVersion> {
        self.inner.version()
    }

    /// All at once: one wait for the lot.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        self.flight.batch(reads.len());
        self.flight.fly(reads.len() as u64, self.latency);
        reads
            .iter_mut()
            .try_for_each(|(offset, buf)| self.inner.read_exact_at(buf, *offset))
    }

    fn latency(&self) -> Option<Duration> {
        Some(self.latency)
    }
}

/// A store whose every `get` and `get_range` waits `latency` first, and
/// which reports it.
#[derive(Debug)]
pub struct LatentStore<S> {
    inner: S,
    latency: Duration,
    flight: Arc<Flight>,
}

impl<S: Store> LatentStore<S> {
    pub fn new(inner: S, latency: Duration, flight: Arc<Flight>) -> LatentStore<S> {
        LatentStore {
            inner,
            latency,
            flight,
        }
    }
}

impl<S: Store> LatentStore<S> {
    fn one(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.flight.fly(1, self.latency);
        self.inner.get(key, limit)
    }
}

impl<S: Store> Store for LatentStore<S> {
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        self.flight.batch(1);
        self.one(key, limit)
    }

    fn get_range(&self, key: &str, range: crate::storage::ByteRange) -> Result<Option<Vec<u8>>> {
        self.flight.batch(1);
        self.flight.fly(1, self.latency);
        self.inner.get_range(key, range)
    }

    fn get_many(&self, keys: &[(String, u64)]) -> Vec<Result<Option<Vec<u8>>>> {
        self.flight.batch(keys.len());
        fan_out(keys.len(), |i| self.one(&keys[i].0, keys[i].1))
    }

    fn get_each(
        &self,
        keys: &[(String, u64)],
        each: &mut dyn FnMut(usize, Result<Option<Vec<u8>>>),
    ) {
        self.flight.batch(keys.len());
        fan_out_each(keys.len(), |i| self.one(&keys[i].0, keys[i].1), each)
    }

    fn list_dir(&self, dir: &str) -> Result<Vec<(String, bool)>> {
        self.flight.batch(1);
        self.flight.fly(1, self.latency);
        self.inner.list_dir(dir)
    }

    fn describe(&self, key: &str) -> String {
        self.inner.describe(key)
    }

    fn latency(&self) -> Option<Duration> {
        Some(self.latency)
    }

    fn change_stamp(&self, prefix: &str) -> Result<Option<u64>> {
        self.inner.change_stamp(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::{InMemory, MemoryStore};

    #[test]
    fn a_batch_is_in_flight_at_once_and_single_reads_one_by_one() {
        let flight = Flight::new();
        let file = LatentFile::new(
            Arc::new(InMemory(b"0123456789".to_vec())),
            Duration::from_millis(1),
            flight.clone(),
        );
        let (mut a, mut b) = ([0u8; 2], [0u8; 3]);
        file.read_exact_at(&mut a, 0).unwrap();
        file.read_exact_at(&mut b, 4).unwrap();
        assert_eq!((&a, &b), (b"01", b"456"));
        assert_eq!((flight.requests(), flight.peak()), (2, 1));
        file.read_many(&mut [(0, &mut a[..]), (4, &mut b[..]), (7, &mut [0u8; 3][..])])
            .unwrap();
        assert_eq!((flight.requests(), flight.peak()), (5, 3));
        assert_eq!(flight.batches(), [1, 1, 3]);
        assert_eq!(file.latency(), Some(Duration::from_millis(1)));
        flight.reset();
        assert_eq!((flight.requests(), flight.peak()), (0, 0));
        assert!(flight.batches().is_empty());
    }

    #[test]
    fn a_stores_batches_are_counted_as_asked() {
        let flight = Flight::new();
        let mem = MemoryStore::new();
        for k in ["a", "b", "c", "d"] {
            mem.set(k, k.as_bytes());
        }
        let store = LatentStore::new(mem, Duration::from_millis(1), flight.clone());
        let keys: Vec<(String, u64)> = ["a", "b", "c", "d"]
            .iter()
            .map(|k| (k.to_string(), 10))
            .collect();
        let got = store.get_many(&keys);
        assert_eq!(got[2].as_ref().unwrap().as_deref(), Some(&b"c"[..]));
        let mut each = Vec::new();
        store.get_each(&keys[..2], &mut |i, v| each.push((i, v.unwrap())));
        each.sort();
        assert_eq!(each, [(0, Some(b"a".to_vec())), (1, Some(b"b".to_vec()))]);
        assert_eq!(store.get("d", 10).unwrap().as_deref(), Some(&b"d"[..]));
        assert_eq!(flight.requests(), 7);
        assert_eq!(flight.batches(), [4, 2, 1]);
    }
}
