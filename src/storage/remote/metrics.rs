//! Counting remote requests, per source store, for `.slabfs/stats` and the
//! debug log.
//!
//! # Where requests are counted
//!
//! At the HTTP layer, below `object_store`: every store is built with a
//! [`Metered`] connector ([`connector`]), which wraps the reqwest client
//! (`object_store`'s own, with slabfs's redirect rule: [`super::client`])
//! and sees each HTTP attempt it sends,
//! retries included. So the counts are what went over the wire, not what
//! the layers above asked for, and no call site in the read path needs a
//! hook of its own.
//!
//! Each attempt is classified by what it is on the wire:
//!
//! | kind        | request                                                   |
//! |-------------|-----------------------------------------------------------|
//! | `HEAD`      | `HEAD` (an object's size and ETag)                        |
//! | `LIST`      | `GET` with `list-type=` (S3), `comp=list` (Azure), a GCS `…/o` listing; `PROPFIND` (WebDAV) |
//! | `ranged_GET`| `GET` with a `Range` header                               |
//! | `GET`       | any other `GET` (a whole value: Zarr metadata, a chunk)   |
//! | `other`     | anything else (credential requests: STS, IMDS tokens)     |
//!
//! and its answer:
//!
//! - `bytes`: the body lengths (`Content-Length`) of successful `GET`
//!   answers: what was fetched. A body cut short counts its announced
//!   length.
//! - `not_modified`: `304` answers to conditional requests.
//! - `errors`: attempts that failed: no answer (connection, timeout) or an
//!   error status other than the answers the layers above expect and
//!   handle (`404` not found, `412` precondition failed, `416`).
//! - `retries`: attempts that repeat one (same method, URL and range) whose
//!   previous attempt failed in a way `object_store` retries (connection
//!   errors, timeouts, `5xx`, `429`, `408`). `object_store` does not tell
//!   which attempt is a retry; this is how one is recognised from outside.
//!   A read issued again by the layers above after its retries ran out
//!   counts as a retry too.
//! - `stalls`: attempts abandoned because no byte came for
//!   `--stall-timeout` (waiting for the answer's head, or in the middle of
//!   its body; reqwest's read timeout ends them). A body cut that way (or
//!   by a reset) is resumed by `object_store` with a GET of the rest of
//!   its range, on a new connection (the cut one is dropped, never put
//!   back in the pool); that GET counts as a retry: the body of each
//!   answer is watched ([`Watched`]), and a body that fails leaves the
//!   rest of its range as the failed attempt the next one repeats.
//! - `throttles`: `503` and `429` answers (S3 SlowDown, Azure ServerBusy,
//!   GCS rate limits), each retried by `object_store` like any `5xx`.
//!   They are also what [`super::throttle`] hears: the first of an
//!   overload starts a backoff of the whole mount (the others of the
//!   same burst only count here), logged as one `WARN` line naming the
//!   store, the wait and the new limit of requests in flight.
//! - `resets`: attempts that failed for the connection (refused, reset or
//!   closed before the answer's head) and bodies cut short the same way:
//!   neither a timeout (a stall counts as a stall) nor a status. Each is
//!   retried like a stall (the body resumed from the bytes received).
//! - `latency_us`: time to the answer's headers (time to first byte), per
//!   attempt, in a log-scale [`Histogram`].
//!
//! # Throttling
//!
//! `Metered` is also where the [`Remote`](super::Remote)'s throttle sits on
//! the wire:
//! before each attempt is sent it waits at [`super::throttle`]'s gate
//! (an async sleep, nothing while no backoff is in progress), and each
//! answer's status is handed to it. See that module for the design.
//!
//! # Bounds and secrets
//!
//! One [`SourceMetrics`] per connected store (`s3://bucket`, an HTTP
//! host...), never per object: at most [`MAX_SOURCES`], the last one
//! shared by any beyond. The retry tracker holds at most
//! [`MAX_PENDING`] failed attempts. Names are store URLs without user info
//! or query string, and the debug log shows paths, never query strings
//! (a presigned URL's signature) or headers (credentials).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpResponseBody, HttpService,
};
use parking_lot::Mutex;

use super::State;
use crate::histogram::{Histogram, Summary};

/// Sources counted apart; a mount connects to a handful (the source's
/// store and `--allow-outside` ones).
pub const MAX_SOURCES: usize = 64;

/// Failed attempts remembered to recognise their retries: many more than
/// `--max-requests` (each in-flight request has at most one pending).
pub const MAX_PENDING: usize = 1024;

/// The kinds of request, in the order of [`SourceMetrics::requests`].
pub const KINDS: [&str; 5] = ["GET", "ranged_GET", "LIST", "HEAD", "other"];

/// The counters of one source store.
#[derive(Debug)]
pub struct SourceMetrics {
    name: String,
    requests: [AtomicU64; KINDS.len()],
    bytes: AtomicU64,
    errors: AtomicU64,
    retries: AtomicU64,
    not_modified: AtomicU64,
    stalls: AtomicU64,
    throttles: AtomicU64,
    resets: AtomicU64,
    latency: Histogram,
    /// (method, URL, range) of attempts that failed retryably.
    pending: Mutex<VecDeque<String>>,
}

/// A copy of one source's counters, for the stats document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The store's URL, without secrets.
    pub name: String,
    /// Per kind, in the order of [`KINDS`].
    pub requests: [u64; KINDS.len()],
    pub bytes: u64,
    pub errors: u64,
    pub retries: u64,
    pub not_modified: u64,
    pub stalls: u64,
    /// `503` and `429` answers.
    pub throttles: u64,
    /// Attempts and bodies that failed for the connection (reset, closed,
    /// refused), not a timeout.
    pub resets: u64,
    /// Nanoseconds.
    pub latency: Summary,
}

impl SourceMetrics {
    fn new(name: String) -> SourceMetrics {
        SourceMetrics {
            name,
            requests: Default::default(),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            not_modified: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            throttles: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            latency: Histogram::new(),
            pending: Mutex::new(VecDeque::new()),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            name: self.name.clone(),
            requests: std::array::from_fn(|i| load(&self.requests[i])),
            bytes: load(&self.bytes),
            errors: load(&self.errors),
            retries: load(&self.retries),
            not_modified: load(&self.not_modified),
            stalls: load(&self.stalls),
            throttles: load(&self.throttles),
            resets: load(&self.resets),
            latency: self.latency.summary(),
        }
    }

    /// An attempt `key` starts: a retry if it repeats a failed one.
    fn started(&self, key: &str) {
        let mut pending = self.pending.lock();
        if let Some(i) = pending.iter().position(|k| k == key) {
            pending.remove(i);
            self.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The attempt `key` failed in a way `object_store` retries.
    fn failed_retryably(&self, key: String) {
        let mut pending = self.pending.lock();
        if pending.len() >= MAX_PENDING {
            pending.pop_front();
        }
        pending.push_back(key);
    }
}

/// The counters of one [`Remote`](super::Remote)'s stores, one
/// [`SourceMetrics`] per store, in the order they were first connected.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    sources: Mutex<Vec<Arc<SourceMetrics>>>,
}

impl Registry {
    /// The counters of the store named `name` (created on first use).
    pub(crate) fn source(&self, name: &str) -> Arc<SourceMetrics> {
        let mut sources = self.sources.lock();
        if let Some(s) = sources.iter().find(|s| s.name == name) {
            return s.clone();
        }
        if sources.len() >= MAX_SOURCES {
            // Beyond the bound, the last source's counters take the rest:
            // the totals stay right, the split does not grow.
            let last = sources.last().expect("MAX_SOURCES > 0").clone();
            log::debug!("request counters of {name} are added to {}", last.name);
            return last;
        }
        let s = Arc::new(SourceMetrics::new(name.to_string()));
        sources.push(s.clone());
        s
    }

    /// Every source's counters, in the order they were first connected.
    pub(crate) fn snapshot(&self) -> Vec<Snapshot> {
        self.sources.lock().iter().map(|s| s.snapshot()).collect()
    }

    /// Every source, in the order they were first connected.
    fn sources(&self) -> Vec<Arc<SourceMetrics>> {
        self.sources.lock().clone()
    }
}

/// The remote stores' series for the metrics endpoint: the counters
/// above (the `remote` and `remote_throttle` sections of `.slabfs/stats`),
/// read when scraped. The `store` label is the store's name as
/// `.slabfs/stats` shows it (`s3://bucket`, `https://host`: no key, no
/// query string, and whatever is a remembered secret redacted again);
/// `kind` is one of [`KINDS`]. Nothing when no store was connected.
impl crate::metrics::Collect for super::Remote {
    fn collect(&self, out: &mut crate::metrics::Out<'_>) -> std::fmt::Result {
        use crate::metrics::Kind;
        let state = self.state();
        let sources = state.metrics.sources();
        if sources.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = sources.iter().map(|s| super::redact(&s.name)).collect();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut f = out.family(
            "slabfs_remote_requests",
            "HTTP requests sent to each store, retries included, by kind (GET, ranged_GET, \
             LIST, HEAD, other).",
            Kind::Counter,
        )?;
        for (s, name) in sources.iter().zip(&names) {
            for (k, kind) in KINDS.iter().enumerate() {
                f.counter(&[("store", name), ("kind", kind)], load(&s.requests[k]))?;
            }
        }
        type Field = fn(&SourceMetrics) -> &AtomicU64;
        let counters: [(&str, &str, Field); 7] = [
            (
                "slabfs_remote_received_bytes",
                "Bytes of object data received (successful GET answers).",
                |s| &s.bytes,
            ),
            (
                "slabfs_remote_errors",
                "Request attempts that failed (no answer, or an error status the reader \
                 does not expect).",
                |s| &s.errors,
            ),
            (
                "slabfs_remote_retries",
                "Request attempts that repeat one that failed.",
                |s| &s.retries,
            ),
            (
                "slabfs_remote_throttled",
                "503 and 429 answers (the store asked to slow down).",
                |s| &s.throttles,
            ),
            (
                "slabfs_remote_stalls",
                "Attempts abandoned after --stall-timeout without a byte.",
                |s| &s.stalls,
            ),
            (
                "slabfs_remote_resets",
                "Attempts and bodies cut by the connection (reset, closed, refused).",
                |s| &s.resets,
            ),
            (
                "slabfs_remote_not_modified",
                "304 answers to conditional requests.",
                |s| &s.not_modified,
            ),
        ];
        for (name, help, field) in counters {
            let mut f = out.family(name, help, Kind::Counter)?;
            for (s, store) in sources.iter().zip(&names) {
                f.counter(&[("store", store)], load(field(s)))?;
            }
        }
        let mut f = out.family(
            "slabfs_remote_request_duration_seconds",
            "Time from sending a request attempt to its answer's headers (time to first \
             byte), by store.",
            Kind::Histogram,
        )?;
        for (s, store) in sources.iter().zip(&names) {
            f.histogram(&[("store", store)], &s.latency)?;
        }
        let t = self.throttle();
        out.gauge(
            "slabfs_remote_request_limit",
            "Remote requests allowed in flight now (lowered by throttling answers, up to \
             --max-requests).",
            t.request_limit as f64,
        )?;
        out.gauge(
            "slabfs_remote_in_flight",
            "Remote requests in flight now.",
            t.in_flight as f64,
        )?;
        out.counter(
            "slabfs_remote_backoffs",
            "Backoffs of every remote request after the stores answered throttling.",
            t.backoffs,
        )?;
        let (hedges, won) = self.hedges();
        out.counter(
            "slabfs_remote_hedges",
            "GETs sent a second time because the first made no progress.",
            hedges,
        )?;
        out.counter(
            "slabfs_remote_hedges_won",
            "Hedged GETs whose second attempt answered first.",
            won,
        )
    }
}

/// The connector a store is built with, counting into `metrics` and
/// throttled by `state`'s throttle.
pub(crate) fn connector(metrics: Arc<SourceMetrics>, state: Arc<State>) -> MeteredConnector {
    MeteredConnector { metrics, state }
}

/// An [`HttpConnector`] whose clients count every attempt.
#[derive(Debug)]
pub struct MeteredConnector {
    metrics: Arc<SourceMetrics>,
    state: Arc<State>,
}

impl HttpConnector for MeteredConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = HttpClient::new(super::client::reqwest_client(options)?);
        Ok(HttpClient::new(Metered {
            inner,
            metrics: self.metrics.clone(),
            state: self.state.clone(),
        }))
    }
}

/// The reqwest client, counting.
#[derive(Debug)]
struct Metered {
    inner: HttpClient,
    metrics: Arc<SourceMetrics>,
    /// The throttle it waits at and the configuration it reads.
    state: Arc<State>,
}

/// The kind (index into [`KINDS`]) of a request.
fn kind(method: &str, query: &str, path: &str, ranged: bool) -> usize {
    let listing = query.contains("list-type=")
        || query.contains("comp=list")
        || (path.starts_with("/storage/v1/b/") && path.ends_with("/o"));
    match method {
        "HEAD" => 3,
        "PROPFIND" => 2,
        "GET" if listing => 2,
        "GET" if ranged => 1,
        "GET" => 0,
        _ => 4,
    }
}

/// Whether `object_store` retries an attempt answered with `status`.
fn retried_status(status: u16) -> bool {
    status >= 500 || status == 429 || status == 408
}

/// Whether an attempt that failed with `kind` failed for its connection
/// (refused, reset, closed): not a timeout, not an answer.
fn is_reset(kind: HttpErrorKind) -> bool {
    matches!(
        kind,
        HttpErrorKind::Connect | HttpErrorKind::Request | HttpErrorKind::Interrupted
    )
}

/// Statuses the layers above expect as answers, not failures.
fn expected_status(status: u16) -> bool {
    status < 400 || matches!(status, 404 | 412 | 416)
}

#[async_trait::async_trait]
impl HttpService for Metered {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let m = &self.metrics;
        let method = req.method().as_str().to_string();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let range = req
            .headers()
            .get("range")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let k = kind(&method, &query, &path, range.is_some());
        // The backoff, if one is in progress: no attempt is sent before it
        // ends (and a cancelled call stops waiting at once).
        let throttle = &self.state.throttle;
        let sent = throttle.ready().await;
        m.requests[k].fetch_add(1, Ordering::Relaxed);
        // The URL with its query: two listings of different prefixes, or
        // pages, are different requests. Kept in memory only.
        let uri = req.uri().to_string();
        let key = format!("{method} {uri} {}", range.as_deref().unwrap_or(""));
        m.started(&key);
        let started = Instant::now();
        let answer = self.inner.execute(req).await;
        let took = started.elapsed();
        let stall_timeout = self.state.config().stall_timeout;
        m.latency.record(took);
        // What a debug log may show of a listing: its prefix, not the
        // rest of the query.
        let shown = match (k, query.split('&').find(|p| p.starts_with("prefix="))) {
            (2, Some(prefix)) => format!("{path}?{prefix}"),
            _ => path,
        };
        let range = range.map(|r| format!(" {r}")).unwrap_or_default();
        match &answer {
            Ok(r) => {
                let status = r.status().as_u16();
                if status == 304 {
                    m.not_modified.fetch_add(1, Ordering::Relaxed);
                }
                if k <= 1 && r.status().is_success() {
                    let len = r
                        .headers()
                        .get("content-length")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                    m.bytes.fetch_add(len, Ordering::Relaxed);
                }
                if !expected_status(status) {
                    m.errors.fetch_add(1, Ordering::Relaxed);
                }
                if retried_status(status) {
                    m.failed_retryably(key);
                }
                if super::throttle::is_throttle(status) {
                    m.throttles.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(b) = throttle.answered(status, r.headers(), sent) {
                    let asked = b
                        .asked
                        .map(|a| format!(", {} s asked by the server", a.as_secs()))
                        .unwrap_or_default();
                    log::warn!(
                        "{}: throttled ({status}); every remote request of the process \
                         waits {:.2} s (backoff up to {:.1} s{asked}), then at most {} \
                         run at once (was {}; grows back as answers come, up to \
                         --max-requests {})",
                        m.name,
                        b.wait.as_secs_f64(),
                        b.bound.as_secs_f64(),
                        b.limit,
                        b.was,
                        b.max
                    );
                }
                log::debug!(
                    "{} {} {shown}{range}: {status} in {:.1} ms",
                    KINDS[k],
                    m.name,
                    took.as_secs_f64() * 1e3
                );
            }
            Err(e) => {
                m.errors.fetch_add(1, Ordering::Relaxed);
                if is_reset(e.kind()) {
                    m.resets.fetch_add(1, Ordering::Relaxed);
                }
                if e.kind() == HttpErrorKind::Timeout && took >= stall_timeout {
                    m.stalls.fetch_add(1, Ordering::Relaxed);
                    log::warn!(
                        "{} {} {shown}{range}: no answer for {:.1} s (--stall-timeout); \
                         the attempt is abandoned and retried within --request-timeout",
                        KINDS[k],
                        m.name,
                        took.as_secs_f64()
                    );
                }
                if matches!(
                    e.kind(),
                    HttpErrorKind::Connect
                        | HttpErrorKind::Request
                        | HttpErrorKind::Timeout
                        | HttpErrorKind::Interrupted
                ) {
                    m.failed_retryably(key);
                }
                log::debug!(
                    "{} {} {shown}{range}: failed after {:.1} ms ({:?})",
                    KINDS[k],
                    m.name,
                    took.as_secs_f64() * 1e3,
                    e.kind()
                );
            }
        }
        let response = answer?;
        // The rest of the answer's range, as the GET that resumes it
        // would send it: `bytes=S-E` (S counted from what arrives).
        // Only GETs of objects are resumed; a listing is asked again whole.
        let span = content_range(&response)
            .filter(|_| k <= 1)
            .map(|(start, end)| Resume {
                key: format!("{method} {uri} "),
                start,
                end,
            });
        let (parts, body) = response.into_parts();
        let body = Watched {
            inner: body,
            metrics: self.metrics.clone(),
            what: format!("{} {} {shown}{range}", KINDS[k], m.name),
            resume: span,
            received: 0,
            last: Instant::now(),
            stall_timeout,
        };
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
    }
}

/// The bytes `start..=end` of the object an answer carries: its
/// `Content-Range`, else `0..=Content-Length-1` of a whole `200` answer.
fn content_range(r: &HttpResponse) -> Option<(u64, u64)> {
    let header = |name: &str| r.headers().get(name).and_then(|v| v.to_str().ok());
    if let Some(cr) = header("content-range") {
        let (range, _) = cr.trim().strip_prefix("bytes ")?.split_once('/')?;
        let (a, b) = range.split_once('-')?;
        return Some((a.parse().ok()?, b.parse().ok()?));
    }
    let len: u64 = header("content-length")?.parse().ok()?;
    (r.status().as_u16() == 200 && len > 0).then(|| (0, len - 1))
}

/// Where a cut body would resume: the attempt's `METHOD URI ` and the
/// bytes of the object its body carries.
struct Resume {
    key: String,
    start: u64,
    end: u64,
}

/// An answer's body, watched for how it ends: a body that fails (a stall
/// ended by `--stall-timeout`, a reset) is counted and logged, and the
/// GET of the rest of its range that `object_store` sends next is
/// recognised as a retry.
struct Watched {
    inner: HttpResponseBody,
    metrics: Arc<SourceMetrics>,
    /// The attempt, as the debug log names it (no query, no headers).
    what: String,
    resume: Option<Resume>,
    received: u64,
    /// When the last bytes arrived.
    last: Instant,
    stall_timeout: std::time::Duration,
}

impl http_body::Body for Watched {
    type Data = bytes::Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    self.received += d.len() as u64;
                    self.last = Instant::now();
                }
            }
            std::task::Poll::Ready(Some(Err(e))) => self.failed(e),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Watched {
    /// The body failed with `e` after `received` bytes.
    fn failed(&self, e: &HttpError) {
        let m = &self.metrics;
        m.errors.fetch_add(1, Ordering::Relaxed);
        let idle = self.last.elapsed();
        let stalled = e.kind() == HttpErrorKind::Timeout && idle >= self.stall_timeout;
        if stalled {
            m.stalls.fetch_add(1, Ordering::Relaxed);
        } else if e.kind() != HttpErrorKind::Timeout {
            // A body can only fail for its connection (nothing decodes
            // it here): reset, closed, cut short.
            m.resets.fetch_add(1, Ordering::Relaxed);
        }
        let why = if stalled {
            format!("no byte for {:.1} s (--stall-timeout)", idle.as_secs_f64())
        } else {
            format!("{:?}: {e}", e.kind())
        };
        let rest = match &self.resume {
            Some(r) if r.start + self.received <= r.end => {
                let from = r.start + self.received;
                m.failed_retryably(format!("{}bytes={from}-{}", r.key, r.end));
                format!(
                    "; the rest (bytes {from}-{}) is asked for on a new connection \
                     within --request-timeout",
                    r.end
                )
            }
            _ if self.what.starts_with("LIST") => {
                "; the listing is asked for again within --request-timeout".to_string()
            }
            _ => String::new(),
        };
        log::warn!(
            "{}: body cut after {} bytes, {}{}",
            self.what,
            self.received,
            super::redact(&why),
            rest
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_requests() {
        assert_eq!(KINDS[kind("HEAD", "", "/b/k", false)], "HEAD");
        assert_eq!(KINDS[kind("GET", "", "/b/k", false)], "GET");
        assert_eq!(KINDS[kind("GET", "", "/b/k", true)], "ranged_GET");
        assert_eq!(
            KINDS[kind("GET", "list-type=2&prefix=a%2F&delimiter=%2F", "/b", false)],
            "LIST"
        );
        assert_eq!(
            KINDS[kind("GET", "restype=container&comp=list", "/c", false)],
            "LIST"
        );
        assert_eq!(
            KINDS[kind("GET", "prefix=a", "/storage/v1/b/x/o", false)],
            "LIST"
        );
        assert_eq!(KINDS[kind("PROPFIND", "", "/d/", false)], "LIST");
        assert_eq!(KINDS[kind("POST", "", "/", false)], "other");
    }

    #[test]
    fn resets_are_connection_failures_not_timeouts() {
        assert!(is_reset(HttpErrorKind::Connect));
        assert!(is_reset(HttpErrorKind::Request));
        assert!(is_reset(HttpErrorKind::Interrupted));
        assert!(!is_reset(HttpErrorKind::Timeout));
        assert!(!is_reset(HttpErrorKind::Decode));
        assert!(!is_reset(HttpErrorKind::Unknown));
    }

    #[test]
    fn a_retry_is_an_attempt_that_repeats_a_failed_one() {
        let m = SourceMetrics::new("s3://t".into());
        m.started("GET u bytes=0-9");
        m.failed_retryably("GET u bytes=0-9".into());
        m.started("GET u bytes=10-19");
        m.started("GET u bytes=0-9");
        m.started("GET u bytes=0-9");
        assert_eq!(m.snapshot().retries, 1);
        for i in 0..MAX_PENDING + 10 {
            m.failed_retryably(format!("k{i}"));
        }
        assert_eq!(m.pending.lock().len(), MAX_PENDING);
    }

    #[test]
    fn a_cut_body_resumes_from_its_content_range() {
        let answer = |status: u16, headers: &[(&str, &str)]| {
            let mut b = http::Response::builder().status(status);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(HttpResponseBody::from(Vec::new())).unwrap()
        };
        let ranged = answer(206, &[("content-range", "bytes 100-199/1000")]);
        assert_eq!(content_range(&ranged), Some((100, 199)));
        let whole = answer(200, &[("content-length", "1000")]);
        assert_eq!(content_range(&whole), Some((0, 999)));
        assert_eq!(
            content_range(&answer(200, &[("content-length", "0")])),
            None
        );
        assert_eq!(
            content_range(&answer(404, &[("content-length", "9")])),
            None
        );
        assert_eq!(
            content_range(&answer(206, &[("content-range", "bytes */1000")])),
            None
        );
        // The resuming GET's key is the one `started` will see.
        let m = SourceMetrics::new("s3://t".into());
        m.failed_retryably(format!("GET u bytes={}-{}", 100 + 30, 199));
        m.started("GET u bytes=130-199");
        assert_eq!(m.snapshot().retries, 1);
    }

    #[test]
    fn sources_are_bounded() {
        let r = Registry::default();
        for i in 0..MAX_SOURCES + 5 {
            r.source(&format!("s3://bound-test-{i}"));
        }
        assert!(r.snapshot().len() <= MAX_SOURCES);
        assert!(Arc::ptr_eq(
            &r.source("s3://bound-test-x"),
            &r.source("s3://bound-test-y")
        ));
    }
}
