"""`run` ends with goodput under --slo and Metron's fluidity under --deadlines, as `report` computes them (issue 35:
only `report` printed them)."""

from __future__ import annotations

from infermeter.metrics import RecordColumns
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.goodput import parse_slo
from infermeter.metrics.summary import summarize
from infermeter.metrics.summary_model import Summary
from infermeter.report import console
from tests.evidence import info, stream


def _summary(slo: str | None, deadlines: str | None) -> Summary:
    """Half the requests answer in 50 ms, half in 800 ms; tokens 10 ms apart, every 8th 60 ms late."""
    records = stream(20, ttft=0.05, itl=0.01, output=32) + stream(20, ttft=0.8, itl=0.01, output=32, first_id=20)
    for r in records[::4]:
        r.token_times[8:] = [t + 0.06 for t in r.token_times[8:]]
    cols = RecordColumns.from_records(records, "B")
    return summarize(cols, "B", parse_slo(slo) if slo else None, parse_deadlines(deadlines) if deadlines else None)


def test_the_minimum_report_shows_goodput_and_fluidity_when_asked() -> None:
    summary = _summary("ttft=500ms", "ttft=100ms,tbt=20ms")
    g, f = summary.goodput, summary.fluidity
    assert g.fraction == 0.5 and g.req_s is not None and f is not None and f.fluid_tok_s is not None
    report = console.minimum_report(summary, info())
    key = report.split("Key Results:")[1].split("Notes:")[0]
    assert f"- Goodput: {g.req_s:.3f} req/s (50.0% of requests meet every SLO: ttft<=500ms)" in key
    assert f"Goodput | {g.req_s:.3f} req/s (50.0% of requests)" in " ".join(console.throughput_table(summary).split())
    assert f.index.mean is not None and f.index.p50 is not None and f.index.mean < 1.0  # the late tokens missed
    assert (
        f"- Fluidity-index: mean {f.index.mean:.3f}, P50 {f.index.p50:.3f} "
        "(50.0% of requests >= 0.9; D_p 100 ms, D_d 20.0 ms)"
    ) in key
    assert f"- Fluid Token Generation Rate: {f.fluid_tok_s:.1f} tok/s" in key
    assert f"Fluid token rate (P99 of min D_d at 0.9) | {f.fluid_tok_s:.1f} tok/s" in " ".join(
        console.fluidity_table(summary).split()
    )  # what `report` shows


def test_neither_line_without_slo_or_deadlines() -> None:
    plain = console.minimum_report(_summary(None, None), info())
    assert "Goodput" not in plain and "Fluid" not in plain
    only_slo = console.minimum_report(_summary("ttft=500ms", None), info())
    assert "- Goodput:" in only_slo and "Fluid" not in only_slo
    only_deadlines = console.minimum_report(_summary(None, "ttft=100ms,tbt=20ms"), info())
    assert "Goodput" not in only_deadlines and "- Fluid Token Generation Rate:" in only_deadlines
