#!/usr/bin/env python3
"""netCDF-4 benchmarks (issue 14, item 9): loading a directory of 1,000
netCDF-4 files, and reading a 256 MiB netCDF-4 variable whole and at
random. Results: docs/perf/hdf5.md.

Usage (from the repository root, as root: it mounts):

    .venv/bin/python scripts/bench_hdf5.py [--part load|read|all] [--files 1000]
        [--size-mib 256] [--reps 5] [--data-dir bench-data]

(a) **Load** (--part load). Data, cached in DATA-DIR/hdf5-archive-N: N
    netCDF-4 files in one directory, written by netCDF4-python, each like a
    CMIP output file: dimensions time (unlimited, 12 records), lat (32),
    lon (64), bnds (2); coordinate variables and bounds, and two float32
    variables (time, lat, lon) with zlib level 1 + shuffle; about a dozen
    attributes. Each round, one fresh process each, after a discarded
    warm-up round (so "warm": the files' pages are in the page cache):

      1. `slabfs ls DIR` (stdout to /dev/null);
      2. a new `slabfs mount DIR MNT`, timed from the spawn until a full
         walk of MNT (os.walk) lists every variable of every file (polled
         every 0.05 s): "mount to ready";
      3. `ls -lR MNT` (a fresh process: lists and stats every file);
      4. the daemon's RSS, then unmount.

(b) **Read** (--part read). Data, cached in DATA-DIR/hdf5-read-S: a float32
    variable of S MiB, shape (S/4, 1024, 1024), chunks (1, 256, 1024) =
    1 MiB of whole rows, the smooth field of scripts/benchlib.py plus
    noise, written by netCDF4-python twice: zlib level 1 + shuffle (the
    common CMIP choice) and zstd (netCDF's plugin, level 1, with shuffle as
    netCDF4-python adds by default). A raw copy
    checks every contender's bytes once (untimed). Then, interleaved, each
    a fresh process (benchlib.run_pass: idle waits, runs redone when other
    processes were busy), for each codec:

      - `dd if=MNT/FILE.nc/v of=/dev/null bs=1M` through a mount made
        fresh for the run (the mount's set-up untimed; the daemon's CPU
        counted);
      - `slabfs cat FILE.nc v` (no FUSE);
      - netCDF4-python `v[:]` and h5py `ds[()]` (whole process: start,
        import, open, read).

    Then random 4 KiB preads through a fresh mount (benchlib.PREAD_CHILD):
    each 4 KiB-aligned offset lies in one chunk, and the daemon's
    `.slabfs/stats` cache misses must equal the distinct chunks the reads
    touch (one decode per chunk).

(c) **Index** (--part index): one netCDF-4 variable of 10^6 chunks of one
    element (v1 B-tree): `slabfs ls` (the file loaded, its index not
    walked) and `slabfs cat --length 4096` (the index walked once) as fresh
    processes; the difference of their peak RSS per chunk is what the
    index holds in memory.

Prints Markdown tables; raw numbers in DATA-DIR/results-hdf5.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import benchlib as lib

MIB = lib.MIB
READ_FORMAT_VERSION = 1
LOAD_FORMAT_VERSION = 1

# --------------------------------------------------------------------------
# (a) load


def make_archive(root: Path, n: int) -> None:
    import netCDF4
    import numpy as np

    stamp = {"version": LOAD_FORMAT_VERSION, "files": n}
    if lib.data_cached(root / "stamp.json", stamp, [root]):
        return
    root.mkdir(parents=True, exist_ok=True)
    for f in root.glob("*.nc"):
        f.unlink()
    t0 = time.time()
    rng = np.random.default_rng(7)
    for i in range(n):
        path = root / f"tas_Amon_MODEL_ssp585_r{i + 1}i1p1f1_gn_201501-201512.nc"
        with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
            ds.Conventions = "CF-1.7 CMIP-6.2"
            ds.source_id = "MODEL"
            ds.variant_label = f"r{i + 1}i1p1f1"
            ds.frequency = "mon"
            ds.createDimension("time", None)
            ds.createDimension("lat", 32)
            ds.createDimension("lon", 64)
            ds.createDimension("bnds", 2)
            t = ds.createVariable("time", "f8", ("time",))
            t.units = "days since 1850-01-01"
            t.calendar = "standard"
            t.bounds = "time_bnds"
            t[:] = np.arange(12) * 30.0 + 15.0
            tb = ds.createVariable("time_bnds", "f8", ("time", "bnds"))
            tb[:] = np.stack([np.arange(12) * 30.0, np.arange(12) * 30.0 + 30.0], 1)
            lat = ds.createVariable("lat", "f8", ("lat",))
            lat.units = "degrees_north"
            lat[:] = np.linspace(-87.5, 87.5, 32)
            lon = ds.createVariable("lon", "f8", ("lon",))
            lon.units = "degrees_east"
            lon[:] = np.arange(64) * 5.625
            for name, units in (("tas", "K"), ("pr", "kg m-2 s-1")):
                v = ds.createVariable(name, "f4", ("time", "lat", "lon"), zlib=True,
                                      complevel=1, shuffle=True, chunksizes=(1, 32, 64))
                v.units = units
                v.standard_name = name
                v.cell_methods = "time: mean"
                v[:] = (rng.normal(280.0, 10.0, (12, 32, 64))).astype("f4")
    (root / "stamp.json").write_text(json.dumps(stamp))
    lib.log(f"made {n} netCDF-4 files in {time.time() - t0:.1f}s")


VARS_PER_FILE = 6  # time, time_bnds, lat, lon, tas, pr


def listed(mnt: Path) -> int:
    count = 0
    for _, dirs, files in os.walk(mnt):
        if ".slabfs" in dirs:
            dirs.remove(".slabfs")
        # Each variable is a file; its sidecar .json too.
        count += sum(1 for f in files if not f.endswith(".json"))
    return count


def load_round(slabfs: Path, data: Path, mnt: Path, n: int, workdir: Path, tag: str,
               idle_wait: float) -> dict:
    r: dict = {}
    lib.wait_idle(idle_wait)
    p = lib.run_processes([[str(slabfs), "ls", str(data)]])
    if p["statuses"][0] != 0:
        lib.fail("slabfs ls failed")
    r["ls_s"], r["ls_cpu_s"], r["ls_foreign"] = p["wall_s"], p["cpu_s"], p["foreign"]

    lib.wait_idle(idle_wait)
    mnt.mkdir(parents=True, exist_ok=True)
    # The previous round's mount must be gone, or its listing would count.
    for _ in range(100):
        if lib.mountinfo_dev(mnt) is None:
            break
        time.sleep(0.1)
    else:
        lib.fail(f"{mnt} is still mounted")
    logf = open(workdir / f"daemon-load-{tag}.log", "wb")
    want = n * VARS_PER_FILE
    b0 = lib.cpu_busy_s()
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(slabfs), "mount", str(data), str(mnt)],
                            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)
    logf.close()
    try:
        got = 0
        while time.perf_counter() - t0 < 120:
            if proc.poll() is not None:
                lib.fail(f"slabfs mount exited with {proc.returncode}")
            if lib.mountinfo_dev(mnt) is not None:
                try:
                    got = listed(mnt)
                except OSError:
                    got = 0
                if got == want:
                    break
            time.sleep(0.05)
        r["mount_s"] = time.perf_counter() - t0
        busy = lib.cpu_busy_s() - b0
        if got != want:
            lib.fail(f"only {got} of {want} variables listed")
        if proc.poll() is not None:
            lib.fail(f"the daemon exited ({proc.returncode}) before the listing was measured")
        dcpu = lib.proc_cpu_s(proc.pid)
        r["mount_daemon_cpu_s"] = dcpu
        ncpu = os.cpu_count() or 1
        # Ours: the daemon and this process's walk (at most one core).
        r["mount_foreign"] = max(0.0, busy - dcpu - r["mount_s"]) / (r["mount_s"] * ncpu)
        lib.wait_idle(idle_wait)
        q = lib.run_processes([["ls", "-lR", str(mnt)]], daemon=_Pid(proc.pid))
        r["ls_R_s"], r["ls_R_foreign"] = q["wall_s"], q["foreign"]
        r["rss_mib"] = (lib.proc_status_kib(proc.pid, "VmRSS") or 0) / 1024
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return r


class _Pid:
    """What run_processes needs of a daemon: its CPU."""

    def __init__(self, pid: int):
        self.pid = pid

    def cpu_s(self) -> float:
        return lib.proc_cpu_s(self.pid)


def part_load(args, slabfs: Path, data_dir: Path) -> dict:
    root = data_dir / f"hdf5-archive-{args.files}"
    make_archive(root, args.files)
    workdir = data_dir / "hdf5-work"
    workdir.mkdir(exist_ok=True)
    mnt = workdir / "mnt"
    rounds = []
    for rep in range(-1, args.reps):
        tag = "warmup" if rep < 0 else f"rep{rep + 1}"
        for attempt in range(args.retries + 1):
            r = load_round(slabfs, root, mnt, args.files, workdir, tag, args.idle_wait)
            worst = max(r["ls_foreign"], r["mount_foreign"], r["ls_R_foreign"])
            lib.log(f"[load {tag}] slabfs ls {r['ls_s']:.3f}s, mount to ready "
                    f"{r['mount_s']:.3f}s (daemon cpu {r['mount_daemon_cpu_s']:.2f}s), "
                    f"ls -lR {r['ls_R_s']:.3f}s, rss {r['rss_mib']:.0f} MiB, "
                    f"other-load {worst:.0%}")
            r["foreign"] = worst
            if worst <= args.max_foreign or rep < 0 or attempt == args.retries:
                break
            lib.log("  other processes were busy; redoing this round")
        if rep >= 0:
            rounds.append(r)
    med = {k: statistics.median(r[k] for r in rounds)
           for k in ("ls_s", "mount_s", "ls_R_s", "rss_mib", "mount_daemon_cpu_s")}
    rng = {k: (min(r[k] for r in rounds), max(r[k] for r in rounds))
           for k in ("ls_s", "mount_s", "ls_R_s")}
    stored = sum(f.stat().st_size for f in root.glob("*.nc"))
    print()
    print(f"### (a) Load: {args.files} netCDF-4 files, {VARS_PER_FILE} variables each "
          f"({stored / MIB:.1f} MiB), warm page cache ({args.reps} rounds, 1 discarded)")
    print()
    print("| step | median (s) | min–max (s) | target |")
    print("|---|---:|---:|---|")
    print(f"| `slabfs ls DIR` | {med['ls_s']:.3f} | {rng['ls_s'][0]:.3f}–{rng['ls_s'][1]:.3f} | |")
    print(f"| mount to ready (spawn → full walk lists all {args.files * VARS_PER_FILE} "
          f"variables) | {med['mount_s']:.3f} | {rng['mount_s'][0]:.3f}–{rng['mount_s'][1]:.3f} "
          f"| {lib.verdict(2.0 / med['mount_s'], 1.0).replace('≥ 1', '< 2 s')} |")
    print(f"| `ls -lR MNT` after | {med['ls_R_s']:.3f} | "
          f"{rng['ls_R_s'][0]:.3f}–{rng['ls_R_s'][1]:.3f} | |")
    print()
    print(f"Daemon: {med['mount_daemon_cpu_s']:.2f} s CPU to ready, "
          f"RSS {med['rss_mib']:.0f} MiB after the listing. Other processes' CPU: at most "
          f"{max(r['foreign'] for r in rounds):.0%} of the machine in kept rounds.")
    return {"rounds": rounds, "median": med, "stored_bytes": stored}


# --------------------------------------------------------------------------
# (b) read

CODECS = {
    "zlib": {"zlib": True, "complevel": 1, "shuffle": True},  # shuffle: netCDF4-python default too
    "zstd": {"compression": "zstd", "complevel": 1, "shuffle": True},
}
READ_CHUNK = (1, 256, 1024)


def make_read_data(root: Path, size_mib: int) -> dict:
    import netCDF4
    import numpy as np

    nz = size_mib // 4
    shape = (nz, 1024, 1024)
    stamp = {"version": READ_FORMAT_VERSION, "shape": shape, "chunk": READ_CHUNK,
             "codecs": sorted(CODECS)}
    files = {k: root / f"field_{k}.nc" for k in CODECS}
    raw = root / "field.raw"
    if not lib.data_cached(root / "stamp.json", stamp, [raw, *files.values()]):
        root.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(lib.FIELD_SEED)
        dss = {}
        for k, path in files.items():
            ds = netCDF4.Dataset(path, "w", format="NETCDF4")
            ds.createDimension("time", None)
            ds.createDimension("lat", 1024)
            ds.createDimension("lon", 1024)
            dss[k] = ds.createVariable("v", "f4", ("time", "lat", "lon"),
                                       chunksizes=READ_CHUNK, **CODECS[k])
        with open(raw, "wb") as out:
            for z in range(nz):
                slab = lib.field_slab(z, nz, 1024, 1024, rng)
                out.write(slab.tobytes())
                for v in dss.values():
                    v[z] = slab
        for v in dss.values():
            v.group().close()
        (root / "stamp.json").write_text(json.dumps(stamp))
    nbytes = raw.stat().st_size
    return {"files": files, "raw": raw, "nbytes": nbytes, "shape": shape,
            "stored": {k: p.stat().st_size for k, p in files.items()}}


NC4_CHILD = r"""
import json, sys, time
c0 = time.process_time(); t0 = time.perf_counter()
import netCDF4
ds = netCDF4.Dataset(sys.argv[1])
v = ds["v"]; v.set_auto_maskandscale(False)
a = v[:]
t1 = time.perf_counter(); c1 = time.process_time()
assert a.nbytes == int(sys.argv[2]), a.nbytes
if len(sys.argv) > 3: sys.stdout.buffer.write(a.tobytes()); sys.exit(0)
print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": 1}))
"""

H5PY_CHILD = r"""
import json, sys, time
c0 = time.process_time(); t0 = time.perf_counter()
import h5py
a = h5py.File(sys.argv[1], "r")["v"][()]
t1 = time.perf_counter(); c1 = time.process_time()
assert a.nbytes == int(sys.argv[2]), a.nbytes
if len(sys.argv) > 3: sys.stdout.buffer.write(a.tobytes()); sys.exit(0)
print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": 1}))
"""


def sha_of(cmd: list[str]) -> str:
    h = hashlib.sha256()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL) as p:
        while True:
            b = p.stdout.read(8 * MIB)
            if not b:
                break
            h.update(b)
    if p.returncode != 0:
        lib.fail(f"{cmd} failed")
    return h.hexdigest()


def part_read(args, slabfs: Path, py: Path, data_dir: Path) -> dict:
    d = make_read_data(data_dir / f"hdf5-read-{args.size_mib}", args.size_mib)
    workdir = data_dir / "hdf5-work"
    workdir.mkdir(exist_ok=True)
    mounts = lib.Mounts(slabfs, workdir)
    n = str(d["nbytes"])
    want = lib.sha_file(d["raw"])[0]
    out: dict = {"data": d}
    try:
        for k, path in d["files"].items():
            store = path.parent
            # Bytes checked once, untimed.
            for who, cmd in (("slabfs cat", [str(slabfs), "cat", str(path), "v"]),
                             ("netCDF4-python", [str(py), "-c", NC4_CHILD, str(path), n, "out"]),
                             ("h5py", [str(py), "-c", H5PY_CHILD, str(path), n, "out"])):
                if sha_of(cmd) != want:
                    lib.fail(f"{who} ({k}): bytes differ from the raw field")
            with mounts.mounted(store, f"{path.name}/v", f"verify-{k}") as m:
                if lib.sha_file(m.file)[0] != want:
                    lib.fail(f"mount ({k}): bytes differ from the raw field")
            lib.log(f"{k}: every contender's bytes match the raw field")

            res: dict[str, list[dict]] = {"dd": [], "cat": [], "nc4": [], "h5py": []}
            cs = [
                {"name": "slabfs cat", "key": "cat", "inproc": False,
                 "cmd": [str(slabfs), "cat", str(path), "v"]},
                {"name": "netCDF4-python v[:]", "key": "nc4", "inproc": True,
                 "cmd": [str(py), "-c", NC4_CHILD, str(path), n]},
                {"name": "h5py ds[()]", "key": "h5py", "inproc": True,
                 "cmd": [str(py), "-c", H5PY_CHILD, str(path), n]},
            ]
            redone = 0
            for rep in range(-args.warmup, args.reps):
                tag = "warmup" if rep < 0 else f"rep {rep + 1}/{args.reps}"
                # Fresh mount + dd: the mount made before each attempt.
                holder: dict = {}

                def attempt(_, holder=holder):
                    if holder.get("m"):
                        mounts.stop(holder.pop("m"))
                    holder["m"] = mounts.new(store, f"{path.name}/v", f"dd-{k}")
                    lib.wait_idle(args.idle_wait)
                    return lib.run_child(["dd", f"if={holder['m'].file}", "of=/dev/null",
                                          "bs=1M"], daemon=holder["m"])

                r, nred = lib.redo_while_busy(
                    attempt, args,
                    lambda r: (f"[{k} {tag}] dd fresh mount {r['wall_s']:.3f}s daemon cpu "
                               f"{r['daemon_cpu_s']:.2f}s other-load {r['foreign']:.0%}"),
                    keep=rep >= 0)
                if holder.get("m"):
                    mounts.stop(holder.pop("m"))
                redone += nred
                if rep >= 0:
                    r["cpu_s"] += r["daemon_cpu_s"]
                    res["dd"].append(r)
                for c in cs:
                    def attempt(_, c=c):
                        lib.wait_idle(args.idle_wait)
                        return lib.run_one(c)

                    r, nred = lib.redo_while_busy(
                        attempt, args,
                        lambda r, c=c: (f"[{k} {tag}] {c['name']:<20} {r['wall_s']:.3f}s "
                                        f"cpu {r['cpu_s']:.2f}s other-load {r['foreign']:.0%}"),
                        keep=rep >= 0)
                    redone += nred
                    if rep >= 0:
                        res[c["key"]].append(r)
            all_cs = [{"name": "`dd` through a fresh mount (daemon CPU included)", "key": "dd",
                       "inproc": False}] + cs
            tab, stats = lib.table(all_cs, res, d["nbytes"])
            rat_tab, rat = lib.ratio_rows(stats, [
                ("fresh-mount `dd` / netCDF4-python `v[:]` (process)", "dd", "nc4", 2.0, False),
                ("fresh-mount `dd` / h5py (process)", "dd", "h5py", 1.5, False),
                ("`slabfs cat` / netCDF4-python (process)", "cat", "nc4", 2.0, False),
                ("`slabfs cat` / h5py (process)", "cat", "h5py", 1.5, False),
            ])
            note, _ = lib.foreign_note(res, redone, args.max_foreign)

            # Random 4 KiB preads through a fresh mount.
            nreads = args.random_reads
            offs = [p * 4096 for p in
                    random.Random(args.seed).sample(range(d["nbytes"] // 4096), nreads)]
            chunks = len({o // MIB for o in offs})  # 1 MiB chunks of whole rows
            with mounts.mounted(store, f"{path.name}/v", f"random-{k}") as m:
                lib.wait_idle(args.idle_wait)
                rr = lib.run_child([str(py), "-c", lib.PREAD_CHILD, str(m.file),
                                    str(m.mnt / ".slabfs" / "stats"), n, str(nreads),
                                    str(args.seed)], daemon=m, capture=True)
            rr = lib.check_random_reads(rr, lib.random_pages_sha(d["raw"], d["nbytes"], nreads,
                                                                 args.seed), "random preads")
            decode = (f"{rr['cache_misses']} chunk decodes for {nreads} reads touching "
                      f"{chunks} distinct chunks")
            if rr["cache_misses"] != chunks:
                decode += " (**not one decode per chunk**)"
            print()
            print(f"### (b) Read, {k}: float32 {d['shape']}, chunks {READ_CHUNK} (1 MiB), "
                  f"{d['nbytes'] / MIB:.0f} MiB raw, {d['stored'][k] / MIB:.1f} MiB stored; "
                  f"{lib.pass_title(args, 'warm')}")
            print()
            print(tab)
            print()
            print(rat_tab)
            print()
            print(f"Random 4 KiB preads, fresh mount: mean {rr['lat']['mean_us']:.0f} µs, "
                  f"median {rr['lat']['median_us']:.0f} µs per read; {decode}.")
            print("\n" + note)
            out[k] = {"runs": res, "stats": stats, "ratios": rat, "random": rr,
                      "random_chunks": chunks}
    finally:
        mounts.stop_all()
    return out


# --------------------------------------------------------------------------
# (c) one large chunk index


def part_index(args, slabfs: Path, data_dir: Path) -> dict:
    """What a variable of --index-chunks chunks costs: `slabfs ls` (load
    only: the index is not walked) and `slabfs cat` of its first 4 KiB
    (load, the index walked, one chunk read), wall time and peak RSS; the
    difference of the peaks over the chunk count is the index's bytes per
    chunk."""
    import netCDF4
    import numpy as np

    n = args.index_chunks
    side = int(round(n ** 0.5))
    path = data_dir / f"hdf5-index-{side}x{side}.nc"
    stamp = {"version": 1, "side": side}
    if not lib.data_cached(data_dir / f"hdf5-index-{side}.json", stamp, [path]):
        t0 = time.time()
        with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
            ds.createDimension("y", side)
            ds.createDimension("x", side)
            v = ds.createVariable("v", "f4", ("y", "x"), chunksizes=(1, 1))
            v[:] = np.arange(side * side, dtype="f4").reshape(side, side)
        (data_dir / f"hdf5-index-{side}.json").write_text(json.dumps(stamp))
        lib.log(f"made {path.name} ({side * side} chunks) in {time.time() - t0:.1f}s")
    rows = {"ls": [], "cat": []}
    for rep in range(-1, args.reps):
        for key, cmd in (("ls", [str(slabfs), "ls", str(path)]),
                         ("cat", [str(slabfs), "cat", "--length", "4096", str(path), "v"])):
            def attempt(_, cmd=cmd):
                lib.wait_idle(args.idle_wait)
                # Peak RSS from GNU time: wait4's ru_maxrss of a child of
                # this Python process counts the Python's pages it had
                # before exec.
                rss = data_dir / "hdf5-index-rss.txt"
                p = lib.run_processes([["/usr/bin/time", "-f", "%M", "-o", str(rss), *cmd]])
                if p["statuses"][0] != 0:
                    lib.fail(f"{cmd} failed")
                p["maxrss_kib"] = int(rss.read_text().split()[-1])
                return p

            r, _ = lib.redo_while_busy(
                attempt, args,
                lambda r, key=key: (f"[index] {key} {r['wall_s']:.3f}s "
                                    f"rss {r['maxrss_kib'] / 1024:.0f} MiB "
                                    f"other-load {r['foreign']:.0%}"),
                keep=rep >= 0)
            if rep >= 0:
                rows[key].append(r)
    med = {k: {"wall_s": statistics.median(r["wall_s"] for r in rs),
               "maxrss_kib": statistics.median(r["maxrss_kib"] for r in rs)}
           for k, rs in rows.items()}
    per_chunk = (med["cat"]["maxrss_kib"] - med["ls"]["maxrss_kib"]) * 1024 / (side * side)
    print()
    print(f"### (c) One variable of {side * side:,} chunks ({path.stat().st_size / MIB:.0f} MiB "
          f"netCDF-4 file, v1 B-tree), warm page cache ({args.reps} reps)")
    print()
    print("| process | median (s) | peak RSS (MiB) |")
    print("|---|---:|---:|")
    print(f"| `slabfs ls FILE` (load: index not walked) | {med['ls']['wall_s']:.3f} | "
          f"{med['ls']['maxrss_kib'] / 1024:.0f} |")
    print(f"| `slabfs cat --length 4096 FILE v` (load, walk, one chunk) | "
          f"{med['cat']['wall_s']:.3f} | {med['cat']['maxrss_kib'] / 1024:.0f} |")
    print()
    print(f"Index memory: {per_chunk:.0f} bytes per chunk (difference of the peaks).")
    return {"runs": rows, "median": med, "bytes_per_chunk": per_chunk}


# --------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("load", "read", "index", "all"), default="all")
    ap.add_argument("--index-chunks", type=int, default=1_000_000,
                    help="chunks of the one variable of --part index")
    ap.add_argument("--files", type=int, default=1000, help="files of the load benchmark")
    ap.add_argument("--size-mib", type=int, default=256, help="read variable size (multiple of 4)")
    ap.add_argument("--random-reads", type=int, default=500)
    ap.add_argument("--seed", type=int, default=14)
    lib.add_common_args(ap, reps=5, cold=False, perf=None)
    args = ap.parse_args()
    command = lib.command_line()
    py = lib.use_venv(args.skip_venv, ("numpy", "netCDF4", "h5py"))
    data_dir = lib.abs_dir(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    built = lib.build_slabfs(args.no_build)
    slabfs, _ = lib.private_binary(built)
    hdr, m, v = lib.header_lines(command, slabfs, extra_versions=("netCDF4", "h5py"))
    print("\n".join(hdr))
    results = {"command": command, "machine": m, "versions": v}
    if args.part in ("load", "all"):
        results["load"] = part_load(args, slabfs, data_dir)
    if args.part in ("index", "all"):
        results["index"] = part_index(args, slabfs, data_dir)
    if args.part in ("read", "all"):
        results["read"] = part_read(args, slabfs, py, data_dir)
    lib.write_json(data_dir / "results-hdf5.json", results)
    print(f"\n(raw numbers in {data_dir / 'results-hdf5.json'})", file=sys.stderr)


if __name__ == "__main__":
    main()
