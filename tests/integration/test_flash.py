#!/usr/bin/env python3
"""The flash tier (`-o ext_path=FILE:SIZE`, memcached 1.6.18's extstore),
black box: what a client sees when RAM (-m 8) overflows into a file.

Why: a value that leaves RAM for the file and comes back is copied, framed
and indexed twice; any slip there returns a wrong value, which a cache must
never do (a miss is always allowed, a wrong value never). Every value below
carries its key, a hash of its key and a version, repeated over 4 KB, so a
torn, stale or foreign value is caught byte for byte.

  - load: 6,000 x 4 KB through 4 connections (about 3x RAM), read back;
    extstore_* and get_extstore stats move;
  - churn: writers overwrite random keys while readers read; every value
    read is one that was written for that key;
  - flash-resident items (pushed out of RAM by 12 MB written after them,
    then read once with get_extstore rising): overwrite, delete, touch, mg t,
    expiry, flush_all, gets/cas, mg v f t s c k, gat, binary GET,
    append/prepend (NOT_STORED, as memcached), pipelined gets and meta in
    request order;
  - wrap: an 8 MB file takes 80 MB of writes; no wrong value;
  - options: ext_* tuning accepted and shown in `stats settings`; bad
    ext_path / refused ext_* options exit with one line (slabcache only);
  - restart on the same file: everything misses (the file is a cache).
Device faults (failed, short or refused writes and reads, a file truncated
or overwritten underneath) are test_flash_faults.py's.

Against memcached (SLABCACHE=/usr/bin/memcached) the shared checks run too,
with two adjustments, both because of memcached, not the behaviour tested:
  - memcached gets `-o ext_page_size=2,ext_wbuf_size=2` before ext_path. Its
    default page is 64 MB, so `ext_path=F:64m` is ONE page and memcached
    then never writes anything (extstore_objects_written stays 0); an 8 MB
    file would be no page at all. slabcache's flash slabs are 1 MB and take
    no such option.
  - memcached's writer is a background thread that lags the sets, so it
    evicts some items from RAM before they reach the file (the load test's
    hit ratio is 0.72..0.99 from run to run): hit ratios and figures that
    depend on that lag are printed for memcached and asserted for slabcache
    only (see soft_check). The 12 MB pushes that move a key to flash are
    paced for memcached (MEMCACHED_PACE); unpaced, a push into full RAM
    evicts every item set since the previous push.

The flash files live in a temporary directory under $FLASH_TEST_DIR if set,
else beside the binary under test (the build directory) when that is
writable and is not memcached's system directory, else the system temp
directory; it is removed at exit.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_flash.py [test..]
"""

import atexit
import hashlib
import itertools
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sclib  # noqa
from sclib import (HOST, Server, check, eq, free_port, is_memcached, is_slabcache,  # noqa
                   require_binary, run_all, server_binary, slabcache_only,
                   test)

VALUE_SIZE = 4096
RAM_MB = "8"
FILE_SIZE = "64m"
BATCH = 50                  # sets per pipelined write
# 20 MB written after a key pushes it out of RAM: 2.5x RAM, as a key read
# since the CLOCK hand last passed it gets a second turn (up to 2x RAM of
# allocations before it is evicted).
PUSH_ITEMS = 5000
WRITER_SETTLE = 4.0         # max seconds to wait for memcached's writer
EX_USAGE = 64               # slabcache's exit status for a bad option value

# memcached only: pages small enough that a 64 MB (and an 8 MB) file has
# several (see the module docstring). Must come before ext_path.
MEMCACHED_TUNING = ["-o", "ext_page_size=2,ext_wbuf_size=2"]
# memcached only: pause between batches of a push (2 ms per 200 KB is
# enough for its writer to keep up; without it a second push into full RAM
# evicts instead of writing to flash).
MEMCACHED_PACE = 0.002


# --------------------------------------------------------------------------
# flash files
# --------------------------------------------------------------------------

_TMPDIR = []


def _flash_parent():
    env = os.environ.get("FLASH_TEST_DIR")
    if env:
        return env
    bindir = os.path.dirname(os.path.abspath(server_binary()))
    # never litter a system directory (memcached is /usr/bin/memcached)
    if not is_memcached() and os.access(bindir, os.W_OK):
        return bindir
    return tempfile.gettempdir()


def _cleanup():
    sclib.reap_all()          # memcached servers stopped without waiting
    while _TMPDIR:
        shutil.rmtree(_TMPDIR.pop(), ignore_errors=True)


def flash_path(name):
    """A fresh path (not yet created) in this run's temporary directory."""
    if not _TMPDIR:
        _TMPDIR.append(tempfile.mkdtemp(prefix="flash-test-",
                                        dir=_flash_parent()))
        atexit.register(_cleanup)
    path = os.path.join(_TMPDIR[0], name)
    if os.path.exists(path):
        os.unlink(path)
    return path


def ext_args(path, size=FILE_SIZE, more=""):
    """-o arguments for a flash file (memcached gets its page tuning)."""
    opt = "ext_path=%s:%s" % (path, size) + ("," + more if more else "")
    return (MEMCACHED_TUNING if is_memcached() else []) + ["-o", opt]


def flash_server(name, size=FILE_SIZE, more=""):
    """A Server with -m 8 and a flash file named `name`."""
    return Server("-m", RAM_MB, *ext_args(flash_path(name), size, more))


# --------------------------------------------------------------------------
# values: key, hash of key and version, repeated to 4 KB
# --------------------------------------------------------------------------

def value_for(key, ver, size=VALUE_SIZE):
    if isinstance(key, str):
        key = key.encode()
    unit = b"%s|%s|v%07d;" % (key, hashlib.sha1(key).hexdigest().encode(),
                              ver)
    return (unit * (size // len(unit) + 1))[:size]


def version_of(key, val):
    """The version a value claims, or None if it is not a well-formed value
    for `key` (torn, foreign, garbage)."""
    m = re.match(rb"([^|]+)\|[0-9a-f]{40}\|v(\d{7});", val)
    if not m:
        return None
    ver = int(m.group(2))
    return ver if val == value_for(key, ver, len(val)) else None


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def stat(c, name):
    return int(c.stats().get(name, "0"))


def soft_check(cond, msg):
    """Assert for slabcache; print for memcached (whose background writer
    lags, so the figure depends on timing)."""
    if is_memcached():
        print("     memcached: %s: %s" % (msg, "yes" if cond else "NO"))
    else:
        check(cond, msg)


def set_pipelined(c, items, exptime=0, flags=0, pace=0.0):
    """items: list of (key, value bytes); pipelined in batches (`pace` s
    apart); all STORED."""
    for i in range(0, len(items), BATCH):
        if pace and i:
            time.sleep(pace)
        chunk = items[i:i + BATCH]
        c.send(b"".join(b"set %s %d %d %d\r\n%s\r\n"
                        % (k.encode(), flags, exptime, len(v), v)
                        for k, v in chunk))
        for k, _v in chunk:
            eq(c.read_line(), b"STORED", "set " + k)


def wait_writer(c, timeout=WRITER_SETTLE):
    """Poll extstore_objects_written until it stops moving (3 polls 0.1 s
    apart) or `timeout`; return (objects written, seconds waited)."""
    t0 = time.monotonic()
    last, same = -1, 0
    while time.monotonic() - t0 < timeout:
        n = stat(c, "extstore_objects_written")
        same = same + 1 if n == last else 0
        if same >= 2:
            break
        last = n
        time.sleep(0.1)
    return last, time.monotonic() - t0


def push_to_flash(c, tag, n=PUSH_ITEMS):
    """Write n x 4 KB of other data so that what was set before leaves RAM
    (for the file, as it is 1.5x RAM); wait for the writer. Paced for
    memcached, whose writer otherwise lags so far behind a burst into full
    RAM that it evicts everything set since the last push."""
    filler = b"f" * VALUE_SIZE
    set_pipelined(c, [("fill:%s:%d" % (tag, i), filler) for i in range(n)],
                  pace=MEMCACHED_PACE if is_memcached() else 0.0)
    return wait_writer(c)


def get_counting(c, key):
    """(value or None, how much get_extstore rose for this one get)."""
    before = stat(c, "get_extstore")
    v = c.get(key)
    return v, stat(c, "get_extstore") - before


def expect_from_flash(c, key, want):
    """The key's first read after a push: exact value, served from flash."""
    v, d = get_counting(c, key)
    check(v is not None, "%s missing after push (evicted, never on flash?)"
          % key)
    eq(v, want, "value of flash-resident " + key)
    check(d >= 1, "%s was not read from flash (get_extstore +%d)" % (key, d))


def read_all(c, keys, batch=100):
    """dict key -> value for every hit."""
    out = {}
    for i in range(0, len(keys), batch):
        got = c.get_multi(keys[i:i + batch])
        out.update((k, v[0]) for k, v in got.items())
    return out


def check_ext_stats(c, names):
    st = c.stats()
    for n in names:
        check(int(st.get(n, "0")) > 0, "stats %s > 0 (got %r)"
              % (n, st.get(n)))
    return st


# --------------------------------------------------------------------------
# load and churn
# --------------------------------------------------------------------------

@test
def load_overflows_into_flash():
    """6,000 x 4 KB (3x RAM) through 4 connections; read back exact."""
    n, conns = 6000, 4
    keys = ["ld:%05d" % i for i in range(n)]
    latest = {}
    errors = []
    with flash_server("load") as s:
        def writer(t):
            try:
                with s.client(timeout=10) as c:
                    mine = keys[t::conns]
                    set_pipelined(c, [(k, value_for(k, 1)) for k in mine])
                    for k in mine:
                        latest[k] = 1
                    # a second version of every 7th key: the older copy may
                    # already be on flash and must never come back
                    again = mine[::7]
                    set_pipelined(c, [(k, value_for(k, 2)) for k in again])
                    for k in again:
                        latest[k] = 2
            except Exception as e:  # reported by the main thread
                errors.append("writer %d: %r" % (t, e))
        threads = [threading.Thread(target=writer, args=(t,))
                   for t in range(conns)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        check(not errors, "; ".join(errors))
        with s.client(timeout=10) as c:
            written, lag = wait_writer(c)
            print("     wrote %d x 4 KB in %.2fs; writer settled after "
                  "%.2fs at %d objects" % (n + len(keys[::7]),
                                           time.monotonic() - t0 - lag, lag,
                                           written))
            got = read_all(c, keys)
            for k, v in got.items():
                eq(v, value_for(k, latest[k]), "value of " + k)
            ratio = len(got) / n
            print("     hit ratio %.3f (%d/%d)" % (ratio, len(got), n))
            if ratio < 1 and os.environ.get("FLASH_DEBUG"):
                sl = c.stats("slabs")
                print("     " + " ".join("%s=%s" % (k, v) for k, v in sl.items()
                                        if k.startswith("1:") or k.startswith("2:")))
                print("     " + " ".join("%s=%s" % (k, v) for k, v in c.stats().items()
                                        if "slab" in k or "stub" in k or "ext" in k))
            soft_check(ratio >= 0.9, "hit ratio %.3f >= 0.9" % ratio)
            st = check_ext_stats(c, [
                "extstore_objects_written", "extstore_bytes_written",
                "get_extstore", "extstore_objects_read",
                "extstore_bytes_read"])
            print("     " + " ".join("%s=%s" % (k, st.get(k)) for k in (
                "get_extstore", "extstore_objects_written", "evictions",
                "extstore_objects_dropped", "extstore_wbuf_full",
                "extstore_objects_evicted", "curr_items", "extstore_objects_used")))
        check(s.alive(), "server alive")


@test
def chained_values_beside_the_flash_tier():
    """-o slab_chunk_max with a flash file: values larger than the chunk
    (chained) and smaller ones, 2.5x RAM in all. The small ones overflow
    to flash and read back exact; a chained one reads back exact or is a
    miss (slabcache evicts chained items from RAM alone; memcached's
    extstore writes its chunked ones too), never a wrong value."""
    with flash_server("chained", more="slab_chunk_max=2048") as s, s.client() as c:
        n = 2 * int(RAM_MB) * 1024 * 1024 // (VALUE_SIZE + 6000) * 5 // 4
        small = [("sm%d" % i, value_for("sm%d" % i, i, 1000)) for i in range(n)]
        big = [("bg%d" % i, value_for("bg%d" % i, i, 6000)) for i in range(n)]
        for i in range(0, n, BATCH):
            set_pipelined(c, small[i:i + BATCH] + big[i:i + BATCH])
        wait_writer(c)
        got = read_all(c, [k for k, _ in small] + [k for k, _ in big])
        want = dict(small + big)
        wrong = [k for k, v in got.items() if v != want[k].decode("latin-1")
                 and v != want[k]]
        eq(wrong, [], "values read back differently")
        small_hits = sum(k in got for k, _ in small)
        soft_check(small_hits >= 0.9 * n, "small values kept (flash): %d of %d"
                   % (small_hits, n))
        check(any(k in got for k, _ in big[-20:]), "the newest chained values are in RAM")
        # objects_used: records in the tier, in a write buffer too
        # (objects_written counts those the device has taken)
        soft_check(stat(c, "extstore_objects_used") > 0, "small values went to flash")
        eq(c.cmd("version").split()[0], "VERSION", "server alive")


@test
def churn_values_stay_exact():
    """Writers bump versions of random keys while readers read; every value
    read is a version written for that key; afterwards, the latest one."""
    nkeys, nwriters, nreaders, seconds = 3000, 2, 2, 3.0
    keys = ["ch:%04d" % i for i in range(nkeys)]
    written = {k: {0} for k in keys}       # versions ever sent, per key
    latest = {k: 0 for k in keys}          # owner's last STORED version
    counter = itertools.count(1)
    stop = threading.Event()
    errors, reads = [], [0, 0]             # [values checked, keys asked]
    with flash_server("churn") as s:
        with s.client(timeout=10) as c:
            set_pipelined(c, [(k, value_for(k, 0)) for k in keys])  # 12 MB
            wait_writer(c)
            ge0 = stat(c, "get_extstore")

        def writer(w):
            rnd = random.Random(w)
            mine = keys[w::nwriters]          # each key has one writer
            try:
                with s.client(timeout=10) as c:
                    while not stop.is_set():
                        batch = [(k, next(counter))
                                 for k in rnd.sample(mine, 10)]
                        for k, ver in batch:
                            written[k].add(ver)   # before it can be read
                        set_pipelined(c, [(k, value_for(k, ver))
                                          for k, ver in batch])
                        for k, ver in batch:
                            latest[k] = ver
            except Exception as e:
                errors.append("writer %d: %r" % (w, e))

        def reader(r):
            rnd = random.Random(100 + r)
            try:
                with s.client(timeout=10) as c:
                    while not stop.is_set():
                        ask = rnd.sample(keys, 20)
                        for k, (v, _f, _c) in c.get_multi(ask).items():
                            ver = version_of(k, v)
                            if ver is None or ver not in written[k]:
                                errors.append("read %s: bad value %r..."
                                              % (k, v[:60]))
                            reads[0] += 1
                        reads[1] += len(ask)
            except Exception as e:
                errors.append("reader %d: %r" % (r, e))

        threads = ([threading.Thread(target=writer, args=(w,))
                    for w in range(nwriters)] +
                   [threading.Thread(target=reader, args=(r,))
                    for r in range(nreaders)])
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join(30)
        check(not any(t.is_alive() for t in threads), "threads stuck")
        check(not errors, "%d errors, first: %s" % (len(errors), errors[:3]))
        with s.client(timeout=10) as c:
            ge = stat(c, "get_extstore") - ge0
            print("     %d writes, %d/%d reads hit, get_extstore +%d"
                  % (next(counter) - 1, reads[0], reads[1], ge))
            check(reads[0] > 0, "some reads hit")
            check(ge > 0, "churn read values back from flash")
            wait_writer(c)
            got = read_all(c, keys)
            for k, v in got.items():
                eq(v, value_for(k, latest[k]), "final value of " + k)
        check(s.alive(), "server alive")


# --------------------------------------------------------------------------
# flash-resident items
# --------------------------------------------------------------------------

@test
def flashed_overwrite():
    a, b = value_for("ow1", 1), value_for("ow2", 1)
    with flash_server("overwrite") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("ow1", a), ("ow2", b)])
        push_to_flash(c, "1")
        expect_from_flash(c, "ow1", a)            # read, then overwrite
        eq(c.set("ow1", value_for("ow1", 2)), "STORED")
        eq(c.get("ow1"), value_for("ow1", 2), "ow1 after overwrite")
        eq(c.set("ow2", value_for("ow2", 2)), "STORED")   # never read
        # ow2's new value, unread, goes to flash in turn; its old copy
        # stays dead. ow1's was read: slabcache keeps it in RAM (an item
        # read is not evicted for a stream of new keys nobody reads)
        push_to_flash(c, "2")
        eq(c.get("ow1"), value_for("ow1", 2), "ow1 after the second push")
        expect_from_flash(c, "ow2", value_for("ow2", 2))


@test
def flashed_keys_in_metadump():
    """lru_crawler metadump lists flash-resident items by key, as memcached
    lists its extstore items (slabcache's stub keeps no key: the dump
    reads it from the flash record)."""
    keys = ["md%d" % i for i in range(40)]
    with flash_server("metadump") as s, s.client(timeout=20) as c:
        set_pipelined(c, [(k, value_for(k, 1)) for k in keys])
        push_to_flash(c, "1")
        expect_from_flash(c, keys[0], value_for(keys[0], 1))
        c.send(b"lru_crawler metadump all\r\n")
        data = b""
        while not (data.startswith(b"END\r\n") or b"\nEND\r\n" in data):
            chunk = c.sock.recv(1 << 20)
            check(chunk, "connection closed mid-dump")
            data += chunk
        listed = set(re.findall(rb"key=(md\d+) ", data))
        missing = [k for k in keys if k.encode() not in listed]
        eq(missing, [], "flash-resident keys missing from the dump")


@test
def flashed_delete():
    with flash_server("delete") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("d1", value_for("d1", 1)),
                          ("d2", value_for("d2", 1))])
        push_to_flash(c, "1")
        expect_from_flash(c, "d1", value_for("d1", 1))
        eq(c.cmd("delete d1"), "DELETED")
        eq(c.cmd("delete d2"), "DELETED")                 # never read
        eq(c.get("d1"), None, "d1 after delete")
        eq(c.get("d2"), None, "d2 after delete")
        push_to_flash(c, "2")
        eq(c.get_multi(["d1", "d2"]), {}, "deleted keys stay deleted")


@test
def flashed_touch():
    """touch tk 1 on a flashed item: mg shows t1, the value is intact, and
    it is gone after ~2.5 s."""
    with flash_server("touch") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("tk", value_for("tk", 1)),
                          ("keep", value_for("keep", 1))])
        push_to_flash(c, "1")
        eq(c.cmd("touch tk 1"), "TOUCHED")
        line = c.cmd("mg tk t")
        check(line in ("HD t1", "HD t0"), "mg tk t after touch: %r" % line)
        expect_from_flash(c, "tk", value_for("tk", 1))
        time.sleep(2.5)
        eq(c.get("tk"), None, "tk 2.5 s after touch 1")
        eq(c.get("keep"), value_for("keep", 1), "untouched flashed key")


@test
def flashed_expiry():
    """set with exptime 3 (not 2: memcached's clock ticks in whole seconds,
    a TTL of 2 can end ~1 s after the set, before the key reaches flash and
    is read back), push to flash, wait: a miss."""
    with flash_server("expiry") as s, s.client(timeout=10) as c:
        t0 = time.monotonic()
        set_pipelined(c, [("ek", value_for("ek", 1))], exptime=3)
        set_pipelined(c, [("keep", value_for("keep", 1))])
        push_to_flash(c, "1")
        if time.monotonic() - t0 < 1.5:
            expect_from_flash(c, "ek", value_for("ek", 1))
        else:
            print("     push took %.1fs: ek's flash read not checked"
                  % (time.monotonic() - t0))
        time.sleep(max(0.0, t0 + 4.0 - time.monotonic()))
        eq(c.get("ek"), None, "ek 4 s after set with exptime 3")
        eq(c.get("keep"), value_for("keep", 1), "key without exptime")


@test
def flashed_flush_all():
    with flash_server("flush") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("fl%d" % i, value_for("fl%d" % i, 1))
                          for i in range(20)])
        push_to_flash(c, "1")
        set_pipelined(c, [("ram", b"in RAM")])
        expect_from_flash(c, "fl0", value_for("fl0", 1))
        eq(c.cmd("flush_all"), "OK")
        keys = (["fl%d" % i for i in range(20)] + ["ram"] +
                ["fill:1:%d" % i for i in range(0, PUSH_ITEMS, 30)])
        eq(read_all(c, keys), {}, "hits after flush_all")
        eq(c.set("after", b"x"), "STORED")
        eq(c.get("after"), b"x", "set after flush_all")
        push_to_flash(c, "2")
        eq(read_all(c, keys), {}, "hits after flush_all and more writes")


@test
def flashed_item_recached_to_ram():
    """ext_recache_rate=1: every value read from flash is copied back to
    RAM; the next read is a RAM hit, with the same value and CAS unique.
    With the rate 0 nothing is copied back. (slabcache only: memcached's
    recache also depends on a 60 s window and changes the unique.)"""
    slabcache_only()
    a = value_for("rc", 1)
    with flash_server("recache", more="ext_recache_rate=1") as s, \
            s.client(timeout=10) as c:
        set_pipelined(c, [("rc", a)])
        push_to_flash(c, "1")
        before = stat(c, "recache_from_extstore")
        v1, d1 = get_counting(c, "rc")
        eq(v1, a, "first read, from flash")
        check(d1 == 1, "first read came from flash (get_extstore +%d)" % d1)
        eq(stat(c, "recache_from_extstore"), before + 1, "recache_from_extstore")
        g1 = c.gets("rc")
        v2, d2 = get_counting(c, "rc")
        eq(v2, a, "second read, from RAM")
        eq(d2, 0, "second read did not go to flash")
        g2 = c.gets("rc")
        eq(g1[1], g2[1], "the unique is kept by the copy back to RAM")
    with flash_server("norecache", more="ext_recache_rate=0") as s, \
            s.client(timeout=10) as c:
        set_pipelined(c, [("rc", a)])
        push_to_flash(c, "1")
        for _ in range(3):
            v, d = get_counting(c, "rc")
            eq(v, a, "read with recache off")
            eq(d, 1, "still read from flash")
        eq(stat(c, "recache_from_extstore"), 0, "nothing copied back")


@test
def value_read_again_recached_to_ram():
    """ext_recache_hot (default on): a value read from flash a second time
    soon after the first is copied back to RAM, whatever ext_recache_rate's
    count says; the third read is a RAM hit, exact, with the same unique.
    ext_recache_hot=0: every read goes to flash (ext_recache_rate=0 turns
    both off: flashed_item_recached_to_ram). (slabcache only.)"""
    slabcache_only()
    a, b = value_for("hk", 1), value_for("hk2", 1)
    with flash_server("hot", more="ext_recache_rate=1000000") as s, \
            s.client(timeout=10) as c:
        eq(c.stats("settings").get("ext_recache_hot"), "yes", "stats settings")
        set_pipelined(c, [("hk", a), ("hk2", b)])
        push_to_flash(c, "1")
        before = stat(c, "recache_from_extstore")
        v1, d1 = get_counting(c, "hk")
        eq((v1, d1), (a, 1), "first read, from flash")
        eq(stat(c, "recache_from_extstore"), before, "a first read stays on flash")
        v2, d2 = get_counting(c, "hk2")
        eq((v2, d2), (b, 1), "another key's first read, from flash")
        g1 = c.gets("hk")
        eq(g1[0], a, "second read, from flash")
        eq(stat(c, "recache_from_extstore"), before + 1, "read again: copied back")
        v3, d3 = get_counting(c, "hk")
        eq((v3, d3), (a, 0), "third read, from RAM")
        eq(c.gets("hk")[1], g1[1], "the unique is kept")
        v4, d4 = get_counting(c, "hk2")
        eq((v4, d4), (b, 1), "hk2's second read, from flash")
    with flash_server("nohot", more="ext_recache_rate=1000000,ext_recache_hot=0") as s, \
            s.client(timeout=10) as c:
        eq(c.stats("settings").get("ext_recache_hot"), "no", "stats settings")
        set_pipelined(c, [("hk", a)])
        push_to_flash(c, "1")
        for i in range(3):
            eq(get_counting(c, "hk"), (a, 1), "read %d with ext_recache_hot=0" % i)
        eq(stat(c, "recache_from_extstore"), 0, "nothing copied back")


@test
def read_item_outlives_flash_wrap():
    """A small file (8 flash slabs) wraps many times over; a key read
    between the bursts is written again before its flash slab is reclaimed
    (extstore_compact_rescues), so it stays a hit, exact; with recache off
    it is still read from flash, not RAM. A key marked stale (md I: a new
    CAS) is written again the same way and keeps its new CAS and its mark.
    (slabcache only: memcached compacts by its own rules.)"""
    slabcache_only()
    hot, stale = value_for("hot", 1), value_for("stale", 1)
    with flash_server("rescue", size="8m", more="ext_recache_rate=0") as s, \
            s.client(timeout=10) as c:
        set_pipelined(c, [("hot", hot), ("stale", stale)])
        push_to_flash(c, "0", n=3000)
        eq(c.cmd("md stale I"), "HD", "md stale I")
        cas = None
        for r in range(8):
            v, d = get_counting(c, "hot")
            eq(v, hot, "hot after %d wraps" % r)
            eq(d, 1, "hot read from flash")
            before = stat(c, "get_extstore")
            c.send(b"mg stale v c\r\n")
            line = c.read_line().decode()
            m = re.fullmatch(r"VA 4096 c(\d+) [WXZ ]+", line)
            check(m and "X" in line.split(), "stale after %d wraps: %r" % (r, line))
            eq(c.read_exact(VALUE_SIZE + 2), stale + b"\r\n", "stale's value")
            eq(stat(c, "get_extstore") - before, 1, "stale read from flash")
            cas = cas or m.group(1)
            eq(m.group(1), cas, "stale's CAS kept through rewrites")
            push_to_flash(c, "w%d" % r, n=1500)
        st = c.stats()
        check(int(st["extstore_page_evictions"]) > 16, "the file wrapped")
        check(int(st["extstore_compact_rescues"]) >= 8, "hot and stale were written again")


@test
def flash_answers_past_the_output_bound():
    """Answers waiting for flash reads count against a connection's output
    bound (1 MB): a multi-get of 400 flash-resident 4 KB values (1.6 MB),
    and a flash get followed by 300 pipelined gets of RAM values, are both
    answered in full and in order (review finding: the worker spun for
    ever once waiting answers filled the bound)."""
    keys = ["ob%03d" % i for i in range(400)]
    with flash_server("bound") as s, s.client(timeout=20) as c:
        set_pipelined(c, [(k, value_for(k, 1)) for k in keys])
        push_to_flash(c, "1")
        got = c.get_multi(keys)
        eq(len(got), len(keys), "every flash-resident key answered")
        check(all(got[k][0] == value_for(k, 1) for k in keys), "values exact")
        ram = ["ram%03d" % i for i in range(300)]
        set_pipelined(c, [(k, value_for(k, 2)) for k in ram])
        set_pipelined(c, [("ob-late", value_for("ob-late", 1))])
        push_to_flash(c, "2")
        set_pipelined(c, [(k, value_for(k, 2)) for k in ram])   # back in RAM
        want = [("ob-late", value_for("ob-late", 1))] + [(k, value_for(k, 2)) for k in ram]
        c.send(b"".join(b"get %s\r\n" % k.encode() for k, _ in want))
        for k, v in want:
            got = c.read_values()
            eq(list(got), [k], "answer for " + k + " in order")
            eq(got[k][0], v, "value of " + k)
        check(s.alive(), "server alive")


@test
def flashed_gets_cas():
    """The unique from `gets` of a flashed item works with `cas`. Nothing
    reads the item between the gets and the cas: memcached moves a flashed
    item back to RAM on a later read (recache: the connection's first read
    of an item hit twice within 60 s, then every ext_recache_rate-th), and
    that relink gives it a NEW cas unique, while the read that caused it
    still returned the old one; slabcache keeps the unique (soft_check)."""
    a = value_for("ck", 1)
    with flash_server("cas") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("ck", a), ("ck2", value_for("ck2", 1))])
        push_to_flash(c, "1")
        eq(c.cas("ck", b"wrong", 987654321), "EXISTS", "cas, wrong unique")
        before = stat(c, "get_extstore")
        r = c.gets("ck")
        check(r is not None, "ck missing after push")
        eq(r[0], a, "gets value of flashed ck (after a refused cas)")
        check(stat(c, "get_extstore") > before, "gets read ck from flash")
        check(r[1] and r[1] > 0, "cas unique %r" % r[1])
        eq(c.cas("ck", value_for("ck", 2), r[1]), "STORED",
           "cas with gets' unique")
        eq(c.get("ck"), value_for("ck", 2), "value after cas")
        # re-reads of a flashed item keep its unique (memcached: X, X, Y)
        reads = [c.gets("ck2") for _ in range(3)]
        check(all(r and r[0] == value_for("ck2", 1) for r in reads),
              "ck2 read back exact")
        uniques = [r[1] for r in reads]
        soft_check(len(set(uniques)) == 1,
                   "cas unique unchanged by reads of flashed ck2 %r" % uniques)
        eq(c.cas("ck2", value_for("ck2", 2), uniques[-1]), "STORED",
           "cas with the last gets' unique")


@test
def flashed_meta_get():
    a = value_for("mk", 1)
    with flash_server("meta") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("mk", a)], flags=5)
        push_to_flash(c, "1")
        before = stat(c, "get_extstore")
        c.send(b"mg mk v f t s c k\r\n")
        line = c.read_line().decode()
        m = re.fullmatch(r"VA 4096 f5 t-1 s4096 c(\d+) kmk", line)
        check(m, "mg mk v f t s c k: %r" % line)
        eq(c.read_exact(VALUE_SIZE + 2), a + b"\r\n", "mg value")
        check(stat(c, "get_extstore") > before, "mg read mk from flash")
        r = c.gets("mk")
        eq(r, (a, int(m.group(1))), "gets after mg: value and same cas")


@test
def flashed_item_invalidated_is_served_stale():
    """md I on a flash-resident item: it is marked stale with a new CAS and
    still served: the next mg reads it from flash, wins the recache (W) and
    sees it stale (X); a cas with the old unique is refused, one with the
    latest stores. slabcache then answers as for a RAM item (X Z: stale, a
    win already handed out); memcached's recache drops the mark and gives a
    new CAS (soft_check). Until 8d44924 slabcache answered EN: the new
    CAS made the record unreadable (its CAS was part of the read's check)."""
    a = value_for("ik", 1)
    with flash_server("stale") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("ik", a)])
        push_to_flash(c, "1")
        old = c.gets("ik")
        eq(old and old[0], a, "gets of flashed ik")
        eq(c.cmd("md ik I"), "HD", "md ik I")
        for want in ("W", "Z"):
            before = stat(c, "get_extstore")
            c.send(b"mg ik v c\r\n")
            line = c.read_line().decode()
            m = re.fullmatch(r"VA 4096 c(\d+)((?: [WXZ])*)", line)
            check(m, "mg ik v c after md I: %r" % line)
            eq(c.read_exact(VALUE_SIZE + 2), a + b"\r\n", "stale value served")
            flags, new = set(m.group(2).split()), int(m.group(1))
            if want == "W":
                eq(flags, {"X", "W"}, "first read after md I: %r" % line)
                check(stat(c, "get_extstore") > before, "read from flash")
                check(new != old[1], "md I gave a new cas (%d, %d)" % (new, old[1]))
            else:
                soft_check(flags == {"X", "Z"}, "second read, still stale: %r" % line)
        eq(c.cas("ik", value_for("ik", 2), old[1]), "EXISTS", "cas, old unique")
        eq(c.cas("ik", value_for("ik", 2), new), "STORED", "cas, latest unique")
        eq(c.get("ik"), value_for("ik", 2), "value after cas")


@test
def flashed_gat():
    a = value_for("gk", 1)
    with flash_server("gat") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("gk", a)], flags=3)
        push_to_flash(c, "1")
        before = stat(c, "get_extstore")
        c.send(b"gat 100 gk\r\n")
        eq(c.read_values(), {"gk": (a, 3, None)}, "gat 100 gk")
        check(stat(c, "get_extstore") > before, "gat read gk from flash")
        line = c.cmd("mg gk t")
        check(line in ("HD t100", "HD t99"), "mg gk t after gat: %r" % line)
        eq(c.get("gk"), a, "value after gat")


def binary_get(port, key, opaque=0x1234):
    """One binary-protocol GET; (status, flags, value)."""
    sock = socket.create_connection((HOST, port), timeout=5)
    try:
        sock.sendall(struct.pack(">BBHBBHIIQ", 0x80, 0x00, len(key), 0, 0,
                                 0, len(key), opaque, 0) + key)
        data = b""
        while len(data) < 24 or len(data) < 24 + \
                struct.unpack(">I", data[8:12])[0]:
            chunk = sock.recv(65536)
            check(chunk, "binary GET: connection closed (have %d bytes)"
                  % len(data))
            data += chunk
    finally:
        sock.close()
    magic, op, klen, elen, _dt, status, blen, opq, _cas = \
        struct.unpack(">BBHBBHIIQ", data[:24])
    eq((magic, op, klen, elen, opq), (0x81, 0x00, 0, 4 if status == 0 else 0,
                                      opaque), "binary GET header")
    eq(len(data), 24 + blen, "binary GET: one packet")
    body = data[24:]
    flags = struct.unpack(">I", body[:4])[0] if elen == 4 else None
    return status, flags, body[elen + klen:]


@test
def flashed_binary_get():
    a = value_for("bk", 1)
    with flash_server("binary") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("bk", a)], flags=7)
        push_to_flash(c, "1")
        before = stat(c, "get_extstore")
        eq(binary_get(s.port, b"bk"), (0, 7, a), "binary GET of flashed bk")
        check(stat(c, "get_extstore") > before, "binary GET read from flash")
        st, _f, _v = binary_get(s.port, b"nokey")
        eq(st, 1, "binary GET of a missing key: KEY_ENOENT")


@test
def flashed_append_prepend():
    """memcached 1.6.18 answers NOT_STORED to append/prepend on an item
    whose value is on flash, and leaves it alone; slabcache must too. (incr
    on such an item is only printed: memcached sees the flash header, not
    the digits, and answers CLIENT_ERROR non-numeric.)"""
    with flash_server("append") as s, s.client(timeout=10) as c:
        num = b"12345" + b" " * (VALUE_SIZE - 5)
        set_pipelined(c, [("ap", value_for("ap", 1)),
                          ("pp", value_for("pp", 1)), ("num", num)])
        push_to_flash(c, "1")
        # no read first: a read may bring the item back to RAM
        ra = c.append("ap", b"XX")
        rp = c.prepend("pp", b"XX")
        ri = c.cmd("incr num 1")
        print("     on flash: append %s, prepend %s, incr %s"
              % (ra, rp, ri[:60]))
        # they were on flash (read from there now) and are unchanged
        expect_from_flash(c, "ap", value_for("ap", 1))
        expect_from_flash(c, "pp", value_for("pp", 1))
        eq(ra, "NOT_STORED", "append on a flashed item")
        eq(rp, "NOT_STORED", "prepend on a flashed item")
        v = c.get("num")
        check(v in (num, None) or v.strip() == b"12346",
              "num after incr: %r" % (v[:20] if v else v))


@test
def flashed_pipeline_in_order():
    """One write mixing RAM, flash and missing keys, get and meta: every
    answer in request order, byte for byte."""
    f1, f2 = value_for("fk1", 1), value_for("fk2", 1)
    with flash_server("pipeline") as s, s.client(timeout=10) as c:
        set_pipelined(c, [("fk1", f1), ("fk2", f2)])
        push_to_flash(c, "1")
        ram = {"rk": b"ram value", "k1": b"one", "k3": b"three"}
        set_pipelined(c, list(ram.items()))

        def val(k, v):
            return b"VALUE %s 0 %d\r\n%s\r\n" % (k.encode(), len(v), v)
        req = (b"get rk\r\nget fk1\r\nget missingkey\r\n"
               b"get k1 fk2 k3\r\nmg fk1 v\r\nmg missingkey v q\r\n"
               b"mg fk2 v k q\r\nset rk2 0 0 3\r\nabc\r\nget rk2 fk1\r\n"
               b"mn\r\n")
        want = (val("rk", ram["rk"]) + b"END\r\n" +
                val("fk1", f1) + b"END\r\n" +
                b"END\r\n" +
                val("k1", ram["k1"]) + val("fk2", f2) + val("k3", ram["k3"])
                + b"END\r\n" +
                b"VA 4096\r\n" + f1 + b"\r\n" +
                b"VA 4096 kfk2\r\n" + f2 + b"\r\n" +
                b"STORED\r\n" +
                val("rk2", b"abc") + val("fk1", f1) + b"END\r\n" +
                b"MN\r\n")
        before = stat(c, "get_extstore")
        c.send(req)
        got = c.read_exact(len(want))
        if got != want:
            i = next(i for i in range(len(want)) if got[i] != want[i])
            raise AssertionError("pipeline answers differ at byte %d: "
                                 "want %r, got %r" % (i, want[i:i + 60],
                                                      got[i:i + 60]))
        c.expect_nothing(0.2)
        ge = stat(c, "get_extstore") - before
        check(ge >= 2, "pipeline read fk1 and fk2 from flash (+%d)" % ge)


def io_uring_works():
    """Whether this kernel lets a process here set up an io_uring (the
    io_uring_setup system call, x86-64 number 425)."""
    import ctypes
    import platform
    if platform.machine() != "x86_64":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 2, params)
    if fd < 0:
        return False
    os.close(fd)
    return True


def no_ring(s):
    """True (said) when the server has no io_uring, which is allowed only
    where this process cannot set one up either, or a sandbox refuses
    what goes through one (the server's line says "no-op")."""
    out = s.output()
    if "ext_io_uring:" not in out:
        return False
    line = [ln for ln in out.splitlines() if "ext_io_uring:" in ln][-1]
    check(not io_uring_works() or "no-op" in line,
          "this process can set up io_uring, the server said: %s" % line)
    print("     SKIP the ring part: %s" % line)
    return True


def drop_page_cache(path):
    """The file's pages leave the page cache: reads go to the device (and
    finish after the flush that sent them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@test
def reads_through_the_ring():
    """-o ext_io_uring (on by default): a worker reads flash through its
    own io_uring, counted in extstore_ring_reads. With a ring one read
    deep, one multi-get of 40 flash items, pipelined with RAM hits, queues
    behind it and every value comes back exact and in order; the file is
    out of the page cache, so each read finishes after the flush that sent
    it and wakes the worker through the ring's descriptor (a lost wake-up
    hangs the test). With ext_io_uring=0 the I/O threads read them and the
    ring counts none."""
    slabcache_only()
    keys = ["rg%d" % i for i in range(40)]
    vals = {k: value_for(k, 3) for k in keys}
    for name, more in (("ring1", "ext_io_depth=1"), ("noring", "ext_io_uring=0")):
        with flash_server(name, more=more) as s, s.client(timeout=10) as c:
            set_pipelined(c, list(vals.items()))
            push_to_flash(c, name)
            set_pipelined(c, [("ram1", b"one"), ("ram2", b"two")])
            if name == "ring1" and no_ring(s):
                continue
            drop_page_cache(os.path.join(_TMPDIR[0], name))
            before = c.stats()
            c.send(b"get ram1 " + " ".join(keys).encode() + b" ram2\r\nget ram2\r\n")
            want = b"VALUE ram1 0 3\r\none\r\n"
            want += b"".join(b"VALUE %s 0 %d\r\n%s\r\n" % (k.encode(), len(vals[k]), vals[k])
                             for k in keys)
            want += b"VALUE ram2 0 3\r\ntwo\r\nEND\r\nVALUE ram2 0 3\r\ntwo\r\nEND\r\n"
            eq(c.read_exact(len(want)), want, "%s: multi-get answers" % name)
            c.expect_nothing(0.2)
            after = c.stats()

            def delta(stat_name):
                return int(after[stat_name]) - int(before[stat_name])
            check(delta("get_extstore") >= 30,
                  "%s: most of the 40 came from flash (%d)" % (name, delta("get_extstore")))
            if name == "ring1":
                check(delta("extstore_ring_reads") >= 30,
                      "the ring read them (%d)" % delta("extstore_ring_reads"))
            else:
                eq(int(after["extstore_ring_reads"]), 0, "no ring without ext_io_uring")
                check(delta("extstore_objects_read") >= 30, "the I/O threads read them")


@test
def metadump_reads_flash_keys_without_blocking():
    """A dump's flash items: their keys come from their records, read as
    a get's values are (the worker's ring, else the I/O threads), not by a
    blocking read on the worker (until 6d9c4a9): every key listed, the
    reads counted in extstore_ring_reads with the ring (not in
    extstore_objects_read: a dump reads no object), the lines in order
    before END and the answer pipelined behind it, though a connection
    holds at most 16 such lines at a time. (slabcache only: memcached
    keeps its keys in RAM.)"""
    slabcache_only()
    keys = ["dk%04d" % i for i in range(600)]
    for name, more in (("dumpring", ""), ("dumppool", "ext_io_uring=0")):
        with flash_server(name, more=more) as s, s.client(timeout=20) as c:
            set_pipelined(c, [(k, value_for(k, 1)) for k in keys])
            push_to_flash(c, "1")
            drop_page_cache(os.path.join(_TMPDIR[0], name))
            b = c.stats()
            c.send(b"lru_crawler metadump all\r\nmn\r\n")
            data = b""
            while not data.endswith(b"END\r\nMN\r\n"):
                chunk = c.sock.recv(1 << 20)
                check(chunk, "connection closed mid-dump")
                data += chunk
            a = c.stats()
            check(data.startswith(b"OK\r\n"), "the dump opens with OK: %r" % data[:20])
            body = data[4:data.index(b"END\r\nMN\r\n")]
            check(all(ln.startswith(b"key=") for ln in body.split(b"\n") if ln),
                  "only key lines between OK and END")
            listed = set(re.findall(rb"key=(dk\d+) ", data))
            eq(sorted(k for k in keys if k.encode() not in listed), [],
               "%s: flash-resident keys missing from the dump" % name)
            flashed = int(a["extstore_objects_used"])
            check(flashed > len(keys), "%s: %d items on flash" % (name, flashed))
            eq(int(a["extstore_objects_read"]), int(b["extstore_objects_read"]),
               "%s: a dump reads no object" % name)
            ring = int(a["extstore_ring_reads"]) - int(b["extstore_ring_reads"])
            if more:
                eq(ring, 0, "no ring reads with ext_io_uring=0")
            elif not no_ring(s):
                check(ring >= len(keys), "%s: through the ring (%d)" % (name, ring))
            check(s.alive(), "server alive")


@test
def dump_to_non_reading_clients_is_bounded():
    """Dump connections that never read hold a bounded amount of memory
    each: a flash item's line waits for its key with about 2 KB of heap,
    and a connection holds at most 16 (with DISPATCH_DUMP_FLASH_MAX raised
    to 1,000,000 this test measured 2,390 KB per connection). Gets
    of flash items on another connection are served meanwhile.
    (slabcache only.)"""
    slabcache_only()
    if sclib.is_sanitized():
        print("     (ASan build: RSS figures not checked)")
        return
    nconn, bound_kb = 20, 160   # test_slow_readers.py's per-connection bound
    keys = ["hd%04d" % i for i in range(600)]
    with flash_server("dumphog") as s, s.client(timeout=20) as c:
        set_pipelined(c, [(k, value_for(k, 1)) for k in keys])
        push_to_flash(c, "1")
        time.sleep(0.2)
        base = sclib.rss_kb(s.pid)
        socks = []
        for _ in range(nconn):
            sock = socket.create_connection((HOST, s.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"lru_crawler metadump all\r\n")
            socks.append(sock)
        last, end = sclib.rss_kb(s.pid), time.monotonic() + 10
        while time.monotonic() < end:
            time.sleep(0.5)
            now = sclib.rss_kb(s.pid)
            if abs(now - last) <= last // 100:
                break
            last = now
        grown = (sclib.rss_kb(s.pid) - base) / nconn
        expect_from_flash(c, keys[1], value_for(keys[1], 1))
        for sock in socks:
            sock.close()
        check(grown < bound_kb, "%.0f KB per non-reading dump connection" % grown)
        check(s.alive(), "server alive")


@test
def ring_answer_made_while_answering():
    """A connection paused on its output bound by answers waiting for the
    ring (300 flash values, 1.2 MB) resumes while the worker answers them
    and parses the get behind them, of a record still in a write buffer,
    which is copied at once: that answer goes out too (review finding: it
    waited for an unrelated wake-up, as the worker answered only reads
    that had gone through the kernel)."""
    slabcache_only()
    keys = ["ra%04d" % i for i in range(2500)]
    # ext_recache_hot=0: the rounds read the same keys again, which would
    # otherwise be copied back to RAM after round 0 and never reach the ring
    with flash_server("answering", more="ext_recache_hot=0") as s, \
            s.client(timeout=10) as c:
        if no_ring(s):
            return
        set_pipelined(c, [(k, value_for(k, 1)) for k in keys])
        wait_writer(c)

        def where(k):
            b = c.stats()
            v = c.get(k)
            a = c.stats()
            ring = int(a["extstore_ring_reads"]) - int(b["extstore_ring_reads"])
            fl = int(a["get_extstore"]) - int(b["get_extstore"])
            return v, ("device" if ring else "buffer" if fl else "ram")
        # eviction roughly follows set order: the newest flash records are
        # in the write buffer still, the oldest on the file
        buffered = None
        for k in reversed(keys[:1500]):
            v, w = where(k)
            if w == "buffer":
                buffered = k
                break
        check(buffered is not None, "a record still in the write buffer")
        on_file = []
        for k in keys:
            if len(on_file) == 260:
                break
            if k != buffered and where(k)[1] == "device":
                on_file.append(k)
        check(len(on_file) == 260, "260 records on the file (%d)" % len(on_file))
        # the bound (1 MB) pauses input after about 255 answers of 4 KB:
        # the get behind them is parsed when the worker answers them
        for round_, n in enumerate(range(250, 261)):
            c.send(b"".join(b"get %s\r\n" % k.encode() for k in on_file[:n]) +
                   b"get %s\r\n" % buffered.encode())
            for k in on_file[:n] + [buffered]:
                got = c.read_values()
                eq(list(got), [k], "round %d: answer for %s in order" % (round_, k))
                eq(got[k][0], value_for(k, 1), "value of " + k)
        check(s.alive(), "server alive")


# --------------------------------------------------------------------------
# wrap, options, restart
# --------------------------------------------------------------------------

@test
def wrap_small_file():
    """An 8 MB file takes 20,000 x 4 KB: the oldest flash data is reclaimed;
    misses yes, wrong values never."""
    n = 20000
    keys = ["wr:%05d" % i for i in range(n)]
    rnd = random.Random(7)
    with flash_server("wrap", size="8m") as s, s.client(timeout=10) as c:
        for start in range(0, n, 2000):
            set_pipelined(c, [(k, value_for(k, 1))
                              for k in keys[start:start + 2000]])
            sample = rnd.sample(keys[:start + 2000], 100)
            for k, v in read_all(c, sample).items():
                eq(v, value_for(k, 1), "value of %s during wrap" % k)
        wait_writer(c)
        got = read_all(c, keys, batch=200)
        for k, v in got.items():
            eq(v, value_for(k, 1), "value of %s after wrap" % k)
        st = c.stats()
        print("     %d/%d hits; extstore_page_evictions=%s "
              "extstore_objects_evicted=%s get_extstore=%s"
              % (len(got), n, st.get("extstore_page_evictions"),
                 st.get("extstore_objects_evicted"), st.get("get_extstore")))
        check(len(got) > 0, "some keys survive")
        soft_check(int(st.get("extstore_page_evictions", "0")) > 0,
                   "extstore_page_evictions > 0")
        if is_slabcache():
            # The RAM index does not fill with stubs of reclaimed slabs: the
            # file holds ~2,000 of these values (review: 50x that before).
            fits = 8 * 1024 * 1024 // VALUE_SIZE
            used = int(st.get("extstore_objects_used", "0"))
            check(used <= 4 * fits, "stubs %d for a file of ~%d records" % (used, fits))
            # a page is evicted at most once per page allocated after it
            check(int(st["extstore_page_evictions"]) <= int(st["extstore_page_allocs"]),
                  "page evictions %s <= allocations %s" % (st["extstore_page_evictions"],
                                                           st["extstore_page_allocs"]))
        check(s.alive(), "server alive")


def items_in_classes_of(c, size):
    """Items stored in the slab classes whose chunks hold `size` bytes or
    more (stats slabs / stats items): where values of that size live, and
    not the small stubs (index entries) of flash-resident ones."""
    sl, it = c.stats("slabs"), c.stats("items")
    n = 0
    for k, v in sl.items():
        m = re.match(r"(\d+):chunk_size$", k)
        if m and int(v) >= size:
            n += int(it.get("items:%s:number" % m.group(1), "0"))
    return n


def wait_until(fn, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if fn():
            return True
        time.sleep(0.2)
    return fn()


@test
def idle_items_written_by_age():
    """-o ext_item_age=1: items idle over a second go to flash with RAM far
    from full (memcached's storage writer does the same); read back exact
    from flash. Without it nothing is written while RAM has room."""
    size, n = 20000, 10
    keys = ["age:%d" % i for i in range(n)]
    with Server("-m", "64", *ext_args(flash_path("age0"))) as s, s.client() as c:
        set_pipelined(c, [(k, value_for(k, 1, size)) for k in keys])
        time.sleep(2.5)
        eq(stat(c, "extstore_objects_written"), 0, "written with RAM free, no ext_item_age")
        eq(items_in_classes_of(c, size), n, "values in RAM")
    with Server("-m", "64", *ext_args(flash_path("age1"), more="ext_item_age=1")) as s, \
            s.client() as c:
        eq(c.stats("settings").get("ext_item_age"), "1", "stats settings ext_item_age")
        set_pipelined(c, [(k, value_for(k, 1, size)) for k in keys])
        moved = wait_until(lambda: items_in_classes_of(c, size) == 0, 15)
        soft_check(moved, "every value left RAM within 15 s (%d left)"
                   % items_in_classes_of(c, size))
        # n x 20 KB fill no write buffer: in the tier, not yet on the device
        soft_check(stat(c, "extstore_objects_used") >= n, "objects in the flash tier")
        for k in keys:
            v, d = get_counting(c, k)
            eq(v, value_for(k, 1, size), "value of " + k)
            soft_check(d >= 1, "%s read from flash" % k)


@test
def read_items_stay_in_ram_under_item_age():
    """-o ext_item_age=1: a key read every 0.3 s is not idle and stays in
    RAM (reads do not write an item's time; the sweep spares items read
    since the CLOCK hand last passed), while an unread one goes to flash."""
    size = 20000
    with Server("-m", "64", *ext_args(flash_path("agehot"), more="ext_item_age=1")) as s, \
            s.client() as c:
        set_pipelined(c, [("hot", value_for("hot", 1, size)),
                          ("cold", value_for("cold", 1, size))])
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4:
            eq(c.get("hot"), value_for("hot", 1, size), "hot")
            time.sleep(0.3)
        soft_check(items_in_classes_of(c, size) == 1, "only the unread value left RAM")
        v, d = get_counting(c, "hot")
        eq(v, value_for("hot", 1, size), "hot")
        soft_check(d == 0, "hot served from RAM")
        v, d = get_counting(c, "cold")
        eq(v, value_for("cold", 1, size), "cold")
        soft_check(d == 1, "cold served from flash")
        # read once, then idle: its age starts at the read, and it goes
        # too (a review found a first fix that kept it in RAM for good)
        eq(c.set("once", value_for("once", 1, size)), "STORED")
        eq(c.get("once"), value_for("once", 1, size), "once")
        soft_check(wait_until(lambda: items_in_classes_of(c, size) == 0, 10),
                   "values read once, then idle, go to flash")
        v, d = get_counting(c, "once")
        eq(v, value_for("once", 1, size), "once")
        soft_check(d == 1, "once served from flash")


@test
def extstore_command_tunes_at_run_time():
    """memcached's `extstore <knob> <value>`: OK and in effect at once
    (stats settings; item_age starts the early writes, item_size decides
    which values they take), ERROR for what it cannot take, nothing back
    with noreply."""
    size = 20000
    with Server("-m", "64", *ext_args(flash_path("extcmd"))) as s, s.client() as c:
        for bad in ("extstore", "extstore item_size", "extstore item_size abc",
                    "extstore bogus 1"):
            eq(c.cmd(bad), "ERROR", bad)
        eq(c.cmd("extstore recache_rate 5"), "OK")
        eq(c.cmd("extstore drop_unread 1"), "OK")
        eq(c.cmd("extstore drop_unread 0"), "OK")
        eq(c.cmd("extstore max_frag 0.5"), "OK")
        eq(c.cmd("extstore item_size 30000"), "OK")
        st = c.stats("settings")
        eq({k: st.get(k) for k in ("ext_recache_rate", "ext_drop_unread", "ext_max_frag",
                                    "ext_item_size")},
           {"ext_recache_rate": "5", "ext_drop_unread": "no", "ext_max_frag": "0.50",
            "ext_item_size": "30000"}, "stats settings after extstore commands")
        c.send(b"extstore item_age 1 noreply\r\n")
        eq(c.cmd("version").split()[0], "VERSION", "noreply: no answer")
        eq(c.stats("settings").get("ext_item_age"), "1", "item_age set")
        eq(c.set("v", value_for("v", 1, size)), "STORED")
        time.sleep(3)
        soft_check(items_in_classes_of(c, size) == 1,
                   "a value under ext_item_size stays in RAM")
        eq(c.cmd("extstore item_size 512"), "OK")
        soft_check(wait_until(lambda: items_in_classes_of(c, size) == 0, 10),
                   "then it goes to flash")
        v, d = get_counting(c, "v")
        eq(v, value_for("v", 1, size), "value of v")
        eq(c.cmd("extstore item_age 4294967295"), "OK")
        eq(c.stats("settings").get("ext_item_age"), "4294967295", "item_age off")
        if is_slabcache():
            eq(c.cmd("extstore compact_under 3"), "ERROR", "fixed at start here")
            eq(c.cmd("extstore max_frag 2"), "ERROR", "a share")
        check(s.alive(), "server alive")


@test
def reclaimed_record_counts_miss_from_extstore():
    """A key whose stub is still in RAM but whose flash slab was reclaimed
    misses and counts miss_from_extstore, as in memcached (its header item
    in RAM, its page gone): -m 64 keeps the stubs, an 8 MB file wraps."""
    size = 20000
    with Server("-m", "64", *ext_args(flash_path("gone"), size="8m",
                                      more="ext_item_age=1")) as s, s.client() as c:
        eq(c.set("gone:first", value_for("gone:first", 1, size)), "STORED")
        check(wait_until(lambda: items_in_classes_of(c, size) == 0, 15),
              "first value written to flash")
        filler = [("gone:%d" % i, value_for("gone:%d" % i, 1, size)) for i in range(800)]
        for i in range(0, len(filler), 100):
            set_pipelined(c, filler[i:i + 100])
            wait_until(lambda: items_in_classes_of(c, size) == 0, 15)
        check(int(c.stats().get("extstore_page_evictions", "0")) > 0,
              "the file wrapped (16 MB into 8 MB)")
        before = stat(c, "miss_from_extstore")
        eq(c.get("gone:first"), None, "reclaimed record: a miss")
        soft_check(stat(c, "miss_from_extstore") > before, "miss_from_extstore rose")
        eq(c.get("gone:first"), None, "still a miss")
        check(s.alive(), "server alive")


@test
def ext_tuning_options_in_stats_settings():
    """ext_item_size, ext_threads, ext_wbuf_size, ext_recache_rate and
    ext_drop_unread are accepted; `stats settings` shows memcached's
    defaults without them and the given values with them (memcached shows
    ext_wbuf_size in bytes, and no ext_threads line)."""
    defaults = {"ext_item_size": "512", "ext_recache_rate": "2000",
                "ext_wbuf_size": "4194304", "ext_drop_unread": "no"}
    given = {"ext_item_size": "1024", "ext_recache_rate": "100",
             "ext_wbuf_size": "2097152", "ext_drop_unread": "yes"}
    recache = ",ext_recache_rate=100"
    if is_slabcache():
        # slabcache's flash slab is its write buffer: 1 MB, the RAM slab
        # size (notes/flash.md).
        defaults["ext_wbuf_size"] = "1048576"
    with Server("-m", RAM_MB, "-o", "ext_path=%s:64m"
                % flash_path("defaults")) as s, s.client() as c:
        st = c.stats("settings")
        eq({k: st.get(k) for k in defaults}, defaults, "default ext_ settings")
    opts = ("ext_item_size=1024,ext_threads=2,ext_wbuf_size=2,"
            "ext_drop_unread" + recache)
    with Server("-m", RAM_MB, "-o", "ext_path=%s:64m,%s"
                % (flash_path("given"), opts)) as s, s.client() as c:
        st = c.stats("settings")
        eq({k: st.get(k) for k in given}, given, "ext_ settings as given")
        eq(c.set("k", value_for("k", 1)), "STORED")
        eq(c.get("k"), value_for("k", 1), "serves")


@test
def page_reclaimed_whole():
    """-o ext_page_size=4 with 1 MB write buffers: flash space is reclaimed
    4 MB at a time (as memcached's pages), so the first reclaim drops the
    records of four flash slabs at once, not one; values stay exact."""
    slabcache_only()
    size, per_slab = 20000, (1 << 20) // 20100
    with Server("-m", RAM_MB, "-o", "ext_path=%s:16m,ext_wbuf_size=1,ext_page_size=4"
                % flash_path("page")) as s, s.client() as c:
        first = None
        for i in range(3000):
            k = "pg:%d" % i
            eq(c.set(k, value_for(k, 1, size)), "STORED")
            st = c.stats()
            if int(st.get("extstore_page_evictions", "0")) > 0:
                first = int(st["extstore_objects_evicted"])
                break
        check(first is not None, "a page was reclaimed")
        print("     first page reclaim dropped %d records (%d per flash slab)"
              % (first, per_slab))
        check(first > 2 * per_slab, "records of more than one slab dropped at once")
        eq(c.stats("settings").get("ext_wbuf_size"), "1048576", "wbuf")
        got = read_all(c, ["pg:%d" % j for j in range(i + 1)])
        for k, v in got.items():
            eq(v, value_for(k, 1, size), "value of " + k)
        check(s.alive(), "server alive")


@test
def compact_under_keeps_pages_free():
    """-o ext_compact_under=3: the oldest page is reclaimed once fewer than
    3 pages are free, so 2 stay free ahead of the writer after the file
    wraps (default 1: none); values stay exact."""
    slabcache_only()
    for under, free in ((1, 0), (3, 2)):
        with flash_server("under%d" % under, size="8m",
                          more="ext_compact_under=%d" % under) as s, \
                s.client(timeout=10) as c:
            eq(c.stats("settings").get("ext_compact_under"), str(under), "stats settings")
            keys = ["cu:%d" % i for i in range(6000)]
            set_pipelined(c, [(k, value_for(k, 1)) for k in keys])
            wait_writer(c)
            st = c.stats()
            check(int(st["extstore_page_evictions"]) > 8, "the file wrapped")
            eq(int(st["extstore_pages_free"]), free,
               "pages free with ext_compact_under=%d" % under)
            for k, v in read_all(c, keys, batch=200).items():
                eq(v, value_for(k, 1), "value of " + k)


@test
def max_frag_zero_rewrites_nothing():
    """-o ext_max_frag=0: no share of a reclaimed page may be rewritten, so
    a key read between bursts is lost when its page is reclaimed (with the
    default 0.25 it is written again: read_item_outlives_flash_wrap)."""
    slabcache_only()
    hot = value_for("hot", 1)
    with flash_server("frag0", size="8m", more="ext_recache_rate=0,ext_max_frag=0") as s, \
            s.client(timeout=10) as c:
        eq(c.stats("settings").get("ext_max_frag"), "0.00", "stats settings")
        set_pipelined(c, [("hot", hot)])
        push_to_flash(c, "0", n=3000)
        lost = None
        for r in range(8):
            v = c.get("hot")
            if v is None:
                lost = r
                break
            eq(v, hot, "hot before it is lost")
            push_to_flash(c, "w%d" % r, n=1500)
        check(lost is not None, "hot lost to the wrap")
        eq(int(c.stats()["extstore_compact_rescues"]), 0, "nothing rewritten")


def threads_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


@test
def io_depth_reads_in_flight():
    """-o ext_io_depth=N without io_uring (ext_io_uring=0): N reads in
    flight per I/O thread, which slabcache runs as N blocking readers per
    ext_threads: 2 x 3 start 4 more threads than 2 x 1, and reads come
    back exact through them."""
    slabcache_only()
    counts = {}
    for depth in (1, 3):
        more = "ext_threads=2,ext_io_depth=%d,ext_io_uring=0" % depth
        with Server("-m", RAM_MB, *ext_args(flash_path("depth%d" % depth), more=more)) as s, \
                s.client() as c:
            eq(c.set("k", value_for("k", 1)), "STORED")
            counts[depth] = threads_of(s.proc.pid)
            if depth == 3:
                push_to_flash(c, "depth")
                expect_from_flash(c, "k", value_for("k", 1))
    eq(counts[3] - counts[1], 4, "readers for ext_threads=2: depth 3 vs 1 (%r)" % counts)


def run_refused(opt):
    """Start with `-o opt`; return (exit status, stderr lines, port)."""
    port = free_port()
    cmd = [server_binary(), "-l", HOST, "-p", str(port), "-U", "0",
           "-m", RAM_MB, "-o", opt]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _out, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=5)
        raise AssertionError("server started with -o %s" % opt)
    lines = [ln for ln in err.decode("utf-8", "replace").splitlines()
             if ln.strip()]
    return p.returncode, lines, port


@test
def bad_ext_options_refused():
    """slabcache exits non-zero with one line naming the option, and never
    listens. (memcached 1.6.18 starts with sizes abc, 0 and 1m.)"""
    slabcache_only()
    nodir = os.path.join(flash_path("nodir"), "sub", "file")
    f = flash_path("bad")
    cases = [  # (option, word the message must contain, exit status)
        ("ext_path=%s:64m" % nodir, "ext_path", None),
        ("ext_path=%s:0" % f, "ext_path", EX_USAGE),
        ("ext_path=%s:abc" % f, "ext_path", EX_USAGE),
        ("ext_path=%s:1m" % f, "ext_path", EX_USAGE),
        ("ext_path=%s:64m,ext_compact_under=64" % f, "ext_compact_under",
         EX_USAGE),
        ("ext_path=%s:64m,ext_max_frag=1.5" % f, "ext_max_frag", EX_USAGE),
        ("ext_path=%s:64m,ext_max_frag=abc" % f, "ext_max_frag", EX_USAGE),
        ("ext_path=%s:64m,ext_io_depth=4097" % f, "ext_io_depth", EX_USAGE),
        ("ext_path=%s:64m,ext_io_uring=2" % f, "ext_io_uring", EX_USAGE),
        ("ext_path=%s:64m,ext_wbuf_size=2,ext_page_size=3" % f, "ext_page_size",
         EX_USAGE),
        ("ext_path=%s:8m,ext_page_size=8" % f, "ext_path", EX_USAGE),
    ]
    for opt, word, status in cases:
        code, lines, port = run_refused(opt)
        check(code > 0, "-o %s: exit status %r" % (opt, code))
        if status is not None:
            eq(code, status, "-o %s: exit status" % opt)
        eq(len(lines), 1, "-o %s: one line on stderr: %r" % (opt, lines))
        check(word in lines[0], "-o %s: message names %s: %r"
              % (opt, word, lines[0]))
        try:
            socket.create_connection((HOST, port), timeout=0.5).close()
            raise AssertionError("-o %s: something listens on %d"
                                 % (opt, port))
        except OSError:
            pass


@test
def restart_on_same_file_misses():
    """Stop (SIGTERM) and start again on the same file: every key misses;
    the file serves new values."""
    path = flash_path("restart")
    keys = ["rs:%03d" % i for i in range(200)]
    args = ["-m", RAM_MB] + ext_args(path)
    with Server(*args) as s, s.client(timeout=10) as c:
        set_pipelined(c, [(k, value_for(k, 1)) for k in keys])
        push_to_flash(c, "1")
        expect_from_flash(c, keys[0], value_for(keys[0], 1))
        # SIGTERM our PID and wait for the exit: memcached holds a lock on
        # the file until then ("extstore open: Resource temporarily
        # unavailable" otherwise)
        s.stop(wait=True)
        check(not s.alive(), "first server exited")
    with Server(*args) as s, s.client(timeout=10) as c:
        fills = ["fill:1:%d" % i for i in range(0, PUSH_ITEMS, 10)]
        eq(read_all(c, keys + fills), {}, "hits after restart")
        set_pipelined(c, [("new", value_for("new", 2))])
        push_to_flash(c, "2")
        expect_from_flash(c, "new", value_for("new", 2))
        eq(read_all(c, keys), {}, "old keys after new writes")


if __name__ == "__main__":
    require_binary()
    run_all()
