"""Scheduling Fairness (the IETF draft, section 5.6): short and long request classes, each alone at the same total
load, then mixed; per-class TTFT and TPOT with P95 columns (Table 8), latency inflation per class, Jain's index over
normalized latency and starvation (Table 9)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import numpy as np

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.metrics.latency import tpot, ttft
from infermeter.report.chart import Chart
from infermeter.report.tables import fmt_ms, fmt_num, fmt_pct
from infermeter.suites.charts import box_trace
from infermeter.suites.common import at_least, requirement
from infermeter.suites.framework import Analysis, Requirement, SuiteParams, Table
from infermeter.suites.lab import Lab, Run
from infermeter.units import MS_PER_S
from infermeter.workload.distributions import Uniform
from infermeter.workload.spec import RequestClass, WorkloadSpec

EMULATOR_RATE = 8.0  # req/s: about 80% of the prefill capacity of emulator() with this mix
PREFILL_BUDGET = 512  # prompt tokens per prefill step: prompts queue for their step, in the scheduler's order
PREFILL_S_PER_TOKEN = 1.5e-4  # a slow prefill, so that a long prompt holds the engine for a noticeable time


def _classes(quick: bool) -> dict[str, RequestClass]:
    """The draft's classes (5.6.2); --quick shortens the outputs four times (the inputs, which decide head-of-line
    blocking, stay as the draft defines them)."""
    scale = 4 if quick else 1
    return {
        "short": RequestClass(
            name="short", weight=1.0, input=Uniform(min=64, max=256), output=Uniform(min=32 // scale, max=128 // scale)
        ),
        "long": RequestClass(
            name="long",
            weight=1.0,
            input=Uniform(min=1024, max=4096),
            output=Uniform(min=256 // scale, max=1024 // scale),
        ),
    }


class FairnessParams(SuiteParams):
    rate: Annotated[float | None, Flag("total load, req/s (the draft: 70-90% of saturation)", checks.RATE)] = None
    short_share: Annotated[float, Flag("share of short requests in the mix", checks.number(0, 1, lo_open=True))] = 0.8
    requests: Annotated[int, Flag("requests of the mixed run (the draft: >= 500 per class)", checks.REQUESTS)] = 2500
    isolated_requests: Annotated[int, Flag("requests of each class's isolated run", checks.REQUESTS)] = 500
    isolated_load: Annotated[
        Literal["total", "share"],
        Flag(
            "each class alone at the mix's total rate (the draft) or at its own share of it (when the total rate of "
            "long requests alone would saturate the server)",
            checks.choice("total", "share"),
        ),
    ] = "total"

    QUICK: ClassVar[dict[str, Any]] = {"requests": 120, "isolated_requests": 120, "isolated_load": "share"}


def _pct(values: np.ndarray, p: float) -> float | None:
    v = values[np.isfinite(values)]
    return float(np.percentile(v, p)) if len(v) else None


class FairnessSuite:
    name = "fairness"
    section = "5.6"
    reference = "IETF draft, section 5.6"
    title = "Scheduling Fairness"
    summary = "short and long classes alone and mixed: inflation, Jain's index, starvation (Tables 8-9)"
    params = FairnessParams

    def emulator(self, params: FairnessParams) -> EmulatorConfig:
        """Continuous batching, first come first served: a long prompt's prefill step stalls every other request."""
        engine = EngineConfig.model_validate(
            {
                "scheduler": {"name": "continuous", "max_batched_tokens": PREFILL_BUDGET},
                "iteration_model": {"per_prefill_token": PREFILL_S_PER_TOKEN},
            }
        )
        return EmulatorConfig(engine=engine, prefix_caching=False)

    def procedure(self, lab: Lab, params: FairnessParams) -> dict[str, Run]:
        if params.rate is None and not lab.embedded:
            raise UserError("give the total load: --rate R (the draft: 70-90% of the saturation rate)")
        rate = params.rate or EMULATOR_RATE
        quick = params.requests < 500
        classes = _classes(quick)
        runs: dict[str, Run] = {}
        shares = {"short": params.short_share, "long": 1 - params.short_share}
        for name, cls in classes.items():
            spec = WorkloadSpec(name=f"fairness-{name}", purpose="the draft 5.6 class alone", classes=[cls])
            share = 1.0 if params.isolated_load == "total" else shares[name]
            alone = float(f"{rate * share:.4g}")
            n = params.isolated_requests if share == 1.0 else max(20, round(params.isolated_requests * share))
            cfg = lab.config(
                workload={"workload": lab.workload(f"{name}-alone", spec)}, load={"rate": alone, "requests": n}
            )
            runs[name] = lab.run(f"{name}-alone", f"{name} requests alone at {alone:g} req/s", cfg)
        mix = WorkloadSpec(
            name="fairness-mix",
            purpose="the draft 5.6 mix",
            classes=[
                classes["short"].model_copy(update={"weight": params.short_share}),
                classes["long"].model_copy(update={"weight": 1 - params.short_share}),
            ],
        )
        cfg = lab.config(
            workload={"workload": lab.workload("mix", mix)}, load={"rate": rate, "requests": params.requests}
        )
        runs["mix"] = lab.run("mix", f"mixed classes at {rate:g} req/s", cfg)
        return runs

    def analyze(self, runs: dict[str, Run], params: FairnessParams) -> Analysis:
        mix = runs["mix"]
        cols = mix.columns()
        t, p = ttft(cols) * MS_PER_S, tpot(cols) * MS_PER_S
        rows, inflation_rows, figures = [], [], {}
        for name in ("short", "long"):
            member = cols.request_class == name
            rows.append(
                [
                    name,
                    str(int(member.sum())),
                    *[fmt_ms(_pct(t[member], q)) for q in (50, 95, 99)],
                    *[fmt_ms(_pct(p[member], q)) for q in (50, 95, 99)],
                ]
            )
            alone = runs[name].summary.ttft_ms
            mixed50, mixed95 = _pct(t[member], 50), _pct(t[member], 95)
            inf50 = mixed50 / alone.p50 if mixed50 and alone.p50 else None
            inf95 = mixed95 / alone.p95 if mixed95 and alone.p95 else None
            inflation_rows.append(
                [
                    name,
                    fmt_ms(alone.p50),
                    fmt_ms(mixed50),
                    fmt_num(inf50),
                    fmt_ms(alone.p95),
                    fmt_ms(mixed95),
                    fmt_num(inf95),
                ]
            )
            figures[f"{name}_inflation_p50"] = inf50
            figures[f"{name}_inflation_p95"] = inf95
        f = mix.summary.fairness
        table9 = [["Jain's Fairness Index", fmt_num(f.jain_index)]]
        table9 += [[f"{n.capitalize()} Class Starvation", fmt_pct(r)] for n, r in f.starvation.items()]
        figures["jain_index"] = f.jain_index
        tables = [
            Table(
                caption="Table 8: Per-Class Results (mixed workload)",
                headers=["Class", "Count", "TTFT P50", "TTFT P95", "TTFT P99", "TPOT P50", "TPOT P95", "TPOT P99"],
                rows=rows,
            ),
            Table(
                caption="Table 9: Fairness Metrics",
                headers=["Metric", "Value"],
                rows=table9,
                notes=[
                    f"Jain's index over normalized latency; starvation: waiting > 5x the class median ({f.wait_metric})"
                ],
            ),
            Table(
                caption="Latency inflation: mixed TTFT / isolated TTFT (draft 5.6.4), each class alone "
                + ("at the mix's total rate" if params.isolated_load == "total" else "at its share of the mix's rate"),
                headers=["Class", "Alone P50", "Mixed P50", "Inflation P50", "Alone P95", "Mixed P95", "Inflation P95"],
                rows=inflation_rows,
            ),
        ]
        scheduler = mix.info.sut.software or "the server's scheduler"
        findings = [
            f"{r[0]} requests: TTFT inflated x{r[3]} (P50) and x{r[6]} (P95) in the mix" for r in inflation_rows
        ]
        verdict = "significant unfairness" if (f.jain_index or 1) < 0.9 else "fair"
        findings.append(f"Jain's index {fmt_num(f.jain_index)} ({verdict} by the draft's 0.9 line), {scheduler}")
        return Analysis(tables=tables, findings=findings, figures=figures, charts=[self._chart(runs)])

    @staticmethod
    def _chart(runs: dict[str, Run]) -> Chart:
        """Each class's TTFT and TPOT alone and in the mix, as boxes (P5, P25, P50, P75, P95)."""
        traces = []
        mix = runs["mix"].columns()
        for name, color in (("short", "#1f77b4"), ("long", "#d62728")):
            alone = runs[name].columns()
            member = mix.request_class == name
            for cond, cols, pick in (("alone", alone, alone.ok), ("mixed", mix, member)):
                for row, (metric, values) in enumerate((("TTFT", ttft(cols)), ("TPOT", tpot(cols))), start=1):
                    box = box_trace(f"{name} {cond}: {metric}", f"{name} {cond}", values[pick] * MS_PER_S, row, color)
                    if box is not None:
                        traces.append(box)
        return Chart(
            id="fairness-classes",
            title="Each class alone and in the mix (draft 5.6): TTFT and TPOT",
            x_title="class and condition",
            panels=["TTFT (ms)", "TPOT (ms)"],
            traces=traces,
            note="Boxes span P25-P75 with the median; whiskers reach P5 and P95.",
        )

    def requirements(
        self, runs: dict[str, Run], analysis: Analysis, params: FairnessParams, quick: bool
    ) -> list[Requirement]:
        cols = runs["mix"].columns()
        per_class = min(int((cols.request_class == n).sum()) for n in ("short", "long"))
        return [
            at_least("MUST", "5.6.2", "at least 500 requests per class", per_class, 500, "requests (fewer class)"),
            at_least(
                "MUST",
                "5.6.3",
                "the mix runs for at least 300 seconds",
                round(runs["mix"].summary.duration_s, 1),
                300,
                "s",
            ),
            requirement(
                "MUST",
                "5.6.3",
                "each class measured alone at the same total load",
                params.isolated_load == "total",
                "each class alone at the mix's rate"
                if params.isolated_load == "total"
                else "each class alone at its own share of the rate (--isolated-load share)",
            ),
            requirement(
                "MUST",
                "5.6.2",
                "Synthetic-Skewed classes: short and long as the draft defines them",
                not quick,
                "the draft's classes" if not quick else "--quick shortens the outputs 4x",
            ),
        ]


SUITE = FairnessSuite()
