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

/// Run the test venv's Python (icechunk-python, zarr-python, VirtualiZarr,
/// netCDF4-python) with `args`; panics with its stderr if it fails.
fn python(args: &[&std::ffi::OsStr]) {
    let out = Command::new(common::python())
        .args(["-W", "ignore"])
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

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
    let expected_doc = doc(dir);
    let refs: Vec<String> = expected_doc["read"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(refs.len(), 4, "{refs:?}");
    for r in &refs {
        let ds = dataset::open_repository(repo, r, cache(), &[], None)
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
    let ds = dataset::open(&dir.join("native"), cache()).unwrap();
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
    let ds = dataset::open_with_roots(&repo, cache(), std::slice::from_ref(&src)).unwrap();
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
    let confined = dataset::open(&repo, cache()).unwrap();
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
    let fresh = dataset::open_with_roots(&repo, cache(), std::slice::from_ref(&src)).unwrap();
    let etag = read(&fresh, "etag_elev").unwrap_err().to_string();
    assert!(etag.contains("ETag"), "{etag}");
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
    let err = dataset::open_repository(&repo, "no-such-ref", cache(), &[], None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no-such-ref") && err.contains("native"),
        "{err}"
    );
    let plain = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr");
    let err = dataset::open_repository(&plain, "main", cache(), &[], None)
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
    let ds = dataset::open(&repo, cache()).unwrap();
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
    let ds = dataset::open(&repo, cache()).unwrap();
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
    let err = dataset::open(&repo, cache()).err().unwrap().to_string();
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while len(&main) != 1400 * 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "not seen:\n{}",
            main.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
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
    use slabfs::formats::icechunk::{IcechunkStore, is_repository};
    use slabfs::storage::Store;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    common::mount::copy_tree(&fixtures().join("native"), &repo);
    let opts = slabfs::formats::Options::new(vec![repo.clone()], cache());
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
    let ds = dataset::open(&repo, cache()).unwrap();
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
    assert!(!is_repository(&plain));
    assert!(is_repository(&repo));
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
    let ds = dataset::open_with_roots(&dir.join("virtual"), cache(), std::slice::from_ref(&src))
        .unwrap();
    let read =
        |path: &str| read_head(&ds, path, 18 * 24 * 2).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(read("spaced"), read("nc4/elev"));
}
