//! The FUSE mount, for real: each test starts `slabfs mount` as a child
//! process on a fresh mount point, waits until the mount is live, checks
//! what programs see through the kernel, then stops the daemon with a
//! signal and checks it exited 0 and left nothing mounted.
//!
//! Mounting needs /dev/fuse and either root (mount(2)) or `fusermount3`
//! (Debian package `fuse3`; `.ci/run` installs it). Every mount is torn down
//! by a drop guard even when a test fails, so a failing test never leaves a
//! stale mount behind; mount points are unique temporary directories, so
//! the tests run in parallel with each other and the rest of `cargo test`.

use crate::common;
use common::Lcg;
use common::mount::{Mount, TIMEOUT, copy_tree, is_mount_point};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use slabfs::dtype::{DataType, Endian, swap_in_place};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr")
}

// ---------------------------------------------------------------------------
// What the fixtures should look like
// ---------------------------------------------------------------------------

struct Case {
    /// Path in the mount of tests/fixtures/zarr.
    path: String,
    dtype: DataType,
    shape: Vec<u64>,
    /// Little-endian bytes as zarr-python read them.
    expected: Vec<u8>,
}

fn cases() -> Vec<Case> {
    const {
        assert!(
            cfg!(target_endian = "little"),
            "the expected files are little-endian"
        )
    };
    let root = fixtures();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    for e in manifest.as_array().unwrap() {
        let store = e["store"].as_str().unwrap();
        let array = e["array"].as_str().unwrap();
        out.push(Case {
            path: if array.is_empty() {
                store.to_string()
            } else {
                format!("{store}/{array}")
            },
            dtype: DataType::from_numpy(e["dtype"].as_str().unwrap())
                .unwrap()
                .0,
            shape: e["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect(),
            expected: std::fs::read(root.join(e["expected"].as_str().unwrap())).unwrap(),
        });
    }
    assert!(out.len() > 50, "manifest lists only {} arrays", out.len());
    out
}

/// `slabfs ls SOURCE`: path -> size.
fn ls(source: &Path) -> BTreeMap<String, u64> {
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .arg("ls")
        .arg(source)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f[3].parse().unwrap())
        })
        .collect()
}

/// Every node under `root`: relative path -> metadata.
fn walk(root: &Path) -> BTreeMap<String, std::fs::Metadata> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<String, std::fs::Metadata>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            if meta.is_dir() {
                go(root, &path, out);
            }
            out.insert(rel, meta);
        }
    }
    let mut out = BTreeMap::new();
    go(root, root, &mut out);
    out
}

fn getxattr(path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid C strings and a buffer of the length passed.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf)
}

/// Whether the mount path `path` is a directory of the archive `source`
/// or a dataset in it: it is on disk, and nothing above it is a dataset
/// (a file, or a directory holding Zarr metadata).
fn archive_level(source: &Path, path: &str) -> bool {
    let zarr = |d: &Path| {
        ["zarr.json", ".zgroup", ".zarray", ".zmetadata"]
            .iter()
            .any(|k| d.join(k).is_file())
    };
    let disk = source.join(path);
    if path.is_empty() {
        return true;
    }
    if !disk.exists() || path.starts_with(".slabfs") {
        return false;
    }
    let mut above = Path::new(path).parent();
    while let Some(p) = above.filter(|p| !p.as_os_str().is_empty()) {
        let d = source.join(p);
        if !d.is_dir() || zarr(&d) {
            return false;
        }
        above = p.parent();
    }
    true
}

fn errno_of<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.expect_err("expected an error").raw_os_error().unwrap()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn layout_matches_ls_with_sidecars_modes_and_sizes() {
    let m = Mount::start(&fixtures(), &[]);
    let listed = ls(&fixtures());
    let tree = walk(&m.mnt);
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };

    let files: BTreeSet<&str> = tree
        .iter()
        .filter(|(_, md)| md.is_file())
        .map(|(p, _)| p.as_str())
        .collect();
    let mut want: BTreeSet<String> = listed.keys().cloned().collect();
    want.extend(listed.keys().map(|p| format!("{p}.json")));
    // Each directory with attributes holds its sidecar `.json`
    // (tests/it/attributes.rs checks their content).
    let ds = slabfs::formats::dataset::Opener::new(std::sync::Arc::new(
        slabfs::engine::cache::ChunkCache::new(1 << 20),
    ))
    .open(&fixtures())
    .unwrap();
    assert!(!ds.directories.is_empty());
    want.extend(ds.directories.keys().map(|d| format!("{d}/.json")));
    // The mount's own control files (tests/it/mount_live.rs and
    // tests/it/errors.rs check them).
    want.insert(".slabfs/stats".into());
    want.insert(".slabfs/errors".into());
    assert_eq!(files, want.iter().map(String::as_str).collect());

    let mut inodes = BTreeSet::new();
    for (path, md) in &tree {
        assert!(
            inodes.insert(md.ino()),
            "{path}: duplicate inode {}",
            md.ino()
        );
        assert_eq!((md.uid(), md.gid()), (uid, gid), "{path}");
        if md.is_dir() {
            assert_eq!(md.mode() & 0o7777, 0o555, "{path}");
            let subdirs = tree
                .iter()
                .filter(|(p, d)| {
                    d.is_dir() && p.rsplit_once('/').map(|(a, _)| a) == Some(path.as_str())
                })
                .count();
            // A directory of the archive, or a dataset's own directory,
            // says 1 ("not counted": counting would mean listing it or
            // opening the dataset); one inside a dataset counts.
            let expected = if archive_level(&fixtures(), path) {
                1
            } else {
                2 + subdirs as u64
            };
            assert_eq!(md.nlink(), expected, "{path}");
        } else {
            assert!(md.is_file(), "{path}");
            assert_eq!(md.mode() & 0o7777, 0o444, "{path}");
            assert_eq!(md.nlink(), 1, "{path}");
            assert_eq!(md.blocks(), md.len().div_ceil(512), "{path}");
            if let Some(&size) = listed.get(path) {
                assert_eq!(md.len(), size, "{path}: st_size");
            }
        }
    }
    let root = std::fs::metadata(&m.mnt).unwrap();
    assert_eq!(root.mode() & 0o7777, 0o555);
    assert_eq!(root.ino(), 1);

    // statfs: the total size of the files, nothing free, read-only.
    let c = CString::new(m.mnt.as_os_str().as_bytes()).unwrap();
    // SAFETY: statvfs is plain data filled by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out pointer.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    let total: u64 = tree
        .values()
        .filter(|md| md.is_file())
        .map(|md| md.len())
        .sum();
    assert_eq!(
        st.f_blocks as u64 * st.f_frsize,
        total.div_ceil(4096) * 4096
    );
    assert_eq!(st.f_bfree, 0);
    // Nodes of the datasets (all opened by the walk) and `.slabfs`: the
    // archive's own directories are not counted (that would mean walking
    // the archive).
    let plain = tree
        .iter()
        .filter(|(p, md)| {
            md.is_dir() && archive_level(&fixtures(), p) && {
                let d = fixtures().join(p.as_str());
                d.is_dir()
                    && !["zarr.json", ".zgroup", ".zarray", ".zmetadata"]
                        .iter()
                        .any(|k| d.join(k).is_file())
            }
        })
        .count();
    assert_eq!(st.f_files as usize, tree.len() - plain);
    assert_ne!(st.f_flag & libc::ST_RDONLY, 0);
    m.stop();
}

#[test]
fn every_file_serves_the_fixture_bytes_with_sidecar_and_xattrs() {
    let m = Mount::start(&fixtures(), &[]);
    let mut failures = Vec::new();
    for case in cases() {
        let file = m.path(&case.path);
        match std::fs::read(&file) {
            Ok(bytes) if bytes == case.expected => {}
            Ok(bytes) => failures.push(format!(
                "{}: {} bytes read, {} expected, first difference at {:?}",
                case.path,
                bytes.len(),
                case.expected.len(),
                bytes.iter().zip(&case.expected).position(|(a, b)| a != b)
            )),
            Err(e) => failures.push(format!("{}: {e}", case.path)),
        }
        let typestr = case.dtype.numpy_typestr(Endian::NATIVE);
        let side: Value =
            serde_json::from_slice(&std::fs::read(m.path(&format!("{}.json", case.path))).unwrap())
                .unwrap();
        if side["shape"] != serde_json::json!(case.shape) || side["dtype"] != typestr.as_str() {
            failures.push(format!("{}: sidecar {side}", case.path));
        }
        if side["nbytes"] != case.expected.len() {
            failures.push(format!("{}: sidecar nbytes {}", case.path, side["nbytes"]));
        }
        let shape: Vec<u64> =
            serde_json::from_slice(&getxattr(&file, "user.slabfs.shape").unwrap()).unwrap();
        let dtype = getxattr(&file, "user.slabfs.dtype").unwrap();
        let dims: Vec<Option<String>> =
            serde_json::from_slice(&getxattr(&file, "user.slabfs.dims").unwrap()).unwrap();
        if shape != case.shape || dtype != typestr.as_bytes() || dims.len() != case.shape.len() {
            failures.push(format!(
                "{}: xattrs {shape:?} {dtype:?} {dims:?}",
                case.path
            ));
        }
        if side["dimension_names"] != serde_json::json!(dims) {
            failures.push(format!("{}: sidecar and xattr dims differ", case.path));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // One array with named dimensions and a NaN fill, in detail.
    let temp = m.path("v2/basic.zarr/g1/sub/temp");
    assert_eq!(
        getxattr(&temp, "user.slabfs.dims").unwrap(),
        br#"["y","x"]"#
    );
    assert_eq!(errno_of(getxattr(&temp, "user.slabfs.nope")), libc::ENODATA);
    let side: Value =
        serde_json::from_slice(&std::fs::read(m.path("v2/basic.zarr/g1/sub/temp.json")).unwrap())
            .unwrap();
    assert_eq!(side["fill_value"], "NaN");
    assert_eq!(side["chunk_shape"], serde_json::json!([4, 3]));
    assert_eq!(side["attributes"]["units"], "degC");
    assert!(side["source"].as_str().unwrap().ends_with("temp/.zarray"));

    // Reads at and around EOF, and of zero bytes.
    let f = File::open(&temp).unwrap();
    let size = f.metadata().unwrap().len();
    let mut buf = [0u8; 100];
    assert_eq!(f.read_at(&mut buf, size - 3).unwrap(), 3);
    assert_eq!(f.read_at(&mut buf, size).unwrap(), 0);
    assert_eq!(f.read_at(&mut buf, size + 4096).unwrap(), 0);
    assert_eq!(f.read_at(&mut buf[..0], 0).unwrap(), 0);
    drop(f); // an open file would make the unmount wait for it
    m.stop();
}

#[test]
fn big_endian_mount_and_stable_inodes() {
    let source = fixtures().join("v2");
    let little = Mount::start(&source, &["--threads", "1"]);
    let big = Mount::start(&source, &["--byte-order", "big", "--cache-size", "1MiB"]);
    // Same source, same inode numbers, whatever the options.
    let a: BTreeMap<String, u64> = walk(&little.mnt)
        .into_iter()
        .map(|(p, md)| (p, md.ino()))
        .collect();
    let b: BTreeMap<String, u64> = walk(&big.mnt)
        .into_iter()
        .map(|(p, md)| (p, md.ino()))
        .collect();
    assert_eq!(a, b);

    for case in cases().iter().filter(|c| c.path.starts_with("v2/")) {
        let rel = case.path.strip_prefix("v2/").unwrap();
        let mut swapped = std::fs::read(big.path(rel)).unwrap();
        swap_in_place(&mut swapped, case.dtype.swap_unit());
        assert!(swapped == case.expected, "{rel}: big-endian bytes differ");
        let side: Value =
            serde_json::from_slice(&std::fs::read(big.path(&format!("{rel}.json"))).unwrap())
                .unwrap();
        assert_eq!(
            side["dtype"],
            case.dtype.numpy_typestr(Endian::Big),
            "{rel}"
        );
        assert_eq!(
            getxattr(&big.path(rel), "user.slabfs.dtype").unwrap(),
            case.dtype.numpy_typestr(Endian::Big).as_bytes()
        );
    }
    little.stop_with(libc::SIGINT);
    big.stop();
}

#[test]
fn random_preads_from_8_threads() {
    let m = Mount::start(&fixtures(), &["--threads", "4", "--cache-size", "256KiB"]);
    // The larger arrays: many chunks each, so threads race on decodes.
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.expected.len() >= 4096)
        .collect();
    assert!(cases.len() >= 8);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let cases = &cases;
            let m = &m;
            s.spawn(move || {
                let mut rng = Lcg(t + 1);
                for _ in 0..300 {
                    let case = &cases[rng.next(cases.len() as u64) as usize];
                    let f = File::open(m.path(&case.path)).unwrap();
                    let size = case.expected.len() as u64;
                    let offset = rng.next(size + 16);
                    let len = 1 + rng.next(65536);
                    let mut buf = vec![0u8; len as usize];
                    let n = f.read_at(&mut buf, offset).unwrap();
                    let lo = offset.min(size) as usize;
                    let hi = (offset + len).min(size) as usize;
                    assert_eq!(n, hi - lo, "{} @{offset}+{len}", case.path);
                    assert!(
                        buf[..n] == case.expected[lo..hi],
                        "{} @{offset}+{len}: bytes differ",
                        case.path
                    );
                }
            });
        }
    });
    m.stop();
}

#[test]
fn writes_and_creates_fail_with_erofs() {
    let m = Mount::start(&fixtures().join("v3"), &[]);
    let file = m.path("root_array.zarr");
    assert!(file.is_file());
    let rofs = libc::EROFS;
    assert_eq!(errno_of(OpenOptions::new().write(true).open(&file)), rofs);
    assert_eq!(
        errno_of(OpenOptions::new().read(true).append(true).open(&file)),
        rofs
    );
    assert_eq!(
        errno_of(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(m.path("new"))
        ),
        rofs
    );
    assert_eq!(
        errno_of(
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_TRUNC)
                .open(&file)
        ),
        rofs
    );
    assert_eq!(errno_of(std::fs::create_dir(m.path("newdir"))), rofs);
    assert_eq!(errno_of(std::fs::remove_file(&file)), rofs);
    assert_eq!(errno_of(std::fs::remove_dir(m.path("blosc.zarr"))), rofs);
    assert_eq!(errno_of(std::fs::rename(&file, m.path("moved"))), rofs);
    assert_eq!(
        errno_of(std::os::unix::fs::symlink(&file, m.path("link"))),
        rofs
    );
    assert_eq!(errno_of(std::fs::hard_link(&file, m.path("hard"))), rofs);
    assert_eq!(
        errno_of(std::fs::set_permissions(
            &file,
            std::fs::Permissions::from_mode(0o644)
        )),
        rofs
    );
    let c = CString::new(file.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C strings and buffer.
    let rc = unsafe { libc::truncate(c.as_ptr(), 0) };
    assert_eq!(
        (rc, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(rofs))
    );
    let name = CString::new("user.x").unwrap();
    // SAFETY: valid C strings and buffer.
    let rc = unsafe { libc::setxattr(c.as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0) };
    assert_eq!(
        (rc, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(rofs))
    );
    // Still intact.
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        ls(&fixtures().join("v3"))["root_array.zarr"]
    );
    m.stop();
}

#[test]
fn corrupt_chunk_gives_eio_only_where_it_is_read() {
    // blosc/zlib_shuffle: <i8 45x90 in 30x41 chunks; a row is 720 bytes.
    // Chunk (1,0) holds rows 30..45, columns 0..41: the first byte it
    // touches is 30*720 = 21600, in the sixth 4 KiB page. Pages 0..4
    // (bytes 0..20480) hold only rows 0..29, chunk row 0.
    let src = tempfile::tempdir().unwrap();
    let store = src.path().join("compressors.zarr");
    copy_tree(&fixtures().join("v2/compressors.zarr"), &store);
    let chunk = store.join("blosc/zlib_shuffle/1.0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[16..mid] {
        *b ^= 0x5a; // keep the blosc header, garble the stream
    }
    std::fs::write(&chunk, &bytes).unwrap();

    let expected = std::fs::read(fixtures().join("expected/v2_blosc_zlib_shuffle.bin")).unwrap();
    assert_eq!(expected.len(), 32400);
    let m = Mount::start(&store, &[]);
    let f = File::open(m.path("blosc/zlib_shuffle")).unwrap();
    // Page-sized requests only: no readahead pulling in the bad chunk.
    // SAFETY: a valid open fd.
    assert_eq!(
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) },
        0
    );
    let mut buf = vec![0u8; 4096];
    for page in 0..5u64 {
        let n = f.read_at(&mut buf, page * 4096).unwrap();
        assert_eq!(n, 4096);
        assert!(
            buf == expected[(page * 4096) as usize..][..4096],
            "page {page}"
        );
    }
    for (offset, len) in [(21600u64, 8usize), (24000, 100), (32392, 8)] {
        let err = f.read_at(&mut buf[..len], offset).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "read @{offset}: {err}");
    }
    // The good pages still read fine afterwards, from a new open too.
    let f2 = File::open(m.path("blosc/zlib_shuffle")).unwrap();
    assert_eq!(f2.read_at(&mut buf, 8192).unwrap(), 4096);
    assert!(buf == expected[8192..12288]);
    // Every other array of the store is unaffected.
    let other = std::fs::read(m.path("blosc/zlib_noshuffle")).unwrap();
    assert!(
        other == std::fs::read(fixtures().join("expected/v2_blosc_zlib_noshuffle.bin")).unwrap()
    );

    // One log line per failed request, with path, offset, size and the
    // chunk file.
    let log = m.log();
    let line = log
        .lines()
        .find(|l| l.contains("read failed") && l.contains("offset 20480"))
        .unwrap_or_else(|| panic!("no failed-read log line:\n{log}"));
    assert!(
        line.contains("ERROR")
            && line.contains("blosc/zlib_shuffle offset 20480 size 4096: ")
            && line.contains("zlib_shuffle/1.0: chunk [1, 0]"),
        "{line}"
    );
    drop((f, f2));
    m.stop();
}

#[test]
fn mmap_reads_like_numpy_memmap() {
    let m = Mount::start(&fixtures(), &[]);
    let mut checked = 0;
    for case in cases().iter().filter(|c| c.expected.len() >= 8192) {
        let f = File::open(m.path(&case.path)).unwrap();
        let len = case.expected.len();
        // numpy.memmap(mode="r") maps the file shared and read-only.
        // SAFETY: a fresh mapping of an open file; it is only read within
        // its length, and unmapped below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(
            ptr,
            libc::MAP_FAILED,
            "{}: {}",
            case.path,
            std::io::Error::last_os_error()
        );
        // SAFETY: the mapping is `len` readable bytes.
        let mapped = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
        // Random access first (page faults in any order), then the whole.
        let mut rng = Lcg(len as u64);
        for _ in 0..50 {
            let i = rng.next(len as u64) as usize;
            assert_eq!(mapped[i], case.expected[i], "{} byte {i}", case.path);
        }
        assert!(
            mapped == &case.expected[..],
            "{}: mapped bytes differ",
            case.path
        );
        // SAFETY: unmapping the mapping made above.
        assert_eq!(unsafe { libc::munmap(ptr, len) }, 0);
        checked += 1;
    }
    assert!(checked >= 5);
    m.stop();
}

#[test]
fn external_unmount_and_busy_unmount_exit_cleanly() {
    // fusermount3 -u (or umount) from outside: the daemon notices and
    // exits 0.
    let mut m = Mount::start(&fixtures().join("v3"), &[]);
    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(&m.mnt)
        .status()
        .or_else(|_| Command::new("umount").arg(&m.mnt).status())
        .unwrap();
    assert!(status.success());
    let status = m.wait_exit();
    assert!(status.success(), "{status}:\n{}", m.log());
    assert!(!is_mount_point(&m.mnt));

    // SIGTERM while a file is open: the mount is detached at once, the
    // daemon keeps serving the open file and exits 0 when it is closed.
    let mut m = Mount::start(&fixtures().join("v3"), &[]);
    let f = File::open(m.path("root_array.zarr")).unwrap();
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(m.pid(), libc::SIGTERM) }, 0);
    let deadline = Instant::now() + TIMEOUT;
    while is_mount_point(&m.mnt) {
        assert!(Instant::now() < deadline, "not detached:\n{}", m.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut buf = [0u8; 64];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 64);
    drop(f);
    let status = m.wait_exit();
    assert!(status.success(), "{status}:\n{}", m.log());
    assert!(m.log().contains("detaching it lazily"), "{}", m.log());
}

#[test]
fn stale_mount_point_is_cleared_by_the_next_mount() {
    let mut m = Mount::start(&fixtures().join("v3"), &[]);
    let mnt = m.mnt.clone();
    let log = m.log.clone();
    // The daemon dies without unmounting (OOM killer, kill -9).
    let status = m.signal_and_wait(libc::SIGKILL);
    assert!(!status.success());
    let err = std::fs::read_dir(&mnt).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN), "{err}");

    // The dead daemon's guard must not detach the stale mount (nor the
    // new one): the next `slabfs mount` is what is under test.
    let dir = m._dir.take();
    m.mnt = PathBuf::from("/nonexistent/slabfs-test");
    drop(m);

    let mut again = Mount::spawn(&fixtures().join("v3"), &mnt, &log, &[]);
    again._dir = dir;
    again.wait_live();
    let expected = ls(&fixtures().join("v3"));
    let root = &expected
        .keys()
        .find(|p| p.as_str() == "root_array.zarr")
        .unwrap();
    assert_eq!(
        std::fs::metadata(again.path(root)).unwrap().len(),
        expected[root.as_str()]
    );
    let text = again.log();
    assert!(
        text.lines()
            .any(|l| l.contains("WARN") && l.contains("stale") && l.contains("not connected")),
        "no stale-mount log line:\n{text}"
    );
    again.stop();
}

#[test]
fn a_live_mount_point_is_not_mounted_over() {
    let m = Mount::start(&fixtures().join("v3"), &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .arg("mount")
        .arg(fixtures().join("v2"))
        .arg(&m.mnt)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("already a live FUSE mount"), "{err}");
    // The first mount is untouched.
    assert!(m.path("root_array.zarr").is_file());
    m.stop();
}

#[test]
fn unsupported_ioctls_get_enotty_quietly() {
    // Every Python open() asks TCGETS (isatty); the daemon answers ENOTTY,
    // as a regular file system does, and logs the first one at debug
    // level only: no "[Not Implemented] ioctl" warning per call.
    let m = Mount::start(&fixtures(), &["--log-level", "debug"]);
    let f = File::open(m.path("v2/compressors.zarr/blosc/zlib_shuffle")).unwrap();
    for _ in 0..3 {
        let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: a valid open fd and a termios-sized buffer for TCGETS.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), libc::TCGETS, termios.as_mut_ptr()) };
        let err = std::io::Error::last_os_error();
        assert_eq!(r, -1);
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY), "{err}");
    }
    // What Python sees.
    let py = Command::new("python3")
        .arg("-c")
        .arg("import os, sys; f = open(sys.argv[1], 'rb'); print(os.isatty(f.fileno()), len(f.read()))")
        .arg(m.path("v2/compressors.zarr/blosc/zlib_shuffle"))
        .output()
        .unwrap();
    assert!(py.status.success(), "{py:?}");
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), "False 32400");
    drop(f);
    let log = m.log();
    assert!(!log.contains("Not Implemented"), "{log}");
    assert_eq!(log.matches("answered ENOTTY").count(), 1, "{log}");
    m.stop();
}
