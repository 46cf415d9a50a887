#!/bin/sh
# The contextd package on Debian 13, run by tests/it/debian13.rs inside a
# throwaway copy of the Debian 13 root (scripts/in-root.sh --overlay):
#
#   tests/debian13/package.sh DEB
#
# dpkg -i with no network, so every Depends must be satisfied by what a
# Debian 13 desktop has (the t64 libraries provide the names the package
# depends on); then a session bus with the default configuration (reading
# /usr/share/dbus-1/services) starts the daemon for a client's call, as on
# the host (tests/it/package.rs), and contextctl talks to it. The daemon is
# the packaged binary, built on Debian 12, running on Debian 13's libraries.
set -eu

log() { printf 'debian13-package: %s\n' "$*"; }
die() { printf 'debian13-package: error: %s\n' "$*" >&2; exit 1; }

DEB=${1:?usage: $0 DEB}
log "$(cat /etc/debian_version): dpkg -i $(basename "$DEB")"
dpkg -i "$DEB" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log >&2; die "dpkg -i failed"; }
dpkg-query -W -f='${Status} ${Version}\n' contextd

work=$(mktemp -d)
bus_pid=
cleanup() {
    [ -z "$bus_pid" ] || kill "$bus_pid" 2>/dev/null || true
    [ -z "${broker:-}" ] || kill "$broker" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -m 0700 "$work/home" "$work/run"
export HOME="$work/home" XDG_RUNTIME_DIR="$work/run" LANG=C.UTF-8
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/no-system-bus"
dbus-daemon --session --fork --address="unix:path=$work/bus" \
    --print-address=3 --print-pid=4 3>"$work/address" 4>"$work/pid"
bus_pid=$(cat "$work/pid")
export DBUS_SESSION_BUS_ADDRESS="unix:path=$work/bus"

busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
    ListActivatableNames | grep -q '"org.contextd.Broker1"' ||
    die "the installed service file is not read"
log "a client call activates the daemon"
out=$(busctl --user --timeout=60 call org.contextd.Broker1 /org/contextd/Broker1 \
    org.contextd.Context1 ListSources) || die "ListSources through activation failed"
case "$out" in "aa{sv} "*) ;; *) die "unexpected answer: $out" ;; esac
broker=$(busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
    GetConnectionUnixProcessID s org.contextd.Broker1 | cut -d' ' -f2)
exe=$(readlink "/proc/$broker/exe")
[ "$exe" = /usr/bin/contextd ] || die "the name's owner runs $exe"
log "activated: pid $broker, $exe"
contextctl status || die "contextctl status failed"
kill -TERM "$broker"
i=0
while kill -0 "$broker" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -lt 200 ] || die "the daemon did not end on SIGTERM"
    sleep 0.05
done
broker=
log "ok"
