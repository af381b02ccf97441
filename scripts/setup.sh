#!/usr/bin/env bash
# Install the Debian packages slabcache needs, only those missing.
#   scripts/setup.sh build   compilers, autotools, libevent, jemalloc, check,
#                            OpenSSL, SASL, liburing
#   scripts/setup.sh test    the above plus memcached, libmemcached-tools,
#                            python3 (integration and comparison tests)
set -euo pipefail

BUILD_PKGS="build-essential autoconf automake libtool pkg-config libevent-dev libjemalloc-dev check libssl-dev libsasl2-dev liburing-dev"
TEST_PKGS="memcached libmemcached-tools python3 python3-prometheus-client openssl sasl2-bin libsasl2-modules libio-socket-ssl-perl"

want="$BUILD_PKGS"
if [ "${1:-build}" = "test" ]; then
    want="$want $TEST_PKGS"
fi

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "setup: installing$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "setup: need root (or sudo) to install:$missing" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
