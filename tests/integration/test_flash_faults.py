#!/usr/bin/env python3
"""The flash tier on a failing device: every fault is a miss, counted and
logged, never a crash or a wrong value, and the tier recovers by itself.

Why: a cache in front of a database is most needed when something else is
going wrong. A full filesystem or a dying disk under the flash file must
cost the records concerned and nothing more: the server goes on serving
RAM, every value it answers is the one stored, a record whose write
failed is not counted as written, and writing resumes once the device
takes writes again. A fault is logged with its errno text, at most one
line per kind every few seconds, so a dead device cannot flood the log.

Each test runs a load for its whole length: a writer sets fresh keys of
1-60 KB (-m 8 and a 16 MB flash file: most of them pass through the file)
and a reader multi-gets recent ones; every value carries its key, a hash
of it and its length, so a torn, stale or foreign value is caught byte for
byte. Faults are injected into the server as a device gives them:

  - write failed (ENOSPC, EIO), and a short write (half taken, then
    ENOSPC): by faultio.so, preloaded into the server (LD_PRELOAD; it makes
    pwrite/pread/preadv on the flash file fail while a control file says
    so: tests/integration/faultio.c); the product has no test hook;
  - read failed (EIO) and short reads: the same, with ext_io_uring=0 (reads
    through io_uring bypass libc);
  - the file truncated to nothing under the server, and 4 KB blocks of it
    overwritten with random bytes: done to the file itself, with the
    workers' io_uring reads (the default);
  - a device that takes no write (/dev/full);
  - a real full filesystem: the flash file on a tmpfs smaller than it (as
    root, where tmpfs can be mounted; skipped, saying so, elsewhere).

slabcache only (memcached's extstore takes no such file on /dev/full and
its counters differ). FAULTIO_SO names the shim (make check sets it).

Run: SLABCACHE=path/to/binary FAULTIO_SO=path/to/faultio.so \
     python3 tests/integration/test_flash_faults.py [test..]
"""

import atexit
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sclib  # noqa
from sclib import (Client, Server, SkipCheck, check, eq, require_binary,  # noqa
                   run_all, server_binary, slabcache_only, test)

RAM_MB = "8"
FILE_SIZE = "16m"           # 16 flash slabs: the ring laps every 16 MB written
RECENT = 300                # the reader asks for keys among the last RECENT set
LOG_EVERY = 5.0             # the server logs a kind of fault at most this often

TEXT = {
    "write": "a write to the flash file failed",
    "write_short": "a write to the flash file came up short",
    "read": "a read of the flash file failed",
    "read_short": "a read of the flash file came up short",
    "badcrc": "a flash record failed its checksum",
}

_TMP = []


def tmpdir():
    if not _TMP:
        parent = os.path.dirname(os.path.abspath(server_binary()))
        if not os.access(parent, os.W_OK):
            parent = tempfile.gettempdir()
        _TMP.append(tempfile.mkdtemp(prefix="flash-faults-", dir=parent))
        atexit.register(lambda: shutil.rmtree(_TMP[0], ignore_errors=True))
    return _TMP[0]


def shim():
    path = os.environ.get("FAULTIO_SO")
    if not path or not os.path.isfile(path):
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, "faultio.so")
    if not os.path.isfile(path):
        raise SkipCheck("faultio.so not built (make check builds it)")
    return path


class Faults:
    """A flash file whose pread/preadv/pwrite fail on demand (faultio.so)."""

    def __init__(self, name):
        self.path = os.path.join(tmpdir(), name)
        self.ctl = self.path + ".faults"
        self.set("")

    def set(self, words):
        # a new file each time: faultio notices the change by its stat
        tmp = self.ctl + ".new"
        with open(tmp, "w") as f:
            f.write(words + "\n")
        os.replace(tmp, self.ctl)

    def env(self):
        asan = os.environ.get("ASAN_OPTIONS", "")
        return {"LD_PRELOAD": shim(), "FAULTIO_PATH": self.path,
                "FAULTIO_CTL": self.ctl,
                # ASan must come first among the preloads unless told
                "ASAN_OPTIONS": (asan + ":" if asan else "") +
                "verify_asan_link_order=0"}


def size_of(key):
    h = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
    return 1024 + h % (59 * 1024)


def value_for(key):
    k = key.encode()
    n = size_of(key)
    unit = b"%s|%s|%d;" % (k, hashlib.sha1(k).hexdigest().encode(), n)
    return (unit * (n // len(unit) + 1))[:n]


class Load:
    """A writer of fresh keys and a reader of recent ones, each on its own
    connection, every value read checked byte for byte, until stop()."""

    def __init__(self, port, seed=1):
        self.port = port
        self.rng = random.Random(seed)
        self.keys = []
        self.lock = threading.Lock()
        self.wrong = []
        self.failures = []
        self.hits = self.misses = 0
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._guard, args=(f,), daemon=True)
                        for f in (self._write, self._read)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(30)
        check(not self.failures, "load: %s" % "; ".join(self.failures[:3]))
        check(not self.wrong, "wrong values: %s" % self.wrong[:3])

    def _guard(self, fn):
        try:
            fn()
        except Exception as e:      # reported by stop()
            self.failures.append("%s: %r" % (fn.__name__, e))

    def _write(self):
        with Client(self.port, timeout=20) as c:
            i = 0
            while not self.done.is_set():
                batch = ["k%07d" % j for j in range(i, i + 8)]
                i += 8
                c.send(b"".join(b"set %s 0 0 %d\r\n%s\r\n"
                                % (k.encode(), size_of(k), value_for(k))
                                for k in batch))
                for k in batch:
                    eq(c.read_line(), b"STORED", "set " + k)
                with self.lock:
                    self.keys.extend(batch)

    def _read(self):
        with Client(self.port, timeout=20) as c:
            while not self.done.is_set():
                with self.lock:
                    recent = self.keys[-RECENT:]
                if len(recent) < 16:
                    time.sleep(0.01)
                    continue
                ask = self.rng.sample(recent, 16)
                got = c.get_multi(ask)
                for k, v in got.items():
                    if v[0] != value_for(k):
                        self.wrong.append(k)
                self.hits += len(got)
                self.misses += len(ask) - len(got)

    def count(self):
        with self.lock:
            return len(self.keys)


def stats(port):
    with Client(port, timeout=20) as c:
        return {k: int(v) for k, v in c.stats().items() if v.isdigit()}


def stop_load(s, load):
    """load.stop(); on a failure, the server's memory as it stood (slabs
    and chunks per class, evictions, refusals) goes with the message."""
    try:
        load.stop()
    except AssertionError as e:
        try:
            with Client(s.port, timeout=20) as c:
                st, sl, it = c.stats(), c.stats("slabs"), c.stats("items")
            classes = sorted({k.split(":")[0] for k in sl if ":" in k}, key=int)
            table = " ".join("%s:%sx%s/%s" % (n, sl.get(n + ":total_pages"), sl.get(n + ":chunk_size"),
                                              sl.get(n + ":used_chunks")) for n in classes)
            st["total_malloced"] = sl.get("total_malloced")
            st["outofmemory"] = " ".join("%s:%s" % (k.split(":")[1], v) for k, v in it.items()
                                         if k.endswith(":outofmemory") and v != "0")
            names = ("outofmemory", "evictions", "curr_items", "total_malloced", "slabs_moved",
                     "extstore_objects_written", "extstore_io_queue")
            where = " ".join("%s=%s" % (k, st.get(k)) for k in names)
        except Exception as d:      # the server may be gone
            where, table = "no stats: %r" % d, ""
        raise AssertionError("%s\n  %s\n  class:pages x chunk/used %s" % (e, where, table))


def wait_for(port, name, above, timeout=20.0):
    """Wait until stat `name` exceeds `above`; its value."""
    deadline = time.monotonic() + timeout
    while True:
        v = stats(port).get(name, 0)
        if v > above or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def write_faults(st):
    return st.get("extstore_write_errors", 0) + st.get("extstore_short_writes", 0)


def wait_settled(port, names, timeout=10.0):
    """Poll until the sum of these stats stops moving (3 polls 0.2 s
    apart): I/O that started before a fault was switched has ended."""
    deadline = time.monotonic() + timeout
    last, same = None, 0
    while time.monotonic() < deadline and same < 3:
        st = stats(port)
        v = sum(st.get(n, 0) for n in names)
        same = same + 1 if v == last else 0
        last = v
        time.sleep(0.2)
    return stats(port)


def log_lines(s, kind):
    return [ln for ln in s.output().splitlines() if TEXT[kind] in ln]


def check_logged(s, kind, errtext, seconds):
    """Logged with its errno text, and no more often than LOG_EVERY."""
    lines = log_lines(s, kind)
    check(lines, "no log line for %s; server output:\n%s" % (kind, s.output()[-2000:]))
    if errtext:
        check(all(errtext in ln for ln in lines),
              "log lines without %r: %s" % (errtext, lines[:2]))
    most = int(seconds // LOG_EVERY) + 1
    check(len(lines) <= most, "%d lines for %s in %.1f s (at most %d): %s"
          % (len(lines), kind, seconds, most, lines[:3]))
    return lines


def finish(s, load, t_start, kind, errtext, what):
    """Stop the load (it checks every value read), then: the server is up,
    and the fault was logged, with errtext, no more often than allowed."""
    stop_load(s, load)
    check(s.alive(), "server alive")
    check_logged(s, kind, errtext, time.monotonic() - t_start)
    print("     %d hits, %d misses; %s" % (load.hits, load.misses, what))


def file_server(path, *more, env=None):
    opt = "ext_path=%s:%s" % (path, FILE_SIZE) + "".join("," + m for m in more)
    return Server("-m", RAM_MB, "-t", "2", "-o", opt, env=env)


# --------------------------------------------------------------------------
# writes
# --------------------------------------------------------------------------

def write_fault(words, kind, errtext):
    """Writes fail for 3 s under load, then the device recovers."""
    slabcache_only()
    f = Faults("w-" + words.replace("=", "-"))
    t_start = time.monotonic()
    with file_server(f.path, env=f.env()) as s:
        load = Load(s.port).start()
        check(wait_for(s.port, "extstore_objects_written", 0) > 0, "written before the fault")
        f.set(words)
        # once a write has failed, one already past the shim has ended:
        # from here every write fails
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and write_faults(stats(s.port)) == 0:
            time.sleep(0.05)
        before = wait_settled(s.port, ["extstore_objects_written"])
        # a few more failed writes, their records dropped (the load's pace sets how soon: the
        # sanitizer build's is slow), at least 2.5 s of them
        deadline = time.monotonic() + 20
        time.sleep(2.5)
        while time.monotonic() < deadline:
            st = stats(s.port)
            if (write_faults(st) >= 3 and
                    st["extstore_objects_dropped"] > before["extstore_objects_dropped"]):
                break
            time.sleep(0.1)
        during = stats(s.port)
        f.set("")
        eq(during["extstore_objects_written"], before["extstore_objects_written"],
           "records counted as written while every write failed")
        check(write_faults(during) >= 3, "write faults counted")
        check(during["extstore_objects_dropped"] > before["extstore_objects_dropped"],
              "records of failed writes counted as dropped")
        # writing resumes by itself; two laps of the file re-use every
        # slot a failed write left behind
        # a write that read the old setting ends
        settled = wait_settled(s.port, ["extstore_write_errors", "extstore_short_writes"])
        errs = write_faults(settled)
        lap = 2 * 16 * 1024 * 1024
        b0 = settled["extstore_bytes_written"]
        after = wait_for(s.port, "extstore_bytes_written", b0 + lap, timeout=40)
        check(after > b0 + lap, "writing resumed: %d bytes written since" % (after - b0))
        r0 = stats(s.port)["extstore_objects_read"]
        check(wait_for(s.port, "extstore_objects_read", r0) > r0, "flash reads resumed")
        stop_load(s, load)
        check(s.alive(), "server alive")
        st = stats(s.port)
        check(write_faults(st) == errs, "no write fault after the device recovered")
        check_logged(s, kind, errtext, time.monotonic() - t_start)
        print("     %d keys set, %d hits, %d misses; %d write faults, %d dropped"
              % (load.count(), load.hits, load.misses, errs,
                 st["extstore_objects_dropped"]))


@test
def write_fails_enospc():
    write_fault("write=enospc", "write", "No space left on device")


@test
def write_fails_eio():
    write_fault("write=eio", "write", "Input/output error")


@test
def write_comes_up_short():
    write_fault("write=short", "write_short", "No space left on device")


# --------------------------------------------------------------------------
# reads
# --------------------------------------------------------------------------

def read_fault(words, kind, counter, errtext):
    """Reads fail for 2.5 s under load (through the I/O threads), then
    the device recovers."""
    slabcache_only()
    f = Faults("r-" + words.replace("=", "-"))
    t_start = time.monotonic()
    with file_server(f.path, "ext_io_uring=0", env=f.env()) as s:
        load = Load(s.port).start()
        check(wait_for(s.port, "extstore_objects_read", 0) > 0, "flash reads before the fault")
        f.set(words)
        time.sleep(2.5)
        f.set("")
        st = stats(s.port)
        check(st[counter] > 0, "%s counted: %s" % (counter, st[counter]))
        check(st["miss_from_extstore"] > 0, "faulted reads answered as misses")
        r0 = st["extstore_objects_read"]
        check(wait_for(s.port, "extstore_objects_read", r0 + 10) > r0 + 10,
              "flash reads resumed")
        finish(s, load, t_start, kind, errtext, "%s=%d" % (counter, st[counter]))


@test
def read_fails_eio():
    read_fault("read=eio", "read", "extstore_read_errors", "Input/output error")


@test
def read_comes_up_short():
    read_fault("read=short", "read_short", "extstore_short_reads", None)


# --------------------------------------------------------------------------
# the file changed underneath (reads through io_uring, the default)
# --------------------------------------------------------------------------

@test
def file_truncated_under_load():
    slabcache_only()
    path = os.path.join(tmpdir(), "truncated")
    t_start = time.monotonic()
    with file_server(path) as s:
        load = Load(s.port).start()
        check(wait_for(s.port, "extstore_objects_read", 0) > 0, "flash reads before")
        for _ in range(5):
            os.truncate(path, 0)
            time.sleep(0.3)
        st = stats(s.port)
        check(st["extstore_short_reads"] > 0, "short reads counted")
        r0 = st["extstore_objects_read"]
        check(wait_for(s.port, "extstore_objects_read", r0 + 10) > r0 + 10,
              "flash reads resumed once the writer refilled the file")
        finish(s, load, t_start, "read_short", None,
               "extstore_short_reads=%d" % st["extstore_short_reads"])


@test
def blocks_overwritten_under_load():
    slabcache_only()
    path = os.path.join(tmpdir(), "overwritten")
    rng = random.Random(7)
    size = 16 * 1024 * 1024
    t_start = time.monotonic()
    with file_server(path) as s:
        load = Load(s.port).start()
        check(wait_for(s.port, "extstore_objects_read", 0) > 0, "flash reads before")
        fd = os.open(path, os.O_WRONLY)
        try:
            for _ in range(10):
                for _ in range(300):
                    os.pwrite(fd, os.urandom(4096), rng.randrange(size // 4096) * 4096)
                time.sleep(0.2)
        finally:
            os.close(fd)
        st = stats(s.port)
        check(st["badcrc_from_extstore"] > 0, "bad checksums counted")
        finish(s, load, t_start, "badcrc", None,
               "badcrc_from_extstore=%d" % st["badcrc_from_extstore"])


# --------------------------------------------------------------------------
# a device that takes no write at all
# --------------------------------------------------------------------------

@test
def device_that_never_writes():
    """/dev/full: every write fails (ENOSPC). The server serves RAM and
    the records still in its write buffers, misses the rest, counts none
    as written and logs one line per interval."""
    slabcache_only()
    t_start = time.monotonic()
    with Server("-m", RAM_MB, "-t", "2", "-o", "ext_path=/dev/full:%s" % FILE_SIZE) as s:
        load = Load(s.port).start()
        check(wait_for(s.port, "extstore_write_errors", 2) > 2, "write errors counted")
        time.sleep(1)
        stop_load(s, load)
        st = stats(s.port)
        eq(st["extstore_objects_written"], 0, "records counted as written")
        check(load.hits > 0, "RAM hits")
        with Client(s.port) as c:
            eq(c.set("small", b"x"), "STORED")
            eq(c.get("small"), b"x", "serves from RAM")
        check(s.alive(), "server alive")
        check_logged(s, "write", "No space left on device", time.monotonic() - t_start)
        print("     %d hits, %d misses; extstore_write_errors=%d"
              % (load.hits, load.misses, st["extstore_write_errors"]))


# --------------------------------------------------------------------------
# a real full filesystem: the file on a tmpfs smaller than it
# --------------------------------------------------------------------------

@test
def file_on_a_full_tmpfs():
    slabcache_only()
    mnt = os.path.join(tmpdir(), "tmpfs")
    os.makedirs(mnt, exist_ok=True)
    if os.geteuid() != 0 or subprocess.call(
            ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
        raise SkipCheck("cannot mount a tmpfs here (needs root)")
    t_start = time.monotonic()
    try:
        with file_server(os.path.join(mnt, "flash")) as s:
            load = Load(s.port).start()
            errs = 0
            deadline = time.monotonic() + 20
            while errs == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
                st = stats(s.port)
                errs = write_faults(st)
            check(errs > 0, "the full tmpfs refused a write")
            b0, r0 = st["extstore_bytes_written"], st["extstore_objects_read"]
            # two laps more: the slots whose writes failed are written again
            after = wait_for(s.port, "extstore_bytes_written", b0 + 32 * 1024 * 1024,
                             timeout=40)
            check(after > b0 + 32 * 1024 * 1024,
                  "writing went on on the full tmpfs: %d bytes" % (after - b0))
            check(wait_for(s.port, "extstore_objects_read", r0) > r0,
                  "records on the tmpfs read back after the first refused write")
            stop_load(s, load)
            check(s.alive(), "server alive")
            st = stats(s.port)
            lines = log_lines(s, "write") + log_lines(s, "write_short")
            check(any("No space left on device" in ln for ln in lines),
                  "ENOSPC logged: %s" % lines[:2])
            seconds = time.monotonic() - t_start
            check(len(lines) <= 2 * (int(seconds // LOG_EVERY) + 1),
                  "%d lines in %.0f s" % (len(lines), seconds))
            print("     %d hits, %d misses; %d write faults"
                  % (load.hits, load.misses,
                     write_faults(st)))
    finally:
        subprocess.call(["umount", "-l", mnt])


if __name__ == "__main__":
    require_binary()
    run_all()
