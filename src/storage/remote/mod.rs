//! Remote sources: object stores (S3, GCS, Azure) and plain HTTP(S), behind
//! the same two seams as the file system ([`Store`](super::Store) and
//! [`ReadAt`](super::ReadAt)).
//!
//! # How a URL becomes bytes
//!
//! ```text
//! "s3://bucket/runs/"  ─ Location::parse ─▶ scheme, bucket/host, prefix
//!        │                                  (credentials and query strings
//!        │                                   never kept for messages)
//!        ▼
//! Remote::connect ──── object_store builder (from_env + Config) ──▶ Connection
//!        │                 retries with backoff and jitter, timeouts,
//!        │                 allow_http for an http:// endpoint; S3
//!        │                 credentials of an AWS profile (`profile`:
//!        │                 keys, credential_process; `role`: STS AssumeRole)
//!        ▼
//! RemoteStore (keys under the prefix)      RemoteFile (one object)
//!   Store::get / get_range / list_dir        ReadAt::read_exact_at
//!        └──────── Remote::block_on(runtime) + semaphore ────────┘
//! ```
//!
//! The crate of choice is Apache Arrow's `object_store` (one `ObjectStore`
//! trait over S3, GCS, Azure and HTTP, with signing, credential discovery
//! and retries). Its types stay inside this module: the layers above see
//! only [`Store`](super::Store), [`ReadAt`](super::ReadAt) and
//! [`Files`](super::Files).
//!
//! # One value, not statics
//!
//! Everything remote reading keeps is one value, [`Remote`]: its
//! [`Config`], its runtime, the stores it connected, its [`throttle`],
//! its [`hedge`] counts, its request counters ([`metrics`]), the measured
//! latency of its links and its stop flag. The CLI creates one from its
//! options for a mount (or one `ls`/`cat`) and hands it down: to the
//! formats as a [`Network`](crate::storage::Network) (they never
//! name this module: `tests/it/layers.rs`), to the file system for
//! `.slabfs/stats`, the refresh and the unmount. Two values share
//! nothing, so two mounts in one process, or the tests of one binary
//! running side by side, have their own limits and counts. What stays
//! process-wide is what is about the process, not about a mount: the
//! redaction of secrets ([`redact`], in [`crate::storage::location`]: the
//! log is the process's) and the monotonic origin of [`hedge`]'s clock.
//!
//! The runtime is out of the requests' reach: they and the HTTP
//! connector hold the shared state without it, so no task of the runtime
//! ever owns (and drops) the runtime it runs on. It starts with the first
//! request and is shut down, without waiting, when the last clone of the
//! `Remote` goes.
//!
//! # Threads and bounds
//!
//! `object_store` is async. The read path is not: FUSE threads and the
//! rayon decode pool call [`Store::get`](super::Store::get) and
//! [`ReadAt::read_exact_at`](super::ReadAt::read_exact_at) and
//! wait. So a [`Remote`] owns one small tokio runtime
//! ([`Remote::runtime`], [`Config::threads`] workers, 2 by default): a
//! blocking call hands its request to it and waits for the answer. A
//! semaphore bounds the requests in flight of the `Remote`
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
//! all to the runtime at once ([`Remote::block_on_all`]), each holding its own
//! permit, and return when the last has answered. The Zarr read path asks
//! for every chunk of a read in one such call, then decodes on rayon;
//! readahead asks for every chunk of its window with
//! [`Store::get_each`], which hands each value on as it arrives
//! ([`Remote::each_on_runtime`]: the requests are tasks of the runtime), so the
//! first chunks decode while the last are still on their way. The
//! requests in flight are bounded by `--max-requests`, not by the decode
//! threads.
//! Ranges of one object within [`store::COALESCE_GAP`] (1 MiB) of each
//! other are merged into one ranged GET (the inner chunks of a shard).
//! [`Remote::latency`] is a moving average of the time to first byte, which
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
//! answer (`503`, `429`) also slows the whole mount ([`throttle`]):
//! every attempt waits out a shared backoff, and fewer requests are in
//! flight until answers come back normally (for every store of the same
//! [`Remote`]). A request that
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
//! never answers cannot hang a reader, and [`Remote::cancel_all`] (called on
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
mod config;
pub mod hedge;
mod listings;
pub mod metrics;
mod profile;
mod role;
mod store;
pub mod throttle;
pub mod tls;

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::ObjectStore;

use crate::error::{Error, Result};

pub use crate::storage::location::{
    Location, Scheme, is_url, redact, remember_secrets, strip_secrets, url_of,
};
pub use config::Config;
pub use store::{COALESCE_GAP, RemoteFile, RemoteFiles, RemoteStore, STAMP_REUSE};

/// The remote state of one mount (or one `ls`/`cat`): its [`Config`],
/// the runtime its requests run on, the stores it connected, its
/// [`throttle`] (the request limit), its [`hedge`] counts, its request
/// counters ([`metrics`]), the measured latency of its links and its
/// stop flag ([`Remote::cancel_all`]).
///
/// Created by the CLI from its options and handed down: to the formats
/// (as the [`Network`](super::Network) of [`crate::formats::Options`]) and to the file
/// system (`.slabfs/stats`, the refresh, the unmount). Cheap to clone
/// (one `Arc`). Two values share nothing: two mounts in one process, or
/// two tests of one binary, have their own limits, counts and runtime.
/// The runtime starts with the first request and stops when the last
/// clone goes.
#[derive(Clone)]
pub struct Remote {
    inner: Arc<Inner>,
}

struct Inner {
    state: Arc<State>,
    /// Started on first use (a mount that never reads remotely has none).
    rt: OnceLock<tokio::runtime::Runtime>,
    /// One client per store for the value's life: a refresh reopening the
    /// source every few seconds reuses its connections.
    connected: parking_lot::Mutex<Vec<(String, Arc<dyn ObjectStore>)>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Without waiting for its tasks (they end with their requests):
        // the last clone may go on any thread, even one of a runtime.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// What the requests in flight share: everything of a [`Remote`] but the
/// runtime they run on (so that no task of the runtime owns it) and the
/// connections.
pub(crate) struct State {
    config: Config,
    pub(crate) throttle: throttle::Throttle,
    pub(crate) hedges: hedge::Hedges,
    pub(crate) metrics: metrics::Registry,
    /// Time to first byte of recent requests, in microseconds (a moving
    /// average; 0 before the first).
    latency_us: std::sync::atomic::AtomicU64,
    /// Set by [`Remote::cancel_all`]: every call waiting or in flight
    /// ends, and every later one.
    stopping: tokio::sync::watch::Sender<bool>,
    /// `--disk-cache`, when it opened.
    pub(crate) disk_cache: Option<Arc<crate::storage::disk_cache::DiskCache>>,
    /// With the disk cache: the versions its stores know
    /// ([`listings`]).
    pub(crate) listings: Option<Arc<listings::Listings>>,
}

impl State {
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Note the time a request took to its response's headers.
    pub(crate) fn note_latency(&self, took: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = took.as_micros().min(u64::MAX as u128) as u64;
        // An exponential moving average over about the last 8 requests: a
        // slow outlier moves it a little, a changed link within a few
        // reads. (A lost update between two threads only drops one
        // sample.)
        let old = self.latency_us.load(Relaxed);
        let new = if old == 0 { now } else { (old * 7 + now) / 8 };
        self.latency_us.store(new.max(1), Relaxed);
    }

    /// The measured time to first byte of remote requests (zero before
    /// any).
    pub(crate) fn latency(&self) -> Duration {
        Duration::from_micros(self.latency_us.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn stopped(&self) -> bool {
        *self.stopping.borrow()
    }
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("config", &self.inner.state.config)
            .finish_non_exhaustive()
    }
}

impl Default for Remote {
    fn default() -> Remote {
        Remote::new(Config::default())
    }
}

impl Remote {
    /// Remote sources reached with `config`; nothing starts or connects
    /// until asked.
    pub fn new(config: Config) -> Remote {
        let max = config.max_requests;
        // A cache directory that cannot be used is no reason not to read.
        let disk_cache = config.disk_cache.as_ref().and_then(|c| {
            crate::storage::disk_cache::DiskCache::open(c)
                .inspect_err(|e| {
                    log::warn!(
                        "--disk-cache {}: {e}; reading without a disk cache",
                        c.dir.display()
                    )
                })
                .ok()
        });
        Remote {
            inner: Arc::new(Inner {
                state: Arc::new(State {
                    config,
                    throttle: throttle::Throttle::new(max),
                    hedges: hedge::Hedges::default(),
                    metrics: metrics::Registry::default(),
                    latency_us: std::sync::atomic::AtomicU64::new(0),
                    stopping: tokio::sync::watch::Sender::new(false),
                    listings: disk_cache
                        .as_ref()
                        .map(|_| Arc::new(listings::Listings::new(listings::LISTED_NAMES))),
                    disk_cache,
                }),
                rt: OnceLock::new(),
                connected: parking_lot::Mutex::new(Vec::new()),
            }),
        }
    }

    /// The disk cache's counters (`--disk-cache`), if it has one.
    pub fn disk_cache(&self) -> Option<crate::storage::disk_cache::Snapshot> {
        self.inner.state.disk_cache.as_ref().map(|c| c.snapshot())
    }

    /// Wait (at most `timeout`) until the disk cache has written every
    /// block handed to it: `None` without a disk cache, else whether it
    /// has.
    pub fn flush_disk_cache(&self, timeout: std::time::Duration) -> Option<bool> {
        let cache = self.inner.state.disk_cache.as_ref()?;
        Some(cache.flush_for(timeout))
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.state.config
    }

    pub(crate) fn state(&self) -> &Arc<State> {
        &self.inner.state
    }

    /// The runtime remote requests run on (started on first use).
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        self.inner.rt.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(self.config().threads.max(1))
                .thread_name("slabfs-remote")
                .enable_all()
                .build()
                .expect("the remote I/O runtime starts")
        })
    }

    /// The measured time to first byte of remote requests (zero before any).
    pub fn latency(&self) -> Duration {
        self.inner.state.latency()
    }

    /// The request counters of every store connected, in the order they
    /// were first connected (`.slabfs/stats`).
    pub fn metrics(&self) -> Vec<metrics::Snapshot> {
        self.inner.state.metrics.snapshot()
    }

    /// The throttle's state (`.slabfs/stats`).
    pub fn throttle(&self) -> throttle::Snapshot {
        self.inner.state.throttle.snapshot()
    }

    /// Hedges sent, and those that answered first.
    pub fn hedges(&self) -> (u64, u64) {
        self.inner.state.hedges.counts()
    }

    /// End every remote call waiting or in flight, and every later one,
    /// with an error: the daemon is stopping (SIGTERM), and a reader must
    /// not hold the unmount for as long as a dead server takes to time
    /// out.
    pub fn cancel_all(&self) {
        self.inner.state.stopping.send_replace(true);
    }

    /// Run `fut` on the runtime and wait for it, holding one of the
    /// [`Config::max_requests`] permits, within `deadline`. Called from
    /// FUSE and rayon threads, never from the runtime's own.
    pub(crate) fn block_on<T: Send>(
        &self,
        deadline: Duration,
        fut: impl std::future::Future<Output = std::io::Result<T>> + Send,
    ) -> std::io::Result<T> {
        self.block_on_all(deadline, vec![fut])
            .pop()
            .expect("one future, one answer")
    }

    /// Run all of `futs` on the runtime at once and wait for every
    /// answer, in order: each request holds a permit of its own while it
    /// runs (so at most [`Config::max_requests`] are in flight, the rest
    /// wait their turn) and has `deadline` from when it starts. This is
    /// how one read asks for all its chunks in one round trip instead of
    /// one after another.
    pub(crate) fn block_on_all<T: Send, F>(
        &self,
        deadline: Duration,
        futs: Vec<F>,
    ) -> Vec<std::io::Result<T>>
    where
        F: std::future::Future<Output = std::io::Result<T>> + Send,
    {
        let state = self.state();
        if state.stopped() {
            return futs.iter().map(|_| Err(stopped())).collect();
        }
        let n = futs.len();
        let mut stopping = state.stopping.subscribe();
        self.runtime().block_on(async move {
            let work = futures::future::join_all(
                futs.into_iter().map(|fut| bounded(state, deadline, fut)),
            );
            let cancelled = async move {
                let _ = stopping.wait_for(|s| *s).await;
            };
            match futures::future::select(Box::pin(work), Box::pin(cancelled)).await {
                futures::future::Either::Left((r, _)) => r,
                futures::future::Either::Right(_) => (0..n).map(|_| Err(stopped())).collect(),
            }
        })
    }

    /// Run all of `futs` on the runtime at once, as
    /// [`Remote::block_on_all`] does, but hand each answer to `each` (with
    /// its index in `futs`) on the calling thread as soon as it arrives,
    /// while the others are still on their way: a prefetch decodes its
    /// first chunks while the last ones are in flight instead of after
    /// them. The requests run as tasks of the runtime (its workers receive
    /// the bodies meanwhile); if the caller unwinds, the tasks still
    /// running are cancelled.
    pub(crate) fn each_on_runtime<T, F>(
        &self,
        deadline: Duration,
        futs: Vec<F>,
        mut each: impl FnMut(usize, std::io::Result<T>),
    ) where
        T: Send + 'static,
        F: std::future::Future<Output = std::io::Result<T>> + Send + 'static,
    {
        if self.state().stopped() {
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
        let rt = self.runtime();
        let (tx, rx) = std::sync::mpsc::channel();
        let tasks = Tasks(
            futs.into_iter()
                .enumerate()
                .map(|(i, fut)| {
                    let tx = tx.clone();
                    // The state, not the Remote: no task owns the runtime.
                    let state = self.state().clone();
                    let mut stopping = state.stopping.subscribe();
                    rt.spawn(async move {
                        let work = bounded(&state, deadline, fut);
                        let cancelled = async move {
                            let _ = stopping.wait_for(|s| *s).await;
                        };
                        let r = match futures::future::select(Box::pin(work), Box::pin(cancelled))
                            .await
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
}

fn stopped() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Interrupted, "slabfs is stopping")
}

/// `fut` holding one of the permits of the requests in flight (waiting
/// for one first: at most [`Config::max_requests`], fewer while the
/// servers throttle, see [`throttle`]), an error if it takes longer than
/// `deadline`.
async fn bounded<T>(
    state: &State,
    deadline: Duration,
    fut: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    let _permit = state
        .throttle
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

/// A connected object store and the location it was connected for.
#[derive(Debug, Clone)]
pub struct Connection {
    store: Arc<dyn ObjectStore>,
    location: Location,
    deadline: Duration,
    remote: Remote,
}

impl Connection {
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The [`Remote`] it was connected through.
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    pub(crate) fn state(&self) -> Arc<State> {
        self.remote.state().clone()
    }

    pub(crate) fn config(&self) -> &Config {
        self.remote.config()
    }

    /// The measured time to first byte of its [`Remote`]'s requests.
    pub(crate) fn latency(&self) -> Duration {
        self.remote.latency()
    }

    /// [`Remote::block_on`] within this connection's deadline.
    pub(crate) fn block_on<T: Send>(
        &self,
        fut: impl std::future::Future<Output = std::io::Result<T>> + Send,
    ) -> std::io::Result<T> {
        self.remote.block_on(self.deadline, fut)
    }

    /// [`Remote::block_on_all`] within this connection's deadline.
    pub(crate) fn block_on_all<T: Send, F>(&self, futs: Vec<F>) -> Vec<std::io::Result<T>>
    where
        F: std::future::Future<Output = std::io::Result<T>> + Send,
    {
        self.remote.block_on_all(self.deadline, futs)
    }

    /// [`Remote::each_on_runtime`] within this connection's deadline.
    pub(crate) fn each_on_runtime<T, F>(
        &self,
        futs: Vec<F>,
        each: impl FnMut(usize, std::io::Result<T>),
    ) where
        T: Send + 'static,
        F: std::future::Future<Output = std::io::Result<T>> + Send + 'static,
    {
        self.remote.each_on_runtime(self.deadline, futs, each)
    }
}

impl crate::storage::Network for Remote {
    fn files(&self, roots: Vec<Location>) -> Result<Arc<dyn crate::storage::UrlFiles>> {
        Ok(Arc::new(RemoteFiles::new(self, roots)?))
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// Connect to the store that holds `location`: credentials and
    /// settings from the environment, as each cloud's own tools find
    /// them, then this value's [`Config`].
    pub fn connect(&self, location: &Location) -> Result<Connection> {
        let cfg = self.config();
        let url = location.store_url();
        let connection = |store| Connection {
            store,
            location: location.clone(),
            deadline: cfg.deadline(),
            remote: self.clone(),
        };
        if let Some((_, store)) = self.inner.connected.lock().iter().find(|(k, _)| *k == url) {
            return Ok(connection(store.clone()));
        }
        let store = self.build(location, &url)?;
        let mut connected = self.inner.connected.lock();
        // Few stores per value (the source's and --allow-outside's); the
        // bound only guards against a source naming stores in a loop.
        if connected.len() >= 64 {
            connected.remove(0);
        }
        connected.push((url, store.clone()));
        Ok(connection(store))
    }

    /// A new client of the store at `url` (`location`'s).
    fn build(&self, location: &Location, url: &str) -> Result<Arc<dyn ObjectStore>> {
        let cfg = self.config();
        let err = |e: object_store::Error| Error::Io {
            path: location.display(),
            source: std::io::Error::other(redact(&e.to_string())),
        };
        // Every request of this store is counted (metrics: .slabfs/stats).
        let counted = self
            .state()
            .metrics
            .source(strip_secrets(url).trim_end_matches('/'));
        let connector = || metrics::connector(counted.clone(), self.state().clone());
        let store: Arc<dyn ObjectStore> =
            match location.scheme() {
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
                        match role::provider(&profile, &region, &sts, cfg) {
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
                            .with_http_connector(connector())
                            .build()
                            .map_err(err)?,
                    )
                }
                Scheme::Gcs => Arc::new(
                    object_store::gcp::GoogleCloudStorageBuilder::from_env()
                        .with_url(url)
                        .with_http_connector(connector())
                        .with_retry(cfg.retry())
                        .with_skip_signature(cfg.no_sign_request)
                        .with_client_options(cfg.client(
                            profile::gcs_endpoint().is_some_and(|e| e.starts_with("http://")),
                        ))
                        .build()
                        .map_err(err)?,
                ),
                Scheme::Azure => Arc::new(
                    object_store::azure::MicrosoftAzureBuilder::from_env()
                        .with_url(url)
                        .with_http_connector(connector())
                        .with_retry(cfg.retry())
                        .with_skip_signature(cfg.no_sign_request)
                        .with_client_options(cfg.client(false))
                        .build()
                        .map_err(err)?,
                ),
                Scheme::Http | Scheme::Https => Arc::new(
                    object_store::http::HttpBuilder::new()
                        .with_url(url)
                        .with_http_connector(connector())
                        .with_retry(cfg.retry())
                        .with_client_options(cfg.client(location.scheme() == Scheme::Http))
                        .build()
                        .map_err(err)?,
                ),
            };
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_all_ends_calls_in_flight() {
        let remote = Remote::default();
        let r = remote.clone();
        let t = std::thread::spawn(move || {
            r.block_on(Duration::from_secs(600), async {
                tokio::time::sleep(Duration::from_secs(600)).await;
                Ok(())
            })
        });
        std::thread::sleep(Duration::from_millis(200));
        let started = std::time::Instant::now();
        remote.cancel_all();
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        assert!(started.elapsed() < Duration::from_secs(5));
        // Later calls too.
        let e = remote
            .block_on(Duration::from_secs(1), async { Ok(()) })
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        // Another value is not stopped: the flag is the value's own.
        assert!(
            Remote::default()
                .block_on(Duration::from_secs(1), async { Ok(()) })
                .is_ok()
        );
    }

    #[test]
    fn two_values_share_no_limits() {
        let a = Remote::new(Config {
            max_requests: 3,
            ..Config::default()
        });
        let b = Remote::new(Config::default());
        assert_eq!(a.throttle().max_requests, 3);
        assert_eq!(b.throttle().max_requests, 64);
        a.state().note_latency(Duration::from_millis(40));
        assert_eq!(a.latency(), Duration::from_millis(40));
        assert_eq!(b.latency(), Duration::ZERO);
        a.state().metrics.source("s3://only-a");
        assert_eq!(a.metrics().len(), 1);
        assert!(b.metrics().is_empty());
    }

    #[test]
    fn deadline_covers_retries() {
        let c = Config::default();
        assert!(c.deadline() > c.timeout);
    }
}
