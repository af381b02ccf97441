#!/usr/bin/env bash
# Build slabcache and run it in the foreground on 127.0.0.1:11211.
# Extra arguments go to slabcache, e.g. scripts/run.sh -m 128 -t 2
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh" build
"$root/scripts/build.sh" "$root/build/release"
# Like memcached, slabcache will not run as root without -u: as root, and
# unless -u is given, run it as nobody.
user=()
if [ "$(id -u)" = 0 ]; then
    case " $* " in
        *" -u "*|*" --user"*) ;;
        *) user=(-u nobody) ;;
    esac
fi
exec "$root/build/release/src/slabcache" -l 127.0.0.1 -p 11211 "${user[@]}" "$@"
