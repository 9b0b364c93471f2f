"""Long Context Scaling (the IETF draft, section 5.9): context lengths in ascending order at low closed-loop
concurrency, exact-length prompts, TTFT per length, ms per 1K tokens, the scaling exponent k of TTFT ~ length^k and
a linear against quadratic fit (Table 12)."""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import Field

from infermeter.chart import Chart, Trace
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.metrics.curves import ScalingFit, scaling_fit
from infermeter.report.tables import fmt_ms
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.common import at_least, headline, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.workload.distributions import MAX_LENGTH, Fixed, Uniform
from infermeter.workload.spec import RequestClass, WorkloadSpec

MIN_FIT_LENGTHS = 3  # distinct lengths a scaling fit needs


class LongContextParams(SuiteParams):
    lengths: Annotated[list[int], Flag("context lengths in tokens, ascending", checks.int_list(16, MAX_LENGTH))] = (
        Field(default_factory=lambda: [1024 * 2**i for i in range(8)])
    )
    max_context: Annotated[
        int | None, Flag("the model's context window; longer lengths are skipped", checks.integer(16, MAX_LENGTH))
    ] = None
    requests: Annotated[int, Flag("requests per length (the draft: >= 20)", checks.integer(1, 100_000))] = 20
    concurrency: Annotated[
        int, Flag("closed-loop concurrency of the TTFT runs (the draft: 1-4)", checks.integer(1, 64))
    ] = 1
    throughput_concurrency: Annotated[
        list[int],
        Flag(
            "concurrencies whose best output rate is each length's throughput (the draft: 1-4)", checks.int_list(1, 64)
        ),
    ] = Field(default_factory=lambda: [1, 2, 3, 4])
    output_tokens: Annotated[int, Flag("fixed output length (the draft: 256)", checks.integer(1, 100_000))] = 256
    warmup_workload: Annotated[
        str | None,
        Flag(
            "the short-context workload each run warms up with (default: input 128-512, output 64-256)", checks.WORKLOAD
        ),
    ] = None

    QUICK: ClassVar[dict[str, Any]] = {"lengths": [1024, 2048, 4096, 8192], "requests": 4}


SHORT = WorkloadSpec(
    name="short-context-warm-up",
    purpose="the IETF draft's 5.9.3: warm up with short-context requests",
    classes=[RequestClass(input=Uniform(min=128, max=512), output=Uniform(min=64, max=256))],
)


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
        of the length, as attention's does (a cheap linear part, so the square shows from 1K tokens on).  That
        context cost is also every decode step's, so the engine runs 8 times faster than its model: 256 tokens after
        an 8K prompt take 3 s, not 22."""
        engine = EngineConfig.model_validate(
            {
                "scheduler": {"name": "chunked_prefill", "token_budget": 512},
                "iteration_model": {"per_context_token": 1e-5, "per_prefill_token": 1e-5},
            }
        )
        return EmulatorConfig(engine=engine, prefix_caching=False, speed=8)

    def lengths(self, lab: Lab, params: LongContextParams) -> tuple[list[int], list[int]]:
        given = sorted(set(params.lengths))
        cap = params.max_context or (lab.emulator.max_model_len if lab.emulator is not None else None)
        if cap is None:
            raise UserError("give the model's context window: --max-context N (lengths beyond it are skipped)")
        kept = [n for n in given if n + params.output_tokens <= cap]
        if len(kept) < 3:
            raise UserError(f"fewer than 3 lengths fit in the context of {cap} tokens: give shorter --lengths")
        return kept, [n for n in given if n not in kept]

    def procedure(self, lab: Lab, params: LongContextParams) -> dict[str, Any]:
        kept, skipped = self.lengths(lab, params)
        warm = params.warmup_workload or lab.workload("short-context-warm-up", SHORT)
        runs: list[tuple[int, Run]] = []
        throughput: dict[int, dict[int, Run]] = {}
        for n in kept:
            work = {"workload": lab.workload(f"long-context-{n}", self.workload(n, params))}
            for c in sorted({params.concurrency, *sorted(set(params.throughput_concurrency))}):
                cfg = lab.config(
                    workload=work, load={"concurrency": c, "requests": max(params.requests, c), "warmup_workload": warm}
                )
                key = f"length-{n}" if c == params.concurrency else f"length-{n}-c{c}"
                run = lab.run(key, f"{n} tokens of context, concurrency {c}", cfg, level=f"{n} tokens c{c}")
                if c == params.concurrency:
                    runs.append((n, run))
                throughput.setdefault(n, {})[c] = run
        return {"runs": runs, "throughput": throughput, "skipped": skipped}

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
        figures: dict[str, Any] = {}
        for n, run in runs:
            s = run.summary
            mean = s.ttft_ms.mean
            best_c, best = max_throughput(measured["throughput"][n])
            rows.append(
                [
                    str(n),
                    fmt_ms(mean),
                    fmt_ms(s.ttft_ms.p50),
                    fmt_ms(s.ttft_ms.p95),
                    f"{mean / n * 1024:.1f}" if mean else "n/a",
                    f"{best:.1f} (c={best_c})",
                ]
            )
            figures[f"max_output_tok_s_{n}"] = best
            if mean:
                xs.append(float(n))
                ys.append(float(mean))
        fit = scaling_fit(xs, ys) if len(xs) >= MIN_FIT_LENGTHS else None
        findings = (
            [fit.describe(), f"~{fit.linear.coefficients[1] * 1000:.1f} microseconds per input token (linear slope)"]
            if fit is not None
            else [f"no scaling fit: {len(xs)} lengths had a measured TTFT, {MIN_FIT_LENGTHS} are needed"]
        )
        notes = [f"skipped beyond the context window: {measured['skipped']}"] if measured["skipped"] else []
        table = Table(
            caption="Table 12: Long Context Scaling",
            headers=["Context (tokens)", "TTFT Mean", "TTFT P50", "TTFT P95", "ms/1K tokens", "Max output tok/s"],
            rows=rows,
            notes=[
                f"TTFT: {params.requests} requests per length at closed-loop concurrency {params.concurrency}, "
                f"{params.output_tokens} output tokens each",
                "max output tok/s: the best of the runs at concurrency "
                + ", ".join(str(c) for c in sorted(set(params.throughput_concurrency)))
                + " (the draft's 5.9.4 throughput at length), at the concurrency shown",
            ],
        )
        if fit is not None:
            figures |= {
                "k": fit.k,
                "best_fit": fit.best,
                "linear_r2": fit.linear.r2,
                "quadratic_r2": fit.quadratic.r2,
                "f_p": fit.f_p,
            }
        figures.update({f"ttft_mean_ms_{n}": y for n, y in zip(xs, ys, strict=True)})
        charts = [_chart(runs, fit)] if fit is not None else []
        units = {"k": "exponent", "ttft_mean_ms_": "ms", "max_output_tok_s_": "tok/s"}
        return Analysis(
            tables=[table],
            findings=findings,
            figures=figures,
            headline=headline(figures, units),
            notes=notes,
            charts=charts,
        )

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: LongContextParams, quick: bool
    ) -> list[Requirement]:
        runs: list[tuple[int, Run]] = measured["runs"]
        every = [r for by in measured["throughput"].values() for r in by.values()]
        fewest = min((r.summary.requests.ok for _, r in runs), default=0)
        by_time = [n for n, r in sorted(runs, key=lambda nr: nr[1].info.started_at)]
        loads = sorted({r.info.load.concurrency for r in every}, key=lambda c: -1 if c is None else c)
        low = bool(every) and all(c is not None and 1 <= c <= 4 for c in loads)
        documents = bool(runs) and all(
            (r.info.workload.spec or {}).get("content") == "document-question" for _, r in runs
        )  # the workload's content kind, not its description (which may be worded otherwise in a later release)
        long_warm = [n for n, r in runs if not short_warmup(r, n)]
        outputs = sorted({int(v) for r in every for v in r.columns().output_tokens[r.columns().ok]})
        k, r2 = analysis.figures.get("k"), analysis.figures.get("linear_r2")
        fitted = isinstance(k, float) and isinstance(r2, float) and math.isfinite(k) and math.isfinite(r2)
        return [
            at_least(
                "MUST", "5.9.2", "at least 20 requests per context length", fewest, 20, "requests (fewest length)"
            ),
            requirement(
                "MUST",
                "5.9.2",
                "closed loop at low concurrency (1-4)",
                low,
                f"concurrency {', '.join(str(c) for c in loads)} (run.json)",
            ),
            requirement(
                "MUST",
                "5.9.3",
                "lengths in ascending order",
                by_time == sorted(by_time),
                "in the order run: " + ", ".join(map(str, by_time)),
            ),
            requirement(
                "MUST",
                "5.9.3",
                "warm-up with short-context requests",
                bool(runs) and not long_warm,
                "every run's warm-up sent prompts shorter than its context"
                if not long_warm
                else f"the warm-up before {', '.join(map(str, long_warm))} tokens was not shorter (or not done)",
            ),
            requirement(
                "SHOULD",
                "5.9.2",
                "a fixed output of 256 tokens",
                outputs == [256],
                f"replies of {', '.join(map(str, outputs[:5]))} tokens" if outputs else "no successful replies",
            ),
            requirement(
                "MUST",
                "5.9.4",
                "the scaling exponent and the fits are reported",
                fitted and len(runs) >= MIN_FIT_LENGTHS,
                analysis.findings[0],
            ),
            requirement(
                "MUST",
                "5.9.2",
                "the Long Context workload (document + question prompts)",
                documents,
                "document + question prompts (A.5.1)" if documents else "some runs sent other prompts than A.5.1's",
            ),
        ]


def max_throughput(by_concurrency: dict[int, Run]) -> tuple[int, float]:
    """The concurrency with the highest output rate at one length, and that rate (tok/s)."""
    c, run = max(by_concurrency.items(), key=lambda cr: cr[1].summary.throughput.output_tok_s)
    return c, run.summary.throughput.output_tok_s


def short_warmup(run: Run, length: int) -> bool:
    """The run warmed up (draft 4.5) with prompts all shorter than its context length (5.9.3)."""
    w = run.info.warmup
    return w.done and w.max_input_tokens is not None and w.max_input_tokens < length


SUITE = LongContextSuite()
