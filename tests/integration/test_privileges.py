#!/usr/bin/env python3
"""Privileges as memcached handles them: root only with -u, and -u drops
supplementary groups, then the gid, then the uid, for good.

Needs root (skipped, saying so, otherwise). Passes against Debian's
memcached as well.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_privileges.py
"""

import os
import pwd
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (test, run_all, check, eq, require_binary, SkipCheck,  # noqa
                   server_binary, free_port, wait_until, HOST)


def need_root():
    if os.geteuid() != 0:
        raise SkipCheck("needs root")


@test
def root_without_u_exits_64():
    need_root()
    p = subprocess.run([server_binary(), "-l", HOST, "-p", str(free_port()),
                        "-U", "0"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=10)
    eq(p.returncode, 64, "exit code")
    eq(p.stderr.decode().strip(), "can't run as root without the -u switch")


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


@test
def u_drops_groups_gid_and_uid():
    need_root()
    nobody = pwd.getpwnam("nobody")
    port = free_port()
    # started with supplementary groups 0, 4 and 42, as a service might be
    p = subprocess.Popen([server_binary(), "-l", HOST, "-p", str(port),
                          "-U", "0", "-u", "nobody"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL,
                         preexec_fn=lambda: os.setgroups([0, 4, 42]))
    try:
        def dropped():
            st = proc_status(p.pid)
            return st["Uid"][0] != "0"
        check(wait_until(dropped, 5), "never dropped root")
        time.sleep(0.2)
        st = proc_status(p.pid)
        eq(st["Uid"], [str(nobody.pw_uid)] * 4, "real, effective, saved, fs uid")
        eq(st["Gid"], [str(nobody.pw_gid)] * 4, "real, effective, saved, fs gid")
        eq(st.get("Groups", []), [], "supplementary groups dropped")
    finally:
        p.terminate()
        p.wait(5)


if __name__ == "__main__":
    require_binary()
    run_all()
