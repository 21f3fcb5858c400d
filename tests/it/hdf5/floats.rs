//! HDF5 floats of any layout (issue 24): nbit-reduced and hand-made
//! float types, the x87 long double in 12 or 16 bytes of either order,
//! served as the NumPy type h5py reads them as, converted as HDF5
//! converts them (`H5T__conv_f_f`).
//!
//! The fixtures of `tests/fixtures/hdf5/generate_floats.py`
//! (`manifest.floats.json`) are read byte for byte with the rest of the
//! manifest by `every_dataset_reads_as_its_writer_reads_it`,
//! `slabfs_cat_prints_every_dataset` and
//! `a_mount_serves_files_sidecars_and_xattrs` (all fail without the
//! conversion: every one of these datasets was skipped). The tests below
//! read the HDF5 library's own files of `../shared/corpora` that show
//! the same types, against h5py now, and damage the float descriptions.

use super::storage::corpus_reads_as_h5py_reads_it;
use super::*;

/// The six corpus datasets that were skipped: HDF5's nbit test floats
/// (`Nbit_float_data_{le,be}` in the library's little- and big-endian
/// test files) and the long doubles of h5dump's `tldouble.h5` (16 bytes)
/// and h5diff's `h5diff_basic1.h5` (`g1/ld`, 12 bytes).
#[test]
fn the_hdf5_librarys_nbit_floats_and_long_doubles_read_as_h5py_reads_them() {
    corpus_reads_as_h5py_reads_it(
        &[
            "hdf5_thirdparty/hdf5lib_test_le_data.h5",
            "hdf5_thirdparty/hdf5lib_test_be_data.h5",
            "hdf5_thirdparty/hdf5lib_tools_testfiles_tldouble.h5",
            "hdf5_thirdparty/hdf5lib_tools_test_h5diff_testfiles_h5diff_basic1.h5",
        ],
        6,
        Some("floating point"),
    );
}

/// A long double dataset, whatever its stored size and order, is NumPy's
/// longdouble: `<f16` in the sidecar and the `.npy` header (NumPy reads
/// the `.npy` back as h5py read the dataset), the bytes 16-byte swapped
/// in a big-endian mount, and no ENVI header (ENVI has no such type).
#[test]
fn a_long_double_is_served_as_numpys_longdouble() {
    let ds = dataset::Opener::new(cache())
        .open(&data("floats.h5"))
        .unwrap();
    for name in ["ld16", "ld12", "ld16_be"] {
        let m = ds.get(name).unwrap().array.meta();
        assert_eq!(m.dtype, DataType::X87Extended, "{name}");
        assert_eq!(m.dtype.numpy_typestr(Endian::Little), "<f16");
    }
    let little = expected("floats.h5.ld12.bin");
    for (order, typestr) in [("little", "<f16"), ("big", ">f16")] {
        let m = Mount::start(
            &fixtures().join("data"),
            &["--byte-order", order, "--views", "raw,json,npy,hdr"],
        );
        let sidecar: Value =
            serde_json::from_slice(&std::fs::read(m.path("floats.h5/ld12.json")).unwrap()).unwrap();
        assert_eq!(sidecar["dtype"], typestr, "{sidecar}");
        let raw = std::fs::read(m.path("floats.h5/ld12")).unwrap();
        let want: Vec<u8> = if order == "big" {
            little
                .chunks(16)
                .flat_map(|c| c.iter().rev().copied())
                .collect()
        } else {
            little.clone()
        };
        assert!(raw == want, "{order}");
        let npy = std::fs::read(m.path("floats.h5/ld12.npy")).unwrap();
        assert!(npy.ends_with(&want), "{order}");
        let head = String::from_utf8_lossy(&npy[..128]);
        assert!(head.contains(&format!("'descr': '{typestr}'")), "{head}");
        assert!(!m.path("floats.h5/ld12.hdr").exists());
        assert!(m.path("floats.h5/nbit_le.hdr").exists());
        // NumPy reads the .npy as h5py read the dataset.
        let out = common::python::Python::new()
            .arg("-c")
            .arg(
                "import sys, numpy as np, h5py\n\
                 a = np.load(sys.argv[1])\n\
                 b = h5py.File(sys.argv[2])['ld12'][()]\n\
                 assert a.dtype.newbyteorder('=') == np.longdouble, a.dtype\n\
                 assert a.astype('<f16').tobytes() == b.astype('<f16').tobytes()",
            )
            .arg(m.path("floats.h5/ld12.npy"))
            .arg(data("floats.h5"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        m.stop();
    }
}

/// The datatype messages of `nbit_le`, `nbit_be` and an attribute in
/// `floats_earliest.h5` (no checksums), their properties edited into
/// what no float can be: each a
/// skip of that dataset with a line naming the file, the dataset and
/// the float, never a panic; the other datasets still read.
#[test]
fn a_corrupt_float_description_is_a_skip_with_a_line() {
    let bytes = std::fs::read(data("floats_earliest.h5")).unwrap();
    // offset 7, precision 20, exponent at 20 of 6 bits, mantissa at 7 of
    // 13 bits, bias 31: the properties of both nbit datasets.
    let props = [7u8, 0, 20, 0, 20, 6, 7, 13, 31, 0, 0, 0];
    let at: Vec<usize> = bytes
        .windows(props.len())
        .enumerate()
        .filter(|(_, w)| *w == props)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 3, "nbit_le, nbit_be and nbit_le's attribute");
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("floats_earliest.h5");
    // (byte of the properties or, negative, of the class bits before
    // them, new value, why)
    // (VAX order without the big-endian bit is no error here: this
    // file's datatype messages are version 1, where HDF5 ignores the VAX
    // bit; tests/fixtures/hdf5/datatype_versions.rs.)
    let edits: [(isize, u8); 9] = [
        (5, 0),     // exponent of 0 bits
        (5, 64),    // exponent of 64 bits
        (4, 200),   // exponent past the element
        (7, 0),     // mantissa of 0 bits
        (6, 250),   // mantissa past the element
        (6, 16),    // mantissa over the exponent
        (2, 200),   // precision past the element
        (-6, 40),   // sign bit past the precision
        (-7, 0x10), // "msb set" normalisation
    ];
    for (k, v) in edits {
        let mut b = bytes.clone();
        for &i in &at {
            b[(i as isize + k) as usize] = v;
        }
        std::fs::write(&p, &b).unwrap();
        let errors = open_and_read_all(&p);
        let ds = dataset::Opener::new(cache()).open(&p).unwrap();
        let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
        for name in ["nbit_le", "nbit_be"] {
            assert!(ds.get(name).is_none(), "edit {k}={v}: {name} shown");
            assert!(
                skipped.iter().any(|l| l.contains("floats_earliest.h5")
                    && l.contains(&format!("/{name}"))
                    && l.contains("floating point")),
                "edit {k}={v}: {skipped:#?}"
            );
        }
        assert_eq!(ds.entries.len(), 5, "edit {k}={v}: {errors:#?}");
    }
}
