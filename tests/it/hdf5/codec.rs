//! szip (every legal block size, bit width, coding and byte order) and
//! nbit (any precision and offset, integers and floats, both byte orders,
//! the no-op form) against what HDF5 decodes, chunk by chunk and end to
//! end.
//!
//! `codec_chunks.json` (tests/fixtures/hdf5/generate_codec.py): chunks
//! h5py (HDF5 2.0) and Debian's h5repack (HDF5 1.10.8) wrote, as stored
//! (`read_direct_chunk`), with the filter's parameters as HDF5's
//! `set_local` wrote them and the bytes HDF5 decoded them to (an
//! `H5Dread` in the dataset's own type). `data/codec.h5`
//! (same generator, in `manifest.codec.json`, so also read whole by
//! `every_dataset_reads_as_its_writer_reads_it`, `slabfs cat` and the
//! mount tests): full-size types through szip with block sizes 2 to 30
//! and through nbit's no-op form.

use super::*;
use slabfs::codec::{DecodedSize, from_hdf5};

struct Case {
    name: String,
    filter: u32,
    params: Vec<u32>,
    encoded: Vec<u8>,
    decoded: Vec<u8>,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn cases() -> Vec<Case> {
    let raw = std::fs::read(fixtures().join("codec_chunks.json")).unwrap();
    let v: Vec<Value> = serde_json::from_slice(&raw).unwrap();
    v.iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            filter: c["filter"].as_u64().unwrap() as u32,
            params: serde_json::from_value(c["params"].clone()).unwrap(),
            encoded: unhex(c["encoded"].as_str().unwrap()),
            decoded: unhex(c["decoded"].as_str().unwrap()),
        })
        .collect()
}

/// Decode one case every way a codec can be asked: the exact size, at
/// most a bound, and into a buffer.
fn check(c: &Case) -> Result<(), String> {
    let codec = from_hdf5(c.filter, &c.params).map_err(|e| e.to_string())?;
    let n = c.decoded.len();
    let got = codec
        .decode(c.encoded.clone(), DecodedSize::Exact(n))
        .map_err(|e| e.to_string())?;
    if got != c.decoded {
        let at = got.iter().zip(&c.decoded).position(|(a, b)| a != b);
        return Err(format!("differs (first at byte {at:?})"));
    }
    let got = codec
        .decode(c.encoded.clone(), DecodedSize::AtMost(n + 64))
        .map_err(|e| format!("AtMost: {e}"))?;
    if got != c.decoded {
        return Err("differs with AtMost".into());
    }
    let mut into = vec![0xa5; n];
    if let Some(r) = codec.decode_into(&c.encoded, &mut into) {
        r.map_err(|e| format!("decode_into: {e}"))?;
        if into != c.decoded {
            return Err("differs through decode_into".into());
        }
    }
    Ok(())
}

fn check_filter(filter: u32, at_least: usize) {
    let cases: Vec<Case> = cases().into_iter().filter(|c| c.filter == filter).collect();
    assert!(cases.len() >= at_least, "only {} vectors", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            check(c)
                .err()
                .map(|e| format!("{} {:?}: {e}", c.name, c.params))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {}: {failures:#?}",
        failures.len(),
        cases.len()
    );
}

#[test]
fn szip_chunks_decode_as_hdf5_decodes_them() {
    check_filter(4, 80);
    // Every legal block size is among them, with both codings.
    let cases = cases();
    for ppb in (2..=32).step_by(2) {
        for nn in [true, false] {
            assert!(
                cases
                    .iter()
                    .any(|c| c.filter == 4 && c.params[1] == ppb && (c.params[0] & 32 != 0) == nn),
                "no vector for {ppb} pixels per block (NN {nn})"
            );
        }
    }
}

#[test]
fn nbit_chunks_decode_as_hdf5_decodes_them() {
    check_filter(5, 40);
}

#[test]
fn damaged_chunks_are_errors_never_panics() {
    for c in cases() {
        let codec = from_hdf5(c.filter, &c.params).unwrap();
        let n = c.decoded.len();
        // Cut anywhere: an error or (for szip, whose last bits may be
        // padding) the right size; never a panic or a longer output.
        for cut in [
            0,
            1,
            3,
            4,
            5,
            c.encoded.len() / 2,
            c.encoded.len().saturating_sub(1),
        ] {
            let cut = cut.min(c.encoded.len());
            if let Ok(v) = codec.decode(c.encoded[..cut].to_vec(), DecodedSize::Exact(n)) {
                assert_eq!(v.len(), n, "{}", c.name);
            }
            if let Ok(v) = codec.decode(c.encoded[..cut].to_vec(), DecodedSize::AtMost(n)) {
                assert!(v.len() <= n, "{}", c.name);
            }
        }
        // A size other than the chunk's is refused before decoding.
        assert!(
            codec
                .decode(c.encoded.clone(), DecodedSize::Exact(n + 1))
                .is_err(),
            "{}",
            c.name
        );
        let mut flipped = c.encoded.clone();
        for i in (0..flipped.len()).step_by(7) {
            flipped[i] ^= 0x5a;
        }
        if let Ok(v) = codec.decode(flipped, DecodedSize::AtMost(n)) {
            assert!(v.len() <= n, "{}", c.name);
        }
        // One byte flipped at a time, across the chunk (szip's options,
        // block headers and zero-run counts; nbit's bits).
        let step = (c.encoded.len() / 24).max(1);
        for i in (0..c.encoded.len()).step_by(step) {
            for x in [0x01, 0x80, 0xff] {
                let mut e = c.encoded.clone();
                e[i] ^= x;
                if let Ok(v) = codec.decode(e, DecodedSize::Exact(n)) {
                    assert_eq!(v.len(), n, "{}", c.name);
                }
            }
        }
    }
}

/// The file's datasets through the library, `slabfs cat` and a mount,
/// byte for byte against h5py.
#[test]
fn szip_block_sizes_and_nbit_read_end_to_end() {
    let file = "codec.h5";
    let m: Vec<Value> = manifest()
        .into_iter()
        .filter(|f| f["file"] == file)
        .collect();
    let datasets = m[0]["datasets"].as_array().unwrap();
    assert!(datasets.len() >= 10);
    let ds = dataset::Opener::new(cache()).open(&data(file)).unwrap();
    assert!(ds.skipped.is_empty(), "{:#?}", ds.skipped);
    let bin = env!("CARGO_BIN_EXE_slabfs");
    let mount = Mount::start(&fixtures().join("data"), &["--byte-order", "little"]);
    for d in datasets {
        let path = d["path"].as_str().unwrap();
        let want = expected(d["expected"].as_str().unwrap());
        let a = &ds.get(path).unwrap().array;
        check_ranges(a.as_ref(), &want, 7, 20).unwrap_or_else(|e| panic!("{path}: {e}"));
        let out = Command::new(bin)
            .arg("cat")
            .arg(data(file))
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == want, "{path}: slabfs cat differs");
        let got = std::fs::read(mount.path(&format!("{file}/{path}"))).unwrap();
        assert!(got == want, "{path}: the mount differs");
    }
    mount.stop();
}
