#!/usr/bin/env python3
"""Sharding benchmark (issue 5): a 1 GiB sharded float32 Zarr v3 array written
by zarr-python 3, and its unsharded equivalent (same inner chunks, same codec).

Usage (from the repository root, as root for the cold pass and the mount):

    .venv/bin/python scripts/bench_sharded.py [--size-mib 1024] [--shard-mib 32] [--reps 7] [--perf]

What it measures:

(a) What reading one inner chunk costs, counted, untimed:
    - `strace -f -y` of `slabfs cat --log-level debug --offset X --length 4096`
      on the sharded array (and on the unsharded one): every open and read of
      a chunk or shard file, with offsets and sizes, checked against the
      shard index (decoded here with numpy); the debug log's fetch lines
      ("read the shard index", "inner chunk [..] at bytes ..", "decoding
      chunk ..") count the decodes;
    - the same 4096 bytes through a fresh `slabfs mount`: the daemon traced
      with `strace -f -p` while one `pread` runs on a file opened with
      POSIX_FADV_RANDOM (so the kernel asks for exactly that page), and the
      `.slabfs/stats` counters before and after (cache misses and decodes;
      the shard index is a cache entry, so it counts as one decode);
    - for comparison, zarr-python and tensorstore reading the same row
      (`arr[z, y, :]`, the same 4096 bytes) in a traced child: their reads of
      the shard file.
(b) Full sequential reads, every contender a fresh process, interleaved:
    `slabfs cat` of the sharded and of the unsharded array (> /dev/null),
    zarr-python `arr[:]` and tensorstore `.read()` of both (in-process read
    times reported too, as in bench_read.py), and `cat` of the raw file.
    Optional cold pass (page cache dropped before every run; default when
    root).
(c) Random 4 KiB reads (--random-reads, default 2000; 0 skips): `os.pread`
    at distinct 4 KiB-aligned offsets on a *fresh* mount of each array
    (chunk cache empty, store files in the page cache), against zarr-python
    and tensorstore reading the same rows of the sharded array, opened once.

The data (cached in --data-dir, gitignored, under `shard-<size>mib-<shard>mib/`):
shape (size_mib/4, 1024, 1024) float32, bench_read.py's smooth field
(benchlib.field_slab) plus seeded Gaussian noise; inner chunks (1, 256, 1024)
= 1 MiB (whole rows, so a 4096-byte row-aligned read lies in exactly one
inner chunk); shards (shard_mib/4, 1024, 1024); codecs zarr-python 3's default (bytes + zstd
level 0; index bytes + crc32c at the end of the shard). The unsharded store
has the same chunks and codecs, and a raw file holds the expected bytes.

Machinery from scripts/benchlib.py, as in bench_read.py / bench_mount.py
(whose random-read children and Mount (c) uses): private copy of the binary,
bytes verified (sha256) before timing, idle-wait and foreign-CPU rejection,
medians and min–max, JSON results in <data-dir>/results-sharded.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path

import benchlib as lib
from benchlib import log

MIB = lib.MIB
PAGE = lib.PAGE
DATA_FORMAT_VERSION = 1  # bump when the generator changes
SEED = 20241205
NY, NX = 1024, 1024  # one z-slab = 4 MiB; one row = 4096 bytes
INNER = (1, 256, 1024)  # 1 MiB inner chunks of whole rows
ARRAY = "field"


# --------------------------------------------------------------------------
# data


def build_data(data_dir: Path, size_mib: int, shard_mib: int) -> dict:
    import numpy as np
    import zarr

    if shard_mib % 4 or size_mib % shard_mib or shard_mib < 4:
        lib.fail("--shard-mib must be a multiple of 4 dividing --size-mib")
    nz = size_mib // 4
    depth = shard_mib // 4
    shape = (nz, NY, NX)
    shard = (depth, NY, NX)
    root = data_dir / f"shard-{size_mib}mib-{shard_mib}mib"
    paths = {"root": root, "sharded": root / "sharded.zarr", "unsharded": root / "unsharded.zarr",
             "raw": root / f"{ARRAY}.raw"}
    stamp_path = root / "stamp.json"
    stamp = {"format": DATA_FORMAT_VERSION, "seed": SEED, "shape": list(shape),
             "inner": list(INNER), "shard": list(shard)}
    cached = lib.data_cached(stamp_path, stamp, paths.values())
    if not cached:
        log(f"generating {size_mib} MiB, sharded ({shard_mib} MiB shards) and unsharded, "
            f"in {root} ...")
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        t0 = time.perf_counter()
        sh = zarr.open_group(str(paths["sharded"]), mode="w", zarr_format=3).create_array(
            ARRAY, shape=shape, chunks=INNER, shards=shard, dtype="float32",
            compressors="auto", fill_value=0.0)
        un = zarr.open_group(str(paths["unsharded"]), mode="w", zarr_format=3).create_array(
            ARRAY, shape=shape, chunks=INNER, dtype="float32", compressors="auto",
            fill_value=0.0)
        rng = np.random.default_rng(SEED)
        with open(paths["raw"], "wb") as fraw:
            for z0 in range(0, nz, depth):
                block = np.stack([lib.field_slab(z, nz, NY, NX, rng)
                                  for z in range(z0, z0 + depth)])
                sh[z0:z0 + depth] = block  # one whole shard per write
                un[z0:z0 + depth] = block
                fraw.write(block.tobytes())
        stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
        log(f"  written in {time.perf_counter() - t0:.1f}s")
    meta = json.loads((paths["sharded"] / ARRAY / "zarr.json").read_text())
    umeta = json.loads((paths["unsharded"] / ARRAY / "zarr.json").read_text())
    nbytes = paths["raw"].stat().st_size
    assert nbytes == size_mib * MIB, (nbytes, size_mib)

    def data_files(store: Path) -> list[Path]:
        return [f for f in (store / ARRAY).rglob("*") if f.is_file() and f.name != "zarr.json"]

    sfiles, ufiles = data_files(paths["sharded"]), data_files(paths["unsharded"])
    per_shard = depth * (NY // INNER[1]) * (NX // INNER[2])
    return {**paths, "array": ARRAY, "shape": shape, "inner": INNER, "shard": shard,
            "nbytes": nbytes, "cached": cached, "codecs": meta["codecs"],
            "unsharded_codecs": umeta["codecs"],
            "n_shards": len(sfiles), "n_chunks": len(ufiles), "inner_per_shard": per_shard,
            "index_bytes": 16 * per_shard + 4,
            "sharded_bytes": sum(f.stat().st_size for f in sfiles),
            "unsharded_bytes": sum(f.stat().st_size for f in ufiles)}


def shard_key(d: dict, z: int) -> Path:
    """The shard file holding z-slab z (zarr v3 default chunk keys)."""
    return d["sharded"] / ARRAY / "c" / str(z // d["shard"][0]) / "0" / "0"


def chunk_key(d: dict, z: int, yc: int) -> Path:
    return d["unsharded"] / ARRAY / "c" / str(z) / str(yc) / "0"


def index_entry(d: dict, z: int, yc: int) -> tuple[int, int]:
    """(offset, nbytes) of inner chunk (z, yc, 0) in its shard, from the
    shard's index (end of the file, little-endian uint64 pairs + crc32c)."""
    import numpy as np

    path = shard_key(d, z)
    n = d["inner_per_shard"]
    with open(path, "rb") as f:
        f.seek(-d["index_bytes"], os.SEEK_END)
        raw = f.read(d["index_bytes"])
    idx = np.frombuffer(raw[:16 * n], "<u8").reshape(n, 2)
    flat = (z % d["shard"][0]) * (NY // INNER[1]) + yc
    return int(idx[flat, 0]), int(idx[flat, 1])


# --------------------------------------------------------------------------
# children

# argv: array path, nbytes, mode ("time" or "sha")
ZARR_CHILD = r"""
import hashlib, json, sys, time
import zarr
path, nbytes, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c0 = time.process_time()
t0 = time.perf_counter()
a = zarr.open_array(path, mode="r")[:]
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == nbytes, a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
if mode == "sha":
    print(json.dumps({"sha256": hashlib.sha256(a.astype("<f4", copy=False).tobytes()).hexdigest(),
                      "nbytes": a.nbytes}))
else:
    print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads)}))
"""

TS_CHILD = r"""
import hashlib, json, sys, time
import tensorstore as ts
path, nbytes, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c0 = time.process_time()
t0 = time.perf_counter()
a = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result().read().result()
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == nbytes, a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
if mode == "sha":
    print(json.dumps({"sha256": hashlib.sha256(a.astype("<f4", copy=False).tobytes()).hexdigest(),
                      "nbytes": a.nbytes}))
else:
    print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads)}))
"""

# One row, for the traced single-chunk read. argv: lib, array path, z, y
ROW_CHILD = r"""
import hashlib, json, sys
lib, path, z, y = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if lib == "zarr":
    import zarr
    a = zarr.open_array(path, mode="r")
    print("OPENED", file=sys.stderr, flush=True)
    v = a[z, y, :]
else:
    import tensorstore as ts
    a = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()
    print("OPENED", file=sys.stderr, flush=True)
    v = a[z, y, :].read().result()
print(json.dumps({"sha256": hashlib.sha256(v.astype("<f4").tobytes()).hexdigest()}))
"""

# Random rows (4 KiB-aligned offsets) with tensorstore, opened once; as
# benchlib.ZARR_ROWS_CHILD. argv: path nbytes n seed
TS_RANDOM_CHILD = r"""
import hashlib, json, random, sys, time
import tensorstore as ts
path, nbytes, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
offs = [p * 4096 for p in random.Random(seed).sample(range(nbytes // 4096), n)]
arr = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()
nz, ny, nx = arr.shape
row = lambda o: divmod(o // 4096, ny)
for o in offs[:16]:
    arr[row(o)[0], row(o)[1], :].read().result()
h = hashlib.sha256()
lat = []
clock = time.perf_counter_ns
c0 = time.process_time()
t0 = time.perf_counter()
for o in offs:
    z, y = row(o)
    a = clock()
    v = arr[z, y, 0:nx].read().result()
    e = clock()
    lat.append(e - a)
    h.update(v.tobytes())
t1 = time.perf_counter()
c1 = time.process_time()
print(json.dumps({"lat_ns": lat, "read_s": t1 - t0, "read_cpu_s": c1 - c0, "sha256": h.hexdigest()}))
"""


def contenders(slabfs: Path, py: Path, d: dict, unsharded_peers: bool) -> list[dict]:
    n = str(d["nbytes"])
    s_arr, u_arr = str(d["sharded"] / ARRAY), str(d["unsharded"] / ARRAY)
    cs = [
        {"name": "slabfs cat, sharded", "key": "slabfs_sharded",
         "cmd": [str(slabfs), "cat", str(d["sharded"]), ARRAY], "inproc": False},
        {"name": "slabfs cat, unsharded", "key": "slabfs_unsharded",
         "cmd": [str(slabfs), "cat", str(d["unsharded"]), ARRAY], "inproc": False},
        {"name": "zarr-python, sharded", "key": "zarr_sharded",
         "cmd": [str(py), "-c", ZARR_CHILD, s_arr, n, "time"], "inproc": True},
        {"name": "tensorstore, sharded", "key": "ts_sharded",
         "cmd": [str(py), "-c", TS_CHILD, s_arr, n, "time"], "inproc": True},
    ]
    if unsharded_peers:
        cs += [
            {"name": "zarr-python, unsharded", "key": "zarr_unsharded",
             "cmd": [str(py), "-c", ZARR_CHILD, u_arr, n, "time"], "inproc": True},
            {"name": "tensorstore, unsharded", "key": "ts_unsharded",
             "cmd": [str(py), "-c", TS_CHILD, u_arr, n, "time"], "inproc": True},
        ]
    cs.append({"name": "cat (raw file)", "key": "cat", "cmd": ["cat", str(d["raw"])],
               "inproc": False, "verify": False})
    return cs


RATIOS = [
    ("slabfs sharded / slabfs unsharded", "slabfs_sharded", "slabfs_unsharded", 0.9, False),
    ("slabfs sharded / zarr-python sharded, process vs process", "slabfs_sharded",
     "zarr_sharded", None, False),
    ("slabfs sharded / zarr-python sharded, vs its in-process read", "slabfs_sharded",
     "zarr_sharded", None, True),
    ("slabfs sharded / tensorstore sharded, process vs process", "slabfs_sharded", "ts_sharded",
     None, False),
    ("slabfs sharded / tensorstore sharded, vs its in-process read", "slabfs_sharded",
     "ts_sharded", None, True),
    ("slabfs sharded / `cat` raw file", "slabfs_sharded", "cat", None, False),
]


def peer_sharding_ratios(stats: dict) -> list[str]:
    """How much sharding costs each peer: in-process read throughput, sharded / unsharded."""
    out = []
    for k, name in (("zarr", "zarr-python"), ("ts", "tensorstore")):
        a, b = stats.get(f"{k}_sharded"), stats.get(f"{k}_unsharded")
        if a and b:
            out.append(f"| {name} sharded / {name} unsharded (in-process reads) | "
                       f"{b['read']['median'] / a['read']['median']:.2f} | – |")
    return out


# --------------------------------------------------------------------------
# (a) one inner chunk, counted


SYSCALL_RE = re.compile(r"^(?:\[pid\s+)?(\d+)\]?\s+(\w+)\((.*)\)\s+=\s+(-?\d+)")


def parse_strace(path: Path, under: Path) -> dict:
    """Opens and reads (read/pread64/preadv*) of files under `under` other than
    zarr.json, from an `strace -f -y` log; fd paths come from -y (`3</path>`)."""
    opens, reads = [], []
    meta_reads = 0
    prefix = str(under)
    for line in path.read_text(errors="replace").splitlines():
        m = SYSCALL_RE.match(line.strip())
        if not m:
            continue
        _, call, args, ret = m.groups()
        ret = int(ret)
        if call in ("openat", "open"):
            pm = re.search(r'"([^"]*)"', args)
            if pm and pm.group(1).startswith(prefix) and not pm.group(1).endswith("zarr.json") \
                    and ret >= 0 and "O_DIRECTORY" not in args:
                opens.append(pm.group(1)[len(prefix) + 1:])
            continue
        if call not in ("read", "pread64", "preadv", "preadv2"):
            continue
        fm = re.match(r"\d+<([^>]*)>", args)
        if not fm or not fm.group(1).startswith(prefix):
            continue
        fpath = fm.group(1)
        if fpath.endswith("zarr.json"):
            meta_reads += 1
            continue
        parts = [x.strip() for x in args.rsplit(",", 2)]
        entry = {"file": fpath[len(prefix) + 1:], "call": call, "returned": ret}
        if call == "pread64":
            entry["offset"] = int(parts[-1])
            entry["len"] = int(parts[-2])
        elif call == "read":
            entry["len"] = int(parts[-1])
        reads.append(entry)
    data_reads = [r for r in reads if r["returned"] > 0]
    return {"opens": opens, "reads": reads, "reads_with_data": len(data_reads),
            "eof_reads": sum(r["returned"] == 0 for r in reads),
            "bytes": sum(r["returned"] for r in data_reads), "zarr_json_reads": meta_reads}


def strace_cmd(out: Path, cmd: list[str]) -> list[str]:
    return ["strace", "-f", "-y", "-qq", "-e", "trace=openat,open,read,pread64,preadv,preadv2",
            "-o", str(out), *cmd]


def one_chunk(slabfs: Path, py: Path, d: dict, workdir: Path, z: int, y: int) -> dict:
    """Every way of reading the one row (z, y): 4096 bytes in inner chunk (z, y // 256, 0)."""
    yc = y // INNER[1]
    offset = (z * NY + y) * NX * 4
    with open(d["raw"], "rb") as f:
        want = os.pread(f.fileno(), PAGE, offset)
    want_sha = hashlib.sha256(want).hexdigest()
    ent = index_entry(d, z, yc)
    shard_file = shard_key(d, z)
    shard_size = shard_file.stat().st_size
    res: dict = {"z": z, "y": y, "offset": offset, "inner_chunk": [z, yc, 0],
                 "shard": str(shard_file.relative_to(d["sharded"])),
                 "shard_bytes": shard_size, "index_range": [shard_size - d["index_bytes"],
                                                            d["index_bytes"]],
                 "chunk_range": list(ent),
                 "chunk_file_bytes": chunk_key(d, z, yc).stat().st_size}
    # slabfs cat, sharded and unsharded
    for which in ("sharded", "unsharded"):
        tr = workdir / f"strace-cat-{which}.txt"
        p = subprocess.run(strace_cmd(tr, [str(slabfs), "cat", "--log-level", "debug",
                                           "--offset", str(offset), "--length", str(PAGE),
                                           str(d[which]), ARRAY]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0 or p.stdout != want:
            raise RuntimeError(f"slabfs cat --offset {offset} ({which}) gave wrong bytes "
                               f"(status {p.returncode}): {p.stderr.decode()[-500:]}")
        err = p.stderr.decode(errors="replace")
        r = parse_strace(tr, d[which] / ARRAY)
        r["log_index_reads"] = err.count("read the shard index")
        r["log_inner_fetches"] = len(re.findall(r"inner chunk \[[^\]]*\] at bytes", err))
        r["log_chunk_decodes"] = len(re.findall(r"decoding chunk \[", err))
        res[f"cat_{which}"] = r
    # zarr-python and tensorstore, the same row of the sharded array
    for peer in ("zarr", "tensorstore"):
        tr = workdir / f"strace-{peer}.txt"
        p = subprocess.run(strace_cmd(tr, [str(py), "-c", ROW_CHILD, peer,
                                           str(d["sharded"] / ARRAY), str(z), str(y)]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        got = json.loads(p.stdout.strip().splitlines()[-1])["sha256"] if p.returncode == 0 else None
        if got != want_sha:
            raise RuntimeError(f"{peer} row read gave wrong bytes: {p.stderr[-500:]}")
        res[f"{peer}_sharded"] = parse_strace(tr, d["sharded"] / ARRAY)
    # Through a fresh mount: strace on the daemon during one pread.
    res["mount"] = one_chunk_mount(slabfs, d, workdir, offset, want)
    return res


def one_chunk_mount(slabfs: Path, d: dict, workdir: Path, offset: int, want: bytes) -> dict:
    mnt = workdir / "mnt"
    mnt.mkdir(exist_ok=True)
    m = lib.Mount(slabfs, d["sharded"], mnt, ARRAY, workdir / "daemon-one-chunk.log").start()
    tr = workdir / "strace-daemon.txt"
    st = None
    stats_path = mnt / ".slabfs" / "stats"

    def stats() -> tuple[dict, int]:
        raw = stats_path.read_bytes()
        return json.loads(raw), len(raw)

    try:
        tids = sorted(os.listdir(f"/proc/{m.pid}/task"), key=int)
        st = subprocess.Popen(["strace", "-f", "-y", "-qq", "-e",
                               "trace=openat,open,read,pread64,preadv,preadv2", "-o", str(tr),
                               "-p", ",".join(tids)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # let strace attach to every thread
        # Reading the stats file is itself counted (as in benchlib's
        # PREAD_CHILD): two reads back to back give that baseline.
        sa, _ = stats()
        sb, len_b = stats()
        fd = os.open(m.file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            got = os.pread(fd, PAGE, offset)
        finally:
            os.close(fd)
        time.sleep(0.5)
        sc, _ = stats()
        st.send_signal(signal.SIGINT)
        st.wait(timeout=20)
        st = None
        if got != want:
            raise RuntimeError("the pread through the mount gave wrong bytes")
        r = parse_strace(tr, d["sharded"] / ARRAY)
        req = lambda s: s["reads"]["requests"]  # noqa: E731
        r.update({"fuse_read_requests": (req(sc) - req(sb)) - (req(sb) - req(sa)),
                  "fuse_bytes": sc["reads"]["bytes"] - sb["reads"]["bytes"] - len_b,
                  "cache_misses": sc["cache"]["misses"] - sb["cache"]["misses"],
                  "cache_decodes": sc["cache"]["decodes"] - sb["cache"]["decodes"],
                  "cache_entries_after": sc["cache"]["entries"],
                  "stats_before": sb, "stats_after": sc})
        return r
    finally:
        if st is not None:
            st.kill()
            st.wait()
        m.stop()


def one_chunk_table(oc: dict, d: dict) -> str:
    ir, cr = oc["index_range"], oc["chunk_range"]
    lines = [f"Row (z={oc['z']}, y={oc['y']}): bytes {oc['offset']}..{oc['offset'] + PAGE} of "
             f"the flat file, inner chunk {oc['inner_chunk']}, in shard `{oc['shard']}` "
             f"({oc['shard_bytes']} bytes); its index: bytes {ir[0]}..{ir[0] + ir[1]} "
             f"({ir[1]} bytes); the inner chunk: bytes {cr[0]}..{cr[0] + cr[1]} ({cr[1]} bytes) "
             f"per the index; the unsharded chunk file: {oc['chunk_file_bytes']} bytes.", "",
             "| reader | opens of chunk/shard files | reads returning data (+ EOF reads) "
             "| bytes read | reads: (offset, length) | inner-chunk decodes |",
             "|---|---:|---:|---:|---|---|"]

    def fmt_reads(r: dict) -> str:
        xs = []
        for e in r["reads"]:
            if e["returned"] <= 0:
                continue
            if "offset" in e:
                tag = ""
                if (e["offset"], e["returned"]) == tuple(ir):
                    tag = " = index"
                elif (e["offset"], e["returned"]) == tuple(cr):
                    tag = " = chunk"
                xs.append(f"{e['call']}({e['offset']}, {e['returned']}){tag}")
            else:
                xs.append(f"{e['call']}({e['returned']})")
        if len(xs) > 6:
            xs = xs[:5] + [f"… {len(xs) - 5} more"]
        return ", ".join(xs) or "–"

    rows = [("`slabfs cat --offset X --length 4096`, sharded", oc["cat_sharded"],
             f"{oc['cat_sharded']['log_inner_fetches']} (debug log; plus "
             f"{oc['cat_sharded']['log_index_reads']} index read)"),
            ("`slabfs cat --offset X --length 4096`, unsharded", oc["cat_unsharded"],
             f"{oc['cat_unsharded']['log_chunk_decodes']} (debug log)"),
            ("fresh `slabfs mount`, one `pread` of 4096 bytes (daemon traced)", oc["mount"],
             f"{oc['mount']['cache_decodes']} cache decodes = index + chunk "
             f"({oc['mount']['cache_misses']} misses; {oc['mount']['fuse_read_requests']} FUSE "
             f"read request(s), {oc['mount']['fuse_bytes']} bytes)"),
            ("zarr-python `arr[z, y, :]`, sharded", oc["zarr_sharded"], "–"),
            ("tensorstore `arr[z, y, :].read()`, sharded", oc["tensorstore_sharded"], "–")]
    for label, r, dec in rows:
        eof = f" (+{r['eof_reads']})" if r["eof_reads"] else ""
        lines.append(f"| {label} | {len(r['opens'])} | {r['reads_with_data']}{eof} | "
                     f"{r['bytes']} | {fmt_reads(r)} | {dec} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# (c) random reads


class Random:
    def __init__(self, args, slabfs: Path, py: Path, d: dict, workdir: Path):
        self.args, self.slabfs, self.py, self.d, self.workdir = args, slabfs, py, d, workdir
        self.res: dict[str, list[dict]] = {}
        self.redone = 0
        self.sha = lib.random_pages_sha(d["raw"], d["nbytes"], args.random_reads, args.seed)
        self.daemons = lib.Mounts(slabfs, workdir)

    def mount(self, which: str) -> lib.Mount:
        return self.daemons.new(self.d[which], ARRAY, which)

    def stop(self, m: lib.Mount) -> None:
        self.daemons.stop(m)

    def stop_all(self) -> None:
        self.daemons.stop_all()

    def check(self, r: dict, who: str) -> dict:
        return lib.check_random_reads(r, self.sha, who)

    def measured(self, key: str, label: str, run, tag: str, keep: bool, setup=None,
                 teardown=None) -> None:
        a = self.args

        def attempt(_):
            ctx = setup() if setup else None
            try:
                lib.wait_idle(a.idle_wait)
                return run(ctx)
            finally:
                if teardown:
                    teardown(ctx)

        r, redone = lib.redo_while_busy(attempt, a, lambda r: (
            f"[random {tag}] {label:<34} {r['wall_s']:.3f}s median "
            f"{r['lat']['median_us']:.1f}us other-load {r['foreign']:.0%}"), keep=keep)
        self.redone += redone
        if keep:
            self.res.setdefault(key, []).append(r)

    def round(self, rep: int) -> None:
        a, d = self.args, self.d
        keep = rep >= 0
        tag = "warmup" if rep < 0 else f"rep {rep + 1}/{a.reps}"
        n, seed, nbytes = str(a.random_reads), str(a.seed), str(d["nbytes"])
        for which in ("sharded", "unsharded"):
            def run(m, which=which):
                r = lib.run_child([str(self.py), "-c", lib.PREAD_CHILD, str(m.file),
                                   str(m.mnt / ".slabfs" / "stats"), nbytes, n, seed],
                                  daemon=m, capture=True)
                r = self.check(r, f"pread {which}")
                st = m.stats() or {}
                r["cache_after"] = st.get("cache")
                return r
            self.measured(f"pread_{which}", f"pread, fresh mount, {which}", run, tag, keep,
                          setup=lambda which=which: self.mount(which), teardown=self.stop)
        arr = str(d["sharded"] / ARRAY)
        self.measured("zarr_sharded", "zarr-python rows, sharded", lambda _: self.check(
            lib.run_child([str(self.py), "-c", lib.ZARR_ROWS_CHILD, arr, nbytes, n, seed],
                          capture=True), "zarr"), tag, keep)
        self.measured("ts_sharded", "tensorstore rows, sharded", lambda _: self.check(
            lib.run_child([str(self.py), "-c", TS_RANDOM_CHILD, arr, nbytes, n, seed],
                          capture=True), "tensorstore"), tag, keep)

    def run(self) -> None:
        for rep in range(-self.args.warmup, self.args.reps):
            self.round(rep)

    def report(self) -> tuple[str, dict]:
        lines = ["| random 4 KiB reads | median per read (µs) | min–max of per-run medians (µs) "
                 "| mean (µs) | p90 (µs) | p99 (µs) | chunk-cache misses per read |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        out = {}
        labels = {"pread_sharded": "`os.pread`, fresh mount, sharded",
                  "pread_unsharded": "`os.pread`, fresh mount, unsharded",
                  "zarr_sharded": "zarr-python `arr[z, y, :]`, sharded, opened once",
                  "ts_sharded": "tensorstore `arr[z, y, :].read()`, sharded, opened once"}
        for k, label in labels.items():
            if k not in self.res:
                continue
            row, s = lib.random_row(label, self.res[k])
            if "cache_misses" in s:
                s["misses_per_read"] = statistics.median(
                    r["cache_misses"] / len(r["lat_us"]) for r in self.res[k])
                row += f" {s['misses_per_read']:.2f} |"
            else:
                row += " – |"
            lines.append(row)
            out[k] = s
        p = out.get("pread_sharded", {}).get("median_of_medians_us")
        if p:
            for k, name in (("pread_unsharded", "slabfs unsharded"),
                            ("zarr_sharded", "zarr-python sharded"),
                            ("ts_sharded", "tensorstore sharded")):
                if k in out:
                    out.setdefault("ratios", {})[name] = {
                        "median": out[k]["median_of_medians_us"] / p,
                        "mean": out[k]["mean_us"] / out["pread_sharded"]["mean_us"]}
        return "\n".join(lines), out


# --------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024,
                    help="array size in MiB, a multiple of --shard-mib (default 1024)")
    ap.add_argument("--shard-mib", type=int, default=32,
                    help="shard size in MiB, a multiple of 4 (default 32)")
    ap.add_argument("--no-unsharded-peers", action="store_true",
                    help="leave out zarr-python and tensorstore reading the unsharded array")
    ap.add_argument("--random-reads", type=int, default=2000,
                    help="random 4 KiB reads per run, distinct aligned offsets (default 2000; "
                         "0 skips the random-read part)")
    ap.add_argument("--seed", type=int, default=20241205, help="seed of the random offsets")
    lib.add_common_args(ap)
    args = ap.parse_args()
    command = lib.command_line()

    py = lib.use_venv(args.skip_venv, ("numpy", "zarr", "tensorstore"))
    lib.require_tools("strace", "fusermount3")
    data_dir = lib.abs_dir(args.data_dir)
    built = lib.build_slabfs(args.no_build)
    d = build_data(data_dir, args.size_mib, args.shard_mib)
    slabfs, workdir = lib.private_binary(built)
    rnd = None
    lib.exit_on_signals()
    try:
        cs = contenders(slabfs, py, d, not args.no_unsharded_peers)
        lib.verify_contenders(cs, lib.sha_file(d["raw"]))
        nz = d["shape"][0]
        oc = one_chunk(slabfs, py, d, workdir, z=nz // 2 + 3, y=300)
        log("one inner chunk: counted")
        passes = lib.run_warm_cold(cs, args)
        if args.random_reads > 0:
            rnd = Random(args, slabfs, py, d, workdir)
            rnd.run()
        profiles = (lib.perf_cat_profiles(cs, args, data_dir, "perf-shard", loops=3)
                    if args.perf else [])
        hdr, m, v = lib.header_lines(command, slabfs)
    finally:
        if rnd is not None:
            rnd.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    print("\n".join(hdr))
    print()
    inner = d["codecs"][0]["configuration"]
    print(f"Data: float32 {list(d['shape'])}, {d['nbytes'] / MIB:.0f} MiB; inner chunks "
          f"{list(d['inner'])} (1 MiB), codecs "
          f"{' + '.join(c['name'] for c in inner['codecs'])} (zstd level "
          f"{inner['codecs'][-1]['configuration'].get('level')}); sharded: {d['n_shards']} shards "
          f"of {list(d['shard'])} ({d['inner_per_shard']} inner chunks each, index "
          f"{' + '.join(c['name'] for c in inner['index_codecs'])} at the "
          f"{inner['index_location']}), {d['sharded_bytes'] / MIB:.1f} MiB stored; unsharded: "
          f"{d['n_chunks']} chunk files, {d['unsharded_bytes'] / MIB:.1f} MiB stored; "
          f"compression ratio {d['nbytes'] / d['unsharded_bytes']:.3f}.")
    results = {"command": command, "machine": m, "versions": v, "data": d, "one_chunk": oc}
    print("\n### (a) One inner chunk\n")
    print(one_chunk_table(oc, d))
    for key, res, redone in passes:
        title = lib.pass_title(args, key, "(b) Full sequential read")
        tab, stats = lib.table(cs, res, d["nbytes"])
        rat_tab, rat = lib.ratio_rows(stats, RATIOS)
        extra = peer_sharding_ratios(stats)
        if extra:
            rat_tab += "\n" + "\n".join(extra)
        note, worst = lib.foreign_note(res, redone, args.max_foreign)
        print(f"\n### {title}\n\n{tab}\n\n{rat_tab}\n\n{note}")
        for k in ("zarr_sharded", "ts_sharded"):
            if k in stats:
                print(f"{k}: up to {stats[k]['threads']} OS threads at exit")
        results[key] = {"runs": res, "stats": stats, "ratios": rat, "worst_foreign": worst,
                        "redone": redone}
    if rnd is not None:
        tab, out = rnd.report()
        note, worst = lib.foreign_note(rnd.res, rnd.redone, args.max_foreign)
        print(f"\n### (c) Random 4 KiB reads ({args.random_reads} distinct 4 KiB-aligned offsets "
              f"per run, seed {args.seed}, {args.reps} runs each; the mount is fresh for every "
              "run)\n")
        print(tab)
        for name, x in out.get("ratios", {}).items():
            print(f"- {name} / slabfs sharded, per read: {x['median']:.1f}x (medians), "
                  f"{x['mean']:.1f}x (means)")
        print(f"\n{note}")
        results["random"] = {"runs": rnd.res, "stats": out, "worst_foreign": worst,
                             "redone": rnd.redone}
    if profiles:
        print(lib.perf_section(profiles, results["warm"]["stats"], counts=False))
        results["perf"] = profiles
    out = data_dir / "results-sharded.json"
    lib.write_json(out, results)
    log(f"raw numbers in {out}")


if __name__ == "__main__":
    main()
