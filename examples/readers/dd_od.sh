#!/bin/sh
# Read the demo mount with nothing but coreutils. Mount it first:
#   cargo run --release -- mount examples/demo/data /tmp/slabfs-demo
# Shapes and dtypes are in the sidecars (climate.zarr/tas.json: "<f4",
# [12, 73, 144]); files are flat, row-major, in the machine's byte order.
set -eu

# The first four temperatures (float32, K): month 1, lat -90, lon 0 .. 7.5
od -A d -t f4 -N 16 /tmp/slabfs-demo/climate.zarr/tas
# The time axis: int32 days since 2000-01-01
od -A d -t d4 /tmp/slabfs-demo/climate.zarr/time
# Ten heights (int16, m; -32768 = ocean) at lat 0.5, lon 50.5 .. 59.5:
# row 90, column 50 of the 180 x 360 grid, byte (90 * 360 + 50) * 2 = 64900
od -A d -t d2 -j 64900 -N 20 /tmp/slabfs-demo/elevation.zarr
# Copy month 1 (one 73 x 144 float32 field: 42048 bytes), then all of tas.
# A read that touches a corrupt chunk fails (EIO) and dd exits 1, but with
# count= it must be told iflag=fullblock (GNU dd): otherwise the bytes
# before the failure come back as a short block, which dd counts as one
# ("0+1 records in") and exits 0 with a short file.
dd if=/tmp/slabfs-demo/climate.zarr/tas of=tas-month1.f32 bs=42048 count=1 iflag=fullblock status=none
dd if=/tmp/slabfs-demo/climate.zarr/tas of=tas.f32 bs=1M status=none
ls -l tas-month1.f32 tas.f32
