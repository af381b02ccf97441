#!/usr/bin/env python3
"""The option table (include/util/settings.h) against what documents and
reports it: `--help` is generated from the table; this test reads `--help`
and checks that the README's option table, the man page (man/slabcache.1)
and `stats settings` say the same, option by option, both ways."""

import os
import re
import subprocess

from sclib import Server, check, eq, run_all, server_binary, slabcache_only, test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HELP_LINE = re.compile(
    r"^(?:-(?P<short>\w), --(?P<long1>[\w-]+)|    --(?P<long2>[\w-]+)"
    r"|    -o (?P<switch>\[no_\])?(?P<ext>\w+))(?P<arg>=<[^>]+>)?\s+(?P<help>.*?)"
    r"(?: \[default (?P<default>[^\]]+)\])?(?: \[range (?P<range>[^\]]+)\])?"
    r"(?: \[stats settings: (?P<stat>\w+)\])?$")


def options():
    """Every option row, as --help prints it."""
    p = subprocess.run([server_binary(), "--help"], capture_output=True, timeout=10)
    eq(p.returncode, 0, "--help exit code")
    out = []
    for line in p.stdout.decode().splitlines():
        m = HELP_LINE.match(line)
        if m is None or m.group("long1") in ("version", "help"):
            continue
        if m.group("ext") == "hash_algorithm":
            continue            # memcached's name, not a row of the table
        name = m.group("long1") or m.group("long2")
        out.append({
            "flag": "--" + name if name else "-o " + m.group("ext"),
            "name": name or m.group("ext"),
            "short": m.group("short"),
            "ext": name is None,
            "switch": bool(m.group("switch")),
            "arg": m.group("arg"),
            "default": m.group("default"),
            "stat": m.group("stat"),
        })
    check(len(out) >= 35, "--help lists the table (%d rows read)" % len(out))
    return out


def readme_rows():
    """The README's option table: {flag: default} ('-o name' for -o rows)."""
    text = open(os.path.join(ROOT, "README.md")).read()
    body = text.split("## Command line", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) != 4 or cells[0] in ("flag", "---"):
            continue
        flag = re.search(r"`(--[\w-]+|-o [\w]+)", cells[1] or cells[0])
        if flag is None:
            flag = re.search(r"`(-o [\w]+)", cells[0])
        if flag is not None:
            rows[flag.group(1)] = cells[2].strip("`")
    return rows


@test
def readme_table_matches_the_option_table():
    slabcache_only()
    opts = options()
    rows = readme_rows()
    for o in opts:
        check(o["flag"] in rows, "README lists %s" % o["flag"])
        if o["flag"] in rows:
            want = o["default"] or ""
            got = rows[o["flag"]]
            # -I's default is written 1m there: compare as numbers
            if o["name"] == "max-item-size":
                got = str(1024 * 1024) if got == "1m" else got
            eq(got, want, "README default of %s" % o["flag"])
    known = {o["flag"] for o in opts} | {"--version", "--help"}
    for flag in rows:
        check(flag in known, "README's %s is an option of the table" % flag)


@test
def man_page_matches_the_option_table():
    slabcache_only()
    man = open(os.path.join(ROOT, "man", "slabcache.1")).read()
    # one .TP entry per option: its flag line, then its text up to the next .TP/.SH
    entries = re.findall(r"^\.TP\n(.*)\n((?:(?!\.TP|\.SH).*\n)*)", man, re.M)
    found = {}
    for head, body in entries:
        head = head.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "") \
                   .replace("\\fI", "")
        m = re.search(r"(--[\w-]+|-o (?:\[no_\])?\w+)", head)
        if m:
            flag = m.group(1).replace("[no_]", "")
            d = re.search(r"Default: (.*?)\.?$", body.replace("\\-", "-"), re.M)
            found[flag] = d.group(1).strip() if d else ""
            if found[flag] == "none":
                found[flag] = ""            # no default value: a flag, or unset
    opts = options()
    for o in opts:
        check(o["flag"] in found, "man page lists %s" % o["flag"])
        if o["flag"] in found:
            eq(found[o["flag"]], o["default"] or "", "man page default of %s" % o["flag"])
    known = {o["flag"] for o in opts} | {"--version", "--help"}
    for flag in found:
        check(flag in known, "man page's %s is an option of the table" % flag)


# How `stats settings` renders a value the server was started with, where
# it differs from the option's own spelling.
SCALE = {"memory-limit": 1024 * 1024, "watcher_logbuf_size": 1024, "ssl_wbuf_size": 1024}
# Values `stats settings` spells as memcached does.
TEXT = {"ssl_min_version": {"3": "tlsv1.3"}, "ssl_verify_mode": {"1": "1"}}
# Numeric options whose default is their maximum, or whose default + 1 is
# not valid: started at this instead.
OTHER_VALUE = {"ext_item_age": 30,
               "slab_chunk_max": 524288}    # must divide -I
# Flags: stats value without the flag, and with it.
FLAG_STATS = {"yes": "no", "no": "yes", "on": "off", "off": "on"}


def start_args(opts):
    """Every numeric option one above its default (where that is valid to
    start with), every flag and -o switch flipped."""
    args, ext, want = [], [], {}
    for o in opts:
        if o["stat"] is None or o["name"] in ("port", "udp-port", "daemon", "admin-port",
                                               "enable-ssl",     # -Z needs certificates
                                               "enable-sasl"):   # -S: binary clients only
            continue
        rng = o["default"] and re.fullmatch(r"\d+", o["default"] or "")
        if o["arg"] == "=<num>" and rng and o["name"] not in ("max-item-size",):
            v = OTHER_VALUE.get(o["name"], int(o["default"]) + 1)
            if o["ext"]:
                ext.append("%s=%d" % (o["name"], v))
            else:
                args += ["--%s=%d" % (o["name"], v)]
            want[o["stat"]] = TEXT.get(o["name"], {}).get(str(v), str(v * SCALE.get(o["name"], 1)))
        elif o["arg"] == "=<0|1>":
            v = 1 - int(o["default"])
            ext.append("%s=%d" % (o["name"], v))
            want[o["stat"]] = ("yes", "no")[1 - v]
        elif o["switch"]:
            ext.append("no_" + o["name"] if o["default"] == "on" else o["name"])
            want[o["stat"]] = "no" if o["default"] == "on" else "yes"
        elif o["arg"] is None and o["short"] not in ("v",):
            args.append("-" + o["short"] if o["short"] else "--" + o["name"])
            want[o["stat"]] = None      # flipped: compared with the default run
    args += ["-o", ",".join(ext)]
    return args, want


@test
def stats_settings_reports_every_option():
    slabcache_only()
    opts = options()
    with Server("-m", "64") as s, s.client() as c:
        default = c.stats("settings")
    for o in opts:
        if o["stat"] is not None:
            check(o["stat"] in default, "stats settings has %s (%s)" % (o["stat"], o["flag"]))
    args, want = start_args(opts)
    check(len(want) >= 25, "options started at other values: %d" % len(want))
    with Server(*args) as s, s.client() as c:
        got = c.stats("settings")
    for stat, v in sorted(want.items()):
        if v is None:
            check(got.get(stat) != default.get(stat) and default.get(stat) in FLAG_STATS,
                  "stats settings %s changes with its flag (%r, default %r)"
                  % (stat, got.get(stat), default.get(stat)))
        else:
            eq(got.get(stat), v, "stats settings %s" % stat)


if __name__ == "__main__":
    run_all()
