//! Remote sources: object stores (S3, GCS, Azure) and plain HTTP(S), behind
//! the same two seams as the file system ([`Store`] and [`ReadAt`]).
//!
//! # How a URL becomes bytes
//!
//! ```text
//! "s3://bucket/runs/"  ─ Location::parse ─▶ scheme, bucket/host, prefix
//!        │                                  (credentials and query strings
//!        │                                   never kept for messages)
//!        ▼
//! connect(&Location) ── object_store builder (from_env + Config) ──▶ Remote
//!        │                 retries with backoff and jitter, timeouts,
//!        │                 allow_http for an http:// endpoint; S3
//!        │                 credentials of an AWS profile (`profile`:
//!        │                 keys, credential_process; `role`: STS AssumeRole)
//!        ▼
//! RemoteStore (keys under the prefix)      RemoteFile (one object)
//!   Store::get / get_range / list_dir        ReadAt::read_exact_at
//!        └──────────── block_on(runtime) + semaphore ────────────┘
//! ```
//!
//! The crate of choice is Apache Arrow's `object_store` (one `ObjectStore`
//! trait over S3, GCS, Azure and HTTP, with signing, credential discovery
//! and retries). Its types stay inside this module: the layers above see
//! only [`Store`], [`ReadAt`] and [`Files`](super::Files).
//!
//! # Threads and bounds
//!
//! `object_store` is async. The read path is not: FUSE threads and the
//! rayon decode pool call [`Store::get`] and [`ReadAt::read_exact_at`] and
//! wait. So the storage layer owns one small tokio runtime for the whole
//! process ([`runtime`], [`Config::threads`] workers, 2 by default): a
//! blocking call hands its request to it and waits for the answer. A
//! semaphore bounds the requests in flight across the process
//! ([`Config::max_requests`], 64 by default, the ceiling: while the
//! servers throttle, [`throttle`] lowers the limit and holds every
//! attempt for a backoff); a caller beyond it waits its turn. Nothing
//! here is per dataset: a mount of a thousand datasets has the same
//! runtime and the same bound.
//!
//! # Latency: many requests per caller
//!
//! One blocking call per request would make the requests in flight as
//! many as the threads calling (two decode threads and a few FUSE
//! threads), and a read of many chunks one round trip per chunk or two.
//! So the stores also take many requests in one call: [`Store::get_many`]
//! (whole values) and [`Store::get_ranges`] (ranges of values) hand them
//! all to the runtime at once ([`block_on_all`]), each holding its own
//! permit, and return when the last has answered. The Zarr read path asks
//! for every chunk of a read in one such call, then decodes on rayon;
//! readahead asks for every chunk of its window with
//! [`Store::get_each`], which hands each value on as it arrives
//! ([`each_on_runtime`]: the requests are tasks of the runtime), so the
//! first chunks decode while the last are still on their way. The
//! requests in flight are bounded by `--max-requests`, not by the decode
//! threads.
//! Ranges of one object within [`store::COALESCE_GAP`] (1 MiB) of each
//! other are merged into one ranged GET (the inner chunks of a shard).
//! [`latency`] is a moving average of the time to first byte, which
//! readahead uses to size its window ([`crate::engine::readahead`]).
//!
//! [`Store::get_many`]: crate::storage::Store::get_many
//! [`Store::get_ranges`]: crate::storage::Store::get_ranges
//! [`Store::get_each`]: crate::storage::Store::get_each
//!
//! # Faults
//!
//! `object_store` retries timeouts, connection errors, 5xx and throttling
//! answers with exponential backoff and decorrelated jitter, up to
//! [`Config::retries`] times within [`Config::timeout`]. A throttling
//! answer (`503`, `429`) also slows the whole process ([`throttle`]):
//! every attempt waits out a shared backoff, and fewer requests are in
//! flight until answers come back normally. A request that
//! still fails is an error for that read only (EIO at the mount), naming
//! the object's URL; nothing failed is cached (the layers above cache only
//! decoded successes).
//!
//! A stalled attempt (no byte for [`Config::stall_timeout`], before the
//! answer's head or in the middle of its body) is abandoned by reqwest's
//! read timeout, which slabfs's client sets ([`client`]): the library's
//! own mechanism, no retry loop here. `object_store` then retries it like
//! any timeout, and a body cut in the middle is resumed with a GET of
//! the rest of its range, on a new connection (the cut one is dropped),
//! its ETag checked against the first answer's, so versions never mix.
//! Only [`Config::timeout`] (and [`Config::retries`]) turn these
//! failures into errors; docs/REMOTE.md, "Timeouts", has how the bounds
//! relate and why the defaults.
//!
//! A whole call is also bounded by a deadline of its
//! own ([`Config::deadline`]), so a server that accepts a connection and
//! never answers cannot hang a reader, and [`cancel_all`] (called on
//! SIGTERM) ends every call at once, so the unmount never waits for a
//! dead server.
//!
//! # Secrets
//!
//! Error messages name objects by [`Location::display`]: the URL without
//! user info or query string (a presigned URL's signature is a secret).
//! Every message that comes from `object_store` or the HTTP client is also
//! passed through [`redact`], which blanks the values of the credential
//! environment variables and of the URL's password and query parameters,
//! should any of them appear in it.

mod client;
pub mod hedge;
mod location;
pub mod metrics;
mod profile;
mod role;
mod store;
pub mod throttle;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use parking_lot::RwLock;

use crate::error::{Error, Result};

pub use location::{Location, Scheme, is_url, strip_secrets, url_of};
pub use store::{COALESCE_GAP, RemoteFile, RemoteFiles, RemoteStore, STAMP_REUSE};

/// How remote sources are reached: one set for the process (a mount, or
/// one `ls`/`cat`), set by [`configure`] before the first connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// S3 endpoint (an S3-compatible server: MinIO, Ceph, moto...); else
    /// `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` from the environment,
    /// else AWS. An `http://` endpoint is allowed without TLS.
    pub endpoint_url: Option<String>,
    /// Send no credentials and no signature (public buckets).
    pub no_sign_request: bool,
    /// Requests in flight at once, across the process: the ceiling; while
    /// the servers throttle, the limit is lower ([`throttle`]).
    pub max_requests: usize,
    /// Worker threads of the runtime that runs the requests.
    pub threads: usize,
    /// Retries of one request (timeouts, connection errors, 5xx, throttling).
    pub retries: usize,
    /// Time one request (and its retries) may take before it is an error.
    pub timeout: Duration,
    /// Time to establish a connection.
    pub connect_timeout: Duration,
    /// Time one attempt may go without receiving a byte (the response's
    /// head, or the next bytes of its body) before it is abandoned and
    /// retried on a new connection, resuming after the bytes received.
    pub stall_timeout: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            endpoint_url: None,
            no_sign_request: false,
            // Enough to keep a high-latency link busy (64 MiB in flight
            // with 1 MiB chunks), few enough for any server's limits.
            max_requests: 64,
            // The runtime only moves bytes; decoding is rayon's. Two
            // threads keep hundreds of requests in flight.
            threads: 2,
            retries: 5,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            // See docs/REMOTE.md, "Timeouts": a healthy loopback GET of
            // 1-16 MiB never goes more than a few milliseconds without a
            // byte, a cross-region one a few hundred; 10 s is far above
            // both, and fits twice into the 30 s request timeout, so a
            // read survives two stalls in a row.
            stall_timeout: Duration::from_secs(10),
        }
    }
}

impl Config {
    /// The longest a whole call (a request and its retries) may take.
    pub fn deadline(&self) -> Duration {
        // object_store bounds retries by `timeout`; one more attempt and
        // the backoff sleeps fit in a second timeout.
        self.timeout.saturating_mul(2) + self.connect_timeout
    }

    fn endpoint(&self) -> Option<String> {
        self.endpoint_url.clone().or_else(|| {
            ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        })
    }

    fn retry(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: self.retries,
            retry_timeout: self.timeout,
        }
    }

    pub(crate) fn client(&self, allow_http: bool) -> ClientOptions {
        ClientOptions::new()
            .with_allow_http(allow_http)
            .with_timeout(self.timeout)
            .with_connect_timeout(self.connect_timeout)
            .with_read_timeout(self.stall_timeout)
    }
}

static CONFIG: RwLock<Option<Config>> = RwLock::new(None);

/// Set the process's remote configuration. The runtime is sized by the
/// first connection (later changes of `threads` do not resize it); the
/// request limit is restored to the new `max_requests`, and a backoff in
/// progress ends ([`throttle`]).
pub fn configure(config: Config) {
    let max = config.max_requests;
    *CONFIG.write() = Some(config);
    throttle::reconfigure(max);
}

/// The configuration in force.
pub fn config() -> Config {
    CONFIG.read().clone().unwrap_or_default()
}

struct Runtime {
    rt: tokio::runtime::Runtime,
    /// Set once by [`cancel_all`]: every call waiting or in flight ends.
    stopping: tokio::sync::watch::Sender<bool>,
}

static RT: OnceLock<Runtime> = OnceLock::new();

/// Set by [`cancel_all`], for calls made after it.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn shared() -> &'static Runtime {
    RT.get_or_init(|| {
        let cfg = config();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads.max(1))
            .thread_name("slabfs-remote")
            .enable_all()
            .build()
            .expect("the remote I/O runtime starts");
        Runtime {
            rt,
            stopping: tokio::sync::watch::Sender::new(false),
        }
    })
}

/// The runtime remote requests run on (started on first use).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    &shared().rt
}

/// Run `fut` on the shared runtime and wait for it, holding one of the
/// [`Config::max_requests`] permits, within `deadline`. Called from FUSE
/// and rayon threads, never from the runtime's own.
pub(crate) fn block_on<T: Send>(
    deadline: Duration,
    fut: impl std::future::Future<Output = std::io::Result<T>> + Send,
) -> std::io::Result<T> {
    block_on_all(deadline, vec![fut])
        .pop()
        .expect("one future, one answer")
}

/// Run all of `futs` on the shared runtime at once and wait for every
/// answer, in order: each request holds a permit of its own while it runs
/// (so at most [`Config::max_requests`] are in flight across the process,
/// the rest wait their turn) and has `deadline` from when it starts.
/// This is how one read asks for all its chunks in one round trip instead
/// of one after another.
pub(crate) fn block_on_all<T: Send, F>(deadline: Duration, futs: Vec<F>) -> Vec<std::io::Result<T>>
where
    F: std::future::Future<Output = std::io::Result<T>> + Send,
{
    let shared = shared();
    let stopped = || std::io::Error::new(std::io::ErrorKind::Interrupted, "slabfs is stopping");
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        return futs.iter().map(|_| Err(stopped())).collect();
    }
    let n = futs.len();
    let mut stopping = shared.stopping.subscribe();
    shared.rt.block_on(async move {
        let work = futures::future::join_all(futs.into_iter().map(|fut| bounded(deadline, fut)));
        let cancelled = async move {
            let _ = stopping.wait_for(|s| *s).await;
        };
        match futures::future::select(Box::pin(work), Box::pin(cancelled)).await {
            futures::future::Either::Left((r, _)) => r,
            futures::future::Either::Right(_) => (0..n).map(|_| Err(stopped())).collect(),
        }
    })
}

/// `fut` holding one of the permits of the requests in flight (waiting
/// for one first: at most [`Config::max_requests`], fewer while the
/// servers throttle, see [`throttle`]), an error if it takes longer than
/// `deadline`.
async fn bounded<T>(
    deadline: Duration,
    fut: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    let _permit = throttle::global()
        .acquire()
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    match tokio::time::timeout(deadline, fut).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {} s", deadline.as_secs()),
        )),
    }
}

/// Run all of `futs` on the shared runtime at once, as [`block_on_all`]
/// does, but hand each answer to `each` (with its index in `futs`) on the
/// calling thread as soon as it arrives, while the others are still on
/// their way: a prefetch decodes its first chunks while the last ones are
/// in flight instead of after them. The requests run as tasks of the
/// runtime (its workers receive the bodies meanwhile); if the caller
/// unwinds, the tasks still running are cancelled.
pub(crate) fn each_on_runtime<T, F>(
    deadline: Duration,
    futs: Vec<F>,
    mut each: impl FnMut(usize, std::io::Result<T>),
) where
    T: Send + 'static,
    F: std::future::Future<Output = std::io::Result<T>> + Send + 'static,
{
    let shared = shared();
    let stopped = || std::io::Error::new(std::io::ErrorKind::Interrupted, "slabfs is stopping");
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        (0..futs.len()).for_each(|i| each(i, Err(stopped())));
        return;
    }
    /// Aborts the tasks not yet done when dropped.
    struct Tasks(Vec<tokio::task::JoinHandle<()>>);
    impl Drop for Tasks {
        fn drop(&mut self) {
            self.0.iter().for_each(|t| t.abort());
        }
    }
    let n = futs.len();
    let (tx, rx) = std::sync::mpsc::channel();
    let tasks = Tasks(
        futs.into_iter()
            .enumerate()
            .map(|(i, fut)| {
                let tx = tx.clone();
                let mut stopping = shared.stopping.subscribe();
                shared.rt.spawn(async move {
                    let work = bounded(deadline, fut);
                    let cancelled = async move {
                        let _ = stopping.wait_for(|s| *s).await;
                    };
                    let r = match futures::future::select(Box::pin(work), Box::pin(cancelled)).await
                    {
                        futures::future::Either::Left((r, _)) => r,
                        futures::future::Either::Right(_) => Err(stopped()),
                    };
                    let _ = tx.send((i, r));
                })
            })
            .collect(),
    );
    drop(tx);
    let mut answered = vec![false; n];
    for (i, r) in rx.iter() {
        answered[i] = true;
        each(i, r);
    }
    drop(tasks);
    // Every task sends once, unless the runtime dropped it (shutting down).
    for (i, _) in answered.iter().enumerate().filter(|(_, a)| !**a) {
        each(
            i,
            Err(std::io::Error::other(
                "the remote I/O runtime is shutting down",
            )),
        );
    }
}

/// Time to first byte of recent requests, in microseconds (a moving
/// average; 0 before the first).
static LATENCY_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Note the time a request took to its response's headers.
pub(crate) fn note_latency(took: Duration) {
    use std::sync::atomic::Ordering::Relaxed;
    let now = took.as_micros().min(u64::MAX as u128) as u64;
    // An exponential moving average over about the last 8 requests: a
    // slow outlier moves it a little, a changed link within a few reads.
    // (A lost update between two threads only drops one sample.)
    let old = LATENCY_US.load(Relaxed);
    let new = if old == 0 { now } else { (old * 7 + now) / 8 };
    LATENCY_US.store(new.max(1), Relaxed);
}

/// The measured time to first byte of remote requests (zero before any).
pub fn latency() -> Duration {
    Duration::from_micros(LATENCY_US.load(std::sync::atomic::Ordering::Relaxed))
}

/// End every remote call waiting or in flight, and every later one, with
/// an error: the daemon is stopping (SIGTERM), and a reader must not hold
/// the unmount for as long as a dead server takes to time out.
pub fn cancel_all() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    // A mount that never read remotely has no runtime to start for this.
    if let Some(rt) = RT.get() {
        rt.stopping.send_replace(true);
    }
}

/// A connected object store and the location it was connected for.
#[derive(Debug, Clone)]
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    location: Location,
    deadline: Duration,
}

impl Remote {
    pub fn location(&self) -> &Location {
        &self.location
    }
}

/// Connect to the store that holds `location`: credentials and settings
/// from the environment, as each cloud's own tools find them, then the
/// process's [`Config`].
pub fn connect(location: &Location) -> Result<Remote> {
    let cfg = config();
    let url = location.store_url();
    // One client per store and configuration for the process: a refresh
    // reopening the source every few seconds reuses its connections.
    static CONNECTED: parking_lot::Mutex<Vec<(String, Arc<dyn ObjectStore>)>> =
        parking_lot::Mutex::new(Vec::new());
    let key = format!("{url} {cfg:?}");
    if let Some((_, store)) = CONNECTED.lock().iter().find(|(k, _)| *k == key) {
        return Ok(Remote {
            store: store.clone(),
            location: location.clone(),
            deadline: cfg.deadline(),
        });
    }
    let err = |e: object_store::Error| Error::Io {
        path: location.display(),
        source: std::io::Error::other(redact(&e.to_string())),
    };
    // Every request of this store is counted (metrics: .slabfs/stats).
    let counted = metrics::source(location::strip_secrets(&url).trim_end_matches('/'));
    let store: Arc<dyn ObjectStore> = match location.scheme() {
        Scheme::S3 => {
            let mut b = object_store::aws::AmazonS3Builder::from_env()
                .with_url(url)
                .with_retry(cfg.retry())
                .with_skip_signature(cfg.no_sign_request);
            let env = |v: &str| std::env::var(v).ok().filter(|s| !s.is_empty());
            // The shared files fill in what the environment does not say.
            let profile = profile::load();
            remember_secrets(profile.secrets());
            if env("AWS_ACCESS_KEY_ID").is_none() && !cfg.no_sign_request {
                let region = env("AWS_REGION")
                    .or_else(|| env("AWS_DEFAULT_REGION"))
                    .or_else(|| profile.region.clone())
                    .unwrap_or_else(|| "us-east-1".to_string());
                let sts = role::sts_endpoint(&profile, &region);
                match role::provider(&profile, &region, &sts) {
                    Ok(Some(credentials)) => b = b.with_credentials(credentials),
                    Ok(None) => {}
                    Err(why) => {
                        return Err(Error::Io {
                            path: location.display(),
                            source: std::io::Error::other(format!("AWS profile: {why}")),
                        });
                    }
                }
            }
            let endpoint = cfg.endpoint().or(profile.endpoint_url.clone());
            let http = endpoint
                .as_deref()
                .is_some_and(|e| e.starts_with("http://"));
            if let Some(e) = endpoint {
                b = b.with_endpoint(e);
            }
            if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
                // The profile's, else what the AWS CLI assumes too;
                // S3-compatible servers accept any region.
                b = b.with_region(profile.region.as_deref().unwrap_or("us-east-1"));
            }
            Arc::new(
                b.with_client_options(cfg.client(http))
                    .with_http_connector(metrics::connector(counted))
                    .build()
                    .map_err(err)?,
            )
        }
        Scheme::Gcs => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(url)
                .with_http_connector(metrics::connector(counted))
                .with_retry(cfg.retry())
                .with_skip_signature(cfg.no_sign_request)
                .with_client_options(
                    cfg.client(profile::gcs_endpoint().is_some_and(|e| e.starts_with("http://"))),
                )
                .build()
                .map_err(err)?,
        ),
        Scheme::Azure => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(url)
                .with_http_connector(metrics::connector(counted))
                .with_retry(cfg.retry())
                .with_skip_signature(cfg.no_sign_request)
                .with_client_options(cfg.client(false))
                .build()
                .map_err(err)?,
        ),
        Scheme::Http | Scheme::Https => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_url(url)
                .with_http_connector(metrics::connector(counted))
                .with_retry(cfg.retry())
                .with_client_options(cfg.client(location.scheme() == Scheme::Http))
                .build()
                .map_err(err)?,
        ),
    };
    let mut connected = CONNECTED.lock();
    // Few stores per process (the source's and --allow-outside's); the
    // bound only guards against a configuration changing in a loop.
    if connected.len() >= 64 {
        connected.remove(0);
    }
    connected.push((key, store.clone()));
    Ok(Remote {
        store,
        location: location.clone(),
        deadline: cfg.deadline(),
    })
}

/// Environment variables whose values are secrets, never to be shown.
const SECRET_VARS: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_MASTER_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_CLIENT_SECRET",
];

static URL_SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember the secrets of a source URL (password, query values) so that
/// [`redact`] blanks them.
pub(crate) fn remember_secrets(secrets: impl IntoIterator<Item = String>) {
    let mut known = URL_SECRETS.write();
    for s in secrets {
        // Short values ("1", "true") would blank innocent text; a secret
        // worth the name is longer.
        if s.len() >= 6 && !known.contains(&s) {
            known.push(s);
        }
    }
}

/// `message` with every known secret replaced by `***`.
pub fn redact(message: &str) -> String {
    let mut out = message.to_string();
    let env = SECRET_VARS
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .filter(|s| s.len() >= 6);
    for secret in env.chain(URL_SECRETS.read().iter().cloned()) {
        if out.contains(&secret) {
            out = out.replace(&secret, "***");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_blanks_url_secrets() {
        remember_secrets(["s3cr3t-value-xyz".to_string(), "1".to_string()]);
        assert_eq!(
            redact("GET https://h/x?sig=s3cr3t-value-xyz failed (1 try)"),
            "GET https://h/x?sig=*** failed (1 try)"
        );
    }

    #[test]
    fn cancel_all_ends_calls_in_flight() {
        let t = std::thread::spawn(|| {
            block_on(Duration::from_secs(600), async {
                tokio::time::sleep(Duration::from_secs(600)).await;
                Ok(())
            })
        });
        std::thread::sleep(Duration::from_millis(200));
        let started = std::time::Instant::now();
        cancel_all();
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert!(started.elapsed() < Duration::from_secs(5));
        // Later calls too. (This test owns the process's runtime: the
        // others in this module never call block_on.)
        let e = block_on(Duration::from_secs(1), async { Ok(()) }).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
    }

    #[test]
    fn deadline_covers_retries() {
        let c = Config::default();
        assert!(c.deadline() > c.timeout);
    }
}
