#!/usr/bin/env python3
"""Hostile and misbehaving clients must not hurt the server or other clients.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_hostile.py
"""

import os
import random
import select
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, Client, test, run_all, check, eq, wait_until,  # noqa
                   require_binary, is_memcached, slabcache_only, HOST,
                   rss_kb)

TOO_LARGE = b"SERVER_ERROR object too large for cache"
TOO_MANY = b"ERROR Too many open connections\r\n"


def assert_alive(c):
    v = c.cmd("version")
    check(v.startswith("VERSION "), "expected VERSION, got %r" % v)


def send_drain(sock, data, timeout=5.0):
    """Send data while discarding whatever the server answers, so neither
    side can block the other. Returns False if the peer closed."""
    sock.setblocking(False)
    end = time.monotonic() + timeout
    view = memoryview(data)
    try:
        while view and time.monotonic() < end:
            r, w, _ = select.select([sock], [sock], [], 0.1)
            if r:
                try:
                    if not sock.recv(65536):
                        return False
                except BlockingIOError:
                    pass
            if w:
                try:
                    n = sock.send(view[:65536])
                    view = view[n:]
                except BlockingIOError:
                    pass
    except (ConnectionResetError, BrokenPipeError):
        return False
    return True


@test
def overlong_line_closes_connection():
    with Server() as s, s.client() as keeper:
        eq(keeper.set("keep", "safe"), "STORED")
        with s.client() as c:
            c.send(b"x" * 4096)
            check(c.wait_closed(5.0), "4096-byte line without newline: "
                  "connection not closed")
        # a set command line that grows past the limit is also closed
        with s.client() as c:
            c.send(b"set " + b"k" * 5000)
            check(c.wait_closed(5.0), "overlong set line not closed")
        # other connections are unaffected
        assert_alive(keeper)
        eq(keeper.get("keep"), b"safe", "stored item survives")
        with s.client() as c:
            eq(c.get("keep"), b"safe")


@test
def long_but_bounded_lines_are_fine():
    with Server() as s, s.client() as c:
        # a 2000-byte unknown command line, sent without newline first
        c.send(b"x" * 2000)
        time.sleep(0.1)
        c.send(b"\r\n")
        eq(c.read_line(), b"ERROR", "2000-byte line then newline")
        assert_alive(c)


@test
def long_multiget_line():
    with Server() as s, s.client() as c:
        keys = ["key_%04d" % i for i in range(340)]      # ~3060 bytes
        for i in range(0, 340, 10):
            c.set(keys[i], "v%d" % i)
        line = ("get " + " ".join(keys) + "\r\n").encode()
        check(len(line) > 3000, "line length %d" % len(line))
        c.send(line)
        r = c.read_values()
        eq(sorted(r), sorted(keys[i] for i in range(0, 340, 10)), "hits")
        for i in range(0, 340, 10):
            eq(r[keys[i]][0], b"v%d" % i)
        # the same line arriving in small pieces
        for i in range(0, len(line), 100):
            c.send(line[i:i + 100])
            time.sleep(0.002)
        eq(len(c.read_values()), 34, "split long get line")
        # ~10 KB of keys, including misses
        keys2 = ["k%d_%s" % (i, "z" * 20) for i in range(400)]
        c.send(("gets " + " ".join(keys2 + keys[:20]) + "\r\n").encode())
        r = c.read_values()
        eq(sorted(r), sorted(keys[i] for i in range(0, 20, 10)), "long gets")
        assert_alive(c)


@test
def huge_declared_length_is_swallowed():
    with Server("-I", "1m") as s, s.client() as keeper:
        eq(keeper.set("keep", "safe"), "STORED")
        with s.client() as c:
            c.send(b"set k 0 0 2000000000\r\n")
            # memcached answers only after the whole block is swallowed;
            # an immediate error line is acceptable, anything else is not
            first, closed = c.read_available(idle=0.3, maximum=1.0)
            check(not closed, "connection closed on huge length")
            check(first in (b"", TOO_LARGE + b"\r\n"),
                  "reply to huge set: %r" % first[:200])
            # the following bytes are data, not commands: no VERSION reply
            filler = b"version\r\nget keep\r\n" * 50000     # ~950 KB
            check(send_drain(c.sock, filler, timeout=10.0),
                  "server closed while swallowing")
            c.sock.setblocking(True)
            c.sock.settimeout(5.0)
            rest, _ = c.read_available(idle=0.3, maximum=1.0)
            check(b"VERSION" not in rest and b"VALUE" not in rest,
                  "data block was parsed as commands: %r" % rest[:100])
            check(first + rest in (b"", TOO_LARGE + b"\r\n"),
                  "unexpected bytes %r" % (first + rest)[:200])
        check(wait_until(s.alive, 0.2), "server died")
        rss = rss_kb(s.pid)
        check(rss is None or rss < 400 * 1024,
              "server RSS %s kB after huge length" % rss)
        with s.client() as c:
            assert_alive(c)
            eq(c.get("keep"), b"safe")
        assert_alive(keeper)


@test
def huge_length_then_too_large_reply():
    """A too-large block that is fully sent gets the error, and the
    connection is in sync afterwards (no bytes parsed as commands)."""
    with Server("-I", "1m") as s, s.client(timeout=10) as c:
        blob = (b"version\r\n" * 300000)[:3 * 1024 * 1024]
        c.send(b"set k 0 0 %d\r\n" % len(blob) + blob + b"\r\nget k\r\n")
        eq(c.read_line(), TOO_LARGE)
        eq(c.read_line(), b"END", "next command after swallow")
        assert_alive(c)


def connection_limit_args():
    # memcached derives its fd rlimit from -c and needs some fds for its own
    # threads, so -c 10 does not even start; -c 16 -t 1 leaves few clients.
    if is_memcached():
        return ("-c", "16", "-t", "1")
    return ("-c", "10")


@test
def too_many_connections():
    with Server(*connection_limit_args()) as s:
        accepted, refused = [], 0
        for i in range(20):
            c = s.client()
            data, closed = c.read_available(idle=0.15, maximum=1.0)
            if data:
                eq(data, TOO_MANY, "refusal message")
                check(closed or c.wait_closed(3.0),
                      "refused connection not closed")
                refused += 1
                c.close()
                continue
            try:
                c.send(b"version\r\n")
                line = c.read_line()
            except (AssertionError, OSError) as e:
                raise AssertionError("connection %d neither refused nor "
                                     "served: %s" % (i, e))
            check(line.startswith(b"VERSION "), "accepted conn %d: %r"
                  % (i, line))
            accepted.append(c)
        check(refused >= 1, "no connection refused with %s"
              % " ".join(connection_limit_args()))
        check(len(accepted) >= 1, "no connection accepted")
        if not is_memcached():
            check(len(accepted) >= 5, "only %d connections accepted with -c 10"
                  % len(accepted))
        # the earlier connections still work
        for i, c in enumerate(accepted):
            eq(c.set("c%d" % i, "v"), "STORED")
            eq(c.get("c%d" % i), b"v")
        st = accepted[0].stats()
        check(int(st.get("rejected_connections", refused)) >= 1,
              "rejected_connections counted")
        # closing connections makes room again
        for c in accepted[1:]:
            c.close()

        def can_connect():
            c = s.client()
            try:
                data, closed = c.read_available(idle=0.1, maximum=0.3)
                if data or closed:
                    return False
                return c.cmd("version").startswith("VERSION ")
            finally:
                c.close()
        check(wait_until(can_connect, timeout=5.0),
              "no room after closing connections")
        assert_alive(accepted[0])
        accepted[0].close()


@test
def non_reading_client_does_not_stall_others():
    with Server("-t", "2") as s, s.client() as c:
        big = bytes(range(256)) * 400                      # 102400 bytes
        eq(c.set("big", big), "STORED")
        hog = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.connect((HOST, s.port))
        hog.settimeout(5.0)
        try:
            hog.sendall(b"get big\r\n" * 2000)   # ~200 MB of replies, unread
        except socket.timeout:
            pass
        time.sleep(0.3)
        t0 = time.monotonic()
        for i in range(20):
            with s.client(timeout=3.0) as o:
                eq(o.set("o%d" % i, "x%d" % i), "STORED")
                eq(o.get("o%d" % i), b"x%d" % i)
        eq(c.get("big"), big, "big value readable by another client")
        elapsed = time.monotonic() - t0
        check(elapsed < 3.0, "other clients stalled: %.2fs" % elapsed)
        rss = rss_kb(s.pid)
        check(rss is None or rss < 400 * 1024,
              "server buffers unread replies: RSS %s kB" % rss)
        # the hog can still be served if it starts reading
        hog.settimeout(5.0)
        got = 0
        want = len(b"VALUE big 0 102400\r\n") + len(big) + 2 + 5
        while got < want * 3:
            chunk = hog.recv(65536)
            check(chunk, "hog connection closed")
            got += len(chunk)
        hog.close()
        assert_alive(c)
        check(s.alive(), "server alive")


@test
def disconnect_mid_data_block():
    with Server() as s, s.client() as keeper:
        eq(keeper.set("a", "old"), "STORED")
        eq(keeper.set("b", "bee"), "STORED")
        for cmd in (b"set a 0 0 1000\r\n" + b"n" * 500,
                    b"set new 0 0 1000\r\n" + b"n" * 999,
                    b"append b 0 0 100\r\n" + b"x" * 10,
                    b"set a 0 0 10\r\n0123456789\r",
                    b"set a 0 0 10",
                    b"get a b"):
            c = s.client()
            c.send(cmd)
            time.sleep(0.05)
            c.close()
        time.sleep(0.1)
        eq(keeper.get("a"), b"old", "item survives interrupted overwrite")
        eq(keeper.get("b"), b"bee", "item survives interrupted append")
        eq(keeper.get("new"), None, "partial item not stored")
        with s.client() as c:
            eq(c.get("a"), b"old")
        # the same with an abortive close (RST)
        c = s.client()
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                          b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.send(b"set a 0 0 100000\r\n" + b"r" * 50000)
        c.close()
        time.sleep(0.1)
        eq(keeper.get("a"), b"old", "item survives RST mid-block")
        check(s.alive(), "server alive")


@test
def garbage_never_crashes():
    with Server("-I", "1m") as s, s.client() as keeper:
        for i in range(10):
            eq(keeper.set("g%d" % i, "value%d" % i), "STORED")
        rnd = random.Random(12345)

        def hostile(n):
            r = random.Random(n)
            for _ in range(4):
                kind = r.randint(0, 3)
                if kind == 0:      # pure random bytes
                    data = bytes(r.getrandbits(8) for _ in range(20000))
                elif kind == 1:    # random bytes chopped into lines
                    data = b"\r\n".join(bytes(r.getrandbits(8) for _ in
                                              range(r.randint(0, 300)))
                                        for _ in range(60))
                elif kind == 2:    # mangled commands
                    words = [b"get", b"set", b"gets", b"incr", b"cas", b"\x00",
                             b"99999999999999999999", b"-1", b"noreply",
                             b"\xff" * 10, b"stats", b"touch", b"gat",
                             b"append", b"k", b"0", b"4294967296", b"delete",
                             b"mg", b"ms", b"md", b"ma", b"mn", b"me", b"v",
                             b"q", b"k", b"T-1", b"N0", b"Oop", b"b", b"MA",
                             b"C0", b"I", b"Zm9v", b"D99"]
                    data = b"".join(b" ".join(r.choice(words) for _ in
                                              range(r.randint(0, 7))) +
                                    r.choice([b"\r\n", b"\n", b"\r", b" "])
                                    for _ in range(300))
                else:              # binary-protocol-looking header + junk
                    data = b"\x80" + bytes(r.getrandbits(8) for _ in range(5000))
                try:
                    c = socket.create_connection((HOST, s.port), timeout=5)
                except OSError:
                    continue
                try:
                    for j in range(0, len(data), 997):
                        if not send_drain(c, data[j:j + 997], timeout=2.0):
                            break
                finally:
                    c.close()

        read0 = int(keeper.stats()["bytes_read"])
        threads = [threading.Thread(target=hostile, args=(rnd.randint(0, 1 << 30),),
                                    daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        check(not any(t.is_alive() for t in threads), "hostile senders hung")
        check(s.alive(), "server process died on garbage")
        assert_alive(keeper)
        got = int(keeper.stats()["bytes_read"]) - read0
        check(got > 100000, "garbage not delivered? bytes_read +%d" % got)
        print("    garbage bytes read by server: %d" % got)
        for i in range(10):
            v = keeper.get("g%d" % i)
            # random garbage may (very rarely) form a valid command, but the
            # server must answer sensibly
            check(v in (b"value%d" % i, None), "g%d corrupted: %r" % (i, v))
        with s.client() as c:
            assert_alive(c)
            eq(c.set("after", "ok"), "STORED")
            eq(c.get("after"), b"ok")


@test
def many_idle_connections_then_work():
    """Open/close a burst of idle connections; server keeps serving."""
    with Server() as s:
        socks = []
        for _ in range(100):
            socks.append(socket.create_connection((HOST, s.port), timeout=5))
        with s.client() as c:
            assert_alive(c)
        for so in socks:
            so.close()
        with s.client() as c:
            assert_alive(c)
            check(wait_until(lambda: int(c.stats()["curr_connections"]) <= 2,
                             timeout=5.0), "idle connections not released")


if __name__ == "__main__":
    require_binary()
    run_all()
