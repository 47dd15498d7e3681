#!/usr/bin/env bash
# Makes sure headless Chromium (Debian packages chromium + chromium-driver) is installed.
# The what-if HTML report test renders the report in a real browser; it fails (never skips) without one.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../deploy/scripts/lib/debian-install.sh
source "${here}/../../deploy/scripts/lib/debian-install.sh"
debian_install ensure-chromium chromium chromium-driver
test -x /usr/bin/chromium
