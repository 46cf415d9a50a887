#!/usr/bin/env bash
# An MCP host as the SDKs start a stdio server: only HOME LOGNAME PATH SHELL
# TERM USER reach `contextctl mcp`. Run by tests/it/mcp_minimal_env.rs (the
# Python SDK) and tests/it/mcp_inspector.rs (the MCP Inspector CLI) inside a
# private mount namespace with a tmpfs on /run/user, so that the user's
# runtime directory (/run/user/UID) and the session bus at its default
# address (unix:path=/run/user/UID/bus) are the test's own.
#
#   minimal_env.sh CONTEXTD WORKDIR HOST [ARG...]
#
# The environment carries the broker's XDG_* directories: the bus passes
# them to the daemon it activates. HOST ARG... (the host, or a script that
# runs it) gets only the six variables, as a desktop's launcher would leave
# them, and starts `contextctl mcp` itself, with whatever environment its SDK
# gives a stdio server; its stdout is this script's.
set -euo pipefail
contextd=$1 work=$2
shift 2
uid=$(id -u)
mkdir -p /run/user
mount -t tmpfs -o mode=0755 tmpfs /run/user
rt=/run/user/$uid
mkdir -m 0700 "$rt"
mkdir -p "$work/services"
printf '[D-BUS Service]\nName=org.contextd.Broker1\nExec=%s\n' "$contextd" \
    > "$work/services/org.contextd.Broker1.service"
# A notification server the bus starts when something calls it, as a desktop's
# would be (python3-dbusmock; its calls go to WORKDIR/notifications.log), so
# that send_notification has somewhere to go.
printf '[D-BUS Service]\nName=org.freedesktop.Notifications\nExec=%s\n' \
    "/usr/bin/python3 -m dbusmock --session --template notification_daemon --logfile $work/notifications.log" \
    > "$work/services/org.freedesktop.Notifications.service"
cat > "$work/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$rt/bus</listen>
  <servicedir>$work/services</servicedir>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
XDG_RUNTIME_DIR=$rt dbus-daemon --config-file="$work/bus.conf" --nofork 2>/dev/null &
bus=$!
stop() {
    local pid
    pid=$(dbus-send --bus="unix:path=$rt/bus" --print-reply=literal --dest=org.freedesktop.DBus \
        / org.freedesktop.DBus.GetConnectionUnixProcessID string:org.contextd.Broker1 2>/dev/null \
        | awk '{print $2}') || true
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    fi
    kill -TERM "$bus" 2>/dev/null || true
    wait "$bus" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 200); do [ -S "$rt/bus" ] && break; sleep 0.05; done
[ -S "$rt/bus" ] || { echo "minimal_env.sh: the bus did not start" >&2; exit 1; }
# Nothing runs yet: the bridge must activate the daemon on the default bus.
env -i HOME="$HOME" LOGNAME=contextd-test PATH="$PATH" SHELL=/bin/sh TERM=dumb USER=contextd-test \
    "$@"
