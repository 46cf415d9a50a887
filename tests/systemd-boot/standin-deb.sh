#!/usr/bin/env bash
# STAND-IN for `make deb` (the Debian package of issue 30 is made in
# parallel; the lead replaces this with `make deb` when merging): a minimal
# .deb of exactly what `make install` installs, so that the boot test
# already installs a package with dpkg -i.
#
#   tests/systemd-boot/standin-deb.sh BINDIR OUTDIR
#
# BINDIR holds the contextd and contextctl binaries to package (the test's
# own debug build: `make install` is run with CARGO=true so it builds
# nothing and RELEASE=BINDIR). Prints the .deb's path as its last line, as
# `make deb` does.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -eq 2 ] || { echo "usage: $0 BINDIR OUTDIR" >&2; exit 2; }
BINDIR=$(realpath "$1")
OUT=$(realpath "$2")

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -n 1)
arch=$(dpkg --print-architecture)
stage=$OUT/stage
rm -rf "$stage"
mkdir -p "$stage/DEBIAN"
make --no-print-directory -C "$ROOT" install CARGO=true RELEASE="$BINDIR" \
    DESTDIR="$stage" PREFIX=/usr >&2
cat >"$stage/DEBIAN/control" <<CONTROL
Package: contextd
Version: $version
Architecture: $arch
Maintainer: contextd developers <contextd@localhost>
Depends: libc6, libgcc-s1, libssl3, libpipewire-0.3-0, dbus-user-session | default-dbus-session-bus
Section: misc
Priority: optional
Description: desktop context broker (boot-test STAND-IN package)
 Stand-in for make deb, made by tests/systemd-boot/standin-deb.sh.
CONTROL
deb=$OUT/contextd_${version}_${arch}.deb
# Uncompressed: the debug binaries are large and the package never leaves
# the machine.
dpkg-deb --root-owner-group -Znone --build "$stage" "$deb" >&2
rm -rf "$stage"
printf '%s\n' "$deb"
