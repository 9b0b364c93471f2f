"""Each kind of HTML report opened offline in a real browser (Playwright driving Debian's chromium): no console
errors, every plot drawn with the traces and points its data holds, and a screenshot kept as an artifact
(.artifacts/screenshots/, or $INFERMETER_ARTIFACTS)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli import infermeter
from tests.report.conftest import EVERY_RUN_CHART

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("INFERMETER_ARTIFACTS", Path(__file__).parents[2] / ".artifacts")) / "screenshots"
FLAGS = [  # as root, offline: no sandbox, no GPU, no background connections to the closed network
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# what every chart div draws, read from the live plotly graph objects
DRAWN = """() => [...document.querySelectorAll('.chart')].map((d) => ({
  id: d.dataset.chart,
  traces: Number(d.dataset.traces),
  points: Number(d.dataset.points),
  drawnTraces: d.data ? d.data.length : -1,
  drawnPoints: d.data ? d.data.reduce((n, t) => n + (t.type === 'box' ? 1
      : (t.x || t.y || []).filter((v) => v !== null).length), 0) : -1,
  svg: d.querySelectorAll('.main-svg').length,
  markers: d.querySelectorAll('.scatterlayer .point').length,
  xTitle: (d.querySelector('.g-xtitle') || {}).textContent || '',
  yTitle: (d.querySelector('.g-ytitle') || {}).textContent || '',
}))"""


@pytest.fixture(scope="module")
def browser() -> Any:
    if not Path(CHROMIUM).exists():
        if os.environ.get("INFERMETER_REQUIRE_BROWSER"):
            pytest.fail(f"chromium is not installed at {CHROMIUM} (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def open_report(browser: Any, html: Path, name: str) -> list[dict[str, Any]]:
    """Open the report from disk with the network blocked; wait for the plots; keep screenshots; return what each
    chart drew.  Fails on any console error, page error or request that leaves the file."""
    context = browser.new_context(viewport={"width": 1366, "height": 900}, offline=True)
    page = context.new_page()
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(("file:", "data:", "blob:")) else None)
    page.goto(html.as_uri())
    page.wait_for_function("document.body.dataset.rendered || document.body.dataset.renderError", timeout=120_000)
    assert page.evaluate("document.body.dataset.renderError") is None
    assert not errors, errors
    assert not outside, f"the report asked the network for {outside[:3]}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-page.png"), full_page=True)
    for div in page.query_selector_all(".chart"):
        div.screenshot(path=str(ARTIFACTS / f"{name}-{div.get_attribute('data-chart')}.png"))
    drawn = page.evaluate(DRAWN)
    assert int(page.evaluate("document.body.dataset.rendered")) == len(drawn)
    context.close()
    for chart in drawn:
        assert chart["svg"] > 0, chart
        assert (chart["drawnTraces"], chart["drawnPoints"]) == (chart["traces"], chart["points"]), chart
        assert chart["xTitle"] and chart["yTitle"], f"{chart['id']} has an unlabelled axis"
    return drawn


def by_id(drawn: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in drawn}


def test_a_run_report_draws_every_chart(browser: Any, run_dir: Path, tmp_path: Path) -> None:
    from infermeter.metrics import RecordColumns

    html = tmp_path / "run.html"
    p = infermeter("report", run_dir, "--html", html)
    assert p.returncode == 0, p.stderr
    drawn = by_id(open_report(browser, html, "run"))
    cols = RecordColumns.of_run(run_dir)
    ok = int(cols.ok.sum())
    expected = EVERY_RUN_CHART
    assert expected <= set(drawn)
    assert drawn["ttft-cdf"]["points"] == ok  # one step per request (below the thinning threshold)
    assert drawn["ttft-by-input"]["markers"] >= ok  # one dot per request, plus the bucket line's markers
    assert drawn["request-timeline"]["points"] == 4 * ok  # two ends of two segments per request
    assert drawn["stalls"]["traces"] == 5
    assert drawn["fluidity"]["traces"] == 5  # mean fluidity-index, P99 miss rate, three token rates (deadlines given)
    assert "(ms)" in drawn["ttft-cdf"]["xTitle"]


def test_a_suite_report_draws_the_tradeoff_curve(browser: Any, tradeoff_suite: Path, tmp_path: Path) -> None:
    out, html = tradeoff_suite, tradeoff_suite.parent / "suite.html"  # the report `infermeter test --html` wrote
    drawn = by_id(open_report(browser, html, "suite-tradeoff"))
    curve = drawn["tradeoff-curve"]
    assert curve["traces"] >= 4  # TTFT and TPOT, P50 and P99 at least
    again = tmp_path / "again.html"
    assert infermeter("report", out, "--html", again).returncode == 0  # the same report from the suite directory
    assert by_id(open_report(browser, again, "suite-tradeoff-again"))["tradeoff-curve"] == curve


def test_a_comparison_report_draws_each_group(browser: Any, groups: dict[str, Path], tmp_path: Path) -> None:
    html = tmp_path / "compare.html"
    p = infermeter("compare", groups["continuous"], groups["chunked"], "--html", html, "--reps", "500")
    assert p.returncode == 0, p.stderr
    drawn = open_report(browser, html, "compare")
    cdfs = [c for c in drawn if c["id"].endswith("-cdf")]
    assert cdfs and all(c["traces"] == 2 for c in cdfs)  # one curve per group
    spread = next(c for c in drawn if c["id"].endswith("compare-p99-per-run"))
    assert spread["traces"] == 2 and spread["markers"] == spread["points"] == 2 * 3 * 3  # groups x metrics x runs


def test_the_runs_catalog_and_a_trend_open_and_draw(browser: Any, tmp_path: Path) -> None:
    """`runs --html` (a table, no script) and `runs trend --html` (the metric over three groups, each point with its
    interval, the step marked) open offline; screenshots kept."""
    from tests.catalog.build import write_group

    for day, scale in enumerate((1.0, 1.0, 1.25)):
        write_group(tmp_path / "history" / f"day-{day + 1}", seed=10 * day + 1, hours=24 * day, ttft_scale=scale)
    table, trend = tmp_path / "runs.html", tmp_path / "trend.html"
    assert infermeter("runs", tmp_path / "history", "--html", table).returncode == 0
    p = infermeter("runs", "trend", tmp_path / "history", "--metric", "ttft.p50", "--html", trend)
    assert p.returncode == 0, p.stderr
    context = browser.new_context(viewport={"width": 1366, "height": 900}, offline=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(table.as_uri())
    rows = page.query_selector_all("tbody tr")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "runs-table-page.png"), full_page=True)
    context.close()
    assert not errors and len(rows) == 9  # one row per run
    [chart] = open_report(browser, trend, "runs-trend")
    assert chart["traces"] >= 1 and chart["drawnPoints"] >= 3, chart
    assert "ttft.p50" in chart["yTitle"] or "ms" in chart["yTitle"], chart
