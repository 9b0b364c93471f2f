"""Scheduling Fairness (the IETF draft, section 5.6): the short and long classes of 5.6.2 carved out of the
Synthetic-Skewed workload, stratified so each class has its exact share, each alone at the same total load, then mixed
at 70-90% of the saturation rate (the embedded emulator's measured by a capacity probe); per-class TTFT and TPOT with
P95 columns (Table 8), latency inflation per class, Jain's index over normalized latency and starvation (Table 9)."""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

import numpy as np

from infermeter.chart import Chart
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.metrics.latency import tpot, ttft
from infermeter.report.tables import fmt_ms, fmt_num, fmt_pct
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.charts import box_trace
from infermeter.suites.common import at_least, headline, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.suites.probe import Capacity, emulator_capacity
from infermeter.units import MS_PER_S
from infermeter.workload.distributions import LogNormal
from infermeter.workload.spec import RequestClass, WorkloadSpec
from infermeter.workload.standard import SYNTHETIC_SKEWED

PREFILL_BUDGET = 512  # prompt tokens per prefill step: prompts queue for their step, in the scheduler's order
PREFILL_S_PER_TOKEN = 1.5e-4  # a slow prefill, so that a long prompt holds the engine for a noticeable time
LOAD_SHARE = 0.8  # of the saturation rate, for the embedded emulator (the draft: 70-90%)
LOAD_RANGE = (0.7, 0.9)
MIN_PER_CLASS = 500  # 5.6.2
MIN_SECONDS = 300.0  # 5.6.3
# 5.6.2's classes: (input range, output range) in tokens
BOUNDS = {"short": ((64, 256), (32, 128)), "long": ((1024, 4096), (256, 1024))}


def classes() -> dict[str, RequestClass]:
    """The draft's classes (5.6.2) carved out of Synthetic-Skewed (5.6.2 requires that workload): each class's
    lengths follow Synthetic-Skewed's log-normals truncated to the class's ranges."""
    skewed = SYNTHETIC_SKEWED.classes[0]
    assert isinstance(skewed.input, LogNormal) and isinstance(skewed.output, LogNormal)
    out = {}
    for name, ((imin, imax), (omin, omax)) in BOUNDS.items():
        out[name] = RequestClass(
            name=name,
            weight=1.0,
            input=skewed.input.model_copy(update={"min": imin, "max": imax, "bounds": "truncate"}),
            output=skewed.output.model_copy(update={"min": omin, "max": omax, "bounds": "truncate"}),
        )
    return out


def mix_spec(short_share: float) -> WorkloadSpec:
    """The mixed workload: exactly the short share of requests short and the rest long, in a seeded order."""
    c = classes()
    return WorkloadSpec(
        name="fairness-skewed-mix",
        purpose="the IETF draft's 5.6: Synthetic-Skewed requests in the short and long classes of 5.6.2",
        classes=[
            c["short"].model_copy(update={"weight": short_share}),
            c["long"].model_copy(update={"weight": 1 - short_share}),
        ],
        stratified=True,
        notes=[
            "Each class's lengths are Synthetic-Skewed's (A.2: input log-normal(5.5, 1.0), output log-normal(4.5, "
            "1.2)) truncated to the class's ranges of 5.6.2; class counts are exact shares of the requests."
        ],
    )


class FairnessParams(SuiteParams):
    rate: Annotated[float | None, Flag("total load, req/s (the draft: 70-90% of saturation)", checks.RATE)] = None
    saturation: Annotated[
        float | None,
        Flag("the server's saturation rate on the mix, req/s, to state the load as its share", checks.RATE),
    ] = None
    short_share: Annotated[
        float, Flag("share of short requests in the mix", checks.number(0, 1, lo_open=True, hi_open=True))
    ] = 0.8
    requests: Annotated[
        int, Flag("requests of the mixed run, at least (the draft: >= 500 per class)", checks.REQUESTS)
    ] = 2500
    duration: Annotated[float, Flag("seconds of the mixed run, at least (the draft: >= 300)", checks.SECONDS)] = (
        MIN_SECONDS
    )
    isolated_requests: Annotated[int, Flag("requests of each class's isolated run", checks.REQUESTS)] = 500
    isolated_load: Annotated[
        Literal["total", "share"],
        Flag(
            "each class alone at the mix's total rate (the draft) or at its own share of it (when the total rate of "
            "long requests alone would saturate the server)",
            checks.choice("total", "share"),
        ),
    ] = "total"

    QUICK: ClassVar[dict[str, Any]] = {"requests": 100, "duration": 6.0, "isolated_requests": 24}


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

    def load(self, lab: Lab, params: FairnessParams, mix: dict[str, Any]) -> tuple[float, Capacity | None]:
        """The mix's total rate, and the saturation it is a share of (when known)."""
        if params.saturation is not None:
            sat: Capacity | None = Capacity(params.saturation, "given (--saturation)")
        elif params.rate is None and lab.embedded:
            sat = emulator_capacity(lab, mix, what="the emulator on the mix")
        else:
            sat = None
        if params.rate is not None:
            return params.rate, sat
        if sat is None:
            raise UserError("give the total load: --rate R (the draft: 70-90% of the saturation rate)")
        return float(f"{LOAD_SHARE * sat.rate:.4g}"), sat

    def procedure(self, lab: Lab, params: FairnessParams) -> dict[str, Any]:
        spec = mix_spec(params.short_share)
        mix = {"workload": lab.workload("mix", spec)}
        rate, sat = self.load(lab, params, mix)
        runs: dict[str, Run] = {}
        shares = {"short": params.short_share, "long": 1 - params.short_share}
        for name, cls in classes().items():
            alone_spec = WorkloadSpec(name=f"fairness-{name}", purpose="the draft 5.6 class alone", classes=[cls])
            share = 1.0 if params.isolated_load == "total" else shares[name]
            alone = float(f"{rate * share:.4g}")
            cfg = lab.config(
                workload={"workload": lab.workload(f"{name}-alone", alone_spec)},
                load={"rate": alone, "requests": params.isolated_requests},
            )
            runs[name] = lab.run(
                f"{name}-alone", f"{name} requests alone at {alone:g} req/s", cfg, level=f"{name} alone"
            )
        n = max(params.requests, math.ceil(params.duration * rate))
        cfg = lab.config(workload=mix, load={"rate": rate, "requests": n})
        runs["mix"] = lab.run("mix", f"mixed classes at {rate:g} req/s, {n} requests", cfg, level="mix")
        return {"runs": runs, "rate": rate, "saturation": sat}

    def analyze(self, measured: dict[str, Any], params: FairnessParams) -> Analysis:
        runs: dict[str, Run] = measured["runs"]
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
        sat: Capacity | None = measured["saturation"]
        findings = [
            f"the mix at {measured['rate']:g} req/s"
            + (f", {measured['rate'] / sat.rate:.0%} of the saturation rate ({sat.source})" if sat else "")
        ]
        findings += [
            f"{r[0]} requests: TTFT inflated x{r[3]} (P50) and x{r[6]} (P95) in the mix" for r in inflation_rows
        ]
        verdict = "significant unfairness" if (f.jain_index or 1) < 0.9 else "fair"
        findings.append(f"Jain's index {fmt_num(f.jain_index)} ({verdict} by the draft's 0.9 line), {scheduler}")
        figures["rate_req_s"] = measured["rate"]
        figures["saturation_req_s"] = sat.rate if sat else None
        units = {"short_inflation_": "ratio", "long_inflation_": "ratio", "jain_index": "index"}
        return Analysis(
            tables=tables,
            findings=findings,
            figures=figures,
            headline=headline(figures, units),
            charts=[self._chart(runs)],
        )

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
        self, measured: dict[str, Any], analysis: Analysis, params: FairnessParams, quick: bool
    ) -> list[Requirement]:
        runs: dict[str, Run] = measured["runs"]
        cols = runs["mix"].columns()
        per_class = {n: int((cols.request_class == n).sum()) for n in BOUNDS}
        rate = _rate(runs["mix"])
        alone = {n: _rate(runs[n]) for n in BOUNDS}
        unequal = [n for n, r in alone.items() if r is None or rate is None or abs(r - rate) > 1e-9 * max(rate, 1)]
        outside = out_of_class(runs)
        sat: Capacity | None = measured["saturation"]
        share = rate / sat.rate if sat is not None and rate is not None and sat.rate > 0 else None
        return [
            at_least(
                "MUST", "5.6.2", "at least 500 requests per class", min(per_class.values()), MIN_PER_CLASS,
                "requests (fewer class; " + ", ".join(f"{k} {v}" for k, v in per_class.items()) + ")",
            ),
            at_least(
                "MUST", "5.6.3", "the mix runs for at least 300 seconds", round(runs["mix"].summary.duration_s, 1),
                MIN_SECONDS, "s",
            ),
            requirement(
                "MUST",
                "5.6.3",
                "each class measured alone at the same total load",
                not unequal,
                f"each class alone at the mix's {rate:g} req/s"
                if not unequal and rate is not None
                else "alone at " + ", ".join(f"{n} {alone[n]} req/s" for n in BOUNDS) + f" against the mix's {rate}",
            ),
            requirement(
                "MUST",
                "5.6.2",
                "Synthetic-Skewed requests in the short and long classes as 5.6.2 defines them",
                not outside and _skewed(runs["mix"]),
                "every request's lengths within its class's ranges; lengths from Synthetic-Skewed's log-normals"
                if not outside and _skewed(runs["mix"])
                else (outside or "the mix's lengths are not Synthetic-Skewed's"),
            ),
            requirement(
                "SHOULD",
                "5.6.2",
                "load at 70-90% of the saturation rate",
                None if share is None else LOAD_RANGE[0] <= share <= LOAD_RANGE[1],
                f"{share:.0%} of {sat.rate:g} req/s ({sat.source})"
                if share is not None and sat is not None
                else "the saturation rate is not known: give --saturation R to state the load as its share",
            ),
        ]  # fmt: skip


def _rate(run: Run) -> float | None:
    """The open-loop rate a run was sent at (run.json)."""
    arrivals = run.info.load.arrivals
    return arrivals.rate if arrivals is not None else None


def out_of_class(runs: dict[str, Run]) -> str:
    """Requests whose lengths fall outside their class's 5.6.2 ranges, as a sentence ("" when none do)."""
    bad = []
    for key, run in runs.items():
        cols = run.columns()
        for name, ((imin, imax), (omin, omax)) in BOUNDS.items():
            member = cols.request_class == name
            if key in BOUNDS and key != name:
                continue
            wrong = member & (
                (cols.input_tokens < imin)
                | (cols.input_tokens > imax)
                | (cols.max_tokens < omin)
                | (cols.max_tokens > omax)
            )
            if wrong.any():
                bad.append(f"{int(wrong.sum())} {name} requests of '{key}' outside ({imin}-{imax}, {omin}-{omax})")
    return "; ".join(bad)


def _skewed(run: Run) -> bool:
    """The mix's workload draws each class from Synthetic-Skewed's log-normals (run.json's workload spec)."""
    skewed = SYNTHETIC_SKEWED.classes[0]
    spec = run.info.workload.spec or {}
    got = {c.get("name"): c for c in spec.get("classes", [])}
    for name in BOUNDS:
        c = got.get(name, {})
        for side, ref in (("input", skewed.input), ("output", skewed.output)):
            d = c.get(side, {})
            same = isinstance(ref, LogNormal) and (d.get("mu"), d.get("sigma")) == (ref.mu, ref.sigma)
            if d.get("kind") != "lognormal" or not same:
                return False
    return True


SUITE = FairnessSuite()
