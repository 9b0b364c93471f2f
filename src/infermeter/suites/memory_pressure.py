"""Memory Pressure Behavior (the IETF draft, section 5.8): closed loop at 100/110/125/150% of the concurrent capacity
with long prompts, so that KV memory runs out: completion, preemption and failure rates and TTFT P99 (Table 11),
preemptions from the server's metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.report.tables import fmt_ms, fmt_pct
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
            sm = s.server_metrics
            pre = sm.preemptions.delta if sm is not None and sm.preemptions is not None else None
            per_req = pre / s.requests.total if pre is not None and s.requests.total else None
            fail = s.requests.failed / s.requests.total if s.requests.total else None
            rows.append(
                [
                    f"{pct}%" + (" (base)" if pct == 100 else ""),
                    str(c),
                    fmt_pct(s.requests.success_rate),
                    "not reported" if pre is None else f"{pre:.0f} ({per_req:.2f}/request)",
                    fmt_pct(fail),
                    fmt_ms(s.ttft_ms.p99),
                ]
            )
            figures[f"preemptions_{pct}"] = pre
            figures[f"completion_{pct}"] = s.requests.success_rate
        table = Table(
            caption="Table 11: Memory Pressure Degradation",
            headers=["Oversub Level", "Concurrency", "Complete", "Preemptions", "Fail Rate", "TTFT P99"],
            rows=rows,
            notes=[
                "preemptions: the server's preemption counter over the level (vllm:num_preemptions); "
                "the share of requests preempted at least once, their recovery and the tokens discarded "
                "per preemption need per-request counts the server does not export"
            ],
        )
        findings = [f"base concurrency {measured['base']} from {measured['source']}"]
        findings += [f"{r[0]}: {r[3]} preemptions, {r[2]} completed" for r in rows]
        return Analysis(tables=[table], findings=findings, figures=figures)

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: MemoryParams, quick: bool
    ) -> list[Requirement]:
        runs: list[Run] = [r for _, _, r in measured["runs"]]
        shortest = min((r.summary.duration_s for r in runs), default=0.0)
        known = all(
            r.summary.server_metrics is not None and r.summary.server_metrics.preemptions is not None for r in runs
        )
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
                False,
                "per-request preemption counts are not exported by the server",
            ),
        ]


SUITE = MemoryPressureSuite()
