#!/usr/bin/env bash
# Fetch Debian's memcached source package (for its t/ test suite) into a cache
# directory:   scripts/fetch-memcached-src.sh [DIR]
# DIR defaults to /var/cache/slabcache/memcached-src. On success the unpacked
# tree is DIR/memcached (a symlink to DIR/memcached-<version>) and its path is
# printed. Idempotent: returns at once when DIR/memcached/t/lib/MemcachedTest.pm exists.
# When the source cannot be fetched (no apt, not root, no network, ...) it
# prints why and still exits 0, so callers (tests) can skip instead of failing.
set -u

dir=${1:-/var/cache/slabcache/memcached-src}
want_version=${MEMCACHED_SRC_VERSION:-}   # optional: e.g. 1.6.18-1

cant() { echo "fetch-memcached-src: cannot fetch memcached source: $*" >&2; exit 0; }

if [ -f "$dir/memcached/t/lib/MemcachedTest.pm" ]; then
    echo "$dir/memcached"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || cant "apt-get not available"
mkdir -p "$dir" 2>/dev/null || cant "cannot create $dir"

# A deb-src entry is needed for 'apt-get source'. Enable it once, mirroring the
# existing Debian sources (deb822 .sources or one-line .list format).
have_src() {
    grep -rqsE '^[[:space:]]*deb-src[[:space:]]|^Types:.*deb-src' \
        /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}
if ! have_src; then
    [ "$(id -u)" = 0 ] || cant "no deb-src entry in apt sources and not root to add one"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        # deb822: turn 'Types: deb' into 'Types: deb deb-src' for the Debian stanzas
        sed -i -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb deb-src/' \
            /etc/apt/sources.list.d/debian.sources
    elif [ -f /etc/apt/sources.list ]; then
        grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list \
            | grep -v -- '-src' | sed -E 's/^[[:space:]]*deb[[:space:]]/deb-src /' \
            > /etc/apt/sources.list.d/slabcache-deb-src.list
    fi
    have_src || cant "could not find Debian apt sources to add deb-src to"
    need_update=1
else
    need_update=0
fi
# 'apt-get source' needs the Sources index; update when it is missing.
if [ "$need_update" = 1 ] || ! ls /var/lib/apt/lists/*_Sources* >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || cant "apt Sources index missing and not root to run apt-get update"
    timeout 300 apt-get update -qq >/dev/null 2>&1 || cant "apt-get update failed (network?)"
fi
if ! command -v dpkg-source >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || cant "dpkg-dev not installed and not root to install it"
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq dpkg-dev >/dev/null 2>&1 \
        || cant "could not install dpkg-dev"
fi

pkg=memcached
[ -n "$want_version" ] && pkg="memcached=$want_version"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX") || cant "cannot write to $dir"
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && timeout 300 apt-get source -qq "$pkg" >log 2>&1); then
    tail -5 "$tmp/log" >&2
    cant "apt-get source $pkg failed"
fi
src=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'memcached-*' | head -1)
[ -n "$src" ] && [ -f "$src/t/lib/MemcachedTest.pm" ] || cant "unpacked source has no t/lib/MemcachedTest.pm"
base=$(basename "$src")
rm -rf "${dir:?}/$base"
mv "$src" "$dir/$base"
# keep the .dsc/.orig/.debian tarballs too (small) for reference
find "$tmp" -maxdepth 1 -type f -name 'memcached_*' -exec mv -f {} "$dir/" \;
ln -sfn "$base" "$dir/memcached"
echo "$dir/memcached"
