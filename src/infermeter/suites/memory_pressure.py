"""Memory Pressure Behavior (the IETF draft, section 5.8): closed loop at 100/110/125/150% of the concurrent capacity
with long prompts, so that KV memory runs out: completion, preemption, recovery and failure rates, tokens lost per
preemption and TTFT P99 (Table 11), preemptions from the server's metrics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.report.chart import Chart, Trace
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suites.charts import percentile_traces
from infermeter.suites.common import at_least, from_flag, requirement
from infermeter.suites.framework import Analysis, Requirement, SuiteParams, Table
from infermeter.suites.lab import Lab, Run
from infermeter.suites.tradeoff import from_suite

EMULATOR_KV = 16384  # tokens: the emulator's KV cache holds 7 requests of 2048 + 64 tokens


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

    QUICK: ClassVar[dict[str, Any]] = {"duration": 4.0}


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

    def base(self, lab: Lab, params: MemoryParams) -> tuple[int, str]:
        if params.capacity is not None:
            return params.capacity, "given (--capacity)"
        if params.from_ is not None:
            return int(from_suite(params.from_, "max_concurrency")), f"the capacity test in {params.from_}"
        if lab.embedded and lab.emulator is not None:
            per = params.input_tokens + params.output_tokens
            return max(
                1, lab.emulator.engine.capacity() // per
            ), f"the emulator's KV capacity / {per} tokens per request"
        raise UserError("give the concurrent capacity: --capacity N, or --from DIR of a `capacity` test")

    def procedure(self, lab: Lab, params: MemoryParams) -> dict[str, Any]:
        base, source = self.base(lab, params)
        runs = []
        levels = sorted(set(checks.flat(params.levels) if isinstance(params.levels[0], list) else params.levels))
        for pct in levels:
            c = max(1, round(base * pct / 100))
            cfg = lab.config(
                workload={"input_tokens": params.input_tokens, "output_tokens": params.output_tokens},
                load={"concurrency": c, "duration": params.duration},
            )
            runs.append((pct, c, lab.run(f"oversub-{pct}pct", f"{pct}% of capacity: concurrency {c}", cfg)))
        return {"base": base, "source": source, "runs": runs}

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
        return Analysis(tables=[table], findings=findings, figures=figures, charts=[chart])

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: MemoryParams, quick: bool
    ) -> list[Requirement]:
        runs: list[Run] = [r for _, _, r in measured["runs"]]
        shortest = min((r.summary.duration_s for r in runs), default=0.0)
        measures = [_preemption(r) for r in runs]
        known = all(m.events is not None for m in measures)
        detailed = all((m.rate is not None and m.loss is not None) or m.events == 0 for m in measures)
        return [
            at_least("MUST", "5.8.3", "at least 120 seconds per level", round(shortest, 1), 120, "s (shortest)"),
            requirement(
                "MUST", "5.8.3", "the base is the maximum concurrency of section 5.5", True, analysis.findings[0]
            ),
            requirement(
                "MUST",
                "5.8.4",
                "preemption events monitored",
                known,
                "from the server's metrics" if known else "the server exports no preemption counter",
            ),
            requirement(
                "SHOULD",
                "5.8.4",
                "preemption rate, recovery rate and tokens lost per preemption",
                detailed,
                "from the server's per-request preemption counters (Table 11)"
                if detailed
                else "the server exports preemption events only, not which requests they hit or what they discarded",
            ),
        ]


SUITE = MemoryPressureSuite()
