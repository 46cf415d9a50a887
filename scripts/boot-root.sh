#!/usr/bin/env bash
# The root that the systemd boot test boots: scripts/roots.sh boot (see there).
exec "$(dirname "${BASH_SOURCE[0]}")/roots.sh" boot "$@"
