#!/bin/bash
# Best-of-5 decode time, 3 rounds, pinned to one core; prints the minimum per crate and file.
cd "$(dirname "$0")"
for round in 1 2 3; do
  for f in big_simple big_csd2 big_jpeg big_ccsds; do
    OMP_NUM_THREADS=1 taskset -c 1 ./venv/bin/python time_eccodes.py fixtures/$f.grib2 5
    for b in eval-grib eval-gribberish-jpeg eval-gribberish-pure; do taskset -c 1 ./bin/$b time fixtures/$f.grib2 5; done
  done
done > timings.jsonl
python3 - <<'PY'
import json, collections
best = collections.defaultdict(lambda: float("inf")); err = {}
for l in open("timings.jsonl"):
    d = json.loads(l); k = (d["file"].split("/")[-1], d["crate"])
    best[k] = min(best[k], d["best_s"]); err[k] = d.get("err")
for (f, c), t in sorted(best.items()):
    print("%-18s %-26s %8.1f ms %s" % (f, c, t * 1000, err[(f, c)] or ""))
PY
