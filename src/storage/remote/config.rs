//! How remote sources are reached: the settings of one
//! [`Remote`](super::Remote), fixed when it is created. A leaf of
//! `storage::remote` (its siblings read it; it reads none of them), so
//! credentials (`role`, `profile`) and the connections (`mod.rs`) depend on
//! it without a circle.

use std::time::Duration;

use object_store::{BackoffConfig, ClientOptions, RetryConfig};

/// How remote sources are reached: one set per [`Remote`](super::Remote) (a mount, or
/// one `ls`/`cat`), fixed when it is created.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// S3 endpoint (an S3-compatible server: MinIO, Ceph, moto...); else
    /// `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` from the environment,
    /// else AWS. An `http://` endpoint is allowed without TLS.
    pub endpoint_url: Option<String>,
    /// Send no credentials and no signature (public buckets).
    pub no_sign_request: bool,
    /// Requests in flight at once, across the `Remote`: the ceiling; while
    /// the servers throttle, the limit is lower ([`super::throttle`]).
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
    /// Send a GET that makes no progress for a while a second time, the
    /// first answer winning ([`super::hedge`]); off, a stalled attempt
    /// waits for `stall_timeout` (for servers billed per request, and the
    /// tests of stalls).
    pub hedge: bool,
    /// Remote bytes kept on local disk across restarts (`--disk-cache`).
    pub disk_cache: Option<crate::storage::disk_cache::DiskCacheConfig>,
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
            hedge: true,
            disk_cache: None,
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

    pub(super) fn endpoint(&self) -> Option<String> {
        self.endpoint_url.clone().or_else(|| {
            ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        })
    }

    pub(super) fn retry(&self) -> RetryConfig {
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
