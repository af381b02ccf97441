"""Shared helpers for slabcache integration tests (Python 3 stdlib only).

The server under test is $SLABCACHE (path to a binary). Run as root, `-u
root` is added (memcached and slabcache both refuse to run as root
otherwise). When it points at memcached itself, slabcache-only checks are
skipped (see slabcache_only()).
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HOST = "127.0.0.1"
# Where scripts/setup-clients.sh puts client libraries and tools.
CLIENT_CACHE = os.environ.get("SLABCACHE_CLIENT_CACHE", "/var/cache/slabcache")


def exporter_path():
    """prometheus/memcached_exporter, built by setup-clients.sh; or None."""
    for p in (os.environ.get("MEMCACHED_EXPORTER"),
              os.path.join(CLIENT_CACHE, "go", "bin", "memcached_exporter"),
              os.path.expanduser("~/go/bin/memcached_exporter")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("memcached_exporter")
RECV_TIMEOUT = 5.0


# --------------------------------------------------------------------------
# server binary selection
# --------------------------------------------------------------------------

def server_binary():
    path = os.environ.get("SLABCACHE")
    if not path:
        # default: the in-tree build, relative to this file
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.normpath(os.path.join(here, "..", "..", "src", "slabcache"))
    return path


def is_memcached(path=None):
    """True when the binary under test is memcached (not slabcache)."""
    path = path or server_binary()
    return "memcached" in os.path.basename(path)


def is_slabcache():
    return not is_memcached()


class SkipCheck(Exception):
    """Raised inside a test to mark it skipped (not counted as failure)."""


def rss_kb(pid):
    """A process's resident set in KB (None if it cannot be read)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def is_sanitized(path=None):
    """True when the binary is built with AddressSanitizer, whose allocator
    (quarantine, redzones) makes RSS figures meaningless."""
    try:
        with open(path or server_binary(), "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


def slabcache_only():
    """Call at the top of a check that only applies to slabcache."""
    if is_memcached():
        raise SkipCheck("slabcache-only check, server is memcached")


def require_binary():
    """Exit 77 (skip) when the server binary does not exist."""
    path = server_binary()
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print("server binary %r not found or not executable: skipping" % path)
        print("0 passed, 0 failed")
        sys.exit(77)


def require_reference(ref):
    """For tests comparing against memcached: exit 77 (skip) when the
    reference binary is missing or is the server under test itself."""
    require_binary()
    if not os.access(ref, os.X_OK):
        print("reference memcached %s not installed: skipping" % ref)
        print("0 passed, 0 failed")
        sys.exit(77)
    if is_memcached(server_binary()):
        print("server under test is memcached itself: skipping")
        print("0 passed, 0 failed")
        sys.exit(77)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((HOST, 0))
        return s.getsockname()[1]
    finally:
        s.close()


# --------------------------------------------------------------------------
# server process
# --------------------------------------------------------------------------

_PENDING = []  # processes sent SIGTERM, not yet reaped


def _reap(proc, timeout=3.0):
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass


def reap_all():
    """Wait (bounded) for every server stopped with wait=False."""
    while _PENDING:
        _reap(_PENDING.pop())


atexit.register(reap_all)


class Server:
    """Start the server binary on a free port; stop() kills only its PID."""

    def __init__(self, *args, binary=None, start_timeout=5.0, env=None):
        self.binary = binary or server_binary()
        self.args = list(args)
        self.env = None if env is None else dict(os.environ, **env)
        self.port = None
        self.proc = None
        self.start_timeout = start_timeout
        self._errf = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self):
        last_err = None
        for _attempt in range(3):  # retry on a port race
            self.port = free_port()
            cmd = [self.binary, "-l", HOST, "-p", str(self.port), "-U", "0"]
            if os.geteuid() == 0:     # both refuse root without -u
                cmd += ["-u", "root"]
            cmd += self.args
            self.cmdline = cmd
            self._errf = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=self._errf, stderr=self._errf,
                                         env=self.env)
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    s = socket.create_connection((HOST, self.port), timeout=0.5)
                    s.close()
                except OSError as e:
                    last_err = e
                    time.sleep(0.02)
                    continue
                # make sure it was our process that answered (port race:
                # a server that failed to bind exits at once)
                time.sleep(0.03)
                if self.proc.poll() is None:
                    return self
                break
            # failed: dump output, kill, retry
            out = self.output()
            self.stop()
            self._errf.close()
            self._errf = None
            last_err = "server %r did not start (exit=%r): %s\n%s" % (
                cmd, self.proc.returncode if self.proc else None, last_err, out)
        raise RuntimeError(last_err)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout=5.0):
        """Wait for the process to exit by itself; return its code or None."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def output(self):
        """stdout+stderr captured so far (str)."""
        if not self._errf:
            return ""
        try:
            self._errf.flush()
            self._errf.seek(0)
            return self._errf.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def stop(self, wait=True):
        """SIGTERM our PID; SIGKILL it if it has not exited after a bound.
        With wait=False the process is reaped later by reap_all() (memcached
        takes ~1 s to exit on SIGTERM; tests need not wait for that)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if not wait:
                _PENDING.append(self.proc)
                return
            _reap(self.proc)

    def client(self, timeout=RECV_TIMEOUT):
        return Client(self.port, timeout=timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            out = self.output()
            if out.strip():
                sys.stdout.write("---- server output (%s) ----\n%s\n"
                                 "---- end server output ----\n"
                                 % (" ".join(self.cmdline), out))
        # slabcache exits at once on SIGTERM: wait for it, so a sanitizer
        # build's exit-time reports (leaks, UB) are seen and fail the test.
        self.stop(wait=not is_memcached(self.binary))
        if not is_memcached(self.binary):
            check_sanitizer_output(self.output(), " ".join(self.cmdline))
        if self._errf:
            self._errf.close()
        return False


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "runtime error:", "WARNING: ThreadSanitizer")
_SANITIZER_FAILURES = []


def check_sanitizer_output(out, what):
    """Record (and print) sanitizer reports found in a server's output."""
    if any(mark in out for mark in SANITIZER_MARKS):
        _SANITIZER_FAILURES.append(what)
        sys.stdout.write("---- sanitizer report from %s ----\n%s\n"
                         "---- end sanitizer report ----\n" % (what, out))


# --------------------------------------------------------------------------
# client
# --------------------------------------------------------------------------

class ProtocolError(AssertionError):
    pass


class Client:
    """Blocking ASCII-protocol client; every recv is bounded by `timeout`."""

    def __init__(self, port, timeout=RECV_TIMEOUT, host=HOST):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.timeout = timeout

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
        return False

    # raw I/O -----------------------------------------------------------
    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def _fill(self):
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise ProtocolError("timeout waiting for server (have %r)"
                                % self.buf[:200])
        if not chunk:
            raise ProtocolError("connection closed by server (have %r)"
                                % self.buf[:200])
        self.buf += chunk

    def read_line(self):
        """One line without its trailing \\r\\n (bytes)."""
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            if len(self.buf) > 4 * 1024 * 1024:
                raise ProtocolError("line too long")
            self._fill()

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_available(self, idle=0.2, maximum=3.0):
        """Read whatever arrives until `idle` s of silence (max `maximum` s).
        Returns (bytes, closed) where closed is True on EOF."""
        data, self.buf = self.buf, b""
        closed = False
        deadline = time.monotonic() + maximum
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.sock.settimeout(min(idle, left))
                try:
                    chunk = self.sock.recv(65536)
                except socket.timeout:
                    break
                except ConnectionResetError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                data += chunk
        finally:
            try:
                self.sock.settimeout(self.timeout)
            except OSError:
                pass
        return data, closed

    def expect_nothing(self, wait=0.2):
        """Assert that no bytes arrive within `wait` seconds."""
        data, _closed = self.read_available(idle=wait, maximum=wait)
        if data:
            raise ProtocolError("unexpected bytes from server: %r" % data[:200])

    def wait_closed(self, timeout=5.0):
        """True if the server closes the connection within timeout
        (any pending bytes are discarded)."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    chunk = self.sock.recv(65536)
                except socket.timeout:
                    return False
                if not chunk:
                    return True
                self.buf += chunk
        except (ConnectionResetError, BrokenPipeError):
            return True
        finally:
            try:
                self.sock.settimeout(self.timeout)
            except OSError:
                pass
        return False

    # protocol ------------------------------------------------------------
    def cmd(self, line):
        """Send one command line (\\r\\n added), return one reply line (str)."""
        if isinstance(line, str):
            line = line.encode()
        self.send(line + b"\r\n")
        return self.read_line().decode("latin-1")

    def store(self, verb, key, value, flags=0, exptime=0, cas=None,
              noreply=False):
        if isinstance(value, str):
            value = value.encode()
        if isinstance(key, str):
            key = key.encode()
        head = b"%s %s %d %d %d" % (verb.encode(), key, flags, exptime,
                                     len(value))
        if cas is not None:
            head += b" %d" % cas
        if noreply:
            head += b" noreply"
        self.send(head + b"\r\n" + value + b"\r\n")
        if noreply:
            return None
        return self.read_line().decode("latin-1")

    def set(self, key, value, flags=0, exptime=0, noreply=False):
        return self.store("set", key, value, flags, exptime, noreply=noreply)

    def add(self, key, value, flags=0, exptime=0, noreply=False):
        return self.store("add", key, value, flags, exptime, noreply=noreply)

    def replace(self, key, value, flags=0, exptime=0, noreply=False):
        return self.store("replace", key, value, flags, exptime,
                          noreply=noreply)

    def append(self, key, value, noreply=False):
        return self.store("append", key, value, noreply=noreply)

    def prepend(self, key, value, noreply=False):
        return self.store("prepend", key, value, noreply=noreply)

    def cas(self, key, value, cas, flags=0, exptime=0, noreply=False):
        return self.store("cas", key, value, flags, exptime, cas=cas,
                          noreply=noreply)

    def read_values(self):
        """Read VALUE blocks until END. Returns dict key(str) ->
        (value bytes, flags int, cas int or None)."""
        out = {}
        while True:
            line = self.read_line()
            if line == b"END":
                return out
            parts = line.split(b" ")
            if parts[0] != b"VALUE" or len(parts) not in (4, 5):
                raise ProtocolError("bad get response line %r" % line[:200])
            key = parts[1].decode("latin-1")
            flags = int(parts[2])
            n = int(parts[3])
            cas = int(parts[4]) if len(parts) == 5 else None
            data = self.read_exact(n + 2)
            if data[-2:] != b"\r\n":
                raise ProtocolError("value block not terminated by CRLF")
            out[key] = (data[:-2], flags, cas)

    def get_multi(self, keys, verb="get"):
        self.send(("%s %s\r\n" % (verb, " ".join(keys))).encode("latin-1"))
        return self.read_values()

    def get(self, key):
        """Value bytes or None."""
        if isinstance(key, bytes):
            key = key.decode("latin-1")
        r = self.get_multi([key])
        if key in r:
            return r[key][0]
        return None

    def gets(self, key):
        """(value, cas) or None."""
        r = self.get_multi([key], verb="gets")
        if key in r:
            return r[key][0], r[key][2]
        return None

    def get_flags(self, key):
        r = self.get_multi([key])
        return r[key][1] if key in r else None

    def stats(self, sub=None):
        """dict name -> value (str) for `stats [sub]`."""
        self.send(b"stats" + ((" " + sub).encode() if sub else b"") + b"\r\n")
        out = {}
        while True:
            line = self.read_line().decode("latin-1")
            if line == "END":
                return out
            parts = line.split(" ", 2)
            if parts[0] != "STAT" or len(parts) < 2:
                raise ProtocolError("bad stats line %r" % line)
            out[parts[1]] = parts[2] if len(parts) > 2 else ""

    def version(self):
        return self.cmd("version")


# --------------------------------------------------------------------------
# tiny test registry
# --------------------------------------------------------------------------

_TESTS = []


def test(fn):
    _TESTS.append(fn)
    return fn


def check(cond, msg="check failed"):
    if not cond:
        raise AssertionError(msg)


def eq(got, want, what=""):
    if got != want:
        raise AssertionError("%s: expected %r, got %r"
                             % (what or "value", want, got))


def wait_until(pred, timeout=5.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def run_all(argv=None):
    """Run all registered tests (or those named on the command line);
    print the summary line and exit."""
    argv = sys.argv[1:] if argv is None else argv
    selected = [t for t in _TESTS if not argv or t.__name__ in argv]
    passed = failed = skipped = 0
    t_all = time.monotonic()
    print("server under test: %s%s" % (server_binary(),
          " (memcached mode)" if is_memcached() else ""))
    for t in selected:
        t0 = time.monotonic()
        try:
            t()
        except SkipCheck as e:
            skipped += 1
            print("SKIP %s (%s)" % (t.__name__, e))
            continue
        except Exception:
            failed += 1
            print("FAIL %s (%.2fs)" % (t.__name__, time.monotonic() - t0))
            traceback.print_exc(file=sys.stdout)
            continue
        passed += 1
        print("ok   %s (%.2fs)" % (t.__name__, time.monotonic() - t0))
    reap_all()
    if _SANITIZER_FAILURES:
        failed += 1
        print("FAIL sanitizer reports from %d server run(s)"
              % len(_SANITIZER_FAILURES))
    sys.stdout.write("# total %.1fs, %d skipped\n"
                     % (time.monotonic() - t_all, skipped))
    print("%d passed, %d failed" % (passed, failed))
    sys.stdout.flush()
    sys.exit(1 if failed else 0)
