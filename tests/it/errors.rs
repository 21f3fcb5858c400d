//! Failures visible in the mount (issue 42, item 3), through a real FUSE
//! mount: `.slabfs/errors` lists the datasets that failed to open and the
//! reads that failed, each with its reason, repeats collapsed into one
//! entry with a count, at most 256 entries; a dataset that fails to open
//! says why in its sidecar `NAME/.json` and its xattr `user.slabfs.error`
//! while its listing still fails (EIO); one fixed while mounted is marked
//! resolved by the refresh that sees it (watched or walked).
//!
//! The data is committed fixtures written by the reference tools, copied
//! and damaged: the demo (zarr-python) with one zstd chunk of `tas`
//! flipped as tests/it/bad_input.rs damages one, a netCDF-3 file of
//! netCDF4-python's cut short, bytes that are no netCDF file, and a
//! healthy store of the Zarr fixtures with zarr-python's bytes.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::attributes::getxattr;
use crate::common::mount::{Mount, copy_tree};
use crate::mount_live::wait_for;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The netCDF-3 fixture (netCDF4-python) whose copies are cut short or
/// put in place of a bad file.
fn netcdf3() -> PathBuf {
    repo().join("tests/fixtures/netcdf3/data/classic_types.nc")
}

/// The chunk of the demo's `tas` that [`damage`] flips (as
/// tests/it/readers.rs does), and its grid coordinates.
const BAD_CHUNK: &str = "climate.zarr/tas/c/1/1/1";
const BAD_COORDS: &str = "chunk [1, 1, 1]";

/// Flip the byte in the middle and the last one of `file` (zstd then
/// reports corrupt data).
fn damage(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    bytes[n - 1] ^= 0xff;
    std::fs::write(file, bytes).unwrap();
}

/// `n` pseudo-random bytes (xorshift, fixed seed: the same every run).
fn random_bytes(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// Put `from`'s bytes at `to` by rename, as writers should.
fn replace(from: &Path, to: &Path) {
    let tmp = to.with_file_name(".replacing.tmp");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// The source of the tests: the demo with [`BAD_CHUNK`] damaged,
/// `random.nc` (1000 random bytes), `trunc.nc` (the first 300 bytes of
/// the netCDF-3 fixture: its header is cut in its attributes) and, with
/// `healthy`, the Zarr fixture `v2/basic.zarr`.
fn source(healthy: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().canonicalize().unwrap().join("src");
    copy_tree(&repo().join("examples/demo/data"), &src);
    damage(&src.join(BAD_CHUNK));
    std::fs::write(src.join("random.nc"), random_bytes(1000)).unwrap();
    let nc = std::fs::read(netcdf3()).unwrap();
    std::fs::write(src.join("trunc.nc"), &nc[..300]).unwrap();
    if healthy {
        copy_tree(
            &repo().join("tests/fixtures/zarr/v2/basic.zarr"),
            &src.join("basic.zarr"),
        );
    }
    (tmp, src)
}

fn errors(m: &Mount) -> Value {
    let bytes = std::fs::read(m.path(".slabfs/errors")).unwrap();
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {bytes:?}"))
}

/// The entries of `doc` of `kind` at `path`.
fn entries<'a>(doc: &'a Value, kind: &str, path: &str) -> Vec<&'a Value> {
    doc["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind && f["path"] == path)
        .collect()
}

/// The one entry of `doc` of `kind` at `path`.
fn entry<'a>(doc: &'a Value, kind: &str, path: &str) -> &'a Value {
    match entries(doc, kind, path)[..] {
        [one] => one,
        ref other => panic!("{} entries {kind} {path}: {doc:#}", other.len()),
    }
}

/// Reading `path` whole fails with EIO.
fn read_fails(path: &Path) {
    let err = std::fs::read(path).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(libc::EIO),
        "{}: {err}",
        path.display()
    );
}

#[test]
fn errors_file_lists_each_failure_with_its_reason() {
    let (_tmp, src) = source(true);
    let m = Mount::start(&src, &["--refresh", "0"]);
    // Readable by whoever may read the mount, like the stats file.
    let meta = std::fs::metadata(m.path(".slabfs/errors")).unwrap();
    assert_eq!((meta.is_file(), meta.mode() & 0o777), (true, 0o444));
    let mut control: Vec<String> = std::fs::read_dir(m.path(".slabfs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    control.sort();
    assert_eq!(control, ["errors", "stats"]);
    let doc = errors(&m);
    assert_eq!(doc["failures"], serde_json::json!([]), "{doc:#}");
    assert_eq!(
        (&doc["max_entries"], &doc["dropped"]),
        (&256.into(), &0.into())
    );

    // A failure still looks like one: the datasets are listed, their
    // listings fail with EIO.
    for name in ["random.nc", "trunc.nc"] {
        assert!(m.path(name).is_dir(), "{name}");
        let err = std::fs::read_dir(m.path(name)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{name}: {err}");
    }
    // The same corrupt chunk read three times; a healthy month of the
    // same array reads.
    for _ in 0..3 {
        read_fails(&m.path("climate.zarr/tas"));
    }
    let month = 73 * 144 * 4;
    let f = std::fs::File::open(m.path("climate.zarr/tas")).unwrap();
    let mut buf = vec![0u8; month];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 0).unwrap();
    drop(f);

    let doc = errors(&m);
    let random = entry(&doc, "open", "/random.nc");
    let reason = random["reason"].as_str().unwrap();
    let file = src.join("random.nc").display().to_string();
    assert!(
        reason.starts_with(&format!("{file}: not a netCDF file")),
        "{doc:#}"
    );
    let trunc = entry(&doc, "open", "/trunc.nc");
    let why = trunc["reason"].as_str().unwrap();
    assert!(
        why.starts_with(&src.join("trunc.nc").display().to_string())
            && why.contains("of the file remain"),
        "{doc:#}"
    );
    // Three reads of the bad chunk (each read(2) the kernel may split or
    // retry): one entry, counted, naming the chunk's file and coordinates.
    let read = entry(&doc, "read", "/climate.zarr/tas");
    let why = read["reason"].as_str().unwrap();
    let chunk = src.join(BAD_CHUNK).display().to_string();
    assert!(
        why.starts_with(&format!("{chunk}: {BAD_COORDS}: zstd")),
        "{doc:#}"
    );
    assert!(read["count"].as_u64().unwrap() >= 3, "{doc:#}");
    assert!(read["first"].as_str().unwrap() <= read["last"].as_str().unwrap());
    assert_eq!(doc["failures"].as_array().unwrap().len(), 3, "{doc:#}");
    assert_eq!(doc["unresolved"], 3);
    // Newest first.
    assert_eq!(doc["failures"][0]["kind"], "read", "{doc:#}");
    assert!(doc["failures"][0]["last"].as_str() >= doc["failures"][1]["last"].as_str());

    // Where a user looks: the dataset's sidecar and xattr say why.
    let side = m.path("random.nc/.json");
    let meta = std::fs::metadata(&side).unwrap();
    assert_eq!((meta.is_file(), meta.mode() & 0o777), (true, 0o444));
    let said: Value = serde_json::from_slice(&std::fs::read(&side).unwrap()).unwrap();
    assert_eq!(said["error"], reason, "{said:#}");
    assert_eq!(
        (&said["kind"], &said["path"]),
        (&"open".into(), &"/random.nc".into())
    );
    assert!(
        said["time"].is_string() && said["count"].as_u64() >= Some(1),
        "{said:#}"
    );
    let x = getxattr(&m.path("random.nc"), "user.slabfs.error").unwrap();
    assert_eq!(String::from_utf8(x).unwrap(), reason);
    let x = getxattr(&m.path("trunc.nc"), "user.slabfs.error").unwrap();
    assert!(String::from_utf8(x).unwrap().contains("of the file remain"));
    // Inside, nothing else.
    let err = std::fs::read(m.path("random.nc/x")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    // A healthy dataset has no such xattr.
    let err = getxattr(&m.path("basic.zarr"), "user.slabfs.error").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENODATA), "{err}");

    // The healthy store reads what zarr-python reads.
    let want = std::fs::read(repo().join("tests/fixtures/zarr/expected/v2_f8_zlib.bin")).unwrap();
    assert_eq!(
        std::fs::read(m.path("basic.zarr/g1/sub/temp")).unwrap(),
        want
    );
    // The stats still count the failures, without naming them.
    let stats = crate::mount_live::stats(&m);
    assert_eq!(stats["datasets"]["failures"].as_u64(), Some(doc_opens(&m)));
    m.stop();
}

/// The open attempts `.slabfs/errors` counted now.
fn doc_opens(m: &Mount) -> u64 {
    let doc = errors(m);
    doc["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "open")
        .map(|f| f["count"].as_u64().unwrap())
        .sum()
}

/// 300 datasets failing, more than the 256 entries kept: the oldest go,
/// each counted as dropped; a repeat of a kept one drops nothing.
#[test]
fn the_errors_file_is_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().canonicalize().unwrap();
    let n = 300;
    for i in 0..n {
        std::fs::write(src.join(format!("bad{i:03}.nc")), random_bytes(64)).unwrap();
    }
    let m = Mount::start(&src, &["--refresh", "0"]);
    for i in 0..n {
        assert!(std::fs::read_dir(m.path(&format!("bad{i:03}.nc"))).is_err());
    }
    let doc = errors(&m);
    let failures = doc["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 256, "{}", failures.len());
    assert_eq!(doc["dropped"], n - 256, "{doc:#}");
    assert!(doc["recorded"].as_u64().unwrap() >= n, "{doc:#}");
    assert_eq!(failures[0]["path"], format!("/bad{:03}.nc", n - 1));
    // The first ones went.
    assert!(entries(&doc, "open", "/bad000.nc").is_empty());
    assert_eq!(entry(&doc, "open", "/bad044.nc")["count"], 1);
    // Again: the same entry, counted, first again; nothing dropped.
    assert!(std::fs::read_dir(m.path("bad044.nc")).is_err());
    let doc = errors(&m);
    assert_eq!(doc["failures"][0]["path"], "/bad044.nc");
    assert!(doc["failures"][0]["count"].as_u64() >= Some(2), "{doc:#}");
    assert_eq!(doc["dropped"], n - 256);
    m.stop();
}

/// A dataset fixed while mounted (bad bytes replaced by a netCDF-3 file)
/// and a chunk repaired are marked resolved by the refresh that sees them,
/// watched or walked, without a request for them; what stays broken
/// stays unresolved.
#[test]
fn a_fixed_dataset_is_resolved_by_the_refresh() {
    let demo_chunk = repo().join("examples/demo/data").join(BAD_CHUNK);
    for args in [
        &["--refresh", "1"][..],
        &["--watch", "walk", "--refresh", "1"][..],
    ] {
        let (_tmp, src) = source(false);
        let m = Mount::start(&src, args);
        assert!(std::fs::read_dir(m.path("random.nc")).is_err());
        assert!(std::fs::read_dir(m.path("trunc.nc")).is_err());
        read_fails(&m.path("climate.zarr/tas"));
        assert!(m.path("random.nc/.json").is_file());
        let doc = errors(&m);
        assert_eq!(doc["unresolved"], 3, "{args:?}: {doc:#}");

        replace(&netcdf3(), &src.join("random.nc"));
        replace(&demo_chunk, &src.join(BAD_CHUNK));
        let resolved = |kind: &str, path: &str| {
            let doc = errors(&m);
            entries(&doc, kind, path)
                .iter()
                .all(|f| f["resolved"].is_string())
        };
        wait_for(&m, "random.nc resolved", Duration::from_secs(20), || {
            resolved("open", "/random.nc") && resolved("read", "/climate.zarr/tas")
        });
        let doc = errors(&m);
        assert_eq!(doc["unresolved"], 1, "{args:?}: {doc:#}");
        assert!(entry(&doc, "open", "/trunc.nc")["resolved"].is_null());
        let fixed = entry(&doc, "open", "/random.nc");
        assert!(
            fixed["resolved"].as_str() >= fixed["last"].as_str(),
            "{doc:#}"
        );
        // It reads as what it is now: its sidecar its attributes, its
        // listing its variables; the repaired array whole.
        let side: Value =
            serde_json::from_slice(&std::fs::read(m.path("random.nc/.json")).unwrap()).unwrap();
        assert!(
            side.get("error").is_none() && side["attributes"].is_object(),
            "{side:#}"
        );
        assert!(m.path("random.nc/fixed_f4").is_file());
        let err = getxattr(&m.path("random.nc"), "user.slabfs.error").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODATA), "{err}");
        assert_eq!(
            std::fs::read(m.path("climate.zarr/tas")).unwrap().len(),
            12 * 73 * 144 * 4
        );
        // Broken again while open: the refresh cannot re-open it, and it
        // stays shown as it was; that is a failure of its own.
        std::fs::write(src.join(".bad.tmp"), random_bytes(1000)).unwrap();
        std::fs::rename(src.join(".bad.tmp"), src.join("random.nc")).unwrap();
        wait_for(
            &m,
            "random.nc failing again",
            Duration::from_secs(20),
            || !entries(&errors(&m), "refresh", "/random.nc").is_empty(),
        );
        let doc = errors(&m);
        let again = entry(&doc, "refresh", "/random.nc");
        assert!(again["resolved"].is_null(), "{doc:#}");
        assert!(
            again["reason"]
                .as_str()
                .unwrap()
                .contains("not a netCDF file"),
            "{doc:#}"
        );
        assert_eq!(doc["unresolved"], 2, "{args:?}: {doc:#}");
        m.stop();
    }
}
