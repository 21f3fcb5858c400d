#!/usr/bin/env python3
"""Whole-array read benchmark: `slabfs cat` against zarr-python 3, tensorstore
and plain `cat` of the same bytes stored raw (the ceiling).

Usage (from the repository root):

    .venv/bin/python scripts/bench_read.py [--size-mib 256] [--reps 5] [--data-dir bench-data]

What it does:

1. Makes sure the venv exists (scripts/venv.sh, else `python -m venv .venv` and
   pip install of scripts/requirements.txt) and builds `target/release/slabfs`
   (`cargo build --release`, retried while other people's edits break it).
2. Builds the data once, cached in --data-dir (gitignored): a float32 Zarr v3
   array written by zarr-python with its default codec chain (bytes + zstd
   level 0), shape (size_mib/4, 1024, 1024), chunks (1, 512, 512) = exactly
   1 MiB each; values are a smooth field (sums of sines over the grid) plus
   seeded Gaussian noise. The same values are written as a plain raw file.
3. Checks once (untimed) that `slabfs cat` reproduces the raw file byte for byte.
4. Runs every contender as a fresh process, interleaved (A B C D, A B C D, ...)
   for --reps repetitions after --warmup discarded rounds, so all contenders
   see the same, warm, page cache. Whole processes are timed with
   time.perf_counter around the child; the Python peers also report their
   in-process read time. Each run waits for the machine to be idle first and
   is redone if other processes were busy during it (shared build machines).
   CPU time (user+sys, from wait4) shows how many cores each contender kept
   busy.
5. If running as root and --cold is not "no" (default: auto = when root), a second
   pass drops the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`)
   before every run, reported separately.
6. Prints the machine, library versions, the exact command and Markdown tables;
   writes the raw numbers to <data-dir>/results.json.

The machinery (venv, build, data, idle wait, foreign-CPU check, interleaved
passes, tables) is scripts/benchlib.py's, shared with the other benchmarks;
the data is benchlib.build_field, which bench_mount.py reads too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import benchlib as lib

MIB = lib.MIB


# --------------------------------------------------------------------------
# contenders

ZARR_CHILD = r"""
import json, sys, time
import zarr
c0 = time.process_time()
t0 = time.perf_counter()
a = zarr.open_array(sys.argv[1], mode="r")[:]
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == int(sys.argv[2]), a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads)}))
"""

TS_CHILD = r"""
import json, sys, time
import tensorstore as ts
c0 = time.process_time()
t0 = time.perf_counter()
a = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": sys.argv[1]}}).result().read().result()
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == int(sys.argv[2]), a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads)}))
"""


def contenders(slabfs: Path, py: Path, data: dict) -> list[dict]:
    arr_path = str(data["store"] / data["array"])
    n = str(data["nbytes"])
    return [
        {"name": "slabfs cat", "key": "slabfs",
         "cmd": [str(slabfs), "cat", str(data["store"]), data["array"]], "inproc": False},
        {"name": "zarr-python", "key": "zarr",
         "cmd": [str(py), "-c", ZARR_CHILD, arr_path, n], "inproc": True},
        {"name": "tensorstore", "key": "tensorstore",
         "cmd": [str(py), "-c", TS_CHILD, arr_path, n], "inproc": True},
        {"name": "cat (raw file)", "key": "cat",
         "cmd": ["cat", str(data["raw"])], "inproc": False},
    ]


# --------------------------------------------------------------------------
# report


def ratios(stats: dict) -> tuple[str, dict]:
    """Throughput ratios slabfs / X (> 1 means slabfs is faster)."""
    sl = stats["slabfs"]["wall"]["median"]
    out = {}
    lines = [
        "| ratio (throughput, medians) | process vs process | slabfs process vs peer's in-process read |",
        "|---|---:|---:|",
    ]
    for key, label in (("tensorstore", "slabfs / tensorstore"),
                       ("zarr", "slabfs / zarr-python"),
                       ("cat", "slabfs / cat")):
        proc = stats[key]["wall"]["median"] / sl
        out[key] = {"process": proc}
        if "read" in stats[key]:
            rd = stats[key]["read"]["median"] / sl
            out[key]["read"] = rd
            lines.append(f"| {label} | {proc:.2f} | {rd:.2f} |")
        else:
            lines.append(f"| {label} | {proc:.2f} | – |")
    return "\n".join(lines), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256, help="array size in MiB (multiple of 4)")
    lib.add_common_args(ap, reps=5, perf=None)
    args = ap.parse_args()
    command = lib.command_line()

    py = lib.use_venv(args.skip_venv, ("numpy", "zarr", "tensorstore"))
    data_dir = lib.abs_dir(args.data_dir)
    slabfs = lib.build_slabfs(args.no_build)
    data = lib.build_field(data_dir, args.size_mib)
    lib.verify_slabfs(slabfs, data)

    cs = contenders(slabfs, py, data)
    passes = lib.run_warm_cold(cs, args)

    hdr, m, v = lib.header_lines(command, slabfs)
    print()
    print("\n".join(hdr))
    print()
    codecs = ", ".join(
        c["name"] + (f"(level={c['configuration'].get('level')})" if c["name"] == "zstd" else "")
        for c in data["codecs"])
    print(f"Data: float32 {data['shape']}, chunks {data['chunks']} (1 MiB each, "
          f"{data['n_chunks']} chunks), codecs {codecs}; "
          f"{data['nbytes'] / MIB:.0f} MiB raw, {data['stored_bytes'] / MIB:.1f} MiB stored, "
          f"compression ratio {data['ratio']:.3f}")
    results = {"command": command, "machine": m, "versions": v, "data": data}
    for key, res, redone in passes:
        tab, stats = lib.table(cs, res, data["nbytes"])
        rat_tab, rat = ratios(stats)
        note, _ = lib.foreign_note(res, redone, args.max_foreign, preliminary=False)
        print()
        print(f"### {lib.pass_title(args, key)}")
        print()
        print(tab)
        print()
        print(rat_tab)
        print("\n" + note)
        if key == "warm":
            for k in ("zarr", "tensorstore"):
                print(f"\n{k}: up to {stats[k]['threads']} OS threads in the process at exit")
        results[key] = {"runs": res, "stats": stats, "ratios": rat}
    lib.write_json(data_dir / "results.json", results)
    print(f"\n(raw numbers in {data_dir / 'results.json'})", file=sys.stderr)


if __name__ == "__main__":
    main()
