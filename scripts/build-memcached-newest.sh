#!/usr/bin/env bash
# Build the newest memcached (Debian unstable's source package) as a benchmark
# and compatibility oracle, beside the system's own:
#     scripts/build-memcached-newest.sh [PREFIX]
# PREFIX defaults to /opt/memcached-newest; the binary is PREFIX/bin/memcached
# and its path is printed on success. The system's memcached (/usr/bin, from
# the default suite) is left alone: only a deb-src line for sid is added (in a
# sources file of its own), never a binary 'deb' line, so nothing installed is
# upgraded; build dependencies come from the default suite.
# The unpacked source tree is kept (its doc/protocol.txt and t/ are references):
# SRC_DIR/memcached, a symlink to SRC_DIR/memcached-<version>, where SRC_DIR is
# $MEMCACHED_NEWEST_SRC_DIR or /var/cache/slabcache/memcached-newest-src.
# Idempotent: returns at once when PREFIX/bin/memcached already reports the
# version recorded for it (PREFIX/.sid-version, the sid package's version).
# Needs root (apt-get) and Debian's package archive.
set -eu

prefix=${1:-/opt/memcached-newest}
src_dir=${MEMCACHED_NEWEST_SRC_DIR:-/var/cache/slabcache/memcached-newest-src}
list=/etc/apt/sources.list.d/slabcache-sid-src.list
stamp="$prefix/.sid-version"
bin="$prefix/bin/memcached"

say() { echo "build-memcached-newest: $*" >&2; }
die() { say "$*"; exit 1; }

# upstream part of a Debian version: 1.6.39-1 -> 1.6.39, 1:1.2-3 -> 1.2
upstream() { local v=${1#*:}; echo "${v%-*}"; }
bin_version() { "$bin" -V 2>/dev/null | awk '$1 == "memcached" { print $2 }'; }
# memcached's source version in sid, from apt's local index (empty if none)
sid_version() {
    apt-cache madison memcached 2>/dev/null \
        | awk -F'|' '$3 ~ / sid\/[^ ]* Sources/ { gsub(/ /, "", $2); print $2 }' \
        | sort -V | tail -1
}

# Fast path: already built from the sid version it was recorded against. If
# the local sid Sources index is there (no network needed), it must also still
# name that version; otherwise the stamp alone decides.
if [ -x "$bin" ] && [ -f "$stamp" ]; then
    have=$(bin_version)
    rec=$(cat "$stamp")
    cur=$rec
    if [ -f "$list" ]; then
        cur=$(sid_version)
        [ -n "$cur" ] || cur=$rec
    fi
    if [ -n "$have" ] && [ "$cur" = "$rec" ] && [ "$have" = "$(upstream "$rec")" ]; then
        echo "$bin"
        exit 0
    fi
fi

# The stanza of memcached's source package version $1 in apt's Sources index.
src_stanza() {
    apt-cache showsrc memcached 2>/dev/null \
        | awk -v v="$1" '/^Package:/ { p = 0; buf = "" } { buf = buf $0 "\n" }
                         /^Version:/ && $2 == v { p = 1 }
                         /^$/ { if (p) { printf "%s", buf; p = 0; exit } buf = "" }
                         END { if (p) printf "%s", buf }'
}
# A minimal (unsigned) .dsc for version $1: what dpkg-source -x needs.
make_dsc() {
    local st; st=$(src_stanza "$1")
    [ -n "$st" ] || return 1
    echo "Format: $(echo "$st" | awk -F': ' '/^Format:/ { print $2 }')"
    echo "Source: memcached"
    echo "Version: $1"
    echo "Checksums-Sha256:"
    echo "$st" | awk '/^Checksums-Sha256:/ { p = 1; next } /^[^ ]/ { p = 0 }
                      p && $3 !~ /\.dsc$/ { print }'
    echo "Files:"
    echo "$st" | awk '/^Files:/ { p = 1; next } /^[^ ]/ { p = 0 }
                      p && $3 !~ /\.dsc$/ { print }'
}
# Check the tarballs in . against the index's SHA-256 sums for version $1.
check_sums() {
    src_stanza "$1" | awk '/^Checksums-Sha256:/ { p = 1; next } /^[^ ]/ { p = 0 }
                           p && $3 !~ /\.dsc$/ { print $1 "  " $3 }' \
        | sha256sum -c --quiet -
}

[ "$(id -u)" = 0 ] || die "must run as root (apt-get)"
command -v apt-get >/dev/null 2>&1 || die "apt-get not available"
export DEBIAN_FRONTEND=noninteractive

# deb-src for sid only: 'apt-get source' can then fetch sid's memcached, while
# no sid binary package becomes installable (no 'deb' line), so nothing upgrades.
line="deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main"
if [ ! -f "$list" ] || [ "$(cat "$list")" != "$line" ]; then
    echo "$line" > "$list"
fi
say "apt-get update"
timeout 600 apt-get update -qq >/dev/null || die "apt-get update failed"

# Build dependencies from the default suite (not 'apt-get build-dep', which
# would resolve against sid's source and could ask for sid versions).
say "installing build dependencies"
timeout 600 apt-get install -y -qq --no-install-recommends \
    build-essential dpkg-dev pkg-config libevent-dev autoconf automake >/dev/null \
    || die "could not install build dependencies"

ver=$(sid_version)
[ -n "$ver" ] || die "apt knows no memcached source package in sid"
up=$(upstream "$ver")
say "sid memcached source: $ver"

# Fetch and unpack it (once per version), keeping the tree.
mkdir -p "$src_dir"
tree="$src_dir/memcached-$up"
if [ ! -f "$tree/configure" ] && [ ! -f "$tree/configure.ac" ]; then
    tmp=$(mktemp -d "$src_dir/.fetch.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    if ! (cd "$tmp" && timeout 600 apt-get source -qq "memcached=$ver" >log 2>&1); then
        # Some mirrors/proxies serve the tarballs but answer 404 for the .dsc;
        # apt still fetches (and hash-checks) the tarballs. Then the .dsc is
        # rebuilt from the Sources index apt verified, the tarballs are checked
        # against its SHA-256 sums, and dpkg-source unpacks as apt would have.
        if ls "$tmp"/memcached_*.orig.tar.* "$tmp"/memcached_*.debian.tar.* >/dev/null 2>&1 \
           && [ ! -f "$tmp/memcached_${ver#*:}.dsc" ]; then
            say "apt-get source could not fetch the .dsc; rebuilding it from the Sources index"
            (cd "$tmp" && make_dsc "$ver" > "memcached_${ver#*:}.dsc" \
                && check_sums "$ver" \
                && dpkg-source --no-check -x "memcached_${ver#*:}.dsc" >>log 2>&1) \
                || { tail -5 "$tmp/log" >&2; die "unpacking memcached $ver failed"; }
        else
            tail -5 "$tmp/log" >&2
            die "apt-get source memcached=$ver failed"
        fi
    fi
    got=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'memcached-*' | head -1)
    [ -n "$got" ] || die "apt-get source left no memcached-* directory"
    rm -rf "$tree"
    mv "$got" "$tree"
    find "$tmp" -maxdepth 1 -type f -name 'memcached_*' -exec mv -f {} "$src_dir/" \;
fi
ln -sfn "memcached-$up" "$src_dir/memcached"

# Build out of tree so the unpacked source stays pristine as a reference.
# No TLS or SASL: the oracle is for the plain text/meta/binary protocols.
build="$src_dir/build-$up"
mkdir -p "$build"
cd "$build"
# Debian's patches edit configure.ac and Makefile.am (0006: system Lua for the
# proxy), leaving configure stale; regenerate it as Debian's build does
# (dh_autoreconf), with the default suite's autotools.
if [ ! -x "$tree/configure" ] || [ "$tree/configure.ac" -nt "$tree/configure" ] \
   || [ "$tree/Makefile.am" -nt "$tree/Makefile.in" ]; then
    say "autoreconf -fi (patched configure.ac/Makefile.am)"
    (cd "$tree" && autoreconf -fi) >autoreconf.log 2>&1 \
        || { tail -20 autoreconf.log >&2; die "autoreconf failed"; }
    rm -f Makefile
fi
if [ ! -f Makefile ] || [ ! -f .prefix ] || [ "$(cat .prefix)" != "$prefix" ]; then
    say "configure --prefix=$prefix"
    "$tree/configure" -q --prefix="$prefix" --disable-sasl --disable-tls \
        --disable-docs >configure.log 2>&1 \
        || { tail -20 configure.log >&2; die "configure failed (log: $build/configure.log)"; }
    echo "$prefix" > .prefix
fi
say "make -j2"
make -j2 >make.log 2>&1 || { tail -30 make.log >&2; die "make failed (log: $build/make.log)"; }
make install >install.log 2>&1 || { tail -20 install.log >&2; die "make install failed"; }

[ "$(bin_version)" = "$up" ] \
    || die "$bin reports '$(bin_version)', expected $up"
echo "$ver" > "$stamp"
echo "$bin"
