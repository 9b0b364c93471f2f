"""The report of suites compared (the IETF draft's section 6 over a section-5 test): the systems, each matched
level's comparison (report.comparison), the suite figures with their CIs and test or as plain differences, and the
levels one suite alone ran; and the figures of one suite repeated (`infermeter test NAME --repeat N`)."""

from __future__ import annotations

from infermeter.metrics.comparison import ALPHA, MIN_EFFECT, MIN_RUNS, Comparison
from infermeter.metrics.significance import MeanCI
from infermeter.metrics.suite_comparison import (
    FigureComparison,
    FigureSummary,
    Matching,
    System,
    figure_label,
    name,
)
from infermeter.report.comparison import comparison_document, comparison_text, fmt_p, fmt_value, render
from infermeter.report.document import Document, Section
from infermeter.report.suite import QUICK_BANNER, suite_sections
from infermeter.run_info import RunInfo
from infermeter.suite_result import SuiteResult, Table

FIGURE_RULE = (
    f"significant: Welch's t-test over the repeats rejects at {ALPHA:g} after Holm's correction across the figures "
    f"of this table (a family of its own, apart from each level's), the difference is at least {MIN_EFFECT:.0%}, "
    "and each repeat of one system lies beyond each of the other"
)
MATCHED_BY = {
    "level": "by their place in the plan (suite.json's level)",
    "key": "by their keys (suite.json without levels, or naming a level twice)",
    "position": "by their position in the plan (suite.json without levels, and keys that differ between suites)",
}


def fmt_mean(m: MeanCI) -> str:
    if m.mean is None:
        return "n/a"
    if m.lo is None or m.hi is None:
        return f"{fmt_value(m.mean)} (1 suite)"
    return f"{fmt_value(m.mean)} [{fmt_value(m.lo)}, {fmt_value(m.hi)}] ({m.n} suites)"


def systems_table(systems: list[System], baseline: int) -> Table:
    return Table(
        caption="Systems: a suite, or the repeats of one (--repeat)",
        headers=["System", "Directory", "Test", "Suites (repeats)"],
        rows=[
            [name(i) + (" (baseline)" if i == baseline else ""), s.label, s.test, str(len(s.repeats))]
            for i, s in enumerate(systems)
        ],
    )


def figures_table(fc: FigureComparison) -> Table:
    """Each headline figure of each system against the baseline."""
    rows = []
    for r in fc.rows:
        d = r.difference
        ci = f" [{fmt_value(d.lo)}, {fmt_value(d.hi)}]" if d.lo is not None and d.hi is not None else ""
        tested = d.p is not None
        rows.append(
            [
                name(r.system),
                figure_label(r.name, r.unit),
                fmt_mean(r.a),
                fmt_mean(r.b),
                f"{d.diff:+.2f}{ci}",
                f"{r.relative:+.1%}" if r.relative is not None else "n/a",
                fmt_p(d.p) if tested else "n/a (< 2 suites a side)",
                fmt_p(r.p_adjusted) if tested else "n/a",
                "n/a" if r.repeats_agree is None else "yes" if r.repeats_agree else "no",
                ("significant" if r.significant else "no") if tested else "not testable",
            ]
        )
    notes = [FIGURE_RULE, *fc.notes]
    if fc.missing:
        notes.append("not compared (a figure one side lacks): " + "; ".join(fc.missing))
    return Table(
        caption=f"Suite figures against the baseline ({name(fc.baseline)}): mean over repeats [95% CI]",
        headers=[
            "System",
            "Figure (unit)",
            "Baseline",
            "System value",
            "Difference [95% CI]",
            "Change",
            "p (Welch)",
            "p (Holm)",
            "Every repeat agrees",
            "Significant",
        ],
        rows=rows,
        notes=notes,
    )


def unmatched_lines(matching: Matching) -> list[str]:
    """The levels one system alone ran: listed, not compared."""
    return [
        f"level '{lv.name}': only {name(i)} ran it ({'; '.join(r.label for r in runs)})"
        for lv in matching.unmatched
        for i, runs in lv.runs.items()
    ]


def suite_comparison_text(
    systems: list[System],
    baseline: int,
    matching: Matching,
    comparisons: list[tuple[str, Comparison]],
    figures: FigureComparison,
) -> str:
    """The whole comparison as console text: the systems, each level's comparison, the suite figures, the
    unmatched levels."""
    test = systems[0].test
    parts = [
        f"=== infermeter compare: {len(systems)} '{test}' suites, levels matched {MATCHED_BY[matching.by]} ===",
        render(systems_table(systems, baseline)),
    ]
    if matching.notes:
        parts.append("Notes:\n" + "\n".join(f"- {n}" for n in matching.notes))
    parts += [comparison_text(c, title) for title, c in comparisons]
    parts.append(f"=== infermeter compare: the '{test}' suites' figures ===\n\n" + render(figures_table(figures)))
    unmatched = unmatched_lines(matching)
    if unmatched:
        parts.append("Levels not compared (one system alone ran them):\n" + "\n".join(f"- {u}" for u in unmatched))
    return "\n\n".join(parts)


def suite_comparison_document(
    systems: list[System],
    baseline: int,
    matching: Matching,
    comparisons: list[tuple[str, Comparison]],
    figures: FigureComparison,
) -> Document:
    """The full report: the levels' comparisons (Appendix C.2 over section 6), then the suite figures."""
    doc = comparison_document(comparisons) if comparisons else Document("infermeter comparison", [])
    doc.title = f"infermeter comparison of '{systems[0].test}' suites (IETF draft, section 6)"
    doc.sections.insert(
        0,
        Section(
            "Systems",
            [f"levels matched {MATCHED_BY[matching.by]}", *matching.notes],
            tables=[systems_table(systems, baseline)],
        ),
    )
    figures_section = Section("Suite figures", bullets=unmatched_lines(matching), tables=[figures_table(figures)])
    reproduction = Section("6. Reproduction", ["infermeter compare " + " ".join(s.label for s in systems)])
    kept = [s for s in doc.sections if not s.title.startswith("6. Reproduction")]
    at = next((i for i, s in enumerate(kept) if s.title.startswith("5. ")), len(kept))  # after the detailed results
    doc.sections = [*kept[:at], figures_section, *kept[at:], reproduction]
    return doc


def repeats_text(summaries: list[FigureSummary], repeats: int) -> str:
    """After `infermeter test NAME --repeat N`: each figure's mean and 95% CI over the repeats."""
    lines = [f"=== over {repeats} repeats: each suite figure's mean [95% CI, Student t] ==="]
    for s in summaries:
        m = s.stats
        value = f"{fmt_value(m.mean)} [{fmt_value(m.lo)}, {fmt_value(m.hi)}]" if m.lo is not None else fmt_value(m.mean)
        some = f" (in {m.n} of the {repeats} repeats)" if m.n < repeats else ""
        lines.append(f"- {figure_label(s.name, s.unit)}: {value}{some}")
    if repeats < MIN_RUNS:
        lines.append(f"- note: the IETF draft's section 6.3 asks for at least {MIN_RUNS} independent runs")
    return "\n".join(lines)


def repeats_document(done: list[tuple[SuiteResult, list[RunInfo]]], summaries: list[FigureSummary]) -> Document:
    """The full report of a suite repeated: the figures over the repeats, then each repeat's report (its charts
    renamed so that one page holds them all)."""
    first = done[0][0]
    repeats = []
    for k, (result, infos) in enumerate(done, 1):
        sections = suite_sections(result, infos)
        for s in sections:
            s.charts = [c.model_copy(update={"id": f"repeat-{k}-{c.id}"}) for c in s.charts]
        repeats.append(Section(f"Repeat {k}: {result.directory} ({result.verdict})", subsections=sections))
    return Document(
        title=f"infermeter test {first.suite} repeated {len(done)} times: {first.title} ({first.reference})",
        banners=[QUICK_BANNER] if first.quick else [],
        sections=[
            Section(
                "Figures over the repeats",
                [ln.removeprefix("- ") for ln in repeats_text(summaries, len(done)).splitlines()[1:]],
            ),
            *repeats,
        ],
    )
