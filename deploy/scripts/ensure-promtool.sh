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

# shellcheck source=lib/debian-install.sh
here="${BASH_SOURCE[0]%/*}"
[[ "${here}" != "${BASH_SOURCE[0]}" ]] || here=.
source "${here}/lib/debian-install.sh"
debian_install ensure-promtool prometheus

if path="$(command -v promtool)"; then
    printf '%s\n' "${path}"
    exit 0
fi
echo "ensure-promtool: package 'prometheus' installed but promtool still not on PATH" >&2
exit 1
