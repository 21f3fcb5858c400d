#!/usr/bin/env python3
"""FUSE mount benchmark: reading the 256 MiB benchmark array through a real
`slabfs mount`, against `slabfs cat`, plain `cat`/`dd` of the same bytes
stored raw, and zarr-python reading the same small slices.

Usage (from the repository root, as root for the read_ahead_kb variant):

    .venv/bin/python scripts/bench_mount.py [--size-mib 256] [--reps 5] [--random-reads 2000]

The data is bench_read.py's (benchlib.build_field, cached in --data-dir): a
float32 Zarr v3 array (N, 1024, 1024), chunks (1, 512, 512) = 1 MiB, bytes +
zstd, and the same values as a raw file. Every round (after --warmup
discarded rounds) runs, in this order, one fresh process each:

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
during it, with scripts/benchlib.py's machinery (its Mount too, and the
random-read children that bench_sharded.py runs as well); the CPU of the
slabfs daemon is counted as the step's own. Before timing, the bytes read
through a mount are checked against the raw file (sha256), and every random
read's bytes (pread and zarr) are checked too. Prints Markdown tables; writes
the raw numbers to <data-dir>/results-mount.json. --perf records one extra,
untimed `slabfs cat` and fresh-mount dd per variant with `perf record -a -g`,
prints where the CPU went and saves the data and reports in --data-dir.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from pathlib import Path

import benchlib as lib
from benchlib import log

MIB = lib.MIB
PAGE = lib.PAGE


# --------------------------------------------------------------------------
# profile


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
        self.daemons = lib.Mounts(slabfs, workdir, threads=args.threads)

    # -- helpers

    def new_mount(self, v: dict) -> lib.Mount:
        return self.daemons.new(self.data["store"], self.data["array"], v["key"],
                                read_ahead_kb=v["read_ahead_kb"])

    def stop(self, m: lib.Mount) -> None:
        self.daemons.stop(m)

    def stop_all(self) -> None:
        self.daemons.stop_all()

    def measured(self, key: str, label: str, run, tag: str, keep: bool,
                 redo_setup=None) -> dict:
        """Run `run()` after waiting for an idle machine; redo it (calling
        redo_setup() first, e.g. a new fresh mount) while other processes were
        busy, at most --retries times."""
        a = self.args

        def attempt(i):
            if i and redo_setup:
                redo_setup()
            lib.wait_idle(a.idle_wait)
            return run()

        def describe(r):
            extra = f" median {r['lat']['median_us']:.1f}us" if "lat" in r else ""
            return (f"[{tag}] {label:<34} {r['wall_s']:.3f}s cpu {r['cpu_s']:.2f}s "
                    f"daemon {r['daemon_cpu_s']:.2f}s{extra} other-load {r['foreign']:.0%}")

        r, redone = lib.redo_while_busy(attempt, a, describe, keep=keep)
        self.redone += redone
        if keep:
            self.res.setdefault(key, []).append(r)
        return r

    def seq(self, path: Path, tool: str, m: lib.Mount | None) -> dict:
        if tool == "dd":
            cmd = ["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"]
        else:
            cmd = ["cat", str(path)]
        return lib.run_child(cmd, daemon=m)

    def random_pread(self, m: lib.Mount) -> dict:
        a, d = self.args, self.data
        r = lib.run_child([str(self.py), "-c", lib.PREAD_CHILD, str(m.file),
                           str(m.mnt / ".slabfs" / "stats"), str(d["nbytes"]),
                           str(a.random_reads), str(a.seed)], daemon=m, capture=True)
        return self.check_random(r, "pread")

    def random_zarr(self, m: lib.Mount | None) -> dict:
        a, d = self.args, self.data
        r = lib.run_child([str(self.py), "-c", lib.ZARR_ROWS_CHILD, str(d["store"] / d["array"]),
                           str(d["nbytes"]), str(a.random_reads), str(a.seed)],
                          daemon=m, capture=True)
        return self.check_random(r, "zarr")

    def check_random(self, r: dict, who: str) -> dict:
        lib.check_random_reads(r, self.random_sha, who)
        if who == "pread" and r.get("daemon_requests") is not None:
            n = self.args.random_reads
            if r["daemon_requests"] < n:
                log(f"WARNING: only {r['daemon_requests']} of {n} preads reached the daemon "
                    "(the kernel page cache served the rest)")
        return r

    # -- verification (untimed)

    def verify(self) -> None:
        d = self.data
        want = lib.sha_file(d["raw"])
        self.random_sha = lib.random_pages_sha(d["raw"], d["nbytes"], self.args.random_reads,
                                               self.args.seed)
        m = self.new_mount(self.variants[0])
        try:
            if lib.sha_file(m.file) != want:
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
        self.measured("slabfs_cat", "slabfs cat", lambda: lib.run_child(
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

        def attempt(_):
            lib.wait_idle(self.args.idle_wait)
            return lib.run_child(["perf", "record", "-a", "-g", "-F", "1999", "-q", "-o",
                                  f"{base}.data", "--", str(self.slabfs), "cat", str(d["store"]),
                                  d["array"]])

        r, _ = lib.redo_while_busy(attempt, self.args, lambda r: (
            f"[perf] slabfs cat {r['wall_s']:.3f}s other-load {r['foreign']:.0%}"))
        out["slabfs_cat"] = {"run": r, "label": "`slabfs cat`",
                             "breakdown": perf_breakdown(Path(f"{base}.data"), self.slabfs.name)}
        for v in self.variants:
            base = self.data["dir"] / f"perf-mount-{v['key']}"
            stats = {}

            def attempt(_, v=v, base=base, stats=stats):
                m = self.new_mount(v)
                try:
                    lib.wait_idle(self.args.idle_wait)
                    # System-wide for exactly the dd's lifetime: the daemon's
                    # threads (its rayon workers inherit the name fuser-N),
                    # dd, and idle CPUs (swapper).
                    r = lib.run_child(["perf", "record", "-a", "-g", "-F", "1999", "-q", "-o",
                                       f"{base}.data", "--", "dd", f"if={m.file}",
                                       "of=/dev/null", "bs=1M", "status=none"], daemon=m)
                    stats["last"] = m.stats()
                finally:
                    self.stop(m)
                return r

            r, _ = lib.redo_while_busy(attempt, self.args, lambda r, v=v: (
                f"[perf] dd, fresh mount{v['label']} {r['wall_s']:.3f}s "
                f"other-load {r['foreign']:.0%}"))
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
            out[v["key"]] = {"run": r, "stats": stats["last"], "reports": reports,
                             "breakdown": bd, "label": f"fresh-mount `dd`{v['label']}"}
            log(f"perf ({v['key']}): dd {r['wall_s']:.3f}s, reports {base}-*.txt")
        return out


# --------------------------------------------------------------------------
# report


def seq_row(label: str, rs: list[dict], mib: float) -> tuple[str, dict]:
    w = lib.summary([r["wall_s"] for r in rs])
    cpu = statistics.median([r["cpu_s"] for r in rs])
    dcpu = statistics.median([r["daemon_cpu_s"] for r in rs])
    s = {"wall": w, "cpu_median": cpu, "daemon_cpu_median": dcpu, "mib_s": mib / w["median"]}
    dc = f"{dcpu:.2f}" if any(r["daemon_cpu_s"] for r in rs) else "–"
    return (f"| {label} | {w['median']:.3f} | {w['min']:.3f}–{w['max']:.3f} | "
            f"{mib / w['median']:.0f} | {cpu:.2f} | {dc} |"), s


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
            row, s = lib.random_row(f"`os.pread`, warm mount{v['label']}", res[k])
            lines.append(row)
            out["random"][k] = s
    row, s = lib.random_row("zarr-python `arr[z, y, :]`, opened once", res["zarr_random"])
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
        lines.append(f"| {label} | **{x:.2f}** | {lib.verdict(x, t)} |")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256, help="array size in MiB (multiple of 4)")
    ap.add_argument("--random-reads", type=int, default=2000,
                    help="random 4 KiB reads per run, distinct aligned offsets (default 2000)")
    ap.add_argument("--seed", type=int, default=20241122, help="seed of the random offsets")
    ap.add_argument("--read-ahead-kb", type=int, default=1024,
                    help="the extra variant's `slabfs mount --read-ahead-kb` (0: no variant; "
                         "skipped when slabfs lacks the option or not root; default 1024)")
    ap.add_argument("--threads", type=int, default=None, help="`slabfs mount --threads`")
    lib.add_common_args(ap, reps=5, cold=False,
                        perf="afterwards, profile one extra fresh-mount dd per variant with "
                             "`perf record -a -g` (reports saved in --data-dir)")
    args = ap.parse_args()
    command = lib.command_line()

    py = lib.use_venv(args.skip_venv, ("numpy", "zarr"))
    lib.require_tools("fusermount3", "dd", "cat")
    if args.random_reads < 1:
        lib.fail("--random-reads must be positive")

    data_dir = lib.abs_dir(args.data_dir)
    built = lib.build_slabfs(args.no_build)
    data = lib.build_field(data_dir, args.size_mib)
    data["dir"] = data_dir
    if args.random_reads > data["nbytes"] // PAGE:
        lib.fail(f"--random-reads exceeds the file's {data['nbytes'] // PAGE} pages")
    slabfs, workdir = lib.private_binary(built, prefix="slabfs-bench-mount-")
    lib.verify_slabfs(slabfs, data)

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
    lib.exit_on_signals()
    try:
        b.verify()
        b.run()
        if args.perf:
            prof = b.perf()
    finally:
        b.stop_all()

    rep = report(b)
    hdr, m, v = lib.header_lines(command, slabfs)
    note, worst = lib.foreign_note(b.res, b.redone, args.max_foreign)
    print()
    print("\n".join(hdr))
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
        "command": command, "machine": m, "versions": v, "data": data,
        "variants": variants, "runs": b.res, "mounts": b.mounts,
        "stats": {k: rep[k] for k in ("seq", "random", "ratios", "mount") if k in rep},
        "tables": rep["tables"], "load": {"worst_foreign": worst, "redone": b.redone},
        "perf": prof,
    }
    out = data_dir / "results-mount.json"
    lib.write_json(out, results)
    try:
        slabfs.unlink()  # the private copy of the binary; the daemon logs stay
    except OSError:
        pass
    log(f"raw numbers in {out}; daemon logs in {workdir}")


if __name__ == "__main__":
    main()
