#!/bin/bash
# `make install` puts the binary, the man page, the systemd unit and its
# options file in place (staged under a temporary DESTDIR), the unit names
# the installed binary and options file, and systemd-analyze accepts it.
set -u
builddir=$(cd "$(dirname "$SLABCACHE")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

make -s -C "$builddir" install DESTDIR="$tmp" >"$tmp/install.log" 2>&1 \
    || { cat "$tmp/install.log"; fail "make install"; }
prefix=$(sed -n 's/^prefix = //p' "$builddir/Makefile")
sysconfdir=$(sed -n 's/^sysconfdir = //p' "$builddir/Makefile" | sed "s|\${prefix}|$prefix|")
bin="$tmp$prefix/bin/slabcache"
unit="$tmp$prefix/lib/systemd/system/slabcache.service"
[ -x "$bin" ] || fail "no $bin"
[ -f "$tmp$prefix/share/man/man1/slabcache.1" ] || fail "no man page"
[ -f "$tmp$sysconfdir/default/slabcache" ] || fail "no options file"
[ -f "$unit" ] || fail "no unit"
grep -q "^ExecStart=$prefix/bin/slabcache \$OPTIONS$" "$unit" || fail "ExecStart: $(grep ExecStart "$unit")"
grep -q "^EnvironmentFile=-$sysconfdir/default/slabcache$" "$unit" || fail "EnvironmentFile"
for d in NoNewPrivileges=yes ProtectSystem=strict DynamicUser=yes; do
    grep -q "^$d$" "$unit" || fail "unit lacks $d"
done
# The options file's OPTIONS are valid for the installed binary.
opts=$(. "$tmp$sysconfdir/default/slabcache"; echo "$OPTIONS")
# shellcheck disable=SC2086
"$bin" $opts --help >/dev/null || fail "options file: $opts"
if command -v systemd-analyze >/dev/null; then
    # verify against the staged binary (the unit's path exists only once installed)
    sed "s|^ExecStart=$prefix/bin/slabcache|ExecStart=$bin|" "$unit" >"$tmp/slabcache.service"
    out=$(systemd-analyze verify --man=no "$tmp/slabcache.service" 2>&1)
    [ -z "$out" ] || fail "systemd-analyze verify: $out"
else
    echo "systemd-analyze not installed: unit syntax not verified"
fi
echo "PASS: install layout and unit"
