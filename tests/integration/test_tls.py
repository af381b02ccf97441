#!/usr/bin/env python3
"""TLS (-Z) with memcached's options: a real TLS client (Python's ssl
module, and `openssl s_client`) stores and reads values, large ones too;
client certificates required or optional (ssl_verify_mode); a notls:
listener beside a TLS one; ssl_min_version; a plaintext client on the TLS
port is dropped and counted, and a stalled handshake holds nothing up; the
stats and `stats settings` fields; start-up errors."""

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

from sclib import (HOST, Client, Server, check, eq, free_port, run_all, server_binary,
                   slabcache_only, test)

OPENSSL = shutil.which("openssl")


class Certs:
    """A CA, a server certificate for 127.0.0.1 and a client certificate."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sc-tls-")
        d = self.dir

        def run(*args):
            subprocess.run([OPENSSL, *args], check=True, capture_output=True, timeout=60)
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/ca.key",
            "-out", d + "/ca.pem", "-days", "2", "-subj", "/CN=slabcache-test-ca")
        with open(d + "/san.ext", "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\n")
        for name, ext in (("server", True), ("client", False)):
            run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "%s/%s.key" % (d, name),
                "-out", "%s/%s.csr" % (d, name), "-subj", "/CN=%s" % name)
            run("x509", "-req", "-in", "%s/%s.csr" % (d, name), "-CA", d + "/ca.pem",
                "-CAkey", d + "/ca.key", "-CAcreateserial", "-out", "%s/%s.pem" % (d, name),
                "-days", "2", *(["-extfile", d + "/san.ext"] if ext else []))

    def path(self, name):
        return os.path.join(self.dir, name)

    def server_opts(self, *extra):
        return ",".join(["ssl_chain_cert=" + self.path("server.pem"),
                         "ssl_key=" + self.path("server.key"),
                         "ssl_ca_cert=" + self.path("ca.pem"), *extra])

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


CERTS = None


def certs():
    global CERTS
    if CERTS is None:
        CERTS = Certs()
    return CERTS


class TlsServer(Server):
    """A TLS listener on its own port and a notls: one on -p (the port the
    harness probes): .tport and .port."""

    def __init__(self, *extra_opts, extra_args=()):
        self.tport = free_port()
        super().__init__("-l", "%s:%d,notls:%s" % (HOST, self.tport, HOST), "-Z",
                         "-o", certs().server_opts(*extra_opts), *extra_args)


def tls_server(*extra_opts, extra_args=()):
    """(server, tls port, plaintext port); the ports are known once started."""
    s = TlsServer(*extra_opts, extra_args=extra_args)
    return s, s.tport, None


def client_ctx(cert=False, max_version=None):
    ctx = ssl.create_default_context(cafile=certs().path("ca.pem"))
    if cert:
        ctx.load_cert_chain(certs().path("client.pem"), certs().path("client.key"))
    if max_version is not None:
        ctx.maximum_version = max_version
    return ctx


def tls_exchange(port, data, ctx=None, until=b"END\r\n"):
    ctx = ctx or client_ctx()
    with socket.create_connection((HOST, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=HOST) as s:
            s.sendall(data)
            out = b""
            deadline = time.monotonic() + 10
            while not out.endswith(until) and time.monotonic() < deadline:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
            return out, s.version()


def require_openssl():
    slabcache_only()
    if OPENSSL is None:
        print("  (openssl not installed: scripts/setup.sh; skipped)")
        return False
    return True


@test
def values_over_tls_and_notls():
    if not require_openssl():
        return
    s, tport, _ = tls_server()
    with s:
        pport = s.port
        out, version = tls_exchange(tport, b"set a 0 0 5\r\nhello\r\nget a\r\n")
        eq(out, b"STORED\r\nVALUE a 0 5\r\nhello\r\nEND\r\n", "set and get over TLS")
        check(version in ("TLSv1.2", "TLSv1.3"), "TLS version %s" % version)
        big = bytes(range(256)) * 1200          # 300 KB: many TLS records
        out, _ = tls_exchange(tport, b"set big 0 0 %d\r\n%s\r\nget big\r\n" % (len(big), big))
        eq(out, b"STORED\r\nVALUE big 0 %d\r\n%s\r\nEND\r\n" % (len(big), big), "300 KB value")
        with Client(pport) as c:                # the notls: listener, same data
            eq(c.get("a"), b"hello", "notls: listener serves plaintext")
        p = subprocess.run([OPENSSL, "s_client", "-connect", "%s:%d" % (HOST, tport),
                            "-CAfile", certs().path("ca.pem"), "-quiet", "-verify_return_error"],
                           input=b"version\r\nquit\r\n", capture_output=True, timeout=20)
        check(b"VERSION 1.6.45" in p.stdout, "openssl s_client: %r %r" % (p.stdout[-200:], p.stderr[-300:]))


def maps_openssl(pid):
    with open("/proc/%d/maps" % pid) as f:
        return any("/libssl.so" in line or "/libcrypto.so" in line for line in f)


@test
def openssl_is_mapped_only_with_tls():
    """OpenSSL's pages (a couple of MB of every process mapping it) are
    not carried by a server without -Z: it is opened when TLS is asked
    for (src/core/tls_lib.c)."""
    if not require_openssl():
        return
    with Server() as s, s.client() as c:
        eq(c.cmd("version").split()[0], "VERSION")
        check(not maps_openssl(s.pid), "a server without -Z maps libssl or libcrypto")
    s, tport, _ = tls_server()
    with s:
        out, _ = tls_exchange(tport, b"version\r\n", until=b"\r\n")
        check(out.startswith(b"VERSION"), "TLS answers: %r" % out)
        check(maps_openssl(s.pid), "a server with -Z maps libssl")


@test
def client_certificates_required_or_optional():
    if not require_openssl():
        return
    s, tport, _ = tls_server("ssl_verify_mode=2")
    with s:
        out, _ = tls_exchange(tport, b"version\r\n", client_ctx(cert=True), until=b"\r\n")
        eq(out, b"VERSION 1.6.45\r\n", "required: with a certificate")
        try:
            out, _ = tls_exchange(tport, b"version\r\n", client_ctx(cert=False), until=b"\r\n")
            refused = out == b""
        except (ssl.SSLError, ConnectionError, OSError):
            refused = True
        check(refused, "required: without a certificate refused")
    s, tport, _ = tls_server("ssl_verify_mode=1")
    with s:
        for cert in (False, True):
            out, _ = tls_exchange(tport, b"version\r\n", client_ctx(cert=cert), until=b"\r\n")
            eq(out, b"VERSION 1.6.45\r\n", "optional: certificate %s" % cert)


@test
def an_mtls_listener_requires_a_client_certificate():
    """-l mtls:ADDR (memcached 1.6.45's t/ssl_ports.t): that listener asks
    every client for a certificate the CA signed, whatever ssl_verify_mode
    says for the others."""
    if not require_openssl():
        return
    mport = free_port()
    with Server("-l", "notls:%s,%s:%d,mtls:%s:%d" % (HOST, HOST, free_port(), HOST, mport),
                "-Z", "-o", certs().server_opts()) as s:
        out, _ = tls_exchange(mport, b"version\r\n", client_ctx(cert=True), until=b"\r\n")
        check(out.startswith(b"VERSION "), "with a certificate: served")
        try:
            out, _ = tls_exchange(mport, b"version\r\n", client_ctx(cert=False), until=b"\r\n")
            refused = out == b""
        except (ssl.SSLError, ConnectionError, OSError):
            refused = True
        check(refused, "without one: refused")


@test
def plaintext_on_the_tls_port_is_dropped_and_counted():
    if not require_openssl():
        return
    s, tport, _ = tls_server()
    with s:
        pport = s.port
        with socket.create_connection((HOST, tport), timeout=5) as raw:
            raw.sendall(b"get a\r\n")
            try:
                got = raw.recv(100)
            except ConnectionError:
                got = b""
            eq(got, b"", "a plaintext client gets no answer and is closed")
        socket.create_connection((HOST, tport), timeout=5).close()     # a health check
        time.sleep(0.2)
        with Client(pport) as c:
            st = c.stats()
        eq(st.get("ssl_handshake_errors"), "1", "counted")
        check("time_since_server_cert_refresh" in st, "cert age in stats")
        out, _ = tls_exchange(tport, b"version\r\n", until=b"\r\n")
        eq(out, b"VERSION 1.6.45\r\n", "still serving TLS")


@test
def a_stalled_handshake_holds_nothing():
    if not require_openssl():
        return
    s, tport, _ = tls_server(extra_args=("-t", "1"))     # one worker for everyone
    with s:
        pport = s.port
        stalled = socket.create_connection((HOST, tport), timeout=5)
        stalled.sendall(b"\x16\x03\x01\x02\x00\x01")            # half a ClientHello
        t0 = time.monotonic()
        out, _ = tls_exchange(tport, b"version\r\n", until=b"\r\n")
        eq(out, b"VERSION 1.6.45\r\n", "another TLS client is served")
        with Client(pport) as c:
            eq(c.cmd("version"), "VERSION 1.6.45", "a plaintext client is served")
        check(time.monotonic() - t0 < 3, "no wait behind the stalled handshake")
        stalled.close()


@test
def pipelined_gets_past_the_output_bound_all_answered():
    """Input pauses while large answers wait; when it resumes, requests
    OpenSSL already decrypted (no socket event says so) are answered too.
    128 gets of a 200 KB value and a miss, 32 KB sent in one go (a review
    reproduced the last one never answered)."""
    if not require_openssl():
        return
    s, tport, _ = tls_server()
    with s:
        key = b"k" * 249
        val = b"v" * 200000
        out, _ = tls_exchange(tport, b"set " + key + b" 0 0 %d\r\n" % len(val) + val + b"\r\n",
                             until=b"STORED\r\n")
        eq(out, b"STORED\r\n", "stored")
        line = b"get " + key + b"\r\n"
        data = line * 128 + b"get " + b"m" * (32768 - 128 * 255 - 6) + b"\r\n"
        eq(len(data), 32768, "request bytes")
        with socket.create_connection((HOST, tport), timeout=10) as raw:
            with client_ctx().wrap_socket(raw, server_hostname=HOST) as c:
                c.sendall(data)
                ends, tail = 0, b""
                deadline = time.monotonic() + 20
                while ends < 129 and time.monotonic() < deadline:
                    chunk = c.recv(1 << 20)
                    if not chunk:
                        break
                    tail += chunk
                    ends += tail.count(b"END\r\n")
                    tail = tail[-8:] if b"END\r\n" not in tail[-8:] else b""
        eq(ends, 129, "every get answered")


@test
def min_version_and_settings():
    if not require_openssl():
        return
    s, tport, _ = tls_server("ssl_min_version=3", "ssl_verify_mode=2")
    with s:
        pport = s.port
        try:
            tls_exchange(tport, b"version\r\n", client_ctx(cert=True,
                        max_version=ssl.TLSVersion.TLSv1_2), until=b"\r\n")
            refused = False
        except (ssl.SSLError, ConnectionError, OSError):
            refused = True
        check(refused, "a TLS 1.2 client refused with ssl_min_version=3")
        with Client(pport) as c:
            st = c.stats("settings")
        eq(st["ssl_enabled"], "yes", "ssl_enabled")
        eq(st["ssl_chain_cert"], certs().path("server.pem"), "ssl_chain_cert")
        eq(st["ssl_verify_mode"], "3", "ssl_verify_mode as OpenSSL's flags")
        eq(st["ssl_min_version"], "tlsv1.3", "ssl_min_version")
        eq(st["ssl_wbuf_size"], "16384", "ssl_wbuf_size")


@test
def refresh_certs_reloads_or_keeps_the_old():
    if not require_openssl():
        return
    work = tempfile.mkdtemp(prefix="sc-tls-refresh-")
    try:
        for f in ("server.pem", "server.key"):
            shutil.copy(certs().path(f), os.path.join(work, f))
        tport = free_port()
        with Server("-l", "%s:%d,notls:%s" % (HOST, tport, HOST), "-Z", "-o",
                    "ssl_chain_cert=%s/server.pem,ssl_key=%s/server.key" % (work, work)) as s, \
                s.client() as c:
            eq(c.cmd("refresh_certs"), "OK", "reloaded")
            check(int(c.stats()["time_since_server_cert_refresh"]) <= 1, "cert age reset")
            with open(os.path.join(work, "server.key"), "w") as f:
                f.write("not a key\n")
            check(c.cmd("refresh_certs").startswith("Error loading"), "a broken key is refused")
            out, _ = tls_exchange(tport, b"version\r\n", until=b"\r\n")
            eq(out, b"VERSION 1.6.45\r\n", "the old certificate still serves")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with Server() as s, s.client() as c:        # memcached's answer without -Z
        c.send(b"refresh_certs\r\nversion\r\n")
        eq(c.read_line(), b"Error TLS not enabled", "without -Z")


def start_fails(*args):
    p = subprocess.run([server_binary(), "-l", HOST, "-p", str(free_port()), "-U", "0",
                        "-u", "root", *args], capture_output=True, timeout=10,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stderr.decode()


@test
def startup_errors():
    if not require_openssl():
        return
    code, err = start_fails("-Z")
    check(code != 0 and "ssl_chain_cert" in err, "-Z without a certificate: %d %r" % (code, err))
    code, err = start_fails("-Z", "-o", "ssl_chain_cert=/nonexistent,ssl_key=/nonexistent")
    check(code != 0 and "certificate chain" in err, "a missing certificate: %r" % err)
    code, err = start_fails("-o", "ssl_kernel_tls")
    eq(code, 64, "ssl_kernel_tls refused")
    code, err = start_fails("-l", "notls:127.0.0.1")
    check(code != 0 and "notls" in err, "notls without -Z: %r" % err)


if __name__ == "__main__":
    try:
        run_all()
    finally:
        if CERTS is not None:
            CERTS.close()
