#!/usr/bin/env python3
"""Write the seeds of the HDF5 structure targets (hdf5_superblock,
hdf5_object_header, hdf5_btree_v1, hdf5_btree_v2, hdf5_fixed_array,
hdf5_extensible_array, hdf5_fractal_heap, hdf5_filter_pipeline) into
fuzz/seeds/TARGET/.

Unlike make_seeds.py this needs h5py (the fixtures' writer, pinned in
scripts/requirements.txt):

    $(scripts/venv.sh) fuzz/seeds/make_hdf5_seeds.py

The structure targets take an address and a dataset's geometry in front
of the file (`slabfs_fuzz::H5Input`, `slabfs_fuzz::Geom`). To know both
without an HDF5 parser here, each seed file is written by h5py with one
chunked dataset (or one object with dense storage), so the one index
structure found by its signature in the file is that dataset's; the
geometry comes from h5py. Object header addresses come from
`h5py.h5o.get_info`. Filter pipeline messages are encoded here (spec
IV.A.2.l, versions 1 and 2) from the pipelines h5py reports for the
datasets of tests/fixtures/hdf5/data. Not deterministic byte for byte
(HDF5 stores times in some headers), which does not matter for seeds.
"""

import shutil
import struct
import tempfile
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "hdf5" / "data"
SEEDS = ROOT / "fuzz" / "seeds"
MAX_SEED = 24 << 10
UNDEF = 0xFFFF_FFFF_FFFF_FFFF


def reset(target):
    shutil.rmtree(SEEDS / target, ignore_errors=True)
    (SEEDS / target).mkdir(parents=True)


def write(target, name, data):
    if len(data) <= MAX_SEED:
        (SEEDS / target / name).write_bytes(data)


def prefix(addr, addr2=UNDEF, flags=0):
    return struct.pack("<BQQ", flags, addr, addr2)


def geom(ds, filtered):
    """slabfs_fuzz::Geom of the h5py dataset `ds`."""
    rank = len(ds.shape)
    maxshape = ds.maxshape
    unlimited = [d for d in range(rank) if maxshape[d] is None]
    gflags = int(filtered)
    if len(unlimited) == 1:
        gflags |= 2 | (unlimited[0] << 2)
    out = struct.pack("<BBI", rank - 1, gflags, ds.dtype.itemsize)
    for d in range(rank):
        layout = ds.shape[d] if maxshape[d] is None else maxshape[d]
        out += struct.pack("<III", ds.shape[d], layout, ds.chunks[d])
    return out


def find(data, sig, type_at=None, types=None):
    """Offsets of `sig` in `data` (with the byte at +type_at in `types`)."""
    out, at = [], data.find(sig)
    while at >= 0:
        if type_at is None or data[at + type_at] in types:
            out.append(at)
        at = data.find(sig, at + 1)
    return out


def chunk_seeds(tmp):
    """(target, name, seed) for the chunk index targets."""
    cases = [
        # name, libver, shape, chunks, maxshape, gzip, signature, target, type byte
        ("v1", "earliest", (6, 10), (2, 3), None, False, b"TREE", "hdf5_btree_v1", (1,)),
        ("v1_gzip", "earliest", (6, 10), (2, 3), (None, 10), True, b"TREE", "hdf5_btree_v1", (1,)),
        ("v1_deep", "earliest", (300,), (1,), None, False, b"TREE", "hdf5_btree_v1", (1,)),
        ("fa", "latest", (6, 10), (2, 3), None, False, b"FAHD", "hdf5_fixed_array", None),
        ("fa_gzip", "latest", (6, 10), (2, 3), None, True, b"FAHD", "hdf5_fixed_array", None),
        ("fa_paged", "latest", (1100,), (1,), None, False, b"FAHD", "hdf5_fixed_array", None),
        ("ea", "latest", (40, 3), (1, 3), (None, 3), False, b"EAHD", "hdf5_extensible_array", None),
        ("ea_gzip", "latest", (40,), (1,), (None,), True, b"EAHD", "hdf5_extensible_array", None),
        ("ea_small", "latest", (3,), (1,), (None,), False, b"EAHD", "hdf5_extensible_array", None),
        ("bt2", "latest", (6, 10), (2, 3), (None, None), False, b"BTHD", "hdf5_btree_v2", (10,)),
        ("bt2_gzip", "latest", (30, 10), (1, 3), (None, None), True, b"BTHD", "hdf5_btree_v2", (11,)),
    ]
    for name, libver, shape, chunks, maxshape, gzip, sig, target, types in cases:
        p = tmp / f"{name}.h5"
        with h5py.File(p, "w", libver=libver) as f:
            n = int(np.prod(shape))
            kw = {"compression": "gzip", "shuffle": True} if gzip else {}
            ds = f.create_dataset("x", shape=shape, chunks=chunks, maxshape=maxshape,
                                  dtype="<i2", **kw)
            # Some chunks left unwritten (fill value), the rest written.
            flat = np.arange(n, dtype="<i2").reshape(shape)
            ds[: max(1, shape[0] * 2 // 3)] = flat[: max(1, shape[0] * 2 // 3)]
            g = geom(ds, gzip)
        data = p.read_bytes()
        addrs = find(data, sig, 4 if sig == b"TREE" else 5, types) if types else find(data, sig)
        # The root of a v1 B-tree is the one node no other node points
        # to; the first one h5py writes is it for these small trees.
        for i, a in enumerate(addrs[:1]):
            yield target, f"{name}.bin", prefix(a) + g + data


def group_seeds(tmp):
    p = tmp / "group.h5"
    with h5py.File(p, "w", libver="earliest") as f:
        for i in range(12):
            f.create_group(f"member_{i:02}")
    data = p.read_bytes()
    trees = find(data, b"TREE", 4, (0,))
    heaps = find(data, b"HEAP")
    if trees and heaps:
        yield "hdf5_btree_v1", "group.bin", prefix(trees[0], heaps[0], 0x10) + data


def dense_seeds(tmp):
    """Dense links and attributes: the heap and its name index."""
    p = tmp / "dense_links.h5"
    with h5py.File(p, "w", libver="latest") as f:
        for i in range(20):
            f.create_group(f"member_with_a_long_name_{i:02}")
    yield p, 0x00, "links"
    p = tmp / "dense_attrs.h5"
    with h5py.File(p, "w", libver="latest") as f:
        ds = f.create_dataset("x", data=np.arange(4, dtype="<f4"))
        for i in range(12):
            ds.attrs[f"attribute_{i:02}"] = np.arange(i + 1, dtype="<i4")
    yield p, 0x10, "attrs"
    p = tmp / "dense_huge.h5"
    with h5py.File(p, "w", libver="latest") as f:
        ds = f.create_dataset("x", data=np.arange(4, dtype="<f4"))
        ds.attrs["small"] = 1
        ds.attrs["huge"] = np.arange(17500, dtype="<i4")
    yield p, 0x10, "huge"


def fractal_seeds(tmp):
    for p, flags, name in dense_seeds(tmp):
        data = p.read_bytes()
        heaps = find(data, b"FRHP")
        trees = find(data, b"BTHD", 5, (5, 8))
        if heaps and trees:
            # The whole file: a 70 kB attribute makes the huge seed too
            # big for the others, not for this one.
            seed = prefix(heaps[0], trees[0], flags) + data
            (SEEDS / "hdf5_fractal_heap" / f"{name}.bin").write_bytes(seed)
            write("hdf5_btree_v2", f"names_{name}.bin", prefix(trees[0], UNDEF, 0x10) + data)


def header_seeds(tmp):
    files = [FIXTURES / "userblock.h5", FIXTURES / "classic.nc"]
    files += sorted(tmp.glob("*.h5"))
    for p in files:
        data = p.read_bytes()
        base = data.find(b"\x89HDF\r\n\x1a\n")
        addrs = []
        with h5py.File(p, "r") as f:
            addrs.append(h5py.h5o.get_info(f.id).addr)
            f.visititems(lambda n, o: addrs.append(h5py.h5o.get_info(o.id).addr) and None)
        for i, a in enumerate(sorted(set(addrs))[:2]):
            write("hdf5_object_header", f"{p.stem}_{i}.bin", prefix(a) + data[base:])
    for p in sorted(FIXTURES.iterdir()):
        write("hdf5_superblock", p.name, p.read_bytes()[: 12 << 10])


def pipeline(filters, version):
    out = struct.pack("<BB", version, len(filters))
    if version == 1:
        out += bytes(6)
    for code, flags, values, name in filters:
        name = name.encode() + b"\0" if name else b""
        if version == 1:
            name += bytes(-len(name) % 8)
        with_name = version == 1 or code >= 256
        out += struct.pack("<H", code)
        if with_name:
            out += struct.pack("<H", len(name))
        out += struct.pack("<HH", flags, len(values))
        if with_name:
            out += name
        out += b"".join(struct.pack("<I", v) for v in values)
        if version == 1 and len(values) % 2:
            out += bytes(4)
    return out


def pipeline_seeds():
    seen = set()
    for p in sorted(FIXTURES.iterdir()):
        with h5py.File(p, "r") as f:
            found = []
            f.visititems(lambda n, o: found.append(o) if isinstance(o, h5py.Dataset) else None)
            for ds in found:
                plist = ds.id.get_create_plist()
                filters = []
                for i in range(plist.get_nfilters()):
                    code, flags, values, name = plist.get_filter(i)
                    filters.append((code, flags, tuple(values), name.decode(errors="replace")))
                key = tuple(filters)
                if filters and key not in seen:
                    seen.add(key)
                    for v in (1, 2):
                        write("hdf5_filter_pipeline", f"{p.stem}_{len(seen)}_v{v}.bin",
                              pipeline(filters, v))


if __name__ == "__main__":
    targets = ["hdf5_superblock", "hdf5_object_header", "hdf5_btree_v1", "hdf5_btree_v2",
               "hdf5_fixed_array", "hdf5_extensible_array", "hdf5_fractal_heap",
               "hdf5_filter_pipeline"]
    for t in targets:
        reset(t)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for target, name, seed in list(chunk_seeds(tmp)) + list(group_seeds(tmp)):
            write(target, name, seed)
        fractal_seeds(tmp)
        header_seeds(tmp)
    pipeline_seeds()
    for t in targets:
        files = list((SEEDS / t).iterdir())
        print(f"{t}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
