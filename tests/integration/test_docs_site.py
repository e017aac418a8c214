"""The built documentation site in a real browser: Debian's headless Chromium driven by playwright-core
(tests/browser/drive_site.cjs), over a local HTTP server and opened from disk (file://, as the README says:
links to files, the search index inlined, the search worker started through the site's own iframe-worker
shim, scripts/mkdocs_hooks.py).

Marked `docs`: `make docs` builds site/ (`mkdocs build --strict`) and runs this; `make test` leaves it out.
Without a built site it skips, saying so, unless BINDING_LENS_DOCS=required (what `make docs` sets), where
that is a failure. It opens the home page, searches for `HookedViT` (rendered on the top level's API page, its
home), opens two API pages and a guide, and checks that each renders with no console error, no failed request and
nothing fetched from outside the server. The screenshots go to test-artifacts/docs-site/ (home.png is the
README's figure, docs/assets/site-home.png, when the home page changes).
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

from helpers.browser import ready_chromium, run_driver

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("BINDING_LENS_SITE", ROOT / "site"))
ARTIFACTS = ROOT / "test-artifacts" / "docs-site"
PAGES = [  # label, path under the site, an element the page must have
    {"label": "api-top", "path": "api/binding_lens.html", "selector": '[id="binding_lens.HookedViT"]'},
    {"label": "api-hooks", "path": "api/hooks.html", "selector": '[id="binding_lens.hooks.HookedViTConfig"]'},
    {"label": "guide-probing", "path": "guides/probing.html", "selector": "article pre code"},
    {"label": "getting-started", "path": "getting-started.html", "selector": "article pre code"},
]
NAV = ["getting-started.html", "guides/probing.html", "api/hooks.html"]
"""Sidebar links followed from the home page (from disk a folder link would land on a directory listing)."""


@pytest.fixture(scope="module")
def site() -> Path:
    if not (SITE / "index.html").exists():
        why = f"no built site at {SITE}: `make docs` builds it (mkdocs build --strict) and runs this test"
        if os.environ.get("BINDING_LENS_DOCS") == "required":
            pytest.fail(why)
        pytest.skip(why)
    return SITE


@pytest.fixture(scope="module")
def server(site):
    """The site on http://127.0.0.1:<free port>/, served from a thread for the module's tests."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


def test_the_site_renders_and_its_search_finds_hookedvit(server, tmp_path):
    chromium = ready_chromium()
    config = {"chromium": str(chromium), "base": server, "out": str(ARTIFACTS), "query": "HookedViT", "pages": PAGES}
    report = run_driver("drive_site.cjs", config, tmp_path / "drive.json")
    assert report["errors"] == [] and report["external_requests"] == []

    hits = report["search"]["results"]
    assert hits and any("HookedViT" in hit["text"] for hit in hits), report["search"]
    assert any("api/binding_lens.html" in hit["href"] for hit in hits), "the search does not lead to HookedViT's entry"

    assert report["home"]["h1"].rstrip("¶").strip() == "binding_lens" and "binding_lens" in report["home"]["title"]
    pages = {page["label"]: page for page in report["pages"]}
    assert set(pages) == {page["label"] for page in PAGES}
    for label, page in pages.items():
        assert page["found"] and page["h1"] and page["text_length"] > 500, (label, page)
    assert pages["api-top"]["h1"].rstrip("¶").strip() == "binding_lens"
    assert pages["api-hooks"]["h1"].rstrip("¶").strip() == "binding_lens.hooks"
    assert all(Path(path).stat().st_size > 10_000 for path in report["screenshots"])


def test_the_site_opens_from_disk_follows_its_navigation_and_searches(site, tmp_path):
    chromium = ready_chromium()
    base = site.resolve().as_uri() + "/"
    config = {
        "chromium": str(chromium),
        "base": base,
        "home": base + "index.html",
        "out": str(ARTIFACTS / "from-disk"),
        "query": "HookedViT",
        "pages": [],
        "nav": NAV,
    }
    report = run_driver("drive_site.cjs", config, tmp_path / "drive.json")
    assert report["errors"] == [] and report["external_requests"] == [], report
    assert report["search"]["results"] and any("HookedViT" in hit["text"] for hit in report["search"]["results"])
    assert [page["suffix"] for page in report["nav"]] == NAV
    for page in report["nav"]:  # a file, rendered as a page (not a directory listing)
        assert page["href"].startswith(base) and page["href"].endswith(".html"), page
        assert page["h1"] and page["text_length"] > 500, page
