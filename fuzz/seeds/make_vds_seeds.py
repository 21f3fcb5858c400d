#!/usr/bin/env python3
"""Seeds of the `hdf5_vds_mappings` fuzz target: every global heap object
of the VDS fixtures (tests/fixtures/hdf5, written by h5py through
generate_vds.py) that holds a virtual dataset's mapping list (encoding
version 0 or 1), without its 4-byte checksum (the target appends it).

Run from the repository root: python3 fuzz/seeds/make_vds_seeds.py
(the standard library only: it reads the files' bytes).
"""

import pathlib
import struct

OUT = pathlib.Path("fuzz/seeds/hdf5_vds_mappings")
FILES = ["tests/fixtures/hdf5/data/vds.h5", "tests/fixtures/hdf5/vds_bad/missing.h5"]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in FILES:
        b = pathlib.Path(p).read_bytes()
        at = b.find(b"GCOL")
        while at >= 0:
            # Collection: signature, version, 3 reserved, size (8 bytes);
            # objects: index (2), refcount (2), reserved (4), size (8),
            # data padded to 8 bytes; index 0 is the free space.
            size = struct.unpack_from("<Q", b, at + 8)[0]
            pos = at + 16
            while pos + 16 <= at + size:
                (idx,) = struct.unpack_from("<H", b, pos)
                if idx == 0:
                    break
                (ln,) = struct.unpack_from("<Q", b, pos + 8)
                obj = b[pos + 16 : pos + 16 + ln]
                if obj[:1] in (b"\0", b"\1"):
                    (OUT / f"{pathlib.Path(p).stem}_{n}.bin").write_bytes(obj[:-4])
                    n += 1
                pos += 16 + ((ln + 7) // 8) * 8
            at = b.find(b"GCOL", at + 4)
    print(f"{n} seeds")


if __name__ == "__main__":
    main()
