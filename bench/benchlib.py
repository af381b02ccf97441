"""Helpers shared by the benchmark and research tools in bench/."""

import socket


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stats(port, sub=""):
    """`stats [sub]` -> {name: value} (per-class names keep their 'N:'
    prefix). The general group also carries slabcache's own figures (`stats
    slabcache`, which memcached answers with ERROR: nothing is added)."""
    def one(cmd):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(cmd)
            buf = b""
            while not (buf.endswith(b"END\r\n") or buf.endswith(b"ERROR\r\n")):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        out = {}
        for line in buf.decode().split("\r\n"):
            p = line.split(" ")
            if len(p) == 3 and p[0] == "STAT":
                out[p[1]] = p[2]
        return out
    out = one(("stats %s" % sub).strip().encode() + b"\r\n")
    if sub == "":
        out.update(one(b"stats slabcache\r\n"))
    return out
