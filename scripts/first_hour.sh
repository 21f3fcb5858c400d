#!/usr/bin/env bash
# A newcomer's first hour, as README's "Install, mount, read" tells it,
# against a built package (issue 42): install the .deb, mount the demo,
# read it with NumPy, with no Rust on the PATH; then unmount and remove
# the package. Run as root (it installs a package); CI runs it after the
# tests (.ci/run).
#
#   scripts/first_hour.sh [DEB]     # default: the newest target/debian/*.deb
#
# The commands are README's, word for word (checked below): if README
# changes, this script must change with it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

deb="${1:-$(ls -t target/debian/slabfs_*.deb | head -1)}"
deb=$(realpath "$deb")
readme_install='sudo apt install ./slabfs_0.1.0-1_amd64.deb'
readme_mount='slabfs mount --daemon --create-mountpoint /usr/share/slabfs/demo /tmp/slabfs-demo'
readme_read="python3 -c \"import numpy as np; tas = np.frombuffer(open('/tmp/slabfs-demo/climate.zarr/tas', 'rb').read(), '<f4').reshape(12, 73, 144); print(tas[6, 36, :4])\""
for cmd in "$readme_install" "$readme_mount" "$readme_read"; do
    grep -qxF -- "$cmd" README.md || { echo "first_hour: README no longer says: $cmd" >&2; exit 1; }
done

# What zarr-python reads there: the expected output, by an independent
# reader of the same store.
venv_python="${SLABFS_PYTHON:-$repo/.venv/bin/python}"
[ -x "$venv_python" ] || scripts/venv.sh >/dev/null
expected=$("$venv_python" -c "import zarr; print(zarr.open_array('examples/demo/data/climate.zarr', path='tas', mode='r')[6, 36, :4])")

work=$(mktemp -d /tmp/slabfs-first-hour.XXXXXX)
cleanup() {
    fusermount3 -u /tmp/slabfs-demo 2>/dev/null || umount /tmp/slabfs-demo 2>/dev/null || true
    env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq slabfs >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
if dpkg -s slabfs >/dev/null 2>&1; then
    echo "first_hour: slabfs is installed already; remove it first (apt remove slabfs)" >&2
    exit 1
fi
cp "$deb" "$work/slabfs_0.1.0-1_amd64.deb"
# A user's shell: the system PATH (no ~/.cargo/bin), a Python with NumPy
# first (the user's own), sudo a no-op for root.
mkdir -p "$work/bin"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$venv_python" > "$work/bin/python3"
chmod +x "$work/bin/python3"
printf '#!/bin/sh\nexec "$@"\n' > "$work/bin/sudo"
chmod +x "$work/bin/sudo"
user_env=(env -i "HOME=$work" "PATH=$work/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
          DEBIAN_FRONTEND=noninteractive)
run() { (cd "$work" && "${user_env[@]}" bash -c "$1"); }

run '! command -v cargo && ! command -v rustc' >/dev/null || { echo "first_hour: Rust is on the PATH" >&2; exit 1; }
run "$readme_install -y -qq" >/dev/null 2>"$work/apt.err" || { cat "$work/apt.err" >&2; exit 1; }
run 'command -v slabfs' | grep -qx /usr/bin/slabfs
[ "$(readlink -f /usr/sbin/mount.fuse.slabfs)" = /usr/bin/slabfs ]
[ -f /usr/share/man/man1/slabfs-mount.1.gz ] && [ -f /lib/systemd/system/slabfs@.service ]
mount_out=$(run "$readme_mount" 2>&1)
got=$(run "$readme_read")
if [ "$got" != "$expected" ]; then
    echo "first_hour: read $got, zarr-python reads $expected" >&2
    exit 1
fi
# Quiet success: the mount printed nothing, or only that there is no
# system log to keep the daemon's log in.
if [ -n "$mount_out" ] && ! grep -q '^slabfs: warning: no system log' <<<"$mount_out"; then
    echo "first_hour: the mount said: $mount_out" >&2
    exit 1
fi
run 'fusermount3 -u /tmp/slabfs-demo'
echo "first_hour: installed, mounted, read $got (as zarr-python reads it), unmounted"
