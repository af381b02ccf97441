#!/usr/bin/env bash
# Install what is missing, build, run `make check` (unit, integration,
# memccapable, differential), then rebuild with ASan+UBSan and run the
# same tests again. Exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh" test
# Client libraries and operator tools for test_clients.py; a part that
# cannot be installed makes its check skip, saying so.
"$root/scripts/setup-clients.sh"
# memcached 1.6.18's own test suite (t/), from Debian's source package;
# test_mc_suite.sh skips, saying so, when it could not be fetched.
"$root/scripts/fetch-memcached-src.sh" >/dev/null
# The newest memcached (Debian unstable's source): its t/ suite runs in make
# check (test_mc_suite_newest.sh), which skips, saying so, without it.
"$root/scripts/build-memcached-newest.sh" >/dev/null ||
    echo "== the newest memcached's source could not be had: its suite will skip"

run_check() {
    local dir="$1"; shift
    echo "== build $dir ($*)"
    "$root/scripts/build.sh" "$dir" "$@"
    echo "== make check in $dir"
    if ! make -C "$dir" -j2 check; then
        for f in $(find "$dir/tests" -name '*.log' ! -name 'test-suite.log'); do
            if grep -qE '^:test-result: (FAIL|ERROR)' "${f%.log}.trs" 2>/dev/null; then
                echo "---- $f"; tail -n 60 "$f"
            fi
        done
        return 1
    fi
}

run_check "$root/build/check"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    run_check "$root/build/sanitize" --enable-sanitizers --enable-debug
echo "== all tests passed (release and sanitizer builds)"
