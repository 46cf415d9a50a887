# The recipe of scripts/roots.sh boot: the minimal Debian 12 root that the
# systemd boot test (tests/it/systemd_boot.rs, tests/systemd-boot/boot-test.sh)
# boots with `systemd-nspawn --boot`.
#
# Debian 12 (bookworm) with systemd as init, dbus and dbus-user-session (the
# user bus is a socket of the user manager, so D-Bus activation goes through
# systemd), libpam-systemd (a login opens a logind session and starts
# user@UID.service), systemd-container (machinectl and machined inside the
# container: `machinectl shell USER@.host` opens a real PAM login session
# there), the shared libraries contextd links (libssl3, libpipewire-0.3-0:
# `ldd target/debug/contextd`; SQLCipher is bundled) and a test user. Nothing
# of contextd is in it: the test installs the package into a throwaway copy
# each time. debootstrap downloads about 60 MB of packages.
# shellcheck shell=bash disable=SC2034 # the variables are read by scripts/roots.sh

NAME=bookworm
SUITE=bookworm
# The user who logs in inside the container and runs contextctl.
BOOT_USER=ctxuser
BOOT_UID=1000
# What else the root depends on, for its recipe's hash.
RECIPE_VARS=("$BOOT_USER" "$BOOT_UID")
# On top of debootstrap's minbase. See the header for why each is there.
INCLUDE=(
    systemd systemd-sysv dbus dbus-user-session libpam-systemd systemd-container
    libssl3 libpipewire-0.3-0
    # the package's helpers inside: maintainer scripts may call these
    adduser
)

# What makes the root, after debootstrap: run with the new root as $1.
configure_root() {
    local root=$1
    # A machine id is made at first boot of each throwaway copy.
    : >"$root/etc/machine-id"
    echo contextd-boot >"$root/etc/hostname"
    # No getty on the console: the test talks to the container by nsenter and
    # nothing waits for a login prompt.
    chroot "$root" systemctl mask console-getty.service getty@tty1.service \
        systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
        e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
    chroot "$root" useradd --create-home --uid "$BOOT_UID" --user-group \
        --shell /bin/bash "$BOOT_USER"
    # No password: root inside may become the user (machinectl shell, runuser);
    # nobody can log in from outside (there is no network and no getty).
    chroot "$root" passwd --delete "$BOOT_USER" >/dev/null
    # debootstrap leaves its package cache; the copies need none of it.
    rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
}

