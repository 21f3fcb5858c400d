//! The servers the remote tests (tests/it/remote.rs,
//! tests/it/remote_faults.rs) start on loopback: moto (S3), the HTTP
//! server that honours `Range` (tests/servers/range_http.py) and the
//! fault-injecting proxy (tests/servers/fault_proxy.py), each killed when
//! dropped; and [`S3Server`], what the tests do with moto or s3s-fs
//! (tests/it/common/s3s.rs).
//!
//! Nothing leaves the machine: every server listens on 127.0.0.1.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A port nobody listens on now (the OS's choice).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait (up to a minute) until something listens on `port`; panic if
/// `child` (`what`) exits first.
pub fn wait_port(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{what} exited with {status} before listening on {port}");
        }
        assert!(Instant::now() < deadline, "{what} not up on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The port a server prints on its first line of output.
fn printed_port(child: &mut Child, what: &str) -> u16 {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{what} printed {line:?}, not its port"))
}

/// What the tests do with either S3 server.
pub trait S3Server {
    fn endpoint(&self) -> String;

    fn create_bucket(&self, bucket: &str);

    /// PUT each `(key, file)` into `bucket` (16 at a time) with
    /// object_store's S3 client: the server computes and keeps each ETag.
    fn put_files(&self, bucket: &str, files: Vec<(String, std::path::PathBuf)>) {
        use futures::StreamExt;
        use object_store::ObjectStoreExt;
        // reqwest has no TLS provider of its own: the one slabfs installs.
        slabfs::storage::remote::tls::install();
        let store = object_store::aws::AmazonS3Builder::from_env()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_bucket_name(bucket)
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(
            futures::stream::iter(files)
                .map(|(key, file)| {
                    let store = &store;
                    async move {
                        let bytes = std::fs::read(&file).unwrap();
                        store
                            .put(&object_store::path::Path::from(key.as_str()), bytes.into())
                            .await
                            .unwrap_or_else(|e| panic!("PUT {key}: {e}"));
                    }
                })
                .buffer_unordered(16)
                .collect::<Vec<()>>(),
        );
    }

    /// Create `bucket` and upload every file under `dir` to `prefix/`.
    fn upload_dir(&self, bucket: &str, dir: &Path, prefix: &str) {
        self.create_bucket(bucket);
        let mut files = Vec::new();
        walk(dir, &mut |p| {
            let rel = p.strip_prefix(dir).unwrap().to_str().unwrap();
            files.push((format!("{prefix}/{rel}"), p.to_path_buf()));
        });
        self.put_files(bucket, files);
    }

    /// Run a boto3 snippet with `s3` bound to a client of this server.
    fn boto(&self, code: &str) {
        let script = format!(
            "import boto3, os, sys\n\
             s3 = boto3.client('s3', endpoint_url='{}', region_name='us-east-1')\n\
             {code}\n",
            self.endpoint()
        );
        let out = super::python::Python::new()
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
}

/// A `moto_server` on loopback; killed on drop.
pub struct Moto {
    pub child: Child,
    pub port: u16,
}

impl Moto {
    pub fn start() -> Moto {
        Moto::start_on(free_port())
    }

    pub fn start_on(port: u16) -> Moto {
        let py = super::python();
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
        wait_port(port, &mut child, "moto_server");
        Moto { child, port }
    }

    /// Stop the server; the port it listened on.
    pub fn stop(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.port
    }
}

impl S3Server for Moto {
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A `PUT /bucket` (moto checks no signature).
    fn create_bucket(&self, bucket: &str) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "create {bucket}: {reply}"
        );
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir`, depth first.
fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}

/// tests/servers/range_http.py serving `root` on loopback; killed on drop.
pub struct Http {
    child: Child,
    pub port: u16,
}

impl Http {
    pub fn start(root: &Path, ignore_range: bool) -> Http {
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
    pub fn start_with(root: &Path, args: &[&str]) -> Http {
        let mut child = Command::new(super::python())
            .arg(repo().join("tests/servers/range_http.py"))
            .arg(root)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let port = printed_port(&mut child, "range_http.py");
        wait_port(port, &mut child, "range_http.py");
        Http { child, port }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    pub fn stats(&self) -> Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(b"GET /_stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        let body = reply.split("\r\n\r\n").nth(1).unwrap();
        serde_json::from_str(body).unwrap()
    }

    /// Requests the server has answered so far (this one included).
    pub fn requests(&self) -> u64 {
        self.stats()["requests"].as_u64().unwrap()
    }

    /// Requests answered since [`requests`](Self::requests) said `before`,
    /// not counting this call's own `/_stats`.
    pub fn requests_since(&self, before: u64) -> u64 {
        self.requests() - before - 1
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tests/servers/fault_proxy.py in front of `upstream`; stopped on drop.
pub struct FaultProxy {
    child: Child,
    pub port: u16,
}

impl FaultProxy {
    pub fn start(upstream: u16, args: &[&str]) -> FaultProxy {
        let mut child = Command::new(super::python())
            .arg(repo().join("tests/servers/fault_proxy.py"))
            .arg(upstream.to_string())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let port = printed_port(&mut child, "fault_proxy.py");
        wait_port(port, &mut child, "fault_proxy.py");
        FaultProxy { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn control(&self, path: &str) -> Value {
        proxy_control(self.port, path)
    }

    pub fn set(&self, query: &str) -> Value {
        self.control(&format!("set?{query}"))
    }

    pub fn stats(&self) -> Value {
        self.control("stats")
    }
}

/// GET a control path of the proxy on `port`; its JSON answer.
pub fn proxy_control(port: u16, path: &str) -> Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /_proxy/{path} HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("proxy control {path}: {reply:?}"));
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "proxy control {path}: {reply}"
    );
    serde_json::from_str(body).unwrap()
}

/// Requests the proxy on `port` has seen for the object at `path`.
pub fn proxy_count(port: u16, path: &str) -> u64 {
    proxy_control(port, &format!("count?path={path}"))["requests"]
        .as_u64()
        .unwrap()
}

impl Drop for FaultProxy {
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
