#!/usr/bin/env bash
# Install the Debian packages slabcache needs, only those missing.
#   scripts/setup.sh build   compilers, autotools, libevent, jemalloc, check,
#                            OpenSSL, SASL, liburing
#   scripts/setup.sh test    the above plus memcached, libmemcached-tools,
#                            python3 (integration and comparison tests), and
#                            chromium for the admin page's test if it can be
#                            had (that test skips, saying so, without it)
set -euo pipefail

BUILD_PKGS="build-essential autoconf automake libtool pkg-config libevent-dev libjemalloc-dev check libssl-dev libsasl2-dev liburing-dev"
TEST_PKGS="memcached libmemcached-tools python3 python3-prometheus-client openssl sasl2-bin libsasl2-modules libio-socket-ssl-perl"

OPTIONAL_PKGS="chromium fonts-dejavu-core"

want="$BUILD_PKGS"
optional=""
if [ "${1:-build}" = "test" ]; then
    want="$want $TEST_PKGS"
    optional="$OPTIONAL_PKGS"
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}
missing=""
for p in $want; do
    installed "$p" || missing="$missing $p"
done
optional_missing=""
for p in $optional; do
    installed "$p" || optional_missing="$optional_missing $p"
done
[ -z "$missing" ] && [ -z "$optional_missing" ] && exit 0

echo "setup: installing$missing$optional_missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    elif [ -z "$missing" ]; then
        echo "setup: no root (or sudo) to install$optional_missing; the admin page's browser test will skip" >&2
        exit 0
    else
        echo "setup: need root (or sudo) to install:$missing" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if [ -n "$optional_missing" ]; then
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $optional_missing >/dev/null ||
        echo "setup: could not install$optional_missing; the admin page's browser test will skip" >&2
fi
