//! A directory SOURCE is an archive whose datasets open when used (issue
//! 26): nothing is opened at mount, at most `--max-open-datasets` stay
//! open, inode numbers do not depend on what was opened first or evicted,
//! a dataset that fails to open fails alone, and one that changes while
//! closed shows its new bytes. Files written by SciPy's netCDF writer
//! ([`write_nc`]); bytes compared with what it wrote.

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::mount::Mount;
use crate::mount_live::{WATCH_DEADLINE, nc_bytes, py, stats, wait_for, write_nc};

/// `n` netCDF files `d{k}/f{i}.nc` (two directories), value `i`.
fn archive(n: usize) -> (tempfile::TempDir, PathBuf) {
    let src = tempfile::tempdir().unwrap();
    let root = src.path().canonicalize().unwrap();
    let mut files = Vec::new();
    for i in 0..n {
        let dir = root.join(format!("d{}", i % 2));
        std::fs::create_dir_all(&dir).unwrap();
        files.push((dir.join(format!("f{i:02}.nc")), i as f32));
    }
    write_nc(&files);
    (src, root)
}

fn rel(i: usize) -> String {
    format!("d{}/f{i:02}.nc", i % 2)
}

fn datasets(m: &Mount, key: &str) -> u64 {
    stats(m)["datasets"][key].as_u64().unwrap()
}

fn ino(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

#[test]
fn datasets_open_when_used_and_at_most_max_open_stay_open() {
    let (_src, root) = archive(12);
    let m = Mount::start(&root, &["--max-open-datasets", "3"]);
    assert_eq!(datasets(&m, "opens"), 0, "nothing opened at mount");
    // `ls -l` of the archive's directories: stat of every dataset, none
    // opened (a dataset is a directory whatever it holds).
    for d in ["", "d0", "d1"] {
        let out = Command::new("ls")
            .arg("-l")
            .arg(m.path(d))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let listed = std::fs::read_dir(m.path("d0")).unwrap().count();
    assert_eq!(listed, 6);
    assert_eq!(datasets(&m, "opens"), 0, "ls -l opened a dataset");

    // Inode numbers before any eviction.
    let first: Vec<u64> = (0..3)
        .map(|i| ino(&m.path(&format!("{}/v", rel(i)))))
        .collect();
    for i in 0..12 {
        let got = std::fs::read(m.path(&format!("{}/v", rel(i)))).unwrap();
        assert_eq!(got, nc_bytes(i as f32), "{}", rel(i));
    }
    let doc = stats(&m);
    assert_eq!(doc["datasets"]["max_open"], 3, "{doc}");
    assert!(doc["datasets"]["open"].as_u64().unwrap() <= 3, "{doc}");
    assert!(doc["datasets"]["evictions"].as_u64().unwrap() >= 9, "{doc}");
    // Evicted and opened again: the same numbers, the same bytes.
    for (i, &was) in first.iter().enumerate() {
        let path = m.path(&format!("{}/v", rel(i)));
        assert_eq!(std::fs::read(&path).unwrap(), nc_bytes(i as f32));
        assert_eq!(ino(&path), was, "{}", rel(i));
    }
    m.stop();
}

#[test]
fn inode_numbers_do_not_depend_on_the_order_of_use() {
    let (_src, root) = archive(4);
    let paths = [
        "d0/f00.nc/v",
        "d1/f01.nc",
        "d0/f02.nc/v.json",
        "d1/f03.nc/v",
        "d0",
    ];
    let m = Mount::start(&root, &[]);
    let forward: Vec<u64> = paths.iter().map(|p| ino(&m.path(p))).collect();
    m.stop();
    let m = Mount::start(&root, &[]);
    let mut backward: Vec<u64> = paths.iter().rev().map(|p| ino(&m.path(p))).collect();
    backward.reverse();
    m.stop();
    assert_eq!(forward, backward);
    let distinct: std::collections::BTreeSet<u64> = forward.iter().copied().collect();
    assert_eq!(distinct.len(), paths.len());
}

#[test]
fn a_dataset_that_fails_to_open_fails_alone_and_is_tried_again() {
    let (_src, root) = archive(2);
    std::fs::write(root.join("d0/bad.nc"), b"not a netCDF file at all").unwrap();
    let m = Mount::start(&root, &[]);
    let names: Vec<String> = std::fs::read_dir(m.path("d0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.contains(&"bad.nc".to_string()), "{names:?}");
    for _ in 0..2 {
        let err = std::fs::read_dir(m.path("d0/bad.nc")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    }
    assert_eq!(std::fs::read(m.path("d0/f00.nc/v")).unwrap(), nc_bytes(0.0));
    let log = m.log();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("bad.nc"))
        .collect();
    assert_eq!(said.len(), 1, "one warning naming the file:\n{log}");
    assert!(said[0].contains("not a netCDF file"), "{log}");
    assert!(datasets(&m, "failures") >= 2, "tried again, not cached");
    // Mended: shown at its next use.
    write_nc(&[(root.join("d0/bad.nc"), 5.0)]);
    wait_for(&m, "mended file", WATCH_DEADLINE, || {
        std::fs::read(m.path("d0/bad.nc/v")).ok() == Some(nc_bytes(5.0))
    });
    m.stop();
}

/// Regression: the kernel keeps pages and attributes of a dataset's files
/// after the daemon closed the dataset to make room; a change while it is
/// closed must reach them (the refresh invalidates what the kernel holds
/// of it), not wait for the attribute timeout or for ever.
#[test]
fn a_dataset_changed_while_closed_shows_its_new_bytes() {
    let (_src, root) = archive(2);
    let m = Mount::start(&root, &["--max-open-datasets", "1"]);
    let a = m.path("d0/f00.nc/v");
    // Held open across the change: its pages stay in the kernel.
    let held = std::fs::File::open(&a).unwrap();
    let pread = |f: &std::fs::File| {
        let mut buf = [0u8; 16];
        f.read_exact_at(&mut buf, 0).unwrap();
        buf.to_vec()
    };
    assert_eq!(pread(&held), nc_bytes(0.0));
    // Opening the other closes this one.
    assert_eq!(std::fs::read(m.path("d1/f01.nc/v")).unwrap(), nc_bytes(1.0));
    assert_eq!(datasets(&m, "open"), 1);
    write_nc(&[(root.join("d0/f00.nc"), 9.0)]);
    let took = wait_for(&m, "changed while closed", Duration::from_secs(3), || {
        pread(&held) == nc_bytes(9.0)
    });
    eprintln!("shown {took:?} after the write");
    assert_eq!(std::fs::read(&a).unwrap(), nc_bytes(9.0));
    drop(held);
    m.stop();
}

/// Only the directories in use are watched (issue 26: watching every
/// directory at mount walked the whole archive): the source, then each
/// directory as the kernel looks it up, and a Zarr store whole once open.
#[test]
fn only_directories_in_use_are_watched() {
    let (_src, root) = archive(4);
    for d in ["d2/sub", "d3"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let m = Mount::start(&root, &[]);
    let watched = || {
        stats(&m)["refresh"]["watched_directories"]
            .as_u64()
            .unwrap()
    };
    wait_for(&m, "watching", WATCH_DEADLINE, || {
        stats(&m)["refresh"]["watching"] == true
    });
    assert_eq!(watched(), 1, "the source only");
    assert_eq!(std::fs::read(m.path("d0/f00.nc/v")).unwrap(), nc_bytes(0.0));
    wait_for(&m, "d0 watched", WATCH_DEADLINE, || watched() == 2);
    // A change in it is seen by the watcher: no walk needed.
    write_nc(&[(root.join("d0/f00.nc"), 4.0)]);
    wait_for(&m, "change in a watched directory", WATCH_DEADLINE, || {
        std::fs::read(m.path("d0/f00.nc/v")).unwrap() == nc_bytes(4.0)
    });
    assert_eq!(stats(&m)["refresh"]["walks"], 1, "the catch-up walk only");
    assert_eq!(watched(), 2, "d1, d2, d3 untouched");
    m.stop();
}

/// A single-array Zarr store is one file in the mount: listing its
/// directory names it and its sidecar without opening it (`find` of an
/// archive of such stores reads directories only); its size opens it.
#[test]
fn single_array_stores_are_listed_without_opening_them() {
    let src = tempfile::tempdir().unwrap();
    let root = src.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("d")).unwrap();
    let store = root.join("d/a.zarr");
    let out = py(
        "import sys, zarr, numpy as np\n\
         a = zarr.open_array(sys.argv[1], mode='w', shape=(6,), chunks=(4,), dtype='<i2', zarr_format=2)\n\
         a[:] = np.arange(6, dtype='<i2') * 3\n\
         sys.stdout.write(a[:].tobytes().hex())",
        &[store.as_os_str()],
    );
    let want: Vec<u8> = (0..out.len() / 2)
        .map(|i| u8::from_str_radix(&out[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let m = Mount::start(&root, &[]);
    let mut names: Vec<String> = std::fs::read_dir(m.path("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a.zarr", "a.zarr.json"]);
    let found = Command::new("find")
        .arg(m.path(""))
        .args(["-type", "f"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&found.stdout).contains("d/a.zarr.json"));
    assert_eq!(datasets(&m, "opens"), 0, "listing opened the store");
    assert_eq!(std::fs::metadata(m.path("d/a.zarr")).unwrap().len(), 12);
    assert_eq!(std::fs::read(m.path("d/a.zarr")).unwrap(), want);
    assert_eq!(datasets(&m, "opens"), 1);
    m.stop();
}
