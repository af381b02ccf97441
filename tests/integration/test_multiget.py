#!/usr/bin/env python3
"""Multi-gets of any length: answered in full, in order, with bounded memory.

A get/gets/gat/gats line longer than the read buffer is answered as its
keys arrive (memcached buffers the whole line instead). These checks pass
against memcached too, except the memory bound, which is slabcache's own.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_multiget.py
"""

import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, test, run_all, check, eq, require_binary,  # noqa
                   slabcache_only, is_sanitized, rss_kb)

BAD_FORMAT = b"CLIENT_ERROR bad command line format\r\n"


def long_key(i, size=200):
    k = "key:%06d:" % i
    return k + "x" * (size - len(k))


def preload(c, keys, every=1):
    """Store keys[::every] with values naming them; pipelined, noreply."""
    chunk = []
    for i in range(0, len(keys), every):
        v = ("val-%d" % i).encode()
        chunk.append(b"set %s 0 0 %d noreply\r\n%s\r\n"
                     % (keys[i].encode(), len(v), v))
        if len(chunk) == 500:
            c.send(b"".join(chunk))
            chunk = []
    if chunk:
        c.send(b"".join(chunk))
    eq(c.cmd("version")[:8], "VERSION ", "preload done")


def expect_values(r, keys, every, what):
    want = {keys[i]: ("val-%d" % i).encode() for i in range(0, len(keys), every)}
    eq(len(r), len(want), what + ": number of hits")
    for k, v in want.items():
        check(k in r, "%s: %s missing" % (what, k[:20]))
        eq(r[k][0], v, what + ": value of " + k[:20])


def read_values_ordered(c):
    """The keys of a get answer in the order they came, and END."""
    order = []
    while True:
        line = c.read_line()
        if line == b"END":
            return order
        parts = line.split(b" ")
        check(parts[0] == b"VALUE", "bad line %r" % line[:80])
        c.read_exact(int(parts[3]) + 2)
        order.append(parts[1].decode())


@test
def get_10_1000_20000_keys():
    with Server("-m", "256") as s, s.client(timeout=30) as c:
        keys = [long_key(i) for i in range(20000)]
        preload(c, keys, every=3)
        for n in (10, 1000, 20000):
            line = ("get " + " ".join(keys[:n]) + "\r\n").encode()
            # Send everything, then read (pymemcache's way): the kernel's
            # socket buffers must absorb what the server holds back.
            c.send(line)
            expect_values(c.read_values(), keys[:n], 3, "get of %d keys" % n)
        line = ("gets " + " ".join(keys) + "\r\n").encode()
        check(len(line) > 4_000_000, "a 4 MB line: %d" % len(line))
        # Concurrent send and receive for the biggest one.
        t = threading.Thread(target=c.send, args=(line,))
        t.start()
        order = read_values_ordered(c)
        t.join(30)
        eq(order, [keys[i] for i in range(0, len(keys), 3)], "answer order")
        eq(c.cmd("version")[:8], "VERSION ", "still serving")


@test
def gat_and_pipelined_long_lines():
    slabcache_only()    # memcached closes a gat line longer than 2 KB
    with Server("-m", "64") as s, s.client(timeout=30) as c:
        keys = [long_key(i, 50) for i in range(2000)]
        preload(c, keys, every=2)
        line = ("gat 100 " + " ".join(keys) + "\r\n").encode()
        two = line + ("get " + " ".join(keys[:500]) + "\r\n").encode()
        c.send(two + b"version\r\n")
        expect_values(c.read_values(), keys, 2, "gat of 2000 keys")
        expect_values(c.read_values(), keys[:500], 2, "pipelined get")
        check(c.read_line().startswith(b"VERSION "), "pipelined version")
        eq(c.stats()["touch_hits"], "1000", "gat touched every hit")


def send_split(c, pieces):
    for p in pieces:
        if p:
            c.send(p)
            time.sleep(0.0005)


@test
def keys_split_at_every_byte():
    with Server() as s, s.client() as c:
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        keys = ["sk%03d_%s" % (i, "y" * (i % 13)) for i in range(200)]
        preload(c, keys, every=2)
        line = ("get " + " ".join(keys) + "\r\n").encode()
        check(len(line) > 2300, "line %d bytes" % len(line))
        # The first 2100 bytes start a streamed answer (longer than a
        # line may wait for); the rest is split at each of its bytes.
        for i in range(2100, len(line)):
            send_split(c, [line[:2100], line[2100:i], line[i:]])
            r = c.read_values()
            expect_values(r, keys, 2, "split at byte %d" % i)
        # A short line split anywhere is waited for whole.
        short = ("get " + " ".join(keys[:20]) + "\r\n").encode()
        for i in range(1, len(short)):
            send_split(c, [short[:i], short[i:]])
            expect_values(c.read_values(), keys[:20], 2, "short split %d" % i)


@test
def long_key_inside_a_long_multiget():
    with Server() as s, s.client() as c:
        # ~25 KB of answer: under the 32 KB of copies a connection may hold
        keys = [long_key(i, 100) for i in range(200)]
        preload(c, keys, every=1)
        bad = "b" * 251
        for pos in (0, 100, 199):
            ks = keys[:pos] + [bad] + keys[pos:]
            line = ("get " + " ".join(ks) + "\r\n").encode()
            # In pieces, so the first ones are answered before the bad key
            # arrives: the whole answer is still memcached's error alone.
            send_split(c, [line[i:i + 3000] for i in range(0, len(line), 3000)])
            eq(c.read_line() + b"\r\n", BAD_FORMAT, "bad key at %d" % pos)
            eq(c.cmd("version")[:8], "VERSION ", "served after the error")
        # A bad key whose own bytes have not all arrived yet.
        c.send(("get " + " ".join(keys[:100]) + " " + "c" * 400).encode())
        time.sleep(0.1)
        c.send(b"c" * 100 + b" " + keys[0].encode() + b"\r\n")
        eq(c.read_line() + b"\r\n", BAD_FORMAT, "unfinished bad key")
        eq(c.cmd("version")[:8], "VERSION ", "rest of the line dropped")
        # Keys after a NUL are not part of the line, as in memcached.
        c.send(("get " + " ".join(keys[:50])).encode() + b"\0 "
               + keys[60].encode() + b" " + b"z" * 3000 + b"\r\n")
        r = c.read_values()
        eq(sorted(r), sorted(keys[:50]), "keys before the NUL")


@test
def non_get_long_line_still_closes():
    with Server() as s, s.client() as c:
        c.send(b"touch " + b"k" * 3000)
        check(c.wait_closed(5.0), "a 3000-byte touch line must close")


@test
def never_reading_client_costs_bounded_memory():
    slabcache_only()
    with Server("-m", "64", "-t", "2") as s, s.client() as c:
        c.set("k", "v" * 100)
        line = b"get " + b" ".join([b"k"] * 2_000_000) + b"\r\n"    # 4 MB
        before = rss_kb(s.pid)
        hogs = []
        for _ in range(3):
            h = socket.create_connection(("127.0.0.1", s.port))
            h.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            h.setblocking(False)
            view = memoryview(line)
            end = time.monotonic() + 5.0
            while view and time.monotonic() < end:
                try:
                    view = view[h.send(view):]
                except BlockingIOError:
                    time.sleep(0.01)
            hogs.append(h)
        time.sleep(0.5)
        grown = rss_kb(s.pid) - before
        # Each hog may hold the output bound (1 MB of copies, in a buffer
        # grown by doubling) and a 16 KB read buffer; never its 4 MB line
        # or the 22 MB its answer would take.
        if is_sanitized():
            print("  (ASan build: RSS bound not checked)")
        else:
            check(grown < 3 * 4096, "RSS grew by %d KB for 3 hogs" % grown)
        eq(c.get("k"), b"v" * 100, "other clients served")
        for h in hogs:
            h.close()


@test
def binary_protocol_client_is_served():
    with Server() as s, s.client() as c:
        # A binary "version" request: magic 0x80, opcode 0x0b. The answer:
        # magic 0x81, the opcode, and "1.6.45" as the body (test_binary.py
        # covers every opcode).
        c.send(bytes([0x80, 0x0b]) + bytes(22))
        c.sock.settimeout(2.0)
        got = b""
        while len(got) < 30:
            chunk = c.sock.recv(100)
            if not chunk:
                break
            got += chunk
        eq(got[:2], bytes([0x81, 0x0b]), "binary answer header")
        eq(got[24:30], b"1.6.45", "binary version body")
        with s.client() as d:
            eq(d.cmd("version")[:8], "VERSION ", "ASCII clients beside it")


if __name__ == "__main__":
    require_binary()
    run_all()
