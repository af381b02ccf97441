#!/usr/bin/env python3
"""The documentation against the tree, as test_options.py holds the options:
HACKING.md's map names every file of src/ and every note, and names nothing
that does not exist; the notes stay short (design, current figures, open
problems: history goes to notes/bench/ and notes/CHANGELOG.md); and nothing
in the repository is dated by a working session instead of a version, a date
or a commit."""

import os
import re

from sclib import check, run_all, test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTES_MAX_LINES = 400
# Directories that are not the project's own text: builds, caches, VCS.
SKIP_DIRS = {".git", "autom4te.cache", "node_modules", "__pycache__"}
FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:c|h|html|md|py|sh))\b")
# A working session's number (the word, then a digit), or "this", "last",
# "next" ... before the word: history named by who worked when.
DIARY = re.compile(r"\bsessions?[ -]?#?\d|\b(?:this|last|previous|next|earlier|later|"
                   r"same|that) session\b", re.IGNORECASE)
TEXT_EXT = (".c", ".h", ".md", ".py", ".sh", ".txt", ".am", ".ac", ".in", ".1",
            ".html", ".json", ".php", ".js", ".rb", ".go", ".rs", ".pl", ".t")


def hacking_layout():
    """The code block under HACKING.md's '## Layout'."""
    text = open(os.path.join(ROOT, "HACKING.md")).read()
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def tree_files(top):
    out = []
    for d, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
    return out


def is_build_dir(rel):
    """A build tree inside the checkout (build/dev, build/check, ...)."""
    first = rel.split(os.sep, 1)[0]
    return first == "build" or os.path.exists(os.path.join(ROOT, first, "config.status"))


@test
def hacking_names_every_source_file_and_note():
    layout = hacking_layout()
    paths = set(FILE_NAME.findall(layout))
    named = paths | {os.path.basename(p) for p in paths}
    for rel in tree_files("src"):
        name = os.path.basename(rel)
        check(name in named, "HACKING.md's layout names %s" % rel)
    for name in os.listdir(os.path.join(ROOT, "notes")):
        if name.endswith(".md"):
            check("notes/" + name in paths, "HACKING.md's layout names notes/%s" % name)


@test
def hacking_names_only_files_that_exist():
    known = set()
    for top in ("src", "include", "tests", "bench", "scripts", "notes", "man", "contrib"):
        for rel in tree_files(top):
            known.add(os.path.basename(rel))
            known.add(rel)
    for name in FILE_NAME.findall(hacking_layout()):
        check(name in known, "HACKING.md names %s, which is not in the tree" % name)


@test
def notes_are_short():
    notes = os.path.join(ROOT, "notes")
    for name in sorted(os.listdir(notes)):
        if name.endswith(".md"):
            n = sum(1 for _ in open(os.path.join(notes, name)))
            check(n < NOTES_MAX_LINES, "notes/%s has %d lines (under %d: history goes to "
                  "notes/bench/)" % (name, n, NOTES_MAX_LINES))


@test
def history_is_named_by_version_date_or_commit():
    found = []
    for d, dirs, files in os.walk(ROOT):
        rel_d = os.path.relpath(d, ROOT)
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS
                   and not is_build_dir(os.path.normpath(os.path.join(rel_d, x)))]
        for f in files:
            rel = os.path.normpath(os.path.join(rel_d, f))
            if DIARY.search(f):
                found.append(rel)
            if not f.endswith(TEXT_EXT) and f not in ("README", "Makefile", "run"):
                continue
            try:
                text = open(os.path.join(d, f), encoding="utf-8", errors="replace").read()
            except OSError:
                continue
            for i, line in enumerate(text.splitlines(), 1):
                if DIARY.search(line):
                    found.append("%s:%d: %s" % (rel, i, line.strip()[:80]))
    check(not found, "dated by session, not by version, date or commit:\n  " +
          "\n  ".join(found[:20]) + ("\n  ... %d in all" % len(found) if len(found) > 20 else ""))


if __name__ == "__main__":
    run_all()
