#!/usr/bin/env python3
"""Real memcached clients and operator tools against the server.

One check per client or tool; each stores data through the client (or
directly), reads it back through the client and compares every value byte
for byte, then (where the client stored it) reads it again over the raw
protocol so a client-side transformation (compression, serialisation)
cannot hide a server bug.

    pymemcache get_many, python-memcached get_multi, pylibmc get_multi,
    php-memcached getMulti + getAllKeys, node `memcached` getMulti + version,
    gomemcache GetMulti, memcached-tool dump/stats/display,
    libmemcached-tools memcdump/memcstat, prometheus memcached_exporter,
    twemproxy (nutcracker) in front of three servers; over the binary
    protocol: pylibmc and php-memcached with their binary option, PHP's
    session handler (default ini), memjs, the Rust `memcache` crate's
    default URL, memcflush/memccp/memccat --binary.

A check is skipped (SkipCheck) only when its client or tool is not
installed: `scripts/setup-clients.sh` installs them all. Everything must
pass against memcached 1.6.18 (SLABCACHE=/usr/bin/memcached).

Environment:
  SLABCACHE               server under test (see sclib.py)
  SLABCACHE_CLIENT_CACHE  where setup-clients.sh put the npm package and the
                          Go module cache / exporter (/var/cache/slabcache)
  CLIENTS_BUILD_DIR       where the Go helper is built (default: the build
                          dir holding $SLABCACHE, else a temporary dir)
  CLIENTS_N               keys per check (default 10000)

Run: SLABCACHE=path/to/binary python3 tests/integration/test_clients.py [check ...]
"""

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (Server, SkipCheck, test, run_all, check, eq,  # noqa
                   require_binary, server_binary, free_port, wait_until, exporter_path,
                   Client, HOST)

HERE = os.path.dirname(os.path.abspath(__file__))
HELPERS = os.path.join(HERE, "clients")
CACHE = os.environ.get("SLABCACHE_CLIENT_CACHE", "/var/cache/slabcache")
N = int(os.environ.get("CLIENTS_N", "10000"))
KEYLEN = 200
SERVER_ARGS = ("-m", "64", "-t", "2")
# memcached 1.6's `stats cachedump` (used by memcdump and php's getAllKeys)
# lists only the COLD LRU of a class; with the segmented LRU most fresh
# items sit in HOT/WARM and are not listed. -o no_lru_maintainer turns the
# segmented LRU off so memcached lists every item; slabcache accepts and
# ignores the option.
DUMP_ARGS = SERVER_ARGS + ("-o", "no_lru_maintainer")
SETUP_HINT = "run scripts/setup-clients.sh"


# --------------------------------------------------------------------------
# the data every helper stores: same scheme in clients/*.{go,js,php}
# --------------------------------------------------------------------------

def ckey(i, keylen=KEYLEN):
    k = "clients:%06d:" % i
    return k + chr(97 + i % 26) * (keylen - len(k))


def cvalue(i):
    n = 10 + (i * 131) % 1000
    return bytes(33 + (i * 7 + j * 13) % 94 for j in range(n))


KEYS = [ckey(i) for i in range(N)]
VALUES = [cvalue(i) for i in range(N)]


def raw_store(port, n=N, flags=lambda i: 0, exptime=lambda i: 0):
    """Store keys 0..n-1 over the raw protocol (pipelined, replies read)."""
    with Client(port, timeout=30) as c:
        for start in range(0, n, 500):
            end = min(n, start + 500)
            c.send(b"".join(
                b"set %s %d %d %d\r\n%s\r\n" % (KEYS[i].encode(), flags(i),
                                               exptime(i), len(VALUES[i]),
                                               VALUES[i])
                for i in range(start, end)))
            for i in range(start, end):
                eq(c.read_line(), b"STORED", "raw set of key %d" % i)


def raw_verify(port, n=N, flags=lambda i: 0, what="raw get"):
    """One multi-get of keys 0..n-1 over the raw protocol: every value and
    flags word must be exactly what was stored."""
    with Client(port, timeout=30) as c:
        r = c.get_multi(KEYS[:n])
    compare(r, n, what, flags=flags)


def compare(got, n, what, flags=None):
    """got: key -> value bytes, or key -> (value, flags, cas)."""
    bad = []
    for i in range(n):
        v = got.get(KEYS[i])
        f = None
        if isinstance(v, tuple):
            v, f = v[0], v[1]
        if v is None:
            bad.append("key %d missing" % i)
        elif v != VALUES[i]:
            bad.append("key %d: %d bytes %r..., want %d bytes %r..."
                       % (i, len(v), v[:20], len(VALUES[i]), VALUES[i][:20]))
        elif flags is not None and f is not None and f != flags(i):
            bad.append("key %d: flags %d, want %d" % (i, f, flags(i)))
    check(not bad, "%s: %d of %d keys wrong: %s"
          % (what, len(bad), n, "; ".join(bad[:3])))
    eq(len(got), n, what + ": number of values returned")


class Problems:
    """Collect independent failures of one check; raise them all at once."""

    def __init__(self, what):
        self.what, self.items = what, []

    def add(self, msg):
        self.items.append(msg)

    def expect(self, cond, msg):
        if not cond:
            self.add(msg)
        return cond

    def attempt(self, fn, *a):
        """Run fn(*a); an AssertionError becomes one problem."""
        try:
            fn(*a)
        except AssertionError as e:
            self.add(str(e))

    def done(self):
        check(not self.items, "%s: %d problem(s):\n  - %s"
              % (self.what, len(self.items), "\n  - ".join(self.items)))


def probe(port, line, timeout=5.0):
    """Send one listing command; return (first reply line, ended) where
    ended says the reply ended with END within `timeout` (metadump lines
    end in a bare LF, so read raw bytes)."""
    data = b""
    with Client(port, timeout=timeout) as c:
        c.send(line + "\r\n")
        deadline = time.monotonic() + timeout
        while not (data == b"END\r\n" or data.endswith(b"\nEND\r\n") or
                   re.match(rb"(ERROR|CLIENT_ERROR|SERVER_ERROR|BUSY)[^\n]*"
                            rb"\r\n$", data)):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            c.sock.settimeout(left)
            try:
                chunk = c.sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    first = data.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")
    ended = data == b"END\r\n" or data.endswith(b"\nEND\r\n")
    return first[:120], ended


def run(cmd, timeout=60, env=None, cwd=None, what=None):
    """Run a helper; return (rc, stdout str, stderr str). Bounded."""
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s: timed out after %ss" % (what or cmd[0], timeout))
    return (p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"))


def run_json(cmd, what, timeout=60, env=None):
    rc, out, err = run(cmd, timeout=timeout, env=env, what=what)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    check(lines, "%s: no result (rc=%d)\nstdout: %s\nstderr: %s"
          % (what, rc, out[-2000:], err[-2000:]))
    res = json.loads(lines[-1])
    res["_rc"] = rc
    res["_stderr"] = err[-2000:]
    return res


_STARTED = []  # helper daemons (exporter, nutcracker) we started


def _kill_started():
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
                p.wait(timeout=3)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(timeout=3)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass


atexit.register(_kill_started)


def start_daemon(cmd, logf):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                         stderr=subprocess.STDOUT)
    _STARTED.append(p)
    return p


def stop_daemon(p):
    if p in _STARTED:
        _STARTED.remove(p)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=3)


def port_open(port):
    try:
        Client(port, timeout=0.5).close()
        return True
    except OSError:
        return False


def which(name, *extra):
    for p in extra:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which(name)


# --------------------------------------------------------------------------
# Python clients
# --------------------------------------------------------------------------

@test
def pymemcache_get_many():
    try:
        from pymemcache.client.base import Client as PymClient
    except ImportError:
        raise SkipCheck("pymemcache not installed (%s)" % SETUP_HINT)
    with Server(*SERVER_ARGS) as srv:
        c = PymClient((HOST, srv.port), connect_timeout=5, timeout=30)
        try:
            failed = c.set_many({KEYS[i]: VALUES[i] for i in range(N)},
                                noreply=False)
            eq(failed, [], "pymemcache set_many failed keys")
            got = c.get_many(KEYS)
        finally:
            c.close()
        got = {(k.decode() if isinstance(k, bytes) else k): v
               for k, v in got.items()}
        compare(got, N, "pymemcache get_many")
        raw_verify(srv.port, what="raw get after pymemcache")


@test
def python_memcached_get_multi():
    try:
        import memcache
    except ImportError:
        raise SkipCheck("python-memcached not installed (%s)" % SETUP_HINT)
    with Server(*SERVER_ARGS) as srv:
        c = memcache.Client(["%s:%d" % (HOST, srv.port)], socket_timeout=30,
                            dead_retry=0)
        try:
            failed = c.set_multi({KEYS[i]: VALUES[i] for i in range(N)})
            eq(failed, [], "python-memcached set_multi failed keys")
            got = c.get_multi(KEYS)
        finally:
            c.disconnect_all()
        compare(got, N, "python-memcached get_multi")
        raw_verify(srv.port, what="raw get after python-memcached")


@test
def pylibmc_get_multi():
    try:
        import pylibmc
    except ImportError:
        raise SkipCheck("pylibmc not installed (%s)" % SETUP_HINT)
    with Server(*SERVER_ARGS) as srv:
        c = pylibmc.Client(["%s:%d" % (HOST, srv.port)], behaviors={
            "connect_timeout": 5000, "receive_timeout": 30000000,
            "send_timeout": 30000000})
        try:
            failed = c.set_multi({KEYS[i]: VALUES[i] for i in range(N)})
            eq(list(failed), [], "pylibmc set_multi failed keys")
            got = c.get_multi(KEYS)
        finally:
            c.disconnect_all()
        compare(got, N, "pylibmc get_multi")
        raw_verify(srv.port, what="raw get after pylibmc")


# --------------------------------------------------------------------------
# PHP, Node, Go
# --------------------------------------------------------------------------

def php_with_memcached():
    """php-cli with the memcached extension, or skip saying which is missing."""
    php = which("php")
    if not php:
        raise SkipCheck("php-cli not installed (%s)" % SETUP_HINT)
    rc, _, _ = run([php, "-r", 'exit(class_exists("Memcached") ? 0 : 3);'],
                   timeout=20)
    if rc != 0:
        raise SkipCheck("php-memcached extension not installed (%s)"
                        % SETUP_HINT)
    return php


@test
def php_memcached_getmulti_getallkeys():
    php = php_with_memcached()
    with Server(*DUMP_ARGS) as srv:
        res = run_json([php, os.path.join(HELPERS, "php_client.php"),
                        str(srv.port), str(N), str(KEYLEN)], "php-memcached")
        probs = Problems("php-memcached")
        other = [e for e in res["errors"] if not e.startswith("getAllKeys")]
        probs.expect(not other, "errors: %s" % other)
        probs.expect(res["stored"] == N, "setMulti stored %d of %d"
                     % (res["stored"], N))
        probs.expect(res["bad"] == 0 and res["returned"] == N,
                     "getMulti returned %d values, %d of %d keys wrong "
                     "(first: %s)" % (res["returned"], res["bad"], N,
                                      res["badKeys"]))
        # getAllKeys: libmemcached's dump, `stats cachedump CLASS 0`
        if res["allkeys"] is None:
            first, _ = probe(srv.port, "stats cachedump 1 0")
            probs.add("getAllKeys failed (%s); server answers %r to "
                      "`stats cachedump 1 0`"
                      % ([e for e in res["errors"] if e not in other],
                         first))
        else:
            probs.expect((res["allkeys"], res["allkeys_missing"],
                          res["allkeys_extra"]) == (N, 0, 0),
                         "getAllKeys listed %d keys, %d missing, %d extra"
                         % (res["allkeys"], res["allkeys_missing"],
                            res["allkeys_extra"]))
        probs.attempt(raw_verify, srv.port, N, lambda i: 0,
                      "raw get after php-memcached")
        probs.done()


@test
def node_memcached_getmulti_version():
    node = which("node")
    if not node:
        raise SkipCheck("node not installed (%s)" % SETUP_HINT)
    modules = os.path.join(CACHE, "node", "node_modules")
    if not os.path.isfile(os.path.join(modules, "memcached", "package.json")):
        raise SkipCheck("npm package memcached not in %s (%s)"
                        % (modules, SETUP_HINT))
    env = dict(os.environ, NODE_PATH=modules)
    # ~12 s of this check is the client's own parser (it concatenates and
    # shifts one array entry per response line: quadratic in the number of
    # values of one getMulti); memcached and slabcache take the same time.
    with Server(*SERVER_ARGS) as srv:
        res = run_json([node, os.path.join(HELPERS, "node_client.js"),
                        str(srv.port), str(N), str(KEYLEN)],
                       "node memcached", env=env)
        check(not res["errors"], "node memcached errors: %s\nstderr: %s"
              % (res["errors"][:5], res["_stderr"]))
        eq(res["stored"], N, "node memcached set stored")
        eq(res["bad"], 0, "node memcached getMulti wrong values (first: %s)"
           % res["badKeys"])
        eq(res["returned"], N, "node memcached getMulti returned")
        # the client takes the version from /(\d+)\.(\d+)\.(\d+)$/ on the
        # VERSION line's first token
        eq(res["version"], "1.6.45", "node memcached version()")
        eq(res["_rc"], 0, "node helper exit code")
        raw_verify(srv.port, what="raw get after node memcached")


# --------------------------------------------------------------------------
# binary-protocol clients
# --------------------------------------------------------------------------

@test
def pylibmc_binary_get_multi():
    try:
        import pylibmc
    except ImportError:
        raise SkipCheck("pylibmc not installed (%s)" % SETUP_HINT)
    with Server(*SERVER_ARGS) as srv:
        c = pylibmc.Client(["%s:%d" % (HOST, srv.port)], binary=True, behaviors={
            "connect_timeout": 5000, "receive_timeout": 30000000,
            "send_timeout": 30000000})
        try:
            failed = c.set_multi({KEYS[i]: VALUES[i] for i in range(N)})
            eq(list(failed), [], "pylibmc binary set_multi failed keys")
            got = c.get_multi(KEYS)
            c.set("pylibmc:n", 5)
            eq(c.incr("pylibmc:n", 3), 8, "pylibmc binary incr")
            check(c.delete(KEYS[0]), "pylibmc binary delete")
            eq(c.get(KEYS[0]), None, "deleted key")
        finally:
            c.disconnect_all()
        compare(got, N, "pylibmc binary get_multi")


@test
def php_memcached_binary_getmulti():
    php = php_with_memcached()
    with Server(*SERVER_ARGS) as srv:
        res = run_json([php, os.path.join(HELPERS, "php_client.php"),
                        str(srv.port), str(N), str(KEYLEN), "binary"],
                       "php-memcached binary")
        eq(res["errors"], [], "php-memcached binary errors")
        eq(res["stored"], N, "php-memcached binary setMulti stored")
        eq((res["returned"], res["bad"]), (N, 0),
           "php-memcached binary getMulti (returned, wrong)")
        raw_verify(srv.port, what="raw get after php-memcached binary")


@test
def php_session_handler_default_ini():
    """PHP's memcached session handler as Debian ships it: binary protocol
    and session locking (the lock is an add, released with a delete)."""
    php = php_with_memcached()
    with Server(*SERVER_ARGS) as srv:
        res = run_json([php, os.path.join(HELPERS, "php_session.php"),
                        str(srv.port)], "php session handler")
        eq(res["binary_protocol"], "1", "the ini's default is binary")
        eq(res["errors"], [], "session warnings")
        check(res["started"] and res["written"] and res["written2"],
              "session start/write: %r" % res)
        eq((res["n"], res["blob"]), (1, 1000), "session data read back")


@test
def memjs_binary_client():
    node = which("node")
    if not node:
        raise SkipCheck("node not installed (%s)" % SETUP_HINT)
    modules = os.path.join(CACHE, "node", "node_modules")
    if not os.path.isfile(os.path.join(modules, "memjs", "package.json")):
        raise SkipCheck("npm package memjs not in %s (%s)" % (modules, SETUP_HINT))
    env = dict(os.environ, NODE_PATH=modules)
    n = min(N, 2000)
    with Server(*SERVER_ARGS) as srv:
        res = run_json([node, os.path.join(HELPERS, "memjs_client.js"),
                        str(srv.port), str(n)], "memjs", env=env)
        eq(res.get("error"), None, "memjs error")
        eq((res["set_failed"], res["get_wrong"]), (0, 0), "memjs set/get")
        eq(res["incr"], [7, 12], "memjs increment (initial 7, then +5)")
        eq((res["delete"], res["after_delete"]), (True, None), "memjs delete")
        eq(res["version"], "1.6.45", "memjs stats version")
        eq(res["after_flush"], None, "memjs flush")


def rustmc_path():
    return os.path.join(CACHE, "rust", "target", "release", "rustmc")


@test
def rust_memcache_default_url():
    """The Rust `memcache` crate with its default URL (binary protocol)."""
    exe = rustmc_path()
    if not os.access(exe, os.X_OK):
        raise SkipCheck("%s not built (cargo missing? %s)" % (exe, SETUP_HINT))
    with Server(*SERVER_ARGS) as srv:
        rc, so, se = run([exe, str(srv.port), str(min(N, 2000))], timeout=120,
                         what="rust memcache")
        fails = [l for l in so.splitlines() if not l.startswith("ok ")]
        eq(fails, [], "rust memcache checks (stderr %r)" % se[-300:])
        eq(rc, 0, "rust helper exit code")
        check(len(so.splitlines()) == 7, "all seven checks ran: %r" % so)


@test
def libmemcached_tools_binary():
    tools = {t: which(t) for t in ("memcflush", "memccp", "memccat")}
    if not all(tools.values()):
        raise SkipCheck("libmemcached-tools not installed (%s)" % SETUP_HINT)
    with Server(*SERVER_ARGS) as srv, tempfile.TemporaryDirectory() as tmp:
        servers = "--servers=%s:%d" % (HOST, srv.port)
        path = os.path.join(tmp, "payload.bin")
        with open(path, "wb") as f:
            f.write(bytes(range(256)) * 40)
        rc, so, se = run([tools["memccp"], "--binary", servers, path],
                         timeout=20, what="memccp --binary")
        eq(rc, 0, "memccp --binary exit (stderr %r)" % se[-200:])
        with Client(srv.port) as c:
            eq(c.get("payload.bin"), bytes(range(256)) * 40, "stored by memccp")
        rc, so, se = run([tools["memccat"], "--binary", servers, "payload.bin"],
                         timeout=20, what="memccat --binary")
        eq(rc, 0, "memccat --binary exit (stderr %r)" % se[-200:])
        check(len(so) > 0, "memccat --binary printed the value")
        raw_store(srv.port, n=100)
        rc, so, se = run([tools["memcflush"], "--binary", servers], timeout=20,
                         what="memcflush --binary")
        eq(rc, 0, "memcflush --binary exit (stderr %r)" % se[-200:])
        with Client(srv.port) as c:
            eq(len(c.get_multi(KEYS[:100])), 0, "memcflush --binary flushed")


def go_tool():
    return which("go", "/usr/local/go/bin/go")


def go_env():
    env = dict(os.environ)
    env.setdefault("GOMODCACHE", os.path.join(CACHE, "go", "mod"))
    env.setdefault("GOCACHE", os.path.join(CACHE, "go", "build-cache"))
    env.setdefault("GOPATH", os.path.join(CACHE, "go", "path"))
    env.setdefault("GOTOOLCHAIN", "local")
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -modcacherw").strip()
    return env


def build_dir():
    d = os.environ.get("CLIENTS_BUILD_DIR")
    if not d:
        top = os.path.dirname(os.path.dirname(os.path.abspath(server_binary())))
        if os.path.isfile(os.path.join(top, "config.status")):
            d = os.path.join(top, "tests", "clients")
        else:
            d = tempfile.mkdtemp(prefix="sc-clients-")
            atexit.register(shutil.rmtree, d, True)
    os.makedirs(d, exist_ok=True)
    return d


NET_ERRORS = ("dial tcp", "proxyconnect", "lookup ", "403 Forbidden",
              "404 Not Found", "connection refused", "i/o timeout",
              "no such host", "TLS handshake")


@test
def gomemcache_getmulti():
    go = go_tool()
    if not go:
        raise SkipCheck("Go toolchain not found (/usr/local/go/bin/go)")
    out = os.path.join(build_dir(), "gomc")
    rc, so, se = run([go, "build", "-o", out, "."], timeout=120, env=go_env(),
                     cwd=os.path.join(HELPERS, "gomc"), what="go build gomc")
    if rc != 0:
        if any(e in se for e in NET_ERRORS):
            raise SkipCheck("gomemcache module not cached and not fetchable "
                            "(%s): %s" % (SETUP_HINT, se.strip()[-300:]))
        raise AssertionError("go build of the gomemcache helper failed:\n"
                             + so + se)
    with Server(*SERVER_ARGS) as srv:
        rc, so, se = run([out, "-addr", "%s:%d" % (HOST, srv.port),
                          "-n", str(N), "-keylen", str(KEYLEN)], timeout=60,
                         what="gomemcache helper")
        check(rc == 0 and so.strip() == "OK %d" % N,
              "gomemcache GetMulti: rc=%d\n%s%s" % (rc, so[-2000:], se[-2000:]))
        raw_verify(srv.port, flags=lambda i: i % 7,
                   what="raw get after gomemcache")


# --------------------------------------------------------------------------
# operator tools
# --------------------------------------------------------------------------

def memcached_tool_path():
    for p in (os.environ.get("MEMCACHED_TOOL"),
              "/usr/share/memcached/scripts/memcached-tool",
              "/usr/bin/memcached-tool"):
        if p and os.path.isfile(p):
            return p
    return shutil.which("memcached-tool")


def parse_tool_dump(out):
    """memcached-tool dump output -> ({key: (value, flags, None)},
    {key: exptime}); raises AssertionError on unparsable output."""
    got, exps, pos = {}, {}, 0
    head = re.compile(rb"add (\S+) (\d+) (-?\d+) (\d+)\r\n")
    while pos < len(out):
        m = head.match(out, pos)
        check(m, "unparsable output at byte %d: %r" % (pos, out[pos:pos + 100]))
        k, f, e, n = (m.group(1).decode(), int(m.group(2)), int(m.group(3)),
                      int(m.group(4)))
        pos = m.end()
        got[k] = (out[pos:pos + n], f, None)
        exps[k] = e
        eq(out[pos + n:pos + n + 2], b"\r\n", "value terminator of " + k[:20])
        pos += n + 2
    return got, exps


def check_tool_dump(p, flags, exptime, t0):
    try:
        got, exps = parse_tool_dump(p.stdout)
        compare(got, N, "values", flags=flags)
    except AssertionError as e:
        raise AssertionError("dump: %s (rc=%d, stderr %r)"
                             % (e, p.returncode, p.stderr[-200:]))
    t1 = int(time.time())
    for i in range(N):
        e = exps[KEYS[i]]
        ok = (t0 + 3598 <= e <= t1 + 3602) if exptime(i) else e == 0
        check(ok, "dump: exptime of key %d is %d, want %s"
              % (i, e, "about now+3600" if exptime(i) else 0))


@test
def memcached_tool_dump_stats_display():
    tool = memcached_tool_path()
    perl = which("perl")
    if not tool or not perl:
        raise SkipCheck("memcached-tool (Debian memcached package) or perl "
                        "not installed")
    flags = lambda i: i % 5  # noqa: E731
    exptime = lambda i: 3600 if i % 10 == 0 else 0  # noqa: E731
    probs = Problems("memcached-tool")
    with Server(*SERVER_ARGS) as srv:
        addr = "%s:%d" % (HOST, srv.port)
        t0 = int(time.time())
        raw_store(srv.port, flags=flags, exptime=exptime)

        # stats: `stats`; "#addr Field Value" then "%29s %14s" per stat
        rc, so, se = run([perl, tool, addr, "stats"], timeout=20,
                         what="memcached-tool stats")
        probs.expect(rc == 0, "stats: exit code %d (%s)" % (rc, se.strip()))
        stats = {}
        for ln in so.splitlines()[1:]:
            parts = ln.split()
            if len(parts) == 2:
                stats[parts[0]] = parts[1]
        missing = [n for n in ("pid", "uptime", "version", "curr_connections",
                               "cmd_get", "cmd_set", "get_hits", "bytes",
                               "threads", "evictions") if n not in stats]
        probs.expect(not missing, "stats: lacks %s" % missing)
        for name, want in (("curr_items", N), ("total_items", N),
                           ("limit_maxbytes", 64 << 20)):
            probs.expect(stats.get(name) == str(want), "stats: %s is %r, "
                         "want %d" % (name, stats.get(name), want))

        # display: `stats items` + `stats slabs`, one row per used class
        rc, so, se = run([perl, tool, addr, "display"], timeout=20,
                         what="memcached-tool display")
        probs.expect(rc == 0, "display: exit code %d (%s)" % (rc, se.strip()))
        lines = so.splitlines()
        if probs.expect(lines and lines[0].split()[:3] ==
                        ["#", "Item_Size", "Max_age"],
                        "display: header %r" % lines[:1]):
            rows = [ln.split() for ln in lines[1:] if ln.strip()]
            bad = [r for r in rows if len(r) != 9 or int(r[3]) <= 0]
            probs.expect(rows and not bad, "display: no class rows or bad "
                         "rows %r\n%s" % (bad[:2], so[:600]))
            total = sum(int(r[4]) for r in rows if len(r) == 9)
            probs.expect(total == N, "display: Count column sums to %d, "
                         "want %d" % (total, N))

        # dump: `lru_crawler metadump all` (read until END), then one get
        # per key; prints "add KEY FLAGS EXPTIME LEN\r\nVALUE\r\n" per key.
        # The tool waits for END forever, so probe the command first.
        for _ in range(25):  # memcached: BUSY while a crawl is running
            first, ended = probe(srv.port, "lru_crawler metadump all")
            if not first.startswith("BUSY"):
                break
            time.sleep(0.2)
        if not ended:
            probs.add("dump: server answers %r to `lru_crawler metadump all` "
                      "(memcached-tool dump waits for END forever)" % first)
        else:
            try:
                p = subprocess.run([perl, tool, addr, "dump"],
                                   capture_output=True, timeout=30,
                                   stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                p = None
                probs.add("dump: memcached-tool did not finish in 30 s")
            if p is not None:
                probs.attempt(check_tool_dump, p, flags, exptime, t0)
    probs.done()


@test
def libmemcached_memcdump_memcstat():
    memcdump, memcstat = which("memcdump"), which("memcstat")
    if not memcdump or not memcstat:
        raise SkipCheck("libmemcached-tools not installed (%s)" % SETUP_HINT)
    probs = Problems("libmemcached-tools")
    with Server(*DUMP_ARGS) as srv:
        servers = "--servers=%s:%d" % (HOST, srv.port)
        raw_store(srv.port)
        with Client(srv.port) as c:
            eq(len(c.get_multi(KEYS[:100])), 100, "hits before memcstat")

        # memcstat: "Server: HOST (PORT)" then "\tNAME: VALUE" per stat
        rc, so, se = run([memcstat, servers], timeout=20, what="memcstat")
        probs.expect(rc == 0, "memcstat: exit code %d (stderr %r)"
                     % (rc, se.strip()[-300:]))
        probs.expect(("Server: %s (%d)" % (HOST, srv.port)) in so,
                     "memcstat: header %r" % so[:200])
        st = dict(re.findall(r"^\s+(\w+): (\S+)", so, re.M))
        missing = [n for n in ("pid", "uptime", "version", "curr_connections",
                               "bytes", "limit_maxbytes", "threads")
                   if n not in st]
        probs.expect(not missing, "memcstat: lacks %s" % missing)
        for name, want in (("curr_items", N), ("get_hits", 100),
                           ("pid", srv.pid)):
            probs.expect(st.get(name) == str(want), "memcstat: %s is %r, "
                         "want %d" % (name, st.get(name), want))

        # memcdump: `stats cachedump CLASS 0` for every class; a key a line
        rc, so, se = run([memcdump, servers], timeout=30, what="memcdump")
        if rc != 0:
            first, _ = probe(srv.port, "stats cachedump 1 0")
            probs.add("memcdump: exit code %d (stderr %r); server answers %r "
                      "to `stats cachedump 1 0`"
                      % (rc, se.strip()[-200:], first))
        else:
            listed = so.split()
            want = set(KEYS)
            missing, extra = want - set(listed), set(listed) - want
            probs.expect(len(listed) == len(set(listed)),
                         "memcdump: duplicate keys")
            probs.expect(not missing and not extra,
                         "memcdump: listed %d keys, %d missing, %d extra"
                         % (len(listed), len(missing), len(extra)))
    probs.done()


def scrape(port):
    """{(name, labels-str): value} from the exporter's /metrics."""
    with urllib.request.urlopen("http://%s:%d/metrics" % (HOST, port),
                                timeout=10) as r:
        text = r.read().decode()
    out = {}
    for ln in text.splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", ln)
        if m:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def family(metrics, name, **labels):
    """Sum of a family's samples whose labels include `labels`."""
    total, seen = 0.0, False
    for (n, lab), v in metrics.items():
        if n != name:
            continue
        if all('%s="%s"' % kv in lab for kv in labels.items()):
            total += v
            seen = True
    return total if seen else None


# Keys whose absence (or a non-number) makes memcached_exporter v0.13.0 set
# memcached_up 0: it parses them without a "key not found" exemption.
EXPORTER_HARD_KEYS = {
    "stats": ("cmd_set", "cas_misses", "cas_hits", "cas_badval"),
    "stats slabs": ("cmd_set", "cas_hits", "cas_badval"),
}


def exporter_diagnosis(port):
    """Which hard-required keys the server's stats lack (for messages)."""
    out = []
    with Client(port) as c:
        st = c.stats()
        miss = [k for k in EXPORTER_HARD_KEYS["stats"] if k not in st]
        if miss:
            out.append("`stats` lacks %s" % miss)
        slabs = c.stats("slabs")
        classes = sorted(set(k.split(":")[0] for k in slabs if ":" in k))
        for cl in classes:
            miss = [k for k in EXPORTER_HARD_KEYS["stats slabs"]
                    if "%s:%s" % (cl, k) not in slabs]
            if miss:
                out.append("`stats slabs` class %s lacks %s" % (cl, miss))
                break
    return "; ".join(out) or "no missing key found"


@test
def memcached_exporter_metrics():
    exe = exporter_path()
    if not exe:
        raise SkipCheck("memcached_exporter not built (%s)" % SETUP_HINT)
    probs = Problems("memcached_exporter")
    with Server(*SERVER_ARGS) as srv, tempfile.TemporaryFile() as log:
        web = free_port()
        ex = start_daemon([exe, "--memcached.address=%s:%d" % (HOST, srv.port),
                           "--web.listen-address=%s:%d" % (HOST, web),
                           "--memcached.timeout=5s"], log)

        def exporter_errors():
            log.flush()
            log.seek(0)
            lines = log.read().decode("utf-8", "replace").splitlines()
            errs = []
            for ln in lines:
                if "level=error" in ln:
                    e = re.sub(r"^ts=\S+ ", "", ln)
                    if e not in errs:
                        errs.append(e)
            return errs[:5]
        try:
            check(wait_until(lambda: port_open(web), timeout=10),
                  "exporter did not listen: %s" % exporter_errors())
            m1 = scrape(web)
            probs.expect(family(m1, "memcached_up") == 1.0,
                         "memcached_up %r before traffic: exporter errors %s;"
                         " %s" % (family(m1, "memcached_up"),
                                  exporter_errors(),
                                  exporter_diagnosis(srv.port)))

            n = 2000
            raw_store(srv.port, n=n)
            with Client(srv.port, timeout=30) as c:
                eq(len(c.get_multi(KEYS[:n])), n, "hits")
                eq(len(c.get_multi(["nope:%d" % i for i in range(500)])), 0,
                   "misses")
                eq(c.cmd("delete " + KEYS[0]), "DELETED", "delete")
                eq(c.cmd("incr nope:1 1"), "NOT_FOUND", "incr miss")
                version = c.version().split(" ", 1)[1]
            m2 = scrape(web)
            up = family(m2, "memcached_up")
            probs.expect(up == 1.0, "memcached_up %r after traffic: "
                         "exporter errors %s; %s"
                         % (up, exporter_errors(),
                            exporter_diagnosis(srv.port)))

            present = set(name for name, _ in m2)
            want = ("memcached_up", "memcached_version",
                    "memcached_uptime_seconds", "memcached_time_seconds",
                    "memcached_commands_total", "memcached_current_items",
                    "memcached_items_total", "memcached_current_bytes",
                    "memcached_limit_bytes", "memcached_read_bytes_total",
                    "memcached_written_bytes_total",
                    "memcached_current_connections",
                    "memcached_connections_total",
                    "memcached_max_connections",
                    "memcached_items_evicted_total",
                    "memcached_slab_current_items",
                    "memcached_slab_items_age_seconds",
                    "memcached_slab_chunk_size_bytes",
                    "memcached_slab_current_chunks",
                    "memcached_slab_chunks_used",
                    "memcached_slab_current_pages",
                    "memcached_slab_commands_total",
                    "memcached_slab_mem_requested_bytes")
            missing = [w for w in want if w not in present]
            probs.expect(not missing, "families missing: %s" % missing)
            probs.expect(('memcached_version', '{version="%s"}' % version)
                         in m2, "memcached_version label is not %r" % version)

            def moved(name, want, **lab):
                a, b = family(m1, name, **lab) or 0.0, family(m2, name, **lab)
                probs.expect(b is not None and b - a == want,
                             "%s%s moved by %s, want %s"
                             % (name, lab or "", None if b is None else b - a,
                                want))
            moved("memcached_commands_total", n, command="get", status="hit")
            moved("memcached_commands_total", 500, command="get",
                  status="miss")
            moved("memcached_commands_total", n, command="set", status="hit")
            moved("memcached_commands_total", 1, command="delete",
                  status="hit")
            moved("memcached_commands_total", 1, command="incr",
                  status="miss")
            moved("memcached_items_total", n)
            moved("memcached_slab_commands_total", n, command="set",
                  status="hit")
            moved("memcached_slab_commands_total", n, command="get",
                  status="hit")
            for name, want in (("memcached_current_items", n - 1),
                               ("memcached_slab_current_items", n - 1),
                               ("memcached_limit_bytes", 64 << 20)):
                got = family(m2, name)
                probs.expect(got == want, "%s is %r, want %d"
                             % (name, got, want))
            for name, low in (("memcached_read_bytes_total", n * KEYLEN),
                              ("memcached_written_bytes_total", n * KEYLEN),
                              ("memcached_current_bytes", n * KEYLEN),
                              ("memcached_slab_chunks_used", n - 1)):
                got = family(m2, name)
                probs.expect(got is not None and got >= low,
                             "%s is %r, want >= %d" % (name, got, low))
        finally:
            stop_daemon(ex)
    probs.done()


def nutcracker_stats(port):
    with Client(port, timeout=5) as c:
        data, _ = c.read_available(idle=0.5, maximum=5)
    return json.loads(data.decode())


def nutcracker_start(nut, ports, tmp, retry_ms):
    """nutcracker in front of ports (ketama, auto_eject_hosts, ejected
    after one failure, retried after retry_ms): (proc, listen port, stats
    port, a function returning its log's tail)."""
    listen, stats_port = free_port(), free_port()
    conf = os.path.join(tmp, "nutcracker.yml")
    with open(conf, "w") as f:
        f.write("pool:\n"
                "  listen: %s:%d\n"
                "  hash: fnv1a_64\n"
                "  distribution: ketama\n"
                "  timeout: 10000\n"
                "  auto_eject_hosts: true\n"
                "  server_retry_timeout: %d\n"
                "  server_failure_limit: 1\n"
                "  server_connections: 1\n"
                "  servers:\n" % (HOST, listen, retry_ms))
        for j, port in enumerate(ports):
            f.write("   - %s:%d:1 s%d\n" % (HOST, port, j + 1))
    logpath = os.path.join(tmp, "nutcracker.log")
    with open(logpath, "wb") as log:
        nc = start_daemon([nut, "-c", conf, "-a", HOST, "-s",
                           str(stats_port), "-i", "200", "-o", logpath], log)

    def nc_log():
        with open(logpath, "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]
    if not wait_until(lambda: port_open(listen) and port_open(stats_port), timeout=10):
        stop_daemon(nc)
        raise AssertionError("nutcracker did not listen:\n" + nc_log())
    return nc, listen, stats_port, nc_log


@test
def twemproxy_multiget():
    nut = which("nutcracker", "/usr/sbin/nutcracker")
    if not nut:
        raise SkipCheck("nutcracker (twemproxy) not installed (%s)"
                        % SETUP_HINT)
    with Server(*SERVER_ARGS) as s1, Server(*SERVER_ARGS) as s2, \
            Server(*SERVER_ARGS) as s3, \
            tempfile.TemporaryDirectory() as tmp:
        backends = (s1, s2, s3)
        nc, listen, stats_port, nc_log = nutcracker_start(
            nut, [s.port for s in backends], tmp, retry_ms=30000)
        try:
            flags = lambda i: i % 3  # noqa: E731
            raw_store(listen, flags=flags)
            raw_verify(listen, flags=flags,
                       what="%d-key multi-get through twemproxy" % N)

            per = [int(s.client().stats()["curr_items"]) for s in backends]
            eq(sum(per), N, "items on the three backends %s" % per)
            check(min(per) > N // 10, "ketama spread over backends: %s" % per)

            def fresh():
                st = nutcracker_stats(stats_port)
                pool = st.get("pool", {})
                reqs = sum(pool.get("s%d" % j, {}).get("requests", 0)
                           for j in (1, 2, 3))
                return reqs >= N + 3, st
            check(wait_until(lambda: fresh()[0], timeout=5),
                  "nutcracker stats did not count the requests")
            st = fresh()[1]
            pool = st["pool"]
            eq(pool.get("server_ejects"), 0, "twemproxy server_ejects")
            eq(pool.get("forward_error"), 0, "twemproxy forward_error")
            for j, s in enumerate(backends):
                ss = pool["s%d" % (j + 1)]
                for k in ("server_eof", "server_err", "server_timedout",
                          "server_ejected_at"):
                    eq(ss.get(k), 0, "twemproxy s%d %s" % (j + 1, k))
                check(ss.get("responses", 0) > 0,
                      "twemproxy s%d answered nothing" % (j + 1))
            check(nc.poll() is None, "nutcracker exited:\n" + nc_log())
        finally:
            stop_daemon(nc)


def proxy_sets(port, prefix, n):
    """Set prefix0..n-1 through the proxy one by one: (stored, errors)."""
    stored = errors = 0
    with Client(port, timeout=15) as c:
        for i in range(n):
            key = "%s:%06d:%08x" % (prefix, i, (i * 2654435761) % (1 << 32))
            c.send(b"set %s 0 0 1\r\nx\r\n" % key.encode())
            line = c.read_line()
            if line == b"STORED":
                stored += 1
            else:
                errors += 1
    return stored, errors


def items_on(port):
    with Client(port, timeout=5) as c:
        return int(c.stats()["curr_items"])


@test
def twemproxy_ejects_a_dead_backend_and_takes_it_back():
    """notes/scale-out.md: a backend that dies is ejected after its first
    failure and the proxy keeps serving from the others; restarted on its
    port, it is taken back after server_retry_timeout."""
    nut = which("nutcracker", "/usr/sbin/nutcracker")
    if not nut:
        raise SkipCheck("nutcracker (twemproxy) not installed (%s)"
                        % SETUP_HINT)
    retry_ms = 4000
    with Server(*SERVER_ARGS) as s1, Server(*SERVER_ARGS) as s2, \
            Server(*SERVER_ARGS) as s3, \
            tempfile.TemporaryDirectory() as tmp:
        backends = (s1, s2, s3)
        nc, listen, stats_port, nc_log = nutcracker_start(
            nut, [s.port for s in backends], tmp, retry_ms=retry_ms)
        back = None
        try:
            eq(proxy_sets(listen, "a", 600), (600, 0), "sets with three backends")
            per = [items_on(s.port) for s in backends]
            check(min(per) > 60, "ketama spread: %s" % per)

            s2.stop()
            t0 = time.monotonic()
            stored, errors = proxy_sets(listen, "b", 600)
            # nutcracker sees the closed connection itself, or the first
            # request routed to s2 fails: at most a few errors, then none
            check(errors <= 5 and stored + errors == 600,
                  "sets while s2 dies: %d stored, %d errors" % (stored, errors))
            check(wait_until(lambda: nutcracker_stats(stats_port)["pool"].get(
                                 "server_ejects", 0) >= 1, timeout=3),
                  "s2 ejected: %r" % nutcracker_stats(stats_port)["pool"])
            check(time.monotonic() - t0 < retry_ms / 1000.0,
                  "600 sets took longer than the retry timeout; the next check would race it")
            # ejected: every key hashes to s1 or s3 until the retry timeout
            eq(proxy_sets(listen, "c", 300), (300, 0), "sets while s2 is ejected")
            eq(items_on(s1.port) + items_on(s3.port), per[0] + per[2] + stored + 300,
               "the sets went to the two live backends")
            check(nc.poll() is None, "nutcracker exited:\n" + nc_log())

            # the same port again: taken back after server_retry_timeout
            cmd = [s2.binary, "-l", HOST, "-p", str(s2.port), "-U", "0"] + \
                  (["-u", "root"] if os.geteuid() == 0 else []) + list(SERVER_ARGS)
            with open(os.path.join(tmp, "back.log"), "wb") as log:
                back = start_daemon(cmd, log)
            check(wait_until(lambda: port_open(s2.port), timeout=10), "s2 restarted")

            def s2_gets_keys():
                proxy_sets(listen, "d%d" % int(time.monotonic() * 1000), 60)
                return items_on(s2.port) > 0
            check(wait_until(s2_gets_keys, timeout=retry_ms / 1000.0 + 10, interval=0.5),
                  "s2 was not taken back:\n" + nc_log())
        finally:
            if back is not None:
                stop_daemon(back)
            stop_daemon(nc)


if __name__ == "__main__":
    require_binary()
    run_all()
