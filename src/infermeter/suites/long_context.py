"""Long Context Scaling (the IETF draft, section 5.9): context lengths in ascending order at low closed-loop
concurrency, exact-length prompts, TTFT per length, ms per 1K tokens, the scaling exponent k of TTFT ~ length^k and
a linear against quadratic fit (Table 12)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import Field

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.metrics.curves import ScalingFit, scaling_fit
from infermeter.report.chart import Chart, Trace
from infermeter.report.tables import fmt_ms
from infermeter.suites.common import at_least, requirement
from infermeter.suites.framework import Analysis, Requirement, SuiteParams, Table
from infermeter.suites.lab import Lab, Run
from infermeter.workload.distributions import MAX_LENGTH, Fixed
from infermeter.workload.spec import RequestClass, WorkloadSpec


class LongContextParams(SuiteParams):
    lengths: Annotated[list[int], Flag("context lengths in tokens, ascending", checks.int_list(16, MAX_LENGTH))] = (
        Field(default_factory=lambda: [1024 * 2**i for i in range(8)])
    )
    max_context: Annotated[
        int | None, Flag("the model's context window; longer lengths are skipped", checks.integer(16, MAX_LENGTH))
    ] = None
    requests: Annotated[int, Flag("requests per length (the draft: >= 20)", checks.integer(1, 100_000))] = 20
    concurrency: Annotated[int, Flag("closed-loop concurrency (the draft: 1-4)", checks.integer(1, 64))] = 1
    output_tokens: Annotated[int, Flag("fixed output length (the draft: 256)", checks.integer(1, 100_000))] = 256

    QUICK: ClassVar[dict[str, Any]] = {"lengths": [1024, 2048, 4096, 8192], "requests": 4, "output_tokens": 8}


def _chart(runs: list[tuple[int, Run]], fit: ScalingFit) -> Chart:
    """TTFT against context length: the measured mean and P50 per length, the linear and quadratic fits of the mean."""
    lengths = [float(n) for n, _ in runs]
    grid = np.linspace(min(lengths), max(lengths), 50) if lengths else np.empty(0)
    traces = [  # the mean drawn last of the two: where they coincide, the fitted one shows
        Trace(
            name="TTFT P50 (measured)",
            kind="markers",
            x=lengths,
            y=[r.summary.ttft_ms.p50 for _, r in runs],
            color="#bbbbbb",
        ),
        Trace(
            name="TTFT mean (measured)",
            kind="markers",
            x=lengths,
            y=[r.summary.ttft_ms.mean for _, r in runs],
            color="#1f77b4",
        ),
    ]
    for name, f, color in (("linear fit", fit.linear, "#2ca02c"), ("quadratic fit", fit.quadratic, "#d62728")):
        y = np.polynomial.polynomial.polyval(grid, f.coefficients)
        traces.append(
            Trace(
                name=f"{name} of the mean (R^2 {f.r2:.4f})",
                kind="line",
                x=[round(v, 1) for v in grid],
                y=[round(float(v), 3) for v in y],
                color=color,
                dash=name != fit.best + " fit",
            )
        )
    return Chart(
        id="long-context-scaling",
        title="TTFT against context length (draft 5.9)",
        x_title="context length (input tokens)",
        panels=["TTFT (ms)"],
        traces=traces,
        note=f"{fit.describe()}; the better fit is drawn solid.",
    )


class LongContextSuite:
    name = "long-context"
    section = "5.9"
    reference = "IETF draft, section 5.9"
    title = "Long Context Scaling"
    summary = "TTFT against context length: Table 12, scaling exponent, linear vs quadratic fit"
    params = LongContextParams

    def emulator(self, params: LongContextParams) -> EmulatorConfig:
        """Chunked prompts whose every chunk attends to the context already held: prefill cost grows with the square
        of the length, as attention's does."""
        engine = EngineConfig.model_validate(
            {
                "scheduler": {"name": "chunked_prefill", "token_budget": 512},
                "iteration_model": {"per_context_token": 1e-5},
            }
        )
        return EmulatorConfig(engine=engine, prefix_caching=False)

    def lengths(self, lab: Lab, params: LongContextParams) -> tuple[list[int], list[int]]:
        given = sorted(set(checks.flat(params.lengths) if isinstance(params.lengths[0], list) else params.lengths))
        cap = params.max_context or (lab.emulator.max_model_len if lab.emulator is not None else None)
        if cap is None:
            raise UserError("give the model's context window: --max-context N (lengths beyond it are skipped)")
        kept = [n for n in given if n + params.output_tokens <= cap]
        if len(kept) < 3:
            raise UserError(f"fewer than 3 lengths fit in the context of {cap} tokens: give shorter --lengths")
        return kept, [n for n in given if n not in kept]

    def procedure(self, lab: Lab, params: LongContextParams) -> dict[str, Any]:
        kept, skipped = self.lengths(lab, params)
        runs = []
        for n in kept:
            cfg = lab.config(
                workload={"workload": lab.workload(f"long-context-{n}", self.workload(n, params))},
                load={"concurrency": params.concurrency, "requests": params.requests},
            )
            runs.append((n, lab.run(f"length-{n}", f"{n} tokens of context", cfg)))
        return {"runs": runs, "skipped": skipped}

    def workload(self, n: int, params: LongContextParams) -> WorkloadSpec:
        """One length of the Long Context workload (A.5): a document of n - ~100 tokens, then a question about it."""
        return WorkloadSpec(
            name=f"long-context-{n}",
            purpose="long-context scaling (IETF draft, section 5.9 and A.5)",
            content="document-question",
            classes=[RequestClass(input=Fixed(value=n), output=Fixed(value=params.output_tokens))],
            notes=[f"A.5.1: [document][question], {n} tokens in all; output fixed at {params.output_tokens} tokens"],
        )

    def analyze(self, measured: dict[str, Any], params: LongContextParams) -> Analysis:
        runs: list[tuple[int, Run]] = measured["runs"]
        rows, xs, ys = [], [], []
        for n, run in runs:
            s = run.summary
            mean = s.ttft_ms.mean
            rows.append(
                [
                    str(n),
                    fmt_ms(mean),
                    fmt_ms(s.ttft_ms.p50),
                    fmt_ms(s.ttft_ms.p95),
                    f"{mean / n * 1024:.1f}" if mean else "n/a",
                    f"{s.throughput.output_tok_s:.1f}",
                ]
            )
            if mean:
                xs.append(float(n))
                ys.append(float(mean))
        fit = scaling_fit(xs, ys)
        per_token_us = fit.linear.coefficients[1] * 1000
        findings = [fit.describe(), f"~{per_token_us:.1f} microseconds per input token (linear fit's slope)"]
        notes = [f"skipped beyond the context window: {measured['skipped']}"] if measured["skipped"] else []
        table = Table(
            caption="Table 12: Long Context Scaling",
            headers=["Context (tokens)", "TTFT Mean", "TTFT P50", "TTFT P95", "ms/1K tokens", "Output tok/s"],
            rows=rows,
            notes=[
                f"{params.requests} requests per length at closed-loop concurrency {params.concurrency}, "
                f"{params.output_tokens} output tokens each"
            ],
        )
        figures: dict[str, Any] = {
            "k": fit.k,
            "best_fit": fit.best,
            "linear_r2": fit.linear.r2,
            "quadratic_r2": fit.quadratic.r2,
            "f_p": fit.f_p,
        }
        figures.update({f"ttft_mean_ms_{n}": y for n, y in zip(xs, ys, strict=True)})
        return Analysis(tables=[table], findings=findings, figures=figures, notes=notes, charts=[_chart(runs, fit)])

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: LongContextParams, quick: bool
    ) -> list[Requirement]:
        runs: list[tuple[int, Run]] = measured["runs"]
        fewest = min((r.summary.requests.ok for _, r in runs), default=0)
        lengths = [n for n, _ in runs]
        documents = bool(runs) and all(
            (r.info.workload.spec or {}).get("content") == "document-question" for _, r in runs
        )  # the workload's content kind, not its description (which may be worded otherwise in a later release)
        return [
            at_least(
                "MUST", "5.9.2", "at least 20 requests per context length", fewest, 20, "requests (fewest length)"
            ),
            requirement(
                "MUST",
                "5.9.2",
                "closed loop at low concurrency (1-4)",
                1 <= params.concurrency <= 4,
                f"concurrency {params.concurrency}",
            ),
            requirement("MUST", "5.9.3", "lengths in ascending order", lengths == sorted(lengths), "ascending"),
            requirement(
                "SHOULD",
                "5.9.2",
                "a fixed output of 256 tokens",
                params.output_tokens == 256,
                f"{params.output_tokens} output tokens",
            ),
            requirement("MUST", "5.9.4", "the scaling exponent and the fits are reported", True, analysis.findings[0]),
            requirement(
                "MUST",
                "5.9.2",
                "the Long Context workload (document + question prompts)",
                documents,
                "document + question prompts (A.5.1)" if documents else "some runs sent other prompts than A.5.1's",
            ),
        ]


SUITE = LongContextSuite()
