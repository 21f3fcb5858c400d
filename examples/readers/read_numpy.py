"""Read the demo mount with plain NumPy: no Zarr library, no conversion.

Mount it first:  cargo run --release -- mount examples/demo/data /tmp/slabfs-demo
Run:             python3 examples/readers/read_numpy.py

A read that touches a chunk slabfs cannot decode fails with EIO. The reads
below raise OSError then (docs/SEMANTICS.md, "Reading safely"); np.fromfile
would not: it returns an array all the same, its unread part whatever the
memory held.
"""

import json

import numpy as np

path = "/tmp/slabfs-demo/climate.zarr/tas"
meta = json.load(open(path + ".json"))  # shape, dtype ("<f4"), dims, attributes
print(meta["dimension_names"], meta["shape"], meta["dtype"], meta["attributes"]["units"])

# Everything at once (read() raises OSError, errno EIO, on a failed read):
tas = np.frombuffer(open(path, "rb").read(), dtype=meta["dtype"]).reshape(meta["shape"])
# Or lazily: only the pages you index are read (and decoded) by slabfs; a
# failed read kills the process with SIGBUS instead of raising.
mm = np.memmap(path, dtype=meta["dtype"], mode="r", shape=tuple(meta["shape"]))
print("month 7, equator, lon 0 .. 7.5:", mm[6, 36, :4])
assert (mm == tas).all()

# Into an array of your own (writable, unlike frombuffer's): a buffered
# readinto raises on a failed read; the count guards against a short file.
lat = np.empty(73, dtype="<f8")
with open("/tmp/slabfs-demo/climate.zarr/lat", "rb") as f:
    if f.readinto(lat) != lat.nbytes:
        raise OSError("lat: short read")
w = np.cos(np.deg2rad(lat))[:, None]
print("global mean by month:", ((tas * w).sum(axis=(1, 2)) / (w.sum() * 144)).round(2))

elev = np.memmap("/tmp/slabfs-demo/elevation.zarr", dtype="<i2", mode="r", shape=(180, 360))
land = elev[elev != -32768]  # missing_value: ocean (never-written chunks read as it too)
print(f"land {land.size / elev.size:.0%} of cells, highest {land.max()} m")
