#!/usr/bin/env bash
# Build the Debian package: target/debian/slabfs_VERSION-1_ARCH.deb.
#
#   scripts/package.sh            # builds the release binary first
#
# What goes in it is [package.metadata.deb] in Cargo.toml; this script
# renders what the binary itself makes (man pages and shell completions,
# from the same definitions as --help) and the systemd unit with the
# package's path into target/package/, then runs cargo-deb (installed
# here, pinned, if missing) without letting it rebuild or strip: the
# release profile already drops debug info and keeps symbols.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0
cargo build --release --locked
bin=target/release/slabfs
out=target/package
rm -rf "$out"
mkdir -p "$out/man" "$out/completions"
"$bin" man "$out/man"
gzip -9n "$out"/man/*.1
"$bin" completions bash > "$out/completions/slabfs"
"$bin" completions zsh > "$out/completions/_slabfs"
"$bin" completions fish > "$out/completions/slabfs.fish"
# The tree's unit names /usr/local/bin (an install by hand); the
# package's binary is in /usr/bin.
sed 's|/usr/local/bin/slabfs|/usr/bin/slabfs|g' systemd/slabfs@.service > "$out/slabfs@.service"
grep -q '/usr/bin/slabfs mount' "$out/slabfs@.service"

if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
    cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi
cargo deb --no-build --no-strip
ls target/debian/*.deb
