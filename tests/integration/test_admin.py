#!/usr/bin/env python3
"""memcached's operator flags: -F, -o idle_timeout, -s with -u.

Each check passes against Debian's memcached as well.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_admin.py
"""

import os
import pwd
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, Client, test, run_all, check, eq,  # noqa
                   require_binary, wait_until, SkipCheck, server_binary, is_memcached)

NOT_ALLOWED = "CLIENT_ERROR flush_all not allowed"


@test
def disable_flush_all():
    with Server("-F") as s, s.client() as c:
        eq(c.set("k", "v"), "STORED")
        eq(c.cmd("flush_all"), NOT_ALLOWED)
        eq(c.cmd("flush_all 0"), NOT_ALLOWED)
        # refused before the delay is looked at, as memcached does
        eq(c.cmd("flush_all x"), NOT_ALLOWED)
        c.send(b"flush_all noreply\r\n")
        # extra tokens are ignored (memcached 1.6.45; 1.6.18 said ERROR)
        eq(c.cmd("flush_all 1 2 3 4"), NOT_ALLOWED)
        eq(c.get("k"), b"v", "nothing flushed")
        st = c.stats()
        eq(st["cmd_flush"], "5", "refused flushes are counted")
        eq(c.stats("settings")["flush_enabled"], "no")
    with Server() as s, s.client() as c:
        eq(c.stats("settings")["flush_enabled"], "yes")
        eq(c.cmd("flush_all"), "OK")


@test
def memlimit_in_megabytes():
    with Server() as s, s.client() as c:
        eq(c.cmd("cache_memlimit 1000000001"),
           "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes")
        eq(c.cmd("cache_memlimit 7"),
           "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m")
        eq(c.cmd("cache_memlimit 100"), "OK")


@test
def lowered_memlimit_gives_memory_back():
    """memcached frees pages to the system when cache_memlimit goes below
    what it holds (its t/dyn-maxbytes.t): here the slabs past the new
    limit go back (slab_global_page_pool), with nothing stored to ask, and
    total_malloced falls to the limit. Before, the limit only stopped
    growth."""
    value = b"B" * 66560
    with Server("-m", "16") as s, s.client() as c:
        for i in range(300):
            eq(c.set("key%d" % i, value), "STORED")
        held = int(c.stats("slabs")["total_malloced"])
        check(held >= 15 * 2**20, "total_malloced %d at -m 16" % held)
        eq(c.cmd("cache_memlimit 8"), "OK")
        for i in range(300):
            c.cmd("delete key%d" % i)
        deadline = time.time() + 6
        while time.time() < deadline and int(c.stats("slabs")["total_malloced"]) > 8 * 2**20:
            time.sleep(0.2)
        now = int(c.stats("slabs")["total_malloced"])
        check(now <= 8 * 2**20, "total_malloced %d after cache_memlimit 8 (was %d)" % (now, held))
        check(int(c.stats()["slab_global_page_pool"]) >= (held - now) // 2**20,
              "slab_global_page_pool %s" % c.stats()["slab_global_page_pool"])
        eq(c.set("again", value), "STORED")


@test
def memory_a_class_stopped_using_goes_to_the_pool():
    """memcached's automover gives the free pages of a class that stopped
    evicting to its global page pool, within -m, where any class takes
    them (its t/slabs-reassign2.t): all of -m 16 in 11 KB values, half of
    them deleted, pages reach the pool within a few windows and
    total_malloced stays at -m; after a flush_all, a get at once still
    finds its item flushed (get_flushed), and a window later the crawler
    has met the rest and their memory is pooled too; then values of
    another size take memory from the pool, evicting nothing."""
    mb = 2**20
    value = b"B" * 11000
    with Server("-m", "16", "-o", "slab_automove_window=3") as s, s.client(timeout=10) as c:
        n = 2000
        for start in range(0, n, 100):
            c.send(b"".join(b"set k%d 0 0 11000 noreply\r\n%s\r\n" % (i, value)
                            for i in range(start, start + 100)))
        check(int(c.stats()["evictions"]) > 0, "all of -m filled")
        kept = [i for i in range(n) if c.get("k%d" % i) is not None]
        for i in kept[::2]:
            c.send(b"delete k%d noreply\r\n" % i)
        check(wait_until(lambda: int(c.stats()["slab_global_page_pool"]) >= 4, timeout=20),
              "pool %s after the deletes" % c.stats()["slab_global_page_pool"])
        eq(int(c.stats("slabs")["total_malloced"]), 16 * mb, "the pool is within -m")
        eq(c.cmd("flush_all"), "OK")
        check(c.get("k%d" % kept[1]) is None, "flushed")
        if not is_memcached():  # memcached's crawler may have met it first
            eq(c.stats()["get_flushed"], "1", "a get at once finds its item flushed")
        check(wait_until(lambda: int(c.stats()["slab_global_page_pool"]) >= 12, timeout=20),
              "pool %s after the flush" % c.stats()["slab_global_page_pool"])
        evictions = int(c.stats()["evictions"])
        pooled = int(c.stats()["slab_global_page_pool"])
        for start in range(0, 500, 100):
            c.send(b"".join(b"set j%d 0 0 6000 noreply\r\n%s\r\n" % (i, b"J" * 6000)
                            for i in range(start, start + 100)))
        eq(c.cmd("version")[:8], "VERSION ")
        eq(int(c.stats()["evictions"]), evictions, "nothing evicted")
        check(int(c.stats()["slab_global_page_pool"]) < pooled, "taken from the pool")
        eq(c.get("j499"), b"J" * 6000)


@test
def lowered_memlimit_gives_chained_values_memory_back():
    """The same with values chained in 16 KB chunks (slab_chunk_max=16),
    nothing deleted: the body class's slabs go back too (drained, their
    values dropped), every key still answers, and what is left reads back
    whole."""
    def value(i):
        return (b"%05d:" % i) * (66560 // 6) + b"x" * (66560 % 6)
    with Server("-m", "16", "-o", "slab_chunk_max=16") as s, s.client(timeout=10) as c:
        for i in range(300):
            eq(c.set("key%d" % i, value(i)), "STORED")
        held = int(c.stats("slabs")["total_malloced"])
        check(held >= 15 * 2**20, "total_malloced %d at -m 16" % held)
        eq(c.cmd("cache_memlimit 8"), "OK")
        deadline = time.time() + 6
        while time.time() < deadline and int(c.stats("slabs")["total_malloced"]) > 8 * 2**20:
            time.sleep(0.2)
        now = int(c.stats("slabs")["total_malloced"])
        check(now <= 8 * 2**20, "total_malloced %d after cache_memlimit 8 (was %d)" % (now, held))
        kept = 0
        for i in range(300):
            got = c.get("key%d" % i)
            if got is not None:
                eq(got, value(i), "key%d whole" % i)
                kept += 1
        check(0 < kept < 300, "%d of 300 values left" % kept)
        eq(c.set("again", value(0)), "STORED")


@test
def idle_timeout_closes_idle_connections():
    with Server("-o", "idle_timeout=1") as s, s.client() as idle, \
            s.client() as partial:
        eq(idle.cmd("version")[:8], "VERSION ")
        partial.send(b"get half-a-comm")      # waiting for the rest
        check(idle.wait_closed(6.0), "idle connection not closed")
        check(partial.wait_closed(6.0), "connection mid-command not closed")
        with s.client() as c:
            eq(c.stats()["idle_kicks"], "2", "idle_kicks")
            eq(c.stats("settings")["idle_timeout"], "1")
    with Server() as s, s.client() as c:
        check("idle_kicks" not in c.stats(), "no idle_kicks without -o")
        eq(c.stats("settings")["idle_timeout"], "0")


@test
def unix_socket_owned_by_the_service_user():
    if os.getuid() != 0:
        raise SkipCheck("needs root to start with -u")
    user = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)      # memcached creates it as nobody
        path = os.path.join(d, "sc.sock")
        proc = subprocess.Popen([server_binary(), "-s", path, "-u", "nobody"],
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            check(wait_until(lambda: os.path.exists(path), 5.0),
                  "socket not created")
            # created while root (mode 0700: no one else can connect), then
            # given to the user before the server serves: wait for that
            check(wait_until(lambda: os.stat(path).st_uid == user.pw_uid, 5.0),
                  "socket owner: %d, not %d" % (os.stat(path).st_uid, user.pw_uid))
            st = os.stat(path)
            eq(oct(st.st_mode & 0o777), oct(0o700), "default mask")
            # the service user itself can connect
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.setgid(user.pw_gid)
                    os.setuid(user.pw_uid)
                    u = socket.socket(socket.AF_UNIX)
                    u.settimeout(3)
                    u.connect(path)
                    u.sendall(b"version\r\n")
                    code = 0 if u.recv(100).startswith(b"VERSION ") else 2
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            eq(os.WEXITSTATUS(status), 0, "nobody connects to the socket")
        finally:
            proc.terminate()
            proc.wait(5)


if __name__ == "__main__":
    require_binary()
    run_all()
