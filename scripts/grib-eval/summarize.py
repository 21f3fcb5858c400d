#!/usr/bin/env python3
"""Print one row per fixture field for each results_*.jsonl given (output of `eval-* compare`)."""
import json, sys

def cell(d):
    c = d["decode"]
    if not c["ok"]:
        e = c["err"].replace("\n", " ")
        e = " ".join(e.split())
        return "ERR " + e[:70]
    x = c["cmp"]
    if "n" not in x:
        return "BAD " + json.dumps(x)
    s = "exact" if x["exact_f32"] else "DIFF n=%d maxabs=%.3g ulp=%d" % (x["n_mismatch_f32"], x["max_abs_diff_vs_f32"], x["max_ulp_f32"])
    if x.get("exact_f64") is True:
        s += " (=f64)"
    if x["spurious_nan"]:
        s += " spuriousNaN=%d" % x["spurious_nan"]
    if x["ref_missing"]:
        s += " miss %d/%d NaN" % (x["missing_as_nan"], x["ref_missing"])
        if x["missing_as_other_sample"]:
            s += " other=%s" % x["missing_as_other_sample"]
    return s

def ll(d):
    l = d["latlon"]
    if isinstance(l, str):
        return l
    if "err" in l:
        return "ERR " + " ".join(l["err"].split())[:50]
    if "length_mismatch" in l:
        return "len %s" % l["length_mismatch"]
    return "dlat=%.1e dlon=%.1e" % (l["max_dlat"], l["max_dlon"])

for p in sys.argv[1:]:
    rows = [json.loads(l) for l in open(p)]
    print("##", rows[0]["crate"] if rows else p)
    for d in rows:
        lo = d["list_ok"]
        lo = "ok" if lo is True else ("WRONG" if lo is False else "ERR")
        print("%-20s f%d %-34s list=%-5s %-60s | %s" % (d["fixture"], d["field"], "%s/%s" % (d["packing"], d["grid"]), lo, cell(d), ll(d)))
