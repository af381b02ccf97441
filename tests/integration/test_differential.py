#!/usr/bin/env python3
"""Differential test: the same scripts against memcached 1.6.18 and
slabcache must produce the same reply bytes.

Run: SLABCACHE=path/to/slabcache python3 tests/integration/test_differential.py [script names]

Environment:
  SLABCACHE      server under test (the "other" side)
  DIFF_AGAINST   overrides SLABCACHE for the other side (e.g. /usr/bin/memcached
                 to prove the machinery while slabcache does not exist)
  MEMCACHED      reference binary (default /usr/bin/memcached)
  DIFF_OTHER_ARGS extra args for the other side only (to demonstrate that a
                 real difference is detected, e.g. DIFF_OTHER_ARGS="-C")
  DIFF_JOBS      scripts run in parallel (default 8)
  DIFF_SHOW      print every element and memcached's (normalized) reply

Exit 77 (skip) when memcached is missing or when the server under test is
memcached itself and DIFF_AGAINST is not set.

Normalization before comparison: the cas field of VALUE lines, the text after
"VERSION ", and any run of STAT lines (stats contents are server specific;
both must answer STAT lines terminated by END).

Elements wrapped in Newer(...) are answered as memcached 1.6.45 answers them,
where 1.6.18 answered differently: they are compared with the newest memcached
($MEMCACHED_NEWEST, default /opt/memcached-newest/bin/memcached, built by
scripts/build-memcached-newest.sh) when it is installed, and not compared
otherwise.

Storage commands rejected while their length field parses (key > 250
bytes, non-numeric or out-of-range flags/exptime/cas) have their data block
swallowed, as memcached 1.6.45 does (script storage_rejected_swallowed,
compared with it only): memcached 1.6.18 parsed the block as commands.
"""

import concurrent.futures
import contextlib
import os
import re
import select
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sclib  # noqa
from sclib import Server, HOST, is_memcached  # noqa

IDLE = 0.2          # a reply is complete after this much silence
MAX_WAIT = 3.0      # per chunk
SLOW_IDLE = 1.0     # the second look at replies that differ
FLAGS = ["-m", "64", "-I", "1m", "-t", "2"]


class Sleep(float):
    """A script element: pause this many seconds (no bytes sent)."""


class Newer(bytes):
    """A script element whose answer memcached 1.6.45 changed; slabcache
    answers as 1.6.45. Its reply is compared with the newest memcached's
    ($MEMCACHED_NEWEST, default /opt/memcached-newest/bin/memcached, run
    beside the others through the whole script) when that is installed,
    and sent but not compared otherwise."""


NEWEST = os.environ.get("MEMCACHED_NEWEST", "/opt/memcached-newest/bin/memcached")


class Split:
    """A script element: send data in pieces of `size` bytes with short
    pauses, then read the whole reply."""

    def __init__(self, data, size=1, pause=0.003):
        self.data, self.size, self.pause = data, size, pause


class NewerSplit(Split):
    """A Split element whose answer memcached 1.6.45 changed (as Newer)."""


def is_newer(el):
    return isinstance(el, (Newer, NewerSplit))


def big(n, seed=0):
    return bytes((i * 131 + seed) & 0xFF for i in range(n))


K250 = b"k" * 250
K251 = b"k" * 251
ALLBYTES = bytes(range(256))
V100K = big(100000)

# Each script runs on a fresh connection to a fresh pair of servers.
# Elements: bytes (sent as one send, then the reply is read until idle),
# Split, Sleep. "{CAS}" in bytes is replaced by the cas value from the last
# gets/gats reply on that server.
SCRIPTS = {
    "set_get_basic": [
        b"set a 0 0 1\r\nx\r\n",
        b"get a\r\n",
        b"set a 7 0 5\r\nhello\r\nget a b\r\n",
        b"set empty 0 0 0\r\n\r\nget empty\r\n",
        b"get nokey\r\n",
        b"set a 4294967295 0 1\r\nz\r\nget a\r\n",
        b"set a 0 0 1 garbage\r\ny\r\nget a\r\n",
        b"set a 0 0 1   \r\nw\r\nget a\r\n",
        Newer(b" set a 0 0 1\r\nv\r\nget  a \r\n"),
        b"set nl 0 0 2\nab\r\nget nl\n",
    ],
    "add_replace": [
        b"add a 0 0 1\r\n1\r\n",
        b"add a 0 0 1\r\n2\r\n",
        b"get a\r\n",
        b"replace b 0 0 1\r\n1\r\n",
        b"replace a 3 0 3\r\nnew\r\nget a b\r\n",
        b"delete a\r\nadd a 0 0 1\r\n3\r\nget a\r\n",
    ],
    "append_prepend": [
        b"append a 0 0 1\r\nx\r\nprepend a 0 0 1\r\nx\r\nget a\r\n",
        b"set a 42 0 3\r\nmid\r\n",
        b"append a 0 0 4\r\n_end\r\nprepend a 9 -1 6\r\nstart_\r\nget a\r\n",
        b"append a 0 0 0\r\n\r\nget a\r\n",
        Newer(b"append a 0 0 3\r\nabcde\r\nget a\r\n"),
    ],
    "cas": [
        b"set c 0 0 2\r\nv1\r\n",
        b"gets c\r\n",
        b"cas c 0 0 2 999999\r\nv2\r\n",
        b"cas c 0 0 2 {CAS}\r\nv2\r\n",
        b"gets c\r\n",
        b"cas c 5 0 2 {CAS}\r\nv3\r\ncas c 0 0 2 {CAS}\r\nv4\r\n",
        b"gets c\r\n",
        b"cas nokey 0 0 1 1\r\nx\r\n",
        Newer(b"cas c 0 0 1\r\ny\r\n"),
        Newer(b"cas\r\n"),
    ],
    "get_multi": [
        b"set a 1 0 1\r\nA\r\nset b 2 0 2\r\nBB\r\nset c 3 0 3\r\nCCC\r\n",
        b"get a b c d\r\n",
        b"get d c b a a\r\n",
        b"gets a b x c\r\n",
        b"get x y z\r\n",
        Newer(b"get\r\n"), Newer(b"gets\r\n"),
        b"get " + b" ".join(b"k%d" % i for i in range(200)) + b" a\r\n",
    ],
    "gat_gats_touch": [
        b"set g 5 0 2\r\ngv\r\n",
        b"gat 100 g nokey\r\n",
        b"gats 100 g\r\n",
        Newer(b"gat g\r\n"), b"gat abc g\r\n", Newer(b"gat\r\n"), Newer(b"gats 1\r\n"),
        Newer(b"touch g 100\r\ntouch nokey 100\r\ntouch g abc\r\ntouch g\r\n"),
        # an extra token (a TTL long enough not to expire between the two
        # servers' runs of the next line, which are timed differently)
        b"touch g 100 2\r\n",
        b"gat -1 g\r\nget g\r\n",
        b"set t 0 0 1\r\nt\r\ntouch t -1\r\nget t\r\n",
    ],
    "delete": [
        b"set d 0 0 1\r\nd\r\ndelete d\r\ndelete d\r\nget d\r\n",
        b"set d 0 0 1\r\nd\r\ndelete d 0\r\n",
        Newer(b"delete d 5\r\ndelete\r\ndelete a b c\r\ndelete a noreply x\r\n"),
    ],
    "incr_decr": [
        b"set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 3\r\nget n\r\n",
        Newer(b"incr n 0\r\nincr nokey 1\r\ndecr nokey 1\r\nincr n\r\nincr\r\n"),
        b"set g 0 0 2\r\n99\r\nincr g 1\r\nget g\r\n",
        b"set w 0 0 20\r\n18446744073709551615\r\nincr w 1\r\nget w\r\n",
        b"incr w 5\r\nget w\r\n",
        b"set d 0 0 3\r\n100\r\ndecr d 1\r\nget d\r\ndecr d 1000\r\nget d\r\n",
        b"decr d 1\r\n",
        b"set n 0 0 1\r\n5\r\nincr n 18446744073709551615\r\n",
        Newer(b"incr n 00018446744073709551615\r\nincr n +1\r\n"),
        b"incr n 18446744073709551616\r\nincr n -1\r\nincr n abc\r\n",
        b"decr n abc\r\nincr n 1 garbage\r\n",
        b"set s 0 0 3\r\nabc\r\nincr s 1\r\ndecr s 1\r\n",
        b"set s 0 0 2\r\n-5\r\nincr s 1\r\n",
        b"set s 0 0 21\r\n184467440737095516150\r\nincr s 1\r\n",
        b"set s 0 0 0\r\n\r\nincr s 1\r\n",
        b"set s 0 0 3\r\n 12\r\nincr s 1\r\nget s\r\n",
        b"set s 0 0 4\r\n1 2 \r\nincr s 1\r\nget s\r\n",
        b"incr " + K251 + b" 1\r\ndecr " + K250 + b" 1\r\n",
    ],
    "expiry_immediate": [
        b"set neg 0 -1 1\r\nx\r\nget neg\r\n",
        b"set past 0 1000000000 1\r\nx\r\nget past\r\n",
        b"set fut 0 2000000000 1\r\nx\r\nget fut\r\n",
        b"set long 0 100 1\r\nx\r\nget long\r\n",
        b"add neg 0 0 1\r\ny\r\nget neg\r\n",
    ],
    # memcached's clock ticks once a second, so an item with exptime N
    # expires between N-1 and N+1 seconds after the set: leave margins.
    "expiry_sleep": [
        b"set e3 0 3 1\r\nx\r\nset e100 0 100 1\r\ny\r\nset t 0 3 1\r\nz\r\n",
        b"touch t 100\r\nget e3 e100 t\r\n",
        Sleep(4.3),
        b"get e3 e100 t\r\n",
        b"add e3 0 0 1\r\nn\r\nget e3\r\n",
    ],
    # memcached keeps exptime in 32 bits: an absolute time past 2038
    # wraps negative, i.e. the item is already expired.
    "exptime_int32_overflow": [
        b"set fut 0 4000000000 1\r\nx\r\nget fut\r\n",
    ],
    "flush_all": [
        b"set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\n",
        b"flush_all\r\nget a b\r\n",
        b"set a 0 0 1\r\nx\r\nget a\r\n",
        b"flush_all 0\r\nget a\r\n",
        b"flush_all abc\r\nflush_all -1\r\nflush_all 1 2\r\n",
        b"set a 0 0 1\r\nx\r\nflush_all noreply\r\nget a\r\n",
        b"flush_all 0 noreply\r\nflush_all noreply x\r\nflush_all abc noreply\r\n",
        b"flush_all 100\r\n",
    ],
    "version_verbosity": [
        b"version\r\nversion extra\r\nversion noreply\r\n",
        Newer(b"verbosity 1\r\nverbosity 0\r\nverbosity\r\nverbosity abc\r\n"),
        Newer(b"verbosity 1 2 3\r\nverbosity 1 noreply\r\nverbosity noreply\r\n"),
        b"verbosity abc noreply\r\nversion\r\n",
    ],
    "cache_memlimit": [
        b"cache_memlimit 100\r\ncache_memlimit\r\ncache_memlimit abc\r\n",
        b"cache_memlimit 100 noreply\r\nversion\r\n",
    ],
    "quit": [
        b"set a 0 0 1\r\nx\r\nquit\r\n",
    ],
    "quit_extra": [
        b"quit extra\r\n",
    ],
    "quit_pipelined": [
        b"get a\r\nquit\r\nget a\r\n",
    ],
    "shutdown_disabled": [
        Newer(b"shutdown\r\nshutdown graceful\r\nshutdown extra\r\nversion\r\n"),
    ],
    "unknown_and_empty": [
        b"foo\r\n", b"GET a\r\n", Newer(b"\r\n"), Newer(b"\n"), Newer(b"foo noreply\r\n"),
        Newer(b"set\r\nset a\r\nset a 0\r\nset a 0 0\r\n"),
        Newer(b"add\r\nreplace a 0\r\nappend a 0 0\r\nprepend\r\n"),
        Newer(b"set\ta 0 0 1\r\nx\r\n"),
        b"lru_crawler\r\nmisbehave\r\n",
        b"stats noreply\r\n",
    ],
    "bad_lengths": [
        Newer(b"set a 0 0 -1\r\nx\r\n"),
        Newer(b"set a 0 0 abc\r\nx\r\n"),
        Newer(b"set a 0 0 01\r\nx\r\nset a 0 0 +1\r\ny\r\nget a\r\n"),
        Newer(b"set a 0 0 -1 noreply\r\nset a 0 0 abc noreply\r\nversion\r\n"),
    ],
    "bad_data_chunk": [
        b"set a 0 0 1\r\nx\r\n",
        Newer(b"set a 0 0 1\r\nxyz\r\n"),
        b"get a\r\n",
        Newer(b"set a 0 0 1\r\nx\n\r\n"),
        Newer(b"set a 0 0 3\r\nabcde\r\nget a\r\n"),
        Newer(b"set a 0 0 1 noreply\r\nxyz\r\n"),
        b"set b 0 0 2\r\nab\n\nget b\r\n",
        b"set a 0 0 1\r\nx\r\n",
        b"set a 0 0 1\r\nxy",
        Newer(b"\r\nget a\r\n"),
    ],
    "too_large": [
        b"set big 0 0 2097152\r\n" + b"v" * 2097152 + b"\r\nget big\r\n",
        b"set ok 0 0 100000\r\n" + V100K + b"\r\nget ok\r\n",
        b"set ok 0 0 2000000\r\n" + b"w" * 2000000 + b"\r\nget ok\r\n",
        b"set big 0 0 2097152 noreply\r\n" + b"v" * 2097152 + b"\r\nversion\r\n",
        b"append ok2 0 0 2097152\r\n" + b"v" * 2097152 + b"\r\nversion\r\n",
    ],
    "near_max_value": [
        b"set m 0 0 1000000\r\n" + big(1000000, 7) + b"\r\n",
        b"get m\r\n",
        b"append m 0 0 10\r\n0123456789\r\nget m\r\n",
    ],
    "keys": [
        b"set " + K250 + b" 0 0 1\r\nx\r\n",
        b"get " + K250 + b"\r\n",
        b"gets " + K250 + b" " + K250 + b"\r\n",
        b"get " + K251 + b"\r\n",
        b"get a " + K251 + b"\r\n",
        b"delete " + K251 + b"\r\n",
        b"touch " + K251 + b" 1\r\n",
        b"gat 1 " + K251 + b"\r\n",
        b"delete " + K250 + b"\r\n",
        b"set k\x01\x7f\xff 0 0 1\r\nx\r\nget k\x01\x7f\xff\r\n",
    ],
    "noreply_all": [
        b"set n 0 0 1\r\n5\r\ngets n\r\n",
        b"set a 0 0 1 noreply\r\n1\r\nadd b 0 0 1 noreply\r\n2\r\n"
        b"add b 0 0 1 noreply\r\n9\r\nreplace a 0 0 2 noreply\r\n11\r\n"
        b"replace zz 0 0 1 noreply\r\n1\r\nappend a 0 0 1 noreply\r\nx\r\n"
        b"prepend a 0 0 1 noreply\r\ny\r\nget a b\r\n",
        b"cas n 0 0 1 {CAS} noreply\r\n7\r\ncas n 0 0 1 {CAS} noreply\r\n8\r\n"
        b"cas nokey 0 0 1 1 noreply\r\n8\r\nget n\r\n",
        b"incr n 3 noreply\r\ndecr n 1 noreply\r\nincr nokey 1 noreply\r\nget n\r\n",
        b"delete n noreply\r\ndelete n noreply\r\nget n\r\n",
        b"touch a 100 noreply\r\ntouch nokey 1 noreply\r\nversion\r\n",
        b"set s 0 0 1\r\ns\r\nincr s 1 noreply\r\nincr s abc noreply\r\nversion\r\n",
        b"touch a abc noreply\r\ngat abc a noreply\r\ndelete a 0 noreply\r\n",
        b"get a noreply\r\n",
    ],
    "pipelined": [
        b"".join(b"set p%d 0 0 %d\r\n%d\r\n" % (i, len(b"%d" % i), i)
                 for i in range(100)) +
        b"".join(b"get p%d\r\n" % i for i in range(100)) +
        b"incr p5 10\r\ndelete p6\r\nget p6 p5\r\nbogus\r\nversion\r\n",
    ],
    "split_sends": [
        Split(b"set s 3 0 10\r\n0123456789\r\nget s\r\n", 1),
        Split(b"set s2 0 0 4\r\nabcd\r\nincr s2 1\r\nget s2 s\r\n", 3),
        Split(b"set " + K250 + b" 0 0 5\r\nhello\r\nget " + K250 + b"\r\n", 7),
        NewerSplit(b"set t 0 0 3\r\nabcde\r\nfoo\r\n", 2),
    ],
    "binary_values": [
        b"set bin 0 0 256\r\n" + ALLBYTES + b"\r\nget bin\r\n",
        b"set tricky 0 0 21\r\nline1\r\nEND\r\nVALUE x\r\n\r\nget tricky\r\n",
        b"set z 0 0 4\r\n\x00\x00\x00\x00\r\nget z bin\r\n",
        b"set big 0 0 100000\r\n" + V100K + b"\r\nget big\r\n",
    ],
    "stats_shapes": [
        b"stats\r\n",
        b"stats settings\r\n",
        b"set a 0 0 1\r\nx\r\nstats items\r\n",
        b"stats slabs\r\n",
        b"stats sizes\r\n",
        b"stats conns\r\n",
        b"stats reset\r\nstats reset extra\r\n",
        b"stats nosuchthing\r\n",
    ],
    "overlong_line": [
        b"version\r\n",
        b"x" * 4096,
    ],
    "overlong_set_line": [
        b"set " + b"k" * 3000,
    ],
    "long_get_line": [
        b"set key_0000 0 0 1\r\nx\r\n",
        b"get " + b" ".join(b"key_%04d" % i for i in range(340)) + b"\r\n",
        b"get " + b"k" * 3000,
        b"\r\n",
        b"version\r\n",
    ],
    "long_get_line_no_newline": [
        b"get " + b"k" * 5000,
        b"\r\nversion\r\n",
    ],
    "line_2000_then_newline": [
        b"x" * 2000,
        b"\r\nversion\r\n",
    ],
    # --- meta commands (mg ms md ma mn me) ---
    "meta_basic": [
        b"mn\r\n",
        b"mg foo v\r\n",
        b"ms foo 2\r\nhi\r\n",
        b"mg foo v\r\n",
        b"mg foo s v f t\r\n",
        b"mg foo k Oabc123 c\r\n",
        b"mg foo h l\r\nmg foo h\r\n",
        b"mg missing q\r\nmg missing k Ox\r\nmn\r\n",
        b"mg foo q v\r\nmn\r\n",
        b"mg foo P/path Lx u\r\n",
        b"md foo\r\nmd foo\r\nmd foo q\r\nmn\r\n",
        b"ms foo 2 q\r\nhi\r\nmd foo q k\r\nmg foo\r\nmn\r\n",
        b"ms e 0\r\n\r\nmg e v s\r\n",
        b"set a 0 0 1\r\nx\r\nmg a v\r\nget a\r\nmn\r\ndelete a\r\n",
    ],
    "meta_set_modes": [
        b"ms m 3 F77 T0\r\nabc\r\nget m\r\nmg m f t\r\n",
        b"ms m 1 ME\r\nx\r\nms n 1 ME\r\nx\r\nget n\r\n",
        b"ms m 2 MA\r\nzz\r\nms m 2 MP\r\naa\r\nget m\r\n",
        b"ms none 1 MA\r\nx\r\nms none 1 MR\r\nx\r\nms m 1 MR\r\nr\r\nget m\r\n",
        b"ms m 1 MS k Oq1\r\ns\r\n",
        b"gets m\r\n",
        b"ms m 1 C{CAS}\r\nz\r\nget m\r\n",
        b"ms m 1 C1\r\ny\r\nms nokey 1 C5\r\ny\r\n",
        b"ms m 1 MA C1\r\ny\r\nms m 1 ME C1\r\ny\r\n",
        b"ms m 1 T100\r\nq\r\nmg m t v\r\n",
        b"ms m 1 T-1\r\nq\r\nmg m v\r\nget m\r\n",
    ],
    "meta_errors": [
        Newer(b"mg\r\nms\r\nmd\r\nma\r\nme\r\nmz foo\r\nmgg foo\r\n"),
        Newer(b"mg " + K251 + b" v\r\nmd " + K251 + b"\r\nma " + K251 + b"\r\n"),
        b"mg " + K250 + b" v\r\n",
        Newer(b"mg foo zz\r\nmg foo v v\r\nmd foo v v\r\nma foo x\r\n"),
        b"mg foo " + b" ".join(b"O%d" % i for i in range(17)) + b"\r\n",
        Newer(b"mg foo " + b" ".join(b"O%d" % i for i in range(18)) + b"\r\n"),
        Newer(b"md foo " + b" ".join(b"O%d" % i for i in range(18)) + b"\r\n"),
        b"ms foo\r\nms foo bar\r\nms foo -1\r\nversion\r\n",
        b"ms foo 2 Mz\r\nhi\r\nversion\r\n",
        b"ms foo 2 T\r\nhi\r\nms foo 2 Tx\r\nhi\r\nms foo 2 Fx\r\nhi\r\n",
        Newer(b"ms foo 2 MEE\r\nhi\r\nms foo 2 v v\r\nhi\r\nversion\r\n"),
        Newer(b"ms foo 2\r\nhiX\r\nversion\r\n"),
        b"ms foo 2 O" + b"o" * 40 + b"\r\nhi\r\nversion\r\n",
        b"mg foo Nx\r\nmg foo Rx\r\nmg foo Cx\r\nma foo Dx\r\nma foo Jx\r\n",
        Newer(b"ma foo MX\r\nma foo Mxy\r\n"),
        Newer(b"mg foo \xff\r\nmg foo \x7f\r\n"),
    ],
    "meta_arith": [
        b"ma n\r\nma n q\r\nmn\r\n",
        b"ma n N0 J10\r\nget n\r\n",
        b"ma n v\r\nma n MD D5 v\r\nma n M- D100 v t\r\n",
        b"ma n M+ D18446744073709551615 v\r\n",
        b"ma n v k Oop\r\nma n q\r\nmn\r\nget n\r\n",
        b"ms s 3\r\nabc\r\nma s\r\nma s v\r\n",
        b"ma n C1\r\nma nope C1\r\nma nope k Oz\r\n",
        b"gets n\r\n",
        b"ma n C{CAS} v\r\n",
        b"ma t N0 T50 v t\r\nma t t\r\n",
        b"set w 0 0 2\r\n99\r\nma w v\r\nget w\r\n",
        b"set big 0 0 20\r\n18446744073709551615\r\nma big v\r\nma big MD v\r\n",
    ],
    "meta_base64": [
        b"ms Zm9v 3 b\r\nbar\r\nget foo\r\n",
        b"mg Zm9v b k v\r\nmg Zm9v b\r\nmg Zm9vYg== b k\r\n",
        b"mg !!!! b\r\nmg Zm9 b\r\nmg Z=9v b\r\n",
        b"ms AAEC 2 b k\r\nhi\r\nmg AAEC b k s\r\nmd AAEC b k\r\n",
        b"ma bnVt b N0 J5 v k\r\nget num\r\n",
        Newer(b"me Zm9v b\r\nme Zm9v\r\nme !!!! b\r\n"),
    ],
    # memcached 1.6.45's meta additions: E (the CAS a change gives), x
    # (md: empty the value, keep the item), s on ms, me's key decoded only
    # with a token after its b.
    "meta_newer_flags": [
        Newer(b"ms e1 2 E973\r\nji\r\nmg e1 c v\r\n"),
        Newer(b"ms e1 2 c C973 E4000\r\nlo\r\nms e1 2 C973 E5\r\nno\r\n"),
        Newer(b"ms a 1 s\r\n1\r\nms a 2 s MA\r\nxy\r\nms a 2 s k O5 MR C1\r\nxy\r\n"),
        Newer(b"mg v1 s c v N30 t E9876\r\nmg v1 c E5\r\n"),
        Newer(b"ms d1 3 T100 F5 E10\r\nabc\r\nmd d1 x\r\nmg d1 v f t c\r\n"),
        Newer(b"md d1 x F7 T50 E77 q\r\nmg d1 v f t c\r\nmd nokey x\r\n"),
        Newer(b"md d1 x C1\r\nmd d1 x C77 E78\r\nmg d1 c\r\n"),
        Newer(b"ms d4 1\r\na\r\nmd d4 I E55 T30\r\nmg d4 c t v\r\n"),
        Newer(b"ms d5 1\r\na\r\nmd d5 x I E66\r\nmg d5 c v\r\n"),
        Newer(b"ms n1 1 E1\r\n5\r\nma n1 E123 c v\r\nmg n1 c\r\nma n2 N0 J10 E200 c v\r\n"),
        Newer(b"ms Zm9v 1 b\r\nz\r\nme Zm9v b\r\nme Zm9v b x\r\nme !!!! b x\r\n"),
        Newer(b"mg foo \xff\r\nma foo !\r\nms foo 2 {\r\nhi\r\n"),
        Newer(b"mg foo T+5\r\nms foo 2 F+1\r\nhi\r\nms foo 2 M\r\nhi\r\nms foo 2 MEE\r\nhi\r\n"),
    ],
    # A storage command rejected once its length parses has its data block
    # swallowed by memcached 1.6.45, as by slabcache (1.6.18 read it as
    # commands).
    "storage_rejected_swallowed": [
        Newer(b"set k abc 0 1\r\nv\r\nset k 0 x 1\r\nv\r\nget k\r\n"),
        Newer(b"cas k 0 0 1 x\r\nv\r\ncas k 0 0 1\r\nv\r\nversion\r\n"),
        Newer(b"set " + K251 + b" 0 0 1\r\nv\r\nversion\r\n"),
        Newer(b"set k 0 0 1 x y noreply\r\nv\r\nget k\r\n"),
    ],
    "meta_stale_win": [
        b"ms s 1 T60\r\nx\r\n",
        b"md s I T30\r\nmg s v t\r\nmg s v t\r\n",
        b"gets s\r\n",
        b"ms s 1 I C1\r\ny\r\nmg s v\r\n",
        b"ms s 1 C{CAS}\r\nz\r\nmg s v\r\n",
        b"mg v N30 t\r\nmg v N30 t\r\nmg v v\r\n",
        b"ms r 1 T10\r\nx\r\nmg r R30 v\r\nmg r R30 v\r\nmg r R5 v\r\n",
        b"ms r2 1\r\nx\r\nmg r2 R30\r\n",
        b"md nope I\r\nmd s C1\r\nmd s C1 I\r\n",
        b"ms d 1\r\nx\r\nmd d I q\r\nmn\r\nmg d\r\nmd d\r\nmg d\r\n",
    ],
    "meta_debug": [
        b"me foo\r\nme\r\nme " + K251 + b"\r\n",
        b"set foo 0 0 3\r\nbar\r\nme foo\r\n",
        Newer(b"set foo 0 100 3\r\nbar\r\nget foo\r\nme foo\r\n"),
    ],
    "meta_split": [
        Split(b"ms sp 5 T0 F3\r\nhello\r\nmg sp v f\r\nmn\r\n", 1),
        Split(b"ma c N0 J7 v\r\nmd c q\r\nmg c\r\n", 2),
    ],
}


# --------------------------------------------------------------------------
# machinery
# --------------------------------------------------------------------------

CAS_RE = re.compile(rb"(?m)^VALUE [^ \r\n]+ \d+ \d+ (\d+)\r$")
META_RE = re.compile(rb"(?m)^(?:VA \d+|HD|EN|NF|NS|EX)(?: [^\r\n]*)?\r$")
META_CAS_RE = re.compile(rb"(?<= c)\d+")
ME_RE = re.compile(rb"(?m)^ME [^\r\n]*\r$")


def meta_cas(line):
    """CAS values in a meta answer line (" c<cas>" tokens)."""
    return META_CAS_RE.findall(line)


NORMALIZERS = [
    (re.compile(rb"(?m)^(VALUE [^ \r\n]+ \d+ \d+) \d+\r$"), rb"\1 <cas>\r"),
    # CAS values, class ids and item sizes are each server's own.
    # So are seconds that a 1 s clock tick between the two servers' reads
    # can move by one (l, t, la=), though not "t-1" (no TTL).
    (META_RE, lambda m: re.sub(rb"(?<= [lt])\d+", b"<n>",
                               META_CAS_RE.sub(b"<cas>", m.group(0)))),
    (ME_RE, lambda m: re.sub(rb"(cas|cls|size|la)=\d+", rb"\1=<n>", m.group(0))),
    (re.compile(rb"(?m)^VERSION [^\r\n]*\r$"), rb"VERSION <v>\r"),
    (re.compile(rb"(?:STAT [^\r\n]*\r\n)+"), b"<STAT lines>\r\n"),
]


def normalize(data):
    for rx, rep in NORMALIZERS:
        data = rx.sub(rep, data)
    return data


def read_both(socks, idle=IDLE, maximum=MAX_WAIT):
    """Read from every socket until each has been quiet for `idle` seconds
    (or closed), bounded by `maximum`. Returns [(bytes, closed)]."""
    n = len(socks)
    data = [b""] * n
    closed = [False] * n
    start = time.monotonic()
    last = [start] * n
    while True:
        now = time.monotonic()
        live = [i for i in range(n)
                if not closed[i] and now - last[i] < idle]
        if not live or now - start >= maximum:
            break
        wait = min(idle - (now - last[i]) for i in live)
        wait = max(0.001, min(wait, maximum - (now - start)))
        r, _, _ = select.select([socks[i] for i in live], [], [], wait)
        for s in r:
            i = socks.index(s)
            try:
                chunk = s.recv(1 << 20)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if chunk:
                data[i] += chunk
                last[i] = time.monotonic()
            else:
                closed[i] = True
    return list(zip(data, closed))


def send_all(sock, data):
    """sendall that also drains replies, so a large request cannot
    deadlock against a large reply. Returns drained bytes."""
    got = b""
    view = memoryview(data)
    end = time.monotonic() + 15
    while view and time.monotonic() < end:
        r, w, _ = select.select([sock], [sock], [], 0.5)
        if r:
            try:
                chunk = sock.recv(1 << 20)
            except (ConnectionResetError, BrokenPipeError):
                break
            if not chunk:
                break
            got += chunk
        if w:
            try:
                n = sock.send(view[:1 << 18])
            except (BlockingIOError, InterruptedError):
                continue
            except (ConnectionResetError, BrokenPipeError):
                break
            view = view[n:]
    return got


class Side:
    def __init__(self, name, server):
        self.name = name
        self.server = server
        self.sock = socket.create_connection((HOST, server.port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.cas = b"0"
        self.closed = False

    def prepare(self, chunk):
        return chunk.replace(b"{CAS}", self.cas)

    def note(self, reply):
        m = CAS_RE.findall(reply)
        for line in META_RE.findall(reply):
            m += meta_cas(line)
        if m:
            self.cas = m[-1]


SHOW = bool(os.environ.get("DIFF_SHOW"))


def run_script(name, script, ref_bin, other_bin, other_args):
    """Returns (ok, message)."""
    log = []
    ok, msg = _run_script(name, script, ref_bin, other_bin, other_args, log)
    if log:
        msg = "\n".join(log) + ("\n" + msg if msg else "")
    return ok, msg


def _run_script(name, script, ref_bin, other_bin, other_args, log):
    ref = Server(*FLAGS, binary=ref_bin)
    oth = Server(*(FLAGS + other_args), binary=other_bin)
    newer = any(is_newer(el) for el in script) and os.access(NEWEST, os.X_OK)
    new = Server(*FLAGS, binary=NEWEST if newer else ref_bin)
    with ref, oth, contextlib.ExitStack() as stack:
        sides = [Side("memcached", ref), Side("other", oth)]
        if newer:
            stack.enter_context(new)
            sides.append(Side("memcached newest", new))
        try:
            for idx, el in enumerate(script):
                if isinstance(el, Sleep):
                    time.sleep(el)
                    continue
                pre = [b""] * len(sides)
                if isinstance(el, Split):
                    desc = el.data
                    for i in range(0, len(el.data), el.size):
                        for k, sd in enumerate(sides):
                            if not sd.closed:
                                pre[k] += send_all(sd.sock, sd.prepare(
                                    el.data[i:i + el.size]))
                        time.sleep(el.pause)
                else:
                    desc = el
                    for k, sd in enumerate(sides):
                        if not sd.closed:
                            pre[k] += send_all(sd.sock, sd.prepare(el))
                # The reply compared with the other side's: the newest
                # memcached's for an element it answers differently, none
                # when that one is not installed.
                r = (2 if newer else None) if is_newer(el) else 0
                res = read_both([sd.sock for sd in sides])
                raws = [pre[k] + res[k][0] for k in range(len(sides))]
                closed = [sd.closed or res[k][1] for k, sd in enumerate(sides)]
                if r is not None and (normalize(raws[r]), closed[r]) != \
                        (normalize(raws[1]), closed[1]):
                    # A loaded machine (make check -j2) can hold a reply
                    # past IDLE: what differs is read once more, longer.
                    more = read_both([sd.sock for sd in sides], idle=SLOW_IDLE)
                    raws = [raws[k] + more[k][0] for k in range(len(sides))]
                    closed = [closed[k] or more[k][1] for k in range(len(sides))]
                replies = []
                for k, sd in enumerate(sides):
                    sd.note(raws[k])
                    sd.closed = closed[k]
                    replies.append((normalize(raws[k]), sd.closed))
                if SHOW:
                    log.append("  [%s %d] %r\n    -> %r%s" % (
                        name, idx, desc[:120], replies[0][0][:300],
                        " (closed)" if replies[0][1] else ""))
                if r is not None and replies[r] != replies[1]:
                    shown = desc if len(desc) <= 300 else (
                        desc[:150] + b"...<%d bytes>..." % len(desc)
                        + desc[-60:])
                    return False, (
                        "script %s, element %d differs\n"
                        "  sent:      %r\n"
                        "  %s: %r%s\n"
                        "  other:     %r%s" % (
                            name, idx, shown, sides[r].name,
                            replies[r][0][:600],
                            " (closed)" if replies[r][1] else "",
                            replies[1][0][:600],
                            " (closed)" if replies[1][1] else ""))
            for sd in sides:
                if not sd.server.alive():
                    return False, "script %s: %s server died" % (name, sd.name)
            return True, ""
        finally:
            for sd in sides:
                sd.sock.close()


def self_check():
    """The comparison machinery must be able to fail."""
    a = normalize(b"VALUE k 0 1 5\r\nx\r\nEND\r\n")
    b = normalize(b"VALUE k 0 1 99\r\nx\r\nEND\r\n")
    assert a == b, "cas normalization"
    assert normalize(b"VALUE k 0 1\r\nx\r\nEND\r\n") != a, "cas field presence"
    assert normalize(b"VALUE k 0 1 5\r\ny\r\nEND\r\n") != a, "data differs"
    assert normalize(b"STAT a 1\r\nSTAT b 2\r\nEND\r\n") == \
        normalize(b"STAT x y z\r\nEND\r\n"), "stats normalization"
    assert normalize(b"STAT a 1\r\nEND\r\n") != normalize(b"END\r\n")
    assert normalize(b"VERSION 1.6.18\r\n") == normalize(b"VERSION 0.1\r\n")
    assert normalize(b"VERSION 1\r\n") != normalize(b"VERSIONS 1\r\n")
    assert normalize(b"STORED\r\n") != normalize(b"NOT_STORED\r\n")
    assert normalize(b"HD c5 k\r\n") == normalize(b"HD c77 k\r\n"), "meta cas"
    assert normalize(b"HD c5 k\r\n") != normalize(b"HD c5 kx\r\n")
    assert normalize(b"HD c5\r\n") != normalize(b"HD t5\r\n")
    assert normalize(b"HD t-1\r\n") != normalize(b"HD t5\r\n"), "no TTL shown"


def main():
    ref_bin = os.environ.get("MEMCACHED", "/usr/bin/memcached")
    other_bin = os.environ.get("DIFF_AGAINST") or sclib.server_binary()
    other_args = os.environ.get("DIFF_OTHER_ARGS", "").split()
    if not os.access(ref_bin, os.X_OK):
        print("reference memcached %s not installed: skipping" % ref_bin)
        print("0 passed, 0 failed")
        sys.exit(77)
    if not os.environ.get("DIFF_AGAINST") and is_memcached(other_bin):
        print("server under test is memcached itself: skipping "
              "(set DIFF_AGAINST to compare anyway)")
        print("0 passed, 0 failed")
        sys.exit(77)
    if not os.access(other_bin, os.X_OK):
        print("server under test %s not found: skipping" % other_bin)
        print("0 passed, 0 failed")
        sys.exit(77)
    print("reference: %s\nother:     %s %s" % (ref_bin, other_bin,
                                              " ".join(other_args)))
    passed = failed = 0
    try:
        self_check()
        passed += 1
        print("ok   machinery_self_check")
    except AssertionError:
        failed += 1
        print("FAIL machinery_self_check")
        traceback.print_exc(file=sys.stdout)

    names = [n for n in SCRIPTS if len(sys.argv) < 2 or n in sys.argv[1:]]
    jobs = int(os.environ.get("DIFF_JOBS", "8"))
    t0 = time.monotonic()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = {ex.submit(run_script, n, SCRIPTS[n], ref_bin, other_bin,
                          other_args): n for n in names}
        try:
            for f in concurrent.futures.as_completed(futs, timeout=50):
                n = futs[f]
                try:
                    results[n] = f.result()
                except Exception:
                    results[n] = (False, "script %s raised:\n%s"
                                  % (n, traceback.format_exc()))
        except concurrent.futures.TimeoutError:
            print("scripts still running after 50 s")
    for n in names:
        ok, msg = results.get(n, (False, "script %s did not finish" % n))
        if ok:
            passed += 1
            print("ok   %s" % n)
            if msg:
                print(msg)
        else:
            failed += 1
            print("FAIL %s\n%s" % (n, msg))
    sclib.reap_all()
    print("# total %.1fs" % (time.monotonic() - t0))
    print("%d passed, %d failed" % (passed, failed))
    sys.stdout.flush()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
