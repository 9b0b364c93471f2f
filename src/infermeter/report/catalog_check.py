"""The regression check of the catalog's newest runs (`infermeter runs check`) for the console: which groups were
held against which, a table of every metric's baseline, candidate, change with its CI (in the metric's unit and
relative to the baseline, which the verdict rests on), Holm-adjusted p and verdict, each verdict's reason, what the
intervals cover, and the outcome in one line."""

from __future__ import annotations

from infermeter.catalog.check import Check, CheckRow, Pair
from infermeter.catalog.evidence import EXPLAINED, Estimate, Over
from infermeter.report.catalog_table import interval, number
from infermeter.report.catalog_trend import TIME, change_text
from infermeter.report.tables import grid


def _estimate(e: Estimate | None, unit: str) -> str:
    if e is None:
        return "not measured"
    ci = interval(e.lo, e.hi) if e.no_ci is None else "no CI"
    return f"{number(e.value, unit)} {ci}"


def _change(row: CheckRow) -> tuple[str, str, str]:
    """The change, its 95% CI (the difference's, then relative to the baseline), and the adjusted p."""
    ch, unit = row.change, row.metric.unit
    if ch is None:
        return "", "", ""
    p = f"{row.p_adjusted:.3g}" if row.p_adjusted is not None else "no test"
    ci = interval(ch.lo, ch.hi, unit)
    if ch.rel_lo is not None and ch.rel_hi is not None:
        ci += f", [{ch.rel_lo:+.1%}, {ch.rel_hi:+.1%}]"
    return change_text(ch, unit), ci, p


def _pair_line(pair: Pair) -> str:
    def side(what: str, label: str, runs: int, started: str) -> str:
        return f"{what} {label} ({runs} run{'s' if runs != 1 else ''}, from {started} UTC)"

    b, c = pair.baseline, pair.candidate
    head = f"{pair.series}: " if pair.series else ""
    return (
        head
        + side("candidate", c.label, len(c.runs), c.started_at.strftime(TIME))
        + " against "
        + side("baseline", b.label, len(b.runs), b.started_at.strftime(TIME))
    )


def outcome(result: Check) -> str:
    """The check in one line: the regressions, that nothing could be verified (which fails the gate too), or that
    there is no regression."""
    bad = result.regressions
    allowed = f"{result.max_regression:.1%}"
    if bad:
        worst = ", ".join(f"{r.metric.name} {_change(r)[0] or 'not measured'}" for r in bad)
        return f"REGRESSION: {len(bad)} metric(s) worse by more than {allowed} or no longer measured: {worst}"
    if not result.verified:
        return (
            f"NOTHING VERIFIED: none of the {len(result.rows)} metric checks could be verified, so the check fails "
            "(a gate fails closed)"
        )
    return (
        f"no significant regression beyond {allowed} ({len(result.verified)} of {len(result.rows)} metric checks "
        "verifiable)"
    )


def _intervals(result: Check) -> list[str]:
    """What the table's intervals cover, each kind present once."""
    kinds: list[Over] = []
    for r in result.rows:
        for e in (r.baseline, r.candidate):
            if e is not None and e.no_ci is None and e.over not in kinds:
                kinds.append(e.over)
        if r.change is not None and r.change.over not in kinds:
            kinds.append(r.change.over)
    return [f"intervals over {k}: {EXPLAINED[k]}" for k in kinds]


def check_text(result: Check) -> str:
    """The pairs, the table, the reasons, the notes and the outcome, for the console."""
    pairs = list(dict.fromkeys(id(r.pair) for r in result.rows))
    by_id = {id(r.pair): r.pair for r in result.rows}
    lines = [_pair_line(by_id[i]) for i in pairs]
    series = any(r.pair.series for r in result.rows)
    headers = [*(["series"] if series else []), "metric", "baseline [95% CI]", "candidate [95% CI]", "change"]
    headers += ["change 95% CI (relative)", "p (Holm)", "verdict"]
    rows = [
        [
            *([r.pair.series] if series else []),
            r.metric.name,
            _estimate(r.baseline, r.metric.unit),
            _estimate(r.candidate, r.metric.unit),
            *_change(r),
            r.verdict,
        ]
        for r in result.rows
    ]
    caption = "Candidate against baseline, each metric (comparison rules of the IETF draft's section 6.3)"
    reasons = [
        f"{(r.pair.series + ': ') if r.pair.series else ''}{r.metric.name}: {r.verdict}: {r.why}" for r in result.rows
    ]
    notes = [f"note: {n}" for n in [*_intervals(result), *result.notes]]
    return "\n".join([*lines, "", grid(headers, rows, caption), "", *reasons, *notes, "", outcome(result)])
