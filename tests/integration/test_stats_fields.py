#!/usr/bin/env python3
"""Every `stats` field memcached emits, in its order, with values.

Monitoring tools (memcached_exporter, memcached-tool) parse these sections
by name; a missing field makes them fail, and memcached's t/stats.t counts
the general ones. The same traffic goes to the newest memcached (1.6.45,
when scripts/build-memcached-newest.sh has built it) and to the server
under test: the general `stats` must be its fields exactly (slabcache's own
are `stats slabcache`), and for each other section memcached's field names
must appear in slabcache's output in the same order (slabcache may add its
own). Without the newest memcached, Debian's 1.6.18 is the reference for
the sections the two releases agree on (all but the general one, where
1.6.45 dropped and added page-mover fields). Skips when neither is there.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_stats_fields.py
"""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, test, run_all, check, eq, require_binary,  # noqa
                   is_memcached)

MEMCACHED = os.environ.get("MEMCACHED", shutil.which("memcached") or "")
NEWEST = os.environ.get("MEMCACHED_NEWEST", "/opt/memcached-newest/bin/memcached")


def traffic(c):
    """One of each counted command, on values of two size classes."""
    for k, v in (("a", "1"), ("b", "x" * 2000), ("n", "10")):
        eq(c.set(k, v), "STORED")
    c.get("a")
    c.get("b")
    c.get("missing")
    eq(c.cmd("incr n 5"), "15")
    eq(c.cmd("decr n 1"), "14")
    eq(c.cmd("touch a 100"), "TOUCHED")
    cas = c.gets("a")[1]
    eq(c.cas("a", "2", cas), "STORED")
    eq(c.cas("a", "3", cas), "EXISTS")
    eq(c.cmd("delete b"), "DELETED")


def names(stats, per_class):
    """Field names in order; per-class ids replaced by <c>, each name once."""
    out = []
    for n in stats:
        if per_class:
            n = re.sub(r"^(items:)?\d+:", r"\1<c>:", n)
        if n not in out:
            out.append(n)
    return out


def is_subsequence(want, got):
    it = iter(got)
    return all(any(w == g for g in it) for w in want)


def sections(binary, extra=()):
    with Server("-m", "64", *extra, binary=binary) as s, s.client() as c:
        traffic(c)
        with s.client():
            return {sub: c.stats(sub) for sub in
                    (None, "settings", "slabs", "items", "conns")}


@test
def every_memcached_field_in_memcached_order():
    newest = os.access(NEWEST, os.X_OK)
    if is_memcached() or not (newest or MEMCACHED):
        print("  (needs memcached beside slabcache: skipped)")
        return
    ref_bin = NEWEST if newest else MEMCACHED
    if not newest:
        print("  (%s not installed: general stats not compared)" % NEWEST)
    for extra in ((), ("-o", "idle_timeout=30"),
                  ("-o", "no_lru_crawler,no_lru_maintainer")):
        ref = sections(ref_bin, extra)
        got = sections(None, extra)
        if newest:
            eq(names(got[None], False), names(ref[None], False),
               "stats %s: memcached's fields exactly" % " ".join(extra))
        for sub in ref:
            if sub is None and not newest:
                continue
            per_class = sub in ("slabs", "items", "conns")
            want, have = names(ref[sub], per_class), names(got[sub], per_class)
            missing = [n for n in want if n not in have]
            eq(missing, [], "stats %s: fields missing" % (sub or ""))
            # `stats conns` blocks differ in shape (memcached lists its
            # listeners too, without listen_addr): names only there.
            check(sub == "conns" or is_subsequence(want, have),
                  "stats %s: order differs from memcached's" % (sub or ""))


@test
def per_class_counters_add_up():
    with Server("-m", "64") as s, s.client() as c:
        traffic(c)
        general, slabs = c.stats(), c.stats("slabs")
        for f in ("get_hits", "cmd_set", "delete_hits", "incr_hits",
                  "decr_hits", "cas_hits", "cas_badval", "touch_hits"):
            total = sum(int(v) for k, v in slabs.items()
                        if re.match(r"\d+:%s$" % f, k))
            eq(total, int(general[f]), "sum of N:%s" % f)
        eq(general["get_hits"], "3", "get hits")
        eq(general["delete_hits"], "1", "delete hits")
        # the 2000-byte value's class has the delete and one get hit
        big = [k.split(":")[0] for k, v in slabs.items()
               if k.endswith(":delete_hits") and v == "1"]
        eq(len(big), 1, "one class holds the delete")
        eq(slabs[big[0] + ":get_hits"], "1", "its get hit")


@test
def version_is_memcached_s():
    with Server() as s, s.client() as c:
        eq(c.cmd("version"), "VERSION 1.6.45", "version line")
        eq(c.stats()["version"], "1.6.45", "stats version")


if __name__ == "__main__":
    require_binary()
    run_all()
