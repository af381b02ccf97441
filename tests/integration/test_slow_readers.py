#!/usr/bin/env python3
"""Clients that pipeline requests and never read cost kilobytes, not
megabytes: RSS per such connection, side by side with memcached.

600 connections each send gets of a stored value for as long as the kernel
takes them, and read nothing. The server's RSS growth per connection is
measured for slabcache and (when installed) Debian's memcached started the
same way; slabcache must stay within a small bound and within memcached's
figure plus that bound. Also checks the memory comes back once the clients
close. `SLOW_READERS_SHOW=1` prints the figures.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_slow_readers.py
"""

import os
import resource
import shutil
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, test, run_all, check, eq, require_binary,  # noqa
                   slabcache_only, is_sanitized, wait_until, HOST, rss_kb)

NCONN = 600
PER_CONN_BOUND_KB = 160     # 16 KB read buffer + 64 KB of copies + kernel-side slack
MEMCACHED = shutil.which("memcached")


def settled_rss(pid, timeout=20.0):
    """RSS once the server has worked through what the kernel buffered:
    no change of more than 1% over half a second."""
    last = rss_kb(pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.5)
        now = rss_kb(pid)
        if abs(now - last) <= last // 100:
            return now
        last = now
    return last


def hog_all(port, request, n):
    """n non-reading connections, each fed until its send would block."""
    socks = []
    burst = request * (65536 // len(request))
    for _ in range(n):
        s = socket.create_connection((HOST, port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        socks.append(s)
    deadline = time.monotonic() + 20
    live = list(socks)
    while live and time.monotonic() < deadline:
        still = []
        for s in live:
            try:
                for _ in range(8):
                    s.send(burst)
                still.append(s)
            except BlockingIOError:
                pass
            except OSError:
                pass
        live = still
        time.sleep(0.01)
    return socks


def per_conn_kb(binary, value_size):
    args = ("-m", "64", "-t", "2", "-c", str(NCONN + 50))
    with Server(*args, binary=binary) as s, s.client() as c:
        eq(c.set("k", "v" * value_size), "STORED")
        time.sleep(0.2)
        base = rss_kb(s.pid)
        socks = hog_all(s.port, b"get k\r\n", NCONN)
        grown = settled_rss(s.pid) - base
        eq(c.get("k"), b"v" * value_size, "others served meanwhile")
        for sock in socks:
            sock.close()
        wait_until(lambda: c.stats()["curr_connections"] == "2", 10)
        after = settled_rss(s.pid) - base
        return grown / NCONN, after / NCONN


@test
def non_reading_clients_cost_kilobytes():
    slabcache_only()
    if is_sanitized():
        print("  (ASan build: RSS figures not checked)")
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < NCONN + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    show = os.environ.get("SLOW_READERS_SHOW")
    for size in (100, 4000):
        sc, sc_after = per_conn_kb(None, size)
        mc = per_conn_kb(MEMCACHED, size)[0] if MEMCACHED else None
        if show:
            print("  value %d B: slabcache %.1f KB/conn (%.1f after close), "
                  "memcached %s KB/conn" % (size, sc, sc_after,
                                            "%.1f" % mc if mc is not None else "-"))
        check(sc < PER_CONN_BOUND_KB,
              "value %d: %.1f KB per non-reading connection" % (size, sc))
        if mc is not None:
            check(sc < mc + PER_CONN_BOUND_KB,
                  "value %d: %.1f KB vs memcached's %.1f" % (size, sc, mc))
        check(sc_after < PER_CONN_BOUND_KB,
              "value %d: %.1f KB per connection kept after close" % (size, sc_after))


if __name__ == "__main__":
    require_binary()
    run_all()
