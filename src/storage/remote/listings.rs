//! What the stores of one mount know of their chunk objects' versions,
//! for reads through the disk cache (`--disk-cache`): one memo for all
//! of them, bounded in names.
//!
//! A [`super::store::RemoteStore`] finds a chunk's blocks on disk by the
//! chunk's version (its ETag), which a listing of the chunk's *unit* (its
//! directory, or a Zarr v3 array's whole chunk prefix) or an earlier GET
//! taught it. Those versions are kept here, by store and unit, least
//! recently used out first, within [`LISTED_NAMES`] names over every store
//! of the mount: a per-store bound (it was 64 units a store, up to 100,000
//! names each) let memory grow with the number of stores open (up to
//! `--max-open-datasets` of them), each up to 640 MB.
//!
//! A store's entries are under an id of its own, not its location: a
//! store reopened after a change (the refresh opens a new one) starts
//! from nothing rather than from the versions the old one knew. The
//! entries of a store that went are not looked for again and age out.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;

/// One unit's objects: name (relative to the unit) -> (ETag, size).
pub(super) type DirListing = HashMap<String, (String, u64)>;

/// The mark of a chunk prefix too large to list whole (no key is empty).
pub(super) const TOO_BIG: &str = "";

/// A directory listing more objects than this is not kept (its values are
/// read from the store as without a disk cache), nor does a unit learn
/// more versions than this from GETs: 100,000 names are about 10 MB.
pub(super) const LISTED_MAX: usize = 100_000;

/// Names kept at most over all the stores of a mount (a unit counts one
/// besides its names): four of the largest listings, about 40 MB.
pub const LISTED_NAMES: usize = 4 * LISTED_MAX;

/// What is known of one unit's versions.
///
/// A unit the disk cache holds nothing of (no note) is not listed: its
/// first reads are plain GETs, all at once, and each answer's ETag is
/// learned here and keys its blocks (a listing before them would only
/// delay them by a round trip). The first block kept leaves a note, so a
/// later mount lists the unit first and finds its blocks by the versions
/// listed, without a GET.
#[derive(Debug, Default)]
pub(super) struct Unit {
    versions: DirListing,
    /// A note is in the disk cache (it was listed because of one, or this
    /// store left one).
    noted: bool,
}

impl Unit {
    /// A unit as its listing gave it (listed because a note was found).
    pub(super) fn listed(versions: DirListing) -> Unit {
        Unit {
            versions,
            noted: true,
        }
    }

    /// What it counts against [`LISTED_NAMES`].
    fn weight(&self) -> usize {
        1 + self.versions.len()
    }
}

/// The memo of a mount's stores (see the module docs).
#[derive(Debug)]
pub(crate) struct Listings {
    inner: parking_lot::Mutex<Inner>,
    bound: usize,
    next_store: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    units: LruCache<(u64, String), Unit>,
    /// The weight of every unit kept.
    names: usize,
}

impl Inner {
    /// Push out the units used longest ago (of any store) down to
    /// `bound` names.
    fn shrink(&mut self, bound: usize) {
        while self.names > bound {
            let Some((_, old)) = self.units.pop_lru() else {
                break;
            };
            self.names -= old.weight();
        }
    }
}

impl Listings {
    /// A memo of at most `bound` names.
    pub(crate) fn new(bound: usize) -> Listings {
        Listings {
            inner: parking_lot::Mutex::new(Inner {
                units: LruCache::unbounded(),
                names: 0,
            }),
            bound,
            next_store: AtomicU64::new(0),
        }
    }

    /// The part of the memo of a store just opened.
    pub(super) fn for_store(self: &Arc<Listings>) -> StoreListings {
        StoreListings {
            shared: self.clone(),
            id: self.next_store.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Names kept now (tests).
    #[cfg(test)]
    fn names(&self) -> usize {
        self.inner.lock().names
    }
}

/// One store's part of the [`Listings`].
#[derive(Debug)]
pub(super) struct StoreListings {
    shared: Arc<Listings>,
    id: u64,
}

impl StoreListings {
    fn key(&self, unit: &str) -> (u64, String) {
        (self.id, unit.to_string())
    }

    /// The version `name` of `unit` has, as listed or learned (the unit
    /// used).
    pub(super) fn version(&self, unit: &str, name: &str) -> Option<(String, u64)> {
        let mut inner = self.shared.inner.lock();
        inner
            .units
            .get(&self.key(unit))?
            .versions
            .get(name)
            .cloned()
    }

    /// Whether `unit` is known (listed, or learning).
    pub(super) fn contains(&self, unit: &str) -> bool {
        self.shared.inner.lock().units.contains(&self.key(unit))
    }

    /// Whether `unit` is a chunk prefix found too large to list whole.
    pub(super) fn too_big(&self, unit: &str) -> bool {
        let inner = self.shared.inner.lock();
        inner
            .units
            .peek(&self.key(unit))
            .is_some_and(|u| u.versions.contains_key(TOO_BIG))
    }

    /// Whether the disk cache has a note of `unit`, as far as is known.
    pub(super) fn noted(&self, unit: &str) -> bool {
        let inner = self.shared.inner.lock();
        inner.units.peek(&self.key(unit)).is_some_and(|u| u.noted)
    }

    /// Keep `known` as what is known of `unit`, pushing out the units
    /// used longest ago (of any store) down to the bound.
    pub(super) fn put(&self, unit: String, known: Unit) {
        let mut inner = self.shared.inner.lock();
        let weight = known.weight();
        if let Some(old) = inner.units.put((self.id, unit), known) {
            inner.names -= old.weight();
        }
        inner.names += weight;
        inner.shrink(self.shared.bound);
    }

    /// `name` of `unit` is at version `tag` (`size` bytes), as a GET's
    /// answer says: learned (within [`LISTED_MAX`] names a unit) and the
    /// unit marked noted. `None` when the unit is not kept; else whether
    /// it was noted before.
    pub(super) fn learn(&self, unit: &str, name: &str, tag: &str, size: u64) -> Option<bool> {
        let mut inner = self.shared.inner.lock();
        let known = inner.units.get_mut(&self.key(unit))?;
        let mut added = 0;
        if known.versions.len() < LISTED_MAX && !known.versions.contains_key(name) {
            known
                .versions
                .insert(name.to_string(), (tag.to_string(), size));
            added = 1;
        }
        let was = std::mem::replace(&mut known.noted, true);
        inner.names += added;
        // The unit just used is the last one out.
        inner.shrink(self.shared.bound);
        Some(was)
    }

    /// Forget `unit` (its listing is out of date).
    pub(super) fn forget(&self, unit: &str) {
        let mut inner = self.shared.inner.lock();
        if let Some(old) = inner.units.pop(&self.key(unit)) {
            inner.names -= old.weight();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(n: usize) -> DirListing {
        (0..n)
            .map(|i| (format!("{i}"), (format!("\"e{i}\""), 10)))
            .collect()
    }

    /// Regression (the per-store bound): however many stores are open,
    /// the names kept stay within the one bound; the units used last
    /// stay.
    #[test]
    fn the_names_of_every_store_stay_within_one_bound() {
        let memo = Arc::new(Listings::new(1000));
        let stores: Vec<StoreListings> = (0..50).map(|_| memo.for_store()).collect();
        for (i, s) in stores.iter().enumerate() {
            s.put(format!("a{i}/c/"), Unit::listed(listing(99)));
            assert!(memo.names() <= 1000, "{} names", memo.names());
        }
        assert_eq!(memo.names(), 1000, "ten units of 100");
        let last = &stores[49];
        assert_eq!(
            last.version("a49/c/", "7"),
            Some(("\"e7\"".to_string(), 10))
        );
        assert!(!stores[0].contains("a0/c/"), "the oldest unit went first");
        // Learned names count too.
        let s = &stores[49];
        for i in 0..500 {
            s.learn("a49/c/", &format!("new{i}"), "\"t\"", 1);
            assert!(memo.names() <= 1000, "{} names", memo.names());
        }
        assert!(s.contains("a49/c/"), "the unit learning stays");
        s.put("more/".into(), Unit::default());
        assert!(memo.names() <= 1000, "{} names", memo.names());
        assert!(s.contains("more/"));
    }

    /// A store reopened starts from nothing: the same unit of two stores
    /// is two entries.
    #[test]
    fn each_store_knows_only_its_own_versions() {
        let memo = Arc::new(Listings::new(LISTED_NAMES));
        let (old, new) = (memo.for_store(), memo.for_store());
        old.put("c/".into(), Unit::listed(listing(3)));
        assert!(old.version("c/", "1").is_some());
        assert!(new.version("c/", "1").is_none());
        assert!(!new.contains("c/"));
        assert_eq!(
            new.learn("c/", "1", "\"x\"", 1),
            None,
            "not kept: not learned"
        );
        new.put("c/".into(), Unit::default());
        assert_eq!(new.learn("c/", "1", "\"x\"", 1), Some(false));
        assert_eq!(new.learn("c/", "2", "\"y\"", 1), Some(true));
        assert!(new.noted("c/"));
        assert_eq!(old.version("c/", "1"), Some(("\"e1\"".to_string(), 10)));
        new.forget("c/");
        assert!(!new.contains("c/") && old.contains("c/"));
        assert_eq!(memo.names(), 4);
    }
}
