//! `--metrics-otlp URL`: the mount's series pushed to an OpenTelemetry
//! collector every `--metrics-otlp-interval` (OTLP/HTTP, binary protobuf).
//!
//! [`start`] runs the pushes on a thread of its own, `slabfs-otlp`. Each
//! push collects the same [`Registry`] the Prometheus endpoint renders
//! (one source of truth: [`crate::metrics`]), encodes it as an OTLP export
//! request ([`crate::metrics::otlp`]) and POSTs it to the URL, within
//! [`TIMEOUT`] (or the interval, when shorter). Nothing on the read path
//! waits for it: a collector that is down, refuses or never answers costs
//! this thread its timeout and nothing else, and reads never touch it.
//!
//! A failed push is not retried: the next one, an interval later, carries
//! the cumulative counts anyway (no count is lost, only a point of the
//! series). Failures are logged as one `WARN` line when they start, then
//! at most once per [`LOG_EVERY`] while they last, and one `INFO` line when
//! pushes work again: a collector down for a day is 144 lines, not one
//! per push (1,440 at the default interval).
//!
//! The first push is one interval after the mount (as OpenTelemetry's
//! periodic readers do); when the mount ends, [`Pusher`]'s drop abandons
//! a push in flight and sends one last push of the final counts, waiting
//! at most [`LAST_TIMEOUT`] for it, so a collector that hangs delays the
//! daemon's exit by that at most.
//!
//! The request goes through reqwest (already the daemon's HTTP client for
//! remote stores, with its rustls): `http` and `https` URLs, no proxy
//! beyond what reqwest reads from the environment, no redirects (a
//! redirect is a failed push: the series go where the operator said, or
//! nowhere). The URL may hold no user, password or query string
//! ([`endpoint`]): it is logged, and slabfs sends no credentials.
//!
//! The resource says which mount pushed ([`resource`]): `service.name`
//! `slabfs`, its version, the host name, the mount point, and
//! `service.instance.id` = `HOST:MOUNTPOINT`, which a collector's
//! Prometheus exporter turns into the `instance` label, so the mounts of
//! a node do not overwrite each other's series.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use futures::future::{Either, select};
use prost::Message;
use tokio::sync::watch;
use url::Url;

use crate::metrics::{Registry, otlp};

/// `--metrics-otlp-interval`'s default: OpenTelemetry's own default
/// export interval (`OTEL_METRIC_EXPORT_INTERVAL`, 60 s).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// How long one push may take, connection included: OTLP exporters'
/// default (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s). A shorter interval
/// shortens it to the interval, so pushes never pile up.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How long the push at unmount may take: the daemon waits for it
/// before exiting.
pub const LAST_TIMEOUT: Duration = Duration::from_secs(2);

/// While pushes keep failing, one log line per this.
pub const LOG_EVERY: Duration = Duration::from_secs(600);

/// The path OTLP/HTTP collectors take metrics at, used when the URL
/// gives none (`http://collector:4318`).
pub const DEFAULT_PATH: &str = "/v1/metrics";

/// Most bytes of a collector's answer read (its error message, or a
/// partial success): what it says is short, and a hostile one cannot make
/// the thread read forever.
const MAX_ANSWER: usize = 64 << 10;

/// Where and how often to push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The collector's OTLP/HTTP metrics URL, checked by [`endpoint`].
    pub endpoint: Url,
    /// Time between pushes (at least a second).
    pub interval: Duration,
}

/// Parse `--metrics-otlp`'s URL: `http` or `https`, with a host; no user,
/// password, query or fragment (the URL is logged, and slabfs sends no
/// credentials); no path means [`DEFAULT_PATH`].
pub fn endpoint(s: &str) -> Result<Url, String> {
    let mut url = Url::parse(s.trim()).map_err(|e| {
        format!("{s:?}: {e} (give the collector's URL, such as http://127.0.0.1:4318/v1/metrics)")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{}: an OTLP/HTTP URL is http:// or https://",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{s:?}: no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "a URL with a user or password: slabfs sends no credentials to a collector \
             (put an agent on the node, or a proxy that adds them)"
                .into(),
        );
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(
            "a URL with a query string or fragment: the URL is logged, so it may hold no \
             token; give the collector's plain URL"
                .into(),
        );
    }
    if url.path() == "/" {
        url.set_path(DEFAULT_PATH);
    }
    Ok(url)
}

/// The resource a mount at `mountpoint` pushes as; see the module docs.
pub fn resource(mountpoint: &Path) -> Vec<(String, String)> {
    let mnt = mountpoint.display().to_string();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let mut r = vec![
        ("service.name".to_string(), "slabfs".to_string()),
        (
            "service.version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
    ];
    if host.is_empty() {
        r.push(("service.instance.id".into(), mnt.clone()));
    } else {
        r.push(("service.instance.id".into(), format!("{host}:{mnt}")));
        r.push(("host.name".into(), host));
    }
    r.push(("slabfs.mountpoint".into(), mnt));
    r
}

/// The pushing thread; dropping it stops the pushes after one last.
#[derive(Debug)]
pub struct Pusher {
    stop: Option<watch::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Pusher {
    fn drop(&mut self) {
        // The thread wakes at the sender's drop (abandoning a push in
        // flight), pushes once more (within LAST_TIMEOUT) and ends.
        drop(self.stop.take());
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            log::error!("the metrics push thread panicked");
        }
    }
}

/// Push `registry`'s series as `resource` to `cfg.endpoint` every
/// `cfg.interval`, from now until the [`Pusher`] is dropped; cumulative
/// series count from `start` (when the counters started).
pub fn start(
    cfg: &Config,
    registry: Arc<Registry>,
    resource: Vec<(String, String)>,
    start: SystemTime,
) -> io::Result<Pusher> {
    let timeout = TIMEOUT.min(cfg.interval);
    // reqwest has no TLS provider of its own (storage::remote::tls).
    crate::storage::remote::tls::install();
    let client = reqwest::Client::builder()
        .user_agent(concat!("slabfs/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        // A connection a minute: none is kept between pushes, so none
        // goes stale between them.
        .pool_max_idle_per_host(0)
        .build()
        .map_err(io::Error::other)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let (tx, rx) = watch::channel(());
    let push = Push {
        rt,
        client,
        url: cfg.endpoint.clone(),
        registry,
        resource,
        start,
    };
    let interval = cfg.interval;
    let thread = std::thread::Builder::new()
        .name("slabfs-otlp".into())
        .spawn(move || push.run(rx, interval, timeout))?;
    log::info!(
        "pushing metrics to {} every {} s (OTLP/HTTP)",
        cfg.endpoint,
        interval.as_secs()
    );
    Ok(Pusher {
        stop: Some(tx),
        thread: Some(thread),
    })
}

/// What the thread pushes, and with what.
struct Push {
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
    url: Url,
    registry: Arc<Registry>,
    resource: Vec<(String, String)>,
    start: SystemTime,
}

impl Push {
    /// Push every `interval` until `stop`'s sender is dropped, then once
    /// more.
    fn run(self, mut stop: watch::Receiver<()>, interval: Duration, timeout: Duration) {
        let mut health = Health::default();
        let mut next = Instant::now() + interval;
        loop {
            let wait = next.saturating_duration_since(Instant::now());
            // The sender is never used but dropped: `changed` ends then.
            let last = self
                .rt
                .block_on(async { tokio::time::timeout(wait, stop.changed()).await })
                .is_ok();
            let pushed = match last {
                true => self.once(LAST_TIMEOUT, None),
                false => self.once(timeout, Some(&mut stop)),
            };
            // None: abandoned for the last push, which says how it went.
            if let Some(pushed) = pushed
                && let Some((level, line)) = health.note(&self.url, pushed, Instant::now())
            {
                log::log!(level, "{line}");
            }
            if last {
                return;
            }
            // A push that took longer than the interval skips the pushes
            // it overlapped rather than sending them back to back.
            let now = Instant::now();
            next += interval;
            while next <= now {
                next += interval;
            }
        }
    }

    /// One push within `timeout`, abandoned if `stop` ends first (`None`);
    /// what went wrong, as a log line's end.
    fn once(
        &self,
        timeout: Duration,
        stop: Option<&mut watch::Receiver<()>>,
    ) -> Option<Result<(), String>> {
        let families = match self.registry.collect() {
            Ok(f) => f,
            Err(_) => return Some(Err("a collector failed; nothing sent".to_string())),
        };
        let body =
            otlp::request(&families, &self.resource, self.start, SystemTime::now()).encode_to_vec();
        let sent = async {
            let mut answer = self
                .client
                .post(self.url.clone())
                .header(reqwest::header::CONTENT_TYPE, otlp::CONTENT_TYPE)
                .body(body)
                .send()
                .await?;
            let status = answer.status();
            let protobuf = answer
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(otlp::CONTENT_TYPE.as_bytes()));
            let mut body = Vec::new();
            while body.len() < MAX_ANSWER
                && let Some(chunk) = answer.chunk().await?
            {
                body.extend_from_slice(&chunk);
            }
            Ok::<Answered, reqwest::Error>((status, protobuf, body))
        };
        // (A timer is made inside the runtime.)
        let outcome = self.rt.block_on(async {
            let sent = tokio::time::timeout(timeout, sent);
            match stop {
                None => Some(sent.await),
                Some(stop) => {
                    match select(std::pin::pin!(sent), std::pin::pin!(stop.changed())).await {
                        Either::Left((outcome, _)) => Some(outcome),
                        Either::Right(_) => None,
                    }
                }
            }
        })?;
        Some(answer_of(outcome, timeout))
    }
}

/// A collector's answer: its status, whether its body is protobuf, and
/// the body's first [`MAX_ANSWER`] bytes.
type Answered = (reqwest::StatusCode, bool, Vec<u8>);

/// What became of a push: no answer in time, an error, or the
/// collector's [`answer`].
fn answer_of(
    outcome: Result<reqwest::Result<Answered>, tokio::time::error::Elapsed>,
    timeout: Duration,
) -> Result<(), String> {
    let (status, protobuf, body) = outcome
        .map_err(|_| format!("no answer within {} s", timeout.as_secs_f64()))?
        .map_err(|e| error_chain(&e.without_url()))?;
    answer(status, protobuf, &body)
}

/// What a collector's answer says: OTLP/HTTP answers `200` with an
/// `ExportMetricsServiceResponse` (whose partial success names points it
/// rejected), or an error status with a `google.rpc.Status` (protobuf) or
/// some text.
fn answer(status: reqwest::StatusCode, protobuf: bool, body: &[u8]) -> Result<(), String> {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
    if status.is_success() {
        let partial = protobuf
            .then(|| ExportMetricsServiceResponse::decode(body).ok())
            .flatten()
            .and_then(|r| r.partial_success)
            .filter(|p| p.rejected_data_points > 0);
        return match partial {
            None => Ok(()),
            Some(p) => Err(format!(
                "the collector rejected {} data points: {}",
                p.rejected_data_points,
                printable(p.error_message.as_bytes())
            )),
        };
    }
    let said = match protobuf.then(|| RpcStatus::decode(body).ok()).flatten() {
        Some(s) => s.message,
        None => printable(body),
    };
    Err(match said.is_empty() {
        true => format!("HTTP {status}"),
        false => format!("HTTP {status}: {said}"),
    })
}

/// `google.rpc.Status`, the body of an OTLP/HTTP error: only its message.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(string, tag = "2")]
    message: String,
}

/// The first line of `bytes` as text a log line can hold: at most 200
/// characters, control characters dropped.
fn printable(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// `e` and its sources, as one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}

/// Whether pushes work, for the log: see the module docs.
#[derive(Debug, Default)]
struct Health {
    /// Pushes failed in a row.
    failed: u64,
    /// When the first of them failed.
    since: Option<Instant>,
    /// When a failure was last logged.
    logged: Option<Instant>,
}

impl Health {
    /// Note a push's outcome at `now`; the line to log, if any.
    fn note(
        &mut self,
        url: &Url,
        pushed: Result<(), String>,
        now: Instant,
    ) -> Option<(log::Level, String)> {
        match pushed {
            Ok(()) if self.failed == 0 => None,
            Ok(()) => {
                let n = std::mem::take(&mut self.failed);
                *self = Health::default();
                Some((
                    log::Level::Info,
                    format!("metrics push to {url} works again, after {n} failed"),
                ))
            }
            Err(e) => {
                self.failed += 1;
                let since = *self.since.get_or_insert(now);
                if self
                    .logged
                    .is_some_and(|t| now.duration_since(t) < LOG_EVERY)
                {
                    return None;
                }
                self.logged = Some(now);
                Some((
                    log::Level::Warn,
                    match self.failed {
                        1 => format!(
                            "metrics push to {url} failed: {e} (reads are not affected; \
                             failures are logged every {} min while they last)",
                            LOG_EVERY.as_secs() / 60
                        ),
                        n => format!(
                            "metrics push to {url} failed: {e} ({n} pushes failed in {} s)",
                            now.duration_since(since).as_secs()
                        ),
                    },
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::mpsc;

    #[test]
    fn endpoints() {
        let ok = |s: &str| endpoint(s).map(|u| u.to_string());
        assert_eq!(
            ok("http://127.0.0.1:4318/v1/metrics").unwrap(),
            "http://127.0.0.1:4318/v1/metrics"
        );
        assert_eq!(
            ok("http://collector:4318").unwrap(),
            "http://collector:4318/v1/metrics"
        );
        assert_eq!(
            ok("https://otlp.example/otlp/v1/metrics").unwrap(),
            "https://otlp.example/otlp/v1/metrics"
        );
        for (bad, why) in [
            ("127.0.0.1:4318", "http"),
            ("grpc://c:4317", "http://"),
            ("http://user:secret@c:4318/v1/metrics", "credentials"),
            ("http://token@c:4318/v1/metrics", "credentials"),
            ("http://c:4318/v1/metrics?api-key=secret", "query"),
            ("http://c:4318/v1/metrics#x", "query"),
            ("", "URL"),
        ] {
            let e = endpoint(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("secret"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_resource_names_service_and_mount() {
        let r = resource(Path::new("/mnt/climate"));
        let get = |k: &str| r.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("service.name"), Some("slabfs"));
        assert_eq!(get("slabfs.mountpoint"), Some("/mnt/climate"));
        assert!(
            get("service.instance.id")
                .unwrap()
                .ends_with("/mnt/climate")
        );
    }

    #[test]
    fn answers() {
        use reqwest::StatusCode;
        assert_eq!(answer(StatusCode::OK, true, b""), Ok(()));
        assert_eq!(answer(StatusCode::OK, false, b"{}"), Ok(()));
        // A partial success that rejected points.
        use opentelemetry_proto::tonic::collector::metrics::v1::{
            ExportMetricsPartialSuccess, ExportMetricsServiceResponse,
        };
        let partial = ExportMetricsServiceResponse {
            partial_success: Some(ExportMetricsPartialSuccess {
                rejected_data_points: 3,
                error_message: "bad\nname".into(),
            }),
        }
        .encode_to_vec();
        assert_eq!(
            answer(StatusCode::OK, true, &partial).unwrap_err(),
            "the collector rejected 3 data points: bad"
        );
        let status = RpcStatus {
            message: "no such tenant".into(),
        }
        .encode_to_vec();
        assert_eq!(
            answer(StatusCode::BAD_REQUEST, true, &status).unwrap_err(),
            "HTTP 400 Bad Request: no such tenant"
        );
        assert_eq!(
            answer(StatusCode::NOT_FOUND, false, b"404 page not found\n").unwrap_err(),
            "HTTP 404 Not Found: 404 page not found"
        );
        assert_eq!(
            answer(StatusCode::BAD_GATEWAY, false, b"").unwrap_err(),
            "HTTP 502 Bad Gateway"
        );
    }

    #[test]
    fn failures_are_logged_when_they_start_then_rarely() {
        let url = endpoint("http://c:4318").unwrap();
        let mut h = Health::default();
        let t0 = Instant::now();
        assert_eq!(h.note(&url, Ok(()), t0), None);
        let (level, line) = h.note(&url, Err("refused".into()), t0).unwrap();
        assert_eq!(level, log::Level::Warn);
        assert!(
            line.starts_with("metrics push to http://c:4318/v1/metrics failed: refused"),
            "{line}"
        );
        for s in 1..10 {
            let t = t0 + Duration::from_secs(60 * s);
            assert_eq!(h.note(&url, Err("refused".into()), t), None);
        }
        let t = t0 + LOG_EVERY;
        let (_, line) = h.note(&url, Err("refused".into()), t).unwrap();
        assert!(line.ends_with("(11 pushes failed in 600 s)"), "{line}");
        let (level, line) = h.note(&url, Ok(()), t).unwrap();
        assert_eq!(level, log::Level::Info);
        assert!(line.ends_with("works again, after 11 failed"), "{line}");
        assert_eq!(h.note(&url, Ok(()), t), None);
        // A new failure is logged at once.
        assert!(h.note(&url, Err("x".into()), t).is_some());
    }

    /// A one-thread HTTP/1.1 server on loopback answering every request
    /// `200` (Connection: close), each request's body sent on the channel.
    fn receiver() -> (Url, mpsc::Receiver<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = endpoint(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut r = BufReader::new(stream.unwrap());
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':')
                        && k.eq_ignore_ascii_case("content-length")
                    {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                // On the channel before the answer: a pusher that has its
                // answer finds the body there (it raced the answer before).
                if tx.send(body).is_err() {
                    return;
                }
                let mut s = r.into_inner();
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .unwrap();
            }
        });
        (url, rx)
    }

    #[test]
    fn pushes_every_interval_and_once_more_when_dropped() {
        let (url, bodies) = receiver();
        let registry = Arc::new(Registry::new());
        let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = n.clone();
        registry.register(Arc::new(move |out: &mut crate::metrics::Out<'_>| {
            out.counter(
                "slabfs_test_pushes",
                "Pushes.",
                counted.load(std::sync::atomic::Ordering::Relaxed),
            )
        }));
        let cfg = Config {
            endpoint: url,
            interval: Duration::from_secs(1),
        };
        let started = Instant::now();
        let pusher = start(&cfg, registry, resource(Path::new("/m")), SystemTime::now()).unwrap();
        let value = |body: Vec<u8>| {
            let req = ExportMetricsServiceRequest::decode(&body[..]).unwrap();
            let m = &req.resource_metrics[0].scope_metrics[0].metrics[0];
            assert_eq!(m.name, "slabfs_test_pushes");
            let Some(opentelemetry_proto::tonic::metrics::v1::metric::Data::Sum(s)) = &m.data
            else {
                panic!("{m:?}")
            };
            s.data_points[0].value
        };
        use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt;
        let first = bodies.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(900));
        assert_eq!(value(first), Some(AsInt(0)));
        n.store(5, std::sync::atomic::Ordering::Relaxed);
        let t = Instant::now();
        drop(pusher);
        assert!(t.elapsed() < LAST_TIMEOUT, "{:?}", t.elapsed());
        // Perhaps a periodic push came first; the last one has the 5.
        let last = bodies.try_iter().last().expect("the last push");
        assert_eq!(value(last), Some(AsInt(5)));
    }

    #[test]
    fn a_collector_that_never_answers_delays_only_the_last_push() {
        // Accepts, reads nothing, answers nothing.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = endpoint(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let held = std::thread::spawn(move || {
            let mut open = Vec::new();
            for s in listener.incoming().take(3) {
                open.push(s.unwrap());
            }
            std::thread::sleep(Duration::from_secs(30));
        });
        let cfg = Config {
            endpoint: url,
            interval: Duration::from_secs(1),
        };
        let pusher = start(
            &cfg,
            Arc::new(Registry::new()),
            Vec::new(),
            SystemTime::now(),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let t = Instant::now();
        drop(pusher);
        // The push in flight (1 s timeout) abandoned, the last one (2 s)
        // waited for.
        let took = t.elapsed();
        assert!(took >= LAST_TIMEOUT, "{took:?}");
        assert!(
            took <= LAST_TIMEOUT + Duration::from_millis(500),
            "{took:?}"
        );
        drop(held);
    }
}
