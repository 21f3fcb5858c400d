//! The format registry takes a new format through one entry: a format of
//! this test suite's own ([`TEST_FORMAT`], `*.tfmt`: an 8-byte magic
//! number, a count, float32 values), added to the built-in list the way a
//! new format folder adds its line to `formats::registry::FORMATS`, is
//! then found by every walk with no other change: in a directory on disk
//! (the eager walk), inside an archive (the lazy tree's backend, and the
//! FUSE core over it), as an aggregation's fragment whose format is not
//! written down, and (tests/it/remote.rs) in a bucket.
//!
//! The values are the test's own numbers, written with `f32::to_le_bytes`
//! and compared with what the mount reads; and each check is made once
//! without the entry too, where the same file must not be found.

use std::path::PathBuf;
use std::sync::Arc;

use slabfs::dtype::{DataType, Endian};
use slabfs::engine::cache::ChunkCache;
use slabfs::error::Result;
use slabfs::formats::dataset::{Dataset, Found, Opener};
use slabfs::formats::entry::{At, Entry, FormatEntry, Layout, Stamp, has_extension, never_single};
use slabfs::formats::nca::raw::RawArray;
use slabfs::formats::registry;

/// The test format's magic number.
const MAGIC: &[u8; 8] = b"TESTFMT1";

/// A format of the test suite's own: one `values` array (float32, little
/// endian) after the magic number and a `u32` count.
pub static TEST_FORMAT: FormatEntry = FormatEntry {
    name: "tfmt",
    noun: "a test-format file",
    summary: "a format of the tests only",
    layout: Layout::File,
    claims: |name| has_extension(name, &["tfmt"]),
    sniff: Some(|file| {
        let mut magic = [0u8; 8];
        if file.size()? < 12 {
            return Ok(false);
        }
        file.read_exact_at(&mut magic, 0)?;
        Ok(&magic == MAGIC)
    }),
    probe: None,
    single: never_single,
    versioned: false,
    by_content: false,
    last_resort: false,
    stamp: Stamp::File,
    open: open_test_format,
};

fn open_test_format(at: &At<'_>) -> Result<Option<Dataset>> {
    let file = at.file()?;
    let mut count = [0u8; 4];
    file.read_exact_at(&mut count, 8)
        .map_err(|source| slabfs::Error::Io {
            path: at.shown(),
            source,
        })?;
    let n = u32::from_le_bytes(count) as u64;
    let array = RawArray::open(
        file,
        at.path,
        12,
        vec![n],
        DataType::Float32,
        Endian::Little,
    )?;
    let mut ds = Dataset::default();
    ds.entries.push(Entry {
        path: at.mount_path("values"),
        array: Arc::new(array),
    });
    Ok(Some(ds))
}

/// The built-in formats and the test's.
pub fn formats() -> slabfs::formats::entry::Formats {
    registry::builtin().with(&TEST_FORMAT)
}

/// A test-format file of `values`.
pub fn test_file(values: &[f32]) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

pub fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub const VALUES: [f32; 5] = [1.5, -2.0, 3.25, 1e6, f32::MIN_POSITIVE];

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(1 << 20))
}

/// All of `array` read through the engine, in native order (little
/// endian here).
pub fn read_all(array: &dyn slabfs::engine::array::ArraySource) -> Vec<u8> {
    let mut buf = vec![0u8; array.meta().nbytes() as usize];
    slabfs::engine::read::read_at(array, 0, &mut buf, Endian::Little).unwrap();
    buf
}

/// The core's bytes of the file at `path` (`/`-separated), through
/// lookup, open and read as the kernel asks for them.
fn core_read(fs: &slabfs::fs::SlabFs, path: &str) -> Vec<u8> {
    use std::ffi::OsStr;
    let mut ino = slabfs::fs::ROOT_INO;
    for c in path.split('/') {
        ino = fs.lookup(ino, OsStr::new(c)).unwrap().ino;
    }
    let fh = fs.open(ino, libc::O_RDONLY).unwrap().fh;
    let got = fs.read(ino, fh, 0, 1 << 20).unwrap();
    fs.release(ino, fh);
    got
}

/// A directory holding `runs/a.tfmt` and a file that only claims the name.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    std::fs::create_dir_all(root.join("runs")).unwrap();
    std::fs::write(root.join("runs/a.tfmt"), test_file(&VALUES)).unwrap();
    std::fs::write(root.join("runs/b.tfmt"), b"not the magic number").unwrap();
    (tmp, root)
}

#[test]
fn a_registered_format_is_found_on_disk() {
    let (_tmp, root) = tree();
    let ds = Opener::new(cache()).formats(formats()).open(&root).unwrap();
    let e = ds
        .get("runs/a.tfmt/values")
        .expect("the test format's array");
    assert_eq!(read_all(e.array.as_ref()), le_bytes(&VALUES));
    // The file that only has the name is skipped, saying what it is not.
    assert_eq!(ds.skipped.len(), 1, "{:?}", ds.skipped);
    let said = ds.skipped[0].to_string();
    assert!(
        said.contains("b.tfmt") && said.contains("not a test-format file"),
        "{said}"
    );
    // SOURCE a file of the format: its array at the root.
    let one = Opener::new(cache())
        .formats(formats())
        .open(&root.join("runs/a.tfmt"))
        .unwrap();
    assert_eq!(
        read_all(one.get("values").unwrap().array.as_ref()),
        le_bytes(&VALUES)
    );
    // Without the entry: not looked at at all, and no SOURCE.
    let ds = Opener::new(cache()).open(&root).unwrap();
    assert!(ds.entries.is_empty() && ds.skipped.is_empty());
    let e = Opener::new(cache())
        .open(&root.join("runs/a.tfmt"))
        .err()
        .unwrap();
    assert!(e.to_string().contains("not a dataset"), "{e}");
}

#[test]
fn a_registered_format_is_found_inside_an_archive() {
    let (_tmp, root) = tree();
    let opener = Opener::new(cache()).formats(formats());
    let archive = opener
        .archive(&root)
        .unwrap()
        .expect("a directory of datasets");
    let listed = archive.list("runs").unwrap();
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a.tfmt", "b.tfmt"]);
    let found = archive.find("runs/a.tfmt").unwrap();
    assert!(matches!(found, Found::Dataset { format, .. } if format.name == "tfmt"));
    let ds = archive.open("runs/a.tfmt", found).unwrap().unwrap();
    let e = ds.get("runs/a.tfmt/values").unwrap();
    assert_eq!(read_all(e.array.as_ref()), le_bytes(&VALUES));
    // The filesystem core over the archive serves it by path.
    let config = slabfs::fs::FsConfig {
        byte_order: Endian::Little,
        uid: 0,
        gid: 0,
        views: slabfs::fs::Views::default(),
        track_changes: false,
    };
    let fs = slabfs::fs::SlabFs::of_archive(archive, 16, config);
    assert_eq!(core_read(&fs, "runs/a.tfmt/values"), le_bytes(&VALUES));
    // Without the entry the archive does not list it.
    let plain = Opener::new(cache()).archive(&root).unwrap().unwrap();
    assert!(plain.list("runs").unwrap().is_empty());
}

/// An NCA descriptor whose one partition is the test-format file `file`,
/// with no `format`: the registry's sniff tells it.
fn descriptor(file: &str, n: usize) -> String {
    serde_json::json!({
        "dimensions": {"x": n},
        "variables": {"v": {
            "dtype": "float32", "nca_dimensions": "x",
            "nca_array": {"pdimensions": ["x"], "pshape": [1], "Partitions": [{
                "index": [0], "location": [[0, n]],
                "data": {"file": file, "ncvar": "values"}
            }]}
        }}
    })
    .to_string()
}

#[test]
fn a_registered_format_is_found_as_an_aggregation_fragment() {
    let (_tmp, root) = tree();
    let desc = root.join("agg.nca.json");
    std::fs::write(&desc, descriptor("runs/a.tfmt", VALUES.len())).unwrap();
    let ds = Opener::new(cache()).formats(formats()).open(&desc).unwrap();
    let v = ds.get("v").unwrap_or_else(|| panic!("{:?}", ds.skipped));
    assert_eq!(read_all(v.array.as_ref()), le_bytes(&VALUES));
    // Without the entry its format cannot be told: the variable is
    // skipped, saying so.
    let ds = Opener::new(cache()).open(&desc).unwrap();
    assert!(ds.get("v").is_none());
    let said = ds
        .skipped
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(said.contains("not recognisably"), "{said}");
}
