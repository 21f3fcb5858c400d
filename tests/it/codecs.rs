//! Every codec test vector written by numcodecs / zarr-python
//! (tests/fixtures/codecs/generate_codecs.py) decoded through the public
//! codec API and compared byte for byte with what the reference reader
//! decoded it to; damaged vectors must fail with the stated error.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;
use slabfs::codec::registry::{CODECS, HDF5_FILTERS, NUMCODECS_PREFIX};
use slabfs::codec::{
    ChunkRepr, Codec, CodecChain, CodecError, DecodedSize, from_v2, from_v3, v2_chain,
};
use slabfs::dtype::DataType;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codecs")
}

fn bytes_of(case: &Value, prefix: &str) -> Option<Vec<u8>> {
    if let Some(b) = case.get(format!("{prefix}_b64")).and_then(Value::as_str) {
        return Some(
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .expect("base64"),
        );
    }
    let file = case.get(format!("{prefix}_file"))?.as_str()?;
    Some(std::fs::read(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}")))
}

fn error_name(e: &CodecError) -> &'static str {
    match e {
        CodecError::Corrupt { .. } => "Corrupt",
        CodecError::WrongSize { .. } => "WrongSize",
        CodecError::TooLarge { .. } => "TooLarge",
        CodecError::Checksum { .. } => "Checksum",
        CodecError::Config { .. } => "Config",
        CodecError::Unknown(_) => "Unknown",
        CodecError::UnknownHdf5Filter { .. } => "UnknownHdf5Filter",
        CodecError::Chain(_) => "Chain",
        _ => "other",
    }
}

/// Decode one case; Err(message) on any disagreement.
fn run(case: &Value) -> Result<(), String> {
    let kind = case["kind"].as_str().unwrap();
    let encoded = bytes_of(case, "encoded").unwrap();
    let expected = bytes_of(case, "decoded");
    let codec = &case["codec"];
    let results: Vec<(String, Result<Vec<u8>, CodecError>)> = match kind {
        "v2" | "v3" => {
            let c = if kind == "v2" {
                from_v2(codec).map_err(|e| format!("from_v2: {e}"))?
            } else {
                match from_v3(codec).map_err(|e| format!("from_v3: {e}"))? {
                    Some(Codec::BytesToBytes(c)) => c,
                    other => return Err(format!("from_v3 gave {other:?}")),
                }
            };
            let n = expected
                .as_ref()
                .map(Vec::len)
                .or_else(|| case["decoded_size"].as_u64().map(|n| n as usize))
                .expect("decoded or decoded_size");
            let mut r = vec![(
                "Exact".to_string(),
                c.decode(encoded.clone(), DecodedSize::Exact(n)),
            )];
            if c.encoded_size(n).is_none() && case.get("error").is_none() {
                // A compressor: also when it is only told an upper bound.
                r.push((
                    "AtMost".into(),
                    c.decode(encoded.clone(), DecodedSize::AtMost(n)),
                ));
            }
            // The fast path, straight into the destination, where offered.
            let mut out = vec![0; n];
            if let Some(result) = c.decode_into(&encoded, &mut out) {
                r.push(("decode_into".into(), result.map(|()| out)));
            }
            r
        }
        "v3_chain" => {
            let codecs = codec
                .as_array()
                .unwrap()
                .iter()
                .map(|c| from_v3(c).map(|c| c.expect("a known codec")))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("from_v3: {e}"))?;
            let chain = CodecChain::new(codecs).map_err(|e| format!("chain: {e}"))?;
            let dtype = DataType::from_zarr_v3(case["data_type"].as_str().unwrap()).unwrap();
            vec![("chain".into(), chain.decode(encoded, &repr(case, dtype)))]
        }
        "v2_chain" => {
            let (dtype, endian) = DataType::from_numpy(case["dtype"].as_str().unwrap()).unwrap();
            let filters = codec["filters"].as_array().cloned().unwrap_or_default();
            let compressor = codec.get("compressor").filter(|c| !c.is_null());
            let r = repr(case, dtype);
            let chain = v2_chain(
                r.shape.len(),
                codec["order"] == "F",
                endian,
                &filters,
                compressor,
            )
            .map_err(|e| format!("v2_chain: {e}"))?;
            vec![("chain".into(), chain.decode(encoded, &r))]
        }
        other => return Err(format!("unknown kind {other}")),
    };
    for (how, result) in results {
        match (&expected, case["error"].as_str(), result) {
            (Some(want), None, Ok(got)) => {
                if &got != want {
                    let at = got.iter().zip(want).position(|(a, b)| a != b);
                    return Err(format!(
                        "{how}: decoded {} bytes, expected {}; first difference at {at:?}",
                        got.len(),
                        want.len()
                    ));
                }
            }
            (_, Some(err), Err(e)) => {
                if error_name(&e) != err {
                    return Err(format!("{how}: expected a {err} error, got {e}"));
                }
            }
            (_, Some(err), Ok(_)) => {
                return Err(format!("{how}: expected a {err} error, decoded fine"));
            }
            (_, None, Err(e)) => return Err(format!("{how}: {e}")),
            (None, None, Ok(_)) => return Err("case has neither decoded bytes nor error".into()),
        }
    }
    Ok(())
}

fn repr(case: &Value, dtype: DataType) -> ChunkRepr {
    let shape: Vec<u64> = case["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect();
    let fill = vec![0; dtype.size()];
    ChunkRepr { shape, dtype, fill }
}

fn manifest() -> Vec<Value> {
    let m: Value =
        serde_json::from_slice(&std::fs::read(root().join("manifest.json")).unwrap()).unwrap();
    m["cases"].as_array().unwrap().clone()
}

#[test]
fn every_vector_decodes_like_the_reference() {
    let cases = manifest();
    assert!(cases.len() > 500, "manifest has only {} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            run(c)
                .err()
                .map(|e| format!("{}: {e}", c["name"].as_str().unwrap()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_vectors_cover_every_blosc_cname_and_shuffle() {
    let cases = manifest();
    for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"] {
        for shuffle in [0, 1, 2] {
            let found = cases.iter().any(|c| {
                c["kind"] == "v2"
                    && c["codec"]["id"] == "blosc"
                    && c["codec"]["cname"] == cname
                    && c["codec"]["shuffle"] == shuffle
                    && c.get("error").is_none()
            });
            assert!(found, "no vector for blosc {cname} shuffle {shuffle}");
        }
    }
    let memcpyed = cases
        .iter()
        .filter(|c| c["blosc_header"]["memcpyed"] == true)
        .count();
    assert!(memcpyed >= 2);
}

#[test]
fn the_vectors_cover_every_pcodec_and_zfp_type_and_mode() {
    let cases = manifest();
    let decoded = |prefix: &str| {
        cases
            .iter()
            .filter(|c| c["name"].as_str().unwrap().starts_with(prefix) && c.get("error").is_none())
            .count()
    };
    for t in ["u2", "u4", "u8", "i2", "i4", "i8", "f2", "f4", "f8"] {
        assert!(
            decoded(&format!("pcodec_v3_{t}")) == 1 && decoded(&format!("pcodec_v2_{t}")) == 1,
            "pcodec {t}"
        );
    }
    for t in ["f4", "f8", "i4", "i8"] {
        for mode in ["rate", "precision", "reversible"] {
            assert_eq!(
                decoded(&format!("zfpy_v2_{t}_{mode}")),
                1,
                "zfpy {t} {mode}"
            );
        }
    }
    assert_eq!(
        decoded("zfpy_v3_f4_accuracy") + decoded("zfpy_v3_f8_accuracy"),
        2
    );
    // zfp in 1 to 4 dimensions.
    for rank in 1..=4 {
        let found = cases.iter().any(|c| {
            c["name"].as_str().unwrap().starts_with("zfpy_")
                && c.get("error").is_none()
                && c["shape"].as_array().map(Vec::len) == Some(rank)
        });
        assert!(found, "no zfpy vector of rank {rank}");
    }
}

/// Every codec name that some vector decodes: numcodecs ids, Zarr v3
/// names, and the codecs inside whole chunks.
fn names_in_vectors() -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut add = |c: &Value| {
        if let Some(id) = c.get("id").and_then(Value::as_str) {
            names.insert(id.to_string());
        }
        if let Some(n) = c.get("name").and_then(Value::as_str) {
            names.insert(n.to_string());
        }
    };
    for case in manifest() {
        let codec = &case["codec"];
        match case["kind"].as_str().unwrap() {
            "v3_chain" => codec.as_array().unwrap().iter().for_each(&mut add),
            "v2_chain" => {
                codec["filters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .for_each(&mut add);
                add(&codec["compressor"]);
            }
            _ => add(codec),
        }
    }
    names
}

#[test]
fn every_registered_codec_has_vectors_under_each_name() {
    let names = names_in_vectors();
    let mut missing = Vec::new();
    for entry in CODECS {
        if let Some(id) = entry.id()
            && !names.contains(id)
        {
            missing.push(id.to_string());
        }
        if let Some(v3) = entry.v3_name()
            && !names.contains(v3)
        {
            missing.push(v3.to_string());
        }
        // zarr-python's v3 wrapper, for every codec it registers one for.
        if let Some(id) = entry.id()
            && id != "categorize"
            && !names.contains(&format!("{NUMCODECS_PREFIX}{id}"))
        {
            missing.push(format!("{NUMCODECS_PREFIX}{id}"));
        }
    }
    assert!(missing.is_empty(), "no vector for {missing:?}");
}

#[test]
fn docs_table_every_registered_codec() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/CODECS.md"))
        .expect("docs/CODECS.md");
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `")).collect();
    for entry in CODECS {
        let name = format!("`{}`", entry.name());
        let row = rows
            .iter()
            .find(|r| r.split('|').nth(1).is_some_and(|c| c.contains(&name)))
            .unwrap_or_else(|| panic!("docs/CODECS.md has no row for {name}"));
        for v3 in entry.v3_names() {
            assert!(
                row.contains(&format!("`{v3}`")),
                "{name}: row does not name `{v3}`"
            );
        }
        if let Some(h) = entry.hdf5 {
            assert!(
                row.contains(&h.id.to_string()),
                "{name}: row does not give HDF5 id {}",
                h.id
            );
        }
    }
    for f in HDF5_FILTERS {
        let name = format!("`{}`", f.name);
        let row = rows
            .iter()
            .find(|r| r.split('|').nth(1).is_some_and(|c| c.trim() == name))
            .unwrap_or_else(|| panic!("docs/CODECS.md has no row for {name}"));
        let id = row.split('|').nth(2).unwrap_or("");
        assert!(
            id.trim_start().starts_with(&format!("{} ", f.id)),
            "{name}: row does not give HDF5 id {}",
            f.id
        );
    }
}

/// Every pcodec and zfpy chunk, cut at many lengths and with bytes
/// flipped: an error or a chunk of exactly the right size, never a panic
/// (zfp is C without bounds checks: the padding bound is what keeps its
/// reads inside the buffer).
#[test]
fn damaged_array_codec_streams_are_errors_or_exact() {
    let mut tried = 0;
    for case in manifest() {
        let name = case["name"].as_str().unwrap();
        let zfp = name.starts_with("zfpy_");
        if !(name.starts_with("pcodec_") || zfp) || case.get("error").is_some() {
            continue;
        }
        let Some(codecs) = case["codec"].as_array() else {
            continue; // v2 chains are the same streams
        };
        let chain = CodecChain::new(
            codecs
                .iter()
                .map(|c| from_v3(c).unwrap().unwrap())
                .collect(),
        )
        .unwrap();
        let dtype = DataType::from_zarr_v3(case["data_type"].as_str().unwrap()).unwrap();
        let r = repr(&case, dtype);
        let want = r.nbytes().unwrap();
        let enc = bytes_of(&case, "encoded").unwrap();
        let step = (enc.len() / 40).max(1);
        for cut in (0..enc.len()).step_by(step) {
            if let Ok(out) = chain.decode(enc[..cut].to_vec(), &r) {
                assert_eq!(out.len(), want, "{name} cut at {cut}");
            }
            let mut bad = enc.clone();
            bad[cut] ^= 0xa5;
            if let Ok(out) = chain.decode(bad, &r) {
                assert_eq!(out.len(), want, "{name} byte {cut} flipped");
            }
            tried += 1;
        }
    }
    assert!(tried > 300, "only {tried} damaged streams");
}
