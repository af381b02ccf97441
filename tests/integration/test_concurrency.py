#!/usr/bin/env python3
"""Many concurrent clients: no torn values, atomic incr/append/cas.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_concurrency.py
"""

import hashlib
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import Server, test, run_all, check, eq, require_binary  # noqa

THREADS = 50
OPS = 300
DEADLINE = 40.0   # every thread must finish within this many seconds


def run_threads(n, target):
    """Run target(tid) in n threads; collect exceptions; bounded join."""
    errors = []
    lock = threading.Lock()

    def wrap(tid):
        try:
            target(tid)
        except Exception as e:  # noqa
            with lock:
                errors.append("thread %d: %r" % (tid, e))

    ts = [threading.Thread(target=wrap, args=(i,), daemon=True)
          for i in range(n)]
    for t in ts:
        t.start()
    end = time.monotonic() + DEADLINE
    for t in ts:
        t.join(max(0.1, end - time.monotonic()))
    hung = sum(t.is_alive() for t in ts)
    check(hung == 0, "%d threads still running after %.0fs" % (hung, DEADLINE))
    check(not errors, "%d thread errors, first: %s"
          % (len(errors), errors[:3]))


def make_value(tid, j, rnd):
    """Self-describing value: header + payload + digest; sizes vary over
    several slab classes (up to ~20 KB)."""
    size = rnd.choice((1, 10, 100, 500, 1000, 3000, 9000, 20000))
    size = max(1, size + rnd.randint(0, 50))
    fill = bytes([(tid * 31 + j) & 0xFF]) * size
    head = b"%d:%d:" % (tid, j)
    body = head + fill
    return body + hashlib.md5(body).hexdigest().encode()


def value_ok(v):
    body, dig = v[:-32], v[-32:]
    return hashlib.md5(body).hexdigest().encode() == dig


@test
def private_keys_no_torn_values():
    with Server("-m", "256", "-t", "4") as s:
        def worker(tid):
            rnd = random.Random(tid)
            with s.client(timeout=10) as c:
                mine = {}
                for j in range(OPS):
                    k = "t%d_%d" % (tid, j % 25)
                    op = rnd.random()
                    if op < 0.45:
                        v = make_value(tid, j, rnd)
                        eq(c.set(k, v, flags=tid), "STORED", "set " + k)
                        mine[k] = v
                    elif op < 0.85:
                        r = c.get_multi([k])
                        if k in mine:
                            check(k in r, "lost key %s" % k)
                            eq(r[k][0], mine[k], "value of " + k)
                            eq(r[k][1], tid, "flags of " + k)
                        else:
                            check(k not in r, "phantom key %s" % k)
                    elif op < 0.95:
                        keys = list(mine)[:10]
                        if keys:
                            r = c.get_multi(keys)
                            for kk in keys:
                                eq(r[kk][0], mine[kk], "multi-get " + kk)
                    else:
                        want = "DELETED" if k in mine else "NOT_FOUND"
                        eq(c.cmd("delete " + k), want, "delete " + k)
                        mine.pop(k, None)
                # final verification of everything this thread owns
                r = c.get_multi(list(mine)) if mine else {}
                for k, v in mine.items():
                    eq(r[k][0], v, "final " + k)
        run_threads(THREADS, worker)
        check(s.alive(), "server alive")


@test
def shared_keys_incr_sum():
    n_threads, per, counters = 30, 200, 5
    with Server("-t", "4") as s:
        with s.client() as c:
            for i in range(counters):
                eq(c.set("ctr%d" % i, "0"), "STORED")
            eq(c.set("dec", str(n_threads * per * 10)), "STORED")

        def worker(tid):
            with s.client(timeout=10) as c:
                for j in range(per):
                    k = "ctr%d" % ((tid + j) % counters)
                    r = c.cmd("incr %s %d" % (k, tid + 1))
                    check(r.isdigit(), "incr reply %r" % r)
                    r = c.cmd("decr dec 1")
                    check(r.isdigit(), "decr reply %r" % r)
        run_threads(n_threads, worker)
        with s.client() as c:
            total = 0
            for i in range(counters):
                total += int(c.get("ctr%d" % i))
            eq(total, sum(t + 1 for t in range(n_threads)) * per,
               "sum of shared counters")
            eq(int(c.get("dec")), n_threads * per * 9, "shared decr")


@test
def shared_key_set_get_consistent():
    """Readers of a key rewritten by many writers always see one complete
    value (never a mix)."""
    with Server("-t", "4") as s:
        keys = ["sh%d" % i for i in range(4)]
        with s.client() as c:
            for k in keys:
                c.set(k, make_value(999, 0, random.Random(1)))

        def worker(tid):
            rnd = random.Random(1000 + tid)
            with s.client(timeout=10) as c:
                for j in range(150):
                    k = rnd.choice(keys)
                    if tid % 2:
                        eq(c.set(k, make_value(tid, j, rnd)), "STORED")
                    else:
                        v = c.get(k)
                        check(v is not None, "shared key vanished")
                        check(value_ok(v), "torn value (len %d)" % len(v))
        run_threads(20, worker)


@test
def concurrent_append_atomic():
    n_threads, per = 20, 50
    # The value grows 8 bytes at a time to 8,000: it passes through ~21
    # size classes (~58 at -f 1.08), a slab each. This tests atomicity,
    # not memory pressure, so give it room.
    with Server("-m", "256", "-t", "4") as s:
        with s.client() as c:
            eq(c.set("log", ""), "STORED")

        def worker(tid):
            with s.client(timeout=10) as c:
                for j in range(per):
                    tok = b"[%02d:%03d]" % (tid, j)
                    eq(c.append("log", tok), "STORED")
        run_threads(n_threads, worker)
        with s.client() as c:
            v = c.get("log")
            eq(len(v), n_threads * per * 8, "appended length")
            toks = [v[i:i + 8] for i in range(0, len(v), 8)]
            eq(sorted(toks), sorted(b"[%02d:%03d]" % (t, j)
                                    for t in range(n_threads)
                                    for j in range(per)), "every token once")
            # each thread's own tokens appear in order
            for t in range(n_threads):
                mine = [x for x in toks if x.startswith(b"[%02d:" % t)]
                eq(mine, sorted(mine), "order of thread %d" % t)


@test
def concurrent_cas_increment():
    """gets/cas retry loops from many threads lose no update."""
    n_threads, per = 16, 30
    with Server("-t", "4") as s:
        with s.client() as c:
            c.set("cv", "0")

        def worker(tid):
            with s.client(timeout=10) as c:
                done = 0
                tries = 0
                while done < per:
                    tries += 1
                    check(tries < per * 200, "cas livelock")
                    v, cas = c.gets("cv")
                    r = c.cas("cv", str(int(v) + 1), cas)
                    if r == "STORED":
                        done += 1
                    else:
                        eq(r, "EXISTS", "cas reply")
        run_threads(n_threads, worker)
        with s.client() as c:
            eq(c.get("cv"), str(n_threads * per).encode(), "cas counter")


@test
def connection_churn():
    """Many short-lived connections in parallel; counters stay sane."""
    with Server() as s:
        def worker(tid):
            for j in range(20):
                with s.client() as c:
                    eq(c.set("ch%d" % tid, str(j)), "STORED")
                    eq(c.get("ch%d" % tid), str(j).encode())
        run_threads(20, worker)
        with s.client() as c:
            st = c.stats()
            check(int(st["total_connections"]) >= 400, "total_connections")
            ok = lambda: int(c.stats()["curr_connections"]) <= 2  # noqa
            deadline = time.monotonic() + 3
            while not ok() and time.monotonic() < deadline:
                time.sleep(0.05)
            check(ok(), "curr_connections back down: %s"
                  % c.stats()["curr_connections"])


if __name__ == "__main__":
    require_binary()
    run_all()
