#!/usr/bin/env python3
"""The admin port's page (GET /): self-contained (nothing referenced
outside the server, and the browser told so by its Content-Security-
Policy), behind the token as every endpoint (a browser gives it as a
Basic password), and, in a real
browser (Debian's chromium, headless), drawn from the server's figures:
each class holding slabs has its bar with the slab count `stats slabs`
gives, the history charts have points. Saves a screenshot next to the
test's log. The browser part skips, saying so, without chromium.

Run: SLABCACHE=path/to/binary python3 tests/integration/test_admin_page.py
"""

import base64
import html.parser
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sclib import (HOST, Server, SkipCheck, check, eq, free_port, run_all,  # noqa
                   slabcache_only, test, wait_until)

SVG_NS = "http://www.w3.org/2000/svg"


def get(port, path, headers=None):
    c = http.client.HTTPConnection(HOST, port, timeout=10)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


class Refs(html.parser.HTMLParser):
    """Every URL the page's markup would load."""

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href", "action", "data", "poster", "srcset") and value:
                self.urls.append(value)


@test
def the_page_references_nothing_outside_the_server():
    slabcache_only()
    port = free_port()
    with Server("--admin-port", str(port)):
        wait_until(lambda: _up(port))
        status, headers, body = get(port, "/")
        eq(status, 200, "GET /")
        check(headers["Content-Type"].startswith("text/html"), headers["Content-Type"])
        check("default-src 'none'" in headers.get("Content-Security-Policy", ""),
              "Content-Security-Policy: %r" % headers.get("Content-Security-Policy"))
        page = body.decode()
        p = Refs()
        p.feed(page)
        eq(p.urls, [], "URLs in the markup")
        for pattern in (r"@import", r"url\(", r"<link\b", r"<script[^>]*\bsrc=", r"import\s*\("):
            check(re.search(pattern, page) is None, "the page has %s" % pattern)
        others = [u for u in re.findall(r"[a-z]+://[^\s\"')]+", page) if u != SVG_NS]
        eq(others, [], "absolute URLs in the page")
        fetched = set(re.findall(r"get\(\"(/[^\"]*)\"\)", page))
        eq(fetched, {"/stats", "/stats/history"}, "what the script fetches")


@test
def a_browser_gives_the_token_as_a_basic_password():
    """With --admin-token the page too answers 401, offering Basic first:
    a browser asks for credentials and sends them with the page's own
    requests; the token is the password (the user name is anything)."""
    slabcache_only()
    port = free_port()
    with tempfile.NamedTemporaryFile("w") as f:
        f.write("page-token\n")
        f.flush()
        with Server("--admin-port", str(port), "--admin-token", f.name):
            wait_until(lambda: _up(port))
            c = http.client.HTTPConnection(HOST, port, timeout=10)
            c.request("GET", "/")
            r = c.getresponse()
            r.read()
            challenges = r.msg.get_all("WWW-Authenticate") or []
            c.close()
            eq(r.status, 401, "the page without the token")
            check(challenges and challenges[0].startswith("Basic") and
                  any(x.startswith("Bearer") for x in challenges),
                  "WWW-Authenticate: %r" % challenges)
            basic = {"Authorization": "Basic " + base64.b64encode(b"anyone:page-token").decode()}
            eq(get(port, "/", basic)[0], 200, "the page with it")
            eq(get(port, "/stats/history", basic)[0], 200, "its figures with it")
            wrong = {"Authorization": "Basic " + base64.b64encode(b"anyone:page-tokem").decode()}
            eq(get(port, "/", wrong)[0], 401, "another password")
            eq(get(port, "/", {"Authorization": "Basic !!"})[0], 401, "not base64")


def _up(port):
    try:
        return get(port, "/health")[0] in (200, 401)
    except OSError:
        return False


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(binary, url, *args, timeout=60):
    profile = tempfile.mkdtemp(prefix="sc-chromium.")
    try:
        cmd = [binary, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run",
               "--user-data-dir=" + profile, "--virtual-time-budget=6000",
               "--window-size=1200,1500"] + list(args) + [url]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Bars(html.parser.HTMLParser):
    """The page's drawn figures, from the DOM chromium dumps."""

    def __init__(self):
        super().__init__()
        self.bars = {}
        self.points = {}
        self.loaded = False
        self.svg = None
        self.flash_shown = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body" and a.get("data-loaded") == "yes":
            self.loaded = True
        if tag == "svg":
            self.svg = a.get("id")
        if tag == "div" and a.get("id") == "flashcard":
            self.flash_shown = "hidden" not in a
        if tag == "rect" and a.get("class") == "bar":
            self.bars[int(a["data-class"])] = int(a["data-slabs"])
        if tag == "polyline" and a.get("class") == "series":
            self.points.setdefault(self.svg, 0)
            self.points[self.svg] += len(a.get("points", "").split())


@test
def a_browser_draws_the_slab_table_and_history():
    slabcache_only()
    browser = chromium()
    if browser is None:
        raise SkipCheck("no chromium here (scripts/setup.sh installs it)")
    port = free_port()
    flash = tempfile.mkdtemp(prefix="sc-page.")
    with Server("--admin-port", str(port), "-m", "16",
                "-o", "ext_path=%s:64m" % os.path.join(flash, "flash")) as s, s.client() as c:
        # a small load over a few value sizes, spread over four seconds so
        # the history holds rates
        for second in range(4):
            for i in range(300):
                size = (100, 1000, 5000)[i % 3]
                c.set("k%d-%d" % (second, i), "v" * size)
                c.get("k%d-%d" % (second, i))
            time.sleep(1)
        url = "http://%s:%d/" % (HOST, port)
        r = browse(browser, url, "--dump-dom")
        if r.returncode != 0 and not r.stdout:
            raise SkipCheck("chromium could not run here: %s" % r.stderr[-300:])
        slabs = c.stats("slabs")
        want = {int(k.split(":")[0]): int(v) for k, v in slabs.items()
                if k.endswith(":total_pages") and int(v) > 0}
        dom = Bars()
        dom.feed(r.stdout)
        check(dom.loaded, "the page's scripts did not finish: %s" % r.stderr[-300:])
        eq(dom.bars, want, "bars (class: slabs) against stats slabs")
        check(dom.points.get("hits", 0) >= 2, "hit-ratio points: %r" % dom.points)
        check(dom.points.get("rates", 0) >= 8, "rate points: %r" % dom.points)
        check(dom.flash_shown, "the flash tier's card")
        shot = os.path.join(os.environ.get("SC_ARTIFACTS", tempfile.gettempdir()),
                            "admin-page.png")
        r = browse(browser, url, "--screenshot=" + shot)
        check(os.path.exists(shot) and os.path.getsize(shot) > 10000,
              "screenshot %s: %s" % (shot, r.stderr[-300:]))
        print("  screenshot: %s" % shot)
    shutil.rmtree(flash, ignore_errors=True)


if __name__ == "__main__":
    run_all()
