//! Prometheus metrics: every subsystem's counters as the Prometheus text
//! format, read from the counters themselves when scraped, and the same
//! series as OTLP to push ([`otlp`]).
//!
//! # One source of truth
//!
//! The daemon already counts what it does for `.slabfs/stats`: atomics in
//! [`crate::fs::Stats`] (FUSE requests, bytes served, refresh passes), the
//! chunk cache's, the remote stores' ([`crate::storage::remote::metrics`]),
//! each with its [`Histogram`] of durations. Metrics add no second set of
//! counters that could drift from those: each subsystem implements
//! [`Collect`], which writes its series from the counters it already has at
//! the moment of the scrape, the way its part of `.slabfs/stats` reads
//! them. The counting is the same with or without `--metrics` (the stats
//! file needs it); the endpoint records nothing on the read path, and
//! costs only the rendering of each scrape, on a thread of its own.
//!
//! # Adding a subsystem's series: one step
//!
//! Implement [`Collect`] where the counters live (a closure
//! `Fn(&mut Out) -> fmt::Result` is one too), and register it in
//! `fs::mount::collectors`, the one list of what the endpoint shows.
//! The disk cache's are such a closure in `fs::mount::collectors`
//! (storage imports nothing above it); as a type it would read:
//!
//! ```ignore
//! impl crate::metrics::Collect for DiskCache {
//!     fn collect(&self, out: &mut crate::metrics::Out<'_>) -> std::fmt::Result {
//!         let s = self.snapshot();
//!         out.counter("slabfs_disk_cache_hits", "Blocks reads took from the disk cache.", s.hits)?;
//!         out.counter("slabfs_disk_cache_misses", "Blocks reads fetched from the store, not in the disk cache.", s.misses)?;
//!         out.counter("slabfs_disk_cache_evictions", "Blocks removed to stay under --disk-cache-size.", s.evictions)?;
//!         out.gauge("slabfs_disk_cache_bytes", "Bytes the disk cache directory holds.", s.bytes_held as f64)
//!     }
//! }
//! ```
//!
//! and one line in `fs::mount::collectors`. Names start with `slabfs_`,
//! carry their unit (`_bytes`, `_seconds`) and, for counters, leave the
//! `_total` suffix to the encoder; a label's values must be few (a store,
//! an operation, a codec chain: never an object key or a path) and never
//! hold a secret. `tests/it/metrics.rs` checks the whole document parses,
//! names no family twice and shows no secret.
//!
//! # The crate: `prometheus-client`
//!
//! The text is written by `prometheus-client` (the Prometheus project's
//! own Rust client): its `Collector` trait is exactly "write these series
//! from your own state at scrape time", and its registries are values,
//! not a process-wide recorder, so two mounts (or two tests) in one
//! process never mix their counts. Its dependencies are a float and an
//! integer formatter and a derive macro: no system library, no TLS.
//! The alternative, the `metrics` facade with `metrics-exporter-prometheus`,
//! records into its own counters through one global recorder: every
//! existing counter would have been counted twice (the drift this design
//! rules out), or copied into the recorder with no hook before each
//! scrape; and its exporter's default features pull in a TLS stack built
//! from C (`aws-lc-rs`) for the push gateway. The HTTP side is a few
//! lines over `hyper`, already in the daemon through the remote client
//! (`fs::mount::exporter`).
//!
//! # Pushing the same series: OTLP, with `opentelemetry-proto`
//!
//! `--metrics-otlp URL` pushes the series to an OpenTelemetry collector
//! over OTLP/HTTP (`fs::mount::push`, every `--metrics-otlp-interval`).
//! The push reads what the text is rendered from: [`Registry::collect`]
//! gives every collector's families as plain values ([`Sampled`]), which
//! [`Registry::render`] writes as the Prometheus text and [`otlp`] maps
//! onto an OTLP export request. So both views have the same names, labels
//! and values, from the same counters, and a [`Collect`] knows nothing of
//! either encoding. (The list costs a few hundred small allocations per
//! scrape; the text it replaced the direct writing of is byte for byte the
//! same.)
//!
//! The message types are `opentelemetry-proto`, the OpenTelemetry
//! project's own Rust types generated from its `.proto` files (what its
//! `opentelemetry-otlp` exporter sends), encoded with `prost` as binary
//! protobuf, the encoding every OTLP/HTTP receiver takes. Its default
//! features are off and only `gen-tonic-messages` and `metrics` on: the
//! message structs and `prost`, without `tonic`, gRPC, an HTTP client or
//! serde. JSON (`with-serde`) would have needed the same `prost` types plus
//! serde code for every message, and hex and base64. The crate always
//! depends on `opentelemetry` and `opentelemetry_sdk` (for conversions from
//! the SDK's types, which slabfs does not use): six crates new to the
//! build (those three, `prost`, `prost-derive`, `anyhow`), about 18 s of
//! CPU in a release build (9 s in a debug one), half of it
//! `opentelemetry_sdk`; no system library, no TLS. The request is sent by
//! `reqwest`, already the remote stores' client, with its rustls.
//!
//! The alternative, `opentelemetry-otlp` with `opentelemetry_sdk`'s
//! metrics, exports what the SDK's own instruments hold. Counters and
//! gauges could be observable instruments whose callbacks read ours at
//! each collection, but the SDK has no observable histogram: every
//! duration would be recorded a second time, into the SDK's own buckets
//! (the drift this design rules out). It would also add the SDK's readers
//! and an exporter (by default over reqwest's blocking client, a runtime of
//! its own) on top of the same message types, which were all that was
//! wanted.

pub mod otlp;

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::histogram::{BOUNDS_NS, Cumulative, Histogram};

/// The `Content-Type` of what [`Registry::render`] writes: the Prometheus
/// text format, version 0.0.4, which every Prometheus server scrapes.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Labels of one series: `(name, value)` pairs.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// What a subsystem exports: its series, written from its counters at the
/// moment of a scrape.
pub trait Collect: Send + Sync {
    fn collect(&self, out: &mut Out<'_>) -> fmt::Result;
}

impl<F> Collect for F
where
    F: Fn(&mut Out<'_>) -> fmt::Result + Send + Sync,
{
    fn collect(&self, out: &mut Out<'_>) -> fmt::Result {
        self(out)
    }
}

/// Where a [`Collect`] writes its series: a list of [`Sampled`] families,
/// which the encoders read ([`Registry::render`], [`otlp`]).
pub struct Out<'a> {
    families: &'a mut Vec<Sampled>,
}

/// The kind of a family of series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only ever goes up (the encoder adds `_total` to its name).
    Counter,
    /// A value now.
    Gauge,
    /// Durations, in seconds, from a [`Histogram`].
    Histogram,
}

/// One family as collected: its name, help and kind, and one sample per
/// set of labels. What both encoders read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// `slabfs_...`, without the `_total` of a counter.
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

/// One series of a [`Sampled`] family: its labels and its value now.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

/// The value of a [`Sample`], of its family's [`Kind`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Counter(u64),
    Gauge(f64),
    /// Durations in nanoseconds, counted below each of [`BOUNDS_NS`].
    Histogram(Box<Cumulative>),
}

impl Out<'_> {
    /// A family of series named `name`, to add samples to (one per set of
    /// labels). A family appears once per scrape: give all its samples at
    /// once.
    pub fn family<'s>(
        &'s mut self,
        name: &str,
        help: &str,
        kind: Kind,
    ) -> Result<Family<'s>, fmt::Error> {
        debug_assert!(
            name.starts_with("slabfs_") && !name.ends_with("_total"),
            "series are named slabfs_*, counters without _total (the encoder adds it): {name}"
        );
        self.families.push(Sampled {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            samples: Vec::new(),
        });
        let family = self.families.last_mut().expect("just pushed");
        Ok(Family { family })
    }

    /// A counter without labels.
    pub fn counter(&mut self, name: &str, help: &str, value: u64) -> fmt::Result {
        self.family(name, help, Kind::Counter)?.counter(&[], value)
    }

    /// A gauge without labels.
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) -> fmt::Result {
        self.family(name, help, Kind::Gauge)?.gauge(&[], value)
    }

    /// A histogram of durations without labels.
    pub fn histogram(&mut self, name: &str, help: &str, h: &Histogram) -> fmt::Result {
        self.family(name, help, Kind::Histogram)?.histogram(&[], h)
    }
}

/// The samples of one family ([`Out::family`]).
pub struct Family<'s> {
    family: &'s mut Sampled,
}

impl Family<'_> {
    pub fn counter(&mut self, labels: Labels<'_>, value: u64) -> fmt::Result {
        debug_assert_eq!(self.family.kind, Kind::Counter);
        self.push(labels, Value::Counter(value))
    }

    pub fn gauge(&mut self, labels: Labels<'_>, value: f64) -> fmt::Result {
        debug_assert_eq!(self.family.kind, Kind::Gauge);
        self.push(labels, Value::Gauge(value))
    }

    /// `h`'s counts below each of [`BOUNDS_NS`], its count and its sum.
    pub fn histogram(&mut self, labels: Labels<'_>, h: &Histogram) -> fmt::Result {
        debug_assert_eq!(self.family.kind, Kind::Histogram);
        self.push(labels, Value::Histogram(Box::new(h.cumulative())))
    }

    fn push(&mut self, labels: Labels<'_>, value: Value) -> fmt::Result {
        let labels = labels
            .iter()
            .map(|&(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.family.samples.push(Sample { labels, value });
        Ok(())
    }
}

/// The label names slabfs's own series use (and Prometheus's own `le`
/// and `quantile`): a mount's labels ([`Registry::with_labels`]) may not
/// take one. `tests/it/metrics.rs` checks a real mount's scrape uses no
/// other.
pub const LABELS_IN_USE: &[&str] = &["codec", "errno", "kind", "op", "store", "le", "quantile"];

/// `--metrics-label KEY=VALUE`: a label every series of the mount carries
/// (several mounts of one node then scrape apart). The key is a
/// Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting `__`,
/// which Prometheus reserves) that slabfs's series do not use
/// ([`LABELS_IN_USE`]); the value any text.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    let Some((k, v)) = s.split_once('=') else {
        return Err(format!("{s:?}: not KEY=VALUE"));
    };
    let name_ok = k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        return Err(format!(
            "{k:?}: a label name is letters, digits and _, not starting with a digit"
        ));
    }
    if k.starts_with("__") {
        return Err(format!(
            "{k:?}: names starting with __ are Prometheus's own"
        ));
    }
    if LABELS_IN_USE.contains(&k) {
        return Err(format!("{k:?}: slabfs's own series use that label name"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// The collectors an endpoint shows, in the order registered, and the
/// labels every series carries.
#[derive(Default)]
pub struct Registry {
    collectors: RwLock<Vec<Arc<dyn Collect>>>,
    labels: Vec<(String, String)>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("collectors", &self.collectors.read().len())
            .finish()
    }
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry whose every series also carries `labels` (a mount's
    /// `--metrics-label`s, checked by [`parse_label`]), first, in both the
    /// text and the OTLP push.
    pub fn with_labels(labels: Vec<(String, String)>) -> Registry {
        Registry {
            collectors: RwLock::default(),
            labels,
        }
    }

    /// Show `c`'s series from now on.
    pub fn register(&self, c: Arc<dyn Collect>) {
        self.collectors.write().push(c);
    }

    /// Every collector's series now, in the order registered. Fails only
    /// if a collector does.
    pub fn collect(&self) -> Result<Vec<Sampled>, fmt::Error> {
        let collectors = self.collectors.read().clone();
        let mut families = Vec::new();
        let mut out = Out {
            families: &mut families,
        };
        for c in &collectors {
            c.collect(&mut out)?;
        }
        if !self.labels.is_empty() {
            for s in families.iter_mut().flat_map(|f| f.samples.iter_mut()) {
                let mut labels = self.labels.clone();
                labels.append(&mut s.labels);
                s.labels = labels;
            }
        }
        Ok(families)
    }

    /// Every collector's series now, in the Prometheus text format
    /// ([`CONTENT_TYPE`]). Fails only if a collector does.
    pub fn render(&self) -> Result<String, fmt::Error> {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Text(self.collect()?)));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

/// Collected families as the crate's collector, which writes them as the
/// Prometheus text.
#[derive(Debug)]
struct Text(Vec<Sampled>);

impl prometheus_client::collector::Collector for Text {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        for f in &self.0 {
            let t = match f.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut family = enc.encode_descriptor(&f.name, &f.help, None, t)?;
            for s in &f.samples {
                let mut enc = family.encode_family(&s.labels)?;
                match &s.value {
                    Value::Counter(v) => enc.encode_counter::<NoLabelSet, _, u64>(v, None)?,
                    Value::Gauge(v) => enc.encode_gauge(v)?,
                    Value::Histogram(c) => {
                        // `le` in seconds; the encoder adds the buckets'
                        // own counts up.
                        let buckets: Vec<(f64, u64)> = BOUNDS_NS
                            .iter()
                            .map(|&bound| bound as f64 / 1e9)
                            .zip(c.per_bucket())
                            .collect();
                        enc.encode_histogram::<NoLabelSet>(
                            c.sum as f64 / 1e9,
                            c.count,
                            &buckets,
                            None,
                        )?
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counters_gauges_and_histograms_in_the_text_format() {
        let reg = Registry::new();
        let h = Arc::new(Histogram::new());
        h.record(Duration::from_micros(3)); // below 4.096 µs
        h.record(Duration::from_millis(2)); // below 2.097 ms
        h.record(Duration::from_secs(100)); // past the last bound
        let hist = h.clone();
        reg.register(Arc::new(move |out: &mut Out<'_>| {
            out.counter("slabfs_test_bytes", "Bytes.", 42)?;
            out.gauge("slabfs_test_open", "Open now.", 3.0)?;
            let mut f = out.family("slabfs_test_requests", "Requests.", Kind::Counter)?;
            f.counter(&[("op", "read")], 7)?;
            f.counter(&[("op", "lookup"), ("store", "s3://b")], 1)?;
            let mut f = out.family("slabfs_test_seconds", "Time.", Kind::Histogram)?;
            f.histogram(&[("op", "read")], &hist)
        }));
        let text = reg.render().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for want in [
            "# TYPE slabfs_test_bytes_total counter",
            "slabfs_test_bytes_total 42",
            "# TYPE slabfs_test_open gauge",
            "slabfs_test_open 3.0",
            "slabfs_test_requests_total{op=\"read\"} 7",
            "slabfs_test_requests_total{op=\"lookup\",store=\"s3://b\"} 1",
            "# TYPE slabfs_test_seconds histogram",
            "slabfs_test_seconds_bucket{op=\"read\",le=\"2.048e-06\"} 0",
            "slabfs_test_seconds_bucket{op=\"read\",le=\"4.096e-06\"} 1",
            "slabfs_test_seconds_bucket{op=\"read\",le=\"0.002097152\"} 2",
            "slabfs_test_seconds_bucket{op=\"read\",le=\"34.359738368\"} 2",
            "slabfs_test_seconds_bucket{op=\"read\",le=\"+Inf\"} 3",
            "slabfs_test_seconds_count{op=\"read\"} 3",
        ] {
            assert!(lines.contains(&want), "no line {want:?} in:\n{text}");
        }
        let sum = lines
            .iter()
            .find_map(|l| l.strip_prefix("slabfs_test_seconds_sum{op=\"read\"} "))
            .unwrap();
        assert!(
            (sum.parse::<f64>().unwrap() - 100.002003).abs() < 1e-9,
            "{sum}"
        );
        // One bucket line per bound, and +Inf.
        let buckets = lines.iter().filter(|l| l.contains("_bucket{")).count();
        assert_eq!(buckets, BOUNDS_NS.len() + 1);
    }

    #[test]
    fn a_mounts_labels_go_on_every_series() {
        let labels = vec![
            parse_label("mount=archive").unwrap(),
            parse_label("site=a=b").unwrap(),
        ];
        assert_eq!(labels[1], ("site".into(), "a=b".into()));
        let reg = Registry::with_labels(labels);
        reg.register(Arc::new(|out: &mut Out<'_>| {
            out.counter("slabfs_test_bytes", "Bytes.", 42)?;
            out.family("slabfs_test_requests", "Requests.", Kind::Counter)?
                .counter(&[("op", "read")], 7)
        }));
        let text = reg.render().unwrap();
        for want in [
            "slabfs_test_bytes_total{mount=\"archive\",site=\"a=b\"} 42",
            "slabfs_test_requests_total{mount=\"archive\",site=\"a=b\",op=\"read\"} 7",
        ] {
            assert!(
                text.lines().any(|l| l == want),
                "no line {want:?} in:\n{text}"
            );
        }
        for bad in [
            "op=x",
            "le=1",
            "__name__=x",
            "1a=x",
            "a-b=x",
            "novalue",
            "=x",
        ] {
            assert!(parse_label(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_failing_collector_fails_the_render() {
        let reg = Registry::new();
        reg.register(Arc::new(|_: &mut Out<'_>| Err(fmt::Error)));
        assert!(reg.render().is_err());
    }

    #[test]
    fn label_values_are_escaped() {
        let reg = Registry::new();
        reg.register(Arc::new(|out: &mut Out<'_>| {
            out.family("slabfs_test", "T.", Kind::Gauge)?
                .gauge(&[("v", "a\"b\\c\nd")], 1.0)
        }));
        let text = reg.render().unwrap();
        assert!(
            text.contains(r#"slabfs_test{v="a\"b\\c\nd"} 1.0"#),
            "{text}"
        );
    }
}
