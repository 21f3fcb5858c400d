//! The collected series as an OTLP metrics export request
//! (`ExportMetricsServiceRequest`), for `--metrics-otlp` to push
//! (`fs::mount::push`).
//!
//! The input is what the Prometheus text is written from
//! ([`super::Registry::collect`]): the same families, names, labels and
//! values, mapped onto the OTLP data model as an OpenTelemetry collector's
//! Prometheus receiver would map the scraped text:
//!
//! | [`Kind`] | OTLP | value |
//! | --- | --- | --- |
//! | `Counter` | `Sum`, monotonic, cumulative | `as_int` (a `u64`, saturated at `i64::MAX`) |
//! | `Gauge` | `Gauge` | `as_double` |
//! | `Histogram` | `Histogram`, cumulative | `explicit_bounds` = [`BOUNDS_NS`] in seconds, `bucket_counts` each bucket's own (the last: past the last bound), `sum` in seconds |
//!
//! The name is the family's (`slabfs_read_bytes`: no `_total`, which
//! OTLP-to-Prometheus translation adds to a monotonic sum, as it adds
//! `_bucket`, `_sum` and `_count` to a histogram), the description its
//! help, the unit read from the name's suffix (`_seconds`: `s`, `_bytes`:
//! `By`, as UCUM writes them; translation then adds no second suffix).
//! Labels become string attributes. Cumulative points start at `start`,
//! the time the daemon's counters started from zero, so a collector sees
//! a restart as a reset.
//!
//! Example: `out.counter("slabfs_read_bytes", "Bytes sent...", 4096)`
//! becomes the metric `{name: "slabfs_read_bytes", unit: "By", sum:
//! {is_monotonic: true, aggregation_temporality: CUMULATIVE, data_points:
//! [{as_int: 4096, start_time_unix_nano: START, time_unix_nano: NOW}]}}`,
//! which a collector's Prometheus exporter shows as
//! `slabfs_read_bytes_total 4096`.
//!
//! The message types are the OpenTelemetry project's own
//! (`opentelemetry-proto`, generated from the `.proto` files by `prost`);
//! see [`crate::metrics`] for why those.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::{Kind, Sampled, Value};
use crate::histogram::BOUNDS_NS;

/// The `Content-Type` of an encoded request (OTLP/HTTP, binary protobuf).
pub const CONTENT_TYPE: &str = "application/x-protobuf";

/// The request exporting `families` as the resource `resource`
/// (attributes `(key, value)`), their cumulative series counted from
/// `start`, sampled at `now`. Encode it with `prost::Message::encode_to_vec`.
pub fn request(
    families: &[Sampled],
    resource: &[(String, String)],
    start: SystemTime,
    now: SystemTime,
) -> ExportMetricsServiceRequest {
    let (start, now) = (unix_nanos(start), unix_nanos(now));
    let metrics = families.iter().map(|f| metric(f, start, now)).collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: attributes(resource),
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "slabfs".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The unit OTLP gives a series named `name` (UCUM, as the OpenTelemetry
/// semantic conventions write it), from the suffix Prometheus naming puts
/// on it; none when the name has no unit.
pub fn unit_of(name: &str) -> &'static str {
    if name.ends_with("_seconds") {
        "s"
    } else if name.ends_with("_bytes") {
        "By"
    } else {
        ""
    }
}

fn metric(f: &Sampled, start: u64, now: u64) -> Metric {
    let number = |labels: &[(String, String)], start: u64, value| NumberDataPoint {
        attributes: attributes(labels),
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(value),
        ..Default::default()
    };
    let data = match f.kind {
        Kind::Counter => metric::Data::Sum(Sum {
            data_points: f
                .samples
                .iter()
                .filter_map(|s| match s.value {
                    Value::Counter(v) => Some(number(
                        &s.labels,
                        start,
                        number_data_point::Value::AsInt(i64::try_from(v).unwrap_or(i64::MAX)),
                    )),
                    _ => None,
                })
                .collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        }),
        Kind::Gauge => metric::Data::Gauge(Gauge {
            data_points: f
                .samples
                .iter()
                .filter_map(|s| match s.value {
                    // A gauge has no start (the data model leaves it out).
                    Value::Gauge(v) => {
                        Some(number(&s.labels, 0, number_data_point::Value::AsDouble(v)))
                    }
                    _ => None,
                })
                .collect(),
        }),
        Kind::Histogram => metric::Data::Histogram(Histogram {
            data_points: f
                .samples
                .iter()
                .filter_map(|s| match &s.value {
                    Value::Histogram(c) => {
                        // Each bucket's own count, the last past the last
                        // bound (Prometheus's `+Inf` less the rest).
                        let bucket_counts = c.per_bucket().collect();
                        Some(HistogramDataPoint {
                            attributes: attributes(&s.labels),
                            start_time_unix_nano: start,
                            time_unix_nano: now,
                            count: c.count,
                            sum: Some(c.sum as f64 / 1e9),
                            bucket_counts,
                            explicit_bounds: BOUNDS_NS.iter().map(|&b| b as f64 / 1e9).collect(),
                            ..Default::default()
                        })
                    }
                    _ => None,
                })
                .collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        }),
    };
    Metric {
        name: f.name.clone(),
        description: f.help.clone(),
        unit: unit_of(&f.name).into(),
        data: Some(data),
        ..Default::default()
    }
}

fn attributes(pairs: &[(String, String)]) -> Vec<KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.clone())),
            }),
            ..Default::default()
        })
        .collect()
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram as Durations;
    use crate::metrics::{Out, Registry};
    use prost::Message;
    use std::sync::Arc;
    use std::time::Duration;

    fn string(v: &Option<AnyValue>) -> &str {
        match v.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    fn labels(kv: &[KeyValue]) -> Vec<(&str, &str)> {
        kv.iter()
            .map(|kv| (kv.key.as_str(), string(&kv.value)))
            .collect()
    }

    #[test]
    fn counters_gauges_and_histograms_as_otlp() {
        let reg = Registry::new();
        let h = Arc::new(Durations::new());
        h.record(Duration::from_micros(3)); // below 4.096 µs
        h.record(Duration::from_millis(2)); // below 2.097 ms
        h.record(Duration::from_secs(100)); // past the last bound
        let hist = h.clone();
        reg.register(Arc::new(move |out: &mut Out<'_>| {
            out.counter("slabfs_test_bytes", "Bytes.", 42)?;
            out.gauge("slabfs_test_open", "Open now.", 3.5)?;
            let mut f = out.family("slabfs_test_requests", "Requests.", Kind::Counter)?;
            f.counter(&[("op", "read")], 7)?;
            f.counter(&[("op", "lookup"), ("store", "s3://b")], u64::MAX)?;
            let mut f = out.family("slabfs_test_seconds", "Time.", Kind::Histogram)?;
            f.histogram(&[("op", "read")], &hist)
        }));
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = start + Duration::from_secs(60);
        let resource = [
            ("service.name".to_string(), "slabfs".to_string()),
            ("slabfs.mountpoint".to_string(), "/mnt/x".to_string()),
        ];
        let req = request(&reg.collect().unwrap(), &resource, start, now);
        // Through the wire format and back, as a collector reads it.
        let req = ExportMetricsServiceRequest::decode(&req.encode_to_vec()[..]).unwrap();
        let [rm] = &req.resource_metrics[..] else {
            panic!("one resource: {req:?}")
        };
        assert_eq!(
            labels(&rm.resource.as_ref().unwrap().attributes),
            [("service.name", "slabfs"), ("slabfs.mountpoint", "/mnt/x")]
        );
        let [sm] = &rm.scope_metrics[..] else {
            panic!("one scope")
        };
        assert_eq!(sm.scope.as_ref().unwrap().name, "slabfs");
        let names: Vec<&str> = sm.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "slabfs_test_bytes",
                "slabfs_test_open",
                "slabfs_test_requests",
                "slabfs_test_seconds"
            ]
        );
        let (start_ns, now_ns) = (1_700_000_000 * 1_000_000_000, 1_700_000_060 * 1_000_000_000);

        let bytes = &sm.metrics[0];
        assert_eq!(
            (bytes.description.as_str(), bytes.unit.as_str()),
            ("Bytes.", "By")
        );
        let Some(metric::Data::Sum(sum)) = &bytes.data else {
            panic!("{bytes:?}")
        };
        assert!(sum.is_monotonic);
        assert_eq!(
            sum.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        let [p] = &sum.data_points[..] else { panic!() };
        assert_eq!(p.value, Some(number_data_point::Value::AsInt(42)));
        assert_eq!(
            (p.start_time_unix_nano, p.time_unix_nano),
            (start_ns, now_ns)
        );
        assert!(p.attributes.is_empty());

        let Some(metric::Data::Gauge(g)) = &sm.metrics[1].data else {
            panic!()
        };
        assert_eq!(sm.metrics[1].unit, "");
        assert_eq!(
            g.data_points[0].value,
            Some(number_data_point::Value::AsDouble(3.5))
        );
        assert_eq!(g.data_points[0].time_unix_nano, now_ns);

        let Some(metric::Data::Sum(sum)) = &sm.metrics[2].data else {
            panic!()
        };
        let points: Vec<_> = sum
            .data_points
            .iter()
            .map(|p| (labels(&p.attributes), p.value))
            .collect();
        assert_eq!(
            points,
            [
                (
                    vec![("op", "read")],
                    Some(number_data_point::Value::AsInt(7))
                ),
                (
                    vec![("op", "lookup"), ("store", "s3://b")],
                    Some(number_data_point::Value::AsInt(i64::MAX))
                ),
            ]
        );

        let seconds = &sm.metrics[3];
        assert_eq!(seconds.unit, "s");
        let Some(metric::Data::Histogram(hist)) = &seconds.data else {
            panic!()
        };
        assert_eq!(
            hist.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        let [p] = &hist.data_points[..] else { panic!() };
        assert_eq!(labels(&p.attributes), [("op", "read")]);
        assert_eq!(p.count, 3);
        assert!((p.sum.unwrap() - 100.002003).abs() < 1e-9, "{:?}", p.sum);
        assert_eq!(p.explicit_bounds.len(), BOUNDS_NS.len());
        assert_eq!(p.explicit_bounds[0], 1.024e-6);
        assert_eq!(p.explicit_bounds[BOUNDS_NS.len() - 1], 34.359738368);
        assert_eq!(p.bucket_counts.len(), BOUNDS_NS.len() + 1);
        assert_eq!(p.bucket_counts.iter().sum::<u64>(), 3);
        // 3 µs is below 4.096 µs (bound 2) and not below 2.048 µs (bound
        // 1): the bucket ending at bound 2. 2 ms: the one ending at
        // 2.097 ms (bound 11). 100 s: past the last bound.
        let nonzero: Vec<(usize, u64)> = p
            .bucket_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (i, *n))
            .collect();
        assert_eq!(nonzero, [(2, 1), (11, 1), (BOUNDS_NS.len(), 1)]);
        assert_eq!(p.start_time_unix_nano, start_ns);
    }

    /// The same families as the Prometheus text, name for name: the text's
    /// `# TYPE` names are the OTLP names, counters with `_total`.
    #[test]
    fn the_names_are_those_of_the_text() {
        let reg = Registry::new();
        reg.register(Arc::new(|out: &mut Out<'_>| {
            out.counter("slabfs_a", "A.", 1)?;
            out.gauge("slabfs_b_bytes", "B.", 2.0)?;
            out.histogram("slabfs_c_seconds", "C.", &Durations::new())
        }));
        let text = reg.render().unwrap();
        let typed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let req = request(&reg.collect().unwrap(), &[], UNIX_EPOCH, UNIX_EPOCH);
        let otlp: Vec<String> = req.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .map(|m| match m.data {
                Some(metric::Data::Sum(_)) => format!("{}_total", m.name),
                _ => m.name.clone(),
            })
            .collect();
        assert_eq!(typed, otlp);
    }

    #[test]
    fn units_from_names() {
        assert_eq!(unit_of("slabfs_read_bytes"), "By");
        assert_eq!(unit_of("slabfs_uptime_seconds"), "s");
        assert_eq!(unit_of("slabfs_reads"), "");
        assert_eq!(unit_of("slabfs_bytes_read"), "");
    }
}
