"""The charts of a run hold exactly what the records say: the hand-made records of tests/conftest.py, whose every
time is known (three successful requests, one failure)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.chart import Chart, Mark, Trace
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.report.chart import plotly_figure
from infermeter.report.run_charts import (
    CDF_POINTS,
    cdf_trace,
    histogram_trace,
    over_time_chart,
    run_charts,
    stall_chart,
    timeline_chart,
    ttft_charts,
)
from tests.conftest import hand_records
from tests.report.conftest import EVERY_RUN_CHART


@pytest.fixture
def cols() -> RecordColumns:
    return RecordColumns.from_records(hand_records())


def test_ttft_cdf_steps_through_every_request(cols: RecordColumns) -> None:
    summary = summarize(cols, "B", {}, None)
    cdf = ttft_charts(cols, summary)[0]
    everyone = cdf.traces[0]
    # TTFT: request 0 1.10 - 1.00, request 1 2.2 - 2.0, request 3 0.6 - 0.5 (ms); request 2 failed
    assert everyone.x == pytest.approx([100.0, 100.0, 200.0])
    assert everyone.y == pytest.approx([1 / 3, 2 / 3, 1.0], abs=1e-5)
    assert [t.name for t in cdf.traces] == ["all requests", "class long", "class short"]
    assert [m.label for m in cdf.marks] == ["P50", "P99"]


def test_a_large_cdf_is_thinned_to_its_order_statistics() -> None:
    values = np.arange(50_000, dtype=float)
    t = cdf_trace("x", values)
    assert t.points() == CDF_POINTS
    assert (t.x[0], t.x[-1], t.y[-1]) == (0.0, 49_999.0, 1.0)


def test_a_histogram_carries_counts_not_samples() -> None:
    t = histogram_trace("gaps", np.array([1.0, 1.0, 2.0, 3.0, 3.0, 3.0]))
    assert sum(t.y) == 6  # type: ignore[arg-type]
    assert len(t.x) == len(t.y) <= 60


def test_the_timeline_has_one_waiting_and_one_streaming_segment_per_request(cols: RecordColumns) -> None:
    chart = timeline_chart(cols)
    assert chart is not None
    waiting, *streaming, failed = chart.traces
    # rows in scheduled order: request 3 (0.5 s) row 0, request 0 (0.99) row 1, request 2 (1.5) row 2, request 1 row 3
    segs = [(waiting.x[i], waiting.x[i + 1], waiting.y[i]) for i in range(0, len(waiting.x), 3)]
    assert sorted(segs) == [(0.5, 0.6, 0.0), (0.99, 1.1, 1.0), (2.0, 2.2, 3.0)]  # rounded to 0.1 ms on the page
    assert [t.name for t in streaming] == ["streaming, class long", "streaming, class short"]
    assert streaming[0].x[:2] == pytest.approx([0.6, 0.7]) and streaming[0].y[:2] == [0.0, 0.0]
    assert failed.name == "failed: error" and failed.x == [1.5] and failed.y == [2.0]


def test_the_stall_chart_picks_the_longest_pauses_first(cols: RecordColumns) -> None:
    chart = stall_chart(cols, summarize(cols, "B", {}, None))
    assert chart is not None
    # largest ITL (option B): request 3 0.1 s (0.6 -> 0.7), request 0 0.06 s (1.13 -> 1.19); request 1 has no gap
    assert [t.name for t in chart.traces] == ["request 3 (max pause 100 ms)", "request 0 (max pause 60 ms)"]
    assert chart.traces[0].x == pytest.approx([0.0, 0.1, 0.2, 0.2])
    assert chart.traces[0].y == [0, 1, 2, 3]


def test_throughput_and_in_flight_over_time(cols: RecordColumns, tmp_path: Path) -> None:
    chart = over_time_chart(cols, tmp_path)
    assert chart is not None
    tokens, completions, inflight = chart.traces
    assert tokens.x == [0.5, 1.5, 2.5]
    # ok requests' tokens by second: request 3's three in [0, 1), request 0's four in [1, 2), request 1's one in [2, 3)
    assert tokens.y == [3.0, 4.0, 1.0]
    assert completions.y == [1.0, 1.0, 1.0]
    # at 0.5 s only request 3 (sent 0.5, done 0.7) is in flight; at 1.5 s and 2.5 s none
    assert inflight.y == [1.0, 0.0, 0.0]
    assert chart.panels == ["output (tok/s)", "requests in flight (client)"]  # no server metrics were scraped


def test_every_chart_of_a_run_has_labelled_axes(cols: RecordColumns, tmp_path: Path) -> None:
    summary = summarize(cols, "B", {}, parse_deadlines("tbt=50ms"))
    charts = run_charts(cols, summary, tmp_path)
    assert {c.id for c in charts} >= EVERY_RUN_CHART
    for c in charts:
        assert c.x_title and all(c.panels), c.id
        assert len({c.id for c in charts}) == len(charts)


def test_a_chart_becomes_a_plotly_figure_with_stacked_panels() -> None:
    chart = Chart(
        id="x",
        title="t",
        x_title="run time (s)",
        panels=["a (1/s)", "b (%)"],
        traces=[Trace(name="a", x=[0, 1], y=[1, 2]), Trace(name="b", kind="step", x=[0, 1], y=[3, 4], row=2)],
        marks=[Mark(label="knee", x=0.5), Mark(label="SLO", y=3.5, row=2)],
    )
    fig = plotly_figure(chart)
    assert [t["yaxis"] for t in fig["data"]] == ["y", "y2"]
    assert fig["data"][1]["line"]["shape"] == "hv"
    top, bottom = fig["layout"]["yaxis"]["domain"], fig["layout"]["yaxis2"]["domain"]
    assert top[1] == 1.0 and bottom[0] == 0.0 and bottom[1] < top[0]  # stacked, not overlapping
    assert fig["layout"]["xaxis"]["anchor"] == "y2"  # the shared x axis sits under the bottom panel
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["knee", "SLO"]
    assert chart.points() == 4


def test_labels_of_marks_at_one_x_stack_instead_of_overlapping() -> None:
    """A tradeoff whose knee is also its optimal level draws both labels, one above the other."""
    marks = [Mark(label="knee", x=2.0), Mark(label="optimal", x=2.0), Mark(label="other", x=3.0)]
    chart = Chart(
        id="x", title="t", x_title="x", panels=["y"], traces=[Trace(name="a", x=[1, 2], y=[1, 2])], marks=marks
    )
    notes = plotly_figure(chart)["layout"]["annotations"]
    assert [(n["text"], n["yshift"]) for n in notes] == [("knee", 0), ("optimal", 14), ("other", 0)]


def test_a_run_that_kept_only_each_streams_endpoints_draws_no_gaps(cols: RecordColumns, tmp_path: Path) -> None:
    summary = summarize(cols, "B", {}, parse_deadlines("tbt=50ms"))
    ids = {c.id for c in run_charts(cols, summary, tmp_path, endpoints_only=True)}
    assert "request-timeline" in ids and "ttft-cdf" in ids
    assert not ids & {"itl-distribution", "stalls", "fluidity"}
