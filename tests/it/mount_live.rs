//! The mount's live side, for real: sources changed by zarr-python while
//! mounted (live refresh), the `.slabfs/stats` control file, and the
//! `.npy` view read by NumPy itself.
//!
//! Like tests/it/mount.rs, each test starts `slabfs mount` as a child process
//! on a fresh mount point and tears it down with a drop guard. The data
//! and the expected bytes come from zarr-python and NumPy (the project
//! venv, `scripts/venv.sh`; or set `SLABFS_PYTHON` to a python with zarr 3
//! and numpy): a writer independent of slabfs, running while the mount is
//! live, which is the situation under test.

use crate::common;
use common::mount::{Mount, copy_tree};

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a change may take to show with `--refresh 1`: a refresh
/// interval, plus the pass itself, with a wide margin for a loaded
/// machine. Polling stops as soon as the change is visible.
const REFRESH_DEADLINE: Duration = Duration::from_secs(15);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr")
}

// ---------------------------------------------------------------------------
// Python (zarr-python, NumPy)
// ---------------------------------------------------------------------------

fn python() -> PathBuf {
    common::python()
}

/// Run `script` with `args` (sys.argv[1:]); its stdout.
pub(crate) fn py(script: &str, args: &[&OsStr]) -> String {
    let out = common::python::Python::new()
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every array of the Zarr group at argv[1], as zarr-python reads it, in
/// native byte order, written to argv[2]/<path with / as __>.bin.
const DUMP: &str = r#"
import sys, os, zarr, numpy as np
g = zarr.open_group(sys.argv[1], mode="r")
def walk(group, prefix):
    for name, a in group.arrays():
        data = np.ascontiguousarray(a[...])
        data = data.astype(data.dtype.newbyteorder("="))
        with open(os.path.join(sys.argv[2], (prefix + name).replace("/", "__") + ".bin"), "wb") as f:
            f.write(data.tobytes())
    for name, sub in group.groups():
        walk(sub, prefix + name + "/")
walk(g, "")
"#;

/// What zarr-python reads from the group at `store`: array path -> bytes.
fn zarr_python_reads(store: &Path) -> BTreeMap<String, Vec<u8>> {
    let out = tempfile::tempdir().unwrap();
    py(DUMP, &[store.as_os_str(), out.path().as_os_str()]);
    let mut arrays = BTreeMap::new();
    for e in std::fs::read_dir(out.path()).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let path = name.strip_suffix(".bin").unwrap().replace("__", "/");
        arrays.insert(path, std::fs::read(e.path()).unwrap());
    }
    arrays
}

// ---------------------------------------------------------------------------
// The daemon under test (as in tests/it/mount.rs)
// ---------------------------------------------------------------------------

pub(crate) fn stats(m: &Mount) -> Value {
    serde_json::from_slice(&std::fs::read(m.path(".slabfs/stats")).unwrap()).unwrap()
}

/// The whole file through `f` (an fd opened at any time), by `pread`.
fn pread_all(f: &File, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len + 4096];
    let mut n = 0;
    loop {
        let got = f.read_at(&mut buf[n..], n as u64).unwrap();
        if got == 0 {
            break;
        }
        n += got;
    }
    buf.truncate(n);
    buf
}

// ---------------------------------------------------------------------------
// Live refresh
// ---------------------------------------------------------------------------

const CREATE: &str = r#"
import sys, zarr, numpy as np
g = zarr.open_group(sys.argv[1], mode="w")
a = g.create_array("grow", shape=(10, 6), chunks=(4, 4), dtype="f8", fill_value=np.nan)
a[...] = np.arange(60, dtype="f8").reshape(10, 6) / 4
r = g.create_array("rewrite", shape=(20,), chunks=(5,), dtype="i4", fill_value=0)
r[...] = np.arange(20, dtype="i4") * 10
d = g.create_array("doomed", shape=(8,), chunks=(4,), dtype="u1", fill_value=0)
d[...] = 3
"#;

const CHANGE: &str = r#"
import sys, zarr, numpy as np
g = zarr.open_group(sys.argv[1], mode="r+")
a = g["grow"]
a.resize((16, 6))
a[10:] = 1000 + np.arange(36, dtype="f8").reshape(6, 6)
g["rewrite"][5:12] = -7
f = g.create_array("fresh", shape=(7,), chunks=(3,), dtype="i2", fill_value=0)
f[...] = np.arange(1, 8, dtype="i2")
del g["doomed"]
"#;

#[test]
fn zarr_python_changes_show_without_remounting() {
    let src = tempfile::tempdir().unwrap();
    let store = src.path().join("data.zarr");
    py(CREATE, &[store.as_os_str()]);
    let before = zarr_python_reads(&store);
    assert_eq!(before.len(), 3);

    let m = Mount::start(src.path(), &["--refresh", "1"]);
    let file = |name: &str| m.path(&format!("data.zarr/{name}"));
    for (name, bytes) in &before {
        assert!(
            std::fs::read(file(name)).unwrap() == *bytes,
            "{name} before"
        );
    }
    let ino_grow = std::fs::metadata(file("grow")).unwrap().ino();
    // Descriptors opened before the change, their pages cached, and a
    // shared mapping (numpy.memmap) of one of them.
    let f_grow = File::open(file("grow")).unwrap();
    let f_rewrite = File::open(file("rewrite")).unwrap();
    assert!(pread_all(&f_grow, 480) == before["grow"]);
    assert!(pread_all(&f_rewrite, 80) == before["rewrite"]);
    // SAFETY: a fresh read-only mapping of an open file, read only within
    // its 80 bytes, unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            80,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f_rewrite.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    // SAFETY: the mapping is 80 readable bytes (the file's size).
    let mapped = || unsafe { std::slice::from_raw_parts(map.cast::<u8>(), 80) }.to_vec();
    assert!(mapped() == before["rewrite"]);

    py(CHANGE, &[store.as_os_str()]);
    let after = zarr_python_reads(&store);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        ["fresh", "grow", "rewrite"]
    );
    assert_eq!(after["grow"].len(), 16 * 6 * 8);

    // Poll (fresh opens) until the mount shows all of it.
    let deadline = Instant::now() + REFRESH_DEADLINE;
    let shows_all = || {
        after
            .iter()
            .all(|(name, bytes)| std::fs::read(file(name)).ok().as_ref() == Some(bytes))
            && !file("doomed").exists()
            && !file("doomed.json").exists()
    };
    while !shows_all() {
        assert!(
            Instant::now() < deadline,
            "the mount did not follow the change within {REFRESH_DEADLINE:?}:\n{}",
            m.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Sizes and sidecars follow; the inode stays.
    let md = std::fs::metadata(file("grow")).unwrap();
    assert_eq!((md.len(), md.ino()), (16 * 6 * 8, ino_grow));
    let side: Value = serde_json::from_slice(&std::fs::read(file("grow.json")).unwrap()).unwrap();
    assert_eq!(side["shape"], serde_json::json!([16, 6]));
    let names: Vec<String> = std::fs::read_dir(m.path("data.zarr"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        names,
        [
            "fresh",
            "fresh.json",
            "grow",
            "grow.json",
            "rewrite",
            "rewrite.json"
        ]
    );
    // The descriptors opened before the change read the new bytes: the
    // kernel's pages and sizes were invalidated, not just new opens.
    assert!(pread_all(&f_grow, 768) == after["grow"], "old fd of grow");
    assert!(
        pread_all(&f_rewrite, 80) == after["rewrite"],
        "old fd of rewrite"
    );
    assert!(mapped() == after["rewrite"], "mapping of rewrite");
    // SAFETY: unmapping the mapping made above.
    assert_eq!(unsafe { libc::munmap(map, 80) }, 0);

    let log = m.log();
    assert!(
        log.lines().any(|l| l.contains("INFO")
            && l.contains("refresh of")
            && l.contains("data.zarr/fresh")),
        "no refresh log line:\n{log}"
    );
    let doc = stats(&m);
    assert!(doc["refresh"]["changes"].as_u64().unwrap() >= 4, "{doc}");
    assert_eq!(doc["refresh"]["interval_seconds"], 1.0);
    drop((f_grow, f_rewrite));
    m.stop();
}

// ---------------------------------------------------------------------------
// Watching (inotify): changes re-loaded as they happen, without walks
// ---------------------------------------------------------------------------

/// Classic netCDF files written by SciPy's writer: argv[1:] are pairs
/// PATH VALUE, each file a float32 variable v = arange(4) + VALUE.
const WRITE_NC: &str = r#"
import sys, numpy as np
from scipy.io import netcdf_file
args = sys.argv[1:]
for path, value in zip(args[0::2], args[1::2]):
    f = netcdf_file(path, "w", version=1)
    f.createDimension("x", 4)
    v = f.createVariable("v", "f4", ("x",))
    v[:] = np.arange(4, dtype="f4") + float(value)
    f.close()
"#;

/// The bytes SciPy wrote for each value (its bits) so far in this run.
static NC_WRITTEN: std::sync::Mutex<BTreeMap<u32, Vec<u8>>> =
    std::sync::Mutex::new(BTreeMap::new());

/// Each `(path, value)` as a classic netCDF file SciPy wrote ([`WRITE_NC`]),
/// written beside its name and renamed into place as careful writers do.
/// SciPy writes each value once per run, all missing ones in one Python
/// (its start and imports were a second of CPU per call, 20 calls a run);
/// its output is the same bytes every time (no time stamp in the file),
/// so a value written before is copied from those bytes.
pub(crate) fn write_nc(files: &[(PathBuf, f32)]) {
    let mut written = NC_WRITTEN.lock().unwrap_or_else(|p| p.into_inner());
    let missing: std::collections::BTreeSet<u32> = files
        .iter()
        .map(|(_, v)| v.to_bits())
        .filter(|b| !written.contains_key(b))
        .collect();
    if !missing.is_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        for &b in &missing {
            args.push(tmp.path().join(format!("{b}.nc")).into());
            args.push(f32::from_bits(b).to_string().into());
        }
        let args: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        py(WRITE_NC, &args);
        for b in missing {
            written.insert(
                b,
                std::fs::read(tmp.path().join(format!("{b}.nc"))).unwrap(),
            );
        }
    }
    for (path, value) in files {
        let part = path.with_extension("nc.part");
        std::fs::write(&part, &written[&value.to_bits()]).unwrap();
        std::fs::rename(&part, path).unwrap();
    }
}

/// What the mount serves for `v` of a file [`write_nc`] wrote with `value`.
pub(crate) fn nc_bytes(value: f32) -> Vec<u8> {
    (0..4)
        .flat_map(|i| (i as f32 + value).to_ne_bytes())
        .collect()
}

fn refresh_stat(m: &Mount, key: &str) -> Value {
    stats(m)["refresh"][key].clone()
}

/// Poll `done` until it holds, failing with the daemon's log after `limit`.
/// Returns how long it took.
pub(crate) fn wait_for(
    m: &Mount,
    what: &str,
    limit: Duration,
    done: impl Fn() -> bool,
) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}; stats {}\n{}",
            stats(m),
            m.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// How long the watcher may take. It usually takes a fraction of a second
/// (a 250 ms settling delay and the re-load); the margin is for a loaded
/// machine. The tests prove it was the watcher by the walk count, not by
/// the time.
pub(crate) const WATCH_DEADLINE: Duration = Duration::from_secs(10);

const ZARR_STORE: &str = r#"
import sys, zarr, numpy as np
g = zarr.open_group(sys.argv[1], mode="w")
x = g.create_array("x", shape=(20,), chunks=(5,), dtype="i4", fill_value=0)
x[...] = np.arange(20, dtype="i4") * 10
"#;

#[test]
fn watched_changes_show_without_any_walk() {
    let src = tempfile::tempdir().unwrap();
    let root = src.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("runs")).unwrap();
    write_nc(&[(root.join("runs/a.nc"), 1.0)]);
    let store = root.join("s.zarr");
    py(ZARR_STORE, &[store.as_os_str()]);
    let before = zarr_python_reads(&store);

    // Periodic walks an hour apart, no safety net: only the watcher (and
    // the one catch-up walk at start) can explain what follows.
    let m = Mount::start(&root, &["--refresh", "3600", "--rescan", "0"]);
    // Watching, and the catch-up walk done (counted in `walks` when it
    // starts, in `runs` when it ends).
    wait_for(&m, "watching", WATCH_DEADLINE, || {
        refresh_stat(&m, "watching") == true
            && refresh_stat(&m, "walks") == 1
            && refresh_stat(&m, "runs").as_u64() >= Some(1)
    });
    assert_eq!(std::fs::read(m.path("runs/a.nc/v")).unwrap(), nc_bytes(1.0));
    assert!(std::fs::read(m.path("s.zarr/x")).unwrap() == before["x"]);

    // A new file.
    write_nc(&[(root.join("runs/b.nc"), 2.0)]);
    let took = wait_for(&m, "new file", WATCH_DEADLINE, || {
        std::fs::read(m.path("runs/b.nc/v")).ok() == Some(nc_bytes(2.0))
    });
    eprintln!("new file shown {took:?} after its writer finished");

    // A Zarr chunk rewritten: fresh through a descriptor opened before.
    let f_x = File::open(m.path("s.zarr/x")).unwrap();
    assert!(pread_all(&f_x, 80) == before["x"]);
    py(
        "import sys, zarr; a = zarr.open_array(sys.argv[1], mode='r+'); a[5:10] = -7",
        &[store.join("x").as_os_str()],
    );
    let after = zarr_python_reads(&store);
    assert!(after["x"] != before["x"]);
    wait_for(&m, "rewritten chunk", WATCH_DEADLINE, || {
        std::fs::read(m.path("s.zarr/x")).unwrap() == after["x"]
    });
    assert!(pread_all(&f_x, 80) == after["x"], "old descriptor");
    drop(f_x);

    // A removed file.
    std::fs::remove_file(root.join("runs/a.nc")).unwrap();
    wait_for(&m, "removed file", WATCH_DEADLINE, || {
        !m.path("runs/a.nc").exists() && !m.path("runs/a.nc/v").exists()
    });

    // A new directory tree with a file, then a second file in it: the new
    // directory was watched as it appeared.
    std::fs::create_dir_all(root.join("runs/2026/01")).unwrap();
    write_nc(&[(root.join("runs/2026/01/c.nc"), 3.0)]);
    wait_for(&m, "file in a new directory", WATCH_DEADLINE, || {
        std::fs::read(m.path("runs/2026/01/c.nc/v")).ok() == Some(nc_bytes(3.0))
    });
    write_nc(&[(root.join("runs/2026/01/d.nc"), 4.0)]);
    wait_for(
        &m,
        "second file in the new directory",
        WATCH_DEADLINE,
        || std::fs::read(m.path("runs/2026/01/d.nc/v")).ok() == Some(nc_bytes(4.0)),
    );

    // root, runs, s.zarr, s.zarr/x, s.zarr/x/c, runs/2026, runs/2026/01.
    // Waited for: the files above are read from the disk once looked up,
    // which can be before the watcher has taken the new directories'
    // events (a run failed here, counting 5, 1.2 s after the mount).
    wait_for(&m, "the new directories watched", WATCH_DEADLINE, || {
        refresh_stat(&m, "watched_directories").as_u64() >= Some(7)
    });
    let doc = stats(&m);
    assert_eq!(doc["refresh"]["walks"], 1, "a walk ran: {doc}");
    assert_eq!(doc["refresh"]["watching"], true, "{doc}");
    // Arrays of open datasets that changed: the rewritten chunk's array
    // and the removed file's (a new file is listed from the disk; no
    // refresh opens it).
    assert!(doc["refresh"]["changes"].as_u64().unwrap() >= 2, "{doc}");
    m.stop();
}

/// Regression (issue 16, item 4): an idle mount re-loaded every dataset
/// of its source every `--refresh` interval, forever (13% of a core for
/// 3,000 files at `--refresh 1`). Watched, an idle mount re-loads nothing.
/// Counted, not timed: the old daemon counts one pass a second here.
#[test]
fn an_idle_watched_mount_does_not_reload() {
    let src = tempfile::tempdir().unwrap();
    let root = src.path().canonicalize().unwrap();
    let mut files = Vec::new();
    for d in 0..4 {
        std::fs::create_dir(root.join(format!("d{d}"))).unwrap();
        for i in 0..50 {
            files.push((root.join(format!("d{d}/f{i:02}.nc")), (d * 50 + i) as f32));
        }
    }
    write_nc(&files);
    let m = Mount::start(&root, &["--refresh", "1"]);
    // The first pass is done (watched: the catch-up walk).
    wait_for(&m, "first pass", REFRESH_DEADLINE, || {
        refresh_stat(&m, "runs").as_u64() >= Some(1)
    });
    std::thread::sleep(Duration::from_millis(500));
    let runs = refresh_stat(&m, "runs");
    std::thread::sleep(Duration::from_secs(5));
    let doc = stats(&m);
    assert_eq!(
        doc["refresh"]["runs"], runs,
        "an idle mount re-loaded its source: {doc}"
    );
    // Still following changes, by re-loading what changed only.
    write_nc(&[(root.join("d2/new.nc"), 7.0)]);
    wait_for(&m, "new file", WATCH_DEADLINE, || {
        std::fs::read(m.path("d2/new.nc/v")).ok() == Some(nc_bytes(7.0))
    });
    assert_eq!(refresh_stat(&m, "walks"), 1);
    m.stop();
}

/// The fallback: not watching (asked for, or more directories than the
/// watch cap), the periodic walk finds the changes as it always did.
#[test]
fn unwatched_mounts_find_changes_by_walking() {
    for args in [
        &["--watch", "walk", "--refresh", "1"][..],
        &["--max-watches", "1", "--refresh", "1"][..],
    ] {
        let src = tempfile::tempdir().unwrap();
        let root = src.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("runs")).unwrap();
        write_nc(&[(root.join("runs/a.nc"), 1.0)]);
        let m = Mount::start(&root, args);
        // A new file is listed from the disk, walk or not.
        write_nc(&[(root.join("runs/b.nc"), 2.0)]);
        assert_eq!(std::fs::read(m.path("runs/b.nc/v")).unwrap(), nc_bytes(2.0));
        // A dataset open when it changes: found by the periodic walk of
        // the open datasets.
        assert_eq!(std::fs::read(m.path("runs/a.nc/v")).unwrap(), nc_bytes(1.0));
        write_nc(&[(root.join("runs/a.nc"), 3.0)]);
        wait_for(&m, "changed file found by a walk", REFRESH_DEADLINE, || {
            std::fs::read(m.path("runs/a.nc/v")).ok() == Some(nc_bytes(3.0))
        });
        let doc = stats(&m);
        assert_eq!(doc["refresh"]["watching"], false, "{args:?}: {doc}");
        assert!(doc["refresh"]["walks"].as_u64().unwrap() >= 1, "{doc}");
        if args[0] == "--max-watches" {
            let log = m.log();
            let said: Vec<&str> = log.lines().filter(|l| l.contains("not watching")).collect();
            assert_eq!(said.len(), 1, "{log}");
            assert!(
                said[0].contains("more than 1 directories") && said[0].contains("every 1 s"),
                "{log}"
            );
        }
        m.stop();
    }
}

// ---------------------------------------------------------------------------
// .slabfs/stats
// ---------------------------------------------------------------------------

#[test]
fn stats_file_is_json_and_counts_reads_and_errors() {
    // A store with one corrupt chunk (see tests/it/mount.rs for its layout).
    let src = tempfile::tempdir().unwrap();
    let store = src.path().join("compressors.zarr");
    copy_tree(&fixtures().join("v2/compressors.zarr"), &store);
    let chunk = store.join("blosc/zlib_shuffle/1.0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[16..mid] {
        *b ^= 0x5a;
    }
    std::fs::write(&chunk, &bytes).unwrap();

    let m = Mount::start(&store, &["--refresh", "0", "--cache-size", "64MiB"]);
    let md = std::fs::metadata(m.path(".slabfs/stats")).unwrap();
    assert!(md.is_file());
    assert_eq!((md.len(), md.mode() & 0o777), (0, 0o444));
    assert!(std::fs::metadata(m.path(".slabfs")).unwrap().is_dir());

    // `cat .slabfs/stats | python -m json.tool`
    let mut cat = Command::new("cat")
        .arg(m.path(".slabfs/stats"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let tool = Command::new(python())
        .args(["-m", "json.tool"])
        .stdin(cat.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(cat.wait().unwrap().success());
    assert!(
        tool.status.success() && !tool.stdout.is_empty(),
        "json.tool: {}",
        String::from_utf8_lossy(&tool.stderr)
    );

    let s0 = stats(&m);
    for key in ["hits", "misses", "decodes", "evictions", "bytes", "budget"] {
        assert!(s0["cache"][key].is_u64(), "cache.{key}: {s0}");
    }
    assert_eq!(s0["cache"]["budget"], 64 << 20);
    // The buffer pool: a quarter of the 64 MiB cache.
    for key in ["bytes", "cap", "hits", "misses"] {
        assert!(s0["buffers"][key].is_u64(), "buffers.{key}: {s0}");
    }
    assert_eq!(s0["buffers"]["cap"], 16 << 20);
    assert_eq!(s0["refresh"]["interval_seconds"], Value::Null);
    let expected = std::fs::read(fixtures().join("expected/v2_blosc_zlib_noshuffle.bin")).unwrap();
    assert!(std::fs::read(m.path("blosc/zlib_noshuffle")).unwrap() == expected);
    let s1 = stats(&m);
    let n = |doc: &Value, a: &str, b: &str| doc[a][b].as_u64().unwrap();
    assert!(n(&s1, "reads", "requests") > n(&s0, "reads", "requests"));
    assert!(n(&s1, "reads", "bytes") >= n(&s0, "reads", "bytes") + expected.len() as u64);
    assert!(n(&s1, "cache", "decodes") > n(&s0, "cache", "decodes"));
    assert!(n(&s1, "cache", "misses") > n(&s0, "cache", "misses"));
    assert!(n(&s1, "read_latency_us", "count") > n(&s0, "read_latency_us", "count"));
    let lat = &s1["read_latency_us"];
    assert!(lat["p50"].as_u64() <= lat["p90"].as_u64());
    assert!(lat["p99"].as_u64() <= lat["max"].as_u64());
    assert!(s1["errors"].get("EIO").is_none(), "{s1}");

    // The corrupt chunk: EIO for the reader, counted by kind.
    let err = std::fs::read(m.path("blosc/zlib_shuffle")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    let s2 = stats(&m);
    assert!(n(&s2, "errors", "EIO") >= 1, "{s2}");
    assert!(n(&s2, "reads", "requests") >= n(&s1, "reads", "requests"));
    m.stop();
}

// ---------------------------------------------------------------------------
// The .npy view, read by NumPy
// ---------------------------------------------------------------------------

const NPY_DATA: &str = r#"
import sys, zarr, numpy as np
g = zarr.open_group(sys.argv[1], mode="w")
def put(name, data, chunks, **kw):
    a = g.create_array(name, shape=data.shape, chunks=chunks, dtype=data.dtype, **kw)
    a[...] = data
put("f8_2d", np.arange(35, dtype="f8").reshape(7, 5) / 3, (3, 2), fill_value=np.nan)
put("i2_3d", (np.arange(60, dtype="i2") - 30).reshape(3, 4, 5), (2, 2, 2), fill_value=0)
put("u1_1d", (np.arange(1000) % 251).astype("u1"), (64,), fill_value=0)
put("bool_1d", np.arange(9) % 2 == 0, (4,), fill_value=False)
put("c8_1d", (np.arange(4) + 1j * np.arange(4)).astype("c8"), (3,), fill_value=0)
put("f4_0d", np.array(2.5, dtype="f4"), (), fill_value=0.0)
put("grp/i8_2d", np.arange(12, dtype="i8").reshape(3, 4) * -1000000007, (2, 3), fill_value=0)
"#;

/// argv[1] the store, argv[2] the mount: every array's NAME.npy loads
/// (plain and memory-mapped) as exactly what zarr-python reads.
const NPY_CHECK: &str = r#"
import sys, os, zarr, numpy as np
g = zarr.open_group(sys.argv[1], mode="r")
checked = []
def walk(group, prefix):
    for name, a in group.arrays():
        want = np.asarray(a[...])
        path = os.path.join(sys.argv[2], prefix + name + ".npy")
        for mode in (None, "r"):
            got = np.load(path, mmap_mode=mode)
            assert got.shape == want.shape, (path, mode, got.shape, want.shape)
            assert got.dtype == want.dtype.newbyteorder("="), (path, mode, got.dtype, want.dtype)
            assert got.tobytes() == want.astype(got.dtype).tobytes(), (path, mode)
            if mode == "r":
                assert isinstance(got, np.memmap), (path, type(got))
        checked.append(prefix + name)
    for name, sub in group.groups():
        walk(sub, prefix + name + "/")
walk(g, "")
print(len(checked))
"#;

#[test]
fn npy_view_loads_in_numpy_plain_and_memory_mapped() {
    let src = tempfile::tempdir().unwrap();
    let store = src.path().join("views.zarr");
    py(NPY_DATA, &[store.as_os_str()]);
    let m = Mount::start(&store, &["--views", "raw,json,npy", "--refresh", "0"]);
    assert!(m.path("f8_2d").is_file() && m.path("f8_2d.json").is_file());
    let out = py(NPY_CHECK, &[store.as_os_str(), m.mnt.as_os_str()]);
    assert_eq!(out.trim(), "7", "arrays checked");
    // The .npy is the header followed by exactly the raw file.
    let raw = std::fs::read(m.path("grp/i8_2d")).unwrap();
    let npy = std::fs::read(m.path("grp/i8_2d.npy")).unwrap();
    assert!(npy.len() > raw.len() && npy.ends_with(&raw));
    assert_eq!((npy.len() - raw.len()) % 64, 0);
    m.stop();
}

/// Operators keep mounts for months with a refresh every few seconds: what
/// the loaders find wrong (a bad aggregation descriptor, a missing
/// fragment) is logged when the mount starts, not again on every refresh.
#[test]
fn load_warnings_are_not_repeated_by_every_refresh() {
    let nca = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nca");
    // Walked every second (watched, an idle mount would not re-load at
    // all, which proves nothing here).
    let m = Mount::start(&nca, &["--refresh", "1", "--watch", "walk"]);
    let deadline = Instant::now() + REFRESH_DEADLINE * 2;
    // Datasets open when used: every dataset is tried at each walk of
    // the mount (one that failed is tried again at its next use).
    let walk_all = || {
        let _ = Command::new("find").arg(&m.mnt).output();
    };
    walk_all();
    while stats(&m)["refresh"]["runs"].as_u64().unwrap_or(0) < 3 {
        walk_all();
        assert!(
            Instant::now() < deadline,
            "fewer than 3 refreshes:\n{}",
            m.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = m.log();
    for what in ["bad/overlap.nca.json", "frag/gone.nc does not exist"] {
        // One line for each problem (issue 42: the loader and the mount
        // each logged it), and once over all the refreshes.
        let n = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains(what))
            .count();
        assert_eq!(n, 1, "{what:?} logged {n} times over 3 refreshes:\n{log}");
    }
    m.stop();
}
