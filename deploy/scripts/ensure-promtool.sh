#!/usr/bin/env bash
# Print the absolute path of a working `promtool`, installing Debian's `prometheus` package
# (which ships /usr/bin/promtool) only when promtool is not already on PATH.
#
# Used by `make` and by tests/deploy/test_promtool.py. Progress goes to stderr; stdout is the
# path only, so callers can do: PROMTOOL="$(deploy/scripts/ensure-promtool.sh)".
#
# PROMTOOL=/path/to/promtool overrides the lookup (e.g. a newer upstream release).
set -euo pipefail

if [[ -n "${PROMTOOL:-}" ]]; then
    if [[ -x "${PROMTOOL}" ]]; then
        printf '%s\n' "${PROMTOOL}"
        exit 0
    fi
    echo "ensure-promtool: PROMTOOL=${PROMTOOL} is not an executable file" >&2
    exit 1
fi

if path="$(command -v promtool)"; then
    printf '%s\n' "${path}"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-promtool: promtool not on PATH and apt-get unavailable;" \
        "install Prometheus' promtool (https://prometheus.io/download/) or set PROMTOOL" >&2
    exit 1
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo -n)
    else
        echo "ensure-promtool: promtool missing and not root (no sudo) to apt-get install prometheus" >&2
        exit 1
    fi
fi

echo "ensure-promtool: promtool not found; installing Debian package 'prometheus'" >&2
export DEBIAN_FRONTEND=noninteractive
# The Debian package's postinst may try to start the prometheus service; in containers without
# an init system that is a no-op or a harmless failure handled by policy-rc.d / invoke-rc.d.
"${SUDO[@]}" apt-get update >&2
"${SUDO[@]}" apt-get install -y --no-install-recommends prometheus >&2

if path="$(command -v promtool)"; then
    printf '%s\n' "${path}"
    exit 0
fi
echo "ensure-promtool: package 'prometheus' installed but promtool still not on PATH" >&2
exit 1
