#!/usr/bin/env bash
# An MCP host as the SDKs start a stdio server: only HOME LOGNAME PATH SHELL
# TERM USER reach `contextctl mcp`. Run by tests/mcp_minimal_env.rs inside a
# private mount namespace with a tmpfs on /run/user, so that the user's
# runtime directory (/run/user/UID) and the session bus at its default
# address (unix:path=/run/user/UID/bus) are the test's own.
#
#   minimal_env.sh CONTEXTD CONTEXTCTL PYTHON CLIENT WORKDIR
#
# The environment carries the broker's XDG_* directories: the bus passes
# them to the daemon it activates. The report of the Python client (its
# default environment, no env=) goes to stdout.
set -euo pipefail
contextd=$1 contextctl=$2 python=$3 client=$4 work=$5
uid=$(id -u)
mkdir -p /run/user
mount -t tmpfs -o mode=0755 tmpfs /run/user
rt=/run/user/$uid
mkdir -m 0700 "$rt"
mkdir -p "$work/services"
printf '[D-BUS Service]\nName=org.contextd.Broker1\nExec=%s\n' "$contextd" \
    > "$work/services/org.contextd.Broker1.service"
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
    "$python" "$client" --transport stdio --contextctl "$contextctl" --mode legacy --scenario dump
