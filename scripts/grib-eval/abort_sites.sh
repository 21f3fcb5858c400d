#!/bin/bash
# For each aborted fuzz case in fuzz_<bin>.jsonl, rerun it under the same memory limit and print
# the adapter method and the crate frame where the process died.  Usage: abort_sites.sh BIN
BIN=$1
exec 2>/dev/null
grep -E '"outcome": "(abort|hang)"' fuzz_$(basename $BIN).jsonl | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); print(d['file'], d['case'])" | while read f c; do
  out=$( (ulimit -v 4194304; RUST_BACKTRACE=1 timeout 30 $BIN fuzz $f 1 $((c+1)) $c 2>&1) 2>/dev/null )
  what=$(echo "$out" | grep -m1 -E 'memory allocation|overflow|panicked|stack|SIGSEGV|Killed' | cut -c1-60)
  site=$(echo "$out" | grep -E '^ +[0-9]+: ' | grep -v -E 'std::|alloc::|core::|__rust|rust_oom|common::|<alloc|main' | head -2 | sed 's/^ *[0-9]*: //' | cut -c1-110 | tr '\n' ' ')
  echo "$what | $site"
done | sort | uniq -c | sort -rn
