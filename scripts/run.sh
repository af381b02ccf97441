#!/usr/bin/env bash
# Build slabcache and run it in the foreground on 127.0.0.1:11211.
# Extra arguments go to slabcache, e.g. scripts/run.sh -m 128 -t 2
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh" build
"$root/scripts/build.sh" "$root/build/release"
exec "$root/build/release/src/slabcache" -l 127.0.0.1 -p 11211 "$@"
