#!/usr/bin/env python3
"""Memory per connection, side by side with memcached, no larger than
memcached's.

A connection holds its own small struct while it waits; the read buffer
and the request in progress with its output are lent by the worker only
while it works (conn.h), as memcached lends read buffers. Measured as the
server's RSS growth per connection, for slabcache and (when installed)
Debian's memcached started the same way, in four states:

  - idle: 2,000 connections that each did one get and wait;
  - half a command: 2,000 that sent part of a get line, and 2,000 that
    sent a set's line and half its data block;
  - not reading: 600 that send gets of a 100 B (and a 4,000 B) value for
    as long as the kernel takes them, and read nothing.

slabcache must stay within memcached's figure (a 0.25 KB margin for
RSS's page granularity) and within a fixed bound of its own; the memory
must come back once the clients close. RSS figures are not checked under
ASan (its allocator's quarantine and redzones), but the connections are
still made. `SLOW_READERS_SHOW=1` prints the figures.

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

MEMCACHED = shutil.which("memcached")
MARGIN_KB = 0.25            # RSS moves by pages: noise over 2,000 connections
# slabcache's own bounds (KB per connection): its struct; a stashed part of
# a command or a pending item's bookkeeping; a lent read buffer (8 KB),
# 4 KB of copied answers and the bookkeeping around them.
BOUND_KB = {"idle": 1, "half_line": 2, "half_data": 2, "not_reading": 20}


def settled_rss(pid, timeout=20.0):
    """RSS once the server has worked through what the kernel buffered:
    no change of more than 1% over half a second."""
    last = rss_kb(pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.5)
        now = rss_kb(pid)
        if abs(now - last) <= max(8, last // 100):
            return now
        last = now
    return last


def fd_room(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * n + 200
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, want), hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return n if soft >= want else max(100, (soft - 200) // 2)


def open_idle(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection((HOST, port))
        s.sendall(b"get k\r\n")
        socks.append(s)
    for s in socks:
        got = b""
        while not got.endswith(b"END\r\n"):
            got += s.recv(65536)
    return socks


def open_sending(port, n, payload):
    """n connections, connection i having sent payload(i)."""
    socks = []
    for i in range(n):
        s = socket.create_connection((HOST, port))
        s.sendall(payload(i))
        socks.append(s)
    return socks


def open_half_line(port, n):
    return open_sending(port, n, lambda i: b"get k\r\nget some_key_still_arri")


def open_half_data(port, n):
    return open_sending(port, n, lambda i: b"set half%d 0 0 100\r\n" % i + b"a" * 50)


def open_not_reading(port, n):
    """n non-reading connections, each fed gets until its send would block."""
    socks = []
    burst = b"get k\r\n" * (65536 // 7)
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
            except (BlockingIOError, OSError):
                continue
        live = still
        time.sleep(0.01)
    return socks


OPEN = {"idle": open_idle, "half_line": open_half_line, "half_data": open_half_data,
        "not_reading": open_not_reading}


def per_conn_kb(binary, kind, n, value_size=100):
    """(KB per connection while open, KB per connection kept after close)."""
    args = ("-m", "64", "-t", "2", "-c", str(n + 50))
    # the others' answer may wait behind 600 busy connections: bounded,
    # but generously (the sanitizer build is several times slower)
    with Server(*args, binary=binary) as s, s.client(timeout=30) as c:
        eq(c.set("k", "v" * value_size), "STORED")
        time.sleep(0.2)
        base = settled_rss(s.pid)
        conns = c.stats()["curr_connections"]
        socks = OPEN[kind](s.port, n)
        grown = settled_rss(s.pid) - base
        eq(c.get("k"), b"v" * value_size, "others served meanwhile")
        for sock in socks:
            sock.close()
        wait_until(lambda: c.stats()["curr_connections"] == conns, 20)
        after = settled_rss(s.pid) - base
        return grown / n, after / n


def compare(kind, n, value_size=100):
    slabcache_only()
    n = fd_room(n)
    sc, sc_after = per_conn_kb(None, kind, n, value_size)
    if is_sanitized():
        print("  (ASan build: RSS figures not checked)")
        return
    mc = per_conn_kb(MEMCACHED, kind, n, value_size)[0] if MEMCACHED else None
    what = "%s (%d connections, %d B value)" % (kind, n, value_size)
    if os.environ.get("SLOW_READERS_SHOW"):
        print("  %s: slabcache %.2f KB/conn (%.2f after close), memcached %s KB/conn"
              % (what, sc, sc_after, "%.2f" % mc if mc is not None else "-"))
    check(sc < BOUND_KB[kind], "%s: %.2f KB per connection" % (what, sc))
    if mc is not None:
        check(sc <= mc + MARGIN_KB, "%s: %.2f KB per connection, memcached %.2f"
              % (what, sc, mc))
    check(sc_after < BOUND_KB[kind], "%s: %.2f KB per connection kept after close"
          % (what, sc_after))


@test
def idle_connections():
    compare("idle", 2000)


@test
def connections_with_half_a_command_line():
    compare("half_line", 2000)


@test
def connections_with_half_a_data_block():
    compare("half_data", 2000)


@test
def non_reading_clients():
    compare("not_reading", 600)
    compare("not_reading", 600, value_size=4000)


if __name__ == "__main__":
    require_binary()
    run_all()
