#!/usr/bin/env python3
"""Mutation robustness: runs `BIN fuzz FILE SEED COUNT START` and restarts it after an abort
(e.g. allocation failure under the memory limit) or a hang, so every case gets an outcome.
Usage: fuzz.py BIN COUNT FIXTURE...   -> prints a summary per fixture, details to fuzz_<bin>.jsonl"""
import json, os, resource, subprocess, sys

BIN, COUNT, FILES = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
MEM = 4 << 30  # address-space limit per run: a huge allocation fails instead of eating the machine
TIMEOUT = 30

def limit():
    resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))

out = open("fuzz_%s.jsonl" % os.path.basename(BIN), "w")
for f in FILES:
    counts = {"ok": 0, "error": 0, "panic": 0, "abort": 0, "hang": 0}
    examples = {}
    start = 0
    while start < COUNT:
        try:
            p = subprocess.run([BIN, "fuzz", f, "1", str(COUNT), str(start)], capture_output=True,
                               text=True, timeout=TIMEOUT, preexec_fn=limit)
            lines, rc, hung = p.stdout.splitlines(), p.returncode, False
            err = p.stderr[-300:]
        except subprocess.TimeoutExpired as e:
            lines = (e.stdout or b"").decode().splitlines() if isinstance(e.stdout, bytes) else (e.stdout or "").splitlines()
            rc, hung, err = None, True, ""
        last_started = None
        for l in lines:
            d = json.loads(l)
            if d.get("start"):
                last_started = d
                continue
            last_started = None
            o = d["outcome"]
            k = "ok" if o == "ok" else ("panic" if "panic" in o else "error")
            counts[k] += 1
            if k == "panic":
                examples.setdefault(o["panic"][:160], d["mut"])
            out.write(json.dumps({"file": f, **d}) + "\n")
            start = d["case"] + 1
        if last_started is not None:  # the process died (or hung) inside this case
            k = "hang" if hung else "abort"
            counts[k] += 1
            examples.setdefault("%s rc=%s %s" % (k, rc, err.strip().splitlines()[-1] if err.strip() else ""), last_started["mut"])
            out.write(json.dumps({"file": f, "case": last_started["case"], "mut": last_started["mut"], "outcome": k}) + "\n")
            start = last_started["case"] + 1
        elif rc not in (0, None) and not lines:
            print("runner failed", rc, err); break
    print("%-45s %s" % (os.path.basename(f), counts))
    for k, v in list(examples.items())[:6]:
        print("    e.g. %s  <- %s" % (k, v))
