"""The whole documentation site builds with `mkdocs build --strict` (a broken link or anchor, a command that cannot
be loaded, a warning of the theme: each fails it), offline, and every command and subcommand has its page in the
built site.  Second tier (tests/conftest.py's SECOND_TIER_TESTS): a full build takes several seconds."""

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from infermeter_docgen import commands

from tests.report.test_browser import ARTIFACTS, FLAGS, browser  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[2]


def built_page(src_uri: str) -> str:
    """Where mkdocs (directory URLs) writes a page: `commands/run.md` -> `commands/run/index.html`."""
    if src_uri.endswith("index.md"):
        return src_uri[: -len(".md")] + ".html"
    return src_uri[: -len(".md")] + "/index.html"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the module's tests."""
    return tmp_path_factory.mktemp("docs") / "site"


def test_the_site_builds_strictly_with_a_page_per_command(site: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_PROXY": "*", "no_proxy": "*"}
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "WARNING" not in p.stderr, p.stderr
    tree = commands.command_tree()
    names = [c.name for c in tree.walk()]
    assert "infermeter runs check" in names and "infermeter test ttft" in names
    for cmd in tree.walk():
        page = site / built_page(cmd.src_uri)
        assert page.is_file(), cmd.name
        title = "Commands" if cmd is tree else cmd.name
        assert f'id="{title.lower().replace(" ", "-")}">{title}<' in page.read_text(), cmd.name
    summary = (site / "contracts/summary-json/index.html").read_text()
    assert 'id="servermetrics"' in summary and "<code>p99.9</code>" in summary
    assert not (ROOT / "docs" / "commands").exists()  # the command pages are never written into docs/
    assert not any("fonts.googleapis" in f.read_text() for f in site.rglob("*.html"))


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    """The built site on a loopback HTTP server (the theme's search runs in a web worker, which file: URLs forbid)."""
    if not (site / "index.html").is_file():
        pytest.skip("the site was not built (the build test failed or was deselected)")
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


PAGES = ("", "getting-started/", "commands/run/", "commands/runs/check/", "contracts/summary-json/", "api/")


def test_the_pages_open_offline_in_a_browser_and_search_finds_a_command(browser: Any, served: str) -> None:  # noqa: F811
    """Each page opens with no console error and no request beyond the loopback server; the search box finds the
    `runs check` command; a screenshot of each page is kept."""
    context = browser.new_context(viewport={"width": 1366, "height": 900}, offline=False)
    page = context.new_page()
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith((served, "data:", "blob:")) else outside.append(r.url))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for path in PAGES:
        page.goto(f"{served}/{path}")
        page.wait_for_load_state("networkidle")
        assert page.title(), path
        page.screenshot(path=str(ARTIFACTS / f"docs-{path.strip('/').replace('/', '-') or 'home'}.png"))
    page.goto(f"{served}/")
    page.keyboard.press("/")  # the theme's shortcut to the search box
    page.keyboard.type("regression check")
    page.wait_for_selector(".md-search-result__item", timeout=30_000)
    results = page.inner_text(".md-search-result")
    page.screenshot(path=str(ARTIFACTS / "docs-search.png"))
    context.close()
    assert not errors, errors
    assert not outside, f"the site asked the network for {outside[:3]}"
    assert "runs check" in results, results[:500]
