#!/usr/bin/env bash
# Make (once per machine) a Debian root that tests run things in, and print
# its path.
#
#   scripts/roots.sh RECIPE           make the root if it is missing or stale; print its path
#   scripts/roots.sh RECIPE --check   exit 0 if the root is there and current, else 1
#
# RECIPE is a file of scripts/roots/: `boot` (Debian 12 that the systemd boot
# test boots), `desktop13` (Debian 13 with today's desktops: GNOME Shell 48,
# KWin 6, sway 1.10, PipeWire 1.4) or `desktop-testing` (Debian's newest:
# GNOME Shell 51, KWin 6.7, sway 1.12, Hyprland, labwc, PipeWire 1.6). A
# recipe sets NAME, SUITE, INCLUDE (on top of debootstrap's minbase),
# RECIPE_VARS (what else it depends on) and configure_root (run after
# debootstrap with the new root as $1); and DEBOOTSTRAP_SCRIPT where this
# debootstrap knows no script for SUITE (a newer suite: its sid script).
#
# A root lives outside the clone, in $CONTEXTD_ROOTS_CACHE/NAME-HASH (default:
# $XDG_CACHE_HOME/contextd/roots, else ~/.cache/contextd/roots), HASH being
# that of its recipe (the variables and configure_root, not the comments):
# when the recipe changes, a new root is made; else a run takes milliseconds.
# It is made under a lock, so two clones or two tests never build it at once,
# in a scratch directory renamed at the end, so an interrupted build leaves no
# half root behind. A user of a root holds a shared lock on ROOT.lock while it
# runs; a new build removes the roots of other recipes of the same NAME that
# nobody holds.
#
# Needs root and debootstrap (scripts/deps.sh installs it) and the Debian
# mirror (deb.debian.org, or $CONTEXTD_DEBIAN_MIRROR).
set -euo pipefail

CACHE=${CONTEXTD_ROOTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/contextd/roots}
MIRROR=${CONTEXTD_DEBIAN_MIRROR:-http://deb.debian.org/debian}

log() { printf 'roots: %s\n' "$*" >&2; }
die() { printf 'roots: error: %s\n' "$*" >&2; exit 1; }

RECIPE=${1:-}
case "$RECIPE" in
    -h|--help|"") sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; [ -n "$RECIPE" ]; exit ;;
esac
shift
RECIPE_FILE=$(dirname "${BASH_SOURCE[0]}")/roots/$RECIPE.sh
[ -f "$RECIPE_FILE" ] || die "no recipe '$RECIPE' (scripts/roots/*.sh)"
# shellcheck source=/dev/null
. "$RECIPE_FILE"

# shellcheck disable=SC2153 # INCLUDE and the others come from the recipe
recipe_hash() {
    {
        printf '%s\n' "$SUITE" "$MIRROR" "${RECIPE_VARS[@]}" "${INCLUDE[@]}"
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
script=()
if [ -n "${DEBOOTSTRAP_SCRIPT:-}" ]; then
    script=("/usr/share/debootstrap/scripts/$DEBOOTSTRAP_SCRIPT")
fi
if ! debootstrap --variant=minbase --include="$include" --cache-dir="$CACHE/debs" \
    "$SUITE" "$NEW" "$MIRROR" "${script[@]}" >"$CACHE/.$NAME.log" 2>&1; then
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
