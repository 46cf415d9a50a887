#!/bin/bash
# Runs INSIDE the booted container, as the test user, in the login session
# that `machinectl shell ctxuser@.host` opened (pam_systemd: a logind session,
# user@UID.service, the user bus of dbus-user-session). Called by
# tests/systemd-boot/boot-test.sh once the package is installed; checks that
# the daemon comes up the way a user's does and goes down cleanly.
#
# Prints one line per check ("ok NAME" or "FAILED NAME" with details) and last
# "user-checks: result=0" (all passed) or "user-checks: result=N" (N failed):
# machinectl shell (systemd 252) does not pass the exit status on.
set -u
export LANG=C.UTF-8 SYSTEMD_PAGER="" SYSTEMD_COLORS=0
FAILED=0

ok() { printf 'ok      %s\n' "$1"; }
fail() {
    FAILED=$((FAILED + 1))
    printf 'FAILED  %s\n' "$1"
    shift
    [ $# -eq 0 ] || printf '%s\n' "$@" | sed 's/^/        /'
}
# prop NAME: one property of contextd.service in the user manager.
prop() { systemctl --user show -p "$1" --value contextd.service; }
# in_journal REGEX JOURNALCTL-ARGS...: the user's journal has a matching line.
in_journal() {
    local re=$1
    shift
    journalctl --user -o cat "$@" 2>/dev/null | grep -qE "$re"
}
# wait_for SECS COMMAND...: until COMMAND succeeds, or SECS seconds passed.
wait_for() {
    local end=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.2
    done
}

# The session is a real login session, and the user's bus is the user
# manager's (dbus-user-session), whose dbus-daemon hands activation to systemd.
session=$(loginctl show-session "${XDG_SESSION_ID:-none}" -p Class -p State -p Remote 2>&1)
if grep -qx 'Class=user' <<<"$session"; then
    ok "a logind session of class user ($XDG_SESSION_ID)"
else
    fail "a logind session of class user" "$session"
fi
if [ "${DBUS_SESSION_BUS_ADDRESS:-}" = "unix:path=$XDG_RUNTIME_DIR/bus" ] &&
    [ "$(systemctl --user is-active dbus.socket)" = active ]; then
    ok "the session bus is the user manager's dbus.socket"
else
    fail "the session bus is the user manager's dbus.socket" \
        "DBUS_SESSION_BUS_ADDRESS=${DBUS_SESSION_BUS_ADDRESS:-}" \
        "$(systemctl --user status dbus.socket 2>&1)"
fi

# Nothing runs yet: the package enables no unit, and no one asked.
if [ "$(prop ActiveState)" = inactive ] && ! pidof contextd >/dev/null; then
    ok "contextd is not running before anyone asks"
else
    fail "contextd is not running before anyone asks" "$(systemctl --user status contextd 2>&1)"
fi

# contextctl status: a D-Bus call to org.contextd.Broker1, which nobody owns;
# the user bus activates it, and with SystemdService= it asks systemd.
out=$(timeout 60 contextctl status 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -q . <<<"$out"; then
    ok "contextctl status answers (the daemon was activated)"
    printf '%s\n' "$out" | sed 's/^/        | /'
else
    fail "contextctl status answers (exit $rc)" "$out"
fi

state=$(systemctl --user show -p ActiveState -p SubState -p InvocationID -p MainPID -p ControlGroup contextd.service)
printf '%s\n' "$state" | sed 's/^/        | /'
pid=$(prop MainPID)
if [ "$(prop ActiveState)" = active ] && [ -n "$(prop InvocationID)" ] && [ "${pid:-0}" -gt 0 ]; then
    ok "contextd.service is active with an invocation id (systemd started it)"
else
    fail "contextd.service is active with an invocation id" "$state"
fi
# The daemon's process is the unit's main process and lives in the unit's
# cgroup. A daemon that dbus-daemon had spawned itself would sit in
# dbus.service's cgroup, and the unit would be inactive.
cgroup=$(cat "/proc/$pid/cgroup" 2>&1)
# (/proc/PID/exe is root's: the daemon makes itself non-dumpable.)
exe=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>&1)
pids=$(pidof contextd)
if grep -Eq '^0::/.*/user@[0-9]+\.service/(.*/)?contextd\.service$' <<<"$cgroup" &&
    [ "$exe" = "/usr/bin/contextd " ] && [ "$pids" = "$pid" ]; then
    ok "the daemon ($exe, pid $pid) runs in the cgroup of contextd.service"
else
    fail "the daemon runs in the cgroup of contextd.service" \
        "exe=$exe pidof=$pids MainPID=$pid" "$cgroup"
fi
# The bus says so too: dbus-daemon logs each activation it hands to systemd
# ("to hand-off" while systemd is not yet on the bus, "via systemd" after).
activating="Activating (systemd to hand-off|via systemd): service name='org\.contextd\.Broker1' unit='contextd\.service'"
if wait_for 10 in_journal "$activating" -u dbus.service; then
    ok "the user bus handed the activation to systemd"
else
    fail "the user bus handed the activation to systemd" \
        "$(journalctl --user -u dbus.service -o cat 2>&1 | tail -n 20)"
fi

out=$(systemctl --user status --no-pager --lines=0 contextd 2>&1)
rc=$?
if [ "$rc" -eq 0 ]; then
    ok "systemctl --user status contextd: active"
    printf '%s\n' "$out" | sed 's/^/        | /'
else
    fail "systemctl --user status contextd (exit $rc)" "$out"
fi

# The unit as installed, checked by the user manager's own systemd-analyze.
out=$(systemd-analyze --user verify contextd.service 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && [ -z "$out" ]; then
    ok "systemd-analyze --user verify contextd.service: clean"
else
    fail "systemd-analyze --user verify contextd.service (exit $rc)" "$out"
fi

# Its log is in the user's journal (stderr goes to journald under systemd).
if wait_for 10 in_journal 'serving on the session bus' -u contextd; then
    ok "journalctl --user -u contextd has the daemon's log"
    journalctl --user -u contextd -o cat | sed 's/^/        | /'
else
    fail "journalctl --user -u contextd has the daemon's log" \
        "$(journalctl --user -u contextd 2>&1 | tail -n 20)"
fi

# Stop: SIGTERM, and the daemon exits 0 well within TimeoutStopSec. Once
# stopped the unit is unloaded (nothing references it), so its exit status is
# read from the manager's log: at debug level it logs how the main process
# ended ("code=exited, status=0/SUCCESS"; a signal or a core says so there).
invocation=$(prop InvocationID)
systemctl --user log-level debug
out=$(timeout 60 systemctl --user stop contextd 2>&1)
rc=$?
systemctl --user log-level info
after=$(systemctl --user show -p ActiveState -p Result contextd.service)
wait_for 10 in_journal 'Deactivated successfully|Failed with result' -u contextd
log=$(journalctl --user -u contextd -o cat 2>&1)
printf '%s\n' "$after" | sed 's/^/        | /'
grep -E 'Main process exited|Deactivated|SIGTERM|stopped|Stopp' <<<"$log" | sed 's/^/        | /'
if [ "$rc" -eq 0 ] && [ -z "$out" ] && [ "$(prop ActiveState)" = inactive ] &&
    [ "$(prop Result)" = success ] && ! systemctl --user is-failed --quiet contextd &&
    ! pidof contextd >/dev/null &&
    grep -q 'Main process exited, code=exited, status=0/SUCCESS' <<<"$log" &&
    grep -q 'Deactivated successfully' <<<"$log"; then
    ok "systemctl --user stop contextd: exited 0/SUCCESS, inactive, not failed"
else
    fail "systemctl --user stop contextd (exit $rc)" "$out" "$after" "$log"
fi
if grep -q 'SIGTERM' <<<"$log" &&
    ! grep -Eqi 'did not stop|timed out|core dump|dumped core|killing process|failed with result|panicked' <<<"$log"; then
    ok "the stop was clean (the daemon logged SIGTERM; no timeout, no kill, no core, no panic)"
else
    fail "the stop was clean" "$log"
fi

# And the next call brings it back, a new invocation.
if timeout 60 contextctl status >/dev/null 2>&1 && [ "$(prop ActiveState)" = active ] &&
    [ "$(prop InvocationID)" != "$invocation" ]; then
    ok "the next contextctl call activates it again"
else
    fail "the next contextctl call activates it again" \
        "$(systemctl --user status --no-pager contextd 2>&1)"
fi

printf 'user-checks: result=%s\n' "$FAILED"
