//! HDF5 filter plugins (src/codec/hdf5_plugin.rs): datasets written by
//! h5py with the zfp, SZ3 and bitshuffle filters of the PyPI package
//! `hdf5plugin` (tests/fixtures/hdf5_plugins/generate.py), read through
//! the very plugin libraries that package ships (found in the project
//! venv, never committed) and compared byte for byte with what h5py
//! decodes with them: in the library, through `slabfs cat` and a real
//! mount. Without `--hdf5-plugins`, or with a plugin directory that lacks
//! the filter, the datasets are still listed and their reads fail (EIO)
//! with a message naming the filter id and the directories, while the
//! rest keeps being served; a corrupt chunk fails its own reads only.
//! Where a test needs a filter without a built-in codec it uses SZ3
//! (32024), the least likely to get one.

use crate::common;
use common::check_ranges;
use common::mount::Mount;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use slabfs::codec::hdf5_plugin::{self, Plugins};
use slabfs::codec::{CodecError, DecodedSize};
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;
use slabfs::fs::error::ToErrno;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hdf5_plugins")
}

fn data(file: &str) -> PathBuf {
    fixtures().join("data").join(file)
}

fn expected(file: &str, name: &str) -> Vec<u8> {
    std::fs::read(
        fixtures()
            .join("expected")
            .join(format!("{file}.{name}.bin")),
    )
    .unwrap()
}

/// (file, dataset, filter id) of every fixture dataset.
fn manifest() -> Vec<(String, String, Option<u64>)> {
    let raw = std::fs::read(fixtures().join("manifest.json")).unwrap();
    let v: Value = serde_json::from_slice(&raw).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|d| d.get("chunk").is_none())
        .map(|d| {
            (
                d["file"].as_str().unwrap().to_string(),
                d["name"].as_str().unwrap().to_string(),
                d["filter"].as_u64(),
            )
        })
        .collect()
}

/// `hdf5plugin.PLUGIN_PATH` of the project venv: where the plugin
/// libraries h5py wrote the fixtures with live.
fn plugin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = common::python::Python::new()
            .args(["-c", "import hdf5plugin; print(hdf5plugin.PLUGIN_PATH)"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hdf5plugin (scripts/requirements.txt) is needed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        assert!(dir.join("libh5zfp.so").is_file(), "{}", dir.display());
        dir
    })
}

/// The raw chunk of the manifest: the filter's parameters as the file
/// stores them, the stored bytes (h5py's `read_direct_chunk`) and what
/// h5py decodes them to.
fn raw_chunk() -> (u32, Vec<u32>, Vec<u8>, Vec<u8>) {
    let raw = std::fs::read(fixtures().join("manifest.json")).unwrap();
    let v: Value = serde_json::from_slice(&raw).unwrap();
    let c = v
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d.get("chunk").is_some())
        .unwrap();
    let name = c["chunk"].as_str().unwrap();
    let read = |ext: &str| std::fs::read(fixtures().join("expected").join(format!("{name}.{ext}")));
    (
        c["filter"].as_u64().unwrap() as u32,
        c["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap() as u32)
            .collect(),
        read("raw").unwrap(),
        read("bin").unwrap(),
    )
}

#[test]
fn the_plugin_codec_decodes_bounds_its_output_and_fails_cleanly() {
    let (id, params, stored, decoded) = raw_chunk();
    let plugins = Plugins::new(hdf5_plugin::Config::with_path(
        true,
        plugin_dir().as_os_str(),
    ));
    let p = plugins.find(id).unwrap();
    assert_eq!(p.id(), id);
    assert!(
        p.path().ends_with("libh5bshuf.so"),
        "{}",
        p.path().display()
    );
    let c = plugins.codec(id, &params);
    assert_eq!(c.name(), "hdf5-plugin:32008");
    let n = decoded.len();
    assert_eq!(
        c.decode(stored.clone(), DecodedSize::Exact(n)).unwrap(),
        decoded
    );
    assert_eq!(
        c.decode(stored.clone(), DecodedSize::AtMost(n)).unwrap(),
        decoded
    );
    // A result past the chain's limit is refused, not copied.
    let e = c
        .decode(stored.clone(), DecodedSize::AtMost(n - 1))
        .unwrap_err();
    assert!(matches!(e, CodecError::TooLarge { .. }), "{e}");
    // A damaged chunk of the same size (the corruption of corrupt.h5,
    // which h5py also fails on): an error naming the filter and library.
    let e = c
        .decode(vec![0xff; stored.len()], DecodedSize::Exact(n))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("HDF5 filter 32008") && msg.contains("libh5bshuf.so"),
        "{msg}"
    );
    // An empty chunk never reaches the plugin (it would read its header
    // past the buffer).
    let e = c.decode(Vec::new(), DecodedSize::Exact(n)).unwrap_err();
    assert!(e.to_string().contains("failed to decode"), "{e}");
    // Decodes from many threads at once (serialised per library) agree.
    let c = Arc::new(c);
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (c, stored, decoded) = (c.clone(), &stored, &decoded);
            s.spawn(move || {
                for _ in 0..200 {
                    let got = c.decode(stored.clone(), DecodedSize::Exact(n)).unwrap();
                    assert!(&got == decoded);
                }
            });
        }
    });
}

#[test]
fn plugins_anyone_may_write_are_not_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let lib = plugin_dir().join("libh5bshuf.so");
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("libh5bshuf.so");
    std::fs::copy(&lib, &copy).unwrap();
    let find = |dir: &Path| {
        Plugins::new(hdf5_plugin::Config::with_path(true, dir.as_os_str())).find(32008)
    };
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(find(tmp.path()).is_ok(), "the copy loads");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = find(tmp.path()).unwrap_err().to_string();
    assert!(e.contains("no plugin library provides it"), "{e}");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(
        find(tmp.path()).is_err(),
        "a world-writable directory is not searched"
    );
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
}

fn slabfs(args: &[&str], env_path: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_slabfs"));
    c.args(args).env_remove("RUST_LOG");
    match env_path {
        Some(p) => c.env(hdf5_plugin::PLUGIN_PATH_VAR, p),
        None => c.env_remove(hdf5_plugin::PLUGIN_PATH_VAR),
    };
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_library_reads_every_plugin_filter_as_h5py_does() {
    // The only test of this binary that configures the process (the CLI
    // does it once in slabfs; the others run the binary).
    hdf5_plugin::configure(hdf5_plugin::Config::with_path(
        true,
        plugin_dir().as_os_str(),
    ));
    let ds = dataset::Opener::new(Arc::new(ChunkCache::new(1 << 20)))
        .open(&data("plugins.h5"))
        .unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    let mut n = 0;
    for (file, name, _) in manifest().into_iter().filter(|m| m.0 == "plugins.h5") {
        let a = &ds.get(&name).unwrap_or_else(|| panic!("{name}")).array;
        check_ranges(a.as_ref(), &expected(&file, &name), 7, 40)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        n += 1;
    }
    assert_eq!(n, 6);

    // A corrupt chunk fails the reads that touch it, every time (nothing
    // failed is cached), and only those.
    let ds = dataset::Opener::new(Arc::new(ChunkCache::new(1 << 20)))
        .open(&data("corrupt.h5"))
        .unwrap();
    let bad = &ds.get("bad").unwrap().array;
    let want = expected("corrupt.h5", "bad");
    for _ in 0..2 {
        let mut buf = vec![0u8; 300];
        let e = read_at(bad.as_ref(), 200, &mut buf, Endian::Little).unwrap_err();
        assert_eq!(e.errno(), libc::EIO);
        let msg = e.to_string();
        assert!(msg.contains("corrupt.h5") && msg.contains("/bad"), "{msg}");
        // Through the plugin (or a built-in bitshuffle, should one come:
        // the codec-level test below pins the plugin).
        assert!(msg.contains("32008") || msg.contains("bitshuffle"), "{msg}");
    }
    // Bytes 256..512 are the bad chunk; both sides of it read.
    let mut buf = vec![0u8; 256];
    read_at(bad.as_ref(), 0, &mut buf, Endian::Little).unwrap();
    assert_eq!(buf, want[..256]);
    let mut buf = vec![0u8; 512];
    read_at(bad.as_ref(), 512, &mut buf, Endian::Little).unwrap();
    assert_eq!(buf, want[512..]);
    let good = &ds.get("good").unwrap().array;
    check_ranges(good.as_ref(), &expected("corrupt.h5", "good"), 3, 20).unwrap();
}

#[test]
fn slabfs_cat_decodes_with_the_plugins_of_hdf5_plugin_path() {
    let plugins = manifest();
    for (file, name, _) in plugins.iter().filter(|m| m.0 == "plugins.h5") {
        let path = data(file);
        let out = slabfs(
            &["cat", "--hdf5-plugins", path.to_str().unwrap(), name],
            Some(plugin_dir()),
        );
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert!(out.stdout == expected(file, name), "{name}");
    }
    // --hdf5-plugin-path instead of the variable, which is then ignored.
    let path = data("plugins.h5");
    let out = slabfs(
        &[
            "cat",
            "--hdf5-plugins",
            "--hdf5-plugin-path",
            plugin_dir().to_str().unwrap(),
            path.to_str().unwrap(),
            "zfp_rate",
        ],
        Some(Path::new("/nonexistent/plugins")),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout == expected("plugins.h5", "zfp_rate"));
}

#[test]
fn without_the_flag_datasets_are_listed_and_their_reads_fail() {
    let path = data("plugins.h5");
    let p = path.to_str().unwrap();
    // The variable alone is no consent: nothing is loaded.
    let out = slabfs(&["ls", p], Some(plugin_dir()));
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = String::from_utf8(out.stdout).unwrap();
    for (_, name, _) in manifest().iter().filter(|m| m.0 == "plugins.h5") {
        assert!(listed.contains(&format!("{name}\t")), "{name}: {listed}");
    }
    let out = slabfs(&["cat", p, "sz3"], Some(plugin_dir()));
    assert!(!out.status.success());
    let msg = stderr(&out);
    assert!(msg.contains("HDF5 filter 32024 (sz3)"), "{msg}");
    assert!(msg.contains("plugins are off"), "{msg}");
    assert!(msg.contains(plugin_dir().to_str().unwrap()), "{msg}");
    // Unset, HDF5's default directory is named.
    let out = slabfs(&["cat", p, "sz3"], None);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(hdf5_plugin::DEFAULT_PLUGIN_DIR),
        "{}",
        stderr(&out)
    );
    // A dataset that needs no plugin reads as ever.
    let out = slabfs(&["cat", p, "plain"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, expected("plugins.h5", "plain"));
    // --hdf5-plugin-path alone is refused (it would load nothing).
    let out = slabfs(&["cat", "--hdf5-plugin-path", "/x", p, "plain"], None);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--hdf5-plugins"), "{}", stderr(&out));
}

fn read_errno(path: &Path) -> Option<i32> {
    std::fs::read(path).err().and_then(|e| e.raw_os_error())
}

#[test]
fn a_mount_decodes_plugin_filters_and_survives_a_corrupt_chunk() {
    let m = Mount::start(
        &fixtures().join("data"),
        &[
            "--hdf5-plugins",
            "--hdf5-plugin-path",
            plugin_dir().to_str().unwrap(),
            "--byte-order",
            "little",
        ],
    );
    for (file, name, _) in manifest().iter().filter(|m| m.0 == "plugins.h5") {
        let got = std::fs::read(m.path(&format!("{file}/{name}"))).unwrap();
        assert!(got == expected(file, name), "{file}/{name}");
    }
    // The whole bad dataset fails (its file is one page: every read
    // touches the bad chunk), twice; the daemon carries on.
    assert_eq!(read_errno(&m.path("corrupt.h5/bad")), Some(libc::EIO));
    assert_eq!(read_errno(&m.path("corrupt.h5/bad")), Some(libc::EIO));
    let good = std::fs::read(m.path("corrupt.h5/good")).unwrap();
    assert_eq!(good, expected("corrupt.h5", "good"));
    let log = m.log();
    assert!(
        log.lines().any(|l| l.contains("corrupt.h5")
            && l.contains("/bad")
            && (l.contains("32008") || l.contains("bitshuffle"))),
        "{log}"
    );
    m.stop();
}

#[test]
fn a_mount_without_the_plugin_lists_and_fails_reads_with_one_line_each() {
    // Plugins on, but the directory lacks every filter.
    let empty = tempfile::tempdir().unwrap();
    let m = Mount::start(
        &fixtures().join("data"),
        &[
            "--hdf5-plugins",
            "--hdf5-plugin-path",
            empty.path().to_str().unwrap(),
        ],
    );
    let sz3 = m.path("plugins.h5/sz3");
    let len = std::fs::metadata(&sz3).unwrap().len();
    assert_eq!(len, 64 * 32 * 4, "listed with its size");
    let f = std::fs::File::open(&sz3).unwrap();
    let mut buf = [0u8; 16];
    for _ in 0..2 {
        let e = f.read_at(&mut buf, 100).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
    }
    drop(f);
    // The rest is served.
    let plain = std::fs::read(m.path("plugins.h5/plain")).unwrap();
    assert_eq!(plain, expected("plugins.h5", "plain"));
    let log = m.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("HDF5 filter 32024"))
        .collect();
    assert!(!lines.is_empty(), "{log}");
    for l in &lines {
        assert!(l.contains("no plugin library provides it"), "{l}");
        assert!(l.contains(empty.path().to_str().unwrap()), "{l}");
    }
    m.stop();

    // Plugins off: the same, the message saying how to turn them on.
    let m = Mount::start(&fixtures().join("data"), &[]);
    assert_eq!(read_errno(&m.path("plugins.h5/sz3")), Some(libc::EIO));
    assert_eq!(
        std::fs::read(m.path("plugins.h5/plain")).unwrap(),
        expected("plugins.h5", "plain")
    );
    let log = m.log();
    assert!(
        log.lines()
            .any(|l| l.contains("HDF5 filter 32024 (sz3)") && l.contains("--hdf5-plugins")),
        "{log}"
    );
    m.stop();
}
