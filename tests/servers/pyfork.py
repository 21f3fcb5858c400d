"""A fork server for the tests' Python calls (tests/it/common/python.rs).

Most of what a test's `python -c SCRIPT` costs is the interpreter's start
and its imports (zarr-python alone is 0.7 s of CPU, xarray 1.7 s), paid
again by each of about a hundred calls a run. This server imports the
writers and readers the tests use once; each call is then a fork of it
that runs the script as `python ARGS...` would.

    pyfork.py DIR/SOCKET

listens on the Unix socket DIR/SOCKET (DIR private to the user: whoever
connects runs code as the server's user), removes both when it ends, prints `ready` when it does, and exits
when its standard input closes (the test process has ended) or on
SIGTERM. A call is one connection: the client sends one JSON line
{"argv": [...], "cwd": "...", "env": {...}} (argv without the
interpreter) and reads back the exit status (4 bytes, a wait status as
waitpid gives it, little-endian), then standard output and standard error,
each as an 8-byte little-endian length and the bytes.

Each call is two forks: a supervisor, which reads the request and forks
the runner, waits for it and sends what it wrote, so that a runner that
dies by a signal (a segfault in a C library) is still answered. The
server itself runs no test code and starts no thread, so every fork starts
from the same state.

What a fork cannot honour it hands to a real interpreter (the runner
execs `python ARGS...` with the request's environment): an option other
than -W, -c and -m, and an environment that differs from the server's in
a variable read at start-up (PYTHON*, HDF5_*, OPENBLAS_*...). The result is
then exactly a spawned Python's, only slower.
"""
import json
import os
import selectors
import signal
import socket
import struct
import sys

# The environment this interpreter started with, before the imports below
# (netCDF4's import sets HDF5_PLUGIN_PATH, for one).
AT_START_ENV = dict(os.environ)

# The imports the tests' scripts make, done once. hdf5plugin is left out on
# purpose: importing it registers filters with the HDF5 library, which would
# let an h5py script read what it could not read on its own.
import numpy  # noqa: F401
import netCDF4  # noqa: F401
import h5py  # noqa: F401
import zarr  # noqa: F401
import scipy.io  # noqa: F401
import pandas  # noqa: F401
import xarray  # noqa: F401
import boto3  # noqa: F401
import icechunk  # noqa: F401
import virtualizarr  # noqa: F401

# Read when an interpreter starts or a library is imported, so a fork
# cannot change them.
AT_START = ("PYTHON", "HDF5_", "OPENBLAS_", "OMP_", "MKL_", "LD_", "MALLOC_", "ICECHUNK_")
# What the imports set, which a script sees after importing the same.
BY_IMPORTS = {k: v for k, v in os.environ.items() if AT_START_ENV.get(k) != v}


def read_request(conn):
    data = b""
    while not data.endswith(b"\n"):
        part = conn.recv(1 << 16)
        if not part:
            raise EOFError("the client closed before its request")
        data += part
    return json.loads(data)


def differs_at_start(env):
    keys = {k for k in env if k.startswith(AT_START)}
    keys |= {k for k in AT_START_ENV if k.startswith(AT_START)}
    return any(env.get(k) != AT_START_ENV.get(k) for k in keys)


def run(argv, cwd, env):
    """In the runner: become `python argv...`. Returns the script's globals
    (for -c) when it ends; raises what the script raised."""
    os.chdir(cwd)
    warnings = []
    args = list(argv)
    while args and args[0].startswith("-") and args[0] not in ("-c", "-m", "-"):
        if args[0] == "-W" and len(args) > 1:
            warnings.append(args[1])
            args = args[2:]
        else:
            args = None
            break
    if not args or args[0] == "-" or differs_at_start(env):
        os.execve(sys.executable, [sys.executable] + list(argv), env)
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(BY_IMPORTS)
    import warnings as w

    for opt in warnings:
        w._setoption(opt)
    import runpy
    import types

    if args[0] == "-c":
        sys.argv = ["-c"] + args[2:]
        sys.path[0] = ""
        main = types.ModuleType("__main__")
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main
        exec(compile(args[1], "<string>", "exec"), main.__dict__)
        return main.__dict__
    if args[0] == "-m":
        sys.argv = [args[1]] + args[2:]
        sys.path[0] = os.getcwd()
        return runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    script = os.path.abspath(args[0])
    sys.argv = [args[0]] + args[1:]
    sys.path[0] = os.path.dirname(script)
    return runpy.run_path(script, run_name="__main__")


def runner(req, out, err):
    """In the runner: the call's descriptors, the script, then what the
    interpreter does as it exits; returns the exit status."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (null, out, err):
        os.close(fd)
    # Python's own streams over the new descriptors, as at start-up.
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    code = 0
    try:
        names = run(req["argv"], req["cwd"], req["env"])
        # As at shutdown: the script's globals go first, so a file it
        # left open (a netCDF4 or h5py object) is closed and flushed.
        if names is not None:
            names.clear()
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    sys.modules.pop("__main__", None)
    import atexit
    import gc

    gc.collect()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return code


def supervise(conn):
    """In the supervisor: answer one call."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    req = read_request(conn)
    out = os.memfd_create("stdout")
    err = os.memfd_create("stderr")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            conn.close()
            code = runner(req, out, err)
        finally:
            os._exit(code & 0xFF)
    _, status = os.waitpid(pid, 0)
    reply = [struct.pack("<i", status)]
    for fd in (out, err):
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        data = b"".join(chunks)
        reply.append(struct.pack("<Q", len(data)))
        reply.append(data)
    conn.sendall(b"".join(reply))
    conn.close()


def main():
    path = sys.argv[1]
    # Everything imported so far out of the collector's sight: a fork's
    # collections then do not touch (and so copy) the server's pages.
    import gc

    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    # Supervisors are reaped by the kernel; nothing waits for them here.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(sys.stdin, selectors.EVENT_READ)
    try:
        while True:
            for key, _ in sel.select():
                if key.fileobj is sys.stdin:
                    if not os.read(0, 1 << 12):
                        return
                    continue
                conn, _ = listener.accept()
                if os.fork() == 0:
                    sel.close()
                    listener.close()
                    try:
                        supervise(conn)
                    finally:
                        os._exit(0)
                conn.close()
    finally:
        # The socket and the directory the client made for it.
        for remove in (os.unlink, os.rmdir):
            try:
                remove(path)
            except OSError:
                pass
            path = os.path.dirname(path)


if __name__ == "__main__":
    main()
