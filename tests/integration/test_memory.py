#!/usr/bin/env python3
"""Memory limit behaviour: LRU eviction with -m, and -M (no eviction).

Run: SLABCACHE=path/to/binary python3 tests/integration/test_memory.py
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, test, run_all, check, eq, slabcache_only,  # noqa
                   require_binary, Client, SkipCheck, free_port, is_sanitized, rss_kb,
                   server_binary, wait_until)

OOM = b"SERVER_ERROR out of memory storing object"
VALUE_SIZE = 4096
TOTAL = 40 * 1024 * 1024          # bytes written in the eviction test
BATCH = 50


def value_for(i):
    """Distinct, verifiable 4 KB value for key number i."""
    head = b"v%08d:" % i
    return (head * (VALUE_SIZE // len(head) + 1))[:VALUE_SIZE]


def set_batch(c, start, n, prefix=b"k"):
    """Pipeline n sets, return the list of reply lines."""
    req = b"".join(b"set %s%d 0 0 %d\r\n%s\r\n" % (prefix, i, VALUE_SIZE,
                                                   value_for(i))
                   for i in range(start, start + n))
    c.send(req)
    return [c.read_line() for _ in range(n)]


def fill_with_eviction(*extra):
    with Server("-m", "8", *extra) as s, s.client(timeout=10) as c:
        n = TOTAL // VALUE_SIZE
        for start in range(0, n, BATCH):
            replies = set_batch(c, start, BATCH)
            for j, r in enumerate(replies):
                eq(r, b"STORED", "set k%d with eviction" % (start + j))
        st = c.stats()
        check(int(st["evictions"]) > 0, "evictions > 0: %s" % st["evictions"])
        check(int(st["curr_items"]) < n, "not every item can be resident")
        check(int(st["bytes"]) <= 8 * 1024 * 1024,
              "bytes %s within -m 8" % st["bytes"])
        eq(st["limit_maxbytes"], str(8 * 1024 * 1024))
        # the most recently written keys are readable and intact
        recent = list(range(n - 100, n))
        got = c.get_multi(["k%d" % i for i in recent])
        for i in recent:
            eq(got.get("k%d" % i, (None,))[0], value_for(i), "recent key k%d" % i)
        # the oldest keys have been evicted
        old = c.get_multi(["k%d" % i for i in range(100)])
        eq(len(old), 0, "oldest keys evicted")
        # every hit anywhere is exactly the value written
        sample = ["k%d" % i for i in range(0, n, 37)]
        got = c.get_multi(sample)
        check(len(got) > 0, "some sampled keys resident")
        for k, (v, _f, _c) in got.items():
            eq(v, value_for(int(k[1:])), "value of " + k)
        # eviction stats per slab class
        its = c.stats("items")
        ev = sum(int(v) for k, v in its.items() if k.endswith(":evicted"))
        eq(ev, int(st["evictions"]), "sum of items:N:evicted == evictions")
        check(s.alive(), "server alive")


@test
def lru_eviction_keeps_storing():
    fill_with_eviction()


@test
def lru_eviction_explicit_flag():
    slabcache_only()
    fill_with_eviction("--eviction=lru")


@test
def lru_keeps_recently_read_keys():
    """A key that is read often survives while 40 MB of other data streams
    through (LRU, not FIFO)."""
    with Server("-m", "8") as s, s.client(timeout=10) as c:
        hot = b"H" * VALUE_SIZE
        eq(c.set("hot", hot), "STORED")
        n = TOTAL // VALUE_SIZE
        for start in range(0, n, BATCH):
            for r in set_batch(c, start, BATCH, prefix=b"s"):
                eq(r, b"STORED")
            eq(c.get("hot"), hot, "hot key evicted after %d sets" % start)
        check(int(c.stats()["evictions"]) > 0, "evictions happened")


@test
def probation_fifos_within_m():
    """-m bounds the probation FIFOs too: each class keeps an 8-byte entry
    for every item nobody has read yet, up to one per chunk, and slabs get
    -m less the whole slabs those fill (slab_room). Small values nobody
    reads: 300,000 of them in 80-byte chunks at -m 16. Before, the FIFO
    (a power of two, 2 MB) came on top of 16 MB of slabs."""
    slabcache_only()
    mb = 1024 * 1024
    with Server("-m", "16") as s, s.client(timeout=20) as c:
        for start in range(0, 300000, 5000):
            c.send(b"".join(b"set p%07d 0 0 10 noreply\r\n0123456789\r\n" % i
                            for i in range(start, start + 5000)))
        eq(c.get_multi(["p%07d" % 299999]).get("p0299999", (None,))[0], b"0123456789",
           "the newest key")
        st, own = c.stats(), c.stats("slabcache")
        check(int(st["evictions"]) > 0, "memory filled")
        pages = c.stats("slabs")
        slabs = mb * sum(int(v) for k, v in pages.items() if k.endswith(":total_pages"))
        fifo = int(own["probation_bytes"])
        print("  slabs %.2f MB, probation FIFOs %.2f MB" % (slabs / mb, fifo / mb))
        check(fifo > 512 * 1024, "the FIFOs hold the unread items (%d bytes)" % fifo)
        check(slabs + fifo < 17 * mb,
              "slabs %d + FIFOs %d bytes: past -m 16 by a slab or more" % (slabs, fifo))
        # total_malloced counts both, the bookkeeping in whole slabs
        eq(int(own["total_malloced"]), 16 * mb, "total_malloced at a full -m 16")


class Daemon:
    """The server started with -d -P: the PID is the one it wrote, and
    only that process is killed."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="sc-mem-")
        self.pidfile = os.path.join(self.dir, "sc.pid")
        self.port = free_port()
        self.args = [server_binary(), "-d", "-P", self.pidfile, "-l", "127.0.0.1",
                     "-p", str(self.port), "-U", "0"] + list(args)
        if os.geteuid() == 0:
            self.args += ["-u", "root"]
        self.pid = None

    def __enter__(self):
        p = subprocess.run(self.args, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=10)
        eq(p.returncode, 0, "daemonizing parent exit code")
        check(wait_until(lambda: os.path.exists(self.pidfile) and
                         open(self.pidfile).read().strip().isdigit(), timeout=5),
              "pidfile written")
        self.pid = int(open(self.pidfile).read().strip())
        return self

    def __exit__(self, *exc):
        if self.pid is not None:
            os.kill(self.pid, signal.SIGTERM)
            wait_until(lambda: not os.path.exists("/proc/%d" % self.pid), timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, timeout):
        return Client(self.port, timeout=timeout)


def small_values_then_idle(srv, pid):
    """500,000 small values nobody reads (their class's probation FIFO
    grows by doubling, freeing each old ring), then nothing: True once RSS
    has fallen by a quarter of what the growth freed (the old rings add up
    to about the current one; some may have gone back while loading)."""
    with srv.client(timeout=30) as c:
        for start in range(0, 500000, 5000):
            c.send(b"".join(b"set q%07d 0 0 10 noreply\r\n0123456789\r\n" % i
                            for i in range(start, start + 5000)))
        eq(c.get_multi(["q%07d" % 499999]).get("q0499999", (None,))[0], b"0123456789",
           "the newest key")
        freed = int(c.stats("slabcache")["probation_bytes"])
    full = rss_kb(pid) * 1024
    fell = wait_until(lambda: full - rss_kb(pid) * 1024 >= freed // 4, timeout=40,
                      interval=0.5)
    print("  RSS %.1f MB after the load, %.1f MB after waiting; the FIFO's old "
          "rings about %.1f MB" % (full / 2**20, rss_kb(pid) / 1024, freed / 2**20))
    return fell


@test
def memory_freed_in_large_blocks_goes_back_while_idle():
    """What growing a probation FIFO frees goes back to the system within
    the allocator's decay time even when nothing else
    happens: before, an idle server never called into the allocator again
    and kept it resident for good. In the foreground and with -d (the
    allocator's background thread does not survive the fork by itself)."""
    slabcache_only()
    if is_sanitized():
        raise SkipCheck("ASan's allocator keeps freed memory in its quarantine")
    with open(server_binary(), "rb") as f:
        if b"background_thread:true" not in f.read():
            raise SkipCheck("not linked with jemalloc: libc unmaps large blocks at once")
    with Server("-m", "256") as s:
        check(small_values_then_idle(s, s.pid), "the freed arrays went back (foreground)")
    with Daemon("-m", "256") as d:
        check(small_values_then_idle(d, d.pid), "the freed arrays went back (-d)")


def read_item_survives(*args):
    """One value per slab (1 MB less 250 bytes) at -m 8: store `big`, read
    it at once, then 10 more. Whether `big` is still there, and the
    evictions."""
    big = b"x" * (1024 * 1024 - 250)
    with Server("-m", "8", *args) as s, s.client(timeout=20) as c:
        eq(c.set("big", big), "STORED", "big")
        eq(c.get("big"), big, "big read at once")
        for i in range(10):
            eq(c.set("item_%d" % i, big), "STORED", "item_%d" % i)
        return c.get("big") is not None, int(c.stats()["evictions"])


@test
def no_modern_is_memcached_1_4_s_lru():
    """-o no_modern is memcached 1.4's LRU, as memcached's own does: a read
    within a minute of a store does not save an item from being the next
    evicted (ITEM_UPDATE_INTERVAL), and all of -m holds items (nothing is
    measured, no probation FIFO): 8 slabs hold 8 items. By default the read
    item stays and the oldest unread one goes (memcached's lru.t)."""
    slabcache_only()
    kept, evictions = read_item_survives("-o", "no_modern")
    check(not kept, "no_modern: the item read within a minute was evicted first")
    eq(evictions, 3, "no_modern: 11 values in 8 slabs")
    kept, _ = read_item_survives()
    check(kept, "default: the item read survives")
    # memcached without its maintainer has no segments (lru_segmented no):
    # the same unsegmented LRU.
    kept, _ = read_item_survives("-o", "no_lru_maintainer")
    check(not kept, "no_lru_maintainer: the item read within a minute was evicted first")
    with Server("-m", "8", "-o", "no_lru_maintainer") as s, s.client() as c:
        c.set("a", b"1")
        eq(c.stats("slabcache")["probation_bytes"], "0", "no_lru_maintainer: no probation")
    # ... and measures as before, whatever the stack (no_modern's lazy start
    # is its own).
    with Server("-m", "64", "-o", "no_lru_maintainer", "--eviction=lru") as s, s.client() as c:
        sizing = c.stats("sizing")
        check(int(sizing["sizing_memory_limit"]) > 0 and "hit_ratio_at_1x" in sizing,
              "no_lru_maintainer, lru: measured (%r)" % sorted(sizing))
    with Server("-m", "8", "-o", "no_modern") as s, s.client() as c:
        c.set("a", b"1")
        sizing = c.stats("sizing")
        eq(sizing["sizing_memory_limit"], "0", "no_modern: nothing measured")
        check(not any(k.startswith("hit_ratio_at_") for k in sizing),
              "no_modern: no curve (%r)" % sorted(sizing))
        eq(c.stats("slabcache")["probation_bytes"], "0", "no_modern: no probation")
    # Slab moves asked for after it, at start or at run time, move by the
    # measurement: it starts then (booked inside -m like any other).
    with Server("-m", "64", "-o", "no_modern,slab_reassign,slab_automove=1") as s, \
            s.client() as c:
        eq(c.stats("settings")["evictions_policy"], "auto", "the stack")
        check(int(c.stats("sizing")["sizing_memory_limit"]) > 0, "measured at start")
    with Server("-m", "64", "-o", "no_modern") as s, s.client() as c:
        eq(c.stats("settings")["evictions_policy"], "lru", "no_modern's stack")
        eq(c.cmd("config evict auto"), "OK", "config evict auto")
        sizing = c.stats("sizing")
        check(int(sizing["sizing_memory_limit"]) > 0 and "hit_ratio_at_1x" in sizing,
              "measured once a stack moves slabs (%r)" % sorted(sizing))


def fill_without_eviction(*flags):
    with Server("-m", "8", *flags) as s, s.client(timeout=10) as c:
        n = TOTAL // VALUE_SIZE
        stored = 0
        oom_at = None
        for start in range(0, n, BATCH):
            replies = set_batch(c, start, BATCH)
            for j, r in enumerate(replies):
                if r == b"STORED":
                    check(oom_at is None,
                          "STORED after OOM at k%d" % (start + j))
                    stored += 1
                elif r == OOM:
                    if oom_at is None:
                        oom_at = start + j
                else:
                    raise AssertionError("unexpected reply %r" % r)
            if oom_at is not None:
                break
        check(oom_at is not None, "never ran out of memory with -M")
        check(stored > 100, "stored only %d items before OOM" % stored)
        # the data block of the refused set was swallowed: the connection is
        # in sync and answers the next command
        c.send(b"set extra 0 0 %d\r\n" % VALUE_SIZE + b"e" * VALUE_SIZE
               + b"\r\nversion\r\n")
        eq(c.read_line(), OOM, "another set still OOM")
        check(c.read_line().startswith(b"VERSION "), "next command works")
        # small items may still go to another slab class, never crash
        st = c.stats()
        eq(st["evictions"], "0", "no evictions with -M")
        # every earlier item is still readable and intact
        for start in range(0, stored, 200):
            keys = ["k%d" % i for i in range(start, min(stored, start + 200))]
            got = c.get_multi(keys)
            for k in keys:
                check(k in got, "%s lost with -M" % k)
                eq(got[k][0], value_for(int(k[1:])), "value of " + k)
        eq(int(st["curr_items"]), stored, "curr_items")
        # deleting makes room again
        for i in range(50):
            c.cmd("delete k%d" % i)
        ok = 0
        for r in set_batch(c, 100000, 20, prefix=b"n"):
            ok += r == b"STORED"
        check(ok > 0, "no set succeeded after deleting 50 items")
        check(s.alive(), "server alive")


@test
def no_eviction_with_M():
    fill_without_eviction("-M")


@test
def no_eviction_with_eviction_none():
    slabcache_only()
    fill_without_eviction("--eviction=none")


@test
def incr_and_append_under_memory_pressure():
    """append on a full cache with -M gets an error line, not a hang."""
    with Server("-m", "8", "-M") as s, s.client(timeout=10) as c:
        n = TOTAL // VALUE_SIZE
        for start in range(0, n, BATCH):
            if OOM in set_batch(c, start, BATCH):
                break
        c.send(b"append k0 0 0 %d\r\n" % VALUE_SIZE + b"a" * VALUE_SIZE +
               b"\r\nversion\r\n")
        r = c.read_line()
        check(r in (b"STORED", OOM), "append reply %r" % r)
        check(c.read_line().startswith(b"VERSION "), "in sync after append")
        check(s.alive())


def temporaries_left(*extra):
    """How many of 300 keys stored with a 60 s TTL are still there after
    40 MB of keys without one, at -m 8."""
    with Server("-m", "8", *extra) as s, s.client(timeout=10) as c:
        v = value_for(0)
        c.send(b"".join(b"set t%d 0 60 %d\r\n%s\r\n" % (i, len(v), v) for i in range(300)))
        for i in range(300):
            eq(c.read_line(), b"STORED", "set t%d" % i)
        n = TOTAL // VALUE_SIZE
        for start in range(0, n, BATCH):
            for j, r in enumerate(set_batch(c, start, BATCH)):
                eq(r, b"STORED", "set k%d" % (start + j))
        check(int(c.stats()["evictions"]) > 0, "no eviction")
        got = c.get_multi(["t%d" % i for i in range(300)])
        for k, (val, _f, _c) in got.items():
            eq(val, v, "value of " + k)
        return len(got), c.stats("settings")


@test
def temporary_ttl_items_are_not_evicted():
    """-o temporary_ttl=N (memcached's temporary LRU): items stored with a
    TTL of at most N seconds are not evicted, only expire. Without it the
    same load evicts them."""
    slabcache_only()
    kept, st = temporaries_left("-o", "temporary_ttl=100")
    eq(kept, 300, "temporary items left")
    eq((st["temp_lru"], st["temporary_ttl"]), ("yes", "100"), "stats settings")
    kept, st = temporaries_left("-o", "temporary_ttl=30")
    check(kept < 300, "a 60 s TTL is over temporary_ttl=30: evicted as any item")
    kept, st = temporaries_left()
    check(kept < 300, "without temporary_ttl they are evicted")
    eq((st["temp_lru"], st["temporary_ttl"]), ("no", "61"), "stats settings, off")


if __name__ == "__main__":
    require_binary()
    run_all()
