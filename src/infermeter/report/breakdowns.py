"""The report's breakdowns of a run (metrics.breakdowns): latency by turn index with the history's share of the
prompt (multi-turn runs), latency by model (--model-mix) and the waits for a slot (--max-concurrency), as tables for
the full report and as lines for the minimum one.  A run without them gets neither."""

from __future__ import annotations

from infermeter.metrics.summary_model import GroupLatency, Summary
from infermeter.report.tables import fmt_ms, fmt_pct, grid


def _cells(g: GroupLatency) -> list[str]:
    latencies = (g.ttft_p50, g.ttft_p90, g.ttft_p99, g.itl_p50, g.itl_p99)
    return [str(g.count), str(g.ok), *(fmt_ms(v) for v in latencies)]


def _headers(first: str, itl: str) -> list[str]:
    return [first, "Count", "OK", "TTFT P50", "TTFT P90", "TTFT P99", f"{itl} P50", f"{itl} P99"]


def turn_table(summary: Summary, itl: str = "ITL") -> str:
    """Latency by turn index and the share of each turn's prompt that was history; '' for a single-turn run."""
    by = summary.by_turn
    if by is None:
        return ""
    rows = [[r.turn, *_cells(r), fmt_pct(r.history_share)] for r in by.rows]
    caption = (
        f"Latency by turn ({by.sessions} sessions, {by.turns} turns; history {fmt_pct(by.history_share)} of the "
        f"prompt on average, {by.history_tokens})"
    )
    return grid([*_headers("Turn", itl), "History share"], rows, caption)


def model_table(summary: Summary, itl: str = "ITL") -> str:
    """Latency per model the requests named; '' for a run of one model."""
    if summary.by_model is None:
        return ""
    rows = [[name, *_cells(g)] for name, g in summary.by_model.items()]
    return grid(_headers("Model", itl), rows, "Latency by model")


def slot_wait_line(summary: Summary) -> str:
    """The waits for a slot in a sentence; '' without any figure."""
    w = summary.slot_wait
    if w is None:
        return ""
    if not w.waited:
        return f"none of {w.recorded} requests waited for a slot"
    seconds = "n/a" if w.p50_s is None or w.p99_s is None else f"P50 {w.p50_s:.3f} s, P99 {w.p99_s:.3f} s"
    top = "" if w.max_s is None else f", max {w.max_s:.3f} s"
    return f"{w.waited} of {w.recorded} requests waited for a slot: {seconds}{top}"


def breakdown_tables(summary: Summary, itl: str = "ITL") -> list[str]:
    """The breakdown tables a run has (none for most); `itl`: what the run calls its inter-token figure."""
    tables = [turn_table(summary, itl), model_table(summary, itl)]
    if line := slot_wait_line(summary):
        tables.append(grid(["Metric", "Value"], [["Slot waits (--max-concurrency)", line]], "Waits for a slot"))
    return [t for t in tables if t]


def breakdown_lines(summary: Summary) -> list[str]:
    """The minimum report's key results the breakdowns add: TTFT P50 / P99 by turn and by model, the slot waits."""
    lines = []
    if (by := summary.by_turn) is not None:
        turns = "; ".join(f"turn {r.turn} {fmt_ms(r.ttft_p50)} / {fmt_ms(r.ttft_p99)}" for r in by.rows)
        lines.append(f"- TTFT P50 / P99 by turn: {turns} (history {fmt_pct(by.history_share)} of the prompt)")
    if summary.by_model is not None:
        models = "; ".join(f"{n} {fmt_ms(g.ttft_p50)} / {fmt_ms(g.ttft_p99)}" for n, g in summary.by_model.items())
        lines.append(f"- TTFT P50 / P99 by model: {models}")
    if line := slot_wait_line(summary):
        lines.append(f"- Slot waits: {line}")
    return lines
