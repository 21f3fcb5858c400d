#!/usr/bin/env python3
"""Write the seed corpus of every fuzz target into fuzz/seeds/TARGET/.

Seeds are starting points for libFuzzer, not test expectations: most are
files of tests/fixtures (written by the reference tools) in the input
layout each target documents in its module docs (a selector or flags byte
in front, a NUL between metadata and chunk bytes); the rest are built
here from the formats' definitions (valid shards, random bytes for the
arithmetic targets). Standard library only; deterministic (fixed random
seed), so running it again rewrites the same files.

    python3 fuzz/seeds/make_seeds.py

The blocked_archive seeds are archives written by `slabfs pack` (the
only writer of the format), so this script runs the slabfs binary built
by `cargo build` (target/debug/slabfs) for them, and skips them if it is
not there.
"""

import base64
import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SEEDS = ROOT / "fuzz" / "seeds"

# Seeds larger than this are left out (the targets run with a -max_len
# of the same order, docs/DEVELOPMENT.md).
MAX_SEED = 12 << 10

# Metadata seeds per Zarr target and root directory.
MAX_ZARR_SEEDS = 20

# Seeds written per (target, key): a few per codec id or metadata shape
# keep the committed corpus small and varied.
_counts = {}


def write(target, name, data, key=None, per_key=1):
    if len(data) > MAX_SEED:
        return
    if key is not None:
        n = _counts.get((target, key), 0)
        if n >= per_key:
            return
        _counts[(target, key)] = n + 1
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def reset(target):
    shutil.rmtree(SEEDS / target, ignore_errors=True)


def first_chunk(array_dir, v3):
    """The stored bytes of chunk 0 of an array directory, or None."""
    names = ["c/0/0/0", "c/0/0", "c/0", "c", "c.0.0", "c.0"] if v3 else []
    names += ["0.0.0", "0.0", "0", "0/0/0", "0/0"]
    for n in names:
        p = array_dir / n
        if p.is_file():
            return p.read_bytes()
    return None


def codec_names(codecs):
    """Names of a v3 codec list, nested sharding codecs included."""
    out = []
    for c in codecs or []:
        if isinstance(c, str):
            out.append(c)
            continue
        out.append(c.get("name"))
        conf = c.get("configuration") or {}
        if c.get("name") == "sharding_indexed":
            out.append(codec_names(conf.get("codecs")))
            out.append(codec_names(conf.get("index_codecs")))
    return out


def signature(doc, v3):
    if v3:
        grid = doc.get("chunk_grid")
        return json.dumps([doc.get("data_type"), grid.get("name") if isinstance(grid, dict) else grid,
                           codec_names(doc.get("codecs"))])
    comp = doc.get("compressor") or {}
    return json.dumps([doc.get("dtype"), comp.get("id"), comp.get("cname"), comp.get("shuffle"),
                       [f.get("id") for f in doc.get("filters") or []], doc.get("order")])


def zarr_seeds():
    for target, meta_name, roots, v3 in [
        ("zarr_v2_metadata", ".zarray", [FIXTURES / "zarr" / "v2", FIXTURES / "nczarr"], False),
        ("zarr_v3_metadata", "zarr.json", [FIXTURES / "zarr" / "v3"], True),
    ]:
        reset(target)
        seen = set()
        for root in roots:
            taken = 0
            # A fixed shuffle for variety, with the rarer forms (sharding,
            # rectilinear grids, filters, NCZarr) first.
            metas = sorted(root.rglob(meta_name))
            random.Random(0).shuffle(metas)
            rare = (b"sharding", b"rectilinear", b"filters\": [", b"_nczarr")
            metas.sort(key=lambda m: not any(r in m.read_bytes() for r in rare))
            for meta in metas:
                text = meta.read_bytes()
                if v3 and b'"array"' not in text:
                    continue
                # One seed per data type and codec chain, so that arrays
                # differing only in names, shapes and values do not crowd
                # the corpus.
                key = signature(json.loads(text), v3)
                if key in seen:
                    continue
                chunk = first_chunk(meta.parent, v3)
                data = text if chunk is None else text + b"\0" + chunk
                if len(data) > MAX_SEED:
                    continue
                if taken == MAX_ZARR_SEEDS:
                    break
                taken += 1
                seen.add(key)
                name = str(meta.parent.relative_to(root)).replace("/", "_")
                write(target, name, data)


def codec_cases():
    m = json.loads((FIXTURES / "codecs" / "manifest.json").read_text())
    for c in m["cases"]:
        if "encoded_file" in c:
            enc = (FIXTURES / "codecs" / c["encoded_file"]).read_bytes()
        elif "encoded_b64" in c:
            enc = base64.b64decode(c["encoded_b64"])
        else:
            continue
        yield c, enc


COMPRESSORS = ["zlib", "gzip", "zstd", "lz4", "bz2", "lzma"]
CHECKSUMS = {"crc32c": 1, "crc32": 3, "adler32": 5, "fletcher32": 7, "jenkins_lookup3": 8}


def codec_seeds():
    for t in ["codec_blosc", "codec_compressors", "codec_checksums", "codec_filters", "codec_shuffle"]:
        reset(t)
    for c, enc in codec_cases():
        name = c["name"]
        codec = c.get("codec")
        if c["kind"] != "v2" or not isinstance(codec, dict):
            continue
        cid = codec.get("id")
        write("codec_filters", name, json.dumps(codec).encode() + b"\0" + enc, key=cid, per_key=2)
        if cid == "blosc":
            write("codec_blosc", name, enc, key=(codec.get("cname"), codec.get("shuffle") == 2))
        elif cid in COMPRESSORS:
            write("codec_compressors", name, bytes([COMPRESSORS.index(cid)]) + enc, key=cid, per_key=3)
        elif cid in CHECKSUMS:
            sel = CHECKSUMS[cid]
            if cid in ("crc32c", "crc32", "adler32") and codec.get("location") == (
                "start" if cid == "crc32c" else "end"
            ):
                sel += 1
            write("codec_checksums", name, bytes([sel]) + enc, key=sel, per_key=2)
    rng = random.Random(8)
    # Checksums: every variant, with and without the fix-up bit.
    for sel in range(9):
        for fix in (0, 0x10):
            payload = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 64, 1000])))
            write("codec_checksums", f"synthetic_{sel}_{fix:x}", bytes([sel | fix]) + payload + b"\0" * 4)
    # Shuffle: element sizes 0..16 and a few odd ones, whole and ragged.
    for s in [0, 1, 2, 3, 4, 5, 8, 16, 24]:
        n = rng.choice([1, 7, 64])
        write("codec_shuffle", f"es{s}_n{n}", bytes([s]) + bytes(rng.randrange(256) for _ in range(max(s, 1) * n)))
    write("codec_shuffle", "ragged", bytes([4]) + bytes(range(10)))


# --- shard_index ----------------------------------------------------------

EMPTY = 0xFFFFFFFFFFFFFFFF


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def build_block(chunks, start, crc):
    """A block of inner chunks (bytes, or None for empty), index at the
    start or the end, in C order."""
    n = len(chunks)
    index_len = 16 * n + (4 if crc else 0)
    body = b""
    entries = []
    base = index_len if start else 0
    for c in chunks:
        if c is None:
            entries.append((EMPTY, EMPTY))
        else:
            entries.append((base + len(body), len(c)))
            body += c
    index = b"".join(struct.pack("<QQ", o, l) for o, l in entries)
    if crc:
        index += struct.pack("<I", crc32c(index))
    return index + body if start else body + index


def shard_seeds():
    reset("shard_index")
    rng = random.Random(3)

    def leaf(nbytes):
        return bytes(rng.randrange(256) for _ in range(nbytes))

    for flags in range(32):
        crc = bool(flags & 2)
        if flags & 8 == 0:
            chunks = [leaf(12), None, leaf(12), leaf(12)]
            shard = build_block(chunks, bool(flags & 1), crc)
        else:
            subs = [
                build_block([leaf(6), leaf(6), None, leaf(6)], bool(flags & 16), crc),
                build_block([None, leaf(6), leaf(6), leaf(6)], bool(flags & 16), crc),
            ]
            shard = build_block(subs, bool(flags & 1), crc)
        write("shard_index", f"flags{flags:02d}", bytes([flags]) + shard)
    # An all-empty shard, and one whose chunk runs past its end.
    write("shard_index", "all_empty", bytes([0]) + build_block([None] * 4, False, False))
    write("shard_index", "past_end", bytes([0]) + struct.pack("<QQ", 0, 999) + build_block([None] * 4, False, False)[16:])


# --- files ----------------------------------------------------------------

def file_seeds():
    reset("netcdf3_header")
    for p in sorted((FIXTURES / "netcdf3" / "data").glob("*.nc")):
        write("netcdf3_header", p.name, p.read_bytes())
    for p in sorted((FIXTURES / "nca" / "bad").glob("cfa04_*.nc"))[:3]:
        write("netcdf3_header", p.name, p.read_bytes())

    reset("hdf5_file")
    for p in sorted((FIXTURES / "hdf5" / "data").iterdir()):
        if p.stat().st_size <= MAX_SEED:
            write("hdf5_file", p.name, p.read_bytes())

    reset("nca_descriptor")
    for d in ["data", "bad"]:
        for p in sorted((FIXTURES / "nca" / d).glob("*.nca.json")):
            write("nca_descriptor", f"{d}_{p.name}", p.read_bytes())
    write("nca_descriptor", "frag_inner.nca.json", (FIXTURES / "nca/data/frag/inner.nca.json").read_bytes())

    reset("ncml")
    for p in sorted((FIXTURES / "ncml").glob("*.ncml")):
        write("ncml", p.name, p.read_bytes())

    reset("nca_netcdf")
    dirs = ["frag", "cf/basic", "cf/grid2d", "cf/missing", "cf/size1", "cf/unique", "cf/units", "cfa04"]
    for i, d in enumerate(dirs):
        base = FIXTURES / "nca" / "data" / d
        files = ["ncafile.nc", "ncafile_part.nc"] if d == "frag" else (
            ["tas.nc", "units.nc", "defaults.nc"] if d == "cfa04" else ["agg.nc"])
        for f in files:
            write("nca_netcdf", f"{d.replace('/', '_')}_{f}", bytes([i]) + (base / f).read_bytes())
    for p in sorted((FIXTURES / "nca" / "bad").glob("cfa04_*.nc")):
        write("nca_netcdf", f"bad_{p.name}", bytes([7]) + p.read_bytes())

    reset("kerchunk_refs")
    for d in ["data", "bad"]:
        for p in sorted((FIXTURES / "kerchunk" / d).glob("*.json")):
            write("kerchunk_refs", f"{d}_{p.name}", p.read_bytes())


def arithmetic_seeds():
    rng = random.Random(1)
    for t in ["index_linear", "index_projection"]:
        reset(t)
        for i in range(8):
            n = rng.choice([16, 64, 256])
            write(t, f"random_{i}", bytes(rng.randrange(256) for _ in range(n)))


def blocked_seeds():
    reset("blocked_archive")
    exe = ROOT / "target" / "debug" / "slabfs"
    if not exe.is_file():
        print("no target/debug/slabfs: blocked_archive seeds skipped", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as tmp:
        files = ["classic_records", "data64_types", "ncgen_cdf5", "single_record_short", "zero_records"]
        for p in [FIXTURES / "netcdf3" / "data" / f"{f}.nc" for f in files]:
            for codec, bs in [("zstd", "64"), ("deflate", "1024")]:
                out = Path(tmp) / f"{p.stem}_{codec}.ncb"
                r = subprocess.run(
                    [str(exe), "pack", str(p), str(out), "--codec", codec, "--block-size", bs],
                    capture_output=True,
                )
                if r.returncode != 0:
                    print(f"pack {p.name}: {r.stderr.decode().strip()}", file=sys.stderr)
                    continue
                data = out.read_bytes()
                # Flags 0 (checksums as written) for zstd, 7 (rewritten by
                # the target) for deflate.
                write("blocked_archive", out.name, bytes([0 if codec == "zstd" else 7]) + data)


if __name__ == "__main__":
    zarr_seeds()
    codec_seeds()
    shard_seeds()
    file_seeds()
    arithmetic_seeds()
    blocked_seeds()
    for d in sorted(SEEDS.iterdir()):
        if d.is_dir():
            files = list(d.iterdir())
            print(f"{d.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
