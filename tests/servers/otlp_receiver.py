"""An OTLP/HTTP metrics receiver for slabfs's push tests (tests/it/metrics.rs).

Debian's Prometheus (2.42) has no OTLP receiver and there is no
OpenTelemetry collector binary here, so this plays the collector's part
with the OpenTelemetry project's own Python types (the `opentelemetry-proto`
package, scripts/requirements.txt):

- `POST /v1/metrics` with `Content-Type: application/x-protobuf`: the body
  is decoded with `ExportMetricsServiceRequest.FromString`, kept (as
  plain JSON, below), and answered `200` with an empty
  `ExportMetricsServiceResponse`, as a collector answers. A body that
  does not decode is answered `400` and counted in `errors`, with the
  reason.
- `GET /_pushes`: JSON `{"pushes": [...], "errors": [...]}`, each push
  `{"resource": {KEY: VALUE}, "scope": NAME, "metrics": [METRIC...]}`,
  each metric `{"name", "description", "unit", "kind"}` (`sum`, `gauge`,
  `histogram`, or what else the request holds) with, for a sum,
  `monotonic` and `temporality` (`cumulative`, `delta`), for a histogram
  `temporality`, and `points`: `{"attributes": {KEY: VALUE}, "start",
  "time"}` (Unix nanoseconds) plus `value` (`int` or `double`: the one
  set) or, for a histogram, `count`, `sum`, `bucket_counts`,
  `explicit_bounds`.

With `--hang`, every `POST` is read and never answered (the connection
held open until the client gives up), as a collector that hangs.

Usage: otlp_receiver.py [--hang]; prints the port it listens on
(127.0.0.1, chosen by the kernel) on its first line of stdout.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

HANG = "--hang" in sys.argv[1:]
LOCK = threading.Lock()
PUSHES = []
ERRORS = []

TEMPORALITY = {
    AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE: "cumulative",
    AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA: "delta",
}


def any_value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def number(p):
    kind = p.WhichOneof("value")
    out = {
        "attributes": attributes(p.attributes),
        "start": p.start_time_unix_nano,
        "time": p.time_unix_nano,
    }
    if kind == "as_int":
        out["value"] = {"int": p.as_int}
    elif kind == "as_double":
        out["value"] = {"double": p.as_double}
    return out


def metric(m):
    kind = m.WhichOneof("data")
    out = {"name": m.name, "description": m.description, "unit": m.unit, "kind": kind}
    if kind == "sum":
        out["monotonic"] = m.sum.is_monotonic
        out["temporality"] = TEMPORALITY.get(m.sum.aggregation_temporality, "unspecified")
        out["points"] = [number(p) for p in m.sum.data_points]
    elif kind == "gauge":
        out["points"] = [number(p) for p in m.gauge.data_points]
    elif kind == "histogram":
        out["temporality"] = TEMPORALITY.get(m.histogram.aggregation_temporality, "unspecified")
        out["points"] = [
            {
                "attributes": attributes(p.attributes),
                "start": p.start_time_unix_nano,
                "time": p.time_unix_nano,
                "count": p.count,
                "sum": p.sum,
                "bucket_counts": list(p.bucket_counts),
                "explicit_bounds": list(p.explicit_bounds),
            }
            for p in m.histogram.data_points
        ]
    return out


def decode(body):
    req = ExportMetricsServiceRequest.FromString(body)
    return [
        {
            "resource": attributes(rm.resource.attributes),
            "scope": sm.scope.name,
            "metrics": [metric(m) for m in sm.metrics],
        }
        for rm in req.resource_metrics
        for sm in rm.scope_metrics
    ]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/_pushes":
            self.send(404, b"not found\n", "text/plain")
            return
        with LOCK:
            body = json.dumps({"pushes": PUSHES, "errors": ERRORS}).encode()
        self.send(200, body, "application/json")

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if HANG:
            # Never answer; the client times out and closes.
            time.sleep(3600)
            return
        ctype = self.headers.get("Content-Type", "")
        try:
            if self.path != "/v1/metrics":
                raise ValueError(f"POST to {self.path}, not /v1/metrics")
            if ctype != "application/x-protobuf":
                raise ValueError(f"Content-Type {ctype!r}")
            pushes = decode(body)
        except Exception as e:  # noqa: BLE001: any failure is the test's to see
            with LOCK:
                ERRORS.append(str(e))
            self.send(400, str(e).encode(), "text/plain")
            return
        with LOCK:
            PUSHES.extend(pushes)
        self.send(200, ExportMetricsServiceResponse().SerializeToString(), "application/x-protobuf")


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
