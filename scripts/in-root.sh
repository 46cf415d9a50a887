#!/usr/bin/env bash
# Run COMMAND with its files from a root of scripts/roots.sh, as one process
# of the host's session: it shares the host's /tmp, /dev, /sys, /proc, /run
# and $HOME, so sockets in /tmp (buses, compositors, PipeWire) connect host
# and root, PIDs are the host's (identity from the kernel works across), and
# files a test writes under /tmp are seen inside.
#
#   scripts/in-root.sh [--overlay] ROOT COMMAND [ARG...]
#
# --overlay: COMMAND sees a throwaway copy of ROOT (an overlay with a tmpfs
# on top): what it writes (a package it installs) is gone when it exits,
# and the cached root stays as scripts/roots.sh made it.
#
# The mounts are made in a mount namespace of the command's own (unshare -m):
# nothing appears in the host's mount table, and they go when it exits.
# Everything is exec'd, so COMMAND keeps this script's PID: a signal sent to
# it reaches COMMAND itself (a test's "kill the compositor" kills the
# compositor, not a wrapper). Needs root (unshare, chroot).
set -euo pipefail

die() { printf 'in-root: error: %s\n' "$*" >&2; exit 1; }

if [ "${1:-}" = --inside ]; then
    shift
    overlay=$1 root=$2
    shift 2
    /bin/mount --make-rslave /
    if [ "$overlay" = 1 ]; then
        # On the root's own /mnt, in this namespace only: the tmpfs hides
        # nothing of the root (an overlay's lower layer has no submounts).
        top=$root/mnt
        /bin/mount -t tmpfs -o mode=0755 contextd-overlay "$top"
        mkdir "$top/upper" "$top/work" "$top/merged"
        /bin/mount -t overlay overlay \
            -o "lowerdir=$root,upperdir=$top/upper,workdir=$top/work" "$top/merged"
        root=$top/merged
    fi
    for d in dev proc sys tmp run; do
        /bin/mount --rbind "/$d" "$root/$d"
    done
    # The home, where the root has that directory (/root does; a test's
    # home under /tmp comes with /tmp).
    if [ -n "${HOME:-}" ] && [ "$HOME" != / ] && [ -d "$HOME" ] && [ -d "$root$HOME" ]; then
        /bin/mount --rbind "$HOME" "$root$HOME"
    fi
    exec /usr/sbin/chroot "$root" "$@"
fi

overlay=0
if [ "${1:-}" = --overlay ]; then
    overlay=1
    shift
fi
[ $# -ge 2 ] || die "usage: $0 [--overlay] ROOT COMMAND [ARG...]"
root=$(realpath "$1")
[ -x "$root/bin/sh" ] || die "$1 is no root (no bin/sh): make it with scripts/roots.sh"
[ "$(id -u)" -eq 0 ] || die "needs root (unshare -m, chroot)"
shift
exec /usr/bin/unshare --mount -- "$0" --inside "$overlay" "$root" "$@"
