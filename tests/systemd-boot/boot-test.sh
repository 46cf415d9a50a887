#!/usr/bin/env bash
# The systemd boot test: boot a real systemd, with a user manager, in
# systemd-nspawn, install the contextd package there, log a user in, and check
# that the daemon comes up as users start it (tests/systemd-boot/user-checks.sh).
#
#   tests/systemd-boot/boot-test.sh DEB
#
# DEB is the package to install (`make deb`'s target/deb/contextd_*.deb). The
# root is scripts/boot-root.sh's minimal Debian 12 (made once per machine);
# each run boots a throwaway view of it (`--volatile=overlay`: the root is
# read-only below a tmpfs, so nothing this run writes, the package included,
# outlives it) and always powers it off, also when a check fails or the
# script is interrupted.
#
# It never runs a second systemd on the host: the booted systemd is PID 1 of
# its own PID namespace with its own root and mounts. No machined is needed
# on the host (--register=no), and where the host does not run systemd
# either (--keep-unit), nspawn and the container live in a cgroup of their
# own that this script makes and removes.
#
# Needs root, systemd-nspawn (systemd-container) and debootstrap (for the
# root): scripts/deps.sh installs them. Prints its steps with their times;
# the last line is "boot-test: ok" or the exit status is non-zero.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/systemd-boot
# As in scripts/boot-root.sh.
BOOT_USER=ctxuser

log() { printf 'boot-test: [%3ss] %s\n' "$SECONDS" "$*"; }
die() { printf 'boot-test: error: %s\n' "$*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 DEB"
DEB=$(realpath "$1")
[ -f "$DEB" ] || die "no package at $1"
[ "$(id -u)" -eq 0 ] || die "needs root (systemd-nspawn)"
command -v systemd-nspawn >/dev/null 2>&1 || die "systemd-nspawn is missing: run scripts/deps.sh"

IMAGE=$("$ROOT/scripts/boot-root.sh")
# Held while the container runs: no new build removes this root meanwhile.
exec 8<"$IMAGE.lock"
flock -s 8
log "root: $IMAGE"

WORK=$(mktemp -d /tmp/contextd-boot.XXXXXX)
# The container reads the package and the checks from here (read-only); the
# test user must reach the checks.
chmod 0755 "$WORK"
cp "$HERE/user-checks.sh" "$WORK/"
MACHINE=contextd-boot-$$
NSPAWN_PID=
LEADER=
WATCHER=
CGROUPS=()

# Run a command inside the container, as root, with a clean environment.
inside() {
    nsenter --target "$LEADER" --all \
        env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 SYSTEMD_PAGER="" SYSTEMD_COLORS=0 TERM=dumb "$@"
}

# The one place the package goes in: dpkg -i of the .deb, as a user does.
install_package() { # DEB (a path on the host)
    local name
    name=$(basename "$1")
    [ -f "$WORK/$name" ] || cp "$1" "$WORK/"
    inside dpkg -i "/run/contextd-test/$name"
}

# How a cgroup hierarchy is mounted here: where nspawn can get a cgroup of
# its own when no systemd on the host makes one.
cgroup_roots() {
    if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
        echo /sys/fs/cgroup
        return
    fi
    local h
    for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
        [ -d "$h" ] && echo "$h"
    done
}

describe_host() {
    echo "host: PID 1 is $(cat /proc/1/comm); kernel $(uname -r)"
    echo "host: /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup)"
    mount | grep -E '^cgroup2? ' | sed 's/^/host:   /'
    grep -E '^Cap(Eff|Bnd)' /proc/self/status | sed 's/^/host: /'
    echo "host: user namespaces: $(cat /proc/sys/user/max_user_namespaces 2>/dev/null)"
}

# Remove the cgroups made for nspawn (the container's systemd made more below
# them; all empty once it is gone).
remove_cgroups() {
    local cg
    for cg in "${CGROUPS[@]}"; do
        if [ -d "$cg" ]; then find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
        [ ! -d "$cg" ] || log "warning: could not remove $cg"
    done
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$WATCHER" ]; then kill "$WATCHER" 2>/dev/null || true; fi
    if [ -n "$NSPAWN_PID" ] && kill -0 "$NSPAWN_PID" 2>/dev/null; then
        log "powering off"
        # SIGRTMIN+4 asks systemd for poweroff.target (systemd(1)).
        if [ -n "$LEADER" ]; then kill -s RTMIN+4 "$LEADER" 2>/dev/null || true; fi
        local end=$((SECONDS + 30))
        while kill -0 "$NSPAWN_PID" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
        if kill -0 "$NSPAWN_PID" 2>/dev/null; then
            log "the container did not power off in 30 s: killing it"
            [ -z "$LEADER" ] || kill -KILL "$LEADER" 2>/dev/null || true
            kill -KILL "$NSPAWN_PID" 2>/dev/null || true
        fi
        wait "$NSPAWN_PID" 2>/dev/null || true
    fi
    remove_cgroups
    if [ "$rc" -ne 0 ] && [ -s "$WORK/nspawn.log" ]; then
        echo "--- systemd-nspawn's output (the container's console):"
        tail -n 40 "$WORK/nspawn.log"
    fi
    # nspawn leaves this behind where the host's /run is no tmpfs.
    rmdir "/run/systemd/nspawn/propagate/$MACHINE" 2>/dev/null || true
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Boot. A host whose PID 1 is systemd gives nspawn a scope of its own (no
# machined needed: --register=no); elsewhere nspawn stays in the cgroup it is
# started in (--keep-unit), which is made here for it alone, so the
# container's systemd builds its tree below it and two runs never meet.
NSPAWN=(systemd-nspawn --quiet --boot --register=no --volatile=overlay
    --directory="$IMAGE" --machine="$MACHINE"
    --bind-ro="$WORK:/run/contextd-test" --console=pipe
    # Only a loopback of its own: the daemon's dashboard and anything with an
    # abstract socket in there never meet the host's (or other tests').
    --private-network
    # nspawn's own seccomp filter refuses mlock() unless the container keeps
    # CAP_IPC_LOCK; on a real machine an unprivileged process may lock up to
    # its RLIMIT_MEMLOCK, and SQLCipher locks its key pages (else it logs
    # "sqlcipher_mlock: mlock() returned -1 errno=1").
    --system-call-filter=@memlock)
if [ -d /run/systemd/system ]; then
    log "host runs systemd: nspawn asks it for a scope"
else
    NSPAWN+=(--keep-unit)
    for h in $(cgroup_roots); do
        # The cgroups of runs killed before they could clean up (named by
        # their script's PID, which is gone): whatever still runs there goes.
        for old in "$h"/contextd-boot-*; do
            if [ -d "$old" ] && ! kill -0 "${old##*-}" 2>/dev/null; then
                # shellcheck disable=SC2046 # one PID a word
                kill -KILL $(find "$old" -name cgroup.procs -exec cat {} +) 2>/dev/null || true
                sleep 0.5
                find "$old" -depth -type d -exec rmdir {} + 2>/dev/null || true
            fi
        done
        mkdir "$h/$MACHINE"
        CGROUPS+=("$h/$MACHINE")
    done
    log "host runs no systemd: nspawn in cgroup /$MACHINE of $(cgroup_roots | tr '\n' ' ')"
fi
log "booting $MACHINE: ${NSPAWN[*]}"
# If this script is killed (SIGKILL, no trap), nspawn goes with it, and the
# container with nspawn.
(
    for cg in "${CGROUPS[@]}"; do echo "$BASHPID" >"$cg/cgroup.procs"; done
    exec setpriv --pdeathsig KILL "${NSPAWN[@]}"
) </dev/null >"$WORK/nspawn.log" 2>&1 &
NSPAWN_PID=$!

# The container's PID 1 is nspawn's child that runs systemd.
end=$((SECONDS + 30))
while [ -z "$LEADER" ]; do
    if ! kill -0 "$NSPAWN_PID" 2>/dev/null; then
        describe_host
        die "systemd-nspawn exited before the container's systemd ran (its output is below)"
    fi
    [ "$SECONDS" -lt "$end" ] || die "no systemd in the container after 30 s"
    for pid in $(pgrep -P "$NSPAWN_PID" || true); do
        if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ]; then LEADER=$pid; fi
    done
    [ -n "$LEADER" ] || sleep 0.1
done
log "systemd runs as PID 1 of the container (pid $LEADER on the host)"
# If this script is killed outright (SIGKILL: no trap runs), nspawn dies with
# it (--pdeathsig) but the container's PID 1 would live on: this watcher ends
# it (and its PID namespace with it) and cleans up. The normal exit path
# stops the watcher first.
(
    trap '' INT TERM
    while kill -0 $$ 2>/dev/null; do sleep 0.5; done
    kill -KILL "$LEADER" "$NSPAWN_PID" 2>/dev/null || true
    sleep 1
    remove_cgroups
    rmdir "/run/systemd/nspawn/propagate/$MACHINE" 2>/dev/null || true
    rm -rf "$WORK"
) </dev/null >/dev/null 2>&1 &
WATCHER=$!

# Until its manager listens, systemctl cannot connect; then --wait waits for
# the boot to finish.
end=$((SECONDS + 90))
while :; do
    state=$(timeout 60 nsenter --target "$LEADER" --all \
        systemctl is-system-running --wait 2>&1 || true)
    case "$state" in
        # "offline": so early that the manager does not answer yet (seen
        # once in CI); it becomes starting, then running or degraded.
        *"Failed to connect to bus"* | *"System has not been booted"* | offline) ;;
        *) break ;;
    esac
    [ "$SECONDS" -lt "$end" ] || break
    sleep 0.2
done
case "$state" in
    running) log "the container's system is running" ;;
    degraded)
        log "the container's system is degraded (not contextd's doing):"
        inside systemctl --failed --no-pager --plain || true
        ;;
    *)
        inside systemctl --no-pager --plain list-jobs 2>&1 || true
        describe_host
        die "the container's system did not come up: is-system-running says '$state'"
        ;;
esac

log "installing $(basename "$DEB") (dpkg -i)"
install_package "$DEB"

log "logging $BOOT_USER in: machinectl shell $BOOT_USER@.host (a PAM login session)"
set +e
out=$(timeout 240 nsenter --target "$LEADER" --all \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb \
    machinectl --quiet shell "$BOOT_USER@.host" /run/contextd-test/user-checks.sh 2>&1)
rc=$?
set -e
# The session's output comes through a pseudo-terminal: CRLF.
out=${out//$'\r'/}
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || die "machinectl shell exited $rc"
result=$(printf '%s\n' "$out" | sed -n 's/^user-checks: result=\([0-9]*\)$/\1/p' | tail -n 1)
[ -n "$result" ] || die "the checks in the session did not finish"
[ "$result" -eq 0 ] || die "$result check(s) in the session failed"

log "ok"
echo "boot-test: ok"
