#!/usr/bin/env python3
"""-S: SASL over the binary protocol, packet for packet against Debian's
memcached 1.6.18 with the same Cyrus configuration (SASL_CONF_PATH, a
sasldb made by saslpasswd2): the mechanism list, a wrong and a right
password, a step without a start, commands before authenticating (refused
and closed, VERSION allowed), the counters; and memjs (Node) authenticating
with PLAIN."""

import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

from sclib import (HOST, check, eq, free_port, require_reference, run_all, server_binary,
                   test)

MEMCACHED = os.environ.get("MEMCACHED", shutil.which("memcached") or "/usr/bin/memcached")
SASLPASSWD = shutil.which("saslpasswd2") or "/usr/sbin/saslpasswd2"


def pkt(op, key=b"", val=b"", extras=b"", opaque=0):
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0,
                       len(key) + len(extras) + len(val), opaque, 0) + extras + key + val


SET = lambda k, v: pkt(0x01, k, v, extras=struct.pack(">II", 0, 0))  # noqa: E731

SCRIPTS = {
    "mechs": [pkt(0x20)],
    "wrong_password": [pkt(0x21, b"PLAIN", b"\x00alice\x00nope")],
    "unknown_user": [pkt(0x21, b"PLAIN", b"\x00mallory\x00pw1")],
    "unknown_mech": [pkt(0x21, b"NOSUCH", b"x")],
    "step_without_start": [pkt(0x22, b"PLAIN", b"\x00alice\x00pw1")],
    "version_before": [pkt(0x0b)],
    "get_before": [pkt(0x00, b"k")],
    "ok_then_commands": [pkt(0x21, b"PLAIN", b"\x00alice\x00pw1", opaque=7),
                         SET(b"k", b"v"), pkt(0x00, b"k"), pkt(0x00, b"nope")],
}


class Sasl:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sc-sasl-")
        db = os.path.join(self.dir, "sasldb2")
        subprocess.run([SASLPASSWD, "-p", "-a", "memcached", "-c", "-f", db, "alice"],
                       input=b"pw1", check=True, timeout=30)
        with open(os.path.join(self.dir, "memcached.conf"), "w") as f:
            f.write("mech_list: plain\nsasldb_path: %s\n" % db)
        self.env = dict(os.environ, SASL_CONF_PATH=self.dir)


def start(binary, env, *args):
    port = free_port()
    cmd = [binary, "-l", HOST, "-p", str(port), "-U", "0", "-S", *args]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("%s -S did not start" % binary)


def exchange(port, packets):
    """Each packet's answer and whether the connection was closed at the
    end. Every packet here is answered: wait (up to 5 s) for one whole
    response frame, then take whatever follows within 0.3 s of quiet (a
    close after an error), so a slow build cannot shift answers."""
    out, closed = [], False
    with socket.create_connection((HOST, port), timeout=5) as s:
        for p in packets:
            s.sendall(p)
            got = b""
            try:
                s.settimeout(5)
                while not whole_frame(got):
                    chunk = s.recv(65536)
                    if not chunk:
                        closed = True
                        break
                    got += chunk
                s.settimeout(0.3)
                while not closed:
                    chunk = s.recv(65536)
                    if not chunk:
                        closed = True
                        break
                    got += chunk
            except socket.timeout:
                pass
            except ConnectionError:
                closed = True
            out.append(got)
            if closed:
                break
    return out, closed


def without_version(exchanged):
    """A version answer's body is each server's own (24-byte header, then
    the version): kept only as its header."""
    frames, closed = exchanged
    return [f[:24] if len(f) >= 24 and f[1] == 0x0b and f[6:8] == b"\x00\x00" else f
            for f in frames], closed


def whole_frame(data):
    """True once data holds a complete binary response frame."""
    return len(data) >= 24 and len(data) >= 24 + struct.unpack(">I", data[8:12])[0]


@test
def scripts_match_memcached():
    require_reference(MEMCACHED)
    if not os.access(SASLPASSWD, os.X_OK):
        print("  (saslpasswd2 not installed: scripts/setup.sh; skipped)")
        return
    sasl = Sasl()
    try:
        mine, mport = start(server_binary(), sasl.env)
        theirs, tport = start(MEMCACHED, sasl.env)
        try:
            for name, packets in SCRIPTS.items():
                got, want = exchange(mport, packets), exchange(tport, packets)
                eq(without_version(got), without_version(want), "script %s" % name)
            eq(exchange(mport, SCRIPTS["mechs"])[0], [pkt(0x20)[:0] + struct.pack(
                ">BBHBBHIIQ", 0x81, 0x20, 0, 0, 0, 0, 5, 0, 0) + b"PLAIN"], "mechanisms")
            # counters, read over binary STAT after authenticating
            stats = []
            for port in (mport, tport):
                got, _ = exchange(port, [pkt(0x21, b"PLAIN", b"\x00alice\x00pw1"), pkt(0x10)])
                stats.append(parse_stats(got[1]))
            for k in ("auth_cmds", "auth_errors"):
                eq(stats[0][k], stats[1][k], k)
            check(int(stats[0]["auth_errors"]) >= 2, "errors counted: %r" % stats[0]["auth_errors"])
        finally:
            for p in (mine, theirs):
                p.kill()
                p.wait()
    finally:
        shutil.rmtree(sasl.dir, ignore_errors=True)


def parse_stats(data):
    out, i = {}, 0
    while i + 24 <= len(data):
        _, _, kl, el, _, _, bl, _, _ = struct.unpack(">BBHBBHIIQ", data[i:i + 24])
        body = data[i + 24:i + 24 + bl]
        if kl == 0:
            break
        out[body[el:el + kl].decode()] = body[el + kl:].decode()
        i += 24 + bl
    return out


CACHE = os.environ.get("SLABCACHE_CLIENT_CACHE", "/var/cache/slabcache")
MEMJS_SASL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "memjs_sasl.js")


@test
def memjs_authenticates_with_plain():
    """A real binary client library: memjs (Node) with username/password."""
    node = shutil.which("node")
    modules = os.path.join(CACHE, "node", "node_modules")
    if node is None or not os.path.isfile(os.path.join(modules, "memjs", "package.json")):
        print("  (node or memjs missing: scripts/setup-clients.sh; skipped)")
        return
    if not os.access(SASLPASSWD, os.X_OK):
        print("  (saslpasswd2 not installed: skipped)")
        return
    sasl = Sasl()
    try:
        p, port = start(server_binary(), sasl.env)
        try:
            def memjs(password):
                r = subprocess.run([node, MEMJS_SASL, str(port), "alice", password],
                                   env=dict(os.environ, NODE_PATH=modules),
                                   capture_output=True, timeout=30)
                return json.loads(r.stdout.decode().strip().splitlines()[-1])
            eq(memjs("pw1"), {"get": "sasl-value", "error": None}, "memjs with the password")
            bad = memjs("wrong")
            check(bad["get"] is None and bad["error"], "memjs with a wrong password: %r" % bad)
        finally:
            p.kill()
            p.wait()
    finally:
        shutil.rmtree(sasl.dir, ignore_errors=True)


if __name__ == "__main__":
    run_all()
