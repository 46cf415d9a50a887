# The recipe of scripts/roots.sh desktop13: Debian 13 (trixie) with the
# desktops users run today, for the tests of tests/it/trixie_*.rs: GNOME Shell
# 48, KWin 6 (kwin_wayland), sway 1.10 (wlroots 0.18) with foot, PipeWire 1.4
# with WirePlumber, GTK 3 from Python for test windows, wayland-info,
# dbus-user-session (what the contextd package's dbus-session-bus dependency
# is on a desktop, for the package test), and xdg-desktop-portal-kde 6.3
# with what its dialogs are drawn with (plasma-workspace's QML dialogs, Qt
# Quick Controls, Qt's Wayland platform) and the accessibility bus and
# AT-SPI's Python binding that answer it (tests/debian13/portal_kde.sh).
#
# Nothing of contextd is in it: the broker the tests run is the one built on
# the host (Debian 12's glibc and libraries are older than trixie's, so a
# host binary runs there; `ldd` shows libssl3 and libpipewire-0.3, both in
# the root), and what runs inside the root (compositors, PipeWire, clients)
# talks to the host's processes through sockets in /tmp (scripts/in-root.sh).
#
# The desktop packages are installed by apt inside the root after
# debootstrap (debootstrap resolves no alternatives), with systemd-nspawn
# without --boot (a mount namespace with /proc, /dev and the network; no
# systemd is started). About 1.7 GB; the first build takes about 4 minutes.
# shellcheck shell=bash disable=SC2034 # the variables are read by scripts/roots.sh

NAME=trixie-desktop
SUITE=trixie
# The host's compositor user (scripts/deps.sh makes it; scripts/session.sh
# runs sway as it when run as root): the same ids inside, so a compositor of
# the root runs as the same user and its sockets stay the user's.
TEST_USER=${CONTEXTD_TEST_USER:-contextd-test}
TEST_UID=$(id -u "$TEST_USER" 2>/dev/null || echo 0)
TEST_GID=$(id -g "$TEST_USER" 2>/dev/null || echo 0)
RECIPE_VARS=("$TEST_USER" "$TEST_UID" "$TEST_GID")
INCLUDE=(ca-certificates)

configure_root() {
    local root=$1
    [ "$TEST_UID" != 0 ] || die "no user $TEST_USER on the host: run scripts/deps.sh"
    # The downloaded packages stay in the cache beside the roots, so that
    # the next recipe downloads only what changed.
    mkdir -p "$CACHE/debs-$SUITE/partial"
    systemd-nspawn --quiet --register=no --keep-unit --pipe -D "$root" \
        --bind="$CACHE/debs-$SUITE:/var/cache/apt/archives" \
        env DEBIAN_FRONTEND=noninteractive sh -ec '
            apt-get update -qq
            apt-get install -y -qq --no-install-recommends \
                gnome-shell kwin-wayland xwayland sway foot \
                pipewire pipewire-bin wireplumber dbus-daemon dbus-user-session \
                python3-gi gir1.2-gtk-3.0 wayland-utils \
                xdg-desktop-portal-kde plasma-workspace qt6-wayland \
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
