#!/usr/bin/env bash
# Smoke test of scripts/session.sh: start a whole session as `make run` does
# (--mocks), see the two demo windows in sway's tree, run contextd in it and
# see every source available and `contextctl consent grant` pass polkit,
# retitle a window, make a real PipeWire stream with pw-play, kill and restart
# sway and PipeWire, stop, and check that nothing the session started is left
# running. The checks run under `timeout 90`; the session is stopped whatever
# happens. The last line is "N passed, N failed"; the exit status is non-zero
# when a check failed.
#
#   tests/session-smoke.sh              run it
#   KEEP=1 tests/session-smoke.sh       keep the session directory (logs)
#
# CONTEXTD_BIN and CONTEXTCTL_BIN name the binaries (tests/it/scripts.rs passes
# cargo's); default target/debug/contextd and target/debug/contextctl.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SESSION=$ROOT/scripts/session.sh
PY=/usr/bin/python3
HARD_TIMEOUT=${SMOKE_TIMEOUT:-90}
CONTEXTD=${CONTEXTD_BIN:-$ROOT/target/debug/contextd}
CONTEXTCTL=${CONTEXTCTL_BIN:-$ROOT/target/debug/contextctl}
# Every source the broker runs (src/sources/: NAME, SCREENSAVER; `policy` is
# the broker's policy file).
SOURCES=(calendar dnd-gsettings dnd-server geoclue login1 mpris networkmanager notifications pipewire policy recent screensaver selection upower v4l2 wayland)

# ---------------------------------------------------------------- reporting

# Results go to DIR/results ("ok NAME" / "FAILED NAME") so that the outer
# process can count what the inner one (under timeout) did.
RESULTS=

check() { # NAME COMMAND...
    local name=$1
    shift
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -eq 0 ]; then
        printf 'ok      %s\n' "$name" | tee -a "$RESULTS"
    else
        printf 'FAILED  %s (exit %s)\n' "$name" "$rc" | tee -a "$RESULTS"
        if [ -n "$out" ]; then printf '%s\n' "$out" | sed 's/^/        /'; fi
    fi
    return 0
}

# Each check runs in a subshell (check captures its output): fail ends it.
fail() { printf '%s\n' "$@"; exit 1; }

# Run COMMAND until it succeeds, for at most SECS seconds.
poll() { # SECS COMMAND...
    local secs=$1
    shift
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# ---------------------------------------------------------------- checks

# "app_id<TAB>title" of every window, straight from sway.
windows() {
    timeout 5 swaymsg -t get_tree -r | "$PY" -c '
import json, sys
def walk(n):
    if n.get("app_id") is not None:
        print("%s\t%s" % (n["app_id"], n.get("name") or ""))
    for c in n.get("nodes", []) + n.get("floating_nodes", []):
        walk(c)
walk(json.load(sys.stdin))'
}

# Read the whole list first: `grep -q` stops at the first match, and under
# pipefail the writer's broken pipe would fail a check that matched.
has_window() {
    local w
    w=$(windows) || return 1
    grep -qxF "$1"$'\t'"$2" <<<"$w"
}

demo_windows_shown() {
    poll 10 has_window org.contextd.Demo1 "Demo one" || fail "no Demo1 window:" "$(windows)"
    poll 10 has_window org.contextd.Demo2 "Demo two" || fail "no Demo2 window:" "$(windows)"
    windows
}

env_file_complete() {
    local v
    for v in DBUS_SESSION_BUS_ADDRESS DBUS_SYSTEM_BUS_ADDRESS XDG_RUNTIME_DIR WAYLAND_DISPLAY SWAYSOCK PIPEWIRE_RUNTIME_DIR; do
        [ -n "${!v:-}" ] || fail "$v is not set by $DIR/env"
    done
    [ -S "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY" ] || fail "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY is no socket"
    [ "$(stat -c %a "$XDG_RUNTIME_DIR")" = 700 ] || fail "XDG_RUNTIME_DIR is not 0700"
    [ "$(stat -c %u "$XDG_RUNTIME_DIR")" = "$(id -u)" ] || fail "XDG_RUNTIME_DIR is not ours"
    timeout 5 dbus-send --session --print-reply --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus.GetId >/dev/null || fail "session bus does not answer"
    timeout 5 dbus-send --system --print-reply --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus.GetId >/dev/null || fail "system bus does not answer"
    timeout 5 swaymsg -t get_version >/dev/null || fail "swaymsg -t get_version failed"
    timeout 5 pw-cli info 0 >/dev/null || fail "pw-cli info 0 failed"
}

# ---------------------------------------------------------------- contextd

ctl() { timeout 10 "$CONTEXTCTL" "$@"; }

daemon_log() { printf '%s\n' "--- last lines of $DIR/contextd.log:"; tail -n 20 "$DIR/contextd.log"; }

# contextd in the session as `make run` runs it: its own config, data and
# state under DIR, contextctl granted everything, nothing of our environment
# but the session's (and the session's mark, so that stop finds it).
start_contextd() {
    [ -x "$CONTEXTD" ] || fail "no $CONTEXTD (build it, or set CONTEXTD_BIN)"
    [ -x "$CONTEXTCTL" ] || fail "no $CONTEXTCTL (build it, or set CONTEXTCTL_BIN)"
    mkdir -p "$DIR/contextd/config/contextd" "$DIR/contextd/data" "$DIR/contextd/state"
    printf '[[grant]]\napp = "exe:%s"\ncategories = ["*"]\n' "$(readlink -f "$CONTEXTCTL")" \
        >"$DIR/contextd/config/contextd/policy.toml"
    local -a vars=()
    local l
    while IFS= read -r l; do
        if [ -n "${l#*=}" ]; then vars+=("$l"); fi
    done <"$DIR/env.list"
    (
        exec env -i "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" "LANG=C.UTF-8" \
            "HOME=$DIR/home" "CONTEXTD_SESSION_MARK=$DIR" "${vars[@]}" \
            "XDG_CONFIG_HOME=$DIR/contextd/config" "XDG_DATA_HOME=$DIR/contextd/data" \
            "XDG_STATE_HOME=$DIR/contextd/state" \
            "$CONTEXTD" -v </dev/null >>"$DIR/contextd.log" 2>&1
    ) &
    echo "$!" >"$DIR/contextd.pid"
    poll 20 ctl sources || fail "contextctl sources did not answer within 20 s" "$(daemon_log)"
}

# Every source in SOURCES is listed and available, and none is not.
all_sources_available() {
    local out name
    out=$(ctl sources) || return 1
    for name in "${SOURCES[@]}"; do
        grep -qE "^$name +available( |\$)" <<<"$out" || return 1
    done
    # No consent agent in this session (no GNOME Shell): the prompts go out
    # as notifications, and the entry says so.
    grep -qE "^consent-agent +unavailable .*notification: no trusted consent agent" <<<"$out" || return 1
    ! grep -v '^consent-agent ' <<<"$out" | grep -q unavailable
}

every_source_available() {
    poll 20 all_sources_available || fail "not every source is available within 20 s:" "$(ctl sources)"
    ctl sources
}

status_shows_mocks() {
    local want
    for want in "Session:        active, unlocked" "Power:          on battery, 73 %" \
        'wifi "contextd demo Wi-Fi"'; do
        # shellcheck disable=SC2016 # expanded by sh
        poll 10 sh -c '"$1" status | grep -qF "$2"' sh "$CONTEXTCTL" "$want" ||
            fail "no '$want' in contextctl status:" "$(ctl status)"
    done
}

consent_grant_passes_polkit() {
    ctl consent grant exe:/usr/bin/true windows || fail "contextctl consent grant failed" "$(daemon_log)"
}

# The dashboard's one-time link opens (a session cookie, and a page that
# forwards to the session's own path) once.
dashboard_link_opens_once() {
    local url code
    url=$(ctl dashboard --no-open) || fail "contextctl dashboard failed" "$(daemon_log)"
    case "$url" in http://127.0.0.1:*/open\?ticket=*) ;; *) fail "odd link: $url" ;; esac
    code=$("$PY" - "$url" <<'PYEOF'
import sys, urllib.request, urllib.error
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None
opener = urllib.request.build_opener(NoRedirect)
codes = []
for _ in range(2):
    try:
        r = opener.open(sys.argv[1])
        codes.append(str(r.status) + ("+cookie" if r.headers.get("Set-Cookie") else ""))
    except urllib.error.HTTPError as e:
        codes.append(str(e.code) + ("+cookie" if e.headers.get("Set-Cookie") else ""))
print(" ".join(codes))
PYEOF
    ) || fail "cannot fetch $url"
    [ "$code" = "200+cookie 403" ] || fail "the link answered '$code' (want '200+cookie 403')"
    echo "$url: $code"
}

consent_list_shows_grant() {
    local out
    out=$(ctl consent list) || fail "contextctl consent list failed"
    grep -qE '^exe:/usr/bin/true +windows +allow ' <<<"$out" || fail "no grant in:" "$out"
    echo "$out"
}

# Gone, or a zombie (contextd's parent was a check's subshell: init reaps it).
exited() { # PID
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
    case "$state" in '' | Z | X) return 0 ;; *) return 1 ;; esac
}

# SIGTERM; gone within 10 s.
stop_contextd() {
    local pid
    pid=$(cat "$DIR/contextd.pid")
    ! exited "$pid" || fail "contextd (pid $pid) was not running" "$(daemon_log)"
    kill -TERM "$pid"
    poll 10 exited "$pid" || fail "contextd (pid $pid) still runs 10 s after SIGTERM"
}

retitle() {
    timeout 15 "$SESSION" set-title "$DIR" org.contextd.Demo1 "Renamed one"
    poll 10 has_window org.contextd.Demo1 "Renamed one" || fail "title did not change:" "$(windows)"
}

make_wav() { # FILE SECONDS
    "$PY" - "$1" "$2" <<'EOF'
import math, struct, sys, wave
path, secs = sys.argv[1], float(sys.argv[2])
with wave.open(path, "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(48000)
    n = int(48000 * secs)
    w.writeframes(b"".join(struct.pack("<h", int(6000 * math.sin(2 * math.pi * 440 * i / 48000))) for i in range(n)))
EOF
}

# Print "node_id state sec_pid" for each pw-play output stream.
play_streams() {
    timeout 5 pw-dump | "$PY" -c '
import json, sys
objs = json.load(sys.stdin)
clients = {o["id"]: o["info"]["props"] for o in objs if o["type"].endswith(":Client")}
for o in objs:
    if not o["type"].endswith(":Node"):
        continue
    p = o["info"]["props"]
    if p.get("media.class") == "Stream/Output/Audio" and p.get("application.name") == "pw-play":
        c = clients.get(int(p.get("client.id", -1)), {})
        print(o["id"], o["info"].get("state"), c.get("pipewire.sec.pid"))'
}

play_stream_running_for() { play_streams | grep -c " running $1\$" >/dev/null; }

pw_play_makes_stream() {
    make_wav "$DIR/tone.wav" 20
    pw-play "$DIR/tone.wav" >"$DIR/pw-play.log" 2>&1 &
    local pid=$!
    local ok=0
    poll 10 play_stream_running_for "$pid" && ok=1
    local streams
    streams=$(play_streams || true)
    # The stream is linked to the null sink.
    local links
    links=$(timeout 5 pw-link -l 2>/dev/null || true)
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ "$ok" = 1 ] || fail "no running pw-play stream with client pid $pid:" "$streams" "$(cat "$DIR/pw-play.log")"
    grep -q 'contextd-null-sink:playback_' <<<"$links" || fail "pw-play is not linked to contextd-null-sink:" "$links"
    echo "$streams"
    poll 5 sh -c '! pw-cli ls Node | grep -q "application.name = \"pw-play\""' ||
        fail "the stream node stayed after pw-play ended"
}

sway_restarts() {
    timeout 15 "$SESSION" kill-sway "$DIR" KILL
    ! timeout 5 swaymsg -t get_version >/dev/null 2>&1 || fail "sway still answers after kill-sway"
    timeout 30 "$SESSION" start-sway "$DIR"
    # The same WAYLAND_DISPLAY and SWAYSOCK reach the new sway.
    timeout 5 swaymsg -t get_version >/dev/null || fail "new sway does not answer on SWAYSOCK"
    poll 10 has_window org.contextd.Demo1 "Demo one" || fail "windows not back:" "$(windows)"
    poll 10 has_window org.contextd.Demo2 "Demo two" || fail "windows not back:" "$(windows)"
}

pipewire_restarts() {
    timeout 15 "$SESSION" kill-pipewire "$DIR" KILL
    ! timeout 5 pw-cli info 0 >/dev/null 2>&1 || fail "pipewire still answers after kill-pipewire"
    timeout 30 "$SESSION" start-pipewire "$DIR"
    timeout 5 wpctl inspect @DEFAULT_AUDIO_SINK@ | grep -c 'contextd-null-sink' >/dev/null || fail "no default sink after restart"
}

# ---------------------------------------------------------------- inner run

inner() {
    DIR=$1
    RESULTS=$DIR/results
    check "session.sh start --mocks" timeout 60 "$SESSION" start "$DIR" --mocks
    if [ ! -r "$DIR/env" ]; then
        echo "no $DIR/env; skipping the rest" >&2
        return 0
    fi
    # shellcheck source=/dev/null
    . "$DIR/env"
    check "DIR/env names a working bus, sway and PipeWire" env_file_complete
    check "two foot windows with their app ids in swaymsg -t get_tree" demo_windows_shown
    check "contextd starts in the session" start_contextd
    check "contextctl sources: every source available (${SOURCES[*]}); prompts as notifications" every_source_available
    check "contextctl status shows the mocked logind, UPower and NetworkManager" status_shows_mocks
    check "contextctl consent grant exe:/usr/bin/true windows passes polkit" consent_grant_passes_polkit
    check "contextctl consent list shows the grant" consent_list_shows_grant
    check "contextctl dashboard: a link that opens once" dashboard_link_opens_once
    check "contextd stops on SIGTERM" stop_contextd
    check "set-title changes a window's title" retitle
    check "pw-play makes a running stream node with its pid" pw_play_makes_stream
    check "kill-sway, start-sway: sway and windows come back" sway_restarts
    check "kill-pipewire, start-pipewire: PipeWire comes back" pipewire_restarts
}

# ---------------------------------------------------------------- outer run

# Nothing this session started is alive: recorded pids are gone (zombies
# waiting for init count as gone) and no process carries the session's mark.
nothing_left() { # PIDS...
    local pid state left=()
    for pid in "$@"; do
        state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || continue
        case "$state" in '' | Z | X) ;; *) left+=("$pid($(cat "/proc/$pid/comm" 2>/dev/null))") ;; esac
    done
    local marked
    marked=$(grep -lzxF "CONTEXTD_SESSION_MARK=$DIR" /proc/[0-9]*/environ 2>/dev/null || true)
    [ "${#left[@]}" -eq 0 ] || fail "still running: ${left[*]}"
    [ -z "$marked" ] || fail "processes with the session's mark: $marked"
    [ ! -e "$SWAY_RUNTIME" ] || fail "$SWAY_RUNTIME was not removed"
}

outer() {
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/contextd-smoke.XXXXXX")
    RESULTS=$DIR/results
    : >"$RESULTS"
    trap '"$SESSION" stop "$DIR" >/dev/null 2>&1 || true; [ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"' EXIT

    local rc=0
    timeout -k 5 "$HARD_TIMEOUT" "$0" --inner "$DIR" || rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        printf 'FAILED  everything within %s s (timed out)\n' "$HARD_TIMEOUT" | tee -a "$RESULTS"
    elif [ "$rc" -ne 0 ]; then
        printf 'FAILED  the checks ran to the end (exit %s)\n' "$rc" | tee -a "$RESULTS"
    fi

    local -a pids=()
    local f pid _st
    for f in "$DIR"/pids/*.pid "$DIR/contextd.pid"; do
        [ -e "$f" ] || continue
        read -r pid _st <"$f"
        pids+=("$pid")
    done
    SWAY_RUNTIME=$(readlink "$DIR/sway-runtime" 2>/dev/null || echo /nonexistent)
    check "session.sh stop" timeout 30 "$SESSION" stop "$DIR"
    check "session.sh stop again is harmless" timeout 30 "$SESSION" stop "$DIR"
    check "nothing the session started is left running" nothing_left "${pids[@]}"
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $DIR"; fi

    local passed failed
    passed=$(grep -c '^ok' "$RESULTS" || true)
    failed=$(grep -c '^FAILED' "$RESULTS" || true)
    printf '%d passed, %d failed\n' "$passed" "$failed"
    [ "$failed" -eq 0 ]
}

if [ "${1:-}" = --inner ]; then
    inner "$2"
else
    outer
fi
