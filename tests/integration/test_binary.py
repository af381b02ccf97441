#!/usr/bin/env python3
"""The binary protocol, differential: the same packets to memcached 1.6.18
and to the server under test, every response packet compared field by field
(a CAS value only as zero or not: each server numbers its own).

Covers every opcode memcached 1.6.18 serves over binary, their quiet forms,
pipelines ended by NOOP, and bad input: a wrong magic byte, a body length
that contradicts the key length, an absurd body length, a key over 250
bytes, wrong extras, an unknown opcode. After bad input both servers must
agree on whether the connection was closed.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_binary.py
Exit 77 (skip) when memcached is missing or the server under test is
memcached itself.
"""

import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sclib  # noqa
from sclib import Server, HOST, is_memcached, test, run_all, eq, check  # noqa

OP = dict(get=0x00, set=0x01, add=0x02, replace=0x03, delete=0x04, incr=0x05,
          decr=0x06, quit=0x07, flush=0x08, getq=0x09, noop=0x0a, version=0x0b,
          getk=0x0c, getkq=0x0d, append=0x0e, prepend=0x0f, stat=0x10,
          setq=0x11, addq=0x12, replaceq=0x13, deleteq=0x14, incrq=0x15,
          decrq=0x16, quitq=0x17, flushq=0x18, appendq=0x19, prependq=0x1a,
          verbosity=0x1b, touch=0x1c, gat=0x1d, gatq=0x1e, sasl_list=0x20,
          gatk=0x23, gatkq=0x24)
REF = os.environ.get("MEMCACHED", "/usr/bin/memcached")
NEWEST = os.environ.get("MEMCACHED_NEWEST", "/opt/memcached-newest/bin/memcached")


def req(op, key=b"", extras=b"", value=b"", cas=0, opaque=0, magic=0x80,
        bodylen=None, keylen=None):
    if isinstance(op, str):
        op = OP[op]
    body = len(extras) + len(key) + len(value) if bodylen is None else bodylen
    klen = len(key) if keylen is None else keylen
    return struct.pack(">BBHBBHIIQ", magic, op, klen, len(extras), 0, 0, body,
                       opaque, cas) + extras + key + value


def store_extras(flags=0, exptime=0):
    return struct.pack(">II", flags, exptime)


def incr_extras(delta=1, initial=0, exptime=0):
    return struct.pack(">QQI", delta, initial, exptime)


def read_packets(sock, idle=0.25, limit=5.0):
    """Every response packet until the connection is idle; (packets, closed)."""
    data, closed = b"", False
    end = time.monotonic() + limit
    sock.settimeout(idle)
    while time.monotonic() < end:
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    packets = []
    while len(data) >= 24:
        magic, op, klen, elen, dtype, status, blen, opaque, cas = \
            struct.unpack(">BBHBBHIIQ", data[:24])
        if len(data) < 24 + blen:
            break
        body = data[24:24 + blen]
        packets.append(dict(magic=magic, op=op, status=status, opaque=opaque,
                            cas=cas != 0, extras=body[:elen],
                            key=body[elen:elen + klen], value=body[elen + klen:]))
        data = data[24 + blen:]
    if data:
        packets.append(dict(trailing=data))
    return packets, closed


def normalize_stats(packets):
    """STAT answers: the keys only, values are each server's own; so is the
    version each announces."""
    return [dict(p, value=b"<v>") if (p.get("op") == OP["stat"] and p.get("key")) or
            (p.get("op") == OP["version"] and p.get("status") == 0)
            else p for p in packets]


def compare(script, args=(), server_args=()):
    """Run the script (a list of request byte strings, one exchange each)
    against memcached and the server under test."""
    outs = []
    for binary in (REF, None):
        extra = ["-B", "binary"] if "binary" in args else []
        with Server("-m", "64", *extra, *server_args, binary=binary) as s:
            sock = socket.create_connection((HOST, s.port), timeout=5)
            got = []
            for chunk in script:
                try:
                    sock.sendall(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    got.append(("send failed",))
                    break
                packets, closed = read_packets(sock)
                got.append((normalize_stats(packets), closed))
                if closed:
                    break
            sock.close()
            outs.append(got)
    for i, (a, b) in enumerate(zip(outs[0], outs[1])):
        eq(b, a, "exchange %d (%r)" % (i, script[i][:40]))
    eq(len(outs[1]), len(outs[0]), "exchanges")


@test
def get_set_variants():
    compare([
        req("get", b"nokey"),
        req("getk", b"nokey"),
        req("getq", b"nokey") + req("getkq", b"nokey") + req("noop"),
        req("set", b"k", store_extras(7, 0), b"hello", opaque=0x11223344),
        req("get", b"k") + req("getk", b"k", opaque=9),
        req("getq", b"k") + req("getkq", b"k") + req("noop"),
        req("add", b"k", store_extras(), b"x"),
        req("add", b"k2", store_extras(1), b"new") + req("get", b"k2"),
        req("replace", b"none", store_extras(), b"x"),
        req("replace", b"k", store_extras(3), b"rep") + req("get", b"k"),
        req("setq", b"q", store_extras(), b"quiet") + req("noop"),
        req("addq", b"q", store_extras(), b"again") + req("noop"),
        req("replaceq", b"nope", store_extras(), b"z") + req("noop"),
        req("set", b"empty", store_extras(), b"") + req("get", b"empty"),
        req("set", b"bin", store_extras(), bytes(range(256))) + req("get", b"bin"),
    ])


@test
def cas_append_delete():
    compare([
        req("set", b"c", store_extras(), b"v1"),
        req("set", b"c", store_extras(), b"v2", cas=1),
        req("set", b"nokey", store_extras(), b"v2", cas=5),
        req("append", b"c", value=b"+a") + req("prepend", b"c", value=b"p+") + req("get", b"c"),
        req("append", b"none", value=b"x"),
        req("appendq", b"c", value=b"Q") + req("prependq", b"none", value=b"Q") + req("noop"),
        req("delete", b"c", cas=1),
        req("delete", b"c") + req("delete", b"c"),
        req("deleteq", b"c") + req("set", b"d", store_extras(), b"x")
        + req("deleteq", b"d") + req("noop"),
    ])


@test
def arithmetic():
    compare([
        req("incr", b"n", incr_extras(1, 5, 0xffffffff)),
        req("incr", b"n", incr_extras(1, 5, 0)),
        req("incr", b"n", incr_extras(10)) + req("decr", b"n", incr_extras(100)),
        req("get", b"n"),
        req("incrq", b"n", incr_extras(2)) + req("decrq", b"n", incr_extras(1)) + req("noop"),
        req("set", b"s", store_extras(), b"abc") + req("incr", b"s", incr_extras()),
        req("set", b"w", store_extras(), b"18446744073709551615")
        + req("incr", b"w", incr_extras()),
        req("incr", b"n", incr_extras(1), cas=1),
    ])


@test
def touch_gat_flush_misc():
    compare([
        req("set", b"t", store_extras(5, 0), b"tv"),
        req("touch", b"t", struct.pack(">I", 100)) + req("touch", b"none", struct.pack(">I", 1)),
        req("gat", b"t", struct.pack(">I", 100)) + req("gatk", b"t", struct.pack(">I", 0)),
        req("gatq", b"none", struct.pack(">I", 0)) + req("gatkq", b"t", struct.pack(">I", 0))
        + req("noop"),
        req("version"),
        req("noop"),
        req("flush") + req("get", b"t"),
        req("set", b"f", store_extras(), b"x") + req("flushq") + req("noop") + req("get", b"f"),
        req("flush", extras=struct.pack(">I", 0)),
        req("stat", b"nosuchgroup"),
        req("sasl_list"),
        req("quit"),
    ])


@test
def quiet_quit():
    compare([req("set", b"a", store_extras(), b"x") + req("quitq")])


@test
def bad_magic_closes():
    compare([req("get", b"k") + req("get", b"k", magic=0x81)])


@test
def body_shorter_than_key_closes():
    compare([req("get", b"abc", bodylen=2)])


@test
def wrong_extras_closes():
    compare([req("get", b"k", extras=b"1234")])
    compare([req("set", b"k", b"1234", b"v")])
    compare([req("incr", b"k", b"12345678")])
    compare([req("version", b"k")])


@test
def key_over_250_closes():
    compare([req("get", b"k" * 251)])
    compare([req("set", b"k" * 251, store_extras(), b"v")])


@test
def unknown_opcode_answers_and_goes_on():
    compare([req(0x50) + req("noop")])
    compare([req("verbosity") + req("noop")])   # not served over binary


@test
def unknown_opcode_body_is_dropped():
    """memcached drops the whole body length again after it has read the
    extras and key, eating into the next request; slabcache drops only
    the rest of the body, so the next request is answered."""
    with Server("-m", "64") as s:
        sock = socket.create_connection((HOST, s.port), timeout=5)
        sock.sendall(req("verbosity", extras=struct.pack(">I", 1), value=b"xy")
                     + req("noop"))
        packets, closed = read_packets(sock)
        sock.close()
        eq([(p["op"], p["status"]) for p in packets], [(0x1b, 0x81), (0x0a, 0)])


@test
def absurd_body_length():
    # a 3 GB announced value: refused as too large, then closed rather than
    # read (memcached answers the same, then reads the value as requests)
    with Server("-m", "64") as s:
        sock = socket.create_connection((HOST, s.port), timeout=5)
        sock.sendall(req("set", b"big", store_extras(), b"", bodylen=3 << 30))
        packets, closed = read_packets(sock)
        check(closed and len(packets) == 1 and packets[0]["status"] == 0x03,
              "E2BIG then closed: %r %r" % (packets, closed))
        sock.close()
    # a value just too large for -I is dropped and the connection goes on
    compare([req("set", b"big", store_extras(), b"x" * (1 << 21)) + req("noop")])


@test
def stat_groups():
    """Every stat memcached sends, in its order (values are each server's
    own; slabcache's own stats follow memcached's), then the empty end.
    The general group is memcached 1.6.45's (its page-mover fields differ
    from 1.6.18's): compared with the newest memcached when installed."""
    newest = os.access(NEWEST, os.X_OK)
    if not newest:
        print("  (%s not installed: the general group not compared)" % NEWEST)
    for group in (b"", b"settings", b"items", b"slabs"):
        if group == b"" and not newest:
            continue
        keys = []
        for binary in (NEWEST if group == b"" else REF, None):
            with Server("-m", "64", binary=binary) as s:
                sock = socket.create_connection((HOST, s.port), timeout=5)
                sock.sendall(req("set", b"a", store_extras(), b"v") + req("stat", group))
                packets, closed = read_packets(sock)
                sock.close()
                check(not closed and packets[-1]["key"] == b"" and
                      packets[-1]["value"] == b"", "ends with an empty packet")
                keys.append([p["key"] for p in packets[1:-1]])
        ours = keys[1][:len(keys[0])]
        if group in (b"items", b"slabs"):   # class ids differ: names only
            strip = lambda ks: [k.split(b":")[-1] for k in ks]
            check(set(strip(keys[0])) <= set(strip(keys[1])),
                  "%r: memcached's names %r" % (group, set(strip(keys[0])) - set(strip(keys[1]))))
        else:
            eq(ours, keys[0], "stat %r keys" % group)


@test
def flush_refused_with_F():
    compare([req("set", b"k", store_extras(), b"v"),
             req("flush") + req("flushq") + req("get", b"k")], server_args=("-F",))


@test
def expirations_are_unsigned():
    # 0x90000000 is an absolute time far in the future, not a negative TTL
    far = struct.pack(">I", 0x90000000)
    compare([req("set", b"k", store_extras(0, 0x90000000), b"v") + req("get", b"k"),
             req("touch", b"k", far) + req("get", b"k"),
             req("gat", b"k", far),
             req("incr", b"n", incr_extras(1, 3, 0x90000000)) + req("get", b"n"),
             req("flush", extras=far) + req("get", b"k")])


@test
def counters_after_binary_traffic():
    script = (req("set", b"a", store_extras(), b"x") + req("get", b"a")
               + req("get", b"nope") + req("getq", b"nope2")
               + req("touch", b"a", struct.pack(">I", 10))
               + req("set", b"a", store_extras(), b"y", cas=1)
               + req("delete", b"a", cas=1) + req("delete", b"zz")
               + req("incr", b"c", incr_extras(1, 0, 0xffffffff))
               + req("incr", b"c", incr_extras(1, 0, 0))
               + req("decr", b"c", incr_extras(1)) + req("flush") + req("get", b"a")
               + req("noop"))
    names = ("cmd_get", "get_hits", "get_misses", "get_flushed", "cmd_touch",
             "touch_hits", "cas_badval", "cas_misses", "delete_hits",
             "delete_misses", "incr_hits", "incr_misses", "decr_hits",
             "decr_misses", "cmd_flush")
    got = []
    for binary in (REF, None):
        with Server("-m", "64", binary=binary) as s:
            sock = socket.create_connection((HOST, s.port), timeout=5)
            sock.sendall(script)
            read_packets(sock)
            sock.close()
            st = s.client().stats()
            got.append({n: st[n] for n in names})
    eq(got[1], got[0], "counters after the same binary traffic")


@test
def binary_only_mode():
    compare([req("set", b"k", store_extras(), b"v") + req("get", b"k"),
             b"get k\r\n"], args=("binary",))


@test
def ascii_still_served_in_auto_mode():
    with Server("-m", "64") as s:
        c = s.client()
        eq(c.set("a", "1"), "STORED")
        sock = socket.create_connection((HOST, s.port), timeout=5)
        sock.sendall(req("get", b"a"))
        packets, closed = read_packets(sock)
        check(not closed and len(packets) == 1 and packets[0]["value"] == b"1",
              "binary client beside an ASCII one: %r" % packets)
        sock.close()


if __name__ == "__main__":
    sclib.require_reference(REF)
    run_all()
