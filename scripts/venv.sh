#!/usr/bin/env bash
# Create (if missing) the project venv at <repo>/.venv and install the pinned
# Python requirements into it. Idempotent. Prints the venv's python path.
#
# pip runs only when scripts/requirements.txt differs from what was last
# installed (a stamp in the venv holds its hash): every test binary calls
# this script once, and a no-op `pip install -r` costs ~2 s of CPU each.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" >&2
fi
stamp="$venv/.slabfs-requirements.sha256"
want="$(sha256sum "$repo/scripts/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$repo/scripts/requirements.txt" >&2
    echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
