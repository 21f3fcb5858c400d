//! Inode numbers: a function of the path, and the numbers the kernel holds.
//!
//! A lazy tree never sees every path, so it cannot number them in order.
//! A node's number is instead a hash of its mount path and kind ([`ino_of`]:
//! XXH3, whose output its specification fixes, over the path with the kind
//! in the seed). The same path gets the same number whether its dataset was
//! opened first or last, evicted and re-opened, refreshed, or mounted again
//! in another order, which tools that remember `(st_dev, st_ino)` (rsync,
//! tar, backup indexers) rely on; a path that turns from a file into a
//! directory gets another number (the kernel treats an inode whose type
//! changed as broken).
//!
//! The kernel names nodes by number, so the daemon must turn a number back
//! into its path: [`Inodes`] holds the nodes the kernel holds, with the
//! kernel's lookup count. A `lookup` reply adds one, `forget` takes the
//! kernel's count away, and a node at zero is dropped: the table is as big
//! as the kernel's cache of this mount, not as the archive.
//!
//! Two live paths whose hashes meet (about one chance in 10^6 for 10^7
//! live nodes, 63-bit numbers) are told apart by probing: the second takes
//! the hash with the next seed. Which of the two probes depends on which
//! the kernel looked up first: only then is a number not the same on every
//! mount. The root is always [`ROOT_INO`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::{Kind, ROOT_INO};

/// The number `path` (from the mount root, no leading slash; "" the root)
/// of `kind` has unless it collided ([`Inodes`]).
pub fn ino_of(path: &str, kind: Kind) -> u64 {
    probe(path, kind, 0)
}

/// The `k`-th candidate number of `path`: 63 bits (positive as a signed
/// 64-bit number, as some tools store it), never 0 or the root's.
fn probe(path: &str, kind: Kind, k: u64) -> u64 {
    if path.is_empty() {
        return ROOT_INO;
    }
    let seed = k << 1 | u64::from(kind == Kind::Directory);
    let h = xxh3_64_with_seed(path.as_bytes(), seed) >> 1;
    if h <= ROOT_INO { h + 2 } else { h }
}

/// What the kernel holds under one number.
#[derive(Debug, Clone)]
pub struct Known {
    pub path: Arc<str>,
    pub kind: Kind,
    /// The mount path of the dataset the node belongs to, `None` for a
    /// directory of the archive or the control files.
    pub unit: Option<Arc<str>>,
    /// The kernel may keep content of it, beyond attributes that expire:
    /// a file's pages (opened with `FOPEN_KEEP_CACHE`) or a directory's
    /// listing (`FOPEN_CACHE_DIR`). What a refresh must drop when it
    /// changed.
    pub cached: bool,
    lookups: u32,
}

#[derive(Default)]
struct Table {
    by_ino: HashMap<u64, Known>,
    /// Numbers by path, one map per kind (looked up by `&str`, without
    /// building a key).
    dirs: HashMap<Arc<str>, u64>,
    files: HashMap<Arc<str>, u64>,
    /// The numbers held inside each dataset, so a dataset that changed
    /// while it was not open can have exactly its nodes invalidated
    /// (sorted by path: the datasets under a directory are a range).
    /// One entry per node (a set per dataset would cost more than the
    /// node itself: most datasets have one or two held).
    by_unit: BTreeSet<(Arc<str>, u64)>,
}

impl Table {
    /// `ino` is no longer held inside the dataset at `unit`.
    fn unhold(&mut self, unit: &Arc<str>, ino: u64) {
        self.by_unit.remove(&(unit.clone(), ino));
    }

    /// `unit` as an `Arc` some entry already holds, if one does.
    fn shared_unit(&self, unit: &str) -> Option<Arc<str>> {
        let from: (Arc<str>, u64) = (Arc::from(unit), 0);
        self.by_unit
            .range(from..)
            .next()
            .filter(|(u, _)| **u == *unit)
            .map(|(u, _)| u.clone())
    }

    fn by_path(&self, kind: Kind) -> &HashMap<Arc<str>, u64> {
        match kind {
            Kind::Directory => &self.dirs,
            Kind::File => &self.files,
        }
    }

    fn by_path_mut(&mut self, kind: Kind) -> &mut HashMap<Arc<str>, u64> {
        match kind {
            Kind::Directory => &mut self.dirs,
            Kind::File => &mut self.files,
        }
    }
}

/// The nodes the kernel holds, by number. See the module docs.
#[derive(Default)]
pub struct Inodes {
    table: Mutex<Table>,
}

impl Inodes {
    /// The number of `path`: the one the kernel holds, else [`ino_of`]
    /// (probed past a number another path holds). Adds nothing.
    pub fn peek(&self, path: &str, kind: Kind) -> u64 {
        if path.is_empty() {
            return ROOT_INO;
        }
        let t = self.table.lock();
        if let Some(&ino) = t.by_path(kind).get(path) {
            return ino;
        }
        (0..)
            .map(|k| probe(path, kind, k))
            .find(|ino| !t.by_ino.contains_key(ino))
            .expect("a free number")
    }

    /// A `lookup` of `path` is answered: its number, the kernel's count
    /// raised by one.
    pub fn remember(&self, path: &str, kind: Kind, unit: Option<&str>) -> u64 {
        if path.is_empty() {
            return ROOT_INO;
        }
        let mut t = self.table.lock();
        if let Some(&ino) = t.by_path(kind).get(path) {
            let known = t.by_ino.get_mut(&ino).expect("tables agree");
            known.lookups = known.lookups.saturating_add(1);
            // The path may belong to another dataset now (a directory
            // that became a Zarr store, or stopped being one).
            if known.unit.as_deref() != unit {
                let old = std::mem::replace(&mut known.unit, unit.map(Arc::from));
                let new = known.unit.clone();
                if let Some(o) = old {
                    t.unhold(&o, ino);
                }
                if let Some(n) = new {
                    t.by_unit.insert((n, ino));
                }
            }
            return ino;
        }
        let (ino, k) = (0..)
            .map(|k| (probe(path, kind, k), k))
            .find(|(ino, _)| !t.by_ino.contains_key(ino))
            .expect("a free number");
        if k > 0 {
            log::info!("inode numbers: /{path} collides with another path; it takes number {ino}");
        }
        let path: Arc<str> = Arc::from(path);
        let unit: Option<Arc<str>> = unit.map(|u| {
            // One allocation for a dataset's root and its unit.
            let u: Arc<str> = if *u == *path {
                path.clone()
            } else {
                Arc::from(u)
            };
            t.shared_unit(&u).unwrap_or(u)
        });
        if let Some(u) = &unit {
            t.by_unit.insert((u.clone(), ino));
        }
        t.by_path_mut(kind).insert(path.clone(), ino);
        t.by_ino.insert(
            ino,
            Known {
                path,
                kind,
                unit,
                cached: false,
                lookups: 1,
            },
        );
        ino
    }

    /// The kernel dropped `n` references to `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        let mut t = self.table.lock();
        let Some(known) = t.by_ino.get_mut(&ino) else {
            return;
        };
        known.lookups = known.lookups.saturating_sub(n.min(u32::MAX as u64) as u32);
        if known.lookups > 0 {
            return;
        }
        let known = t.by_ino.remove(&ino).expect("present");
        t.by_path_mut(known.kind).remove(&known.path);
        if let Some(u) = known.unit {
            t.unhold(&u, ino);
        }
    }

    /// `ino` was opened so that the kernel may keep its content
    /// ([`Known::cached`]).
    pub fn mark_cached(&self, ino: u64) {
        if let Some(k) = self.table.lock().by_ino.get_mut(&ino) {
            k.cached = true;
        }
    }

    /// The datasets at or under `unit` of which the kernel may keep
    /// content ([`Known::cached`]).
    pub fn cached_units_under(&self, unit: &str) -> BTreeSet<Arc<str>> {
        let t = self.table.lock();
        let from: (Arc<str>, u64) = (Arc::from(unit), 0);
        t.by_unit
            .range(from..)
            .take_while(|(u, _)| u.starts_with(unit))
            .filter(|(u, ino)| {
                super::tree::under(u, unit) && t.by_ino.get(ino).is_some_and(|k| k.cached)
            })
            .map(|(u, _)| u.clone())
            .collect()
    }

    /// What the kernel holds under `ino`.
    pub fn get(&self, ino: u64) -> Option<Known> {
        self.table.lock().by_ino.get(&ino).cloned()
    }

    /// The number of `path` if the kernel holds it.
    pub fn held(&self, path: &str, kind: Kind) -> Option<u64> {
        if path.is_empty() {
            return Some(ROOT_INO);
        }
        self.table.lock().by_path(kind).get(path).copied()
    }

    /// The nodes the kernel holds inside the datasets at or under `unit`
    /// (`""`: every dataset), with the dataset each is in.
    pub fn in_units_under(&self, unit: &str) -> Vec<(u64, Known)> {
        let t = self.table.lock();
        let from: (Arc<str>, u64) = (Arc::from(unit), 0);
        t.by_unit
            .range(from..)
            .take_while(|(u, _)| u.starts_with(unit))
            .filter(|(u, _)| super::tree::under(u, unit))
            .filter_map(|(_, ino)| t.by_ino.get(ino).map(|k| (*ino, k.clone())))
            .collect()
    }

    /// How many nodes the kernel holds (the root not counted).
    pub fn len(&self) -> usize {
        self.table.lock().by_ino.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_a_function_of_path_and_kind() {
        // Fixed by XXH3's specification: a change here renumbers every
        // mount (and is a compatibility break to announce).
        assert_eq!(ino_of("", Kind::Directory), ROOT_INO);
        let a = ino_of("runs/a.nc/temp", Kind::File);
        assert_eq!(a, ino_of("runs/a.nc/temp", Kind::File));
        assert_ne!(a, ino_of("runs/a.nc/temp", Kind::Directory));
        assert_ne!(a, ino_of("runs/b.nc/temp", Kind::File));
        assert!(a > ROOT_INO && a < 1 << 63);
        assert_eq!(
            ino_of("runs/a.nc/temp", Kind::File),
            xxh3_64_with_seed(b"runs/a.nc/temp", 0) >> 1
        );
    }

    #[test]
    fn the_table_counts_lookups_and_forgets() {
        let t = Inodes::default();
        let ino = t.remember("a.nc", Kind::Directory, Some("a.nc"));
        assert_eq!(ino, ino_of("a.nc", Kind::Directory));
        assert_eq!(t.remember("a.nc", Kind::Directory, Some("a.nc")), ino);
        assert_eq!(t.in_units_under("a.nc").len(), 1);
        assert_eq!(t.in_units_under("").len(), 1);
        assert!(t.in_units_under("a").is_empty());
        t.forget(ino, 1);
        assert_eq!(t.get(ino).unwrap().path.as_ref(), "a.nc");
        t.forget(ino, 1);
        assert!(t.get(ino).is_none());
        assert!(t.in_units_under("a.nc").is_empty());
        assert!(t.is_empty());
        assert_eq!(t.remember("", Kind::Directory, None), ROOT_INO);
        assert!(t.is_empty());
    }

    #[test]
    fn a_collision_is_probed_and_kept_while_held() {
        let t = Inodes::default();
        let a = t.remember("a", Kind::File, None);
        // Plant another path at b's number, as if their hashes met.
        let b_ino = ino_of("b", Kind::File);
        {
            let mut tab = t.table.lock();
            let k = tab.by_ino.remove(&a).unwrap();
            tab.files.insert(k.path.clone(), b_ino);
            tab.by_ino.insert(b_ino, k);
        }
        let b = t.remember("b", Kind::File, None);
        assert_ne!(b, b_ino);
        assert_eq!(b, probe("b", Kind::File, 1));
        assert_eq!(t.peek("b", Kind::File), b);
        assert_eq!(t.remember("b", Kind::File, None), b);
        assert_eq!(t.get(b_ino).unwrap().path.as_ref(), "a");
    }
}
