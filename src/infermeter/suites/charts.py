"""Chart pieces the suites share: a latency percentile traced against a load figure, one line per percentile."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infermeter.chart import Chart, Mark, Trace
from infermeter.metrics.summary_model import Summary

PERCENTILES = (50.0, 95.0, 99.0)
COLORS = {50.0: "#1f77b4", 90.0: "#2ca02c", 95.0: "#ff7f0e", 99.0: "#d62728"}  # a percentile keeps its colour
LABEL = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}


def percentile_traces(
    x: Sequence[float],
    summaries: Sequence[Summary],
    metric: str,
    row: int = 1,
    ps: Sequence[float] = PERCENTILES,
    name: str | None = None,
) -> list[Trace]:
    """One line per percentile of `metric` (ttft, tpot, itl, e2e) over the runs, in ms, against `x`; `name` replaces
    the metric's label (option A's "Time Between Chunks" for itl)."""
    out = []
    for p in ps:
        y = [s.latency(metric).percentile(p) for s in summaries]
        y = [round(v, 3) if v is not None else None for v in y]
        out.append(
            Trace(
                name=f"{name or LABEL[metric]} P{p:g}",
                kind="lines+markers",
                x=[round(v, 3) for v in x],
                y=y,
                row=row,
                color=COLORS.get(p),
            )
        )
    return out


def search_chart(
    chart_id: str, title: str, unit: str, steps: Sequence[tuple[float, Summary, list[str]]], slo_ms: float | None = None
) -> Chart:
    """A search's probes in the order it ran them: the load each tried (passed or failed, why in the hover text),
    the throughput it achieved and its TTFT P99."""
    n = list(range(1, len(steps) + 1))
    traces = [Trace(name="load tried", kind="line", x=n, y=[o for o, _, _ in steps], color="#bbbbbb", width=1)]
    for label, passed, color in (("passed", True, "#2ca02c"), ("failed", False, "#d62728")):
        pick = [i for i, (_, _, why) in enumerate(steps) if (not why) == passed]
        traces.append(
            Trace(
                name=label,
                kind="markers",
                x=[n[i] for i in pick],
                y=[steps[i][0] for i in pick],
                color=color,
                text=["; ".join(steps[i][2]) or "met every criterion" for i in pick],
            )
        )
    traces.append(
        Trace(
            name="output throughput",
            kind="lines+markers",
            x=n,
            row=2,
            color="#1f77b4",
            y=[round(s.throughput.output_tok_s, 2) for _, s, _ in steps],
        )
    )
    traces.append(
        Trace(
            name="TTFT P99", kind="lines+markers", x=n, row=3, color="#ff7f0e", y=[s.ttft_ms.p99 for _, s, _ in steps]
        )
    )
    marks = [Mark(label=f"TTFT P99 bound {slo_ms:g} ms", y=slo_ms, row=3)] if slo_ms else []
    return Chart(
        id=chart_id,
        title=title,
        x_title="probe (in the order run)",
        traces=traces,
        marks=marks,
        panels=[f"load tried ({unit})", "achieved output (tok/s)", "TTFT P99 (ms)"],
        note="Hover over a failed probe for the criterion it missed.",
    )


BOX_PERCENTILES = (5, 25, 50, 75, 95)  # whiskers at P5 and P95: a box stays readable when a class starves


def box_trace(name: str, at: str, values_ms: np.ndarray, row: int = 1, color: str | None = None) -> Trace | None:
    """A box of P5, P25, P50, P75, P95 of the values (None without values)."""
    v = values_ms[np.isfinite(values_ms)]
    if not len(v):
        return None
    five = [round(float(x), 3) for x in np.percentile(v, BOX_PERCENTILES)]
    return Trace(name=name, kind="box", x=[at], box=five, row=row, color=color)
