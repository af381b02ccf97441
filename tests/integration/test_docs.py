#!/usr/bin/env python3
"""The documentation against the tree, as test_options.py holds the options:
HACKING.md's map names every file of src/ and every note, and names nothing
that does not exist; the notes stay short (design, current figures, open
problems: history goes to notes/bench/ and notes/CHANGELOG.md); and nothing
in the repository is dated by a working session instead of a version, a date
or a commit."""

import os
import re
import subprocess

from sclib import check, run_all, test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTES_MAX_LINES = 400
FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:c|h|html|md|py|sh))\b")
# A working session's number (the word, then a digit), or "this", "last",
# "previous" ... before the word: history named by who worked when.
DIARY = re.compile(r"\bsessions?[ -]?#?\d|\b(?:this|last|previous|next|earlier|later|"
                   r"same|that|past|prior) sessions?\b", re.IGNORECASE)
# Source files: what a build makes in the tree (objects, .deps, the page's
# generated C) is not the project's.
SOURCE_EXT = (".c", ".h", ".html")
SKIP_DIRS = {".git", ".deps", ".libs", "autom4te.cache", "__pycache__"}


def project_files():
    """The repository's files (git's list when there is one; else the tree
    less build products), relative to ROOT."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                             timeout=30, check=True).stdout
        return [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.SubprocessError):
        pass
    files = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and x != "build"
                   and not os.path.exists(os.path.join(d, x, "config.status"))]
        files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return files


def hacking_layout():
    """The code block under HACKING.md's '## Layout'."""
    text = open(os.path.join(ROOT, "HACKING.md")).read()
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def layout_blocks():
    """{folder: text} of the layout: a folder's block is its line and the
    indented lines under it ('src/storage/' -> what it says of that folder)."""
    blocks, cur = {}, None
    for line in hacking_layout().splitlines():
        if line and not line[0].isspace():
            cur = line.split()[0]
            blocks[cur] = line[len(cur):]
        elif cur is not None:
            blocks[cur] += "\n" + line
    return blocks


@test
def hacking_names_every_source_file_and_note():
    blocks = layout_blocks()
    files = project_files()
    sources = [f for f in files if f.startswith("src/") and f.endswith(SOURCE_EXT)]
    check(len(sources) > 40, "src/ has %d source files" % len(sources))
    for rel in sources:
        folder, name = os.path.split(rel)
        if folder == "src":
            check(rel in blocks, "HACKING.md's layout has a line for %s" % rel)
            continue
        block = blocks.get(folder + "/")
        check(block is not None, "HACKING.md's layout has a block for %s/" % folder)
        check(name in {os.path.basename(n) for n in FILE_NAME.findall(block)},
              "HACKING.md's layout names %s under %s/" % (name, folder))
    named = set(FILE_NAME.findall(hacking_layout()))
    for rel in files:
        if re.match(r"^notes/[^/]+\.md$", rel):
            check(rel in named, "HACKING.md's layout names %s" % rel)


@test
def hacking_names_only_files_that_exist():
    files = set(project_files())
    basenames = {os.path.basename(f) for f in files}
    for folder, block in layout_blocks().items():
        for name in FILE_NAME.findall(block):
            if "/" in name:
                ok = name in files
            elif folder.startswith("src/"):
                # a source folder's block names its files, or its layer's headers
                include = "include/" + folder[len("src/"):]
                ok = folder + name in files or include + name in files
            else:
                ok = name in basenames
            check(ok, "HACKING.md names %s under %s, which is not in the tree" % (name, folder))


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
    for rel in project_files():
        if DIARY.search(os.path.basename(rel)):
            found.append(rel)
        path = os.path.join(ROOT, rel)
        if rel.endswith((".png", ".gz", ".pem", ".der")) or not os.path.isfile(path):
            continue
        with open(path, "rb") as fh:
            data = fh.read()
        if b"\0" in data[:4096]:
            continue                # binary
        for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if DIARY.search(line):
                found.append("%s:%d: %s" % (rel, i, line.strip()[:80]))
    check(not found, "dated by session, not by version, date or commit:\n  " +
          "\n  ".join(found[:20]) + ("\n  ... %d in all" % len(found) if len(found) > 20 else ""))


if __name__ == "__main__":
    run_all()
