#!/usr/bin/env bash
# Checks the files that integrate contextd into a desktop: the systemd user
# unit, the D-Bus activation file, the polkit policy, `make install`, and the
# shell scripts themselves. Needs no build and no running services; finishes in
# a few seconds. The last line is "N passed, N failed"; the exit status is
# non-zero when a check failed.
#
#   tests/integration-files.sh            run every check
#   VERBOSE=1 tests/integration-files.sh  also show the output of passing checks
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

UNIT=systemd/contextd.service
ACTIVATION=systemd/org.contextd.Broker1.service
POLICY=polkit/org.contextd.policy
BUS_NAME=org.contextd.Broker1
POLKIT_DTD=/usr/share/polkit-1/policyconfig-1.dtd

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PASSED=0
FAILED=0

# check NAME COMMAND...: run COMMAND, count it, show its output when it fails.
check() {
    local name=$1
    shift
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -eq 0 ]; then
        PASSED=$((PASSED + 1))
        printf 'ok      %s\n' "$name"
        if [ "${VERBOSE:-0}" = 1 ] && [ -n "$out" ]; then printf '%s\n' "$out" | sed 's/^/        /'; fi
    else
        FAILED=$((FAILED + 1))
        printf 'FAILED  %s (exit %s)\n' "$name" "$rc"
        if [ -n "$out" ]; then printf '%s\n' "$out" | sed 's/^/        /'; fi
    fi
}

# Each check runs in a subshell (check captures its output): fail ends it.
fail() { printf '%s\n' "$@"; exit 1; }

# Does FILE contain the line LINE exactly?
has_line() { # FILE LINE
    grep -qxF -- "$2" "$1" || fail "$1: no line '$2'"
}

# ---------------------------------------------------------------- systemd unit

# systemd-analyze verify prints warnings but still exits 0: any output fails.
# ExecStart= must name an existing executable for verify to be quiet, so a copy
# of the unit points at a built contextd, or at /bin/true.
verify_unit() {
    local exe=/bin/true candidate
    for candidate in target/release/contextd target/debug/contextd; do
        if [ -x "$candidate" ]; then exe=$ROOT/$candidate; break; fi
    done
    mkdir -p "$TMP/unit" "$TMP/runtime"
    chmod 0700 "$TMP/runtime"
    sed -e "s|^ExecStart=/usr/local/bin/contextd|ExecStart=$exe|" "$UNIT" >"$TMP/unit/contextd.service"
    grep -q "^ExecStart=$exe" "$TMP/unit/contextd.service" ||
        fail "$UNIT: ExecStart= does not start with /usr/local/bin/contextd"
    local out rc=0
    out=$(XDG_RUNTIME_DIR=$TMP/runtime timeout 15 systemd-analyze verify --user \
        "$TMP/unit/contextd.service" 2>&1) || rc=$?
    [ "$rc" -eq 0 ] || fail "systemd-analyze verify exited $rc: $out"
    [ -z "$out" ] || fail "systemd-analyze verify printed (with $exe as ExecStart=):" "$out"
    echo "verified with ExecStart=$exe"
}

unit_settings() {
    local line
    for line in "Type=dbus" "BusName=$BUS_NAME" "ExecStart=/usr/local/bin/contextd" \
        "PartOf=graphical-session.target" "After=graphical-session.target" \
        "WantedBy=graphical-session.target" "Restart=on-failure" "NoNewPrivileges=yes"; do
        has_line "$UNIT" "$line"
    done
}

# Settings that need a mount namespace are silently ignored in user units on
# systemd 252 and need user namespaces on later ones; ProtectHome= would hide
# /run/user (Wayland and PipeWire sockets). Keep them out.
unit_no_namespaces() {
    local bad
    bad=$(grep -nE '^(ProtectSystem|ProtectHome|PrivateTmp|PrivateDevices|PrivateUsers|ReadWritePaths|ReadOnlyPaths|InaccessiblePaths|ProtectProc|ProtectKernel[A-Za-z]*|ProtectHostname|ProtectClock|PrivateNetwork|CapabilityBoundingSet)=' "$UNIT" || true)
    [ -z "$bad" ] || fail "$UNIT: settings a user manager cannot apply:" "$bad"
}

# ---------------------------------------------------------------- D-Bus activation

activation_file() {
    [ "$(head -n 1 "$ACTIVATION")" = "[D-BUS Service]" ] || fail "$ACTIVATION: first line is not [D-BUS Service]"
    has_line "$ACTIVATION" "Name=$BUS_NAME"
    has_line "$ACTIVATION" "Exec=/usr/local/bin/contextd"
    has_line "$ACTIVATION" "SystemdService=contextd.service"
    # The unit it names exists and owns the same name.
    [ -f "systemd/$(sed -n 's/^SystemdService=//p' "$ACTIVATION")" ] || fail "the unit named in SystemdService= is missing"
    local unit_name
    unit_name=$(sed -n 's/^BusName=//p' "$UNIT")
    [ "$unit_name" = "$BUS_NAME" ] || fail "$UNIT owns '$unit_name', the activation file activates '$BUS_NAME'"
    # dbus-daemon wants the file named after the bus name.
    [ "$(basename "$ACTIVATION")" = "$BUS_NAME.service" ] || fail "$ACTIVATION is not named $BUS_NAME.service"
}

# ---------------------------------------------------------------- polkit

policy_valid() {
    [ -r "$POLKIT_DTD" ] || fail "$POLKIT_DTD is missing: install polkitd (scripts/deps.sh)"
    xmllint --noout --nonet --dtdvalid "$POLKIT_DTD" "$POLICY"
}

policy_content() {
    local xp=(xmllint --nonet --xpath)
    [ "$("${xp[@]}" 'string(/policyconfig/vendor)' "$POLICY")" = contextd ] || fail "vendor is not contextd"
    local a='/policyconfig/action[@id="org.contextd.manage-consent"]'
    [ "$("${xp[@]}" "count($a)" "$POLICY")" = 1 ] || fail "no action org.contextd.manage-consent"
    local d
    for d in allow_any allow_inactive allow_active; do
        [ "$("${xp[@]}" "string($a/defaults/$d)" "$POLICY")" = auth_self_keep ] ||
            fail "org.contextd.manage-consent: $d is not auth_self_keep"
    done
    [ -n "$("${xp[@]}" "string($a/description)" "$POLICY")" ] || fail "no description"
    [ -n "$("${xp[@]}" "string($a/message)" "$POLICY")" ] || fail "no message"
    # Every action id is ours.
    local foreign
    foreign=$("${xp[@]}" '//action/@id' "$POLICY" | tr ' ' '\n' | grep -v '^$' | grep -v '^id="org\.contextd\.' || true)
    [ -z "$foreign" ] || fail "actions outside org.contextd.: $foreign"
}

# ---------------------------------------------------------------- make install

# make install (or install-data when no binaries are built: this test never
# runs cargo) with DESTDIR and PREFIX=/usr puts every file where it belongs.
make_install() {
    local dest=$TMP/dest target=install-data
    local release=${CARGO_TARGET_DIR:-target}/release
    # The binaries the caller names (the Rust test passes its own), else a
    # release build if there is one, else only what needs no binary.
    if [ -n "${CONTEXTD_BIN:-}" ] && [ -x "${CONTEXTCTL_BIN:-}" ] &&
        [ "$(dirname "$CONTEXTD_BIN")" = "$(dirname "$CONTEXTCTL_BIN")" ]; then
        target="install BINARIES_DIR=$(dirname "$CONTEXTD_BIN")"
    elif [ -x "$release/contextd" ] && [ -x "$release/contextctl" ]; then
        target="install CARGO=true"
    fi
    # shellcheck disable=SC2086 # $target is two words on purpose
    env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS timeout 60 make -s -C "$ROOT" $target \
        DESTDIR="$dest" PREFIX=/usr >"$TMP/make.log" 2>&1 ||
        fail "make $target failed:" "$(cat "$TMP/make.log")"
    local f
    local -a expected=(
        usr/lib/systemd/user/contextd.service
        usr/share/dbus-1/services/org.contextd.Broker1.service
        usr/share/polkit-1/actions/org.contextd.policy
        usr/share/gnome-shell/extensions/contextd@contextd.org/brokerCheck.js
        usr/share/gnome-shell/extensions/contextd@contextd.org/consentDialog.js
        usr/share/gnome-shell/extensions/contextd@contextd.org/extension.js
        usr/share/gnome-shell/extensions/contextd@contextd.org/indicator.js
        usr/share/gnome-shell/extensions/contextd@contextd.org/metadata.json
    )
    for f in dbus-interfaces/*.xml; do
        [ -e "$f" ] && expected+=("usr/share/dbus-1/interfaces/$(basename "$f")")
    done
    if [ "$target" != install-data ]; then
        # The binaries, and what contextctl generates (man pages, completions).
        expected+=(usr/bin/contextd usr/bin/contextctl
            usr/share/man/man1/contextd.1 usr/share/man/man1/contextctl.1
            usr/share/bash-completion/completions/contextctl
            usr/share/zsh/vendor-completions/_contextctl
            usr/share/fish/vendor_completions.d/contextctl.fish)
    fi
    for f in "${expected[@]}"; do
        [ -f "$dest/$f" ] || fail "make $target did not install /$f"
    done
    has_line "$dest/usr/lib/systemd/user/contextd.service" "ExecStart=/usr/bin/contextd"
    has_line "$dest/usr/share/dbus-1/services/org.contextd.Broker1.service" "Exec=/usr/bin/contextd"
    # Nothing else still points into /usr/local. Text files only (-I): the
    # binaries name /usr/local/share on purpose, as the XDG default of
    # $XDG_DATA_DIRS (desktop entries are looked up there).
    if grep -rlI /usr/local "$dest" >/dev/null 2>&1; then
        fail "installed files still name /usr/local: $(grep -rlI /usr/local "$dest")"
    fi
    # Data files are not executable.
    local mode
    for f in "${expected[@]}"; do
        case "$f" in usr/bin/*) continue ;; esac
        mode=$(stat -c %a "$dest/$f")
        [ "$mode" = 644 ] || fail "/$f has mode $mode, expected 644"
    done
    # Nothing outside PREFIX, nothing unexpected.
    local extra
    extra=$(cd "$dest" && find . -type f | sed 's|^\./||' | sort |
        comm -23 - <(printf '%s\n' "${expected[@]}" | sort))
    [ -z "$extra" ] || fail "make $target installed unexpected files:" "$extra"
    echo "make $target installed ${#expected[@]} files"
}

# ---------------------------------------------------------------- scripts

scripts_syntax() {
    local f
    for f in scripts/*.sh tests/*.sh examples/*.sh .ci/run; do
        [ -e "$f" ] || continue
        [ -x "$f" ] || fail "$f is not executable"
        bash -n "$f" || fail "$f: syntax error"
    done
}

scripts_shellcheck() {
    if ! command -v shellcheck >/dev/null 2>&1; then
        echo "shellcheck not installed; skipped"
        return 0
    fi
    shellcheck scripts/*.sh scripts/roots/*.sh tests/*.sh tests/systemd-boot/*.sh tests/debian13/*.sh examples/*.sh .ci/run
}

# The interface files are well-formed XML (gdbus-codegen and zbus-xmlgen
# read them; a '--' in a doc comment is enough to break them).
interfaces_well_formed() {
    xmllint --noout --nonet dbus-interfaces/*.xml
}

makefile_parses() {
    local t
    for t in build run test lint bench install install-data clean deps; do
        env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -n -C "$ROOT" "$t" >/dev/null ||
            fail "make -n $t failed"
    done
}

check "systemd-analyze verify --user $UNIT is clean" verify_unit
check "$UNIT has the agreed settings" unit_settings
check "$UNIT uses no sandboxing a user manager cannot apply" unit_no_namespaces
check "$ACTIVATION names the unit and the bus name" activation_file
check "$POLICY is valid against $POLKIT_DTD" policy_valid
check "$POLICY declares org.contextd.manage-consent" policy_content
check "make install DESTDIR=... PREFIX=/usr puts every file in place" make_install
check "shell scripts are executable and parse" scripts_syntax
check "shell scripts pass shellcheck" scripts_shellcheck
check "dbus-interfaces/*.xml are well-formed" interfaces_well_formed
check "Makefile targets parse (make -n)" makefile_parses

printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
[ "$FAILED" -eq 0 ]
