#!/usr/bin/env python3
"""File descriptor limits: -c is fitted to `ulimit -n` at start, and running
out of descriptors later pauses accepting instead of spinning.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_fdlimit.py
"""

import os
import pwd
import resource
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, Client, test, run_all, check, eq,  # noqa
                   require_binary, slabcache_only, server_binary, free_port,
                   wait_until, HOST)


def limited(nofile, as_nobody):
    """preexec_fn: a hard open-files limit the server cannot raise (as
    root, which may raise it, the child also becomes nobody first)."""
    def fn():
        if as_nobody and os.getuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    return fn


def start(nofile, *args, as_nobody=True):
    port = free_port()
    root = ["-u", "root"] if os.geteuid() == 0 and not as_nobody else []
    p = subprocess.Popen([server_binary(), "-l", HOST, "-p", str(port),
                          "-U", "0"] + root + list(args),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE,
                         preexec_fn=limited(nofile, as_nobody))
    return p, port


def stop(p):
    p.terminate()
    try:
        return p.communicate(timeout=5)[1].decode()
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()[1].decode()


@test
def conn_limit_fitted_to_ulimit():
    slabcache_only()
    p, port = start(200, "-c", "5000", "-t", "2")
    try:
        def up():
            try:
                socket.create_connection((HOST, port), 0.2).close()
                return True
            except OSError:
                return p.poll() is not None
        check(wait_until(up, 5), "server did not start")
        eq(p.poll(), None, "started under ulimit -n 200")
        with Client(port) as c:
            maxconns = int(c.stats("settings")["maxconns"])
        check(0 < maxconns < 200, "-c fitted: %d" % maxconns)
    finally:
        err = stop(p)
    check("-c lowered from 5000 to %d" % maxconns in err, "warning: %r" % err)
    # nothing left for clients: refuse to start, one line, exit 71
    p, port = start(20, "-c", "100", "-t", "4")
    try:
        _, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        stop(p)
        raise AssertionError("started with ulimit -n 20")
    eq(p.returncode, 71, "exit code")
    err = err.decode().strip()
    check(err and "\n" not in err and "ulimit -n" in err, "message %r" % err)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@test
def out_of_descriptors_pauses_accepting():
    slabcache_only()
    # our own uid, so prlimit() may change the server's limit
    p, port = start(100, "-c", "50", "-t", "1", as_nobody=False)
    hogs = []
    try:
        time.sleep(0.3)
        eq(p.poll(), None, "server running")
        # the limit drops under the running server (as a too-small ulimit
        # or a descriptor leak elsewhere would leave it)
        resource.prlimit(p.pid, resource.RLIMIT_NOFILE, (20, 100))
        for _ in range(40):
            s = socket.socket()
            s.settimeout(2)
            s.connect((HOST, port))     # completes in the kernel's backlog
            hogs.append(s)
        time.sleep(0.3)
        before = cpu_seconds(p.pid)
        time.sleep(1.0)
        used = cpu_seconds(p.pid) - before
        check(used < 0.3, "server spins while out of descriptors: %.2f s CPU" % used)
        for s in hogs:
            s.close()
        hogs = []
        resource.prlimit(p.pid, resource.RLIMIT_NOFILE, (100, 100))
        # accepting resumes after the back-off
        def served():
            try:
                with Client(port, timeout=1) as c:
                    return int(c.stats()["listen_disabled_num"]) >= 1
            except Exception:
                return False
        check(wait_until(served, 5), "not served after descriptors freed")
    finally:
        for s in hogs:
            s.close()
        err = stop(p)
    lines = [l for l in err.splitlines() if "accept" in l]
    check(0 < len(lines) < 40, "logged once per back-off: %d lines" % len(lines))


if __name__ == "__main__":
    require_binary()
    run_all()
