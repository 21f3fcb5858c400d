#!/usr/bin/env python3
"""Best-of-N wall time of ecCodes decoding a file's first message from memory (eccodes-python)."""
import sys, time
import eccodes as ec
import numpy as np

path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
buf = open(path, "rb").read()
best_all = best_vals = float("inf")
for _ in range(n):
    t0 = time.perf_counter()
    h = ec.codes_new_from_message(buf)
    t1 = time.perf_counter()
    v = ec.codes_get_values(h)
    t2 = time.perf_counter()
    ec.codes_release(h)
    best_all = min(best_all, t2 - t0)
    best_vals = min(best_vals, t2 - t1)
print('{"crate": "eccodes-python %s", "file": "%s", "best_s": %.6f, "best_get_values_s": %.6f, "n": %d}'
      % (ec.codes_get_api_version(), path, best_all, best_vals, v.size))
