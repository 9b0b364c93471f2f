"""The report's breakdowns: a multi-turn run's latency by turn (with the history's share), a model mix's latency by
model and the slot waits, in `report`'s tables, the HTML/Markdown document's and `run`'s minimum report; a run without
them shows none."""

from __future__ import annotations

from infermeter.metrics import RecordColumns
from infermeter.metrics.summary import summarize
from infermeter.report import console
from infermeter.report.breakdowns import breakdown_lines
from infermeter.report.documents import run_tables
from tests.evidence import info, stream
from tests.metrics.test_breakdowns import two_sessions


def test_the_reports_show_latency_by_turn_and_by_model_and_the_slot_waits() -> None:
    summary = summarize(RecordColumns.from_records(two_sessions()))
    full = console.full_report(summary, info())
    assert "Latency by turn (2 sessions, 4 turns; history 18.8% of the prompt on average" in full
    assert "| 1    | 2     | 1  | 200 ms   | 200 ms   | 200 ms   | 20.0 ms | 29.8 ms | 37.5%         |" in full
    assert "Latency by model" in full and "| b     | 2     | 1  |" in full
    assert "2 of 3 requests waited for a slot: P50 0.300 s, P99 0.398 s, max 0.400 s" in full
    captions = [t.caption for t in run_tables(summary)]
    assert {"Waits for a slot", "Latency by model"} <= set(captions)
    assert any(c.startswith("Latency by turn") for c in captions)
    minimum = console.minimum_report(summary, info())
    assert "- TTFT P50 / P99 by turn: turn 0 200 ms / 298 ms; turn 1 200 ms / 200 ms (history 18.8%" in minimum
    assert "- TTFT P50 / P99 by model: a 200 ms / 298 ms; b 200 ms / 200 ms" in minimum


def test_a_run_without_breakdowns_reports_none() -> None:
    summary = summarize(RecordColumns.from_records(stream(5, ttft=0.05, itl=0.01, output=4)))
    assert breakdown_lines(summary) == []
    full = console.full_report(summary, info())
    assert "by turn" not in full and "by model" not in full and "slot" not in full
