#!/usr/bin/env python3
"""Disk cache benchmark (issue 28, item 7): the 256 MiB array of
bench_remote.py in a local S3 server behind a delay line, read whole
through a `slabfs mount` (`dd bs=1M`):

  - no cache:     a fresh mount without --disk-cache (the baseline);
  - cache, cold:  a fresh mount with an empty --disk-cache (every read a
                  miss: the cost of the cache over no cache);
  - cache, warm:  a fresh mount (a remount) on the cache the cold run
                  filled (every read a hit: what a restart keeps);
  - local disk:   a mount of the same array from the local disk.

The kernel's page cache is dropped before every run (the warm run's
blocks and the local files are read from the disk, not from memory), and
every mount is new (no decoded chunk is in memory). Both the Zarr store
(chunk objects read whole) and bench_hdf5.py's netCDF-4 file (one object
read by ranges) are measured. Targets: warm at least 3x faster than cold
and within 1.3x of the local disk at 20 ms; cold within 5 % of no cache.

Each run also records the machine's busy CPU seconds during the read
(every process: the S3 server, the delay proxy, the daemon, dd), and the
GETs the read made (those of opening the dataset, metadata, excluded: the
disk cache keeps chunks). The write floor is what writing the bytes a cold
run keeps costs this machine alone: the same number of 1 MiB files
written into a directory beside the cache and renamed into place, as the
cache's writer does. The verify floor is the least a warm run's blocks
cost to read and check: `examples/verify_floor.rs` reads every block
file the cold run left (the page cache dropped, every file hinted to the
kernel first) and computes a CRC32C over it, nothing else.

Usage (from the repository root, as root: it mounts):

    .venv/bin/python scripts/bench_disk_cache.py [--size-mib 256] [--reps 3]
        [--latency-ms 20] [--data-dir bench-data] [--scratch DIR]

Markdown on stdout, raw numbers in <data-dir>/disk-cache-results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as lib  # noqa: E402
import bench_remote as br  # noqa: E402

CASES = ("no cache", "cache, cold", "cache, warm", "local disk")


def run(slabfs: Path, source: str, array: str, workdir: Path, extra: tuple[str, ...]) -> dict:
    """A fresh mount of `source`, the page cache dropped, `dd` of `array`."""
    mnt = workdir / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    lib.drop_caches()
    m = lib.Mount(slabfs, source, mnt, array, workdir / "mount.log",
                  extra_args=extra).start(timeout=120)
    def gets() -> int:
        remote = next(iter(((m.stats() or {}).get("remote") or {}).values()), {})
        req = remote.get("requests", {})
        return req.get("GET", 0) + req.get("ranged_GET", 0)

    try:
        opened = gets()
        busy = lib.cpu_busy_s()
        r = lib.run_child(["dd", f"if={m.file}", "of=/dev/null", "bs=1M"], daemon=m)
        r["busy_cpu_s"] = lib.cpu_busy_s() - busy
        r["read_s"] = r["wall_s"]
        st = m.stats() or {}
        r["gets"] = gets() - opened
        r["disk_cache"] = st.get("disk_cache")
        return r
    finally:
        m.stop()


def write_floor(workdir: Path, nbytes: int, reps: int = 5) -> dict:
    """Wall and CPU seconds of writing `nbytes` as 1 MiB files (each
    written to tmp/ and renamed into a directory of its own), the least of
    `reps` tries: what the cache's writer does, without slabfs."""
    import resource
    block = os.urandom(1 << 20)
    n = -(-nbytes // len(block))
    best = {"wall_s": float("inf"), "cpu_s": float("inf")}
    for _ in range(reps):
        d = workdir / "floor"
        shutil.rmtree(d, ignore_errors=True)
        (d / "tmp").mkdir(parents=True)
        lib.drop_caches()
        t0 = time.perf_counter()
        c0 = resource.getrusage(resource.RUSAGE_SELF)
        for i in range(n):
            tmp = d / "tmp" / str(i)
            with open(tmp, "wb") as f:
                f.write(block)
            sub = d / "v1" / f"{i % 256:02x}"
            sub.mkdir(parents=True, exist_ok=True)
            os.rename(tmp, sub / str(i))
        c1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.perf_counter() - t0
        cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        best = {"wall_s": min(best["wall_s"], wall), "cpu_s": min(best["cpu_s"], cpu)}
        shutil.rmtree(d, ignore_errors=True)
    return best


def one_round(slabfs, url, local, array, workdir, endpoint) -> dict:
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    cache = workdir / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    with_cache = ("--disk-cache", str(cache), "--disk-cache-size", "2GiB")
    out = {}
    out["no cache"] = run(slabfs, url, array, workdir, ())
    out["cache, cold"] = run(slabfs, url, array, workdir, with_cache)
    out["cache, warm"] = run(slabfs, url, array, workdir, with_cache)
    lib.drop_caches()
    floor = subprocess.run([str(slabfs.parent / "examples" / "verify_floor"), str(cache)],
                           check=True, capture_output=True, text=True)
    out["verify floor"] = json.loads(floor.stdout)
    out["local disk"] = run(slabfs, str(local), array, workdir, ())
    shutil.rmtree(cache, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--data-dir", type=Path, default=lib.REPO / "bench-data")
    ap.add_argument("--scratch", type=Path,
                    default=Path(tempfile.gettempdir()) / "slabfs-bench-s3")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--skip-venv", action="store_true")
    args = ap.parse_args()
    command = lib.command_line()
    if os.geteuid() != 0:
        lib.fail("run as root: the benchmark mounts and drops the page cache")
    py = lib.use_venv(args.skip_venv, ("numpy", "zarr", "boto3"))
    lib.exit_on_signals()
    data_dir = lib.abs_dir(args.data_dir)
    slabfs = lib.build_slabfs(args.no_build)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--example", "verify_floor"],
                       cwd=lib.REPO, check=True, stdout=subprocess.DEVNULL)
    data = lib.build_field(data_dir, args.size_mib)
    import bench_hdf5
    h5 = bench_hdf5.make_read_data(data_dir / f"hdf5-read-{args.size_mib}", args.size_mib)
    nc4 = h5["files"]["zstd"]
    scratch = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    binary = br.build_s3s_fs(scratch)
    os.environ.update(AWS_ACCESS_KEY_ID=br.KEY_ID, AWS_SECRET_ACCESS_KEY=br.SECRET,
                      AWS_REGION="us-east-1")
    for v in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(v, None)
    objects = scratch / "objects-disk-cache"
    shutil.rmtree(objects, ignore_errors=True)
    server = br.Server(binary, objects, py)
    workdir = Path(tempfile.mkdtemp(prefix="bench-disk-cache-", dir=scratch))
    proxy = br.Proxy(server.port, args.latency_ms, workdir)
    results: dict = {"command": command, "latency_ms": args.latency_ms, "runs": {}}
    datasets = {
        "Zarr (chunk objects)": (f"s3://{br.BUCKET}/{data['store'].name}", data["store"], "field"),
        "netCDF-4 (one object, ranges)": (f"s3://{br.BUCKET}/nc4/{nc4.name}", nc4, "v"),
    }
    try:
        br.upload(server.endpoint, data["store"], data["store"].name)
        br.upload_file(server.endpoint, nc4, f"nc4/{nc4.name}")
        for name, (url, local, array) in datasets.items():
            runs: dict[str, list[dict]] = {c: [] for c in CASES}
            for rep in range(args.reps + 1):
                got = one_round(slabfs, url, local, array, workdir, proxy.endpoint)
                if rep == 0:
                    continue  # warm-up round
                for c in CASES:
                    runs[c].append(got[c])
                runs.setdefault("verify floor", []).append(got["verify floor"])
                lib.log(f"{name} rep {rep}: " + ", ".join(
                    f"{c} {got[c]['read_s']:.2f} s" for c in CASES))
            results["runs"][name] = runs
            kept = statistics.median(r["disk_cache"]["bytes_written"]
                                     for r in runs["cache, cold"])
            results.setdefault("write_floor", {})[name] = dict(
                write_floor(workdir, kept), bytes=kept)
    finally:
        proxy.stop()
        server.stop()
    (data_dir / "disk-cache-results.json").write_text(json.dumps(results, indent=1))
    print(f"# Disk cache at {args.latency_ms:g} ms per request, "
          f"{args.size_mib} MiB read whole (median of {args.reps})\n")
    print("| dataset | " + " | ".join(CASES) + " | warm vs cold | warm vs local | cold vs no cache |")
    print("|---|" + "---:|" * (len(CASES) + 3))
    for name, runs in results["runs"].items():
        med = {c: statistics.median(r["read_s"] for r in runs[c]) for c in CASES}
        print(f"| {name} | " + " | ".join(f"{med[c]:.2f} s" for c in CASES)
              + f" | {med['cache, cold'] / med['cache, warm']:.1f}x faster"
              + f" | {med['cache, warm'] / med['local disk']:.2f}x"
              + f" | {med['cache, cold'] / med['no cache']:.3f}x |")
    print("\n| dataset | busy CPU, no cache | busy CPU, cold | cold - no cache (time) "
          "| write floor (time, CPU) |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in results["runs"].items():
        med = {c: statistics.median(r[k] for r in runs[c])
               for c in ("no cache", "cache, cold") for k in ("read_s",)}
        busy = {c: statistics.median(r["busy_cpu_s"] for r in runs[c])
                for c in ("no cache", "cache, cold")}
        f = results["write_floor"][name]
        print(f"| {name} | {busy['no cache']:.2f} s | {busy['cache, cold']:.2f} s "
              f"| {med['cache, cold'] - med['no cache']:.3f} s "
              f"| {f['wall_s']:.3f} s, {f['cpu_s']:.3f} s ({f['bytes'] / 2**20:.0f} MiB) |")
    print("\n| dataset | warm - local disk (time) | daemon CPU, warm - local "
          "| verify floor (time, CPU) |")
    print("|---|---:|---:|---:|")
    for name, runs in results["runs"].items():
        med = {c: statistics.median(r["read_s"] for r in runs[c]) for c in CASES}
        cpu = {c: statistics.median(r["daemon_cpu_s"] for r in runs[c]) for c in CASES}
        fl = runs["verify floor"]
        print(f"| {name} | {med['cache, warm'] - med['local disk']:.3f} s "
              f"| {cpu['cache, warm'] - cpu['local disk']:.3f} s "
              f"| {statistics.median(f['wall_s'] for f in fl):.3f} s, "
              f"{statistics.median(f['cpu_s'] for f in fl):.3f} s "
              f"({statistics.median(f['bytes'] for f in fl) / 2**20:.0f} MiB) |")
    print("\nGETs of the warm runs' reads (must be 0):",
          {n: [r["gets"] for r in runs["cache, warm"]] for n, runs in results["runs"].items()})


if __name__ == "__main__":
    main()
