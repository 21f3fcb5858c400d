#!/usr/bin/env python3
"""Remote read benchmark: a 256 MiB zstd Zarr array in a local S3 server, read
sequentially through a `slabfs mount` of the bucket (`dd bs=1M`) against
zarr-python 3 (over obstore) and tensorstore's `s3` kvstore, with 0 and with
20 ms added to every request; then random 4 KiB reads through the mount,
counting the GETs they cost.

Usage (from the repository root, as root: it mounts):

    .venv/bin/python scripts/bench_remote.py [--size-mib 256] [--reps 3]
        [--latency-ms 0,20] [--data-dir bench-data] [--scratch DIR]

What it does:

1. The data: benchlib.build_field (the float32 Zarr v3 array of
   bench_read.py, 1 MiB chunks, zarr-python's default bytes + zstd).
2. The server: s3s-fs 0.14.1 (crates.io), built once into --scratch
   (outside the repository) with three fixes, because stock it is the
   bottleneck (docs/perf/remote.md): it reads files in 4 KiB pieces (now
   1 MiB), reads past the end of a requested range (now stops there), and
   leaves Nagle's algorithm on (now TCP_NODELAY). The array is uploaded
   with boto3 (PutObject: the server keeps each object's ETag).
3. Latency: every client talks to the server through a delay line, a TCP
   proxy run by this script in a process of its own (`--proxy`): bytes from
   the client reach the server `latency` later; bytes back are forwarded at
   once. So every request costs one more `latency` of round trip, as a
   distant server would. The proxy also counts the GET and HEAD requests it
   forwards (for the random-read check).
4. The ceilings: curl fetching every chunk object, 64 at a time, no
   decoding, through the same proxy (what the server, the proxy and the
   loopback deliver); and a slabfs mount of the local copy of the array read
   the same way (the decode and FUSE path with no network). And the CPU
   floor of the slabfs runs: all the CPU the machine spent during one
   (dd, the daemon, the server, the proxy) over the number of cores.
5. Contenders, each a fresh process, interleaved, --reps times after a
   warm-up round, for each latency:
   - slabfs: `slabfs mount s3://bench/f32-256mib.zarr MNT` (started before
     the timing, so its listing is not timed), then `dd if=MNT/field
     of=/dev/null bs=1M` timed; a new mount for every run, so its chunk
     cache and the kernel's page cache are cold;
   - zarr-python: `zarr.open_array(zarr.storage.ObjectStore(S3Store(...)))[:]`
     (its default concurrency, `async.concurrency`);
   - tensorstore: `ts.open({"driver": "zarr3", "kvstore": {"driver": "s3",
     ...}}).read()` (its default request concurrency).
   - slabfs, netCDF-3: the same values written by netCDF4-python as a
     64-bit-offset netCDF-3 file, one object in the bucket, mounted and
     read the same way (no peer reads a classic file from S3 here);
   - slabfs, netCDF-4: bench_hdf5.py's 256 MiB netCDF-4 file (zstd 1 +
     shuffle, netCDF4-python), one object, mounted and read the same way.
   The Python peers' time is their in-process open + read (no interpreter
   start-up), the fair match for dd's time on a mount already up.
   Every contender's bytes are checked once (sha256 against the raw file).
6. Random 4 KiB reads: a new mount, then 256 `pread`s of 4 KiB at seeded
   random page offsets (POSIX_FADV_RANDOM: no kernel readahead), then the
   same 256 again. The proxy's GET count during the first pass must be the
   number of distinct chunks those pages touch (one ranged GET per cold
   chunk; a 4 KiB page of this array spans two chunks), during the second
   pass zero.
7. Markdown tables on stdout, raw numbers in <data-dir>/remote-results.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchlib as lib

MIB = lib.MIB
BUCKET = "bench"
KEY_ID = "slabfsbench"
SECRET = "slabfsbenchsecret"
S3S_VERSION = "0.14.1"
RANDOM_READS = 256


# --------------------------------------------------------------------------
# the delay-line proxy (run as `bench_remote.py --proxy ...`)


def proxy_main(listen_port: int, upstream_port: int, delay_ms: float, counts: str) -> None:
    """Forward 127.0.0.1:listen_port to 127.0.0.1:upstream_port; client bytes
    are held `delay_ms` before they go on. GET and HEAD requests are counted
    into the 16-byte file `counts` (two little-endian u64)."""
    delay = delay_ms / 1000.0
    with open(counts, "r+b") as f:
        shared = mmap.mmap(f.fileno(), 16)
    lock = threading.Lock()
    tally = [0, 0]

    def count(data: bytes, tail: bytes) -> bytes:
        seen = tail + data
        gets, heads = seen.count(b"GET /"), seen.count(b"HEAD /")
        if gets or heads:
            with lock:
                tally[0] += gets
                tally[1] += heads
                struct.pack_into("<QQ", shared, 0, *tally)
        # Keep the last bytes, minus any request line already counted.
        t = seen[-5:]
        return b"" if b"GET /" in t or b"HEAD /" in t else t

    def close(*socks: socket.socket) -> None:
        # Both directions of both ends: the other thread's recv returns.
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def up(c: socket.socket, u: socket.socket) -> None:
        tail = b""
        try:
            while data := c.recv(1 << 16):
                arrived = time.monotonic()
                tail = count(data, tail)
                if delay:
                    wait = arrived + delay - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                u.sendall(data)
        except OSError:
            pass
        close(u, c)

    def down(c: socket.socket, u: socket.socket) -> None:
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        try:
            while n := u.recv_into(buf):
                c.sendall(view[:n])
        except OSError:
            pass
        close(u, c)

    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", listen_port))
    ls.listen(1024)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        u = socket.create_connection(("127.0.0.1", upstream_port))
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=up, args=(c, u), daemon=True).start()
        threading.Thread(target=down, args=(c, u), daemon=True).start()


class Proxy:
    def __init__(self, upstream_port: int, delay_ms: float, workdir: Path):
        self.port = free_port()
        self.delay_ms = delay_ms
        self.counts = workdir / f"proxy-{self.port}.counts"
        self.counts.write_bytes(bytes(16))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--proxy", str(self.port), str(upstream_port),
             str(delay_ms), str(self.counts)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self.proc.stdout.readline().strip() == b"ready"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> tuple[int, int]:
        """(GETs, HEADs) forwarded so far."""
        return struct.unpack("<QQ", self.counts.read_bytes())

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    t0 = time.perf_counter()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.perf_counter() - t0 > 60:
                lib.fail(f"{what} did not start on port {port}")
            time.sleep(0.05)


# --------------------------------------------------------------------------
# the S3 server


PATCHES = [
    # file, old, new: read 1 MiB at a time and stop at the range's end.
    ("src/s3.rs",
     "let body = bytes_stream(ReaderStream::with_capacity(file, 4096), content_length_usize);",
     "let body = bytes_stream(ReaderStream::with_capacity("
     "tokio::io::AsyncReadExt::take(file, content_length), 1 << 20), content_length_usize);"),
    # No Nagle: a small reply must not wait for the client's delayed ACK.
    ("src/main.rs",
     "        let conn = http_server.serve_connection(TokioIo::new(socket), service.clone());",
     "        let _ = socket.set_nodelay(true);\n"
     "        let conn = http_server.serve_connection(TokioIo::new(socket), service.clone());"),
    # Listings carry each object's ETag, as S3's do (a disk cache keys its
    # blocks by them: bench_disk_cache.py).
    ("src/s3.rs",
     "        // Sort before filtering and limiting\n",
     "        for obj in &mut objects {\n"
     "            if let Some(k) = obj.key.clone()\n"
     "                && let Ok(Some(info)) = self.load_internal_info(&input.bucket, &k).await\n"
     "                && let Some(t) = crate::checksum::load_e_tag(&info)\n"
     "            {\n"
     "                obj.e_tag = Some(ETag::Strong(t));\n"
     "            }\n"
     "        }\n"
     "        // Sort before filtering and limiting\n"),
]


def build_s3s_fs(scratch: Path) -> Path:
    """s3s-fs S3S_VERSION from crates.io, patched (PATCHES), built in scratch."""
    binary = scratch / "s3s-target" / "release" / "s3s-fs"
    src = scratch / "s3s-fs"
    stamp = scratch / "s3s-fs.patched"
    # Built again when the patches change.
    patched = hashlib.sha256(repr(PATCHES).encode()).hexdigest() + "\n"
    if binary.exists() and stamp.exists() and stamp.read_text() == patched:
        return binary
    lib.log(f"building s3s-fs {S3S_VERSION} (patched) in {scratch} ...")
    fetch = scratch / "fetch"
    (fetch / "src").mkdir(parents=True, exist_ok=True)
    (fetch / "src" / "lib.rs").write_text("")
    (fetch / "Cargo.toml").write_text(
        '[package]\nname = "fetch-s3s-fs"\nversion = "0.0.0"\nedition = "2021"\n'
        f'[dependencies]\ns3s-fs = {{ version = "={S3S_VERSION}", features = ["binary"] }}\n')
    subprocess.run(["cargo", "fetch", "--manifest-path", str(fetch / "Cargo.toml")], check=True)
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob(f"registry/src/*/s3s-fs-{S3S_VERSION}"))
    if not found:
        lib.fail(f"s3s-fs {S3S_VERSION} source not found under {home}/registry/src")
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(found[0], src)
    for rel, old, new in PATCHES:
        p = src / rel
        text = p.read_text()
        if text.count(old) != 1:
            lib.fail(f"s3s-fs {rel}: the line to patch is not there once")
        p.write_text(text.replace(old, new))
    env = dict(os.environ, CARGO_TARGET_DIR=str(scratch / "s3s-target"))
    subprocess.run(["cargo", "build", "--release", "--features", "binary"], cwd=src, env=env,
                   check=True)
    stamp.write_text(patched)
    return binary


class Server:
    def __init__(self, binary: Path | None, root: Path, py: Path):
        """s3s-fs `binary` serving `root`; with no binary, moto_server (from
        the venv; in memory; slow: the server is then the bottleneck)."""
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        if binary is None:
            cmd = [str(py.parent / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)]
        else:
            cmd = [str(binary), "--host", "127.0.0.1", "--port", str(self.port),
                   "--access-key", KEY_ID, "--secret-key", SECRET, str(root)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL)
        wait_port(self.port, self.proc, cmd[0])

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def upload_file(endpoint: str, path: Path, key: str) -> None:
    import boto3
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    s3.upload_file(str(path), BUCKET, key)


def upload(endpoint: str, store: Path, prefix: str) -> int:
    """Every file of the Zarr store under prefix/ in BUCKET; returns the count."""
    import boto3
    from concurrent.futures import ThreadPoolExecutor

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    files = [p for p in store.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda p: s3.upload_file(str(p), BUCKET,
                                             f"{prefix}/{p.relative_to(store).as_posix()}"),
                    files))
    return len(files)


# --------------------------------------------------------------------------
# contenders

CHILD_HEAD = r"""
import hashlib, json, os, sys, time
endpoint, prefix, array, nbytes, check = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
def done(a, t0, t1, c0, c1):
    assert a.nbytes == nbytes, a.nbytes
    out = {"read_s": t1 - t0, "read_cpu_s": c1 - c0}
    if check:
        out["sha256"] = hashlib.sha256(a.tobytes()).hexdigest()
    print(json.dumps(out))
"""

ZARR_CHILD = CHILD_HEAD + r"""
import zarr
from obstore.store import S3Store
c0, t0 = time.process_time(), time.perf_counter()
store = S3Store("bench", endpoint=endpoint, region="us-east-1", access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"], client_options={"allow_http": True})
a = zarr.open_array(zarr.storage.ObjectStore(store, read_only=True), path=prefix + "/" + array, mode="r")[:]
t1, c1 = time.perf_counter(), time.process_time()
done(a, t0, t1, c0, c1)
"""

TS_SPEC = r"""
import tensorstore as ts
def kv(path):
    return {"driver": "s3", "bucket": "bench", "path": path, "endpoint": endpoint, "aws_region": "us-east-1"}
"""

TS_CHILD = CHILD_HEAD + TS_SPEC + r"""
c0, t0 = time.process_time(), time.perf_counter()
a = ts.open({"driver": "zarr3", "kvstore": kv(prefix + "/" + array + "/")}).result().read().result()
t1, c1 = time.perf_counter(), time.process_time()
done(a, t0, t1, c0, c1)
"""

def run_curl(endpoint: str, store: Path, prefix: str, workdir: Path) -> dict:
    """The network ceiling: curl (a native client, next to no CPU of its
    own) fetching every chunk object of the array, 64 at a time, SigV4
    signed, to /dev/null: what the server, the proxy and the loopback
    deliver, with no decoding and no FUSE."""
    keys = sorted(p.relative_to(store).as_posix() for p in (store / "field" / "c").rglob("*")
                  if p.is_file())
    cfg = workdir / "curl.cfg"
    cfg.write_text("".join(f'url = "{endpoint}/{BUCKET}/{prefix}/{k}"\noutput = "/dev/null"\n'
                           for k in keys))
    stored = sum((store / k).stat().st_size for k in keys)
    r = lib.run_child(["curl", "-s", "-f", "--parallel", "--parallel-max", "64",
                       "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", f"{KEY_ID}:{SECRET}",
                       "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-K", str(cfg)])
    r.update(read_s=r["wall_s"], stored_bytes=stored, objects=len(keys))
    return r


RANDOM_CHILD = r"""
import json, os, random, sys, time
path, nbytes, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
offs = [rng.randrange(nbytes // 4096) * 4096 for _ in range(n)]
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
out = {}
for name in ("cold", "warm"):
    lat = []
    for o in offs:
        t0 = time.perf_counter_ns()
        b = os.pread(fd, 4096, o)
        lat.append(time.perf_counter_ns() - t0)
        assert len(b) == 4096
    out[name] = lat
    print(name, flush=True)
    sys.stdin.readline()  # the parent reads the proxy's counts between passes
print(json.dumps(out))
"""


def pages_chunks(data: dict, n: int, seed: int) -> int:
    """Distinct chunks the random pages of RANDOM_CHILD touch."""
    nz, ny, nx = data["shape"]
    _, cy, cx = data["chunks"]
    rng = random.Random(seed)
    chunks = set()
    for _ in range(n):
        e = rng.randrange(data["nbytes"] // 4096) * 4096 // 4
        z, rest = divmod(e, ny * nx)
        y, x = divmod(rest, nx)
        for xx in range(x, x + 1024, cx):
            chunks.add((z, y // cy, xx // cx))
    return len(chunks)


# --------------------------------------------------------------------------
# runs


def mount(slabfs: Path, url: str, mnt: Path, log_path: Path, endpoint: str,
          array: str = "field") -> lib.Mount:
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    mnt.mkdir(parents=True, exist_ok=True)
    # The source is a URL: a str, never a Path ("s3://" would lose a slash).
    return lib.Mount(slabfs, url, mnt, array, log_path).start(timeout=120)


def build_netcdf3(data: dict, data_dir: Path, py: Path) -> Path:
    """The same values as a 64-bit-offset netCDF-3 file (netCDF4-python
    writes it from the raw file, once), for the classic-file rows."""
    out = data_dir / f"{data['raw'].stem}.nc"
    if not out.exists():
        script = (
            "import sys, numpy as np, netCDF4\n"
            "raw, out, shape = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]\n"
            "a = np.memmap(raw, dtype='<f4', mode='r', shape=tuple(shape))\n"
            "d = netCDF4.Dataset(out + '.tmp', 'w', format='NETCDF3_64BIT_OFFSET')\n"
            "for n, k in zip(('t', 'y', 'x'), shape):\n"
            "    d.createDimension(n, k)\n"
            "v = d.createVariable('field', 'f4', ('t', 'y', 'x'))\n"
            "for i in range(shape[0]):\n"
            "    v[i] = a[i]\n"
            "d.close()\n")
        subprocess.run([str(py), "-c", script, str(data["raw"]), str(out),
                        *map(str, data["shape"])], check=True)
        os.rename(f"{out}.tmp", out)
    return out


def run_slabfs(slabfs, url, workdir, endpoint, nbytes, check_raw=None, array="field") -> dict:
    m = mount(slabfs, url, workdir / "mnt", workdir / "mount.log", endpoint, array)
    try:
        if check_raw is not None:
            got = lib.sha_cmd(["cat", str(m.file)])
            if got != check_raw:
                lib.fail(f"slabfs mount: bytes differ from the raw file: {got} != {check_raw}")
            m.stop()
            m = mount(slabfs, url, workdir / "mnt", workdir / "mount.log", endpoint, array)
        r = lib.run_child(["dd", f"if={m.file}", "of=/dev/null", "bs=1M"], daemon=m)
        r["read_s"] = r["wall_s"]
        return r
    finally:
        m.stop()


def busy(r: dict) -> float:
    """The machine's CPU in use during a run (0..1 of all cores): the run's
    own processes (dd, the daemon) and everything else (the server, the
    proxy)."""
    own = (r["cpu_s"] + r.get("daemon_cpu_s", 0.0)) / (r["wall_s"] * os.cpu_count())
    return min(1.0, own + r["foreign"])


def run_local(slabfs, store: Path, workdir, nbytes) -> dict:
    """The same array mounted from the local disk (page cache warm) and
    read the same way: slabfs's own pipeline (decode, the FUSE path) with
    no network, server or proxy: the ceiling of the remote runs on this
    machine."""
    mnt = workdir / "mnt-local"
    mnt.mkdir(parents=True, exist_ok=True)
    m = lib.Mount(slabfs, str(store), mnt, "field", workdir / "mount-local.log").start(timeout=120)
    try:
        r = lib.run_child(["dd", f"if={m.file}", "of=/dev/null", "bs=1M"], daemon=m)
        r["read_s"] = r["wall_s"]
        return r
    finally:
        m.stop()


def run_random(slabfs, url, workdir, proxy: Proxy, data: dict, seed: int) -> dict:
    m = mount(slabfs, url, workdir / "mnt", workdir / "mount.log", proxy.endpoint)
    try:
        p = subprocess.Popen([sys.executable, "-c", RANDOM_CHILD, str(m.file),
                              str(data["nbytes"]), str(RANDOM_READS), str(seed)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        counts = [proxy.requests()]
        for _ in ("cold", "warm"):
            p.stdout.readline()
            counts.append(proxy.requests())
            p.stdin.write(b"\n")
            p.stdin.flush()
        lat = json.loads(p.stdout.readline())
        p.wait()
        return {
            "cold_gets": counts[1][0] - counts[0][0],
            "warm_gets": counts[2][0] - counts[1][0],
            "cold_heads": counts[1][1] - counts[0][1],
            "cold": lib.lat_summary(lat["cold"]),
            "warm": lib.lat_summary(lat["warm"]),
        }
    finally:
        m.stop()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--proxy":
        proxy_main(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--latency-ms", default="0,20", help="comma-separated added latencies")
    ap.add_argument("--data-dir", type=Path, default=lib.REPO / "bench-data")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "slabfs-bench-s3",
                    help="where s3s-fs is built and stores its objects (outside the repo)")
    ap.add_argument("--server", choices=("s3s-fs", "moto"), default="s3s-fs",
                    help="moto: no build, but the server is the bottleneck (about 370 MB/s)")
    ap.add_argument("--idle-wait", type=float, default=20.0)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--skip-venv", action="store_true")
    ap.add_argument("--only", default="",
                    help="comma-separated contenders to run (ceiling, local, slabfs, zarr, "
                         "tensorstore, nc3, nc4); default all. The summary then has only "
                         "their rows")
    args = ap.parse_args()
    command = lib.command_line()
    if os.geteuid() != 0:
        lib.fail("run as root: the benchmark mounts")
    py = lib.use_venv(args.skip_venv, ("numpy", "zarr", "tensorstore", "obstore", "boto3"))
    lib.exit_on_signals()
    data_dir = lib.abs_dir(args.data_dir)
    slabfs = lib.build_slabfs(args.no_build)  # SLABFS_BIN=PATH: another build
    data = lib.build_field(data_dir, args.size_mib)
    scratch = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    binary = build_s3s_fs(scratch) if args.server == "s3s-fs" else None
    latencies = [float(x) for x in args.latency_ms.split(",")]

    os.environ.update(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET,
                      AWS_REGION="us-east-1")
    for v in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        os.environ.pop(v, None)
    objects = scratch / "objects"
    shutil.rmtree(objects, ignore_errors=True)
    server = Server(binary, objects, py)
    workdir = Path(tempfile.mkdtemp(prefix="bench-remote-", dir=scratch))
    proxies: list[Proxy] = []
    prefix = data["store"].name
    url = f"s3://{BUCKET}/{prefix}"
    nbytes = data["nbytes"]
    raw_sha = lib.sha_file(data["raw"])
    results: dict = {"command": command, "data": data, "latencies": {}}
    nc3 = build_netcdf3(data, data_dir, py)
    nc3_url = f"s3://{BUCKET}/nc3"
    # The netCDF-4 file of bench_hdf5.py (zstd 1 + shuffle, chunks of
    # (1, 256, 1024)), with its own raw values.
    import bench_hdf5
    h5data = bench_hdf5.make_read_data(data_dir / "hdf5-read-256", args.size_mib)
    nc4 = h5data["files"]["zstd"]
    nc4_sha = lib.sha_file(h5data["raw"])
    try:
        n = upload(server.endpoint, data["store"], prefix)
        lib.log(f"uploaded {n} objects to {server.endpoint}/{BUCKET}/{prefix}")
        upload_file(server.endpoint, nc3, f"nc3/{nc3.name}")
        upload_file(server.endpoint, nc4, f"nc4/{nc4.name}")
        for lat in latencies:
            proxy = Proxy(server.port, lat, workdir)
            proxies.append(proxy)
            ep = proxy.endpoint

            def peer(child, check, ep=ep, lat=lat):
                r = lib.run_child([str(py), "-c", child, ep, prefix, data["array"],
                                   str(nbytes), "1" if check else "0"], capture=True)
                if check and (r["sha256"], nbytes) != raw_sha:
                    lib.fail(f"a peer's bytes differ from the raw file at {lat} ms")
                return r

            cs = {
                "ceiling": lambda check, ep=ep: run_curl(ep, data["store"], prefix, workdir),
                "local": lambda check: run_local(slabfs, data["store"], workdir, nbytes),
                "slabfs": lambda check, ep=ep: run_slabfs(
                    slabfs, url, workdir, ep, nbytes, raw_sha if check else None),
                "zarr": lambda check: peer(ZARR_CHILD, check),
                "tensorstore": lambda check: peer(TS_CHILD, check),
                "nc3": lambda check, ep=ep: run_slabfs(
                    slabfs, nc3_url, workdir, ep, nbytes, raw_sha if check else None,
                    array=f"{nc3.name}/field"),
                "nc4": lambda check, ep=ep: run_slabfs(
                    slabfs, f"s3://{BUCKET}/nc4", workdir, ep, nbytes,
                    nc4_sha if check else None, array=f"{nc4.name}/v"),
            }
            if args.only:
                wanted = args.only.split(",")
                unknown = [w for w in wanted if w not in cs]
                if unknown:
                    lib.fail(f"--only: no contender {unknown} (there are {list(cs)})")
                cs = {k: v for k, v in cs.items() if k in wanted}
            for name, run in cs.items():
                run(True)  # checked once, untimed (and a warm-up)
            runs: dict = {k: [] for k in cs}
            for rep in range(args.warmup + args.reps):
                for name, run in cs.items():
                    lib.wait_idle(args.idle_wait)
                    r = run(False)
                    tag = "warmup" if rep < args.warmup else f"rep {rep - args.warmup + 1}"
                    r["busy"] = busy(r)
                    lib.log(f"[{lat:g} ms {tag}] {name:<12} {r['read_s']:.3f}s "
                            f"other-load {r['foreign']:.0%} machine busy {r['busy']:.0%}")
                    if rep >= args.warmup:
                        runs[name].append(r)
            if args.only:  # a partial run: its rows only, no random reads
                results["latencies"][lat] = {"runs": runs}
                continue
            rnd = run_random(slabfs, url, workdir, proxy, data, seed=lib.FIELD_SEED)
            rnd["expected_gets"] = pages_chunks(data, RANDOM_READS, lib.FIELD_SEED)
            lib.log(f"[{lat:g} ms] random 4 KiB: {rnd['cold_gets']} GETs cold "
                    f"(distinct chunks: {rnd['expected_gets']}), {rnd['warm_gets']} warm")
            results["latencies"][lat] = {"runs": runs, "random": rnd}
    finally:
        for p in proxies:
            p.stop()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(objects, ignore_errors=True)

    results["server"] = args.server
    report(results, args, command, slabfs, data)
    lib.write_json(data_dir / "remote-results.json", results)


def report(results: dict, args, command: str, slabfs: Path, data: dict) -> None:
    hdr, m, v = lib.header_lines(command, slabfs)
    results.update(machine=m, versions=v)
    nbytes = data["nbytes"]
    print()
    print("\n".join(hdr))
    print()
    print(f"Data: float32 {data['shape']}, chunks {data['chunks']} (1 MiB), "
          f"{data['n_chunks']} chunks, {nbytes / MIB:.0f} MiB raw, "
          f"{data['stored_bytes'] / MIB:.1f} MiB stored. Server: "
          f"{'s3s-fs ' + S3S_VERSION + ' (patched)' if args.server == 's3s-fs' else 'moto'} "
          f"on loopback, behind the delay-line proxy. Medians of {args.reps} runs "
          "(min-max).")
    print()
    names = {"ceiling": "network ceiling: curl, 64 GETs at a time, no decode, no FUSE",
             "local": "pipeline ceiling: slabfs mount of the local copy, `dd bs=1M` (no network)",
             "slabfs": "slabfs mount, `dd bs=1M`", "zarr": "zarr-python 3.1 + obstore",
             "tensorstore": "tensorstore s3 kvstore",
             "nc3": "slabfs mount of the same values as a netCDF-3 object, `dd bs=1M`",
             "nc4": "slabfs mount of a netCDF-4 object (zstd 1 + shuffle, bench_hdf5.py's), `dd bs=1M`"}
    lats = list(results["latencies"])
    print("| contender | " + " | ".join(f"{lat:g} ms: s (MB/s)" for lat in lats) + " |")
    print("|---|" + "---:|" * len(lats))
    med: dict = {}
    for k, label in names.items():
        if k not in results["latencies"][lats[0]]["runs"]:
            continue
        cells = []
        for lat in lats:
            rs = [r["read_s"] for r in results["latencies"][lat]["runs"][k]]
            s = lib.summary(rs)
            med[(k, lat)] = s["median"]
            size = (results["latencies"][lat]["runs"][k][0].get("stored_bytes", nbytes))
            cells.append(f"{s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f}), "
                         f"{size / s['median'] / 1e6:.0f}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    if args.only:
        # A partial run: each row's share of its first latency's throughput.
        print("| contender | " + " | ".join(f"{lat:g} ms vs {lats[0]:g} ms" for lat in lats) + " |")
        print("|---|" + "---:|" * len(lats))
        for k in results["latencies"][lats[0]]["runs"]:
            print(f"| {names[k]} | " + " | ".join(
                f"{med[(k, lats[0])] / med[(k, lat)]:.0%}" for lat in lats) + " |")
        return
    print("| target | " + " | ".join(f"{lat:g} ms" for lat in lats) + " |")
    print("|---|" + "---:|" * len(lats))
    for k, label, target in (("tensorstore", "slabfs / tensorstore (≥ 1)", 1.0),
                             ("zarr", "slabfs / zarr-python (≥ 2)", 2.0)):
        print(f"| {label} | " + " | ".join(
            f"{med[(k, lat)] / med[('slabfs', lat)]:.2f} "
            f"{'met' if med[(k, lat)] / med[('slabfs', lat)] >= target else 'missed'}"
            for lat in lats) + " |")
    if len(lats) > 1:
        base = lats[0]
        cells = []
        for lat in lats:
            frac = med[("slabfs", base)] / med[("slabfs", lat)]
            cells.append(f"{frac:.0%}" + ("" if lat == base else
                                          (" met" if frac >= 0.7 else " missed")))
        print(f"| slabfs throughput vs {base:g} ms (≥ 70%) | " + " | ".join(cells) + " |")
        # Issue 41: slabfs keeps at least the share of its throughput that
        # tensorstore keeps, and a netCDF-4 object at least 80 %.
        print(f"| tensorstore throughput vs {base:g} ms | " + " | ".join(
            f"{med[('tensorstore', base)] / med[('tensorstore', lat)]:.0%}" for lat in lats) + " |")
        print(f"| slabfs share kept ≥ tensorstore's | " + " | ".join(
            "" if lat == base else
            ("met" if med[("slabfs", base)] / med[("slabfs", lat)]
             >= med[("tensorstore", base)] / med[("tensorstore", lat)] else "missed")
            for lat in lats) + " |")
        for k, what, target in (("nc3", "netCDF-3", None), ("nc4", "netCDF-4", 0.8)):
            print(f"| slabfs {what} object throughput vs {base:g} ms"
                  + (f" (≥ {target:.0%})" if target else "") + " | " + " | ".join(
                      f"{med[(k, base)] / med[(k, lat)]:.0%}"
                      + ("" if lat == base or target is None else
                         (" met" if med[(k, base)] / med[(k, lat)] >= target else " missed"))
                      for lat in lats) + " |")
        cells = []
        for lat in lats:
            frac = med[("ceiling", lat)] * nbytes / results["latencies"][lat]["runs"]["ceiling"][0][
                "stored_bytes"] / med[("slabfs", lat)]
            cells.append(f"{frac:.0%}")
        print("| slabfs vs network ceiling (same bytes/s) | " + " | ".join(cells) + " |")
    print("| slabfs vs pipeline ceiling (local copy) | " + " | ".join(
        f"{med[('local', lat)] / med[('slabfs', lat)]:.2f}" for lat in lats) + " |")
    print("| machine CPU busy during slabfs runs (median) | " + " | ".join(
        f"{lib.summary([r['busy'] for r in results['latencies'][lat]['runs']['slabfs']])['median']:.0%}"
        for lat in lats) + " |")
    # The least time the slabfs runs could take on these cores: all the CPU
    # the machine spent during them (dd, the daemon, the server and the
    # proxy) spread over every core with none idle.
    def floor(r: dict) -> float:
        ncpu = os.cpu_count()
        return (r["cpu_s"] + r["daemon_cpu_s"] + r["foreign"] * r["wall_s"] * ncpu) / ncpu
    print("| slabfs CPU floor: the runs' CPU (dd, daemon, server, proxy) ÷ cores, s | " + " | ".join(
        f"{lib.summary([floor(r) for r in results['latencies'][lat]['runs']['slabfs']])['median']:.3f}"
        for lat in lats) + " |")
    print("| slabfs time ÷ its CPU floor (1 = every core busy throughout) | " + " | ".join(
        f"{lib.summary([r['wall_s'] / floor(r) for r in results['latencies'][lat]['runs']['slabfs']])['median']:.2f}"
        for lat in lats) + " |")
    print("| zarr-python / pipeline ceiling (2x needs ≥ 2) | " + " | ".join(
        f"{med[('zarr', lat)] / med[('local', lat)]:.2f}" for lat in lats) + " |")
    print()
    print("Random 4 KiB reads through the mount (256 seeded pages, POSIX_FADV_RANDOM):")
    print()
    print("| latency | GETs, first pass | distinct chunks touched | GETs, second pass | "
          "first pass mean / p90 µs | second pass mean µs |")
    print("|---|---:|---:|---:|---:|---:|")
    for lat in lats:
        r = results["latencies"][lat]["random"]
        print(f"| {lat:g} ms | {r['cold_gets']} | {r['expected_gets']} | {r['warm_gets']} | "
              f"{r['cold']['mean_us']:.0f} / {r['cold']['p90_us']:.0f} | "
              f"{r['warm']['mean_us']:.1f} |")
    print("\n(In the first pass a read whose two chunks an earlier read fetched is served "
          "from the cache: the mean, not the median, shows the cold reads.)")


if __name__ == "__main__":
    main()
