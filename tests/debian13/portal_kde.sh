#!/bin/sh
# The consent question in KDE's own dialog (issue 51): xdg-desktop-portal-kde
# 6.3 on a virtual KWin 6, Debian 13, run by tests/it/debian13.rs inside the
# Debian 13 root (scripts/in-root.sh); and 6.7 on KWin 6.7 in the Debian
# testing root (tests/it/debian_testing.rs):
#
#   tests/debian13/portal_kde.sh WORK
#
# WORK (under /tmp, the same path inside and out) holds `contextd` (the
# broker built on the host), answer_dialog.py (tests/portal/) and ask.py.
#
# Everything runs in this one root and mount namespace, as on a Debian 13
# desktop: the broker trusts the backend because the process owning its
# name runs the program its service file names, and a program's path is
# only that when both are seen from the same root. The bus has the root's
# session configuration, so it starts the portal backend and the
# accessibility bus from their service files; the dialog is answered
# through AT-SPI, as a screen-reader user would. Qt's dialog of 6.3 shows
# no choices and keeps its own button labels (OK, Cancel); that of 6.7
# shows the broker's choices and its labels (Allow, Deny). The first
# allows for this time (nothing stored), the second refuses; a question
# nobody answers is closed by the broker at its timeout.
set -eu

log() { printf 'debian13-portal-kde: %s\n' "$*"; }
die() {
    printf 'debian13-portal-kde: error: %s\n' "$*" >&2
    for f in "$W"/*.log; do printf '%s:\n' "$f" >&2; tail -n 15 "$f" >&2; done
    exit 1
}

W=${1:?usage: $0 WORK}
PY=/usr/bin/python3
mkdir -m 0700 "$W/home" "$W/run"
export HOME="$W/home" XDG_RUNTIME_DIR="$W/run" LANG=C.UTF-8
export XDG_CONFIG_HOME="$W/home/config" XDG_DATA_HOME="$W/home/data" XDG_STATE_HOME="$W/home/state"
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$W/no-system-bus"
export PATH=/usr/bin:/bin
pids=
broker=
cleanup() {
    [ -z "$broker" ] || kill "$broker" 2>/dev/null || true
    for p in $pids; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

dbus-daemon --session --fork --address="unix:path=$W/bus" --print-pid=4 4>"$W/bus.pid"
pids="$pids $(cat "$W/bus.pid")"
export DBUS_SESSION_BUS_ADDRESS="unix:path=$W/bus"
kwin_wayland --virtual --width 1280 --height 800 --socket wayland-kde \
    --no-lockscreen --no-global-shortcuts >"$W/kwin.log" 2>&1 &
pids="$pids $!"
i=0
until [ -S "$W/run/wayland-kde" ]; do
    i=$((i + 1))
    [ "$i" -lt 300 ] || die "KWin did not start"
    sleep 0.1
done
export WAYLAND_DISPLAY=wayland-kde QT_QPA_PLATFORM=wayland XDG_CURRENT_DESKTOP=KDE
# Qt speaks AT-SPI when the accessibility bus says a reader is on.
dbus-update-activation-environment WAYLAND_DISPLAY QT_QPA_PLATFORM XDG_CURRENT_DESKTOP \
    XDG_RUNTIME_DIR HOME LANG XDG_CONFIG_HOME XDG_DATA_HOME
gdbus call --session --dest org.a11y.Bus --object-path /org/a11y/bus \
    --method org.freedesktop.DBus.Properties.Set org.a11y.Status IsEnabled "<true>" >/dev/null

mkdir -p "$XDG_CONFIG_HOME/contextd"
start_broker() {
    printf '[consent]\nprompt_timeout_s = %s\n' "$1" >"$XDG_CONFIG_HOME/contextd/config.toml"
    "$W/contextd" >>"$W/contextd.log" 2>&1 &
    broker=$!
    gdbus wait --session --timeout 30 org.contextd.Broker1 || die "the broker did not start"
}
stop_broker() {
    kill -TERM "$broker"
    wait "$broker" 2>/dev/null || true
    broker=
}
answer() { # BUTTON OUT: answer the next dialog (in the background)
    "$PY" "$W/answer_dialog.py" xdg-desktop-portal-kde - "$1" >"$W/$2" 2>>"$W/answer.log" &
    answerer=$!
}

start_broker 60
how=$(gdbus call --session --dest org.contextd.Broker1 --object-path /org/contextd/Broker1 \
    --method org.contextd.Context1.ListSources)
case "$how" in
*"desktop portal's dialog (org.freedesktop.impl.portal.desktop.kde, /usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde"*) ;;
*) die "not asked through xdg-desktop-portal-kde: $how" ;;
esac
version=$(dpkg-query -W -f='${Version}' xdg-desktop-portal-kde)
log "asked through xdg-desktop-portal-kde ($version)"
case "$version" in
6.3.*) ALLOW=OK DENY=Cancel ;;
*) ALLOW=Allow DENY=Deny ;;
esac

# OK: granted for this time.
answer "$ALLOW" allow.json
code=$("$PY" "$W/ask.py" windows "to sort <b>your</b> windows")
wait "$answerer" || die "the dialog was not answered: $(cat "$W/allow.json")"
[ "$code" = 0 ] || die "allow answered $code"
shown=$(cat "$W/allow.json")
case "$shown" in *"see what you are doing?"*) ;; *) die "the dialog showed: $shown" ;; esac
case "$shown" in *"to sort ‹b›your‹/b› windows"*) ;; *) die "the reason, as its words without markup: $shown" ;; esac
log "allow: granted; the dialog showed $shown"

# Cancel: refused.
answer "$DENY" deny.json
code=$("$PY" "$W/ask.py" power "")
wait "$answerer" || die "the dialog was not answered: $(cat "$W/deny.json")"
[ "$code" = 1 ] || die "deny answered $code"
log "deny: refused"

# Nothing was stored: after a restart, the allow is asked again; a
# question nobody answers is closed by the broker at its timeout.
stop_broker
start_broker 4
answer - shown.json
"$PY" "$W/ask.py" windows "" >"$W/unanswered" &
asker=$!
wait "$answerer" || die "no dialog after the restart: $(cat "$W/shown.json")"
answer gone gone.json
wait "$answerer" || die "the dialog stayed after the broker's timeout"
wait "$asker"
code=$(cat "$W/unanswered")
[ "$code" = 2 ] || die "an unanswered question answered $code"
log "asked again after a restart; closed by the broker at its timeout"
log "ok"
