#!/usr/bin/env bash
# Time the README's `cargo test` as a new user meets it: a fresh clone, an
# empty target directory, no venv (the tests create it), the registry
# already downloaded (~/.cargo/registry). Issue 41 item 7; the figures
# are in docs/DEVELOPMENT.md, "Build and test time".
#
# Usage: scripts/time_fresh_test.sh [REV] [WORKDIR]
#   REV      the commit to clone (default HEAD of this repository)
#   WORKDIR  where the clone goes (default a new directory under /tmp);
#            removed at the end unless KEEP=1
#
# Prints, from /usr/bin/time -v: the build (`cargo test --no-run
# --timings`, whose report stays in the clone's target/cargo-timings/
# when KEEP=1), then the run (`cargo test`, which then only runs), and
# the load average before each, since other work on the machine inflates
# wall-clock figures. Build and run apart add up to one `cargo test`
# (the run re-checks the build in well under a second).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-$(git -C "$repo" rev-parse HEAD)}"
work="${2:-$(mktemp -d /tmp/slabfs-fresh.XXXXXX)}"
mkdir -p "$work"
clone="$work/slabfs"
git clone --quiet --no-local "$repo" "$clone"
# The corpus tests read ../shared/corpora beside the repository (files
# of other projects, not committed here): the clone sees the same ones.
if [ -d "$repo/../shared" ] && [ ! -e "$work/shared" ]; then
    ln -s "$(cd "$repo/../shared" && pwd)" "$work/shared"
fi
git -C "$clone" checkout --quiet "$rev"
cd "$clone"
# Nothing from the environment that would reuse a build or a venv.
unset CARGO_TARGET_DIR SLABFS_PYTHON RUSTC_WRAPPER
figures() {
    grep -E "Elapsed|User time|System time|Percent of CPU" "$1" | sed 's/^\s*/  /'
}
echo "clone of $rev in $clone; $(nproc) cores"
echo "load before the build: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v -o "$work/build.time" cargo test --no-run --timings >"$work/build.log" 2>&1
echo "build (cargo test --no-run):"
figures "$work/build.time"
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
/usr/bin/time -v -o "$work/test.time" cargo test >"$work/test.log" 2>&1 || status=$?
echo "run (cargo test, built):"
figures "$work/test.time"
grep -E "^test result" "$work/test.log" | sed 's/^/  /'
[ "$status" = 0 ] || echo "cargo test failed ($status): $work/test.log"
if [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$work"
else
    echo "kept: $work"
fi
exit "$status"
