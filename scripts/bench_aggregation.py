#!/usr/bin/env python3
"""Aggregation benchmark (issue 4): a master array of 64 netCDF-3 partitions
read in full by `slabfs cat`, against `slabfs cat` of one netCDF-3 file
holding the same array, cf-python reading the CF-1.13 aggregation into
memory, netCDF4-python reading the single file, and plain `cat` of that file.

Usage (from the repository root):

    .venv/bin/python scripts/bench_aggregation.py [--size-mib 256] [--reps 7] [--perf]

What it does:

1. Makes sure the venv exists and builds `target/release/slabfs` (the
   machinery of scripts/benchlib.py, shared with the other benchmarks), then
   runs a private copy of the binary, so a rebuild by someone else cannot
   swap it mid-run.
2. Builds the data once (benchlib.build_aggregation, which bench.py uses
   too), cached in --data-dir (gitignored) under `agg-<size>mib-<parts>p/`: a
   float32 array tas(time, lat, lon) of shape (size_mib, 512, 512) (one time
   step = 1 MiB), values bench_read.py's smooth field (benchlib.field_slab)
   plus seeded Gaussian noise, held
     - in --partitions (64) netCDF-3 files of size_mib/64 time steps each
       (`frag/tas_NN.nc`, written by netCDF4-python, even NN NETCDF3_CLASSIC,
       odd NN NETCDF3_64BIT_OFFSET, with CF coordinates time/lat/lon),
     - aggregated by an NCA JSON descriptor `tas.nca.json` (docs/AGGREGATION.md),
     - and by a CF-1.13 aggregation variable `tas_cfa.nc` written by cf-python
       (`cf.read(frag/*.nc, cfa_write="field")`, then `cf.write(...,
       cfa={"constructs": "field", "uri": "relative"}, fmt="NETCDF3_CLASSIC")`),
     - in one netCDF-3 file `single.nc` (netCDF4-python, NETCDF3_64BIT_OFFSET),
     - and as a raw file `tas.raw` (the expected bytes).
3. Checks once (untimed) that every contender gives exactly the raw file's
   bytes (sha256): the `slabfs cat` outputs and the arrays the Python
   contenders build.
4. Runs every contender as a fresh process, interleaved (A B C ..., A B C ...)
   for --reps rounds after --warmup discarded ones, with benchlib's
   idle-wait and foreign-CPU rejection; optionally (--cold, default when root)
   a second pass dropping the page cache before every run.
5. --perf: one extra, untimed `perf record -g` of each `slabfs cat` contender,
   its samples sorted into categories (zstd, file reads, byte swap, ...).
6. Prints the machine, versions, command and Markdown tables; writes the raw
   numbers to <data-dir>/results-aggregation.json.

cfdm (cf-python's netCDF layer) looks the CF standard-name table up on the
internet while reading (raw.githubusercontent.com, a 5 s timeout, retried on
every check, since failures are not cached). The cf-python child (and the
data generation, with benchlib.stub_standard_names) stubs that lookup to
fail at once, as it does on a machine without network, so DNS latency is
not counted against cf-python; it reports how often it was called.
cfdm 1.13.3 also resolves the relative fragment URIs that cf-python itself
writes against the working directory instead of the aggregation file's
directory, so the cf-python child runs in the aggregation file's directory.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import benchlib as lib
from benchlib import log

MIB = lib.MIB
VAR = lib.AGG_VAR


# --------------------------------------------------------------------------
# contenders

# argv: path nbytes mode; mode "time" prints timings, "sha" the array's sha256.
CF_CHILD = r"""
import hashlib, json, sys, time
import cfdm.conformance.checker as _chk
from cfdm.conformance.standardnames import StandardNameTableUnavailableError as _E
_calls = [0]
def _offline(*a, **k):
    _calls[0] += 1
    raise _E("offline (stubbed by the benchmark)")
_chk.get_all_current_standard_names = _offline
import os
import cf
path, nbytes, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# cfdm 1.13.3 resolves relative fragment URIs against the working
# directory, not the aggregation file's: read from the file's directory.
os.chdir(os.path.dirname(os.path.abspath(path)))
c0 = time.process_time()
t0 = time.perf_counter()
fl = cf.read(path)
assert len(fl) == 1, fl
a = fl[0].array
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == nbytes, a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
if mode == "sha":
    import numpy as np
    b = np.ascontiguousarray(np.ma.getdata(a)).astype("<f4", copy=False).tobytes()
    print(json.dumps({"sha256": hashlib.sha256(b).hexdigest(), "nbytes": len(b),
                      "masked": int(np.ma.count_masked(a))}))
else:
    print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads),
                      "std_name_lookups": _calls[0], "type": type(a).__name__}))
"""

NC4_CHILD = r"""
import hashlib, json, sys, time
import netCDF4
path, nbytes, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c0 = time.process_time()
t0 = time.perf_counter()
ds = netCDF4.Dataset(path)
a = ds.variables["tas"][:]
ds.close()
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == nbytes, a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
if mode == "sha":
    import numpy as np
    b = np.ascontiguousarray(np.ma.getdata(a)).astype("<f4", copy=False).tobytes()
    print(json.dumps({"sha256": hashlib.sha256(b).hexdigest(), "nbytes": len(b)}))
else:
    print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads),
                      "type": type(a).__name__}))
"""


def contenders(slabfs: Path, py: Path, d: dict, with_nc4: bool) -> list[dict]:
    n = str(d["nbytes"])
    cs = [
        {"name": "slabfs cat, NCA descriptor (64 partitions)", "key": "slabfs_nca",
         "cmd": [str(slabfs), "cat", str(d["nca"]), VAR], "inproc": False},
        {"name": "slabfs cat, CF-1.13 aggregation (64 fragments)", "key": "slabfs_cfa",
         "cmd": [str(slabfs), "cat", str(d["cfa"]), VAR], "inproc": False},
        {"name": "slabfs cat, single netCDF-3 file", "key": "slabfs_single",
         "cmd": [str(slabfs), "cat", str(d["single"]), VAR], "inproc": False},
        {"name": "cf-python, CF-1.13 aggregation `.array`", "key": "cf",
         "cmd": [str(py), "-c", CF_CHILD, str(d["cfa"]), n, "time"], "inproc": True},
    ]
    if with_nc4:
        cs.append({"name": "netCDF4-python, single file `[:]`", "key": "nc4",
                   "cmd": [str(py), "-c", NC4_CHILD, str(d["single"]), n, "time"],
                   "inproc": True})
    cs.append({"name": "cat of the single .nc file (ceiling)", "key": "cat_single",
               "cmd": ["cat", str(d["single"])], "inproc": False, "verify": False})
    # Start-up: open and load everything, read 4 bytes.
    cs.append({"name": "slabfs cat --length 4, NCA (load only)", "key": "load_nca",
               "cmd": [str(slabfs), "cat", "--length", "4", str(d["nca"]), VAR],
               "inproc": False, "verify": False, "startup": True})
    cs.append({"name": "slabfs cat --length 4, single file (load only)", "key": "load_single",
               "cmd": [str(slabfs), "cat", "--length", "4", str(d["single"]), VAR],
               "inproc": False, "verify": False, "startup": True})
    return cs


RATIOS = [
    # label, a, b, target, use b's in-process read
    ("NCA aggregation / single file (`slabfs cat` both)", "slabfs_nca", "slabfs_single", 0.8,
     False),
    ("CF-1.13 aggregation / single file (`slabfs cat` both)", "slabfs_cfa", "slabfs_single",
     0.8, False),
    ("slabfs NCA / cf-python, process vs process", "slabfs_nca", "cf", 10.0, False),
    ("slabfs NCA / cf-python, slabfs process vs cf-python's in-process read", "slabfs_nca",
     "cf", 10.0, True),
    ("slabfs CF-1.13 / cf-python, process vs process", "slabfs_cfa", "cf", 10.0, False),
    ("slabfs CF-1.13 / cf-python, slabfs process vs in-process read", "slabfs_cfa", "cf", 10.0,
     True),
    ("slabfs single file / netCDF4-python, process vs process", "slabfs_single", "nc4", None,
     False),
    ("slabfs single file / netCDF4-python, vs in-process read", "slabfs_single", "nc4", None,
     True),
    ("slabfs single file / `cat` of the .nc file", "slabfs_single", "cat_single", None, False),
]


def report_pass(cs: list[dict], res: dict, redone: int, d: dict, args) -> tuple:
    main = [c for c in cs if not c.get("startup")]
    tab, stats = lib.table(main, res, d["nbytes"])
    for c in cs:
        if c.get("startup"):
            w = lib.summary([r["wall_s"] for r in res[c["key"]]])
            stats[c["key"]] = {"wall": w}
            tab += (f"\n| {c['name']} | {w['median']:.3f} | {w['min']:.3f}–{w['max']:.3f} "
                    "| – | – | – | – | – | – | – |")
    rat_tab, rat = lib.ratio_rows(stats, RATIOS)
    note, worst = lib.foreign_note(res, redone, args.max_foreign)
    return tab, rat_tab, note, stats, rat, worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256,
                    help="master array size in MiB, a multiple of --partitions (default 256)")
    ap.add_argument("--partitions", type=int, default=64, help="number of partitions (default 64)")
    ap.add_argument("--no-netcdf4", action="store_true",
                    help="leave out netCDF4-python reading the single file")
    lib.add_common_args(ap)
    args = ap.parse_args()
    command = lib.command_line()

    py = lib.use_venv(args.skip_venv, ("numpy", "netCDF4", "cf"))
    data_dir = lib.abs_dir(args.data_dir)
    built = lib.build_slabfs(args.no_build)
    d = lib.build_aggregation(data_dir, args.size_mib, args.partitions)
    slabfs, workdir = lib.private_binary(built)
    try:
        cs = contenders(slabfs, py, d, not args.no_netcdf4)
        lib.verify_contenders(cs, lib.sha_file(d["raw"]))
        passes = lib.run_warm_cold(cs, args)
        profiles = lib.perf_cat_profiles(cs, args, data_dir, "perf-agg") if args.perf else []
        hdr, m, v = lib.header_lines(command, slabfs, ("netCDF4", "cf-python", "cfdm", "dask"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    print("\n".join(hdr))
    print()
    print(f"Data: float32 tas{list(d['shape'])} (time, lat, lon), {d['nbytes'] / MIB:.0f} MiB; "
          f"{d['partitions']} partitions of {d['per_partition']} time steps "
          f"({d['nbytes'] / d['partitions'] / MIB:.0f} MiB each), fragment formats "
          f"{', '.join(d['fragment_formats'])}, {d['fragment_bytes'] / MIB:.1f} MiB of fragment "
          f"files; single file {d['single_bytes'] / MIB:.1f} MiB (CDF-2).")
    results = {"command": command, "machine": m, "versions": v, "data": d}
    for key, res, redone in passes:
        tab, rat_tab, note, stats, rat, worst = report_pass(cs, res, redone, d, args)
        print(f"\n### {lib.pass_title(args, key)}\n\n{tab}\n\n{rat_tab}\n\n{note}")
        cf_runs = res.get("cf", [])
        if cf_runs:
            print(f"\ncf-python: {cf_runs[0].get('std_name_lookups')} standard-name-table "
                  f"lookups per read (stubbed), result type {cf_runs[0].get('type')}, up to "
                  f"{max(r['threads'] for r in cf_runs)} OS threads at exit.")
        results[key] = {"runs": res, "stats": stats, "ratios": rat, "worst_foreign": worst,
                        "redone": redone}
    if profiles:
        print(lib.perf_section(profiles, results["warm"]["stats"]))
        results["perf"] = profiles
    out = data_dir / "results-aggregation.json"
    lib.write_json(out, results)
    log(f"raw numbers in {out}")


if __name__ == "__main__":
    main()
