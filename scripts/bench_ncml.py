#!/usr/bin/env python3
"""NcML at scale (issue 43, item 4): N daily netCDF-4 (and netCDF-3)
files joined along `time` by an NcML file, read through slabfs (`cat` and
a real mount) against xarray and netCDF4-python.

Usage (from the repository root, after `cargo build --release`):

    .venv/bin/python scripts/bench_ncml.py [--files 10000] [--reps 3]

Builds (once, cached in --data-dir) N files `d/tas_NNNNN.nc` of
`tas(time=1, lat=32, lon=64)` float32 (netCDF4-python, NETCDF4, no
compression), the same N as netCDF-3 classic files in `d3/`, and NcML
files: `listed.ncml` (every member listed with `ncoords="1"`: nothing but
the first member is opened at load), `scan.ncml` (a `<scan>`: every
member's header read at load, in parallel) and `listed3.ncml` (the
netCDF-3 files, listed). Times, each a fresh process, best of --reps:

- `slabfs aggregate` of `d/` (every header read and checked, NcML
  written);
- a mount of the data directory until `stat` of `listed.ncml/tas` answers
  (mount ready + the NcML loaded), and `cat` of that file through the
  mount (the whole variable, plain `read`s), with the daemon's peak RSS
  after it, at the default `--max-open-datasets` and at 64;

- `slabfs ls` of each NcML file (load: what a mount's first `stat` of the
  joined file pays);
- `slabfs cat` of `tas` (a whole-variable read), checked against the bytes
  netCDF4-python reads;
- xarray `open_mfdataset(files, combine="nested", concat_dim="time")["tas"].values`;
- netCDF4-python reading the files one by one into one array.

Prints one Markdown table; the figures go to docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as lib  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NS = "http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2"


def build(data: Path, n: int) -> None:
    import netCDF4
    import numpy as np

    marker = data / f"done-{n}"
    if marker.exists() and (data / "listed3.ncml").exists():
        return
    for sub, fmt in (("d", "NETCDF4"), ("d3", "NETCDF3_CLASSIC")):
        d = data / sub
        if sub == "d" and marker.exists():
            continue
        d.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(43)
        for k in range(n):
            with netCDF4.Dataset(d / f"tas_{k:05d}.nc", "w", format=fmt) as nc:
                nc.createDimension("time", None)
                nc.createDimension("lat", 32)
                nc.createDimension("lon", 64)
                t = nc.createVariable("time", "f8", ("time",))
                t.units = "days since 2000-01-01"
                t[:] = [k]
                v = nc.createVariable("tas", "f4", ("time", "lat", "lon"))
                v[:] = rng.normal(280, 5, (1, 32, 64)).astype("f4")
    for name, sub in (("listed.ncml", "d"), ("listed3.ncml", "d3")):
        members = "".join(f'    <netcdf location="{sub}/tas_{k:05d}.nc" ncoords="1"/>\n' for k in range(n))
        (data / name).write_text(
            f'<netcdf xmlns="{NS}">\n  <aggregation dimName="time" type="joinExisting">\n{members}  </aggregation>\n</netcdf>\n'
        )
    (data / "scan.ncml").write_text(
        f'<netcdf xmlns="{NS}">\n  <aggregation dimName="time" type="joinExisting">\n'
        '    <scan location="d" suffix=".nc"/>\n  </aggregation>\n</netcdf>\n'
    )
    marker.write_text("")


def best(f, reps: int) -> float:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=ROOT / "target" / "bench-ncml")
    ap.add_argument("--slabfs", type=Path, default=ROOT / "target" / "release" / "slabfs")
    ap.add_argument("--mount-only", action="store_true", help="only the rows through a mount")
    args = ap.parse_args()
    data = args.data_dir / f"n{args.files}"
    build(data, args.files)
    files = sorted((data / "d").glob("*.nc"))
    py = sys.executable
    one_by_one = (
        "import sys, glob, numpy as np, netCDF4\n"
        "fs = sorted(glob.glob(sys.argv[1] + '/d/*.nc'))\n"
        "out = np.empty((len(fs), 32, 64), 'f4')\n"
        "for i, f in enumerate(fs):\n"
        "    with netCDF4.Dataset(f) as nc:\n"
        "        out[i] = nc['tas'][0]\n"
        "sys.stdout.buffer.write(out.tobytes())\n"
    )
    mfdataset = (
        "import sys, glob, xarray as xr\n"
        "fs = sorted(glob.glob(sys.argv[1] + '/d/*.nc'))\n"
        "a = xr.open_mfdataset(fs, combine='nested', concat_dim='time', decode_times=False)['tas'].values\n"
        "sys.stdout.buffer.write(a.tobytes())\n"
    )
    want = subprocess.run([py, "-c", one_by_one, str(data)], check=True, capture_output=True).stdout
    got = subprocess.run([str(args.slabfs), "cat", str(data / "listed.ncml"), "tas"], check=True, capture_output=True).stdout
    assert hashlib.sha256(got).digest() == hashlib.sha256(want).digest(), "slabfs cat differs from netCDF4-python"
    run = lambda cmd: lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got3 = subprocess.run([str(args.slabfs), "cat", str(data / "listed3.ncml"), "tas"], check=True, capture_output=True).stdout
    assert got3 == want, "slabfs cat of the netCDF-3 members differs from netCDF4-python"
    out = Path(tempfile.mkdtemp()) / "series.ncml"
    rows = [
        ("slabfs aggregate d/ (headers read, checked, NcML written)",
         run([str(args.slabfs), "aggregate", "--dim", "time", "-o", str(out), str(data / "d")])),
        ("slabfs ls listed.ncml (ncoords: load)", run([str(args.slabfs), "ls", str(data / "listed.ncml")])),
        ("slabfs ls listed3.ncml (netCDF-3 members: load)", run([str(args.slabfs), "ls", str(data / "listed3.ncml")])),
        ("slabfs ls scan.ncml (headers read: load)", run([str(args.slabfs), "ls", str(data / "scan.ncml")])),
        ("slabfs cat listed.ncml tas (whole)", run([str(args.slabfs), "cat", str(data / "listed.ncml"), "tas"])),
        ("slabfs cat listed3.ncml tas (whole, netCDF-3 members)", run([str(args.slabfs), "cat", str(data / "listed3.ncml"), "tas"])),
        ("netCDF4-python, file by file", run([py, "-c", one_by_one, str(data)])),
        ("xarray open_mfdataset(...).values", run([py, "-c", mfdataset, str(data)])),
    ]
    print(f"{args.files} files of {len(want) // args.files} bytes of tas; best of {args.reps}\n")
    print("| what | seconds |\n| --- | ---: |")
    for name, f in rows:
        if not args.mount_only:
            print(f"| {name} | {best(f, args.reps):.2f} |", flush=True)
    # Through a real mount of the data directory (the member files are in
    # it too, shown as datasets of their own: the lazy tree opens none).
    for extra in ((), ("--max-open-datasets", "64")):
        for ncml in ("listed.ncml", "listed3.ncml"):
            ready, read, rss = [], [], []
            for _ in range(args.reps):
                mnt = Path(tempfile.mkdtemp())
                m = lib.Mount(args.slabfs, data, mnt, f"{ncml}/tas", mnt.parent / (mnt.name + ".log"),
                              extra_args=extra)
                try:
                    m.start(timeout=120)
                    ready.append(m.start_s)
                    assert m.file.stat().st_size == len(want)
                    t0 = time.perf_counter()
                    got = m.file.read_bytes()
                    read.append(time.perf_counter() - t0)
                    assert got == want, f"{ncml} through the mount differs"
                    rss.append(m.peak_rss_kib() or 0)
                finally:
                    m.stop()
            label = " ".join(extra) or "default --max-open-datasets"
            print(f"| mount ready + stat {ncml}/tas ({label}) | {min(ready):.2f} |")
            print(f"| read {ncml}/tas whole through the mount ({label}; peak RSS {max(rss) // 1024} MiB) | {min(read):.2f} |", flush=True)


if __name__ == "__main__":
    main()
