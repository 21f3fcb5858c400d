//! The storage conformance test: the promises of
//! [`crate::storage::contract`], checked the same way for every
//! implementation (zarrs runs one `store_test.rs` over each of its stores
//! for the same reason: a format written against the contract must not
//! meet a store that answers an edge case its own way).
//!
//! An implementation's test fills its backend (a directory, a bucket, an
//! HTTP server's directory, a kerchunk reference set, a memory store)
//! with [`fixture`] (or writes it with [`write_fixture`]) and calls
//! [`check_store`] on its [`Store`], [`check_files`] on its [`Files`], or
//! [`check_read_at`] on a lone [`ReadAt`]. Each check panics, naming the
//! implementation and the promise broken, at the first difference.
//!
//! What is checked: whole values and size limits ([`Error::TooLarge`]),
//! missing keys (`Ok(None)` from every getter, `NotFound` from
//! [`Files::open`]), ranges inside, empty (at the start, at the end,
//! `Suffix(0)`), and past the end ([`Error::Io`] of kind
//! `UnexpectedEof`, the same typed error from every store), the batched
//! getters answering what the single ones do, listing (sorted, each name
//! once, a missing prefix empty), keys that would leave the store, and
//! the same answers from many threads at once.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::error::Error;
use crate::storage::contract::{ByteRange, Files, ReadAt, Store};

/// Key of the fixture's largest value: long enough that ranges in its
/// middle are not at either end.
pub const BIG: &str = "a/b/big";
/// Key of a ten-byte value (`0123456789`).
pub const SMALL: &str = "a/small";
/// Key of an empty value.
pub const EMPTY: &str = "a/empty";

/// The keys and values every implementation is checked with: nested
/// prefixes, an empty value, a value at the root.
pub fn fixture() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (BIG, (0..1000u32).map(|i| (i * 7 % 251) as u8).collect()),
        (SMALL, b"0123456789".to_vec()),
        (EMPTY, Vec::new()),
        ("top", b"top".to_vec()),
        ("dir/sub/leaf", b"leaf".to_vec()),
    ]
}

/// Write [`fixture`] under the directory `root`, one file per key.
pub fn write_fixture(root: &Path) -> io::Result<()> {
    for (key, value) in fixture() {
        let path = root.join(key);
        std::fs::create_dir_all(path.parent().expect("keys have a parent"))?;
        std::fs::write(path, value)?;
    }
    Ok(())
}

/// What an implementation cannot do, which the contract allows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// It cannot list (plain HTTP): `list_dir` must fail with
    /// `Unsupported`.
    pub no_listing: bool,
    /// Its backend cannot hold an empty value as the fixture writes it:
    /// the [`EMPTY`] key is neither written nor checked.
    pub no_empty_values: bool,
    /// A suffix range of an empty value may fail with any I/O error, not
    /// only `UnexpectedEof`: moto answers it with the whole (empty)
    /// object and a 200, which object_store refuses as a server that
    /// ignores ranges (S3 itself answers 416, which is `UnexpectedEof`).
    pub empty_suffix_any_io_error: bool,
    /// Its keys are computed over a format's container (block `i` of a
    /// file, chunk `(i, j)` of an HDF5 dataset), not names in a
    /// directory: there is nothing to list, and `list_dir` answers every
    /// prefix as the contract answers one with nothing under it (empty).
    /// [`check_values`] checks that; a store with directories has its
    /// listing checked by [`check_listing`] on the fixture or
    /// [`check_own_listing`] on its own keys.
    pub flat: bool,
}

/// Whether `e` is the contract's "range past the end": [`Error::Io`]
/// whose source is `UnexpectedEof`.
fn is_past_end(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == io::ErrorKind::UnexpectedEof)
}

/// The fixture's entries this implementation holds.
fn entries(limits: Limits) -> Vec<(&'static str, Vec<u8>)> {
    fixture()
        .into_iter()
        .filter(|(k, _)| !(limits.no_empty_values && *k == EMPTY))
        .collect()
}

/// Check every promise of [`Store`] on `store`, which holds [`fixture`]
/// (and nothing else under the prefixes `a` and `dir`). `name` says which
/// implementation, in the panic messages.
pub fn check_store(name: &str, store: &dyn Store, limits: Limits) {
    let entries = entries(limits);
    check_values(name, store, &entries, limits);
    check_listing(name, store, limits);
    // Keys that would leave the store are never read.
    for bad in ["../outside", "/etc/passwd", "a/../../outside"] {
        assert!(
            !matches!(store.get(bad, 1 << 20), Ok(Some(_))),
            "{name}: {bad:?} was read"
        );
    }
}

/// The promises of [`Store`] about values, for a store that holds
/// `entries` (at least two, the first not empty) whatever its keys are:
/// what [`check_store`] checks but listing and escaping keys. For the
/// stores a format builds over its own container (the blocks of a file,
/// the chunks of an HDF5 dataset), whose keys are theirs, not the
/// fixture's.
pub fn check_values(name: &str, store: &dyn Store, entries: &[(&str, Vec<u8>)], limits: Limits) {
    assert!(
        entries.len() >= 2 && !entries[0].1.is_empty(),
        "{name}: entries"
    );
    for (key, value) in entries {
        let len = value.len() as u64;
        // Whole values, within and beyond their limit.
        let got = store
            .get(key, len)
            .unwrap_or_else(|e| panic!("{name}: get {key}: {e}"));
        assert_eq!(got.as_deref(), Some(&value[..]), "{name}: get {key}");
        if len > 0 {
            let e = store
                .get(key, len - 1)
                .expect_err(&format!("{name}: {key} over its limit"));
            assert!(
                matches!(e, Error::TooLarge { size, limit, .. } if size == len && limit == len - 1),
                "{name}: {key} over its limit: {e:?}"
            );
        }
        assert!(
            store.describe(key).contains(key),
            "{name}: describe({key}) = {}",
            store.describe(key)
        );
        // Ranges: inside, empty at both ends, suffixes.
        let range = |r: ByteRange| store.get_range(key, r);
        let at = |offset, len| ByteRange::At { offset, len };
        let inside = [at(0, len), at(len / 3, len / 2), at(0, 0), at(len, 0)];
        for r in inside {
            let (s, e) = r.resolve(len).expect("inside");
            let got = range(r).unwrap_or_else(|e| panic!("{name}: {key} {r:?}: {e}"));
            assert_eq!(
                got.as_deref(),
                Some(&value[s as usize..e as usize]),
                "{name}: {key} {r:?}"
            );
        }
        for n in [0, len.min(3), len] {
            let got = range(ByteRange::Suffix(n))
                .unwrap_or_else(|e| panic!("{name}: {key} Suffix({n}): {e}"));
            assert_eq!(
                got.as_deref(),
                Some(&value[(len - n) as usize..]),
                "{name}: {key} Suffix({n})"
            );
        }
        // Past the end: the same typed error from every store.
        for r in [
            at(len.saturating_sub(2), 5),
            at(len + 1, 0),
            at(len + 10, 1),
            ByteRange::Suffix(len + 1),
        ] {
            match range(r) {
                Err(e) if is_past_end(&e) => {}
                Err(Error::Io { .. })
                    if limits.empty_suffix_any_io_error
                        && len == 0
                        && matches!(r, ByteRange::Suffix(_)) => {}
                other => panic!("{name}: {key} {r:?} past the end of {len} bytes: {other:?}"),
            }
        }
    }
    check_missing(name, store);
    check_batches(name, store, entries);
    check_concurrently(name, store, entries);
    if limits.flat {
        for dir in ["", entries[0].0, "a"] {
            let got = store.list_dir(dir);
            assert!(
                matches!(&got, Ok(v) if v.is_empty()),
                "{name}: a flat store lists {dir:?} as empty: {got:?}"
            );
        }
    }
}

/// The listing promises on a store's own keys (a hierarchy whose names
/// are not the fixture's, as an Icechunk snapshot's): under each of
/// `dirs` every name once, sorted; a name that is not a prefix is a key
/// with a value, one that is lists something; a missing prefix lists as
/// empty.
pub fn check_own_listing(name: &str, store: &dyn Store, dirs: &[&str]) {
    for dir in dirs {
        let listed = store
            .list_dir(dir)
            .unwrap_or_else(|e| panic!("{name}: list_dir({dir:?}): {e}"));
        assert!(!listed.is_empty(), "{name}: list_dir({dir:?}) is empty");
        let mut sorted = listed.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            listed, sorted,
            "{name}: list_dir({dir:?}) sorted, each once"
        );
        let slash = format!("{}/", dir.trim_end_matches('/'));
        assert_eq!(
            store.list_dir(&slash).ok(),
            Some(listed.clone()),
            "{name}: list_dir({slash:?})"
        );
        for (entry, is_dir) in listed {
            let key = match dir.trim_end_matches('/') {
                "" => entry.clone(),
                d => format!("{d}/{entry}"),
            };
            if is_dir {
                let under = store.list_dir(&key);
                assert!(
                    matches!(&under, Ok(v) if !v.is_empty()),
                    "{name}: the prefix {key:?} lists nothing: {under:?}"
                );
            } else {
                let got = store.get(&key, u64::MAX);
                assert!(
                    matches!(got, Ok(Some(_))),
                    "{name}: the listed {key:?} has no value: {got:?}"
                );
            }
        }
    }
    for missing in ["nowhere", "nowhere/at/all"] {
        assert_eq!(
            store.list_dir(missing).ok(),
            Some(Vec::new()),
            "{name}: a missing prefix"
        );
    }
}

/// A missing key: `Ok(None)` from every getter.
fn check_missing(name: &str, store: &dyn Store) {
    for key in ["missing", "a/missing", "nowhere/at/all"] {
        let what = |g: &str| format!("{name}: {g} of the missing {key}");
        assert!(matches!(store.get(key, 100), Ok(None)), "{}", what("get"));
        for r in [
            ByteRange::At { offset: 0, len: 4 },
            ByteRange::At { offset: 0, len: 0 },
            ByteRange::Suffix(0),
            ByteRange::Suffix(4),
        ] {
            let got = store.get_range(key, r);
            assert!(
                matches!(got, Ok(None)),
                "{}: {got:?}",
                what(&format!("{r:?}"))
            );
        }
        let got = store.get_ranges(&[(key.to_string(), vec![0..4, 2..2])]);
        assert!(
            matches!(got.as_slice(), [Ok(None)]),
            "{}: {got:?}",
            what("get_ranges")
        );
    }
}

/// `get_many`, `get_each` and `get_ranges` answer what `get` and
/// `get_range` do, one answer per request, a failure failing alone.
// A request to `get_ranges` is a list of ranges; some lists hold one.
#[allow(clippy::single_range_in_vec_init)]
fn check_batches(name: &str, store: &dyn Store, entries: &[(&str, Vec<u8>)]) {
    let mut keys: Vec<(String, u64)> = entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.len() as u64))
        .collect();
    keys.push(("missing".to_string(), 10));
    // One over its limit: fails alone.
    let (first, first_value) = (&entries[0].0, &entries[0].1);
    keys.push((first.to_string(), first_value.len() as u64 - 1));
    let single: Vec<String> = keys
        .iter()
        .map(|(k, limit)| format!("{:?}", store.get(k, *limit).map_err(|e| kind_of(&e))))
        .collect();
    let many: Vec<String> = store
        .get_many(&keys)
        .into_iter()
        .map(|got| format!("{:?}", got.map_err(|e| kind_of(&e))))
        .collect();
    assert_eq!(many, single, "{name}: get_many");
    let mut each = vec![None; keys.len()];
    store.get_each(&keys, &mut |i, got| {
        assert!(each[i].is_none(), "{name}: get_each answered {i} twice");
        each[i] = Some(format!("{:?}", got.map_err(|e| kind_of(&e))));
    });
    let each: Vec<String> = each
        .into_iter()
        .enumerate()
        .map(|(i, a)| a.unwrap_or_else(|| panic!("{name}: get_each never answered {i}")))
        .collect();
    assert_eq!(each, single, "{name}: get_each");

    let requests: Vec<(String, Vec<std::ops::Range<u64>>)> = entries
        .iter()
        .map(|(k, v)| {
            let len = v.len() as u64;
            (k.to_string(), vec![0..len, len / 2..len, 0..0, len..len])
        })
        .chain([("missing".to_string(), vec![0..1])])
        .collect();
    let got = store.get_ranges(&requests);
    assert_eq!(got.len(), requests.len(), "{name}: get_ranges answers");
    for ((key, ranges), got) in requests.iter().zip(got) {
        let want: Option<Vec<Vec<u8>>> = entries.iter().find(|(k, _)| k == key).map(|(_, v)| {
            ranges
                .iter()
                .map(|r| v[r.start as usize..r.end as usize].to_vec())
                .collect()
        });
        let got = got.unwrap_or_else(|e| panic!("{name}: get_ranges {key}: {e}"));
        assert_eq!(got, want, "{name}: get_ranges {key} {ranges:?}");
    }
    // A range past the end fails that request alone.
    let (second, second_value) = (&entries[1].0, &entries[1].1);
    let len = first_value.len() as u64;
    let got = store.get_ranges(&[
        (first.to_string(), vec![len / 2..len + 10]),
        (second.to_string(), vec![0..second_value.len() as u64]),
    ]);
    assert!(
        matches!(&got[0], Err(e) if is_past_end(e)),
        "{name}: get_ranges past the end: {:?}",
        got[0]
    );
    assert_eq!(
        got[1].as_ref().ok().cloned().flatten(),
        Some(vec![second_value.clone()]),
        "{name}: get_ranges beside a failure"
    );
}

/// A comparable summary of an error: its variant and I/O kind.
fn kind_of(e: &Error) -> String {
    match e {
        Error::Io { source, .. } => format!("Io({:?})", source.kind()),
        Error::TooLarge { size, limit, .. } => format!("TooLarge({size}, {limit})"),
        other => format!("{other:?}"),
    }
}

/// Listing: each name directly under the prefix once, sorted, with
/// whether it is a prefix; a missing prefix lists as empty.
fn check_listing(name: &str, store: &dyn Store, limits: Limits) {
    if limits.no_listing {
        let e = store
            .list_dir("")
            .expect_err(&format!("{name}: cannot list"));
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == io::ErrorKind::Unsupported),
            "{name}: a store that cannot list says so: {e:?}"
        );
        return;
    }
    let list = |dir: &str| {
        store
            .list_dir(dir)
            .unwrap_or_else(|e| panic!("{name}: list_dir({dir:?}): {e}"))
    };
    let owned = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
        v.iter().map(|(n, d)| (n.to_string(), *d)).collect()
    };
    let mut a = vec![("b", true), ("small", false)];
    if !limits.no_empty_values {
        a.insert(1, ("empty", false));
    }
    assert_eq!(list("a"), owned(&a), "{name}: list_dir(a)");
    assert_eq!(list("a/"), owned(&a), "{name}: list_dir(a/)");
    assert_eq!(
        list("a/b"),
        owned(&[("big", false)]),
        "{name}: list_dir(a/b)"
    );
    assert_eq!(
        list("dir"),
        owned(&[("sub", true)]),
        "{name}: list_dir(dir)"
    );
    let root = list("");
    for want in [("a", true), ("dir", true), ("top", false)] {
        assert!(
            root.contains(&(want.0.to_string(), want.1)),
            "{name}: list_dir(\"\") = {root:?} lacks {want:?}"
        );
    }
    let mut sorted = root.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(root, sorted, "{name}: list_dir(\"\") sorted, each once");
    assert_eq!(list("nowhere"), Vec::new(), "{name}: a missing prefix");
    assert_eq!(list("a/nowhere/x"), Vec::new(), "{name}: a missing prefix");
}

/// Many threads reading at once get what one thread gets.
fn check_concurrently(name: &str, store: &dyn Store, entries: &[(&str, Vec<u8>)]) {
    const THREADS: usize = 8;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                for round in 0..4 {
                    for (key, value) in entries {
                        let got = store.get(key, u64::MAX);
                        assert_eq!(
                            got.ok().flatten().as_deref(),
                            Some(&value[..]),
                            "{name}: thread {t} round {round} get {key}"
                        );
                        let len = value.len() as u64;
                        let off = (t as u64 + round) % (len + 1);
                        let r = ByteRange::At {
                            offset: off,
                            len: (len - off).min(7),
                        };
                        let got = store.get_range(key, r);
                        let (a, b) = r.resolve(len).expect("inside");
                        assert_eq!(
                            got.ok().flatten().as_deref(),
                            Some(&value[a as usize..b as usize]),
                            "{name}: thread {t} get_range {key} {r:?}"
                        );
                    }
                }
            });
        }
    });
}

/// Check every promise of [`ReadAt`] on `file`, whose bytes are `value`.
pub fn check_read_at(name: &str, file: &dyn ReadAt, value: &[u8]) {
    let len = value.len() as u64;
    assert_eq!(file.size().ok(), Some(len), "{name}: size");
    let read = |offset: u64, n: usize| {
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, offset).map(|()| buf)
    };
    for (offset, n) in [
        (0, value.len()),
        (len / 3, value.len() / 2),
        (0, 0),
        (len, 0),
    ] {
        let got = read(offset, n).unwrap_or_else(|e| panic!("{name}: {n} at {offset}: {e}"));
        assert_eq!(
            got,
            value[offset as usize..offset as usize + n],
            "{name}: {n} at {offset}"
        );
    }
    for (offset, n) in [(len.saturating_sub(2), 5), (len, 1), (len + 10, 1)] {
        match read(offset, n) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {}
            other => panic!("{name}: {n} at {offset}, past the end of {len}: {other:?}"),
        }
    }
    // read_many fills what read_exact_at does, and fails as it does.
    let mut a = vec![0u8; value.len().min(4)];
    let mut b = vec![0u8; value.len() / 2];
    let mut empty = Vec::new();
    let half = len - b.len() as u64;
    file.read_many(&mut [(0, &mut a), (half, &mut b), (len, &mut empty)])
        .unwrap_or_else(|e| panic!("{name}: read_many: {e}"));
    assert_eq!(a, value[..a.len()], "{name}: read_many");
    assert_eq!(b, value[half as usize..], "{name}: read_many");
    let mut over = vec![0u8; 5];
    let e = file
        .read_many(&mut [(0, &mut a), (len.saturating_sub(2), &mut over)])
        .expect_err(&format!("{name}: read_many past the end"));
    assert_eq!(
        e.kind(),
        io::ErrorKind::UnexpectedEof,
        "{name}: read_many: {e}"
    );
    // Many threads at once.
    std::thread::scope(|s| {
        for t in 0..8u64 {
            s.spawn(move || {
                for round in 0..8u64 {
                    let offset = (t * 13 + round * 5) % (len + 1);
                    let n = ((len - offset) as usize).min(9);
                    let got = read(offset, n).unwrap_or_else(|e| panic!("{name}: thread {t}: {e}"));
                    assert_eq!(
                        got,
                        value[offset as usize..offset as usize + n],
                        "{name}: thread {t}"
                    );
                }
            });
        }
    });
}

/// Check every promise of [`Files`] on `files`, for which [`fixture`] is
/// under `root` (a directory, or a URL as a path): the files open and
/// read as [`check_read_at`] wants, a missing one is `NotFound`, and
/// `files.store(root)` passes [`check_store`].
pub fn check_files(name: &str, files: &dyn Files, root: &Path, limits: Limits) {
    for (key, value) in entries(limits) {
        let path = root.join(key);
        let file = files
            .open(&path)
            .unwrap_or_else(|e| panic!("{name}: open {}: {e}", path.display()));
        check_read_at(&format!("{name}: {key}"), file.as_ref(), &value);
    }
    for missing in ["missing", "a/missing", "nowhere/at/all"] {
        let path = root.join(missing);
        match files.open(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => panic!("{name}: open of the missing {missing}: {other:?}"),
        }
    }
    let store: Arc<dyn Store> = files.store(root);
    check_store(&format!("{name}: store"), store.as_ref(), limits);
}

/// Every local implementation in the crate runs the conformance test.
/// (Elsewhere: the remote ones in `tests/it/remote.rs`,
/// `storage_conformance_*`; the kerchunk store in `tests/it/kerchunk.rs`;
/// `IcechunkStore` in `tests/it/icechunk.rs`; `storage::ranged`'s
/// `RangedStore` in its module, and over each format's locator in
/// `formats::netcdf3::blocks`, `formats::packed::reader` and
/// `formats::hdf5::array`.)
#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::local::{FsStore, OsFiles, confine::Roots, descriptors::CachedFile};
    use crate::storage::read_cache::ReadCache;
    use crate::storage::testing::faults::{FaultPlan, FaultyFiles, FaultyStore};
    use crate::storage::testing::{CountingStore, InMemory, MemoryStore};

    fn on_disk() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        write_fixture(tmp.path()).unwrap();
        tmp
    }

    fn in_memory() -> MemoryStore {
        let m = MemoryStore::new();
        for (k, v) in fixture() {
            m.set(k, v);
        }
        m
    }

    #[test]
    fn fs_store_conforms() {
        let tmp = on_disk();
        check_store("FsStore", &FsStore::new(tmp.path()), Limits::default());
        let roots = Arc::new(Roots::new([tmp.path().to_path_buf()]));
        let confined = FsStore::confined(tmp.path(), roots);
        check_store("FsStore confined", &confined, Limits::default());
        let shared: Arc<FsStore> = Arc::new(FsStore::new(tmp.path()));
        check_store("Arc<FsStore>", &shared, Limits::default());
    }

    #[test]
    fn memory_and_counting_stores_conform() {
        check_store("MemoryStore", &in_memory(), Limits::default());
        let counting = CountingStore::new(in_memory());
        check_store("CountingStore", &counting, Limits::default());
        assert!(counting.gets() > 0);
    }

    #[test]
    fn faulty_store_with_faults_off_conforms() {
        let plan = FaultPlan::new();
        let store = FaultyStore::new(in_memory(), plan.clone());
        check_store("FaultyStore", &store, Limits::default());
        assert!(plan.reads() > 0, "the reads went through the plan");
        assert_eq!(plan.total_fired(), 0);
    }

    #[test]
    fn os_files_conform() {
        let tmp = on_disk();
        let root = tmp.path();
        check_files("OsFiles", &OsFiles::unconfined(), root, Limits::default());
        let confined = OsFiles::confined(Roots::new([root.to_path_buf()]));
        check_files("OsFiles confined", &confined, root, Limits::default());
        let plan = FaultPlan::new();
        let faulty = FaultyFiles::new(crate::storage::local::os(), plan.clone());
        check_files("FaultyFiles", &faulty, root, Limits::default());
        assert!(plan.reads() > 0);
        assert_eq!(plan.total_fired(), 0);
    }

    #[test]
    fn read_at_implementations_conform() {
        let tmp = on_disk();
        let path = tmp.path().join(BIG);
        let value = std::fs::read(&path).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        check_read_at("std::fs::File", &file, &value);
        check_read_at(
            "CachedFile",
            &CachedFile::open(&path, None).unwrap(),
            &value,
        );
        check_read_at("InMemory", &InMemory(value.clone()), &value);
        let cached = ReadCache::new(Arc::new(InMemory(value.clone()))).unwrap();
        check_read_at("ReadCache", &cached, &value);
        let empty = tmp.path().join(EMPTY);
        check_read_at(
            "std::fs::File, empty",
            &std::fs::File::open(&empty).unwrap(),
            &[],
        );
        check_read_at("InMemory, empty", &InMemory(Vec::new()), &[]);
    }
}
