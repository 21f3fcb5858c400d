#!/usr/bin/env python3
"""Remote reads under a misbehaving network (issue 29 item 6): the set-up of
tests/it/remote_faults.rs, measured for several fault rates and kinds.

Usage (from the repository root, as root: it mounts):

    .venv/bin/python scripts/bench_remote_faults.py [--seconds 20]
        [--rates 0.1,0.3] [--kinds each,all] [--server moto|s3s-fs]
        [--data-dir bench-data] [--no-build] [--skip-venv]

What it does:

1. The data: the three arrays of tests/fixtures/faults (uint16 (256, 512),
   256 KiB each: bytes + zstd, bytes only, sharded with zstd inner chunks;
   expected bytes from zarr-python), uploaded to a local S3 server: moto
   (default, as the test) or the patched s3s-fs of bench_remote.py
   (`--server s3s-fs`, built once into `--scratch`).
2. The network: tests/servers/fault_proxy.py between slabfs and the
   server. For each point, a fraction of the requests (`--rates`) is
   faulted, of one kind (`--kinds each`: reset-before, reset-head,
   reset-body, truncate, 503, 500, delay, stall, one row each) or of all
   kinds evenly (`all`); stalls are held 8 s (twice the request timeout),
   delays last 0.2-1 s. A 0% point comes first, the reference.
3. For each point, a new mount of the bucket (the release build),
   `--request-timeout 4 --stall-timeout 1 --cache-size 256KiB --refresh 0`
   and the default FUSE threads (one per core); the arrays are read whole
   and checked before the faults start. Then, for `--seconds`:
   - eight reader threads (one process) do random `O_DIRECT` preads,
     page-aligned, 4-64 KiB, seeded, of the three flat files, and check
     every byte against the expected ones;
   - a probe (a process of its own, so the readers' GIL does not time it)
     times three memory-served operations, each about every 100 ms:
     `stat` + `open` + `O_DIRECT` read of a sidecar (`zstd.json`) and a
     `readdir` (one thread), and an `O_DIRECT` re-read of a 4 KiB range of
     the fixture's `probe` array (which the readers never read) read just
     before (its chunk is in the chunk cache; another thread, as that
     first read may need the network). A re-read during which the proxy
     saw a request for its chunk (evicted in between) is not memory-served:
     left out, and counted (`reread_fetched` in the JSON). A thread issues one operation
     at a time: while one waits, no other is issued, so a probe held up
     for seconds is one slow sample among fewer (the percentiles understate
     the waits; the sample count shows it).
   Then the faults stop, and the time until every array reads whole and
   right is measured (recovery).
4. Reported per point: reads completed per second (and as a share of the
   0% point), failed reads (any failure of a reader's pread, by errno),
   wrong or short reads (must be 0), the readers' p50/p99 latency, the
   probe's p50/p99/max, the faults the proxy injected, slabfs's own count
   of retries and stalls (`.slabfs/stats`), and the recovery time. A
   markdown table on stdout and in <data-dir>/remote-faults.md, raw numbers
   in <data-dir>/remote-faults-results.json.

With the defaults (19 points of 20 s) a run takes about 9 minutes.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchlib as lib

REPO = lib.REPO
FIXTURE = REPO / "tests" / "fixtures" / "faults"
PROXY = REPO / "tests" / "servers" / "fault_proxy.py"
KINDS = ("reset-before", "reset-head", "reset-body", "truncate", "503", "500", "delay", "stall")
PAGE = 4096
MAX_PAGES = 16
READERS = 8
PROBE_EVERY_S = 0.1
HOLD_S = 8
MOUNT_FLAGS = ("--request-timeout", "4", "--stall-timeout", "1", "--cache-size", "256KiB",
               "--refresh", "0")
PREFIX = "faults"
BUCKET = "bench"  # bench_remote.py's, which uploads (checked in main)


# --------------------------------------------------------------------------
# workers (run as `bench_remote_faults.py --worker readers|probe ...`)


def load_arrays(mnt: Path) -> list[tuple[str, Path, bytes, int]]:
    """(name, flat file, expected bytes, bytes per object) of every array:
    the readers' three, then the probe's own."""
    manifest = json.loads((FIXTURE / "manifest.json").read_text())
    out = [(e["name"], mnt / "store.zarr" / e["name"], (FIXTURE / e["expected"]).read_bytes(),
            e["chunks"][0] * e["shape"][1] * 2) for e in manifest]
    assert [a[0] for a in out] == ["zstd", "raw", "sharded", "probe"], "tests/fixtures/faults"
    return out


def checked_pread(fd: int, buf: mmap.mmap, offset: int, length: int, expected: bytes) -> str:
    """'ok', 'short', 'wrong' or 'errno N'."""
    view = memoryview(buf)[:length]
    try:
        n = os.preadv(fd, [view], offset)
    except OSError as e:
        return f"errno {e.errno}"
    finally:
        view.release()
    want = expected[offset:offset + length]
    if buf[:n] != want[:n]:
        return "wrong"
    return "short" if n < len(want) else "ok"


def percentiles(ms: list[float]) -> dict:
    if not ms:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    s = sorted(ms)
    at = lambda q: s[min(len(s) - 1, round((len(s) - 1) * q))]  # noqa: E731
    return {"n": len(s), "p50": at(0.5), "p99": at(0.99), "max": s[-1]}


def readers_main(mnt: Path, seconds: float, seed: int, proxy_port: int) -> None:
    arrays = load_arrays(mnt)[:3]
    t0 = time.monotonic()
    deadline = t0 + seconds
    results: list[list] = [[] for _ in range(READERS)]

    def run(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        fds = [os.open(a[1], os.O_RDONLY | os.O_DIRECT) for a in arrays]
        buf = mmap.mmap(-1, MAX_PAGES * PAGE)  # page-aligned, as O_DIRECT wants
        try:
            while time.monotonic() < deadline:
                a = rng.randrange(len(arrays))
                expected = arrays[a][2]
                pages_in_file = len(expected) // PAGE
                pages = rng.randint(1, min(MAX_PAGES, pages_in_file))
                offset = rng.randrange(pages_in_file - pages + 1) * PAGE
                start = time.monotonic()
                outcome = checked_pread(fds[a], buf, offset, pages * PAGE, expected)
                end = time.monotonic()
                results[i].append((end, (end - start) * 1e3, outcome))
        finally:
            for fd in fds:
                os.close(fd)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(READERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [r for rs in results for r in rs]
    ok = [lat for end, lat, o in done if o == "ok" and end <= deadline]
    failed: dict[str, int] = {}
    for _, _, o in done:
        if o != "ok":
            failed[o] = failed.get(o, 0) + 1
    print(json.dumps({
        "seconds": seconds,
        "reads_ok": len(ok),
        "reads_per_s": len(ok) / seconds,
        "outcomes": failed,
        "failed": sum(v for k, v in failed.items() if k.startswith("errno")),
        "wrong": failed.get("wrong", 0),
        "short": failed.get("short", 0),
        "latency_ms": percentiles(ok),
        "drained_s": time.monotonic() - deadline,
    }))


def proxy_count(port: int, path: str) -> int:
    """Requests the fault proxy has seen for the object at path."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/_proxy/count?path=" + path)
    n = json.loads(c.getresponse().read())["requests"]
    c.close()
    return n


def probe_main(mnt: Path, seconds: float, seed: int, proxy_port: int) -> None:
    """Two threads, each every 100 ms: one times a sidecar's stat + open +
    read and a readdir; the other reads a random 4 KiB range of the probe's
    array (untimed: it may need the network, which is why it has a thread
    of its own) and times reading it again (its chunk is in the cache now,
    unless the readers' chunks evicted it in between: then the proxy sees a
    request for it, nobody else reads that array, and the sample is left
    out, counted in `reread_fetched`)."""
    probe_name, probe_path, probe_expected, probe_object = load_arrays(mnt)[3]
    d = mnt / "store.zarr"
    sidecar = d / "zstd.json"
    sidecar_bytes = sidecar.read_bytes()
    listing = sorted(os.listdir(d))
    samples: dict[str, list[float]] = {k: [] for k in ("sidecar", "readdir", "reread")}
    errors: list[str] = []
    prep_failed = [0]
    fetched = [0]
    deadline = time.monotonic() + seconds

    def timed(what: str, f) -> None:
        start = time.monotonic()
        try:
            err = f()
        except OSError as e:
            err = str(e)
        samples[what].append((time.monotonic() - start) * 1e3)
        if err:
            errors.append(f"{what}: {err}")

    def metadata() -> None:
        buf = mmap.mmap(-1, PAGE)

        def read_sidecar():
            if os.stat(sidecar).st_size != len(sidecar_bytes):
                return "stat: size"
            fd = os.open(sidecar, os.O_RDONLY | os.O_DIRECT)
            try:
                o = checked_pread(fd, buf, 0, PAGE, sidecar_bytes)
            finally:
                os.close(fd)
            return None if o == "ok" else o

        def readdir():
            return None if sorted(os.listdir(d)) == listing else "listing"

        while (now := time.monotonic()) < deadline:
            timed("sidecar", read_sidecar)
            timed("readdir", readdir)
            time.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - now)))

    def reread() -> None:
        rng = random.Random(seed ^ 0x5EED)
        fd = os.open(probe_path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, PAGE)
        while (now := time.monotonic()) < deadline:
            offset = rng.randrange(len(probe_expected) // PAGE) * PAGE
            if checked_pread(fd, buf, offset, PAGE, probe_expected) == "ok":
                obj = f"/{BUCKET}/{PREFIX}/store.zarr/{probe_name}/c/{offset // probe_object}/0"
                before = proxy_count(proxy_port, obj)
                timed("reread", lambda: (lambda o: None if o == "ok" else o)(
                    checked_pread(fd, buf, offset, PAGE, probe_expected)))
                if proxy_count(proxy_port, obj) > before:
                    samples["reread"].pop()
                    fetched[0] += 1
            else:
                prep_failed[0] += 1
            time.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - now)))
        os.close(fd)

    threads = [threading.Thread(target=f) for f in (metadata, reread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [x for v in samples.values() for x in v]
    print(json.dumps({
        "all_ms": percentiles(every),
        "by_kind_ms": {k: percentiles(v) for k, v in samples.items()},
        "errors": errors[:20],
        "error_count": len(errors),
        "prep_failed": prep_failed[0],
        "reread_fetched": fetched[0],
    }))


# --------------------------------------------------------------------------
# the proxy and the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FaultProxy:
    def __init__(self, upstream: int, py: Path, seed: int, workdir: Path):
        self.stats_file = workdir / "proxy-stats.json"
        self.proc = subprocess.Popen(
            [str(py), str(PROXY), str(upstream), "--seed", str(seed), "--hold", str(HOLD_S),
             "--stats-file", str(self.stats_file)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.port = int(self.proc.stdout.readline())

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def control(self, path: str) -> dict:
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/_proxy/" + path)
        r = c.getresponse()
        body = json.loads(r.read())
        c.close()
        if r.status != 200:
            lib.fail(f"fault proxy {path}: {body}")
        return body

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def read_whole(path: Path, size: int) -> bytes | None:
    """The whole file with O_DIRECT, or None if the read fails."""
    buf = mmap.mmap(-1, (size + PAGE - 1) // PAGE * PAGE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return None
    try:
        n = os.preadv(fd, [buf], 0)
        return buf[:n]
    except OSError:
        return None
    finally:
        os.close(fd)


def recover(arrays, bound_s: float = 30.0) -> dict:
    """Time until every array reads whole and right (failed reads tried
    again every 100 ms, up to bound_s); wrong bytes end it at once."""
    t0 = time.monotonic()
    for name, path, expected, _ in arrays:
        while True:
            got = read_whole(path, len(expected))
            if got == expected:
                break
            if got is not None:
                return {"ok": False, "why": f"{name}: wrong bytes", "s": time.monotonic() - t0}
            if time.monotonic() - t0 > bound_s:
                return {"ok": False, "why": f"{name}: still failing", "s": time.monotonic() - t0}
            time.sleep(0.1)
    return {"ok": True, "s": time.monotonic() - t0}


# --------------------------------------------------------------------------
# one point


def run_point(slabfs: Path, py: Path, url: str, proxy: FaultProxy, workdir: Path, rate: float,
              kinds: str, seconds: float, seed: int, mount_args: list[str]) -> dict:
    mnt = workdir / "mnt"
    mnt.mkdir(exist_ok=True)
    proxy.control(f"set?rate=0&kinds=all&budget=-1&seed={seed}")
    m = lib.Mount(slabfs, url, mnt, "store.zarr/zstd",
                  workdir / f"daemon-{kinds}-{rate:g}.log",
                  extra_args=("--endpoint-url", proxy.endpoint, *MOUNT_FLAGS,
                              *mount_args)).start(timeout=60)
    try:
        arrays = load_arrays(mnt)
        for name, path, expected, _ in arrays:
            if read_whole(path, len(expected)) != expected:
                lib.fail(f"{name}: the fault-free read through the mount differs")
        before = proxy.control("stats")
        proxy.control(f"set?rate={rate}&kinds={kinds}&hold={HOLD_S}")
        script = str(Path(__file__).resolve())
        common = [str(mnt), str(seconds), str(seed), str(proxy.port)]
        procs = {w: subprocess.Popen([str(py), script, "--worker", w, *common],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
                 for w in ("readers", "probe")}
        out = {}
        for w, p in procs.items():
            text, _ = p.communicate()
            if p.returncode != 0:
                lib.fail(f"the {w} worker failed with status {p.returncode}")
            out[w] = json.loads(text.decode().strip().splitlines()[-1])
        proxy.control("set?rate=0")
        after = proxy.control("stats")
        rec = recover(arrays)
        stats = m.stats() or {}
        remote = next(iter(stats.get("remote", {}).values()), {})
    finally:
        m.stop()
    faults = {k: after["faults"][k] - before["faults"][k] for k in KINDS}
    return {
        "rate": rate, "kinds": kinds, "seconds": seconds,
        "readers": out["readers"], "probe": out["probe"],
        "requests": after["requests"] - before["requests"],
        "faults": faults, "faults_total": sum(faults.values()),
        "stalls_abandoned": after["stalls_abandoned"] - before["stalls_abandoned"],
        "slabfs_retries": remote.get("retries"), "slabfs_stalls": remote.get("stalls"),
        "slabfs_errors": remote.get("errors"),
        "recovery": rec,
    }


# --------------------------------------------------------------------------
# report


def fmt_ms(x) -> str:
    if x is None:
        return "–"
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def table(points: list[dict]) -> str:
    base = next((p for p in points if p["rate"] == 0), None)
    base_rps = base["readers"]["reads_per_s"] if base else None
    rows = ["| faulted | kind | reads/s | of 0% | failed reads | wrong or short | "
            "read p50 / p99 ms | probe ops | probe p50 / p99 / max ms | faults injected | "
            "slabfs retries / stalls | recovery s |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in points:
        r, pr = p["readers"], p["probe"]["all_ms"]
        share = f"{100 * r['reads_per_s'] / base_rps:.0f}%" if base_rps else "–"
        rec = p["recovery"]
        rows.append(
            f"| {100 * p['rate']:.0f}% | {p['kinds'] if p['rate'] else '–'} "
            f"| {r['reads_per_s']:.1f} | {share} | {r['failed']} | {r['wrong'] + r['short']} "
            f"| {fmt_ms(r['latency_ms']['p50'])} / {fmt_ms(r['latency_ms']['p99'])} "
            f"| {pr['n']} | {fmt_ms(pr['p50'])} / {fmt_ms(pr['p99'])} / {fmt_ms(pr['max'])} "
            f"| {p['faults_total']} of {p['requests']} "
            f"| {p['slabfs_retries']} / {p['slabfs_stalls']} "
            f"| {rec['s']:.1f}{'' if rec['ok'] else ' (' + rec['why'] + ')'} |")
    return "\n".join(rows)


# --------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        what, mnt, seconds, seed, port = (sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]),
                                          int(sys.argv[5]), int(sys.argv[6]))
        (readers_main if what == "readers" else probe_main)(mnt, seconds, seed, port)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="per point (default 20)")
    ap.add_argument("--rates", default="0.1,0.3",
                    help="faulted fractions, comma-separated (a 0%% point always comes first)")
    ap.add_argument("--kinds", default="each,all",
                    help="'each' (one row per kind), 'all' (all kinds mixed) or kinds, "
                         "comma-separated (default each,all)")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--mount-args", default="",
                    help="more `slabfs mount` options for every point, e.g. '--threads 16'")
    ap.add_argument("--server", choices=("moto", "s3s-fs"), default="moto",
                    help="the S3 server: moto (as tests/it/remote_faults.rs) or bench_remote.py's "
                         "patched s3s-fs (built once into --scratch)")
    ap.add_argument("--scratch", type=Path,
                    default=Path(tempfile.gettempdir()) / "slabfs-bench-s3",
                    help="where s3s-fs is built and keeps its objects")
    ap.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    ap.add_argument("--idle-wait", type=float, default=10.0,
                    help="before each point, wait up to this long for an idle machine")
    ap.add_argument("--no-build", action="store_true", help="use the existing target/release/slabfs")
    ap.add_argument("--skip-venv", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        lib.fail("run as root: the benchmark mounts")
    command = lib.command_line()
    py = lib.use_venv(args.skip_venv, ("boto3",))
    lib.require_tools("fusermount3")
    lib.exit_on_signals()
    import bench_remote as br
    assert br.BUCKET == BUCKET

    kinds: list[str] = []
    for k in args.kinds.split(","):
        if k == "each":
            kinds += list(KINDS)
        elif k == "all" or k in KINDS:
            kinds.append(k)
        else:
            lib.fail(f"unknown kind {k}; known: each, all, {', '.join(KINDS)}")
    rates = [float(r) for r in args.rates.split(",") if float(r) > 0]
    plan = [(0.0, "all")] + [(r, k) for r in rates for k in kinds]
    lib.log(f"{len(plan)} points of {args.seconds:g} s")

    data_dir = lib.abs_dir(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    built = lib.build_slabfs(args.no_build)
    slabfs, workdir = lib.private_binary(built, "slabfs-bench-faults-")
    scratch = args.scratch.resolve()
    binary = None
    if args.server == "s3s-fs":
        scratch.mkdir(parents=True, exist_ok=True)
        binary = br.build_s3s_fs(scratch)
    os.environ.update(AWS_ACCESS_KEY_ID=br.KEY_ID, AWS_SECRET_ACCESS_KEY=br.SECRET,
                      AWS_REGION="us-east-1")
    for v in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(v, None)
    objects = workdir / "objects"
    server = br.Server(binary, objects, py)
    proxy = None
    points: list[dict] = []
    try:
        n = br.upload(server.endpoint, FIXTURE / "store.zarr", f"{PREFIX}/store.zarr")
        lib.log(f"uploaded {n} objects to {server.endpoint}/{BUCKET}/{PREFIX}")
        proxy = FaultProxy(server.port, py, args.seed, workdir)
        url = f"s3://{BUCKET}/{PREFIX}"
        for rate, kind in plan:
            lib.wait_idle(args.idle_wait)
            p = run_point(slabfs, py, url, proxy, workdir, rate, kind, args.seconds, args.seed,
                          shlex.split(args.mount_args))
            r, pr = p["readers"], p["probe"]["all_ms"]
            lib.log(f"{100 * rate:.0f}% {kind}: {r['reads_per_s']:.1f} reads/s, failed {r['failed']}, "
                    f"wrong {r['wrong']}, short {r['short']}; probe p50 {fmt_ms(pr['p50'])} "
                    f"p99 {fmt_ms(pr['p99'])} max {fmt_ms(pr['max'])} ms; "
                    f"{p['faults_total']} faults; recovery {p['recovery']['s']:.1f} s")
            points.append(p)
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    hdr, machine, versions = lib.header_lines(command, built)
    text = "\n".join(hdr) + (
        f"\n\nServer: {args.server}; {args.seconds:g} s per point; mount flags "
        f"`{' '.join(MOUNT_FLAGS + tuple(shlex.split(args.mount_args)))}`"
        f"{'' if '--threads' in args.mount_args else ', default threads'}; "
        f"stalls held {HOLD_S} s, delays 0.2-1 s; "
        f"seed {args.seed}.\n\n" + table(points) + "\n")
    print()
    print(text)
    (data_dir / "remote-faults.md").write_text(text)
    lib.write_json(data_dir / "remote-faults-results.json",
                   {"command": command, "machine": machine, "versions": versions,
                    "server": args.server, "points": points})


if __name__ == "__main__":
    main()
