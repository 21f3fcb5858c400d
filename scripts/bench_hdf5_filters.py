#!/usr/bin/env python3
"""HDF5 filter benchmark: `slabfs cat` of one dataset per HDF5 filter
against h5py (HDF5's C filters, hdf5plugin's for LZ4 and Bitshuffle)
reading the same dataset.

Usage (from the repository root):

    .venv/bin/python scripts/bench_hdf5_filters.py [--size-mib 64] [--reps 5] [--data-dir bench-data]

What it does:

1. Venv and `cargo build --release` as every benchmark (scripts/benchlib.py).
2. Builds the data once, cached in --data-dir: benchlib's float32 field
   (build_field: a smooth field plus seeded noise, shape (size_mib/4, 1024,
   1024)) rounded to multiples of 1/64 (so that byte-oriented compressors
   find repeats), written by h5py into one HDF5 file, one dataset per filter, chunks
   (1, 512, 512) = 1 MiB: deflate (level 4, the baseline slabfs already
   had), szip (NN, 32 pixels per block), LZF, LZ4 (hdf5plugin), Bitshuffle
   with LZ4 and with Zstandard (hdf5plugin), scale-offset (D-scale, 2
   digits; lossy, so compared against h5py's decoded values).
3. Checks once (untimed) that `slabfs cat` of each dataset is byte for byte
   what h5py reads.
4. Runs `slabfs cat FILE DATASET` and a fresh Python process reading the
   dataset with h5py (`ds[()]`, which also reports its in-process read
   time), interleaved, --reps rounds after --warmup, waiting for an idle
   machine and redoing runs other processes disturbed (benchlib).
5. Prints Markdown tables (per pass: warm page cache, and cold when root
   and --cold allows) and the slabfs / h5py throughput ratio per filter;
   raw numbers go to <data-dir>/hdf5-filters-results.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import benchlib as lib

MIB = lib.MIB

FORMAT_VERSION = 1  # bump when the datasets change

H5PY_CHILD = r"""
import json, sys, time
import h5py, hdf5plugin
c0 = time.process_time()
t0 = time.perf_counter()
with h5py.File(sys.argv[1], "r") as f:
    a = f[sys.argv[2]][()]
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == int(sys.argv[3]), a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads)}))
"""


def filters():
    import hdf5plugin

    return [
        ("deflate", {"compression": "gzip", "compression_opts": 4}),
        ("szip", {"compression": "szip", "compression_opts": ("nn", 32)}),
        ("lzf", {"compression": "lzf"}),
        ("lz4", dict(hdf5plugin.LZ4())),
        ("bitshuffle_lz4", dict(hdf5plugin.Bitshuffle(cname="lz4"))),
        ("bitshuffle_zstd", dict(hdf5plugin.Bitshuffle(cname="zstd"))),
        ("scaleoffset", {"scaleoffset": 2}),
    ]


def build(data_dir: Path, size_mib: int) -> dict:
    """The HDF5 file (cached), its datasets and their stored sizes."""
    import h5py
    import numpy as np

    field = lib.build_field(data_dir, size_mib)
    path = data_dir / f"filters-f32-{size_mib}mib-v{FORMAT_VERSION}.h5"
    if not path.exists():
        lib.log(f"writing {path}")
        # Rounded to 1/64 (exact in float32): noise in the low bits would
        # leave LZF and LZ4 nothing to find (every chunk stored raw).
        a = np.round(np.fromfile(field["raw"], dtype="<f4").reshape(field["shape"]) * 64) / 64
        tmp = path.with_suffix(".tmp")
        with h5py.File(tmp, "w", libver="latest") as f:
            for name, kw in filters():
                f.create_dataset(name, data=a, chunks=(1, 512, 512), **kw)
        tmp.rename(path)
    stored = {}
    with h5py.File(path, "r") as f:
        for name, _ in filters():
            ds = f[name]
            stored[name] = sum(ds.id.get_chunk_info(i).size for i in range(ds.id.get_num_chunks()))
    return {"path": path, "nbytes": field["nbytes"], "shape": field["shape"], "stored": stored}


def verify(slabfs: Path, py: Path, data: dict) -> None:
    """Untimed: slabfs's bytes of every dataset are h5py's."""
    import hashlib

    import h5py

    with h5py.File(data["path"], "r") as f:
        for name, _ in filters():
            want = hashlib.sha256(f[name][()].astype("<f4").tobytes()).hexdigest()
            got, _ = lib.sha_cmd([str(slabfs), "cat", str(data["path"]), name])
            if got != want:
                lib.fail(f"{name}: slabfs cat differs from h5py ({got} != {want})")
    lib.log("slabfs cat matches h5py for every dataset (sha256)")


def contenders(slabfs: Path, py: Path, data: dict) -> list[dict]:
    cs = []
    for name, _ in filters():
        cs.append({"name": f"slabfs {name}", "key": f"slabfs:{name}",
                   "cmd": [str(slabfs), "cat", str(data["path"]), name], "inproc": False})
        cs.append({"name": f"h5py {name}", "key": f"h5py:{name}",
                   "cmd": [str(py), "-c", H5PY_CHILD, str(data["path"]), name, str(data["nbytes"])],
                   "inproc": True})
    return cs


def ratios(stats: dict, data: dict) -> str:
    lines = ["| filter | stored / raw | slabfs / h5py (processes) | slabfs process / h5py in-process read |",
             "|---|---:|---:|---:|"]
    for name, _ in filters():
        s, h = stats[f"slabfs:{name}"], stats[f"h5py:{name}"]
        proc = h["wall"]["median"] / s["wall"]["median"]
        read = h["read"]["median"] / s["wall"]["median"]
        lines.append(f"| {name} | {data['stored'][name] / data['nbytes']:.3f} | {proc:.2f} | {read:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=64, help="array size in MiB (multiple of 4)")
    lib.add_common_args(ap, reps=5, perf=None)
    args = ap.parse_args()
    command = lib.command_line()

    py = lib.use_venv(args.skip_venv, ("numpy", "zarr", "h5py", "hdf5plugin"))
    data_dir = lib.abs_dir(args.data_dir)
    slabfs = lib.build_slabfs(args.no_build)
    data = build(data_dir, args.size_mib)
    verify(slabfs, py, data)

    cs = contenders(slabfs, py, data)
    passes = lib.run_warm_cold(cs, args)

    hdr, m, v = lib.header_lines(command, slabfs, extra_versions=("h5py", "hdf5plugin"))
    print()
    print("\n".join(hdr))
    print()
    print(f"Data: float32 {data['shape']}, chunks (1, 512, 512) (1 MiB each), "
          f"{data['nbytes'] / MIB:.0f} MiB raw per dataset, one dataset per filter")
    results = {"command": command, "machine": m, "versions": v, "data": data}
    for key, res, redone in passes:
        tab, stats = lib.table(cs, res, data["nbytes"])
        note, _ = lib.foreign_note(res, redone, args.max_foreign, preliminary=False)
        print()
        print(f"### {lib.pass_title(args, key)}")
        print()
        print(tab)
        print()
        print(ratios(stats, data))
        print("\n" + note)
        results[key] = {"runs": res, "stats": stats}
    lib.write_json(data_dir / "hdf5-filters-results.json", results)
    print(f"\n(raw numbers in {data_dir / 'hdf5-filters-results.json'})", file=sys.stderr)


if __name__ == "__main__":
    main()
