#!/usr/bin/env python3
"""Command-line behaviour: invalid values exit 64 with one line, -V/-h,
UNIX socket with its mask, pidfile, daemon mode, -C, -R yielding,
--eviction and `config evict`."""

import os
import socket
import stat
import subprocess
import tempfile
import time

from sclib import (Server, check, eq, is_memcached, require_binary, run_all,
                   server_binary, slabcache_only, test, wait_until)

EX_USAGE = 64


def run_bad(*args):
    """Start with invalid args; it must exit 64 quickly with one line."""
    p = subprocess.run([server_binary(), "-l", "127.0.0.1", "-p", "0", *args],
                       stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=10)
    lines = [l for l in p.stderr.decode().splitlines() if l.strip()]
    return p.returncode, lines


@test
def invalid_values_exit_64():
    slabcache_only()
    cases = [
        ("-p", "70000"), ("-p", "abc"), ("-t", "0"), ("-t", "x"),
        ("-m", "abc"), ("-m", "0"), ("-c", "-1"), ("-f", "1.0"),
        ("-f", "abc"), ("-I", "10x"), ("-I", "100m"), ("-n", "0"),
        ("-R", "0"), ("-b", "abc"), ("-a", "999"), ("--eviction=bogus"),
        ("--eviction=lru,lru"), ("--eviction="), ("-o", "bogus"),
        ("-o", "bg_evict=2"), ("-o", "bg_evict_batch=0"), ("-o", "hashpower=5"),
        ("--no-such-flag",), ("stray-argument",),
    ]
    for args in cases:
        if isinstance(args, str):
            args = (args,)
        code, lines = run_bad(*args)
        eq(code, EX_USAGE, "exit code for %r" % (args,))
        eq(len(lines), 1, "one error line for %r: %r" % (args, lines))


@test
def version_and_help_exit_0():
    slabcache_only()
    for flag in ("-V", "--version", "-h", "--help"):
        p = subprocess.run([server_binary(), flag], capture_output=True,
                           timeout=10)
        eq(p.returncode, 0, "exit code of %s" % flag)
        check(b"slabcache" in p.stdout, "%s names the program" % flag)
    p = subprocess.run([server_binary(), "-h"], capture_output=True, timeout=10)
    for opt in (b"--port", b"--memory-limit", b"--eviction", b"--threads",
                b"--max-item-size", b"--disable-evictions", b"--extended"):
        check(opt in p.stdout, "-h lists %r" % opt)


def unix_roundtrip(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    s.sendall(b"set u 0 0 2\r\nhi\r\nget u\r\n")
    buf = b""
    while not buf.endswith(b"END\r\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    s.close()
    return buf


@test
def unix_socket_with_mask():
    d = tempfile.mkdtemp(prefix="sc-cli-")
    path = os.path.join(d, "sc.sock")
    args = [server_binary(), "-s", path, "-a", "770"]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        check(wait_until(lambda: os.path.exists(path), timeout=5),
              "socket file appears")
        eq(stat.S_IMODE(os.stat(path).st_mode), 0o770, "socket mode")
        eq(unix_roundtrip(path), b"STORED\r\nVALUE u 0 2\r\nhi\r\nEND\r\n",
           "set/get over the UNIX socket")
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@test
def pidfile_and_daemon():
    d = tempfile.mkdtemp(prefix="sc-cli-")
    pidfile = os.path.join(d, "sc.pid")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [server_binary(), "-d", "-P", pidfile, "-l", "127.0.0.1",
            "-p", str(port), "-U", "0"]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    # -d: the command itself returns once the daemon has forked.
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=10)
    eq(p.returncode, 0, "daemonizing parent exit code")
    check(wait_until(lambda: os.path.exists(pidfile) and
                     open(pidfile).read().strip().isdigit(), timeout=5),
          "pidfile written")
    pid = int(open(pidfile).read().strip())
    try:
        os.kill(pid, 0)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"version\r\n")
            check(s.recv(100).startswith(b"VERSION "), "daemon answers")
    finally:
        # The daemon is the process we started (it wrote its own PID).
        os.kill(pid, 15)
        wait_until(lambda: not os.path.exists("/proc/%d" % pid), timeout=5)


@test
def cas_disabled_reports_zero():
    with Server("-C") as s, s.client() as c:
        c.set("k", b"v")
        c.send("gets k\r\n")
        eq(c.read_line(), b"VALUE k 0 1 0", "gets with -C")
        eq(c.read_line(), b"v", "value")
        eq(c.read_line(), b"END", "end")


@test
def reqs_per_event_yield_keeps_order():
    # -R 1 forces a yield after every request; a pipelined batch must still
    # be answered completely and in order.
    with Server("-R", "1", "-t", "1") as s, s.client() as c:
        n = 300
        c.send(b"".join(b"set k%d 0 0 %d\r\n%d\r\n" % (i, len(str(i)), i)
                        for i in range(n)))
        for i in range(n):
            eq(c.read_line(), b"STORED", "set %d" % i)
        c.send(b"".join(b"get k%d\r\n" % i for i in range(n)))
        for i in range(n):
            eq(c.read_line(), b"VALUE k%d 0 %d" % (i, len(str(i))), "hdr %d" % i)
            eq(c.read_line(), str(i).encode(), "value %d" % i)
            eq(c.read_line(), b"END", "end %d" % i)
        if not is_memcached():
            check(int(c.stats()["conn_yields"]) > 0, "conn_yields counted")


@test
def eviction_flag_and_config_evict():
    slabcache_only()
    with Server("--eviction=none") as s, s.client() as c:
        eq(c.stats("settings").get("evictions_policy"), "none", "from flag")
        eq(c.cmd("config evict lru"), "OK", "config evict lru")
        eq(c.stats("settings").get("evictions_policy"), "lru", "after config")
        eq(c.cmd("config evict lru,none"), "OK", "stack of two")
        eq(c.stats("settings").get("evictions_policy"), "lru,none", "stack shown")
        for bad in ("config evict bogus", "config evict lru,lru",
                    "config evict ", "config evict lru,"):
            check(c.cmd(bad).startswith("CLIENT_ERROR "), "refused: %r" % bad)
        eq(c.stats("settings").get("evictions_policy"), "lru,none", "unchanged")
    with Server("-M") as s, s.client() as c:
        eq(c.stats("settings").get("evictions_policy"), "none", "-M is none")
        eq(c.stats("settings").get("evictions"), "off", "memcached's field")


@test
def background_evictor():
    slabcache_only()
    with Server("-m", "8", "-o", "bg_evict=1,bg_evict_reserve=32,bg_evict_batch=16") as s, \
            s.client() as c:
        st = c.stats("settings")
        eq(st.get("bg_evict"), "yes", "bg_evict setting")
        eq(st.get("bg_evict_reserve"), "32", "reserve setting")
        value = b"v" * 4000
        for i in range(4000):               # ~16 MB through 8 MB
            c.send(b"set bg%d 0 0 %d noreply\r\n%s\r\n" % (i, len(value), value))
        eq(c.get("bg3999"), value, "newest key readable")
        st, own = c.stats(), c.stats("slabcache")
        check(int(own["bg_evictions"]) > 0, "background evictions happened")
        check(int(own["bg_evictor_runs"]) > 0, "background runs counted")
        eq(st.get("store_no_memory"), "0", "no set refused")


if __name__ == "__main__":
    require_binary()
    run_all()
