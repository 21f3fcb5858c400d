#!/usr/bin/env python3
"""Seeds of the `codec_hdf5_filters` target: the stored first chunk of
every single-filter dataset of tests/fixtures/hdf5/data/filters.h5 (written
by h5py + hdf5plugin), behind the selector byte of the target's table
entry with the same filter and parameters (first entry of the same filter
when none matches exactly), and every chunk of
tests/fixtures/hdf5/codec_chunks.json (szip, nbit) whose parameters are a
table entry's. Usage: $(scripts/venv.sh) fuzz/seeds/make_hdf5_filter_seeds.py
"""

import json
import re
from pathlib import Path

import h5py

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "fuzz/fuzz_targets/codec_hdf5_filters.rs"
OUT = ROOT / "fuzz/seeds/codec_hdf5_filters"


def table():
    text = TARGET.read_text()
    body = text[text.index("const FILTERS"):text.index("];")]
    return [(int(i), tuple(int(x) for x in p.split(",") if x.strip()))
            for i, p in re.findall(r"\(\s*(\d+),\s*&\[([^\]]*)\],?\s*\)", body)]


def main() -> None:
    entries = table()
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        old.unlink()
    with h5py.File(ROOT / "tests/fixtures/hdf5/data/filters.h5") as f:
        for name, ds in f.items():
            pl = ds.id.get_create_plist()
            if pl.get_nfilters() != 1:
                continue
            fid, _, params = pl.get_filter(0)[:3]
            picks = [i for i, e in enumerate(entries) if e == (fid, tuple(params))]
            picks = picks or [i for i, e in enumerate(entries) if e[0] == fid]
            if not picks:
                continue
            _, chunk = ds.id.read_direct_chunk((0,) * ds.ndim)
            (OUT / name).write_bytes(bytes([picks[0]]) + chunk)
            print(name, picks[0], len(chunk))
    chunks = json.loads((ROOT / "tests/fixtures/hdf5/codec_chunks.json").read_text())
    for c in chunks:
        key = (c["filter"], tuple(c["params"]))
        if key in entries:
            chunk = bytes.fromhex(c["encoded"])
            (OUT / c["name"]).write_bytes(bytes([entries.index(key)]) + chunk)
            print(c["name"], entries.index(key), len(chunk))


if __name__ == "__main__":
    main()
