#!/usr/bin/env python3
"""The seed experiment, scaled down: -m 8 (8 slabs), 20 connections, four
set-only phases of ~10 MB each with value sizes 100 B, 1 KB, 10 KB, 100 KB
(every key new). With slab-level eviction the newest size's class must
take over most slabs after each phase, and no set may be refused.

Runs bench/seed-experiment with the built server and load generator
($SLABCACHE, $LOADGEN)."""

import json
import os
import subprocess
import sys
import tempfile

from sclib import (SkipCheck, check, eq, is_sanitized, require_binary, run_all,
                   server_binary, slabcache_only, test)

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "seed-experiment")
LOADGEN = os.environ.get("LOADGEN") or os.path.join(
    os.path.dirname(server_binary()), "..", "bench", "loadgen")
SLABS = 8
LABELS = ["100", "1K", "10K", "100K"]


def seed_run(policy):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [sys.executable, SCRIPT, "--server", "slabcache", "--policy", policy,
               "--memory", str(SLABS), "--conns", "20", "--scale", "2",
               "--threads", "2", "--phase-timeout", "60",
               "--slabcache", server_binary(), "--loadgen", LOADGEN,
               "--json", out.name]
        p = subprocess.run(cmd, capture_output=True, timeout=300)
        sys.stdout.write(p.stdout.decode())
        eq(p.returncode, 0, "seed-experiment exit (%s)" % p.stderr.decode()[-500:])
        return json.load(open(out.name))["rows"]


def check_moves(policy, newest_min):
    rows = seed_run(policy)
    eq(len(rows), 4, "four phases")
    for i, row in enumerate(rows):
        eq(row["server_error"], 0, "server errors in phase %s" % LABELS[i])
        eq(row["stored"], 20 * max(1, [10000, 1000, 100, 10][i] // 2),
           "stored in phase %s" % LABELS[i])
        # the older classes keep their only slab each (the first-slab
        # rule), so phase i's class can hold at most the slabs -m leaves
        # to items (past the bookkeeping, notes/eviction.md) less i
        room = row["room_slabs"]
        check(room >= SLABS - 1, "bookkeeping takes at most a slab of %d: %d" % (SLABS, room))
        want = min(newest_min, room - i)
        newest = row["slabs"][LABELS[i]]
        check(newest >= want,
              "%s: after phase %s the newest class holds %d of %d slabs (< %d)"
              % (policy, LABELS[i], newest, room, want))
        if i > 0:
            check(row["slabs_evicted"] > rows[i - 1]["slabs_evicted"],
                  "slabs moved during phase %s" % LABELS[i])
    # Each later phase's class gets its first slab past -m, as memcached's
    # first page (the older classes' slabs hold unread items and the new
    # class has evicted nothing yet: notes/eviction.md); the room grows by
    # it. So -m plus one slab per later phase at most, memcached's pages.
    total = sum(rows[-1]["slabs"].values())
    check(total <= SLABS + len(rows) - 1,
          "%d slabs: more than -m and a first slab per later phase" % total)


@test
def seed_auto():
    """The default: the old classes' slabs earn no hits (nobody reads), so
    they go to the class being stored (evict_auto.c). Issue 28 asks for at
    least 48 of 64 slabs at full scale: 6 of 8 here, and in the last phase
    all but the three older classes' only slabs."""
    slabcache_only()
    check_moves("auto", 6)


@test
def seed_lra():
    slabcache_only()
    check_moves("lra", 6)


@test
def seed_lra_lru():
    slabcache_only()
    check_moves("lra,lru", 5)


@test
def seed_random():
    slabcache_only()
    # Uniform victims (the newest class's own slabs included): after ~12
    # slab evictions the newest class holds ~6 on average; 3 has been seen
    # here (concurrent evictions can re-carve its own slabs). A policy that
    # did not move slabs would leave it 0 or 1.
    check_moves("random", 2)


@test
def seed_with_flash_keeps_phase1_index():
    """With a flash file (ext_item_size 64 so that phase 1's 100-byte
    values go to flash at all), phase 1's keys are still served after
    phase 4 from their 48-byte stubs: the index survives the later
    phases' slab moves. A lost index (stub slabs re-carved, as before
    evict_slab_kept and the stash's touch) serves few of them. At -m 16:
    at -m 8 the bookkeeping's slab leaves the stubs too little room for a
    stable count. This checks the outcome, not evict_slab_kept alone:
    without that rule the index now mostly survives too (figures:
    notes/flash.md)."""
    slabcache_only()
    if is_sanitized():
        raise SkipCheck("ASan build: a measurement of a load, not of correctness")
    with tempfile.TemporaryDirectory(dir=os.path.dirname(server_binary())) as d, \
            tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [sys.executable, SCRIPT, "--server", "slabcache", "--policy", "auto",
               "--memory", str(2 * SLABS), "--conns", "20", "--scale", "2",
               "--threads", "2", "--phase-timeout", "60",
               "--slabcache", server_binary(), "--loadgen", LOADGEN,
               "--ext-path", os.path.join(d, "flash") + ":64m", "--ext-item-size", "64",
               "--json", out.name]
        p = subprocess.run(cmd, capture_output=True, timeout=300)
        print("     " + p.stdout.decode().strip().splitlines()[-1])
        eq(p.returncode, 0, "seed-experiment exit (%s)" % p.stderr.decode()[-500:])
        surv = json.load(open(out.name))["phase1_survivors"]
        eq(surv["wrong_length"], 0, "phase 1 values of the wrong length")
        check(surv["served"] >= 0.5 * surv["sampled"],
              "phase 1 keys served after phase 4: %d of %d" % (surv["served"], surv["sampled"]))


if __name__ == "__main__":
    require_binary()
    if not os.path.exists(LOADGEN):
        print("load generator %s not built: skipping" % LOADGEN)
        print("0 passed, 0 failed")
        sys.exit(77)
    run_all()
