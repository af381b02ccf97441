#!/usr/bin/env python3
"""-vv logs what memcached 1.6.18 logs for a connection: its opening, the
protocol it picked, every command line, the answers of classic commands
and its closing, line for line against Debian's memcached (descriptor
numbers normalized). -v adds no per-request line."""

import os
import re
import shutil
import socket
import subprocess
import time

from sclib import HOST, check, eq, free_port, require_reference, run_all, server_binary, test

MEMCACHED = os.environ.get("MEMCACHED", shutil.which("memcached") or "/usr/bin/memcached")

SCRIPT = (b"set a 0 0 1\r\nx\r\nget a b\r\ngets a\r\nadd a 0 0 1\r\ny\r\n"
           b"replace nope 0 0 1\r\nz\r\nappend a 0 0 2\r\nzz\r\nprepend q 0 0 1\r\nq\r\n"
           b"cas a 0 0 1 999\r\nw\r\ntouch a 10\r\ntouch nope 10\r\ngat 0 a\r\n"
           b"incr zz 1\r\nset n 0 0 1\r\n5\r\nincr n 3\r\ndecr n 100\r\n"
           b"delete a\r\ndelete a\r\nset q 0 0 1 noreply\r\nq\r\nbogus\r\n"
           b"get " + b"k" * 251 + b"\r\nmg a v\r\nmn\r\nversion\r\nflush_all\r\n")

LINE = re.compile(rb"^(?:[<>](\d+) |(\d+): )")


def run(binary, *args):
    port = free_port()
    cmd = [binary, "-l", HOST, "-p", str(port), "-U", "0", *args]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                s = socket.create_connection((HOST, port), timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        s.close()                       # the probe's lines are dropped below
        time.sleep(0.1)
        with socket.create_connection((HOST, port), timeout=5) as s:
            s.sendall(SCRIPT)
            time.sleep(0.5)
            s.recv(65536)
        time.sleep(0.3)
    finally:
        p.terminate()
        err = p.communicate(timeout=10)[1]
    return err.splitlines()


def client_lines(lines):
    """The lines of the last connection, its descriptor as N."""
    fds = [m.group(1) or m.group(2) for m in map(LINE.match, lines) if m]
    if not fds:
        return []
    last = fds[-1]
    out = []
    for ln in lines:
        m = LINE.match(ln)
        if m and (m.group(1) or m.group(2)) == last:
            # the version each server announces is its own
            out.append(re.sub(rb"VERSION \S+", b"VERSION <v>",
                              re.sub(rb"^([<>]?)\d+", rb"\1N", ln)))
    return out


@test
def vv_lines_match_memcached():
    require_reference(MEMCACHED)
    mine = client_lines(run(server_binary(), "-vv"))
    theirs = client_lines(run(MEMCACHED, "-vv"))
    check(len(theirs) > 30, "memcached logged %d lines" % len(theirs))
    eq(mine, theirs, "-vv lines for the script")


@test
def v_logs_no_request():
    require_reference(MEMCACHED)
    eq(client_lines(run(server_binary(), "-v")), [], "-v: no per-request lines")


if __name__ == "__main__":
    run_all()
