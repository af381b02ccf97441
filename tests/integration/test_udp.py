#!/usr/bin/env python3
"""memcached's UDP protocol (-U): frames, sequences, ASCII and binary.

Each datagram starts with an 8-byte header (request id, sequence number,
datagram count, reserved); an answer comes back in datagrams of at most
1,400 bytes carrying the request's id, their sequence number and the count.
Where Debian's memcached is installed, the same datagrams go to it and the
answers are compared (requests whose answer memcached cuts per key, a
multi-key get, are not sent: notes/compatibility.md).

Run: SLABCACHE=path/to/binary python3 tests/integration/test_udp.py
"""

import os
import shutil
import socket
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (HOST, Server, check, eq, require_binary, run_all, test)  # noqa

MEMCACHED = os.environ.get("MEMCACHED", shutil.which("memcached") or "")
DATAGRAM_MAX = 1400


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def udp_server(binary=None):
    """A server serving UDP on a free port: (Server, udp port)."""
    port = free_udp_port()
    return Server("-U", str(port), binary=binary), port


def exchange(port, payload, rid=7, seq=0, total=1, wait=0.5):
    """Send one datagram; the datagrams answered: [((id, seq, total, 0), body)]."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(wait)
        u.sendto(struct.pack(">HHHH", rid, seq, total, 0) + payload, (HOST, port))
        out = []
        try:
            while True:
                d, _ = u.recvfrom(65536)
                check(len(d) <= DATAGRAM_MAX, "a datagram of %d bytes" % len(d))
                out.append((struct.unpack(">HHHH", d[:8]), d[8:]))
        except socket.timeout:
            pass
        return out


def answer(datagrams, rid=7):
    """One answer's body, its datagrams put in order; checks their headers."""
    check(len(datagrams) > 0, "an answer")
    total = datagrams[0][0][2]
    eq(len(datagrams), total, "datagrams of the answer")
    parts = {}
    for (hid, hseq, htotal, zero), body in datagrams:
        eq(hid, rid, "request id echoed")
        eq(htotal, total, "the count in every datagram")
        eq(zero, 0, "reserved")
        parts[hseq] = body
    eq(sorted(parts), list(range(total)), "sequence numbers 0..count-1")
    return b"".join(parts[i] for i in range(total))


@test
def ascii_requests_answered_in_frames():
    s, port = udp_server()
    with s, s.client() as c:
        eq(answer(exchange(port, b"set a 0 0 3\r\nabc\r\n", rid=161), rid=161), b"STORED\r\n")
        eq(c.get("a"), b"abc", "stored over UDP, read over TCP")
        for rid in (161, 161, 162, 65535):
            got = exchange(port, b"get a\r\n", rid=rid)
            eq(answer(got, rid=rid), b"VALUE a 0 3\r\nabc\r\nEND\r\n", "get, id %d" % rid)
        eq(answer(exchange(port, b"incr n 1\r\n")), b"NOT_FOUND\r\n")
        eq(answer(exchange(port, b"bogus\r\n")), b"ERROR\r\n")
        eq(exchange(port, b"set q 0 0 1 noreply\r\nq\r\n"), [], "noreply: no datagram")
        eq(c.get("q"), b"q")


@test
def a_large_answer_spans_datagrams():
    s, port = udp_server()
    value = bytes(b"CDEFGHIJ"[i % 8] for i in range(20000))
    with s, s.client() as c:
        eq(c.set("big", value), "STORED")
        got = exchange(port, b"get big\r\n", rid=53)
        body = b"VALUE big 0 20000\r\n" + value + b"\r\nEND\r\n"
        eq(len(got), (len(body) + DATAGRAM_MAX - 9) // (DATAGRAM_MAX - 8), "datagrams")
        eq(answer(got, rid=53), body, "reassembled")


@test
def an_answer_past_the_bound_is_refused():
    """One request's answer holds at most 1 MB (a TCP connection's output
    bound): a multi-get past it is refused as memcached refuses an answer
    it cannot build, so a 64 KB datagram cannot make one of any size."""
    s, port = udp_server()
    value = b"v" * 100000
    with s, s.client() as c:
        eq(c.set("h", value), "STORED")
        eq(answer(exchange(port, b"get h\r\n")),
           b"VALUE h 0 100000\r\n" + value + b"\r\nEND\r\n", "within the bound")
        eq(answer(exchange(port, b"get" + b" h" * 12 + b"\r\n")),
           b"SERVER_ERROR out of memory writing get response\r\n", "1.2 MB: refused")


@test
def each_request_its_own_sequence():
    """Two requests in a datagram: two answers, each from sequence 0."""
    s, port = udp_server()
    with s, s.client() as c:
        c.set("a", "1")
        c.set("b", "22")
        got = exchange(port, b"get a\r\nset c 0 0 1\r\nx\r\nget b\r\n")
        eq([h[1] for h, _ in got], [0, 0, 0], "each answer starts at 0")
        eq([b for _, b in got], [b"VALUE a 0 1\r\n1\r\nEND\r\n", b"STORED\r\n",
                                 b"VALUE b 0 2\r\n22\r\nEND\r\n"], "in order")


@test
def what_is_not_answered():
    s, port = udp_server()
    with s, s.client() as c:
        eq(exchange(port, b"get a\r\n", total=2), [], "one of several datagrams: dropped")
        eq(exchange(port, b"get a"), [], "a line cut off")
        sets = int(c.stats()["cmd_set"])
        eq(exchange(port, b"set z 0 0 500000\r\nab\r\n"), [], "a data block cut off")
        eq(c.get("z"), None, "nothing stored")
        eq(int(c.stats()["cmd_set"]), sets, "nor allocated: dropped before")
        eq(exchange(port, b"", rid=9), [], "a bare header")
        eq(answer(exchange(port, b"version\r\n")).startswith(b"VERSION "), True,
           "still serving")


@test
def binary_requests_over_udp():
    s, port = udp_server()
    with s, s.client() as c:
        c.set("bk", "bin")
        key = b"bk"
        req = struct.pack(">BBHBBHIIQ", 0x80, 0x00, len(key), 0, 0, 0, len(key), 0xABCD, 0) + key
        body = answer(exchange(port, req))
        magic, op, klen, elen, _dt, status, total, opaque, _cas = \
            struct.unpack(">BBHBBHIIQ", body[:24])
        eq((magic, op, status, opaque), (0x81, 0x00, 0, 0xABCD), "binary GET answered")
        eq(body[24 + elen + klen:24 + total], b"bin", "its value")


@test
def ports_any_and_the_port_file():
    """-U -1 takes a free port, written to $MEMCACHED_PORT_FILENAME as
    memcached writes it; -U alone moves the TCP port to it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ports")
        s = Server("-U", "-1", env={"MEMCACHED_PORT_FILENAME": path})
        with s, s.client() as c:
            lines = open(path).read().split("\n")
            udp = [int(l.split(": ")[1]) for l in lines if l.startswith("UDP INET: ")]
            tcp = [int(l.split(": ")[1]) for l in lines if l.startswith("TCP INET: ")]
            eq(tcp, [s.port], "the TCP port, as -p gave it")
            eq(len(udp), 1, "one UDP socket")
            check(udp[0] != 0, "a port was picked")
            c.set("p", "v")
            eq(answer(exchange(udp[0], b"get p\r\n")), b"VALUE p 0 1\r\nv\r\nEND\r\n")
            conns = c.stats("conns")
            check("udp:%s:%d" % (HOST, udp[0]) in conns.values(), "a UDP row in stats conns")


@test
def answers_match_memcached():
    if not MEMCACHED:
        print("  (Debian's memcached not installed: not compared)")
        return
    script = [b"set a 0 0 3\r\nabc\r\n", b"get a\r\n", b"gets nokey\r\n",
              b"get a\r\nget a\r\n", b"delete a\r\n", b"get a\r\n", b"bogus\r\n",
              b"set n 0 0 1\r\n5\r\nincr n 10\r\n", b"get a",
              b"set b 0 0 3000\r\n" + b"x" * 3000 + b"\r\nget b\r\n"]
    mine, mport = udp_server()
    theirs, tport = udp_server(binary=MEMCACHED)
    with mine, theirs:
        for i, payload in enumerate(script):
            a = exchange(mport, payload, rid=i)
            b = exchange(tport, payload, rid=i)
            eq([(h, body) for h, body in a], [(h, body) for h, body in b],
               "datagram %r" % payload[:30])


if __name__ == "__main__":
    require_binary()
    run_all()
