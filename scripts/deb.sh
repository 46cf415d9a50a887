#!/usr/bin/env bash
# Build contextd's Debian package: target/deb/contextd_VERSION_ARCH.deb.
#
#   scripts/deb.sh        (what `make deb` runs)
#
# debian/ is a debhelper (compat 13) package around `make install
# DESTDIR=debian/contextd PREFIX=/usr`, so whatever `make install` installs
# is in the package; debhelper strips the binaries, compresses the man
# pages and the changelog, writes md5sums, fills Depends from what the
# binaries link (dpkg-shlibdeps) and enables the systemd user unit
# (dh_installsystemduser). This script checks the tools and the build
# dependencies, checks that debian/changelog and Cargo.toml name the same
# version, runs `debian/rules binary` with the output in target/deb (not
# in the parent directory, where dpkg-buildpackage would put it) and prints
# the package's path as the last line.
#
# Environment:
#   CONTEXTD_BINARIES_DIR  pack contextd and contextctl from this directory
#                          instead of a release build (`make deb
#                          BINARIES_DIR=DIR`; the package test uses it)
#   CONTEXTD_DEB_OUT       write the package there instead of target/deb
#                          (the test does, so that a test build never
#                          replaces the release build's package)
#   CONTEXTD_DEB_FAST=1    gzip -1 instead of xz (the tests: xz takes most of
#                          a minute on their unoptimised binaries)
#
# One build at a time per clone (a lock in target/): debian/contextd is the
# staging tree.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${CONTEXTD_DEB_OUT:-$ROOT/target/deb}

die() { printf 'deb: error: %s\n' "$*" >&2; exit 1; }

cd "$ROOT"
for tool in dh dpkg-parsechangelog dpkg-checkbuilddeps dpkg-shlibdeps dpkg-deb; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "$tool not found: install the packaging tools with scripts/deps.sh (debhelper, dpkg-dev)"
done
if [ -n "${CONTEXTD_BINARIES_DIR:-}" ]; then
    for bin in contextd contextctl; do
        [ -x "$CONTEXTD_BINARIES_DIR/$bin" ] || die "no $bin in CONTEXTD_BINARIES_DIR=$CONTEXTD_BINARIES_DIR"
    done
    CONTEXTD_BINARIES_DIR=$(cd "$CONTEXTD_BINARIES_DIR" && pwd)
    export CONTEXTD_BINARIES_DIR
fi

mkdir -p "$OUT" "$ROOT/target"
OUT=$(cd "$OUT" && pwd)
exec 9>"$ROOT/target/.deb.lock"
flock 9

# The build needs what debian/control lists (not the Rust toolchain, which
# comes from rustup: Debian 12's is too old).
dpkg-checkbuilddeps -B || die "missing build dependencies (above): run scripts/deps.sh"

version=$(dpkg-parsechangelog -S Version)
cargo_version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
[ "$version" = "$cargo_version" ] ||
    die "debian/changelog is at $version but Cargo.toml at $cargo_version: add a changelog entry (dch -v $cargo_version)"
arch=$(dpkg --print-architecture)
deb=$OUT/contextd_${version}_${arch}.deb

rm -f "$deb"
debian/rules clean
CONTEXTD_DEB_OUT=$OUT debian/rules binary
[ -f "$deb" ] || die "debian/rules binary did not write $deb"
debian/rules clean
echo "$deb"
