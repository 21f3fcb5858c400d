"""Load the demo's npy views with np.load: the header carries dtype and shape.

Mount with the npy view enabled first:
    cargo run --release -- mount --views raw,json,npy examples/demo/data /tmp/slabfs-demo
Run:
    python3 examples/readers/read_npy.py
"""

import numpy as np

tas = np.load("/tmp/slabfs-demo/climate.zarr/tas.npy", mmap_mode="r")  # lazy, like memmap
print(tas.dtype, tas.shape, "month 7, equator, lon 0 .. 7.5:", tas[6, 36, :4])
elev = np.load("/tmp/slabfs-demo/elevation.zarr.npy")  # all at once
print(elev.dtype, elev.shape, "highest:", elev.max(), "m")
