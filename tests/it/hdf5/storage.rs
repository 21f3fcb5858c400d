//! HDF5 storage rules (issue 24): external storage whose files are
//! missing or outside the mounted root; the data layout messages of
//! HDF5 1.4 and older (versions 1 and 2) and unfiltered partial edge
//! chunks, read from third-party files against h5py. (External storage that reads, unfiltered partial edge
//! chunks and the fill values of never-written chunks are fixtures of
//! `generate_storage.py`, checked with every other fixture by
//! `every_dataset_reads_as_its_writer_reads_it`, `slabfs_cat_prints_every_dataset`
//! and `a_mount_serves_files_sidecars_and_xattrs`.)

use super::*;

pub(super) fn corpus(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpora")
        .join(file)
}

/// Read `path` of `ds` whole (little-endian), or the error's text.
fn read_all(ds: &dataset::Dataset, path: &str) -> Result<Vec<u8>, String> {
    let a = &ds
        .get(path)
        .ok_or_else(|| format!("{path} not listed"))?
        .array;
    let mut buf = vec![0u8; a.meta().nbytes() as usize];
    read_at(a.as_ref(), 0, &mut buf, Endian::Little)
        .map(|n| buf[..n].to_vec())
        .map_err(|e| e.to_string())
}

/// `external_missing.h5` (h5py): `gone`'s data file was deleted after
/// writing; `outside` names `../ext_outside.bin`. Both are listed; their
/// reads fail (EIO in the mount) with a line naming the file, never
/// zeros; the file's other dataset reads. `--allow-outside` lets the
/// second be read.
#[test]
fn external_files_missing_or_outside_the_root_fail_their_reads_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let file = sub.join("external_missing.h5");
    std::fs::copy(data("external_missing.h5"), &file).unwrap();
    std::fs::write(tmp.path().join("ext_outside.bin"), [9u8, 8, 7, 6]).unwrap();

    let ds = dataset::Opener::new(cache()).open(&file).unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    assert_eq!(
        read_all(&ds, "fine").unwrap(),
        [0i32, 1, 2].map(i32::to_le_bytes).concat()
    );
    let e = read_all(&ds, "gone").unwrap_err();
    assert!(
        e.contains("external_missing.h5") && e.contains("ext_gone.bin"),
        "{e}"
    );
    let e = read_all(&ds, "outside").unwrap_err();
    assert!(
        e.contains("ext_outside.bin") && e.contains("outside the allowed roots"),
        "{e}"
    );
    // Allowed outside: read from its file.
    let ds = dataset::Opener::new(cache())
        .allow_outside(&[tmp.path().to_path_buf()])
        .open(&file)
        .unwrap();
    assert_eq!(read_all(&ds, "outside").unwrap(), [9, 8, 7, 6]);

    // slabfs cat: an error naming the file, nothing on stdout.
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args(["cat".as_ref(), file.as_os_str(), "gone".as_ref()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{err}");
    assert!(err.contains("ext_gone.bin"), "{err}");

    // A mount: EIO for those two, the log naming the files; the rest reads.
    let m = Mount::start(&sub, &[]);
    for (name, named) in [("gone", "ext_gone.bin"), ("outside", "ext_outside.bin")] {
        let e = std::fs::read(m.path(&format!("external_missing.h5/{name}"))).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{name}: {e}");
        assert!(m.log().contains(named), "{name}: {}", m.log());
    }
    assert_eq!(
        std::fs::read(m.path("external_missing.h5/fine")).unwrap(),
        [0i32, 1, 2].map(i32::to_le_bytes).concat()
    );
    m.stop();
}

/// Third-party files whose datasets have data layout messages of
/// versions 1 and 2 (HDF5 1.4 and older: contiguous and chunked with v1
/// B-trees, deflate, big-endian, 1 to 3 dimensions), including netcdf-c's
/// own `nczarr_test_ref_groups.h5` and GDAL's samples. Before, every one
/// of these datasets was skipped ("data layout message version 1").
const LAYOUT_V1_V2: &[&str] = &[
    "netcdf_c/nczarr_test_ref_groups.h5",
    "hdf5_thirdparty/gdal_hdf5_groups.h5",
    "hdf5_thirdparty/gdal_hdf5_u8be.h5",
    "hdf5_thirdparty/hdf5json_tall.h5",
    "hdf5_thirdparty/hdf5lib_test_btree_idx_1_6.h5",
    "hdf5_thirdparty/hdf5lib_test_deflate.h5",
    "hdf5_thirdparty/hdf5lib_test_fill_old.h5",
    "hdf5_thirdparty/hdf5lib_test_test_filters_be.h5",
    "hdf5_thirdparty/hdf5lib_tools_test_h5import_testfiles_binfp64.h5",
    "hdf5_thirdparty/hdf5lib_tools_test_h5import_testfiles_txtuin16.h5",
    "hdf5_thirdparty/hdf5lib_tools_testfiles_tdset2.h5",
    "hdf5_thirdparty/hdf5lib_tools_testfiles_tsaf.h5",
    "hdf5_thirdparty/jhdf_hdf_v14_test1.hdf5",
    "hdf5_thirdparty/jhdf_hdf_v14_test2.hdf5",
];

/// h5py's reads of every numeric dataset of `files` (little-endian, C
/// order), written into `out`: (file index, dataset path, bytes file).
const H5PY_DUMP: &str = r#"
import json, sys, pathlib
import h5py, numpy as np
out = pathlib.Path(sys.argv[1])
res = []
def visit(h, i, group, prefix, above):
    # By hand rather than visititems_links: HDF5's visit fails the whole
    # walk on an object it refuses to open (tests/it/hdf5/headers.rs). Every
    # hard-link path is a name, as in slabfs; a link back to a group
    # above is a loop, not followed.
    for key in group.keys():
        name = f"{prefix}{key}"
        if not isinstance(group.get(key, getlink=True), h5py.HardLink):
            continue
        try:
            obj = group[key]
        except (KeyError, OSError, RuntimeError):
            continue  # HDF5 refuses to open it
        if isinstance(obj, h5py.Group):
            addr = h5py.h5o.get_info(obj.id).addr
            if addr not in above:
                visit(h, i, obj, f"{name}/", above | {addr})
            continue
        if not isinstance(obj, h5py.Dataset) or obj.dtype.kind not in "iuf" or obj.dtype.names \
                or h5py.check_enum_dtype(obj.dtype) is not None:
            continue
        arr = np.asarray(obj[()])
        if arr.dtype.itemsize > 1:
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        p = out / f"{len(res)}.bin"
        p.write_bytes(arr.copy(order="C").tobytes())
        res.append([i, name, str(p)])
for i, f in enumerate(sys.argv[2:]):
    h = h5py.File(f, "r")
    visit(h, i, h, "", {h5py.h5o.get_info(h.id).addr})
print(json.dumps(res))
"#;

#[test]
fn layout_messages_v1_and_v2_read_as_h5py_reads_them() {
    corpus_reads_as_h5py_reads_it(LAYOUT_V1_V2, 45, Some("layout message"));
}

/// The HDF5 library's `h5format_convert` test file with a dataset whose
/// partial edge chunks are stored unfiltered (`DSET_EDGE`: deflate, the
/// layout's "don't filter partial edge chunks" flag); before, its edge
/// chunks were inflated and failed.
#[test]
fn unfiltered_partial_edge_chunks_of_the_hdf5_library_read_as_h5py_reads_them() {
    corpus_reads_as_h5py_reads_it(
        &["hdf5_thirdparty/hdf5lib_tools_test_h5format_convert_testfiles_h5fc_edge_v3.h5"],
        1,
        None,
    );
}

/// Every numeric dataset of the corpus `files` (at least `min`) read
/// through the library, `slabfs cat` and a mount of copies equals h5py's
/// read (computed now, through the venv); no skip line contains
/// `refused`.
pub(super) fn corpus_reads_as_h5py_reads_it(files: &[&str], min: usize, refused: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = files.iter().map(|f| corpus(f)).collect();
    let out = common::python::Python::new()
        .arg("-c")
        .arg(H5PY_DUMP)
        .arg(tmp.path())
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: Vec<(usize, String, PathBuf)> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(want.len() >= min, "{} datasets", want.len());
    // The mount reads copies (the corpus stays where it is).
    let mounted = tmp.path().join("src");
    std::fs::create_dir(&mounted).unwrap();
    let mut failures = Vec::new();
    let mut opened = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let name = format!("{i}_{}", f.file_name().unwrap().to_str().unwrap());
        std::fs::copy(f, mounted.join(&name)).unwrap();
        let ds = dataset::Opener::new(cache()).open(f).unwrap();
        for s in &ds.skipped {
            if refused.is_some_and(|r| s.to_string().contains(r)) {
                failures.push(format!("{}: {s}", f.display()));
            }
        }
        opened.push((name, ds));
    }
    let m = Mount::start(&mounted, &["--byte-order", "little"]);
    for (i, path, bytes) in &want {
        let expected = std::fs::read(bytes).unwrap();
        let (name, ds) = &opened[*i];
        let ctx = format!("{}:{path}", files[*i].display());
        match ds.get(path) {
            None => failures.push(format!("{ctx}: not listed")),
            Some(e) => {
                if let Err(e) = check_ranges(e.array.as_ref(), &expected, *i as u64, 10) {
                    failures.push(format!("{ctx}: {e}"));
                }
            }
        }
        let cat = Command::new(env!("CARGO_BIN_EXE_slabfs"))
            .arg("cat")
            .arg(&files[*i])
            .arg(path)
            .output()
            .unwrap();
        if cat.stdout != expected {
            failures.push(format!(
                "{ctx}: slabfs cat differs: {}",
                String::from_utf8_lossy(&cat.stderr)
            ));
        }
        match std::fs::read(m.path(&format!("{name}/{path}"))) {
            Ok(got) if got == expected => {}
            Ok(_) => failures.push(format!("{ctx}: the mount's bytes differ")),
            Err(e) => failures.push(format!("{ctx}: through the mount: {e}")),
        }
    }
    m.stop();
    assert!(failures.is_empty(), "{failures:#?}");
}
