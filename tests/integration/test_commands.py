#!/usr/bin/env python3
"""Every command of memcached's classic ASCII protocol, one check per test.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_commands.py [test names]
Validated against memcached 1.6.18 (SLABCACHE=/usr/bin/memcached).
"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, Client, test, run_all, check, eq, wait_until,  # noqa
                   slabcache_only, require_binary, is_memcached)

NON_NUMERIC = "CLIENT_ERROR cannot increment or decrement non-numeric value"
BAD_FORMAT = "CLIENT_ERROR bad command line format"
TOO_LARGE = "SERVER_ERROR object too large for cache"
BAD_CHUNK = "CLIENT_ERROR bad data chunk"
BAD_DELTA = "CLIENT_ERROR invalid numeric delta argument"
BAD_EXPTIME = "CLIENT_ERROR invalid exptime argument"


def srv(*args):
    return Server(*args)


def assert_alive(c):
    """The connection still answers commands."""
    v = c.cmd("version")
    check(v.startswith("VERSION "), "expected VERSION, got %r" % v)


# --------------------------------------------------------------------------
# storage commands
# --------------------------------------------------------------------------

@test
def set_get_basic():
    with srv() as s, s.client() as c:
        eq(c.set("k", "hello"), "STORED", "set")
        eq(c.get("k"), b"hello", "get")
        eq(c.get("missing"), None, "get miss")
        eq(c.set("k", "world"), "STORED", "overwrite")
        eq(c.get("k"), b"world", "get after overwrite")
        eq(c.set("empty", ""), "STORED", "empty value")
        eq(c.get("empty"), b"", "empty value get")
        # raw bytes of a hit
        c.send(b"get k\r\n")
        data, _ = c.read_available(idle=0.2)
        eq(data, b"VALUE k 0 5\r\nworld\r\nEND\r\n", "raw get reply")


@test
def set_flags_roundtrip():
    with srv() as s, s.client() as c:
        for f in (0, 1, 12345, 2 ** 31, 2 ** 32 - 1):
            eq(c.set("f", "v", flags=f), "STORED", "set flags %d" % f)
            eq(c.get_flags("f"), f, "flags %d" % f)


@test
def add_command():
    with srv() as s, s.client() as c:
        eq(c.add("a", "1"), "STORED", "add new")
        eq(c.add("a", "2"), "NOT_STORED", "add existing")
        eq(c.get("a"), b"1", "value unchanged by failed add")
        c.cmd("delete a")
        eq(c.add("a", "3"), "STORED", "add after delete")
        eq(c.get("a"), b"3")


@test
def replace_command():
    with srv() as s, s.client() as c:
        eq(c.replace("r", "1"), "NOT_STORED", "replace missing")
        eq(c.get("r"), None)
        c.set("r", "old", flags=3)
        eq(c.replace("r", "new", flags=7), "STORED", "replace existing")
        eq(c.get_multi(["r"])["r"][:2], (b"new", 7), "replaced value+flags")


@test
def append_prepend():
    with srv() as s, s.client() as c:
        eq(c.append("ap", "x"), "NOT_STORED", "append missing")
        eq(c.prepend("ap", "x"), "NOT_STORED", "prepend missing")
        eq(c.get("ap"), None)
        c.set("ap", "mid", flags=42)
        eq(c.append("ap", "_end"), "STORED", "append")
        eq(c.prepend("ap", "start_"), "STORED", "prepend")
        v = c.get_multi(["ap"])["ap"]
        eq(v[0], b"start_mid_end", "append/prepend value")
        eq(v[1], 42, "append keeps original flags")
        # append with flags/exptime args: they are ignored
        eq(c.store("append", "ap", b"!", flags=9, exptime=-1), "STORED")
        v = c.get_multi(["ap"])["ap"]
        eq(v[:2], (b"start_mid_end!", 42), "append ignores flags/exptime")
        # append empty
        eq(c.append("ap", ""), "STORED")
        eq(c.get("ap"), b"start_mid_end!")


@test
def cas_command():
    with srv() as s, s.client() as c:
        c.set("c", "v1")
        v, cas1 = c.gets("c")
        eq(v, b"v1")
        check(isinstance(cas1, int) and cas1 > 0, "cas unique > 0: %r" % cas1)
        eq(c.cas("c", "v2", cas1 + 1000), "EXISTS", "cas with wrong unique")
        eq(c.get("c"), b"v1", "value unchanged after EXISTS")
        eq(c.cas("c", "v2", cas1), "STORED", "cas with right unique")
        v, cas2 = c.gets("c")
        eq(v, b"v2")
        check(cas2 != cas1, "cas changes after cas store")
        eq(c.cas("c", "v3", cas1), "EXISTS", "stale cas")
        eq(c.cas("nokey", "x", 1), "NOT_FOUND", "cas on missing key")
        eq(c.get("nokey"), None)
        # any modification changes the cas unique
        c.set("c", "v4")
        _, cas3 = c.gets("c")
        check(cas3 not in (cas1, cas2), "set changes cas")
        c.append("c", "x")
        _, cas4 = c.gets("c")
        check(cas4 != cas3, "append changes cas")
        c.set("n", "1")
        _, casn = c.gets("n")
        c.cmd("incr n 1")
        _, casn2 = c.gets("n")
        check(casn2 != casn, "incr changes cas")
        # distinct keys get distinct cas values
        c.set("d1", "x")
        c.set("d2", "x")
        r = c.get_multi(["d1", "d2"], verb="gets")
        check(r["d1"][2] != r["d2"][2], "distinct cas per item")
        # cas after delete
        c.cmd("delete c")
        eq(c.cas("c", "v5", cas4), "NOT_FOUND", "cas after delete")
        # missing cas argument: memcached 1.6.45 refuses the line and
        # swallows its data block (1.6.18 said ERROR and read it as a line)
        c.send(b"cas c 0 0 1\r\nv\r\nversion\r\n")
        eq(c.read_line(), BAD_FORMAT.encode(), "cas without unique")
        check(c.read_line().startswith(b"VERSION "), "its data block swallowed")


@test
def cas_disabled_with_C():
    with srv("-C") as s, s.client() as c:
        c.set("a", "x")
        r = c.get_multi(["a"], verb="gets")
        eq(r["a"][2], 0, "gets cas with -C")


@test
def get_multi_and_gets():
    with srv() as s, s.client() as c:
        for i in range(10):
            c.set("m%d" % i, "val%d" % i, flags=i)
        keys = ["m%d" % i for i in range(10)] + ["miss1", "miss2"]
        r = c.get_multi(keys)
        eq(sorted(r), sorted("m%d" % i for i in range(10)), "keys returned")
        for i in range(10):
            eq(r["m%d" % i][:2], (b"val%d" % i, i))
            eq(r["m%d" % i][2], None, "get has no cas field")
        r = c.get_multi(keys, verb="gets")
        for i in range(10):
            check(r["m%d" % i][2] is not None, "gets has cas")
        # order and duplicates are preserved on the wire
        c.send(b"get m1 miss m0 m1\r\n")
        data, _ = c.read_available()
        eq(data, b"VALUE m1 1 4\r\nval1\r\nVALUE m0 0 4\r\nval0\r\n"
                 b"VALUE m1 1 4\r\nval1\r\nEND\r\n", "multi-get bytes")
        # all misses
        c.send(b"get x y z\r\n")
        eq(c.read_line(), b"END")
        # no key
        eq(c.cmd("get"), BAD_FORMAT, "get without key")
        eq(c.cmd("gets"), BAD_FORMAT, "gets without key")
        # extra spaces between keys
        c.send(b"get  m2   m3 \r\n")
        r = c.read_values()
        eq(sorted(r), ["m2", "m3"], "get with extra spaces")
        # 100 keys in one request
        keys = ["m%d" % (i % 10) for i in range(100)]
        c.send(("get " + " ".join(keys) + "\r\n").encode())
        n = 0
        while True:
            line = c.read_line()
            if line == b"END":
                break
            c.read_exact(int(line.split()[3]) + 2)
            n += 1
        eq(n, 100, "100-key get")


@test
def gat_gats():
    with srv() as s, s.client() as c:
        c.set("g", "gv", flags=5)
        c.send(b"gat 100 g nokey\r\n")
        data, _ = c.read_available()
        eq(data, b"VALUE g 5 2\r\ngv\r\nEND\r\n", "gat reply")
        r = c.get_multi(["100", "g"], verb="gats")
        eq(list(r), ["g"])
        eq(r["g"][:2], (b"gv", 5))
        check(r["g"][2] is not None, "gats has cas")
        _, cas = c.gets("g")
        eq(r["g"][2], cas, "gats cas equals gets cas")
        eq(c.cmd("gat g"), BAD_FORMAT, "gat without key")
        eq(c.cmd("gat abc g"), BAD_EXPTIME, "gat bad exptime")
        eq(c.cmd("gat +5 g"), BAD_EXPTIME, "gat exptime digits only")
        eq(c.cmd("gat"), BAD_FORMAT, "gat without args")
        # gat with negative exptime returns the item, then it is gone
        c.send(b"gat -1 g\r\n")
        eq(c.read_values()["g"][0], b"gv", "gat -1 returns value")
        eq(c.get("g"), None, "gat -1 expires the item")
        # touch/gat counters
        st = c.stats()
        check(int(st["cmd_touch"]) >= 3, "cmd_touch counted: %s" % st["cmd_touch"])


@test
def touch_command():
    with srv() as s, s.client() as c:
        c.set("t", "v")
        eq(c.cmd("touch t 100"), "TOUCHED")
        eq(c.cmd("touch nokey 100"), "NOT_FOUND")
        eq(c.cmd("touch t abc"), BAD_EXPTIME)
        eq(c.cmd("touch t"), BAD_FORMAT)
        eq(c.get("t"), b"v", "value unchanged by touch")
        eq(c.cmd("touch t -1"), "TOUCHED")
        eq(c.get("t"), None, "touch -1 expires")


@test
def delete_command():
    with srv() as s, s.client() as c:
        c.set("d", "v")
        eq(c.cmd("delete d"), "DELETED")
        eq(c.get("d"), None)
        eq(c.cmd("delete d"), "NOT_FOUND")
        c.set("d", "v")
        eq(c.cmd("delete d 0"), "DELETED", "delete with legacy 0")
        c.set("d", "v")
        eq(c.cmd("delete d 5"), "DELETED", "extra tokens ignored (1.6.45)")
        eq(c.cmd("delete"), BAD_FORMAT)


# --------------------------------------------------------------------------
# incr / decr
# --------------------------------------------------------------------------

@test
def incr_decr_basic():
    with srv() as s, s.client() as c:
        c.set("n", "10")
        eq(c.cmd("incr n 5"), "15")
        eq(c.cmd("decr n 3"), "12")
        eq(c.get("n"), b"12")
        eq(c.cmd("incr n 0"), "12")
        eq(c.cmd("incr nokey 1"), "NOT_FOUND")
        eq(c.cmd("decr nokey 1"), "NOT_FOUND")
        eq(c.get("nokey"), None, "incr does not create")
        eq(c.cmd("incr n"), BAD_FORMAT, "incr without delta")
        eq(c.cmd("incr"), BAD_FORMAT)


@test
def incr_grows_length():
    with srv() as s, s.client() as c:
        c.set("g", "99", flags=17)
        eq(c.cmd("incr g 1"), "100")
        r = c.get_multi(["g"])["g"]
        eq(r[:2], (b"100", 17), "incr grows length, keeps flags")
        c.set("g9", "9")
        eq(c.cmd("incr g9 18446744073709551606"), "18446744073709551615")
        eq(c.get("g9"), b"18446744073709551615")


@test
def incr_wraps_64bit():
    with srv() as s, s.client() as c:
        c.set("w", "18446744073709551615")
        eq(c.cmd("incr w 1"), "0", "2^64-1 + 1 wraps to 0")
        # memcached rewrites in place and pads with spaces to the old length
        eq(c.get("w"), b"0" + b" " * 19, "wrapped value bytes")
        eq(c.cmd("incr w 5"), "5", "incr of space-padded value")
        c.set("w2", "18446744073709551610")
        eq(c.cmd("incr w2 10"), "4")


@test
def decr_floors_at_zero():
    with srv() as s, s.client() as c:
        c.set("d", "5")
        eq(c.cmd("decr d 10"), "0", "decr floors at 0")
        eq(c.cmd("decr d 1"), "0", "decr of 0 stays 0")
        c.set("d3", "100")
        eq(c.cmd("decr d3 1000"), "0")
        eq(c.get("d3"), b"0  ", "decr shrinking: space-padded in place")
        c.set("d4", "100")
        eq(c.cmd("decr d4 1"), "99")
        eq(c.get("d4"), b"99 ", "decr 100->99 padded")


@test
def incr_errors():
    with srv() as s, s.client() as c:
        c.set("s", "abc")
        eq(c.cmd("incr s 1"), NON_NUMERIC)
        eq(c.cmd("decr s 1"), NON_NUMERIC)
        c.set("neg", "-5")
        eq(c.cmd("incr neg 1"), NON_NUMERIC, "negative value")
        c.set("big", "184467440737095516150")
        eq(c.cmd("incr big 1"), NON_NUMERIC, "value > 2^64-1")
        c.set("e", "")
        eq(c.cmd("incr e 1"), NON_NUMERIC, "empty value")
        c.set("n", "1")
        eq(c.cmd("incr n abc"), BAD_DELTA)
        eq(c.cmd("incr n -1"), BAD_DELTA)
        eq(c.cmd("incr n 18446744073709551616"), BAD_DELTA, "delta 2^64")
        eq(c.cmd("decr n abc"), BAD_DELTA)
        eq(c.get("n"), b"1", "value unchanged by errors")


# --------------------------------------------------------------------------
# expiry and flush_all
# --------------------------------------------------------------------------

@test
def expiry():
    with srv() as s, s.client() as c:
        now = int(time.time())
        eq(c.set("neg", "v", exptime=-1), "STORED")
        eq(c.get("neg"), None, "negative exptime: already expired")
        eq(c.set("past", "v", exptime=now - 1000), "STORED")
        eq(c.get("past"), None, "absolute exptime in the past")
        eq(c.set("future", "v", exptime=now + 100), "STORED")
        eq(c.get("future"), b"v", "absolute exptime in the future")
        eq(c.set("rel1", "v", exptime=1), "STORED")
        eq(c.set("rel2", "v", exptime=2), "STORED")
        eq(c.set("touched", "v", exptime=2), "STORED")
        eq(c.set("gatted", "v", exptime=2), "STORED")
        eq(c.set("forever", "v", exptime=0), "STORED")
        eq(c.set("long", "v", exptime=100), "STORED")
        eq(c.get("rel2"), b"v", "rel2 present right after set")
        eq(c.cmd("touch touched 100"), "TOUCHED")
        c.send(b"gat 100 gatted\r\n")
        eq(list(c.read_values()), ["gatted"])
        c.add("addexp", "v", exptime=2)
        t0 = time.monotonic()
        check(wait_until(lambda: c.get("rel1") is None, timeout=4.0),
              "exptime 1 item still there after 4s")
        check(wait_until(lambda: c.get("rel2") is None, timeout=4.0),
              "exptime 2 item still there")
        check(time.monotonic() - t0 >= 0.5, "rel2 expired too early")
        check(wait_until(lambda: c.get("addexp") is None, timeout=4.0),
              "added item with exptime 2 still there")
        eq(c.get("touched"), b"v", "touch extended expiry")
        eq(c.get("gatted"), b"v", "gat extended expiry")
        eq(c.get("forever"), b"v")
        eq(c.get("long"), b"v")
        eq(c.get("future"), b"v")
        # an expired key can be added again
        eq(c.add("rel1", "new"), "STORED", "add over expired item")
        eq(c.get("rel1"), b"new")


@test
def flush_all_immediate():
    with srv() as s, s.client() as c:
        for i in range(20):
            c.set("f%d" % i, "v")
        eq(c.cmd("flush_all"), "OK")
        for i in range(20):
            eq(c.get("f%d" % i), None, "flushed f%d" % i)
        eq(c.set("after", "v"), "STORED")
        eq(c.get("after"), b"v", "items set after flush are kept")
        eq(c.cmd("flush_all 0"), "OK")
        eq(c.get("after"), None)
        eq(c.cmd("flush_all abc"), BAD_EXPTIME)
        eq(c.add("x", "1"), "STORED", "add after flush")


@test
def flush_all_delay():
    with srv() as s, s.client() as c:
        for i in range(5):
            c.set("fd%d" % i, "v")
        eq(c.cmd("flush_all 2"), "OK")
        for i in range(5):
            eq(c.get("fd%d" % i), b"v", "item survives flush_all 2 at first")
        check(wait_until(lambda: c.get("fd0") is None, timeout=4.5),
              "delayed flush never happened")
        for i in range(5):
            eq(c.get("fd%d" % i), None)


@test
def flush_all_noreply():
    with srv() as s, s.client() as c:
        c.set("a", "v")
        c.send(b"flush_all noreply\r\n")
        assert_alive(c)
        eq(c.get("a"), None, "flush_all noreply flushed")
        c.set("a", "v")
        c.send(b"flush_all 0 noreply\r\n")
        assert_alive(c)
        eq(c.get("a"), None)
        st = c.stats()
        check(int(st["cmd_flush"]) >= 2, "cmd_flush counted")


# --------------------------------------------------------------------------
# misc commands
# --------------------------------------------------------------------------

@test
def version_verbosity_quit():
    with srv() as s, s.client() as c:
        v = c.cmd("version")
        check(v.startswith("VERSION ") and len(v) > 8, "version: %r" % v)
        eq(c.cmd("verbosity 1"), "OK")
        eq(c.cmd("verbosity 0"), "OK")
        eq(c.cmd("verbosity"), BAD_FORMAT)
        c.send(b"verbosity 1 noreply\r\n")
        assert_alive(c)
        c.send(b"quit\r\n")
        check(c.wait_closed(3.0), "quit closes the connection")
        with s.client() as c2:
            assert_alive(c2)


@test
def unknown_commands():
    with srv() as s, s.client() as c:
        eq(c.cmd("foo"), "ERROR")
        eq(c.cmd("GET a"), "ERROR", "commands are case sensitive")
        eq(c.cmd(""), BAD_FORMAT, "empty line")
        eq(c.cmd("set a 0 0"), BAD_FORMAT, "too few tokens")
        assert_alive(c)


@test
def bad_storage_lines():
    with srv() as s, s.client() as c:
        eq(c.cmd("set a 0 0 -1"), BAD_FORMAT, "negative length")
        eq(c.cmd("set a 0 0 abc"), BAD_FORMAT, "non-numeric length")
        assert_alive(c)
        # bad data chunk: the block is not terminated by \r\n
        c.send(b"set a 0 0 1\r\nx\r\n")
        eq(c.read_line(), b"STORED")
        c.send(b"set a 0 0 3\r\nabcde\r\n")
        eq(c.read_line(), BAD_CHUNK.encode(), "bad data chunk")
        # memcached parses the leftover "\r\n" as a line: 1.6.45 says
        # it is too short to be a command (1.6.18: ERROR)
        eq(c.read_line(), BAD_FORMAT.encode(), "leftover after bad chunk")
        assert_alive(c)
        eq(c.get("a"), b"x", "bad data chunk leaves the old item")


@test
def bad_flags_first_line():
    """The error line is common; what follows differs (see slabcache_only)."""
    with srv() as s:
        for line in (b"set a abc 0 1", b"set a 0 abc 1", b"set a -1 0 1",
                     b"cas a 0 0 1 abc", b"set " + b"k" * 251 + b" 0 0 1"):
            with s.client() as c:
                c.send(line + b"\r\nx\r\n")
                eq(c.read_line(), BAD_FORMAT.encode(), line[:40])


@test
def slabcache_swallows_rejected_data_block():
    """As memcached 1.6.45 does (test_differential.py compares it there);
    1.6.18 read the block as commands."""
    slabcache_only()
    with srv() as s:
        for line in (b"set a abc 0 7", b"set a 0 abc 7", b"add a -1 0 7",
                     b"cas a 0 0 7 abc", b"cas a 0 0 7 -1",
                     b"set " + b"k" * 251 + b" 0 0 7",
                     b"append " + b"k" * 300 + b" 0 0 7"):
            with s.client() as c:
                # data block "version" would answer VERSION if parsed
                c.send(line + b"\r\nversion\r\nget a\r\n")
                data, _ = c.read_available(idle=0.3)
                eq(data, BAD_FORMAT.encode() + b"\r\nEND\r\n",
                   "swallowed block for %r" % line[:40])


@test
def key_length_limits():
    with srv() as s, s.client() as c:
        k250 = "k" * 250
        k251 = "k" * 251
        eq(c.set(k250, "v"), "STORED", "250-byte key")
        eq(c.get(k250), b"v")
        r = c.get_multi([k250], verb="gets")
        check(k250 in r, "gets 250-byte key")
        eq(c.cmd("get " + k251), BAD_FORMAT, "get 251-byte key")
        eq(c.cmd("get a " + k251), BAD_FORMAT, "multi-get with 251-byte key")
        eq(c.cmd("delete " + k251), BAD_FORMAT)
        eq(c.cmd("incr " + k251 + " 1"), BAD_FORMAT)
        eq(c.cmd("decr " + k251 + " 1"), BAD_FORMAT)
        eq(c.cmd("touch " + k251 + " 1"), BAD_FORMAT)
        eq(c.cmd("delete " + k250), "DELETED")
    with srv() as s, s.client() as c:
        c.send(("set %s 0 0 1\r\n" % k251).encode())
        eq(c.read_line(), BAD_FORMAT.encode(), "set 251-byte key")


@test
def noreply_everywhere():
    with srv() as s, s.client() as c:
        c.set("cnt", "5")
        _, cas0 = c.gets("cnt")
        cmds = [
            b"set a 0 0 1 noreply\r\n1\r\n",
            b"add b 0 0 1 noreply\r\n2\r\n",
            b"add b 0 0 1 noreply\r\n9\r\n",           # NOT_STORED silenced
            b"replace a 0 0 2 noreply\r\n11\r\n",
            b"replace zz 0 0 1 noreply\r\n1\r\n",      # NOT_STORED silenced
            b"append a 0 0 1 noreply\r\nx\r\n",
            b"prepend a 0 0 1 noreply\r\ny\r\n",
            b"cas cnt 0 0 1 %d noreply\r\n7\r\n" % cas0,
            b"cas cnt 0 0 1 %d noreply\r\n8\r\n" % cas0,  # EXISTS silenced
            b"cas nokey 0 0 1 1 noreply\r\n8\r\n",       # NOT_FOUND silenced
            b"incr cnt 3 noreply\r\n",
            b"decr cnt 1 noreply\r\n",
            b"incr nokey 1 noreply\r\n",
            b"set d 0 0 1 noreply\r\nd\r\n",
            b"delete d noreply\r\n",
            b"delete d noreply\r\n",
            b"touch a 100 noreply\r\n",
            b"touch nokey 100 noreply\r\n",
            b"verbosity 0 noreply\r\n",
        ]
        for cmd in cmds:
            c.send(cmd)
            c.send(b"version\r\n")
            line = c.read_line()
            check(line.startswith(b"VERSION "),
                  "noreply %r produced output %r" % (cmd, line))
        r = c.get_multi(["a", "b", "cnt", "d"])
        eq(r["a"][0], b"y11x", "noreply storage effects")
        eq(r["b"][0], b"2")
        # 7 -> incr 3 -> "10" -> decr 1 -> "9 " (in-place, space padded)
        eq(r["cnt"][0], b"9 ", "cas/incr/decr noreply effects")
        check("d" not in r, "delete noreply effect")
        c.send(b"flush_all noreply\r\nget a\r\n")
        eq(c.read_line(), b"END", "flush_all noreply")


@test
def noreply_errors_and_suppression():
    """memcached 1.6.18 also suppresses error replies on noreply lines."""
    with srv() as s, s.client() as c:
        c.set("s", "abc")
        c.send(b"incr s 1 noreply\r\nincr s abc noreply\r\nversion\r\n")
        check(c.read_line().startswith(b"VERSION "),
              "errors of noreply incr are silent")


# --------------------------------------------------------------------------
# pipelining, binary safety, sizes
# --------------------------------------------------------------------------

@test
def pipelining_many_commands():
    with srv() as s, s.client() as c:
        n = 200
        req = b""
        for i in range(n):
            req += b"set p%d 0 0 %d\r\n%s\r\n" % (i, len(str(i)), str(i).encode())
        for i in range(n):
            req += b"get p%d\r\n" % i
        req += b"incr p5 10\r\ndelete p6\r\nget p6\r\nversion\r\n"
        c.send(req)
        for i in range(n):
            eq(c.read_line(), b"STORED", "pipelined set %d" % i)
        for i in range(n):
            eq(c.read_line(), b"VALUE p%d 0 %d" % (i, len(str(i))))
            eq(c.read_line(), str(i).encode())
            eq(c.read_line(), b"END")
        eq(c.read_line(), b"15")
        eq(c.read_line(), b"DELETED")
        eq(c.read_line(), b"END")
        check(c.read_line().startswith(b"VERSION "))


@test
def pipelining_split_sends():
    with srv() as s, s.client() as c:
        msg = b"set split 3 0 10\r\n0123456789\r\nget split\r\n"
        for i in range(len(msg)):
            c.send(msg[i:i + 1])
            if i % 3 == 0:
                time.sleep(0.005)
        eq(c.read_line(), b"STORED")
        r = c.read_values()
        eq(r["split"][:2], (b"0123456789", 3), "split command")
        # split exactly between \r and \n, and inside the data block
        c.send(b"set s2 0 0 4\r")
        time.sleep(0.05)
        c.send(b"\nab")
        time.sleep(0.05)
        c.send(b"cd\r")
        time.sleep(0.05)
        c.send(b"\n")
        eq(c.read_line(), b"STORED")
        eq(c.get("s2"), b"abcd")


@test
def bare_newline_terminators():
    with srv() as s, s.client() as c:
        c.send(b"set nl 0 0 2\nab\r\nget nl\n")
        eq(c.read_line(), b"STORED", "command ended by bare \\n")
        eq(c.read_values()["nl"][0], b"ab")


@test
def binary_safe_values():
    with srv() as s, s.client() as c:
        allbytes = bytes(range(256))
        eq(c.set("bin", allbytes), "STORED")
        eq(c.get("bin"), allbytes, "all 256 byte values")
        tricky = b"line1\r\nEND\r\nVALUE x 0 1\r\n\r\n\x00\x00\r"
        eq(c.set("tricky", tricky), "STORED")
        eq(c.get("tricky"), tricky, "embedded CRLF/END")
        big = bytes(range(256)) * 400
        eq(c.set("bigbin", big), "STORED")
        eq(c.get("bigbin"), big)
        r = c.get_multi(["bin", "tricky", "bigbin"])
        eq([r[k][0] for k in ("bin", "tricky", "bigbin")], [allbytes, tricky, big])


@test
def large_values():
    with srv("-I", "1m") as s, s.client(timeout=10) as c:
        v = bytes((i * 7 + 3) & 0xFF for i in range(1000000))
        eq(c.set("big", v), "STORED", "1000000-byte value")
        eq(c.get("big"), v, "1000000-byte roundtrip")
        too_big = b"z" * (2 * 1024 * 1024)
        # memcached only answers once the whole block is swallowed
        c.send(b"set huge 0 0 %d\r\n" % len(too_big) + too_big + b"\r\n")
        eq(c.read_line().decode(), TOO_LARGE, "2 MiB value")
        assert_alive(c)
        eq(c.get("huge"), None)
        eq(c.get("big"), v, "earlier item intact")
        # a too-large set replaces nothing but memcached deletes old key
        c.send(b"set big 0 0 %d\r\n" % len(too_big) + too_big + b"\r\n")
        eq(c.read_line().decode(), TOO_LARGE)
        eq(c.get("big"), None, "failed overwrite removes the old item")
        st = c.stats("settings")
        eq(st.get("item_size_max"), "1048576", "item_size_max")


@test
def item_size_max_512k():
    with srv("-I", "512k") as s, s.client() as c:
        eq(c.set("a", b"x" * 500000), "STORED")
        eq(len(c.get("a")), 500000)
        c.send(b"set b 0 0 600000\r\n" + b"y" * 600000 + b"\r\n")
        eq(c.read_line().decode(), TOO_LARGE)
        assert_alive(c)


# --------------------------------------------------------------------------
# stats
# --------------------------------------------------------------------------

GENERAL_STATS = """pid uptime time version pointer_size rusage_user rusage_system
max_connections curr_connections total_connections rejected_connections
cmd_get cmd_set cmd_flush cmd_touch get_hits get_misses get_expired
get_flushed delete_misses delete_hits incr_misses incr_hits decr_misses
decr_hits cas_misses cas_hits cas_badval touch_hits touch_misses
bytes_read bytes_written limit_maxbytes threads bytes curr_items
total_items evictions reclaimed""".split()


@test
def stats_fields():
    with srv("-m", "32", "-t", "3") as s, s.client() as c:
        st = c.stats()
        missing = [k for k in GENERAL_STATS if k not in st]
        eq(missing, [], "missing stats fields")
        eq(int(st["pid"]), s.pid, "pid")
        check(0 <= int(st["uptime"]) < 60, "uptime")
        check(abs(int(st["time"]) - time.time()) < 5, "time")
        eq(st["version"], c.version()[len("VERSION "):], "version")
        eq(st["limit_maxbytes"], str(32 * 1024 * 1024), "limit_maxbytes")
        eq(st["threads"], "3", "threads")
        eq(st["curr_items"], "0")
        eq(st["evictions"], "0")
        check(int(st["curr_connections"]) >= 1, "curr_connections")
        check(int(st["total_connections"]) >= 1, "total_connections")
        for k in GENERAL_STATS:
            if k not in ("version", "rusage_user", "rusage_system"):
                check(st[k].isdigit(), "stat %s numeric: %r" % (k, st[k]))


@test
def stats_counters_move():
    with srv() as s, s.client() as c:
        eq(c.cmd("stats reset"), "RESET")
        st = c.stats()
        for k in ("cmd_get", "get_hits", "get_misses", "cmd_set"):
            eq(st[k], "0", "%s after reset" % k)
        c.set("a", "1")
        c.set("b", "22")
        st = c.stats()
        eq(st["cmd_set"], "2")
        eq(st["curr_items"], "2")
        eq(st["total_items"], "2")
        b2 = int(st["bytes"])
        check(b2 > 0, "bytes > 0")
        c.get("a")
        st = c.stats()
        eq((st["get_hits"], st["get_misses"], st["cmd_get"]), ("1", "0", "1"),
           "after hit")
        c.get("nokey")
        st = c.stats()
        eq((st["get_hits"], st["get_misses"], st["cmd_get"]), ("1", "1", "2"),
           "after miss")
        c.get_multi(["a", "b", "zz"])
        st = c.stats()
        eq((st["get_hits"], st["get_misses"], st["cmd_get"]), ("3", "2", "5"),
           "multi-get counts per key")
        c.cmd("delete a")
        c.cmd("delete a")
        st = c.stats()
        eq((st["delete_hits"], st["delete_misses"]), ("1", "1"))
        eq(st["curr_items"], "1", "curr_items after delete")
        check(int(st["bytes"]) < b2, "bytes shrink after delete")
        c.set("n", "1")
        c.cmd("incr n 1")
        c.cmd("incr zz 1")
        c.cmd("decr n 1")
        c.cmd("decr zz 1")
        c.cmd("decr zz 1")
        st = c.stats()
        eq((st["incr_hits"], st["incr_misses"], st["decr_hits"],
            st["decr_misses"]), ("1", "1", "1", "2"), "incr/decr counters")
        _, cas = c.gets("n")
        c.cas("n", "5", cas)
        c.cas("n", "6", cas)
        c.cas("zz", "6", 1)
        st = c.stats()
        eq((st["cas_hits"], st["cas_badval"], st["cas_misses"]), ("1", "1", "1"),
           "cas counters")
        c.cmd("touch n 100")
        c.cmd("touch zz 100")
        st = c.stats()
        eq((st["touch_hits"], st["touch_misses"], st["cmd_touch"]),
           ("1", "1", "2"), "touch counters")
        c.cmd("flush_all")
        st = c.stats()
        eq(st["cmd_flush"], "1")
        check(int(st["bytes_read"]) > 0 and int(st["bytes_written"]) > 0,
              "bytes_read/bytes_written")
        c.set("e", "v", exptime=-1)
        c.get("e")
        st = c.stats()
        check(int(st["get_misses"]) >= 3, "expired get counts as a miss")


@test
def stats_connections():
    with srv() as s, s.client() as c:
        # the harness's readiness probe connection may still be counted
        def settled():
            a = c.stats()["curr_connections"]
            time.sleep(0.1)
            return a == c.stats()["curr_connections"]
        check(wait_until(settled, timeout=3), "curr_connections unstable")
        st = c.stats()
        cur, tot = int(st["curr_connections"]), int(st["total_connections"])
        c2 = s.client()
        assert_alive(c2)
        st = c.stats()
        eq(int(st["curr_connections"]), cur + 1, "curr_connections +1")
        eq(int(st["total_connections"]), tot + 1, "total_connections +1")
        c2.close()
        check(wait_until(lambda: int(c.stats()["curr_connections"]) == cur,
                         timeout=3), "curr_connections back after close")


@test
def stats_settings():
    with srv("-m", "16", "-c", "200", "-f", "1.5", "-n", "64", "-I", "2m",
             "-R", "7", "-t", "2") as s, s.client() as c:
        st = c.stats("settings")
        eq(st.get("maxbytes"), str(16 * 1024 * 1024), "maxbytes")
        eq(st.get("maxconns"), "200", "maxconns")
        eq(st.get("tcpport"), str(s.port), "tcpport")
        eq(st.get("udpport"), "0", "udpport")
        eq(st.get("growth_factor"), "1.50", "growth_factor")
        eq(st.get("chunk_size"), "64", "chunk_size")
        eq(st.get("item_size_max"), str(2 * 1024 * 1024), "item_size_max")
        eq(st.get("reqs_per_event"), "7", "reqs_per_event")
        eq(st.get("num_threads"), "2", "num_threads")
        eq(st.get("evictions"), "on", "evictions")
        eq(st.get("cas_enabled"), "yes", "cas_enabled")
        eq(st.get("shutdown_command"), "no", "shutdown_command")
    with srv("-M", "-C", "-A") as s, s.client() as c:
        st = c.stats("settings")
        eq(st.get("evictions"), "off", "-M evictions")
        eq(st.get("cas_enabled"), "no", "-C")
        eq(st.get("shutdown_command"), "yes", "-A")


def slab_stats(c):
    st = c.stats("slabs")
    classes = {}
    for k, v in st.items():
        if ":" in k:
            cls, name = k.split(":", 1)
            classes.setdefault(int(cls), {})[name] = int(v)
    return st, classes


@test
def stats_slabs_and_items():
    with srv() as s, s.client() as c:
        c.set("small", "x")
        c.set("large", "y" * 5000)
        st, classes = slab_stats(c)
        check("active_slabs" in st and "total_malloced" in st,
              "active_slabs/total_malloced present: %r" % sorted(st)[:5])
        eq(int(st["active_slabs"]), len(classes), "active_slabs")
        check(int(st["active_slabs"]) >= 2, "two size classes in use")
        check(int(st["total_malloced"]) > 0, "total_malloced")
        used = 0
        sizes = []
        for cls, f in sorted(classes.items()):
            for name in ("chunk_size", "total_pages", "used_chunks"):
                check(name in f, "slab %d missing %s" % (cls, name))
            used += f["used_chunks"]
            sizes.append(f["chunk_size"])
            check(f["total_pages"] >= 1, "total_pages")
        eq(used, 2, "used_chunks total")
        eq(sizes, sorted(sizes), "chunk sizes increase with class id")
        its = c.stats("items")
        item_classes = set()
        for k, v in its.items():
            parts = k.split(":")
            check(parts[0] == "items" and len(parts) == 3, "items key %r" % k)
            if parts[2] == "number":
                item_classes.add(int(parts[1]))
                check(int(v) >= 1, "items number")
        check(len(item_classes) >= 2, "stats items lists used classes")
        check(item_classes <= set(classes), "item classes are slab classes")
        for cls in item_classes:
            for f in ("number", "age", "evicted", "outofmemory"):
                check("items:%d:%s" % (cls, f) in its, "items:%d:%s" % (cls, f))


@test
def stats_reset_sizes_conns():
    with srv() as s, s.client() as c:
        c.get("x")
        eq(c.cmd("stats reset"), "RESET")
        eq(c.stats()["get_misses"], "0", "reset clears get_misses")
        # stats sizes: well-formed STAT lines then END (memcached: disabled)
        sz = c.stats("sizes")
        check(isinstance(sz, dict), "stats sizes")
        conns = c.stats("conns")
        local_port = c.sock.getsockname()[1]
        addrs = [v for k, v in conns.items() if k.endswith(":addr")]
        check(any(v.endswith(":%d" % local_port) for v in addrs),
              "own connection listed in stats conns: %r" % addrs)
        check(any(k.endswith(":state") for k in conns), "state fields")
        eq(c.cmd("stats nosuchthing"), "ERROR", "unknown stats group")
        assert_alive(c)


# --------------------------------------------------------------------------
# shutdown
# --------------------------------------------------------------------------

@test
def shutdown_disabled():
    with srv() as s, s.client() as c:
        eq(c.cmd("shutdown"), "SERVER_ERROR: shutdown not enabled")   # memcached 1.6.45
        assert_alive(c)
        check(s.alive(), "server still running")


@test
def shutdown_enabled():
    with srv("-A") as s, s.client() as c:
        c.send(b"shutdown\r\n")
        check(c.wait_closed(5.0), "connection closed after shutdown")
        code = s.wait_exit(5.0)
        check(code is not None, "process exited after shutdown")
        check(code == 0, "exit status %r" % code)


if __name__ == "__main__":
    require_binary()
    run_all()
