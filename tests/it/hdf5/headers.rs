//! Object header messages and the lines slabfs leaves about what it skips
//! (issue 24): an unknown message flagged "fail if unknown always" refuses
//! its object as HDF5 does; a null dataspace's skip line says why; the
//! HDF5 reader's skip lines are logged under its own module. Read from the
//! third-party corpus (`../shared/corpora`), the only writer of such
//! headers: HDF5's own `gen_bogus.c` needs a library built with
//! `H5O_ENABLE_BOGUS`.

use super::storage::{corpus, corpus_reads_as_h5py_reads_it};
use super::*;

/// The HDF5 library's `tbogus.h5` (`gen_bogus.c`): in `/` and `/group`,
/// `Dataset1`..`Dataset5` each carry a message of a type HDF5 does not
/// know (0x0009, the test-only "bogus" type, in `/`; 0x001a, past the last
/// type, in `/group`), flagged none, "fail if unknown and open for
/// write", "fail if unknown always", "mark if unknown" and both of the
/// last two. HDF5 refuses `Dataset3` only (the always-fail bit; the
/// write bit matters to writers only): so does slabfs, with a line naming
/// the message type; the other eight read as h5py reads them, through the
/// library, `slabfs cat` and a mount.
#[test]
fn an_unknown_message_flagged_fail_if_unknown_refuses_its_object_as_hdf5_does() {
    const FILE: &str = "hdf5_thirdparty/hdf5lib_test_tbogus.h5";
    let ds = dataset::Opener::new(cache()).open(&corpus(FILE)).unwrap();
    for (path, kind) in [("Dataset3", "0x0009"), ("group/Dataset3", "0x001a")] {
        assert!(ds.get(path).is_none(), "{path} served");
        let line = ds
            .skipped
            .iter()
            .map(|e| e.to_string())
            .find(|l| l.contains(&format!("/{path})")))
            .unwrap_or_else(|| panic!("no line for {path}: {:?}", ds.skipped));
        assert!(
            line.contains("tbogus.h5")
                && line.contains(&format!("header message type {kind}"))
                && line.contains("'fail if unknown always'"),
            "{line}"
        );
    }
    assert_eq!(ds.skipped.len(), 2, "{:?}", ds.skipped);
    corpus_reads_as_h5py_reads_it(&[FILE], 8, None);

    // The mount shows neither, and logs each once (issue 42: the reader
    // and the mount each logged it), naming the file and the object.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(corpus(FILE), tmp.path().join("tbogus.h5")).unwrap();
    let m = Mount::start(tmp.path(), &[]);
    assert!(m.path("tbogus.h5/Dataset2").exists());
    assert!(!m.path("tbogus.h5/Dataset3").exists());
    assert!(!m.path("tbogus.h5/group/Dataset3").exists());
    let log = m.log();
    m.stop();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("Dataset3")).collect();
    assert_eq!(lines.len(), 2, "{log}");
    for l in lines {
        assert!(
            l.contains("WARN") && l.contains("] not shown: ") && l.contains("tbogus.h5"),
            "{l}"
        );
    }
    assert!(!log.contains("nca::netcdf"), "{log}");
}

/// A dataset whose dataspace is null (h5py's `Empty`; hdf5-json's
/// `null_space_dset.h5`, written by the HDF5 C library): skipped with a
/// line saying there is nothing to serve, not "not supported yet".
#[test]
fn a_null_dataspace_is_skipped_with_a_line_saying_there_is_nothing_to_serve() {
    let ds = dataset::Opener::new(cache())
        .open(&corpus("hdf5_thirdparty/hdf5json_null_space_dset.h5"))
        .unwrap();
    assert!(ds.get("DS1").is_none());
    let lines: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("null_space_dset.h5")
            && lines[0].contains("/DS1")
            && lines[0].contains("a null dataspace: no shape and no elements, nothing to serve")
            && !lines[0].contains("not supported"),
        "{}",
        lines[0]
    );
}

/// What the HDF5 reader skips is said once, naming the file and the
/// dataset: `slabfs ls` printed a log line (under the module that
/// assembles NCA aggregations, and later under the HDF5 reader) and a
/// "skipped" line for each (issue 42). jhdf's `opaque_datasets_latest.hdf5`
/// (h5py) has two opaque datasets.
#[test]
fn hdf5_skips_are_said_once_naming_the_file_and_the_dataset() {
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .env_remove("RUST_LOG")
        .arg("ls")
        .arg(corpus("hdf5_thirdparty/jhdf_opaque_datasets_latest.hdf5"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    for l in lines {
        assert!(
            l.starts_with("slabfs: skipped: ")
                && l.contains("opaque_datasets_latest.hdf5 (dataset /")
                && l.contains("its type is opaque")
                && !l.contains("not shown"),
            "{l}"
        );
    }
}
