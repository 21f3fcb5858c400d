//! netCDF-4 and HDF5 files through slabfs, against what their writers'
//! libraries read (tests/fixtures/hdf5/generate.py writes the files with
//! netCDF4-python and h5py and the expected bytes, dimension names and
//! attributes with the same libraries): every dataset byte for byte,
//! whole and in pseudo-random ranges, through the library, `slabfs cat`
//! and a real mount; metadata (dtype, shape, dimension names, attributes,
//! fill value); what is skipped and hidden; and damaged files (truncated,
//! flipped bytes, chunks past the end), which must give errors naming the
//! file and never panic.

mod attrs;
mod codec;
use crate::common;
mod datatype_versions;
mod floats;
mod headers;
mod storage;
mod types;
mod vds;
mod vdsfix;
use common::check_ranges;
use common::mount::Mount;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use slabfs::dtype::{DataType, Endian};
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::{dataset, hdf5};
use slabfs::fs::error::ToErrno;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hdf5")
}

fn data(file: &str) -> PathBuf {
    fixtures().join("data").join(file)
}

fn expected(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("expected").join(name)).unwrap()
}

/// The files of every `manifest*.json` (each generator writes its own:
/// tests/fixtures/hdf5/README.md).
fn manifest() -> Vec<Value> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("manifest") && n.ends_with(".json"))
        })
        .collect();
    names.sort();
    let mut files = Vec::new();
    for p in names {
        let raw = std::fs::read(&p).unwrap();
        files.extend(serde_json::from_slice::<Vec<Value>>(&raw).unwrap());
    }
    files
}

fn cache() -> Arc<ChunkCache> {
    Arc::new(ChunkCache::new(1 << 20))
}

/// JSON equality with floats equal within one part in 10^6 (float32
/// attributes widened on both sides, printed by Python and by serde).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-6 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        _ => a == b,
    }
}

/// A native-order fill value as a JSON number.
fn fill_json(dtype: &DataType, b: &[u8]) -> Option<Value> {
    use DataType::*;
    if *dtype == X87Extended {
        return Some(Value::from(slabfs::dtype::x87_to_f64(b)));
    }
    let mut a = [0u8; 8];
    a[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    Some(match dtype {
        Int8 => Value::from(b[0] as i8),
        UInt8 => Value::from(b[0]),
        Int16 => Value::from(i16::from_ne_bytes([b[0], b[1]])),
        UInt16 => Value::from(u16::from_ne_bytes([b[0], b[1]])),
        Int32 => Value::from(i32::from_ne_bytes(b.try_into().unwrap())),
        UInt32 => Value::from(u32::from_ne_bytes(b.try_into().unwrap())),
        Int64 => Value::from(i64::from_ne_bytes(a)),
        UInt64 => Value::from(u64::from_ne_bytes(a)),
        Float32 => Value::from(f32::from_ne_bytes(b.try_into().unwrap()) as f64),
        Float64 => Value::from(f64::from_ne_bytes(a)),
        _ => return None,
    })
}

#[test]
fn every_dataset_reads_as_its_writer_reads_it() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in manifest() {
        let name = file["file"].as_str().unwrap();
        let ds = dataset::Opener::new(cache()).open(&data(name)).unwrap();
        let want: Vec<&str> = {
            let mut v: Vec<&str> = file["datasets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["path"].as_str().unwrap())
                .collect();
            v.sort();
            v
        };
        let got: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(got, want, "{name}: datasets shown");
        for d in file["datasets"].as_array().unwrap() {
            let path = d["path"].as_str().unwrap();
            let a = &ds.get(path).unwrap().array;
            let m = a.meta();
            let ctx = format!("{name}:{path}");
            if m.dtype.numpy_typestr(Endian::Little) != d["dtype"].as_str().unwrap() {
                failures.push(format!("{ctx}: dtype {}", m.dtype));
            }
            let shape: Vec<u64> = serde_json::from_value(d["shape"].clone()).unwrap();
            if m.shape != shape {
                failures.push(format!("{ctx}: shape {:?}", m.shape));
            }
            if let Some(dims) = d["dims"].as_array() {
                let dims: Vec<Option<String>> = dims
                    .iter()
                    .map(|x| Some(x.as_str().unwrap().to_string()))
                    .collect();
                if m.dimension_names != dims {
                    failures.push(format!("{ctx}: dims {:?} vs {dims:?}", m.dimension_names));
                }
            }
            for (k, v) in d["attributes"].as_object().unwrap() {
                if !m.attributes.get(k).is_some_and(|w| json_eq(v, w)) {
                    failures.push(format!(
                        "{ctx}: attribute {k}: {:?} vs {v}",
                        m.attributes.get(k)
                    ));
                }
            }
            for hidden in hdf5::HIDDEN_ATTRIBUTES {
                if m.attributes.contains_key(*hidden) {
                    failures.push(format!("{ctx}: shows {hidden}"));
                }
            }
            if let (Some(want), Some(got)) = (d.get("fill"), fill_json(&m.dtype, &m.fill_value))
                && !json_eq(want, &got)
            {
                failures.push(format!("{ctx}: fill value {got} vs {want}"));
            }
            let bytes = expected(d["expected"].as_str().unwrap());
            if let Err(e) = check_ranges(a.as_ref(), &bytes, checked, 40) {
                failures.push(format!("{ctx}: {e}"));
            }
            checked += 1;
        }
        // Skipped with a line naming the file and the dataset.
        let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
        for s in file["skipped"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            if !skipped
                .iter()
                .any(|l| l.contains(name) && l.contains(&format!("/{s}")))
            {
                failures.push(format!("{name}: {s} not reported as skipped: {skipped:#?}"));
            }
        }
        assert_eq!(
            skipped.len(),
            file["skipped"].as_array().unwrap().len(),
            "{name}: {skipped:#?}"
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked >= 60, "only {checked} datasets checked");
}

#[test]
fn superblock_versions_of_the_fixtures() {
    // The fixtures cover what today's writers produce: 0, 2 and 3.
    let versions: Vec<u64> = manifest()
        .iter()
        .map(|f| f["superblock"].as_u64().unwrap())
        .collect();
    for v in [0, 2, 3] {
        assert!(versions.contains(&v), "{versions:?}");
    }
}

#[test]
fn why_datasets_are_skipped() {
    let ds = dataset::Opener::new(cache())
        .open(&data("h5_latest.h5"))
        .unwrap();
    let line = |name: &str| {
        ds.skipped
            .iter()
            .map(|e| e.to_string())
            .find(|l| l.contains(&format!("(dataset /{name})")))
            .unwrap_or_else(|| panic!("{name} not skipped"))
    };
    assert!(line("compound").contains("its type is compound"));
    assert!(line("vlen_str").contains("variable-length string"));
    // Every chunk index HDF5 writes is read: the extensible array (one
    // unlimited dimension) and the v2 B-tree (several) too.
    for shown in ["ext", "ext_sblk", "ext_2d", "ext_holes", "bt2", "bt2_gzip"] {
        assert!(ds.get(shown).is_some(), "{shown}");
    }
    for l in ds.skipped.iter().map(|e| e.to_string()) {
        assert!(l.contains("h5_latest.h5"), "{l}");
    }
}

#[test]
fn netcdf_bookkeeping_stays_hidden() {
    let ds = dataset::Opener::new(cache()).open(&data("nc4.nc")).unwrap();
    // Dimensions without coordinate variables are no variables; a
    // variable named like a dimension shows without netCDF's prefix.
    for hidden in ["nv", "nchar", "_nc4_non_coord_lev"] {
        assert!(ds.get(hidden).is_none(), "{hidden} shown");
    }
    assert_eq!(ds.get("lev").unwrap().array.meta().shape, [4, 2]);
    // Shorter than its unlimited dimension: netCDF's length, fill after.
    let short = ds.get("short_rec").unwrap().array.meta();
    assert_eq!(short.shape, [3, 4]);
    let temp = ds.get("temp").unwrap().array.meta();
    assert_eq!(temp.chunk_shape, Some(vec![1, 2, 3]));
    assert_eq!(
        temp.dimension_names,
        ["time", "lat", "lon"].map(|s| Some(s.to_string()))
    );
}

#[test]
fn a_user_block_is_skipped_and_any_extension_sniffed() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(data("userblock.h5"), tmp.path().join("ub.nc4")).unwrap();
    std::fs::copy(data("h5_earliest.h5"), tmp.path().join("x.HDF5")).unwrap();
    std::fs::copy(data("classic.nc"), tmp.path().join("c.nc")).unwrap();
    let ds = dataset::Opener::new(cache()).open(tmp.path()).unwrap();
    let paths: Vec<&str> = ds.entries.iter().map(|e| e.path.as_str()).collect();
    assert!(paths.contains(&"ub.nc4/a"), "{paths:?}");
    assert!(paths.contains(&"x.HDF5/grp/sub/vals"), "{paths:?}");
    assert!(paths.contains(&"c.nc/v"), "{paths:?}");
    // SOURCE itself is sniffed whatever its name.
    let one = tmp.path().join("no_extension");
    std::fs::copy(data("userblock.h5"), &one).unwrap();
    let ds = dataset::Opener::new(cache()).open(&one).unwrap();
    assert_eq!(ds.entries.len(), 1);
}

#[test]
fn slabfs_cat_prints_every_dataset() {
    let bin = env!("CARGO_BIN_EXE_slabfs");
    let mut n = 0;
    for file in manifest() {
        let name = file["file"].as_str().unwrap();
        for d in file["datasets"].as_array().unwrap() {
            let out = Command::new(bin)
                .arg("cat")
                .arg(data(name))
                .arg(d["path"].as_str().unwrap())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.stdout == expected(d["expected"].as_str().unwrap()),
                "{name}:{}",
                d["path"]
            );
            n += 1;
        }
    }
    assert!(n >= 60);
}

#[test]
fn a_mount_serves_files_sidecars_and_xattrs() {
    let m = Mount::start(&fixtures().join("data"), &["--byte-order", "little"]);
    let mut n = 0;
    for file in manifest() {
        let name = file["file"].as_str().unwrap();
        for d in file["datasets"].as_array().unwrap() {
            let rel = format!("{name}/{}", d["path"].as_str().unwrap());
            let got = std::fs::read(m.path(&rel)).unwrap();
            assert!(got == expected(d["expected"].as_str().unwrap()), "{rel}");
            n += 1;
        }
    }
    assert!(n >= 60);
    // Groups are directories; sidecars carry the netCDF metadata.
    assert!(m.path("nc4.nc/grp/sub").is_dir());
    let sidecar: Value =
        serde_json::from_slice(&std::fs::read(m.path("nc4.nc/temp.json")).unwrap()).unwrap();
    assert_eq!(
        sidecar["dimension_names"],
        serde_json::json!(["time", "lat", "lon"])
    );
    assert_eq!(sidecar["attributes"]["units"], "K");
    assert_eq!(sidecar["fill_value"], -999.0);
    assert_eq!(sidecar["chunk_shape"], serde_json::json!([1, 2, 3]));
    let dims = xattr(&m.path("nc4.nc/grp/sub/y"), "user.slabfs.dims");
    assert_eq!(dims.as_deref(), Some(&br#"["lon"]"#[..]));
    // The hidden dimension is not there.
    assert!(!m.path("nc4.nc/nv").exists());
    m.stop();
}

fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid NUL-terminated strings and a buffer of the given size.
    let len = unsafe {
        libc::getxattr(
            p.as_ptr(),
            n.as_ptr(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
        )
    };
    (len >= 0).then(|| buf[..len as usize].to_vec())
}

/// Open `path` and read every dataset whole: every error must name the
/// file. Returns the errors.
fn open_and_read_all(path: &Path) -> Vec<String> {
    let label = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut errors = Vec::new();
    match dataset::Opener::new(cache()).open(path) {
        Err(e) => errors.push(e.to_string()),
        Ok(ds) => {
            errors.extend(ds.skipped.iter().map(|e| e.to_string()));
            for e in &ds.entries {
                let size = e.array.meta().nbytes().min(64 << 10);
                let mut buf = vec![0u8; size as usize];
                if let Err(err) = read_at(e.array.as_ref(), 0, &mut buf, Endian::Little) {
                    errors.push(err.to_string());
                }
            }
        }
    }
    for e in &errors {
        assert!(e.contains(&label), "error without the file name: {e}");
    }
    errors
}

#[test]
fn truncated_files_fail_with_the_file_named() {
    let tmp = tempfile::tempdir().unwrap();
    for file in ["nc4.nc", "h5_earliest.h5", "h5_latest.h5"] {
        let bytes = std::fs::read(data(file)).unwrap();
        let mut past_end = 0;
        let mut cut = 0usize;
        while cut < bytes.len() {
            let p = tmp.path().join(format!("cut_{file}"));
            std::fs::write(&p, &bytes[..cut]).unwrap();
            let errors = open_and_read_all(&p);
            if cut > 0 {
                assert!(!errors.is_empty(), "{file} cut at {cut} read cleanly");
            }
            past_end += errors
                .iter()
                .filter(|e| e.contains("past the end of the file"))
                .count();
            cut += 1 + cut / 3;
        }
        // Cuts that keep the metadata but lose chunks: the reads of those
        // chunks fail, naming the file and the chunk.
        assert!(past_end > 0, "{file}");
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    // (file, bytes flipped one by one at its start, stride over the rest):
    // h5_latest.h5 has 50 datasets to read after each flip, so fewer.
    for (file, first, stride) in [
        ("nc4.nc", 256, 151),
        ("h5_earliest.h5", 256, 151),
        ("h5_latest.h5", 96, 499),
        ("userblock.h5", 1024, 7),
        // Mostly chunks: every HDF5-only filter's decoder meets damage.
        ("filters.h5", 0, 211),
    ] {
        let bytes = std::fs::read(data(file)).unwrap();
        let p = tmp.path().join(format!("flip_{file}"));
        // Every byte of the start (superblock, root group header),
        // flipped whole or by one bit, then a stride over the rest
        // (headers, B-trees, heaps, chunks). A longer search is a fuzz
        // target's job.
        let head = (0..bytes.len().min(first)).map(|p| (p, if p % 2 == 0 { 0xFFu8 } else { 0x10 }));
        let rest = (first..bytes.len()).step_by(stride).map(|p| (p, 0xFFu8));
        for (pos, mask) in head.chain(rest) {
            {
                let mut b = bytes.clone();
                b[pos] ^= mask;
                std::fs::write(&p, &b).unwrap();
                open_and_read_all(&p);
            }
        }
    }
}

#[test]
fn a_chunk_address_past_the_end_fails_its_reads_only() {
    // h5_earliest.h5 with its `fletcher` dataset's data moved past the end:
    // patch the first v1 B-tree chunk pointer whose target holds the
    // dataset's first chunk (found by content, as the writer stored it).
    let bytes = std::fs::read(data("h5_earliest.h5")).unwrap();
    // Chunk 0 of `fletcher` is 0,1,4,9,16 as little-endian i32 followed by
    // its checksum.
    let chunk0: Vec<u8> = [0i32, 1, 4, 9, 16]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let at = bytes
        .windows(chunk0.len())
        .position(|w| w == chunk0)
        .expect("chunk 0 of fletcher") as u64;
    let ptr = bytes
        .windows(8)
        .position(|w| w == at.to_le_bytes())
        .expect("a pointer to chunk 0");
    let mut b = bytes.clone();
    b[ptr..ptr + 8].copy_from_slice(&(bytes.len() as u64 + 4096).to_le_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("moved.h5");
    std::fs::write(&p, &b).unwrap();
    let ds = dataset::Opener::new(cache()).open(&p).unwrap();
    let fletcher = &ds.get("fletcher").unwrap().array;
    let mut buf = vec![0u8; 20];
    let err = read_at(fletcher.as_ref(), 0, &mut buf, Endian::Little).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("moved.h5") && msg.contains("/fletcher"),
        "{msg}"
    );
    assert!(msg.contains("past the end of the file"), "{msg}");
    assert_eq!(err.errno(), libc::EIO);
    // The other chunks and datasets still read.
    let want = expected("h5_earliest.h5.fletcher.bin");
    read_at(fletcher.as_ref(), 20, &mut buf, Endian::Little).unwrap();
    assert_eq!(buf, want[20..40]);
    let data_arr = &ds.get("data").unwrap().array;
    check_ranges(
        data_arr.as_ref(),
        &expected("h5_earliest.h5.data.bin"),
        1,
        5,
    )
    .unwrap();
}

#[test]
fn kerchunk_references_and_the_native_reader_agree() {
    // tests/fixtures/kerchunk/data: a netCDF-4 file and kerchunk's own
    // references into it (its HDF5 translator found every chunk with
    // h5py): the same bytes either way, array by array (the file has no
    // unwritten chunks where the two fill values differ).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kerchunk/data");
    let native = dataset::Opener::new(cache())
        .open(&dir.join("netcdf4.h5"))
        .unwrap();
    let refs = dataset::Opener::new(cache())
        .open(&dir.join("netcdf4.json"))
        .unwrap();
    assert_eq!(native.entries.len(), refs.entries.len());
    for r in &refs.entries {
        let n = native
            .get(&r.path)
            .unwrap_or_else(|| panic!("{} missing", r.path));
        let (a, b) = (n.array.meta(), r.array.meta());
        assert_eq!((&a.shape, &a.dtype), (&b.shape, &b.dtype), "{}", r.path);
        // (Fill values may differ: kerchunk writes `null` for some, which
        // Zarr reads as 0, where HDF5 says -9223372036854775806.)
        let mut x = vec![0u8; a.nbytes() as usize];
        let mut y = x.clone();
        read_at(n.array.as_ref(), 0, &mut x, Endian::Little).unwrap();
        read_at(r.array.as_ref(), 0, &mut y, Endian::Little).unwrap();
        assert!(x == y, "{}", r.path);
    }
}

#[test]
fn paged_extensible_array_data_blocks_are_read() {
    // ext_paged has chunks in paged data blocks (super block 13 on), one
    // page written after an unwritten one; before paged data blocks were
    // read, the dataset was skipped as unsupported.
    let ds = dataset::Opener::new(cache())
        .open(&data("paged.h5"))
        .unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    for name in ["ext_paged", "ext_paged_gzip", "fixed_many"] {
        let a = &ds.get(name).unwrap().array;
        let want = expected(&format!("paged.h5.{name}.bin"));
        let mut got = vec![0u8; want.len()];
        read_at(a.as_ref(), 0, &mut got, Endian::Little).unwrap();
        assert!(got == want, "{name}");
    }
}

#[test]
fn a_chunk_index_is_walked_on_first_read_and_a_failed_walk_is_retried() {
    // paged.h5 with its one fixed array header (fixed_many) damaged: the
    // file still loads (indexes are walked on first read, not at load),
    // fixed_many's reads fail with EIO naming the file, the other
    // datasets read; once the file is whole again the same dataset reads
    // (a failed walk is not kept).
    let bytes = std::fs::read(data("paged.h5")).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == b"FAHD")
        .expect("a fixed array header");
    let mut b = bytes.clone();
    b[at + 8] ^= 0xFF;
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("damaged.h5");
    std::fs::write(&p, &b).unwrap();
    let ds = dataset::Opener::new(cache()).open(&p).unwrap();
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    let fixed = &ds.get("fixed_many").unwrap().array;
    let want = expected("paged.h5.fixed_many.bin");
    let mut got = vec![0u8; want.len()];
    let err = read_at(fixed.as_ref(), 0, &mut got, Endian::Little).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("damaged.h5") && msg.contains("fixed array header"),
        "{msg}"
    );
    assert_eq!(err.errno(), libc::EIO);
    let ext = &ds.get("ext_paged").unwrap().array;
    check_ranges(ext.as_ref(), &expected("paged.h5.ext_paged.bin"), 1, 5).unwrap();
    // The same file (the same inode, opened once) made whole again.
    std::fs::write(&p, &bytes).unwrap();
    read_at(fixed.as_ref(), 0, &mut got, Endian::Little).unwrap();
    assert!(got == want);
}

/// Issue 41: the wrappers over a dataset's chunked array (`MaskAware` for
/// a filtered one, `Extended` for one shorter than its unlimited
/// dimension) answer `fetch_latency` and `cached` as that array does.
/// They answered the trait's defaults ("local", "not cached"), so a remote
/// dataset read ahead as a local one and every read of it, its chunks
/// decoded already, went to the waiting pool. The file reports a latency
/// as a remote object does; each region is checked before and after its
/// chunks are prefetched, and read against the writer's bytes.
#[test]
fn wrapped_datasets_of_a_remote_file_answer_its_latency_and_their_cached_chunks() {
    use slabfs::engine::index::Region;
    use slabfs::storage::testing::{Flight, LatentFile};
    let latency = std::time::Duration::from_millis(1);
    let open = |file: &str| {
        let path = data(file);
        let local = slabfs::storage::local::os().open(&path).unwrap();
        let remote = Arc::new(LatentFile::new(local, latency, Flight::new()));
        hdf5::from_reader(
            path.display().to_string(),
            remote,
            Arc::new(ChunkCache::new(16 << 20)),
        )
        .unwrap()
    };
    let region = |start: &[u64], count: &[u64]| Region {
        start: start.to_vec(),
        count: count.to_vec(),
    };
    let nc4 = open("nc4.nc");
    let filters = open("filters.h5");
    // (file, dataset, a region whose chunks are all stored, its bytes:
    // the first ones of the dataset's).
    let cases = [
        (
            &nc4,
            "nc4.nc",
            "temp",
            region(&[0, 0, 0], &[1, 4, 5]),
            20 * 4,
        ),
        (&nc4, "nc4.nc", "short_rec", region(&[0, 0], &[1, 4]), 4 * 2),
        (
            &filters,
            "filters.h5",
            "masked",
            region(&[0, 0], &[3, 100]),
            300 * 4,
        ),
    ];
    for (contents, file, name, region, len) in cases {
        let (_, array) = contents
            .arrays
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{file}: no {name}"));
        assert_eq!(array.fetch_latency(), Some(latency), "{file} {name}");
        assert!(!array.cached(&region), "{file} {name}: nothing read yet");
        array.prefetch(std::slice::from_ref(&region));
        assert!(array.cached(&region), "{file} {name}: prefetched");
        let mut got = vec![0u8; len];
        array.read_region(&region, &mut got).unwrap();
        let want = expected(&format!("{file}.{name}.bin"));
        assert!(got == want[..len], "{file} {name}");
    }
    // The records short_rec never had are fill: nothing to wait for.
    let (_, short) = nc4.arrays.iter().find(|(n, _)| n == "short_rec").unwrap();
    assert_eq!(short.meta().shape, [3, 4]);
    assert!(short.cached(&region(&[1, 0], &[2, 4])));
    assert_eq!(short.stored().unwrap().meta().shape, [1, 4]);
}
