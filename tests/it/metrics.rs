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
//!   the key, nor its id, nor anything of a signed request, and neither
//!   do the series it pushes with `--metrics-otlp`.
//!
//! `--metrics-otlp URL` (the same series pushed over OTLP/HTTP), against
//! tests/servers/otlp_receiver.py, which decodes each push with the
//! OpenTelemetry project's own Python types (`opentelemetry-proto`):
//!
//! - [`otlp_pushes_the_series_of_the_endpoint`]: bytes served as pushed
//!   equal the bytes read; every pushed series, label and value equals the
//!   endpoint's (counters as cumulative monotonic sums, histograms with
//!   the same buckets); the resource names slabfs and the mount point.
//! - [`the_last_push_is_sent_at_unmount`]: with an hour between pushes,
//!   the one push there is comes at unmount, with the final counts.
//! - [`a_collector_down_or_hanging_never_slows_reads`]: pushes to a port
//!   nobody listens on, then to a receiver that never answers: reads
//!   through the mount stay prompt, the failure is logged once, and the
//!   daemon still exits promptly.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::mount::Mount;
use common::s3s::S3s;
use common::servers::{S3Server, free_port, wait_port};
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
    let receiver = Receiver::start(&[]);
    let push = receiver.url();
    let (m, addr) = mount_with_metrics(
        Path::new(&url),
        &[
            "--endpoint-url",
            &endpoint,
            "--metrics-otlp",
            &push,
            "--metrics-otlp-interval",
            "1",
        ],
    );
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
    let secrets = [
        common::AWS_SECRET,
        common::AWS_KEY_ID,
        "X-Amz-",
        "Signature",
        "Credential",
        "Authorization",
    ];
    for secret in secrets {
        assert!(!text.contains(secret), "{secret:?} in:\n{text}");
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let labels = line.split_once('{').map_or("", |(_, l)| l);
        assert!(!labels.contains('?') && !labels.contains('@'), "{line}");
        // slabfs::metrics::LABELS_IN_USE names every label name its
        // series use (a --metrics-label may take none of them).
        for (k, _) in labels_of(line) {
            assert!(
                slabfs::metrics::LABELS_IN_USE.contains(&k.as_str()),
                "{k} (in {line}) is not in LABELS_IN_USE"
            );
        }
    }
    // The pushed series: the same store name, and nothing more, in any
    // attribute of any point or of the resource, or any description.
    let pushed = receiver.wait_for(|p| {
        let s = Pushed::of(p);
        s.samples.get(&canonical(&format!(
            "slabfs_remote_requests_total{{{store},kind=\"GET\"}}"
        ))) == Some(&gets)
    });
    let json = pushed.to_string();
    assert!(json.contains(&format!("\"s3://{bucket}\"")), "{json}");
    for secret in secrets.into_iter().chain(["?", "@"]) {
        assert!(!json.contains(secret), "{secret:?} in:\n{json}");
    }
    m.stop();
}

/// The labels of a sample line of the text format (`name{k="v",...} 1`),
/// values unescaped.
fn labels_of(line: &str) -> Vec<(String, String)> {
    let Some((_, rest)) = line.split_once('{') else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut chars = rest.chars();
    loop {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        let key = key.trim_start_matches(',').to_string();
        if key.starts_with('}') || key.is_empty() {
            return out;
        }
        assert_eq!(chars.next(), Some('"'), "{line}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.push(match chars.next() {
                    Some('n') => '\n',
                    Some(c) => c,
                    None => break,
                }),
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key, value));
    }
}

/// `--metrics-label`s go on every series of the text and of the push,
/// first; two mounts of one node then scrape apart.
#[test]
fn every_series_carries_the_mount_labels() {
    let _g = common::side_by_side();
    let receiver = Receiver::start(&[]);
    let push = receiver.url();
    let (m, addr) = mount_with_metrics(
        &demo(),
        &[
            "--metrics-label",
            "mount=demo",
            "--metrics-label",
            "site=lab \"north\"",
            "--metrics-otlp",
            &push,
            "--metrics-otlp-interval",
            "1",
        ],
    );
    read_files(&m, &["climate.zarr/tas"]);
    // (`settled` looks series up without these labels.)
    let s = Scrape::of(addr);
    let mut samples = 0;
    for line in s
        .text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let labels = labels_of(line);
        assert_eq!(
            labels.get(..2),
            Some(
                &[
                    ("mount".to_string(), "demo".to_string()),
                    ("site".to_string(), "lab \"north\"".to_string())
                ][..]
            ),
            "{line}"
        );
        samples += 1;
    }
    assert!(samples > 50, "{}", s.text);
    let pushed = receiver.wait_for(|p| p.to_string().contains("\"mount\""));
    let json = pushed.to_string();
    assert!(
        json.contains("\"demo\"") && json.contains("lab \\\"north\\\""),
        "{json}"
    );
    m.stop();
    // A label slabfs's own series use is refused, naming it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args(["mount", "--metrics-label", "op=x"])
        .arg(demo())
        .arg("/nonexistent-mountpoint")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("slabfs's own series use"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// OTLP push
// ---------------------------------------------------------------------------

/// tests/servers/otlp_receiver.py on loopback (`--hang`: never answers);
/// killed on drop.
struct Receiver {
    child: Child,
    port: u16,
}

impl Receiver {
    fn start(args: &[&str]) -> Receiver {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/otlp_receiver.py");
        let mut child = Command::new(common::python())
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().unwrap_or_else(|_| {
            panic!(
                "otlp_receiver.py printed {line:?}, not its port \
                 (opentelemetry-proto is in scripts/requirements.txt)"
            )
        });
        wait_port(port, &mut child, "otlp_receiver.py");
        Receiver { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/metrics", self.port)
    }

    /// Every push received so far, decoded; panics if one did not decode.
    fn pushes(&self) -> Vec<Value> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let (status, _, body) = get(addr, "/_pushes");
        assert_eq!(status, 200, "{body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        let errors = doc["errors"].as_array().unwrap();
        assert!(errors.is_empty(), "pushes that did not decode: {errors:?}");
        doc["pushes"].as_array().unwrap().clone()
    }

    /// The last push once one satisfies `ok` (within 30 s: a few pushes a
    /// second apart); panics with the last one otherwise.
    fn wait_for(&self, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let last = self.pushes().pop();
            match last {
                Some(p) if ok(&p) => return p,
                _ if Instant::now() > deadline => {
                    let last = last.map(|p| p.to_string()).unwrap_or_default();
                    panic!(
                        "no push as expected; the last ({} bytes of JSON):\n{}",
                        last.len(),
                        &last[..last.len().min(4000)]
                    )
                }
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

impl Receiver {
    /// The push that follows the first `n`, once it came (within 30 s).
    fn push_after(&self, n: usize) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(p) = self.pushes().into_iter().nth(n) {
                return p;
            }
            assert!(Instant::now() < deadline, "no push after the {n}th");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `series` (`name{a="x",b="y"}`, as the text writes it) with its labels
/// in name order and `le` written as Rust writes the number: one key for
/// a series, from the text or from a push.
fn canonical(series: &str) -> String {
    let Some((name, rest)) = series.split_once('{') else {
        return key_of(series, Vec::new());
    };
    let mut labels = Vec::new();
    let mut chars = rest.trim_end_matches('}').chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        assert_eq!(chars.next(), Some('"'), "{series}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.push(chars.next().unwrap()),
                '"' => break,
                c => value.push(c),
            }
        }
        if chars.peek() == Some(&',') {
            chars.next();
        }
        labels.push((key, value));
    }
    key_of(name, labels)
}

fn key_of(name: &str, mut labels: Vec<(String, String)>) -> String {
    for (k, v) in &mut labels {
        if k == "le" {
            let bound: f64 = match v.as_str() {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap(),
            };
            *v = bound.to_string();
        }
    }
    labels.sort();
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}{{{}}}", labels.join(","))
}

/// The endpoint's samples and family names, by [`canonical`] key.
fn scraped(s: &Scrape) -> (BTreeMap<String, f64>, Vec<String>) {
    let samples = s
        .samples
        .iter()
        .map(|(k, v)| (canonical(k), *v))
        .filter(|(k, _)| !k.starts_with("slabfs_uptime_seconds"))
        .collect();
    let families = s
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    (samples, families)
}

/// One push as the endpoint would show it: each sum as `NAME_total`,
/// each histogram as its `_bucket` (cumulative, `le` the bounds and
/// `+Inf`), `_sum` and `_count`, keyed as [`canonical`]; and its family
/// names in that naming. Checks the data model on the way: sums monotonic
/// and cumulative, histograms cumulative, every point of a cumulative
/// series starting at the same time, before it was taken.
struct Pushed {
    samples: BTreeMap<String, f64>,
    families: Vec<String>,
    start: Option<u64>,
}

impl Pushed {
    fn of(push: &Value) -> Pushed {
        let mut out = Pushed {
            samples: BTreeMap::new(),
            families: Vec::new(),
            start: None,
        };
        for m in push["metrics"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            let kind = m["kind"].as_str().unwrap();
            let family = match kind {
                "sum" => {
                    assert_eq!(m["monotonic"], true, "{m}");
                    assert_eq!(m["temporality"], "cumulative", "{m}");
                    format!("{name}_total")
                }
                "histogram" => {
                    assert_eq!(m["temporality"], "cumulative", "{m}");
                    name.to_string()
                }
                "gauge" => name.to_string(),
                other => panic!("{name}: a {other}"),
            };
            out.families.push(family.clone());
            if name == "slabfs_uptime_seconds" {
                continue;
            }
            for p in m["points"].as_array().unwrap() {
                let labels: Vec<(String, String)> = p["attributes"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                if kind != "gauge" {
                    let start = p["start"].as_u64().unwrap();
                    assert!(start > 0 && start <= p["time"].as_u64().unwrap(), "{p}");
                    assert_eq!(*out.start.get_or_insert(start), start, "{name}");
                }
                let mut put = |name: String, labels: Vec<(String, String)>, v: f64| {
                    let key = key_of(&name, labels);
                    assert!(out.samples.insert(key.clone(), v).is_none(), "{key} twice");
                };
                if kind == "histogram" {
                    let bounds = p["explicit_bounds"].as_array().unwrap();
                    let counts = p["bucket_counts"].as_array().unwrap();
                    assert_eq!(counts.len(), bounds.len() + 1, "{p}");
                    let mut below = 0;
                    for (i, n) in counts.iter().enumerate() {
                        below += n.as_u64().unwrap();
                        let le = bounds
                            .get(i)
                            .map_or("+Inf".to_string(), |b| b.as_f64().unwrap().to_string());
                        let mut l = labels.clone();
                        l.push(("le".into(), le));
                        put(format!("{name}_bucket"), l, below as f64);
                    }
                    let count = p["count"].as_u64().unwrap();
                    assert_eq!(below, count, "{p}");
                    put(format!("{name}_count"), labels.clone(), count as f64);
                    put(format!("{name}_sum"), labels, p["sum"].as_f64().unwrap());
                } else {
                    let v = match &p["value"] {
                        Value::Object(o) if o.contains_key("int") => {
                            o["int"].as_i64().unwrap() as f64
                        }
                        Value::Object(o) => o["double"].as_f64().unwrap(),
                        v => panic!("{name}: value {v}"),
                    };
                    put(family.clone(), labels, v);
                }
            }
        }
        out
    }

    fn read_bytes(&self) -> Option<f64> {
        self.samples
            .get(&canonical("slabfs_read_bytes_total"))
            .copied()
    }
}

fn mount_pushing(receiver: &str, interval: &str) -> (Mount, SocketAddr) {
    let (m, addr) = mount_with_metrics(
        &demo(),
        &[
            "--metrics-otlp",
            receiver,
            "--metrics-otlp-interval",
            interval,
        ],
    );
    assert!(
        m.log().contains(&format!(
            "pushing metrics to {receiver} every {interval} s (OTLP/HTTP)"
        )),
        "{}",
        m.log()
    );
    (m, addr)
}

#[test]
fn otlp_pushes_the_series_of_the_endpoint() {
    let receiver = Receiver::start(&[]);
    let (m, addr) = mount_pushing(&receiver.url(), "1");
    let read = read_files(&m, &FILES);
    settled(addr);
    // Bytes served, as pushed: the bytes read.
    let push = receiver.wait_for(|p| Pushed::of(p).read_bytes() == Some(read as f64));
    let resource = &push["resource"];
    let mnt = m.mnt.to_str().unwrap();
    assert_eq!(resource["service.name"], "slabfs", "{resource}");
    assert_eq!(resource["slabfs.mountpoint"], mnt, "{resource}");
    let instance = resource["service.instance.id"].as_str().unwrap();
    assert!(instance.ends_with(&format!(":{mnt}")), "{instance}");
    assert_eq!(push["scope"], "slabfs");

    // Every series: the same names, labels and values as the endpoint's.
    // The mount is idle, so the counters stand still: a scrape and the
    // push after it agree exactly (but for the uptime), once a push has
    // been taken after the last count (a read is counted after its
    // answer, a forget whenever the kernel sends it).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (scrape, pushed) = loop {
        let s = scraped(&Scrape::of(addr));
        let p = Pushed::of(&receiver.push_after(receiver.pushes().len()));
        if (p.samples == s.0 && p.families == s.1) || Instant::now() > deadline {
            break (s, p);
        }
    };
    assert_eq!(pushed.families, scrape.1, "family names: pushed, scraped");
    let differ: Vec<String> = scrape
        .0
        .iter()
        .filter(|(k, v)| pushed.samples.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: scraped {v}, pushed {:?}", pushed.samples.get(k)))
        .chain(
            pushed
                .samples
                .keys()
                .filter(|k| !scrape.0.contains_key(*k))
                .map(|k| format!("{k}: pushed only")),
        )
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // The histograms are there, read ones among them, with every bucket.
    let read_buckets = pushed
        .samples
        .keys()
        .filter(|k| {
            k.starts_with("slabfs_fuse_request_duration_seconds_bucket{")
                && k.contains("op=\"read\"")
        })
        .count();
    assert_eq!(read_buckets, 27);
    assert!(pushed.samples.len() > 300, "{}", pushed.samples.len());
    // Every push counted from the same start: the daemon's.
    let starts: Vec<Option<u64>> = receiver
        .pushes()
        .iter()
        .map(|p| Pushed::of(p).start)
        .collect();
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");
    m.stop();
}

#[test]
fn the_last_push_is_sent_at_unmount() {
    let receiver = Receiver::start(&[]);
    let (m, _) = mount_pushing(&receiver.url(), "3600");
    let read = read_files(&m, &FILES);
    assert!(receiver.pushes().is_empty());
    m.stop();
    let pushes = receiver.pushes();
    let [last] = &pushes[..] else {
        panic!("{} pushes", pushes.len())
    };
    // Every read counted: the session ended before the last push.
    assert_eq!(Pushed::of(last).read_bytes(), Some(read as f64));
}

/// 4 KiB `O_DIRECT` preads of `tas` for `how_long` (each one a FUSE read
/// the daemon answers: no page cache), in turn across the file; the
/// slowest read and how many there were.
fn read_direct_for(m: &Mount, how_long: Duration) -> (Duration, u32) {
    const PAGE: usize = 4096;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(m.path("climate.zarr/tas"))
        .unwrap();
    let pages = f.metadata().unwrap().len() as usize / PAGE;
    let mut backing = vec![0u8; 2 * PAGE];
    let off = backing.as_ptr().align_offset(PAGE);
    let buf = &mut backing[off..off + PAGE];
    let (start, mut worst, mut n) = (Instant::now(), Duration::ZERO, 0);
    while start.elapsed() < how_long {
        let page = (n as usize * 37) % pages;
        let t = Instant::now();
        assert_eq!(f.read_at(buf, (page * PAGE) as u64).unwrap(), PAGE);
        worst = worst.max(t.elapsed());
        n += 1;
    }
    (worst, n)
}

#[test]
fn a_collector_down_or_hanging_never_slows_reads() {
    let hanging = Receiver::start(&["--hang"]);
    // Timing bounds: not beside the tests that keep the cores busy (from
    // here: the receiver's start is not timed).
    let _g = common::alone();
    let nobody = format!("http://127.0.0.1:{}/v1/metrics", free_port());
    for (url, says) in [
        (nobody.as_str(), "Connection refused"),
        (&hanging.url(), "no answer within 1 s"),
    ] {
        let (m, _) = mount_pushing(url, "1");
        // Three and a half seconds: three pushes failed meanwhile, each
        // taking the push thread its whole timeout (1 s) when hanging.
        let (worst, reads) = read_direct_for(&m, Duration::from_millis(3500));
        eprintln!("{url}: {reads} reads, the slowest {worst:?}");
        // A read that waited for a push would take about its timeout.
        assert!(
            worst < Duration::from_millis(900),
            "{url}: the slowest of {reads} reads took {worst:?}"
        );
        let log = m.log();
        let failed: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("metrics push to {url} failed")))
            .collect();
        assert_eq!(failed.len(), 1, "{url}: one line while it fails:\n{log}");
        assert!(failed[0].contains(says), "{}", failed[0]);
        assert!(failed[0].contains("WARN"), "{}", failed[0]);
        // The unmount abandons the push in flight and waits for the last
        // one: at most its timeout, 2 s.
        let t = Instant::now();
        m.stop();
        let stopped = t.elapsed();
        eprintln!("{url}: stopped in {stopped:?}");
        assert!(stopped < Duration::from_secs(4), "{url}: {stopped:?}");
    }
}
