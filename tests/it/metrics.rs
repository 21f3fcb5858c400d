//! The metrics endpoint (`--metrics ADDR`) of a real mount: read through
//! the kernel, then scrape.
//!
//! - [`the_endpoint_counts_what_was_read`]: the text parsed; bytes served
//!   equal the bytes read, FUSE requests by operation plausible (and equal
//!   to `.slabfs/stats`: one set of counters), decodes by codec counted.
//! - [`prometheus_scrapes_what_was_read`]: a real Prometheus server (Debian's
//!   `prometheus`), started here on loopback with its own storage, scrapes
//!   the mount every second; PromQL over its HTTP API gives the bytes read.
//!   Skipped with a message when `prometheus` is not installed, except
//!   under CI (`CI` set, as `.ci/run` sets it), where that is a failure.
//! - [`no_secret_in_any_label`]: a mount of an S3 bucket (s3s-fs on
//!   loopback, as tests/it/remote.rs) with the test environment's secret
//!   key; the endpoint names the store as `s3://bucket` and shows neither
//!   the key, nor its id, nor anything of a signed request.

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::mount::Mount;
use common::s3s::S3s;
use common::servers::{S3Server, free_port};
use serde_json::Value;

/// The demo dataset of the README: two small Zarr stores.
fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo/data")
}

/// The files of the demo mount that the tests read whole.
const FILES: [&str; 7] = [
    "climate.zarr/tas",
    "climate.zarr/tas.json",
    "climate.zarr/lat",
    "climate.zarr/lon",
    "climate.zarr/time",
    "elevation.zarr",
    "elevation.zarr.json",
];

/// A mount of `source` with the endpoint on a free loopback port.
fn mount_with_metrics(source: &Path, extra: &[&str]) -> (Mount, SocketAddr) {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let metrics = addr.to_string();
    let mut args = vec!["--metrics", metrics.as_str(), "--refresh", "0"];
    args.extend_from_slice(extra);
    let m = Mount::start(source, &args);
    assert!(
        m.log()
            .contains(&format!("serving metrics at http://{addr}/metrics")),
        "{}",
        m.log()
    );
    (m, addr)
}

/// Read each of `files` of `m` whole; the bytes read in all.
fn read_files(m: &Mount, files: &[&str]) -> u64 {
    files
        .iter()
        .map(|f| {
            let bytes = std::fs::read(m.path(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(!bytes.is_empty(), "{f}");
            bytes.len() as u64
        })
        .sum()
}

/// One HTTP/1.0 GET of `path` at `addr`: status, headers (names in lower
/// case), body.
fn get(addr: SocketAddr, path: &str) -> (u16, BTreeMap<String, String>, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP answer");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

/// A scrape, parsed: every sample by its series (name and labels, as
/// written), checked to be the Prometheus text format: a `# TYPE` before
/// each family's samples and once per family, values that parse.
struct Scrape {
    text: String,
    samples: BTreeMap<String, f64>,
}

impl Scrape {
    fn of(addr: SocketAddr) -> Scrape {
        let (status, headers, text) = get(addr, "/metrics");
        assert_eq!(status, 200, "{text}");
        assert_eq!(
            headers.get("content-type").map(String::as_str),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        let mut samples = BTreeMap::new();
        let mut families = BTreeMap::new();
        let mut family = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(
                    families
                        .insert(name.to_string(), kind.to_string())
                        .is_none(),
                    "family {name} twice"
                );
                family = name.to_string();
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap();
            assert!(
                name == family
                    || ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| name.strip_suffix(s) == Some(&family)),
                "{line} outside its family ({family})"
            );
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("{line}")),
            };
            assert!(
                samples.insert(series.to_string(), value).is_none(),
                "{line} twice"
            );
        }
        Scrape { text, samples }
    }

    /// The value of `series`; panics if absent.
    fn get(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in:\n{}", self.text))
    }

    /// The number of FUSE requests `op`.
    fn requests(&self, op: &str) -> f64 {
        self.get(&format!(
            "slabfs_fuse_request_duration_seconds_count{{op=\"{op}\"}}"
        ))
    }
}

/// The scrape once every read's answer is counted: a read is counted
/// after its answer is sent, so the reader may be faster than the count.
fn settled(addr: SocketAddr) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = Scrape::of(addr);
        if s.requests("read") == s.get("slabfs_reads_total") || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_endpoint_counts_what_was_read() {
    let (m, addr) = mount_with_metrics(&demo(), &[]);
    let read = read_files(&m, &FILES);
    let s = settled(addr);
    // Every byte read came from the daemon once (a fresh mount: nothing
    // in the kernel's page cache), none more: each file read whole, to
    // its end.
    assert_eq!(s.get("slabfs_read_bytes_total"), read as f64);
    // Each file opened and read at least once, in requests of at least a
    // page but the last of each.
    let reads = s.requests("read");
    let most = FILES.len() as f64 + (read / 4096) as f64;
    assert!(
        (FILES.len() as f64..=most).contains(&reads),
        "{reads} reads for {read} bytes"
    );
    assert_eq!(reads, s.get("slabfs_reads_total"));
    assert!(s.requests("open") >= FILES.len() as f64);
    assert!(s.requests("lookup") >= 3.0, "climate.zarr, tas, ...");
    assert_eq!(s.get("slabfs_fuse_errors_total{errno=\"EIO\"}"), 0.0);
    // The read histogram is one: every read in +Inf, the buckets
    // cumulative.
    let read_buckets: Vec<f64> = s
        .samples
        .iter()
        .filter(|(k, _)| k.starts_with("slabfs_fuse_request_duration_seconds_bucket{op=\"read\""))
        .map(|(_, &v)| v)
        .collect();
    assert_eq!(read_buckets.len(), 27);
    assert_eq!(
        s.get("slabfs_fuse_request_duration_seconds_bucket{op=\"read\",le=\"+Inf\"}"),
        reads
    );
    assert!(s.get("slabfs_fuse_request_duration_seconds_sum{op=\"read\"}") > 0.0);
    // tas is zstd (its sidecar says so): its chunks were decoded.
    let decoded = s.get("slabfs_decode_duration_seconds_count{codec=\"bytes+zstd\"}");
    assert!(decoded >= 1.0, "{}", s.text);
    assert!(s.get("slabfs_decoded_bytes_total{codec=\"bytes+zstd\"}") >= 12.0 * 73.0 * 144.0 * 4.0);
    assert!(s.get("slabfs_chunk_cache_misses_total") >= 1.0);
    assert_eq!(
        s.get("slabfs_chunk_cache_budget_bytes"),
        (512u64 << 20) as f64
    );
    assert_eq!(s.get("slabfs_not_shown"), 0.0);
    // No store was read: no remote series.
    assert!(!s.text.contains("slabfs_remote_"), "{}", s.text);

    // .slabfs/stats reads the same counters: its document (taken when it
    // is opened) shows what the endpoint showed, and reading it adds its
    // own bytes and request to both.
    let stats = std::fs::read(m.path(".slabfs/stats")).unwrap();
    let doc: Value = serde_json::from_slice(&stats).unwrap();
    assert_eq!(doc["reads"]["bytes"].as_f64(), Some(read as f64));
    assert_eq!(
        doc["fuse_latency_us"]["read"]["count"].as_f64(),
        Some(reads)
    );
    assert_eq!(
        doc["decodes"]["bytes+zstd"]["latency_us"]["count"].as_f64(),
        Some(decoded)
    );
    let after = settled(addr);
    assert_eq!(
        after.get("slabfs_read_bytes_total"),
        (read + stats.len() as u64) as f64
    );
    // (The stats file's size is unknown, 0, until read: it is read until
    // a read returns nothing, so in a few requests.)
    assert!(after.requests("read") > reads);

    // Only /metrics is served.
    assert_eq!(get(addr, "/").0, 404);
    assert_eq!(get(addr, "/metrics/x").0, 404);
    m.stop();
}

// ---------------------------------------------------------------------------
// A real Prometheus
// ---------------------------------------------------------------------------

/// Whether the Prometheus server is installed. When it is not, the test
/// says it is skipped, loudly; under CI (`CI` set) that is a failure:
/// `.ci/run` installs it (Debian's `prometheus`).
fn have_prometheus(test: &str) -> bool {
    let ok = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: `prometheus` is not installed, and CI must run this test \
             (.ci/run installs Debian's prometheus package)"
        );
        eprintln!(
            "\n*** SKIPPED {test}: `prometheus` is not installed \
             (apt-get install prometheus; CI installs it) ***\n"
        );
    }
    ok
}

/// A Prometheus server scraping `target` every second, on loopback, with
/// its own storage; stopped (SIGTERM, then SIGKILL) when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("slabfs-prometheus")
            .tempdir()
            .unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: slabfs\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
            .spawn()
            .unwrap();
        Prometheus {
            child,
            addr,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default()
    }

    /// The value of the PromQL `query` (an instant vector of one sample),
    /// once the server answers and has it; `None` while it has no sample.
    fn query(&mut self, query: &str) -> Option<f64> {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("prometheus exited with {status}:\n{}", self.log());
        }
        let encoded: String = query
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        TcpStream::connect(self.addr).ok()?;
        let (status, _, body) = get(self.addr, &format!("/api/v1/query?query={encoded}"));
        if status != 200 {
            return None; // not ready yet (503)
        }
        let doc: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["status"], "success", "{body}");
        let result = doc["data"]["result"].as_array().unwrap();
        assert!(result.len() <= 1, "{query}: {body}");
        // "value": [time, "text of the number"]
        result
            .first()
            .map(|r| r["value"][1].as_str().unwrap().parse().unwrap())
    }

    /// Ask `query` until it gives `want` (within 30 s: a server start and
    /// a few scrapes); the last value otherwise.
    fn wait_for(&mut self, query: &str, want: f64) -> Option<f64> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.query(query);
            if got == Some(want) || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn prometheus_scrapes_what_was_read() {
    if !have_prometheus("prometheus_scrapes_what_was_read") {
        return;
    }
    let (m, addr) = mount_with_metrics(&demo(), &[]);
    let read = read_files(&m, &FILES);
    let endpoint = settled(addr);
    let mut p = Prometheus::start(addr);
    let up = p.wait_for("up{job=\"slabfs\"}", 1.0);
    assert_eq!(up, Some(1.0), "the scrape failed:\n{}", p.log());
    let bytes = p.wait_for("slabfs_read_bytes_total{job=\"slabfs\"}", read as f64);
    assert_eq!(
        bytes,
        Some(read as f64),
        "bytes served, as Prometheus has them"
    );
    // The histograms are ones to Prometheus: counts by label, quantiles.
    let reads = p.query("sum(slabfs_fuse_request_duration_seconds_count{op=\"read\"})");
    assert_eq!(reads, Some(endpoint.requests("read")));
    let median = p
        .query(
            "histogram_quantile(0.5, \
             sum by (le) (slabfs_fuse_request_duration_seconds_bucket{op=\"read\"}))",
        )
        .unwrap();
    assert!(median > 0.0 && median < 60.0, "median read {median} s");
    drop(p);
    m.stop();
}

// ---------------------------------------------------------------------------
// Secrets
// ---------------------------------------------------------------------------

#[test]
fn no_secret_in_any_label() {
    let _g = common::side_by_side();
    let bucket = "slabfs-metrics";
    let s3 = S3s::start();
    s3.upload_dir(bucket, &demo(), "demo");
    let endpoint = s3.endpoint();
    let url = format!("s3://{bucket}/demo");
    let (m, addr) = mount_with_metrics(Path::new(&url), &["--endpoint-url", &endpoint]);
    let read = read_files(&m, &["climate.zarr/tas", "elevation.zarr"]);
    let s = settled(addr);
    assert_eq!(s.get("slabfs_read_bytes_total"), read as f64);
    // The store is named by scheme and bucket, as in .slabfs/stats.
    let store = format!("store=\"s3://{bucket}\"");
    let gets = s.get(&format!(
        "slabfs_remote_requests_total{{{store},kind=\"GET\"}}"
    ));
    assert!(gets >= 1.0, "{}", s.text);
    assert!(s.get(&format!("slabfs_remote_received_bytes_total{{{store}}}")) > 0.0);
    assert!(
        s.get(&format!(
            "slabfs_remote_request_duration_seconds_count{{{store}}}"
        )) >= gets
    );
    // Nothing of the credentials or of a signed request, anywhere in the
    // text (labels, help), and no label value that looks like a URL with
    // a query or user info.
    let text = &s.text;
    for secret in [
        common::AWS_SECRET,
        common::AWS_KEY_ID,
        "X-Amz-",
        "Signature",
        "Credential",
        "Authorization",
    ] {
        assert!(!text.contains(secret), "{secret:?} in:\n{text}");
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let labels = line.split_once('{').map_or("", |(_, l)| l);
        assert!(!labels.contains('?') && !labels.contains('@'), "{line}");
    }
    m.stop();
}
