#!/usr/bin/env bash
# Create (if missing) the project venv at <repo>/.venv and install the pinned
# Python requirements into it. Idempotent. Prints the venv's python path.
#
# The packages are installed with uv (Astral's installer, itself a wheel
# installed first with pip), not pip: on a fresh clone the install is on
# the critical path of `cargo test` (the tests that need Python wait for
# it), and uv installs scripts/requirements.txt in about 19 s with an
# empty cache and 5 s with a warm one, where pip took 82 s (2 cores;
# docs/DEVELOPMENT.md, "Build and test time"). Neither compiles the
# packages' .pyc files up front (pip's default did, for 30 s of CPU):
# Python writes them on first import, for the modules used. If uv cannot
# be installed, pip does the install (SLABFS_PIP=1 asks for pip).
#
# The install runs only when scripts/requirements.txt differs from what
# was last installed (a stamp in the venv holds its hash): every test
# binary calls this script once, and a no-op install still costs seconds.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
py="${PYTHON:-python3}"
uv_version="0.13.9"
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" >&2
fi
stamp="$venv/.slabfs-requirements.sha256"
want="$(sha256sum "$repo/scripts/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile)
    if [ "${SLABFS_PIP:-0}" != 1 ] && { [ -x "$venv/bin/uv" ] || "${pip[@]}" "uv==$uv_version" >&2; }; then
        "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" \
            -r "$repo/scripts/requirements.txt" >&2
    else
        "${pip[@]}" -r "$repo/scripts/requirements.txt" >&2
    fi
    echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
