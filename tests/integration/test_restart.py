#!/usr/bin/env python3
"""Warm restart (-e PATH, as memcached's): a graceful stop (SIGUSR1 or
`shutdown graceful`) saves what indexes the slabs, and the next start with
the same options finds every unexpired item with its value, flags, CAS and
TTL. A SIGKILL, a crash after a warm start, or other options start cold and
serve no wrong value; an unreadable metadata file stops the start, as
memcached's does (its t/restart.t checks an empty one).

Run: SLABCACHE=path/to/binary python3 tests/integration/test_restart.py
"""

import contextlib
import os
import re
import shutil
import signal
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, Client, test, run_all, check, eq, slabcache_only,  # noqa
                   require_binary, wait_until)

KEYS = 100000
SHORT_TTL = 2          # seconds: these expire while the server is stopped
LONG_TTL = 3600
BATCH = 500


@contextlib.contextmanager
def memory_file():
    """(directory, its memory file path), on tmpfs when there is one (as
    the README advises); removed afterwards."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    d = tempfile.mkdtemp(prefix="sc-restart.", dir=base)
    try:
        yield d, os.path.join(d, "cache")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def value_for(i):
    """Mixed sizes, self-checking: every 1,000th 20-60 KB (chained at
    slab_chunk_max=16), the rest 10-1,200 bytes (those of 512 and more go
    to the flash tier when idle, with ext_item_age)."""
    n = 20000 + (i * 7919) % 40000 if i % 1000 == 0 else 10 + (i * 31) % 1191
    head = b"%d:" % i
    return (head * (n // len(head) + 1))[:n]


def ttl_for(i):
    if i % 97 == 0:
        return SHORT_TTL
    if i % 5 == 1:
        return LONG_TTL
    return 0


def store_all(c, keys=KEYS):
    for start in range(0, keys, BATCH):
        req = []
        for i in range(start, min(keys, start + BATCH)):
            v = value_for(i)
            req.append(b"set k%d %d %d %d\r\n%s\r\n" % (i, i, ttl_for(i), len(v), v))
        c.send(b"".join(req))
        for i in range(start, min(keys, start + BATCH)):
            eq(c.read_line(), b"STORED", "set k%d" % i)


def read_all(c, keys=KEYS):
    """{i: (flags, value)} for the keys present."""
    found = {}
    for start in range(0, keys, BATCH):
        c.send(b"".join(b"get k%d\r\n" % i for i in range(start, min(keys, start + BATCH))))
        for _ in range(start, min(keys, start + BATCH)):
            while True:
                line = c.read_line()
                if line == b"END":
                    break
                _, key, flags, n = line.split()
                found[int(key[1:])] = (int(flags), c.read_exact(int(n) + 2)[:-2])
    return found


def cas_of(c, keys):
    out = {}
    for i in keys:
        c.send(b"gets k%d\r\n" % i)
        line = c.read_line()
        if line == b"END":
            continue
        parts = line.split()
        c.read_exact(int(parts[3]) + 2)
        eq(c.read_line(), b"END")
        out[i] = int(parts[4])
    return out


def graceful_stop(s):
    os.kill(s.pid, signal.SIGUSR1)
    code = s.wait_exit(30)
    check(code == 0, "graceful stop exit %r: %s" % (code, s.output()[-500:]))


def args(path, memory=64):
    return ("-m", str(memory), "-e", path, "-o", "slab_chunk_max=16")


@test
def graceful_stop_keeps_every_item():
    """100,000 keys of 10 B to 60 KB (some chained, some on the flash tier:
    idle for a second, ext_item_age=1), stopped with SIGUSR1: the next
    start has every one whose TTL did not pass, same value, flags and CAS;
    a TTL keeps counting through the downtime; the short ones are gone;
    the metadata is used once."""
    slabcache_only()
    with memory_file() as (d, path):
        extra = ("-o", "ext_path=%s:256m,ext_item_age=1" % os.path.join(d, "flash"))
        s = Server(*args(path, memory=128) + extra).start()
        with Client(s.port) as c:
            store_all(c)
            sample = list(range(0, KEYS, 50))
            cas_before = cas_of(c, sample)
            check(wait_until(lambda: int(c.stats()["extstore_objects_used"]) > 5000, timeout=20),
                  "few keys went to flash: %s" % c.stats()["extstore_objects_used"])
            on_flash = int(c.stats()["extstore_objects_used"])
        graceful_stop(s)
        check(os.path.exists(path + ".meta"), "no metadata after a graceful stop")
        time.sleep(SHORT_TTL + 1.2)
        s = Server(*args(path, memory=128) + extra).start()
        try:
            check(not os.path.exists(path + ".meta"), "metadata left for a second start")
            check("restored %d items" % (KEYS - len(range(0, KEYS, 97))) in s.output() or
                  "restored %d items" % KEYS in s.output(),
                  "restore line: %s" % s.output()[-400:])
            m = re.search(r"\((\d+) on flash", s.output())
            check(m is not None and int(m.group(1)) >= on_flash * 0.9,
                  "%d on flash at the stop; restore line: %s" % (on_flash, s.output()[-400:]))
            with Client(s.port) as c:
                found = read_all(c)
                for i in range(KEYS):
                    if ttl_for(i) == SHORT_TTL:
                        check(i not in found, "k%d outlived its TTL" % i)
                        continue
                    check(i in found, "k%d lost" % i)
                    eq(found[i], (i, value_for(i)), "k%d" % i)
                eq(cas_of(c, sample), {i: v for i, v in cas_before.items()
                                       if ttl_for(i) != SHORT_TTL}, "CAS")
                c.send(b"mg k1 t\r\n")
                ttl = int(c.read_line().split()[1][1:])
                check(LONG_TTL - 60 < ttl < LONG_TTL - SHORT_TTL, "k1's TTL %d" % ttl)
                c.send(b"set fresh 0 0 1\r\nx\r\ngets fresh\r\n")
                eq(c.read_line(), b"STORED")
                check(int(c.read_line().split()[4]) > max(cas_before.values()),
                      "a new CAS repeats an old one")
        finally:
            s.stop()


@test
def first_slabs_room_survives_a_graceful_stop():
    """The room past -m (a slab per class asked for, as memcached's first
    pages) is saved with the slabs: a class that gave its only slab away
    before the stop still counts after it, so the give-back does not drain
    a restored slab. At -m 8, nine classes of a slab each; the 1,480-byte
    class's slab, emptied, goes to the 200 KB class (its items have a home
    in the 1,856-byte class of their group)."""
    slabcache_only()
    sizes = [50, 400, 1400, 1800, 3500, 9000, 25000, 60000]
    big = b"B" * 200000
    with memory_file() as (d, path):
        s = Server("-m", "8", "-e", path).start()
        with Client(s.port) as c:
            for n in sizes:
                eq(c.set("s%d" % n, b"x" * n), "STORED", "s%d" % n)
            eq(c.set("b0", big), "STORED", "b0")
            eq(c.cmd("delete s1400"), "DELETED")
            for i in range(1, 7):
                eq(c.set("b%d" % i, big), "STORED", "b%d" % i)
            room = c.stats("sizing")["sizing_limit_slabs"]
            held = int(c.stats("slabs")["total_malloced"])
            check(held > 8 << 20, "total_malloced %d: the test needs slabs past -m" % held)
            kept = [i for i in range(7) if c.get("b%d" % i) == big]
            check(len(kept) == 7, "b%r evicted before the stop" % sorted(set(range(7)) - set(kept)))
        graceful_stop(s)
        s = Server("-m", "8", "-e", path).start()
        try:
            with Client(s.port) as c:
                eq(c.stats("sizing")["sizing_limit_slabs"], room, "the room after the restart")
                time.sleep(2.5)     # the give-back runs once a second
                eq(int(c.stats("slabs")["total_malloced"]), held, "total_malloced")
                for i in kept:
                    eq(c.get("b%d" % i), big, "b%d after the restart" % i)
        finally:
            s.stop()


@test
def shutdown_graceful_saves_too():
    """`shutdown graceful` (-A) stops as SIGUSR1 does."""
    slabcache_only()
    with memory_file() as (d, path):
        s = Server("-A", *args(path)).start()
        with Client(s.port) as c:
            store_all(c, 2000)
            c.send(b"shutdown graceful\r\n")
        eq(s.wait_exit(30), 0, "exit")
        s = Server(*args(path)).start()
        try:
            with Client(s.port) as c:
                found = read_all(c, 2000)
                for i in range(2000):
                    check(i in found or ttl_for(i) == SHORT_TTL, "k%d lost" % i)
                    check(i not in found or found[i] == (i, value_for(i)), "k%d" % i)
        finally:
            s.stop()


@test
def kill_or_crash_starts_cold():
    """SIGKILL leaves no metadata: the next start is cold (every get a
    miss, never an old value). So is the start after a crash that follows
    a warm start: the metadata was used up by it."""
    slabcache_only()
    with memory_file() as (d, path):
        s = Server(*args(path)).start()
        with Client(s.port) as c:
            store_all(c, 5000)
        os.kill(s.pid, signal.SIGKILL)
        s.wait_exit(10)
        s = Server(*args(path)).start()
        with Client(s.port) as c:
            eq(read_all(c, 5000), {}, "items after a SIGKILL")
            store_all(c, 5000)
        graceful_stop(s)
        s = Server(*args(path)).start()
        with Client(s.port) as c:
            check(len(read_all(c, 5000)) > 4900, "warm start")
            c.send(b"set k1 0 0 3\r\nnew\r\n")
            eq(c.read_line(), b"STORED")
        os.kill(s.pid, signal.SIGKILL)
        s.wait_exit(10)
        s = Server(*args(path)).start()
        try:
            with Client(s.port) as c:
                eq(read_all(c, 5000), {}, "items after a crash that followed a warm start")
        finally:
            s.stop()


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


@test
def other_options_or_version_start_cold():
    """A changed -m starts cold and says why; so does metadata written by
    another version (its checksum right: readable, not usable)."""
    slabcache_only()
    with memory_file() as (d, path):
        s = Server(*args(path)).start()
        with Client(s.port) as c:
            store_all(c, 3000)
        graceful_stop(s)
        s = Server(*args(path, memory=32)).start()
        with Client(s.port) as c:
            eq(read_all(c, 3000), {}, "items after -m changed")
            store_all(c, 3000)
        check("-m was 64 MB, now 32 MB" in s.output(), "log: %s" % s.output()[-300:])
        graceful_stop(s)
        meta = bytearray(open(path + ".meta", "rb").read())
        meta[24:56] = b"0.0.1-other".ljust(32, b"\0")     # the version field
        meta[-8:] = struct.pack("<Q", fnv1a(bytes(meta[:-8])))
        open(path + ".meta", "wb").write(bytes(meta))
        s = Server(*args(path, memory=32)).start()
        try:
            with Client(s.port) as c:
                eq(read_all(c, 3000), {}, "items after another version's stop")
            check("written by slabcache 0.0.1-other" in s.output(),
                  "log: %s" % s.output()[-300:])
        finally:
            s.stop()


@test
def unreadable_metadata_stops_the_start():
    """An empty metadata file, or one whose checksum fails, is refused
    with the reason and a failed exit, as memcached refuses it."""
    slabcache_only()
    with memory_file() as (d, path):
        s = Server(*args(path)).start()
        with Client(s.port) as c:
            store_all(c, 1000)
        graceful_stop(s)
        meta = bytearray(open(path + ".meta", "rb").read())
        meta[100] ^= 0xff
        open(path + ".meta", "wb").write(bytes(meta))
        for content, why in ((bytes(meta), "checksum mismatch"), (b"", "truncated")):
            open(path + ".meta", "wb").write(content)
            s = Server(*args(path))
            try:
                s.start()
                check(False, "started with a bad metadata file")
            except RuntimeError as e:
                check(why in str(e), "reason %r in %s" % (why, str(e)[-300:]))


@test
def memory_file_shown_and_not_shared():
    """`stats settings` shows memory_file (-o memory_file=PATH too); a
    second server on the same file is refused while the first runs (it
    would empty the first's memory under it), and the first serves on."""
    slabcache_only()
    with memory_file() as (d, path):
        with Server("-o", "memory_file=" + path) as s, s.client() as c:
            eq(c.stats("settings").get("memory_file"), path, "memory_file")
            c.set("k", "v")
            second = Server(*args(path))
            try:
                second.start()
                check(False, "a second server started on the same memory file")
            except RuntimeError as e:
                check("another process uses it" in str(e), str(e)[-300:])
            eq(c.get("k"), b"v", "the first server's item")


def flash_args(path, flash, size="64m"):
    return ("-m", "16", "-e", path, "-o", "ext_path=%s:%s" % (flash, size))


@test
def flash_tier_survives_a_graceful_stop():
    """With the flash tier: 24,000 keys of 600 B to 1.2 KB at -m 16, a
    third or more on flash. After a graceful stop and a start with the same options
    every key answers as before the stop (the stubs come back, the flash
    file is kept, its records read with their checksums); the writer goes
    on where it was (new keys go to flash and read back). A flash file of
    another size starts empty: the keys that were on flash are misses,
    the others still there, no wrong value."""
    slabcache_only()
    n = 24000

    def val(i):
        return (b"%d-" % i) * (100 + i % 100)

    def fill(c, keys):
        for start in range(keys.start, keys.stop, BATCH):
            c.send(b"".join(b"set f%d %d 0 %d\r\n%s\r\n" % (i, i, len(val(i)), val(i))
                            for i in range(start, min(keys.stop, start + BATCH))))
            for i in range(start, min(keys.stop, start + BATCH)):
                eq(c.read_line(), b"STORED", "set f%d" % i)

    def read(c, keys):
        got = {}
        for start in range(keys.start, keys.stop, BATCH):
            c.send(b"".join(b"get f%d\r\n" % i for i in range(start, min(keys.stop, start + BATCH))))
            for i in range(start, min(keys.stop, start + BATCH)):
                line = c.read_line()
                if line == b"END":
                    continue
                eq(line, b"VALUE f%d %d %d" % (i, i, len(val(i))), "f%d" % i)
                eq(c.read_exact(len(val(i)) + 2), val(i) + b"\r\n", "value of f%d" % i)
                eq(c.read_line(), b"END")
                got[i] = True
        return set(got)

    with memory_file() as (d, path):
        flash = os.path.join(d, "flash")
        s = Server(*flash_args(path, flash)).start()
        with Client(s.port) as c:
            fill(c, range(n))
            before = read(c, range(n))
            on_flash = int(c.stats()["extstore_objects_used"])
            check(on_flash > n // 3, "only %d keys on flash" % on_flash)
        graceful_stop(s)
        s = Server(*flash_args(path, flash)).start()
        with Client(s.port) as c:
            check("%d on flash" % on_flash in s.output(), "restore line: %s" % s.output()[-300:])
            eq(read(c, range(n)), before, "keys after the restart")
            fill(c, range(n, n + 5000))
            eq(len(read(c, range(n, n + 5000))), 5000 - int(c.stats()["extstore_objects_dropped"]),
               "keys stored after the restart")
            before = read(c, range(n + 5000))
            on_flash = int(c.stats()["extstore_objects_used"])
        graceful_stop(s)
        s = Server(*flash_args(path, flash, "96m")).start()
        try:
            check("the flash file did not match" in s.output(), "log: %s" % s.output()[-300:])
            with Client(s.port) as c:
                after = read(c, range(n + 5000))
                # The keys on flash at the stop are gone, every other key
                # answers (a few more may have gone to flash after the count).
                in_ram = len(before) - on_flash
                check(after <= before and 0 <= in_ram - len(after) <= len(before) // 100,
                      "%d of %d keys after the flash file changed, %d of them on flash"
                      % (len(after), len(before), on_flash))
        finally:
            s.stop()


if __name__ == "__main__":
    require_binary()
    run_all()
