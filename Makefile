# contextd — build, test, run and install.
#
#   make deps      install what builds and tests need (Debian 12; scripts/deps.sh)
#   make build     cargo build --release
#   make run       build, then run the broker in the foreground: in your desktop
#                  session if there is one, else in a private headless session
#                  with mocked system services (scripts/session.sh --mocks)
#                  that is stopped again on exit
#   make test      fmt check, clippy, all tests (what CI runs, via .ci/run)
#   make lint      fmt check and clippy only, and the Markdown's relative
#                  links (scripts/check-links.py)
#   make bench     build and run the benchmark
#   make soak      the daemon under load and faults for a bounded time, with
#                  a figures table; fails on errors, panics, lost data (below)
#   make mcpb      Claude Desktop's MCP bundle target/mcpb/contextd.mcpb and the
#                  MCP registry's target/mcpb/server.json (packaging/mcpb/)
#   make install   binaries, user unit, D-Bus activation file, polkit policy,
#                  interface XML, the GNOME Shell extension (not enabled:
#                  a user enables it), man pages and bash/zsh/fish
#                  completions under $(DESTDIR)$(PREFIX)
#   make deb       the Debian package, target/deb/contextd_VERSION_ARCH.deb
#                  (scripts/deb.sh; its path is the last line printed)
#   make clean     cargo clean and remove .run/

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

CARGO ?= cargo
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
SYSTEMD_USER_UNIT_DIR ?= $(PREFIX)/lib/systemd/user
DBUS_SERVICES_DIR ?= $(DATADIR)/dbus-1/services
DBUS_INTERFACES_DIR ?= $(DATADIR)/dbus-1/interfaces
POLKIT_ACTIONS_DIR ?= $(DATADIR)/polkit-1/actions
GNOME_SHELL_EXTENSIONS_DIR ?= $(DATADIR)/gnome-shell/extensions
MAN1DIR ?= $(DATADIR)/man/man1
BASH_COMPLETION_DIR ?= $(DATADIR)/bash-completion/completions
ZSH_COMPLETION_DIR ?= $(DATADIR)/zsh/vendor-completions
FISH_COMPLETION_DIR ?= $(DATADIR)/fish/vendor_completions.d
# The GNOME Shell extension's format: `legacy` (GNOME 43, 44) or `esm` (45
# and later); by default the one the installed gnome-shell takes, else esm.
GNOME_SHELL_EXTENSION ?= $(shell v=$$(gnome-shell --version 2>/dev/null | sed -n 's/^GNOME Shell \([0-9]*\).*/\1/p' || true); \
	if [ -n "$$v" ] && [ "$$v" -lt 45 ]; then echo legacy; else echo esm; fi)

# Dependencies are compiled once per machine, not once per clone: cargo's
# build dir (its intermediate artifacts: every compiled crate, build-script
# output) lives under ~/.cache/contextd/build and is shared by every clone of
# this repository on the machine, while each clone's target/ keeps its own
# binaries. Cargo names a workspace crate's artifacts by its path relative to
# the workspace, so a new clone recompiles contextd itself over the previous
# clone's artifacts (the dir does not grow per clone) and reuses every
# dependency that Cargo.lock, the toolchain and the flags leave unchanged.
# `make test` holds a lock on it for its whole run (two clones' test runs
# would otherwise replace each other's test binaries). Set
# CARGO_BUILD_BUILD_DIR=target to keep everything in the clone.
CONTEXTD_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/contextd
export CARGO_BUILD_BUILD_DIR ?= $(CONTEXTD_CACHE)/build
# SQLCipher with the daemon's own crypto, not OpenSSL (src/store/cipher.rs).
# .cargo/config.toml sets the same for cargo run by hand; set here too so
# that every build through make has it whatever cargo config is in place.
export LIBSQLITE3_FLAGS ?= -DSQLCIPHER_CRYPTO_CUSTOM=contextd_sqlcipher_provider

# --locked once there is a lock file to hold the build to.
LOCKED := $(if $(wildcard Cargo.lock),--locked,)
# Where cargo puts the release build (it honours CARGO_TARGET_DIR).
RELEASE := $(abspath $(or $(CARGO_TARGET_DIR),$(CURDIR)/target))/release
# `make install BINARIES_DIR=DIR` installs the binaries found in DIR and
# builds nothing (the package test packs the binaries cargo built for it).
BINARIES_DIR ?=
# Man pages and completion scripts, written by `contextctl generate-files`
# from the clap definitions (src/cli/).
GENERATED := $(abspath $(or $(CARGO_TARGET_DIR),$(CURDIR)/target))/generated
BINARIES := contextd contextctl

# `make run` without a desktop: everything lives under .run/ (gitignored).
RUN_DIR := $(CURDIR)/.run
RUN_SESSION := $(RUN_DIR)/session

.PHONY: all deps build run test test-locked test-scripts lint fmt clippy bench soak fuzz mcpb \
	generated install install-bin install-data install-generated uninstall deb clean

all: build

deps:
	@scripts/deps.sh

build:
	$(CARGO) build --release $(LOCKED)

# Once the broker answers, print a one-time link to its dashboard (in the
# background: the broker runs in the foreground).
define print_dashboard_url
{ ( for _ in $$(seq 1 150); do \
      if url=$$("$(RELEASE)/contextctl" dashboard --no-open 2>/dev/null); then \
          printf '\nmake run: the dashboard: %s\n  (the link works once; `contextctl dashboard` gives another)\n\n' "$$url"; \
          exit 0; \
      fi; \
      sleep 0.2; \
  done; echo "make run: no dashboard link (see the broker's log)" ) & }
endef

# Run the broker in the foreground. With a desktop session (a session bus that
# answers and WAYLAND_DISPLAY), in it; else in a private headless session with
# a private system bus of python-dbusmock services (every source available,
# polkit says yes) and a policy that grants contextctl and busctl everything.
run: deps build
	@if [ -n "$${DBUS_SESSION_BUS_ADDRESS:-}" ] && [ -n "$${WAYLAND_DISPLAY:-}" ] && \
	    timeout 5 dbus-send --session --print-reply --dest=org.freedesktop.DBus \
	        /org/freedesktop/DBus org.freedesktop.DBus.GetId >/dev/null 2>&1; then \
	    echo "make run: using your desktop session (WAYLAND_DISPLAY=$$WAYLAND_DISPLAY)"; \
	    $(call print_dashboard_url); \
	    exec "$(RELEASE)/contextd" -v; \
	fi; \
	echo "make run: no desktop session here; starting a private one in $(RUN_SESSION)"; \
	scripts/session.sh stop "$(RUN_SESSION)" 2>/dev/null || true; \
	trap 'echo; echo "make run: stopping the private session"; scripts/session.sh stop "$(RUN_SESSION)"' EXIT; \
	trap 'exit 130' INT; trap 'exit 143' TERM; \
	scripts/session.sh start "$(RUN_SESSION)" --mocks; \
	. "$(RUN_SESSION)/env"; \
	mkdir -p "$(RUN_DIR)/config/contextd" "$(RUN_DIR)/data" "$(RUN_DIR)/state"; \
	{ \
	    echo '# Written by `make run` (rewritten on every run): the demo grants.'; \
	    echo '[[grant]]'; \
	    echo 'app = "exe:$(RELEASE)/contextctl"'; \
	    echo 'categories = ["*"]'; \
	    echo; \
	    echo '[[grant]]'; \
	    echo 'app = "exe:/usr/bin/busctl"'; \
	    echo 'categories = ["*"]'; \
	} > "$(RUN_DIR)/config/contextd/policy.toml"; \
	echo; \
	echo "contextd runs below in a private session in $(RUN_SESSION):"; \
	echo "  session bus  $$DBUS_SESSION_BUS_ADDRESS"; \
	echo "               with a notification daemon and a screen saver (python-dbusmock)"; \
	echo "  system bus   $$DBUS_SYSTEM_BUS_ADDRESS"; \
	echo "               with python-dbusmock's logind (your session c1), UPower (on battery,"; \
	echo "               73 %), NetworkManager (Wi-Fi \"contextd demo Wi-Fi\") and polkitd (says yes)"; \
	echo "  sway         headless, two foot windows (WAYLAND_DISPLAY=$$WAYLAND_DISPLAY)"; \
	echo "  PipeWire     with WirePlumber, a null sink and a null source"; \
	echo "  (scripts/session.sh status $(RUN_SESSION): the processes; their logs are there too)"; \
	echo; \
	echo "To use it from another terminal, export the session's variables:"; \
	echo; \
	echo "  cd $(CURDIR) && . $(RUN_SESSION)/env"; \
	echo "  # that is:"; \
	sed -n 's/^export /  export /p' "$(RUN_SESSION)/env"; \
	echo; \
	echo "then:"; \
	echo; \
	echo "  $(RELEASE)/contextctl sources     # every source available"; \
	echo "  $(RELEASE)/contextctl status"; \
	echo "  $(RELEASE)/contextctl dashboard   # a one-time link to the privacy dashboard"; \
	echo "  $(RELEASE)/contextctl consent grant exe:/usr/bin/true windows   # polkit (mocked) allows it"; \
	echo "  notify-send Hello 'from make run'   # a notification the broker reports"; \
	echo "  gdbus call --session --dest org.contextd.Broker1 --object-path /org/contextd/Broker1 \\"; \
	echo "      --method org.contextd.Context1.GetActiveWindow   # ungranted: a consent prompt,"; \
	echo "  tail $(RUN_SESSION)/mock-notifications.log   # which is this Notify call"; \
	echo "  busctl --user introspect org.contextd.Broker1 /org/contextd/Broker1"; \
	echo "  scripts/session.sh open-window $(RUN_SESSION) org.example.Editor 'Some title'"; \
	echo "  pw-play SOME.wav     # a stream the broker reports"; \
	echo; \
	echo "contextctl and busctl are granted everything ($(RUN_DIR)/config/contextd/policy.toml)."; \
	echo "Ctrl-C stops the broker and the session."; \
	echo; \
	$(call print_dashboard_url); \
	XDG_CONFIG_HOME="$(RUN_DIR)/config" XDG_DATA_HOME="$(RUN_DIR)/data" \
	    XDG_STATE_HOME="$(RUN_DIR)/state" "$(RELEASE)/contextd" -v

# What CI runs (.ci/run). The first failing step stops make with a non-zero
# status; the tests themselves all run (--no-fail-fast). The tests find Node 22
# and the venv with PyPI mcp through CONTEXTD_NODE and CONTEXTD_PYTHON.
# The integration tests are one binary (tests/it/): nextest runs each test
# in a process of its own, plain `cargo test` as threads of one; the one
# test that needs its own environment runs the binary again for itself
# (tests/it/fdo_own_notifications.rs), so both ways are safe.
test:
	@scripts/check-links.py
	@scripts/deps.sh --node --python --boot-root --desktop-root
	@mkdir -p "$(CARGO_BUILD_BUILD_DIR)"
	@flock -n "$(CARGO_BUILD_BUILD_DIR)/.make-test.lock" true || \
	    echo "make test: another clone's make test runs on this machine; waiting for it"
	@flock -o "$(CARGO_BUILD_BUILD_DIR)/.make-test.lock" $(SUBMAKE) --no-print-directory test-locked

# $(MAKE) by another name: a recipe line that names $(MAKE) runs even under
# `make -n`, and this one would wait for the lock that a running make test
# holds.
SUBMAKE := $(MAKE)

test-locked: export CONTEXTD_NODE := $(CURDIR)/.tools/node22/bin/node
test-locked: export CONTEXTD_PYTHON := $(CURDIR)/.tools/venv/bin/python
# Clippy lints while the tests are built, instead of in a check pass of
# its own: clippy-driver is a rustc that also lints, and as cargo's
# workspace wrapper it compiles (and lints, -D warnings) only this crate's
# targets; the dependencies build with rustc, once. What `cargo clippy
# --all-targets -- -D warnings` checks, with every crate compiled once
# instead of once to check and once to test.
# CI (CI=true) builds a clone once: incremental compilation there only
# costs. It splits contextd into 256 codegen units instead of 16 and writes
# the query cache: the library alone took 212 s of CPU with it and 85 s
# without (the same clippy build, measured here), and the build is most of
# a fresh clone's `make test` on two cores. A developer's repeated `make
# test` keeps it (an edit of one file then recompiles a fraction).
ifeq ($(CI),true)
test-locked: export CARGO_INCREMENTAL := 0
endif
test-locked: export RUSTC_WORKSPACE_WRAPPER := clippy-driver
test-locked: export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
test-locked:
	$(CARGO) fmt --check
	@# Every target, linted and built once, with the `conformance` feature
	@# and the `replay` one (`contextd --replay`, which the test and bench
	@# daemons are driven with; a release build has neither):
	@# the library, its unit tests, the binaries, the examples, the
	@# integration tests (the MCP conformance suite's among them) and (in
	@# test mode, not run) the benches. The conformance feature builds one
	@# more binary, `contextd-conformance` (contextd with the conformance
	@# suite's fixtures, tests/mcp_conformance/), which only the
	@# conformance test runs; the library and `contextd` are what a
	@# release build has.
	$(CARGO) test --quiet --no-run --all-targets --features conformance,replay $(LOCKED)
	@# The tests run, and beside them what a release build compiles (no
	@# feature) is checked and linted: in a build dir of its own (kept per
	@# machine too), so that neither waits for the other's lock; it takes
	@# about a core for a minute while the tests wait on their daemons.
	@log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	echo "$(CARGO) check --quiet --lib --bins $(LOCKED)  (beside the tests)"; \
	CARGO_TARGET_DIR="$(CURDIR)/target/release-check" \
	CARGO_BUILD_BUILD_DIR="$(CARGO_BUILD_BUILD_DIR)-release-check" \
	    $(CARGO) check --quiet --lib --bins $(LOCKED) >"$$log" 2>&1 & check=$$!; \
	st=0; \
	if $(CARGO) nextest --version >/dev/null 2>&1; then \
	    (set -x; $(CARGO) nextest run --cargo-quiet --features conformance,replay $(LOCKED) --no-fail-fast) || st=$$?; \
	else \
	    (set -x; $(CARGO) test --quiet --features conformance,replay $(LOCKED) --no-fail-fast) || st=$$?; \
	fi; \
	if wait $$check; then \
	    echo "make test: the release configuration checks clean"; \
	else \
	    cat "$$log"; echo "make test: the release configuration (no features) does not check clean"; st=1; \
	fi; \
	exit $$st

# The shell tests on their own (the Rust tests call them too), the session's
# with the release binaries.
test-scripts: build
	tests/integration-files.sh
	CONTEXTD_BIN="$(RELEASE)/contextd" CONTEXTCTL_BIN="$(RELEASE)/contextctl" tests/session-smoke.sh

lint: links fmt clippy

# Every relative link and anchor in README.md, ARCHITECTURE.md and docs/
# names a file and heading of the repository (no cargo; under a second).
.PHONY: links
links:
	scripts/check-links.py

fmt:
	$(CARGO) fmt --check

clippy:
	$(CARGO) clippy --quiet --all-targets $(LOCKED) -- -D warnings

# Each bench prints its figures and their ratio to a floor measured in the
# same run; none asserts (timing belongs here, not in tests). The benches
# are one binary (benches/main.rs): name some to run only those, e.g.
# `cargo bench --bench benches -- wayland mcp`.
bench: export CONTEXTD_NODE := $(CURDIR)/.tools/node22/bin/node
bench: deps
	@scripts/deps.sh --node --desktop-root
	$(CARGO) build --release $(LOCKED) --features replay --example wl_toplevels
	$(CARGO) bench $(LOCKED) --features replay --bench benches -- broker pipewire fdo wayland mcp history provider dashboard v4l2 shells readers boundary

# Issue 16's soak (benches/soak.rs), loopback only, in a private session of
# scripts/session.sh with mocked system services: CONTEXTD_SOAK_SECS (60) s
# of load (200 MCP HTTP clients over every tool and resource, 50 D-Bus
# subscribers, 1000 sway focus changes/s, 50 PipeWire stream changes/s,
# history on) while sway, PipeWire and each mocked service are killed and
# restarted in turn, then CONTEXTD_SOAK_KILLS (100) kill -9 of the daemon
# during writes, each followed by an integrity check and a count of the
# history lost. Prints the figures table; exits non-zero on any error,
# panic, unbounded memory, lost data or the daemon exiting (timing is
# printed, never a failure). About 4-5 minutes after the build. The other
# knobs are at the top of benches/soak.rs. Inputs tried: the table quotes
# the last `make fuzz` figure; CONTEXTD_SOAK_FUZZ_CASES=N first runs a fuzz
# slice of N inputs (a debug build of the library's tests) and quotes that.
soak: deps
	$(CARGO) build --release $(LOCKED) --features replay --example wl_toplevels
	@fig=; if [ "$${CONTEXTD_SOAK_FUZZ_CASES:-0}" -gt 0 ]; then \
	    log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	    CONTEXTD_FUZZ_CASES="$$CONTEXTD_SOAK_FUZZ_CASES" $(CARGO) test $(LOCKED) --features replay --lib fuzz::full \
	        -- --ignored --exact --nocapture | tee "$$log"; \
	    fig="$$(sed -n 's/^fuzz: total //p' "$$log"), 0 failures (a slice run by this make soak)"; \
	fi; \
	set -x; CONTEXTD_SOAK_FUZZ_FIGURE="$$fig" $(CARGO) bench $(LOCKED) --features replay --bench benches -- soak

# The fuzz targets of fuzz/mod.rs (`make test` runs a short slice):
# CONTEXTD_FUZZ_CASES inputs in all (default 1000000) on
# CONTEXTD_FUZZ_THREADS threads (default 2), seed CONTEXTD_FUZZ_SEED (fixed;
# `random` picks one and prints it), CONTEXTD_FUZZ_TARGETS=a,b for some.
# Prints inputs/s per target; fails on a panic, an input over 1 s or one
# holding over 64 MiB.
fuzz:
	$(CARGO) test $(LOCKED) --features replay --lib fuzz::full -- --ignored --exact --nocapture

# Claude Desktop's MCP bundle (packaging/mcpb/, README "Claude Desktop"):
# examples/mcpb.rs writes its directory (manifest.json with this version and
# the tools of tools/list, the launcher, the icon), the official MCPB CLI
# (npm @anthropic-ai/mcpb, pinned in scripts/deps.sh) validates and packs it
# into target/mcpb/contextd.mcpb, and server.json for the MCP registry gets
# the bundle's SHA-256 and its address MCPB_URL ({version} is replaced: set
# it to the release's download URL when publishing). The last line printed
# is the bundle's path. The bundle carries no binary: it runs the installed
# contextctl, so one bundle serves every architecture.
MCPB_OUT := $(CURDIR)/target/mcpb
MCPB_URL ?= https://contextd.org/download/{version}/contextd.mcpb
MCPB_CLI = "$(CURDIR)/.tools/node22/bin/node" "$(CURDIR)/.tools/mcpb/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js"
mcpb:
	@scripts/deps.sh --node --desktop-root
	$(CARGO) run --quiet $(LOCKED) --example mcpb -- bundle packaging/mcpb "$(MCPB_OUT)/contextd"
	$(MCPB_CLI) validate "$(MCPB_OUT)/contextd"
	$(MCPB_CLI) pack "$(MCPB_OUT)/contextd" "$(MCPB_OUT)/contextd.mcpb"
	$(CARGO) run --quiet $(LOCKED) --example mcpb -- server-json packaging/mcpb \
	    "$(MCPB_OUT)/contextd.mcpb" '$(MCPB_URL)' "$(MCPB_OUT)/server.json"
	@echo "$(MCPB_OUT)/contextd.mcpb"

install: install-bin install-data install-generated

# The man pages and completions, from the release contextctl (or the one in
# BINARIES_DIR), into target/generated/ to look at.
generated: $(if $(BINARIES_DIR),,build)
	rm -rf "$(GENERATED)"
	"$(or $(BINARIES_DIR),$(RELEASE))/contextctl" generate-files "$(GENERATED)"

# Installed from a directory of this run's own: two installs at once (the
# tests build the package while another checks make install) never share
# the files they install.
install-generated: $(if $(BINARIES_DIR),,build)
	@set -e; gen=$$(mktemp -d); trap 'rm -rf "$$gen"' EXIT; \
	set -x; \
	"$(or $(BINARIES_DIR),$(RELEASE))/contextctl" generate-files "$$gen"; \
	install -d "$(DESTDIR)$(MAN1DIR)" "$(DESTDIR)$(BASH_COMPLETION_DIR)" \
	    "$(DESTDIR)$(ZSH_COMPLETION_DIR)" "$(DESTDIR)$(FISH_COMPLETION_DIR)"; \
	install -m 0644 "$$gen/man/contextd.1" "$$gen/man/contextctl.1" "$(DESTDIR)$(MAN1DIR)/"; \
	install -m 0644 "$$gen/completions/contextctl.bash" "$(DESTDIR)$(BASH_COMPLETION_DIR)/contextctl"; \
	install -m 0644 "$$gen/completions/_contextctl" "$(DESTDIR)$(ZSH_COMPLETION_DIR)/_contextctl"; \
	install -m 0644 "$$gen/completions/contextctl.fish" "$(DESTDIR)$(FISH_COMPLETION_DIR)/contextctl.fish"

install-bin: $(if $(BINARIES_DIR),,build)
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 $(addprefix $(or $(BINARIES_DIR),$(RELEASE))/,$(BINARIES)) "$(DESTDIR)$(BINDIR)/"

# Everything but the binaries; needs no cargo.
install-data:
	install -d "$(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)" "$(DESTDIR)$(DBUS_SERVICES_DIR)" \
	    "$(DESTDIR)$(DBUS_INTERFACES_DIR)" "$(DESTDIR)$(POLKIT_ACTIONS_DIR)"
	sed -e 's|^ExecStart=/usr/local/bin/contextd|ExecStart=$(BINDIR)/contextd|' \
	    systemd/contextd.service > "$(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/contextd.service"
	chmod 0644 "$(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/contextd.service"
	sed -e 's|^Exec=.*|Exec=$(BINDIR)/contextd|' \
	    systemd/org.contextd.Broker1.service > "$(DESTDIR)$(DBUS_SERVICES_DIR)/org.contextd.Broker1.service"
	chmod 0644 "$(DESTDIR)$(DBUS_SERVICES_DIR)/org.contextd.Broker1.service"
	install -m 0644 polkit/org.contextd.policy "$(DESTDIR)$(POLKIT_ACTIONS_DIR)/"
	@shopt -s nullglob; xml=(dbus-interfaces/*.xml); \
	if [ $${#xml[@]} -gt 0 ]; then \
	    echo "install -m 0644 $${xml[*]} $(DESTDIR)$(DBUS_INTERFACES_DIR)/"; \
	    install -m 0644 "$${xml[@]}" "$(DESTDIR)$(DBUS_INTERFACES_DIR)/"; \
	fi
	@case "$(GNOME_SHELL_EXTENSION)" in \
	    legacy) src=data/gnome-shell ;; esm) src=data/gnome-shell-45 ;; \
	    *) echo "GNOME_SHELL_EXTENSION must be legacy or esm" >&2; exit 1 ;; \
	esac; \
	ext="$(DESTDIR)$(GNOME_SHELL_EXTENSIONS_DIR)/contextd@contextd.org"; \
	files=$$(ls "$$src/contextd@contextd.org"/*.js "$$src/contextd@contextd.org/metadata.json"); \
	echo "install -m 0644" $$files "$$ext/"; \
	install -d "$$ext"; \
	install -m 0644 $$files "$$ext/"

uninstall:
	rm -f $(addprefix "$(DESTDIR)$(BINDIR)/,$(addsuffix ",$(BINARIES))) \
	    "$(DESTDIR)$(SYSTEMD_USER_UNIT_DIR)/contextd.service" \
	    "$(DESTDIR)$(DBUS_SERVICES_DIR)/org.contextd.Broker1.service" \
	    "$(DESTDIR)$(POLKIT_ACTIONS_DIR)/org.contextd.policy" \
	    "$(DESTDIR)$(DBUS_INTERFACES_DIR)"/org.contextd.*.xml \
	    "$(DESTDIR)$(MAN1DIR)/contextd.1" "$(DESTDIR)$(MAN1DIR)/contextctl.1" \
	    "$(DESTDIR)$(BASH_COMPLETION_DIR)/contextctl" \
	    "$(DESTDIR)$(ZSH_COMPLETION_DIR)/_contextctl" \
	    "$(DESTDIR)$(FISH_COMPLETION_DIR)/contextctl.fish"
	rm -rf "$(DESTDIR)$(GNOME_SHELL_EXTENSIONS_DIR)/contextd@contextd.org"

# The Debian package (debian/, debhelper around `make install`): built,
# checked against Cargo.toml's version, its path printed last. With
# BINARIES_DIR=DIR it packs the binaries in DIR instead of a release build.
deb:
	@CONTEXTD_BINARIES_DIR="$(BINARIES_DIR)" scripts/deb.sh

clean:
	-scripts/session.sh stop "$(RUN_SESSION)" 2>/dev/null
	$(CARGO) clean
	rm -rf "$(RUN_DIR)"
