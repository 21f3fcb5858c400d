"""A fault-injecting HTTP/1.1 proxy for slabfs's misbehaving-network test
(tests/it/remote_faults.rs) and benchmark (scripts/bench_remote_faults.py).

It sits between a client (slabfs) and an HTTP server (the test's S3 server,
moto) and faults a chosen fraction of the requests, the way real networks
and overloaded object stores do. It understands HTTP/1.1 keep-alive:
request heads and bodies (Content-Length or chunked) and response heads and
bodies (Content-Length, chunked, or up to the close) are parsed, so each
request on a connection meets its own fate, and a request that is not
faulted is forwarded byte for byte on the same connection.

Fault kinds (`--kinds`, comma-separated, or `all`):

- `reset-before`: the connection is reset (RST, SO_LINGER 0) before any
  byte of the answer; the request is not forwarded.
- `reset-head`: the answer's head is cut in the middle by a reset.
- `reset-body`: the head and part of the body are sent, then a reset (for
  an answer without a body, such as HEAD's: the head is cut instead).
- `truncate`: the head and part of the body are sent, then a clean close
  (FIN) before the body is complete (without a body: the head is cut).
- `503`: `503 SlowDown` with S3's XML error body, not forwarded; the
  connection stays usable.
- `500`: `500 InternalError`, likewise.
- `delay`: the answer waits `--delay MIN,MAX` seconds (0.2,1 by default)
  before its head is sent, then comes whole.
- `stall`: the head and part of the body are sent (nothing of an answer
  without a body), then nothing for `--hold` seconds (8 by default), then
  the connection is closed. A client that gives up first (closes the
  connection) is noticed and counted (`stalls_abandoned`, with how long it
  waited).

Which requests are faulted: a request is named by its method, target and
`Range` header and by how many times that name was seen before (a retry is
the next occurrence). A hash of (`--seed`, name, occurrence) decides whether
it is faulted (with probability `--rate`), the kind (uniformly among
`--kinds`) and where a cut falls, so a run's faults do not depend on how
the client's requests interleave. `--budget N` stops faulting after N
faults (-1: no limit).

Control: requests to `/_proxy/...` are answered by the proxy itself, never
faulted or forwarded (no S3 bucket name starts with `_`):

- `GET /_proxy/stats`: JSON counters: requests (control ones excluded), by
  method and by forwarded status, faults by kind, connections (client,
  upstream, active, refused beyond `--max-conns`), stalls abandoned by the
  client or held to the end, the current settings;
- `GET /_proxy/count?path=/bucket/key`: how many requests (faulted or
  not) had that target path, query string aside (a test asks whether a
  read went to the server);
- `GET /_proxy/set?rate=0.1&kinds=all&hold=8&delay=0.2,1&seed=7&budget=-1`:
  change any of the settings (a new seed also forgets the occurrences), and
  answer the new settings.

With `--stats-file PATH`, the stats are also written there on exit.

Bounded: at most `--max-conns` client connections at once (256; more are
refused with a reset and counted), request and response heads of at most
64 KiB, bodies streamed in 64 KiB pieces (an answer cut at an unknown
length is buffered up to 16 MiB), at most 100,000 request names and
paths remembered. SIGTERM or SIGINT end it cleanly (exit 0).

Usage: fault_proxy.py UPSTREAM_PORT [--rate R] [--kinds K,...] [--seed N]
       [--hold S] [--delay MIN,MAX] [--budget N] [--max-conns N]
       [--stats-file PATH]
prints the port it listens on (127.0.0.1, chosen by the kernel) on its
first line of stdout. Standard library only.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import socket
import struct
import sys
import time
from urllib.parse import parse_qs, urlsplit

KINDS = ("reset-before", "reset-head", "reset-body", "truncate", "503", "500", "delay", "stall")
# What `/_proxy/set` may change (the rest is fixed at the start).
SETTABLE = ("rate", "kinds", "seed", "hold", "delay", "budget")
MAX_HEAD = 64 << 10
PIECE = 64 << 10
MAX_BUFFER = 16 << 20
MAX_NAMES = 100_000
# How long a partial answer is left to reach the client before a reset:
# an RST can make the peer's kernel drop bytes it has not read yet, and the
# point of `reset-head` / `reset-body` is that the client sees them first.
SETTLE_S = 0.05
UPSTREAM_TIMEOUT_S = 60.0


def parse_args(argv: list[str]) -> dict:
    usage = __doc__[__doc__.index("Usage:"):]
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    cfg = {
        "upstream": int(argv[0]),
        "rate": 0.0,
        "kinds": list(KINDS),
        "seed": 0,
        "hold": 8.0,
        "delay": (0.2, 1.0),
        "budget": -1,
        "max_conns": 256,
        "stats_file": None,
    }
    rest = argv[1:]
    i = 0
    while i < len(rest):
        flag = rest[i]
        if i + 1 >= len(rest):
            sys.exit(f"{flag} needs a value\n{usage}")
        value = rest[i + 1]
        key = flag.lstrip("-").replace("-", "_")
        if key not in cfg or key == "upstream":
            sys.exit(f"unknown option {flag}\n{usage}")
        cfg[key] = value
        i += 2
    try:
        return settings(cfg, cfg)
    except ValueError as e:
        sys.exit(f"{e}\n{usage}")


def settings(cfg: dict, new: dict) -> dict:
    """cfg updated with the values in new (strings from the command line or
    a control query), checked."""
    out = dict(cfg)
    for key, value in new.items():
        if key in ("upstream", "max_conns", "stats_file"):
            out[key] = value if key == "stats_file" else int(value)
        elif key == "rate":
            out[key] = float(value)
            if not 0.0 <= out[key] <= 1.0:
                raise ValueError(f"rate {value} is not in [0, 1]")
        elif key == "kinds":
            kinds = list(KINDS) if value in ("all", ["all"]) else (
                value if isinstance(value, list) else [k for k in value.split(",") if k])
            bad = [k for k in kinds if k not in KINDS]
            if bad or not kinds:
                raise ValueError(f"unknown fault kinds {bad or value!r}; known: {', '.join(KINDS)}")
            out[key] = kinds
        elif key in ("seed", "budget"):
            out[key] = int(value)
        elif key == "hold":
            out[key] = float(value)
        elif key == "delay":
            lo, hi = (value if isinstance(value, tuple) else
                      tuple(float(x) for x in str(value).split(",")))
            if not 0 <= lo <= hi:
                raise ValueError(f"delay {value!r}: want MIN,MAX with 0 <= MIN <= MAX")
            out[key] = (lo, hi)
        else:
            raise ValueError(f"unknown setting {key}")
    return out


class Proxy:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.seen: dict[str, int] = {}
        # Requests per target path (without the query), for /_proxy/count.
        self.paths: dict[str, int] = {}
        self.conns: set[asyncio.StreamWriter] = set()
        self.stats = {
            "requests": 0,
            "forwarded": 0,
            "control": 0,
            "methods": {},
            "statuses": {},
            "faults": {k: 0 for k in KINDS},
            "connections": 0,
            "upstream_connections": 0,
            "upstream_errors": 0,
            "refused": 0,
            "bad_requests": 0,
            "stalls_abandoned": 0,
            "stalls_held": 0,
            "stall_abandoned_after_s": {"min": None, "max": None, "sum": 0.0},
        }

    # -- bookkeeping -----------------------------------------------------

    def snapshot(self) -> dict:
        s = json.loads(json.dumps(self.stats))
        s["faults_total"] = sum(self.stats["faults"].values())
        s["active"] = len(self.conns)
        s["settings"] = self.public_settings()
        return s

    def public_settings(self) -> dict:
        c = self.cfg
        return {"rate": c["rate"], "kinds": c["kinds"], "seed": c["seed"], "hold": c["hold"],
                "delay": list(c["delay"]), "budget": c["budget"], "max_conns": c["max_conns"]}

    def bump(self, table: str, key: str) -> None:
        t = self.stats[table]
        t[key] = t.get(key, 0) + 1

    def fate(self, method: str, target: str, rng: str) -> tuple[str | None, float]:
        """(fault kind or None, a number in [0, 1) placing the cut or delay)."""
        name = f"{method} {target} {rng}"
        n = self.seen.get(name, 0)
        if len(self.seen) >= MAX_NAMES and name not in self.seen:
            self.seen.clear()
        self.seen[name] = n + 1
        c = self.cfg
        if c["rate"] <= 0 or c["budget"] == 0:
            return None, 0.0
        h = hashlib.sha256(f"{c['seed']}|{name}|{n}".encode()).digest()
        u, k, f = struct.unpack("<QQQ", h[:24])
        if u / 2**64 >= c["rate"]:
            return None, 0.0
        if c["budget"] > 0:
            c["budget"] -= 1
        kind = c["kinds"][k % len(c["kinds"])]
        self.stats["faults"][kind] += 1
        return kind, f / 2**64

    # -- connections -----------------------------------------------------

    async def client(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        if len(self.conns) >= self.cfg["max_conns"]:
            self.stats["refused"] += 1
            reset(cwriter)
            return
        self.conns.add(cwriter)
        up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                keep, up = await self.one_request(creader, cwriter, up)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                asyncio.TimeoutError, OSError, ValueError):
            pass
        except asyncio.CancelledError:
            reset(cwriter)
            raise
        finally:
            self.conns.discard(cwriter)
            if up is not None:
                # Between answers (a connection mid-answer was reset and
                # dropped already): a clean close.
                close(up[1])
            close(cwriter)

    async def one_request(self, creader, cwriter, up):
        """Serve one request; returns (keep the connection, the upstream
        connection to reuse or None)."""
        try:
            head = await creader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False, up  # the client closed between requests
        except asyncio.LimitOverrunError:
            self.stats["bad_requests"] += 1
            await answer(cwriter, 431, "RequestHeaderFieldsTooLarge", "head too large", False, "GET")
            return False, up
        try:
            line, headers = parse_head(head)
            method, target, _version = line.split(" ", 2)
        except ValueError:
            self.stats["bad_requests"] += 1
            await answer(cwriter, 400, "BadRequest", "unparsable request head", False, "GET")
            return False, up
        client_keep = "close" not in headers.get("connection", "").lower()
        framing = body_framing(headers, request=True)

        if target.startswith("/_proxy/"):
            self.stats["control"] += 1
            await copy_body(creader, None, framing)
            await self.control(cwriter, target, client_keep)
            return client_keep, up

        self.stats["requests"] += 1
        self.bump("methods", method)
        path = target.split("?", 1)[0]
        if len(self.paths) >= MAX_NAMES and path not in self.paths:
            self.paths.clear()
        self.paths[path] = self.paths.get(path, 0) + 1
        kind, frac = self.fate(method, target, headers.get("range", ""))

        if kind == "reset-before":
            reset(cwriter)
            return False, up
        if kind in ("503", "500"):
            await copy_body(creader, None, framing)
            code, why = ("SlowDown", "Please reduce your request rate.") if kind == "503" else (
                "InternalError", "We encountered an internal error. Please try again.")
            await answer(cwriter, int(kind), code, why, client_keep, method)
            return client_keep, up

        # Forwarded: to the upstream connection of this client connection.
        if up is None or up[0].at_eof():
            if up is not None:
                close(up[1])
            try:
                up = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", self.cfg["upstream"], limit=MAX_HEAD * 2),
                    UPSTREAM_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError):
                self.stats["upstream_errors"] += 1
                reset(cwriter)
                return False, None
            self.stats["upstream_connections"] += 1
            set_nodelay(up[1])
        ureader, uwriter = up
        uwriter.write(head)
        await copy_body(creader, uwriter, framing)
        await uwriter.drain()
        try:
            rhead = await asyncio.wait_for(ureader.readuntil(b"\r\n\r\n"), UPSTREAM_TIMEOUT_S)
            rline, rheaders = parse_head(rhead)
            status = int(rline.split(" ", 2)[1])
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                ValueError, IndexError, ConnectionError):
            self.stats["upstream_errors"] += 1
            reset(cwriter)
            reset(uwriter)
            return False, None
        self.stats["forwarded"] += 1
        self.bump("statuses", str(status))
        rframing = ("none", 0) if method == "HEAD" or status in (204, 304) or status < 200 \
            else body_framing(rheaders, request=False)
        upstream_keep = ("close" not in rheaders.get("connection", "").lower()
                         and rframing[0] != "eof")
        if not upstream_keep and rframing[0] != "eof":
            # The server closes its connection after this answer (moto
            # does after every one), but the answer's end is known: keep
            # the client's connection alive, as an object store does, and
            # open a new upstream one for its next request. `Connection`
            # is a hop-by-hop header.
            rhead = drop_header(rhead, b"connection")

        if kind == "delay":
            lo, hi = self.cfg["delay"]
            await asyncio.sleep(lo + frac * (hi - lo))
        has_body = rframing[0] != "none" and not (rframing[0] == "length" and rframing[1] == 0)

        if kind == "reset-head" or (kind in ("reset-body", "truncate") and not has_body):
            cwriter.write(rhead[: max(1, min(len(rhead) - 1, int(frac * len(rhead))))])
            await cwriter.drain()
            if kind == "truncate":
                await finish(cwriter)
            else:
                await asyncio.sleep(SETTLE_S)
                reset(cwriter)
            reset(uwriter)
            return False, None
        if kind == "stall" and not has_body:
            await self.hold(creader)
            reset(uwriter)
            return False, None

        cwriter.write(rhead)
        if kind in ("reset-body", "truncate", "stall"):
            # A part of the body, at least one byte short of its end.
            if rframing[0] == "length":
                await copy_limited(ureader, cwriter, int(frac * rframing[1]))
            else:
                raw = await read_raw_body(ureader, rframing)
                cwriter.write(raw[: int(frac * len(raw))])
            await cwriter.drain()
            if kind == "reset-body":
                await asyncio.sleep(SETTLE_S)
                reset(cwriter)
            elif kind == "truncate":
                await finish(cwriter)
            else:
                await self.hold(creader)
            # The rest of the answer is never read: that upstream
            # connection cannot carry another request.
            reset(uwriter)
            return False, None

        await copy_body(ureader, cwriter, rframing)
        await cwriter.drain()
        if not upstream_keep:
            close(uwriter)
            return client_keep and rframing[0] != "eof", None
        return client_keep, up

    async def hold(self, creader: asyncio.StreamReader) -> None:
        """Send nothing for `hold` seconds, or until the client closes."""
        started = time.monotonic()
        deadline = started + self.cfg["hold"]
        while (left := deadline - time.monotonic()) > 0:
            try:
                data = await asyncio.wait_for(creader.read(PIECE), left)
            except asyncio.TimeoutError:
                break
            except (ConnectionError, OSError):
                data = b""
            if not data:
                waited = time.monotonic() - started
                self.stats["stalls_abandoned"] += 1
                a = self.stats["stall_abandoned_after_s"]
                a["min"] = waited if a["min"] is None else min(a["min"], waited)
                a["max"] = waited if a["max"] is None else max(a["max"], waited)
                a["sum"] += waited
                return
        self.stats["stalls_held"] += 1

    async def control(self, cwriter, target: str, keep: bool) -> None:
        url = urlsplit(target)
        if url.path == "/_proxy/stats":
            body = self.snapshot()
            code = 200
        elif url.path == "/_proxy/count":
            want = parse_qs(url.query).get("path", [""])[-1]
            body, code = {"path": want, "requests": self.paths.get(want, 0)}, 200
        elif url.path == "/_proxy/set":
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                fixed = set(query) - set(SETTABLE)
                if fixed:
                    raise ValueError(f"{', '.join(sorted(fixed))}: not settable here "
                                     f"(only {', '.join(SETTABLE)})")
                new = settings(self.cfg, query)
                if "seed" in query:
                    self.seen.clear()
                self.cfg = new
                body, code = self.public_settings(), 200
            except (ValueError, TypeError) as e:
                body, code = {"error": str(e)}, 400
        else:
            body, code = {"error": f"unknown control path {url.path}"}, 404
        data = json.dumps(body).encode()
        cwriter.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
                      % (code, len(data), b"" if keep else b"Connection: close\r\n") + data)
        await cwriter.drain()

    def write_stats_file(self) -> None:
        if self.cfg["stats_file"]:
            with open(self.cfg["stats_file"], "w") as f:
                json.dump(self.snapshot(), f, indent=1)


# -- HTTP pieces ---------------------------------------------------------


def parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    """(first line, headers with lower-case names; repeated ones joined)."""
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"bad header line {line!r}")
        name = name.strip().lower()
        headers[name] = (headers[name] + ", " if name in headers else "") + value.strip()
    return lines[0], headers


def drop_header(head: bytes, name: bytes) -> bytes:
    """head without its `name` header lines (name in lower case)."""
    lines = head.split(b"\r\n")
    kept = [lines[0]] + [h for h in lines[1:] if h.split(b":", 1)[0].strip().lower() != name]
    return b"\r\n".join(kept)


def body_framing(headers: dict[str, str], request: bool) -> tuple[str, int]:
    """How the body after these headers ends: ("chunked", 0), ("length", n),
    ("eof", 0) (an answer read to the close), or ("none", 0)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked", 0
    if "content-length" in headers:
        n = int(headers["content-length"].split(",")[0])
        if n < 0:
            raise ValueError("negative Content-Length")
        return "length", n
    return ("none", 0) if request else ("eof", 0)


async def copy_limited(reader, writer, n: int) -> None:
    """Copy exactly n bytes (writer None: discard them)."""
    while n > 0:
        data = await reader.readexactly(min(n, PIECE))
        n -= len(data)
        if writer is not None:
            writer.write(data)
            await writer.drain()


async def copy_body(reader, writer, framing: tuple[str, int]) -> None:
    """Copy a whole body as it is on the wire (writer None: discard it)."""
    how, n = framing
    if how == "length":
        await copy_limited(reader, writer, n)
    elif how == "chunked":
        while True:
            line = await reader.readuntil(b"\r\n")
            if writer is not None:
                writer.write(line)
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Trailers, up to the empty line.
                while True:
                    t = await reader.readuntil(b"\r\n")
                    if writer is not None:
                        writer.write(t)
                    if t == b"\r\n":
                        break
                break
            await copy_limited(reader, writer, size + 2)
    elif how == "eof":
        while data := await reader.read(PIECE):
            if writer is not None:
                writer.write(data)
                await writer.drain()
    if writer is not None:
        await writer.drain()


async def read_raw_body(reader, framing: tuple[str, int]) -> bytes:
    """A body of unknown length as it is on the wire, at most MAX_BUFFER bytes."""
    sink = Buffer()
    try:
        await copy_body(reader, sink, framing)
    except BufferFull:
        pass
    return bytes(sink.data)


class BufferFull(Exception):
    pass


class Buffer:
    """A bounded stand-in for a StreamWriter."""

    def __init__(self):
        self.data = bytearray()

    def write(self, b: bytes) -> None:
        self.data += b
        if len(self.data) >= MAX_BUFFER:
            del self.data[MAX_BUFFER:]
            raise BufferFull

    async def drain(self) -> None:
        pass


async def answer(writer, status: int, code: str, message: str, keep: bool, method: str) -> None:
    """An S3-style XML error answer."""
    body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
            b"<RequestId>FAULTPROXY</RequestId><HostId>fault-proxy</HostId></Error>"
            % (code.encode(), message.encode()))
    reason = {400: "Bad Request", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
              503: "Slow Down"}.get(status, "Error")
    length = 0 if method == "HEAD" else len(body)
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {length}\r\nx-amz-request-id: FAULTPROXY\r\n"
            + ("" if keep else "Connection: close\r\n") + "\r\n")
    writer.write(head.encode() + (b"" if method == "HEAD" else body))
    await writer.drain()


def set_nodelay(writer) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def reset(writer) -> None:
    """Close with a reset (RST): SO_LINGER on with a zero timeout."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


def close(writer) -> None:
    try:
        writer.close()
    except (OSError, RuntimeError):
        pass


async def finish(writer) -> None:
    """A clean close (FIN) once what was written has gone."""
    try:
        await writer.drain()
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 5)
    except (OSError, ConnectionError, asyncio.TimeoutError):
        writer.transport.abort()


async def main() -> None:
    cfg = parse_args(sys.argv[1:])
    proxy = Proxy(cfg)

    async def on_client(r, w):
        set_nodelay(w)
        await proxy.client(r, w)

    server = await asyncio.start_server(on_client, "127.0.0.1", 0, limit=MAX_HEAD, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for w in list(proxy.conns):
        w.transport.abort()
    proxy.write_stats_file()
    # Cancel the connection tasks (they end their sockets) before the loop
    # closes, so nothing is left pending.
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main())
