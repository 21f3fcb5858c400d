//! The corpus walk (issue 24, item 8): every HDF5, netCDF-4 and netCDF-3
//! file of `../shared/corpora/hdf5_thirdparty` and `../shared/corpora/netcdf_c`
//! (files other projects wrote and committed: the HDF5 library's own test
//! files, jhdf's, hdf5-json's, GDAL's, netcdf-c's), read through slabfs's
//! library and compared, dataset by dataset, with what the reference
//! readers read.
//!
//! The expected values come from `tests/fixtures/hdf5/corpus_expected.py`
//! (run here through the project's Python; it decides which reader is the
//! reference for each file: netCDF4-python for netCDF-3 and netCDF-4,
//! h5py for other HDF5): per dataset its class, mount path, shape, byte
//! NumPy dtype (little-endian), length and two CRCs of its little-endian
//! C-order bytes, so nothing big is written or held. Datasets are
//! classed by their HDF5 type class, never by h5py's NumPy dtype (which
//! calls a NumPy-tagged opaque type `|S21`): "numeric" (integers, floats,
//! enums and bitfields as their base integer) and "string" (fixed-length
//! strings and netCDF `char`, compared with the bytes as stored, which is
//! what slabfs serves: h5py's own read converts space padding and NUL
//! terminators to NUL padding, so the script reads them with the file's
//! type as the memory type, no conversion). What no flat file carries
//! (opaque, compound, variable-length, reference, array, null
//! dataspaces) is not compared and counted by class. Each file is opened
//! once with [`slabfs::formats::dataset::Opener::open`] (what the mount serves) in
//! its own thread, so that a panic or a hang is reported against the file
//! instead of ending the walk.
//!
//! Every numeric or string dataset ends in one category: byte-exact,
//! mismatch (shape, length or bytes), not served (skipped, with slabfs's
//! line; not listed at all; or a read that fails). The test fails on any
//! mismatch or unserved dataset that is not in
//! `tests/corpus_exceptions.json` (file, dataset, reason), on a panic or a
//! hang, and on an exception that no longer applies (so the list only
//! ever says what is true: delete entries as fixes land). Files, groups,
//! objects and datasets the reference readers cannot read either are
//! counted apart, and listed in the same file with the reference's error
//! (`unreadable_by_reference`; the test fails when that list and the
//! readers disagree); an object HDF5 refuses to open that slabfs serves
//! fails it too. The summary lines are printed whatever the outcome
//! (`SLABFS_CORPUS_VERBOSE=1` lists every dataset not byte-exact, every
//! one not compared and what the reference cannot read).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use slabfs::dtype::Endian;
use slabfs::engine::cache::ChunkCache;
use slabfs::engine::read::read_at;
use slabfs::formats::dataset;

/// A file whose open and reads take longer than this hangs.
const HANG: Duration = Duration::from_secs(60);
/// Read a dataset this many bytes at a time.
const BLOCK: usize = 8 << 20;

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora")
}

const FOLDERS: &[&str] = &["hdf5_thirdparty", "netcdf_c"];

/// What the reference readers read (corpus_expected.py's JSON).
fn expected() -> Vec<Value> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hdf5/corpus_expected.py");
    let out = common::python::Python::new()
        .arg(script)
        .args(FOLDERS.iter().map(|f| corpora().join(f)))
        .output()
        .expect("running corpus_expected.py");
    assert!(
        out.status.success(),
        "corpus_expected.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("corpus_expected.py's JSON")
}

/// The listed exceptions of `list` (`exceptions`: what slabfs may get
/// wrong for now; `unreadable_by_reference`: files, with dataset `""`, and
/// datasets the reference readers cannot read), `(file, dataset) -> reason`.
fn listed_in(list: &str) -> BTreeMap<(String, String), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus_exceptions.json");
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    for e in v[list].as_array().unwrap() {
        let key = (
            e["file"].as_str().unwrap().to_string(),
            e["dataset"].as_str().unwrap().to_string(),
        );
        let reason = e["reason"].as_str().unwrap().to_string();
        assert!(
            reason.starts_with("issue 24: ")
                || reason.starts_with("h5py cannot ")
                || reason.starts_with("netCDF4-python cannot ")
                || reason == UNDEFINED,
            "{key:?}: a reason says what is true: {reason}"
        );
        assert!(out.insert(key.clone(), reason).is_none(), "{key:?} twice");
    }
    out
}

const UNDEFINED: &str = "values never written, fill off: undefined";

/// What became of one numeric dataset.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Exact,
    /// Served with other bytes or another shape.
    Mismatch(String),
    /// Skipped with slabfs's line, not listed, or its read fails.
    NotServed(String),
}

/// Every expected dataset of one file, or why the file gave none.
enum FileOutcome {
    /// The outcomes; what slabfs serves that the reference does not
    /// list; what it serves though HDF5 refuses to open the object.
    Opened(Vec<(String, Outcome)>, Vec<String>, Vec<String>),
    Refused(String),
    Panicked(String),
}

struct Digest {
    crc: crc32fast::Hasher,
    crcc: u32,
    len: u64,
}

fn check(a: &dyn slabfs::ArraySource, want: &Value) -> Outcome {
    let m = a.meta();
    let shape: Vec<u64> = serde_json::from_value(want["shape"].clone()).unwrap();
    if m.shape != shape {
        return Outcome::Mismatch(format!("shape {:?}, reference {shape:?}", m.shape));
    }
    let dtype = m.dtype.numpy_typestr(Endian::Little);
    if dtype != want["dtype"].as_str().unwrap() {
        return Outcome::Mismatch(format!("dtype {dtype}, reference {}", want["dtype"]));
    }
    let item = m.item_size() as u64;
    let nbytes = match want.get("head").and_then(Value::as_u64) {
        Some(k) => k * item,
        None => m.nbytes(),
    };
    let mut d = Digest {
        crc: crc32fast::Hasher::new(),
        crcc: 0,
        len: 0,
    };
    let mut buf = vec![0u8; BLOCK.min(nbytes as usize)];
    while d.len < nbytes {
        let want_n = ((nbytes - d.len) as usize).min(BLOCK);
        match read_at(a, d.len, &mut buf[..want_n], Endian::Little) {
            Ok(0) => break,
            Ok(n) => {
                d.crc.update(&buf[..n]);
                d.crcc = crc32c::crc32c_append(d.crcc, &buf[..n]);
                d.len += n as u64;
            }
            Err(e) => return Outcome::NotServed(format!("read fails: {e}")),
        }
    }
    let (crc, crcc) = (d.crc.finalize(), d.crcc);
    if d.len != want["nbytes"].as_u64().unwrap() {
        return Outcome::Mismatch(format!("{} bytes, reference {}", d.len, want["nbytes"]));
    }
    if u64::from(crc) != want["crc32"].as_u64().unwrap()
        || u64::from(crcc) != want["crc32c"].as_u64().unwrap()
    {
        return Outcome::Mismatch(format!("bytes differ (dtype {dtype})"));
    }
    Outcome::Exact
}

/// Open `path` with slabfs and check every expected dataset of `file`.
fn walk_file(path: &Path, file: &Value) -> FileOutcome {
    let ds = match dataset::Opener::new(Arc::new(ChunkCache::new(64 << 20))).open(path) {
        Ok(ds) => ds,
        Err(e) => return FileOutcome::Refused(e.to_string()),
    };
    let skipped: Vec<String> = ds.skipped.iter().map(|e| e.to_string()).collect();
    let mut out = Vec::new();
    let mut wanted = BTreeSet::new();
    let mut refused = Vec::new();
    for d in file["datasets"].as_array().into_iter().flatten() {
        let p = d["path"].as_str().unwrap().to_string();
        wanted.insert(p.clone());
        if let Some(e) = d.get("error") {
            // An object HDF5 will not open (a header it finds corrupt,
            // an unknown message flagged "fail if unknown"): slabfs must
            // not serve it either.
            if d["class"] == "object" && ds.get(&p).is_some() {
                refused.push(format!("{p}: served, but {}", e.as_str().unwrap_or("?")));
            }
            continue;
        }
        let outcome = match ds.get(&p) {
            Some(e) => check(e.array.as_ref(), d),
            None => {
                let needle = format!("/{p})");
                Outcome::NotServed(match skipped.iter().find(|l| l.contains(&needle)) {
                    Some(line) => format!("skipped: {line}"),
                    None => "not listed, no line".to_string(),
                })
            }
        };
        out.push((p, outcome));
    }
    // What slabfs serves that the reference does not call numeric.
    let extra = ds
        .entries
        .iter()
        .map(|e| e.path.clone())
        .filter(|p| !wanted.contains(p))
        .collect();
    FileOutcome::Opened(out, extra, refused)
}

/// [`walk_file`] in its own thread: a panic is caught, a hang abandoned.
fn walk_file_guarded(path: PathBuf, file: Value) -> FileOutcome {
    let (tx, rx) = mpsc::channel();
    let name = file["file"].as_str().unwrap().to_string();
    let handle = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _ = tx.send(walk_file(&path, &file));
        })
        .unwrap();
    match rx.recv_timeout(HANG) {
        Ok(r) => {
            let _ = handle.join();
            r
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            FileOutcome::Panicked(format!("hangs: no answer in {HANG:?}"))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(p) => FileOutcome::Panicked(format!(
                "panics: {}",
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
            Ok(()) => FileOutcome::Panicked("thread ended without an answer".into()),
        },
    }
}

#[test]
fn every_numeric_dataset_of_the_corpora_reads_as_the_reference_reads_it() {
    let start = Instant::now();
    let files = expected();
    let python_time = start.elapsed();
    let mut exceptions = listed_in("exceptions");
    let unreadable = listed_in("unreadable_by_reference");
    // Panics are caught per file (walk_file_guarded) and reported below.
    // The panic hook is the process's, shared with the tests running
    // beside this one: left as it is.

    let mut failures: Vec<String> = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut count = |k: &str| *counts.entry(k.to_string()).or_default() += 1;
    // What no flat file carries, by HDF5 type class (opaque, compound,
    // null dataspace...): not compared, counted apart.
    let mut not_compared: BTreeMap<String, usize> = BTreeMap::new();
    let mut not_compared_list: Vec<String> = Vec::new();
    let mut reference_cannot: Vec<String> = Vec::new();
    let mut reference_cannot_keys: BTreeSet<(String, String)> = BTreeSet::new();
    let mut extra: Vec<String> = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for file in &files {
        if file["kind"].is_null() {
            continue; // neither HDF5 nor netCDF-3
        }
        let name = file["file"].as_str().unwrap();
        count("files");
        for o in file["other"].as_array().into_iter().flatten() {
            let class = o["class"].as_str().unwrap_or("?").to_string();
            not_compared_list.push(format!(
                "{name}:{}: {class}",
                o["path"].as_str().unwrap_or("?")
            ));
            *not_compared.entry(class).or_default() += 1;
        }
        // Each expected dataset's class: "numeric" or "string".
        let class_of = |p: &str| -> String {
            file["datasets"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|d| d["path"] == p)
                .and_then(|d| d["class"].as_str())
                .unwrap_or("numeric")
                .to_string()
        };
        if let Some(e) = file.get("error") {
            reference_cannot.push(format!("{name}: {}", e.as_str().unwrap()));
            reference_cannot_keys.insert((name.to_string(), String::new()));
        }
        for d in file["datasets"].as_array().into_iter().flatten() {
            if let Some(e) = d.get("error") {
                reference_cannot_keys
                    .insert((name.to_string(), d["path"].as_str().unwrap().to_string()));
                reference_cannot.push(format!(
                    "{name}:{}: {}",
                    d["path"].as_str().unwrap(),
                    e.as_str().unwrap()
                ));
            }
        }
        let path = corpora().join(name);
        let got = walk_file_guarded(path, file.clone());
        let datasets: Vec<(String, Outcome)> = match got {
            FileOutcome::Panicked(why) => {
                failures.push(format!("{name}: {why}"));
                count("panics or hangs");
                continue;
            }
            FileOutcome::Refused(why) => {
                // Every dataset the reference read is not served.
                let n = file["datasets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|d| d.get("error").is_none())
                    .count();
                if n > 0 {
                    count("files refused");
                    listed.push(format!("file refused: {name}: {why}"));
                }
                file["datasets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|d| d.get("error").is_none())
                    .map(|d| {
                        (
                            d["path"].as_str().unwrap().to_string(),
                            Outcome::NotServed(format!("file refused: {why}")),
                        )
                    })
                    .collect()
            }
            FileOutcome::Opened(datasets, more, refused) => {
                failures.extend(refused.into_iter().map(|l| format!("{name}:{l}")));
                extra.extend(more.into_iter().map(|p| format!("{name}:{p}")));
                datasets
            }
        };
        for (p, outcome) in datasets {
            let class = class_of(&p);
            count(&format!("{class} datasets"));
            let key = (name.to_string(), p.clone());
            let excused = exceptions.remove(&key);
            let (category, why) = match &outcome {
                Outcome::Exact => {
                    count(&format!("{class} byte-exact"));
                    if let Some(reason) = excused {
                        failures.push(format!(
                            "{name}:{p}: byte-exact now: delete its exception ({reason})"
                        ));
                    }
                    continue;
                }
                Outcome::Mismatch(w) => ("mismatched", w),
                Outcome::NotServed(w) => ("not served", w),
            };
            count(&format!("{class} {category}"));
            listed.push(format!("{category}: {name}:{p}: {why}"));
            match excused {
                Some(reason) if reason == UNDEFINED => {
                    let flagged = file["datasets"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|d| d["path"] == p.as_str() && d.get("undefined").is_some());
                    if !flagged {
                        failures.push(format!(
                            "{name}:{p}: listed as undefined but its fill time is not 'never' \
                             with unwritten storage: {category}: {why}"
                        ));
                    }
                }
                Some(_) => {}
                None => failures.push(format!("{category}: {name}:{p}: {why}")),
            }
        }
    }
    for ((file, ds), reason) in &exceptions {
        failures.push(format!(
            "{file}:{ds}: listed as an exception ({reason}) but not a numeric dataset \
             the reference reads"
        ));
    }
    // What the reference readers cannot read is listed too, so that a
    // new reader version that reads more (or less) is noticed.
    for key in reference_cannot_keys.difference(&unreadable.keys().cloned().collect()) {
        let line = reference_cannot
            .iter()
            .find(|l| l.starts_with(&format!("{}:{}: ", key.0, key.1)))
            .or_else(|| {
                reference_cannot
                    .iter()
                    .find(|l| l.starts_with(&format!("{}: ", key.0)))
            })
            .cloned()
            .unwrap_or_default();
        failures.push(format!(
            "{key:?}: the reference cannot read it: list it under unreadable_by_reference ({line})"
        ));
    }
    for key in unreadable
        .keys()
        .filter(|k| !reference_cannot_keys.contains(*k))
    {
        failures.push(format!(
            "{key:?}: listed under unreadable_by_reference, but the reference reads it now"
        ));
    }
    let c = |k: &str| counts.get(k).copied().unwrap_or(0);
    let of = |class: &str| {
        format!(
            "{} byte-exact, {} mismatched, {} not served",
            c(&format!("{class} byte-exact")),
            c(&format!("{class} mismatched")),
            c(&format!("{class} not served"))
        )
    };
    println!(
        "corpus: {} files, {} numeric datasets ({}), {} fixed-length string datasets as stored \
         ({}), {} files refused, {} panics or hangs; the reference readers cannot read {} files \
         or datasets; {} opaque datasets not compared; slabfs serves {} arrays the reference \
         does not list; {:.1} s ({:.1} s in Python)",
        c("files"),
        c("numeric datasets"),
        of("numeric"),
        c("string datasets"),
        of("string"),
        c("files refused"),
        c("panics or hangs"),
        reference_cannot.len(),
        not_compared.get("opaque").copied().unwrap_or(0),
        extra.len(),
        start.elapsed().as_secs_f64(),
        python_time.as_secs_f64(),
    );
    println!(
        "corpus, not compared (no flat file carries them), by HDF5 type class: {}",
        not_compared
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if std::env::var_os("SLABFS_CORPUS_VERBOSE").is_some() {
        for l in &listed {
            println!("{l}");
        }
        for l in &reference_cannot {
            println!("reference cannot read: {l}");
        }
        for l in &not_compared_list {
            println!("not compared: {l}");
        }
        for l in &extra {
            println!("served, not listed by the reference: {l}");
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures (not in tests/corpus_exceptions.json):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
