#!/usr/bin/env bash
# Makes sure headless Chromium (Debian packages chromium + chromium-driver) is installed.
# The what-if HTML report test renders the report in a real browser; it fails (never skips) without one.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
# Wait for a concurrent apt/dpkg run instead of failing on its lock.
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium chromium-driver
test -x /usr/bin/chromium
