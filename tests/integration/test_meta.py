#!/usr/bin/env python3
"""Meta commands, what the byte-for-byte differential test cannot pin down:
TTLs (t) and counters after meta traffic, each compared with memcached
1.6.18 run beside the server under test. Each request is followed by mn
and its answer read up to MN, so timing never decides what is compared. TTLs may differ by one second (the
two servers' clocks tick apart), nothing else may.

  - flags apply in the order sent: a t before a T shows the old TTL, after
    it the new one; for a created item the later of N and T sets the TTL;
  - stats after mg/ms/md/ma traffic move as memcached's do.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_meta.py
Exit 77 (skip) when memcached is missing or is the server under test.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sclib  # noqa
from sclib import Server, HOST, is_memcached, test, run_all, eq, check  # noqa

REF = os.environ.get("MEMCACHED", "/usr/bin/memcached")


def script(binary, lines, stats=False):
    """Send each line followed by mn, collect its answer up to MN (not
    until idle: a slow sanitizer build must not shift answers)."""
    out = []
    with Server("-m", "64", binary=binary) as s:
        c = s.client()
        c.sock.settimeout(10)
        for line in lines:
            c.send(line + b"mn\r\n")
            data = b""
            want = line.count(b"mn\r\n") + 1
            while data.count(b"MN\r\n") < want or not data.endswith(b"MN\r\n"):
                chunk = c.sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            check(data.endswith(b"MN\r\n"), "no MN after %r: %r" % (line, data))
            out.append(data[:-len(b"MN\r\n")])
        st = c.stats() if stats else None
    return out, st


def ttls(data):
    return [int(x) for x in re.findall(rb" t(-?\d+)", data)]


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1 for x, y in zip(a, b))


def ttls_like_memcached(lines):
    """The replies of the server under test to lines, checked against
    memcached's: the same, with TTLs within a second."""
    ref, _ = script(REF, lines)
    oth, _ = script(None, lines)
    for i, (a, b) in enumerate(zip(ref, oth)):
        check(close(ttls(a), ttls(b)) and re.sub(rb"-?\d+", b"#", a) ==
              re.sub(rb"-?\d+", b"#", b),
              "line %r: memcached %r, other %r" % (lines[i], a, b))
    return oth


@test
def t_before_and_after_T():
    lines = [b"ms k 1 T100\r\nx\r\n", b"mg k t T500\r\n", b"mg k T600 t\r\n",
             b"mg new N300 t T600\r\n", b"mg new t\r\n",
             b"mg new2 T600 N300 t\r\n",
             b"ma n N0 J1 T200 t\r\n", b"ma n t T700\r\n", b"ma n t\r\n",
             b"ma m T700 N50 t\r\n"]
    oth = ttls_like_memcached(lines)
    # and the TTLs are the ones meant, not merely equal to memcached's
    check(close(ttls(oth[1]), [100]), "t before T: the old TTL: %r" % oth[1])
    check(close(ttls(oth[2]), [600]), "t after T: the new TTL: %r" % oth[2])
    check(close(ttls(oth[3]) + ttls(oth[4]), [300, 600]), "N, t, then T: %r %r"
          % (oth[3], oth[4]))
    check(close(ttls(oth[5]), [300]), "T then N on a created item: %r" % oth[5])
    check(close(ttls(oth[7]) + ttls(oth[8]), [200, 700]), "ma t before T: %r %r"
          % (oth[7], oth[8]))
    check(close(ttls(oth[9]), [50]), "ma T then N on a created item: %r" % oth[9])


@test
def t_before_N_on_a_vivified_item():
    """A miss that N vivifies is created with no TTL, which N then sets:
    a t sent before the N shows -1, after it the N's TTL (both memcached
    1.6.18 and 1.6.45; slabcache showed the N's TTL either way)."""
    lines = [b"mg v1 t N100 v\r\n", b"mg v2 N100 t\r\n",
             b"ma c1 t N100\r\n", b"ma c2 N100 t\r\n", b"mg v1 t\r\n"]
    oth = ttls_like_memcached(lines)
    wanted = [[-1], [100], [-1], [100], [100]]
    for i, w in enumerate(wanted):
        check(close(ttls(oth[i]), w), "%r: %r, wanted t%d" % (lines[i], oth[i], w[0]))


@test
def counters_after_meta_traffic():
    lines = [b"ms a 1\r\nx\r\n", b"mg a v\r\n", b"mg nope v\r\n",
             b"mg a T30 v\r\n", b"mg nope2 T30\r\n", b"mg viv N30\r\n",
             b"ms a 1 C1\r\ny\r\n", b"ms none 1 C5\r\ny\r\n", b"mg a c\r\n",
             b"md a C1\r\n", b"md nope\r\n", b"md a\r\n",
             b"ma c\r\n", b"ma c N0 J5\r\n", b"ma c MD\r\n", b"me c\r\n",
             b"mn\r\n"]
    names = ("cmd_get", "get_hits", "get_misses", "cmd_touch", "touch_hits",
             "touch_misses", "cmd_set", "cas_hits", "cas_badval", "cas_misses",
             "delete_hits", "delete_misses", "incr_hits", "incr_misses",
             "decr_hits", "decr_misses", "cmd_meta")
    _, ref = script(REF, lines, stats=True)
    _, oth = script(None, lines, stats=True)
    eq({n: oth[n] for n in names}, {n: ref[n] for n in names},
       "counters after the same meta traffic")


if __name__ == "__main__":
    sclib.require_reference(REF)
    run_all()
