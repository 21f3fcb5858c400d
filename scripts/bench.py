#!/usr/bin/env python3
"""The slabfs benchmark suite (issue 7): every workload, every contender, in
one run, interleaved, several repetitions; one table of medians and ratios,
a list of targets met or missed, and the daemon's peak RSS per workload.

Usage (from the repository root, as root for the cold passes):

    .venv/bin/python scripts/bench.py [--quick] [--reps N] [--only WORKLOAD[,WORKLOAD]]

(`python3 scripts/bench.py` works too: it makes the venv with scripts/venv.sh
and re-runs itself under it.)

What it does:

1. Makes sure the venv exists (scripts/venv.sh: zarr 3, numcodecs, numpy,
   tensorstore, netCDF4, cf-python), builds `target/release/slabfs`
   (`cargo build --release`) and runs a private copy of the binary, so a
   rebuild by someone else cannot swap it mid-run.
2. Builds the data once, cached in --data-dir (gitignored), from one float32
   field (N, 1024, 1024) of bench_read.py's values (benchlib.field_slab:
   smooth field + seeded Gaussian noise), written by zarr-python 3 as Zarr
   v3 arrays with 1 MiB chunks of whole rows, (1, 256, 1024), so a 4 KiB-
   aligned read lies in exactly one chunk:
     - zstd.zarr   bytes + zstd level 0 (zarr-python's default)
     - lz4.zarr    bytes + blosc (lz4, clevel 5, byte shuffle)
     - raw.zarr    bytes only (uncompressed)
     - sharded.zarr  the zstd chunks as inner chunks of (D, 1024, 1024) shards
     - field.raw   the same bytes as a plain file (the physical ceiling)
   and bench_aggregation.py's 64-partition netCDF-3 aggregation (NCA
   descriptor, CF-1.13 aggregation written by cf-python, raw file;
   benchlib.build_aggregation).
3. Checks, untimed, once per workload, that every contender that writes to
   stdout (dd, cat, slabfs cat) gives the raw file's bytes (sha256 of all of
   them); Python contenders check a sample (sequential reads) or every byte
   (random and slice reads) in every run against the raw file.
4. Runs the workloads. Within each repetition every contender of a workload
   runs once, in an order rotated from one repetition to the next; one
   warm-up repetition (--warmup) is discarded. Each mount contender gets a
   NEW `slabfs mount` (foreground subprocess, `fusermount3 -u` after it), so
   "fresh mount" means an empty chunk cache and no kernel pages of the file,
   and the daemon's peak RSS (VmHWM) is per run.
5. Prints one Markdown table (workload | phase | contender | median s |
   min-max | MiB/s | ref/row | notes), the targets met or missed, the daemon's
   peak RSS per workload, and writes everything to <data-dir>/results.json.

Workloads (--only takes these names; the table's rows carry finer names):
  seq-zstd, seq-lz4, seq-raw  full sequential read of the array: cold, fresh,
                warm. Mount: dd bs=1M (the reference), Python os.preadv of
                1 MiB into one buffer, numpy.memmap copied out; slabfs cat
                (no FUSE); zarr-python [:], tensorstore read(); the raw file
                with cat, dd and os.preadv.
  random        --random-reads 4 KiB reads at distinct aligned offsets (one
                chunk each), cold; then as many others, warm. Mount: os.pread
                (reference), numpy.memmap; zarr-python and tensorstore read the
                same rows; raw file os.pread. .slabfs/stats before and after
                each pass, and one by one for the first --decode-check-reads.
  slices        one row (1 pread of 4 KiB), one column (1024 preads of 4 bytes)
                and one 256 x 256 tile (256 preads of 1 KiB) of one z-plane,
                through the flat file as a reader with seeks does; cold, then
                the same again (warm). Same contenders as random.
  sharded       the sharded array: full read (fresh, warm) and random reads.
  agg           the 64-partition aggregation: full read (mount of the NCA
                descriptor, slabfs cat of it and of the CF-1.13 file,
                cf-python) and random reads (cf-python does the first
                --cf-random-reads of each pass only: ~25 ms a read).
  conc8         --readers dd processes reading disjoint parts of the file at
                once against one dd reading all of it, each on a fresh mount;
                zstd and uncompressed; the raw file the same way.

Phases (the page cache is the kernel's; "caches dropped" is
`sync; echo 3 > /proc/sys/vm/drop_caches`, root only):
  cold   caches dropped before each run (then dd, cat, slabfs and their
         libraries read back in: the data is cold, not the programs), fresh
         mount / fresh process
  fresh  fresh mount / fresh process; the store's files are in the page cache
  warm   the same read again: on the same mount (sequential: served from the
         kernel's page cache of the flat file; random: other offsets, in
         chunks the cold pass decoded), or in the same process for the peers;
         the raw file in the page cache

Times: the `dd`/`cat`/`slabfs cat` rows are whole processes; the Python rows
(`os.preadv`, `numpy.memmap`, zarr-python, tensorstore, cf-python) are the
read inside the process (opening the file or array, then reading), without
interpreter start-up and imports: the stricter comparison for slabfs.

`ref/row` is the median time per byte of the row divided by that of the
workload's reference row (marked *): how many times faster the reference (the
mount, in every workload) is than that row. The targets are stated that way.

The plumbing (venv, build, idle wait and foreign-CPU check, timing of child
processes, mounts, checksums) is scripts/benchlib.py's, shared with the
other benchmark scripts; this file holds the workloads and their report.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import benchlib as lib
from benchlib import log

MIB = lib.MIB
PAGE = lib.PAGE
DATA_FORMAT_VERSION = 1  # bump when the generator changes
SEED = 20251122
ARRAY = "field"
NY, NX = 1024, 1024
CHUNK = (1, 256, 1024)  # 1 MiB of whole rows
ITEM = 4  # float32
DTYPE = "<f4"
RSS_SLACK_MIB = 64  # target: daemon peak RSS < cache budget + this

WORKLOADS = ("seq-zstd", "seq-lz4", "seq-raw", "random", "slices", "sharded", "agg", "conc8")


# --------------------------------------------------------------------------
# geometry shared by the harness and the children (stdlib only)


def c_strides(shape, item=ITEM):
    s, out = item, []
    for n in reversed(shape):
        out.append(s)
        s *= n
    return list(reversed(out))


def slab_runs(shape, slab, item=ITEM):
    """Contiguous byte runs (offset, length) of the flat file that hold the
    hyperslab `slab` ([start, stop) per dimension), in order: what a reader
    with seeks reads, one pread per run."""
    nd = len(shape)
    d = nd - 1
    while d > 0 and tuple(slab[d]) == (0, shape[d]):
        d -= 1
    strides = c_strides(shape, item)
    runs = []
    length = (slab[d][1] - slab[d][0]) * strides[d]
    for idx in itertools.product(*(range(a, b) for a, b in slab[:d])):
        off = sum(i * s for i, s in zip(idx, strides)) + slab[d][0] * strides[d]
        if runs and runs[-1][0] + runs[-1][1] == off:
            runs[-1] = (runs[-1][0], runs[-1][1] + length)
        else:
            runs.append((off, length))
    return runs


def range_slab(shape, off, length, item=ITEM):
    """The hyperslab a flat byte range [off, off+length) is, when it is one
    (part of one row, or whole rows of one 2-D plane)."""
    nz, ny, nx = shape
    e0, n = off // item, length // item
    z, rem = divmod(e0, ny * nx)
    y, x = divmod(rem, nx)
    if x + n <= nx:
        return [[z, z + 1], [y, y + 1], [x, x + n]]
    if x == 0 and n % nx == 0 and y + n // nx <= ny:
        return [[z, z + 1], [y, y + n // nx], [0, nx]]
    raise ValueError(f"range {off}+{length} is not one hyperslab of {shape}")


def random_offsets(nbytes, skip, n, seed):
    """2n distinct 4 KiB-aligned offsets in [skip, nbytes): the first n for
    the cold pass, the other n for the warm pass."""
    pages = range(skip // PAGE, nbytes // PAGE)
    if 2 * n > len(pages):
        lib.fail(f"{2 * n} random reads need more than the file's {len(pages)} pages; "
                 "lower --random-reads")
    offs = [p * PAGE for p in random.Random(seed).sample(pages, 2 * n)]
    return offs[:n], offs[n:]


def sample_offsets(nbytes, k=16):
    """k 4 KiB blocks spread over the file (first and last included)."""
    last = (nbytes - PAGE) // PAGE
    return sorted({(i * last // (k - 1)) * PAGE for i in range(k)})


def sample_sha(buf, nbytes) -> str:
    """sha256 of the sample blocks of a whole-array buffer (bytes-like)."""
    mv = memoryview(buf).cast("B")
    h = hashlib.sha256()
    for o in sample_offsets(nbytes):
        h.update(mv[o:o + PAGE])
    return h.hexdigest()


# --------------------------------------------------------------------------
# the children: `bench.py --child JSON`. Each prints one JSON line.


def _open_lib(method, path):
    """Open an array with a Python library; returns read(slab) -> bytes."""
    if method == "zarr":
        import zarr
        arr = zarr.open_array(path, mode="r")
        return lambda sl: arr[tuple(slice(a, b) for a, b in sl)].astype(DTYPE, copy=False).tobytes()
    if method == "ts":
        import tensorstore as ts
        arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()
        return lambda sl: arr[tuple(slice(a, b) for a, b in sl)].read().result().astype(
            DTYPE, copy=False).tobytes()
    if method == "cf":
        import numpy as np
        lib.stub_standard_names()
        import cf
        # cfdm 1.13.3 resolves relative fragment URIs against the working
        # directory, not the aggregation file's (see bench_aggregation.py).
        os.chdir(os.path.dirname(os.path.abspath(path)))
        fl = cf.read(path)
        assert len(fl) == 1, fl
        f = fl[0]
        return lambda sl: np.ascontiguousarray(np.ma.getdata(
            f[tuple(slice(a, b) for a, b in sl)].array)).astype(DTYPE, copy=False).tobytes()
    raise ValueError(method)


def child_seq(a: dict) -> dict:
    """Read a whole array into memory; time it; sample sha of the result."""
    import numpy as np

    method, path, nbytes = a["method"], a["path"], a["nbytes"]
    c0, t0 = time.process_time(), time.perf_counter()
    if method == "preadv":
        buf = np.empty(nbytes, dtype=np.uint8)
        fd = os.open(path, os.O_RDONLY)
        mv = memoryview(buf)
        off, step = 0, MIB
        while off < nbytes:
            n = os.preadv(fd, [mv[off:off + step]], off)
            if n <= 0:
                break
            off += n
        os.close(fd)
        got = off
    elif method == "memmap":
        mm = np.memmap(path, dtype=DTYPE, mode="r", shape=tuple(a["shape"]))
        buf = np.array(mm)
        del mm
        got = buf.nbytes
    elif method == "zarr":
        import zarr
        buf = zarr.open_array(path, mode="r")[:]
        got = buf.nbytes
    elif method == "ts":
        import tensorstore as ts
        buf = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
                      ).result().read().result()
        got = buf.nbytes
    elif method == "cf":
        raise RuntimeError("cf-python: import before timing; see below")
    else:
        raise ValueError(method)
    t1, c1 = time.perf_counter(), time.process_time()
    buf = np.ascontiguousarray(buf)
    return {"read_s": t1 - t0, "read_cpu_s": c1 - c0, "nbytes": int(got),
            "sample_sha": sample_sha(buf, nbytes) if got == nbytes else None}


def child_seq_cf(a: dict) -> dict:
    import numpy as np
    lib.stub_standard_names()
    import cf
    path = a["path"]
    os.chdir(os.path.dirname(os.path.abspath(path)))
    c0, t0 = time.process_time(), time.perf_counter()
    fl = cf.read(path)
    arr = fl[0].array
    t1, c1 = time.perf_counter(), time.process_time()
    buf = np.ascontiguousarray(np.ma.getdata(arr)).astype(DTYPE, copy=False)
    return {"read_s": t1 - t0, "read_cpu_s": c1 - c0, "nbytes": int(buf.nbytes),
            "sample_sha": sample_sha(buf, a["nbytes"]) if buf.nbytes == a["nbytes"] else None}


def _stats(path):
    if not path:
        return None
    with open(path, "rb") as f:
        d = json.loads(f.read())
    c = d.get("cache", {})
    return {"requests": d["reads"]["requests"], "bytes": d["reads"]["bytes"],
            **{k: c.get(k, 0) for k in ("hits", "misses", "decodes", "prefetches", "uncached")}}


def _delta(s0, s1, s_probe):
    """Counters moved between s0 and s1, less one stats read (s_probe is
    the cost of reading the stats file once)."""
    if s0 is None:
        return None
    d = {k: s1[k] - s0[k] for k in s0}
    d["requests"] -= s_probe["requests"]
    d["bytes"] -= s_probe["bytes"]
    return d


def child_ops(a: dict) -> dict:
    """Read hyperslabs, pass after pass, each op timed on its own. Methods:
    pread (one os.pread per contiguous run of the flat file, as a reader
    with seeks does), memmap (numpy.memmap, copy of the slice), zarr, ts, cf
    (the library reads the slab)."""
    method, path, shape = a["method"], a["path"], tuple(a["shape"])
    spec = json.loads(Path(a["spec"]).read_text())
    stats_path = a.get("stats")
    if method == "pread":
        fd = os.open(path, os.O_RDONLY)
        pread = os.pread

        def read(sl):
            return b"".join(pread(fd, n, o) for o, n in slab_runs(shape, sl))
    elif method == "memmap":
        import numpy as np
        fd = os.open(path, os.O_RDONLY)
        mm = np.memmap(path, dtype=DTYPE, mode="r", shape=shape)

        def read(sl):
            return np.array(mm[tuple(slice(x, y) for x, y in sl)]).tobytes()
    else:
        fd = None
        read = _open_lib(method, path)
    # warm-up, untimed: the first element (outside every timed slab), so
    # lazy set-up (event loops, thread pools, first FUSE lookups) is paid.
    read([[0, 1]] * (len(shape) - 1) + [[0, 1]])
    out = []
    clock = time.perf_counter_ns
    for p in spec["passes"]:
        if p.get("before") == "dontneed" and fd is not None:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        # warm = the source's files in the page cache (untimed)
        lib.prewarm(p.get("prewarm") or ())
        s0 = _stats(stats_path)
        s1 = _stats(stats_path)
        probe = {k: s1[k] - s0[k] for k in s0} if s0 else None
        h = hashlib.sha256()
        lat = []
        nb = 0
        c0, t0 = time.process_time(), time.perf_counter()
        for sl in p["slabs"]:
            x = clock()
            b = read(sl)
            lat.append(clock() - x)
            h.update(b)
            nb += len(b)
        t1, c1 = time.perf_counter(), time.process_time()
        s2 = _stats(stats_path)
        out.append({"name": p["name"], "read_s": t1 - t0, "read_cpu_s": c1 - c0,
                    "lat_ns": lat, "sha256": h.hexdigest(), "nbytes": nb,
                    "stats": _delta(s1, s2, probe)})
    return {"passes": out}


def child_decodecheck(a: dict) -> dict:
    """Untimed: one pread at a time, the stats file read around each."""
    shape = tuple(a["shape"])
    spec = json.loads(Path(a["spec"]).read_text())
    fd = os.open(a["path"], os.O_RDONLY)
    s0 = _stats(a["stats"])
    s1 = _stats(a["stats"])
    probe = {k: s1[k] - s0[k] for k in s0}
    rows = []
    for sl in spec["slabs"]:
        before = _stats(a["stats"])
        for o, n in slab_runs(shape, sl):
            os.pread(fd, n, o)
        after = _stats(a["stats"])
        rows.append(_delta(before, after, probe))
    return {"per_read": rows}


def child_main(arg: str) -> None:
    a = json.loads(arg)
    fn = {"seq": child_seq, "seq-cf": child_seq_cf, "ops": child_ops,
          "decodecheck": child_decodecheck}[a["mode"]]
    print(json.dumps(fn(a)))


# --------------------------------------------------------------------------
# data


def build_suite(data_dir: Path, size_mib: int, shard_mib: int) -> dict:
    """The four Zarr v3 stores and the raw file (cached; see the module doc)."""
    import numpy as np
    import zarr
    from zarr.codecs import BloscCodec

    if size_mib % 4 or size_mib < 8:
        lib.fail("--size-mib must be a multiple of 4, at least 8")
    if shard_mib % 4 or size_mib % shard_mib:
        lib.fail("--shard-mib must be a multiple of 4 dividing --size-mib")
    nz = size_mib // 4
    depth = shard_mib // 4
    shape = (nz, NY, NX)
    root = data_dir / f"suite-{size_mib}mib-shard{shard_mib}"
    stores = {k: root / f"{k}.zarr" for k in ("zstd", "lz4", "raw", "sharded")}
    raw = root / f"{ARRAY}.raw"
    stamp_path = root / "stamp.json"
    stamp = {"format": DATA_FORMAT_VERSION, "seed": SEED, "shape": list(shape),
             "chunks": list(CHUNK), "shard": [depth, NY, NX]}
    cached = lib.data_cached(stamp_path, stamp, [raw, *stores.values()])
    if not cached:
        log(f"generating {size_mib} MiB x 4 stores in {root} ...")
        t0 = time.perf_counter()
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        common = dict(shape=shape, dtype="float32", fill_value=0.0)

        def group(p):
            return zarr.open_group(str(p), mode="w", zarr_format=3)

        arrs = {
            "zstd": group(stores["zstd"]).create_array(
                ARRAY, chunks=CHUNK, compressors="auto", **common),
            "lz4": group(stores["lz4"]).create_array(
                ARRAY, chunks=CHUNK, compressors=BloscCodec(cname="lz4", clevel=5,
                                                            shuffle="shuffle"), **common),
            "raw": group(stores["raw"]).create_array(
                ARRAY, chunks=CHUNK, compressors=None, **common),
            "sharded": group(stores["sharded"]).create_array(
                ARRAY, chunks=CHUNK, shards=(depth, NY, NX), compressors="auto", **common),
        }
        rng = np.random.default_rng(SEED)
        with open(raw, "wb") as fraw:
            for z0 in range(0, nz, depth):
                block = np.stack([lib.field_slab(z, nz, NY, NX, rng)
                                  for z in range(z0, z0 + depth)])
                for a in arrs.values():
                    a[z0:z0 + depth] = block  # whole shards per write
                fraw.write(block.tobytes())
        stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
        log(f"  written in {time.perf_counter() - t0:.1f}s")
    nbytes = raw.stat().st_size
    assert nbytes == size_mib * MIB, (nbytes, size_mib)
    info = {"root": root, "raw": raw, "shape": shape, "nbytes": nbytes, "depth": depth,
            "cached": cached, "stores": {}}
    for k, p in stores.items():
        meta = json.loads((p / ARRAY / "zarr.json").read_text())
        stored = sum(f.stat().st_size for f in (p / ARRAY).rglob("*")
                     if f.is_file() and f.name != "zarr.json")
        info["stores"][k] = {"path": p, "codecs": meta["codecs"], "stored_bytes": stored,
                             "ratio": nbytes / stored}
    return info


def build_agg(data_dir: Path, size_mib: int, quick: bool) -> dict:
    """bench_aggregation.py's 64-partition aggregation; --quick: 256 x 256 time steps."""
    ny = nx = 256 if quick else 512
    return lib.build_aggregation(data_dir, size_mib, 64, ny, nx)


# --------------------------------------------------------------------------
# helpers (harness)


def expected_ops(raw: Path, shape, slabs) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with open(raw, "rb") as f:
        fd = f.fileno()
        for sl in slabs:
            for o, ln in slab_runs(shape, sl):
                b = os.pread(fd, ln, o)
                h.update(b)
                n += len(b)
    return h.hexdigest(), n


def fmt_s(x: float) -> str:
    return f"{x:.4f}" if x < 0.1 else f"{x:.3f}"


# --------------------------------------------------------------------------
# the benchmark


class Suite:
    def __init__(self, args, slabfs: Path, py: Path, workdir: Path, suite: dict,
                 agg: dict | None):
        self.args, self.slabfs, self.py, self.workdir = args, slabfs, py, workdir
        self.suite, self.agg = suite, agg
        self.cold_ok = os.geteuid() == 0 and not args.no_cold
        # results[workload][phase][contender] = {"label", "runs": [...], ...}
        self.results: dict = {}
        self.meta: dict = {}  # per workload: reference, bytes, mounts, checks
        self.errors: list[str] = []
        self.redone = 0
        self.spec_n = 0
        self.daemons = lib.Mounts(slabfs, workdir, digits=4, extra_args=(
            ("--cache-size", args.cache_size) if args.cache_size else ()))

    # -- plumbing

    def child_cmd(self, **a) -> list[str]:
        return [str(self.py), str(Path(__file__).resolve()), "--child", json.dumps(a)]

    def spec(self, obj: dict) -> str:
        self.spec_n += 1
        p = self.workdir / f"spec-{self.spec_n:04d}.json"
        p.write_text(json.dumps(obj))
        return str(p)

    @contextmanager
    def mounted(self, wl: str, source: Path, array: str):
        """A new `slabfs mount` of source; unmounted on exit; its facts
        (time to live, peak RSS, stats, cache budget) recorded under wl."""
        with self.daemons.mounted(source, array, wl) as m:
            yield m
            st = m.stats() or {}
            info = {"start_s": m.start_s, "peak_rss_kib": m.peak_rss_kib(),
                    "budget": st.get("cache", {}).get("budget"),
                    "errors": st.get("errors", {}), "log": str(m.log_path)}
            if st.get("errors"):
                # ENOENT counts lookups of absent names (shells, python); others are not expected
                bad = {k: v for k, v in st["errors"].items() if k != "ENOENT"}
                if bad:
                    self.errors.append(f"{wl}: daemon answered errors {bad} ({m.log_path})")
            self.meta.setdefault(wl, {}).setdefault("mounts", []).append(info)

    def stop_all(self) -> None:
        self.daemons.stop_all()

    def drop(self) -> None:
        """Drop the page cache, then read the programs back in (dd, cat,
        the slabfs binary and their shared libraries): "cold" is about the
        data, not about exec'ing a binary from disk, which the Python rows
        (timed inside the process) would not pay."""
        lib.drop_caches()
        if not hasattr(self, "_programs"):
            progs = {str(self.slabfs), shutil.which("dd"), shutil.which("cat")}
            for exe in list(progs):
                try:
                    out = subprocess.run(["ldd", exe], stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True).stdout
                except OSError:
                    continue
                for line in out.splitlines():
                    for tok in line.split():
                        if tok.startswith("/"):
                            progs.add(tok)
            self._programs = sorted(p for p in progs if p and os.path.isfile(p))
        lib.prewarm(self._programs)

    def proc(self, cmd, daemon=None, capture=False) -> dict:
        """One fresh process (benchlib.run_child): wall, CPU, daemon CPU,
        other processes' load; a child's JSON line merged in."""
        return lib.run_child(cmd, daemon=daemon, capture=capture)

    def record(self, wl, phase, ckey, label, r, keep, ref=False, unit_bytes=None):
        slot = self.results.setdefault(wl, {}).setdefault(phase, {}).setdefault(
            ckey, {"label": label, "runs": [], "ref": ref})
        if unit_bytes is not None:
            slot["bytes"] = unit_bytes
        if keep:
            slot["runs"].append(r)

    def measure(self, tag: str, label: str, fn):
        """fn() -> {phase: result}. Waits for an idle machine first; redone
        (fn runs again from scratch, e.g. with a new mount) while other
        processes used more than --max-foreign of the CPU. None if it failed
        (the error is recorded)."""
        def attempt(_):
            lib.wait_idle(self.args.idle_wait)
            try:
                return fn()
            except Exception as e:  # noqa: BLE001
                msg = f"{label}: {type(e).__name__}: {str(e)[:400]}"
                log(f"[{tag}] ERROR {msg}")
                self.errors.append(msg)
                return None

        def foreign(out):
            return max(r.get("foreign", 0.0) for r in out.values())

        def describe(out):
            txt = " ".join(f"{ph} {fmt_s(r['t'])}s" for ph, r in out.items())
            return f"[{tag}] {label:<44} {txt} other-load {foreign(out):.0%}"

        out, redone = lib.redo_while_busy(attempt, self.args, describe, foreign=foreign)
        self.redone += redone
        return out

    def rounds(self, wl: str, slots: list, verify=None) -> None:
        """Warm-up + --reps rounds; each round runs every slot once, the
        order rotated by one each round. A slot is (label, fn, sink) where
        fn() -> {phase: result} and sink(phase, result, keep) records it."""
        a = self.args
        t0 = time.perf_counter()
        if verify:
            try:
                verify()
            except Exception as e:  # noqa: BLE001
                msg = f"{wl}: verification failed: {type(e).__name__}: {str(e)[:400]}"
                log("ERROR " + msg)
                self.errors.append(msg)
        for rep in range(-a.warmup, a.reps):
            keep = rep >= 0
            tag = f"{wl} " + ("warmup" if rep < 0 else f"rep {rep + 1}/{a.reps}")
            k = (rep + a.warmup) % len(slots)
            for label, fn, sink in slots[k:] + slots[:k]:
                out = self.measure(tag, label, fn)
                if out:
                    for phase, r in out.items():
                        sink(phase, r, keep)
        self.meta.setdefault(wl, {})["wall_s"] = time.perf_counter() - t0

    # -- contender runners: each returns a result with "t" (the timed
    #    seconds), "proc_s" (whole process), "cpu_s", "daemon_cpu_s", "foreign"

    def run_tool(self, cmd, daemon=None) -> dict:
        r = self.proc(cmd, daemon=daemon)
        r["t"] = r["proc_s"] = r["wall_s"]
        return r

    def run_py(self, daemon=None, **a) -> dict:
        r = self.proc(self.child_cmd(**a), daemon=daemon, capture=True)
        r["proc_s"] = r["wall_s"]
        if "read_s" in r:
            r["t"] = r["read_s"]
        return r

    def check_seq(self, r: dict, want_sample: str, nbytes: int, label: str) -> dict:
        if r.get("nbytes") != nbytes or r.get("sample_sha") != want_sample:
            raise RuntimeError(f"{label}: read {r.get('nbytes')} bytes, sample sha "
                               f"{str(r.get('sample_sha'))[:12]} != raw file's {want_sample[:12]}")
        return r

    # -- workloads

    def seq_workload(self, wl: str, source: Path, array: str, nbytes: int, raw: Path,
                     peers: list, extra_cats: list, mount_pythons: bool = True,
                     cold: bool = True, raw_pythons: bool = True) -> None:
        """Full sequential read: cold / fresh / warm phases (see module doc).
        peers: [(key, label, method, path)] Python libraries reading the
        array into memory; extra_cats: [(key, label, cmd)] more stdout tools."""
        want = lib.sha_file(raw)
        want_sample = raw_sample_sha(raw, nbytes)
        self.meta.setdefault(wl, {}).update(bytes=nbytes, reference="mnt-dd", unit="bytes")
        cold = cold and self.cold_ok
        shape = None
        if array == ARRAY:
            shape = list(self.suite["shape"])
        elif self.agg:
            shape = list(self.agg["shape"])
        slabfs_cat = [str(self.slabfs), "cat", str(source), array]

        def sink_for(ckey, label, ref=False):
            def sink(phase, r, keep):
                self.record(wl, phase, ckey, label, r, keep, ref=ref, unit_bytes=nbytes)
            return sink

        def verify():
            for key, label, cmd in [("cat-slabfs", "slabfs cat", slabfs_cat)] + extra_cats:
                got = lib.sha_cmd(cmd)
                if got != want:
                    raise RuntimeError(f"{label}: bytes differ from the raw file")
                log(f"{wl}: {label}: all bytes match the raw file (sha256)")
            with self.mounted(wl, source, array) as m:
                got = lib.sha_cmd(["dd", f"if={m.file}", "bs=1M", "status=none"])
                if got != want:
                    raise RuntimeError("dd through the mount: bytes differ from the raw file")
                log(f"{wl}: dd through the mount: all bytes match the raw file (sha256)")

        slots = []
        # mount contenders: a new mount per run; fresh read, then warm re-read
        mcs = [("mnt-dd", "mount: dd bs=1M", "dd")]
        if mount_pythons:
            mcs += [("mnt-pread", "mount: Python os.preadv 1 MiB", "preadv"),
                    ("mnt-memmap", "mount: numpy.memmap copy", "memmap")]
        for ckey, label, how in mcs:
            def run_mount(how=how, label=label, drop=False):
                with self.mounted(wl, source, array) as m:
                    if drop:
                        self.drop()
                    out = {}
                    for phase in (("cold",) if drop else ("fresh", "warm")):
                        if how == "dd":
                            r = self.run_tool(["dd", f"if={m.file}", "of=/dev/null", "bs=1M",
                                               "status=none"], daemon=m)
                        else:
                            r = self.check_seq(self.run_py(
                                daemon=m, mode="seq", method=how, path=str(m.file),
                                nbytes=nbytes, shape=shape), want_sample, nbytes, label)
                        out[phase] = r
                    st = m.stats() or {}
                    rss = m.peak_rss_kib()
                    for r in out.values():
                        r["daemon_peak_rss_kib"] = rss
                        r["daemon_stats"] = st.get("cache")
                    return out
            sink = sink_for(ckey, label, ref=(ckey == "mnt-dd"))
            slots.append((label + " (fresh, warm)", run_mount, sink))
            if cold:
                slots.append((label + " (cold)", lambda f=run_mount: f(drop=True), sink))
        # slabfs cat and other stdout tools: fresh (+ cold)
        for ckey, label, cmd in [("cat-slabfs", "slabfs cat (no FUSE)", slabfs_cat)] + extra_cats:
            sink = sink_for(ckey, label)
            slots.append((label, lambda cmd=cmd: {"fresh": self.run_tool(cmd)}, sink))
            if cold:
                def cold_tool(cmd=cmd):
                    self.drop()
                    return {"cold": self.run_tool(cmd)}
                slots.append((label + " (cold)", cold_tool, sink))
        # Python peers: fresh (+ cold)
        for ckey, label, method, path in peers:
            def run_peer(method=method, path=path, label=label, phase="fresh"):
                if phase == "cold":
                    self.drop()
                mode = "seq-cf" if method == "cf" else "seq"
                r = self.check_seq(self.run_py(mode=mode, method=method, path=str(path),
                                               nbytes=nbytes, shape=shape),
                                   want_sample, nbytes, label)
                return {phase: r}
            sink = sink_for(ckey, label)
            slots.append((label, run_peer, sink))
            if cold:
                slots.append((label + " (cold)", lambda f=run_peer: f(phase="cold"), sink))
        # the raw file: warm (+ cold)
        raws = [("raw-cat", "raw file: cat", ["cat", str(raw)]),
                ("raw-dd", "raw file: dd bs=1M", ["dd", f"if={raw}", "of=/dev/null", "bs=1M",
                                                  "status=none"])]
        for ckey, label, cmd in raws:
            sink = sink_for(ckey, label)
            slots.append((label, lambda cmd=cmd: {"warm": self.run_tool(cmd)}, sink))
            if cold and ckey == "raw-cat":
                def cold_raw(cmd=cmd):
                    self.drop()
                    return {"cold": self.run_tool(cmd)}
                slots.append((label + " (cold)", cold_raw, sink))
        if raw_pythons:
            label = "raw file: Python os.preadv 1 MiB"
            sink = sink_for("raw-pread", label)

            def raw_py(phase="warm"):
                if phase == "cold":
                    self.drop()
                return {phase: self.check_seq(self.run_py(
                    mode="seq", method="preadv", path=str(raw), nbytes=nbytes, shape=shape),
                    want_sample, nbytes, label)}
            slots.append((label, raw_py, sink))
            if cold:
                slots.append((label + " (cold)", lambda: raw_py("cold"), sink))

        # The fresh phase needs the store in the page cache: read it first
        # each round (cold runs in between drop it).
        pre = [source.parent if source.is_file() else source, raw]
        if self.agg and array != ARRAY:
            pre = [self.agg["root"]]
        orig = slots

        def with_prewarm(fn):
            def g():
                lib.prewarm(pre)
                return fn()
            return g
        slots = [(lbl, (fn if "(cold)" in lbl else with_prewarm(fn)), sk) for lbl, fn, sk in orig]
        self.rounds(wl, slots, verify)

    def ops_workload(self, wl: str, source: Path, array: str, shape, raw: Path, phases: list,
                     contenders: list, ref: str, decode_check: dict | None = None,
                     warm_paths: list | None = None) -> None:
        """Reads of hyperslabs, timed per op, in passes. phases: [(phase, slabs,
        pass options)]; the first pass of a run is the cold one: the run gets
        a fresh mount / process and (root) dropped caches before it. A pass
        with {"prewarm": True} first reads the contender's source files into
        the page cache (the mount's: warm_paths, default the source).
        contenders: [(key, label, method, path or None for the mount[, opts])];
        opts: max_ops (a slow peer reads only the first ones), warm (more
        paths to prewarm)."""
        shape = list(shape)
        warm_paths = [str(x) for x in (warm_paths or [source])]
        extra_warm: dict = {}
        exp = {ph: expected_ops(raw, shape, slabs) for ph, slabs, _ in phases}
        nb = {ph: exp[ph][1] for ph in exp}
        self.meta.setdefault(wl, {}).update(reference=ref, unit="ops", bytes=nb,
                                            ops={ph: len(s) for ph, s, _ in phases})
        cap = {}

        def run(key, label, method, path, cold_drop=True):
            def go(m=None):
                p = str(m.file) if m else str(path)
                passes = []
                for ph, slabs, opt in phases:
                    slabs = slabs[:cap.get((key, ph), len(slabs))]
                    warm = (warm_paths if path is None else [str(path)]) + extra_warm.get(key, [])
                    passes.append({"name": ph, "slabs": slabs,
                                   "prewarm": warm if opt.get("prewarm") else None})
                if self.cold_ok and cold_drop:
                    self.drop()
                r = self.run_py(daemon=m, mode="ops", method=method, path=p, shape=shape,
                                spec=self.spec({"passes": passes}),
                                stats=str(m.mnt / ".slabfs" / "stats") if m else None)
                out = {}
                for pr, (ph, slabs, _) in zip(r["passes"], phases):
                    n = len(slabs[:cap.get((key, ph), len(slabs))])
                    want = (exp[ph] if n == len(slabs) else expected_ops(raw, shape, slabs[:n]))
                    if (pr["sha256"], pr["nbytes"]) != want:
                        raise RuntimeError(f"{label} ({ph}): bytes differ from the raw file's")
                    lat = pr.pop("lat_ns")
                    pr["lat"] = lib.lat_summary(lat)
                    out[ph] = {**{k: r[k] for k in ("wall_s", "cpu_s", "daemon_cpu_s",
                                                    "foreign")},
                               "t": pr["read_s"], "proc_s": r["wall_s"], "ops": n,
                               "bytes": pr["nbytes"], **pr}
                if m:
                    rss = m.peak_rss_kib()
                    for x in out.values():
                        x["daemon_peak_rss_kib"] = rss
                return out

            if path is None:
                def with_mount():
                    with self.mounted(wl, source, array) as m:
                        return go(m)
                return with_mount
            return go

        slots = []
        for key, label, method, path, *rest in contenders:
            opts = rest[0] if rest else {}
            for ph, _, _ in phases:
                if opts.get("max_ops"):
                    cap[(key, ph)] = opts["max_ops"]
            extra_warm[key] = [str(x) for x in opts.get("warm", [])]

            def sink(phase, r, keep, key=key, label=label):
                self.record(wl, phase, key, label, r, keep, ref=(key == ref))
            slots.append((label, run(key, label, method, path), sink))

        def verify():
            if decode_check:
                self.decode_check(wl, source, array, shape, **decode_check)
        self.rounds(wl, slots, verify)

    def decode_check(self, wl, source, array, shape, slabs, chunk_of, extra_of=None) -> None:
        """Untimed, on a fresh mount: each of the first reads decodes exactly
        one chunk when it is the first read in its chunk (plus, sharded, the
        shard's index when it is the first read in its shard), none else."""
        with self.mounted(wl, source, array) as m:
            r = self.run_py(daemon=m, mode="decodecheck", path=str(m.file), shape=list(shape),
                            spec=self.spec({"slabs": slabs}),
                            stats=str(m.mnt / ".slabfs" / "stats"))
        seen, seen_x, bad, rows = set(), set(), [], []
        for sl, d in zip(slabs, r["per_read"]):
            c = chunk_of(sl)
            want = 0 if c in seen else 1
            seen.add(c)
            if extra_of is not None:
                x = extra_of(sl)
                want += 0 if x in seen_x else 1
                seen_x.add(x)
            got = d["decodes"] + d["uncached"]
            rows.append({"want_decodes": want, **d})
            if got != want or d["prefetches"]:
                bad.append({"slab": sl, "want": want, **d})
        res = {"reads": len(slabs), "mismatches": len(bad), "first_mismatches": bad[:5],
               "total_decodes": sum(x["decodes"] + x["uncached"] for x in rows),
               "total_want": sum(x["want_decodes"] for x in rows),
               "prefetches": sum(x["prefetches"] for x in rows)}
        self.meta.setdefault(wl, {})["decode_check"] = res
        log(f"{wl}: per-read decode check over {len(slabs)} reads: {res['total_decodes']} "
            f"decodes, {res['total_want']} expected, {res['prefetches']} prefetches, "
            f"{len(bad)} mismatching reads")

    def conc_workload(self, wl: str, store: Path, raw: Path, nbytes: int, readers: int) -> None:
        want_parts = []
        part = nbytes // readers
        if part % MIB:
            lib.fail(f"size / {readers} readers must be a multiple of 1 MiB")
        blocks = part // MIB
        for i in range(readers):
            want_parts.append(lib.sha_file(raw, i * part, part))
        self.meta.setdefault(wl, {}).update(reference=f"mnt-{readers}", unit="bytes",
                                            bytes=nbytes, readers=readers)

        def cmds(path, n):
            if n == 1:
                return [["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"]]
            return [["dd", f"if={path}", "of=/dev/null", "bs=1M", f"skip={i * blocks}",
                     f"count={blocks}", "status=none"] for i in range(n)]

        def verify():
            with self.mounted(wl, store, ARRAY) as m:
                for i in range(readers):
                    got = lib.sha_cmd(["dd", f"if={m.file}", "bs=1M", f"skip={i * blocks}",
                                       f"count={blocks}", "status=none"])
                    if got != want_parts[i]:
                        raise RuntimeError(f"reader {i}: bytes differ from the raw file's")
            log(f"{wl}: the {readers} readers' parts through the mount match the raw file")

        def par(cmdlist, daemon=None) -> dict:
            p = lib.run_processes(cmdlist, daemon=daemon, slack_ticks=4)
            if any(p["statuses"]):
                raise RuntimeError(f"dd exit statuses {p['statuses']}")
            t = p["wall_s"]
            return {"t": t, "proc_s": t, "wall_s": t, "cpu_s": p["cpu_s"],
                    "daemon_cpu_s": p["daemon_cpu_s"], "foreign": p["foreign"]}

        slots = []
        for n in (1, readers):
            key, label = f"mnt-{n}", f"mount, fresh: {n} x dd bs=1M" + (
                f" (1/{n} each)" if n > 1 else "")

            def run_m(n=n):
                lib.prewarm([store])
                with self.mounted(wl, store, ARRAY) as m:
                    r = par(cmds(m.file, n), daemon=m)
                    r["daemon_peak_rss_kib"] = m.peak_rss_kib()
                    r["daemon_stats"] = (m.stats() or {}).get("cache")
                return {"fresh": r}
            slots.append((label, run_m, lambda ph, r, keep, key=key, label=label: self.record(
                wl, ph, key, label, r, keep, ref=(key == f"mnt-{readers}"), unit_bytes=nbytes)))
            key, label = f"raw-{n}", f"raw file: {n} x dd bs=1M" + (f" (1/{n} each)"
                                                                     if n > 1 else "")

            def run_r(n=n):
                lib.prewarm([raw])
                return {"fresh": par(cmds(raw, n))}
            slots.append((label, run_r, lambda ph, r, keep, key=key, label=label: self.record(
                wl, ph, key, label, r, keep, unit_bytes=nbytes)))
        self.rounds(wl, slots, verify)

    # -- the plan

    def run(self, only: list[str]) -> None:
        s, a = self.suite, self.args
        shape = s["shape"]
        nbytes = s["nbytes"]
        raw = s["raw"]
        st = s["stores"]
        zarr_arr = lambda k: st[k]["path"] / ARRAY  # noqa: E731
        for codec in ("zstd", "lz4", "raw"):
            wl = f"seq-{codec}"
            if wl not in only:
                continue
            name = {"zstd": "zstd", "lz4": "blosc-lz4", "raw": "uncompressed"}[codec]
            self.meta.setdefault(wl, {})["title"] = (
                f"full sequential read, {nbytes / MIB:.0f} MiB float32, {name}, "
                f"{nbytes // MIB} chunks")
            self.seq_workload(wl, st[codec]["path"], ARRAY, nbytes, raw,
                              peers=[("zarr", "zarr-python 3 [:]", "zarr", zarr_arr(codec)),
                                     ("ts", "tensorstore read()", "ts", zarr_arr(codec))],
                              extra_cats=[])
        nz = shape[0]
        plane = shape[1] * shape[2] * ITEM
        if "random" in only or "sharded" in only:
            cold_offs, warm_offs = random_offsets(nbytes, plane, a.random_reads, a.seed)
            rnd = {"cold": [range_slab(shape, o, PAGE) for o in cold_offs],
                   "warm": [range_slab(shape, o, PAGE) for o in warm_offs]}
        chunk_of = lambda sl: (sl[0][0], sl[1][0] // CHUNK[1], sl[2][0] // CHUNK[2])  # noqa: E731
        rphases = lambda r: [("cold", r["cold"], {}),  # noqa: E731
                             ("warm", r["warm"], {"prewarm": True})]
        if "random" in only:
            wl = "random"
            self.meta.setdefault(wl, {})["title"] = (
                f"{a.random_reads} random 4 KiB reads (cold), then {a.random_reads} others "
                "(warm), zstd")
            self.ops_workload(
                wl, st["zstd"]["path"], ARRAY, shape, raw, rphases(rnd),
                [("mnt-pread", "mount: Python os.pread", "pread", None),
                 ("mnt-memmap", "mount: numpy.memmap", "memmap", None),
                 ("zarr", "zarr-python 3 arr[z, y, :]", "zarr", zarr_arr("zstd")),
                 ("ts", "tensorstore arr[z, y, :].read()", "ts", zarr_arr("zstd")),
                 ("raw-pread", "raw file: Python os.pread", "pread", raw)],
                ref="mnt-pread",
                decode_check={"slabs": rnd["cold"][:a.decode_check_reads], "chunk_of": chunk_of})
        if "slices" in only:
            zs = (nz // 4, nz // 2, (3 * nz) // 4)
            y0 = x0 = 384
            slices = {
                "row": [[zs[0], zs[0] + 1], [NY // 3, NY // 3 + 1], [0, NX]],
                "column": [[zs[1], zs[1] + 1], [0, NY], [700, 701]],
                "tile": [[zs[2], zs[2] + 1], [y0, y0 + 256], [x0, x0 + 256]],
            }
            for name, sl in slices.items():
                wl = f"slice-{name}"
                runs = slab_runs(shape, sl)
                self.meta.setdefault(wl, {})["title"] = (
                    f"one {name} {sl} of the 3-D array: {len(runs)} pread(s) of "
                    f"{runs[0][1]} bytes through the flat file; warm = the same again, zstd")
                self.ops_workload(
                    wl, st["zstd"]["path"], ARRAY, shape, raw,
                    [("cold", [sl], {}), ("warm", [sl], {})],
                    [("mnt-pread", "mount: Python os.pread per run", "pread", None),
                     ("mnt-memmap", "mount: numpy.memmap slice", "memmap", None),
                     ("zarr", "zarr-python 3 slice", "zarr", zarr_arr("zstd")),
                     ("ts", "tensorstore slice", "ts", zarr_arr("zstd")),
                     ("raw-pread", "raw file: Python os.pread per run", "pread", raw)],
                    ref="mnt-pread")
        if "sharded" in only:
            wl = "sharded-full"
            self.meta.setdefault(wl, {})["title"] = (
                f"sharded array, full read ({s['depth']} x 1 MiB inner chunks per shard), zstd")
            self.seq_workload(wl, st["sharded"]["path"], ARRAY, nbytes, raw,
                              peers=[("zarr", "zarr-python 3 [:]", "zarr", zarr_arr("sharded")),
                                     ("ts", "tensorstore read()", "ts", zarr_arr("sharded"))],
                              extra_cats=[], mount_pythons=False, cold=False, raw_pythons=False)
            wl = "sharded-random"
            self.meta.setdefault(wl, {})["title"] = (
                f"sharded array, {a.random_reads} random 4 KiB reads cold, then others warm")
            depth = s["depth"]
            self.ops_workload(
                wl, st["sharded"]["path"], ARRAY, shape, raw, rphases(rnd),
                [("mnt-pread", "mount: Python os.pread", "pread", None),
                 ("zarr", "zarr-python 3 arr[z, y, :]", "zarr", zarr_arr("sharded")),
                 ("ts", "tensorstore arr[z, y, :].read()", "ts", zarr_arr("sharded")),
                 ("raw-pread", "raw file: Python os.pread", "pread", raw)],
                ref="mnt-pread",
                decode_check={"slabs": rnd["cold"][:a.decode_check_reads], "chunk_of": chunk_of,
                              "extra_of": lambda sl: sl[0][0] // depth})
        if "agg" in only and self.agg:
            g = self.agg
            gshape = list(g["shape"])
            gbytes = g["nbytes"]
            wl = "agg-full"
            self.meta.setdefault(wl, {})["title"] = (
                f"64-partition netCDF-3 aggregation {tuple(gshape)}, full read "
                "(mount and slabfs cat: NCA descriptor; cf-python: CF-1.13 aggregation)")
            self.seq_workload(wl, g["nca"], "tas", gbytes, g["raw"],
                              peers=[("cf", "cf-python .array (CF-1.13)", "cf", g["cfa"])],
                              extra_cats=[("cat-slabfs-cfa", "slabfs cat, CF-1.13 aggregation",
                                           [str(self.slabfs), "cat", str(g["cfa"]), "tas"])],
                              mount_pythons=False, cold=False, raw_pythons=False)
            gplane = gshape[1] * gshape[2] * ITEM
            co, wo = random_offsets(gbytes, gplane, a.random_reads, a.seed)
            grnd = {"cold": [range_slab(gshape, o, PAGE) for o in co],
                    "warm": [range_slab(gshape, o, PAGE) for o in wo]}
            wl = "agg-random"
            self.meta.setdefault(wl, {})["title"] = (
                f"64-partition aggregation, {a.random_reads} random 4 KiB reads cold, then "
                f"others warm (cf-python: first {a.cf_random_reads} of each)")
            self.ops_workload(
                wl, g["nca"], "tas", gshape, g["raw"], rphases(grnd),
                [("mnt-pread", "mount: Python os.pread", "pread", None),
                 ("cf", "cf-python f[t, y0:y1, :].array", "cf", g["cfa"],
                  {"max_ops": a.cf_random_reads, "warm": [g["frag"]]}),
                 ("raw-pread", "raw file: Python os.pread", "pread", g["raw"])],
                ref="mnt-pread", warm_paths=[g["nca"], g["frag"]])
        if "conc8" in only:
            for codec, name in (("zstd", "zstd"), ("raw", "uncompressed")):
                wl = f"conc8-{codec}"
                self.meta.setdefault(wl, {})["title"] = (
                    f"{a.readers} concurrent readers of disjoint parts vs 1 reader, fresh "
                    f"mount, {name}, {nbytes // MIB} chunks")
                self.conc_workload(wl, st[codec]["path"], raw, nbytes, a.readers)


def raw_sample_sha(raw: Path, nbytes: int) -> str:
    """What sample_sha() of a correct whole-array read gives."""
    h = hashlib.sha256()
    with open(raw, "rb") as f:
        for o in sample_offsets(nbytes):
            h.update(os.pread(f.fileno(), PAGE, o))
    return h.hexdigest()


# --------------------------------------------------------------------------
# report

PHASE_ORDER = {"cold": 0, "fresh": 1, "warm": 2}


def summarize(b: Suite) -> dict:
    """Medians, min-max, MiB/s and ref/row per (workload, phase, contender)."""
    out = {}
    for wl, phases in b.results.items():
        meta = b.meta.get(wl, {})
        out[wl] = {}
        for phase, cs in phases.items():
            rows = {}
            for key, c in cs.items():
                rs = c["runs"]
                if not rs:
                    continue
                ts = [r["t"] for r in rs]
                nbytes = rs[0].get("bytes") or c.get("bytes") or meta.get("bytes")
                row = {"label": c["label"], "ref": c["ref"], "n": len(rs),
                       "median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts),
                       "bytes": nbytes,
                       "proc_median_s": statistics.median(r["proc_s"] for r in rs),
                       "cpu_median_s": statistics.median(r["cpu_s"] for r in rs),
                       "daemon_cpu_median_s": statistics.median(
                           r.get("daemon_cpu_s", 0.0) for r in rs)}
                row["mib_s"] = nbytes / MIB / row["median_s"] if row["median_s"] > 0 else None
                if "lat" in rs[0]:
                    row["ops"] = rs[0]["ops"]
                    row["per_op_mean_us"] = statistics.median(r["lat"]["mean_us"] for r in rs)
                    row["per_op_median_us"] = statistics.median(
                        r["lat"]["median_us"] for r in rs)
                    row["per_op_p99_us"] = statistics.median(r["lat"]["p99_us"] for r in rs)
                # daemon counters: per pass (random, slices) or, for whole
                # reads, the mount's totals at the end of the run
                sts = ([r["stats"] for r in rs if r.get("stats")]
                       or [r["daemon_stats"] for r in rs if r.get("daemon_stats")])
                if sts:
                    row["daemon_stats"] = {k: statistics.median(s.get(k, 0) for s in sts)
                                           for k in sts[0] if isinstance(sts[0][k], (int, float))}
                rows[key] = row
            ref = next((r for r in rows.values() if r["ref"]), None)
            for r in rows.values():
                if ref and r["bytes"] and ref["bytes"]:
                    r["ref_over_row"] = (r["median_s"] / r["bytes"]) / (
                        ref["median_s"] / ref["bytes"])
            out[wl][phase] = rows
    return out


def markdown_table(summ: dict, b: Suite) -> str:
    lines = ["| workload | phase | contender | median s | min–max s | MiB/s | ref/row | notes |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for wl in summ:
        for phase in sorted(summ[wl], key=lambda p: PHASE_ORDER.get(p, 9)):
            rows = summ[wl][phase]
            for key, r in sorted(rows.items(), key=lambda kv: (not kv[1]["ref"],)):
                notes = []
                if "per_op_mean_us" in r:
                    notes.append(f"{r['ops']} op(s): mean {r['per_op_mean_us']:.0f} µs, median "
                                 f"{r['per_op_median_us']:.0f} µs, p99 {r['per_op_p99_us']:.0f} µs")
                if r["proc_median_s"] - r["median_s"] > 1e-3:
                    notes.append(f"process {r['proc_median_s']:.2f} s")
                ds = r.get("daemon_stats")
                if ds:
                    notes.append("daemon: " + ", ".join(
                        f"{k} {v:g}" for k, v in ds.items() if k in (
                            "requests", "decodes", "misses", "hits", "prefetches", "uncached",
                            "entries")))
                mark = "*" if r["ref"] else ""
                ratio = r.get("ref_over_row")
                lines.append(
                    f"| {wl} | {phase} | {r['label']}{mark} | {fmt_s(r['median_s'])} | "
                    f"{fmt_s(r['min_s'])}–{fmt_s(r['max_s'])} | "
                    f"{r['mib_s']:.0f} | {'ref' if r['ref'] else (f'{ratio:.2f}' if ratio else '–')}"
                    f" | {'; '.join(notes)} |")
    return "\n".join(lines)


def targets(summ: dict, b: Suite) -> list[dict]:
    """The issue's targets, each met / missed / not measured."""
    out = []

    def get(wl, phase, key):
        return summ.get(wl, {}).get(phase, {}).get(key)

    def add(name, value, target, how):
        if name.split(" ", 1)[0].rstrip(":") not in summ:
            return  # workload not run (--only)
        if value is None:
            out.append({"target": name, "value": None, "goal": target, "verdict": "not measured",
                        "how": how})
        else:
            out.append({"target": name, "value": value, "goal": target,
                        "verdict": "met" if value >= target else "missed", "how": how})

    for codec in ("zstd", "lz4", "raw"):
        wl = f"seq-{codec}"
        for phase in ("fresh", "cold"):
            for key, goal, what in (("ts", 1.0, "≥ tensorstore"), ("zarr", 2.0, "≥ 2x zarr-python"),
                                    ("cat-slabfs", 0.8, "≥ 0.8x slabfs cat")):
                r = get(wl, phase, key)
                if r is None and phase == "cold":
                    continue
                add(f"{wl} {phase}: mount dd {what}", r and r.get("ref_over_row"), goal,
                    "throughput ratio, medians; peers' in-process read")
        r = get(wl, "warm", "raw-cat")
        add(f"{wl} warm: mount dd re-read ≥ 0.8x cat of the raw file", r and r.get("ref_over_row"),
            0.8, "throughput ratio, medians")
    for wl in ("random", "sharded-random", "agg-random"):
        peer = "cf" if wl == "agg-random" else "zarr"
        for phase in ("cold", "warm"):
            m, z = get(wl, phase, "mnt-pread"), get(wl, phase, peer)
            if wl != "random" and not (m and z):
                continue
            v = (z["per_op_mean_us"] / m["per_op_mean_us"]) if (m and z) else None
            add(f"{wl} {phase}: mount pread ≥ 20x faster per read than "
                f"{'cf-python' if peer == 'cf' else 'zarr-python'}", v, 20.0,
                "mean time per read (total / reads)")
            if phase == "cold" and m and z:
                # The mean of a cold pass is bounded by the decodes it
                # must do (reads / distinct chunks at equal decode cost);
                # the median is the typical read. Both are reported.
                add(f"{wl} {phase}: mount pread ≥ 20x faster per read than "
                    f"{'cf-python' if peer == 'cf' else 'zarr-python'} (medians)",
                    z["per_op_median_us"] / m["per_op_median_us"], 20.0,
                    "median time per read")
    # cold random reads decode exactly one chunk each
    for wl in ("random",):
        m = get(wl, "cold", "mnt-pread")
        ds = (m or {}).get("daemon_stats")
        if ds is not None:
            chunks = b.meta[wl].get("distinct_chunks_cold")
            dec = ds["decodes"] + ds["uncached"]
            ok = (dec == chunks and ds["misses"] == chunks and ds["prefetches"] == 0)
            out.append({"target": f"{wl} cold: each cold read decodes exactly one chunk "
                                  "(whole pass: decodes = misses = distinct chunks touched, "
                                  "no prefetch)",
                        "value": f"decodes {dec:g}, misses {ds['misses']:g}, prefetches "
                                 f"{ds['prefetches']:g}, distinct chunks {chunks}",
                        "verdict": "met" if ok else "missed", "how": ".slabfs/stats before/after"})
    for wl in ("random", "sharded-random"):
        dc = b.meta.get(wl, {}).get("decode_check")
        if dc is not None:
            extra = " (sharded: + the shard's index on its first read)" if "sharded" in wl else ""
            out.append({"target": f"{wl} cold: each of the first {dc['reads']} reads decodes one "
                                  f"chunk if first in its chunk, else none{extra}",
                        "value": f"{dc['total_decodes']} decodes for {dc['total_want']} first "
                                 f"touches, {dc['prefetches']} prefetches, {dc['mismatches']} "
                                 "reads off",
                        "verdict": "met" if dc["mismatches"] == 0 else "missed",
                        "how": ".slabfs/stats around each pread"})
    for wl in ("conc8-zstd", "conc8-raw"):
        r = get(wl, "fresh", "mnt-1")
        add(f"{wl}: {b.args.readers} concurrent readers ≥ 1.6x one reader (aggregate "
            "throughput)", r and r.get("ref_over_row"), 1.6,
            "throughput ratio, medians, fresh mounts")
    for wl, rss in rss_by_workload(b).items():
        if rss["budget"] is None or rss["max_kib"] is None:
            continue
        lim = rss["budget"] / 1024 + RSS_SLACK_MIB * 1024
        out.append({"target": f"{wl}: daemon peak RSS < cache budget + {RSS_SLACK_MIB} MiB",
                    "value": f"{rss['max_kib'] / 1024:.0f} MiB (budget "
                             f"{rss['budget'] / MIB:.0f} MiB)",
                    "verdict": "met" if rss["max_kib"] < lim else "missed",
                    "how": "VmHWM, max over the workload's mounts"})
    return out


def rss_by_workload(b: Suite) -> dict:
    out = {}
    for wl, meta in b.meta.items():
        ms = meta.get("mounts") or []
        if not ms:
            continue
        hwm = [m["peak_rss_kib"] for m in ms if m.get("peak_rss_kib")]
        out[wl] = {"mounts": len(ms), "max_kib": max(hwm) if hwm else None,
                   "median_kib": statistics.median(hwm) if hwm else None,
                   "budget": next((m["budget"] for m in ms if m.get("budget")), None),
                   "start_s_median": statistics.median(m["start_s"] for m in ms
                                                       if m.get("start_s") is not None)}
    return out


# --------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small data (16 MiB arrays, 200 random reads), 2 reps, no warm-up, "
                         "no idle wait: checks the suite end to end; figures are NOT meaningful")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions (default 5; quick 2)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="discarded warm-up repetitions (default 1; quick 0)")
    ap.add_argument("--only", default=",".join(WORKLOADS),
                    help=f"comma-separated workloads (default all): {', '.join(WORKLOADS)}")
    ap.add_argument("--size-mib", type=int, default=None,
                    help="array size, a multiple of 4 (default 256; quick 16)")
    ap.add_argument("--shard-mib", type=int, default=None,
                    help="shard size of the sharded array (default 32; quick 4)")
    ap.add_argument("--random-reads", type=int, default=None,
                    help="random 4 KiB reads per pass (default 2000; quick 200)")
    ap.add_argument("--cf-random-reads", type=int, default=None,
                    help="cf-python's random reads per pass, the first of the same list "
                         "(default 200; quick 20): cf-python takes ~ms per read")
    ap.add_argument("--decode-check-reads", type=int, default=64,
                    help="reads checked one by one for their decodes (default 64)")
    ap.add_argument("--readers", type=int, default=8, help="concurrent readers (default 8)")
    ap.add_argument("--seed", type=int, default=20241122, help="seed of the random offsets")
    ap.add_argument("--cache-size", default=None,
                    help="`slabfs mount --cache-size` (default: slabfs's own, 512MiB)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold (dropped caches) runs")
    ap.add_argument("--data-dir", type=Path, default=lib.REPO / "bench-data",
                    help="where the data is generated and cached (default <repo>/bench-data)")
    ap.add_argument("--max-foreign", type=float, default=0.15,
                    help="redo a run if other processes used more than this fraction of the "
                         "machine's CPU during it (default 0.15)")
    ap.add_argument("--idle-wait", type=float, default=None,
                    help="wait up to this many seconds for an idle machine before each run "
                         "(default 30; quick 0)")
    ap.add_argument("--retries", type=int, default=None, help="redos per run (default 3; quick 0)")
    ap.add_argument("--no-build", action="store_true", help="use the existing target/release/slabfs")
    ap.add_argument("--skip-venv", action="store_true", help="do not run scripts/venv.sh")
    args = ap.parse_args()
    q = args.quick
    dflt = lambda v, full, quick: v if v is not None else (quick if q else full)  # noqa: E731
    args.reps = dflt(args.reps, 5, 2)
    args.warmup = dflt(args.warmup, 1, 0)
    args.size_mib = dflt(args.size_mib, 256, 16)
    args.shard_mib = dflt(args.shard_mib, 32, 4)
    args.random_reads = dflt(args.random_reads, 2000, 200)
    args.cf_random_reads = dflt(args.cf_random_reads, 200, 20)
    args.idle_wait = dflt(args.idle_wait, 30.0, 0.0)
    args.retries = dflt(args.retries, 3, 0)
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    for w in only:
        if w not in WORKLOADS:
            lib.fail(f"unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    command = lib.command_line()

    py = lib.use_venv(args.skip_venv, ("numpy", "zarr", "tensorstore", "netCDF4", "cf"))
    lib.require_tools("fusermount3", "dd", "cat")
    if os.geteuid() != 0 and not args.no_cold:
        log("not root: no cold runs (dropping the page cache needs root)")

    t_start = time.perf_counter()
    data_dir = lib.abs_dir(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    built = lib.build_slabfs(args.no_build)
    suite = build_suite(data_dir, args.size_mib, args.shard_mib)
    agg = build_agg(data_dir, args.size_mib, q) if "agg" in only else None
    slabfs, workdir = lib.private_binary(built)
    t_data = time.perf_counter() - t_start

    b = Suite(args, slabfs, py, workdir, suite, agg)
    # distinct chunks the cold random pass touches (for the decode target)
    if "random" in only:
        shape = suite["shape"]
        cold_offs, _ = random_offsets(suite["nbytes"], shape[1] * shape[2] * ITEM,
                                      args.random_reads, args.seed)
        b.meta.setdefault("random", {})["distinct_chunks_cold"] = len(
            {o // (CHUNK[1] * CHUNK[2] * ITEM) for o in cold_offs})
    lib.exit_on_signals()
    t0 = time.perf_counter()
    try:
        b.run(only)
    finally:
        b.stop_all()
    t_run = time.perf_counter() - t0

    summ = summarize(b)
    tg = targets(summ, b)
    rss_all = rss_by_workload(b)
    rss = {wl: rss_all[wl] for wl in list(summ) + list(rss_all) if wl in rss_all}
    hdr, m, v = lib.header_lines(command, slabfs, ("netCDF4", "cf-python"),
                                 where="from the repository root")
    foreign = [r.get("foreign", 0.0) for ph in b.results.values() for cs in ph.values()
               for c in cs.values() for r in c["runs"]]

    print()
    if q:
        print("**QUICK RUN: small data, few repetitions, busy machine: the figures check that "
              "the suite works, they are not measurements.**")
        print()
    print("\n".join(hdr))
    print()
    print(f"Data: float32 {tuple(suite['shape'])}, chunks {CHUNK} (1 MiB, whole rows); "
          + "; ".join(f"{k}: {st['stored_bytes'] / MIB:.1f} MiB stored (ratio {st['ratio']:.3f})"
                      for k, st in suite["stores"].items())
          + (f"; aggregation {tuple(agg['shape'])} in {agg['partitions']} netCDF-3 partitions"
             if agg else ""))
    print()
    print(f"{args.reps} repetition(s), {args.warmup} warm-up discarded, contenders interleaved "
          f"(order rotated each repetition). Cold runs: "
          f"{'yes' if b.cold_ok else 'no'}. Time: data and build {t_data:.0f} s, "
          f"runs {t_run:.0f} s.")
    print()
    for wl in summ:
        mt = b.meta.get(wl, {})
        print(f"- **{wl}**: {mt.get('title', '')} ({mt.get('wall_s', 0):.0f} s)")
    print()
    print(markdown_table(summ, b))
    print()
    print("`ref/row`: the row's median time per byte over the reference row's (*): how many "
          "times faster the reference is. Python rows time the read inside the process "
          "(\"process\" in notes is the whole process).")
    print()
    print("### Targets")
    print()
    print("| target | value | verdict | measured as |")
    print("|---|---|---|---|")
    for t in tg:
        val = t["value"]
        val = "–" if val is None else (f"{val:.2f}" if isinstance(val, float) else str(val))
        goal = f" (goal {t['goal']:g})" if t.get("goal") is not None else ""
        print(f"| {t['target']} | {val}{goal} | **{t['verdict']}** | {t['how']} |")
    print()
    print("### Daemon peak RSS (VmHWM) per workload")
    print()
    print("| workload | mounts | peak RSS max / median (MiB) | cache budget (MiB) | "
          "time to live, median (ms) |")
    print("|---|---:|---:|---:|---:|")
    for wl, r in rss.items():
        mx = f"{r['max_kib'] / 1024:.0f}" if r["max_kib"] else "?"
        md_ = f"{r['median_kib'] / 1024:.0f}" if r["median_kib"] else "?"
        bud = f"{r['budget'] / MIB:.0f}" if r["budget"] else "?"
        print(f"| {wl} | {r['mounts']} | {mx} / {md_} | {bud} | {r['start_s_median'] * 1e3:.0f} |")
    print()
    print(f"Other processes' CPU during kept runs: at most {max(foreign or [0]):.0%} of the "
          f"machine (median {statistics.median(foreign or [0]):.0%}); {b.redone} run(s) redone.")
    if b.errors:
        print()
        print("### Errors")
        print()
        for e in b.errors:
            print(f"- {e}")

    results = {"command": command, "quick": q, "args": vars(args), "machine": m, "versions": v,
               "data": {"suite": suite, "agg": agg}, "summary": summ, "targets": tg,
               "rss": rss, "meta": b.meta, "runs": b.results, "errors": b.errors,
               "redone": b.redone, "time_s": {"data": t_data, "runs": t_run}}
    out = data_dir / "results.json"
    lib.write_json(out, results)
    try:
        slabfs.unlink()
    except OSError:
        pass
    log(f"results in {out}; daemon logs in {workdir}")


if __name__ == "__main__":
    main()
