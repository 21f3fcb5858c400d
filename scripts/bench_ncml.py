#!/usr/bin/env python3
"""NcML at scale (issue 43, item 4): N daily netCDF-4 files joined along
`time` by an NcML file, read through slabfs against xarray and
netCDF4-python.

Usage (from the repository root, after `cargo build --release`):

    .venv/bin/python scripts/bench_ncml.py [--files 10000] [--reps 3]

Builds (once, cached in --data-dir) N files `d/tas_NNNNN.nc` of
`tas(time=1, lat=32, lon=64)` float32 (netCDF4-python, NETCDF4, no
compression) and two NcML files: `listed.ncml` (every member listed with
`ncoords="1"`: nothing but the first member is opened at load) and
`scan.ncml` (a `<scan>`: every member's header read at load, in parallel).
Times, each a fresh process, best of --reps:

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NS = "http://www.unidata.ucar.edu/namespaces/netcdf/ncml-2.2"


def build(data: Path, n: int) -> None:
    import netCDF4
    import numpy as np

    marker = data / f"done-{n}"
    if marker.exists():
        return
    d = data / "d"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(43)
    for k in range(n):
        with netCDF4.Dataset(d / f"tas_{k:05d}.nc", "w", format="NETCDF4") as nc:
            nc.createDimension("time", None)
            nc.createDimension("lat", 32)
            nc.createDimension("lon", 64)
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t[:] = [k]
            v = nc.createVariable("tas", "f4", ("time", "lat", "lon"))
            v[:] = rng.normal(280, 5, (1, 32, 64)).astype("f4")
    members = "".join(f'    <netcdf location="d/tas_{k:05d}.nc" ncoords="1"/>\n' for k in range(n))
    (data / "listed.ncml").write_text(
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
    rows = [
        ("slabfs ls listed.ncml (ncoords: load)", run([str(args.slabfs), "ls", str(data / "listed.ncml")])),
        ("slabfs ls scan.ncml (headers read: load)", run([str(args.slabfs), "ls", str(data / "scan.ncml")])),
        ("slabfs cat listed.ncml tas (whole)", run([str(args.slabfs), "cat", str(data / "listed.ncml"), "tas"])),
        ("netCDF4-python, file by file", run([py, "-c", one_by_one, str(data)])),
        ("xarray open_mfdataset(...).values", run([py, "-c", mfdataset, str(data)])),
    ]
    print(f"{args.files} files of {len(want) // args.files} bytes of tas; best of {args.reps}\n")
    print("| what | seconds |\n| --- | ---: |")
    for name, f in rows:
        print(f"| {name} | {best(f, args.reps):.2f} |", flush=True)


if __name__ == "__main__":
    main()
