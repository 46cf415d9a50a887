#!/usr/bin/env bash
# Make (once per machine) the minimal Debian 12 root that the systemd boot
# test (tests/it/systemd_boot.rs, tests/systemd-boot/boot-test.sh) boots with
# `systemd-nspawn --boot`, and print its path.
#
#   scripts/boot-root.sh           make the root if it is missing or stale; print its path
#   scripts/boot-root.sh --check   exit 0 if the root is there and current, else 1
#
# The root is debootstrapped Debian 12 (bookworm) with systemd as init,
# dbus and dbus-user-session (the user bus is a socket of the user manager,
# so D-Bus activation goes through systemd), libpam-systemd (a login opens a
# logind session and starts user@UID.service), systemd-container (machinectl
# and machined inside the container: `machinectl shell USER@.host` opens a real
# PAM login session there), the shared libraries contextd links (libssl3,
# libpipewire-0.3-0: `ldd target/debug/contextd`; SQLCipher is bundled) and a
# test user. Nothing of contextd is in it: the test installs the package into
# a throwaway copy each time.
#
# It lives outside the clone, in $CONTEXTD_ROOTS_CACHE/bookworm-HASH (default:
# $XDG_CACHE_HOME/contextd/roots, else ~/.cache/contextd/roots), HASH being
# that of its recipe (the variables and functions below, not the comments):
# when the recipe changes, a new root is made; else a run takes milliseconds.
# It is made under a lock, so two clones or two tests never build it at once,
# in a scratch directory renamed at the end, so an interrupted build leaves no
# half root behind. Each boot holds a shared lock on ROOT.lock while it runs;
# a new build removes the roots of other recipes that no boot holds.
#
# Needs root and debootstrap (scripts/deps.sh installs it) and the Debian
# mirror (deb.debian.org, or $CONTEXTD_DEBIAN_MIRROR). The first build takes a
# few minutes (debootstrap downloads about 60 MB of packages).
set -euo pipefail

CACHE=${CONTEXTD_ROOTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/contextd/roots}
NAME=bookworm
SUITE=bookworm
MIRROR=${CONTEXTD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The user who logs in inside the container and runs contextctl.
BOOT_USER=ctxuser
BOOT_UID=1000
# On top of debootstrap's minbase. See the header for why each is there.
INCLUDE=(
    systemd systemd-sysv dbus dbus-user-session libpam-systemd systemd-container
    libssl3 libpipewire-0.3-0
    # the package's helpers inside: maintainer scripts may call these
    adduser
)

log() { printf 'boot-root: %s\n' "$*" >&2; }
die() { printf 'boot-root: error: %s\n' "$*" >&2; exit 1; }

# What makes the root, after debootstrap: run with the new root as $1.
configure_root() {
    local root=$1
    # A machine id is made at first boot of each throwaway copy.
    : >"$root/etc/machine-id"
    echo contextd-boot >"$root/etc/hostname"
    # No getty on the console: the test talks to the container by nsenter and
    # nothing waits for a login prompt.
    chroot "$root" systemctl mask console-getty.service getty@tty1.service \
        systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
        e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
    chroot "$root" useradd --create-home --uid "$BOOT_UID" --user-group \
        --shell /bin/bash "$BOOT_USER"
    # No password: root inside may become the user (machinectl shell, runuser);
    # nobody can log in from outside (there is no network and no getty).
    chroot "$root" passwd --delete "$BOOT_USER" >/dev/null
    # debootstrap leaves its package cache; the copies need none of it.
    rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
}

recipe_hash() {
    {
        printf '%s\n' "$SUITE" "$MIRROR" "$BOOT_USER" "$BOOT_UID" "${INCLUDE[@]}"
        declare -f configure_root
    } | sha256sum | cut -d' ' -f1
}

CHECK=0
case "${1:-}" in
    --check) CHECK=1 ;;
    "") ;;
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument: $1" ;;
esac

HASH=$(recipe_hash)
ROOT=$CACHE/$NAME-${HASH:0:16}
STAMP=$ROOT/.contextd-recipe

current() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; }

if [ "$CHECK" = 1 ]; then
    current
    exit
fi
if current; then
    printf '%s\n' "$ROOT"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "making the root needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: run scripts/deps.sh"
mkdir -p "$CACHE"
exec 9>"$CACHE/.$NAME.lock"
flock 9
# Another run may have made it while we waited for the lock.
if current; then
    printf '%s\n' "$ROOT"
    exit 0
fi

NEW=$CACHE/.$NAME.new
rm -rf "$NEW"
mkdir -p "$CACHE/debs"
log "making $ROOT (debootstrap $SUITE from $MIRROR; once per machine, a few minutes)"
START=$(date +%s)
include=$(IFS=,; echo "${INCLUDE[*]}")
if ! debootstrap --variant=minbase --include="$include" --cache-dir="$CACHE/debs" \
    "$SUITE" "$NEW" "$MIRROR" >"$CACHE/.$NAME.log" 2>&1; then
    tail -n 30 "$CACHE/.$NAME.log" >&2
    die "debootstrap failed (full log: $CACHE/.$NAME.log)"
fi
configure_root "$NEW"
printf '%s\n' "$HASH" >"$NEW/.contextd-recipe"
rm -rf "$ROOT"
: >"$ROOT.lock"
mv "$NEW" "$ROOT"
# The roots of other recipes (other clones, older versions), unless a boot
# holds one right now.
for old in "$CACHE/$NAME"-*; do
    if [ "$old" = "$ROOT" ] || [ ! -d "$old" ]; then continue; fi
    if flock -n -x "$old.lock" rm -rf "$old"; then
        rm -f "$old.lock"
        log "removed $old (another recipe)"
    fi
done
log "made $ROOT in $(($(date +%s) - START)) s"
printf '%s\n' "$ROOT"
