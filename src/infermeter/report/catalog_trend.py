"""A metric's trend over the catalog's groups of runs (`infermeter runs trend`): the table of points with their 95%
CIs and the tested change from each group to the next, a text plot for the console, and a plotly chart for the
offline HTML report."""

from __future__ import annotations

import math

from infermeter.catalog.evidence import EXPLAINED, Change
from infermeter.catalog.trend import Trend, TrendPoint
from infermeter.chart import Chart, Trace
from infermeter.report.catalog_table import interval, number
from infermeter.report.chart import PALETTE
from infermeter.report.document import Document, Section
from infermeter.report.tables import grid
from infermeter.suite_result import Table

MARK = "^"  # under the x axis: a significant change from the group before
CI_BAR = "|"
TIME = "%Y-%m-%d %H:%M:%S"


def change_text(ch: Change, unit: str) -> str:
    """A change as its difference with the unit and, where the value before is not 0, relative to it."""
    rel = f" ({ch.relative:+.1%})" if ch.relative is not None else ""
    return f"{'+' if ch.diff >= 0 else ''}{number(ch.diff, unit)}{rel}"


def _change(tp: TrendPoint, unit: str) -> tuple[str, str, str, str]:
    """The change cells: the difference (and relative), its CI, the adjusted p, and the mark."""
    ch = tp.change
    if ch is None:
        return "", "", "", ""
    diff = change_text(ch, unit)
    if ch.p is None or tp.p_adjusted is None:
        return diff, interval(ch.lo, ch.hi, unit), f"not verifiable: {ch.untestable}", "no"
    return diff, interval(ch.lo, ch.hi, unit), f"{tp.p_adjusted:.3g}", "SIGNIFICANT" if tp.marked else "no"


def trend_table(trend: Trend) -> Table:
    """Every point of every series: when, how many runs, the value with its 95% CI and what the CI covers, and the
    change from the point before with its CI, Holm-adjusted p and whether it is significant."""
    unit = trend.metric.unit
    rows = []
    for s in trend.series:
        for tp in s.points:
            e = tp.estimate
            ci = interval(e.lo, e.hi, unit) if e.no_ci is None else f"none ({e.no_ci})"
            rows.append(
                [
                    s.name or "all",
                    tp.point.label,
                    tp.point.started_at.strftime(TIME),
                    str(len(tp.point.runs)),
                    number(e.value, unit),
                    ci,
                    e.over if e.no_ci is None else "",
                    *_change(tp, unit),
                ]
            )
    headers = ["series", "group", "started (UTC)", "runs", trend.metric.name, "95% CI", "CI over", "change"]
    headers += ["change 95% CI", "p (Holm)", "significant"]
    return Table(caption=f"{trend.metric.label()} over time", headers=headers, rows=rows, notes=_notes(trend))


def _notes(trend: Trend) -> list[str]:
    points = [tp for s in trend.series for tp in s.points]
    kinds = list(dict.fromkeys(tp.estimate.over for tp in points if tp.estimate.no_ci is None))
    out = [f"CI over {k}: {EXPLAINED[k]}" for k in kinds]
    tests = sorted({tp.change.test for tp in points if tp.change is not None})
    out += [f"changes tested by {', '.join(tests)}; Holm's correction across each series' changes"] if tests else []
    out.append(
        "a change is significant when its test rejects at 5% after the correction, it is at least 5% of the value "
        "before, and no run disagrees (the comparison rules of infermeter compare, the IETF draft's section 6.3)"
    )
    return out + trend.notes


def _letters(trend: Trend) -> list[str]:
    return ["*"] if len(trend.series) == 1 else [chr(ord("A") + i % 26) for i in range(len(trend.series))]


def trend_plot(trend: Trend, width: int = 60, height: int = 12) -> str:
    """The points on a character grid, evenly spaced in time order, each series by its letter, each CI as a bar,
    and a mark under the axis where a change is significant."""
    points = [(i, tp) for i, s in enumerate(trend.series) for tp in s.points if math.isfinite(tp.estimate.value)]
    if not points:
        return f"{trend.metric.label()}: no points"
    times = sorted({tp.point.started_at for _, tp in points})
    width = max(min(width, 6 * len(times)), 2 * len(times[0].strftime(TIME)) + 4)
    ends = [v for _, tp in points for v in (tp.estimate.value, tp.estimate.lo, tp.estimate.hi) if v is not None]
    values = [v for v in ends if math.isfinite(v)]
    y0, y1 = min(values), max(values)
    span = (y1 - y0) or abs(y1) or 1.0

    def row(y: float) -> int:
        return height - 1 - round((y - y0) / span * (height - 1))

    def col(tp: TrendPoint) -> int:
        return round(times.index(tp.point.started_at) / max(len(times) - 1, 1) * (width - 1))

    cells = [[" "] * width for _ in range(height)]
    marks = [" "] * width
    letters = _letters(trend)
    for i, tp in points:
        c, e = col(tp), tp.estimate
        if e.lo is not None and e.hi is not None:
            for r in range(row(e.hi), row(e.lo) + 1):
                cells[r][c] = CI_BAR if cells[r][c] == " " else cells[r][c]
        cells[row(e.value)][c] = letters[i]
        if tp.marked:
            marks[c] = MARK
    top, bottom = number(y1), number(y0)
    pad = max(len(top), len(bottom))
    lines = [f"{trend.metric.label()} over time ({CI_BAR}: 95% CI; {MARK}: a significant change)"]
    for r, line in enumerate(cells):
        tick = top if r == 0 else bottom if r == height - 1 else ""
        lines.append(f"  {tick.rjust(pad)} |{''.join(line)}")
    lines.append(f"  {' ' * pad} +{'-' * width}")
    if MARK in marks:
        lines.append(f"  {' ' * pad}  {''.join(marks).rstrip()}")
    first, last = times[0].strftime(TIME), times[-1].strftime(TIME)
    lines.append(f"  {' ' * pad}  {first}{last.rjust(width - len(first)) if len(times) > 1 else ''}")
    if len(trend.series) > 1:
        lines += [f"  {letters[i]}: {s.name}" for i, s in enumerate(trend.series)]
    return "\n".join(lines)


def trend_text(trend: Trend) -> str:
    """The table, its notes and the plot, for the console."""
    table = trend_table(trend)
    notes = "\n".join(f"note: {n}" for n in table.notes)
    return f"{grid(table.headers, table.rows, table.caption)}\n{notes}\n\n{trend_plot(trend)}"


def trend_chart(trend: Trend) -> Chart:
    """Each series as a line over the groups' start times with its CIs as bars, and the significant changes marked."""
    traces = []
    for i, s in enumerate(trend.series):
        color = PALETTE[i % len(PALETTE)]
        name = s.name or trend.metric.name
        x = [tp.point.started_at.isoformat() for tp in s.points]
        y: list[float | str | None] = [tp.estimate.value for tp in s.points]
        labels = [f"{tp.point.label} ({len(tp.point.runs)} runs)" for tp in s.points]
        traces.append(Trace(name=name, kind="lines+markers", x=x, y=y, color=color, text=labels))
        ci_x: list[float | str | None] = []
        ci_y: list[float | str | None] = []
        for t, tp in zip(x, s.points, strict=True):
            if tp.estimate.lo is not None and tp.estimate.hi is not None:
                ci_x += [t, t, None]
                ci_y += [tp.estimate.lo, tp.estimate.hi, None]
        if ci_x:
            traces.append(Trace(name=f"{name}: 95% CI", kind="line", x=ci_x, y=ci_y, color=color, width=3))
        marked = [(t, tp.estimate.value) for t, tp in zip(x, s.points, strict=True) if tp.marked]
        if marked:
            traces.append(
                Trace(
                    name=f"{name}: significant change",
                    kind="markers",
                    x=[t for t, _ in marked],
                    y=[v for _, v in marked],
                    color="#d62728",
                )
            )
    return Chart(
        id="trend",
        title=f"{trend.metric.label()} over time",
        x_title="run start (UTC)",
        panels=[trend.metric.label()],
        traces=traces,
        note=f"{trend.marks} significant change(s); bars: 95% CIs",
    )


def trend_document(trend: Trend) -> Document:
    """The trend as a report: the chart, then the table with its notes."""
    section = Section(f"Trend of {trend.metric.name}", tables=[trend_table(trend)], charts=[trend_chart(trend)])
    return Document(f"infermeter runs trend: {trend.metric.name}", [section])
