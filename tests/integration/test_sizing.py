#!/usr/bin/env python3
"""The measured allocator (`auto`, the default) and `stats sizing`.

- `stats sizing`: the measurement's memory within 1% of -m, the hit ratio
  at 0.25x..4x -m never falling as memory grows, a line per class that
  was read; the same figures in the admin port's JSON and Prometheus text.
- The hot tenant moves to larger values: one tenant of 200-byte values
  fills the cache, then a tenant of 4 KB values takes most requests while
  the first goes on at a third of them. The 4 KB class must gain most of
  the slabs under `auto`; under `lru` (no slab moves) it keeps what it got
  at first. Look-aside clients (a get, and a set on a miss) from the
  load generator, bounded by request counts and time.

Run: SLABCACHE=path/to/binary LOADGEN=path/to/loadgen python3 tests/integration/test_sizing.py
"""

import http.client
import os
import random
import subprocess
import sys

from sclib import (HOST, SkipCheck, Server, check, eq, free_port, is_sanitized, run_all,
                   server_binary, slabcache_only, test)

LOADGEN = os.environ.get("LOADGEN") or os.path.join(
    os.path.dirname(server_binary()), "..", "bench", "loadgen")
SLABS = 16
POINTS = ["0.25x", "0.5x", "0.75x", "1x", "1.5x", "2x", "4x"]


def lookaside(c, keys, gets, vlen, seed):
    """Zipf-like reads of `keys` keys of vlen bytes, a set on each miss."""
    rnd = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(keys)]
    for k in rnd.choices(range(keys), weights=weights, k=gets):
        key = "k%d" % k
        if c.get(key) is None:
            c.set(key, "v" * vlen)


@test
def stats_sizing_reports_the_curve():
    slabcache_only()
    port = free_port()
    with Server("-m", "16", "--admin-port", str(port)) as s, s.client() as c:
        lookaside(c, 20000, 40000, 1000, 1)
        st = c.stats("sizing")
        general = c.stats()
        h = http.client.HTTPConnection(HOST, port, timeout=10)
        h.request("GET", "/stats")
        js = __import__("json").loads(h.getresponse().read())["sizing"]
        h.request("GET", "/metrics")
        prom = h.getresponse().read().decode()
        h.close()
    limit = 16 * 1024 * 1024 // 100
    eq(int(st["sizing_memory_limit"]), limit, "the measurement's bound")
    check(0 < int(st["sizing_memory"]) <= limit,
          "sizing_memory %s within %d" % (st["sizing_memory"], limit))
    check(int(st["sizing_keys_sampled"]) > 0, "keys sampled")
    eq(int(st["sizing_limit_slabs"]), 16, "slabs the curve's 1x has: -m 16 (its 1% fills none)")
    curve = [float(st["hit_ratio_at_" + p]) for p in POINTS]
    check(all(0.0 <= r <= 1.0 for r in curve), "hit ratios in [0, 1]: %r" % curve)
    check(all(a <= b for a, b in zip(curve, curve[1:])), "never falls with memory: %r" % curve)
    check(curve[-1] > curve[0], "more memory, more hits: %r" % curve)
    hits, misses = int(general["get_hits"]), int(general["get_misses"])
    print("  measured %.3f over the run, curve at 1x %.3f" % (hits / (hits + misses), curve[3]))
    classes = {k.split(":")[0] for k in st if ":" in k}
    eq(len(classes), 1, "one class read: %r" % sorted(classes))
    cls = classes.pop()
    check(int(st[cls + ":gets"]) > 1000, "the class's gets estimated: %s" % st[cls + ":gets"])
    check(int(st[cls + ":wanted_slabs"]) >= 1, "it wants its slabs")
    eq(js["hit_ratio_at_1x"], float(st["hit_ratio_at_1x"]), "JSON as `stats sizing`")
    eq(js["classes"][cls]["slabs"], int(st[cls + ":slabs"]), "JSON per class")
    check('slabcache_sizing_hit_ratio{memory="1x"} %s' % st["hit_ratio_at_1x"] in prom,
          "Prometheus hit ratio at 1x")
    check('slabcache_sizing_wanted_slabs{slab="%s"} %s' % (cls, st[cls + ":wanted_slabs"])
          in prom, "Prometheus wanted slabs")


@test
def measurement_within_m_in_whole_slabs():
    """-m bounds the measurement too, in whole slabs: at -m 300 its 1%
    (3 MB) takes 3 of the slabs (limit_maxbytes is still -m); the slabs
    then stop there under a load that would fill more."""
    slabcache_only()
    with Server("-m", "300") as s, s.client() as c:
        st, general = c.stats("sizing"), c.stats()
        eq(int(general["limit_maxbytes"]), 300 * 1024 * 1024, "limit_maxbytes is -m")
        eq(int(st["sizing_memory_limit"]) // (1024 * 1024), 3, "the measurement's slabs")
        eq(int(st["sizing_limit_slabs"]), 297, "slabs -m leaves to items")
        value = "v" * 500000
        for i in range(700):        # 700 half-MB values, two a slab, fill 297 slabs
            c.set("big%d" % i, value, noreply=True)
        general, slabs = c.stats(), c.stats("slabs")
    check(int(general["evictions"]) > 0, "memory filled")
    pages = sum(int(v) for k, v in slabs.items() if k.endswith(":total_pages"))
    check(pages <= 297, "%d slabs within -m less the measurement's" % pages)
    # total_malloced counts the measurement's slabs too: all of -m
    eq(int(slabs["total_malloced"]), 300 * 1024 * 1024, "total_malloced")


def run_tenant(port, conns, size, keys, dist, prefix, calls):
    cmd = [LOADGEN, "--server", "%s:%d" % (HOST, port), "--quiet", "--get-ratio", "1",
           "--cache-aside", "--conns", str(conns), "--size", str(size), "--keys", str(keys),
           "--key-prefix", prefix, "--calls", str(calls), "--duration", "60"]
    if dist:
        cmd += ["--key-dist", dist]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def large_class_slabs(policy):
    """Slabs of the 4 KB values' class after the shift, and of every class."""
    with Server("-m", str(SLABS), "-t", "2", "--eviction=" + policy) as s:
        small = ("a:", 200, 400000, "zipf:0.9")
        p = run_tenant(s.port, 3, small[1], small[2], small[3], small[0], 40000)
        eq(p.wait(timeout=90), 0, "phase 1 load generator")
        a = run_tenant(s.port, 1, small[1], small[2], small[3], small[0], 60000)
        b = run_tenant(s.port, 3, 4000, 8000, None, "b:", 60000)
        eq(b.wait(timeout=90), 0, "phase 2 load generator (4 KB)")
        eq(a.wait(timeout=90), 0, "phase 2 load generator (200 B)")
        with s.client() as c:
            slabs = c.stats("slabs")
            if os.environ.get("SIZING_SHOW"):
                print(c.stats("sizing"))
    pages = {}
    for k, v in slabs.items():
        if k.endswith(":total_pages"):
            cls = k.split(":")[0]
            pages[int(slabs[cls + ":chunk_size"])] = int(v)
    large = sum(n for size, n in pages.items() if size >= 4000)
    return large, pages


@test
def slabs_follow_the_hot_tenant_to_larger_values():
    slabcache_only()
    if not os.path.exists(LOADGEN):
        raise SkipCheck("load generator not built")
    if is_sanitized():
        raise SkipCheck("ASan build: a measurement of a load, not of correctness")
    auto, pages = large_class_slabs("auto")
    lru, lru_pages = large_class_slabs("lru")
    print("  4 KB class: %d of %d slabs under auto %r, %d under lru %r"
          % (auto, SLABS, pages, lru, lru_pages))
    check(auto >= SLABS // 2, "auto gave the 4 KB class %d of %d slabs: %r" % (auto, SLABS, pages))
    check(auto > lru, "auto %d vs lru %d" % (auto, lru))


if __name__ == "__main__":
    run_all(sys.argv[1:])
