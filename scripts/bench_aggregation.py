#!/usr/bin/env python3
"""Aggregation benchmark (issue 4): a master array of 64 netCDF-3 partitions
read in full by `slabfs cat`, against `slabfs cat` of one netCDF-3 file
holding the same array, cf-python reading the CF-1.13 aggregation into
memory, netCDF4-python reading the single file, and plain `cat` of that file.

Usage (from the repository root):

    .venv/bin/python scripts/bench_aggregation.py [--size-mib 256] [--reps 7] [--perf]

What it does:

1. Makes sure the venv exists and builds `target/release/slabfs` (bench_read.py's
   machinery), then runs a private copy of the binary, so a rebuild by someone
   else cannot swap it mid-run.
2. Builds the data once, cached in --data-dir (gitignored) under
   `agg-<size>mib-<parts>p/`: a float32 array tas(time, lat, lon) of shape
   (size_mib, 512, 512) (one time step = 1 MiB), values bench_read.py's smooth
   field plus seeded Gaussian noise, held
     - in --partitions (64) netCDF-3 files of size_mib/64 time steps each
       (`frag/tas_NN.nc`, written by netCDF4-python, even NN NETCDF3_CLASSIC,
       odd NN NETCDF3_64BIT_OFFSET, with CF coordinates time/lat/lon),
     - aggregated by an NCA JSON descriptor `tas.nca.json` (docs/AGGREGATION.md),
     - and by a CF-1.13 aggregation variable `tas_cfa.nc` written by cf-python
       (`cf.read(frag/*.nc, cfa_write="field")`, then `cf.write(...,
       cfa={"constructs": "field", "uri": "relative"}, fmt="NETCDF3_CLASSIC")`),
     - in one netCDF-3 file `single.nc` (netCDF4-python, NETCDF3_64BIT_OFFSET),
     - and as a raw file `tas.raw` (the expected bytes).
3. Checks once (untimed) that every contender gives exactly the raw file's
   bytes (sha256): the `slabfs cat` outputs and the arrays the Python
   contenders build.
4. Runs every contender as a fresh process, interleaved (A B C ..., A B C ...)
   for --reps rounds after --warmup discarded ones, with bench_read.py's
   idle-wait and foreign-CPU rejection; optionally (--cold, default when root)
   a second pass dropping the page cache before every run.
5. --perf: one extra, untimed `perf record -g` of each `slabfs cat` contender,
   its samples sorted into categories (zstd, file reads, byte swap, ...).
6. Prints the machine, versions, command and Markdown tables; writes the raw
   numbers to <data-dir>/results-aggregation.json.

cfdm (cf-python's netCDF layer) looks the CF standard-name table up on the
internet while reading (raw.githubusercontent.com, a 5 s timeout, retried on
every check, since failures are not cached). The cf-python child stubs that
lookup to fail at once, as it does on a machine without network, so DNS
latency is not counted against cf-python; it reports how often it was called.
cfdm 1.13.3 also resolves the relative fragment URIs that cf-python itself
writes against the working directory instead of the aggregation file's
directory, so the cf-python child runs in the aggregation file's directory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_read as br  # noqa: E402

REPO = br.REPO
MIB = br.MIB
TAG = "bench_aggregation"
DATA_FORMAT_VERSION = 1  # bump when the generator changes
SEED = 20241204
NY, NX = 512, 512  # one time step = 1 MiB of float32
VAR = "tas"


def log(msg: str) -> None:
    print(f"{TAG}: {msg}", file=sys.stderr, flush=True)


def reexec_in_venv(py: Path, modules: tuple[str, ...]) -> None:
    """Run the rest of this script under the venv python if the modules are missing."""
    try:
        for m in modules:
            __import__(m)
        return
    except ImportError:
        pass
    if Path(sys.executable).resolve() == py.resolve():
        sys.exit(f"{TAG}: {', '.join(modules)} missing from the venv")
    os.execv(str(py), [str(py), str(Path(sys.argv[0]).resolve()), *sys.argv[1:], "--skip-venv"])


def private_binary(built: Path) -> tuple[Path, Path]:
    """A private copy of target/release/slabfs in a fresh work directory."""
    workdir = Path(tempfile.mkdtemp(prefix="slabfs-bench-"))
    exe = workdir / "slabfs"
    shutil.copy2(built, exe)
    return exe, workdir


# --------------------------------------------------------------------------
# shared helpers (bench_sharded.py uses them too)


def sha_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(MIB), b""):
            h.update(b)
            n += len(b)
    return h.hexdigest(), n


def sha_cmd(cmd: list[str]) -> tuple[str, int]:
    """sha256 and length of a command's stdout."""
    h = hashlib.sha256()
    n = 0
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    for b in iter(lambda: p.stdout.read(MIB), b""):
        h.update(b)
        n += len(b)
    if p.wait() != 0:
        sys.exit(f"{TAG}: {shlex.join(cmd)[:300]} failed")
    return h.hexdigest(), n


def verify(cs: list[dict], want: tuple[str, int]) -> None:
    """Untimed: every contender's bytes must be the raw file's. Non-Python
    contenders are checked through their stdout; Python ones run their
    child in "sha" mode (the array they build, as little-endian bytes)."""
    for c in cs:
        if c.get("verify") is False:
            continue
        if c["inproc"]:
            out = subprocess.run(c["cmd"][:-1] + ["sha"], stdout=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL, check=True, text=True).stdout
            d = json.loads(out.strip().splitlines()[-1])
            got = (d["sha256"], d["nbytes"])
        else:
            got = sha_cmd(c["cmd"])
        if got != want:
            sys.exit(f"{TAG}: {c['name']}: bytes differ from the raw file: {got} != {want}")
        log(f"{c['name']}: bytes match the raw file (sha256 {want[0][:16]}…, {want[1]} bytes)")


# perf categories for a `slabfs cat` process: (name, test), first match wins.
# A test is ("any", keys): some frame of the chain contains a key; ("leaf",
# keys): the innermost frame does; None: everything left.
CAT_CATEGORIES = [
    ("zstd decode", ("any", ("ZSTD_", "HUF_", "FSE_", "HIST_", "zstd::"))),
    ("byte swap (big-endian netCDF -> native)", ("any", ("swap_in_place", "dtype::swap"))),
    # swap_in_place is inlined into the netCDF-3 reader: its SSE2 loop is
    # the only work read_region does itself.
    ("byte swap, inlined in `Netcdf3Array::read_region`",
     ("leaf", ("Netcdf3Array as slabfs::array::ArraySource>::read_region",))),
    ("page faults (fresh buffers)", ("any", ("exc_page_fault",))),
    ("reading files: pread/read (kernel, page cache copy)",
     ("any", ("ksys_pread64", "ksys_read", "__x64_sys_pread64", "__x64_sys_read"))),
    ("writing stdout (kernel)", ("any", ("ksys_write", "__x64_sys_write"))),
    ("open/stat/close (kernel)", ("any", ("do_sys_openat2", "__x64_sys_openat", "vfs_fstat",
                                          "__x64_sys_statx", "__x64_sys_newfstatat",
                                          "__x64_sys_close", "__x64_sys_fstat"))),
    ("mmap/munmap/madvise/brk (allocator)", ("any", ("__x64_sys_munmap", "__x64_sys_mmap",
                                                     "__x64_sys_madvise", "__x64_sys_brk"))),
    ("futex, yield, scheduler", ("any", ("futex", "sched_yield", "__schedule"))),
    ("exec, process start and exit (kernel)", ("any", ("execve", "do_exit", "exit_mmap"))),
    ("memmove/memcpy (user)", ("leaf", ("memmove", "memcpy"))),
    ("memset (user)", ("leaf", ("memset",))),
    ("crc32c (shard index)", ("any", ("crc32c",))),
    ("other kernel", ("leaf", ("[kernel.kallsyms]",))),
    ("other user (projection, copies, load)", None),
]


def perf_classify(data: Path, comm: str) -> dict:
    """Sort the samples of `perf record -g` of one process into CAT_CATEGORIES."""
    out = subprocess.run(["perf", "script", "-i", str(data)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    counts = {name: 0 for name, _ in CAT_CATEGORIES}
    period_ns: list[int] = []
    threads: dict[str, int] = {}
    for block in out.split("\n\n"):
        lines = [x for x in block.splitlines() if x.strip()]
        if not lines:
            continue
        head = lines[0].split()
        if not head or not head[0].startswith(comm[:15]):
            continue
        try:
            period_ns.append(int(head[4]) if head[4].isdigit() else int(head[3]))
        except (IndexError, ValueError):
            pass
        threads[head[1]] = threads.get(head[1], 0) + 1
        frames = []
        for x in lines[1:]:
            parts = x.strip().split(None, 1)
            frames.append(parts[1] if len(parts) > 1 else "")
        for name, test in CAT_CATEGORIES:
            if test is None:
                counts[name] += 1
                break
            how, keys = test
            if how == "any":
                hit = any(k in f for f in frames for k in keys)
                if not hit and name == "zstd decode":
                    # zstd's assembly has no symbols: "[unknown] (/path/slabfs)"
                    hit = bool(frames) and frames[0].startswith("[unknown] (/")
            else:
                hit = bool(frames) and any(k in frames[0] for k in keys)
            if hit:
                counts[name] += 1
                break
    total = sum(counts.values())
    return {"samples": total, "threads": len(threads),
            "period_ns_median": statistics.median(period_ns) if period_ns else None,
            "categories": {k: {"samples": n, "share": n / total if total else 0.0}
                           for k, n in counts.items() if n}}


def perf_cat(label: str, cmd: list[str], base: Path, args, loops: int = 5,
             freq: int = 2999, tag: str = TAG) -> dict:
    """Untimed `perf record -g` of `loops` runs of cmd in a row (stdout to
    /dev/null), after an idle wait, redone while others were busy; returns
    the share of slabfs's samples in each category and the top symbols."""
    script = f"for i in $(seq {loops}); do {shlex.join(cmd)} > /dev/null || exit 1; done"
    for _ in range(args.retries + 1):
        br.wait_idle(args.idle_wait)
        r = br.run_one({"name": f"perf {label}", "inproc": False,
                        "cmd": ["perf", "record", "-g", "-F", str(freq), "-q", "-o",
                                f"{base}.data", "--", "sh", "-c", script]})
        print(f"{tag}: [perf] {label}: {loops} runs in {r['wall_s']:.3f}s "
              f"other-load {r['foreign']:.0%}", file=sys.stderr, flush=True)
        if r["foreign"] <= args.max_foreign:
            break
    comm = Path(cmd[0]).name
    bd = perf_classify(Path(f"{base}.data"), comm)
    rep = subprocess.run(["perf", "report", "--stdio", "--no-children", "-g", "none",
                          "--comm", comm, "--percent-limit", "0.7", "--sort", "dso,sym",
                          "-i", f"{base}.data"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    Path(f"{base}-sym.txt").write_text(rep)
    top = [ln.strip() for ln in rep.splitlines() if ln.strip() and not ln.startswith("#")][:12]
    return {"label": label, "loops": loops, "foreign": r["foreign"], "breakdown": bd,
            "top": top, "report": f"{base}-sym.txt"}


def perf_table(profiles: list[dict], cpu_s: list[float]) -> str:
    """Markdown: share of samples per category, and that share of the
    contender's median CPU time in the timed runs (perf's own overhead
    inflates the profiled runs, so their CPU time is not used)."""
    names = [n for n, _ in CAT_CATEGORIES
             if any(n in p["breakdown"]["categories"] for p in profiles)]
    lines = ["| where: share of samples (≈ CPU s) | " + " | ".join(p["label"] for p in profiles)
             + " |", "|---|" + "---:|" * len(profiles)]
    for n in names:
        cells = []
        for p, cpu in zip(profiles, cpu_s):
            c = p["breakdown"]["categories"].get(n)
            cells.append(f"{c['share']:.0%} ({c['share'] * cpu:.3f})" if c else "–")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines.append("| **CPU s, median of the timed warm runs** | "
                 + " | ".join(f"**{c:.3f}**" for c in cpu_s) + " |")
    lines.append("| samples (threads) | " + " | ".join(
        f"{p['breakdown']['samples']} ({p['breakdown']['threads']})" for p in profiles) + " |")
    return "\n".join(lines)


def ratio_rows(stats: dict, rows: list[tuple]) -> tuple[str, list[dict]]:
    """rows: (label, key_a, key_b, target or None, use_read_of_b). The value is
    the throughput ratio a / b from median times (> 1: a is faster); with
    use_read_of_b, b's in-process read time is used instead of its process time."""
    out = []
    lines = ["| ratio (throughput, medians) | value | target |", "|---|---:|---|"]
    for label, a, b, target, read_b in rows:
        ta = stats[a]["wall"]["median"]
        tb = stats[b]["read"]["median"] if read_b else stats[b]["wall"]["median"]
        x = tb / ta
        if target is None:
            verdict = "–"
        else:
            verdict = (f"**met** (≥ {target:g})" if x >= target
                       else f"**missed** (< {target:g})")
        lines.append(f"| {label} | **{x:.2f}** | {verdict} |")
        out.append({"label": label, "value": x, "target": target})
    return "\n".join(lines), out


def header_lines(command: str, slabfs: Path, extra_versions: tuple[str, ...]) -> tuple:
    import importlib.metadata as md

    m = br.machine_info()
    v = br.versions(slabfs)
    for p in extra_versions:
        try:
            v[p] = md.version(p)
        except md.PackageNotFoundError:
            v[p] = "not installed"
    return [f"Command: `{command}` (run from the repository root)", "",
            f"Machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['memory']} RAM",
            "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items())], m, v


def foreign_note(res: dict, redone: int, max_foreign: float) -> tuple[str, float]:
    worst = max(r["foreign"] for rs in res.values() for r in rs)
    kept_bad = sum(r["foreign"] > max_foreign for rs in res.values() for r in rs)
    note = (f"Other processes' CPU during kept runs: at most {worst:.0%} of the machine; "
            f"{redone} run(s) redone because others were busy")
    if kept_bad:
        note += (f"; {kept_bad} kept run(s) still above {max_foreign:.0%}: "
                 "**these figures are preliminary**")
    return note + ".", worst


def add_common_args(ap: argparse.ArgumentParser, reps: int = 7) -> None:
    ap.add_argument("--reps", type=int, default=reps, help=f"timed rounds (default {reps})")
    ap.add_argument("--warmup", type=int, default=1, help="discarded warm-up rounds (default 1)")
    ap.add_argument("--data-dir", type=Path, default=REPO / "bench-data",
                    help="where the generated data is cached (default: <repo>/bench-data)")
    ap.add_argument("--cold", choices=("auto", "yes", "no"), default="auto",
                    help="extra pass dropping the page cache before each run "
                         "(auto: only when running as root)")
    ap.add_argument("--max-foreign", type=float, default=0.15,
                    help="redo a run if other processes used more than this fraction of "
                         "the machine's CPU during it (default 0.15)")
    ap.add_argument("--idle-wait", type=float, default=60.0,
                    help="before each run, wait up to this many seconds for the machine "
                         "to be idle (<10%% CPU busy over 0.5 s); 0 disables (default 60)")
    ap.add_argument("--retries", type=int, default=5, help="redos per run (default 5)")
    ap.add_argument("--perf", action="store_true",
                    help="afterwards, profile each `slabfs cat` contender once with "
                         "`perf record -g` (untimed; reports saved in the data directory)")
    ap.add_argument("--no-build", action="store_true",
                    help="use the existing target/release/slabfs")
    ap.add_argument("--skip-venv", action="store_true", help="do not run scripts/venv.sh")


# --------------------------------------------------------------------------
# data


def stub_standard_names() -> None:
    """Make cfdm's standard-name-table lookup fail at once (see the module doc)."""
    import cfdm.conformance.checker as chk
    from cfdm.conformance.standardnames import StandardNameTableUnavailableError

    def offline(*a, **k):
        raise StandardNameTableUnavailableError("offline (stubbed by the benchmark)")

    chk.get_all_current_standard_names = offline


def write_fragment(path: Path, fmt: str, data, t0: int) -> None:
    import netCDF4
    import numpy as np

    nt, ny, nx = data.shape
    ds = netCDF4.Dataset(path, "w", format=fmt)
    ds.Conventions = "CF-1.8"
    ds.createDimension("time", nt)
    ds.createDimension("lat", ny)
    ds.createDimension("lon", nx)
    t = ds.createVariable("time", "f8", ("time",))
    t.standard_name = "time"
    t.units = "days since 2000-01-01"
    t.calendar = "standard"
    t.axis = "T"
    t[:] = np.arange(t0, t0 + nt, dtype="f8")
    la = ds.createVariable("lat", "f8", ("lat",))
    la.standard_name = "latitude"
    la.units = "degrees_north"
    la.axis = "Y"
    la[:] = np.linspace(-89.5, 89.5, ny)
    lo = ds.createVariable("lon", "f8", ("lon",))
    lo.standard_name = "longitude"
    lo.units = "degrees_east"
    lo.axis = "X"
    lo[:] = np.linspace(0.0, 360.0, nx, endpoint=False)
    v = ds.createVariable(VAR, "f4", ("time", "lat", "lon"))
    v.standard_name = "air_temperature"
    v.units = "K"
    v[:] = data
    ds.close()


def build_data(data_dir: Path, size_mib: int, parts: int, ny: int = NY, nx: int = NX) -> dict:
    """Create (or reuse) the fragments, the two aggregations, the single file
    and the raw file; return their description. One time step is a (ny, nx)
    float32 field (default 512 x 512 = 1 MiB); scripts/bench.py uses smaller
    ones for its --quick runs."""
    import numpy as np

    step = ny * nx * 4
    nt = size_mib * MIB // step
    if nt * step != size_mib * MIB or nt < parts or nt % parts:
        sys.exit(f"{TAG}: --size-mib must hold a multiple of --partitions time steps")
    per = nt // parts
    suffix = "" if (ny, nx) == (NY, NX) else f"-{ny}x{nx}"
    root = data_dir / f"agg-{size_mib}mib-{parts}p{suffix}"
    paths = {
        "root": root,
        "frag": root / "frag",
        "nca": root / f"{VAR}.nca.json",
        "cfa": root / f"{VAR}_cfa.nc",
        "single": root / "single.nc",
        "raw": root / f"{VAR}.raw",
    }
    stamp_path = root / "stamp.json"
    stamp = {"format": DATA_FORMAT_VERSION, "seed": SEED, "shape": [nt, ny, nx],
             "partitions": parts}
    cached = False
    if stamp_path.exists() and all(p.exists() for p in paths.values()):
        try:
            cached = json.loads(stamp_path.read_text()) == stamp
        except (OSError, ValueError):
            cached = False
    if not cached:
        import netCDF4

        log(f"generating {size_mib} MiB in {parts} netCDF-3 partitions in {root} ...")
        shutil.rmtree(root, ignore_errors=True)
        paths["frag"].mkdir(parents=True)
        rng = np.random.default_rng(SEED)
        single = netCDF4.Dataset(paths["single"], "w", format="NETCDF3_64BIT_OFFSET")
        single.Conventions = "CF-1.8"
        for d, n in (("time", nt), ("lat", ny), ("lon", nx)):
            single.createDimension(d, n)
        sv = single.createVariable(VAR, "f4", ("time", "lat", "lon"))
        sv.standard_name = "air_temperature"
        sv.units = "K"
        partitions = []
        t0 = time.perf_counter()
        with open(paths["raw"], "wb") as fraw:
            for i in range(parts):
                block = np.stack([br.field_slab(i * per + k, nt, ny, nx, rng)
                                  for k in range(per)])
                block += np.float32(273.15)  # kelvin
                fmt = "NETCDF3_CLASSIC" if i % 2 == 0 else "NETCDF3_64BIT_OFFSET"
                rel = f"frag/{VAR}_{i:02d}.nc"
                write_fragment(root / rel, fmt, block, i * per)
                sv[i * per:(i + 1) * per] = block
                fraw.write(block.tobytes())
                partitions.append({"index": [i],
                                   "location": [[i * per, (i + 1) * per], [0, ny], [0, nx]],
                                   "format": "netCDF",
                                   "data": {"file": rel, "ncvar": VAR}})
        single.close()
        log(f"  fragments, single file and raw file written in {time.perf_counter() - t0:.1f}s")
        desc = {"dimensions": {"time": nt, "lat": ny, "lon": nx},
                "variables": {VAR: {
                    "dtype": "float32", "nca_dimensions": "time lat lon",
                    "units": "K", "standard_name": "air_temperature",
                    "nca_array": {"pdimensions": ["time"], "pshape": [parts],
                                  "Partitions": partitions}}}}
        paths["nca"].write_text(json.dumps(desc, indent=1) + "\n")
        # The CF-1.13 aggregation, written by cf-python over the fragments.
        t0 = time.perf_counter()
        stub_standard_names()
        import cf

        fields = cf.read(str(paths["frag"] / "*.nc"), cfa_write="field")
        if len(fields) != 1:
            sys.exit(f"{TAG}: cf-python aggregated the fragments into {len(fields)} fields")
        cf.write(fields[0], str(paths["cfa"]), cfa={"constructs": "field", "uri": "relative"},
                 fmt="NETCDF3_CLASSIC")
        log(f"  CF-1.13 aggregation written by cf-python in {time.perf_counter() - t0:.1f}s")
        stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    nbytes = paths["raw"].stat().st_size
    assert nbytes == size_mib * MIB, (nbytes, size_mib)
    frag_files = sorted(paths["frag"].glob("*.nc"))
    formats = {}
    for f in frag_files:
        with open(f, "rb") as fh:
            formats[f.name] = {1: "CDF-1 (classic)", 2: "CDF-2 (64-bit offset)",
                               5: "CDF-5"}.get(fh.read(4)[3], "?")
    return {**paths, "shape": (nt, ny, nx), "partitions": parts, "per_partition": per,
            "nbytes": nbytes, "cached": cached, "fragment_bytes": sum(f.stat().st_size
                                                                      for f in frag_files),
            "fragment_formats": sorted(set(formats.values())),
            "single_bytes": paths["single"].stat().st_size}


# --------------------------------------------------------------------------
# contenders

# argv: path nbytes mode; mode "time" prints timings, "sha" the array's sha256.
CF_CHILD = r"""
import hashlib, json, sys, time
import cfdm.conformance.checker as _chk
from cfdm.conformance.standardnames import StandardNameTableUnavailableError as _E
_calls = [0]
def _offline(*a, **k):
    _calls[0] += 1
    raise _E("offline (stubbed by the benchmark)")
_chk.get_all_current_standard_names = _offline
import os
import cf
path, nbytes, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# cfdm 1.13.3 resolves relative fragment URIs against the working
# directory, not the aggregation file's: read from the file's directory.
os.chdir(os.path.dirname(os.path.abspath(path)))
c0 = time.process_time()
t0 = time.perf_counter()
fl = cf.read(path)
assert len(fl) == 1, fl
a = fl[0].array
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == nbytes, a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
if mode == "sha":
    import numpy as np
    b = np.ascontiguousarray(np.ma.getdata(a)).astype("<f4", copy=False).tobytes()
    print(json.dumps({"sha256": hashlib.sha256(b).hexdigest(), "nbytes": len(b),
                      "masked": int(np.ma.count_masked(a))}))
else:
    print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads),
                      "std_name_lookups": _calls[0], "type": type(a).__name__}))
"""

NC4_CHILD = r"""
import hashlib, json, sys, time
import netCDF4
path, nbytes, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c0 = time.process_time()
t0 = time.perf_counter()
ds = netCDF4.Dataset(path)
a = ds.variables["tas"][:]
ds.close()
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == nbytes, a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
if mode == "sha":
    import numpy as np
    b = np.ascontiguousarray(np.ma.getdata(a)).astype("<f4", copy=False).tobytes()
    print(json.dumps({"sha256": hashlib.sha256(b).hexdigest(), "nbytes": len(b)}))
else:
    print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads),
                      "type": type(a).__name__}))
"""


def contenders(slabfs: Path, py: Path, d: dict, with_nc4: bool) -> list[dict]:
    n = str(d["nbytes"])
    cs = [
        {"name": "slabfs cat, NCA descriptor (64 partitions)", "key": "slabfs_nca",
         "cmd": [str(slabfs), "cat", str(d["nca"]), VAR], "inproc": False},
        {"name": "slabfs cat, CF-1.13 aggregation (64 fragments)", "key": "slabfs_cfa",
         "cmd": [str(slabfs), "cat", str(d["cfa"]), VAR], "inproc": False},
        {"name": "slabfs cat, single netCDF-3 file", "key": "slabfs_single",
         "cmd": [str(slabfs), "cat", str(d["single"]), VAR], "inproc": False},
        {"name": "cf-python, CF-1.13 aggregation `.array`", "key": "cf",
         "cmd": [str(py), "-c", CF_CHILD, str(d["cfa"]), n, "time"], "inproc": True},
    ]
    if with_nc4:
        cs.append({"name": "netCDF4-python, single file `[:]`", "key": "nc4",
                   "cmd": [str(py), "-c", NC4_CHILD, str(d["single"]), n, "time"],
                   "inproc": True})
    cs.append({"name": "cat of the single .nc file (ceiling)", "key": "cat_single",
               "cmd": ["cat", str(d["single"])], "inproc": False, "verify": False})
    # Start-up: open and load everything, read 4 bytes.
    cs.append({"name": "slabfs cat --length 4, NCA (load only)", "key": "load_nca",
               "cmd": [str(slabfs), "cat", "--length", "4", str(d["nca"]), VAR],
               "inproc": False, "verify": False, "startup": True})
    cs.append({"name": "slabfs cat --length 4, single file (load only)", "key": "load_single",
               "cmd": [str(slabfs), "cat", "--length", "4", str(d["single"]), VAR],
               "inproc": False, "verify": False, "startup": True})
    return cs


RATIOS = [
    # label, a, b, target, use b's in-process read
    ("NCA aggregation / single file (`slabfs cat` both)", "slabfs_nca", "slabfs_single", 0.8,
     False),
    ("CF-1.13 aggregation / single file (`slabfs cat` both)", "slabfs_cfa", "slabfs_single",
     0.8, False),
    ("slabfs NCA / cf-python, process vs process", "slabfs_nca", "cf", 10.0, False),
    ("slabfs NCA / cf-python, slabfs process vs cf-python's in-process read", "slabfs_nca",
     "cf", 10.0, True),
    ("slabfs CF-1.13 / cf-python, process vs process", "slabfs_cfa", "cf", 10.0, False),
    ("slabfs CF-1.13 / cf-python, slabfs process vs in-process read", "slabfs_cfa", "cf", 10.0,
     True),
    ("slabfs single file / netCDF4-python, process vs process", "slabfs_single", "nc4", None,
     False),
    ("slabfs single file / netCDF4-python, vs in-process read", "slabfs_single", "nc4", None,
     True),
    ("slabfs single file / `cat` of the .nc file", "slabfs_single", "cat_single", None, False),
]


def report_pass(title: str, cs: list[dict], res: dict, redone: int, d: dict, args) -> tuple:
    main = [c for c in cs if not c.get("startup")]
    tab, stats = br.table(main, res, d["nbytes"])
    for c in cs:
        if c.get("startup"):
            w = br.summary([r["wall_s"] for r in res[c["key"]]])
            stats[c["key"]] = {"wall": w}
            tab += (f"\n| {c['name']} | {w['median']:.3f} | {w['min']:.3f}–{w['max']:.3f} "
                    "| – | – | – | – | – | – | – |")
    rows = [r for r in RATIOS if r[1] in stats and r[2] in stats]
    rat_tab, rat = ratio_rows(stats, rows)
    note, worst = foreign_note(res, redone, args.max_foreign)
    return tab, rat_tab, note, stats, rat, worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256,
                    help="master array size in MiB, a multiple of --partitions (default 256)")
    ap.add_argument("--partitions", type=int, default=64, help="number of partitions (default 64)")
    ap.add_argument("--no-netcdf4", action="store_true",
                    help="leave out netCDF4-python reading the single file")
    add_common_args(ap)
    args = ap.parse_args()
    command = ".venv/bin/python scripts/bench_aggregation.py " + shlex.join(
        a for a in sys.argv[1:] if a != "--skip-venv")

    py = br.venv_python(args.skip_venv)
    reexec_in_venv(py, ("numpy", "netCDF4", "cf"))
    py = Path(sys.executable)
    data_dir = args.data_dir if args.data_dir.is_absolute() else (Path.cwd() / args.data_dir)
    built = br.build_slabfs(args.no_build)
    d = build_data(data_dir, args.size_mib, args.partitions)
    slabfs, workdir = private_binary(built)
    try:
        cs = contenders(slabfs, py, d, not args.no_netcdf4)
        want = sha_file(d["raw"])
        verify(cs, want)
        warm, warm_redone = br.run_pass(cs, args.reps, args.warmup, False, args.max_foreign,
                                        args.retries, args.idle_wait)
        is_root = os.geteuid() == 0
        do_cold = args.cold == "yes" or (args.cold == "auto" and is_root)
        if do_cold and not is_root:
            sys.exit(f"{TAG}: --cold yes needs root")
        cold = cold_redone = None
        if do_cold:
            cold, cold_redone = br.run_pass(cs, args.reps, 0, True, args.max_foreign,
                                            args.retries, args.idle_wait)
        profiles = []
        if args.perf:
            for c in cs:
                if c["key"].startswith("slabfs_"):
                    p = perf_cat(c["name"].replace("slabfs cat, ", "`slabfs cat` "), c["cmd"],
                                 data_dir / f"perf-agg-{c['key']}", args)
                    p["key"] = c["key"]
                    profiles.append(p)
        hdr, m, v = header_lines(command, slabfs, ("netCDF4", "cf-python", "cfdm", "dask"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    print("\n".join(hdr))
    print()
    print(f"Data: float32 tas{list(d['shape'])} (time, lat, lon), {d['nbytes'] / MIB:.0f} MiB; "
          f"{d['partitions']} partitions of {d['per_partition']} time steps "
          f"({d['nbytes'] / d['partitions'] / MIB:.0f} MiB each), fragment formats "
          f"{', '.join(d['fragment_formats'])}, {d['fragment_bytes'] / MIB:.1f} MiB of fragment "
          f"files; single file {d['single_bytes'] / MIB:.1f} MiB (CDF-2).")
    results = {"command": command, "machine": m, "versions": v,
               "data": {k: (str(x) if isinstance(x, Path) else x) for k, x in d.items()}}
    passes = [("warm", f"Warm page cache ({args.reps} reps, interleaved, {args.warmup} warm-up "
                       "round(s) discarded)", warm, warm_redone)]
    if cold is not None:
        passes.append(("cold", f"Cold page cache (`sync; echo 3 > /proc/sys/vm/drop_caches` "
                               f"before each run, {args.reps} reps, interleaved)",
                       cold, cold_redone))
    for key, title, res, redone in passes:
        tab, rat_tab, note, stats, rat, worst = report_pass(title, cs, res, redone, d, args)
        print(f"\n### {title}\n\n{tab}\n\n{rat_tab}\n\n{note}")
        cf_runs = res.get("cf", [])
        if cf_runs:
            print(f"\ncf-python: {cf_runs[0].get('std_name_lookups')} standard-name-table "
                  f"lookups per read (stubbed), result type {cf_runs[0].get('type')}, up to "
                  f"{max(r['threads'] for r in cf_runs)} OS threads at exit.")
        results[key] = {"runs": res, "stats": stats, "ratios": rat, "worst_foreign": worst,
                        "redone": redone}
    if profiles:
        print(f"\n### Where `slabfs cat`'s CPU goes (`perf record -g`, {profiles[0]['loops']} "
              "extra untimed runs each)\n")
        print(perf_table(profiles, [results["warm"]["stats"][p["key"]]["cpu_median"]
                                    for p in profiles]))
        for p in profiles:
            print(f"\n{p['label']}: {p['breakdown']['samples']} samples, "
                  f"{p['breakdown']['threads']} threads; top symbols ({p['report']}):")
            for t in p["top"][:8]:
                print(f"    {t}")
        results["perf"] = profiles
    out = data_dir / "results-aggregation.json"
    out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    log(f"raw numbers in {out}")


if __name__ == "__main__":
    main()
