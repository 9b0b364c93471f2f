"""`infermeter runs trend`: each group of runs a point with its 95% CI, and a mark exactly where a constructed step
change is."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest

from infermeter.catalog.entry import read_run
from infermeter.catalog.evidence import Samples
from infermeter.catalog.find import find_runs
from infermeter.catalog.groups import series_of
from infermeter.catalog.names import known_metrics
from infermeter.catalog.trend import Trend, trend
from infermeter.records import SUMMARY
from infermeter.report.catalog_trend import MARK, trend_plot
from tests.catalog.build import write_group, write_run
from tests.catalog.conftest import Invoke, one_line_error

STEP = (1.0, 1.0, 1.25, 1.25)  # TTFT scale of each group, a day apart: one step up, into the third


@pytest.fixture(scope="module")
def step(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("step")
    for day, scale in enumerate(STEP):
        write_group(root / f"day-{day}", seed=10 * day, hours=24 * day, ttft_scale=scale, runs=3, n=200)
    return root


def ttft_trend(root: Path, metric: str = "ttft.p99", group: str = "dir") -> Trend:
    runs = [read_run(f) for f in find_runs([root]).runs]
    return trend(known_metrics(runs)[metric], series_of(runs, "dir" if group == "dir" else "run"), Samples())


def test_the_step_is_marked_and_nothing_else(step: Path) -> None:
    (series,) = ttft_trend(step).series
    assert [p.point.label for p in series.points] == [str(step / f"day-{d}") for d in range(4)]
    assert [p.marked for p in series.points] == [False, False, True, False]
    up = series.points[2].change
    assert up is not None and up.relative is not None and 0.15 < up.relative < 0.35  # a 25% step, drawn
    assert all(len(p.point.runs) == 3 for p in series.points)


def test_each_point_has_its_value_and_ci(step: Path) -> None:
    (series,) = ttft_trend(step, "ttft.p50").series
    for p, scale in zip(series.points, STEP, strict=True):
        e = p.estimate
        assert e.lo is not None and e.hi is not None and e.lo < e.value < e.hi
        assert e.n == 600 and e.over == "runs and requests"
        assert e.value == pytest.approx(200.0 * scale, rel=0.03)  # the median of TTFT_S x scale, in ms


def test_a_groups_ci_holds_the_spread_between_its_runs(tmp_path: Path) -> None:
    for k, scale in enumerate((0.9, 1.0, 1.1)):  # three runs 10% apart: a spread the requests alone do not show
        write_run(tmp_path / "g" / f"run-{k}", seed=k, hours=k / 60, ttft_scale=scale, n=200)
    (series,) = ttft_trend(tmp_path, "ttft.p50").series
    e = series.points[0].estimate
    assert e.lo is not None and e.hi is not None and e.over == "runs and requests"
    assert all(e.lo < v < e.hi for v in e.per_run)
    # Student's t on 2 degrees of freedom times the standard error of the runs' medians' mean
    expected = 4.303 * float(np.std(e.per_run, ddof=1)) / math.sqrt(3)
    assert (e.hi - e.lo) / 2 == pytest.approx(expected, rel=0.25)


def test_one_runs_ci_is_its_summarys(tmp_path: Path, runs_cli: Invoke) -> None:
    run = write_run(tmp_path / "only", seed=3, n=300)
    (series,) = ttft_trend(tmp_path, "ttft.p50").series
    e = series.points[0].estimate
    stored = orjson.loads((run / SUMMARY).read_bytes())["ttft_ms"]["ci95"]["p50"]
    assert e.over == "requests only" and [e.lo, e.hi] == pytest.approx(stored, rel=1e-12)
    result = runs_cli("trend", tmp_path, "--metric", "ttft.p50")
    assert result.code == 0, result.err
    assert "| requests only |" in result.out and "note: CI over requests only: a group of one run" in result.out


def test_the_console_shows_the_table_and_the_plot(step: Path, runs_cli: Invoke) -> None:
    result = runs_cli("trend", step, "--metric", "ttft.p99")
    assert result.code == 0, result.err
    assert result.out.count("SIGNIFICANT") == 1
    rows = [line for line in result.out.splitlines() if line.startswith("| all ")]
    assert len(rows) == 4 and "SIGNIFICANT" in rows[2]
    marks = [line for line in result.out.splitlines() if line.strip() and set(line.strip()) == {MARK}]
    assert len(marks) == 1


def test_a_runs_figure_with_one_run_a_point_has_no_ci_and_no_test(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "a", seed=1, hours=0, n=50)
    write_run(tmp_path / "b", seed=2, hours=1, n=50)
    result = runs_cli("trend", tmp_path, "--metric", "throughput.output_tok_s", "--group", "run")
    assert result.code == 0, result.err
    assert result.out.count("none (one run: no CI over runs)") == 2
    assert "not verifiable: one run a side" in result.out


def test_series_by_a_column(tmp_path: Path) -> None:
    for k, model in enumerate(("a", "b")):
        for day in range(2):
            write_run(tmp_path / model / f"d{day}", seed=k * 10 + day, hours=24 * day + k, n=50, model=model)
    runs = [read_run(f) for f in find_runs([tmp_path]).runs]
    by = {r.run_id: r.info.sut.model for r in runs}
    series = series_of(runs, "run", "sut_model", dict(by))
    assert [(s.name, len(s.points)) for s in series] == [("sut_model=a", 2), ("sut_model=b", 2)]


def test_the_html_chart(step: Path, tmp_path: Path, runs_cli: Invoke) -> None:
    page = tmp_path / "trend.html"
    result = runs_cli("trend", step, "--html", page)
    assert result.code == 0, result.err
    html = page.read_text()
    # the series, its CI bars (two ends each), and the one significant change: 4 + 8 + 1 points
    assert 'data-traces="3"' in html and 'data-points="13"' in html


def test_the_plot_draws_each_ci(step: Path) -> None:
    plot = trend_plot(ttft_trend(step))
    assert plot.count("*") == 4 and "|" in plot


def test_bad_input_is_one_line(step: Path, runs_cli: Invoke) -> None:
    one_line_error(runs_cli("trend", step, "--metric", "ttft"), "--metric", "unknown metric 'ttft'", "ttft.p99")
    one_line_error(runs_cli("trend", step, "--by", "sut.nothing"), "--by", "no column")
    one_line_error(runs_cli("trend", step, "--html", step), "--html", "is a directory")
