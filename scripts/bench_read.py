#!/usr/bin/env python3
"""Whole-array read benchmark: `slabfs cat` against zarr-python 3, tensorstore
and plain `cat` of the same bytes stored raw (the ceiling).

Usage (from the repository root):

    .venv/bin/python scripts/bench_read.py [--size-mib 256] [--reps 5] [--data-dir bench-data]

What it does:

1. Makes sure the venv exists (scripts/venv.sh, else `python -m venv .venv` and
   pip install of scripts/requirements.txt) and builds `target/release/slabfs`
   (`cargo build --release`, retried while other people's edits break it).
2. Builds the data once, cached in --data-dir (gitignored): a float32 Zarr v3
   array written by zarr-python with its default codec chain (bytes + zstd
   level 0), shape (size_mib/4, 1024, 1024), chunks (1, 512, 512) = exactly
   1 MiB each; values are a smooth field (sums of sines over the grid) plus
   seeded Gaussian noise. The same values are written as a plain raw file.
3. Checks once (untimed) that `slabfs cat` reproduces the raw file byte for byte.
4. Runs every contender as a fresh process, interleaved (A B C D, A B C D, ...)
   for --reps repetitions after --warmup discarded rounds, so all contenders
   see the same, warm, page cache. Whole processes are timed with
   time.perf_counter around the child; the Python peers also report their
   in-process read time. Each run waits for the machine to be idle first and
   is redone if other processes were busy during it (shared build machines).
   CPU time (user+sys, from wait4) shows how many cores each contender kept
   busy.
5. If running as root and --cold is not "no" (default: auto = when root), a second
   pass drops the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`)
   before every run, reported separately.
6. Prints the machine, library versions, the exact command and Markdown tables;
   writes the raw numbers to <data-dir>/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIB = 1 << 20
CHUNK = (1, 512, 512)  # 262144 float32 = 1 MiB
DATA_FORMAT_VERSION = 1  # bump when the generator changes
SEED = 20240611
ARRAY_NAME = "field"  # array path inside the store


# --------------------------------------------------------------------------
# environment


def venv_python(skip: bool) -> Path:
    """Ensure the project venv is there and return its python."""
    venv_py = REPO / ".venv" / "bin" / "python"
    if skip:
        return venv_py if venv_py.exists() else Path(sys.executable)
    script = REPO / "scripts" / "venv.sh"
    if script.exists():
        out = subprocess.run(["bash", str(script)], check=True, stdout=subprocess.PIPE, text=True)
        lines = out.stdout.strip().splitlines()
        return Path(lines[-1]) if lines else venv_py
    if not venv_py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(REPO / ".venv")], check=True)
    req = REPO / "scripts" / "requirements.txt"
    pip = [str(venv_py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if req.exists():
        subprocess.run(pip + ["-r", str(req)], check=True)
    else:
        subprocess.run(pip + ["zarr", "numcodecs", "numpy", "tensorstore"], check=True)
    return venv_py


def reexec_in_venv(py: Path) -> None:
    """Run the rest of this script under the venv python if we are not in it."""
    try:
        import numpy  # noqa: F401
        import zarr  # noqa: F401
        import tensorstore  # noqa: F401
        return
    except ImportError:
        pass
    if Path(sys.executable).resolve() == py.resolve():
        sys.exit("bench_read: zarr/numpy/tensorstore missing from the venv")
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:], "--skip-venv"])


def build_slabfs(skip: bool, attempts: int = 10, wait_s: float = 60.0) -> Path:
    exe = REPO / "target" / "release" / "slabfs"
    if skip:
        if not exe.exists():
            sys.exit(f"bench_read: {exe} does not exist (drop --no-build)")
        return exe
    for i in range(attempts):
        r = subprocess.run(["cargo", "build", "--release"], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            return exe
        tail = "\n".join(r.stdout.strip().splitlines()[-15:])
        print(f"bench_read: cargo build --release failed (attempt {i + 1}/{attempts}):\n{tail}",
              file=sys.stderr)
        if i + 1 < attempts:
            print(f"bench_read: retrying in {wait_s:.0f}s", file=sys.stderr)
            time.sleep(wait_s)
    sys.exit("bench_read: could not build slabfs")


def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) // 1024} MiB"
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "memory": mem,
        "python": platform.python_version(),
    }


def versions(slabfs: Path) -> dict:
    import importlib.metadata as md

    v = {p: md.version(p) for p in ("zarr", "numcodecs", "numpy", "tensorstore")}
    try:
        v["slabfs"] = subprocess.run([str(slabfs), "--version"], stdout=subprocess.PIPE,
                                     text=True, check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        v["slabfs"] = "unknown"
    try:
        v["slabfs source"] = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=REPO, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, check=True).stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        v["slabfs source"] = "unknown (no git commit)"
    try:
        v["rustc"] = subprocess.run(["rustc", "--version"], stdout=subprocess.PIPE,
                                    text=True, check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        v["rustc"] = "unknown"
    try:
        v["cat"] = subprocess.run(["cat", "--version"], stdout=subprocess.PIPE,
                                  text=True).stdout.splitlines()[0]
    except Exception:  # noqa: BLE001
        v["cat"] = "unknown"
    return v


# --------------------------------------------------------------------------
# data


def field_slab(z: int, nz: int, ny: int, nx: int, rng) -> "numpy.ndarray":
    """One z-slab: a smooth field (sum of sines) plus Gaussian noise."""
    import numpy as np

    zz = z / nz
    y = np.linspace(0.0, 1.0, ny, dtype=np.float64)[:, None]
    x = np.linspace(0.0, 1.0, nx, dtype=np.float64)[None, :]
    two_pi = 2.0 * np.pi
    f = (
        15.0
        + 8.0 * np.sin(two_pi * (1.0 * x + 0.5 * zz)) * np.cos(two_pi * 0.7 * y)
        + 3.0 * np.sin(two_pi * (3.0 * x + 2.0 * y + 1.3 * zz))
        + 1.5 * np.cos(two_pi * (7.0 * y - 5.0 * x + 0.2 * zz))
        + 0.5 * np.sin(two_pi * (17.0 * x + 13.0 * y))
    )
    f += rng.normal(0.0, 0.25, size=(ny, nx))
    return f.astype(np.float32)


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def chunk_bytes(store: Path) -> int:
    return sum(f.stat().st_size for f in (store / ARRAY_NAME).rglob("*")
               if f.is_file() and f.name != "zarr.json")


def build_data(data_dir: Path, size_mib: int) -> dict:
    """Create (or reuse) the Zarr store and the raw file; return their description."""
    import numpy as np
    import zarr

    if size_mib < 4 or size_mib % 4:
        sys.exit("bench_read: --size-mib must be a positive multiple of 4")
    nz, ny, nx = size_mib // 4, 1024, 1024
    shape = (nz, ny, nx)
    name = f"f32-{size_mib}mib"
    store = data_dir / f"{name}.zarr"
    raw = data_dir / f"{name}.raw"
    stamp_path = data_dir / f"{name}.json"
    stamp = {
        "format": DATA_FORMAT_VERSION,
        "seed": SEED,
        "shape": list(shape),
        "chunks": list(CHUNK),
        "zarr": zarr.__version__,
    }
    cached = False
    if stamp_path.exists() and store.exists() and raw.exists():
        try:
            old = json.loads(stamp_path.read_text())
            cached = all(old.get(k) == v for k, v in stamp.items() if k != "zarr")
        except (OSError, ValueError):
            cached = False
    if not cached:
        print(f"bench_read: generating {size_mib} MiB of data in {data_dir} ...", file=sys.stderr)
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(store, ignore_errors=True)
        root = zarr.open_group(str(store), mode="w", zarr_format=3)
        # compressors="auto" is zarr-python's default: bytes + zstd(level=0).
        arr = root.create_array(ARRAY_NAME, shape=shape, chunks=CHUNK, dtype="float32",
                                compressors="auto", fill_value=0.0)
        rng = np.random.default_rng(SEED)
        with open(raw, "wb") as fraw:
            for z in range(nz):
                slab = field_slab(z, nz, ny, nx, rng)
                arr[z] = slab
                fraw.write(slab.tobytes())  # native order, C order
        stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    meta = json.loads((store / ARRAY_NAME / "zarr.json").read_text())
    raw_size = raw.stat().st_size
    assert raw_size == size_mib * MIB, (raw_size, size_mib)
    stored = chunk_bytes(store)
    return {
        "store": store,
        "raw": raw,
        "array": ARRAY_NAME,
        "shape": shape,
        "chunks": CHUNK,
        "nbytes": raw_size,
        "n_chunks": nz * (ny // CHUNK[1]) * (nx // CHUNK[2]),
        "stored_bytes": stored,
        "ratio": raw_size / stored,
        "codecs": meta["codecs"],
        "cached": cached,
    }


def verify_slabfs(slabfs: Path, data: dict) -> None:
    """Untimed: slabfs cat must reproduce the raw file exactly."""
    import hashlib

    def sha(cmd=None, path=None):
        h = hashlib.sha256()
        if path is not None:
            with open(path, "rb") as f:
                for b in iter(lambda: f.read(MIB), b""):
                    h.update(b)
            return h.hexdigest(), path.stat().st_size
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        n = 0
        for b in iter(lambda: p.stdout.read(MIB), b""):
            h.update(b)
            n += len(b)
        if p.wait() != 0:
            sys.exit(f"bench_read: {shlex.join(cmd)} failed")
        return h.hexdigest(), n

    got = sha(cmd=[str(slabfs), "cat", str(data["store"]), data["array"]])
    want = sha(path=data["raw"])
    if got != want:
        sys.exit(f"bench_read: slabfs cat output differs from the raw file: {got} != {want}")
    print("bench_read: slabfs cat output matches the raw file (sha256)", file=sys.stderr)


# --------------------------------------------------------------------------
# contenders

ZARR_CHILD = r"""
import json, sys, time
import zarr
c0 = time.process_time()
t0 = time.perf_counter()
a = zarr.open_array(sys.argv[1], mode="r")[:]
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == int(sys.argv[2]), a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads)}))
"""

TS_CHILD = r"""
import json, sys, time
import tensorstore as ts
c0 = time.process_time()
t0 = time.perf_counter()
a = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": sys.argv[1]}}).result().read().result()
t1 = time.perf_counter()
c1 = time.process_time()
assert a.nbytes == int(sys.argv[2]), a.nbytes
threads = [l for l in open("/proc/self/status") if l.startswith("Threads:")][0].split()[1]
print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "threads": int(threads)}))
"""


def contenders(slabfs: Path, py: Path, data: dict) -> list[dict]:
    arr_path = str(data["store"] / data["array"])
    n = str(data["nbytes"])
    return [
        {"name": "slabfs cat", "key": "slabfs",
         "cmd": [str(slabfs), "cat", str(data["store"]), data["array"]], "inproc": False},
        {"name": "zarr-python", "key": "zarr",
         "cmd": [str(py), "-c", ZARR_CHILD, arr_path, n], "inproc": True},
        {"name": "tensorstore", "key": "tensorstore",
         "cmd": [str(py), "-c", TS_CHILD, arr_path, n], "inproc": True},
        {"name": "cat (raw file)", "key": "cat",
         "cmd": ["cat", str(data["raw"])], "inproc": False},
    ]


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_busy_s() -> float:
    """Machine-wide busy CPU seconds so far (all CPUs), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0
    # user nice system idle iowait irq softirq steal ...
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy / os.sysconf("SC_CLK_TCK")


def wait_idle(max_wait_s: float, threshold: float = 0.10, sample_s: float = 0.5) -> float:
    """Wait (at most max_wait_s) until the machine has been nearly idle for one
    sample period; return the seconds waited. Other people's builds on a
    2-core machine otherwise dominate the variance."""
    if max_wait_s <= 0:
        return 0.0
    ncpu = os.cpu_count() or 1
    start = time.perf_counter()
    while True:
        b0, t0 = cpu_busy_s(), time.perf_counter()
        time.sleep(sample_s)
        busy = (cpu_busy_s() - b0) / ((time.perf_counter() - t0) * ncpu)
        waited = time.perf_counter() - start
        if busy <= threshold or waited >= max_wait_s:
            return waited


def run_one(c: dict) -> dict:
    """Run one contender as a fresh process; stdout of the non-Python ones goes to /dev/null."""
    out = subprocess.PIPE if c["inproc"] else subprocess.DEVNULL
    b0 = cpu_busy_s()
    t0 = time.perf_counter()
    p = subprocess.Popen(c["cmd"], stdout=out, stdin=subprocess.DEVNULL)
    stdout = p.stdout.read() if c["inproc"] else b""
    _, status, ru = os.wait4(p.pid, 0)
    t1 = time.perf_counter()
    b1 = cpu_busy_s()
    if p.stdout:
        p.stdout.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"bench_read: {c['name']} failed with status {p.returncode}")
    cpu = ru.ru_utime + ru.ru_stime
    # CPU used by everything else on the machine during the run (other
    # people's builds and tests), as a fraction of the machine's capacity.
    # Two clock ticks of slack: /proc/stat counts in ticks.
    slack = 2.0 / os.sysconf("SC_CLK_TCK")
    foreign = max(0.0, (b1 - b0) - cpu - slack) / ((t1 - t0) * (os.cpu_count() or 1))
    r = {"wall_s": t1 - t0, "cpu_s": cpu, "maxrss_kib": ru.ru_maxrss, "foreign": foreign}
    if c["inproc"]:
        r.update(json.loads(stdout.decode().strip().splitlines()[-1]))
    return r


def run_pass(cs: list[dict], reps: int, warmup: int, cold: bool,
             max_foreign: float, retries: int,
             idle_wait: float) -> tuple[dict[str, list[dict]], int]:
    """Interleaved A B C D rounds. Each run starts once the machine is idle
    (waiting at most idle_wait seconds); a run during which other processes
    used more than max_foreign of the machine's CPU is discarded and redone (at
    most `retries` times; after that the last attempt is kept)."""
    res: dict[str, list[dict]] = {c["key"]: [] for c in cs}
    label = "cold" if cold else "warm"
    redone = 0
    for rep in range(-warmup, reps):
        for c in cs:
            for attempt in range(retries + 1):
                wait_idle(idle_wait)
                if cold:
                    drop_caches()
                r = run_one(c)
                tag = "warmup" if rep < 0 else f"rep {rep + 1}/{reps}"
                extra = f" read {r['read_s']:.3f}s" if "read_s" in r else ""
                print(f"bench_read: [{label} {tag}] {c['name']:<15} {r['wall_s']:.3f}s"
                      f" cpu {r['cpu_s']:.2f}s{extra} other-load {r['foreign']:.0%}",
                      file=sys.stderr)
                if r["foreign"] <= max_foreign or attempt == retries or rep < 0:
                    break
                redone += 1
                print("bench_read:   other processes were busy; redoing this run",
                      file=sys.stderr)
            if rep >= 0:
                res[c["key"]].append(r)
    return res, redone


# --------------------------------------------------------------------------
# report


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def table(cs: list[dict], res: dict[str, list[dict]], nbytes: int) -> tuple[str, dict]:
    mib = nbytes / MIB
    rows = [
        "| contender | process median (s) | min–max (s) | MiB/s | CPU s | CPU/wall "
        "| in-process read median (s) | min–max (s) | read MiB/s | read CPU/wall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    stats = {}
    for c in cs:
        rs = res[c["key"]]
        w = summary([r["wall_s"] for r in rs])
        cpu = statistics.median([r["cpu_s"] for r in rs])
        s = {"wall": w, "cpu_median": cpu}
        if c["inproc"]:
            rd = summary([r["read_s"] for r in rs])
            rcpu = statistics.median([r["read_cpu_s"] for r in rs])
            s.update(read=rd, read_cpu_median=rcpu, threads=max(r["threads"] for r in rs))
            inproc = (f"{rd['median']:.3f} | {rd['min']:.3f}–{rd['max']:.3f} "
                      f"| {mib / rd['median']:.0f} | {rcpu / rd['median']:.2f}")
        else:
            inproc = "– | – | – | –"
        stats[c["key"]] = s
        rows.append(
            f"| {c['name']} | {w['median']:.3f} | {w['min']:.3f}–{w['max']:.3f} "
            f"| {mib / w['median']:.0f} | {cpu:.2f} | {cpu / w['median']:.2f} | {inproc} |"
        )
    return "\n".join(rows), stats


def ratios(stats: dict) -> tuple[str, dict]:
    """Throughput ratios slabfs / X (> 1 means slabfs is faster)."""
    sl = stats["slabfs"]["wall"]["median"]
    out = {}
    lines = [
        "| ratio (throughput, medians) | process vs process | slabfs process vs peer's in-process read |",
        "|---|---:|---:|",
    ]
    for key, label in (("tensorstore", "slabfs / tensorstore"),
                       ("zarr", "slabfs / zarr-python"),
                       ("cat", "slabfs / cat")):
        proc = stats[key]["wall"]["median"] / sl
        out[key] = {"process": proc}
        if "read" in stats[key]:
            rd = stats[key]["read"]["median"] / sl
            out[key]["read"] = rd
            lines.append(f"| {label} | {proc:.2f} | {rd:.2f} |")
        else:
            lines.append(f"| {label} | {proc:.2f} | – |")
    return "\n".join(lines), out


def load_note(res: dict[str, list[dict]], redone: int, max_foreign: float) -> str:
    worst = max(r["foreign"] for rs in res.values() for r in rs)
    kept_bad = sum(r["foreign"] > max_foreign for rs in res.values() for r in rs)
    note = (f"\nOther processes' CPU during kept runs: at most {worst:.0%} of the machine; "
            f"{redone} run(s) redone because others were busy")
    if kept_bad:
        note += f"; {kept_bad} kept run(s) still above {max_foreign:.0%}"
    return note + "."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256, help="array size in MiB (multiple of 4)")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per contender")
    ap.add_argument("--warmup", type=int, default=1, help="discarded warm-up rounds")
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
    ap.add_argument("--no-build", action="store_true", help="use the existing target/release/slabfs")
    ap.add_argument("--skip-venv", action="store_true", help="do not run scripts/venv.sh")
    args = ap.parse_args()
    command = ".venv/bin/python scripts/bench_read.py " + shlex.join(
        a for a in sys.argv[1:] if a != "--skip-venv")

    py = venv_python(args.skip_venv)
    reexec_in_venv(py)
    py = Path(sys.executable)

    data_dir = args.data_dir if args.data_dir.is_absolute() else (Path.cwd() / args.data_dir)
    slabfs = build_slabfs(args.no_build)
    data = build_data(data_dir, args.size_mib)
    verify_slabfs(slabfs, data)

    cs = contenders(slabfs, py, data)
    warm, warm_redone = run_pass(cs, args.reps, args.warmup, False, args.max_foreign,
                                   args.retries, args.idle_wait)
    is_root = os.geteuid() == 0
    do_cold = args.cold == "yes" or (args.cold == "auto" and is_root)
    if do_cold and not is_root:
        sys.exit("bench_read: --cold yes needs root")
    cold, cold_redone = (run_pass(cs, args.reps, 0, True, args.max_foreign, args.retries,
                                  args.idle_wait)
                         if do_cold else (None, 0))

    m = machine_info()
    v = versions(slabfs)
    warm_tab, warm_stats = table(cs, warm, data["nbytes"])
    warm_rat_tab, warm_rat = ratios(warm_stats)
    print()
    print(f"Command: `{command}` (run from the repository root)")
    print()
    print(f"Machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['memory']} RAM")
    print("Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    print()
    codecs = ", ".join(
        c["name"] + (f"(level={c['configuration'].get('level')})" if c["name"] == "zstd" else "")
        for c in data["codecs"])
    print(f"Data: float32 {data['shape']}, chunks {data['chunks']} (1 MiB each, "
          f"{data['n_chunks']} chunks), codecs {codecs}; "
          f"{data['nbytes'] / MIB:.0f} MiB raw, {data['stored_bytes'] / MIB:.1f} MiB stored, "
          f"compression ratio {data['ratio']:.3f}")
    print()
    print(f"### Warm page cache ({args.reps} reps, interleaved, {args.warmup} warm-up round(s) discarded)")
    print()
    print(warm_tab)
    print()
    print(warm_rat_tab)
    print(load_note(warm, warm_redone, args.max_foreign))
    for k in ("zarr", "tensorstore"):
        print(f"\n{k}: up to {warm_stats[k]['threads']} OS threads in the process at exit")
    results = {
        "command": command, "machine": m, "versions": v,
        "data": {k: (str(val) if isinstance(val, Path) else val) for k, val in data.items()},
        "warm": {"runs": warm, "stats": warm_stats, "ratios": warm_rat},
    }
    if cold is not None:
        cold_tab, cold_stats = table(cs, cold, data["nbytes"])
        cold_rat_tab, cold_rat = ratios(cold_stats)
        print()
        print(f"### Cold page cache (`sync; echo 3 > /proc/sys/vm/drop_caches` before each run, "
              f"{args.reps} reps, interleaved)")
        print()
        print(cold_tab)
        print()
        print(cold_rat_tab)
        print(load_note(cold, cold_redone, args.max_foreign))
        results["cold"] = {"runs": cold, "stats": cold_stats, "ratios": cold_rat}
    (data_dir / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"\n(raw numbers in {data_dir / 'results.json'})", file=sys.stderr)


if __name__ == "__main__":
    main()
