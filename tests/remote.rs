//! Remote sources against real servers on loopback, started by the tests:
//! an S3 server (moto's `moto_server`, from PyPI `moto[server]`) and a
//! small HTTP server that honours `Range` (tests/servers/range_http.py;
//! also run in its `--ignore-range` mode, like python's `http.server`).
//!
//! The committed fixtures (written by zarr-python / netCDF4-python) are
//! uploaded, then read through `slabfs` by URL and compared byte for byte
//! with the expected files those writers' own readers produced: through
//! the library, through `slabfs ls` / `slabfs cat`, and through a real
//! mount. Faults: a server stopped under a live mount (EIO for that read,
//! the daemon alive, the next read after a restart fine), 503s that are
//! retried, an object replaced between two ranges, a server that ignores
//! `Range`. Secrets: every test runs with a distinctive
//! `AWS_SECRET_ACCESS_KEY`, and none of logs, error messages, sidecars,
//! xattrs or `.slabfs/stats` may contain it.
//!
//! Nothing leaves the machine: both servers listen on 127.0.0.1.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use serde_json::Value;
use slabfs::engine::cache::ChunkCache;
use slabfs::formats::dataset::{self, Dataset};
use slabfs::storage::files::Files;
use slabfs::storage::remote::{self, Location, RemoteFiles};
use slabfs::storage::store::Store;

/// In every test's environment: it must never show anywhere.
const SECRET: &str = "Sup3rS3cretKeyThatMustNeverAppear-7f1d9a";
const KEY_ID: &str = "AKIASLABFSTESTKEY";
const BUCKET: &str = "slabfs-test";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    repo().join("tests/fixtures")
}

/// One test at a time (they share the process environment, the global
/// remote configuration and the servers), with the AWS environment set
/// once, under the lock, before anything reads it.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    static ENV: Once = Once::new();
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    ENV.call_once(|| {
        // SAFETY: set under LOCK, which every test of this binary holds
        // while it runs, so no other thread of ours reads or writes the
        // environment meanwhile.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", KEY_ID);
            std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET);
            std::env::set_var("AWS_REGION", "us-east-1");
            // Never the real endpoint or a real profile's settings.
            std::env::remove_var("AWS_ENDPOINT_URL");
            std::env::remove_var("AWS_ENDPOINT_URL_S3");
            std::env::remove_var("AWS_PROFILE");
            std::env::remove_var("RUST_LOG");
        }
    });
    guard
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("server exited with {status} before listening on {port}");
        }
        assert!(Instant::now() < deadline, "server not up on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `moto_server` on loopback; killed on drop.
struct S3 {
    child: Child,
    port: u16,
}

impl S3 {
    fn start() -> S3 {
        S3::start_on(free_port())
    }

    fn start_on(port: u16) -> S3 {
        let py = common::python();
        let moto = py.parent().unwrap().join("moto_server");
        let mut child = Command::new(&moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (moto[server] is in scripts/requirements.txt)",
                    moto.display()
                )
            });
        wait_port(port, &mut child);
        S3 { child, port }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Run a boto3 snippet with `s3` bound to a client of this server.
    fn boto(&self, code: &str) {
        let script = format!(
            "import boto3, os, sys\n\
             s3 = boto3.client('s3', endpoint_url='{}', region_name='us-east-1')\n\
             {code}\n",
            self.endpoint()
        );
        let out = Command::new(common::python())
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "boto3: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Create the bucket and upload the fixtures: `zarr/v2/...` and
    /// `zarr/v3/...` when `zarr`, and `nc3/*.nc` (16 threads: moto takes
    /// about 10 ms a request).
    fn upload_fixtures(&self, zarr: bool) {
        let root = fixtures();
        let parts = if zarr {
            "[('zarr/v2', 'zarr/v2'), ('zarr/v3', 'zarr/v3'), ('netcdf3/data', 'nc3')]"
        } else {
            "[('netcdf3/data', 'nc3')]"
        };
        self.boto(&format!(
            "from concurrent.futures import ThreadPoolExecutor\n\
             s3.create_bucket(Bucket='{BUCKET}')\n\
             root = {root:?}\n\
             jobs = []\n\
             for sub, dst in {parts}:\n\
             \x20   base = os.path.join(root, sub)\n\
             \x20   for d, _, fs in os.walk(base):\n\
             \x20       for f in fs:\n\
             \x20           p = os.path.join(d, f)\n\
             \x20           jobs.append((p, dst + '/' + os.path.relpath(p, base)))\n\
             with ThreadPoolExecutor(16) as ex:\n\
             \x20   list(ex.map(lambda j: s3.upload_file(j[0], '{BUCKET}', j[1]), jobs))\n",
            root = root.display().to_string()
        ));
    }

    fn stop(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.port
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tests/servers/range_http.py serving `root` on loopback; killed on drop.
struct Http {
    child: Child,
    port: u16,
}

impl Http {
    fn start(root: &Path, ignore_range: bool) -> Http {
        Http::start_with(
            root,
            if ignore_range {
                &["--ignore-range"]
            } else {
                &[]
            },
        )
    }

    /// The server with more options (range_http.py's usage).
    fn start_with(root: &Path, args: &[&str]) -> Http {
        let mut cmd = Command::new(common::python());
        cmd.arg(repo().join("tests/servers/range_http.py"))
            .arg(root)
            .args(args);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the server prints its port");
        wait_port(port, &mut child);
        Http { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    fn stats(&self) -> Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        std::io::Write::write_all(
            &mut s,
            b"GET /_stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        let body = reply.split("\r\n\r\n").nth(1).unwrap();
        serde_json::from_str(body).unwrap()
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn configure(endpoint: Option<String>) {
    remote::configure(remote::Config {
        endpoint_url: endpoint,
        // Generous: the machines that run the tests are shared and slow.
        timeout: Duration::from_secs(20),
        retries: 3,
        ..remote::Config::default()
    });
}

fn open(url: &str) -> Dataset {
    dataset::open(Path::new(url), Arc::new(ChunkCache::new(64 << 20)))
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// (path in `slabfs ls` of the directory, expected little-endian bytes)
/// of every Zarr fixture.
fn zarr_cases() -> Vec<(String, Vec<u8>)> {
    let root = fixtures().join("zarr");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let cases: Vec<_> = manifest
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let (store, array) = (e["store"].as_str().unwrap(), e["array"].as_str().unwrap());
            let path = if array.is_empty() {
                store.to_string()
            } else {
                format!("{store}/{array}")
            };
            let expected = std::fs::read(root.join(e["expected"].as_str().unwrap())).unwrap();
            (path, expected)
        })
        .collect();
    assert!(cases.len() > 50, "{} Zarr cases", cases.len());
    cases
}

/// (path in `slabfs ls` of the data directory, expected bytes) of every
/// netCDF-3 fixture variable.
fn netcdf3_cases() -> Vec<(String, Vec<u8>)> {
    let root = fixtures().join("netcdf3");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let mut cases = Vec::new();
    for file in manifest.as_array().unwrap() {
        for var in file["variables"].as_array().unwrap() {
            let expected = std::fs::read(root.join(var["expected"].as_str().unwrap())).unwrap();
            cases.push((var["path"].as_str().unwrap().to_string(), expected));
        }
    }
    assert!(cases.len() > 30, "{} netCDF-3 cases", cases.len());
    cases
}

/// Read every case from `ds` (paths under `prefix`) and compare.
fn check_all(ds: &Dataset, prefix: &str, cases: &[(String, Vec<u8>)]) {
    let mut failures = Vec::new();
    for (i, (path, expected)) in cases.iter().enumerate() {
        let path = format!("{prefix}{path}");
        let Some(entry) = ds.get(&path) else {
            failures.push(format!("{path}: not listed"));
            continue;
        };
        if let Err(e) = common::check_ranges(entry.array.as_ref(), expected, i as u64, 6) {
            failures.push(format!("{path}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn slabfs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args(args)
        .output()
        .unwrap()
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(
        !text.contains(SECRET),
        "the secret key appears in {what}:\n{text}"
    );
}

#[test]
fn s3_prefix_reads_as_the_same_tree_on_disk() {
    let _g = serial();
    let s3 = S3::start();
    s3.upload_fixtures(true);
    configure(Some(s3.endpoint()));

    // The library: a bucket prefix walked like the directory it came from.
    let url = format!("s3://{BUCKET}/zarr");
    let ds = open(&url);
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    let local =
        dataset::open(&fixtures().join("zarr"), Arc::new(ChunkCache::new(1 << 20))).unwrap();
    let names = |d: &Dataset| d.entries.iter().map(|e| e.path.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ds), names(&local));
    check_all(&ds, "", &zarr_cases());

    let ds = open(&format!("s3://{BUCKET}/nc3/"));
    assert!(ds.skipped.is_empty(), "{:?}", ds.skipped);
    check_all(&ds, "", &netcdf3_cases());
    // The whole bucket: both under their prefixes.
    let ds = open(&format!("s3://{BUCKET}"));
    assert!(ds.get("zarr/v3/sharded.zarr/sharded_3d").is_some());
    assert!(ds.get("nc3/classic_types.nc/fixed_i1").is_some());

    // One Zarr store and one netCDF-3 object by URL.
    let one = open(&format!("s3://{BUCKET}/zarr/v2/basic.zarr"));
    let (_, expected) = zarr_cases()
        .into_iter()
        .find(|(p, _)| p == "v2/basic.zarr/g1/sub/temp")
        .unwrap();
    check_all(&one, "", &[("g1/sub/temp".to_string(), expected)]);
    let nc = open(&format!("s3://{BUCKET}/nc3/classic_types.nc"));
    let cases: Vec<_> = netcdf3_cases()
        .into_iter()
        .filter_map(|(p, e)| Some((p.strip_prefix("classic_types.nc/")?.to_string(), e)))
        .collect();
    assert!(!cases.is_empty());
    check_all(&nc, "", &cases);
    cli_ls_and_cat_by_url(&s3.endpoint());

    // A missing prefix is an error naming it.
    let err = dataset::open(
        Path::new(&format!("s3://{BUCKET}/nothing-here")),
        Arc::new(ChunkCache::new(1 << 20)),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("nothing-here"), "{err}");
    assert_no_secret("an error", &err);
}

/// `slabfs ls` and `slabfs cat` of the uploaded fixtures (`cat` writes
/// native byte order; the expected files are little-endian).
fn cli_ls_and_cat_by_url(endpoint: &str) {
    if cfg!(target_endian = "big") {
        return;
    }
    let url = format!("s3://{BUCKET}/zarr");
    let ls = slabfs(&["ls", "--endpoint-url", endpoint, &url]);
    let stderr = String::from_utf8_lossy(&ls.stderr);
    assert!(ls.status.success(), "{stderr}");
    let local = slabfs(&["ls", fixtures().join("zarr").to_str().unwrap()]);
    assert_eq!(
        ls.stdout, local.stdout,
        "ls of the bucket and of the directory"
    );
    assert_no_secret("ls stderr", &stderr);
    for (path, expected) in zarr_cases().iter().step_by(7) {
        let cat = slabfs(&["cat", "--endpoint-url", endpoint, &url, path]);
        assert!(
            cat.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&cat.stderr)
        );
        assert!(cat.stdout == *expected, "{path}: slabfs cat differs");
    }
    // AWS_ENDPOINT_URL from the environment works the same, http:// and all.
    let cat = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args([
            "cat",
            &format!("s3://{BUCKET}/nc3/classic_types.nc"),
            "fixed_i1",
        ])
        .env("AWS_ENDPOINT_URL", endpoint)
        .output()
        .unwrap();
    assert!(
        cat.status.success(),
        "{}",
        String::from_utf8_lossy(&cat.stderr)
    );
    let (_, expected) = netcdf3_cases()
        .into_iter()
        .find(|(p, _)| p == "classic_types.nc/fixed_i1")
        .unwrap();
    assert_eq!(cat.stdout, expected);
}

#[test]
fn http_urls_name_one_dataset_read_with_ranges() {
    let _g = serial();
    configure(None);
    let http = Http::start(&fixtures(), false);
    let zarr = zarr_cases();
    // Stores an HTTP server can serve without listing: consolidated
    // metadata, or a single array.
    for store in [
        "v2/consolidated.zarr",
        "v3/consolidated.zarr",
        "v2/root_array.zarr",
        "v3/root_array.zarr",
    ] {
        let ds = open(&http.url(&format!("zarr/{store}")));
        let name = store.rsplit('/').next().unwrap();
        let cases: Vec<_> = zarr
            .iter()
            .filter_map(|(p, e)| {
                let rest = p.strip_prefix(store)?;
                let rel = match rest.strip_prefix('/') {
                    Some(r) => r.to_string(),
                    None if rest.is_empty() => name.to_string(),
                    None => return None,
                };
                Some((rel, e.clone()))
            })
            .collect();
        assert!(!cases.is_empty(), "{store}");
        check_all(&ds, "", &cases);
    }
    for file in ["classic_types.nc", "offset64_records.nc", "data64_types.nc"] {
        let ds = open(&http.url(&format!("netcdf3/data/{file}")));
        let cases: Vec<_> = netcdf3_cases()
            .into_iter()
            .filter_map(|(p, e)| Some((p.strip_prefix(&format!("{file}/"))?.to_string(), e)))
            .collect();
        assert!(!cases.is_empty(), "{file}");
        check_all(&ds, "", &cases);
    }
    assert!(
        http.stats()["206"].as_u64().unwrap() > 10,
        "{}",
        http.stats()
    );
    // A v3 group without consolidated metadata needs a listing: an error
    // saying so, not a wrong tree.
    for group in ["zarr/v3/sharded.zarr", "zarr/v2/basic.zarr"] {
        let err = dataset::open(
            Path::new(&http.url(group)),
            Arc::new(ChunkCache::new(1 << 20)),
        )
        .err()
        .unwrap_or_else(|| panic!("{group}: listed over HTTP"))
        .to_string();
        assert!(err.contains("cannot list"), "{err}");
    }
}

#[test]
fn a_server_that_ignores_range_is_refused_not_believed() {
    let _g = serial();
    configure(None);
    let http = Http::start(&fixtures(), true);
    let err = dataset::open(
        Path::new(&http.url("netcdf3/data/classic_types.nc")),
        Arc::new(ChunkCache::new(1 << 20)),
    )
    .err()
    .expect("a server that answers 200 to a range must not be read");
    let msg = err.to_string();
    assert!(msg.contains("classic_types.nc"), "{msg}");
    assert!(msg.contains("Range"), "{msg}");
    assert_eq!(err.errno(), libc::EIO);
}

#[test]
fn five_hundred_threes_are_retried() {
    let _g = serial();
    configure(None);
    let http = Http::start(&fixtures(), false);
    // Every request under /flaky/ fails once with 503, then succeeds.
    let ds = open(&http.url("flaky/netcdf3/data/classic_types.nc"));
    let cases: Vec<_> = netcdf3_cases()
        .into_iter()
        .filter_map(|(p, e)| Some((p.strip_prefix("classic_types.nc/")?.to_string(), e)))
        .collect();
    check_all(&ds, "", &cases);
    let stats = http.stats();
    assert!(stats["503"].as_u64().unwrap() >= 2, "{stats}");
}

#[test]
fn an_object_replaced_between_ranges_is_an_error_never_mixed() {
    let _g = serial();
    let s3 = S3::start();
    s3.boto(&format!(
        "s3.create_bucket(Bucket='{BUCKET}')\n\
         s3.put_object(Bucket='{BUCKET}', Key='f.bin', Body=b'old' + b'.' * 29)"
    ));
    configure(Some(s3.endpoint()));
    let url = format!("s3://{BUCKET}/f.bin");
    let files = RemoteFiles::new(vec![Location::parse(&url).unwrap()]).unwrap();
    let f = files.open(Path::new(&url)).unwrap();
    assert_eq!(f.size().unwrap(), 32);
    let mut buf = [0u8; 3];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"old");
    s3.boto(&format!(
        "s3.put_object(Bucket='{BUCKET}', Key='f.bin', Body=b'NEW' + b'!' * 29)"
    ));
    let err = f.read_exact_at(&mut buf, 4).unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
    assert!(err.to_string().contains(&url), "{err}");
    // Reopened: the new version, whole.
    let g = files.open(Path::new(&url)).unwrap();
    g.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"NEW");
    // Past the end of the version opened: EOF, no request.
    let e = g.read_exact_at(&mut buf, 30).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);

    // A netCDF-3 file's variables see the replacement in their change
    // stamps (a HEAD), which is how the refresh knows to reopen them.
    let nc = fixtures().join("netcdf3/data");
    s3.boto(&format!(
        "s3.upload_file({:?}, '{BUCKET}', 'x.nc')",
        nc.join("classic_types.nc").display().to_string()
    ));
    let ds = open(&format!("s3://{BUCKET}/x.nc"));
    let a = &ds.get("fixed_i1").unwrap().array;
    let before = a.change_stamp().data;
    assert!(
        before.is_some(),
        "a remote netCDF-3 file has a change stamp"
    );
    assert_eq!(a.change_stamp().data, before, "unchanged, same stamp");
    s3.boto(&format!(
        "s3.upload_file({:?}, '{BUCKET}', 'x.nc')",
        nc.join("ncgen_classic.nc").display().to_string()
    ));
    assert_ne!(a.change_stamp().data, before, "replaced, another stamp");
}

#[test]
fn urls_are_confined_to_the_source_and_allow_outside() {
    let _g = serial();
    let s3 = S3::start();
    s3.upload_fixtures(false);
    s3.boto(&format!(
        "s3.put_object(Bucket='{BUCKET}', Key='zarr/v2/basic.zarr/.zgroup', \\
         Body=open({:?}, 'rb').read())",
        fixtures()
            .join("zarr/v2/basic.zarr/.zgroup")
            .display()
            .to_string()
    ));
    configure(Some(s3.endpoint()));
    let root = format!("s3://{BUCKET}/nc3");
    let files = RemoteFiles::new(vec![Location::parse(&root).unwrap()]).unwrap();
    let inside = format!("{root}/classic_types.nc");
    assert!(files.open(Path::new(&inside)).is_ok());
    for outside in [
        format!("s3://{BUCKET}/zarr/v2/basic.zarr/.zgroup"),
        format!("s3://{BUCKET}/nc3x/classic_types.nc"),
        format!("{root}/../zarr/v2/basic.zarr/.zgroup"),
        "s3://other-bucket/nc3/classic_types.nc".to_string(),
        "/etc/passwd".to_string(),
        "nc3/classic_types.nc".to_string(),
    ] {
        let e = files.open(Path::new(&outside)).unwrap_err();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{outside}: {e}"
        );
    }
    // A store outside is refused on every read, saying why.
    let store = files.store(Path::new(&format!("s3://{BUCKET}/zarr/v2/basic.zarr")));
    let e = store.get(".zgroup", 1 << 20).unwrap_err().to_string();
    assert!(e.contains("outside the allowed locations"), "{e}");
    // --allow-outside URL admits another prefix.
    let files = RemoteFiles::new(vec![
        Location::parse(&root).unwrap(),
        Location::parse(&format!("s3://{BUCKET}/zarr/v2")).unwrap(),
    ])
    .unwrap();
    let store = files.store(Path::new(&format!("s3://{BUCKET}/zarr/v2/basic.zarr")));
    assert!(store.get(".zgroup", 1 << 20).unwrap().is_some());
    // Keys that climb out of a store are refused before any request.
    assert!(store.get("../../nc3/classic_types.nc", 1 << 20).is_err());
    // The size limit holds before the body is read.
    let e = store.get(".zgroup", 3).unwrap_err();
    assert!(matches!(e, slabfs::Error::TooLarge { limit: 3, .. }), "{e}");
}

/// A mount of a bucket prefix: the same bytes through the kernel; then
/// the server stops (EIO for reads that need it, the daemon stays), comes
/// back (reads work again), and the secret appears nowhere.
#[test]
fn mount_a_bucket_survives_the_server_going_away() {
    let _g = serial();
    let s3 = S3::start();
    s3.upload_fixtures(false);
    let endpoint = s3.endpoint();
    let url = format!("s3://{BUCKET}/nc3");
    let mut m = common::mount::Mount::start(
        Path::new(&url),
        &[
            "--endpoint-url",
            &endpoint,
            "--request-timeout",
            "2",
            "--retries",
            "1",
            "--refresh",
            "0",
            "--log-level",
            "debug",
            "--cache-size",
            "1MiB",
        ],
    );
    let cases = netcdf3_cases();
    for (path, expected) in &cases {
        let got = std::fs::read(m.path(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(got == *expected, "{path}: bytes through the mount differ");
    }

    // The server goes away: reads that need it fail with EIO, promptly.
    let port = s3.stop();
    let (victim, _) = cases
        .iter()
        .find(|(p, e)| p.starts_with("offset64_records.nc/") && e.len() > 16)
        .unwrap();
    // A fresh open, so the kernel's page cache cannot answer.
    let started = Instant::now();
    let e = read_direct(&m.path(victim)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{victim}: {e}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a down server took {:?}",
        started.elapsed()
    );
    // The daemon is alive and serving what needs no server.
    assert!(m.child.as_mut().unwrap().try_wait().unwrap().is_none());
    assert!(std::fs::read_dir(m.path("")).is_ok());
    let stats = std::fs::read_to_string(m.path(".slabfs/stats")).unwrap();

    // Back (moto keeps nothing: upload again): the next read works,
    // nothing of the failure was cached.
    let s3 = S3::start_on(port);
    s3.upload_fixtures(false);
    let (_, expected) = cases.iter().find(|(p, _)| p == victim).unwrap();
    let got = read_direct(&m.path(victim)).unwrap();
    assert!(got == *expected, "{victim}: after the restart");

    // The secret: not in the log, sidecars, xattrs or stats.
    let mut seen = vec![("log", m.log()), ("stats", stats)];
    seen.push((
        "stats after",
        std::fs::read_to_string(m.path(".slabfs/stats")).unwrap(),
    ));
    for (path, _) in &cases {
        let sidecar = m.path(&format!("{path}.json"));
        if let Ok(s) = std::fs::read_to_string(&sidecar) {
            seen.push(("a sidecar", s));
        }
        seen.push(("xattrs", xattrs(&m.path(path))));
    }
    assert!(
        m.log().contains("EIO") || m.log().contains("error"),
        "{}",
        m.log()
    );
    for (what, text) in &seen {
        assert_no_secret(what, text);
    }
    assert!(
        seen.iter()
            .any(|(w, t)| *w == "a sidecar" && t.contains(&url)),
        "sidecars name the source URL"
    );
    m.stop();
}

/// Read a whole file bypassing the page cache's old pages.
fn read_direct(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .or_else(|_| std::fs::File::open(path))?;
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok(v)
}

/// Every `user.*` xattr of `path`, names and values, as text.
fn xattrs(path: &Path) -> String {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    let mut names = vec![0u8; 64 << 10];
    // SAFETY: `c` is a valid path and `names` a buffer of the given size.
    let n = unsafe { libc::listxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return String::new();
    }
    let mut out = String::new();
    for name in names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
    {
        let cname = CString::new(name).unwrap();
        let mut value = vec![0u8; 64 << 10];
        // SAFETY: valid path, name and buffer of the given size.
        let v = unsafe {
            libc::getxattr(
                c.as_ptr(),
                cname.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        out.push_str(&String::from_utf8_lossy(name));
        out.push('=');
        if v > 0 {
            out.push_str(&String::from_utf8_lossy(&value[..v as usize]));
        }
        out.push('\n');
    }
    out
}

#[test]
fn secrets_stay_out_of_errors_and_logs() {
    let _g = serial();
    let s3 = S3::start();
    let endpoint = s3.endpoint();
    // A failing request (no such bucket), at debug level.
    let out = slabfs(&[
        "ls",
        "--log-level",
        "debug",
        "--endpoint-url",
        &endpoint,
        "s3://no-such-bucket/x",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no-such-bucket"), "{stderr}");
    assert_no_secret("ls stderr", &stderr);
    // A server that is down.
    let port = s3.stop();
    let out = slabfs(&[
        "cat",
        "--log-level",
        "debug",
        "--endpoint-url",
        &format!("http://127.0.0.1:{port}"),
        "--request-timeout",
        "2",
        "--retries",
        "1",
        &format!("s3://{BUCKET}/nc3/classic_types.nc"),
        "fixed_i1",
    ]);
    assert!(!out.status.success());
    assert_no_secret("cat stderr", &String::from_utf8_lossy(&out.stderr));
    // Secrets in a URL are refused, and not repeated in the refusal.
    for url in [
        "https://user:UrlPassw0rdSecret@127.0.0.1:1/x.nc",
        "https://127.0.0.1:1/x.nc?X-Amz-Signature=UrlQuerySecret123",
    ] {
        let out = slabfs(&["ls", url]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("UrlPassw0rdSecret") && !stderr.contains("UrlQuerySecret123"),
            "{stderr}"
        );
    }
}

/// SIGTERM while a read waits on a server that accepted the connection
/// and never answers (moto stopped with SIGSTOP): the daemon unmounts and
/// exits promptly, not when the request would have timed out.
#[test]
fn sigterm_unmounts_promptly_while_a_read_waits_on_a_hung_server() {
    let _g = serial();
    let s3 = S3::start();
    s3.upload_fixtures(false);
    let endpoint = s3.endpoint();
    let mut m = common::mount::Mount::start(
        Path::new(&format!("s3://{BUCKET}/nc3")),
        &[
            "--endpoint-url",
            &endpoint,
            "--request-timeout",
            "120",
            "--refresh",
            "0",
            "--cache-size",
            "1MiB",
        ],
    );
    let server = s3.child.id() as libc::pid_t;
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(server, libc::SIGSTOP) }, 0);
    let path = m.path("offset64_records.nc/temp");
    let reader = std::thread::spawn(move || read_direct(&path));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !reader.is_finished(),
        "the read should be waiting on the server"
    );
    let started = Instant::now();
    let status = m.signal_and_wait(libc::SIGTERM);
    let took = started.elapsed();
    // SAFETY: as above.
    unsafe { libc::kill(server, libc::SIGCONT) };
    assert!(status.success(), "{status}:\n{}", m.log());
    assert!(
        took < Duration::from_secs(15),
        "exit took {took:?}:\n{}",
        m.log()
    );
    let read = reader.join().unwrap();
    assert!(read.is_err(), "the waiting read fails, it does not hang");
    assert!(!common::mount::is_mount_point(&m.path("")), "{}", m.log());
}

/// The live refresh of a bucket prefix: an object added shows up, an
/// object replaced is served in its new version (never mixed with the
/// old), one removed goes away.
#[test]
fn refresh_follows_a_bucket() {
    let _g = serial();
    let s3 = S3::start();
    s3.upload_fixtures(false);
    let endpoint = s3.endpoint();
    let m = common::mount::Mount::start(
        Path::new(&format!("s3://{BUCKET}/nc3")),
        &["--endpoint-url", &endpoint, "--refresh", "1"],
    );
    let cases = netcdf3_cases();
    let expected = |path: &str| cases.iter().find(|(p, _)| p == path).unwrap().1.clone();
    assert_eq!(
        std::fs::read(m.path("classic_types.nc/fixed_i1")).unwrap(),
        expected("classic_types.nc/fixed_i1")
    );
    let data = fixtures().join("netcdf3/data");
    let file = |name: &str| data.join(name).display().to_string();
    s3.boto(&format!(
        "s3.upload_file({:?}, '{BUCKET}', 'nc3/added.nc')\n\
         s3.upload_file({:?}, '{BUCKET}', 'nc3/classic_types.nc')\n\
         s3.delete_object(Bucket='{BUCKET}', Key='nc3/single_record_byte.nc')",
        file("classic_types.nc"),
        file("data64_types.nc"),
    ));
    // A variable only the new version has, and one of the removed file.
    let new_name = cases
        .iter()
        .filter_map(|(p, _)| p.strip_prefix("data64_types.nc/"))
        .find(|v| {
            !cases
                .iter()
                .any(|(p, _)| *p == format!("classic_types.nc/{v}"))
        })
        .map(|v| format!("classic_types.nc/{v}"))
        .unwrap();
    let gone = cases
        .iter()
        .find(|(p, _)| p.starts_with("single_record_byte.nc/"))
        .unwrap()
        .0
        .clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let added = m.path("added.nc/fixed_i1").exists();
        let replaced = m.path(&new_name).exists();
        let removed = !m.path(&gone).exists();
        if added && replaced && removed {
            break;
        }
        assert!(Instant::now() < deadline, "refresh not seen:\n{}", m.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        std::fs::read(m.path("added.nc/fixed_i1")).unwrap(),
        expected("classic_types.nc/fixed_i1")
    );
    // classic_types.nc now holds data64_types.nc: its variables, its bytes.
    for (path, bytes) in cases
        .iter()
        .filter(|(p, _)| p.starts_with("data64_types.nc/"))
    {
        let rel = path.replacen("data64_types.nc/", "classic_types.nc/", 1);
        let got = read_direct(&m.path(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(got == *bytes, "{rel}: not the new version's bytes");
    }
    m.stop();
}

/// `AWS_PROFILE` and the shared credentials and config files, as the AWS
/// CLI reads them, when the environment has no keys: the requests are
/// signed with the profile's key and region (seen by the HTTP test
/// server, which records the signature's scope), and its secret shows
/// nowhere.
#[test]
fn aws_profile_from_the_shared_files() {
    let _g = serial();
    let http = Http::start(&fixtures(), false);
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    let config = dir.path().join("config");
    std::fs::write(
        &credentials,
        "[default]\naws_access_key_id = AKIADEFAULTKEY\naws_secret_access_key = d\n\
         [work]\naws_access_key_id = AKIAPROFILEKEY\n\
         aws_secret_access_key = ProfileSecretNeverShown-42\n",
    )
    .unwrap();
    std::fs::write(&config, "[profile work]\nregion = eu-north-1\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slabfs"))
        .args([
            "ls",
            "--log-level",
            "debug",
            "--retries",
            "0",
            "--endpoint-url",
            &format!("http://127.0.0.1:{}", http.port),
            "s3://no-such-bucket/x",
        ])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_REGION")
        .env("AWS_PROFILE", "work")
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
        .env("AWS_CONFIG_FILE", &config)
        .output()
        .unwrap();
    // The test server is no S3: the listing fails, signed.
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ProfileSecretNeverShown"), "{stderr}");
    let credential = http.stats()["credential"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        credential.starts_with("AKIAPROFILEKEY/") && credential.contains("/eu-north-1/s3/"),
        "signed with {credential:?}"
    );
}

// ---------------------------------------------------------------------
// Latency (issue 15 item 4): a read's chunks are fetched at once, not one
// round trip each.
// ---------------------------------------------------------------------

/// Chunks of one read over a server that takes `DELAY` per request: they
/// are fetched concurrently, so the read costs about one delay, not one
/// per chunk (27 chunks, 0.5 s each: at least 6.75 s on two decode
/// threads one request each, as before; about 0.5 s all at once). The
/// bound is generous for a loaded machine and still far below the
/// one-by-one time.
#[test]
fn a_reads_chunks_are_fetched_concurrently() {
    let _g = serial();
    configure(None);
    let http = Http::start_with(&fixtures(), &["--delay", "0.5"]);
    let ds = open(&http.url("zarr/v3/consolidated.zarr"));
    let entry = ds.get("model/temperature").expect("listed");
    let array = entry.array.as_ref();
    let expected = zarr_cases()
        .into_iter()
        .find(|(p, _)| p == "v3/consolidated.zarr/model/temperature")
        .unwrap()
        .1;
    let before = http.stats()["requests"].as_u64().unwrap();
    let started = Instant::now();
    let mut got = vec![0u8; expected.len()];
    let n =
        slabfs::engine::read::read_at(array, 0, &mut got, slabfs::dtype::Endian::Little).unwrap();
    let took = started.elapsed();
    assert_eq!(n, expected.len());
    assert!(got == expected, "bytes differ");
    // (The second `/_stats` counts itself.)
    let requests = http.stats()["requests"].as_u64().unwrap() - before - 1;
    // 27 chunk keys (some missing: 404s are requests too), one GET each.
    assert_eq!(requests, 27, "one GET per chunk");
    assert!(
        took < Duration::from_secs(4),
        "27 chunks at 0.5 s per request took {took:?}: fetched one by one"
    );
}

/// The inner chunks of one shard that a read needs are read with one
/// ranged GET per shard (they lie within the 1 MiB coalescing gap of each
/// other), not one each: `sharded_3d` has 18 shard positions (17 stored)
/// and 75 inner chunks; a whole read costs at most an index request and
/// one data GET per shard position (one GET per inner chunk, as before,
/// made it 91 requests).
#[test]
fn nearby_ranges_of_a_shard_are_coalesced() {
    let _g = serial();
    configure(None);
    let http = Http::start(&fixtures(), false);
    let ds = open(&http.url("zarr/v3/sharded.zarr/sharded_3d"));
    let entry = ds.get("sharded_3d").expect("listed");
    let expected = zarr_cases()
        .into_iter()
        .find(|(p, _)| p == "v3/sharded.zarr/sharded_3d")
        .unwrap()
        .1;
    let before = http.stats()["requests"].as_u64().unwrap();
    let mut got = vec![0u8; expected.len()];
    let n = slabfs::engine::read::read_at(
        entry.array.as_ref(),
        0,
        &mut got,
        slabfs::dtype::Endian::Little,
    )
    .unwrap();
    assert_eq!(n, expected.len());
    assert!(got == expected, "bytes differ");
    // (The second `/_stats` counts itself.)
    let requests = http.stats()["requests"].as_u64().unwrap() - before - 1;
    eprintln!("sharded_3d read whole: {requests} requests");
    assert!(
        requests <= 2 * 18,
        "{requests} requests: more than an index and one GET per shard"
    );
}
