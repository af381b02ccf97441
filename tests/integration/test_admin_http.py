#!/usr/bin/env python3
"""The admin port (--admin-port): GET /stats as JSON, GET /metrics as
Prometheus text (parsed by prometheus_client's own parser, and checked
against prometheus/memcached_exporter's series for the same server),
GET /health; 404, 405 (CONNECT too), 505 for HTTP versions other than
1.0 and 1.1, oversized and stalled requests, a 1 MB header answered 431
to a client that sends it all before reading (lingering close); counters
move with traffic; the client port never waits for the admin port."""

import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

from sclib import (HOST, Server, check, eq, exporter_path, free_port, run_all,
                   slabcache_only, test, wait_until)

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:             # Debian's package, under a python3 of another prefix
    sys.path.append("/usr/lib/python3/dist-packages")
    from prometheus_client.parser import text_string_to_metric_families


def admin_server(*extra):
    port = free_port()
    return Server("--admin-port", str(port), *extra), port


def get(port, path, method="GET", body=None, headers=None):
    c = http.client.HTTPConnection(HOST, port, timeout=10)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), data


def stats_json(port):
    status, ctype, data = get(port, "/stats")
    eq(status, 200, "/stats status")
    check(ctype.startswith("application/json"), "/stats content type %r" % ctype)
    return json.loads(data)


def metrics(port):
    status, ctype, data = get(port, "/metrics")
    eq(status, 200, "/metrics status")
    check(ctype.startswith("text/plain; version=0.0.4"), "/metrics content type %r" % ctype)
    series = {}
    for fam in text_string_to_metric_families(data.decode()):
        for s in fam.samples:
            series[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return series


def traffic(c, n):
    for i in range(n):
        c.set("k%d" % i, "v" * (10 + 100 * (i % 3)))
    for i in range(n):
        c.get("k%d" % i)
    c.get("nosuchkey")


@test
def stats_json_has_every_section_with_numbers():
    slabcache_only()
    s, port = admin_server()
    with s, s.client() as c:
        traffic(c, 30)
        d = stats_json(port)
        proto = c.stats()
        slabs = c.stats("slabs")
    eq(sorted(d), ["conns", "items", "settings", "sizing", "slabcache", "slabs", "stats"],
       "sections")
    eq(d["slabcache"]["evictions_policy"], "auto", "slabcache's own figures")
    check(isinstance(d["slabcache"]["probation_bytes"], int), "its numbers are numbers")
    st = d["stats"]
    for name in ("get_hits", "get_misses", "cmd_set", "curr_items", "curr_connections"):
        check(isinstance(st[name], int), "%s is a JSON number: %r" % (name, st[name]))
    eq(st["get_hits"], int(proto["get_hits"]), "get_hits as `stats` says")
    eq(st["cmd_set"], int(proto["cmd_set"]), "cmd_set as `stats` says")
    eq(st["curr_items"], 30, "curr_items")
    check(isinstance(st["rusage_user"], float), "rusage_user is a number")
    eq(st["version"], "1.6.45", "version stays a string")
    eq(d["settings"]["evictions_policy"], "auto", "a string setting")
    eq(d["settings"]["maxconns"], 1024, "a number setting")
    classes = d["slabs"]["classes"]
    want = sorted({k.split(":")[0] for k in slabs if ":" in k}, key=int)
    eq(sorted(classes, key=int), want, "per-class slabs grouped by class id")
    for cid in want:
        eq(classes[cid]["used_chunks"], int(slabs[cid + ":used_chunks"]),
           "class %s used_chunks" % cid)
    eq(sum(v["number"] for v in d["items"]["classes"].values()), 30, "items per class")
    check(len(d["conns"]["connections"]) >= 1, "connections listed")


@test
def counters_move_with_traffic():
    slabcache_only()
    s, port = admin_server()
    with s, s.client() as c:
        before, m0 = stats_json(port)["stats"], metrics(port)
        traffic(c, 20)
        after, m1 = stats_json(port)["stats"], metrics(port)
    eq(after["cmd_set"] - before["cmd_set"], 20, "/stats cmd_set moved")
    eq(after["get_hits"] - before["get_hits"], 20, "/stats get_hits moved")
    hit = ("memcached_commands_total", (("command", "get"), ("status", "hit")))
    miss = ("memcached_commands_total", (("command", "get"), ("status", "miss")))
    eq(m1[hit] - m0[hit], 20, "/metrics get hits moved")
    eq(m1[miss] - m0[miss], 1, "/metrics get misses moved")
    eq(m1[("memcached_current_items", ())], 20, "memcached_current_items")
    check(m1[("memcached_read_bytes_total", ())] > m0[("memcached_read_bytes_total", ())],
          "read bytes moved")
    per_slab = [k for k in m1 if k[0] == "memcached_slab_current_items"]
    eq(sum(m1[k] for k in per_slab), 20, "memcached_slab_current_items sum")
    eq(m1[("slabcache_eviction_policy", (("policy", "auto"),))], 1, "slabcache's own")


@test
def metrics_have_every_series_memcached_exporter_has():
    slabcache_only()
    exp = exporter_path()
    if exp is None:
        print("  (memcached_exporter not built: scripts/setup-clients.sh; skipped)")
        return
    s, port = admin_server()
    with s, s.client() as c:
        traffic(c, 30)
        eport = free_port()
        ex = subprocess.Popen([exp, "--memcached.address=%s:%d" % (HOST, s.port),
                               "--web.listen-address=%s:%d" % (HOST, eport)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            check(wait_until(lambda: _up(eport), timeout=10), "exporter started")
            theirs = {}
            for fam in text_string_to_metric_families(get(eport, "/metrics")[2].decode()):
                for smp in fam.samples:
                    if smp.name.startswith("memcached_") and \
                            not smp.name.startswith("memcached_exporter"):
                        theirs[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
        finally:
            ex.kill()
            ex.wait()
        ours = metrics(port)
    check(len(theirs) > 100, "the exporter scraped %d series" % len(theirs))
    missing = sorted(k for k in theirs if k not in ours)
    eq(missing[:5], [], "series the exporter has that /metrics lacks (%d)" % len(missing))
    for k in theirs:
        if k[0] in ("memcached_commands_total", "memcached_slab_commands_total",
                    "memcached_current_items", "memcached_slab_current_items",
                    "memcached_limit_bytes", "memcached_slab_chunk_size_bytes"):
            eq(ours[k], theirs[k], "value of %r" % (k,))


def _up(port):
    try:
        return get(port, "/metrics")[0] == 200
    except OSError:
        return False


@test
def health_404_405_and_limits():
    slabcache_only()
    s, port = admin_server()
    with s:
        eq(get(port, "/health")[:2], (200, "text/plain; charset=utf-8"), "/health")
        eq(get(port, "/nope")[0], 404, "unknown path")
        eq(get(port, "/stats/more")[0], 404, "no prefix match")
        eq(get(port, "/stats", method="POST", body=b"x")[0], 405, "POST")
        eq(get(port, "/metrics", method="DELETE")[0], 405, "DELETE")
        eq(get(port, "/stats", method="POST", body=b"x" * 5000)[0], 413, "oversized body")
        status = get(port, "/stats", headers={"X-Big": "a" * 20000})[0]
        check(status in (400, 413, 431), "oversized headers refused: %d" % status)
        eq(get(port, "/health")[0], 200, "still serving")
        c = http.client.HTTPConnection(HOST, port, timeout=10)     # keep-alive
        c.request("HEAD", "/health")
        r = c.getresponse()
        eq((r.status, r.read()), (200, b""), "HEAD: headers only")
        c.request("GET", "/health")
        r = c.getresponse()
        eq((r.status, r.read()), (200, b"ok\n"), "the next request on the connection")
        c.close()


def raw(port, data, chunk=65536):
    """Send data (in chunks, all of it, as a client that writes its whole
    request before reading), then read the answer to EOF. (answer, error
    while sending or None)."""
    s = socket.create_connection((HOST, port), timeout=10)
    err = None
    try:
        for i in range(0, len(data), chunk):
            s.sendall(data[i:i + chunk])
    except OSError as e:
        err = e
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except OSError as e:
        err = err or e
    s.close()
    return out, err


def status_line(answer):
    return answer.split(b"\r\n", 1)[0]


@test
def every_other_method_405_connect_too():
    slabcache_only()
    s, port = admin_server()
    with s:
        for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT",
                       "PROPFIND"):
            for path in ("/stats", "/metrics", "/health"):
                out, _ = raw(port, b"%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                             % (method.encode(), path.encode()))
                eq(status_line(out), b"HTTP/1.1 405 Method Not Allowed", method + " " + path)
                check(b"\r\nAllow: GET, HEAD\r\n" in out, "Allow header for " + method)
        out, _ = raw(port, b"CONNECT /nope HTTP/1.1\r\nConnection: close\r\n\r\n")
        eq(status_line(out), b"HTTP/1.1 404 Not Found", "CONNECT to an unknown path")


@test
def versions_other_than_1_0_and_1_1_get_505():
    slabcache_only()
    s, port = admin_server()
    with s:
        for v in (b"HTTP/1.9", b"HTTP/2.0", b"HTTP/0.9", b"HTTP/3.0"):
            out, _ = raw(port, b"GET /health %s\r\nHost: x\r\n\r\n" % v)
            eq(status_line(out), b"HTTP/1.1 505 HTTP Version Not Supported", v.decode())
            check(b"\r\nConnection: close\r\n" in out, "closed after 505")
        out, _ = raw(port, b"GET /health HTTP/1.0\r\n\r\n")
        eq(status_line(out), b"HTTP/1.1 200 OK", "HTTP/1.0")
        eq(out.split(b"\r\n\r\n", 1)[1], b"ok\n", "HTTP/1.0 body, then closed")
        out, _ = raw(port, b"GET /health\r\n\r\n")
        eq(status_line(out), b"HTTP/1.1 400 Bad Request", "no version")


@test
def a_huge_header_is_answered_431_then_closed():
    """A client that sends its whole 1 MB header before reading gets the
    answer: the server reads and drops the rest of the request before it
    closes (closing with unread input would reset the connection)."""
    slabcache_only()
    s, port = admin_server()
    big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    with s:
        for i in range(5):
            out, err = raw(port, big, chunk=4096 if i % 2 else 1 << 20)
            eq(err, None, "sending a 1 MB header (try %d)" % i)
            eq(status_line(out), b"HTTP/1.1 431 Request Header Fields Too Large",
               "1 MB header answered")
        c = http.client.HTTPConnection(HOST, port, timeout=10)
        c.request("GET", "/stats", headers={"X-Big": "a" * (1 << 20)})
        eq(c.getresponse().status, 431, "http.client's 1 MB header")
        c.close()
        # a client that goes on sending is closed within the linger's bound
        t = socket.create_connection((HOST, port), timeout=10)
        t.sendall(big[:20000])
        t0 = time.monotonic()
        closed = False
        try:
            while time.monotonic() - t0 < 8:
                t.sendall(b"a" * 4096)
                time.sleep(0.001)
        except OSError:
            closed = True
        t.close()
        check(closed and time.monotonic() - t0 < 6,
              "a client still sending after its 431 was closed (%.1f s)"
              % (time.monotonic() - t0))
        eq(get(port, "/health")[0], 200, "still serving")


@test
def pipelined_requests_then_half_close_all_answered():
    """400 pipelined requests (more answers than a connection queues at
    once), then the client shuts its side: every one is answered."""
    slabcache_only()
    s, port = admin_server()
    with s:
        t = socket.create_connection((HOST, port), timeout=10)
        t.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 400)
        t.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            d = t.recv(1 << 16)
            if not d:
                break
            out += d
        t.close()
        eq(out.count(b"HTTP/1.1 200 OK\r\n"), 400, "answers")


@test
def a_trickled_head_gets_408_and_many_clients_503():
    """A head trickled a byte at a time is cut off (408) once it has taken
    5 s; past the connection limit a new client is told 503, not left
    hanging, and the port serves again once the trickling ends."""
    slabcache_only()
    s, port = admin_server()
    with s:
        t = socket.create_connection((HOST, port), timeout=10)
        t0 = time.monotonic()
        head = b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 1000
        out = b""
        try:
            for b in head:
                t.sendall(bytes([b]))
                time.sleep(0.5)
                if time.monotonic() - t0 > 15:
                    break
        except OSError:
            pass
        t.settimeout(5)
        try:
            out = t.recv(1000)
        except OSError:
            pass
        t.close()
        eq(status_line(out), b"HTTP/1.1 408 Request Timeout", "trickled head")
        check(time.monotonic() - t0 < 12, "cut off after %.1f s" % (time.monotonic() - t0))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        hogs = [socket.create_connection((HOST, port), timeout=10) for _ in range(512)]
        for h in hogs:
            h.sendall(b"GET /hea")
        time.sleep(0.3)
        out, _ = raw(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        eq(status_line(out), b"HTTP/1.1 503 Service Unavailable", "over the connection limit")
        for h in hogs:
            h.close()
        check(wait_until(lambda: _up(port), 10), "serving again")


@test
def a_stalled_admin_client_blocks_nothing():
    slabcache_only()
    s, port = admin_server()
    with s, s.client() as c:
        stalled = socket.create_connection((HOST, port), timeout=5)
        stalled.sendall(b"GET /stats HTTP/1.1\r\nHost: x\r\n")     # never finishes
        t0 = time.monotonic()
        c.set("a", "1")
        eq(c.get("a"), b"1", "the client port answers")
        eq(get(port, "/health")[0], 200, "the admin port answers others")
        check(time.monotonic() - t0 < 3, "no wait behind the stalled client")
        # evhttp drops it after its timeout (5 s)
        stalled.settimeout(10)
        check(stalled.recv(100) is not None, "stalled client closed or answered")
        stalled.close()


@test
def admin_port_off_by_default_and_in_stats_settings():
    slabcache_only()
    with Server() as s, s.client() as c:
        st = c.stats("settings")
    eq(st.get("admin_port"), "0", "off by default")
    eq(st.get("admin_listen"), "127.0.0.1", "loopback by default")


PATHS = ("/", "/stats", "/stats/history", "/metrics", "/health", "/nope")


@test
def a_token_is_required_on_every_endpoint():
    """--admin-token FILE: every path, known or not, answers 401 (with
    WWW-Authenticate: Bearer) without the token or with another one, and
    as usual with it. The token file's trailing newline is not the
    token's."""
    slabcache_only()
    with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
        f.write("t0ken-for-tests\n")
        f.flush()
        s, port = admin_server("--admin-token", f.name)
        with s:
            wait_until(lambda: _answers(port))
            for path in PATHS:
                c = http.client.HTTPConnection(HOST, port, timeout=10)
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                eq(r.status, 401, "%s without the token" % path)
                check("Bearer" in (r.getheader("WWW-Authenticate") or ""), "WWW-Authenticate")
                c.close()
                eq(get(port, path, headers={"Authorization": "Bearer t0ken-for-test"})[0], 401,
                   "%s with another token" % path)
                eq(get(port, path, headers={"Authorization": "Basic t0ken-for-tests"})[0], 401,
                   "%s with another scheme" % path)
                eq(get(port, path, headers={"Authorization": "Bearer t0ken-for-tests"})[0],
                   404 if path == "/nope" else 200, "%s with the token" % path)


def _answers(port):
    try:
        get(port, "/health")
        return True
    except OSError:
        return False


@test
def a_non_loopback_admin_listen_needs_a_token():
    """An --admin-listen that is not loopback is refused (exit 64, with
    the reason) unless --admin-token or --admin-insecure is given; an
    unreadable or empty token file is refused too. (Nothing here listens
    anywhere but 127.0.0.1: the refusal comes before the admin port binds.)"""
    slabcache_only()
    binary = Server().binary
    root = ["-u", "root"] if os.geteuid() == 0 else []
    r = subprocess.run([binary, "-l", HOST, "-p", str(free_port()), "-U", "0",
                        "--admin-port", str(free_port()), "--admin-listen", "0.0.0.0"] + root,
                       capture_output=True, text=True, timeout=10)
    eq(r.returncode, 64, "exit status: %s" % r.stderr)
    check("--admin-token" in r.stderr, r.stderr)
    with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
        for content in ("", "two words\n"):
            f.seek(0)
            f.truncate()
            f.write(content)
            f.flush()
            r = subprocess.run([binary, "-l", HOST, "-p", str(free_port()), "-U", "0",
                                "--admin-port", str(free_port()), "--admin-token", f.name] + root,
                               capture_output=True, text=True, timeout=10)
            eq(r.returncode, 64, "token file %r: %s" % (content, r.stderr))


@test
def history_keeps_one_sample_a_second():
    """GET /stats/history: the fields named, one sample a second (times
    increasing by one or two), cumulative figures that follow the traffic,
    at most 600 samples."""
    slabcache_only()
    s, port = admin_server()
    with s, s.client() as c:
        wait_until(lambda: len(history(port)["samples"]) >= 2, timeout=10)
        traffic(c, 50)
        first = history(port)["samples"][-1][0]
        wait_until(lambda: history(port)["samples"][-1][0] > first, timeout=10)
        h = history(port)
        fields = h["fields"]
        eq(fields[:3], ["time", "cmd_get", "get_hits"], "fields")
        check("rss_bytes" in fields and "evictions" in fields, "fields %r" % fields)
        samples = h["samples"]
        check(2 <= len(samples) <= 600, "%d samples" % len(samples))
        times = [x[0] for x in samples]
        check(all(1 <= b - a <= 2 for a, b in zip(times, times[1:])), "times %r" % times)
        last = dict(zip(fields, samples[-1]))
        check(last["cmd_get"] >= 51 and last["cmd_set"] >= 50, "last sample %r" % last)
        check(last["rss_bytes"] > 1 << 20, "rss %d" % last["rss_bytes"])
        check(samples[0][fields.index("cmd_get")] <= last["cmd_get"], "cumulative")


def history(port):
    status, ctype, data = get(port, "/stats/history")
    eq(status, 200, "/stats/history")
    check(ctype.startswith("application/json"), ctype)
    return json.loads(data)


if __name__ == "__main__":
    run_all()
