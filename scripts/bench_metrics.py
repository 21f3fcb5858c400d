#!/usr/bin/env python3
"""What the metrics cost on the read path: the 256 MiB benchmark array read
through a mount without and with `--metrics`, the endpoint scraped every
second meanwhile.

Usage (from the repository root):

    .venv/bin/python scripts/bench_metrics.py [--size-mib 256] [--reps 7] \
        [--baseline PATH/TO/slabfs]

The data is bench_read.py's (benchlib.build_field, cached in --data-dir): a
float32 Zarr v3 array (N, 1024, 1024), chunks (1, 512, 512) = 1 MiB, bytes +
zstd. Contenders:

- `no metrics`: `slabfs mount` as it runs by default. Its requests are
  counted all the same (the counters of `.slabfs/stats`, which the endpoint
  only reads), so this is the cost of everything but the endpoint;
- `--metrics`: the same with `--metrics 127.0.0.1:PORT`, and this script
  scraping http://127.0.0.1:PORT/metrics every --scrape-interval seconds
  (default 1 s: fifteen times Prometheus's default) for as long as the mount
  lives, so the scrapes' rendering is in the daemon's CPU;
- `baseline` (with --baseline): a slabfs binary built from before the
  metrics (no per-operation or per-codec counters at all), for the cost of
  the counting itself.

Each round (after --warmup discarded ones) runs every contender, in an order
rotated from round to round, each on a NEW mount (kernel page cache and chunk
cache cold; the store's files stay in the page cache), one fresh process per
step:

  1. `dd if=MNT/field of=/dev/null bs=1M`: the first read (every chunk
     fetched and decoded);
  2. the file's pages dropped (posix_fadvise DONTNEED), `dd` again: the
     re-read (what the chunk cache kept, the rest decoded again);
  3. --random-reads (20,000) random 4 KiB preads, twice: once untimed (the
     chunks they touch decoded into the chunk cache, where piecemeal reads
     leave them), then timed, the file's pages dropped first: one FUSE
     request each, answered from the chunk cache, so the daemon's CPU is
     the per-request cost, where counting requests shows most. (The median
     latency of a run is bimodal on a 2-core machine, about 22 or 55 µs, by
     where the scheduler puts the reader and the daemon's threads: the
     daemon's CPU per request is the steadier figure.)

Timed: each step's wall time and the daemon's CPU during it (its threads'
/proc/PID/task/*/schedstat, in nanoseconds). Each step waits
for the machine to be idle and is redone when other processes used more than
--max-foreign of the CPU during it (scripts/benchlib.py). The bytes read
through each contender's mount are checked against the raw file (sha256)
before timing, and every random read's bytes too. Prints Markdown tables and
the ratios (--metrics over no metrics, no metrics over the baseline);
writes the raw numbers to <data-dir>/results-metrics.json. The figures are
in docs/OPERATIONS.md, "Metrics".
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import threading
import time
from pathlib import Path

import benchlib as lib
from benchlib import log

MIB = lib.MIB


class Scraper:
    """GET /metrics at `addr` every `interval` seconds on a thread, until
    stopped; keeps each scrape's time and size."""

    def __init__(self, port: int, interval: float):
        self.port, self.interval = port, interval
        self.times: list[float] = []
        self.sizes: list[int] = []
        self.failures = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self) -> "Scraper":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join()

    def scrape(self) -> None:
        t0 = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                s.sendall(b"GET /metrics HTTP/1.0\r\nHost: slabfs\r\n\r\n")
                chunks = []
                while True:
                    b = s.recv(1 << 16)
                    if not b:
                        break
                    chunks.append(b)
            answer = b"".join(chunks)
            if not answer.startswith(b"HTTP/1.0 200") and not answer.startswith(b"HTTP/1.1 200"):
                raise OSError(answer[:80])
            self.times.append(time.perf_counter() - t0)
            self.sizes.append(len(answer))
        except OSError as e:
            self.failures += 1
            log(f"scrape failed: {e}")

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self.scrape()


def threads_cpu_ns(pid: int) -> int:
    """CPU time of every live thread of pid, in nanoseconds (the first field
    of /proc/PID/task/*/schedstat): finer than the clock ticks of
    /proc/PID/stat, which are 10 ms, as long as no thread exits meanwhile
    (a local mount's threads live as long as it)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bench:
    def __init__(self, args, py: Path, data: dict, workdir: Path, contenders: list[dict]):
        self.args, self.py, self.data, self.workdir = args, py, data, workdir
        self.contenders = contenders
        self.res: dict[str, dict[str, list[dict]]] = {c["key"]: {} for c in contenders}
        self.scrapes: list[float] = []
        self.scrape_sizes: list[int] = []
        self.scrape_failures = 0
        self.redone = 0
        self.count = 0

    def mount(self, c: dict) -> tuple[lib.Mount, int | None]:
        self.count += 1
        port = free_port() if c["metrics"] else None
        extra = ("--metrics", f"127.0.0.1:{port}") if port else ()
        m = lib.Mount(c["slabfs"], self.data["store"], self.workdir / "mnt", self.data["array"],
                      self.workdir / f"daemon-{self.count:03d}-{c['key']}.log",
                      threads=self.args.threads, extra_args=extra)
        return m.start(), port

    def step(self, c: dict, what: str, tag: str, keep: bool, run) -> dict:
        def attempt(_):
            lib.wait_idle(self.args.idle_wait)
            return run()

        def describe(r):
            extra = f" median {r['lat']['median_us']:.1f}us" if "lat" in r else ""
            return (f"[{tag}] {c['name']:<12} {what:<10} {r['wall_s']:.3f}s "
                    f"daemon {r['daemon_cpu_s']:.2f}s{extra} other-load {r['foreign']:.0%}")

        r, redone = lib.redo_while_busy(attempt, self.args, describe, keep=keep)
        self.redone += redone
        if keep:
            self.res[c["key"]].setdefault(what, []).append(r)
        return r

    def dd(self, m: lib.Mount) -> dict:
        c0 = threads_cpu_ns(m.pid)
        r = lib.run_child(["dd", f"if={m.file}", "of=/dev/null", "bs=1M", "status=none"],
                          daemon=m)
        r["daemon_cpu_ns"] = threads_cpu_ns(m.pid) - c0
        return r

    def drop_pages(self, m: lib.Mount) -> None:
        fd = os.open(m.file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def pread(self, m: lib.Mount) -> dict:
        a, d = self.args, self.data
        c0 = threads_cpu_ns(m.pid)
        r = lib.run_child([str(self.py), "-c", lib.PREAD_CHILD, str(m.file),
                           str(m.mnt / ".slabfs" / "stats"), str(d["nbytes"]),
                           str(a.random_reads), str(a.seed)], daemon=m, capture=True)
        # The child reads .slabfs/stats three times too: a handful of
        # requests among the --random-reads.
        r["daemon_cpu_ns"] = threads_cpu_ns(m.pid) - c0
        return lib.check_random_reads(r, self.random_sha, "pread")

    def verify(self) -> None:
        d = self.data
        want = lib.sha_file(d["raw"])
        self.random_sha = lib.random_pages_sha(d["raw"], d["nbytes"], self.args.random_reads,
                                               self.args.seed)
        for c in self.contenders:
            m, port = self.mount(c)
            try:
                if lib.sha_file(m.file) != want:
                    lib.fail(f"{c['name']}: bytes read through the mount differ from the raw file")
                if port:
                    s = Scraper(port, 1.0)
                    s.scrape()
                    if s.failures or not s.sizes:
                        lib.fail(f"{c['name']}: the metrics endpoint does not answer")
            finally:
                m.stop()
        log("the bytes read through every contender's mount match the raw file (sha256)")

    def round(self, rep: int) -> None:
        keep = rep >= 0
        tag = "warmup" if rep < 0 else f"rep {rep + 1}/{self.args.reps}"
        n = len(self.contenders)
        order = [self.contenders[(i + max(rep, 0)) % n] for i in range(n)]
        for c in order:
            m, port = self.mount(c)
            scraper = Scraper(port, self.args.scrape_interval) if port else None
            try:
                if scraper:
                    scraper.__enter__()
                self.step(c, "first", tag, keep, lambda: self.dd(m))
                self.step(c, "re-read", tag, keep, lambda: (self.drop_pages(m), self.dd(m))[1])
                self.pread(m)  # untimed: the chunks it touches into the cache
                self.step(c, "random", tag, keep, lambda: self.pread(m))
            finally:
                if scraper:
                    scraper.__exit__(None, None, None)
                    if keep:
                        self.scrapes += scraper.times
                        self.scrape_sizes += scraper.sizes
                        self.scrape_failures += scraper.failures
                m.stop()

    def report(self, header: list[str]) -> dict:
        a, d = self.args, self.data
        mib = d["nbytes"] / MIB
        out = header + ["", f"Data: {d['shape']} float32, chunks {d['chunks']}, "
                            f"{mib:.0f} MiB, {d['ratio']:.2f}x compressed (bytes + zstd)", ""]
        rows = ["| contender | first read: median (s) | min–max | MiB/s | daemon CPU (s) "
                "| re-read: median (s) | daemon CPU (s) | random 4 KiB pread: latency, mean "
                "of the runs' medians (µs) | daemon CPU per pread (µs) |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        stats = {}
        for c in self.contenders:
            r = self.res[c["key"]]
            first = lib.summary([x["wall_s"] for x in r["first"]])
            first_cpu = statistics.median(x["daemon_cpu_ns"] / 1e9 for x in r["first"])
            again = lib.summary([x["wall_s"] for x in r["re-read"]])
            again_cpu = statistics.median(x["daemon_cpu_ns"] / 1e9 for x in r["re-read"])
            rnd = statistics.mean(x["lat"]["median_us"] for x in r["random"])
            per_req = statistics.median(x["daemon_cpu_ns"] / x["daemon_requests"] / 1e3
                                        for x in r["random"])
            stats[c["key"]] = {"first": first, "first_cpu": first_cpu, "again": again,
                               "again_cpu": again_cpu, "random_median_us": rnd,
                               "random_cpu_us": per_req}
            rows.append(f"| {c['name']} | {first['median']:.3f} | {first['min']:.3f}–"
                        f"{first['max']:.3f} | {mib / first['median']:.0f} | {first_cpu:.3f} "
                        f"| {again['median']:.3f} | {again_cpu:.3f} | {rnd:.1f} "
                        f"| {per_req:.1f} |")
        out += [f"Each step on a new mount per contender and round, {a.reps} rounds "
                f"(+{a.warmup} warm-up), contenders interleaved:", ""] + rows + [""]
        ratios = ["| ratio (> 1: slower, or more CPU) | first read | daemon CPU "
                  "| re-read | daemon CPU | random pread latency | daemon CPU per pread |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        base = stats["plain"]
        for key, label in (("metrics", "--metrics (scraped every "
                            f"{a.scrape_interval:g} s) / no metrics"),
                           ("baseline", "no metrics / baseline (before the counters)")):
            if key not in stats:
                continue
            s = stats[key]
            # baseline: how much the counting costs, so no metrics over it.
            num, den = (s, base) if key == "metrics" else (base, s)
            ratios.append(
                f"| {label} | {num['first']['median'] / den['first']['median']:.3f} "
                f"| {num['first_cpu'] / den['first_cpu']:.3f} "
                f"| {num['again']['median'] / den['again']['median']:.3f} "
                f"| {num['again_cpu'] / den['again_cpu']:.3f} "
                f"| {num['random_median_us'] / den['random_median_us']:.3f} "
                f"| {num['random_cpu_us'] / den['random_cpu_us']:.3f} |")
        out += ratios + [""]
        if self.scrapes:
            sc = lib.summary(self.scrapes)
            out.append(f"Scrapes during the timed --metrics runs: {len(self.scrapes)}, "
                       f"{self.scrape_failures} failed; each {sc['median'] * 1e3:.1f} ms median "
                       f"({sc['min'] * 1e3:.1f}–{sc['max'] * 1e3:.1f}), "
                       f"{statistics.median(self.scrape_sizes) / 1024:.0f} KiB.")
        worst = max(x["foreign"] for per in self.res.values() for rs in per.values() for x in rs)
        out.append(f"Other processes' CPU during kept runs: at most {worst:.0%} of the machine; "
                   f"{self.redone} run(s) redone because others were busy.")
        print("\n".join(out))
        return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256, help="array size (default 256)")
    ap.add_argument("--baseline", type=Path,
                    help="a slabfs binary from before the metrics, run as a third contender")
    ap.add_argument("--scrape-interval", type=float, default=1.0,
                    help="seconds between scrapes of the --metrics contender (default 1)")
    ap.add_argument("--random-reads", type=int, default=20000,
                    help="random 4 KiB preads per round (default 20000)")
    ap.add_argument("--seed", type=int, default=7, help="of the random offsets (default 7)")
    ap.add_argument("--threads", type=int, help="`slabfs mount --threads` (default: its own)")
    lib.add_common_args(ap, reps=7, cold=False, perf=None)
    args = ap.parse_args()
    lib.exit_on_signals()
    lib.require_tools("dd", "fusermount3")
    py = lib.use_venv(args.skip_venv, ("numpy", "zarr"))
    built = lib.build_slabfs(args.no_build)
    slabfs, workdir = lib.private_binary(built, "slabfs-bench-metrics-")
    contenders = [
        {"key": "plain", "name": "no metrics", "slabfs": slabfs, "metrics": False},
        {"key": "metrics", "name": "--metrics", "slabfs": slabfs, "metrics": True},
    ]
    if args.baseline:
        base = workdir / "slabfs-baseline"
        base.write_bytes(args.baseline.read_bytes())
        base.chmod(0o755)
        contenders.append({"key": "baseline", "name": "baseline", "slabfs": base,
                           "metrics": False})
    data = lib.build_field(lib.abs_dir(args.data_dir), args.size_mib)
    header, machine, versions = lib.header_lines(lib.command_line(), slabfs)
    bench = Bench(args, py, data, workdir, contenders)
    bench.verify()
    for rep in range(-args.warmup, args.reps):
        bench.round(rep)
    stats = bench.report(header)
    lib.write_json(lib.abs_dir(args.data_dir) / "results-metrics.json", {
        "machine": machine, "versions": versions, "args": vars(args), "stats": stats,
        "runs": bench.res, "scrape_s": bench.scrapes, "scrape_bytes": bench.scrape_sizes,
    })


if __name__ == "__main__":
    main()
