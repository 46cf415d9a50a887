#!/usr/bin/env bash
# A self-contained, throw-away desktop session for `make run` and the tests:
# a private session bus, headless sway 1.7 with demo windows, and PipeWire
# with WirePlumber and two null audio devices; with --mocks also a private
# system bus with python-dbusmock's logind, UPower, NetworkManager and polkitd,
# and a notification daemon and a screen saver on the session bus. Nothing of
# the user's own session is touched; everything lives in one directory.
#
# Usage:
#   scripts/session.sh start DIR [--root ROOT] [--no-bus] [--no-sway] [--no-pipewire]
#                                [--no-windows] [--system-bus] [--mocks]
#                                [--timeout SECS]
#   scripts/session.sh stop DIR                 stop everything start started
#   scripts/session.sh status DIR               list the parts; exit 1 if one died
#   scripts/session.sh kill-sway DIR [SIGNAL]   kill sway (and its windows)
#   scripts/session.sh start-sway DIR [--no-windows]
#   scripts/session.sh restart-sway DIR
#   scripts/session.sh kill-pipewire DIR [SIGNAL]   kill WirePlumber and PipeWire
#   scripts/session.sh start-pipewire DIR
#   scripts/session.sh restart-pipewire DIR
#   scripts/session.sh kill-mock DIR NAME [SIGNAL]    stop one mock (see --mocks)
#   scripts/session.sh start-mock DIR NAME            start it again, set up as at start
#   scripts/session.sh open-window DIR APP_ID TITLE   open a foot window, wait for it
#   scripts/session.sh set-title DIR APP_ID TITLE     retitle it (OSC 2), wait for sway
#   scripts/session.sh close-window DIR APP_ID        close it, wait until gone
#   scripts/session.sh windows DIR                    print "app_id<TAB>title" per window
#
# `start` writes DIR/env (sh: `export`/`unset` lines, source it) and DIR/env.list
# (NAME=VALUE per line, no quoting; an empty VALUE means "unset NAME"), with:
#   CONTEXTD_SESSION_DIR      DIR (absolute)
#   XDG_RUNTIME_DIR           DIR/runtime (0700, owned by the caller)
#   DBUS_SESSION_BUS_ADDRESS  unix:path=DIR/runtime/bus      (unset with --no-bus)
#   DBUS_SYSTEM_BUS_ADDRESS   unix:path=DIR/runtime/system_bus
#                             (only with --system-bus or --mocks)
#   WAYLAND_DISPLAY           wayland-1, a symlink in DIR/runtime to sway's socket
#   SWAYSOCK                  DIR/sway-ipc.sock, a symlink to sway's IPC socket
#   PIPEWIRE_RUNTIME_DIR      DIR/runtime (PipeWire's socket is pipewire-0 there)
# The values stay the same across kill-sway/start-sway and
# kill-pipewire/start-pipewire, so a test can source the file once.
#
# The same switches as environment variables (1 = on):
#   CONTEXTD_SESSION_NO_BUS, CONTEXTD_SESSION_NO_SWAY, CONTEXTD_SESSION_NO_PIPEWIRE,
#   CONTEXTD_SESSION_NO_WINDOWS, CONTEXTD_SESSION_SYSTEM_BUS, CONTEXTD_SESSION_MOCKS,
#   CONTEXTD_SESSION_TIMEOUT (seconds each part may take to be ready; default 20),
#   CONTEXTD_TEST_USER (who runs sway when we are root; default contextd-test),
#   CONTEXTD_SESSION_ROOT (as --root).
#
# --root ROOT runs the desktop parts (sway, its foot windows, PipeWire and
# WirePlumber) with their files from ROOT, a root of scripts/roots.sh (e.g.
# `scripts/roots.sh desktop13`: sway 1.10, PipeWire 1.4), through
# scripts/in-root.sh (needs root); the buses, the mocks and the tools this
# script polls with (swaymsg, pw-cli, wpctl) stay the host's, and talk to
# them through their sockets like any client.
#
# Logs: DIR/dbus.log, DIR/system-dbus.log, DIR/pipewire-dbus.log (a bus only
# for WirePlumber, with --no-bus), DIR/sway.log, DIR/pipewire.log,
# DIR/wireplumber.log, DIR/window-APP_ID.log, DIR/mock-NAME.log (each mock's
# method calls: DIR/mock-notifications.log shows every notification, consent
# prompts included). Pid files: DIR/pids/NAME.pid
# ("PID STARTTIME", so a reused PID is never killed).
#
# What runs:
# - dbus-daemon with DIR/dbus.conf; only .service files that a test puts in
#   DIR/dbus-services (DIR/system-dbus-services) can be activated.
# - sway, headless, pixman renderer, no Xwayland, output HEADLESS-1 1280x720.
#   sway refuses to run as root: as root, sway runs as CONTEXTD_TEST_USER with
#   its own runtime dir under /tmp (linked from DIR/sway-runtime, removed by
#   stop); root reaches its sockets through the symlinks above.
# - foot windows, as the caller: org.contextd.Demo1 "Demo one" and
#   org.contextd.Demo2 "Demo two" unless --no-windows; the pid in sway's tree is
#   foot's, recorded in DIR/pids/window-APP_ID.pid. start-sway and
#   restart-sway reopen the two demo windows (not ones from open-window).
# - pipewire + wireplumber, as the caller, with null devices
#   "contextd-null-sink" (Audio/Sink, the default sink) and
#   "contextd-null-source" (Audio/Source/Virtual, the default source).
# - with --mocks (implies --system-bus), python-dbusmock (Debian's
#   python3-dbusmock), as the caller. On the system bus: logind with an
#   active session "c1" on seat0 for the caller (the caller's User.Display,
#   so a broker finds it without XDG_SESSION_ID); UPower on battery, its
#   display device a battery at 73 %, discharging; NetworkManager with full
#   connectivity and one connected Wi-Fi "contextd demo Wi-Fi" as the primary
#   connection; polkitd authorising every action (this bus has only the
#   caller on it); GeoClue2 (tests/fdo/geoclue2.py) that knows a place in
#   Zürich and lets every app know it. On the session bus, unless a test put its own there: the
#   notification_daemon template and an org.freedesktop.ScreenSaver that is
#   off; and the real Evolution Data Server (its registry, and its calendar
#   factory when asked), with its data under DIR/home.
# stop also kills any process that still carries CONTEXTD_SESSION_MARK=DIR in
# its environment (everything started here does), and nothing else.
set -euo pipefail

SCRIPT=$(basename "$0")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_USER=${CONTEXTD_TEST_USER:-contextd-test}
TIMEOUT=${CONTEXTD_SESSION_TIMEOUT:-20}
PY=/usr/bin/python3
DEMO_WINDOWS=("org.contextd.Demo1|Demo one" "org.contextd.Demo2|Demo two")

die() { printf '%s: error: %s\n' "$SCRIPT" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$SCRIPT" "$*" >&2; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; }

# ---------------------------------------------------------------- processes

# Field N of /proc/PID/stat (3 = state, 22 = start time in clock ticks).
stat_of() { # PID FIELD
    local stat fields
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    read -r -a fields <<<"$stat"
    printf '%s\n' "${fields[$(($2 - 3))]}"
}

pidfile() { printf '%s/pids/%s.pid\n' "$DIR" "$1"; }

record_pid() { # NAME PID
    local st
    st=$(stat_of "$2" 22) || st=0
    printf '%s %s\n' "$2" "$st" >"$(pidfile "$1")"
}

# Is the process recorded for NAME still running (and still the same one)?
running() { # NAME
    local f pid st state now
    f=$(pidfile "$1")
    [ -r "$f" ] || return 1
    read -r pid st <"$f" || return 1
    [ -n "${pid:-}" ] || return 1
    state=$(stat_of "$pid" 3) || return 1
    case "$state" in Z|X|x) return 1 ;; esac
    now=$(stat_of "$pid" 22) || return 1
    [ "$st" = 0 ] || [ "$now" = "$st" ]
}

recorded_pid() { local pid _st; read -r pid _st <"$(pidfile "$1")"; printf '%s\n' "$pid"; }

# Stop the process recorded for NAME: SIGNAL (default TERM), repeated every
# half second (sway 1.7 loses a SIGTERM that arrives while it starts up), then
# SIGKILL after 5 s. Removes the pid file. Quiet and successful when there is
# nothing to stop.
stop_proc() { # NAME [SIGNAL]
    local name=$1 sig=${2:-TERM} pid i
    if running "$name"; then
        pid=$(recorded_pid "$name")
        for ((i = 0; i < 100; i++)); do
            if ((i % 10 == 0)); then kill -s "$sig" "$pid" 2>/dev/null || true; fi
            running "$name" || break
            sleep 0.05
        done
        if running "$name"; then
            note "$name (pid $pid) ignored SIG$sig for 5 s; sending SIGKILL"
            kill -s KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 100; i++)); do
                running "$name" || break
                sleep 0.05
            done
            if running "$name"; then note "$name (pid $pid) survived SIGKILL"; fi
        fi
    fi
    rm -f "$(pidfile "$name")"
}

# Start a detached process (own session, stdin /dev/null, output appended to
# LOG, no inherited file descriptors) and record its pid as NAME.
# Every process we start carries CONTEXTD_SESSION_MARK=DIR in its environment,
# so that `stop` can find stragglers (children of children) and only those.
launch() { # NAME LOG COMMAND...
    local name=$1 log=$2
    shift 2
    printf -- '--- %s: %s\n' "$(date '+%F %T')" "$*" >>"$log"
    (
        # Close everything above stderr: a caller reading our stdout to EOF
        # must not wait for the session to end.
        for fd in /proc/"$BASHPID"/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        cd /
        exec setsid "$@" </dev/null >>"$log" 2>&1
    ) &
    local pid=$!
    # Not our job any more: no "Killed" notices when it is stopped.
    disown "$pid" 2>/dev/null || true
    record_pid "$name" "$pid"
}

# The prefix that runs a desktop part in the session's root (--root), if any.
in_root() {
    if [ -n "${SESSION_ROOT:-}" ]; then
        printf '%s\n' "$HERE/in-root.sh" "$SESSION_ROOT"
    fi
}

# The base environment of everything we start: nothing of the caller's desktop.
base_env() {
    printf '%s\n' env -i "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        "LANG=C.UTF-8" "CONTEXTD_SESSION_MARK=$DIR"
}

# Print the last lines of a log, indented, for error messages.
log_tail() { # LOG
    if [ -s "$1" ]; then
        printf '  last lines of %s:\n' "$1"
        tail -n 25 "$1" | sed 's/^/    /'
    else
        printf '  (%s is empty)\n' "$1"
    fi
}

# Poll CHECK (a shell function) every 50 ms until it succeeds, the process NAME
# dies, or $TIMEOUT seconds pass. On failure print why, with the log's tail.
wait_ready() { # NAME LOG WHAT CHECK...
    local name=$1 log=$2 what=$3
    shift 3
    local deadline=$((SECONDS + TIMEOUT))
    while :; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        if [ -n "$name" ] && ! running "$name"; then
            "$@" >/dev/null 2>&1 && return 0
            { printf '%s: error: %s exited before %s\n' "$SCRIPT" "$name" "$what"; log_tail "$log"; } >&2
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            { printf '%s: error: %s: no %s within %s s\n' "$SCRIPT" "$name" "$what" "$TIMEOUT"; log_tail "$log"; } >&2
            return 1
        fi
        sleep 0.05
    done
}

# ---------------------------------------------------------------- state

# Settings of this session, written by start, read by the other commands.
save_conf() {
    {
        printf 'WANT_BUS=%s\nWANT_SYSTEM_BUS=%s\nWANT_SWAY=%s\nWANT_PIPEWIRE=%s\nWANT_WINDOWS=%s\nWANT_MOCKS=%s\nSESSION_ROOT=%s\n' \
            "$WANT_BUS" "$WANT_SYSTEM_BUS" "$WANT_SWAY" "$WANT_PIPEWIRE" "$WANT_WINDOWS" "$WANT_MOCKS" "$SESSION_ROOT"
    } >"$DIR/session.conf"
}

load_conf() {
    [ -r "$DIR/session.conf" ] || die "$DIR is not a session directory (no session.conf); run: $SCRIPT start $DIR"
    local line key value
    WANT_MOCKS=0
    SESSION_ROOT=
    while IFS= read -r line; do
        key=${line%%=*}
        value=${line#*=}
        case "$key" in
            WANT_BUS|WANT_SYSTEM_BUS|WANT_SWAY|WANT_PIPEWIRE|WANT_WINDOWS|WANT_MOCKS|SESSION_ROOT) printf -v "$key" '%s' "$value" ;;
        esac
    done <"$DIR/session.conf"
}

set_dir() { # DIR [create]
    [ -n "${1:-}" ] || die "missing DIR (see: $SCRIPT --help)"
    if [ "${2:-}" = create ]; then mkdir -p "$1"; fi
    [ -d "$1" ] || die "no such directory: $1"
    DIR=$(cd "$1" && pwd -P)
    RUNTIME=$DIR/runtime
    BUS_SOCKET=$RUNTIME/bus
    SYSTEM_BUS_SOCKET=$RUNTIME/system_bus
    # Sockets live in RUNTIME; their paths must fit in sun_path (108 bytes).
    if [ $((${#RUNTIME} + 20)) -gt 107 ]; then
        die "DIR is too long for Unix socket paths (${#RUNTIME} + 20 > 107 bytes): $DIR"
    fi
}

# The session's variables, NAME=VALUE per line; an empty VALUE means unset.
env_lines() {
    local -a lines=("CONTEXTD_SESSION_DIR=$DIR" "XDG_RUNTIME_DIR=$RUNTIME")
    if [ "$WANT_BUS" = 1 ]; then
        lines+=("DBUS_SESSION_BUS_ADDRESS=unix:path=$BUS_SOCKET")
    else
        lines+=("DBUS_SESSION_BUS_ADDRESS=")
    fi
    if [ "$WANT_SYSTEM_BUS" = 1 ]; then
        lines+=("DBUS_SYSTEM_BUS_ADDRESS=unix:path=$SYSTEM_BUS_SOCKET")
    fi
    if [ "$WANT_SWAY" = 1 ]; then
        lines+=("WAYLAND_DISPLAY=wayland-1" "SWAYSOCK=$DIR/sway-ipc.sock")
    else
        lines+=("WAYLAND_DISPLAY=" "SWAYSOCK=")
    fi
    if [ "$WANT_PIPEWIRE" = 1 ]; then
        lines+=("PIPEWIRE_RUNTIME_DIR=$RUNTIME")
    else
        lines+=("PIPEWIRE_RUNTIME_DIR=")
    fi
    printf '%s\n' "${lines[@]}"
}

write_env() {
    local -a lines
    mapfile -t lines < <(env_lines)
    printf '%s\n' "${lines[@]}" >"$DIR/env.list.tmp"
    local l key value
    {
        printf '# contextd test session in %s (scripts/session.sh)\n' "$DIR"
        for l in "${lines[@]}"; do
            key=${l%%=*}
            value=${l#*=}
            if [ -n "$value" ]; then
                printf "export %s='%s'\n" "$key" "${value//\'/\'\\\'\'}"
            else
                printf 'unset %s\n' "$key"
            fi
        done
    } >"$DIR/env.tmp"
    mv -f "$DIR/env.list.tmp" "$DIR/env.list"
    mv -f "$DIR/env.tmp" "$DIR/env"
}

# ---------------------------------------------------------------- D-Bus

bus_answers() { # ADDRESS
    timeout 2 dbus-send --bus="$1" --print-reply --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus.GetId
}

start_bus() { # NAME SOCKET TYPE
    local name=$1 socket=$2 type=$3
    local conf=$DIR/$name.conf log=$DIR/$name.log
    cat >"$conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- Private $type bus of a contextd test session (scripts/session.sh). -->
<busconfig>
  <type>$type</type>
  <keep_umask/>
  <listen>unix:path=$socket</listen>
  <auth>EXTERNAL</auth>
  <!-- Only services that a test puts here can be activated. -->
  <servicedir>$DIR/$name-services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <limit name="reply_timeout">30000</limit>
</busconfig>
EOF
    mkdir -p "$DIR/$name-services"
    rm -f "$socket"
    # Services the bus activates get the session's environment (and the mark).
    local -a env_cmd
    mapfile -t env_cmd < <(base_env)
    env_cmd+=("HOME=$DIR/home")
    local l
    while IFS= read -r l; do
        if [ -n "${l#*=}" ]; then env_cmd+=("$l"); fi
    done < <(env_lines)
    launch "$name" "$log" "${env_cmd[@]}" dbus-daemon --nofork --nopidfile --nosyslog --config-file="$conf"
    wait_ready "$name" "$log" "answer on unix:path=$socket" bus_answers "unix:path=$socket"
}

# ---------------------------------------------------------------- mocks

MOCK_IFACE=org.freedesktop.DBus.Mock
# Every mock start_mocks may start (pid files DIR/pids/mock-NAME.pid).
MOCKS=(logind upower networkmanager polkitd geoclue notifications screensaver)

# Does NAME have an owner on the bus at ADDRESS?
has_owner() { # ADDRESS NAME
    local reply
    reply=$(timeout 2 dbus-send --bus="$1" --print-reply=literal --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner "string:$2") || return 1
    [[ $reply == *true* ]]
}

# busctl on the bus at ADDRESS; the first string or object path of the reply
# (if any) on stdout.
mock_busctl() { # ADDRESS BUSCTL-ARGS...
    local address=$1 out
    shift
    out=$(timeout 10 busctl --address="$address" "$@") ||
        die "busctl $* failed (see the mock-*.log files in $DIR)"
    if [[ $out == *\"* ]]; then
        out=${out#*\"}
        printf '%s\n' "${out%%\"*}"
    fi
}

# python3 -m dbusmock ARGS..., as the caller, until it owns BUS_NAME.
start_mock() { # NAME BUS_NAME ADDRESS DBUSMOCK-ARGS...
    local name=$1 bus_name=$2 address=$3
    shift 3
    local -a env_cmd
    mapfile -t env_cmd < <(base_env)
    env_cmd+=("HOME=$DIR/home" "PYTHONUNBUFFERED=1"
        "DBUS_SYSTEM_BUS_ADDRESS=unix:path=$SYSTEM_BUS_SOCKET")
    if [ "$WANT_BUS" = 1 ]; then env_cmd+=("DBUS_SESSION_BUS_ADDRESS=unix:path=$BUS_SOCKET"); fi
    launch "mock-$name" "$DIR/mock-$name.log" "${env_cmd[@]}" "$PY" -m dbusmock "$@"
    wait_ready "mock-$name" "$DIR/mock-$name.log" "$bus_name on the bus" has_owner "$address" "$bus_name"
}

# One mock and its setup (see "What runs" above): logind, upower,
# networkmanager, polkitd, geoclue (system bus); notifications, screensaver
# (session bus). start-mock and `start --mocks` use these.
sys_addr() { printf 'unix:path=%s\n' "$SYSTEM_BUS_SOCKET"; }

start_mock_logind() {
    local sys uid user login=org.freedesktop.login1 lpath=/org/freedesktop/login1
    sys=$(sys_addr)
    uid=$(id -u)
    user=$(id -un)
    start_mock logind "$login" "$sys" --system --template logind
    mock_busctl "$sys" call "$login" "$lpath" "$MOCK_IFACE" AddSession ssusb \
        c1 seat0 "$uid" "$user" true >/dev/null
    # python-dbusmock's logind has no GetSessionByPID and fails GetUser: the
    # broker finds the session as the user's display session.
    mock_busctl "$sys" set-property "$login" "$lpath/user/$uid" org.freedesktop.login1.User \
        Display '(so)' c1 "$lpath/session/c1"
}

start_mock_upower() {
    local sys up=org.freedesktop.UPower upath=/org/freedesktop/UPower
    sys=$(sys_addr)
    start_mock upower "$up" "$sys" --system --template upower -p '{"OnBattery": true}'
    mock_busctl "$sys" call "$up" "$upath" "$MOCK_IFACE" AddDischargingBattery ssdx \
        BAT0 "contextd demo battery" 73.0 6900 >/dev/null
    # type battery, state discharging, 73 %, energy, full, rate, 1 h 55 min
    # to empty, present, warning level none
    mock_busctl "$sys" call "$up" "$upath" "$MOCK_IFACE" SetupDisplayDevice uuddddxxbsu \
        2 2 73.0 36.5 50.0 9.5 6900 0 true battery-good-symbolic 1
}

start_mock_networkmanager() {
    local sys nm=org.freedesktop.NetworkManager npath=/org/freedesktop/NetworkManager
    local ssid="contextd demo Wi-Fi" dev ap conn active
    sys=$(sys_addr)
    start_mock networkmanager "$nm" "$sys" --system --template networkmanager
    # state 100: activated
    dev=$(mock_busctl "$sys" call "$nm" "$npath" "$MOCK_IFACE" AddWiFiDevice ssi wlan0 wlan0 100)
    # infrastructure mode, 2437 MHz, 54 Mbit/s, strength 82, WPA2-PSK
    ap=$(mock_busctl "$sys" call "$nm" "$npath" "$MOCK_IFACE" AddAccessPoint ssssuuuyu \
        "$dev" ap1 "$ssid" 00:11:22:33:44:55 2 2437 54000 82 256)
    conn=$(mock_busctl "$sys" call "$nm" "$npath" "$MOCK_IFACE" AddWiFiConnection ssss \
        "$dev" conn1 "$ssid" wpa-psk)
    # state 2: activated
    active=$(mock_busctl "$sys" call "$nm" "$npath" "$MOCK_IFACE" AddActiveConnection assssu \
        1 "$dev" "$conn" "$ap" ac1 2)
    # The template lacks these manager properties. Metered 4: guess-no.
    mock_busctl "$sys" call "$nm" "$npath" "$MOCK_IFACE" AddProperty ssv \
        "$nm" PrimaryConnection o "$active"
    mock_busctl "$sys" call "$nm" "$npath" "$MOCK_IFACE" AddProperty ssv "$nm" Metered u 4
}

# Only the caller is on this bus: authorise every action, the broker's
# own (contextctl consent grant/revoke) by name.
start_mock_polkitd() {
    local sys pk=org.freedesktop.PolicyKit1 ppath=/org/freedesktop/PolicyKit1/Authority
    sys=$(sys_addr)
    start_mock polkitd "$pk" "$sys" --system --template polkitd
    mock_busctl "$sys" call "$pk" "$ppath" "$MOCK_IFACE" SetAllowed as 1 org.contextd.manage-consent
    mock_busctl "$sys" call "$pk" "$ppath" "$MOCK_IFACE" AllowUnknown b true
}

start_mock_geoclue() {
    local sys gc=org.freedesktop.GeoClue2 gpath=/org/freedesktop/GeoClue2/Manager
    sys=$(sys_addr)
    start_mock geoclue "$gc" "$sys" --system \
        --template "$(dirname "$(readlink -f "$0")")/../tests/fdo/geoclue2.py"
    mock_busctl "$sys" call "$gc" "$gpath" "$MOCK_IFACE" SetLocation ddds \
        47.376954 8.541694 25 "contextd demo place" >/dev/null
}

start_mock_notifications() {
    start_mock notifications org.freedesktop.Notifications "unix:path=$BUS_SOCKET" --session \
        --template notification_daemon
}

start_mock_screensaver() {
    local ses=unix:path=$BUS_SOCKET ss=org.freedesktop.ScreenSaver spath=/org/freedesktop/ScreenSaver
    start_mock screensaver "$ss" "$ses" --session "$ss" "$spath" "$ss"
    mock_busctl "$ses" call "$ss" "$spath" "$MOCK_IFACE" AddMethod sssss \
        '' GetActive '' b 'ret = False'
}

# Evolution Data Server, the real one: its registry of calendars and its
# calendar factory, activatable on the session bus with their data under
# DIR/home (the bus starts its services with the session's HOME), and the
# registry started (the broker's calendar source reads it and never starts
# it itself). Without evolution-data-server the calendar source says so.
EDS_SERVICES=("org.gnome.evolution.dataserver.Sources5|/usr/libexec/evolution-source-registry"
    "org.gnome.evolution.dataserver.Calendar8|/usr/libexec/evolution-calendar-factory")
start_eds() {
    local ses=unix:path=$BUS_SOCKET pair name exe
    for pair in "${EDS_SERVICES[@]}"; do
        name=${pair%%|*} exe=${pair#*|}
        if [ ! -x "$exe" ]; then
            note "no $exe (evolution-data-server): the calendar source stays unavailable"
            return 0
        fi
        printf '[D-BUS Service]\nName=%s\nExec=%s\n' "$name" "$exe" >"$DIR/dbus-services/$name.service"
    done
    name=${EDS_SERVICES[0]%%|*}
    timeout 10 dbus-send --bus="$ses" --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.StartServiceByName "string:$name" uint32:0 >/dev/null ||
        die "the session bus could not start $name (see $DIR/dbus.log)"
    wait_ready "" "$DIR/dbus.log" "$name on the bus" has_owner "$ses" "$name"
}

# The system services of a desktop, and a notification daemon and a screen
# saver on the session bus (see "What runs" above).
start_mocks() {
    local ses=unix:path=$BUS_SOCKET
    "$PY" -c 'import dbusmock' 2>/dev/null ||
        die "$PY cannot import dbusmock: install python3-dbusmock (make deps)"
    start_mock_logind
    start_mock_upower
    start_mock_networkmanager
    start_mock_polkitd
    start_mock_geoclue

    [ "$WANT_BUS" = 1 ] || return 0
    if has_owner "$ses" org.freedesktop.Notifications; then
        note "org.freedesktop.Notifications already runs on the session bus; not mocking it"
    else
        start_mock_notifications
    fi
    if has_owner "$ses" org.freedesktop.ScreenSaver; then
        note "org.freedesktop.ScreenSaver already runs on the session bus; not mocking it"
    else
        start_mock_screensaver
    fi
    if has_owner "$ses" org.gnome.evolution.dataserver.Sources5; then
        note "Evolution Data Server already runs on the session bus; not starting it"
    else
        start_eds
    fi
}

# kill-mock/start-mock: NAME must be one of MOCKS.
valid_mock() { # NAME
    local m
    for m in "${MOCKS[@]}"; do [ "$m" = "$1" ] && return 0; done
    die "unknown mock: $1 (one of: ${MOCKS[*]})"
}

stop_mocks() {
    local m
    for m in "${MOCKS[@]}"; do stop_proc "mock-$m"; done
}

# ---------------------------------------------------------------- sway

# The directory sway uses as XDG_RUNTIME_DIR (sway insists that its user owns it).
sway_runtime() {
    if [ -L "$DIR/sway-runtime" ]; then
        readlink "$DIR/sway-runtime"
    else
        printf '%s\n' "$DIR/sway-runtime"
    fi
}

make_sway_runtime() {
    local sr
    if [ -e "$DIR/sway-runtime" ]; then
        sr=$(sway_runtime)
        [ -d "$sr" ] || { rm -f "$DIR/sway-runtime"; make_sway_runtime; return; }
        return 0
    fi
    if [ "$(id -u)" -eq 0 ]; then
        id -u "$TEST_USER" >/dev/null 2>&1 ||
            die "sway refuses to run as root and user '$TEST_USER' does not exist: run scripts/deps.sh"
        # DIR may sit below directories the test user cannot enter: use /tmp.
        sr=$(mktemp -d /tmp/contextd-sway.XXXXXXXX)
        chown "$TEST_USER:" "$sr"
        chmod 0700 "$sr"
        ln -s "$sr" "$DIR/sway-runtime"
    else
        mkdir -m 0700 "$DIR/sway-runtime"
    fi
}

# sway's IPC socket for the recorded sway process.
sway_ipc_socket() {
    local pid uid
    pid=$(recorded_pid sway)
    uid=$(stat -c %u "$(sway_runtime)")
    printf '%s/sway-ipc.%s.%s.sock\n' "$(sway_runtime)" "$uid" "$pid"
}

sway_ready() {
    local sr sock display
    sr=$(sway_runtime)
    sock=$(sway_ipc_socket)
    [ -S "$sock" ] || return 1
    # The newest wayland-N socket in sway's private runtime dir.
    display=$(cd "$sr" && find . -maxdepth 1 -type s -name 'wayland-*' -printf '%T@ %f\n' |
        sort -rn | head -n 1 | cut -d' ' -f2)
    [ -n "$display" ] || return 1
    ln -sfn "$sr/$display" "$RUNTIME/wayland-1"
    ln -sfn "$sock" "$DIR/sway-ipc.sock"
    timeout 2 swaymsg -s "$DIR/sway-ipc.sock" -t get_version
}

start_sway() {
    running sway && die "sway is already running (pid $(recorded_pid sway))"
    make_sway_runtime
    local sr cfg log=$DIR/sway.log
    sr=$(sway_runtime)
    cfg=$sr/config
    cat >"$cfg" <<'EOF'
# Headless sway for contextd tests (scripts/session.sh).
xwayland disable
output HEADLESS-1 resolution 1280x720
focus_follows_mouse no
EOF
    # Sockets of an earlier sway of this session (its dir is private to us).
    rm -f "$RUNTIME/wayland-1" "$DIR/sway-ipc.sock" "$sr"/sway-ipc.*.sock
    local -a env_cmd
    mapfile -t env_cmd < <(base_env)
    env_cmd+=("HOME=$sr" "XDG_RUNTIME_DIR=$sr" "WLR_BACKENDS=headless"
        "WLR_LIBINPUT_NO_DEVICES=1" "WLR_RENDERER=pixman")
    mapfile -t -O "${#env_cmd[@]}" env_cmd < <(in_root)
    if [ "$(id -u)" -eq 0 ]; then
        chown "$TEST_USER:" "$cfg"
        launch sway "$log" "${env_cmd[@]}" \
            setpriv --reuid="$(id -u "$TEST_USER")" --regid="$(id -g "$TEST_USER")" --clear-groups -- sway -c "$cfg"
    else
        launch sway "$log" "${env_cmd[@]}" sway -c "$cfg"
    fi
    wait_ready sway "$log" "IPC answer (swaymsg -t get_version)" sway_ready
}

# Kill sway as a crash would; its foot windows then exit by themselves (any
# that linger are stopped).
kill_sway() { # [SIGNAL]
    stop_proc sway "${1:-TERM}"
    local f i
    for f in "$DIR"/pids/window-*.pid; do
        [ -e "$f" ] || continue
        for ((i = 0; i < 40; i++)); do
            running "$(basename "$f" .pid)" || break
            sleep 0.05
        done
    done
    close_all_windows TERM
    rm -f "$RUNTIME/wayland-1" "$DIR/sway-ipc.sock"
}

# ---------------------------------------------------------------- windows

valid_app_id() {
    [[ $1 =~ ^[A-Za-z0-9._-]+$ ]] || die "app id must match [A-Za-z0-9._-]+: $1"
}

# "app_id<TAB>title" for each window in sway's tree.
list_windows() {
    timeout 5 swaymsg -s "$DIR/sway-ipc.sock" -r -t get_tree | "$PY" -c '
import json, sys
def walk(n):
    if n.get("app_id") is not None or n.get("window_properties"):
        print("%s\t%s" % (n.get("app_id") or "", n.get("name") or ""))
    for c in n.get("nodes", []) + n.get("floating_nodes", []):
        walk(c)
walk(json.load(sys.stdin))'
}

window_shown() { # APP_ID [TITLE]
    local windows
    windows=$(list_windows) || return 1
    if [ $# -ge 2 ]; then
        grep -qxF "$1"$'\t'"$2" <<<"$windows"
    else
        cut -f1 <<<"$windows" | grep -cxF "$1" >/dev/null
    fi
}

window_gone() { ! window_shown "$1"; }

# A foot window whose shell turns each line written to its FIFO into its title.
open_window() { # APP_ID TITLE
    local app_id=$1 title=$2
    valid_app_id "$app_id"
    running sway || die "sway is not running"
    running "window-$app_id" && die "window $app_id is already open"
    mkdir -p "$DIR/windows"
    local fifo=$DIR/windows/$app_id.fifo log=$DIR/window-$app_id.log
    rm -f "$fifo"
    mkfifo -m 0600 "$fifo"
    local -a env_cmd
    mapfile -t env_cmd < <(base_env)
    env_cmd+=("HOME=$DIR/home" "XDG_RUNTIME_DIR=$RUNTIME" "WAYLAND_DISPLAY=wayland-1")
    mapfile -t -O "${#env_cmd[@]}" env_cmd < <(in_root)
    # shellcheck disable=SC2016 # expanded by the window's shell
    launch "window-$app_id" "$log" "${env_cmd[@]}" \
        foot --app-id="$app_id" --title="$title" \
        sh -c 'exec 3<>"$1"; while IFS= read -r t <&3; do printf "\033]2;%s\007" "$t"; done' \
        window "$fifo"
    wait_ready "window-$app_id" "$log" "window in sway's tree" window_shown "$app_id" "$title"
}

set_title() { # APP_ID TITLE
    local app_id=$1 title=$2
    valid_app_id "$app_id"
    running "window-$app_id" || die "window $app_id is not open"
    printf '%s\n' "$title" | timeout "$TIMEOUT" tee "$DIR/windows/$app_id.fifo" >/dev/null ||
        die "could not write to the window's FIFO"
    wait_ready "window-$app_id" "$DIR/window-$app_id.log" "title '$title'" window_shown "$app_id" "$title"
}

close_window() { # APP_ID [SIGNAL]
    local app_id=$1
    valid_app_id "$app_id"
    stop_proc "window-$app_id" "${2:-TERM}"
    rm -f "$DIR/windows/$app_id.fifo"
    if running sway; then
        wait_ready "" "$DIR/sway.log" "removal of window $app_id" window_gone "$app_id"
    fi
}

close_all_windows() { # [SIGNAL]
    local f name
    for f in "$DIR"/pids/window-*.pid; do
        [ -e "$f" ] || continue
        name=$(basename "$f" .pid)
        stop_proc "$name" "${1:-TERM}"
        rm -f "$DIR/windows/${name#window-}.fifo"
    done
}

open_demo_windows() {
    local w
    for w in "${DEMO_WINDOWS[@]}"; do
        open_window "${w%%|*}" "${w#*|}"
    done
}

# ---------------------------------------------------------------- PipeWire

pipewire_answers() { timeout 2 pw-cli -r "$RUNTIME/pipewire-0" info 0; }

# WirePlumber is at work once it has chosen the default sink and source.
default_is() { # sink|source NODE_NAME
    local env=(env "XDG_RUNTIME_DIR=$RUNTIME" "PIPEWIRE_RUNTIME_DIR=$RUNTIME")
    local up
    up=${1^^}
    # grep -c reads all input: grep -q's early exit would break the pipe
    # and fail the pipeline under pipefail.
    "${env[@]}" timeout 2 wpctl inspect "@DEFAULT_AUDIO_${up}@" | grep -c "node.name = \"$2\"" >/dev/null
}

wireplumber_ready() {
    default_is sink contextd-null-sink && default_is source contextd-null-source
}

# WirePlumber 0.4 makes the virtual null source the default source by
# itself; 0.5 (Debian 13) never picks a virtual source on its own. Name it
# as the user's choice would (the "default" metadata's configured source),
# which both follow.
configure_default_source() {
    default_is sink contextd-null-sink || return 1
    env "XDG_RUNTIME_DIR=$RUNTIME" "PIPEWIRE_RUNTIME_DIR=$RUNTIME" timeout 2 \
        pw-metadata 0 default.configured.audio.source '{ "name": "contextd-null-source" }' Spa:String:JSON
}

start_pipewire() {
    running pipewire && die "pipewire is already running (pid $(recorded_pid pipewire))"
    running wireplumber && die "wireplumber is already running (pid $(recorded_pid wireplumber))"
    local conf_home=$DIR/pipewire-config
    mkdir -p "$conf_home/pipewire/pipewire.conf.d" "$DIR/pipewire-state" "$DIR/home"
    cat >"$conf_home/pipewire/pipewire.conf.d/50-contextd-null-devices.conf" <<'EOF'
# Two null devices so that streams have somewhere to go (scripts/session.sh).
context.objects = [
    {   factory = adapter
        args = {
            factory.name     = support.null-audio-sink
            node.name        = "contextd-null-sink"
            node.description = "contextd null sink"
            media.class      = "Audio/Sink"
            audio.position   = [ FL FR ]
            object.linger    = true
        }
    }
    {   factory = adapter
        args = {
            factory.name     = support.null-audio-sink
            node.name        = "contextd-null-source"
            node.description = "contextd null source"
            media.class      = "Audio/Source/Virtual"
            audio.position   = [ FL FR ]
            object.linger    = true
        }
    }
]
EOF
    local -a env_cmd
    mapfile -t env_cmd < <(base_env)
    env_cmd+=("HOME=$DIR/home" "XDG_RUNTIME_DIR=$RUNTIME" "PIPEWIRE_RUNTIME_DIR=$RUNTIME"
        "XDG_CONFIG_HOME=$conf_home" "XDG_STATE_HOME=$DIR/pipewire-state"
        "XDG_DATA_HOME=$DIR/pipewire-state")
    # WirePlumber exits without a session bus: with --no-bus it gets one of
    # its own, which the env file does not mention.
    if [ "$WANT_BUS" = 1 ]; then
        env_cmd+=("DBUS_SESSION_BUS_ADDRESS=unix:path=$BUS_SOCKET")
    else
        if ! running pipewire-dbus; then
            start_bus pipewire-dbus "$DIR/pipewire_bus" session || return 1
        fi
        env_cmd+=("DBUS_SESSION_BUS_ADDRESS=unix:path=$DIR/pipewire_bus")
    fi
    mapfile -t -O "${#env_cmd[@]}" env_cmd < <(in_root)
    launch pipewire "$DIR/pipewire.log" "${env_cmd[@]}" pipewire
    wait_ready pipewire "$DIR/pipewire.log" "answer (pw-cli info 0)" pipewire_answers || return 1
    launch wireplumber "$DIR/wireplumber.log" "${env_cmd[@]}" wireplumber
    wait_ready wireplumber "$DIR/wireplumber.log" "default sink (wpctl inspect), then the source named" \
        configure_default_source || return 1
    wait_ready wireplumber "$DIR/wireplumber.log" "default sink and source (wpctl inspect)" wireplumber_ready
}

kill_pipewire() { # [SIGNAL]
    stop_proc wireplumber "${1:-TERM}"
    stop_proc pipewire "${1:-TERM}"
}

# ---------------------------------------------------------------- whole session

# Stop every process this session started, then any straggler that carries
# this session's mark, and remove sway's runtime dir under /tmp.
stop_all() {
    [ -d "$DIR/pids" ] || [ -e "$DIR/sway-runtime" ] || return 0
    close_all_windows TERM
    stop_proc wireplumber
    stop_proc pipewire
    stop_proc sway
    stop_mocks
    stop_proc dbus
    stop_proc system-dbus
    stop_proc pipewire-dbus
    local f p
    while IFS= read -r f; do
        p=${f#/proc/}
        p=${p%/environ}
        [ "$p" != "$$" ] || continue
        note "killing straggler $p ($(cat "/proc/$p/comm" 2>/dev/null || echo '?'))"
        kill -s KILL "$p" 2>/dev/null || true
    done < <(grep -lzxF "CONTEXTD_SESSION_MARK=$DIR" /proc/[0-9]*/environ 2>/dev/null || true)
    rm -f "$RUNTIME/wayland-1" "$DIR/sway-ipc.sock" "$BUS_SOCKET" "$SYSTEM_BUS_SOCKET" "$DIR/pipewire_bus"
    rm -rf "$DIR/windows"
    if [ -L "$DIR/sway-runtime" ]; then
        local sr
        sr=$(readlink "$DIR/sway-runtime")
        case "$sr" in /tmp/contextd-sway.*) rm -rf "$sr" ;; esac
        rm -f "$DIR/sway-runtime"
    fi
}

cmd_start() {
    local arg dir=
    WANT_BUS=$((1 - ${CONTEXTD_SESSION_NO_BUS:-0}))
    WANT_SWAY=$((1 - ${CONTEXTD_SESSION_NO_SWAY:-0}))
    WANT_PIPEWIRE=$((1 - ${CONTEXTD_SESSION_NO_PIPEWIRE:-0}))
    WANT_WINDOWS=$((1 - ${CONTEXTD_SESSION_NO_WINDOWS:-0}))
    WANT_SYSTEM_BUS=${CONTEXTD_SESSION_SYSTEM_BUS:-0}
    WANT_MOCKS=${CONTEXTD_SESSION_MOCKS:-0}
    SESSION_ROOT=${CONTEXTD_SESSION_ROOT:-}
    while [ $# -gt 0 ]; do
        arg=$1
        shift
        case "$arg" in
            --no-bus) WANT_BUS=0 ;;
            --no-sway) WANT_SWAY=0 ;;
            --no-pipewire) WANT_PIPEWIRE=0 ;;
            --no-windows) WANT_WINDOWS=0 ;;
            --system-bus) WANT_SYSTEM_BUS=1 ;;
            --mocks) WANT_MOCKS=1 ;;
            --root) SESSION_ROOT=${1:?--root needs a root of scripts/roots.sh}; shift ;;
            --root=*) SESSION_ROOT=${arg#*=} ;;
            --timeout) TIMEOUT=${1:?--timeout needs seconds}; shift ;;
            --timeout=*) TIMEOUT=${arg#*=} ;;
            -*) die "unknown option for start: $arg" ;;
            *) [ -z "$dir" ] || die "start takes one DIR"; dir=$arg ;;
        esac
    done
    [ "$WANT_SWAY" = 1 ] || WANT_WINDOWS=0
    if [ "$WANT_MOCKS" = 1 ]; then WANT_SYSTEM_BUS=1; fi
    if [ -n "$SESSION_ROOT" ]; then
        [ -x "$SESSION_ROOT/bin/sh" ] || die "--root $SESSION_ROOT: no root there (make one with scripts/roots.sh)"
        SESSION_ROOT=$(cd "$SESSION_ROOT" && pwd -P)
    fi
    set_dir "$dir" create
    mkdir -p "$DIR/pids" "$DIR/home"
    local name
    for name in dbus system-dbus pipewire-dbus sway pipewire wireplumber "${MOCKS[@]/#/mock-}"; do
        if running "$name"; then
            die "a session is already running in $DIR ($name, pid $(recorded_pid "$name")); run: $SCRIPT stop $DIR"
        fi
    done
    mkdir -p "$RUNTIME"
    chmod 0700 "$RUNTIME"
    save_conf
    # On any failure below (set -e or die): stop what was started, keep the logs.
    trap 'stop_all; note "start failed; logs are in $DIR"' EXIT
    if [ "$WANT_BUS" = 1 ]; then start_bus dbus "$BUS_SOCKET" session; fi
    if [ "$WANT_SYSTEM_BUS" = 1 ]; then start_bus system-dbus "$SYSTEM_BUS_SOCKET" system; fi
    if [ "$WANT_MOCKS" = 1 ]; then start_mocks; fi
    if [ "$WANT_SWAY" = 1 ]; then start_sway; fi
    if [ "$WANT_PIPEWIRE" = 1 ]; then start_pipewire; fi
    if [ "$WANT_WINDOWS" = 1 ]; then open_demo_windows; fi
    trap - EXIT
    write_env
    note "session ready in $DIR: source $DIR/env"
}

cmd_status() {
    load_conf
    local name bad=0 f
    local -a names=()
    [ "$WANT_BUS" = 1 ] && names+=(dbus)
    [ "$WANT_SYSTEM_BUS" = 1 ] && names+=(system-dbus)
    [ "$WANT_SWAY" = 1 ] && names+=(sway)
    [ "$WANT_PIPEWIRE" = 1 ] && [ "$WANT_BUS" = 0 ] && names+=(pipewire-dbus)
    [ "$WANT_PIPEWIRE" = 1 ] && names+=(pipewire wireplumber)
    for f in "$DIR"/pids/mock-*.pid "$DIR"/pids/window-*.pid; do
        [ -e "$f" ] && names+=("$(basename "$f" .pid)")
    done
    for name in "${names[@]}"; do
        if running "$name"; then
            printf '%-32s running (pid %s)\n' "$name" "$(recorded_pid "$name")"
        else
            printf '%-32s stopped\n' "$name"
            bad=1
        fi
    done
    return "$bad"
}

main() {
    local cmd=${1:-}
    [ $# -gt 0 ] && shift
    case "$cmd" in
        start) cmd_start "$@" ;;
        stop)
            if [ -n "${1:-}" ] && [ ! -d "$1" ]; then
                note "no session in $1 (no such directory)"
                return 0
            fi
            set_dir "${1:-}"
            stop_all
            ;;
        status) set_dir "${1:-}"; cmd_status ;;
        kill-sway) set_dir "${1:-}"; load_conf; kill_sway "${2:-TERM}" ;;
        start-sway)
            set_dir "${1:-}"; load_conf
            start_sway
            if [ "$WANT_WINDOWS" = 1 ] && [ "${2:-}" != --no-windows ]; then open_demo_windows; fi
            ;;
        restart-sway)
            set_dir "${1:-}"; load_conf
            kill_sway TERM
            start_sway
            if [ "$WANT_WINDOWS" = 1 ]; then open_demo_windows; fi
            ;;
        kill-pipewire) set_dir "${1:-}"; load_conf; kill_pipewire "${2:-TERM}" ;;
        kill-mock)
            [ $# -ge 2 ] || die "usage: $SCRIPT kill-mock DIR NAME [SIGNAL]"
            set_dir "$1"; load_conf; valid_mock "$2"; stop_proc "mock-$2" "${3:-TERM}"
            ;;
        start-mock)
            [ $# -eq 2 ] || die "usage: $SCRIPT start-mock DIR NAME"
            set_dir "$1"; load_conf; valid_mock "$2"
            [ "$WANT_MOCKS" = 1 ] || die "this session was started without --mocks"
            running "mock-$2" && die "mock $2 is already running (pid $(recorded_pid "mock-$2"))"
            "start_mock_$2"
            ;;
        start-pipewire) set_dir "${1:-}"; load_conf; start_pipewire ;;
        restart-pipewire) set_dir "${1:-}"; load_conf; kill_pipewire TERM; start_pipewire ;;
        open-window)
            [ $# -eq 3 ] || die "usage: $SCRIPT open-window DIR APP_ID TITLE"
            set_dir "$1"; load_conf; open_window "$2" "$3"
            ;;
        set-title)
            [ $# -eq 3 ] || die "usage: $SCRIPT set-title DIR APP_ID TITLE"
            set_dir "$1"; load_conf; set_title "$2" "$3"
            ;;
        close-window)
            [ $# -ge 2 ] || die "usage: $SCRIPT close-window DIR APP_ID [SIGNAL]"
            set_dir "$1"; load_conf; close_window "$2" "${3:-TERM}"
            ;;
        windows) set_dir "${1:-}"; load_conf; list_windows ;;
        -h|--help|help) usage ;;
        '') usage >&2; exit 2 ;;
        *) usage >&2; die "unknown command: $cmd" ;;
    esac
}

main "$@"
