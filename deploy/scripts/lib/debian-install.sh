# Sourced by the ensure-*.sh scripts: `debian_install PREFIX PACKAGE...` apt-installs Debian packages
# (apt-get update first), as root or through passwordless sudo. Progress goes to stderr; returns non-zero
# with one line naming the problem when apt-get or the privileges are missing.

debian_install() {
    local prefix="$1"
    shift
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "${prefix}: apt-get unavailable; install $* yourself (https://prometheus.io/download/)" >&2
        return 1
    fi
    local sudo=()
    if [[ "$(id -u)" -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo -n)
        else
            echo "${prefix}: not root (no sudo) to apt-get install $*" >&2
            return 1
        fi
    fi
    echo "${prefix}: installing Debian package(s) $*" >&2
    # The packages' postinst may try to start their services; in containers without an init system
    # that is a no-op or a harmless failure handled by policy-rc.d / invoke-rc.d.
    export DEBIAN_FRONTEND=noninteractive
    # One apt run at a time: the test suite's two processes may each need a package at once. The lock file
    # serialises our own callers; apt's own lock timeout covers anything else running apt.
    (
        if command -v flock >/dev/null 2>&1; then
            exec 9>"${TMPDIR:-/tmp}/loopwatch-apt.lock"
            flock -w 900 9
        fi
        "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update >&2
        "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "$@" >&2
    )
}
