//! Shared harness: loads the fixtures written by gen_fixtures.py, runs one crate's adapter over
//! them, and compares against ecCodes's values. Each adapter binary calls `main_with`.
//!
//! Subcommands (all print JSON lines on stdout):
//!   compare FIXTURE_DIR            every fixture, every field: decode + compare + latlons + meta
//!   time FILE REPEATS              best-of-REPEATS wall time of decoding every field of FILE
//!   fuzz FILE SEED COUNT [START]   COUNT mutated copies of FILE: panics vs errors (one line each)
//!   meta FILE                      the adapter's metadata dump for each message of FILE

use serde_json::{Value, json};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

/// What an adapter must provide. Every method gets bytes only (a whole file for `list`, one
/// message's bytes for the rest), as slabfs would after a ranged read.
pub trait Adapter {
    fn name(&self) -> &'static str;
    /// true if the crate's native output is f32 (values are converted to f64 losslessly)
    fn native_f32(&self) -> bool;
    /// (offset, length) of each message in a file
    fn list(&self, file: &[u8]) -> Result<Vec<(usize, usize)>, String>;
    /// decoded values of each field of one message (a multi-field GRIB2 message has several)
    fn decode(&self, msg: &[u8]) -> Result<Vec<Vec<f64>>, String>;
    /// per-point (lats, lons) of each field of one message
    fn latlons(&self, msg: &[u8]) -> Result<Vec<(Vec<f64>, Vec<f64>)>, String>;
    /// one line of section-level metadata per field, without decoding data
    fn meta(&self, msg: &[u8]) -> Result<Vec<String>, String>;
}

pub struct RefField {
    pub offset: usize,
    pub length: usize,
    pub keys: Value,
    pub values: Vec<f64>,
    pub lats: Vec<f64>,
    pub lons: Vec<f64>,
}

fn read_f64s(path: &str) -> Vec<f64> {
    let b = std::fs::read(path).unwrap_or_default();
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn load_fixture(dir: &str, name: &str) -> (Vec<u8>, Vec<RefField>) {
    let man: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/{name}.json")).unwrap())
            .unwrap();
    let bytes = std::fs::read(format!("{dir}/{}", man["file"].as_str().unwrap())).unwrap();
    let vals = read_f64s(&format!("{dir}/{name}.values.f64"));
    let lats = read_f64s(&format!("{dir}/{name}.lats.f64"));
    let lons = read_f64s(&format!("{dir}/{name}.lons.f64"));
    let mut out = Vec::new();
    let mut pos = 0;
    for m in man["messages"].as_array().unwrap() {
        let n = m["n"].as_u64().unwrap() as usize;
        out.push(RefField {
            offset: m["offset"].as_u64().unwrap() as usize,
            length: m["length"].as_u64().unwrap() as usize,
            keys: m.clone(),
            values: vals[pos..pos + n].to_vec(),
            lats: lats[pos..pos + n].to_vec(),
            lons: lons[pos..pos + n].to_vec(),
        });
        pos += n;
    }
    (bytes, out)
}

/// Runs f, turning a panic into Err("PANIC: ...").
pub fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("PANIC: {msg}"))
        }
    }
}

fn compare_values(r: &RefField, got: &[f64], native_f32: bool) -> Value {
    let missing_value = r.keys["missingValue"].as_f64().unwrap_or(9999.0);
    let bitmap = r.keys["bitmapPresent"].as_i64().unwrap_or(0) == 1;
    if got.len() != r.values.len() {
        return json!({"length_mismatch": [got.len(), r.values.len()]});
    }
    let (mut n_missing, mut miss_nan, mut miss_other) = (0usize, 0usize, Vec::<f64>::new());
    let (mut mism_f32, mut mism_f64, mut max_abs, mut max_abs_f32) = (0usize, 0usize, 0f64, 0f64);
    let mut max_ulp = 0u64;
    let mut first_bad: Option<(usize, f64, f64)> = None;
    let mut spurious_nan = 0usize;
    for (i, (&e, &g)) in r.values.iter().zip(got).enumerate() {
        if bitmap && e == missing_value {
            n_missing += 1;
            if g.is_nan() {
                miss_nan += 1;
            } else if miss_other.len() < 3 {
                miss_other.push(g);
            }
            continue;
        }
        if g.is_nan() {
            spurious_nan += 1;
            continue;
        }
        let e32 = e as f32;
        let g32 = g as f32;
        if e32.to_bits() != g32.to_bits() || (native_f32 && g != g32 as f64) {
            mism_f32 += 1;
            let ulp = (e32.to_bits() as i64 - g32.to_bits() as i64).unsigned_abs();
            max_ulp = max_ulp.max(ulp);
            if first_bad.is_none() {
                first_bad = Some((i, e, g));
            }
        }
        if e != g {
            mism_f64 += 1;
        }
        max_abs = max_abs.max((e - g).abs());
        max_abs_f32 = max_abs_f32.max((e32 as f64 - g).abs());
    }
    json!({
        "n": got.len(),
        "exact_f32": mism_f32 == 0 && spurious_nan == 0,
        "n_mismatch_f32": mism_f32,
        "max_ulp_f32": max_ulp,
        "exact_f64": if native_f32 { Value::Null } else { json!(mism_f64 == 0) },
        "n_mismatch_f64": mism_f64,
        "max_abs_diff_vs_f64": max_abs,
        "max_abs_diff_vs_f32": max_abs_f32,
        "first_bad": first_bad.map(|(i, e, g)| json!([i, e, g])),
        "spurious_nan": spurious_nan,
        "ref_missing": n_missing,
        "missing_as_nan": miss_nan,
        "missing_as_other_sample": miss_other,
    })
}

fn lon_diff(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(360.0);
    d.min(360.0 - d)
}

fn compare_latlons(r: &RefField, lats: &[f64], lons: &[f64]) -> Value {
    if r.lats.iter().all(|x| x.is_nan()) {
        return json!("no ecCodes reference");
    }
    if lats.len() != r.lats.len() || lons.len() != r.lons.len() {
        return json!({"length_mismatch": [lats.len(), lons.len(), r.lats.len()]});
    }
    let mut dlat = 0f64;
    let mut dlon = 0f64;
    for i in 0..lats.len() {
        dlat = dlat.max((lats[i] - r.lats[i]).abs());
        // longitudes at the poles are arbitrary
        if r.lats[i].abs() < 89.999 {
            dlon = dlon.max(lon_diff(lons[i], r.lons[i]));
        }
    }
    json!({"max_dlat": dlat, "max_dlon": dlon})
}

/// Spreads one message's per-field results over the `nref` fields ecCodes saw in it.
fn push_n<T>(res: Result<Vec<T>, String>, out: &mut Vec<Result<T, String>>, nref: usize) {
    match res {
        Ok(v) => {
            let k = v.len();
            out.extend(v.into_iter().map(Ok));
            for _ in k..nref {
                out.push(Err(format!("field missing: crate gave {k} fields, ecCodes {nref}")));
            }
        }
        Err(e) => {
            for _ in 0..nref {
                out.push(Err(e.clone()));
            }
        }
    }
}

pub fn cmd_compare(a: &dyn Adapter, dir: &str) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.file_name().into_string().ok()?;
            p.strip_suffix(".json").map(|s| s.to_string())
        })
        .filter(|n| !n.starts_with("big_") || std::env::var_os("WITH_BIG").is_some())
        .collect();
    names.sort();
    for name in names {
        let (bytes, refs) = load_fixture(dir, &name);
        let listed = guarded(|| a.list(&bytes));
        // distinct messages of the reference (a multi-field message appears once per field)
        let mut ref_msgs: Vec<(usize, usize)> = refs.iter().map(|r| (r.offset, r.length)).collect();
        ref_msgs.dedup();
        let list_ok = match &listed {
            Ok(l) => json!(l == &ref_msgs),
            Err(e) => json!(e),
        };
        // decode each message from its own bytes only, then match fields in order
        let mut fields: Vec<Result<Vec<f64>, String>> = Vec::new();
        let mut latlons: Vec<Result<(Vec<f64>, Vec<f64>), String>> = Vec::new();
        let mut metas: Vec<Result<String, String>> = Vec::new();
        for &(off, len) in &ref_msgs {
            let msg = &bytes[off..off + len];
            let nref = refs.iter().filter(|r| r.offset == off).count();
            push_n(guarded(|| a.decode(msg)), &mut fields, nref);
            push_n(guarded(|| a.latlons(msg)), &mut latlons, nref);
            push_n(guarded(|| a.meta(msg)), &mut metas, nref);
        }
        for (i, r) in refs.iter().enumerate() {
            let cmp = match &fields[i] {
                Ok(v) => json!({"ok": true, "cmp": compare_values(r, v, a.native_f32())}),
                Err(e) => json!({"ok": false, "err": e}),
            };
            let ll = match &latlons[i] {
                Ok((la, lo)) => compare_latlons(r, la, lo),
                Err(e) => json!({"err": e}),
            };
            let meta = match &metas[i] {
                Ok(m) => json!(m),
                Err(e) => json!({"err": e}),
            };
            println!(
                "{}",
                json!({"crate": a.name(), "fixture": name, "field": i,
                       "packing": r.keys["packingType"], "grid": r.keys["gridType"],
                       "edition": r.keys["edition"], "list_ok": list_ok,
                       "decode": cmp, "latlon": ll, "meta": meta})
            );
        }
    }
}

pub fn cmd_time(a: &dyn Adapter, file: &str, repeats: usize) {
    let bytes = std::fs::read(file).unwrap();
    let mut best = f64::INFINITY;
    let mut n = 0;
    let mut err = None;
    for _ in 0..repeats {
        let t = Instant::now();
        match a.decode(&bytes) {
            Ok(v) => n = v.iter().map(|f| f.len()).sum(),
            Err(e) => err = Some(e),
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{}",
        json!({"crate": a.name(), "file": file, "best_s": best, "n": n, "err": err})
    );
}

/// Deterministic xorshift.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub fn mutate(orig: &[u8], seed: u64) -> (Vec<u8>, String) {
    let mut r = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    for _ in 0..4 {
        r.next();
    }
    let mut b = orig.to_vec();
    let kind = r.below(5);
    let desc;
    match kind {
        0 => {
            let at = r.below(b.len());
            b.truncate(at);
            desc = format!("truncate@{at}");
        }
        1 => {
            let k = 1 + r.below(4);
            let mut d = Vec::new();
            for _ in 0..k {
                let at = r.below(b.len());
                b[at] = r.next() as u8;
                d.push(at);
            }
            desc = format!("random bytes at {d:?}");
        }
        2 => {
            // header area: sections 0-5 are in the first ~200 bytes
            let at = r.below(b.len().min(200));
            b[at] = [0x00, 0xff, 0x7f, 0x80][r.below(4)];
            desc = format!("header byte {at}");
        }
        3 => {
            let at = r.below(b.len().min(200));
            let bit = r.below(8);
            b[at] ^= 1 << bit;
            desc = format!("bitflip {at}.{bit}");
        }
        _ => {
            // a 4-byte big-endian field in the header set to a large value
            let at = r.below(b.len().min(200).saturating_sub(4));
            b[at..at + 4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xf0]);
            desc = format!("u32 0x7ffffff0 at {at}");
        }
    }
    (b, desc)
}

pub fn cmd_fuzz(a: &dyn Adapter, file: &str, seed: u64, count: u64, start: u64) {
    let orig = std::fs::read(file).unwrap();
    if std::env::var_os("FUZZ_VERBOSE").is_none() {
        std::panic::set_hook(Box::new(|_| {}));
    }
    for s in start..count {
        let (b, desc) = mutate(&orig, seed * 1_000_003 + s);
        // announce first, so a driver can tell which case aborted the process
        println!("{}", json!({"case": s, "start": true, "mut": desc}));
        std::io::stdout().flush().ok();
        let res = guarded(|| {
            let mut e = Vec::new();
            for (off, len) in a.list(&b)? {
                let m = b.get(off..off.saturating_add(len)).ok_or("bad range")?;
                if let Err(x) = a.meta(m) {
                    e.push(x)
                }
                if let Err(x) = a.decode(m) {
                    e.push(x)
                }
                if let Err(x) = a.latlons(m) {
                    e.push(x)
                }
            }
            // also decode the whole (possibly truncated) buffer as "one message"
            if let Err(x) = a.decode(&b) {
                e.push(x)
            }
            Ok(e)
        });
        let outcome = match res {
            Ok(e) if e.is_empty() => json!("ok"),
            Ok(e) => json!({"errors": e.len()}),
            Err(p) if p.starts_with("PANIC") => json!({"panic": p}),
            Err(e) => json!({"error": e}),
        };
        println!("{}", json!({"case": s, "mut": desc, "outcome": outcome}));
    }
}

pub fn main_with(a: &dyn Adapter) {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(|s| s.as_str()) {
        Some("compare") => cmd_compare(a, &args[2]),
        Some("time") => cmd_time(a, &args[2], args[3].parse().unwrap()),
        Some("fuzz") => cmd_fuzz(
            a,
            &args[2],
            args[3].parse().unwrap(),
            args[4].parse().unwrap(),
            args.get(5).map(|s| s.parse().unwrap()).unwrap_or(0),
        ),
        Some("meta") => {
            let b = std::fs::read(&args[2]).unwrap();
            for (off, len) in a.list(&b).unwrap() {
                println!("@{off}+{len}: {:?}", a.meta(&b[off..off + len]));
            }
        }
        Some("ll") => {
            let b = std::fs::read(&args[2]).unwrap();
            for (off, len) in a.list(&b).unwrap() {
                match a.latlons(&b[off..off + len]) {
                    Ok(v) => {
                        for (la, lo) in v {
                            let n = la.len();
                            let k: Vec<usize> = [0, 1, 2, n / 2, n - 1].into();
                            println!("n={n} {:?}", k.iter().map(|&i| (la[i], lo[i])).collect::<Vec<_>>());
                        }
                    }
                    Err(e) => println!("err {e}"),
                }
            }
        }
        _ => eprintln!("usage: compare DIR | time FILE N | fuzz FILE SEED COUNT [START] | meta FILE"),
    }
}
