//! Classic netCDF (CDF-1, CDF-2, CDF-5) through slabfs, against what
//! netCDF4-python reads (tests/fixtures/netcdf3/generate.py writes the
//! files with netCDF4-python and ncgen, and the expected bytes with
//! netCDF4-python, auto mask/scale off): every variable of every fixture
//! byte for byte, whole and in pseudo-random ranges, through the library
//! and the `slabfs` binary; metadata (shape, dtype, dimensions, attributes,
//! fill value); and corrupt or truncated files, which must give errors
//! naming the file and never panic.

use crate::common;
use common::Lcg;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::Value;
use slabfs::dtype::{DataType, Endian, swap_in_place};
use slabfs::engine::array::ArraySource;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;
use slabfs::formats::netcdf3::{self, header, layout::Layout};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/netcdf3")
}

fn data_dir() -> PathBuf {
    fixtures().join("data")
}

fn manifest() -> Vec<Value> {
    let raw = std::fs::read(fixtures().join("manifest.json")).unwrap();
    let m: Value = serde_json::from_slice(&raw).unwrap();
    m.as_array().unwrap().clone()
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(1 << 20))
}

/// The fixture .nc files, sorted.
fn fixture_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "nc"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "fixtures missing: {files:?}");
    files
}

fn shape_of(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// A fill value's native-order bytes as the manifest spells it.
fn fill_json(dtype: &DataType, b: &[u8]) -> Value {
    use DataType::*;
    let n = |v: &[u8]| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..v.len()].copy_from_slice(v);
        a
    };
    let float = |x: f64| {
        if x.is_nan() {
            Value::from("NaN")
        } else if x.is_infinite() {
            Value::from(if x > 0.0 { "Infinity" } else { "-Infinity" })
        } else {
            Value::from(x)
        }
    };
    match dtype {
        Int8 => Value::from(b[0] as i8),
        UInt8 | FixedBytes(1) => Value::from(b[0]),
        Int16 => Value::from(i16::from_ne_bytes([b[0], b[1]])),
        UInt16 => Value::from(u16::from_ne_bytes([b[0], b[1]])),
        Int32 => Value::from(i32::from_ne_bytes(b.try_into().unwrap())),
        UInt32 => Value::from(u32::from_ne_bytes(b.try_into().unwrap())),
        Int64 => Value::from(i64::from_ne_bytes(n(b))),
        UInt64 => Value::from(u64::from_ne_bytes(n(b))),
        Float32 => float(f32::from_ne_bytes(b.try_into().unwrap()) as f64),
        Float64 => float(f64::from_ne_bytes(n(b))),
        other => panic!("unexpected dtype {other}"),
    }
}

/// JSON equality, with floats equal within one part in 10^15: serde_json's
/// default float parser is not always correctly rounded (it reads Python's
/// `3.4028234663852886e+38`, f32::MAX exactly, one ulp off), and the
/// values slabfs produces are the exact ones.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-15 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn every_variable_reads_as_netcdf4_python_reads_it() {
    let ds = dataset::Opener::new(cache()).open(&data_dir()).unwrap();
    let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
    assert!(skipped.is_empty(), "{skipped:#?}");
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in manifest() {
        let path = fixtures().join(file["file"].as_str().unwrap());
        let nc = netcdf3::File::open(&path).unwrap();
        assert_eq!(nc.format().name(), file["format"], "{}", path.display());
        assert!(
            json_eq(
                &Value::Object(nc.global_attributes().clone()),
                &file["attributes"]
            ),
            "{}: global attributes {:?} vs {}",
            path.display(),
            nc.global_attributes(),
            file["attributes"]
        );
        let dims = file["dimensions"].as_object().unwrap();
        assert_eq!(nc.dimensions().len(), dims.len());
        for d in nc.dimensions() {
            assert_eq!(
                dims[&d.name]["len"],
                d.len,
                "{}: {}",
                path.display(),
                d.name
            );
            assert_eq!(dims[&d.name]["unlimited"], d.is_unlimited);
        }
        assert_eq!(
            nc.variables().len(),
            file["variables"].as_array().unwrap().len()
        );
        for var in file["variables"].as_array().unwrap() {
            let name = var["path"].as_str().unwrap();
            let Some(entry) = ds.get(name) else {
                failures.push(format!("{name}: not listed"));
                continue;
            };
            checked += 1;
            let a = entry.array.as_ref();
            let m = a.meta();
            let expected =
                std::fs::read(fixtures().join(var["expected"].as_str().unwrap())).unwrap();
            let want_dims: Vec<Option<String>> = var["dimensions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| Some(d.as_str().unwrap().to_string()))
                .collect();
            let facts = [
                (m.shape == shape_of(&var["shape"]), "shape"),
                (
                    m.dtype.numpy_typestr(Endian::Little) == var["dtype"],
                    "dtype",
                ),
                (m.dimension_names == want_dims, "dimension names"),
                (
                    json_eq(&Value::Object(m.attributes.clone()), &var["attributes"]),
                    "attributes",
                ),
                (
                    json_eq(&fill_json(&m.dtype, &m.fill_value), &var["fill_value"]),
                    "fill value",
                ),
                (m.nbytes() == expected.len() as u64, "size"),
                (m.source == path.display().to_string(), "source"),
            ];
            for (ok, what) in facts {
                if !ok {
                    failures.push(format!("{name}: {what} differs: {m:?} vs {var}"));
                }
            }
            if let Err(e) = check_bytes(a, &expected) {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(checked > 90, "only {checked} variables checked");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Whole, random ranges (mid-element starts and ends, past the end), and
/// big-endian output.
fn check_bytes(a: &dyn ArraySource, expected: &[u8]) -> Result<(), String> {
    common::check_ranges(a, expected, 0xcdf, 40)?;
    let mut big = vec![0u8; expected.len()];
    read_at(a, 0, &mut big, Endian::Big).map_err(|e| e.to_string())?;
    swap_in_place(&mut big, a.meta().dtype.swap_unit());
    if big != expected {
        return Err("big-endian output differs".into());
    }
    Ok(())
}

#[test]
fn streaming_numrecs_is_computed_from_the_file_size() {
    let nc = netcdf3::File::open(&data_dir().join("streaming_classic.nc")).unwrap();
    assert_eq!(
        nc.header().numrecs,
        header::NumRecs::Streaming,
        "the fixture must carry the streaming value"
    );
    assert_eq!(nc.numrecs(), 3);
    let nc = netcdf3::File::open(&data_dir().join("streaming_cdf5.nc")).unwrap();
    assert_eq!(nc.header().numrecs, header::NumRecs::Streaming);
    assert_eq!(nc.numrecs(), 3);
    // Appending half a record does not add one.
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s.nc");
    let mut bytes = std::fs::read(data_dir().join("streaming_cdf5.nc")).unwrap();
    bytes.extend([7u8; 4]);
    std::fs::write(&p, &bytes).unwrap();
    assert_eq!(netcdf3::File::open(&p).unwrap().numrecs(), 3);
    bytes.extend([9u8; 1]); // 5 more bytes: a whole record of 5 ubytes
    std::fs::write(&p, &bytes).unwrap();
    let nc = netcdf3::File::open(&p).unwrap();
    assert_eq!(nc.numrecs(), 4);
    let mut rec = [0u8; 5];
    read_at(
        nc.array("u").unwrap().as_ref(),
        15,
        &mut rec,
        Endian::Little,
    )
    .unwrap();
    assert_eq!(rec, [7, 7, 7, 7, 9]);
}

#[test]
fn lone_record_variable_is_packed() {
    // 3 shorts per record, not padded: the file is exactly header +
    // fixed data + 5 * 6 bytes.
    let p = data_dir().join("single_record_short.nc");
    let nc = netcdf3::File::open(&p).unwrap();
    let v = nc.variable("only").unwrap();
    assert_eq!(nc.numrecs(), 5);
    assert_eq!(v.layout.strides, vec![6, 2]);
    let len = std::fs::metadata(&p).unwrap().len();
    assert_eq!(v.layout.begin + 5 * 6, len);
}

#[test]
fn slabfs_ls_and_cat() {
    let bin = env!("CARGO_BIN_EXE_slabfs");
    // SOURCE is a netCDF file: the root is its variables.
    let file = data_dir().join("offset64_records.nc");
    let ls = Command::new(bin).arg("ls").arg(&file).output().unwrap();
    assert!(
        ls.status.success(),
        "{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    let listing = String::from_utf8(ls.stdout).unwrap();
    let names: Vec<&str> = listing
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "count", "flag", "grid", "label", "lat", "lon", "temp", "time"
        ]
    );
    assert!(listing.contains("temp\t<f4\t[4, 3, 5]\t240"), "{listing}");
    for (file, var) in [
        ("offset64_records.nc", "temp"),
        ("offset64_records.nc", "flag"),
        ("data64_types.nc", "rec_u8"),
        ("ncgen_classic.nc", "station_name"),
        ("single_record_short.nc", "only"),
    ] {
        let cat = Command::new(bin)
            .arg("cat")
            .arg(data_dir())
            .arg(format!("{file}/{var}"))
            .output()
            .unwrap();
        assert!(
            cat.status.success(),
            "{}",
            String::from_utf8_lossy(&cat.stderr)
        );
        let stem = file.trim_end_matches(".nc");
        let mut want =
            std::fs::read(fixtures().join(format!("expected/{stem}.{var}.bin"))).unwrap();
        if cfg!(target_endian = "big") {
            let ds = dataset::Opener::new(cache()).open(&data_dir()).unwrap();
            let unit = ds
                .get(&format!("{file}/{var}"))
                .unwrap()
                .array
                .meta()
                .dtype
                .swap_unit();
            swap_in_place(&mut want, unit);
        }
        assert!(cat.stdout == want, "slabfs cat {file}/{var} differs");
    }
}

#[test]
fn a_directory_lists_netcdf_files_and_zarr_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("runs")).unwrap();
    std::fs::copy(
        data_dir().join("single_record_byte.nc"),
        root.join("runs/a.nc"),
    )
    .unwrap();
    // Sniffed, not trusted by name: the extension is upper case, and a
    // damaged netCDF-4 file and a text file with netCDF names are reported.
    std::fs::copy(data_dir().join("ncgen_cdf5.nc"), root.join("b.CDF")).unwrap();
    std::fs::write(
        root.join("h5.nc"),
        b"\x89HDF\r\n\x1a\n rest of an HDF5 file",
    )
    .unwrap();
    std::fs::write(root.join("notes.nc"), b"not netCDF at all").unwrap();
    std::fs::write(root.join("readme.txt"), b"CDF\x01 but not a dataset name").unwrap();
    let zarr = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zarr/v3/root_array.zarr");
    copy_dir(&zarr, &root.join("store.zarr"));

    let bin = env!("CARGO_BIN_EXE_slabfs");
    let ls = Command::new(bin).arg("ls").arg(root).output().unwrap();
    assert!(
        ls.status.success(),
        "{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    let listing = String::from_utf8(ls.stdout).unwrap();
    let names: Vec<&str> = listing
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "b.CDF/f",
            "b.CDF/i64",
            "b.CDF/u64",
            "b.CDF/ub",
            "b.CDF/ui",
            "b.CDF/us",
            "runs/a.nc/b",
            "store.zarr"
        ]
    );
    let stderr = String::from_utf8_lossy(&ls.stderr);
    assert!(
        stderr.contains("h5.nc: HDF5 superblock: version 32"),
        "{stderr}"
    );
    assert!(stderr.contains("notes.nc: not a netCDF file"), "{stderr}");
    assert!(!stderr.contains("readme.txt"), "{stderr}");

    // A damaged HDF5 file as SOURCE says so too.
    let one = Command::new(bin)
        .arg("ls")
        .arg(root.join("h5.nc"))
        .output()
        .unwrap();
    assert!(!one.status.success());
    assert!(String::from_utf8_lossy(&one.stderr).contains("h5.nc: HDF5 superblock: version 32"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Open `path` as a dataset and read the start and end of every variable
/// (bounded, whatever the header claims). Every error must name the file;
/// returns the messages.
fn open_and_read(path: &Path) -> Vec<String> {
    let name = path.display().to_string();
    let mut errors = Vec::new();
    let nc = match netcdf3::File::open(path) {
        Ok(nc) => nc,
        Err(e) => {
            errors.push(e.to_string());
            return check_named(errors, &name);
        }
    };
    for v in nc.variables() {
        let a = match nc.array(&v.name) {
            Ok(a) => a,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        let size = a.meta().nbytes();
        let mut buf = vec![0u8; size.min(4096) as usize];
        for offset in [0, size.saturating_sub(4096)] {
            if let Err(e) = read_at(a.as_ref(), offset, &mut buf, Endian::Little) {
                errors.push(e.to_string());
            }
        }
    }
    check_named(errors, &name)
}

fn check_named(errors: Vec<String>, name: &str) -> Vec<String> {
    for e in &errors {
        assert!(e.contains(name), "error does not name {name}: {e}");
    }
    errors
}

#[test]
fn truncated_files_give_errors_naming_file_and_variable() {
    let tmp = tempfile::tempdir().unwrap();
    for src in fixture_files() {
        let bytes = std::fs::read(&src).unwrap();
        let full = netcdf3::File::open(&src).unwrap();
        let header_len = full.header().len as usize;
        let p = tmp.path().join(src.file_name().unwrap());
        // About 100 cuts inside the header (every one for small headers,
        // and always its last byte), a few inside the data.
        let step = (header_len / 100).max(1);
        let mut cuts: Vec<usize> = (0..header_len).step_by(step).collect();
        cuts.push(header_len - 1);
        let mut rng = Lcg(bytes.len() as u64);
        cuts.extend(
            (0..12).map(|_| header_len + rng.next((bytes.len() - header_len) as u64) as usize),
        );
        for cut in cuts {
            std::fs::write(&p, &bytes[..cut]).unwrap();
            let errors = open_and_read(&p);
            if cut < header_len {
                assert!(!errors.is_empty(), "{}: cut at {cut} opened", src.display());
            } else if errors.is_empty() {
                // Only possible when every variable's data ends before the cut.
                continue;
            } else {
                let e = &errors[0];
                assert!(
                    e.contains("past the end of the file") && e.contains("variable \""),
                    "{}: cut at {cut}: {e}",
                    src.display()
                );
            }
        }
    }
}

#[test]
fn a_truncated_record_variable_still_reads_its_first_records() {
    let tmp = tempfile::tempdir().unwrap();
    let src = data_dir().join("offset64_records.nc");
    let bytes = std::fs::read(&src).unwrap();
    let p = tmp.path().join("cut.nc");
    // Drop the last record (and a bit of the one before).
    let nc = netcdf3::File::open(&src).unwrap();
    let recsize = nc.variable("temp").unwrap().layout.strides[0] as usize;
    std::fs::write(&p, &bytes[..bytes.len() - recsize - 8]).unwrap();
    let nc = netcdf3::File::open(&p).unwrap();
    let temp = nc.array("temp").unwrap();
    let expected = std::fs::read(fixtures().join("expected/offset64_records.temp.bin")).unwrap();
    let mut two = vec![0u8; 2 * 60];
    read_at(temp.as_ref(), 0, &mut two, Endian::Little).unwrap();
    assert_eq!(two, expected[..120]);
    let mut all = vec![0u8; expected.len()];
    let err = read_at(temp.as_ref(), 0, &mut all, Endian::Little)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&p.display().to_string()) && err.contains("variable \"temp\""),
        "{err}"
    );
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn hostile_headers_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad.nc");
    let check = |bytes: &[u8], want: &str| {
        std::fs::write(&p, bytes).unwrap();
        let err = match dataset::Opener::new(cache()).open(&p) {
            Ok(_) => panic!("{want}: opened"),
            Err(e) => e,
        };
        assert!(matches!(err, slabfs::Error::Metadata { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        assert!(msg.contains(want), "{msg} lacks {want:?}");
    };
    // CDF-5 claiming 2^60 dimensions.
    let mut b = b"CDF\x05".to_vec();
    b.extend(0u64.to_be_bytes());
    b.extend(0x0Au32.to_be_bytes());
    b.extend((1u64 << 60).to_be_bytes());
    b.extend([0u8; 64]);
    check(&b, "dimensions: 1152921504606846976 claimed");
    // A variable beginning past the end of the file.
    let mut b = std::fs::read(data_dir().join("single_record_byte.nc")).unwrap();
    let n = b.len();
    b[n - 7 - 8..n - 7].copy_from_slice(&(1u64 << 40).to_be_bytes());
    check(&b, "past the end of the file");
    // A dimension name that is not UTF-8 is no reason to refuse the file
    // (netCDF-C reads any name): it is kept, lossily.
    let mut b = std::fs::read(data_dir().join("single_record_byte.nc")).unwrap();
    let at = b.windows(2).position(|w| w == b"t\0").unwrap();
    b[at] = 0xff;
    std::fs::write(&p, &b).unwrap();
    let ds = dataset::Opener::new(cache()).open(&p).unwrap();
    let m = ds.entries[0].array.meta();
    assert_eq!(m.dimension_names, [Some("\u{fffd}".to_string())]);
    // An empty file is no dataset; opened as netCDF it is too short.
    check(b"", "not a dataset");
    let err = netcdf3::File::open(&p).unwrap_err().to_string();
    assert!(err.contains("too short for a netCDF header"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random byte changes in the header (and a random file length) never
    /// make the parser or the layout panic.
    #[test]
    fn mutated_headers_never_panic(
        file in 0usize..13,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        widen in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec![0u8, 0xff, 0x7f, 0x80])), 0..3),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let files = fixture_files();
        let mut bytes = std::fs::read(&files[file % files.len()]).unwrap();
        let header_len = header::parse(&bytes, bytes.len() as u64).unwrap().len as usize;
        for (i, b) in edits.iter().chain(&widen) {
            let at = i.index(header_len);
            bytes[at] = *b;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        let len = bytes.len() as u64;
        if let Ok(h) = header::parse(&bytes, len) {
            let _ = Layout::new(&h, len);
        }
        // Any prefix parses to the same answer or asks for more.
        let half = bytes.len() / 2;
        match header::parse(&bytes[..half], len) {
            Err(header::HeaderError::Short { needed, .. }) => prop_assert!(needed as usize > half),
            other => prop_assert_eq!(other, header::parse(&bytes, len)),
        }
    }

    /// The same through files: open, then read the start and end of every
    /// variable; errors (if any) name the file.
    #[test]
    fn mutated_files_never_panic(
        file in 0usize..13,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let files = fixture_files();
        let mut bytes = std::fs::read(&files[file % files.len()]).unwrap();
        let header_len = header::parse(&bytes, bytes.len() as u64).unwrap().len as usize;
        for (i, b) in &edits {
            let at = i.index(header_len);
            bytes[at] ^= b | 1;
        }
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("mutated.nc");
        std::fs::write(&p, &bytes).unwrap();
        open_and_read(&p);
    }
}

// ---------------------------------------------------------------- names

/// tests/fixtures/netcdf3/names (its generate.py): names netCDF-C reads
/// but no writer defines on purpose.
fn names_dir() -> PathBuf {
    fixtures().join("names")
}

/// Values as netCDF4-python listed them, as little-endian bytes of `dtype`.
fn values_bytes(values: &Value, dtype: &str) -> Vec<u8> {
    fn flat<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| flat(x, out)),
            x => out.push(x),
        }
    }
    let mut xs = Vec::new();
    flat(values, &mut xs);
    let mut out = Vec::new();
    for x in xs {
        match dtype {
            "|i1" => out.push(x.as_i64().unwrap() as i8 as u8),
            "<i2" => out.extend((x.as_i64().unwrap() as i16).to_le_bytes()),
            "<i4" => out.extend((x.as_i64().unwrap() as i32).to_le_bytes()),
            "<f4" => out.extend((x.as_f64().unwrap() as f32).to_le_bytes()),
            "<f8" => out.extend(x.as_f64().unwrap().to_le_bytes()),
            other => panic!("no conversion for {other}"),
        }
    }
    out
}

/// Whether the mount can show a variable of this name as a file.
fn can_be_a_file_name(name: &str) -> bool {
    !(name.is_empty() || name == "." || name == ".." || name.contains('/'))
}

/// Issue 16, item 7: a classic file netCDF-C reads is never refused whole
/// for a name. Names are read as netCDF-C reads them (the bytes before the
/// first NUL: `yy\0` is `yy`, `units\0` is `units`); every variable
/// netCDF4-python lists under a name that can be a file name is shown with
/// its values, dimensions and attributes; the others are skipped with a
/// message naming the file and the variable; of two variables named alike
/// the one netCDF-C's lookup finds (the last) is shown.
#[test]
fn names_read_as_netcdf_c_reads_them() {
    let raw = std::fs::read(names_dir().join("manifest.json")).unwrap();
    let manifest: Value = serde_json::from_slice(&raw).unwrap();
    let mut failures = Vec::new();
    for file in manifest.as_array().unwrap() {
        let path = names_dir().join(file["file"].as_str().unwrap());
        let shown_path = path.display().to_string();
        let ds = match dataset::Opener::new(cache()).open(&path) {
            Ok(ds) => ds,
            Err(e) => {
                failures.push(format!("{shown_path}: refused whole: {e}"));
                continue;
            }
        };
        let nc = netcdf3::File::open(&path).unwrap();
        let dims: Vec<&str> = nc.dimensions().iter().map(|d| d.name.as_str()).collect();
        let want_dims: Vec<&str> = file["dimensions"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        if dims != want_dims {
            failures.push(format!("{shown_path}: dimensions {dims:?}"));
        }
        if !json_eq(
            &Value::Object(nc.global_attributes().clone()),
            &file["attributes"],
        ) {
            failures.push(format!(
                "{shown_path}: global attributes {:?}",
                nc.global_attributes()
            ));
        }
        let vars = file["variables"].as_array().unwrap();
        let mut want_paths: Vec<&str> = vars
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .filter(|n| can_be_a_file_name(n))
            .collect();
        want_paths.sort();
        let paths: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
        if paths != want_paths {
            failures.push(format!("{shown_path}: shows {paths:?}, not {want_paths:?}"));
        }
        let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
        for var in vars {
            let name = var["name"].as_str().unwrap();
            if !can_be_a_file_name(name) {
                let id = format!("variable {}", var["varid"]);
                if !skipped
                    .iter()
                    .any(|s| s.contains(&shown_path) && s.contains(&id))
                {
                    failures.push(format!("{shown_path}: {id} ({name:?}) not reported"));
                }
                continue;
            }
            let Some(entry) = ds.get(name) else {
                continue;
            };
            let m = entry.array.meta();
            let want_dims: Vec<Option<String>> = var["dimensions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| Some(d.as_str().unwrap().to_string()))
                .collect();
            if m.dimension_names != want_dims
                || m.shape != shape_of(&var["shape"])
                || m.dtype.numpy_typestr(Endian::Little) != var["dtype"]
                || !json_eq(&Value::Object(m.attributes.clone()), &var["attributes"])
                || !json_eq(&fill_json(&m.dtype, &m.fill_value), &var["fill_value"])
            {
                failures.push(format!("{shown_path}: {name}: metadata {m:?} vs {var}"));
            }
            let want = values_bytes(&var["values"], var["dtype"].as_str().unwrap());
            if let Err(e) = check_bytes(entry.array.as_ref(), &want) {
                failures.push(format!("{shown_path}: {name}: {e}"));
            }
        }
        if file["file"] == "unshowable_names.nc" {
            // The first of the two `dup` (varid 5; the dict holds the last).
            if !skipped.iter().any(|s| s.contains("variable 5")) {
                failures.push(format!("{shown_path}: first dup not reported: {skipped:?}"));
            }
            if skipped.len() != 6 {
                failures.push(format!("{shown_path}: skipped {skipped:#?}"));
            }
        } else if !skipped.is_empty() {
            failures.push(format!("{shown_path}: skipped {skipped:#?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
