"""The report of a comparison (the IETF draft's section 6): the groups of repeated runs with their means and 95% CIs,
the 6.1 equivalence findings, each metric's difference with its significance, normalization (6.2) and the 6.4
checklist; as console text and as a Document with CDF overlays of the groups."""

from __future__ import annotations

import numpy as np

from infermeter.chart import Chart, Trace
from infermeter.metrics.checklist import Finding
from infermeter.metrics.comparison import ALPHA, METRICS, MIN_DELTA, MIN_EFFECT, RUN_FIGURES, Comparison
from infermeter.metrics.significance import mean_ci
from infermeter.report.console import itl_name
from infermeter.report.document import Document, Section
from infermeter.report.endpoint import measured_text
from infermeter.report.run_charts import cdf_trace
from infermeter.report.tables import fmt_num, grid
from infermeter.suite_result import Table

RULE = (
    f"significant: the per-request test rejects at {ALPHA:g} after Holm's correction across the tests of this table "
    "(one family: a run comparison, or one level of suites compared; over N levels the chance of a false call at "
    f"some level is up to N x {ALPHA:g}), the difference is at least {MIN_EFFECT:.0%} (percentiles, throughput) or "
    f"|Cliff's delta| >= {MIN_DELTA} (distributions), and it holds run by run (each run of one group beyond each run "
    "of the other)"
)


def fmt_value(v: float | None, digits: int = 2) -> str:
    """A figure in a table cell: two decimals below 1000, whole above, "n/a" where there is none."""
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v:.{digits}f}" if abs(v) < 1000 else f"{v:.0f}"


def fmt_p(p: float | None) -> str:
    """A p-value in a table cell: two significant digits, "<1e-4" below, "n/a" where there is none."""
    if p is None or not np.isfinite(p):
        return "n/a"
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def render(table: Table) -> str:
    """A table as console text: the grid, then its notes."""
    return grid(table.headers, table.rows, table.caption) + "".join(f"\n  {n}" for n in table.notes)


def metric_label(c: Comparison, metric: str) -> str:
    """A compared metric's label with its unit; the inter-token figure named by the runs' ITL option (the IETF
    draft, 4.6.3: option A's is the "Time Between Chunks"), both names where the runs' options differ."""
    if metric in RUN_FIGURES:
        return RUN_FIGURES[metric]
    if metric != "itl":
        return METRICS[metric]
    names = list(dict.fromkeys(itl_name(option) for option in c.itl_options)) or ["ITL"]
    return f"{' / '.join(names)} (ms)"


def groups_table(c: Comparison) -> Table:
    rows = []
    for g in c.groups:
        first = g.runs[0].info
        rows.append(
            [
                g.label + (" (baseline)" if g is c.baseline else ""),
                str(len(g.runs)),
                first.sut.model or "not declared",
                first.sut.hardware or "not declared",
                f"{first.workload.name} seed {first.workload.seed}",
                first.load.description or "not declared",
                measured_text(first) or "not declared",
            ]
        )
    return Table(
        caption="Groups: runs of one configuration",
        rows=rows,
        headers=["Group", "Runs", "Model", "Hardware", "Workload", "Load", "Measured"],
        notes=[", ".join(str(r.path) for r in g.runs) for g in c.groups],
    )


def _ci(values: list[float]) -> str:
    m = mean_ci(values)
    if m.mean is None:
        return "n/a"
    if m.lo is None or m.hi is None:
        return f"{fmt_value(m.mean)} (1 run)"
    return f"{fmt_value(m.mean)} [{fmt_value(m.lo)}, {fmt_value(m.hi)}]"


def means_table(c: Comparison) -> Table:
    """6.3: each group's mean over its runs and the 95% CI (Student t) of the key figures."""
    cols = [("ttft", 0.5), ("ttft", 0.99), ("itl", 0.5), ("itl", 0.99), ("tpot", 0.5), ("tpot", 0.99)]
    rows = []
    for g in c.groups:
        cells = [_ci([float(np.quantile(r.samples[m], q)) for r in g.runs if len(r.samples[m])]) for m, q in cols]
        cells += [_ci([r.figure(name) for r in g.runs]) for name in RUN_FIGURES]
        rows.append([g.label, str(len(g.runs)), *cells])
    names = [metric_label(c, m).removesuffix(" (ms)") for m, _ in cols]
    headers = ["Group", "Runs", *[f"{n} P{q * 100:g} (ms)" for n, (_, q) in zip(names, cols, strict=True)]]
    headers += list(RUN_FIGURES.values())
    return Table(caption="Repeated runs (draft 6.3): mean over runs [95% CI]", headers=headers, rows=rows)


def significance_table(c: Comparison) -> Table:
    rows = []
    for r in c.rows:
        label = metric_label(c, r.metric)
        ci = f" [{fmt_value(r.lo)}, {fmt_value(r.hi)}]" if r.lo is not None else ""
        agree = "n/a (1 run)" if r.runs_agree is None else ("yes" if r.runs_agree else "no")
        rows.append(
            [
                r.group.split(":")[0],
                label,
                r.statistic,
                fmt_value(r.a),
                fmt_value(r.b),
                (f"{r.diff:+.2f}" if r.diff is not None else "n/a") + ci,
                fmt_p(r.p),
                fmt_p(r.p_adjusted),
                r.effect,
                agree,
                "significant" if r.significant else "no",
            ]
        )
    return Table(
        caption=f"Differences against the baseline ({c.baseline.label.split(':')[0]})",
        headers=[
            "Group",
            "Metric",
            "Statistic",
            "Baseline",
            "Group value",
            "Difference [95% CI]",
            "p",
            "p (Holm)",
            "Effect",
            "Every run agrees",
            "Significant",
        ],
        rows=rows,
        notes=[
            RULE,
            "CIs of P50/P99 differences: percentile bootstrap stratified by run (requests resampled within "
            "each run). Throughput: one figure per run, Welch's CI and t-test.",
        ],
    )


def normalization_table(c: Comparison) -> Table | None:
    """6.2: output tokens per GPU-second over each group's declared GPU count (the energy block's figure; computed
    for runs written before it held one), and per currency unit where a GPU-hour price was declared too; shown
    where GPUs were declared or the hardware differs."""
    differ = len({str(r.info.sut.hardware) for g in c.groups for r in g.runs}) > 1
    if not differ and not any(r.gpus for g in c.groups for r in g.runs):
        return None
    rows = []
    for g in c.groups:
        per_gpu = [v for r in g.runs if (v := r.tok_per_gpu_s) is not None]
        if len(per_gpu) < len(g.runs):
            rows.append([g.label, "not declared (give --gpus)", "n/a", "n/a"])
            continue
        per_money = [v * 3600 / r.gpu_price for r in g.runs if r.gpu_price and (v := r.tok_per_gpu_s) is not None]
        priced = per_money if len(per_money) == len(g.runs) else None
        gpus = ", ".join(sorted({str(r.gpus) for r in g.runs}))
        rows.append([g.label, gpus, _ci(per_gpu), _ci(priced) if priced else "no price declared (--gpu-price)"])
    notes = [
        "Method: output tokens per GPU-second over the GPUs declared (--gpus; the run's energy block); x 3600 / "
        "--gpu-price per currency unit."
    ]
    if differ:
        notes.append("The hardware differs between the groups: the IETF draft (section 6.2) compares these figures.")
    return Table(
        caption="Normalization (the IETF draft, section 6.2): output tokens per GPU-second and per currency-hour",
        headers=["Group", "GPUs", "tok per GPU-s", "tok per currency unit (GPU-hour price)"],
        rows=rows,
        notes=notes,
    )


def findings_table(findings: list[Finding], caption: str) -> Table:
    return Table(
        caption=caption,
        headers=["Section", "Requirement", "Status", "Reason"],
        rows=[[f.section + (" MUST" if f.must else ""), f.text, f.status, f.reason] for f in findings],
    )


def comparison_tables(c: Comparison) -> list[Table]:
    tables = [
        groups_table(c),
        findings_table(c.equivalence, "Equivalence (draft 6.1)"),
        means_table(c),
        significance_table(c),
    ]
    norm = normalization_table(c)
    if norm is not None:
        tables.append(norm)
    tables.append(findings_table(c.checklist, "Fair comparison checklist (draft 6.4)"))
    return tables


def comparison_charts(c: Comparison, prefix: str = "") -> list[Chart]:
    """Per metric, each group's tail (the share of samples at or above a value, on a log axis, so that P99 and beyond
    are visible), and each run's P99 per group."""
    charts = []
    for metric in ("ttft", "itl", "tpot"):
        traces = [cdf_trace(g.label, g.pooled(metric), tail=True) for g in c.groups if len(g.pooled(metric))]
        if traces:
            charts.append(
                Chart(
                    id=f"{prefix}compare-{metric}-cdf",
                    title=f"{metric_label(c, metric)}: share of samples at or above each value (each group's runs "
                    "pooled)",
                    x_title=metric_label(c, metric),
                    panels=["share at or above (log)"],
                    y_log=True,
                    traces=traces,
                )
            )
    traces = []
    for g in c.groups:  # one trace a group: each run's P99 of each metric, beside the other groups'
        x: list[float | str | None] = []
        y: list[float | str | None] = []
        for metric in ("ttft", "itl", "tpot"):
            p99 = [float(np.quantile(r.samples[metric], 0.99)) for r in g.runs if len(r.samples[metric])]
            x += [f"{metric_label(c, metric).removesuffix(' (ms)')} P99"] * len(p99)
            y += [round(v, 3) for v in p99]
        traces.append(Trace(name=g.label, kind="markers", x=x, y=y))
    charts.append(
        Chart(
            id=f"{prefix}compare-p99-per-run",
            title="P99 of each run, by group: the run-to-run spread",
            x_title="metric",
            panels=["P99 (ms)"],
            traces=traces,
        )
    )
    return charts


def comparison_text(c: Comparison, title: str = "") -> str:
    parts = [f"=== infermeter compare{': ' + title if title else ''} ==="]
    for t in comparison_tables(c):
        parts.append(render(t))
    if c.notes:
        parts.append("Notes:\n" + "\n".join(f"- {n}" for n in c.notes))
    if c.limitations:
        parts.append("Limitations:\n" + "\n".join(f"- {lim}" for lim in c.limitations))
    sig = [r for r in c.rows if r.significant]
    verdict = (
        "Significant differences: "
        + "; ".join(
            f"{r.group.split(':')[0]} {metric_label(c, r.metric)} {r.statistic.split(' ')[0]} "
            f"{r.diff:+.2f} ({fmt_num((r.relative or 0) * 100, 1)}%)"
            for r in sig
            if r.diff is not None
        )
        if sig
        else "No significant difference on any metric."
    )
    parts.append(verdict)
    return "\n\n".join(parts)


def comparison_document(comparisons: list[tuple[str, Comparison]]) -> Document:
    """The full report of a comparison (Appendix C.2 laid out over section 6)."""
    first = comparisons[0][1]
    infos = [r.info for g in first.groups for r in g.runs]
    ident = [
        f"{g.label}: model {g.runs[0].info.sut.model or 'not declared'}, hardware "
        f"{g.runs[0].info.sut.hardware or 'not declared'}, boundary {g.runs[0].info.sut.boundary or 'not declared'}"
        for g in first.groups
    ]
    config = [
        f"Workload: {infos[0].workload.name} (seed {infos[0].workload.seed})",
        f"Load: {infos[0].load.description}",
        f"Runs compared: {len(infos)}",
        "Measured: " + "; ".join(dict.fromkeys(measured_text(i) or "not declared" for i in infos)),
    ]
    detail = []
    for i, (title, c) in enumerate(comparisons):
        detail.append(
            Section(
                title or "Comparison",
                tables=comparison_tables(c),
                charts=comparison_charts(c, prefix=f"{i}-"),
                bullets=[*c.notes, *(f"limitation: {lim}" for lim in c.limitations)],
            )
        )
    results = []
    for title, c in comparisons:
        sig = [r for r in c.rows if r.significant]
        results.append(
            (f"{title}: " if title else "")
            + (
                f"{len(sig)} significant difference(s): "
                + "; ".join(
                    f"{r.group.split(':')[0]} {metric_label(c, r.metric)} {r.statistic.split(' ')[0]}" for r in sig
                )
                if sig
                else "no significant difference on any metric"
            )
        )
    compliance = [
        f"{(title + ': ') if title else ''}{f.section} {f.text}: {f.status} ({f.reason})"
        for title, c in comparisons
        for f in [*c.equivalence, *c.checklist]
    ]
    return Document(
        title="infermeter comparison (IETF draft, section 6)",
        sections=[
            Section("1. System Identification", ident),
            Section("2. Test Configuration", config),
            Section("3. Results", [*results, RULE]),
            Section("4. Detailed Results", subsections=detail),
            Section("5. Methodology Compliance", compliance),
            Section(
                "6. Reproduction",
                ["infermeter compare " + " ".join(str(r.path) for r in [r for g in first.groups for r in g.runs])],
            ),
        ],
    )
