#!/usr/bin/env bash
# Install the plugin's npm dependencies (kafkajs, pinned by package-lock.json) into ./node_modules.
# Idempotent and fast when already done: a stamp holds the hash of package-lock.json it was installed from.
# Safe to run concurrently (flock). Needs node and npm on PATH; installs nothing outside this directory.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=node_modules/.loopwatch-deps-stamp
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" && -f node_modules/kafkajs/package.json ]]; then
  exit 0
fi

command -v npm >/dev/null || { echo "ensure-deps: npm is not installed" >&2; exit 3; }
# The lock lives outside node_modules: npm ci deletes that directory.
exec 9>.deps.lock
if command -v flock >/dev/null; then flock -w 300 9; fi
# Re-check under the lock: another process may have finished the install meanwhile.
if [[ -f $stamp && $(cat "$stamp") == "$want" && -f node_modules/kafkajs/package.json ]]; then
  exit 0
fi
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2
echo "$want" > "$stamp"
