#!/usr/bin/env python3
"""Archive-scale benchmark: what an idle `slabfs mount` of many small
netCDF-3 files costs (issue 16, item 4). Results: docs/perf/archive-scale.md.

Usage (from the repository root, as root so the daemon's descriptor limit
can be raised):

    .venv/bin/python scripts/bench_archive_scale.py --files 1000 20000 100000 \
        --binary after=target/release/slabfs [--binary before=/tmp/slabfs-old] \
        [--idle 60] [--data-dir /tmp/slabfs-archive] [-- EXTRA MOUNT ARGS]

For each file count N it makes (once, cached in --data-dir) a directory of
N classic netCDF files (CDF-1, one float32 variable `v` of 16 elements),
1,000 per sub-directory (`d000/f000000.nc`), written straight from their
byte layout with NumPy so 100,000 files take seconds. Then, for each
--binary, one fresh process each:

  1. `slabfs mount DATA MNT` (foreground child, default flags plus the extra
     arguments) with RLIMIT_NOFILE raised to --nofile (the daemon keeps one
     descriptor per netCDF file open; see the report);
  2. mount time: from the spawn until a full `os.walk` of MNT lists all N
     variables (`.../f000000.nc/v`), polled every 0.2 s;
  3. idle CPU: once the daemon's first refresh pass is done (`runs` >= 1 in
     `.slabfs/stats`: for a watched mount the catch-up walk right after the
     watches are set, for a walked one the first periodic walk) and
     --settle seconds more, the daemon's utime+stime from /proc/PID/stat
     over --idle seconds, as % of one core, and the refresh passes in that
     window; nothing touches the mount meanwhile;
  4. memory: VmRSS and VmHWM from /proc/PID/status, and the daemon's own
     `.slabfs/stats` refresh counters;
  5. issue 26's figures, taken on the fresh mount before the walk of 2.:
     ready (the mount point answers), `ls -l` of one random dataset's
     directory, the first read of another random file, RSS after reading
     1,000 random files whole, `find MNT -type f | wc -l` and RSS after
     it; after the idle window: a file added to the source (written
     aside, renamed in): seconds until the mount shows it and the
     daemon's CPU meanwhile;
  6. `fusermount3 -u MNT`, and the daemon must exit 0.

--s3 serves the same archive from a local S3 server (s3s-fs, built once
by scripts/bench_remote.py into its --scratch directory; the archive is
hard-linked into the server's bucket `bench`, so the files are the same)
and mounts `s3://bench/KIND-N` through it; a file added is a file written
into the server's directory, i.e. a new object.

--kind zarr makes N single-array Zarr v2 stores instead (a directory with
`.zarray` and one chunk file each): they hold no descriptor open, so they
reach 100,000 datasets under any descriptor limit, and each is one
directory, hence one inotify watch.

Prints a Markdown table and writes the numbers to
DATA-DIR/results-KIND.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

PER_DIR = 1000
NELEMS = 16


def pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def name(s: str) -> bytes:
    e = s.encode()
    return np.array([len(e)], ">i4").tobytes() + pad4(e)


def netcdf3_bytes(values: np.ndarray) -> bytes:
    """A CDF-1 file: dimension x(NELEMS), float variable v(x)."""
    i4 = lambda *v: np.array(v, ">i4").tobytes()  # noqa: E731
    head = b"CDF\x01" + i4(0)
    head += i4(0x0A, 1) + name("x") + i4(NELEMS)  # dimensions
    head += i4(0, 0)  # no global attributes
    var = i4(0x0B, 1) + name("v") + i4(1, 0) + i4(0, 0) + i4(5, NELEMS * 4)
    begin = len(head) + len(var) + 4
    return head + var + i4(begin) + values.astype(">f4").tobytes()


ZARRAY = json.dumps(
    {
        "zarr_format": 2,
        "shape": [NELEMS],
        "chunks": [NELEMS],
        "dtype": "<f4",
        "compressor": None,
        "fill_value": 0,
        "order": "C",
        "filters": None,
    }
)


def make_archive(root: str, n: int, kind: str) -> None:
    done = os.path.join(root, ".complete")
    if os.path.exists(done):
        return
    os.makedirs(root, exist_ok=True)
    t0 = time.time()
    base = np.arange(NELEMS, dtype="f4")
    for i in range(n):
        d = os.path.join(root, f"d{i // PER_DIR:03d}")
        if i % PER_DIR == 0:
            os.makedirs(d, exist_ok=True)
        if kind == "netcdf":
            with open(os.path.join(d, f"f{i:06d}.nc"), "wb") as f:
                f.write(netcdf3_bytes(base + i))
        else:
            store = os.path.join(d, f"s{i:06d}.zarr")
            os.mkdir(store)
            with open(os.path.join(store, ".zarray"), "w") as f:
                f.write(ZARRAY)
            with open(os.path.join(store, "0"), "wb") as f:
                f.write((base + i).astype("<f4").tobytes())
    open(done, "w").close()
    print(f"made {n} files in {time.time() - t0:.1f} s", file=sys.stderr)


def listed(mnt: str, kind: str) -> int:
    """The arrays a full walk of the mount lists."""
    count = 0
    for _, dirs, files in os.walk(mnt):
        if ".slabfs" in dirs:
            dirs.remove(".slabfs")
        if kind == "netcdf":
            count += sum(1 for f in files if f == "v")
        else:
            count += sum(1 for f in files if f.endswith(".zarr"))
    return count


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)


def status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                out[k] = int(v.split()[0])
    return out


def run_one(binary: str, data: str, mnt: str, n: int, args: argparse.Namespace) -> dict:
    os.makedirs(mnt, exist_ok=True)
    log_name = f"daemon-{args.kind}-{n}-{os.path.basename(binary)}.log"
    log = open(os.path.join(args.data_dir, log_name), "w")

    def limits() -> None:
        # Raising the hard limit needs CAP_SYS_RESOURCE; without it, the
        # most the soft limit can be is the hard one.
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        want = args.nofile if hard == resource.RLIM_INFINITY else min(args.nofile, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    source = data
    extra = list(args.extra)
    if args.server is not None:
        source = f"s3://{args.bucket}/{os.path.basename(data)}"
        extra += ["--endpoint-url", args.server.endpoint]
    t0 = time.monotonic()
    p = subprocess.Popen(
        [binary, "mount", source, mnt, *extra],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        preexec_fn=limits,
    )
    rng = np.random.default_rng(26)

    def dataset(i: int) -> str:
        name = f"f{i:06d}.nc" if args.kind == "netcdf" else f"s{i:06d}.zarr"
        return os.path.join(mnt, f"d{i // PER_DIR:03d}", name)

    def array(i: int) -> str:
        # A netCDF file's variable `v`; a single-array Zarr store is a file.
        return os.path.join(dataset(i), "v") if args.kind == "netcdf" else dataset(i)

    try:
        got = 0
        deadline = t0 + args.timeout
        # Issue 26's figures, each on a mount nothing has walked yet: ready
        # (the mount point answers), `ls -l` of one dataset's directory, the
        # first read of another random file, then `find | wc -l`.
        while not os.path.ismount(mnt):
            if p.poll() is not None:
                raise RuntimeError(f"{binary} exited with {p.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"not mounted after {args.timeout} s")
            time.sleep(0.01)
        ready_s = time.monotonic() - t0
        a, b = (int(x) for x in rng.integers(0, n, 2))
        t = time.monotonic()
        ls = subprocess.run(["ls", "-l", dataset(a) if args.kind == "netcdf" else os.path.dirname(dataset(a))],
                            capture_output=True, check=True)
        ls_ms = (time.monotonic() - t) * 1000
        t = time.monotonic()
        with open(array(b), "rb") as f:
            f.read()
        first_read_ms = (time.monotonic() - t) * 1000
        # Memory after reading 1,000 random files whole, on the fresh mount
        # (the eager walk below makes the kernel hold every node, and the
        # daemon a path for each: reported after it).
        for i in rng.integers(0, n, 1000):
            with open(array(int(i)), "rb") as f:
                f.read()
        rss_after_reads = status(p.pid)["VmRSS"]
        t = time.monotonic()
        find = subprocess.run(f"find {mnt} -type f | wc -l", shell=True, capture_output=True,
                              text=True, check=True)
        find_s = time.monotonic() - t
        find_files = int(find.stdout.strip())
        rss_after_find = status(p.pid)["VmRSS"]
        while time.monotonic() < deadline:
            if p.poll() is not None:
                raise RuntimeError(f"{binary} exited with {p.returncode}; see {log.name}")
            try:
                got = listed(mnt, args.kind) if os.path.ismount(mnt) else 0
            except OSError:
                got = 0
            if got == n:
                break
            time.sleep(0.2)
        mount_s = time.monotonic() - t0
        if got != n:
            raise RuntimeError(f"only {got} of {n} listed after {args.timeout} s")

        def refresh() -> dict:
            with open(os.path.join(mnt, ".slabfs/stats")) as f:
                return json.load(f)["refresh"]

        while refresh()["runs"] < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        first_pass_s = time.monotonic() - t0
        time.sleep(args.settle)
        hz = os.sysconf("SC_CLK_TCK")
        runs0 = refresh()["runs"]
        c0, w0 = cpu_ticks(p.pid), time.monotonic()
        time.sleep(args.idle)
        c1, w1 = cpu_ticks(p.pid), time.monotonic()
        st = status(p.pid)
        stats = {"refresh": refresh()}
        # A file added: how long until the mount shows it, and the daemon's
        # CPU meanwhile (its clock ticks: 10 ms granularity).
        added = os.path.join(data, "d000", f"added-{time.monotonic_ns()}")
        added_file = added + (".nc" if args.kind == "netcdf" else ".zarr")
        c2, t = cpu_ticks(p.pid), time.monotonic()
        if args.kind == "netcdf":
            with open(added_file + ".tmp", "wb") as f:
                f.write(netcdf3_bytes(np.arange(NELEMS, dtype="<f4")))
            os.rename(added_file + ".tmp", added_file)
            shown = os.path.join(mnt, "d000", os.path.basename(added_file), "v")
        else:
            os.mkdir(added_file + ".tmp")
            with open(os.path.join(added_file + ".tmp", ".zarray"), "w") as f:
                f.write(ZARRAY)
            os.rename(added_file + ".tmp", added_file)
            shown = os.path.join(mnt, "d000", os.path.basename(added_file))
        add_deadline = time.monotonic() + 60
        while not os.path.exists(shown) and time.monotonic() < add_deadline:
            time.sleep(0.02)
        add_s = time.monotonic() - t
        add_cpu_ms = (cpu_ticks(p.pid) - c2) * 1000 / hz
        visible = os.path.exists(shown)
        if os.path.isdir(added_file):
            shutil.rmtree(added_file)
        else:
            os.remove(added_file)
        return {
            "ready_s": round(ready_s, 3),
            "ls_l_one_dataset_ms": round(ls_ms, 1),
            "first_read_ms": round(first_read_ms, 1),
            "find_s": round(find_s, 2),
            "find_files": find_files,
            "rss_after_1000_reads_mib": round(rss_after_reads / 1024, 1),
            "rss_after_find_mib": round(rss_after_find / 1024, 1),
            "added_visible_s": round(add_s, 2) if visible else None,
            "added_cpu_ms": add_cpu_ms,
            "files": n,
            "kind": args.kind,
            "binary": binary,
            "mount_s": round(mount_s, 2),
            "first_pass_s": round(first_pass_s, 2),
            "idle_cpu_pct": round(100.0 * (c1 - c0) / hz / (w1 - w0), 2),
            "idle_passes": stats["refresh"]["runs"] - runs0,
            "rss_mib": round(st["VmRSS"] / 1024, 1),
            "hwm_mib": round(st["VmHWM"] / 1024, 1),
            "threads": st["Threads"],
            "refresh": stats.get("refresh"),
        }
    finally:
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, nargs="+", default=[1000, 20000, 100000])
    ap.add_argument(
        "--binary",
        action="append",
        default=[],
        help="LABEL=PATH of a slabfs binary; repeatable [default: after=target/release/slabfs]",
    )
    ap.add_argument(
        "--kind",
        choices=["netcdf", "zarr"],
        default="netcdf",
        help="netcdf: N CDF-1 files; zarr: N single-array Zarr v2 stores "
        "(a directory with .zarray and one chunk file each)",
    )
    ap.add_argument("--data-dir", default="/tmp/slabfs-archive")
    ap.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU sampling")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after the listing")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--nofile", type=int, default=200_000)
    ap.add_argument("--s3", action="store_true",
                    help="serve the archive from a local S3 server (s3s-fs) and mount its URL")
    ap.add_argument("--scratch", type=str, default=os.path.join("/tmp", "slabfs-bench-s3"),
                    help="where bench_remote.py builds s3s-fs (and the server's root goes)")
    ap.add_argument("extra", nargs="*", help="extra `slabfs mount` arguments (after --)")
    args = ap.parse_args()
    args.server = None
    args.bucket = "bench"
    if args.s3:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_remote
        from pathlib import Path

        binary = bench_remote.build_s3s_fs(Path(args.scratch))
        root = Path(args.scratch) / "archive-root"
        (root / args.bucket).mkdir(parents=True, exist_ok=True)
        os.environ.update(AWS_ACCESS_KEY_ID=bench_remote.KEY_ID,
                          AWS_SECRET_ACCESS_KEY=bench_remote.SECRET, AWS_REGION="us-east-1")
        for v in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            os.environ.pop(v, None)
        args.s3_root = root
        args.s3_binary = binary
    binaries = [b.split("=", 1) for b in (args.binary or ["after=target/release/slabfs"])]
    os.makedirs(args.data_dir, exist_ok=True)
    results = []
    for n in args.files:
        data = os.path.join(args.data_dir, f"{args.kind}-{n}")
        make_archive(data, n, args.kind)
        if args.s3:
            # The same files, hard-linked into the server's bucket.
            served = os.path.join(args.s3_root, args.bucket, f"{args.kind}-{n}")
            if not os.path.exists(served):
                subprocess.run(["cp", "-al", data, served], check=True)
            data = served
            if args.server is None:
                from pathlib import Path
                args.server = bench_remote.Server(args.s3_binary, Path(args.s3_root), Path(sys.executable))
        for label, binary in binaries:
            r = run_one(os.path.abspath(binary), data, os.path.join(args.data_dir, "mnt"), n, args)
            r["label"] = label
            results.append(r)
            print(json.dumps(r), file=sys.stderr)
    if args.server is not None:
        args.server.stop()
    where = "s3-" if args.s3 else ""
    with open(os.path.join(args.data_dir, f"results-{where}{args.kind}.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"{args.kind}{' in S3 (s3s-fs)' if args.s3 else ''}, {' '.join(args.extra) or 'default flags'}:\n")
    print(
        "| datasets | binary | mount to full listing (s) | first pass done (s) "
        "| idle CPU (% of a core) | passes while idle | RSS (MiB) | peak RSS (MiB) | watching |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        watching = r["refresh"].get("watching")
        if watching:
            watching = f"{r['refresh']['watched_directories']:,} directories"
        print(
            f"| {r['files']:,} | {r['label']} | {r['mount_s']} | {r['first_pass_s']} "
            f"| {r['idle_cpu_pct']} | {r['idle_passes']} | {r['rss_mib']} | {r['hwm_mib']} "
            f"| {'no' if not watching else watching} |"
        )
    print("\nIssue 26's figures (targets: ready < 1 s, `ls -l` < 50 ms, first read < 20 ms, "
          "RSS after 1,000 reads < 100 MiB, an added file shown < 2 s for < 10 ms of CPU):\n")
    print("| datasets | binary | ready (s) | `ls -l` of one dataset (ms) | first read (ms) "
          "| `find -type f \\| wc -l` (s, files) | RSS after 1,000 random reads (MiB) "
          "| RSS after the find (MiB) | added file shown (s) | its CPU (ms) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(
            f"| {r['files']:,} | {r['label']} | {r['ready_s']} | {r['ls_l_one_dataset_ms']} "
            f"| {r['first_read_ms']} | {r['find_s']} ({r['find_files']:,}) "
            f"| {r['rss_after_1000_reads_mib']} | {r['rss_after_find_mib']} "
            f"| {r['added_visible_s']} | {r['added_cpu_ms']:.0f} |"
        )


if __name__ == "__main__":
    main()
