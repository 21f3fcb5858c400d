#!/bin/sh
# Open the demo mount in GDAL (Debian package gdal-bin): with the hdr view
# every array NAME gets an ENVI header NAME.hdr, so GDAL's ENVI driver
# reads NAME as a raw band-sequential cube. Mount with the view enabled:
#   cargo run --release -- mount --views raw,json,hdr examples/demo/data /tmp/slabfs-demo
set -eu

# 144 x 73 pixels, 12 bands (one per month), Float32
gdalinfo /tmp/slabfs-demo/climate.zarr/tas
# The 12 monthly values at pixel (x=0, y=36): lon 0 on the equator
gdallocationinfo -valonly /tmp/slabfs-demo/climate.zarr/tas 0 36
# Int16 with NoData -32768, from the CF missing_value attribute
gdalinfo /tmp/slabfs-demo/elevation.zarr | grep -E 'Size is|Type=|NoData'
# Copy tas to a GeoTIFF, tas.tif. GDAL takes a read slabfs fails (EIO: a
# corrupt chunk) for zeros and exits 0, so ask the mount: errors.EIO in
# .slabfs/stats counts the failed reads (docs/SEMANTICS.md, "Reading
# safely"); unchanged, none failed meanwhile.
eio() { grep '"EIO"' /tmp/slabfs-demo/.slabfs/stats || true; }
before=$(eio)
gdal_translate -q /tmp/slabfs-demo/climate.zarr/tas tas.tif
[ "$(eio)" = "$before" ] || { echo "slabfs: reads failed during gdal_translate" >&2; exit 1; }
ls -l tas.tif
