"""The HTML report is one self-contained file: plotly.js inlined once (compressed), the figures as JSON, nothing
fetched; a 10,000-request run stays under 5 MB.  The Markdown report carries the same sections and tables."""

from __future__ import annotations

import base64
import gzip
import re
from importlib import resources
from pathlib import Path

import numpy as np
import orjson

from infermeter.chart import Chart, Trace
from infermeter.metrics import RecordColumns, summarize
from infermeter.records import RequestRecord, RunInfo
from infermeter.report.document import Document, Section
from infermeter.report.documents import run_document
from infermeter.report.html import render_html
from infermeter.report.markdown import render_markdown
from infermeter.suite_result import Table


def _doc() -> Document:
    chart = Chart(
        id="c1",
        title="</script><b>x</b>",
        x_title="TTFT (ms)",
        panels=["share"],
        traces=[Trace(name="a", x=[1, 2, 3], y=[0.1, 0.5, 1.0])],
    )
    table = Table(caption="Table 1: TTFT Results", headers=["Metric", "Value"], rows=[["TTFT P50", "12.5 ms"]])
    return Document(
        title="T <&>",
        banners=["--quick"],
        sections=[
            Section("1. One", ["a bullet | with a pipe"], tables=[table], charts=[chart]),
            Section("2. Two", subsections=[Section("2.1 Inner", charts=[chart.model_copy(update={"id": "c1"})])]),
        ],
    )


def _scripts(page: str) -> dict[str, str]:
    return dict(re.findall(r'<script id="([a-z-]+)" type="[^"]+">(.*?)</script>', page, re.S))


def test_the_page_inlines_plotly_once_and_fetches_nothing() -> None:
    page = render_html(_doc())
    assert "src=" not in page and "<link" not in page
    scripts = _scripts(page)
    js = resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    assert gzip.decompress(base64.b64decode(scripts["plotly-gz"])) == js
    assert page.count('id="plotly-gz"') == 1
    figures = orjson.loads(scripts["figures"].replace("<\\/", "</"))
    assert list(figures) == ["chart-0-c1", "chart-1-c1"]  # a repeated chart id still gets its own element
    assert 'id="chart-0-c1" data-chart="c1" data-traces="1"\n data-points="3"' in page
    assert "<b>x</b>" not in page.split('<script id="plotly-gz"')[0]  # titles are escaped in the markup
    assert "T &lt;&amp;&gt;" in page and 'class="banner">--quick' in page


def test_figures_are_right_aligned_and_verdicts_coloured() -> None:
    table = Table(caption="t", headers=["a", "b", "c"], rows=[["TTFT P50", "12.5 ms", "met"], ["x", "-3", "NOT MET"]])
    page = render_html(Document(title="t", sections=[Section("1. One", tables=[table])]))
    cells = re.findall(r"<td([^>]*)>([^<]*)</td>", page)
    assert cells == [
        ("", "TTFT P50"),
        (' class="num"', "12.5 ms"),
        (' class="met"', "met"),
        ("", "x"),
        (' class="num"', "-3"),
        (' class="unmet"', "NOT MET"),
    ]


def test_a_page_without_charts_carries_no_javascript() -> None:
    doc = Document(title="t", sections=[Section("1. One", ["x"])])
    page = render_html(doc)
    assert "<script" not in page and len(page) < 10_000
    assert "Written by infermeter" in page and "plotly" not in page  # no plots, so none drawn with plotly.js


def test_markdown_has_the_sections_tables_and_figures() -> None:
    md = render_markdown(_doc())
    assert md.startswith("# T <&>\n\n> --quick\n")
    assert "## 1. One" in md and "### 2.1 Inner" in md
    assert "- a bullet | with a pipe" in md
    assert "| Metric | Value |\n|---|---|\n| TTFT P50 | 12.5 ms |" in md
    assert "_Figure: </script><b>x</b> (3 points; drawn in the HTML report)._" in md


def _big_run(n: int, tokens: int) -> list[RequestRecord]:
    rng = np.random.default_rng(1)
    out = []
    for i in range(n):
        start = i * 0.01
        first = start + rng.uniform(0.02, 0.3)
        times = (first + np.cumsum(rng.exponential(0.01, tokens))).round(6).tolist()
        out.append(
            RequestRecord(
                request_id=i,
                request_class="",
                input_tokens=int(rng.integers(128, 1024)),
                output_tokens=tokens,
                max_tokens=tokens,
                scheduled_at=start,
                submitted_at=start,
                token_times=times,
                chunk_times=times,
                chunk_tokens=[1] * tokens,
            )
        )
    return out


def test_a_10000_request_report_stays_under_5_mb(tmp_path: Path) -> None:
    cols = RecordColumns.from_records(_big_run(10_000, 64))
    summary = summarize(cols, "B", {}, None)
    page = render_html(run_document(tmp_path, RunInfo(), summary, cols))
    size = len(page.encode())
    assert size < 5_000_000, f"{size / 1e6:.2f} MB"
    figures = orjson.loads(_scripts(page)["figures"].replace("<\\/", "</"))
    timeline = next(f for k, f in figures.items() if k.endswith("request-timeline"))
    assert sum(len([v for v in t["x"] if v is not None]) for t in timeline["data"]) == 4 * 10_000


def test_report_writes_markdown_and_html_of_a_run(run_dir: Path, tmp_path: Path) -> None:
    from tests.cli import infermeter

    md, html = tmp_path / "r.md", tmp_path / "r.html"
    p = infermeter("report", run_dir, "--markdown", md, "--html", html)
    assert p.returncode == 0, p.stderr
    text = md.read_text()
    for heading in (
        "1. System Identification",
        "2. Test Configuration",
        "3. Results",
        "4. Detailed Results",
        "5. Methodology Compliance",
        "6. Reproduction",
    ):
        assert f"## {heading}" in text
    assert "**Table 1: TTFT Results; measured: --api completions, POST /v1/completions**" in text
    assert "_Figure: Request timeline" in text
    assert html.stat().st_size < 5_000_000 and 'data-chart="request-timeline"' in html.read_text()
    assert "Table 1: TTFT Results" in p.stdout  # the console report is printed as before
