#!/usr/bin/env python3
"""A small cache with more active value sizes than slabs keeps its hit
ratio (issue 11's thrash case), measured against memcached in the same run.

bench/hit-ratio's mixed load (60 value sizes from 20 B to 200 KB, about
35 slab classes, 100 at -f 1.08, 8 clients, cache-aside, Zipf keys) runs at
-m 32 -t 4 against Debian's memcached and against slabcache's default
eviction stack; slabcache's hit ratio must be at least memcached's less
0.02. Before the first-slab rule (notes/eviction.md) it was 0.42 against
memcached's 0.91; `-o first_slab_past_limit=0` still shows it. Skips,
saying so, without memcached or loadgen.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_mixed_sizes.py
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sclib  # noqa
from sclib import (test, run_all, check, require_binary, slabcache_only,  # noqa
                   server_binary, is_sanitized, SkipCheck, Server)

HERE = os.path.dirname(os.path.abspath(__file__))
HIT_RATIO = os.path.join(HERE, "..", "..", "bench", "hit-ratio")
MEMCACHED = shutil.which("memcached")


def hit_ratio(server, extra, memory=32):
    loadgen = os.environ.get("LOADGEN") or os.path.join(
        os.path.dirname(os.path.dirname(server_binary())), "bench", "loadgen")
    if not os.path.exists(loadgen):
        raise SkipCheck("loadgen not built")
    cmd = [sys.executable, HIT_RATIO, "--load", "mixed", "--memory", str(memory),
           "--threads", "4", "--conns", "8", "--warmup", "6", "--seconds", "8",
           "--slabcache", server_binary(), "--loadgen", loadgen, "--json",
           "--server", server] + extra
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    check(p.returncode == 0, "hit-ratio failed: %s" % p.stderr.decode()[-400:])
    return json.loads(p.stdout)


def both_hit_ratios(memory):
    """memcached's and slabcache's (auto) runs of the mixed load at -m
    memory, or a skip that says why they cannot be compared."""
    slabcache_only()
    if not MEMCACHED:
        raise SkipCheck("memcached not installed: no reference to compare with")
    if is_sanitized():
        # ASan slows slabcache several-fold and the load is closed-loop and
        # timed: the comparison is for release builds.
        raise SkipCheck("ASan build: hit ratios not compared")
    return (hit_ratio("memcached", [], memory=memory),
            hit_ratio("slabcache", ["--policy", "auto"], memory=memory))


@test
def mixed_sizes_hit_ratio_against_memcached():
    mc, sc = both_hit_ratios(32)
    print("  memcached %.4f, slabcache (auto) %.4f, slabs moved %d"
          % (mc["hit_ratio"], sc["hit_ratio"], sc["slabs_evicted"]))
    check(sc["hit_ratio"] >= mc["hit_ratio"] - 0.02,
          "slabcache %.4f vs memcached %.4f" % (sc["hit_ratio"], mc["hit_ratio"]))


@test
def mixed_sizes_at_m_8_at_least_memcached():
    """At -m 8 the 60 sizes' first slabs are most of the memory: memcached
    carves a first page for each of its 35 classes. slabcache may take as
    many (a slab per class asked for, slab_room) and must then hit at
    least as often (issue 28). With one slab per group of 1.4x past -m
    (23 slabs) it missed the goal by 0.012 in every run."""
    mc, sc = both_hit_ratios(8)
    print("  -m 8: memcached %.4f, slabcache (auto) %.4f"
          % (mc["hit_ratio"], sc["hit_ratio"]))
    check(sc["hit_ratio"] >= mc["hit_ratio"] - 0.003,
          "-m 8: slabcache %.4f vs memcached %.4f" % (sc["hit_ratio"], mc["hit_ratio"]))


@test
def mixed_sizes_measured_moves_do_not_circle():
    """At -m 64 every class holds several slabs and is read all the time:
    slabs should move only where the measurement shows a difference. Plain
    `lra` (twemcache's, a slab at every eviction that picks another class's)
    moved 17,207 slabs for 27,841 items evicted here, at 0.888 against
    memcached's 0.911. The default `auto` must stay within 3% moves per item
    evicted and at memcached's hit ratio less 0.01 (noise of short runs)."""
    mc, sc = both_hit_ratios(64)
    print("  -m 64: memcached %.4f, slabcache (auto) %.4f, slabs moved %d, items evicted %d"
          % (mc["hit_ratio"], sc["hit_ratio"], sc["slabs_evicted"], sc["evictions"]))
    check(sc["evictions"] > 0, "the load evicted nothing")
    check(sc["slabs_evicted"] <= 0.03 * sc["evictions"],
          "%d slabs moved for %d items evicted" % (sc["slabs_evicted"], sc["evictions"]))
    check(sc["hit_ratio"] >= mc["hit_ratio"] - 0.01,
          "%.4f vs memcached %.4f" % (sc["hit_ratio"], mc["hit_ratio"]))


# Every value size from 20 B to 200 KB (bench/rss-vs-limit's load).
ALL_SIZES = ",".join("%d:1" % int(20 * (10000 ** (i / 299.0))) for i in range(300))
SLAB_SHARE = 1.4            # include/storage/slab.h


def size_group(size, spacing=SLAB_SHARE):
    """The group (0, 1, ...) an item of size bytes fits, groups ending at
    96 (memcached's first chunk at -n 48) and each next at spacing times
    the one before: slabcache's groups (slab.c) at SLAB_SHARE, memcached's
    classes at its default 1.25."""
    top, k = 96, 0
    while size > top:
        top = int(top * spacing)
        top += (8 - top % 8) % 8
        k += 1
    return k


ROOM = [0]      # sizing_limit_slabs after the last slabs_under_all_sizes()


def slabs_under_all_sizes(memory, binary=None):
    """Slabs, classes holding them, memcached's classes among those (a
    class counts in the one its smallest item fits: a group), and RSS in
    MB, after 6 s of every value size from 20 B to 200 KB at -m memory."""
    loadgen = os.environ.get("LOADGEN") or os.path.join(
        os.path.dirname(os.path.dirname(server_binary())), "bench", "loadgen")
    if not os.path.exists(loadgen):
        raise SkipCheck("loadgen not built")
    with Server("-m", str(memory), "-t", "2", binary=binary) as s, s.client() as c:
        p = subprocess.run([loadgen, "--server", "127.0.0.1:%d" % s.port, "--conns", "4",
                            "--duration", "6", "--sizes", ALL_SIZES,
                            "--keys", str(max(20000, memory * 400)),
                            "--get-ratio", "0.5", "--cache-aside", "--quiet"],
                           capture_output=True, timeout=60)
        check(p.returncode == 0, "loadgen failed: %s" % p.stderr.decode()[-300:])
        sl = c.stats("slabs")
        ids = sorted(int(k.split(":")[0]) for k in sl if k.endswith(":chunk_size"))
        chunk = {i: int(sl["%d:chunk_size" % i]) for i in ids}
        pages = {i: int(sl["%d:total_pages" % i]) for i in ids}
        groups = set()
        for n, i in enumerate(ids):
            if pages[i] > 0:
                groups.add(size_group(chunk[ids[n - 1]] + 1 if n > 0 else 1))
        total = sum(pages.values())
        holding = sum(1 for i in ids if pages[i])
        if binary is None:
            ROOM[0] = int(c.stats("sizing").get("sizing_limit_slabs", 0))
        rss = sclib.rss_kb(s.pid) // 1024
        print("  %s -m %d: %d slabs in %d classes, %d groups, %s in the pool; RSS %d MB"
              % (os.path.basename(binary or "slabcache"), memory, total, holding,
                 len(groups), c.stats().get("slab_global_page_pool", "-"), rss))
        return total, holding, len(groups), rss


@test
def memory_past_the_limit_is_memcached_s_first_pages():
    """At -m 8 under every value size from 20 B to 200 KB (35 classes at
    the default -f, about 100 at -f 1.08) memcached carves a first page for
    every class it stores in, 35 MB. slabcache's slabs may take as much,
    a slab per class asked for (slab_room), and no more: it held 23 (one
    per group of 1.4x) and hit less than memcached (issue 28). RSS stays
    at or below memcached's."""
    slabcache_only()
    total, _, _, rss = slabs_under_all_sizes(8)
    if MEMCACHED is None:
        raise SkipCheck("memcached not installed: not compared with its pages")
    mc_total, _, _, mc_rss = slabs_under_all_sizes(8, MEMCACHED)
    check(mc_total - 2 <= total <= mc_total + 1,
          "%d slabs at -m 8, memcached %d pages" % (total, mc_total))
    if not is_sanitized():      # ASan's shadow memory is not the server's
        check(rss <= mc_rss, "RSS %d MB at -m 8, memcached %d MB" % (rss, mc_rss))


@test
def slabs_past_the_room_given_back():
    """Past the room only first slabs stay: a slab a class can spare while
    the slabs exceed it goes back to the system (slab_global_page_pool
    counts them), so the slabs settle at the room (`stats sizing`'s
    sizing_limit_slabs: -m, or a slab per class asked for, less the
    bookkeeping), plus a first slab or two of classes that asked while the
    spare slabs were busy."""
    slabcache_only()
    total, _, _, _ = slabs_under_all_sizes(8)
    check(total <= ROOM[0] + 2,
          "%d slabs at -m 8 for a room of %d" % (total, ROOM[0]))


if __name__ == "__main__":
    require_binary()
    run_all()
