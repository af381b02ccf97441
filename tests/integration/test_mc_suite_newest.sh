#!/bin/bash
# Run the newest memcached's own test suite (t/*.t of Debian unstable's source
# package, unpacked by scripts/build-memcached-newest.sh) against the server
# under test: test_mc_suite.sh with that source and the lists it keeps for it
# (MC_SUITE_RELEASE=newest). Skips, saying so, when the source is not there.
#
#   SLABCACHE=build/check/src/slabcache bash tests/integration/test_mc_suite_newest.sh [FILE.t ...]
#
# MC_NEWEST_SRC  unpacked source (default /var/cache/slabcache/memcached-newest-src/memcached)
here=$(cd "$(dirname "$0")" && pwd)
export MC_SRC=${MC_NEWEST_SRC:-/var/cache/slabcache/memcached-newest-src/memcached}
export MC_SUITE_RELEASE=newest
exec bash "$here/test_mc_suite.sh" "$@"
