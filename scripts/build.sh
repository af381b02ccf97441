#!/usr/bin/env bash
# Configure and build slabcache out of tree: scripts/build.sh DIR [configure args]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$1"; shift
cd "$root"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
mkdir -p "$dir"
cd "$dir"
stamp="config.args"
args="$*"
if [ ! -f Makefile ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$args" ]; then
    "$root/configure" -q "$@"
    echo "$args" > "$stamp"
fi
make -j"$(nproc)" >/dev/null
