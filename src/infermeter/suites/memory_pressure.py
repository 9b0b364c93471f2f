"""Memory Pressure Behavior (the IETF draft, section 5.8): closed loop at 100/110/125/150% of the concurrent capacity
(section 5.5's maximum: from a `capacity` test, or its search run here against the embedded emulator) with long
prompts, so that KV memory runs out: completion, preemption, recovery and failure rates, tokens lost per preemption and
TTFT P99 (Table 11), preemptions from the server's metrics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from infermeter.chart import Chart, Trace
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.charts import percentile_traces
from infermeter.suites.common import at_least, from_flag, headline, requirement
from infermeter.suites.concurrency import SUITE as CAPACITY
from infermeter.suites.concurrency import CapacityParams
from infermeter.suites.execute import load_result
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.suites.tradeoff import from_suite

EMULATOR_KV = 16384  # tokens: the emulator's KV cache holds 7 requests of 2048 + 256 tokens


class MemoryParams(SuiteParams):
    capacity: Annotated[
        int | None, Flag("the maximum concurrency (5.5) to oversubscribe", checks.integer(1, 100_000))
    ] = None
    from_: Annotated[Path | None, from_flag("a `capacity` suite directory whose maximum is the base")] = None
    levels: Annotated[list[int], Flag("oversubscription levels in %", checks.int_list(100, 1000))] = Field(
        default_factory=lambda: [100, 110, 125, 150]
    )
    input_tokens: Annotated[int, Flag("prompt length (long, to pressure KV memory)", checks.integer(1, 10_000_000))] = (
        2048
    )
    output_tokens: Annotated[int, Flag("output length", checks.integer(1, 100_000))] = 256
    duration: Annotated[float, Flag("seconds per level (the draft: >= 120)", checks.SECONDS)] = 120.0
    ttft_p99: Annotated[
        float,
        Flag("the 5.5 search's TTFT P99 threshold in ms, when it runs here", checks.number(0, 3.6e6, lo_open=True)),
    ] = 1000.0

    QUICK: ClassVar[dict[str, Any]] = {"duration": 4.0}


@dataclass(frozen=True)
class Base:
    """The concurrency the levels oversubscribe, where it came from, and whether that is section 5.5's maximum
    (None: given by the user, so the runs cannot show it)."""

    concurrency: int
    source: str
    from_5_5: bool | None


NOT_REPORTED = "not reported"


@dataclass(frozen=True)
class Preemption:
    """Draft 5.8.4's preemption measurements at one level, None where the server does not report them."""

    events: float | None
    rate: float | None  # requests preempted at least once / requests
    recovery: float | None  # of those, the share that finished
    loss: float | None  # tokens discarded per preemption event


def _preemption(run: Run) -> Preemption:
    sm, total = run.summary.server_metrics, run.summary.requests.total
    if sm is None:
        return Preemption(None, None, None, None)
    events = sm.preemptions.delta if sm.preemptions is not None else None
    preempted = sm.preempted_requests.delta if sm.preempted_requests is not None else None
    finished = sm.preempted_finished.delta if sm.preempted_finished is not None else None
    tokens = sm.preempted_tokens.delta if sm.preempted_tokens is not None else None
    rate = min(preempted / total, 1.0) if preempted is not None and total else None
    recovery = min(finished / preempted, 1.0) if finished is not None and preempted else None
    loss = tokens / events if tokens is not None and events else None
    return Preemption(events, rate, recovery, loss)


class MemoryPressureSuite:
    name = "memory-pressure"
    section = "5.8"
    reference = "IETF draft, section 5.8"
    title = "Memory Pressure Behavior"
    summary = "oversubscription at 100-150% of capacity: completion, preemption, failure (Table 11)"
    params = MemoryParams

    def emulator(self, params: MemoryParams) -> EmulatorConfig:
        engine = EngineConfig.model_validate(
            {"scheduler": {"name": "continuous", "max_num_seqs": 64}, "kv_capacity_tokens": EMULATOR_KV}
        )
        return EmulatorConfig(engine=engine, prefix_caching=False)

    def base(self, lab: Lab, params: MemoryParams) -> Base:
        if params.capacity is not None:
            return Base(params.capacity, "given (--capacity): not measured by the 5.5 test here", None)
        if params.from_ is not None:
            result = load_result(params.from_)
            if result.suite != "capacity":
                raise UserError(f"--from {params.from_} holds a '{result.suite}' test: give a `capacity` (5.5) test")
            return Base(int(from_suite(params.from_, "max_concurrency")), f"the 5.5 test in {params.from_}", True)
        if lab.embedded:
            search = CapacityParams.build(
                {
                    "input_tokens": params.input_tokens,
                    "output_tokens": params.output_tokens,
                    "ttft_p99": params.ttft_p99,
                    "initial_concurrency": 4,
                },
                lab.quick,
            )
            probes = CAPACITY.procedure(lab, search)
            best = max((p.concurrency for p in probes if not p.why), default=None)
            if best is None:
                raise UserError("the 5.5 search found no concurrency meeting its criteria: give --capacity N")
            return Base(best, f"the 5.5 search run in this suite ({len(probes)} levels)", True)
        raise UserError("give the concurrent capacity: --capacity N, or --from DIR of a `capacity` test")

    def procedure(self, lab: Lab, params: MemoryParams) -> dict[str, Any]:
        found = self.base(lab, params)
        base, source = found.concurrency, found.source
        runs = []
        levels = sorted(set(params.levels))
        for pct in levels:
            c = max(1, round(base * pct / 100))
            cfg = lab.config(
                workload={"input_tokens": params.input_tokens, "output_tokens": params.output_tokens},
                load={"concurrency": c, "duration": params.duration},
            )
            label = f"{pct}% of capacity: concurrency {c}"
            runs.append((pct, c, lab.run(f"oversub-{pct}pct", label, cfg, level=f"{pct}%")))
        return {"base": base, "source": source, "from_5_5": found.from_5_5, "runs": runs}

    def analyze(self, measured: dict[str, Any], params: MemoryParams) -> Analysis:
        rows, figures = [], {"base_concurrency": measured["base"]}
        for pct, c, run in measured["runs"]:
            s = run.summary
            p = _preemption(run)
            fail = s.requests.failed / s.requests.total if s.requests.total else None
            rows.append(
                [
                    f"{pct}%" + (" (base)" if pct == 100 else ""),
                    str(c),
                    fmt_pct(s.requests.success_rate),
                    NOT_REPORTED if p.events is None else f"{p.events:.0f}",
                    fmt_pct(p.rate) if p.rate is not None else NOT_REPORTED,
                    fmt_pct(p.recovery) if p.recovery is not None else "n/a" if p.rate == 0 else NOT_REPORTED,
                    f"{p.loss:.0f}" if p.loss is not None else "n/a" if p.events == 0 else NOT_REPORTED,
                    fmt_pct(fail),
                    fmt_ms(s.ttft_ms.p99),
                ]
            )
            figures.update({f"preemptions_{pct}": p.events, f"preempted_share_{pct}": p.rate})
            figures.update({f"recovery_{pct}": p.recovery, f"tokens_lost_{pct}": p.loss})
            figures[f"completion_{pct}"] = s.requests.success_rate
        table = Table(
            caption="Table 11: Memory Pressure Degradation",
            headers=[
                "Oversub Level",
                "Concurrency",
                "Complete",
                "Preemptions",
                "Preempt",
                "Recovered",
                "Tokens lost/preemption",
                "Fail Rate",
                "TTFT P99",
            ],
            rows=rows,
            notes=[
                "Preemptions: the server's preemption events over the level (vllm:num_preemptions); Preempt: the "
                "share of requests preempted at least once; Recovered: the share of those that finished; tokens "
                "lost: KV tokens discarded per preemption (the last three from the emulator's infermeter:preempted_* "
                "counters; vLLM does not export them)"
            ],
        )
        findings = [f"base concurrency {measured['base']} from {measured['source']}"]
        findings += [f"{r[0]}: {r[3]} preemptions ({r[4]} of requests), {r[2]} completed" for r in rows]
        pcts = [float(pct) for pct, _, _ in measured["runs"]]
        summaries = [run.summary for _, _, run in measured["runs"]]
        preempted = [_preemption(run).rate for _, _, run in measured["runs"]]
        chart = Chart(
            id="memory-pressure",
            title="Degradation under memory pressure (draft 5.8)",
            x_title="load (% of the concurrent capacity)",
            panels=["share of requests (%)", "TTFT (ms)"],
            traces=[
                Trace(
                    name="completed",
                    kind="lines+markers",
                    x=pcts,
                    color="#2ca02c",
                    y=[None if s.requests.success_rate is None else 100 * s.requests.success_rate for s in summaries],
                ),
                Trace(
                    name="preempted at least once",
                    kind="lines+markers",
                    x=pcts,
                    color="#d62728",
                    y=[None if r is None else 100 * r for r in preempted],
                ),
                *percentile_traces(pcts, summaries, "ttft", 2, (50.0, 99.0)),
            ],
        )
        units = {"base_concurrency": "requests", "completion_": "share", "preempted_share_": "share"}
        return Analysis(
            tables=[table], findings=findings, figures=figures, headline=headline(figures, units), charts=[chart]
        )

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: MemoryParams, quick: bool
    ) -> list[Requirement]:
        runs: list[Run] = [r for _, _, r in measured["runs"]]
        shortest = min((r.summary.duration_s for r in runs), default=0.0)
        measures = [_preemption(r) for r in runs]
        scraped = [r.summary.server_metrics is not None for r in runs]
        known = all(m.events is not None for m in measures)
        detailed = all((m.rate is not None and m.loss is not None) or m.events == 0 for m in measures)
        watched = all(scraped) and bool(runs)
        return [
            at_least("MUST", "5.8.3", "at least 120 seconds per level", round(shortest, 1), 120, "s (shortest)"),
            requirement(
                "MUST",
                "5.8.3",
                "the base is the maximum concurrency of section 5.5",
                measured["from_5_5"],
                f"concurrency {measured['base']}: {measured['source']}",
            ),
            requirement(
                "MUST",
                "5.8.4",
                "preemption events monitored",
                None if watched and not known else watched and known,
                "from the server's metrics"
                if watched and known
                else "the server exports no preemption counter"
                if watched
                else f"the server's metrics were not scraped in {scraped.count(False)} of {len(runs)} levels "
                "(scraping off, or no /metrics): preemption was not monitored",
            ),
            requirement(
                "SHOULD",
                "5.8.4",
                "preemption rate, recovery rate and tokens lost per preemption",
                detailed if watched and known else None,
                "from the server's per-request preemption counters (Table 11)"
                if detailed and watched and known
                else "the server exports preemption events only, not which requests they hit or what they discarded"
                if watched and known
                else "preemption was not monitored",
            ),
        ]


SUITE = MemoryPressureSuite()
