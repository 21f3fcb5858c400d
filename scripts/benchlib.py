"""What the benchmark scripts (scripts/bench*.py) share, so that each of them
holds only its workload: its data, its contenders, its passes and its report.

- output: log() and fail(), prefixed with the running script's name (TAG);
- environment: the venv (scripts/venv.sh) and re-running under it, building
  target/release/slabfs and a private copy of it, required tools, signals,
  the command line, the machine and the versions (header_lines);
- processes: the machine's busy CPU (/proc/stat), waiting for an idle
  machine, timing child processes with the CPU of everything else on the
  machine ("foreign") beside them, redoing a run while others were busy,
  dropping the page cache, reading files into it;
- contender passes (bench_read.py's method): every contender a fresh process,
  interleaved, warm and cold passes, byte checks (sha256) before timing;
- the daemon: Mount (one `slabfs mount` in the foreground, its CPU, RSS,
  stats and log) and Mounts (the live ones of a run, unmounted whatever fails);
- random 4 KiB reads: the children that time them, their check and row;
- statistics and report: medians and min-max, latency summaries, the
  contender table, ratios against targets, the note on other processes' load;
- the options every contender-pass script has (add_common_args);
- `perf record -g` of a `slabfs cat`, sorted into categories;
- data shared by several scripts: the smooth float32 field, the Zarr v3
  array of bench_read.py and bench_mount.py, and the 64-partition netCDF-3
  aggregation of bench_aggregation.py and bench.py.

Only the standard library is imported here at load time (bench.py's
children import this module too); numpy, zarr, netCDF4 and cf-python are
imported by the functions that need them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIB = 1 << 20
PAGE = 4096
TAG = Path(sys.argv[0]).stem  # the running script: bench_read, bench_mount, ...


# --------------------------------------------------------------------------
# output


def log(msg: str) -> None:
    print(f"{TAG}: {msg}", file=sys.stderr, flush=True)


def fail(msg: str) -> None:
    sys.exit(f"{TAG}: {msg}")


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


def reexec_in_venv(py: Path, modules: tuple[str, ...]) -> None:
    """Run the rest of this script under the venv python if the modules are missing."""
    try:
        for m in modules:
            __import__(m)
        return
    except ImportError:
        pass
    if Path(sys.executable).resolve() == py.resolve():
        fail(f"{', '.join(modules)} missing from the venv")
    os.execv(str(py), [str(py), str(Path(sys.argv[0]).resolve()), *sys.argv[1:], "--skip-venv"])


def use_venv(skip: bool, modules: tuple[str, ...]) -> Path:
    """The venv made (unless skip) and this script running under it; returns
    the python running it, the one the Python children use."""
    reexec_in_venv(venv_python(skip), modules)
    return Path(sys.executable)


def build_slabfs(skip: bool, attempts: int = 10, wait_s: float = 60.0) -> Path:
    """`cargo build --release`, retried while other people's edits break it;
    returns target/release/slabfs. SLABFS_BIN=PATH uses that binary instead
    (a build of another commit, to compare two in one sitting)."""
    if os.environ.get("SLABFS_BIN"):
        exe = Path(os.environ["SLABFS_BIN"]).resolve()
        if not exe.exists():
            fail(f"SLABFS_BIN={exe} does not exist")
        return exe
    exe = REPO / "target" / "release" / "slabfs"
    if skip:
        if not exe.exists():
            fail(f"{exe} does not exist (drop --no-build)")
        return exe
    for i in range(attempts):
        r = subprocess.run(["cargo", "build", "--release"], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            return exe
        tail = "\n".join(r.stdout.strip().splitlines()[-15:])
        log(f"cargo build --release failed (attempt {i + 1}/{attempts}):\n{tail}")
        if i + 1 < attempts:
            log(f"retrying in {wait_s:.0f}s")
            time.sleep(wait_s)
    fail("could not build slabfs")


def private_binary(built: Path, prefix: str = "slabfs-bench-") -> tuple[Path, Path]:
    """A private copy of target/release/slabfs in a fresh work directory
    (other people rebuild target/release while a benchmark runs); returns
    (the copy, the work directory)."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    exe = workdir / "slabfs"
    shutil.copy2(built, exe)
    return exe, workdir


def require_tools(*tools: str) -> None:
    for tool in tools:
        if not shutil.which(tool):
            fail(f"{tool} not found" + (" (Debian package fuse3)" if tool == "fusermount3" else ""))


def exit_on_signals() -> None:
    """SIGTERM and SIGHUP unwind like Ctrl-C, so `finally` blocks unmount."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))


def command_line() -> str:
    """This run's command, as run from the repository root with the venv's python."""
    return f".venv/bin/python scripts/{Path(sys.argv[0]).name} " + shlex.join(
        a for a in sys.argv[1:] if a != "--skip-venv")


def abs_dir(p: Path) -> Path:
    return p if p.is_absolute() else (Path.cwd() / p)


def machine_info() -> dict:
    import platform

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


def versions(slabfs: Path, extra: tuple[str, ...] = ()) -> dict:
    """Versions of the Python peers, slabfs (binary and git source), rustc,
    cat, and of the `extra` Python packages."""
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
    for p in extra:
        try:
            v[p] = md.version(p)
        except md.PackageNotFoundError:
            v[p] = "not installed"
    return v


def header_lines(command: str, slabfs: Path, extra_versions: tuple[str, ...] = (),
                 where: str = "run from the repository root") -> tuple[list[str], dict, dict]:
    """The report's head (command, machine, versions); returns (lines,
    machine_info(), versions())."""
    m = machine_info()
    v = versions(slabfs, extra_versions)
    return [f"Command: `{command}` ({where})", "",
            f"Machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}, {m['memory']} RAM",
            "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items())], m, v


# --------------------------------------------------------------------------
# processes, the machine's load, the page cache


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


def drop_caches() -> None:
    """`sync; echo 3 > /proc/sys/vm/drop_caches` (root only)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def prewarm(paths) -> None:
    """Read files (a directory: every file below it) into the page cache (untimed)."""
    for p in paths:
        p = Path(p)
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
        for f in files:
            with open(f, "rb") as fh:
                while fh.read(8 * MIB):
                    pass


def run_processes(cmds: list[list[str]], daemon: Mount | None = None, capture: bool = False,
                  slack_ticks: int | None = None) -> dict:
    """Start cmds at once, each a fresh process (stdin /dev/null, stdout to
    /dev/null or, with capture, read: one command only), and wait for all.
    Timed with perf_counter around them; their CPU (user + sys) from wait4.
    `foreign` is the CPU that everything else on the machine used meanwhile
    (/proc/stat, less the children's and the daemon's, less slack_ticks
    clock ticks of rounding: default 4 with a daemon, else 2) as a fraction
    of the machine. Returns wall_s, cpu_s, maxrss_kib (the largest child's),
    daemon_cpu_s, foreign, statuses (exit codes) and stdout (bytes)."""
    if capture and len(cmds) != 1:
        raise ValueError("capture takes one command")
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    d0 = daemon.cpu_s() if daemon else 0.0
    b0 = cpu_busy_s()
    t0 = time.perf_counter()
    ps = [subprocess.Popen(c, stdout=out, stdin=subprocess.DEVNULL) for c in cmds]
    stdout = ps[0].stdout.read() if capture else b""
    cpu = 0.0
    maxrss = 0
    statuses = []
    for p in ps:
        _, status, ru = os.wait4(p.pid, 0)
        cpu += ru.ru_utime + ru.ru_stime
        maxrss = max(maxrss, ru.ru_maxrss)
        p.returncode = os.waitstatus_to_exitcode(status)
        statuses.append(p.returncode)
    t1 = time.perf_counter()
    b1 = cpu_busy_s()
    dcpu = (daemon.cpu_s() - d0) if daemon else 0.0
    if capture:
        ps[0].stdout.close()
    if slack_ticks is None:
        slack_ticks = 4 if daemon else 2
    slack = slack_ticks / os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    foreign = max(0.0, (b1 - b0) - cpu - dcpu - slack) / ((t1 - t0) * ncpu)
    return {"wall_s": t1 - t0, "cpu_s": cpu, "maxrss_kib": maxrss, "daemon_cpu_s": dcpu,
            "foreign": foreign, "statuses": statuses, "stdout": stdout}


def child_json(stdout: bytes) -> dict:
    """A child's result: the last line of its stdout, JSON."""
    return json.loads(stdout.decode().strip().splitlines()[-1])


def run_child(cmd: list[str], daemon: Mount | None = None, capture: bool = False) -> dict:
    """One fresh process (run_processes); the daemon's CPU counts as the
    run's own. Returns wall_s, cpu_s, daemon_cpu_s, foreign, with capture
    merged with the child's JSON line. Raises RuntimeError if it fails."""
    p = run_processes([cmd], daemon=daemon, capture=capture)
    rc = p["statuses"][0]
    if rc != 0:
        raise RuntimeError(f"{shlex.join(cmd)[:200]} failed with status {rc}")
    r = {k: p[k] for k in ("wall_s", "cpu_s", "daemon_cpu_s", "foreign")}
    if capture:
        r.update(child_json(p["stdout"]))
    return r


def redo_while_busy(attempt, args, describe, keep: bool = True,
                    foreign=lambda r: r["foreign"]) -> tuple:
    """Run attempt(i) (i = 0, 1, ...; it waits for an idle machine itself,
    after any set-up of its own) and log describe(result); while other
    processes used more than args.max_foreign of the machine during it, run
    it again, at most args.retries times (never with keep=False: a warm-up
    run). An attempt returning None (a failed run) ends it. Returns (the
    last result, how many runs were redone)."""
    redone = 0
    for i in range(args.retries + 1):
        r = attempt(i)
        if r is None:
            return None, redone
        log(describe(r))
        if foreign(r) <= args.max_foreign or i == args.retries or not keep:
            return r, redone
        redone += 1
        log("  other processes were busy; redoing this run")
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------
# contender passes: every contender a fresh process, interleaved
#
# A contender is a dict: name, key, cmd, inproc (a Python child printing
# {"read_s", "read_cpu_s", ...} as its last line; other commands' stdout
# goes to /dev/null), and optionally verify (False: not checked) and startup.


def run_one(c: dict) -> dict:
    """Run one contender as a fresh process: wall_s, cpu_s, maxrss_kib,
    foreign, and a Python child's own figures."""
    p = run_processes([c["cmd"]], capture=c["inproc"])
    if p["statuses"][0] != 0:
        fail(f"{c['name']} failed with status {p['statuses'][0]}")
    r = {k: p[k] for k in ("wall_s", "cpu_s", "maxrss_kib", "foreign")}
    if c["inproc"]:
        r.update(child_json(p["stdout"]))
    return r


def run_pass(cs: list[dict], args, cold: bool) -> tuple[dict[str, list[dict]], int]:
    """Interleaved A B C D rounds: args.reps of them, after args.warmup
    discarded ones (warm pass only). Each run starts once the machine is
    idle (waiting at most args.idle_wait seconds); cold, the page cache is
    dropped first. A run during which other processes used more than
    args.max_foreign of the machine's CPU is discarded and redone (at most
    args.retries times; after that the last attempt is kept). Returns the
    runs per contender key and how many were redone."""
    res: dict[str, list[dict]] = {c["key"]: [] for c in cs}
    label = "cold" if cold else "warm"
    redone = 0
    for rep in range(-(0 if cold else args.warmup), args.reps):
        tag = "warmup" if rep < 0 else f"rep {rep + 1}/{args.reps}"
        for c in cs:
            def attempt(_, c=c):
                wait_idle(args.idle_wait)
                if cold:
                    drop_caches()
                return run_one(c)

            def describe(r, c=c):
                extra = f" read {r['read_s']:.3f}s" if "read_s" in r else ""
                return (f"[{label} {tag}] {c['name']:<15} {r['wall_s']:.3f}s"
                        f" cpu {r['cpu_s']:.2f}s{extra} other-load {r['foreign']:.0%}")

            r, n = redo_while_busy(attempt, args, describe, keep=rep >= 0)
            redone += n
            if rep >= 0:
                res[c["key"]].append(r)
    return res, redone


def run_warm_cold(cs: list[dict], args) -> list[tuple[str, dict, int]]:
    """The warm pass, then (--cold: auto = when root) the cold one; returns
    [(pass, runs per contender, runs redone)], pass "warm" or "cold"."""
    warm, warm_redone = run_pass(cs, args, cold=False)
    is_root = os.geteuid() == 0
    do_cold = args.cold == "yes" or (args.cold == "auto" and is_root)
    if do_cold and not is_root:
        fail("--cold yes needs root")
    if not do_cold:
        return [("warm", warm, warm_redone)]
    return [("warm", warm, warm_redone), ("cold", *run_pass(cs, args, cold=True))]


def pass_title(args, key: str, what: str = "") -> str:
    """The heading of pass key ("warm" or "cold"): "Warm page cache (5 reps,
    ...)", or after what ("(b) Full read"): "(b) Full read, warm page cache
    (5 reps, ...)"."""
    if key == "cold":
        how = (f"cold page cache (`sync; echo 3 > /proc/sys/vm/drop_caches` before each run, "
               f"{args.reps} reps, interleaved)")
    else:
        how = (f"warm page cache ({args.reps} reps, interleaved, {args.warmup} warm-up "
               "round(s) discarded)")
    return f"{what}, {how}" if what else how[0].upper() + how[1:]


def sha_file(path: Path, offset: int = 0, length: int | None = None) -> tuple[str, int]:
    """sha256 and length of a file's bytes (from offset, at most length)."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        f.seek(offset)
        left = length if length is not None else 1 << 62
        while left > 0:
            b = f.read(min(MIB, left))
            if not b:
                break
            h.update(b)
            n += len(b)
            left -= len(b)
    return h.hexdigest(), n


def sha_cmd(cmd: list[str]) -> tuple[str, int]:
    """sha256 and length of a command's stdout; RuntimeError if it fails."""
    h = hashlib.sha256()
    n = 0
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    for b in iter(lambda: p.stdout.read(MIB), b""):
        h.update(b)
        n += len(b)
    rc = p.wait()
    if rc != 0:
        raise RuntimeError(f"{shlex.join(cmd)[:200]} failed with status {rc}")
    return h.hexdigest(), n


def verify_contenders(cs: list[dict], want: tuple[str, int]) -> None:
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
            fail(f"{c['name']}: bytes differ from the raw file: {got} != {want}")
        log(f"{c['name']}: bytes match the raw file (sha256 {want[0][:16]}…, {want[1]} bytes)")


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
        # slabfs mounts only on an existing directory (as a user would:
        # mkdir -p, then mount).
        Path(self.mnt).mkdir(parents=True, exist_ok=True)
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


class Mounts:
    """The `slabfs mount` daemons of one run, each on workdir/mnt with its log
    workdir/daemon-NNN-NAME.log (NNN counts the mounts, `digits` wide): what
    stop_all() (in a `finally`) finds live, it unmounts. `options` are Mount
    options for every mount (threads, extra_args, ...)."""

    def __init__(self, slabfs: Path, workdir: Path, digits: int = 3, **options):
        self.slabfs, self.workdir, self.digits, self.options = slabfs, workdir, digits, options
        self.live: list[Mount] = []
        self.count = 0

    def new(self, store: Path, array: str, name: str, start: bool = True, **options) -> Mount:
        self.count += 1
        m = Mount(self.slabfs, store, self.workdir / "mnt", array,
                  self.workdir / f"daemon-{self.count:0{self.digits}d}-{name}.log",
                  **{**self.options, **options})
        self.live.append(m)
        return m.start() if start else m

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

    @contextmanager
    def mounted(self, store: Path, array: str, name: str, **options):
        """A new mount for the `with` block, unmounted after it."""
        m = self.new(store, array, name, start=False, **options)
        try:
            m.start()
            yield m
        finally:
            self.stop(m)


# --------------------------------------------------------------------------
# random 4 KiB reads (bench_mount.py, bench_sharded.py)
#
# Both children read --random-reads distinct 4 KiB-aligned offsets drawn with
# random.Random(seed) and print the latency of each read, the read's time and
# CPU and the sha256 of the bytes. argv: path [stats file] nbytes n seed

# os.pread through a mount; the daemon's .slabfs/stats read before and after
# counts the FUSE requests (less the stats reads themselves) and cache misses.
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

# zarr-python reading the same bytes as whole rows, arr[z, y, :] (a 4 KiB
# aligned offset is one whole row of a (N, ny, 1024) float32 array), the
# array opened once and 16 untimed warm-up reads first.
ZARR_ROWS_CHILD = r"""
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


def random_pages_sha(raw: Path, nbytes: int, n: int, seed: int) -> str:
    """sha256 of the raw file's bytes at the children's random offsets."""
    offs = [p * PAGE for p in random.Random(seed).sample(range(nbytes // PAGE), n)]
    h = hashlib.sha256()
    with open(raw, "rb") as f:
        for o in offs:
            h.update(os.pread(f.fileno(), PAGE, o))
    return h.hexdigest()


def check_random_reads(r: dict, want_sha: str, who: str) -> dict:
    """A random-read child's result: its bytes checked, its latencies summed up
    (lat) and kept in µs (lat_us)."""
    if r["sha256"] != want_sha:
        raise RuntimeError(f"{who}: the random reads' bytes differ from the raw file")
    r["lat"] = lat_summary(r["lat_ns"])
    r["lat_us"] = [round(x / 1000.0, 2) for x in r.pop("lat_ns")]
    return r


def random_row(label: str, rs: list[dict]) -> tuple[str, dict]:
    """A Markdown row of random-read runs: median of the per-run medians,
    their min-max, mean, p90 and p99 of all reads (µs)."""
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


# --------------------------------------------------------------------------
# statistics and report


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def lat_summary(lat_ns: list[int]) -> dict:
    """Per-op latencies (ns) summed up in µs."""
    s = sorted(lat_ns)
    n = len(s)
    q = lambda p: s[min(n - 1, int(p * n))] / 1000.0  # noqa: E731
    return {"median_us": statistics.median(s) / 1000.0, "mean_us": statistics.fmean(s) / 1000.0,
            "p10_us": q(0.10), "p90_us": q(0.90), "p99_us": q(0.99),
            "min_us": s[0] / 1000.0, "max_us": s[-1] / 1000.0, "n": n}


def table(cs: list[dict], res: dict[str, list[dict]], nbytes: int) -> tuple[str, dict]:
    """Markdown table of a pass: process and in-process read times (median,
    min-max), throughput and CPU per contender; returns (table, stats)."""
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


def verdict(x: float, target: float) -> str:
    return f"**met** (≥ {target:g})" if x >= target else f"**missed** (< {target:g})"


def ratio_rows(stats: dict, rows: list[tuple]) -> tuple[str, list[dict]]:
    """rows: (label, key_a, key_b, target or None, use_read_of_b). The value is
    the throughput ratio a / b from median times (> 1: a is faster); with
    use_read_of_b, b's in-process read time is used instead of its process time.
    Rows whose contenders are not in stats (did not run) are left out."""
    out = []
    lines = ["| ratio (throughput, medians) | value | target |", "|---|---:|---|"]
    for label, a, b, target, read_b in rows:
        if a not in stats or b not in stats:
            continue
        ta = stats[a]["wall"]["median"]
        tb = stats[b]["read"]["median"] if read_b else stats[b]["wall"]["median"]
        x = tb / ta
        lines.append(f"| {label} | **{x:.2f}** | {'–' if target is None else verdict(x, target)} |")
        out.append({"label": label, "value": x, "target": target})
    return "\n".join(lines), out


def foreign_note(res: dict, redone: int, max_foreign: float,
                 preliminary: bool = True) -> tuple[str, float]:
    """The sentence on other processes' CPU during the kept runs; returns
    (it, the worst run's share). With preliminary, runs kept above
    max_foreign mark the figures preliminary."""
    worst = max(r["foreign"] for rs in res.values() for r in rs)
    kept_bad = sum(r["foreign"] > max_foreign for rs in res.values() for r in rs)
    note = (f"Other processes' CPU during kept runs: at most {worst:.0%} of the machine; "
            f"{redone} run(s) redone because others were busy")
    if kept_bad:
        note += f"; {kept_bad} kept run(s) still above {max_foreign:.0%}"
        if preliminary:
            note += ": **these figures are preliminary**"
    return note + ".", worst


def jsonable(x):
    """x with paths as strings, tuples as lists and callables left out."""
    if isinstance(x, dict):
        return {str(k): jsonable(val) for k, val in x.items() if not callable(val)}
    if isinstance(x, (list, tuple)):
        return [jsonable(val) for val in x]
    if isinstance(x, Path):
        return str(x)
    return x


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(jsonable(obj), indent=1, default=str) + "\n")


# --------------------------------------------------------------------------
# options

PERF_CAT_HELP = ("afterwards, profile each `slabfs cat` contender once with "
                 "`perf record -g` (untimed; reports saved in the data directory)")


def add_common_args(ap: argparse.ArgumentParser, reps: int = 7, cold: bool = True,
                    perf: str | None = PERF_CAT_HELP) -> None:
    """--reps, --warmup, --data-dir, --cold (unless cold=False),
    --max-foreign, --idle-wait, --retries, --perf (help text perf; None:
    no --perf), --no-build and --skip-venv."""
    ap.add_argument("--reps", type=int, default=reps, help=f"timed rounds (default {reps})")
    ap.add_argument("--warmup", type=int, default=1, help="discarded warm-up rounds (default 1)")
    ap.add_argument("--data-dir", type=Path, default=REPO / "bench-data",
                    help="where the generated data is cached (default: <repo>/bench-data)")
    if cold:
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
    if perf is not None:
        ap.add_argument("--perf", action="store_true", help=perf)
    ap.add_argument("--no-build", action="store_true",
                    help="use the existing target/release/slabfs")
    ap.add_argument("--skip-venv", action="store_true", help="do not run scripts/venv.sh")


# --------------------------------------------------------------------------
# `perf record -g` of a `slabfs cat` (bench_aggregation.py, bench_sharded.py)

# perf categories for a `slabfs cat` process: (name, test), first match wins.
# A test is ("any", keys): some frame of the chain contains a key; ("leaf",
# keys): the innermost frame does; None: everything left.
CAT_CATEGORIES = [
    ("zstd decode", ("any", ("ZSTD_", "HUF_", "FSE_", "HIST_", "zstd::"))),
    ("byte swap (big-endian netCDF -> native)", ("any", ("swap_in_place", "dtype::swap"))),
    # swap_in_place is inlined into the netCDF-3 reader: its SSE2 loop is
    # the only work read_region does itself.
    ("byte swap, inlined in `Netcdf3Array::read_region`",
     ("leaf", ("Netcdf3Array as slabfs::engine::array::ArraySource>::read_region",))),
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
             freq: int = 2999) -> dict:
    """Untimed `perf record -g` of `loops` runs of cmd in a row (stdout to
    /dev/null), after an idle wait, redone while others were busy; returns
    the share of slabfs's samples in each category and the top symbols."""
    script = f"for i in $(seq {loops}); do {shlex.join(cmd)} > /dev/null || exit 1; done"

    def attempt(_):
        wait_idle(args.idle_wait)
        return run_one({"name": f"perf {label}", "inproc": False,
                        "cmd": ["perf", "record", "-g", "-F", str(freq), "-q", "-o",
                                f"{base}.data", "--", "sh", "-c", script]})

    r, _ = redo_while_busy(attempt, args, lambda r: (
        f"[perf] {label}: {loops} runs in {r['wall_s']:.3f}s other-load {r['foreign']:.0%}"))
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


def perf_cat_profiles(cs: list[dict], args, data_dir: Path, prefix: str,
                      loops: int = 5) -> list[dict]:
    """perf_cat of every `slabfs cat` contender (key slabfs_*), saved as
    data_dir/PREFIX-KEY*."""
    profiles = []
    for c in cs:
        if c["key"].startswith("slabfs_"):
            p = perf_cat(c["name"].replace("slabfs cat, ", "`slabfs cat` "), c["cmd"],
                         data_dir / f"{prefix}-{c['key']}", args, loops=loops)
            p["key"] = c["key"]
            profiles.append(p)
    return profiles


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


def perf_section(profiles: list[dict], warm_stats: dict, counts: bool = True) -> str:
    """The report's section on perf_cat_profiles: the perf_table against the
    timed warm runs' median CPU, and each profile's top symbols (with
    counts: after its samples and threads)."""
    out = [f"\n### Where `slabfs cat`'s CPU goes (`perf record -g`, {profiles[0]['loops']} "
           "extra untimed runs each)\n",
           perf_table(profiles, [warm_stats[p["key"]]["cpu_median"] for p in profiles])]
    for p in profiles:
        bd = p["breakdown"]
        how = f"{bd['samples']} samples, {bd['threads']} threads; " if counts else ""
        out.append(f"\n{p['label']}: {how}top symbols ({p['report']}):")
        out += [f"    {t}" for t in p["top"][:8]]
    return "\n".join(out)


# --------------------------------------------------------------------------
# data: the smooth field


def data_cached(stamp_path: Path, stamp: dict, paths) -> bool:
    """True when every path exists and stamp_path holds stamp: the data a
    generator made earlier is the data it would make now."""
    if not (stamp_path.exists() and all(Path(p).exists() for p in paths)):
        return False
    try:
        return json.loads(stamp_path.read_text()) == stamp
    except (OSError, ValueError):
        return False



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


# --------------------------------------------------------------------------
# data: the Zarr v3 field array (bench_read.py, bench_mount.py)

FIELD_CHUNK = (1, 512, 512)  # 262144 float32 = 1 MiB
FIELD_FORMAT_VERSION = 1  # bump when the generator changes
FIELD_SEED = 20240611
FIELD_ARRAY = "field"  # array path inside the store


def chunk_bytes(store: Path, array: str) -> int:
    return sum(f.stat().st_size for f in (store / array).rglob("*")
               if f.is_file() and f.name != "zarr.json")


def build_field(data_dir: Path, size_mib: int) -> dict:
    """Create (or reuse) the float32 Zarr v3 array (size_mib/4, 1024, 1024),
    chunks FIELD_CHUNK, zarr-python's default codecs (bytes + zstd level 0),
    and the same values as a raw file; return their description."""
    import numpy as np
    import zarr

    if size_mib < 4 or size_mib % 4:
        fail("--size-mib must be a positive multiple of 4")
    nz, ny, nx = size_mib // 4, 1024, 1024
    shape = (nz, ny, nx)
    name = f"f32-{size_mib}mib"
    store = data_dir / f"{name}.zarr"
    raw = data_dir / f"{name}.raw"
    stamp_path = data_dir / f"{name}.json"
    stamp = {
        "format": FIELD_FORMAT_VERSION,
        "seed": FIELD_SEED,
        "shape": list(shape),
        "chunks": list(FIELD_CHUNK),
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
        log(f"generating {size_mib} MiB of data in {data_dir} ...")
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(store, ignore_errors=True)
        root = zarr.open_group(str(store), mode="w", zarr_format=3)
        # compressors="auto" is zarr-python's default: bytes + zstd(level=0).
        arr = root.create_array(FIELD_ARRAY, shape=shape, chunks=FIELD_CHUNK, dtype="float32",
                                compressors="auto", fill_value=0.0)
        rng = np.random.default_rng(FIELD_SEED)
        with open(raw, "wb") as fraw:
            for z in range(nz):
                slab = field_slab(z, nz, ny, nx, rng)
                arr[z] = slab
                fraw.write(slab.tobytes())  # native order, C order
        stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    meta = json.loads((store / FIELD_ARRAY / "zarr.json").read_text())
    raw_size = raw.stat().st_size
    assert raw_size == size_mib * MIB, (raw_size, size_mib)
    stored = chunk_bytes(store, FIELD_ARRAY)
    return {
        "store": store,
        "raw": raw,
        "array": FIELD_ARRAY,
        "shape": shape,
        "chunks": FIELD_CHUNK,
        "nbytes": raw_size,
        "n_chunks": nz * (ny // FIELD_CHUNK[1]) * (nx // FIELD_CHUNK[2]),
        "stored_bytes": stored,
        "ratio": raw_size / stored,
        "codecs": meta["codecs"],
        "cached": cached,
    }


def verify_slabfs(slabfs: Path, data: dict) -> None:
    """Untimed: `slabfs cat` of build_field's array must reproduce the raw file exactly."""
    got = sha_cmd([str(slabfs), "cat", str(data["store"]), data["array"]])
    want = sha_file(data["raw"])
    if got != want:
        fail(f"slabfs cat output differs from the raw file: {got} != {want}")
    log("slabfs cat output matches the raw file (sha256)")


# --------------------------------------------------------------------------
# data: the netCDF-3 aggregation (bench_aggregation.py, bench.py)

AGG_FORMAT_VERSION = 1  # bump when the generator changes
AGG_SEED = 20241204
AGG_NY, AGG_NX = 512, 512  # one time step = 1 MiB of float32
AGG_VAR = "tas"


def stub_standard_names() -> None:
    """Make cfdm's standard-name-table lookup fail at once: cfdm looks the
    CF standard-name table up on the internet while reading (a 5 s timeout,
    retried on every check); stubbed, it fails as on a machine without
    network, so DNS latency is not counted against cf-python."""
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
    v = ds.createVariable(AGG_VAR, "f4", ("time", "lat", "lon"))
    v.standard_name = "air_temperature"
    v.units = "K"
    v[:] = data
    ds.close()


def build_aggregation(data_dir: Path, size_mib: int, parts: int, ny: int = AGG_NY,
                      nx: int = AGG_NX) -> dict:
    """Create (or reuse) the fragments, the two aggregations (NCA descriptor,
    CF-1.13 aggregation written by cf-python), the single file and the raw
    file of bench_aggregation.py's module doc; return their description. One
    time step is a (ny, nx) float32 field (default 512 x 512 = 1 MiB);
    scripts/bench.py uses smaller ones for its --quick runs."""
    import numpy as np

    step = ny * nx * 4
    nt = size_mib * MIB // step
    if nt * step != size_mib * MIB or nt < parts or nt % parts:
        fail("--size-mib must hold a multiple of --partitions time steps")
    per = nt // parts
    suffix = "" if (ny, nx) == (AGG_NY, AGG_NX) else f"-{ny}x{nx}"
    root = data_dir / f"agg-{size_mib}mib-{parts}p{suffix}"
    paths = {
        "root": root,
        "frag": root / "frag",
        "nca": root / f"{AGG_VAR}.nca.json",
        "cfa": root / f"{AGG_VAR}_cfa.nc",
        "single": root / "single.nc",
        "raw": root / f"{AGG_VAR}.raw",
    }
    stamp_path = root / "stamp.json"
    stamp = {"format": AGG_FORMAT_VERSION, "seed": AGG_SEED, "shape": [nt, ny, nx],
             "partitions": parts}
    cached = data_cached(stamp_path, stamp, paths.values())
    if not cached:
        import netCDF4

        log(f"generating {size_mib} MiB in {parts} netCDF-3 partitions in {root} ...")
        shutil.rmtree(root, ignore_errors=True)
        paths["frag"].mkdir(parents=True)
        rng = np.random.default_rng(AGG_SEED)
        single = netCDF4.Dataset(paths["single"], "w", format="NETCDF3_64BIT_OFFSET")
        single.Conventions = "CF-1.8"
        for d, n in (("time", nt), ("lat", ny), ("lon", nx)):
            single.createDimension(d, n)
        sv = single.createVariable(AGG_VAR, "f4", ("time", "lat", "lon"))
        sv.standard_name = "air_temperature"
        sv.units = "K"
        partitions = []
        t0 = time.perf_counter()
        with open(paths["raw"], "wb") as fraw:
            for i in range(parts):
                block = np.stack([field_slab(i * per + k, nt, ny, nx, rng)
                                  for k in range(per)])
                block += np.float32(273.15)  # kelvin
                fmt = "NETCDF3_CLASSIC" if i % 2 == 0 else "NETCDF3_64BIT_OFFSET"
                rel = f"frag/{AGG_VAR}_{i:02d}.nc"
                write_fragment(root / rel, fmt, block, i * per)
                sv[i * per:(i + 1) * per] = block
                fraw.write(block.tobytes())
                partitions.append({"index": [i],
                                   "location": [[i * per, (i + 1) * per], [0, ny], [0, nx]],
                                   "format": "netCDF",
                                   "data": {"file": rel, "ncvar": AGG_VAR}})
        single.close()
        log(f"  fragments, single file and raw file written in {time.perf_counter() - t0:.1f}s")
        desc = {"dimensions": {"time": nt, "lat": ny, "lon": nx},
                "variables": {AGG_VAR: {
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
            fail(f"cf-python aggregated the fragments into {len(fields)} fields")
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
