//! Hostile virtual-dataset layouts (review 9): mappings that fan out or
//! loop back must cost a bounded number of opens and reads, at load and
//! at read time. The files are h5py's (generate_vdsfix.py); the
//! expected bytes of `vds_fanout.h5` are h5py's reads, compared by the
//! manifest tests; here the time they take and what a loop answers.

use super::*;
use std::time::Duration;

/// Run `f` on a thread of its own; a panic if it takes longer than
/// `secs` (the unfixed reader took hours: the test must not wait).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|e| panic!("not done within {secs} s: {e}"))
}

fn ints(a: &dyn slabfs::ArraySource) -> Result<Vec<i32>, String> {
    let n = a.meta().num_elements() as usize;
    let mut buf = vec![0u8; 4 * n];
    read_at(a, 0, &mut buf, Endian::Little).map_err(|e| e.to_string())?;
    Ok(buf
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect())
}

#[test]
fn ten_unlimited_mappings_from_the_file_itself_load_in_ten_opens() {
    // Each of v0..v9 probes `.`'s `s`: that probe builds `s` only, not
    // the ten virtual datasets again (10^8 parses before the fix).
    let ds = within(60, || {
        dataset::Opener::new(cache())
            .open(&data("vds_fanout.h5"))
            .unwrap()
    });
    let want = [1, 11, 21, 31, 41, 51];
    for k in 0..10 {
        let a = &ds.get(&format!("v{k}")).unwrap().array;
        assert_eq!(a.meta().shape, [6], "v{k}");
        assert_eq!(ints(a.as_ref()).unwrap(), want, "v{k}");
    }
}

#[test]
fn a_virtual_dataset_reading_itself_fails_at_once_naming_the_loop() {
    let ds = within(60, || {
        dataset::Opener::new(cache())
            .open(&fixtures().join("vds_bad/loop.h5"))
            .unwrap()
    });
    // Twelve mappings of `self` from `self`: each read read twelve
    // more, 12^8 in all, before the fix; now the copy built for the
    // read refuses to build itself again and the read fails.
    let a = ds.get("self").unwrap().array.clone();
    let e = within(60, move || ints(a.as_ref())).unwrap_err();
    assert!(e.contains("loop.h5") && e.contains("self"), "{e}");
    assert!(e.contains("reading itself (a loop)"), "{e}");
    // `a` and `b` read each other: their probes end at the loop, their
    // stored extents stay, and their reads fail.
    for name in ["a", "b"] {
        let a = &ds.get(name).unwrap().array;
        assert_eq!(a.meta().shape, [4], "{name}");
        assert!(ints(a.as_ref()).is_err(), "{name}");
    }
}

/// Review 9 finding 5: an external data file missing when the HDF5 file
/// was loaded was remembered as failed for the life of the load; now
/// each read tries again, and once it appears its bytes are served.
#[test]
fn an_external_file_that_appears_after_the_load_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("external_missing.h5");
    std::fs::copy(data("external_missing.h5"), &file).unwrap();
    let ds = dataset::Opener::new(cache()).open(&file).unwrap();
    let a = &ds.get("gone").unwrap().array;
    let mut buf = vec![0u8; 12];
    let e = read_at(a.as_ref(), 0, &mut buf, Endian::Little).unwrap_err();
    assert!(e.to_string().contains("ext_gone.bin"), "{e}");
    // The bytes h5py wrote there (generate_storage.py: arange(6) as <i2).
    let bytes: Vec<u8> = (0i16..6).flat_map(i16::to_le_bytes).collect();
    std::fs::write(tmp.path().join("ext_gone.bin"), &bytes).unwrap();
    read_at(a.as_ref(), 0, &mut buf, Endian::Little).unwrap();
    assert_eq!(buf, bytes);
}

/// Review 9 finding 7: a printf-style series ended at the first member
/// that failed in any way, silently (a corrupt `vds_series_1.h5` made
/// `series` 4 elements long). It ends only where a member does not
/// exist; a member that cannot be read skips the dataset, naming it.
#[test]
fn a_printf_series_member_that_cannot_be_read_is_not_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    for f in [
        "vds.h5",
        "vds_series_0.h5",
        "vds_series_1.h5",
        "vds_series_2.h5",
    ] {
        std::fs::copy(data(f), tmp.path().join(f)).unwrap();
    }
    let ds = dataset::Opener::new(cache())
        .open(&tmp.path().join("vds.h5"))
        .unwrap();
    assert_eq!(ds.get("series").unwrap().array.meta().shape, [12]);
    // Member 2 gone: the series ends there (HDF5's rule).
    std::fs::remove_file(tmp.path().join("vds_series_2.h5")).unwrap();
    let ds = dataset::Opener::new(cache())
        .open(&tmp.path().join("vds.h5"))
        .unwrap();
    assert_eq!(ds.get("series").unwrap().array.meta().shape, [8]);
    // Member 1 not HDF5: not an end, a failure naming it.
    std::fs::write(tmp.path().join("vds_series_1.h5"), b"not an HDF5 file").unwrap();
    let ds = dataset::Opener::new(cache())
        .open(&tmp.path().join("vds.h5"))
        .unwrap();
    assert!(ds.get("series").is_none());
    let why: Vec<String> = ds.skipped.iter().map(|e| format!("{e:#}")).collect();
    assert!(
        why.iter()
            .any(|w| w.contains("series") && w.contains("vds_series_1.h5")),
        "{why:?}"
    );
    // The other virtual datasets of the file are served.
    assert!(ds.get("stack").is_some());
}

/// Review 9 finding 10: a netCDF-4 source is looked up as stored, not as
/// the mount shows it. `nc_src.nc`'s `short` has 2 records of its
/// unlimited dimension's 4; the mount shows it 4 long (netCDF's fill
/// after), and a virtual dataset mapping `short[0:4]` read that fill as
/// data (h5py reads 5, 6 and the fill twice). The read fails instead, as
/// for any source smaller than its selection.
#[test]
fn a_netcdf_source_shorter_than_its_unlimited_dimension_fails_the_read() {
    let bad = fixtures().join("vds_bad");
    let src = dataset::Opener::new(cache())
        .open(&bad.join("nc_src.nc"))
        .unwrap();
    assert_eq!(src.get("short").unwrap().array.meta().shape, [4]);
    let ds = dataset::Opener::new(cache())
        .open(&bad.join("from_nc.h5"))
        .unwrap();
    let a = &ds.get("v").unwrap().array;
    let e = ints(a.as_ref()).unwrap_err();
    assert!(
        e.contains("nc_src.nc") && e.contains("short") && e.contains("smaller"),
        "{e}"
    );
}

/// Review 9 finding 5: a dataset's change stamp covered only the HDF5
/// file, so a refresh never saw its external data file rewritten.
#[test]
fn rewriting_an_external_data_file_changes_the_datasets_stamp() {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["external.h5", "ext_a.bin", "ext_b.bin", "ext_c.bin"] {
        std::fs::copy(data(f), tmp.path().join(f)).unwrap();
    }
    let ds = dataset::Opener::new(cache())
        .open(&tmp.path().join("external.h5"))
        .unwrap();
    let a = &ds.get("two_files").unwrap().array;
    let before = a.change_stamp().data;
    assert!(before.is_some());
    assert_eq!(a.change_stamp().data, before);
    // Another length: the stamp (size, times) must differ.
    let mut bytes = std::fs::read(tmp.path().join("ext_a.bin")).unwrap();
    bytes.push(0);
    std::fs::write(tmp.path().join("ext_a.bin"), &bytes).unwrap();
    assert_ne!(a.change_stamp().data, before);
}

/// Review 9 finding 5: a virtual dataset had no change stamp, so a
/// refresh never saw a source file rewritten.
#[test]
fn rewriting_a_vds_source_changes_the_datasets_stamp() {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["vds.h5", "vds_src0.h5", "vds_src1.h5"] {
        std::fs::copy(data(f), tmp.path().join(f)).unwrap();
    }
    let ds = dataset::Opener::new(cache())
        .open(&tmp.path().join("vds.h5"))
        .unwrap();
    let a = &ds.get("stack").unwrap().array;
    let before = a.change_stamp().data;
    assert!(before.is_some());
    assert_eq!(a.change_stamp().data, before);
    let mut bytes = std::fs::read(tmp.path().join("vds_src1.h5")).unwrap();
    bytes.push(0);
    std::fs::write(tmp.path().join("vds_src1.h5"), &bytes).unwrap();
    assert_ne!(a.change_stamp().data, before);
}
