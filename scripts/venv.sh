#!/usr/bin/env bash
# Create (if missing) the project venv at <repo>/.venv and install the pinned
# Python requirements into it. Idempotent. Prints the venv's python path.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv" >&2
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$repo/scripts/requirements.txt" >&2
echo "$venv/bin/python"
