"""The console report of a test suite, laid out as the IETF draft's Appendix C.2 full report: system identification,
test configuration, results, detailed results (the test's tables), methodology compliance, reproduction."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.report.console import ITL_OPTION_NAMES, counting_text, itl_name, warmup_text
from infermeter.report.document import Section
from infermeter.report.endpoint import captioned, measured_text
from infermeter.report.tables import grid
from infermeter.run_info import RunInfo
from infermeter.suite_result import SuiteResult, Table

NOT_DECLARED = "not declared"
QUICK_BANNER = (
    "--quick: durations and counts are scaled down for a demonstration; the figures show the effect, and the "
    "verdict cannot be compliant"
)


def _distinct(values: Sequence[object]) -> str:
    seen = list(dict.fromkeys(str(v) for v in values if v is not None))
    return "; ".join(seen) if seen else NOT_DECLARED


def _system(infos: Sequence[RunInfo]) -> list[str]:
    sut = [i.sut for i in infos]
    return [
        "1. System Identification",
        f"- Model: {_distinct([s.model for s in sut])}",
        f"- Hardware: {_distinct([s.hardware for s in sut])}",
        f"- Software: {_distinct([s.software for s in sut])}",
        f"- SUT Boundary: {_distinct([s.boundary for s in sut])}",
        f"- Target: {_distinct(['embedded emulator' if i.kind == 'emulated' else i.sut.url for i in infos])}",
    ]


def _measured(infos: Sequence[RunInfo]) -> str | None:
    """The endpoint every run of the suite measured (run.json's client), or None when they differ or name none."""
    seen = {measured_text(i) for i in infos}
    return seen.pop() if len(seen) == 1 else None


def _tables(result: SuiteResult, infos: Sequence[RunInfo]) -> list[Table]:
    """The suite's tables, each caption naming the endpoint its runs measured (when they all measured one)."""
    measured = _measured(infos)
    return [t.model_copy(update={"caption": captioned(t.caption, measured)}) for t in result.analysis.tables]


def _span(values: Sequence[int | None]) -> str:
    got = sorted(v for v in values if v is not None)
    return "?" if not got else f"{got[0]:,}" if got[0] == got[-1] else f"{got[0]:,}-{got[-1]:,}"


def _warmups(infos: Sequence[RunInfo]) -> str:
    """Every run's warm-up in one line: how many were warmed up and how much, and any cold start (4.5.3)."""
    if len(infos) == 1:
        return warmup_text(infos[0].warmup)
    warm = [i.warmup for i in infos if i.warmup.done and not i.warmup.cold_start]
    cold = sum(bool(i.warmup.cold_start) for i in infos)
    parts = []
    if warm:
        own = sorted({w.workload for w in warm if w.workload})
        parts.append(
            f"done in {len(warm)} of {len(infos)} runs ({_span([w.requests for w in warm])} requests, "
            f"{_span([w.output_tokens for w in warm])} output tokens"
            + (f"; sent: {'; '.join(own)}" if own else "")
            + ")"
        )
    if cold:
        parts.append(f"none in {cold} of {len(infos)}: COLD START measured (draft 4.5.3)")
    if left := len(infos) - len(warm) - cold:
        parts.append(f"not completed in {left} of {len(infos)}")
    return "; ".join(parts)


def requests_per_run(result: SuiteResult, infos: Sequence[RunInfo]) -> str:
    """What each run sent (suite.json's runs[].sent), with what it planned (run.json's load.requests) beside it where
    the two differ: a run bounded by a duration, or stopped early, sends fewer than it generated."""
    planned = [i.load.requests for i in infos]
    sent = [r.sent for r in result.runs]
    if len(sent) != len(infos) or all(s is None for s in sent):
        return f"{_distinct(planned)} planned (suite.json does not say how many were sent)"

    def one(plan: int | None, did: int | None) -> str | None:
        if did is None:
            return None if plan is None else f"{plan:,} planned, sent not recorded"
        return f"{did:,}" if plan is None or plan == did else f"{plan:,} planned, {did:,} sent"

    return _distinct([one(p, d) for p, d in zip(planned, sent, strict=True)])


def _configuration(result: SuiteResult, infos: Sequence[RunInfo]) -> list[str]:
    first = infos[0]
    lines = [
        "2. Test Configuration",
        f"- Workloads: {_distinct([i.workload.name for i in infos])} "
        f"(seed {_distinct([i.workload.seed for i in infos])})",
        f"- Content: {_distinct([i.workload.content for i in infos])}",
        f"- Runs: {len(infos)}; load per run: {_distinct([i.load.description for i in infos][:3])}"
        + (" ..." if len({i.load.description for i in infos}) > 3 else ""),
        f"- Requests per run: {requests_per_run(result, infos)}",
        f"- Warm-up: {_warmups(infos)}",
        f"- Prefix caching: {_distinct([i.sut.prefix_caching for i in infos])}",
        f"- Guardrails: {_distinct([i.sut.guardrails for i in infos])}",
        f"- {counting_text(first.tokenizer)}",
        f"- {' / '.join(sorted({itl_name(i.itl_option) for i in infos}))} measured with "
        f"{_distinct([ITL_OPTION_NAMES[i.itl_option] for i in infos])}",
        f"- Clock: {first.clock}; synchronization: {_distinct([i.sut.clock_sync for i in infos])}",
    ]
    if any(i.client is not None for i in infos):  # simulated runs name no endpoint
        lines.insert(1, f"- Measured: {_distinct([measured_text(i) for i in infos])}")
    rtt = [i.network.rtt_ms_median if i.network is not None else None for i in infos]
    if any(r is not None for r in rtt):
        got = [r for r in rtt if r is not None]
        lines.append(f"- Network RTT (TCP connect, median per run): {min(got):.3f}-{max(got):.3f} ms (not subtracted)")
    params = ", ".join(f"{k}={v}" for k, v in result.params.items())
    lines.append(f"- Setup parameters: {params}")
    return lines


def suite_report(result: SuiteResult, infos: Sequence[RunInfo]) -> str:
    """The whole report as text; `infos` are the runs' run.json in the order the suite ran them."""
    head = f"=== infermeter test {result.suite}: {result.title} ({result.reference}) ==="
    lines = [head, ""]
    if result.quick:
        lines += [QUICK_BANNER, ""]
    if infos:
        lines += [*_system(infos), "", *_configuration(result, infos), ""]
    lines.append("3. Results")
    lines += [f"- {f}" for f in result.analysis.findings] or ["- (no results)"]
    lines += [f"- note: {n}" for n in result.analysis.notes]
    lines += ["", "4. Detailed Results", ""]
    for table in _tables(result, infos):
        lines += [grid(table.headers, table.rows, table.caption)]
        lines += [f"  {n}" for n in table.notes]
        lines.append("")
    for plot in result.analysis.plots:
        lines += [plot, ""]
    lines.append("5. Methodology Compliance")
    rows = [[r.level, r.section, r.text, r.status, r.reason] for r in result.requirements]
    lines += [grid(["Level", "Section", "Requirement", "Status", "Reason"], rows), ""]
    lines.append(f"Verdict: {result.verdict} ({result.reference}; the IETF draft's section 2 defines the verdicts)")
    reused = sum(r.reused for r in result.runs)
    lines += [
        "",
        "6. Reproduction",
        f"- Command: {result.command}",
        f"- Suite directory: {result.directory} (suite.json, suite-settings.json, runs/*/run.json)",
        f"- Runs: {len(result.runs)}" + (f", {reused} reused from an earlier start" if reused else ""),
        "",
        "=== End Report ===",
    ]
    return "\n".join(lines)


def compliance_table(result: SuiteResult) -> Table:
    """Section 5 of the report: each MUST and SHOULD, met or not, with the reason."""
    rows = [[r.level, r.section, r.text, r.status, r.reason] for r in result.requirements]
    return Table(
        caption=f"Verdict: {result.verdict} ({result.reference}; the IETF draft's section 2 defines the verdicts)",
        headers=["Level", "Section", "Requirement", "Status", "Reason"],
        rows=rows,
    )


def suite_sections(result: SuiteResult, infos: Sequence[RunInfo]) -> list[Section]:
    """The report's six sections as a Document's (the console text above draws the same content)."""

    def bullets(lines: list[str]) -> list[str]:
        return [ln.removeprefix("- ") for ln in lines[1:]]

    reused = sum(r.reused for r in result.runs)
    findings = list(result.analysis.findings) or ["(no results)"]
    return [
        Section("1. System Identification", bullets(_system(infos)) if infos else ["(no runs)"]),
        Section("2. Test Configuration", bullets(_configuration(result, infos)) if infos else []),
        Section("3. Results", findings + [f"note: {n}" for n in result.analysis.notes]),
        Section("4. Detailed Results", tables=_tables(result, infos), charts=list(result.analysis.charts)),
        Section(f"5. Methodology Compliance: {result.verdict}", tables=[compliance_table(result)]),
        Section(
            "6. Reproduction",
            [
                f"Command: {result.command}",
                f"Suite directory: {result.directory} (suite.json, suite-settings.json, runs/*/run.json)",
                f"Runs: {len(result.runs)}" + (f", {reused} reused from an earlier start" if reused else ""),
                f"Started {result.started_at}, finished {result.finished_at}",
            ],
        ),
    ]
