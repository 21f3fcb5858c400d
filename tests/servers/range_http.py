"""A small HTTP file server for slabfs's remote tests (tests/it/remote.rs).

python's own `http.server` ignores `Range` (it answers 200 with the whole
file), so a client's ranged reads cannot be tested against it. This one:

- answers `Range: bytes=A-B`, `bytes=A-` and `bytes=-N` with 206 and
  `Content-Range` (416 when unsatisfiable), unless started with
  `--ignore-range`, when it behaves like `http.server` (200, whole body),
  which a client must refuse rather than take as the range;
- sends an `ETag` (mtime and size) and honours `If-Match` (412), so an
  object replaced between two ranges is caught, and `If-None-Match`
  (304, no body), so a client can ask whether an object changed;
- under `/flaky/...` answers each (method, path) 503 the first time and
  serves it normally the next (the same file as without the prefix);
- answers `GET /_stats` with JSON counts: requests, 503s sent, 206s sent,
  304s sent, full 200 bodies sent,
  and the `Credential=` scope of the last signed request (key id, date,
  region), for tests of where credentials come from;
- never lists a directory (404), as an object store would not;
- answers `/redirect-here/PATH` with a 302 to `/PATH` on itself, and
  `/redirect-away/PORT/PATH` with a 302 to `http://127.0.0.1:PORT/PATH`
  (another server: a client must not follow it);
- with `--delay SECONDS`, waits that long before answering each request
  (but `/_stats`), like a distant server: a client that sends its
  requests one after another pays the delay once per request, one that
  sends them at once pays it about once; with `--delay-only TEXT` as
  well, only requests whose path contains TEXT wait.
- answers `GET /_slowdown?n=N[&only=TEXT][&retry_after=S][&hold=K]` by
  arming a throttle, as an overloaded S3 prefix: the next N requests
  (whose path contains TEXT) are answered at once `503` with S3's
  `SlowDown` error XML (and `Retry-After: S` if given; S3 sends none,
  Azure and GCS may). With `hold=K`, those 503s wait until K such
  requests have arrived since the arming (at most 5 s), so that a test
  knows K requests were in flight when the first 503 went back, however
  slowly a loaded machine sends them.
  From then on, `/_stats` also has `slowdown` (such 503s sent) and `log`:
  one `[start, end, status, path]` per request since the arming (seconds
  on the server's monotonic clock from the arming), for tests of when a
  client's requests arrive and how many are in flight at once.

- with `--tls CERT KEY` (PEM files), serves HTTPS instead of HTTP, for
  tests of the client's TLS; `/_stats` is then over TLS too.

Usage: range_http.py ROOT [--ignore-range] [--delay SECONDS [--delay-only TEXT]]
[--tls CERT KEY]; prints the
port it listens on
(127.0.0.1, chosen by the kernel) on its first line of stdout.
"""

import json
import os
import re
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

ROOT = os.path.abspath(sys.argv[1])
IGNORE_RANGE = "--ignore-range" in sys.argv[2:]
DELAY = float(sys.argv[sys.argv.index("--delay") + 1]) if "--delay" in sys.argv else 0.0
DELAY_ONLY = sys.argv[sys.argv.index("--delay-only") + 1] if "--delay-only" in sys.argv else ""
LOCK = threading.Lock()
STATS = {"requests": 0, "503": 0, "206": 0, "304": 0, "200": 0, "credential": None}
FAILED_ONCE = set()
# The armed throttle (`/_slowdown`) and the requests logged since.
SLOWDOWN = {"left": 0, "only": "", "retry_after": None, "at": None, "hold": 0, "arrived": 0}
ARRIVED = threading.Condition(LOCK)
LOG = []
LOG_MAX = 10000
SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
    b"<RequestId>RANGEHTTP0000001</RequestId></Error>"
)


class Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # No Nagle: the headers and the body go in two writes, and the second
    # would wait for the client's delayed ACK (40 ms a request).
    disable_nagle_algorithm = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=ROOT, **kwargs)

    def log_message(self, *args):
        pass

    def send_response(self, code, message=None):
        self.status = code
        super().send_response(code, message)

    def count(self, key):
        with LOCK:
            STATS[key] += 1

    def plain(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.serve()

    def do_GET(self):
        self.serve()

    def serve(self):
        self.count("requests")
        # The signing key's scope (never the signature), for tests of
        # where credentials come from.
        auth = self.headers.get("Authorization") or ""
        if "Credential=" in auth:
            with LOCK:
                STATS["credential"] = auth.split("Credential=", 1)[1].split(",", 1)[0]
        path = self.path.split("?", 1)[0]
        if path == "/_stats":
            with LOCK:
                stats = dict(STATS)
                if SLOWDOWN["at"] is not None:
                    stats["log"] = list(LOG)
                return self.plain(200, json.dumps(stats).encode())
        if path == "/_slowdown":
            query = parse_qs(self.path.partition("?")[2])
            with LOCK:
                SLOWDOWN["left"] = int(query["n"][0])
                SLOWDOWN["only"] = query.get("only", [""])[0]
                SLOWDOWN["retry_after"] = query.get("retry_after", [None])[0]
                SLOWDOWN["hold"] = int(query.get("hold", ["0"])[0])
                SLOWDOWN["arrived"] = 0
                SLOWDOWN["at"] = time.monotonic()
                STATS["slowdown"] = 0
                LOG.clear()
            return self.plain(200, b"armed")
        start = time.monotonic()
        self.status = None
        try:
            self.answer(path)
        finally:
            with LOCK:
                if SLOWDOWN["at"] is not None and len(LOG) < LOG_MAX:
                    at = SLOWDOWN["at"]
                    LOG.append([start - at, time.monotonic() - at, self.status, path])

    def answer(self, path):
        with LOCK:
            if SLOWDOWN["at"] is not None and SLOWDOWN["only"] in path:
                SLOWDOWN["arrived"] += 1
                ARRIVED.notify_all()
            throttled = SLOWDOWN["left"] > 0 and SLOWDOWN["only"] in path
            if throttled:
                SLOWDOWN["left"] -= 1
                STATS["slowdown"] += 1
                ARRIVED.wait_for(lambda: SLOWDOWN["arrived"] >= SLOWDOWN["hold"], timeout=5)
        if throttled:
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOWDOWN_BODY)))
            if SLOWDOWN["retry_after"] is not None:
                self.send_header("Retry-After", SLOWDOWN["retry_after"])
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(SLOWDOWN_BODY)
            return
        if DELAY and DELAY_ONLY in path:
            time.sleep(DELAY)
        for prefix in ("/redirect-here/", "/redirect-away/"):
            if path.startswith(prefix):
                rest = path[len(prefix):]
                if prefix == "/redirect-away/":
                    port, _, rest = rest.partition("/")
                    where = "http://127.0.0.1:%s/%s" % (port, rest)
                else:
                    where = "/" + rest
                self.send_response(302)
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        if path.startswith("/flaky/"):
            key = (self.command, path)
            with LOCK:
                first = key not in FAILED_ONCE
                FAILED_ONCE.add(key)
            if first:
                self.count("503")
                return self.plain(503, b"try again")
            path = path[len("/flaky"):]
        local = self.translate_path(path)
        if not os.path.isfile(local):
            return self.plain(404, b"not found")
        st = os.stat(local)
        etag = '"%x-%x"' % (st.st_mtime_ns, st.st_size)
        match = self.headers.get("If-Match")
        if match and match.strip() not in ("*", etag):
            return self.plain(412, b"precondition failed")
        none_match = self.headers.get("If-None-Match")
        if none_match and none_match.strip() in ("*", etag):
            self.count("304")
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        size = st.st_size
        start, end, code = 0, size, 200
        rng = self.headers.get("Range")
        if rng and not IGNORE_RANGE:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not m or (m.group(1) == "" and m.group(2) == ""):
                return self.plain(416)
            if m.group(1) == "":
                start = max(0, size - int(m.group(2)))
            else:
                start = int(m.group(1))
                if m.group(2) != "":
                    end = min(size, int(m.group(2)) + 1)
            if start >= size or start >= end:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code = 206
            self.count("206")
        elif self.command == "GET":
            self.count("200")
        with open(local, "rb") as f:
            f.seek(start)
            body = f.read(end - start)
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", self.date_time_string(int(st.st_mtime)))
        self.send_header("Accept-Ranges", "bytes" if not IGNORE_RANGE else "none")
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


# Clients that open many connections at once must not overflow the
# listen backlog (5 by default): a dropped SYN is retried after a second.
ThreadingHTTPServer.request_queue_size = 256
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
if "--tls" in sys.argv:
    import ssl

    i = sys.argv.index("--tls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[i + 1], sys.argv[i + 2])
    # The handshake runs in accept(): one that fails (a client refusing
    # the certificate) is an OSError there, which serve_forever drops.
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
