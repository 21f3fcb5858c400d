#!/usr/bin/env python3
"""Icechunk read benchmark (issue 27, item 7): a 256 MiB float32 array in an
Icechunk repository, native chunks and virtual ones over a netCDF-4 file,
read whole through a `slabfs mount` (`dd bs=1M`) against zarr-python +
icechunk-python reading the same repository in one process; on the local
disk, then from a local S3 server with 0 and with 20 ms added per request.

Usage (from the repository root, as root: it mounts and drops the page cache):

    .venv/bin/python scripts/bench_icechunk.py [--size-mib 256] [--reps 3]
        [--latency-ms 0,20] [--data-dir DIR] [--scratch DIR] [--skip-build]
    .venv/bin/python scripts/bench_icechunk.py --report DIR/icechunk-results.json

What it does:

1. The data: the values of benchlib.build_field (bench_read.py's smooth
   float32 field, (size/4, 1024, 1024)), as
   - a NATIVE repository written by icechunk-python + zarr-python: one
     array `field`, chunks (1, 512, 512) (1 MiB), zarr-python's default
     codecs (bytes + zstd level 0), one commit on `main`;
   - bench_hdf5.py's netCDF-4 file of the same values (netCDF4-python,
     chunks (1, 256, 1024), zstd 1 + shuffle; variable `v`), and a VIRTUAL
     repository over it written by VirtualiZarr (HDF parser, obstore
     LocalStore registry, `vds.vz.to_icechunk`), its container
     `file://<the file's directory>/`, as tests/fixtures/icechunk/generate.py
     writes the project's fixtures.
   Data and S3 objects live outside the repository (--data-dir, --scratch:
   by default under $TMPDIR).
2. Local: every run of every contender is a fresh process (a fresh mount),
   after the page cache was dropped (`sync; echo 3 > drop_caches`);
   contenders interleaved, --reps rounds after --warmup discarded ones:
   - slabfs: `slabfs mount REPO MNT` (started, and its tree listed, before
     the timing), then `dd if=MNT/field of=/dev/null bs=1M` timed; the
     virtual repository with `--allow-outside <the netCDF file's directory>`;
   - icechunk-python: `icechunk.Repository.open(local_filesystem_storage)`,
     `readonly_session("main")`, `zarr.open_array(session.store,
     path=...)[:]`, timed in the process from the open to the last byte
     (no interpreter start-up: the match for `dd` on a mount already up);
     the virtual repository opened with its container authorized;
   - slabfs on the netCDF-4 file itself: `slabfs mount FILE.nc MNT`, `dd`;
   - references: build_field's plain Zarr store (the same chunks, no
     Icechunk) read by a slabfs mount and by zarr-python;
   - ceilings: `dd` of the same values as a raw local file, page cache warm
     (read once just before) and cold.
3. Object storage, for each --latency-ms: the repositories and the netCDF-4
   file uploaded to bench_remote.py's patched s3s-fs behind its delay-line
   proxy (each request costs the latency once more); slabfs mounts
   `s3://bench/native-repo` (endpoint and keys from the environment, as in
   bench_remote.py), icechunk-python reads through `icechunk.s3_storage`
   pointed at the proxy. The virtual repository in the bucket is written
   for each latency by VirtualiZarr reading the uploaded netCDF-4 object
   (its references are `s3://bench/nc4/<file>`, its container's endpoint
   that latency's proxy); icechunk-python reads it with the container's
   S3 credentials, slabfs with `--allow-outside s3://bench/nc4/`. The
   netCDF-4 object mounted directly (`s3://bench/nc4`) is the
   virtual-vs-direct reference. The proxy counts the GETs of each run.
4. The CPU floor of a run: all the CPU the machine spent during it (dd,
   the daemon, the server, the proxy; for a Python peer, during its open
   and read) over the number of cores: the least time that work could take
   with every core busy. Runs wait for an idle machine and for any cargo
   or rustc to end; a run during which other processes (not the server or
   proxy) used more than --max-foreign of the machine is redone.
5. Bytes: every contender checked once, untimed (sha256 against the raw
   file). A slabfs case that cannot mount or read (a build without the
   support) is reported as "not supported by this build" with its error;
   one whose bytes differ as "WRONG BYTES"; the run goes on.
6. Markdown tables on stdout, raw numbers in <data-dir>/icechunk-results.json
   (--report prints a saved run's tables again).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib as lib
import bench_remote as remote

MIB = lib.MIB
BUCKET = remote.BUCKET
NATIVE_PREFIX = "native-repo"
NC4_PREFIX = "nc4"
NATIVE_FORMAT_VERSION = 1  # bump when the native repository's generator changes

# --------------------------------------------------------------------------
# data


def build_native(data_dir: Path, data: dict) -> dict:
    """The native repository: build_field's values (read from its raw file)
    written by icechunk-python + zarr-python, chunks (1, 512, 512), zarr's
    default codecs (bytes + zstd 0), one commit on main. Cached."""
    import icechunk as ic
    import numpy as np
    import zarr

    path = data_dir / f"icechunk-native-{data['nbytes'] // MIB}mib"
    stamp = {"format": NATIVE_FORMAT_VERSION, "shape": list(data["shape"]),
             "chunks": list(data["chunks"]), "icechunk": ic.__version__,
             "zarr": zarr.__version__, "raw_sha256": lib.sha_file(data["raw"])[0]}
    stamp_path = data_dir / f"{path.name}.json"
    snap_path = data_dir / f"{path.name}.snapshot"
    if not lib.data_cached(stamp_path, stamp, [path, snap_path]):
        lib.log(f"writing the native Icechunk repository {path} ...")
        shutil.rmtree(path, ignore_errors=True)
        t0 = time.perf_counter()
        repo = ic.Repository.create(ic.local_filesystem_storage(str(path)))
        s = repo.writable_session("main")
        root = zarr.open_group(store=s.store, mode="w", zarr_format=3)
        # compressors="auto": zarr-python's default, bytes + zstd(level=0).
        arr = root.create_array(data["array"], shape=data["shape"], chunks=data["chunks"],
                                dtype="float32", compressors="auto", fill_value=0.0)
        raw = np.memmap(data["raw"], dtype="<f4", mode="r", shape=tuple(data["shape"]))
        for z in range(data["shape"][0]):
            arr[z] = raw[z]
        snap = s.commit(f"{data['array']}: float32 {tuple(data['shape'])}, native chunks")
        # The snapshot beside the stamp, not in it: the stamp says what
        # the generator would make now, and is compared whole.
        snap_path.write_text(snap + "\n")
        stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
        lib.log(f"  written in {time.perf_counter() - t0:.1f}s (snapshot {snap})")
    snap = snap_path.read_text().strip()
    stored = sum(f.stat().st_size for f in (path / "chunks").rglob("*") if f.is_file())
    return {"path": path, "array": data["array"], "snapshot": snap, "stored_bytes": stored,
            "objects": sum(1 for f in path.rglob("*") if f.is_file())}


VIRTUAL_WRITER = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import icechunk as ic
from obspec_utils.registry import ObjectStoreRegistry
from virtualizarr import open_virtual_dataset
from virtualizarr.parsers import HDFParser
a = json.loads(sys.argv[1])
cfg = ic.RepositoryConfig.default()
if a["kind"] == "local":
    from obstore.store import LocalStore
    store_cfg = ic.local_filesystem_store(a["container_dir"])
    creds = ic.containers_credentials({a["prefix"]: None})
    registry = ObjectStoreRegistry({"file://": LocalStore()})
else:
    from obstore.store import S3Store
    store_cfg = ic.s3_store(region="us-east-1", endpoint_url=a["container_endpoint"],
                            allow_http=True, s3_compatible=True, force_path_style=True)
    creds = ic.containers_credentials({a["prefix"]: ic.s3_credentials(
        access_key_id=a["key_id"], secret_access_key=a["secret"])})
    # The writer reads the file's metadata from the server itself (not
    # through the proxy): only the references' URLs matter.
    registry = ObjectStoreRegistry({f"s3://{a['bucket']}": S3Store(
        a["bucket"], endpoint=a["parse_endpoint"], region="us-east-1",
        access_key_id=a["key_id"], secret_access_key=a["secret"],
        client_options={"allow_http": True})})
cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(a["prefix"], store_cfg))
repo = ic.Repository.create(ic.local_filesystem_storage(a["repo"]), cfg,
                            authorize_virtual_chunk_access=creds)
s = repo.writable_session("main")
vds = open_virtual_dataset(a["url"], registry=registry, parser=HDFParser(),
                           loadable_variables=[])  # every variable virtual
vds.vz.to_icechunk(s.store)
snap = s.commit("virtual references over " + a["url"])
print(json.dumps({"snapshot": snap, "variables": sorted(vds.variables)}))
"""


def write_virtual(py: Path, repo: Path, args: dict) -> dict:
    """A virtual repository at repo (local directory), written by
    VirtualiZarr in a child process (VIRTUAL_WRITER); returns its JSON."""
    shutil.rmtree(repo, ignore_errors=True)
    out = subprocess.run([str(py), "-c", VIRTUAL_WRITER, json.dumps({**args, "repo": str(repo)})],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, check=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# contenders

# icechunk-python + zarr-python, in one process: open the repository, read
# the array whole. argv: a JSON of how to open it, the bytes expected, and
# "1" to print the sha256 of what was read.
ICECHUNK_CHILD = r"""
import hashlib, json, os, sys, time, warnings
warnings.filterwarnings("ignore")  # zarr's note on numcodecs codecs, once per array
a, nbytes, check = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
import icechunk as ic
import zarr
def machine_busy_s():  # all CPUs, as benchlib.cpu_busy_s
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy / os.sysconf("SC_CLK_TCK")
b0, c0, t0 = machine_busy_s(), time.process_time(), time.perf_counter()
cfg, creds = None, None
if a["storage"] == "zarr":  # a plain Zarr store, no Icechunk: the reference
    arr = zarr.open_array(a["repo"], path=a["array"], mode="r")
elif a["storage"] == "local":
    storage = ic.local_filesystem_storage(a["repo"])
else:
    storage = ic.s3_storage(bucket=a["bucket"], prefix=a["repo"], region="us-east-1",
                            endpoint_url=a["endpoint"], allow_http=True,
                            access_key_id=a["key_id"], secret_access_key=a["secret"],
                            force_path_style=True)
if a.get("container"):
    p = a["container"]
    cfg = ic.RepositoryConfig.default()
    if p.startswith("file://"):
        store_cfg = ic.local_filesystem_store(p[len("file://"):])
        cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(p, store_cfg))
        creds = ic.containers_credentials({p: None})
    else:
        cfg.set_virtual_chunk_container(ic.VirtualChunkContainer(p, ic.s3_store(
            region="us-east-1", endpoint_url=a["endpoint"], allow_http=True, s3_compatible=True,
            force_path_style=True)))
        creds = ic.containers_credentials({p: ic.s3_credentials(
            access_key_id=a["key_id"], secret_access_key=a["secret"])})
if a["storage"] != "zarr":
    repo = ic.Repository.open(storage, config=cfg, authorize_virtual_chunk_access=creds)
    session = repo.readonly_session("main")
    arr = zarr.open_array(session.store, path=a["array"], mode="r")
t_open = time.perf_counter()
v = arr[:]
t1, c1, b1 = time.perf_counter(), time.process_time(), machine_busy_s()
assert v.nbytes == nbytes, v.nbytes
out = {"read_s": t1 - t0, "open_s": t_open - t0, "read_cpu_s": c1 - c0,
       "machine_busy_s": b1 - b0}
if a["storage"] != "zarr":
    out["snapshot"] = session.snapshot_id
if check:
    out["sha256"] = hashlib.sha256(v.astype("<f4", copy=False).tobytes()).hexdigest()
print(json.dumps(out))
"""


class Unsupported(Exception):
    """A slabfs case this build cannot run (the mount or the read failed)."""


class WrongBytes(Exception):
    """A contender's bytes differ from the raw file's."""


def slabfs_mount(slabfs: Path, source: str, array: str, workdir: Path, name: str,
                 extra: tuple[str, ...] = (), timeout: float = 30.0) -> lib.Mount:
    mnt = workdir / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    # A URL stays a str ("s3://" would lose a slash as a Path).
    m = lib.Mount(slabfs, source, mnt, array, workdir / f"mount-{name}.log", extra_args=extra)
    try:
        return m.start(timeout=timeout)
    except RuntimeError as e:
        seen = ""
        if lib.mountinfo_dev(mnt) is not None:
            try:
                seen = f"; mounted, and MNT holds {sorted(os.listdir(mnt))[:12]}"
            except OSError as err:
                seen = f"; mounted, and MNT cannot be listed: {err}"
        m.stop()
        head, _, log = str(e).partition("\n")
        raise Unsupported(f"the mount failed: {head.rstrip(':')}{seen}; its log: {log}") from None


def run_slabfs(slabfs: Path, source: str, array: str, workdir: Path, name: str,
               want: tuple[str, int] | None, extra: tuple[str, ...] = ()) -> dict:
    """A fresh `slabfs mount source MNT` (untimed), then `dd if=MNT/array
    of=/dev/null bs=1M` timed; with want, the bytes are checked instead
    (`cat` of the file, sha256) and nothing is timed."""
    m = slabfs_mount(slabfs, source, array, workdir, name, extra)
    try:
        if want is not None:
            try:
                got = lib.sha_cmd(["cat", str(m.file)])
            except RuntimeError as e:
                raise Unsupported(f"the read failed: {e}; log: {m.log_text()[-1500:]}") from None
            if got != want:
                raise WrongBytes(f"sha256 {got[0]} of {got[1]} bytes, want {want[0]} of "
                                 f"{want[1]}")
            return {"checked": True, "mount_s": m.start_s}
        try:
            r = lib.run_child(["dd", f"if={m.file}", "of=/dev/null", "bs=1M", "status=none"],
                              daemon=m)
        except RuntimeError as e:
            raise Unsupported(f"the read failed: {e}; log: {m.log_text()[-1500:]}") from None
        r.update(read_s=r["wall_s"], mount_s=m.start_s)
        return r
    finally:
        m.stop()


def run_icechunk(py: Path, spec: dict, nbytes: int, want: tuple[str, int] | None) -> dict:
    r = lib.run_child([str(py), "-c", ICECHUNK_CHILD, json.dumps(spec), str(nbytes),
                       "1" if want is not None else "0"], capture=True)
    if want is not None:
        if (r["sha256"], nbytes) != want:
            raise WrongBytes(f"sha256 {r['sha256']}, want {want[0]}")
        r["checked"] = True
    return r


def run_dd(path: Path, warm: bool) -> dict:
    """dd of a local file to /dev/null, bs=1M: the page cache warm (the file
    read once just before) or cold (dropped by the caller)."""
    if warm:
        lib.prewarm([path])
    r = lib.run_child(["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"])
    r["read_s"] = r["wall_s"]
    return r


def floor_s(r: dict) -> float:
    """The least time a run could take on these cores: all the CPU the
    machine spent during it (the contender's own processes, the daemon, the
    server, the proxy, anything else) spread over every core, none idle."""
    ncpu = os.cpu_count() or 1
    return (r["cpu_s"] + r.get("daemon_cpu_s", 0.0) + r["foreign"] * r["wall_s"] * ncpu) / ncpu


def builds_running() -> list[str]:
    """Pids of cargo, rustc and clippy processes on the machine (not `cargo
    metadata`, which editors run and which costs nothing)."""
    names = {"cargo", "rustc", "clippy-driver", "cargo-clippy"}
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() not in names:
                continue
            argv = (comm.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"metadata" not in argv:
            found.append(comm.parent.name)
    return found


def wait_for_builds(max_wait_s: float) -> None:
    """Wait while a cargo or rustc process runs on the machine (on 2 cores a
    build makes every timing worthless); at most max_wait_s."""
    t0 = time.perf_counter()
    said = False
    while builds_running():
        if time.perf_counter() - t0 > max_wait_s:
            lib.log(f"builds still running after {max_wait_s:.0f}s: going on (figures suspect)")
            return
        if not said:
            lib.log("a cargo build is running: waiting for it to end")
            said = True
        time.sleep(10)


def run_pass(label: str, cs: dict, args, want: tuple[str, int], infra: list[int],
             requests=None) -> dict:
    """Check every contender once (untimed, also its warm-up of the
    filesystem metadata), then --warmup + --reps interleaved rounds, the
    page cache dropped before each run (unless --no-drop; a "warm" ceiling
    reads its file first). A contender that fails is recorded and left out
    of the later rounds. infra: pids (server, proxy) whose CPU is the run's
    set-up, not other people's load; requests: the proxy's (GETs, HEADs)
    so far, counted around each run (its mount or open included). Returns
    {name: {"runs": [...]} or {"status": ..., "error": ...}}."""
    out: dict = {name: {"runs": []} for name in cs}
    for name, run in cs.items():
        try:
            r = run(want)
            lib.log(f"[{label}] {name}: bytes match the raw file")
            out[name]["check"] = r
        except Unsupported as e:
            out[name] = {"status": "not supported by this build", "error": str(e)[-3000:]}
            lib.log(f"[{label}] {name}: NOT SUPPORTED by this build: {str(e)[:600]}")
        except WrongBytes as e:
            out[name] = {"status": "WRONG BYTES", "error": str(e)}
            lib.log(f"[{label}] {name}: WRONG BYTES: {e}")
        except (RuntimeError, subprocess.CalledProcessError) as e:
            out[name] = {"status": "failed", "error": str(e)[-3000:]}
            lib.log(f"[{label}] {name}: FAILED: {str(e)[:600]}")
    ncpu = os.cpu_count() or 1
    for rep in range(args.warmup + args.reps):
        tag = "warmup" if rep < args.warmup else f"rep {rep - args.warmup + 1}/{args.reps}"
        for name, run in cs.items():
            if "runs" not in out[name]:
                continue
            for attempt in range(args.retries + 1):
                wait_for_builds(args.build_wait)
                lib.wait_idle(args.idle_wait)
                if not args.no_drop:
                    lib.drop_caches()
                i0 = sum(lib.proc_cpu_s(p) for p in infra)
                q0 = requests() if requests else None
                try:
                    r = run(None)
                except (Unsupported, RuntimeError, subprocess.CalledProcessError) as e:
                    out[name] = {"status": "failed in a timed run", "error": str(e)[-3000:]}
                    lib.log(f"[{label}] {name}: FAILED in a timed run: {str(e)[:600]}")
                    break
                r["infra_cpu_s"] = sum(lib.proc_cpu_s(p) for p in infra) - i0
                if requests:
                    q1 = requests()
                    r["gets"], r["heads"] = q1[0] - q0[0], q1[1] - q0[1]
                if "machine_busy_s" in r:
                    # A Python peer: its own window (open + read), from the
                    # machine's CPU it measured around it; not its start-up.
                    slack = 2 / os.sysconf("SC_CLK_TCK")
                    r["other"] = max(0.0, r["machine_busy_s"] - r["read_cpu_s"]
                                     - r["infra_cpu_s"] - slack) / (r["read_s"] * ncpu)
                    r["floor_s"] = r["machine_busy_s"] / ncpu
                else:
                    # Other people's load: what is foreign beyond the server and proxy.
                    r["other"] = max(0.0, r["foreign"]
                                     - r["infra_cpu_s"] / (r["wall_s"] * ncpu))
                    r["floor_s"] = floor_s(r)
                lib.log(f"[{label} {tag}] {name:<18} {r['read_s']:.3f}s (process "
                        f"{r['wall_s']:.3f}s) other-load {r['other']:.0%} "
                        f"floor {r['floor_s']:.3f}s")
                if r["other"] <= args.max_foreign or rep < args.warmup:
                    break
                if attempt < args.retries:
                    lib.log("  other processes were busy; redoing this run")
            if "runs" in out[name] and rep >= args.warmup:
                out[name]["runs"].append(r)
    return out


# --------------------------------------------------------------------------
# report

LABELS = {
    "slabfs native": "**slabfs mount, native repository**, `dd bs=1M`",
    "icechunk native": "icechunk-python + zarr-python, native repository",
    "slabfs virtual": "**slabfs mount, virtual repository**, `dd bs=1M`",
    "icechunk virtual": "icechunk-python + zarr-python, virtual repository",
    "slabfs nc4": "slabfs mount of the netCDF-4 file itself, `dd bs=1M`",
    "slabfs zarr": "reference: slabfs mount of the same chunks as a plain Zarr store",
    "zarr-python zarr": "reference: zarr-python, the same chunks as a plain Zarr store",
    "dd raw warm": "ceiling: `dd` of the raw values, local file, page cache warm",
    "dd raw cold": "ceiling: `dd` of the raw values, local file, page cache cold",
}


def med(res: dict, name: str, key: str = "read_s") -> float | None:
    c = res.get(name)
    if not c or not c.get("runs"):
        return None
    return lib.summary([r[key] for r in c["runs"]])["median"]


def cell(res: dict, name: str, nbytes: int) -> str:
    c = res.get(name)
    if c is None:
        return "–"
    if "runs" not in c:
        return c["status"]
    s = lib.summary([r["read_s"] for r in c["runs"]])
    return (f"{s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f}), "
            f"{nbytes / s['median'] / 1e6:.0f}")


def ratio(res: dict, peer: str, ours: str, target: float | None,
          fastest: bool = False) -> str:
    """The peer's median time over ours; with fastest, also the peer's
    fastest run over our median (the Python peers' times spread widely)."""
    a, b = med(res, ours), med(res, peer)
    if a is None or b is None:
        return "–"
    x = b / a
    out = f"{x:.2f}" if target is None else f"{x:.2f} {'met' if x >= target else 'missed'}"
    if fastest:
        out += f" (its fastest run: {min(r['read_s'] for r in res[peer]['runs']) / a:.2f})"
    return out


def header(results: dict) -> list[str]:
    """The report's head from what results recorded (report_from_json)."""
    m, v = results["machine"], results["versions"]
    return [f"Command: `{results['command']}` (run from the repository root)", "",
            f"Machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['memory']} RAM",
            "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items())]


def report(results: dict, hdr: list[str]) -> None:
    """The Markdown tables of a run (results as main records them)."""
    first = next(c for pr in results["passes"].values() for c in pr.values() if c.get("runs"))
    reps = results.get("reps", len(first["runs"]))
    no_drop = results.get("no_drop", False)
    data = results["data"]
    nbytes = data["nbytes"]
    print()
    print("\n".join(hdr))
    print()
    print(f"Data: float32 {tuple(data['shape'])}, {nbytes / MIB:.0f} MiB raw. Native "
          f"repository: chunks {tuple(data['chunks'])} (1 MiB), bytes + zstd 0, "
          f"{results['native']['stored_bytes'] / MIB:.1f} MiB of chunk objects. Virtual "
          f"repository: references into the netCDF-4 file (chunks (1, 256, 1024), zstd 1 + "
          f"shuffle, {results['nc4']['stored_bytes'] / MIB:.1f} MiB). Seconds, median of "
          f"{reps} runs (min–max), then MB/s of the {nbytes / 1e6:.0f} MB array; "
          f"{'page cache dropped before every run' if not no_drop else 'page cache not dropped'}."
          + (f" S3: s3s-fs {remote.S3S_VERSION} (patched) on loopback behind the delay-line "
             "proxy." if results["passes"].keys() - {"local"} else ""))
    print()
    passes = list(results["passes"])
    title = {p: ("local disk" if p == "local" else f"S3, {p} ms added") for p in passes}
    print("| contender | " + " | ".join(f"{title[p]}: s (MB/s)" for p in passes) + " |")
    print("|---|" + "---:|" * len(passes))
    for k, label in LABELS.items():
        if not any(k in results["passes"][p] for p in passes):
            continue
        print(f"| {label} | " + " | ".join(cell(results["passes"][p], k, nbytes)
                                          for p in passes) + " |")
    print()
    print("| ratio (peer's time ÷ slabfs's; > 1: slabfs faster) | " +
          " | ".join(title[p] for p in passes) + " |")
    print("|---|" + "---:|" * len(passes))
    rows = [
        ("native: slabfs vs icechunk-python (target ≥ 2)", "icechunk native", "slabfs native",
         2.0),
        ("virtual: slabfs vs icechunk-python (target ≥ 2)", "icechunk virtual", "slabfs virtual",
         2.0),
        ("virtual vs the netCDF-4 file mounted directly (target ≥ 1)", "slabfs nc4",
         "slabfs virtual", 1.0),
        ("native repository vs the same chunks as a plain Zarr store, slabfs", "slabfs zarr",
         "slabfs native", None),
        ("native repository vs the same chunks as a plain Zarr store, zarr-python",
         "zarr-python zarr", "icechunk native", None),
        ("native vs raw file, page cache warm (ceiling)", "dd raw warm", "slabfs native", None),
        ("native vs raw file, page cache cold (ceiling)", "dd raw cold", "slabfs native", None),
        ("virtual vs raw file, page cache cold (ceiling)", "dd raw cold", "slabfs virtual", None),
    ]
    for label, peer, ours, target in rows:
        cells = [ratio(results["passes"][p], peer, ours, target, peer.startswith("icechunk"))
                 for p in passes]
        if all(c == "–" for c in cells):
            continue
        print(f"| {label} | " + " | ".join(cells) + " |")
    for k in ("slabfs native", "icechunk native", "slabfs virtual", "icechunk virtual",
              "slabfs nc4"):
        cells = []
        for p in passes:
            c = results["passes"][p].get(k)
            if not c or not c.get("runs"):
                cells.append("–")
                continue
            fl = lib.summary([r["floor_s"] for r in c["runs"]])["median"]
            tf = lib.summary([r["read_s"] / r["floor_s"] for r in c["runs"]])["median"]
            cells.append(f"{fl:.3f} s; ÷ {tf:.2f}")
        print(f"| {k}: CPU floor, s (all the machine's CPU during the read ÷ cores); "
              "time ÷ floor | " + " | ".join(cells) + " |")
    print()
    # The peers' open, inside their timed read.
    cells = []
    for p in passes:
        xs = [f"{k.split()[1]} {med(results['passes'][p], k, 'open_s'):.3f}"
              for k in ("icechunk native", "icechunk virtual")
              if med(results["passes"][p], k, "open_s") is not None]
        cells.append(f"{title[p]}: " + (", ".join(xs) or "–"))
    print("icechunk-python's open (repository, session, array), inside its time, median s: "
          + "; ".join(cells) + ".")
    cells = []
    for p in passes:
        for k in ("slabfs native", "slabfs virtual", "slabfs nc4"):
            x = med(results["passes"][p], k, "mount_s")
            if x is not None:
                cells.append(f"{title[p]} {k.split()[1]} {x:.3f}")
    print("slabfs mount to ready (untimed, before `dd`), median s: " + ", ".join(cells) + ".")
    cells = []
    for p in passes:
        xs = []
        for k in ("slabfs native", "icechunk native", "slabfs virtual", "icechunk virtual",
                  "slabfs nc4"):
            c = results["passes"][p].get(k)
            if c and c.get("runs") and "gets" in c["runs"][0]:
                g = lib.summary([r["gets"] for r in c["runs"]])["median"]
                # Requests in flight on average while reading, if each took the
                # added latency: how well the reader hides it.
                lat_s = float(p) / 1000.0
                depth = f", ≈ {g * lat_s / med(results['passes'][p], k):.0f} in flight" \
                    if lat_s else ""
                xs.append(f"{k} {g:.0f}{depth}")
        if xs:
            cells.append(f"{title[p]}: " + ", ".join(xs))
    if cells:
        print("GETs through the proxy per run (mount or open included), median: "
              + "; ".join(cells) + ".")
    worst = max((r["other"] for pr in results["passes"].values() for c in pr.values()
                 for r in c.get("runs", [])), default=0.0)
    print(f"Other processes' CPU (beyond the server and proxy) during kept runs: at most "
          f"{worst:.0%} of the machine.")
    fails = [(p, k, c) for p in passes for k, c in results["passes"][p].items() if "runs" not in c]
    if fails:
        print()
        print("Not measured:")
        print()
        for p, k, c in fails:
            first = c["error"].strip().splitlines()
            print(f"- {title[p]}, {k}: {c['status']}: "
                  f"{' '.join(first)[:400] if first else ''}")


# --------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--latency-ms", default="0,20",
                    help="comma-separated latencies added per S3 request; empty: no S3 pass")
    ap.add_argument("--no-local", action="store_true", help="skip the local-disk pass")
    ap.add_argument("--data-dir", type=Path,
                    default=Path(tempfile.gettempdir()) / "slabfs-bench-icechunk",
                    help="generated data, cached between runs (outside the repository)")
    ap.add_argument("--scratch", type=Path,
                    default=Path(tempfile.gettempdir()) / "slabfs-bench-s3",
                    help="where s3s-fs is built (shared with bench_remote.py) and where "
                         "the server keeps its objects (objects-icechunk/)")
    ap.add_argument("--idle-wait", type=float, default=20.0)
    ap.add_argument("--max-foreign", type=float, default=0.15,
                    help="redo a run if processes other than the server and proxy used "
                         "more than this share of the machine during it")
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("--build-wait", type=float, default=3600.0,
                    help="before each run, wait up to this long for cargo/rustc to end")
    ap.add_argument("--no-drop", action="store_true", help="do not drop the page cache")
    ap.add_argument("--skip-build", "--no-build", dest="no_build", action="store_true",
                    help="use the existing target/release/slabfs")
    ap.add_argument("--skip-venv", action="store_true")
    ap.add_argument("--report", type=Path, metavar="JSON",
                    help="print the tables of an earlier run's icechunk-results.json, run nothing")
    args = ap.parse_args()
    if args.report:
        results = json.loads(args.report.read_text())
        report(results, header(results))
        return
    command = lib.command_line()
    if os.geteuid() != 0:
        lib.fail("run as root: the benchmark mounts and drops the page cache")
    py = lib.use_venv(args.skip_venv, ("numpy", "zarr", "icechunk", "virtualizarr", "netCDF4",
                                       "obstore", "boto3"))
    lib.exit_on_signals()
    latencies = [float(x) for x in args.latency_ms.split(",") if x.strip()]
    data_dir = lib.abs_dir(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    built = lib.build_slabfs(args.no_build)
    # A private copy: others may rebuild target/release while this runs.
    slabfs, workdir = lib.private_binary(built, "bench-icechunk-")

    data = lib.build_field(data_dir, args.size_mib)
    import bench_hdf5
    h5 = bench_hdf5.make_read_data(data_dir / f"hdf5-read-{args.size_mib}", args.size_mib)
    want = lib.sha_file(data["raw"])
    if lib.sha_file(h5["raw"]) != want:
        lib.fail("bench_hdf5's raw values differ from build_field's")
    nc4 = h5["files"]["zstd"].resolve()
    native = build_native(data_dir, data)
    nbytes = data["nbytes"]
    results: dict = {"command": command,
                     "data": {k: data[k] for k in ("raw", "shape", "chunks", "nbytes")},
                     "native": native, "nc4": {"path": nc4, "stored_bytes": nc4.stat().st_size},
                     "passes": {}}
    os.environ.update(AWS_ACCESS_KEY_ID=remote.KEY_ID, AWS_SECRET_ACCESS_KEY=remote.SECRET,
                      AWS_REGION="us-east-1")
    for v in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        os.environ.pop(v, None)

    server = None
    proxies: list = []
    objects = args.scratch.resolve() / "objects-icechunk"
    try:
        # ---------------------------------------------------------- local
        if not args.no_local:
            vlocal = workdir / "virtual-repo"
            container = f"file://{nc4.parent}/"
            w = write_virtual(py, vlocal, {"kind": "local", "url": f"file://{nc4}",
                                           "prefix": container,
                                           "container_dir": str(nc4.parent)})
            results["virtual_local"] = {"path": vlocal, "container": container, **w}
            lib.log(f"virtual repository {vlocal}: {w}")
            native_spec = {"storage": "local", "repo": str(native["path"]),
                           "array": data["array"]}
            virtual_spec = {"storage": "local", "repo": str(vlocal), "array": "v",
                            "container": container}
            zarr_spec = {"storage": "zarr", "repo": str(data["store"]), "array": data["array"]}
            cs = {
                "slabfs native": lambda want: run_slabfs(
                    slabfs, str(native["path"]), data["array"], workdir, "native", want),
                "icechunk native": lambda want: run_icechunk(py, native_spec, nbytes, want),
                "slabfs virtual": lambda want: run_slabfs(
                    slabfs, str(vlocal), "v", workdir, "virtual", want,
                    ("--allow-outside", str(nc4.parent))),
                "icechunk virtual": lambda want: run_icechunk(py, virtual_spec, nbytes, want),
                "slabfs nc4": lambda want: run_slabfs(
                    slabfs, str(nc4), "v", workdir, "nc4", want),
                # The same chunks as a plain Zarr store (build_field's): what
                # Icechunk costs each reader.
                "slabfs zarr": lambda want: run_slabfs(
                    slabfs, str(data["store"]), data["array"], workdir, "zarr", want),
                "zarr-python zarr": lambda want: run_icechunk(py, zarr_spec, nbytes, want),
                "dd raw warm": lambda want: (
                    run_dd(data["raw"], True) if want is None else {"checked": "the raw file"}),
                "dd raw cold": lambda want: (
                    run_dd(data["raw"], False) if want is None else {"checked": "the raw file"}),
            }
            results["passes"]["local"] = run_pass("local", cs, args, want, [])

        # ---------------------------------------------------------- S3
        if latencies:
            binary = remote.build_s3s_fs(args.scratch.resolve())
            shutil.rmtree(objects, ignore_errors=True)
            server = remote.Server(binary, objects, py)
            n = remote.upload(server.endpoint, native["path"], NATIVE_PREFIX)
            remote.upload_file(server.endpoint, nc4, f"{NC4_PREFIX}/{nc4.name}")
            lib.log(f"uploaded the native repository ({n} objects) and {nc4.name} to "
                    f"{server.endpoint}/{BUCKET}")
            for lat in latencies:
                proxy = remote.Proxy(server.port, lat, workdir)
                proxies.append(proxy)
                ep = proxy.endpoint
                os.environ["AWS_ENDPOINT_URL"] = ep  # slabfs's endpoint
                vprefix = f"virtual-repo-{lat:g}ms"
                container = f"s3://{BUCKET}/{NC4_PREFIX}/"
                vdir = workdir / vprefix
                w = write_virtual(py, vdir, {
                    "kind": "s3", "url": f"s3://{BUCKET}/{NC4_PREFIX}/{nc4.name}",
                    "prefix": container, "bucket": BUCKET, "parse_endpoint": server.endpoint,
                    "container_endpoint": ep, "key_id": remote.KEY_ID, "secret": remote.SECRET})
                # (remote.upload makes the bucket, which exists by now.)
                for f in sorted(f for f in vdir.rglob("*") if f.is_file()):
                    remote.upload_file(server.endpoint, f,
                                       f"{vprefix}/{f.relative_to(vdir).as_posix()}")
                results.setdefault("virtual_s3", {})[f"{lat:g}"] = {
                    "prefix": vprefix, "container": container, **w}
                lib.log(f"virtual repository s3://{BUCKET}/{vprefix}: {w}")
                s3 = {"storage": "s3", "bucket": BUCKET, "endpoint": ep,
                      "key_id": remote.KEY_ID, "secret": remote.SECRET}
                native_spec = {**s3, "repo": NATIVE_PREFIX, "array": data["array"]}
                virtual_spec = {**s3, "repo": vprefix, "array": "v", "container": container}
                cs = {
                    "slabfs native": lambda want: run_slabfs(
                        slabfs, f"s3://{BUCKET}/{NATIVE_PREFIX}", data["array"], workdir,
                        "s3-native", want),
                    "icechunk native": lambda want, s=native_spec: run_icechunk(
                        py, s, nbytes, want),
                    "slabfs virtual": lambda want, p=vprefix, c=container: run_slabfs(
                        slabfs, f"s3://{BUCKET}/{p}", "v", workdir, "s3-virtual", want,
                        ("--allow-outside", c)),
                    "icechunk virtual": lambda want, s=virtual_spec: run_icechunk(
                        py, s, nbytes, want),
                    "slabfs nc4": lambda want: run_slabfs(
                        slabfs, f"s3://{BUCKET}/{NC4_PREFIX}", f"{nc4.name}/v", workdir,
                        "s3-nc4", want),
                }
                results["passes"][f"{lat:g}"] = run_pass(
                    f"{lat:g} ms", cs, args, want, [server.proc.pid, proxy.proc.pid],
                    proxy.requests)
                proxy.stop()
                proxies.remove(proxy)
    finally:
        for p in proxies:
            p.stop()
        if server is not None:
            server.stop()
        shutil.rmtree(objects, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)

    hdr, m, v = lib.header_lines(command, built, ("icechunk", "virtualizarr", "netCDF4",
                                                  "obstore", "xarray"))
    results.update(machine=m, versions=v, reps=args.reps, no_drop=args.no_drop)
    report(results, hdr)
    lib.write_json(data_dir / "icechunk-results.json", results)
    lib.log(f"raw figures: {data_dir / 'icechunk-results.json'}")


if __name__ == "__main__":
    main()
