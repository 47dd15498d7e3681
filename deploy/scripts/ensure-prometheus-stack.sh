#!/usr/bin/env bash
# Print the absolute paths of a Prometheus server, an Alertmanager and amtool, one `name=path` line each
# (prometheus=, alertmanager=, amtool=), installing Debian's `prometheus` and `prometheus-alertmanager`
# packages only when a binary is missing. Used by tests/integration/test_live_alerts.py, which runs
# deploy/prometheus/alerts.yml and deploy/alertmanager/alertmanager.yml for real.
#
# Progress goes to stderr. Overrides: PROMETHEUS_BIN, ALERTMANAGER_BIN, AMTOOL_BIN (paths to use instead).
set -euo pipefail

# shellcheck source=lib/debian-install.sh
here="${BASH_SOURCE[0]%/*}"
[[ "${here}" != "${BASH_SOURCE[0]}" ]] || here=.
source "${here}/lib/debian-install.sh"

# name, override variable, candidate commands (Debian names the Alertmanager binary prometheus-alertmanager).
TOOLS=("prometheus PROMETHEUS_BIN prometheus" "alertmanager ALERTMANAGER_BIN prometheus-alertmanager alertmanager"
    "amtool AMTOOL_BIN amtool")

find_tool() {  # name override candidates... -> path on stdout, or non-zero
    local override="${!2:-}"
    if [[ -n "${override}" ]]; then
        if [[ -x "${override}" ]]; then
            printf '%s\n' "${override}"
            return 0
        fi
        echo "ensure-prometheus-stack: $2=${override} is not an executable file" >&2
        exit 1
    fi
    local candidate
    for candidate in "${@:3}"; do
        if command -v "${candidate}"; then
            return 0
        fi
    done
    return 1
}

missing=0
for tool in "${TOOLS[@]}"; do
    # shellcheck disable=SC2086
    find_tool ${tool} >/dev/null || missing=1
done
if [[ "${missing}" -eq 1 ]]; then
    debian_install ensure-prometheus-stack prometheus prometheus-alertmanager
fi
for tool in "${TOOLS[@]}"; do
    read -r name _ <<<"${tool}"
    # shellcheck disable=SC2086
    if ! path="$(find_tool ${tool})"; then
        echo "ensure-prometheus-stack: packages installed but ${name} still not on PATH" >&2
        exit 1
    fi
    printf '%s=%s\n' "${name}" "${path}"
done
