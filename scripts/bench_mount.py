#!/usr/bin/env python3
"""FUSE mount benchmark: reading the 256 MiB benchmark array through a real
`slabfs mount`, against `slabfs cat`, plain `cat`/`dd` of the same bytes
stored raw, and zarr-python reading the same small slices.

Usage (from the repository root, as root for the read_ahead_kb variant):

    .venv/bin/python scripts/bench_mount.py [--size-mib 256] [--reps 5] [--random-reads 2000]

The data is bench_read.py's (`build_data`, cached in --data-dir): a float32
Zarr v3 array (N, 1024, 1024), chunks (1, 512, 512) = 1 MiB, bytes + zstd,
and the same values as a raw file. Every round (after --warmup discarded
rounds) runs, in this order, one fresh process each:

  1. `slabfs cat STORE field > /dev/null`                     (chunk cache cold)
  2. a NEW `slabfs mount` daemon, then `dd if=MNT/field of=/dev/null bs=1M`
                                  (fresh mount: kernel page cache and chunk cache cold)
  3. `cat RAW > /dev/null`                                     (page cache warm)
  4. `dd if=MNT/field bs=1M` again: served from the kernel page cache
  5. `dd if=RAW bs=1M`                                         (page cache warm)
  6. `cat MNT/field > /dev/null`: page cache again, same tool as 3
  7. random 4 KiB preads on MNT/field (a Python child): posix_fadvise
     DONTNEED on the file first, so the kernel page cache holds none of it
     and every pread goes to the daemon, whose chunk cache holds every chunk
     (steps 2-6 decoded them all): "warm mount". The daemon's `.slabfs/stats`
     request counter, read before and after, checks that each pread really
     reached the daemon.
  8. zarr-python reading the same 1024-element rows, `arr[z, y, :]` (4 KiB
     aligned offsets are whole rows): one process, the array opened once,
     16 untimed warm-up reads; zarr-python has no chunk cache, its store's
     files are in the page cache.
  9. the daemon's peak RSS (VmHWM), stats; `fusermount3 -u`.
 10. if `slabfs mount` has `--read-ahead-kb`: steps 2, 4 and 7 again on a
     second fresh mount with `--read-ahead-kb N` (default 1024).

The store's chunk files and the raw file stay in the page cache throughout
(nothing drops caches): "cold" always means slabfs's own chunk cache and the
mounted file's kernel pages, never the disk.

Each step waits for the machine to be idle and is redone (a fresh-mount step
on a new mount) when other processes used more than --max-foreign of the CPU
during it, with bench_read.py's machinery; the CPU of the slabfs daemon is
counted as the step's own. Before timing, the bytes read through a mount are
checked against the raw file (sha256), and every random read's bytes (pread
and zarr) are checked too. Prints Markdown tables; writes the raw numbers to
<data-dir>/results-mount.json. --perf records one extra, untimed `slabfs cat` and
fresh-mount dd per variant with `perf record -a -g`, prints where the CPU went
and saves the data and reports in --data-dir.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
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
PAGE = 4096
TAG = "bench_mount"


def log(msg: str) -> None:
    print(f"{TAG}: {msg}", file=sys.stderr, flush=True)


def reexec_in_venv(py: Path) -> None:
    try:
        import numpy  # noqa: F401
        import zarr  # noqa: F401
        return
    except ImportError:
        pass
    if Path(sys.executable).resolve() == py.resolve():
        sys.exit(f"{TAG}: zarr/numpy missing from the venv")
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:], "--skip-venv"])


# --------------------------------------------------------------------------
# the daemon


def mountinfo_dev(mnt: Path) -> str | None:
    """maj:min of the filesystem mounted at mnt, or None if nothing is."""
    target = str(mnt)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 4 and parts[4].replace("\\040", " ") == target:
                    return parts[2]
    except OSError:
        pass
    return None


def proc_cpu_s(pid: int) -> float:
    """utime + stime of every thread of pid, in seconds (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def proc_status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Mount:
    """One `slabfs mount` daemon in the foreground, its log in a file.
    stop() always unmounts (fusermount3 -u, then harder) and reaps it."""

    def __init__(self, slabfs: Path, store: Path, mnt: Path, array: str, log_path: Path,
                 read_ahead_kb: int | None = None, threads: int | None = None,
                 extra_args: tuple[str, ...] = ()):
        self.slabfs, self.store, self.mnt, self.array = slabfs, store, mnt, array
        self.log_path, self.read_ahead_kb, self.threads = log_path, read_ahead_kb, threads
        self.extra_args = tuple(extra_args)  # more `slabfs mount` options
        self.proc: subprocess.Popen | None = None
        self.start_s = None

    @property
    def file(self) -> Path:
        return self.mnt / self.array

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start(self, timeout: float = 30.0) -> "Mount":
        cmd = [str(self.slabfs), "mount", "--log-level", "info"]
        if self.read_ahead_kb is not None:
            cmd += ["--read-ahead-kb", str(self.read_ahead_kb)]
        if self.threads is not None:
            cmd += ["--threads", str(self.threads)]
        cmd += [*self.extra_args, str(self.store), str(self.mnt)]
        self.cmd = cmd
        logf = open(self.log_path, "wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                     stderr=subprocess.STDOUT)
        logf.close()
        # Live = mounted, the file visible, and (with --read-ahead-kb) the
        # readahead line logged: the daemon sets it right after mounting.
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"slabfs mount exited with {self.proc.returncode}:\n"
                                   + self.log_text()[-2000:])
            text = self.log_text()
            ready = ("mounted " in text and mountinfo_dev(self.mnt) is not None
                     and (self.read_ahead_kb is None or "read_ahead_kb" in text
                          or "read-ahead-kb" in text))
            if ready and self.file.exists():
                break
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"slabfs mount not live after {timeout}s:\n"
                                   + text[-2000:])
            time.sleep(0.002)
        self.start_s = time.perf_counter() - t0
        return self

    def cpu_s(self) -> float:
        return proc_cpu_s(self.pid)

    def stats(self) -> dict | None:
        try:
            return json.loads((self.mnt / ".slabfs" / "stats").read_text())
        except (OSError, ValueError):
            return None

    def facts(self) -> dict:
        """What the kernel granted (from the daemon's log) and the bdi's readahead."""
        text = self.log_text()
        f: dict = {}
        m = re.search(r"kernel FUSE ABI (\S+): max_readahead (\d+) KiB, "
                      r"max_background (\d+), max_pages ([^\n]*)", text)
        if m:
            f.update(fuse_abi=m.group(1), max_readahead_kib=int(m.group(2)),
                     max_background=int(m.group(3)), max_pages=m.group(4).strip())
        m = re.search(r"read_ahead_kb of [^\n]*", text)
        if m:
            f["read_ahead_log"] = m.group(0)
        m = re.search(r"--read-ahead-kb [^\n]*not applied[^\n]*", text)
        if m:
            f["read_ahead_log"] = m.group(0)
        m = re.search(r"(\d+) threads", text)
        if m:
            f["threads"] = int(m.group(1))
        dev = mountinfo_dev(self.mnt)
        f["bdi"] = dev
        if dev:
            try:
                f["read_ahead_kb"] = int(Path(f"/sys/class/bdi/{dev}/read_ahead_kb").read_text())
            except (OSError, ValueError):
                pass
        return f

    def peak_rss_kib(self) -> int | None:
        return proc_status_kib(self.pid, "VmHWM")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if mountinfo_dev(self.mnt) is not None:
                subprocess.run(["fusermount3", "-u", str(self.mnt)], timeout=20,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                log(f"daemon {self.pid} still running after fusermount3 -u: SIGTERM")
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            if mountinfo_dev(self.mnt) is not None:
                log(f"{self.mnt} still mounted: lazy unmount")
                subprocess.run(["fusermount3", "-uz", str(self.mnt)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.proc = None


# --------------------------------------------------------------------------
# children


PREAD_CHILD = r"""
import hashlib, json, os, random, sys, time
path, stats_path, nbytes, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
offs = [p * 4096 for p in random.Random(seed).sample(range(nbytes // 4096), n)]
def stats():
    raw = open(stats_path, "rb").read()
    d = json.loads(raw)
    return d["reads"]["requests"], d["reads"]["bytes"], d["cache"]["misses"], len(raw)
fd = os.open(path, os.O_RDONLY)
# Evict the file's pages from the kernel page cache: every pread below must
# become a FUSE read request.
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
q0, _, _, _ = stats()
q1, b1, m1, len1 = stats()
h = hashlib.sha256()
lat = []
pread, clock = os.pread, time.perf_counter_ns
c0 = time.process_time()
t0 = time.perf_counter()
for o in offs:
    a = clock()
    b = pread(fd, 4096, o)
    z = clock()
    lat.append(z - a)
    h.update(b)
t1 = time.perf_counter()
c1 = time.process_time()
q2, b2, m2, _ = stats()
os.close(fd)
print(json.dumps({"lat_ns": lat, "read_s": t1 - t0, "read_cpu_s": c1 - c0, "sha256": h.hexdigest(),
                  "daemon_requests": (q2 - q1) - (q1 - q0), "daemon_bytes": (b2 - b1) - len1,
                  "cache_misses": m2 - m1}))
"""

ZARR_CHILD = r"""
import hashlib, json, random, sys, time
import zarr
path, nbytes, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
offs = [p * 4096 for p in random.Random(seed).sample(range(nbytes // 4096), n)]
arr = zarr.open_array(path, mode="r")
nz, ny, nx = arr.shape
assert nx * arr.dtype.itemsize == 4096, (arr.shape, arr.dtype)
row = lambda o: divmod(o // 4096, ny)  # 4 KiB-aligned offset -> (z, y): one whole row
for o in offs[:16]:  # warm-up: codec pipeline, thread pool, event loop
    arr[row(o)[0], row(o)[1], :]
h = hashlib.sha256()
lat = []
clock = time.perf_counter_ns
c0 = time.process_time()
t0 = time.perf_counter()
for o in offs:
    z, y = row(o)
    a = clock()
    v = arr[z, y, 0:nx]
    e = clock()
    lat.append(e - a)
    h.update(v.tobytes())
t1 = time.perf_counter()
c1 = time.process_time()
print(json.dumps({"lat_ns": lat, "read_s": t1 - t0, "read_cpu_s": c1 - c0, "sha256": h.hexdigest()}))
"""


def run_child(cmd: list[str], daemon: Mount | None = None, capture: bool = False) -> dict:
    """One fresh process, timed with perf_counter; CPU from wait4. `foreign`
    is the CPU that processes other than the child and the daemon used
    meanwhile, as a fraction of the machine (bench_read.run_one, plus the
    daemon's CPU counted as the run's own)."""
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    d0 = daemon.cpu_s() if daemon else 0.0
    b0 = br.cpu_busy_s()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stdin=subprocess.DEVNULL)
    stdout = p.stdout.read() if capture else b""
    _, status, ru = os.wait4(p.pid, 0)
    t1 = time.perf_counter()
    b1 = br.cpu_busy_s()
    d1 = daemon.cpu_s() if daemon else 0.0
    if p.stdout:
        p.stdout.close()
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise RuntimeError(f"{shlex.join(cmd)[:200]} failed with status {rc}")
    cpu = ru.ru_utime + ru.ru_stime
    dcpu = d1 - d0
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    slack = (4.0 if daemon else 2.0) * tick
    ncpu = os.cpu_count() or 1
    foreign = max(0.0, (b1 - b0) - cpu - dcpu - slack) / ((t1 - t0) * ncpu)
    r = {"wall_s": t1 - t0, "cpu_s": cpu, "daemon_cpu_s": dcpu, "foreign": foreign}
    if capture:
        r.update(json.loads(stdout.decode().strip().splitlines()[-1]))
    return r


def lat_summary(lat_ns: list[int]) -> dict:
    s = sorted(lat_ns)
    n = len(s)
    q = lambda p: s[min(n - 1, int(p * n))] / 1000.0  # noqa: E731
    return {"median_us": statistics.median(s) / 1000.0, "mean_us": statistics.fmean(s) / 1000.0,
            "p10_us": q(0.10), "p90_us": q(0.90), "p99_us": q(0.99),
            "min_us": s[0] / 1000.0, "max_us": s[-1] / 1000.0, "n": n}


PERF_CATEGORIES = [
    # (category, who, test on the sample's frames (leaf first) as "sym (dso)")
    ("idle CPU", "swapper", None),
    ("dd: page cache -> user copy", "dd", ("_copy_to_iter", "copy_page_to_iter")),
    ("dd: readahead, page cache allocation, waiting", "dd",
     ("page_cache_sync_ra", "page_cache_async_ra", "fuse_readahead", "read_pages",
      "filemap_get_pages", "filemap_add_folio")),
    ("dd: other (exec, syscalls)", "dd", ()),
    ("slabfs: reply -> kernel (writev /dev/fuse, copy into page cache)", "daemon",
     ("fuse_dev_do_write",)),
    ("slabfs: taking requests (read /dev/fuse)", "daemon", ("fuse_dev_do_read",)),
    ("slabfs: page faults on fresh buffers", "daemon", ("exc_page_fault",)),
    ("slabfs: reading chunk files (kernel)", "daemon", ("ksys_read", "ksys_pread64",
                                                       "filemap_read", "ext4_")),
    ("slabfs: mmap/munmap/madvise (allocator)", "daemon",
     ("munmap", "sys_mmap", "madvise", "sys_brk")),
    ("slabfs: futex, yield, scheduler", "daemon", ("futex", "sched_yield", "schedule",
                                                   "finish_task_switch")),
    ("slabfs: zstd decode", "daemon", ("ZSTD_", "HUF_", "FSE_", "HIST_", "[unknown] (/")),
    ("slabfs: memmove/memcpy (user)", "daemon", ("memmove", "memcpy")),
    ("slabfs: memset (user)", "daemon", ("memset",)),
    ("slabfs: other kernel", "daemon", ("[kernel.kallsyms]",)),
    ("slabfs: other user (index, cache, fuser, output)", "daemon", ()),
    ("perf itself", "perf", ()),
    ("other processes", "other", ()),
]


def perf_breakdown(data: Path, slabfs_name: str) -> dict:
    """Classify every sample of a `perf record -a -g` into PERF_CATEGORIES
    (first match wins; kernel categories look at the whole chain, the zstd
    one too, since zstd's own memmove calls sit under ZSTD_ frames)."""
    out = subprocess.run(["perf", "script", "-i", str(data)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    counts: dict[str, int] = {c[0]: 0 for c in PERF_CATEGORIES}
    threads: dict[str, int] = {}
    period_ns = []
    for block in out.split("\n\n"):
        lines = [x for x in block.splitlines() if x.strip()]
        if not lines:
            continue
        head = lines[0].split()
        comm = head[0]
        try:
            period_ns.append(int(head[4]))
        except (IndexError, ValueError):
            pass
        frames = [x.strip().split(None, 1)[1] if len(x.strip().split(None, 1)) > 1 else ""
                  for x in lines[1:]]
        # frames look like "sym+0x12 (dso)"; the unresolved zstd assembly
        # is "[unknown] (/path/slabfs)"
        if comm == "swapper":
            who = "swapper"
        elif comm == "dd":
            who = "dd"
        elif comm.startswith("fuser") or comm == slabfs_name:
            who = "daemon"
        elif comm.startswith("perf"):
            who = "perf"
        else:
            who = "other"
        if who in ("daemon", "dd"):
            tid = f"{comm} {head[1]}"
            threads[tid] = threads.get(tid, 0) + 1
        for cat, cwho, keys in PERF_CATEGORIES:
            if cwho != who:
                continue
            if keys is None or keys == ():
                counts[cat] += 1
                break
            if cat == "slabfs: zstd decode":
                hit = any(k in f for f in frames for k in keys[:4]) or (
                    frames and frames[0].startswith("[unknown] (/"))
            elif cat in ("slabfs: memmove/memcpy (user)", "daemon: memset (user)",
                         "daemon: other kernel"):
                hit = bool(frames) and any(k in frames[0] for k in keys)
            else:
                hit = any(k in f for f in frames for k in keys)
            if hit:
                counts[cat] += 1
                break
    total = sum(counts.values())
    period = statistics.median(period_ns) / 1e9 if period_ns else 0.0
    return {"samples": total, "period_s": period,
            "threads": {k: {"samples": n, "cpu_s": n * period} for k, n in
                        sorted(threads.items(), key=lambda kv: -kv[1])},
            "categories": {k: {"samples": n, "share": n / total if total else 0.0,
                               "cpu_s": n * period} for k, n in counts.items() if n}}


# --------------------------------------------------------------------------
# the benchmark


class Bench:
    def __init__(self, args, slabfs: Path, py: Path, data: dict, workdir: Path,
                 variants: list[dict]):
        self.args, self.slabfs, self.py, self.data = args, slabfs, py, data
        self.workdir, self.variants = workdir, variants
        self.res: dict[str, list[dict]] = {}
        self.mounts: dict[str, list[dict]] = {}
        self.redone = 0
        self.live: list[Mount] = []
        self.n_mounts = 0

    # -- helpers

    def new_mount(self, v: dict) -> Mount:
        self.n_mounts += 1
        mnt = self.workdir / "mnt"
        m = Mount(self.slabfs, self.data["store"], mnt, self.data["array"],
                  self.workdir / f"daemon-{self.n_mounts:03d}-{v['key']}.log",
                  read_ahead_kb=v["read_ahead_kb"], threads=self.args.threads)
        self.live.append(m)
        return m.start()

    def stop(self, m: Mount) -> None:
        try:
            m.stop()
        finally:
            if m in self.live:
                self.live.remove(m)

    def stop_all(self) -> None:
        for m in list(self.live):
            try:
                self.stop(m)
            except Exception as e:  # noqa: BLE001
                log(f"unmount failed: {e}")

    def measured(self, key: str, label: str, run, tag: str, keep: bool,
                 redo_setup=None) -> dict:
        """Run `run()` after waiting for an idle machine; redo it (calling
        redo_setup() first, e.g. a new fresh mount) while other processes were
        busy, at most --retries times."""
        a = self.args
        for attempt in range(a.retries + 1):
            if attempt and redo_setup:
                redo_setup()
            br.wait_idle(a.idle_wait)
            r = run()
            extra = ""
            if "lat" in r:
                extra = f" median {r['lat']['median_us']:.1f}us"
            log(f"[{tag}] {label:<34} {r['wall_s']:.3f}s cpu {r['cpu_s']:.2f}s "
                f"daemon {r['daemon_cpu_s']:.2f}s{extra} other-load {r['foreign']:.0%}")
            if r["foreign"] <= a.max_foreign or attempt == a.retries or not keep:
                break
            self.redone += 1
            log("  other processes were busy; redoing this run")
        if keep:
            self.res.setdefault(key, []).append(r)
        return r

    def seq(self, path: Path, tool: str, m: Mount | None) -> dict:
        if tool == "dd":
            cmd = ["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"]
        else:
            cmd = ["cat", str(path)]
        return run_child(cmd, daemon=m)

    def random_pread(self, m: Mount) -> dict:
        a, d = self.args, self.data
        r = run_child([str(self.py), "-c", PREAD_CHILD, str(m.file),
                       str(m.mnt / ".slabfs" / "stats"), str(d["nbytes"]),
                       str(a.random_reads), str(a.seed)], daemon=m, capture=True)
        return self.check_random(r, "pread")

    def random_zarr(self, m: Mount | None) -> dict:
        a, d = self.args, self.data
        r = run_child([str(self.py), "-c", ZARR_CHILD, str(d["store"] / d["array"]),
                       str(d["nbytes"]), str(a.random_reads), str(a.seed)],
                      daemon=m, capture=True)
        return self.check_random(r, "zarr")

    def check_random(self, r: dict, who: str) -> dict:
        if r["sha256"] != self.random_sha:
            raise RuntimeError(f"{who}: the random reads' bytes differ from the raw file")
        r["lat"] = lat_summary(r["lat_ns"])
        r["lat_us"] = [round(x / 1000.0, 2) for x in r.pop("lat_ns")]
        if who == "pread" and r.get("daemon_requests") is not None:
            n = self.args.random_reads
            if r["daemon_requests"] < n:
                log(f"WARNING: only {r['daemon_requests']} of {n} preads reached the daemon "
                    "(the kernel page cache served the rest)")
        return r

    # -- verification (untimed)

    def verify(self) -> None:
        d = self.data
        h = hashlib.sha256()
        with open(d["raw"], "rb") as f:
            for b in iter(lambda: f.read(MIB), b""):
                h.update(b)
        self.raw_sha = h.hexdigest()
        import random as _r
        offs = [p * PAGE for p in _r.Random(self.args.seed).sample(
            range(d["nbytes"] // PAGE), self.args.random_reads)]
        h = hashlib.sha256()
        with open(d["raw"], "rb") as f:
            for o in offs:
                h.update(os.pread(f.fileno(), PAGE, o))
        self.random_sha = h.hexdigest()
        m = self.new_mount(self.variants[0])
        try:
            h = hashlib.sha256()
            n = 0
            with open(m.file, "rb") as f:
                for b in iter(lambda: f.read(MIB), b""):
                    h.update(b)
                    n += len(b)
            if (h.hexdigest(), n) != (self.raw_sha, d["nbytes"]):
                raise RuntimeError("bytes read through the mount differ from the raw file")
            log("the bytes read through the mount match the raw file (sha256)")
        finally:
            self.stop(m)

    # -- one round

    def round(self, rep: int) -> None:
        a, d = self.args, self.data
        keep = rep >= 0
        tag = "warmup" if rep < 0 else f"rep {rep + 1}/{a.reps}"
        raw = d["raw"]
        self.measured("slabfs_cat", "slabfs cat", lambda: run_child(
            [str(self.slabfs), "cat", str(d["store"]), d["array"]]), tag, keep)
        for i, v in enumerate(self.variants):
            k = v["key"]
            holder: dict = {}

            def remount(v=v, holder=holder):
                if holder.get("m"):
                    self.stop(holder["m"])
                holder["m"] = self.new_mount(v)

            remount()
            try:
                self.measured(f"fresh_dd_{k}", f"dd bs=1M, fresh mount{v['label']}",
                              lambda: self.seq(holder["m"].file, "dd", holder["m"]), tag, keep,
                              redo_setup=remount)
                m = holder["m"]
                after_dd = m.stats()
                if i == 0:
                    self.measured("cat_raw", "cat raw file", lambda: self.seq(raw, "cat", None),
                                  tag, keep)
                self.measured(f"second_dd_{k}", f"dd bs=1M, 2nd read{v['label']}",
                              lambda: self.seq(m.file, "dd", m), tag, keep)
                if i == 0:
                    self.measured("dd_raw", "dd bs=1M raw file",
                                  lambda: self.seq(raw, "dd", None), tag, keep)
                    self.measured(f"cat_mnt_{k}", f"cat mounted file, page cache{v['label']}",
                                  lambda: self.seq(m.file, "cat", m), tag, keep)
                self.measured(f"pread_{k}", f"random 4 KiB preads, warm{v['label']}",
                              lambda: self.random_pread(m), tag, keep)
                if i == 0:
                    self.measured("zarr_random", "zarr-python rows, warm",
                                  lambda: self.random_zarr(m), tag, keep)
                info = {"start_s": m.start_s, "peak_rss_kib": m.peak_rss_kib(),
                        "facts": m.facts(), "stats_after_fresh_dd": after_dd,
                        "stats_at_end": m.stats(), "pid": m.pid, "log": str(m.log_path)}
            finally:
                if holder.get("m"):
                    self.stop(holder["m"])
            if keep:
                self.mounts.setdefault(k, []).append(info)

    def run(self) -> None:
        for rep in range(-self.args.warmup, self.args.reps):
            self.round(rep)

    # -- optional profile

    def perf(self) -> dict:
        out = {}
        d = self.data
        base = d["dir"] / "perf-slabfs-cat"
        for attempt in range(self.args.retries + 1):
            br.wait_idle(self.args.idle_wait)
            r = run_child(["perf", "record", "-a", "-g", "-F", "1999", "-q", "-o", f"{base}.data",
                           "--", str(self.slabfs), "cat", str(d["store"]), d["array"]])
            log(f"[perf] slabfs cat {r['wall_s']:.3f}s other-load {r['foreign']:.0%}")
            if r["foreign"] <= self.args.max_foreign:
                break
            log("  other processes were busy; redoing this run")
        out["slabfs_cat"] = {"run": r, "label": "`slabfs cat`",
                             "breakdown": perf_breakdown(Path(f"{base}.data"), self.slabfs.name)}
        for v in self.variants:
            base = self.data["dir"] / f"perf-mount-{v['key']}"
            for attempt in range(self.args.retries + 1):
                m = self.new_mount(v)
                try:
                    br.wait_idle(self.args.idle_wait)
                    # System-wide for exactly the dd's lifetime: the daemon's
                    # threads (its rayon workers inherit the name fuser-N),
                    # dd, and idle CPUs (swapper).
                    r = run_child(["perf", "record", "-a", "-g", "-F", "1999", "-q", "-o",
                                   f"{base}.data", "--", "dd", f"if={m.file}", "of=/dev/null",
                                   "bs=1M", "status=none"], daemon=m)
                    stats = m.stats()
                finally:
                    self.stop(m)
                log(f"[perf] dd, fresh mount{v['label']} {r['wall_s']:.3f}s "
                    f"other-load {r['foreign']:.0%}")
                if r["foreign"] <= self.args.max_foreign:
                    break
                log("  other processes were busy; redoing this run")
            reports = {}
            for name, extra in (("comm", ["--sort", "comm"]),
                                ("comm-dso", ["--sort", "comm,dso"]),
                                ("sym", ["--sort", "comm,sym"])):
                rep = subprocess.run(["perf", "report", "--stdio", "--no-children", "-g", "none",
                                      "--percent-limit", "0.5", "-i", f"{base}.data", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                Path(f"{base}-{name}.txt").write_text(rep.stdout)
                reports[name] = f"{base}-{name}.txt"
            bd = perf_breakdown(Path(f"{base}.data"), self.slabfs.name)
            out[v["key"]] = {"run": r, "stats": stats, "reports": reports, "breakdown": bd,
                             "label": f"fresh-mount `dd`{v['label']}"}
            log(f"perf ({v['key']}): dd {r['wall_s']:.3f}s, reports {base}-*.txt")
        return out


# --------------------------------------------------------------------------
# report


def seq_row(label: str, rs: list[dict], mib: float) -> tuple[str, dict]:
    w = br.summary([r["wall_s"] for r in rs])
    cpu = statistics.median([r["cpu_s"] for r in rs])
    dcpu = statistics.median([r["daemon_cpu_s"] for r in rs])
    s = {"wall": w, "cpu_median": cpu, "daemon_cpu_median": dcpu, "mib_s": mib / w["median"]}
    dc = f"{dcpu:.2f}" if any(r["daemon_cpu_s"] for r in rs) else "–"
    return (f"| {label} | {w['median']:.3f} | {w['min']:.3f}–{w['max']:.3f} | "
            f"{mib / w['median']:.0f} | {cpu:.2f} | {dc} |"), s


def random_row(label: str, rs: list[dict]) -> tuple[str, dict]:
    med = [r["lat"]["median_us"] for r in rs]
    allv = sorted(x for r in rs for x in r["lat_us"])
    n = len(allv)
    s = {"median_of_medians_us": statistics.median(med), "min_median_us": min(med),
         "max_median_us": max(med), "mean_us": statistics.fmean(allv),
         "p90_us": allv[int(0.9 * n)], "p99_us": allv[min(n - 1, int(0.99 * n))],
         "reads": n}
    if "daemon_requests" in rs[0]:
        s["daemon_requests_per_read"] = statistics.median(
            r["daemon_requests"] / len(r["lat_us"]) for r in rs)
        s["daemon_bytes_per_request"] = statistics.median(
            r["daemon_bytes"] / max(1, r["daemon_requests"]) for r in rs)
        s["cache_misses"] = max(r["cache_misses"] for r in rs)
    return (f"| {label} | {s['median_of_medians_us']:.1f} | {s['min_median_us']:.1f}–"
            f"{s['max_median_us']:.1f} | {s['mean_us']:.1f} | {s['p90_us']:.1f} | "
            f"{s['p99_us']:.1f} |"), s


def verdict(x: float, target: float) -> str:
    return f"**met** (≥ {target:g})" if x >= target else f"**missed** (< {target:g})"


def report(b: Bench) -> dict:
    d, res, a = b.data, b.res, b.args
    mib = d["nbytes"] / MIB
    out: dict = {"seq": {}, "random": {}, "ratios": {}}
    lines = ["| contender | median (s) | min–max (s) | MiB/s | CPU s (reader) | CPU s (daemon) |",
             "|---|---:|---:|---:|---:|---:|"]
    order = [("slabfs_cat", "`slabfs cat` (fresh process, chunk cache cold)")]
    for v in b.variants:
        order.append((f"fresh_dd_{v['key']}", f"`dd bs=1M`, fresh mount{v['label']}"))
    for v in b.variants:
        order.append((f"second_dd_{v['key']}", f"`dd bs=1M`, 2nd read, same mount{v['label']}"))
    order += [(f"cat_mnt_{b.variants[0]['key']}", "`cat` mounted file, page cache"),
              ("cat_raw", "`cat` raw file, page cache"),
              ("dd_raw", "`dd bs=1M` raw file, page cache")]
    for k, label in order:
        if k in res:
            row, s = seq_row(label, res[k], mib)
            lines.append(row)
            out["seq"][k] = s
    seq_tab = "\n".join(lines)

    lines = ["| random 4 KiB reads | median per read (µs) | min–max of per-run medians (µs) "
             "| mean (µs) | p90 (µs) | p99 (µs) |", "|---|---:|---:|---:|---:|---:|"]
    for v in b.variants:
        k = f"pread_{v['key']}"
        if k in res:
            row, s = random_row(f"`os.pread`, warm mount{v['label']}", res[k])
            lines.append(row)
            out["random"][k] = s
    row, s = random_row("zarr-python `arr[z, y, :]`, opened once", res["zarr_random"])
    lines.append(row)
    out["random"]["zarr_random"] = s
    rnd_tab = "\n".join(lines)

    S, R = out["seq"], out["random"]
    k0 = b.variants[0]["key"]
    rat = [("fresh-mount `dd` / `slabfs cat` (throughput)", S[f"fresh_dd_{k0}"]["mib_s"]
            / S["slabfs_cat"]["mib_s"], 0.8),
           ("2nd-read `dd` / `cat` raw file (throughput)", S[f"second_dd_{k0}"]["mib_s"]
            / S["cat_raw"]["mib_s"], 0.8),
           ("zarr-python / warm-mount `pread` (per-read latency, medians)",
            R["zarr_random"]["median_of_medians_us"] / R[f"pread_{k0}"]["median_of_medians_us"],
            20.0)]
    extra = [("`cat` mounted / `cat` raw, page cache (same tool)",
              S[f"cat_mnt_{k0}"]["mib_s"] / S["cat_raw"]["mib_s"]),
             ("2nd-read `dd` / `dd` raw (same tool)",
              S[f"second_dd_{k0}"]["mib_s"] / S["dd_raw"]["mib_s"]),
             ("zarr-python / warm-mount `pread` (per-read latency, means)",
              R["zarr_random"]["mean_us"] / R[f"pread_{k0}"]["mean_us"])]
    for v in b.variants[1:]:
        k = v["key"]
        rat.append((f"fresh-mount `dd`{v['label']} / `slabfs cat`",
                    S[f"fresh_dd_{k}"]["mib_s"] / S["slabfs_cat"]["mib_s"], 0.8))
        rat.append((f"2nd-read `dd`{v['label']} / `cat` raw file",
                    S[f"second_dd_{k}"]["mib_s"] / S["cat_raw"]["mib_s"], 0.8))
        rat.append((f"zarr-python / `pread`{v['label']} (medians)",
                    R["zarr_random"]["median_of_medians_us"]
                    / R[f"pread_{k}"]["median_of_medians_us"], 20.0))
    lines = ["| ratio | value | target |", "|---|---:|---|"]
    for label, x, t in rat:
        lines.append(f"| {label} | **{x:.2f}** | {verdict(x, t)} |")
        out["ratios"][label] = {"value": x, "target": t}
    for label, x in extra:
        lines.append(f"| {label} | {x:.2f} | – |")
        out["ratios"][label] = {"value": x}
    rat_tab = "\n".join(lines)

    lines = ["| mount | time to live, median (s) | daemon peak RSS (VmHWM), median / max (MiB) "
             "| kernel grant (daemon log) | bdi read_ahead_kb | FUSE read requests in the "
             "fresh `dd` (mean size) | read latency in the fresh `dd` p50 / p90 / p99 (µs) |",
             "|---|---:|---:|---|---:|---:|---:|"]
    for v in b.variants:
        ms = b.mounts.get(v["key"], [])
        if not ms:
            continue
        st = statistics.median(m["start_s"] for m in ms)
        hwm = [m["peak_rss_kib"] or 0 for m in ms]
        f = ms[-1]["facts"]
        grant = (f"max_readahead {f.get('max_readahead_kib', '?')} KiB, max_background "
                 f"{f.get('max_background', '?')}, max_pages {f.get('max_pages', '?')}")
        sd = ms[-1]["stats_after_fresh_dd"] or {}
        reqs = sd.get("reads", {}).get("requests")
        byts = sd.get("reads", {}).get("bytes")
        lat = sd.get("read_latency_us", {})
        reqtxt = f"{reqs} ({byts / reqs / 1024:.0f} KiB)" if reqs else "?"
        lattxt = (f"{lat.get('p50')} / {lat.get('p90')} / {lat.get('p99')}" if lat else "?")
        lines.append(f"| default{v['label']} | {st:.3f} | {statistics.median(hwm) / 1024:.0f} / "
                     f"{max(hwm) / 1024:.0f} | {grant} | {f.get('read_ahead_kb', '?')} | "
                     f"{reqtxt} | {lattxt} |".replace("| default, ", "| "))
        out.setdefault("mount", {})[v["key"]] = {
            "start_s_median": st, "peak_rss_kib": hwm, "facts": f,
            "fresh_dd_requests": reqs, "fresh_dd_bytes": byts, "fresh_dd_latency_us": lat}
    mnt_tab = "\n".join(lines)
    return {"tables": {"seq": seq_tab, "random": rnd_tab, "ratios": rat_tab, "mount": mnt_tab},
            **out}


def load_note(b: Bench) -> tuple[str, float]:
    worst = max(r["foreign"] for rs in b.res.values() for r in rs)
    kept_bad = sum(r["foreign"] > b.args.max_foreign for rs in b.res.values() for r in rs)
    note = (f"Other processes' CPU during kept runs: at most {worst:.0%} of the machine; "
            f"{b.redone} run(s) redone because others were busy")
    if kept_bad:
        note += (f"; {kept_bad} kept run(s) still above {b.args.max_foreign:.0%}: "
                 "**these figures are preliminary**")
    return note + ".", worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256, help="array size in MiB (multiple of 4)")
    ap.add_argument("--reps", type=int, default=5, help="timed rounds (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="discarded warm-up rounds (default 1)")
    ap.add_argument("--random-reads", type=int, default=2000,
                    help="random 4 KiB reads per run, distinct aligned offsets (default 2000)")
    ap.add_argument("--seed", type=int, default=20241122, help="seed of the random offsets")
    ap.add_argument("--read-ahead-kb", type=int, default=1024,
                    help="the extra variant's `slabfs mount --read-ahead-kb` (0: no variant; "
                         "skipped when slabfs lacks the option or not root; default 1024)")
    ap.add_argument("--threads", type=int, default=None, help="`slabfs mount --threads`")
    ap.add_argument("--data-dir", type=Path, default=REPO / "bench-data",
                    help="where the generated data is cached (default: <repo>/bench-data)")
    ap.add_argument("--max-foreign", type=float, default=0.15,
                    help="redo a run if other processes used more than this fraction of "
                         "the machine's CPU during it (default 0.15)")
    ap.add_argument("--idle-wait", type=float, default=60.0,
                    help="before each run, wait up to this many seconds for the machine "
                         "to be idle (<10%% CPU busy over 0.5 s); 0 disables (default 60)")
    ap.add_argument("--retries", type=int, default=5, help="redos per run (default 5)")
    ap.add_argument("--perf", action="store_true",
                    help="afterwards, profile one extra fresh-mount dd per variant with "
                         "`perf record -a -g` (reports saved in --data-dir)")
    ap.add_argument("--no-build", action="store_true", help="use the existing target/release/slabfs")
    ap.add_argument("--skip-venv", action="store_true", help="do not run scripts/venv.sh")
    args = ap.parse_args()
    command = ".venv/bin/python scripts/bench_mount.py " + shlex.join(
        x for x in sys.argv[1:] if x != "--skip-venv")

    py = br.venv_python(args.skip_venv)
    reexec_in_venv(py)
    py = Path(sys.executable)
    for tool in ("fusermount3", "dd", "cat"):
        if not shutil.which(tool):
            sys.exit(f"{TAG}: {tool} not found (fusermount3: Debian package fuse3)")
    if args.random_reads < 1:
        sys.exit(f"{TAG}: --random-reads must be positive")

    data_dir = args.data_dir if args.data_dir.is_absolute() else (Path.cwd() / args.data_dir)
    built = br.build_slabfs(args.no_build)
    data = br.build_data(data_dir, args.size_mib)
    data["dir"] = data_dir
    if args.random_reads > data["nbytes"] // PAGE:
        sys.exit(f"{TAG}: --random-reads exceeds the file's {data['nbytes'] // PAGE} pages")
    workdir = Path(tempfile.mkdtemp(prefix="slabfs-bench-mount-"))
    # A private copy of the binary: other people rebuild target/release
    # while this runs.
    slabfs = workdir / "slabfs"
    shutil.copy2(built, slabfs)
    br.verify_slabfs(slabfs, data)

    helptext = subprocess.run([str(slabfs), "mount", "--help"], stdout=subprocess.PIPE,
                              text=True).stdout
    variants = [{"key": "default", "label": "", "read_ahead_kb": None}]
    if args.read_ahead_kb > 0:
        if "--read-ahead-kb" not in helptext:
            log("slabfs mount has no --read-ahead-kb: no readahead variant")
        elif os.geteuid() != 0:
            log("not root: no --read-ahead-kb variant")
        else:
            variants.append({"key": f"ra{args.read_ahead_kb}",
                             "label": f", `--read-ahead-kb {args.read_ahead_kb}`",
                             "read_ahead_kb": args.read_ahead_kb})

    b = Bench(args, slabfs, py, data, workdir, variants)
    prof = None
    # SIGTERM (and SIGHUP) unwind like Ctrl-C, so the finally below unmounts.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    try:
        b.verify()
        b.run()
        if args.perf:
            prof = b.perf()
    finally:
        b.stop_all()

    rep = report(b)
    m = br.machine_info()
    v = br.versions(slabfs)
    note, worst = load_note(b)
    print()
    print(f"Command: `{command}` (run from the repository root)")
    print()
    print(f"Machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['memory']} RAM")
    print("Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    print()
    print(f"Data: float32 {data['shape']}, chunks {data['chunks']}, {data['n_chunks']} chunks, "
          f"{data['nbytes'] / MIB:.0f} MiB raw, {data['stored_bytes'] / MIB:.1f} MiB stored. "
          "Store and raw file in the page cache throughout.")
    print()
    print(f"### Sequential reads ({args.reps} rounds, interleaved, {args.warmup} warm-up "
          "round(s) discarded)")
    print()
    print(rep["tables"]["seq"])
    print()
    print(f"### Random 4 KiB reads ({args.random_reads} distinct 4 KiB-aligned offsets per run, "
          f"seed {args.seed}, {args.reps} runs each)")
    print()
    print(rep["tables"]["random"])
    print()
    print("### Ratios")
    print()
    print(rep["tables"]["ratios"])
    print()
    print("### The mounts")
    print()
    print(rep["tables"]["mount"])
    print()
    print(note)
    if prof:
        print()
        print("### Where the CPU goes (`perf record -a -g`, one extra untimed run each; CPU s = "
              "samples x period)")
        print()
        keys = list(prof)
        print("| where | " + " | ".join(prof[k]["label"] for k in keys) + " |")
        print("|---|" + "---:|" * len(keys))
        for cat, who, _ in PERF_CATEGORIES:
            cells = [prof[k]["breakdown"]["categories"].get(cat) for k in keys]
            if not any(cells):
                continue
            print(f"| {cat} | " + " | ".join(f"{c['cpu_s']:.3f}" if c else "–" for c in cells)
                  + " |")
        def busy(bd: dict) -> float:
            skip = ("idle CPU", "perf itself", "other processes")
            return sum(c["cpu_s"] for n, c in bd["categories"].items() if n not in skip)

        print("| **total: slabfs + dd** | "
              + " | ".join(f"**{busy(prof[k]['breakdown']):.3f}**" for k in keys) + " |")
        print()
        for k in keys:
            bd = prof[k]["breakdown"]
            print(f"- {prof[k]['label']}: {bd['samples']} samples of {bd['period_s'] * 1e3:.2f} ms; "
                  "threads " + ", ".join(f"{t} {c['cpu_s']:.3f} s" for t, c in bd["threads"].items()))
    pk = f"pread_{variants[0]['key']}"
    if pk in rep["random"]:
        s = rep["random"][pk]
        print(f"\nWarm-mount preads: {s['daemon_requests_per_read']:.3f} FUSE requests per pread "
              f"reached the daemon (median over runs), {s['daemon_bytes_per_request'] / 1024:.1f} KiB "
              f"each, {s['cache_misses']} chunk-cache misses.")
    results = {
        "command": command, "machine": m, "versions": v,
        "data": {k: (str(val) if isinstance(val, Path) else val) for k, val in data.items()},
        "variants": variants, "runs": b.res, "mounts": b.mounts,
        "stats": {k: rep[k] for k in ("seq", "random", "ratios", "mount") if k in rep},
        "tables": rep["tables"], "load": {"worst_foreign": worst, "redone": b.redone},
        "perf": prof,
    }
    out = data_dir / "results-mount.json"
    out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    try:
        slabfs.unlink()  # the private copy of the binary; the daemon logs stay
    except OSError:
        pass
    log(f"raw numbers in {out}; daemon logs in {workdir}")


if __name__ == "__main__":
    main()
