# The recipe of scripts/roots.sh desktop-testing: the newest desktops Debian
# carries (issue 52), for the tests of tests/it/debian_testing.rs. Checked on
# the mirror of 2026-10-30 (apt-cache policy):
#
#                            sid (this root)    testing (forky)
#   gnome-shell              51.0               50.5
#   kwin-wayland             6.7.4              6.7.4
#   sway (wlroots 0.20)      1.12               1.12
#   hyprland                 0.57.0             0.56.2
#   labwc (wlroots 0.20)     0.20.2             0.20.2
#   pipewire / wireplumber   1.6.9 / 0.5.18     1.6.9 / 0.5.18
#   xdg-desktop-portal-kde   6.7.4              6.7.4
#   xdg-desktop-portal-gnome 51.0               50.0
#   foot 1.28, python3-gi 3.58 with GTK 3.24.52, wayland-utils 1.3
#
# It is made from sid (unstable), not forky: GNOME 51 and Hyprland 0.57
# have not reached testing yet, and they are what this root is for; the
# rest is the same in both. SUITE=forky makes the testing one (debootstrap
# 1.0.128 knows no "forky": it is told to use its sid script).
#
# As with desktop13: nothing of contextd is in it. The broker is built on
# the host and runs there (Debian 12's glibc is older than this root's, so
# the host binary needs nothing newer than it has); what runs inside (the
# compositors, PipeWire, test clients) talks to the host's processes
# through sockets in /tmp (scripts/in-root.sh).
#
# The mirror's index of sid and testing says for how long it is valid (a
# week); a mirror frozen in time (a snapshot, an offline copy) serves it
# expired, and apt then refuses it. The root is made once, from whatever
# the mirror serves, so apt here does not check that date.
#
# About 3 GB; the first build takes several minutes (downloads cached in
# debs-SUITE beside the roots).
# shellcheck shell=bash disable=SC2034 # the variables are read by scripts/roots.sh

NAME=testing-desktop
SUITE=sid
DEBOOTSTRAP_SCRIPT=sid
# The host's compositor user (scripts/deps.sh makes it), with the same ids
# inside: see desktop13.
TEST_USER=${CONTEXTD_TEST_USER:-contextd-test}
TEST_UID=$(id -u "$TEST_USER" 2>/dev/null || echo 0)
TEST_GID=$(id -g "$TEST_USER" 2>/dev/null || echo 0)
RECIPE_VARS=("$TEST_USER" "$TEST_UID" "$TEST_GID" "$DEBOOTSTRAP_SCRIPT")
INCLUDE=(ca-certificates)

configure_root() {
    local root=$1
    [ "$TEST_UID" != 0 ] || die "no user $TEST_USER on the host: run scripts/deps.sh"
    mkdir -p "$CACHE/debs-$SUITE/partial"
    printf 'Acquire::Check-Valid-Until "false";\n' >"$root/etc/apt/apt.conf.d/99contextd-snapshot"
    systemd-nspawn --quiet --register=no --keep-unit --pipe -D "$root" \
        --bind="$CACHE/debs-$SUITE:/var/cache/apt/archives" \
        env DEBIAN_FRONTEND=noninteractive sh -ec '
            apt-get update -qq
            apt-get install -y -qq --no-install-recommends \
                gnome-shell kwin-wayland xwayland sway foot hyprland labwc \
                pipewire pipewire-bin wireplumber dbus-daemon dbus-user-session \
                python3-gi gir1.2-gtk-3.0 wayland-utils wl-clipboard \
                xdg-desktop-portal-kde xdg-desktop-portal-gnome \
                plasma-workspace qt6-wayland \
                qml6-module-qtquick-controls qml6-module-qtquick-layouts \
                at-spi2-core gir1.2-atspi-2.0 \
                libssl3t64 libpipewire-0.3-0t64 >/dev/null
            rm -rf /var/lib/apt/lists/*
        '
    chroot "$root" getent group "$TEST_GID" >/dev/null 2>&1 ||
        chroot "$root" groupadd --gid "$TEST_GID" "$TEST_USER"
    chroot "$root" useradd --uid "$TEST_UID" --gid "$TEST_GID" --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin "$TEST_USER"
}
