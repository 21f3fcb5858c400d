//! Icechunk repositories through slabfs, against what zarr-python reads
//! through icechunk-python (tests/fixtures/icechunk/generate.py): the
//! committed spec-1 repository of native, inline and missing chunks, and a
//! repository of virtual references into netCDF-4 and netCDF-3 files
//! (written by netCDF4-python, referenced by VirtualiZarr) generated into a
//! temporary directory (its references are absolute `file://` URLs).
//! Every array byte for byte through the library, whole and in
//! pseudo-random ranges, and through a real mount; virtual chunks outside
//! slabfs's roots or whose file changed since the reference was written
//! fail with a message naming the file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};
use slabfs::engine::cache::ChunkCache;
use slabfs::formats::dataset::{self, Dataset};

use crate::common;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/icechunk")
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(1 << 20))
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The arrays zarr-python read at `reference`, by path without the `/`.
fn expected(doc: &Value, reference: &str) -> Vec<(String, String)> {
    doc["read"][reference]
        .as_object()
        .unwrap_or_else(|| panic!("{reference} not in expected.json"))
        .iter()
        .map(|(p, a)| {
            let sha = a["sha256"].as_str().unwrap().to_string();
            (p.trim_start_matches('/').to_string(), sha)
        })
        .collect()
}

/// Every array of `ds` read whole equals zarr-python's (by sha256), and
/// `ds` holds no other array.
fn check_all(ds: &Dataset, want: &[(String, String)]) {
    let mut got: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
    got.sort();
    let mut names: Vec<&str> = want.iter().map(|(p, _)| p.as_str()).collect();
    names.sort();
    assert_eq!(got, names, "the arrays zarr-python lists");
    for (path, sha) in want {
        let e = ds.entries.iter().find(|e| e.path == *path).unwrap();
        let a = e.array.as_ref();
        let size = a.meta().num_elements() * a.meta().item_size() as u64;
        let mut whole = vec![0u8; size as usize];
        slabfs::engine::read::read_at(a, 0, &mut whole, slabfs::dtype::Endian::Little)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(sha256(&whole), *sha, "{path}");
        common::check_ranges(a, &whole, 0x1ce, 20).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}

/// The test venv's Python (icechunk-python, zarr-python, VirtualiZarr,
/// netCDF4-python).
use common::run_python as python;

/// The first `len` bytes of the array `path` of `ds`, little-endian.
fn read_head(ds: &Dataset, path: &str, len: usize) -> slabfs::Result<Vec<u8>> {
    let e = ds.entries.iter().find(|e| e.path == path).unwrap();
    let mut buf = vec![0u8; len];
    slabfs::engine::read::read_at(e.array.as_ref(), 0, &mut buf, slabfs::dtype::Endian::Little)
        .map(|_| buf)
}

/// Every version `expected.json` of `dir` lists (four) read through `--ref`
/// as its writer read it.
fn check_every_version(dir: &Path, repo: &Path) -> Value {
    check_every_version_in(dir, repo, None)
}

/// [`check_every_version`] of `repo` (a URL when `network` reaches it).
fn check_every_version_in(
    dir: &Path,
    repo: &Path,
    network: Option<Arc<dyn slabfs::storage::Network>>,
) -> Value {
    let expected_doc = doc(dir);
    let refs: Vec<String> = expected_doc["read"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(refs.len(), 4, "{refs:?}");
    for r in &refs {
        let ds = dataset::Opener::new(cache())
            .network(network.clone())
            .reference(Some(r))
            .open(repo)
            .unwrap_or_else(|e| panic!("{r}: {e}"));
        check_all(&ds, &expected(&expected_doc, r));
    }
    expected_doc
}

fn doc(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap()
}

/// The committed repository written by icechunk-python 1.x (spec 1) at
/// the tip of `main`: native chunks (zstd, blosc), inline ones, chunks
/// never written (the fill value), an array grown twice, nested groups.
#[test]
fn a_native_repository_reads_as_zarr_python_reads_it() {
    let dir = fixtures();
    let expected_doc = doc(&dir);
    assert_eq!(expected_doc["spec_version"], 1);
    let ds = dataset::Opener::new(cache())
        .open(&dir.join("native"))
        .unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    check_all(&ds, &expected(&expected_doc, "main"));
    // The root group's and a nested group's attributes.
    assert_eq!(
        ds.directories[""].attributes["title"],
        "slabfs icechunk fixture"
    );
    assert_eq!(ds.directories["nested/deeper"].attributes["level"], 2);
}

/// A repository of virtual references, written now into `dir`.
fn virtual_repository(dir: &Path) -> Value {
    let generate = fixtures().join("generate.py");
    python(&[generate.as_os_str(), "virtual".as_ref(), dir.as_os_str()]);
    doc(dir)
}

/// Virtual references into netCDF-4 (chunked with shuffle and zlib, and
/// contiguous) and netCDF-3 (records) files: read where slabfs's roots
/// admit the files (`--allow-outside`), refused otherwise with a message
/// naming the file; a reference whose file changed since it was written
/// (its last-modified checksum) is refused, never read.
#[test]
fn virtual_references_read_where_admitted_and_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let expected_doc = virtual_repository(&dir);
    let repo = dir.join("virtual");
    let src = dir.join("src");
    let ds = dataset::Opener::new(cache())
        .allow_outside(std::slice::from_ref(&src))
        .open(&repo)
        .unwrap();
    // `stale` is the reference that must fail: not in zarr-python's list.
    let want = expected(&expected_doc, "main");
    let mut with_stale = want.clone();
    with_stale.push(("stale".to_string(), String::new()));
    let names = |ds: &Dataset| {
        let mut v: Vec<String> = ds.entries.iter().map(|e| e.path.clone()).collect();
        v.sort();
        v
    };
    let mut all: Vec<String> = with_stale.iter().map(|(p, _)| p.clone()).collect();
    all.sort();
    assert_eq!(names(&ds), all);
    let plain = Dataset {
        entries: ds
            .entries
            .iter()
            .filter(|e| e.path != "stale")
            .cloned()
            .collect(),
        ..Dataset::default()
    };
    check_all(&plain, &want);
    let read = |ds: &Dataset, path: &str| read_head(ds, path, 16);
    let stale = read(&ds, "stale").unwrap_err().to_string();
    assert!(stale.contains("sample4.nc"), "{stale}");
    assert!(
        stale.contains("changed since the reference was written"),
        "{stale}"
    );
    // Without --allow-outside the files are outside the roots.
    let confined = dataset::Opener::new(cache()).open(&repo).unwrap();
    let outside = read(&confined, "nc4/tas").unwrap_err().to_string();
    assert!(outside.contains("sample4.nc"), "{outside}");
    assert!(
        outside.contains("outside the allowed locations"),
        "{outside}"
    );
    // The file rewritten after the references were written: its ETag
    // (inode, time, size) no longer matches.
    let nc4 = src.join("sample4.nc");
    let bytes = std::fs::read(&nc4).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(&nc4, &bytes).unwrap();
    let fresh = dataset::Opener::new(cache())
        .allow_outside(std::slice::from_ref(&src))
        .open(&repo)
        .unwrap();
    let etag = read(&fresh, "etag_elev").unwrap_err().to_string();
    assert!(etag.contains("ETag"), "{etag}");
}

/// Descriptors of this process open on `file`.
fn descriptors_on(file: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == file))
        .count()
}

/// The local file of virtual chunks is kept open between chunks (one
/// descriptor for all of its chunks, none once the repository is
/// closed), and a file kept open is read only while its path still names
/// it and it is the version the references recorded: a symlink leading
/// outside the roots or a FIFO swapped in for it is refused (at once:
/// nothing waits on the FIFO), the file put back reads again, and a
/// rewrite in place fails the reads, never serves other bytes.
#[test]
fn virtual_files_stay_open_and_are_checked_on_every_read() {
    use slabfs::formats::icechunk::IcechunkStore;
    use slabfs::storage::Store;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    virtual_repository(&dir);
    let repo = dir.join("virtual");
    let src = dir.join("src");
    let nc4 = src.join("sample4.nc");
    let opts = slabfs::formats::Options::new(
        vec![repo.clone(), src.clone()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let store = IcechunkStore::open(&repo, None, &opts).unwrap();
    let get = |key: &str| store.get(key, u64::MAX).map(|v| v.expect(key));
    // tas (6, 18, 24) in chunks (2, 9, 12): 12 chunks of sample4.nc.
    let tas: Vec<String> = (0..3)
        .flat_map(|t| {
            (0..2).flat_map(move |y| (0..2).map(move |x| format!("nc4/tas/c/{t}/{y}/{x}")))
        })
        .collect();
    let first: Vec<Vec<u8>> = tas.iter().map(|k| get(k).unwrap()).collect();
    let elev = get("etag_elev/c/0/0").unwrap();
    assert_eq!(descriptors_on(&nc4), 1, "one descriptor for every chunk");
    // A symlink to a copy outside the roots swapped in: refused, though
    // the file kept open is still the right one.
    let outside = dir.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::copy(&nc4, outside.join("sample4.nc")).unwrap();
    let aside = src.join("sample4.aside");
    std::fs::rename(&nc4, &aside).unwrap();
    std::os::unix::fs::symlink(outside.join("sample4.nc"), &nc4).unwrap();
    let e = get(&tas[0]).unwrap_err().to_string();
    assert!(e.contains("outside the allowed locations"), "{e}");
    // A FIFO: refused, and the read returns.
    std::fs::remove_file(&nc4).unwrap();
    let fifo = std::ffi::CString::new(nc4.to_str().unwrap()).unwrap();
    // SAFETY: `fifo` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let e = get(&tas[0]).unwrap_err().to_string();
    assert!(e.contains("sample4.nc"), "{e}");
    // The file put back: the same bytes.
    std::fs::remove_file(&nc4).unwrap();
    std::fs::rename(&aside, &nc4).unwrap();
    for (key, want) in tas.iter().zip(&first) {
        assert_eq!(&get(key).unwrap(), want, "{key}");
    }
    assert_eq!(get("etag_elev/c/0/0").unwrap(), elev);
    assert_eq!(descriptors_on(&nc4), 1);
    // Rewritten in place (the same inode, kept open): its modification
    // time and ETag no longer match the references'.
    // (A reference of `tas` records its file's time in whole seconds: a
    // rewrite within the same second cannot be told from it, so the
    // rewrite is dated a few seconds on.)
    let bytes = std::fs::read(&nc4).unwrap();
    std::fs::write(&nc4, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&nc4)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    let e = get("etag_elev/c/0/0").unwrap_err().to_string();
    assert!(e.contains("ETag"), "{e}");
    let e = get(&tas[0]).unwrap_err().to_string();
    assert!(e.contains("changed since the reference was written"), "{e}");
    drop(store);
    assert_eq!(descriptors_on(&nc4), 0, "closed with the repository");
}

/// A real mount of the committed repository, at main and at `--ref dev`:
/// every array's bytes equal zarr-python's.
#[test]
fn a_mounted_repository_serves_the_same_bytes() {
    let dir = fixtures();
    let want = expected(&doc(&dir), "main");
    let m = common::mount::Mount::start(&dir.join("native"), &[]);
    for (path, sha) in &want {
        let bytes = std::fs::read(m.path(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(sha256(&bytes), *sha, "{path}");
    }
    assert!(!m.path("devonly").exists(), "a group of branch dev only");
    // The sidecar names the snapshot served.
    let main_tip = doc(&dir)["branches"]["main"].as_str().unwrap().to_string();
    let sidecar = std::fs::read_to_string(m.path("temp.json")).unwrap();
    assert!(
        sidecar.contains(&format!("Icechunk snapshot {main_tip}")),
        "{sidecar}"
    );
    m.stop();
    // Another branch, by `--ref`.
    let want = expected(&doc(&dir), "dev");
    let m = common::mount::Mount::start(&dir.join("native"), &["--ref", "dev"]);
    for (path, sha) in &want {
        let bytes = std::fs::read(m.path(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(sha256(&bytes), *sha, "{path}");
    }
    assert!(m.path("devonly/x").exists());
    m.stop();
}

/// `--ref`: every version zarr-python read (a branch, another branch that
/// diverged, a tag, a snapshot id) through the library, one of them
/// through `slabfs cat --ref`; `--ref` of no such name, or of a SOURCE
/// that is no repository, is an error naming it.
#[test]
fn every_version_reads_as_zarr_python_reads_it() {
    let dir = fixtures();
    let repo = dir.join("native");
    let expected_doc = check_every_version(&dir, &repo);
    // The CLI: the tag's `series` (1,000 values there, 1,300 at main).
    let (path, sha) = expected(&expected_doc, "v1")
        .into_iter()
        .find(|(p, _)| p == "series")
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args(["cat", "--ref", "v1"])
        .arg(&repo)
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), 4000);
    assert_eq!(sha256(&out.stdout), sha);
    let err = dataset::Opener::new(cache())
        .reference(Some("no-such-ref"))
        .open(&repo)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no-such-ref") && err.contains("native"),
        "{err}"
    );
    let plain = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr");
    let err = dataset::Opener::new(cache())
        .reference(Some("main"))
        .open(&plain)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("no local Icechunk repository"), "{err}");
}

/// The spec-2 format (one `repo` object instead of `refs/`), written by the
/// icechunk crate (tests/fixtures/icechunk/gen-spec2: icechunk-python 2.x,
/// which writes it, needs Python 3.12): every version equals the values
/// its generator wrote (and read back through icechunk's own store).
#[test]
fn a_spec2_repository_reads_as_written() {
    let dir = fixtures().join("spec2");
    assert_eq!(doc(&dir)["spec_version"], 2);
    let repo = dir.join("repo");
    assert!(repo.join("repo").is_file() && !repo.join("refs").exists());
    let expected_doc = check_every_version(&dir, &repo);
    // Without --ref: main.
    let ds = dataset::Opener::new(cache()).open(&repo).unwrap();
    check_all(&ds, &expected(&expected_doc, "main"));
}

/// Broken repositories fail with messages naming them, never panic: every
/// snapshot truncated (the repository does not open: an error naming its
/// directory), a native chunk object missing (that chunk's reads fail,
/// naming the object; the other arrays read).
#[test]
fn broken_repositories_fail_naming_what_is_broken() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("broken");
    common::mount::copy_tree(&fixtures().join("native"), &repo);
    let want = expected(&doc(&fixtures()), "main");
    // A chunk object gone.
    let ds = dataset::Opener::new(cache()).open(&repo).unwrap();
    let chunks: Vec<PathBuf> = std::fs::read_dir(repo.join("chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for c in &chunks {
        std::fs::remove_file(c).unwrap();
    }
    let err = read_head(&ds, "big", 64).unwrap_err().to_string();
    assert!(err.contains("chunks/") && err.contains("missing"), "{err}");
    // `tiny` is inline: it still reads.
    let (_, tiny_sha) = want.iter().find(|(p, _)| p == "tiny").unwrap();
    assert_eq!(sha256(&read_head(&ds, "tiny", 40).unwrap()), *tiny_sha);
    // Every snapshot truncated: no open, an error naming the repository.
    for s in std::fs::read_dir(repo.join("snapshots")).unwrap() {
        let p = s.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    }
    let err = dataset::Opener::new(cache())
        .open(&repo)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("broken") && err.contains("Icechunk"), "{err}");
}

/// A repository inside a directory of datasets is one of them (a
/// directory, opened when used) at the tip of `main`.
#[test]
fn a_repository_in_an_archive_is_a_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    common::mount::copy_tree(&fixtures().join("native"), &root.join("runs/repo"));
    let want = expected(&doc(&fixtures()), "main");
    let m = common::mount::Mount::start(&root, &[]);
    let names: Vec<String> = std::fs::read_dir(m.path("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["repo"]);
    for (path, sha) in &want {
        let bytes = std::fs::read(m.path(&format!("runs/repo/{path}")))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(sha256(&bytes), *sha, "{path}");
    }
    m.stop();
}

/// A new commit on the branch a mount follows shows without a remount
/// (icechunk-python appends to `series` and commits); a mount of a tag
/// does not change.
#[test]
fn a_new_commit_shows_in_a_mount_of_its_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().canonicalize().unwrap().join("repo");
    common::mount::copy_tree(&fixtures().join("native"), &repo);
    let main = common::mount::Mount::start(&repo, &["--refresh", "1"]);
    let tag = common::mount::Mount::start(&repo, &["--refresh", "1", "--ref", "v1"]);
    let len = |m: &common::mount::Mount| std::fs::metadata(m.path("series")).unwrap().len();
    assert_eq!((len(&main), len(&tag)), (1300 * 4, 1000 * 4));
    let script = format!(
        "import icechunk as ic, zarr, numpy as np\n\
         repo = ic.Repository.open(ic.local_filesystem_storage({:?}))\n\
         s = repo.writable_session('main')\n\
         g = zarr.open_group(store=s.store)\n\
         g['series'].append(np.full(100, 7.0, dtype='float32'))\n\
         s.commit('grow to 1400')\n",
        repo.display().to_string()
    );
    python(&["-c".as_ref(), script.as_ref()]);
    let commit = std::time::Duration::from_secs(20);
    crate::mount_live::wait_for(&main, "the commit", commit, || len(&main) == 1400 * 4);
    let bytes = std::fs::read(main.path("series")).unwrap();
    assert!(
        bytes[1300 * 4..]
            .chunks(4)
            .all(|c| c == 7.0f32.to_le_bytes())
    );
    // Two more passes: the tag's mount is as it was.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(len(&tag), 1000 * 4);
    main.stop();
    tag.stop();
}

/// Review of issue 27's first part: what a repository holds cannot reach
/// outside the roots or past a caller's limit, and only a repository is
/// taken for one.
#[test]
fn a_repository_is_confined_and_recognised_by_its_signature() {
    use slabfs::formats::icechunk::IcechunkStore;
    use slabfs::storage::Store;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    common::mount::copy_tree(&fixtures().join("native"), &repo);
    let opts = slabfs::formats::Options::new(
        vec![repo.clone()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    // A caller's limit holds before anything is read.
    let store = IcechunkStore::open(&repo, None, &opts).unwrap();
    let err = store.get("big/c/0/0", 100).unwrap_err();
    assert!(
        matches!(err, slabfs::error::Error::TooLarge { .. }),
        "{err}"
    );
    assert_eq!(
        store.get("big/c/0/0", 1 << 20).unwrap().unwrap().len(),
        4096
    );
    // A chunk object replaced by a symlink leading outside the roots is
    // refused, never read.
    let secret = root.join("secret");
    std::fs::write(&secret, vec![0x5au8; 4096]).unwrap();
    for e in std::fs::read_dir(repo.join("chunks")).unwrap() {
        let p = e.unwrap().path();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&secret, &p).unwrap();
    }
    let ds = dataset::Opener::new(cache()).open(&repo).unwrap();
    let r = read_head(&ds, "big", 4096);
    assert!(r.is_err(), "read through a symlink outside the roots");
    // Only a repository is one: a directory with `refs/` and `snapshots/`
    // (here holding a Zarr store) is a directory of datasets.
    let plain = root.join("plain");
    std::fs::create_dir_all(plain.join("refs")).unwrap();
    common::mount::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr/v3/blosc.zarr"),
        &plain.join("snapshots/t.zarr"),
    );
    let opener = dataset::Opener::new(cache());
    assert!(!opener.is_dataset_dir(&plain));
    assert!(opener.is_dataset_dir(&repo));
    let names: Vec<String> = opener
        .open(&plain)
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("snapshots/t.zarr")),
        "{names:?}"
    );
    assert!(!names.is_empty());
}

/// Every version in one mount (`--all-refs`): `branches/` and `tags/`
/// list the repository's refs, each a directory of that version's arrays
/// as zarr-python reads them; `snapshots/ID` is found by its id (never
/// listed), a made-up id is not; a commit shows under its branch and not
/// under the tag, a new branch appears; `ls` and `cat` take the flag too.
#[test]
fn every_version_in_one_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().canonicalize().unwrap().join("repo");
    common::mount::copy_tree(&fixtures().join("native"), &repo);
    let expected_doc = doc(&fixtures());
    let m = common::mount::Mount::start(&repo, &["--all-refs", "--refresh", "1"]);
    let names = |rel: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(m.path(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(""), [".slabfs", "branches", "snapshots", "tags"]);
    assert_eq!(names("branches"), ["dev", "main"]);
    assert_eq!(names("tags"), ["v1"]);
    assert!(names("snapshots").is_empty());
    let c1 = expected_doc["snapshots"]["c1"]
        .as_str()
        .unwrap()
        .to_string();
    for (dir, version) in [
        ("branches/main".to_string(), "main"),
        ("branches/dev".to_string(), "dev"),
        ("tags/v1".to_string(), "v1"),
        (format!("snapshots/{c1}"), c1.as_str()),
    ] {
        for (p, sha) in expected(&expected_doc, version) {
            let bytes = std::fs::read(m.path(&format!("{dir}/{p}"))).unwrap();
            assert_eq!(sha256(&bytes), sha, "{dir}/{p}");
        }
    }
    assert!(!m.path("snapshots/AAAAAAAAAAAAAAAAAAAA").exists());
    assert!(!m.path("tags/main").exists());
    let script = format!(
        "import icechunk as ic, zarr, numpy as np\n\
         repo = ic.Repository.open(ic.local_filesystem_storage({:?}))\n\
         s = repo.writable_session('main')\n\
         zarr.open_group(store=s.store)['series'].append(np.full(100, 7.0, dtype='float32'))\n\
         s.commit('grow to 1400')\n\
         repo.create_branch('new', snapshot_id=repo.lookup_branch('main'))\n",
        repo.display().to_string()
    );
    python(&["-c".as_ref(), script.as_ref()]);
    let len = |p: &str| std::fs::metadata(m.path(p)).unwrap().len();
    let seen =
        || len("branches/main/series") == 1400 * 4 && names("branches") == ["dev", "main", "new"];
    crate::mount_live::wait_for(
        &m,
        "the commit and the new branch",
        std::time::Duration::from_secs(30),
        seen,
    );
    assert_eq!(len("tags/v1/series"), 1000 * 4);
    assert_eq!(len("branches/new/series"), 1400 * 4);
    m.stop();
    // The CLI.
    let slabfs = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let repo_arg = repo.to_str().unwrap();
    let listed = String::from_utf8(slabfs(&["ls", "--all-refs", repo_arg])).unwrap();
    assert!(listed.contains("branches/dev/series\t"), "{listed}");
    assert!(listed.contains("tags/v1/series\t"), "{listed}");
    let (_, sha) = expected(&expected_doc, "v1")
        .into_iter()
        .find(|(p, _)| p == "series")
        .unwrap();
    let bytes = slabfs(&["cat", "--all-refs", repo_arg, "tags/v1/series"]);
    assert_eq!(sha256(&bytes), sha);
}

/// The repository's own objects (refs, snapshots, manifests) are read
/// through slabfs's confined store, like its chunks: a FIFO planted as the
/// branch's ref fails the open at once (it used to wait on the FIFO for
/// ever), a snapshot replaced by a symlink leading outside the roots is
/// refused, never read.
#[test]
fn a_repository_s_metadata_is_read_confined() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    common::mount::copy_tree(&fixtures().join("native"), &repo);
    let opens = |repo: &Path| {
        let (tx, rx) = std::sync::mpsc::channel();
        let repo = repo.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(
                dataset::Opener::new(cache())
                    .open(&repo)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            );
        });
        rx.recv_timeout(std::time::Duration::from_secs(20))
            .expect("the open returns (it waited on a FIFO)")
    };
    let head = repo.join("refs/branch.main/ref.json");
    let saved = std::fs::read(&head).unwrap();
    std::fs::remove_file(&head).unwrap();
    let fifo = std::ffi::CString::new(head.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let err = opens(&repo).unwrap_err();
    assert!(err.contains("refs/branch.main/ref.json"), "{err}");
    std::fs::remove_file(&head).unwrap();
    std::fs::write(&head, saved).unwrap();
    assert!(opens(&repo).is_ok());
    // A tag's ref that cannot be read is that error, not "no such tag".
    let tag = repo.join("refs/tag.v1/ref.json");
    std::fs::rename(&tag, root.join("tag-ref.json")).unwrap();
    std::os::unix::fs::symlink(root.join("tag-ref.json"), &tag).unwrap();
    let err = dataset::Opener::new(cache())
        .reference(Some("v1"))
        .open(&repo)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("refs/tag.v1/ref.json") && err.contains("outside"),
        "{err}"
    );
    assert!(
        !err.contains("no branch"),
        "a failed read is no missing tag: {err}"
    );
    std::fs::remove_file(&tag).unwrap();
    std::fs::rename(root.join("tag-ref.json"), &tag).unwrap();
    // Every snapshot a symlink to a copy outside the roots.
    let outside = root.join("outside");
    std::fs::create_dir(&outside).unwrap();
    for e in std::fs::read_dir(repo.join("snapshots")).unwrap() {
        let p = e.unwrap().path();
        let copy = outside.join(p.file_name().unwrap());
        std::fs::rename(&p, &copy).unwrap();
        std::os::unix::fs::symlink(&copy, &p).unwrap();
    }
    let err = opens(&repo).unwrap_err();
    assert!(
        err.contains("snapshots/") && err.contains("outside"),
        "{err}"
    );
    assert!(!err.contains("context:"), "the crate's span trace: {err}");
}

/// A repository whose config names virtual chunk containers of every store
/// kind icechunk-python writes (local, S3, GCS, Azure, HTTP) opens: a kind
/// the icechunk crate was built without fails its config's parsing (one
/// with a GCS container did not open).
#[test]
fn containers_of_every_store_kind_parse() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let script = format!(
        "import icechunk as ic, zarr\n\
         cfg = ic.RepositoryConfig.default()\n\
         for p, st in [('file:///data/', ic.local_filesystem_store('/data')),\n\
                       ('s3://b/p/', ic.s3_store(region='us-east-1')),\n\
                       ('gs://b/p/', ic.gcs_store()),\n\
                       ('az://b/p/', ic.ObjectStoreConfig.Azure({{'account': 'a'}})),\n\
                       ('https://h.example/p/', ic.http_store())]:\n\
         \x20   cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(p, st))\n\
         repo = ic.Repository.create(ic.local_filesystem_storage({:?}), cfg)\n\
         s = repo.writable_session('main')\n\
         zarr.open_group(store=s.store).create_array('a', shape=(4,), dtype='i4')[:] = 7\n\
         s.commit('one array')\n",
        repo.display().to_string()
    );
    python(&["-c".as_ref(), script.as_ref()]);
    let ds = dataset::Opener::new(cache()).open(&repo).unwrap();
    assert_eq!(
        read_head(&ds, "a", 16).unwrap(),
        [7i32; 4].map(i32::to_le_bytes).concat()
    );
}

/// A sharded array in a repository reads as zarr-python reads it, and a
/// part of a chunk (what the sharding codec asks: its index, an inner
/// chunk) is the same bytes as the part of the whole chunk, for native
/// and inline chunks; a range past a chunk's end is an error.
#[test]
fn parts_of_chunks_read_as_the_whole_chunk_s_parts() {
    use slabfs::formats::icechunk::IcechunkStore;
    use slabfs::storage::{ByteRange, Store};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let repo = dir.join("repo");
    let script = format!(
        "import icechunk as ic, zarr, numpy as np, hashlib, json\n\
         repo = ic.Repository.create(ic.local_filesystem_storage({repo:?}))\n\
         s = repo.writable_session('main')\n\
         g = zarr.open_group(store=s.store)\n\
         a = g.create_array('sharded', shape=(96, 80), chunks=(16, 16), shards=(48, 80), \
         dtype='f4', fill_value=0)\n\
         a[:] = np.arange(96 * 80, dtype='f4').reshape(96, 80) / 3\n\
         s.commit('sharded')\n\
         r = zarr.open_group(store=repo.readonly_session('main').store, mode='r')\n\
         v = np.ascontiguousarray(r['sharded'][...]).astype('<f4')\n\
         print(hashlib.sha256(v.tobytes()).hexdigest())\n",
        repo = repo.display().to_string()
    );
    let out = common::python::Python::new()
        .args(["-W", "ignore", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The last line: icechunk-python may warn on stdout before it.
    let printed = String::from_utf8(out.stdout).unwrap();
    let sha = printed.lines().last().unwrap().trim().to_string();
    let ds = dataset::Opener::new(cache()).open(&repo).unwrap();
    check_all(&ds, &[("sharded".to_string(), sha)]);
    // Parts of chunks: a native shard, and the committed fixture's inline
    // chunk.
    let opts = slabfs::formats::Options::new(
        vec![repo.clone()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let store = IcechunkStore::open(&repo, None, &opts).unwrap();
    let native_fixture = fixtures().join("native");
    let fixture_opts = slabfs::formats::Options::new(
        vec![native_fixture.clone()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let fixture = IcechunkStore::open(&native_fixture, None, &fixture_opts).unwrap();
    for (store, key) in [(&store, "sharded/c/1/0"), (&fixture, "tiny/c/0")] {
        let whole = store.get(key, u64::MAX).unwrap().unwrap();
        let n = whole.len() as u64;
        assert!(n > 16, "{key}: {n} bytes");
        for range in [
            ByteRange::At { offset: 0, len: n },
            ByteRange::At { offset: 5, len: 7 },
            ByteRange::At { offset: n, len: 0 },
            ByteRange::Suffix(16),
        ] {
            let (a, b) = range.resolve(n).unwrap();
            let part = store.get_range(key, range).unwrap().unwrap();
            assert_eq!(part, whole[a as usize..b as usize], "{key} {range:?}");
        }
        let err = store
            .get_range(
                key,
                ByteRange::At {
                    offset: n - 1,
                    len: 2,
                },
            )
            .unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
    // Only the part is read: bytes of the shard object outside it fail
    // when read, and the part reads.
    use slabfs::storage::testing::faults::{Fault, FaultPlan, FaultyFiles, Rule};
    let plan = FaultPlan::new();
    let mut faulty = slabfs::formats::Options::new(
        vec![repo.clone()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    faulty.files = Arc::new(FaultyFiles::new(faulty.files.clone(), plan.clone()));
    let store = IcechunkStore::open(&repo, None, &faulty).unwrap();
    let rule = Rule::new("chunks/", Fault::Error(std::io::ErrorKind::Other)).bytes(40..41);
    plan.add(rule);
    let part = ByteRange::At { offset: 5, len: 7 };
    assert_eq!(
        store
            .get_range("sharded/c/1/0", part)
            .unwrap()
            .unwrap()
            .len(),
        7
    );
    assert!(
        store.get("sharded/c/1/0", u64::MAX).is_err(),
        "the fault fires"
    );
}

/// A virtual reference to a file whose name needs percent-encoding in a
/// URL (a space): read as icechunk-python reads it.
#[test]
fn a_virtual_reference_to_an_encoded_file_name_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let expected_doc = virtual_repository(&dir);
    let src = dir.join("src");
    std::fs::copy(src.join("sample4.nc"), src.join("with space.nc")).unwrap();
    let prefix = expected_doc["container_prefix"].as_str().unwrap();
    let script = format!(
        "import icechunk as ic, zarr, h5py, os\n\
         from zarr.codecs import BytesCodec\n\
         prefix = {prefix:?}\n\
         creds = ic.containers_credentials({{prefix: None}})\n\
         repo = ic.Repository.open(ic.local_filesystem_storage({repo:?}), authorize_virtual_chunk_access=creds)\n\
         s = repo.writable_session('main')\n\
         root = zarr.open_group(store=s.store)\n\
         root.create_array('spaced', shape=(18, 24), chunks=(18, 24), dtype='int16', compressors=None, fill_value=0, serializer=BytesCodec(endian='little'))\n\
         f = h5py.File({nc:?}, 'r')\n\
         off, ln = f['elev'].id.get_offset(), f['elev'].id.get_storage_size()\n\
         s.store.set_virtual_ref('spaced/c/0/0', prefix + 'with space.nc', offset=off, length=ln)\n\
         s.commit('spaced')\n\
         print(repo.readonly_session('main').store)\n",
        repo = dir.join("virtual").display().to_string(),
        nc = src.join("with space.nc").display().to_string(),
    );
    python(&["-c".as_ref(), script.as_ref()]);
    let ds = dataset::Opener::new(cache())
        .allow_outside(std::slice::from_ref(&src))
        .open(&dir.join("virtual"))
        .unwrap();
    let read =
        |path: &str| read_head(&ds, path, 18 * 24 * 2).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(read("spaced"), read("nc4/elev"));
}

// ---------------------------------------------------------------------------
// Repositories in object storage (a local S3 server, s3s-fs)
// ---------------------------------------------------------------------------

const BUCKET: &str = "slabfs-ice";

/// A network reaching the S3 server at `endpoint`.
fn network(endpoint: &str) -> Arc<dyn slabfs::storage::Network> {
    remote(endpoint)
}

/// [`network`] as itself, whose counters a test reads.
fn remote(endpoint: &str) -> Arc<slabfs::storage::remote::Remote> {
    Arc::new(slabfs::storage::remote::Remote::new(
        slabfs::storage::remote::Config {
            endpoint_url: Some(endpoint.to_string()),
            timeout: std::time::Duration::from_secs(20),
            retries: 3,
            ..Default::default()
        },
    ))
}

/// A local S3 server holding `generate.py s3`'s repositories and the
/// netCDF files their virtual references point into; the generator's
/// directory (kept while the test runs) and its `expected.json`.
fn bucket_of_virtual_references() -> (common::s3s::S3s, tempfile::TempDir, Value) {
    use common::servers::S3Server;
    let s3 = common::s3s::S3s::start();
    s3.create_bucket(BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    let generate = fixtures().join("generate.py");
    python(&[
        generate.as_os_str(),
        "s3".as_ref(),
        tmp.path().as_os_str(),
        s3.endpoint().as_ref(),
        BUCKET.as_ref(),
    ]);
    let expected = doc(tmp.path());
    (s3, tmp, expected)
}

/// A server holding the committed repositories: `ice/native` (spec 1, by
/// icechunk-python) and `ice/spec2` (by the icechunk crate).
fn repositories_in_a_bucket() -> common::s3s::S3s {
    use common::servers::S3Server;
    let s3 = common::s3s::S3s::start();
    s3.upload_dir(BUCKET, &fixtures().join("native"), "ice/native");
    s3.upload_dir(BUCKET, &fixtures().join("spec2/repo"), "ice/spec2");
    s3
}

/// Both spec versions read from a bucket as from disk, at every version
/// (`--ref` of a URL), through slabfs's S3 client (the crate's reads of
/// refs, snapshots and manifests go through it too); a prefix holding
/// repositories lists each as a dataset; `--ref` of a prefix that is no
/// repository is an error naming it.
#[test]
fn repositories_in_a_bucket_read_at_every_version() {
    use common::servers::S3Server;
    let s3 = repositories_in_a_bucket();
    let net = network(&s3.endpoint());
    let url = |p: &str| PathBuf::from(format!("s3://{BUCKET}/{p}"));
    check_every_version_in(&fixtures(), &url("ice/native"), Some(net.clone()));
    check_every_version_in(
        &fixtures().join("spec2"),
        &url("ice/spec2"),
        Some(net.clone()),
    );
    // Without --ref: main.
    let ds = dataset::Opener::new(cache())
        .network(Some(net.clone()))
        .open(&url("ice/native"))
        .unwrap();
    check_all(&ds, &expected(&doc(&fixtures()), "main"));
    // A prefix of repositories: each a dataset at main.
    let ds = dataset::Opener::new(cache())
        .network(Some(net.clone()))
        .open(&url("ice"))
        .unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    let under = |p: &str| -> Vec<String> {
        let mut v: Vec<String> = ds
            .entries
            .iter()
            .filter_map(|e| e.path.strip_prefix(p).map(str::to_string))
            .collect();
        v.sort();
        v
    };
    let mut want: Vec<String> = expected(&doc(&fixtures()), "main")
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    want.sort();
    assert_eq!(under("native/"), want);
    assert!(!under("spec2/").is_empty());
    let err = dataset::Opener::new(cache())
        .network(Some(net))
        .reference(Some("main"))
        .open(&url("ice"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("no Icechunk repository"), "{err}");
}

/// A repository in a bucket, mounted: a pass of the refresh costs one
/// listing of the followed branch's ref's prefix (never a listing of its
/// chunk objects, never a download of the ref), a
/// mount of a tag asks nothing; a commit by icechunk-python to the bucket
/// shows in the branch's mount, not in the tag's. A prefix of repositories
/// mounted lazily serves them too, and so does `--all-refs` of a bucket.
#[test]
fn a_repository_in_a_bucket_follows_its_branch_for_one_request_per_pass() {
    use common::servers::S3Server;
    let s3 = repositories_in_a_bucket();
    let endpoint = s3.endpoint();
    let source = format!("s3://{BUCKET}/ice/native");
    let args = ["--endpoint-url", endpoint.as_str(), "--refresh", "1"];
    let main = common::mount::Mount::start(Path::new(&source), &args);
    let tag =
        common::mount::Mount::start(Path::new(&source), &[&args[..], &["--ref", "v1"]].concat());
    let all = common::mount::Mount::start(Path::new(&format!("s3://{BUCKET}/ice")), &args);
    let versions =
        common::mount::Mount::start(Path::new(&source), &[&args[..], &["--all-refs"]].concat());
    let len = |m: &common::mount::Mount, p: &str| std::fs::metadata(m.path(p)).unwrap().len();
    assert_eq!(len(&main, "series"), 1300 * 4);
    assert_eq!(len(&tag, "series"), 1000 * 4);
    assert_eq!(len(&all, "native/series"), 1300 * 4);
    assert_eq!(len(&versions, "tags/v1/series"), 1000 * 4);
    let want = expected(&doc(&fixtures()), "main");
    for (p, sha) in &want {
        assert_eq!(sha256(&std::fs::read(main.path(p)).unwrap()), *sha, "{p}");
    }
    // Requests of each kind in four passes from now.
    let host = format!("s3://{BUCKET}");
    let n = |d: &Value, k: &str| d["remote"][&host]["requests"][k].as_u64().unwrap_or(0);
    let runs = |d: &Value| d["refresh"]["runs"].as_u64().unwrap();
    let four_passes = |m: &common::mount::Mount| -> (u64, Vec<u64>) {
        let a = crate::remote::wait_refresh_runs(m, runs(&crate::remote::mount_stats(m)) + 1);
        let b = crate::remote::wait_refresh_runs(m, runs(&a) + 4);
        let kinds = ["LIST", "HEAD", "GET", "ranged_GET"];
        let d = kinds.iter().map(|k| n(&b, k) - n(&a, k)).collect();
        (runs(&b) - runs(&a), d)
    };
    let (passes, d) = four_passes(&main);
    assert!(
        passes <= d[0] && d[0] <= passes + 1 && d[1..] == [0, 0, 0],
        "{passes} passes: LIST, HEAD, GET, ranged GET = {d:?}\n{}",
        main.log()
    );
    let (_, d) = four_passes(&tag);
    assert_eq!(d, [0, 0, 0, 0], "a tag asks nothing\n{}", tag.log());
    // A commit to the bucket by icechunk-python.
    let script = format!(
        "import icechunk as ic, zarr, numpy as np, os\n\
         st = ic.s3_storage(bucket={BUCKET:?}, prefix='ice/native', endpoint_url={endpoint:?}, \
         allow_http=True, region='us-east-1', force_path_style=True, \
         access_key_id=os.environ['AWS_ACCESS_KEY_ID'], \
         secret_access_key=os.environ['AWS_SECRET_ACCESS_KEY'])\n\
         s = ic.Repository.open(st).writable_session('main')\n\
         zarr.open_group(store=s.store)['series'].append(np.full(100, 7.0, dtype='float32'))\n\
         s.commit('grow to 1400')\n"
    );
    python(&["-c".as_ref(), script.as_ref()]);
    let seen = || {
        len(&main, "series") == 1400 * 4
            && len(&all, "native/series") == 1400 * 4
            && len(&versions, "branches/main/series") == 1400 * 4
    };
    crate::mount_live::wait_for(
        &main,
        "the commit",
        std::time::Duration::from_secs(30),
        seen,
    );
    let bytes = std::fs::read(main.path("series")).unwrap();
    assert!(
        bytes[1300 * 4..]
            .chunks(4)
            .all(|c| c == 7.0f32.to_le_bytes())
    );
    assert_eq!(len(&tag, "series"), 1000 * 4);
    assert_eq!(len(&versions, "tags/v1/series"), 1000 * 4);
    for m in [main, tag, all, versions] {
        m.stop();
    }
}

/// Virtual references into a bucket (VirtualiZarr over obstore's S3 store,
/// the repository itself in the bucket): read where `--allow-outside`
/// admits their prefix, equal to what zarr-python reads through
/// icechunk-python; refused otherwise, naming the object; a reference
/// whose object was replaced since (its ETag) fails, never reads the new
/// bytes.
#[test]
fn virtual_references_into_a_bucket_are_confined_and_checked() {
    use common::servers::S3Server;
    let (s3, tmp, expected_doc) = bucket_of_virtual_references();
    let dir = tmp.path();
    let net = network(&s3.endpoint());
    let repo = PathBuf::from(format!("s3://{BUCKET}/ice/virtual"));
    let nc = PathBuf::from(expected_doc["container_prefix"].as_str().unwrap());
    let ds = dataset::Opener::new(cache())
        .allow_outside(std::slice::from_ref(&nc))
        .network(Some(net.clone()))
        .open(&repo)
        .unwrap();
    check_all(&ds, &expected(&expected_doc, "main"));
    // Outside the repository's prefix, not admitted: refused, named.
    let ds = dataset::Opener::new(cache())
        .network(Some(net.clone()))
        .open(&repo)
        .unwrap();
    let err = read_head(&ds, "nc4/elev", 16).unwrap_err().to_string();
    assert!(
        err.contains("sample4.nc") && err.contains("outside"),
        "{err}"
    );
    // sample4.nc replaced upstream (one byte of elev changed): the ETag
    // reference fails; the other reads of the file see a new version too.
    let ds = dataset::Opener::new(cache())
        .allow_outside(&[nc])
        .network(Some(net))
        .open(&repo)
        .unwrap();
    let mut bytes = std::fs::read(dir.join("src/sample4.nc")).unwrap();
    let before = read_head(&ds, "etag_elev", 18 * 24 * 2).unwrap();
    let at = bytes
        .windows(before.len())
        .position(|w| w == before.as_slice())
        .unwrap();
    bytes[at] ^= 1;
    let changed = dir.join("changed.nc");
    std::fs::write(&changed, &bytes).unwrap();
    s3.put_files(BUCKET, vec![("nc/sample4.nc".into(), changed)]);
    // The object open since before fails its pinned read (If-Match) and
    // is dropped; opened again, its new ETag is refused.
    let err = read_head(&ds, "etag_elev", 16).unwrap_err().to_string();
    assert!(
        err.contains("sample4.nc") && err.contains("changed"),
        "{err}"
    );
    let err = read_head(&ds, "etag_elev", 16).unwrap_err().to_string();
    assert!(
        err.contains("sample4.nc") && err.contains("changed since the reference was written"),
        "{err}"
    );
}

/// The first chunk read of a virtual object in a bucket opens it with its
/// GET (whose answer tells the version to check), not a HEAD and a GET:
/// one round trip fewer before the first bytes. Its version is still
/// checked (above: a replaced object is refused).
#[test]
fn a_virtual_object_is_opened_by_its_first_get() {
    use common::servers::S3Server;
    use slabfs::storage::remote::metrics::KINDS;
    let (s3, _tmp, expected_doc) = bucket_of_virtual_references();
    let remote = remote(&s3.endpoint());
    let count = |kind: &str| -> u64 {
        let i = KINDS.iter().position(|k| *k == kind).unwrap();
        remote.metrics().iter().map(|s| s.requests[i]).sum()
    };
    let repo = PathBuf::from(format!("s3://{BUCKET}/ice/virtual"));
    let nc = PathBuf::from(expected_doc["container_prefix"].as_str().unwrap());
    let net: Arc<dyn slabfs::storage::Network> = remote.clone();
    let ds = dataset::Opener::new(cache())
        .allow_outside(&[nc])
        .network(Some(net))
        .open(&repo)
        .unwrap();
    let heads = count("HEAD");
    let gets = count("ranged_GET") + count("GET");
    read_head(&ds, "etag_elev", 16).unwrap();
    assert_eq!(count("HEAD"), heads, "no HEAD before the first chunk");
    assert!(count("ranged_GET") + count("GET") > gets);
    // Every array as zarr-python reads it: the chunk that first GET read
    // (kept decoded in the cache) and the chunks read through the object
    // it opened, still without a HEAD.
    check_all(&ds, &expected(&expected_doc, "main"));
    assert_eq!(count("HEAD"), heads);
}

// ---------------------------------------------------------------------------
// Repositories changed by the icechunk crate itself (a migration, spec-2
// branches), review of the object-storage change
// ---------------------------------------------------------------------------

type R<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn crate_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn arr_json(n: u64) -> bytes::Bytes {
    bytes::Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [n], "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [n]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        }))
        .unwrap(),
    )
}

async fn commit(repo: &icechunk::Repository, branch: &str, key: &str, n: u64) -> R<String> {
    let session = repo.writable_session(branch).await?;
    let store = icechunk::Store::from_session(Arc::new(tokio::sync::RwLock::new(session))).await;
    if branch == "main" {
        let _ = store
            .set(
                "zarr.json",
                bytes::Bytes::from_static(br#"{"zarr_format":3,"node_type":"group"}"#),
            )
            .await;
    }
    store.set(&format!("{key}/zarr.json"), arr_json(n)).await?;
    let snap = store
        .session()
        .write()
        .await
        .commit(format!("add {key}"))
        .execute()
        .await?;
    Ok(snap.to_string())
}

/// A spec-2 repository by the crate, with one commit on main (array `a`).
fn spec2_repo(dir: &Path) -> icechunk::Repository {
    crate_rt().block_on(async {
        let storage = icechunk::new_local_filesystem_storage(dir).await.unwrap();
        let repo = icechunk::Repository::create(storage)
            .spec_version(icechunk::format::format_constants::SpecVersionBin::V2)
            .execute()
            .await
            .unwrap();
        commit(&repo, "main", "a", 4).await.unwrap();
        repo
    })
}

/// The names in the directory `dir`, sorted.
fn names_in(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()?;
    v.sort();
    Ok(v)
}

/// A spec-1 repository migrated to spec 2 keeping its old refs (which
/// writers no longer update): a live mount follows the `repo` object, so
/// a commit shows (the stale `refs/branch.main/ref.json` was followed, and
/// no commit ever showed).
#[test]
fn a_migrated_repository_is_followed_by_its_repo_object() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path().canonicalize().unwrap();
    let dir = top.join("repo");
    common::mount::copy_tree(&fixtures().join("native"), &dir);
    let rt = crate_rt();
    rt.block_on(async {
        let storage = icechunk::new_local_filesystem_storage(&dir).await.unwrap();
        let repo = icechunk::Repository::open(storage).execute().await.unwrap();
        icechunk::migrations::migrate_1_to_2(repo, false, false, None)
            .await
            .unwrap();
    });
    assert!(dir.join("repo").is_file() && dir.join("refs/branch.main/ref.json").is_file());
    let m = common::mount::Mount::start(&top, &["--refresh", "1"]);
    assert!(
        names_in(&m.path("repo"))
            .unwrap()
            .contains(&"series".to_string())
    );
    rt.block_on(async {
        let storage = icechunk::new_local_filesystem_storage(&dir).await.unwrap();
        let repo = icechunk::Repository::open(storage).execute().await.unwrap();
        commit(&repo, "main", "added", 4).await.unwrap();
    });
    let added = || {
        names_in(&m.path("repo"))
            .unwrap()
            .contains(&"added".to_string())
    };
    crate::mount_live::wait_for(&m, "the commit", std::time::Duration::from_secs(20), added);
    m.stop();
}

/// A Zarr store whose groups are named `refs` and `snapshots` is a Zarr
/// store in a bucket too, not taken for a repository (it failed to open).
#[test]
fn a_zarr_store_with_groups_named_like_a_repository_is_a_zarr_store() {
    use common::servers::S3Server;
    let tmp = tempfile::tempdir().unwrap();
    let z = tmp.path().join("z.zarr");
    let script = format!(
        "import zarr\n\
         g = zarr.open_group({:?}, mode='w', zarr_format=3)\n\
         g.create_group('refs'); g.create_group('snapshots')\n\
         g.create_array('a', shape=(4,), dtype='i4')[:] = 7\n",
        z.display().to_string()
    );
    python(&["-c".as_ref(), script.as_ref()]);
    let s3 = common::s3s::S3s::start();
    s3.upload_dir(BUCKET, &z, "z.zarr");
    let net = network(&s3.endpoint());
    let url = PathBuf::from(format!("s3://{BUCKET}/z.zarr"));
    let ds = dataset::Opener::new(cache())
        .network(Some(net.clone()))
        .open(&url)
        .unwrap();
    assert_eq!(
        read_head(&ds, "a", 16).unwrap(),
        [7i32; 4].map(i32::to_le_bytes).concat()
    );
    let url = PathBuf::from(format!("s3://{BUCKET}/"));
    let ds = dataset::Opener::new(cache())
        .network(Some(net))
        .open(&url)
        .unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    assert!(ds.entries.iter().any(|e| e.path == "z.zarr/a"));
}

/// Branch names a directory cannot hold (`feature/x`, empty) are left out
/// of `--all-refs`'s `branches/`, which lists the others (the listing
/// failed with EIO).
#[test]
fn odd_ref_names_are_left_out_of_every_version() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap().join("repo");
    let repo = spec2_repo(&dir);
    crate_rt().block_on(async {
        let snap = repo.lookup_branch("main").await.unwrap();
        for name in ["ok", "feature/x", ""] {
            // Whatever the crate refuses is simply not there.
            let _ = repo.create_branch(name, &snap).await;
        }
    });
    let m = common::mount::Mount::start(&dir, &["--all-refs"]);
    let branches = names_in(&m.path("branches")).unwrap();
    assert!(branches.contains(&"ok".to_string()) && branches.contains(&"main".to_string()));
    assert!(
        branches.iter().all(|b| !b.is_empty() && !b.contains('/')),
        "{branches:?}"
    );
    assert_eq!(
        std::fs::metadata(m.path("branches/ok/a")).unwrap().len(),
        16
    );
    m.stop();
}

/// A repository created again at the same prefix of a bucket, read through
/// a disk cache: its first snapshot, whose name is the same in every
/// repository, is read from the bucket, never the one kept of the
/// repository before it (it was kept by name as immutable and served).
#[test]
fn a_repository_created_again_is_not_served_its_predecessor_s_first_snapshot() {
    use common::servers::S3Server;
    use slabfs::storage::remote::{Config, Remote};
    let tmp = tempfile::tempdir().unwrap();
    let create = |dir: &Path| {
        crate_rt().block_on(async {
            let storage = icechunk::new_local_filesystem_storage(dir).await.unwrap();
            icechunk::Repository::create(storage)
                .spec_version(icechunk::format::format_constants::SpecVersionBin::V2)
                .execute()
                .await
                .unwrap();
        })
    };
    let (old, new) = (tmp.path().join("old"), tmp.path().join("new"));
    create(&old);
    // Another second: another time in the snapshot, other bytes.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    create(&new);
    let first = "snapshots/1CECHNKREP0F1RSTCMT0";
    assert_ne!(
        std::fs::read(old.join(first)).unwrap(),
        std::fs::read(new.join(first)).unwrap()
    );
    let s3 = common::s3s::S3s::start();
    s3.upload_dir(BUCKET, &old, "ice/re");
    let url = PathBuf::from(format!("s3://{BUCKET}/ice/re"));
    let open = || {
        let remote = Arc::new(Remote::new(Config {
            endpoint_url: Some(s3.endpoint()),
            disk_cache: Some(slabfs::storage::disk_cache::DiskCacheConfig {
                dir: tmp.path().join("cache"),
                size: 1 << 30,
            }),
            ..Default::default()
        }));
        let net: Arc<dyn slabfs::storage::Network> = remote.clone();
        // Its main is its first snapshot, which holds nothing yet: read,
        // and found to be no Zarr hierarchy.
        let e = dataset::Opener::new(cache())
            .network(Some(net))
            .open(&url)
            .err()
            .unwrap();
        assert!(e.to_string().contains("not a Zarr store"), "{e}");
        remote.flush_disk_cache(std::time::Duration::from_secs(10));
        remote.disk_cache().unwrap()
    };
    let before = open();
    s3.upload_dir(BUCKET, &new, "ice/re");
    let again = open();
    assert_eq!(again.hits, 0, "{before:?} then {again:?}");
}

/// The committed repository's store at `main` keeps the storage contract
/// (`storage::testing::conformance`), on its own keys: node documents,
/// native chunks (`series`, zstd) and an inline one (`tiny`, no codec).
/// The values are checked first against what zarr-python read through
/// icechunk-python (expected.json): `tiny`'s one chunk is the array's
/// bytes, and `series`' chunks, decoded by the zstd crate and joined, are
/// its bytes; the documents name the node types and shapes it read.
/// (Regression: a node's `zarr.json` was served whatever the size limit
/// asked, where every other store answers `TooLarge`.)
#[test]
fn an_icechunk_store_conforms() {
    use slabfs::formats::icechunk::IcechunkStore;
    use slabfs::storage::Store;
    use slabfs::storage::testing::conformance::{Limits, check_own_listing, check_values};
    let dir = fixtures().join("native");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("expected.json")).unwrap()).unwrap();
    let main = &doc["read"]["main"];
    let opts = slabfs::formats::Options::new(
        vec![dir.clone()],
        cache(),
        slabfs::formats::registry::builtin(),
    );
    let store = IcechunkStore::open(&dir, None, &opts).unwrap();
    let get = |key: &str| {
        store
            .get(key, u64::MAX)
            .unwrap()
            .unwrap_or_else(|| panic!("{key} missing"))
    };

    let tiny = get("tiny/c/0");
    assert_eq!(sha256(&tiny), main["/tiny"]["sha256"], "tiny/c/0");
    let n = main["/series"]["shape"][0].as_u64().unwrap() as usize;
    let series_doc: Value = serde_json::from_slice(&get("series/zarr.json")).unwrap();
    assert_eq!(series_doc["node_type"], "array");
    assert_eq!(series_doc["shape"][0], n as u64);
    let per_chunk = series_doc["chunk_grid"]["configuration"]["chunk_shape"][0]
        .as_u64()
        .unwrap() as usize;
    let chunks: Vec<(String, Vec<u8>)> = (0..n.div_ceil(per_chunk))
        .map(|i| {
            let key = format!("series/c/{i}");
            let raw = get(&key);
            (key, raw)
        })
        .collect();
    let mut joined = Vec::new();
    for (key, raw) in &chunks {
        let decoded = zstd::decode_all(&raw[..]).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(decoded.len(), per_chunk * 4, "{key}");
        joined.extend(decoded);
    }
    joined.truncate(n * 4);
    assert_eq!(sha256(&joined), main["/series"]["sha256"], "series");
    let root_doc = get("zarr.json");
    let root: Value = serde_json::from_slice(&root_doc).unwrap();
    assert_eq!(root["node_type"], "group");

    let mut entries: Vec<(&str, Vec<u8>)> = chunks
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    entries.push(("tiny/c/0", tiny));
    entries.push(("zarr.json", root_doc));
    entries.push(("series/zarr.json", get("series/zarr.json")));
    check_values("IcechunkStore", &store, &entries, Limits::default());
    check_own_listing(
        "IcechunkStore",
        &store,
        &["", "series", "nested", "nested/deeper"],
    );
}
