//! Virtual datasets (src/formats/hdf5/vds.rs): the fixtures of
//! `generate_vds.py` are read through the ordinary manifest tests of
//! hdf5.rs (library, `slabfs cat`, mount); here the HDF5 library's own
//! VDS test files from the corpus, compared with h5py at test time, and
//! what a source that cannot be read does: EIO for the reads that touch
//! it, a line naming it, never the fill value.

use super::*;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/hdf5_thirdparty")
}

const PREFIX: &str = "hdf5lib_tools_testfiles_vds_";

/// h5py's reads of every virtual dataset under `dir`: (file, dataset,
/// shape), the bytes (little-endian, C order) in `dir/expected/`.
fn h5py_reads(dir: &Path) -> Vec<(String, String, Vec<u64>)> {
    let script = r#"
import glob, json, os, sys
import h5py, numpy as np
os.chdir(sys.argv[1])
os.makedirs("expected", exist_ok=True)
out = []
for fn in sorted(glob.glob("*.h5")):
    with h5py.File(fn, "r") as f:
        def visit(name, o):
            if isinstance(o, h5py.Dataset) and o.is_virtual:
                a = o[()]
                a = a.astype(a.dtype.newbyteorder("<"))
                key = f"{fn}.{name.replace('/', '.')}.bin"
                open(os.path.join("expected", key), "wb").write(np.ascontiguousarray(a).tobytes())
                out.append([fn, name, list(o.shape)])
        f.visititems(visit)
print(json.dumps(out))
"#;
    let out = common::python::Python::new()
        .arg("-c")
        .arg(script)
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_hdf5_librarys_virtual_datasets_read_as_h5py_reads_them() {
    // The corpus renamed the files (a prefix); their mappings name the
    // originals: copies under those names, in a scratch directory.
    let tmp = tempfile::tempdir().unwrap();
    let mut copied = 0;
    for e in std::fs::read_dir(corpus()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if let Some(orig) = name.strip_prefix(PREFIX) {
            std::fs::copy(&p, tmp.path().join(orig)).unwrap();
            copied += 1;
        }
    }
    assert!(copied >= 30, "{copied} corpus files");
    let want = h5py_reads(tmp.path());
    // Regular and irregular hyperslabs, unlimited mappings (percival),
    // printf-style series with a gap (eiger: f-0 and f-3), several
    // source files per dataset.
    assert_eq!(want.len(), 8, "{want:?}");
    let mut failures = Vec::new();
    for (i, (file, path, shape)) in want.iter().enumerate() {
        let ds = dataset::Opener::new(cache())
            .open(&tmp.path().join(file))
            .unwrap();
        let Some(e) = ds.get(path) else {
            failures.push(format!("{file}:{path} not shown: {:?}", ds.skipped));
            continue;
        };
        let a = &e.array;
        if &a.meta().shape != shape {
            failures.push(format!(
                "{file}:{path}: shape {:?} vs {shape:?}",
                a.meta().shape
            ));
            continue;
        }
        let key = format!("{file}.{}.bin", path.replace('/', "."));
        let bytes = std::fs::read(tmp.path().join("expected").join(&key)).unwrap();
        if let Err(err) = check_ranges(a.as_ref(), &bytes, i as u64, 30) {
            failures.push(format!("{file}:{path}: {err}"));
        }
        // And through `slabfs cat`.
        let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .arg("cat")
            .arg(tmp.path().join(file))
            .arg(path)
            .output()
            .unwrap();
        if !out.status.success() || out.stdout != bytes {
            failures.push(format!(
                "{file}:{path}: slabfs cat differs: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn bad(file: &str) -> PathBuf {
    fixtures().join("vds_bad").join(file)
}

fn read_rows(a: &dyn slabfs::ArraySource, rows: std::ops::Range<u64>) -> Result<Vec<i32>, String> {
    let row = 4 * a.meta().shape[1];
    let mut buf = vec![0u8; ((rows.end - rows.start) * row) as usize];
    read_at(a, rows.start * row, &mut buf, Endian::Little).map_err(|e| e.to_string())?;
    Ok(buf
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect())
}

#[test]
fn a_missing_source_fails_the_reads_that_touch_it_naming_it() {
    let ds = dataset::Opener::new(cache())
        .open(&bad("missing.h5"))
        .unwrap();
    let v = &ds.get("v").unwrap().array;
    assert_eq!(v.meta().shape, [3, 4]);
    // Row 0 from the file itself, row 2 covered by no mapping (fill).
    assert_eq!(read_rows(v.as_ref(), 0..1).unwrap(), [40, 41, 42, 43]);
    assert_eq!(read_rows(v.as_ref(), 2..3).unwrap(), [-1; 4]);
    // Row 1's source file does not exist: not -1 (what HDF5 gives), EIO.
    for rows in [1..2, 0..3] {
        let e = read_rows(v.as_ref(), rows).unwrap_err();
        assert!(
            e.contains("missing.h5") && e.contains("gone.h5") && e.contains("/v"),
            "{e}"
        );
    }
    // A failed open is not kept: still failing, still naming it.
    assert!(read_rows(v.as_ref(), 1..2).unwrap_err().contains("gone.h5"));
}

#[test]
fn a_source_outside_the_roots_is_not_read() {
    // `outside` maps ../data/vds_src0.h5: outside vds_bad, the root here.
    let ds = dataset::Opener::new(cache())
        .open(&bad("missing.h5"))
        .unwrap();
    let a = &ds.get("outside").unwrap().array;
    let mut buf = vec![0u8; 40];
    let e = read_at(a.as_ref(), 0, &mut buf, Endian::Little)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("../data/vds_src0.h5") && e.contains("outside the allowed roots"),
        "{e}"
    );
    // With the data directory allowed too, it reads as h5py does.
    let ds = dataset::Opener::new(cache())
        .allow_outside(&[fixtures().join("data")])
        .open(&bad("missing.h5"))
        .unwrap();
    let a = &ds.get("outside").unwrap().array;
    read_at(a.as_ref(), 0, &mut buf, Endian::Little).unwrap();
    let got: Vec<i32> = buf
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..10).collect::<Vec<i32>>());
}

#[test]
fn a_mount_answers_eio_for_a_missing_source_and_logs_it() {
    let m = Mount::start(&fixtures().join("vds_bad"), &["--byte-order", "little"]);
    let e = std::fs::read(m.path("missing.h5/v")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let e = std::fs::read(m.path("missing.h5/outside")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    // The dataset of the file itself reads.
    let ok = std::fs::read(m.path("missing.h5/ok")).unwrap();
    assert_eq!(ok.len(), 16);
    let log = m.log();
    assert!(
        log.contains("gone.h5") && log.contains("missing.h5"),
        "{log}"
    );
    assert!(log.contains("outside the allowed roots"), "{log}");
    m.stop();
}

#[test]
fn slabfs_cat_fails_on_a_missing_source() {
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .arg("cat")
        .arg(bad("missing.h5"))
        .arg("v")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gone.h5"), "{err}");
}

/// The mapping lists of `bytes` (HDF5 global heap objects of encoding
/// version 0 or 1): (offset, length) of each, its checksum included.
fn mapping_objects(bytes: &[u8]) -> Vec<(usize, usize)> {
    let u64_at = |p: usize| u64::from_le_bytes(bytes[p..p + 8].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = bytes[from..].windows(4).position(|w| w == b"GCOL") {
        let at = from + i;
        let size = u64_at(at + 8);
        let mut pos = at + 16;
        while pos + 16 <= at + size && u16::from_le_bytes([bytes[pos], bytes[pos + 1]]) != 0 {
            let len = u64_at(pos + 8);
            if len > 4 && bytes[pos + 16] <= 1 {
                out.push((pos + 16, len));
            }
            pos += 16 + len.div_ceil(8) * 8;
        }
        from = at + 4;
    }
    out
}

#[test]
fn damaged_mappings_never_panic() {
    use slabfs::codec::jenkins_lookup3::hashlittle;
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixtures().join("data")).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_str().unwrap().starts_with("vds_") {
            std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    let bytes = std::fs::read(data("vds.h5")).unwrap();
    let objects = mapping_objects(&bytes);
    assert!(objects.len() >= 7, "{objects:?}");
    let p = tmp.path().join("vds.h5");
    let mut n = 0;
    for &(at, len) in &objects {
        // Every byte of the mapping list, flipped whole or by one bit,
        // with the checksum written again so that the damage is parsed.
        for pos in at..at + len - 4 {
            let mut b = bytes.clone();
            b[pos] ^= if pos % 2 == 0 { 0xFF } else { 0x10 };
            let sum = hashlittle(&b[at..at + len - 4], 0);
            b[at + len - 4..at + len].copy_from_slice(&sum.to_le_bytes());
            std::fs::write(&p, &b).unwrap();
            open_and_read_all(&p);
            n += 1;
        }
    }
    assert!(n > 500, "{n}");
}
