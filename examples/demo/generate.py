#!/usr/bin/env python3
"""Generate slabfs's demo dataset: ``examples/demo/data/``.

Two stores written by zarr-python 3 (the reference writer), small enough to
commit (about 1 MB) but shaped like real data, so the README's examples have
something worth reading:

``climate.zarr`` (Zarr v3 group, zstd)
    ``tas``   float32 (time=12, lat=73, lon=144): monthly near-surface air
              temperature in K on a 2.5 degree grid, chunks (3, 37, 72).
              A smooth climatology (latitude gradient, a seasonal cycle of
              opposite sign in each hemisphere, cold "mountains") plus
              weather noise, rounded to 0.01 K.
    ``lat``   float64 (73,), degrees_north, -90 .. 90.
    ``lon``   float64 (144,), degrees_east, 0 .. 357.5.
    ``time``  int32 (12,), days since 2000-01-01 (mid-month), CF calendar.

``elevation.zarr`` (Zarr v2 single array, blosc lz4 + shuffle)
    int16 (lat=180, lon=360) surface height in metres on a 1 degree grid,
    chunks (30, 60). Ocean cells are the fill value -32768, which the CF
    attribute ``missing_value`` also declares; chunks that are all ocean
    are not written (zarr-python skips chunks equal to the fill value), so
    the mount serves them as -32768 without a file behind them.

Deterministic: one fixed seed, no timestamps; two runs give identical
trees (check with ``find examples/demo/data -type f | sort | xargs sha256sum``).
Versions are pinned in scripts/requirements.txt; other versions may write
other compressed bytes (same values).

Usage (from the repository root)::

    PY=$(scripts/venv.sh)
    $PY examples/demo/generate.py
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import zarr
from zarr.codecs import BytesCodec, ZstdCodec

warnings.simplefilter("ignore")  # zarr's chatter about v2 codecs

OUT = Path(__file__).resolve().parent / "data"
SEED = 20240601


def smooth_field(rng: np.random.Generator, ny: int, nx: int, scale: int) -> np.ndarray:
    """Smooth random field in [-1, 1] on a (ny, nx) lat/lon grid, periodic
    in longitude: white noise low-pass filtered in Fourier space."""
    noise = rng.standard_normal((ny, nx))
    ky = np.fft.fftfreq(ny)[:, None]
    kx = np.fft.fftfreq(nx)[None, :]
    k = np.sqrt(ky**2 + kx**2)
    filtered = np.real(np.fft.ifft2(np.fft.fft2(noise) * np.exp(-((k * scale) ** 2))))
    return filtered / np.abs(filtered).max()


def climate(rng: np.random.Generator) -> None:
    lat = np.linspace(-90.0, 90.0, 73)
    lon = np.arange(144) * 2.5
    # Mid-month days since 2000-01-01 (a leap year).
    month_len = np.array([31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    time = (np.cumsum(month_len) - month_len + month_len // 2).astype(np.int32)

    phi = np.deg2rad(lat)[None, :, None]
    season = np.cos(2 * np.pi * (np.arange(12) - 0.5) / 12)[:, None, None]  # +1 in Jan
    # Colder poles, seasonal amplitude growing with latitude (winter in the
    # north when it is summer in the south), cold high ground.
    mountains = np.clip(smooth_field(rng, 73, 144, 12), 0, None)[None, :, :]
    tas = (
        248.0
        + 52.0 * np.cos(phi) ** 2
        - 18.0 * season * np.sin(phi)
        - 15.0 * mountains
        + 1.5 * rng.standard_normal((12, 73, 144))
    )
    tas = np.round(tas, 2).astype(np.float32)

    root = zarr.open_group(OUT / "climate.zarr", mode="w", zarr_format=3)
    root.attrs.update(
        {
            "title": "slabfs demo: synthetic monthly climatology",
            "Conventions": "CF-1.10",
            "source": "examples/demo/generate.py (synthetic, not observations)",
        }
    )
    codecs = dict(serializer=BytesCodec(endian="little"), compressors=[ZstdCodec(level=5)])

    def coord(name, data, dims, attrs, chunks=None):
        a = root.create_array(
            name,
            shape=data.shape,
            dtype=data.dtype,
            chunks=chunks or data.shape,
            dimension_names=dims,
            fill_value=0,
            **codecs,
        )
        a[...] = data
        a.attrs.update(attrs)

    coord("lat", lat, ["lat"], {"units": "degrees_north", "standard_name": "latitude", "axis": "Y"})
    coord("lon", lon, ["lon"], {"units": "degrees_east", "standard_name": "longitude", "axis": "X"})
    coord(
        "time",
        time,
        ["time"],
        {"units": "days since 2000-01-01", "calendar": "standard", "standard_name": "time", "axis": "T"},
    )
    coord(
        "tas",
        tas,
        ["time", "lat", "lon"],
        {
            "units": "K",
            "standard_name": "air_temperature",
            "long_name": "Near-surface air temperature",
            "cell_methods": "time: mean",
        },
        chunks=(3, 37, 72),
    )


def elevation(rng: np.random.Generator) -> int:
    """Returns how many chunks were left unwritten."""
    ny, nx, fill = 180, 360, -32768
    relief = smooth_field(rng, ny, nx, 20)
    # Two oceans that no continent crosses, so whole chunks are sea.
    lon = np.arange(nx)[None, :]
    lat = (np.arange(ny) - 89.5)[:, None]
    relief -= 0.9 * np.exp(-(((lon - 200) / 45.0) ** 2))  # a "Pacific"
    relief -= 0.9 * np.exp(-(((lat + 70) / 12.0) ** 2))  # a "Southern Ocean"
    land = relief > 0.0
    height = np.where(land, 6000.0 * relief**1.3, 0.0)
    height += np.where(land, 40.0 * rng.standard_normal((ny, nx)), 0.0)
    data = np.where(land, np.clip(np.round(height), 0, 8800), fill).astype(np.int16)

    a = zarr.create_array(
        OUT / "elevation.zarr",
        shape=data.shape,
        dtype=np.int16,
        chunks=(30, 60),
        zarr_format=2,
        compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
        fill_value=fill,
        dimension_names=None,
        config={"write_empty_chunks": False},
    )
    a[...] = data
    a.attrs.update(
        {
            "_ARRAY_DIMENSIONS": ["lat", "lon"],
            "units": "m",
            "standard_name": "surface_altitude",
            "missing_value": fill,
            "comment": "1 degree grid, lat -89.5 .. 89.5, lon 0.5 .. 359.5; ocean is missing",
        }
    )
    written = sum(1 for p in (OUT / "elevation.zarr").iterdir() if p.name[0].isdigit())
    return 6 * 6 - written


def warn_if_not_pinned() -> None:
    """Other writer versions may compress differently: say so."""
    pins = Path(__file__).resolve().parents[2] / "scripts" / "requirements.txt"
    have = {"zarr": zarr.__version__, "numcodecs": numcodecs.__version__, "numpy": np.__version__}
    for line in pins.read_text().splitlines():
        name, _, version = line.partition("==")
        if name in have and have[name] != version:
            print(f"warning: {name} {have[name]} installed, {version} pinned", file=sys.stderr)


def main() -> int:
    warn_if_not_pinned()
    numcodecs.blosc.use_threads = False  # deterministic blosc output
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    climate(rng)
    missing = elevation(rng)
    # The demo promises missing chunks; fail loudly if the field changed.
    if missing < 2:
        print(f"only {missing} chunks of elevation.zarr are missing", file=sys.stderr)
        return 1
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total} bytes); elevation.zarr: {missing} of 36 chunks missing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
