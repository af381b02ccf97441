#!/usr/bin/env python3
"""memcached's operator commands: slabs reassign/automove, lru_crawler,
stats detail, watch, shutdown, and the -X/-W/-o switches behind them.

Answers are memcached 1.6.18's bytes. Checks marked slabcache_only() differ
by design (notes/compatibility.md says how); the rest pass against
Debian's memcached as well.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_admin_cmds.py
"""

import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, test, run_all, check, eq, require_binary,  # noqa
                   slabcache_only, wait_until, server_binary, is_memcached)

WATCH_RE = {
    "item_get": re.compile(r"^ts=\d+\.\d+ gid=\d+ type=item_get key=(\S+) "
                           r"status=(\w+) clsid=\d+ cfd=\d+ size=\d+$"),
    "item_store": re.compile(r"^ts=\d+\.\d+ gid=\d+ type=item_store key=(\S+) "
                             r"status=(\w+) cmd=(\w+) ttl=\d+ clsid=\d+ "
                             r"cfd=\d+ size=\d+$"),
    "eviction": re.compile(r"^ts=\d+\.\d+ gid=\d+ type=eviction key=(\S+) "
                           r"fetch=(yes|no) ttl=-?\d+ la=\d+ clsid=\d+ "
                           r"size=\d+$"),
}


def class_of(c, key):
    c.send(b"lru_crawler metadump all\r\n")
    data = b""
    while not data.endswith(b"END\r\n"):
        data += c.sock.recv(1 << 20)
    m = re.search(rb"key=%s exp=\S+ la=\d+ cas=\d+ fetch=\w+ cls=(\d+)"
                  % re.escape(key.encode()), data)
    return int(m.group(1))


def fill(c, prefix, size, n):
    v = b"x" * size
    for i in range(0, n, 200):
        c.send(b"".join(b"set %s%d 0 0 %d noreply\r\n%s\r\n"
                        % (prefix.encode(), j, size, v)
                        for j in range(i, min(n, i + 200))))
    eq(c.cmd("version")[:8], "VERSION ")


@test
def slabs_reassign_answers_and_moves():
    with Server("-m", "64") as s, s.client() as c:
        eq(c.cmd("slabs reassign 1 1"), "SAME src and dst class are identical")
        eq(c.cmd("slabs reassign 1 300"), "BADCLASS invalid src or dst class id")
        eq(c.cmd("slabs reassign -2 1"), "BADCLASS invalid src or dst class id")
        eq(c.cmd("slabs reassign a b"), "CLIENT_ERROR bad command line format")
        eq(c.cmd("slabs reassign 1"), "ERROR")
        eq(c.cmd("slabs reassign 1 2 noreply"), "ERROR")
        eq(c.cmd("slabs reassign 0 1"), "NOSPARE source class has no spare pages")
        # three slabs' worth of 2000-byte values in one class
        fill(c, "big", 2000, 1500)
        src = class_of(c, "big0")
        dst = class_of(c, "big0") - 5
        slabs = c.stats("slabs")
        before = int(slabs["%d:total_pages" % src])
        check(before >= 3, "src holds %d slabs" % before)
        reply = c.cmd("slabs reassign %d %d" % (src, dst))
        if is_memcached():      # memcached queues the move
            eq(reply, "OK")
            return
        eq(reply, "OK", "reassign")
        slabs = c.stats("slabs")
        eq(int(slabs["%d:total_pages" % src]), before - 1, "src lost a slab")
        eq(int(slabs["%d:total_pages" % dst]), 1, "dst gained it")
        items = c.stats("items")
        check(int(items["items:%d:number" % src]) < 1500, "its items dropped")
        eq(c.cmd("slabs reassign %d 9" % dst),
           "NOSPARE source class has no spare pages")
        # class 0 is the global page pool, within -m as memcached's
        malloced = int(slabs["total_malloced"])
        eq(c.cmd("slabs reassign %d 0" % src), "OK")
        slabs = c.stats("slabs")
        eq(int(slabs["%d:total_pages" % src]), before - 2, "src lost another")
        eq(c.stats()["slab_global_page_pool"], "1", "into the pool")
        eq(int(slabs["total_malloced"]), malloced, "the pool is within -m")
        eq(c.cmd("slabs reassign 0 %d" % dst), "OK")
        eq(int(c.stats("slabs")["%d:total_pages" % dst]), 2, "out of the pool")
        eq(c.stats()["slab_global_page_pool"], "0")


@test
def slabs_automove_picks_the_eviction_stack():
    with Server() as s, s.client() as c:
        eq(c.cmd("slabs automove 3"), "ERROR")
        eq(c.cmd("slabs automove x"), "CLIENT_ERROR bad command line format")
        eq(c.cmd("slabs automove ratio x"), "ERROR")
        c.send(b"slabs automove 1 noreply\r\n")
        eq(c.cmd("slabs automove 0"), "OK")
        if is_memcached():
            return
        expect = {"0": "lru", "1": "auto", "2": "lrc"}
        for level, stack in expect.items():
            eq(c.cmd("slabs automove " + level), "OK")
            st = c.stats("settings")
            eq(st["evictions_policy"], stack, "stack for automove " + level)
            eq(st["slab_automove"], level, "slab_automove shown")
        eq(c.cmd("slabs automove ratio 0.5"),
           "CLIENT_ERROR slabcache has no automove ratio")


@test
def slabs_automove_window_sets_auto_s_history():
    """memcached 1.6.45's answers; here the window is auto's history."""
    with Server() as s, s.client() as c:
        if is_memcached() and c.cmd("version") < "VERSION 1.6.45":
            return      # 1.6.18 has no window to set, and its default was 30
        eq(c.stats("settings")["slab_automove_window"], "10")
        for bad in ("0", "2", "1801", "67108864"):
            eq(c.cmd("slabs automove window " + bad),
               "CLIENT_ERROR automove window too low or too high")
        eq(c.cmd("slabs automove window"), "CLIENT_ERROR bad command line format")
        eq(c.cmd("slabs automove window x"), "CLIENT_ERROR bad command line format")
        eq(c.cmd("slabs automove window 3"), "OK")
        eq(c.cmd("slabs automove window 1800"), "OK")
        eq(c.stats("settings")["slab_automove_window"], "1800")
    with Server("-o", "slab_automove_window=40") as s, s.client() as c:
        eq(c.stats("settings")["slab_automove_window"], "40")
    if is_memcached():
        return
    for bad in ("2", "1801", "x"):
        code, err = start_exit("-o", "slab_automove_window=" + bad)
        eq(code, 64, "slab_automove_window=%s must be refused (%r)" % (bad, err))


@test
def lru_crawler_reclaims_expired_items():
    with Server("-m", "64") as s, s.client() as c:
        eq(c.cmd("lru_crawler crawl hash"), "ERROR an unknown error happened")
        eq(c.cmd("lru_crawler crawl 0"), "BADCLASS invalid class id")
        eq(c.cmd("lru_crawler crawl 1,x"), "BADCLASS invalid class id")
        eq(c.cmd("lru_crawler crawl all extra"), "ERROR")
        eq(c.cmd("lru_crawler sleep 1000001"),
           "CLIENT_ERROR sleep must be one second or less")
        eq(c.cmd("lru_crawler sleep 0"), "OK")
        eq(c.cmd("lru_crawler tocrawl -1"), "CLIENT_ERROR bad command line format")
        eq(c.cmd("lru_crawler tocrawl 0"), "OK")
        eq(c.cmd("lru_crawler enable"), "ERROR failed to start lru crawler thread")
        if is_memcached():
            # its LRU maintainer reclaims on its own schedule: the counts
            # below are slabcache's
            return
        for i in range(500):
            c.send(b"set exp%d 0 1 1 noreply\r\nx\r\n" % i)
        fill(c, "keep", 10, 100)
        eq(c.stats()["curr_items"], "600")
        time.sleep(2.2)             # the 1-second items are now expired
        eq(c.cmd("lru_crawler crawl all"), "OK")
        check(wait_until(lambda: c.stats()["crawler_reclaimed"] == "500", 10),
              "crawler reclaimed %s" % c.stats()["crawler_reclaimed"])
        st = c.stats()
        eq(st["curr_items"], "100", "expired items unlinked")
        check(int(st["lru_crawler_starts"]) >= 1, "starts counted")
        eq(c.get("keep1"), b"x" * 10, "live items kept")
        eq(c.cmd("lru_crawler disable"), "OK")
        eq(c.cmd("lru_crawler crawl all"), "CLIENT_ERROR lru crawler disabled")
        eq(c.cmd("lru_crawler metadump all"), "CLIENT_ERROR lru crawler disabled")
        eq(c.cmd("lru_crawler enable"), "OK")


@test
def stats_detail_counts_by_prefix():
    with Server() as s, s.client() as c:
        eq(c.cmd("stats detail"), "CLIENT_ERROR usage: stats detail on|off|dump")
        eq(c.cmd("stats detail on"), "OK")
        eq(c.set("foo:1", "x"), "STORED")
        c.get("foo:1")
        c.get("foo:2")
        c.get("noprefix")
        eq(c.cmd("delete foo:1"), "DELETED")
        c.send(b"stats detail dump\r\n")
        eq(c.read_line(), b"PREFIX foo get 2 hit 1 set 1 del 1")
        eq(c.read_line(), b"END")
        eq(c.stats("settings")["detail_enabled"], "yes")
        eq(c.cmd("stats detail off"), "OK")
        c.get("foo:1")
        c.send(b"stats detail dump\r\n")
        eq(c.read_line(), b"PREFIX foo get 2 hit 1 set 1 del 1", "off: not counted")
        eq(c.read_line(), b"END")


def watch_lines(w, want, timeout=5.0):
    """Read watch lines until `want` of them arrived."""
    lines = []
    end = time.monotonic() + timeout
    w.sock.settimeout(0.2)
    buf = w.buf
    while len(lines) < want and time.monotonic() < end:
        try:
            chunk = w.sock.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        buf += chunk
        *done, buf = buf.split(b"\n")
        lines += [l.decode() for l in done]
    w.buf = buf
    return lines


@test
def watch_fetchers_mutations_evictions():
    with Server("-m", "8") as s, s.client() as c, s.client() as w:
        eq(w.cmd("watch foo"), "ERROR")
        w.send(b"watch fetchers mutations\r\n")
        eq(w.read_line(), b"OK")
        time.sleep(0.1)
        eq(c.set("wk", "v"), "STORED")
        c.get("wk")
        c.get("nope")
        eq(c.cmd("delete wk2"), "NOT_FOUND")
        # The set's own lookup is logged before its store line, as
        # memcached does for every command that looks its key up.
        lines = watch_lines(w, 5)
        eq(len(lines), 5, "five lines: %r" % lines)
        m = WATCH_RE["item_get"].match(lines[0])
        check(m and m.groups() == ("wk", "not_found") and
              lines[0].endswith(" size=0"), "set's lookup %r" % lines[0])
        m = WATCH_RE["item_store"].match(lines[1])
        check(m and m.group(1) == "wk" and m.group(2) == "stored" and
              m.group(3) == "set", "store line %r" % lines[1])
        m = WATCH_RE["item_get"].match(lines[2])
        check(m and m.groups() == ("wk", "found") and lines[2].endswith(" size=1"),
              "get line %r" % lines[2])
        m = WATCH_RE["item_get"].match(lines[3])
        check(m and m.groups() == ("nope", "not_found"), "miss %r" % lines[3])
        m = WATCH_RE["item_get"].match(lines[4])
        check(m and m.groups() == ("wk2", "not_found"), "delete's lookup %r" % lines[4])
    with Server("-m", "8") as s, s.client() as c, s.client() as w:
        w.send(b"watch evictions\r\n")
        eq(w.read_line(), b"OK")
        time.sleep(0.1)
        fill(c, "ev", 1000, 20000)      # 20 MB into 8 MB
        lines = watch_lines(w, 10)
        check(len(lines) >= 10, "eviction lines: %r" % lines[:3])
        for line in lines[:10]:
            check(WATCH_RE["eviction"].match(line) or line.startswith("skipped="),
                  "eviction line %r" % line)


CONN_RE = re.compile(r"^ts=\d+\.\d+ gid=\d+ type=conn_(new|close) rip=(\S+) "
                     r"rport=(\d+) transport=(tcp|local)(?: reason=(\w+))? cfd=(\d+)$")


@test
def watch_connevents():
    with Server("-o", "idle_timeout=1") as s, s.client() as w:
        w.send(b"watch connevents\r\n")
        eq(w.read_line(), b"OK")
        time.sleep(0.1)
        # quit, a protocol error (an HTTP request), a hang-up, an idle kick
        ends = []
        with s.client() as c:
            ends.append((c.sock.getsockname()[1], "normal"))
            c.sock.sendall(b"version\r\nquit\r\n")
            eq(c.read_line()[:8], b"VERSION ")
        with s.client() as c:
            ends.append((c.sock.getsockname()[1], "error"))
            c.sock.sendall(b"GET / HTTP/1.1\r\n")
        with s.client() as c:
            ends.append((c.sock.getsockname()[1], "normal"))
            eq(c.cmd("version")[:8], "VERSION ")
        with s.client() as c:          # says nothing: kicked after 1 s
            ends.append((c.sock.getsockname()[1], "idle_timeout"))
            lines = watch_lines(w, 2 * len(ends), timeout=10.0)
        events = {}
        for line in lines:
            m = CONN_RE.match(line)
            check(m is not None, "connevents line %r" % line)
            kind, rip, rport, transport, reason, _ = m.groups()
            eq((rip, transport), ("127.0.0.1", "tcp"), "peer in %r" % line)
            events.setdefault(int(rport), []).append((kind, reason))
        for port, reason in ends:
            eq(events.get(port), [("new", None), ("close", reason)],
               "events of the connection from port %d" % port)

DELETED_RE = re.compile(r"^ts=\d+\.\d+ gid=\d+ type=deleted key=(\S+) cmd=(delete|md) "
                        r"clsid=(\d+) size=(\d+)$")


@test
def watch_deletions():
    """memcached 1.6.45's `watch deletions`: a line for each item a delete
    or an md removes (with its class and value size), none for a miss or
    for an md that only marks the item stale (I)."""
    with Server() as s, s.client() as c, s.client() as w:
        w.send(b"watch deletions\r\n")
        eq(w.read_line(), b"OK")
        time.sleep(0.1)
        eq(c.set("vfoo", "vbar"), "STORED")
        eq(c.cmd("md non-existing-key"), "NF")
        eq(c.cmd("delete vfoo"), "DELETED")
        eq(c.set("vfoo", "hello"), "STORED")
        eq(c.cmd("md vfoo I"), "HD")
        eq(c.cmd("md vfoo"), "HD")
        eq(c.cmd("delete vfoo"), "NOT_FOUND")
        lines = watch_lines(w, 3, timeout=2.0)
        eq(len(lines), 2, "two deletions: %r" % lines)
        got = [DELETED_RE.match(l) for l in lines]
        check(all(got), "deletion lines %r" % lines)
        eq([(m.group(1), m.group(2), m.group(4)) for m in got],
           [("vfoo", "delete", "4"), ("vfoo", "md", "5")])
        check(all(int(m.group(3)) > 0 for m in got), "class ids %r" % lines)


@test
def watch_refuses_kinds_not_logged():
    slabcache_only()    # memcached logs rawcmds; slabcache refuses it
    with Server() as s, s.client() as w:
        eq(w.cmd("watch connevents rawcmds"), "ERROR")


@test
def slow_watcher_drops_lines_and_says_so():
    slabcache_only()    # the buffer size knob differs
    with Server("-o", "watcher_logbuf_size=1") as s, s.client() as c:
        w = socket.create_connection(("127.0.0.1", s.port))
        w.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        w.sendall(b"watch fetchers\r\n")
        time.sleep(0.2)
        # far more lines than the watcher's 1 KB buffer and socket hold
        for _ in range(20):
            c.send(b"get " + b" ".join(b"k%d" % i for i in range(500)) + b"\r\n")
            c.read_line()
        check(int(c.stats()["log_watcher_skipped"]) > 0, "lines skipped")
        eq(c.get("k1"), None, "the cache kept serving")
        data = b""
        w.settimeout(0.5)
        end = time.monotonic() + 10
        while (not re.search(rb"^skipped=\d+$", data, re.M) and len(data) < 4 << 20
               and time.monotonic() < end):
            try:
                chunk = w.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            data += chunk
        check(re.search(rb"^skipped=\d+$", data, re.M), "a skipped= line")
        w.close()


@test
def disabled_dumping_and_watch():
    with Server("-X", "-W") as s, s.client() as c:
        eq(c.cmd("stats cachedump 1 1"), "CLIENT_ERROR stats cachedump not allowed")
        eq(c.cmd("lru_crawler metadump all"), "ERROR metadump not allowed")
        eq(c.cmd("watch"), "CLIENT_ERROR watch commands not allowed")
        eq(c.stats("settings")["dump_enabled"], "no")


@test
def no_slab_reassign_and_no_lru_crawler():
    with Server("-o", "no_slab_reassign,no_lru_crawler") as s, s.client() as c:
        eq(c.cmd("slabs reassign 1 2"), "CLIENT_ERROR slab reassignment disabled")
        eq(c.cmd("lru_crawler crawl all"), "CLIENT_ERROR lru crawler disabled")
        st = c.stats("settings")
        eq(st["slab_reassign"], "no")
        eq(st["lru_crawler"], "no")
        if not is_memcached():
            eq(st["evictions_policy"], "lru", "no slab moves at all")
        check("lru_crawler_running" not in c.stats(), "no crawler, no running line")
        eq(c.cmd("lru_crawler enable"), "OK")
        # enabled at run time counts as enabled at start: memcached's
        # lru-crawler.t polls lru_crawler_running until the crawl is done
        eq(c.stats("settings")["lru_crawler"], "yes")
        check("lru_crawler_running" in c.stats(), "running line once enabled")
        eq(c.cmd("lru_crawler crawl all"), "OK")
        eq(c.cmd("lru_crawler disable"), "OK")
        eq(c.stats("settings")["lru_crawler"], "no")
        check("lru_crawler_running" not in c.stats(), "no running line once disabled")


def start_exit(*args):
    """Start the server with args; (exit code or None if it kept running,
    stderr)."""
    root = ["-u", "root"] if os.geteuid() == 0 else []
    p = subprocess.Popen([server_binary(), "-p", "0", "-U", "0", "-l",
                          "127.0.0.1"] + root + list(args),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=1.5)
        return p.returncode, err.decode()
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, ""


@test
def extended_options_work_or_are_refused():
    slabcache_only()
    for opt in ("hot_lru_pct=20", "slab_chunk_max=3000",
                "ext_path=nosize", "ext_max_frag=2", "ext_io_depth=4097",
                "ext_page_size=3,ext_wbuf_size=2,ext_path=/nonexistent/f:64m",
                "ssl_kernel_tls", "ssl_min_version=4",
                "hash_algorithm=xxh3",
                "no_such_option", "slab_automove=3", "-B"):
        code, err = start_exit("-o", opt)
        eq(code, 64, "-o %s must be refused (%r)" % (opt, err))
        check(err.strip() and "\n" not in err.strip(), "one-line error: %r" % err)
    code, err = start_exit("-o", "slab_automove=0", "--eviction=lra")
    eq(code, 64, "automove and --eviction together")
    for opt in ("modern", "maxconns_fast", "no_lru_maintainer", "lru_maintainer",
                "no_lru_maintainer,lru_maintainer", "hash_algorithm=murmur3", "slab_automove=2", "lru_crawler_sleep=50",
                "lru_crawler_tocrawl=100", "watcher_logbuf_size=64",
                "slab_chunk_max=16384"):
        with Server("-o", opt) as s, s.client() as c:
            st = c.stats("settings")
            if opt == "slab_automove=2":
                eq(st["evictions_policy"], "lrc")
            if opt == "lru_crawler_sleep=50":
                eq(st["lru_crawler_sleep"], "50")
            if opt == "lru_crawler_tocrawl=100":
                eq(st["lru_crawler_tocrawl"], "100")
            if opt == "watcher_logbuf_size=64":
                eq(st["watcher_logbuf_size"], "65536")
            # lru_maintainer is memcached's default, and undoes
            # no_lru_maintainer there: its fields are back in `stats`
            if "maintainer" in opt:
                eq("lru_maintainer_juggles" in c.stats(), opt.endswith(",lru_maintainer")
                   or opt == "lru_maintainer", "maintainer fields with -o %s" % opt)


@test
def shutdown_modes():
    with Server() as s, s.client() as c:
        eq(c.cmd("shutdown graceful"), "SERVER_ERROR: shutdown not enabled")
    with Server("-A") as s, s.client() as c:
        eq(c.cmd("shutdown foo"), "CLIENT_ERROR invalid shutdown mode")
        eq(c.cmd("shutdown graceful extra"), "CLIENT_ERROR invalid shutdown mode")
        c.send(b"shutdown graceful\r\n")
        eq(s.wait_exit(5.0), 0, "graceful shutdown exits 0")


if __name__ == "__main__":
    require_binary()
    run_all()
