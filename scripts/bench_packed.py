#!/usr/bin/env python3
"""Benchmark blocked netCDF-3 archives (`slabfs pack`) against the
uncompressed classic file and netCDF-4 with zlib level 1 (`nccopy -d1`).

Usage (root, for drop_caches and FUSE)::

    .venv/bin/python scripts/bench_packed.py [--size-mib 256] [--reps 5]

What it does, all in one run:

1. Writes bench-data/packed/classic.nc with netCDF4-python (CDF-2): a record
   variable ``tas(time, lat, lon)`` float32 of SIZE MiB, smooth fields plus
   noise rounded to 0.01 K (realistic: neither zeros nor white noise), and a
   ``time`` record variable, so records are interleaved as in real files.
2. ``nccopy -d1`` into classic.nc4 (netCDF-4, zlib level 1, nccopy's default
   chunking), and ``slabfs pack`` into packed.ncb (zstd, 1 MiB blocks, the
   defaults) and packed-deflate1.ncb (deflate level 1, to set beside
   nccopy -d1). Pack is timed with 1 thread and with all cores
   (RAYON_NUM_THREADS), REPS times each, interleaved.
3. Full reads, REPS times, contenders interleaved, source files in the page
   cache (so the disk is out of the comparison): ``dd bs=1M`` of the mounted
   ``classic.nc/tas`` and ``packed.ncb/tas``, each on a fresh mount; ``cat``
   of the classic file itself; netCDF4-python reading ``tas`` whole from the
   classic file and from the netCDF-4 file (in-process time).
4. Random 4 KiB reads: ``os.pread`` of 4 KiB at a random page of each of
   up to 2000 distinct blocks, in random order, on fresh mounts of the packed
   and classic files (POSIX_FADV_RANDOM, so the kernel asks for exactly the
   page): every read is cold, and the daemon's `.slabfs/stats` read before
   and after gives the blocks decoded per read, the target's "touch one
   block". Also ``slabfs cat`` (no FUSE) of both, to separate the cost of
   decompression from FUSE's.

Every read's bytes are checked against netCDF4-python's values once
(sha256 of the whole variable, and the random reads against a memory-mapped
copy). Prints Markdown tables and writes bench-data/packed/results.json.
The build, the mounts (their daemons' logs in a bench-packed-* temporary
directory) and the checksums are scripts/benchlib.py's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import benchlib as lib
from benchlib import log

DATA = lib.REPO / "bench-data" / "packed"
MIB = lib.MIB
PAGE = lib.PAGE


def sh(*args: str | Path, env: dict | None = None, stdout=subprocess.DEVNULL) -> None:
    subprocess.run([str(a) for a in args], check=True, env=env, stdout=stdout)


# --------------------------------------------------------------------------
# data


def make_data(size_mib: int) -> dict:
    import netCDF4
    import numpy as np

    DATA.mkdir(parents=True, exist_ok=True)
    nlat, nlon = 512, 1024
    nt = max(1, size_mib * MIB // (nlat * nlon * 4))
    classic = DATA / "classic.nc"
    stamp = DATA / f"made-{nt}x{nlat}x{nlon}"
    if not stamp.exists():
        for p in DATA.iterdir():
            p.unlink()
        log(f"writing {classic} ({nt} x {nlat} x {nlon} float32)")
        rng = np.random.default_rng(7)
        lat = np.linspace(-np.pi / 2, np.pi / 2, nlat)[:, None]
        lon = np.linspace(0, 2 * np.pi, nlon)[None, :]
        with netCDF4.Dataset(classic, "w", format="NETCDF3_64BIT_OFFSET") as ds:
            ds.createDimension("time", None)
            ds.createDimension("lat", nlat)
            ds.createDimension("lon", nlon)
            t = ds.createVariable("time", "f8", ("time",))
            tas = ds.createVariable("tas", "f4", ("time", "lat", "lon"))
            tas.units = "K"
            for i in range(nt):
                field = 288 - 40 * np.sin(lat) ** 2 + 8 * np.sin(3 * lon + 0.1 * i) * np.cos(lat)
                field = field + rng.normal(0, 0.8, (nlat, nlon))
                tas[i] = np.round(field, 2).astype("f4")
                t[i] = i * 6.0
        log("nccopy -d1")
        sh("nccopy", "-d1", classic, DATA / "classic.nc4")
        stamp.touch()
    return {"nt": nt, "nlat": nlat, "nlon": nlon, "classic": classic}


# --------------------------------------------------------------------------
# measurements


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def dd(path: Path) -> None:
    sh("dd", f"if={path}", "of=/dev/null", "bs=1M", stdout=subprocess.DEVNULL)


def nc_read(path: Path) -> float:
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        v = ds["tas"]
        v.set_auto_maskandscale(False)
        t = time.perf_counter()
        v[...]
        return time.perf_counter() - t


def random_reads(path: Path, offsets: list[int], ref) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        t = time.perf_counter()
        for off in offsets:
            os.pread(fd, PAGE, off)
        elapsed = time.perf_counter() - t
        for off in offsets[:200]:
            assert os.pread(fd, PAGE, off) == ref[off : off + PAGE], f"{path} @ {off}"
        return elapsed
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--random-reads", type=int, default=2000)
    args = ap.parse_args()
    import numpy as np

    slabfs = lib.build_slabfs(skip=False)
    daemons = lib.Mounts(slabfs, Path(tempfile.mkdtemp(prefix="bench-packed-")),
                         extra_args=("--byte-order", "little"))
    d = make_data(args.size_mib)
    classic = d["classic"]
    nbytes = d["nt"] * d["nlat"] * d["nlon"] * 4
    packed = DATA / "packed.ncb"
    deflate = DATA / "packed-deflate1.ncb"

    # Pack: 1 thread vs all cores, interleaved.
    pack_times: dict[str, list[float]] = {"1 thread": [], f"{os.cpu_count()} threads": []}
    for _ in range(args.reps):
        for label, threads in (("1 thread", "1"), (f"{os.cpu_count()} threads", str(os.cpu_count()))):
            env = dict(os.environ, RAYON_NUM_THREADS=threads)
            lib.prewarm([classic])
            pack_times[label].append(timed(lambda: sh(slabfs, "pack", classic, packed, env=env)))
    sh(slabfs, "pack", "--codec", "deflate", "--level", "1", classic, deflate)
    sizes = {
        "classic (uncompressed)": classic.stat().st_size,
        "slabfs pack (zstd 3, 1 MiB blocks)": packed.stat().st_size,
        "slabfs pack (deflate 1, 1 MiB blocks)": deflate.stat().st_size,
        "netCDF-4 nccopy -d1 (zlib 1)": (DATA / "classic.nc4").stat().st_size,
    }

    # Reference bytes: netCDF4-python's values.
    import netCDF4

    with netCDF4.Dataset(classic) as ds:
        ds.set_auto_maskandscale(False)
        ref = np.ascontiguousarray(ds["tas"][...]).astype("<f4").tobytes()
    want = hashlib.sha256(ref).hexdigest()
    with daemons.mounted(DATA, "classic.nc/tas", "check") as m:
        for name in ("classic.nc/tas", "packed.ncb/tas", "packed-deflate1.ncb/tas"):
            got, _ = lib.sha_file(m.mnt / name)
            assert got == want, f"{name}: bytes differ from netCDF4-python's"
    log("contents checked against netCDF4-python")

    # Full reads, sources in the page cache.
    full: dict[str, list[float]] = {}
    contenders = {
        "dd of mounted classic.nc/tas (fresh mount)": "classic.nc/tas",
        "dd of mounted packed.ncb/tas (fresh mount)": "packed.ncb/tas",
        "dd of mounted packed-deflate1.ncb/tas (fresh mount)": "packed-deflate1.ncb/tas",
    }
    for _ in range(args.reps):
        lib.prewarm([classic, packed, deflate, DATA / "classic.nc4"])
        for label, rel in contenders.items():
            with daemons.mounted(DATA, rel, "full") as m:
                full.setdefault(label, []).append(timed(lambda: dd(m.file)))
        for label, f in (("slabfs cat classic.nc tas (no FUSE)", classic), ("slabfs cat packed.ncb tas (no FUSE)", packed)):
            full.setdefault(label, []).append(
                timed(lambda: sh(slabfs, "cat", f, "tas", stdout=subprocess.DEVNULL))
            )
        full.setdefault("cat of classic.nc itself (page cache)", []).append(
            timed(lambda: sh("cat", classic, stdout=subprocess.DEVNULL))
        )
        full.setdefault("netCDF4-python, classic.nc (in-process)", []).append(nc_read(classic))
        full.setdefault("netCDF4-python, nccopy -d1 netCDF-4 (in-process)", []).append(
            nc_read(DATA / "classic.nc4")
        )

    # Random 4 KiB reads on fresh mounts.
    rng = random.Random(42)
    block = MIB  # pack's default block size
    blocks = rng.sample(range(nbytes // block), min(args.random_reads, nbytes // block))
    offsets = [b * block + rng.randrange(0, block // PAGE) * PAGE for b in blocks]
    rand: dict[str, dict] = {}
    for _ in range(args.reps):
        for label, rel in (("packed.ncb/tas", "packed.ncb/tas"), ("classic.nc/tas", "classic.nc/tas")):
            with daemons.mounted(DATA, rel, "random") as m:
                before = m.stats()["cache"]
                secs = random_reads(m.file, offsets, ref)
                after = m.stats()["cache"]
            r = rand.setdefault(label, {"secs": [], "decodes_per_read": []})
            r["secs"].append(secs)
            r["decodes_per_read"].append(
                (after["decodes"] - before["decodes"]) / len(offsets) if "decodes" in after else None
            )

    med = statistics.median
    print(f"\n## Blocked archives: {nbytes / MIB:.0f} MiB float32 `tas`, {os.cpu_count()} cores\n")
    print("| file | bytes | ratio |\n|---|---:|---:|")
    base = sizes["classic (uncompressed)"]
    for k, v in sizes.items():
        print(f"| {k} | {v} | {base / v:.2f} |")
    print("\n| pack (zstd 3, 1 MiB) | median s | MB/s of input |\n|---|---:|---:|")
    for k, v in pack_times.items():
        print(f"| {k} | {med(v):.3f} | {base / 1e6 / med(v):.0f} |")
    t1, tn = (med(v) for v in pack_times.values())
    print(f"\nparallel speed-up: {t1 / tn:.2f}x")
    print("\n| full read | median s | MB/s | vs mounted classic |\n|---|---:|---:|---:|")
    ref_t = med(full["dd of mounted classic.nc/tas (fresh mount)"])
    for k, v in full.items():
        print(f"| {k} | {med(v):.3f} | {nbytes / 1e6 / med(v):.0f} | {ref_t / med(v):.2f} |")
    print(
        f"\n| {len(offsets)} random 4 KiB preads, one per block, fresh mount "
        "| median µs/read | blocks decoded per read |\n|---|---:|---:|"
    )
    for k, r in rand.items():
        dpr = [x for x in r["decodes_per_read"] if x is not None]
        print(
            f"| {k} | {med(r['secs']) / len(offsets) * 1e6:.0f} | "
            f"{med(dpr) if dpr else 'n/a'} |"
        )
    results = {
        "bytes": nbytes,
        "sizes": sizes,
        "pack_s": pack_times,
        "full_s": full,
        "random": rand,
        "reps": args.reps,
    }
    (DATA / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
