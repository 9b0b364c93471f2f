"""The twin: calibrate the engine model against the server over HTTP, then at 30/60/90% of the capacity the model
predicts, predict each run on the virtual clock and measure it on the real server with the same requests and send
times; the relative error per metric and load, judged against a stated tolerance.  Against the embedded emulator
the truth is known (its configuration), so the calibrated parameters are also held against the true ones."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import numpy as np
from pydantic import Field

from infermeter.chart import Chart, Trace
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig, load_engine_config, save_engine_config
from infermeter.metrics.summary_model import Stats, Summary
from infermeter.report.calibration import findings as calibration_findings
from infermeter.report.calibration import parameter_table, policy_table, quality_table
from infermeter.report.tables import fmt_ms
from infermeter.sim.predict import INTERVAL_NOTE, METRICS, FigureInterval, trust, unreliable
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.charts import COLORS
from infermeter.suites.common import headline, not_verifiable, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run

if TYPE_CHECKING:
    from infermeter.metrics.columns import RecordColumns
    from infermeter.sim.simulator import SimOutcome, SimTask

ENGINE_FILE = "engine.yaml"
PREDICTED = "predicted"
JUDGED = ("TTFT", "ITL")  # their P50 carry the verdict; every metric of METRICS is reported
IN_BAND = ("TTFT", "ITL", "TPOT")  # the metrics whose P50 the intervals are judged by
TWIN_HEADERS = ["Load", "Metric", "Predicted", "Measured", "Error", "Within", "Interval", "Inside", "Calibration"]


class TwinParams(SuiteParams):
    loads: Annotated[list[int], Flag("loads in % of the predicted capacity", checks.int_list(1, 200))] = Field(
        default_factory=lambda: [30, 60, 90]
    )
    workload: Annotated[str, Flag("standard workload name or workload file", checks.WORKLOAD)] = "synthetic-uniform"
    input_tokens: Annotated[
        int | None, Flag("fixed prompt length instead of the workload's", checks.integer(1, 10**6))
    ] = None
    output_tokens: Annotated[
        int | None, Flag("fixed output length instead of the workload's", checks.integer(1, 10**6))
    ] = None
    requests: Annotated[int, Flag("requests per load", checks.REQUESTS)] = 200
    tolerance: Annotated[
        float, Flag("largest relative error of a predicted P50 (TTFT, ITL), in %", checks.number(0, 1000, lo_open=True))
    ] = 10.0
    quick_probe: Annotated[bool, Flag("calibrate with the short probe (under a minute)")] = False
    max_prompt: Annotated[
        int | None, Flag("longest prompt the calibration sends, in tokens", checks.integer(16, 10**7))
    ] = None
    engine: Annotated[
        Path | None, Flag("an engine file calibrated earlier (skips the probe)", checks.ENGINE_CONFIG_FILE)
    ] = None

    QUICK: ClassVar[dict[str, Any]] = {"requests": 80, "quick_probe": True}


@dataclass
class Point:
    pct: int
    rate: float
    predicted: Summary
    measured: Run
    ttft_paired_error: float | None = None  # median over requests of each one's relative TTFT error
    intervals: list[FigureInterval] | None = None  # None: the calibration held nothing out (no error band)

    def interval(self, metric: str, q: int) -> FigureInterval | None:
        return next((i for i in self.intervals or () if i.metric == metric and i.q == q), None)


@dataclass
class Measured:
    engine: EngineConfig
    truth: EngineConfig | None
    capacity: float
    points: list[Point]


def workload_fields(params: TwinParams) -> dict[str, Any]:
    if params.input_tokens is not None or params.output_tokens is not None:
        return {"input_tokens": params.input_tokens, "output_tokens": params.output_tokens}
    return {"workload": params.workload}


def calibrated_engine(lab: Lab, params: TwinParams) -> EngineConfig:
    """The engine file in the suite's directory (a resumed suite keeps its calibration), else a probe's fit."""
    path = lab.out / ENGINE_FILE
    if params.engine is not None:
        return load_engine_config(params.engine)
    if path.is_file():
        lab.console.print(f"calibration: reused {path}", highlight=False)
        return load_engine_config(path)
    from infermeter.event_loop import run_async
    from infermeter.load.target import resolve_target
    from infermeter.sim.probe_engine import engine_from_probe
    from infermeter.suites.calibration import FULL, QUICK, probe_server

    endpoint = lab.endpoint()
    url, sut, metrics_url = endpoint
    t = lab.base.target
    cfg = run_async(resolve_target(t, endpoint)).client
    plan = QUICK if params.quick_probe else FULL
    plan = plan.capped(params.max_prompt) if params.max_prompt is not None else plan
    lab.console.print(f"calibration: probing {url} (at most {plan.budget_s:.0f} s)", highlight=False)
    say = lambda line: lab.console.print(f"  {line}", highlight=False)  # noqa: E731
    tokenizer = lab.base.workload.tokenizer
    probe = run_async(probe_server(cfg, plan, t.backend, tokenizer, sut.get("tokenizer"), say, metrics_url))
    engine = engine_from_probe(probe)
    lab.out.mkdir(parents=True, exist_ok=True)
    save_engine_config(engine, path)
    return engine


def capacity_task(engine: EngineConfig, params: TwinParams, seed: int) -> SimTask:
    """The simulation behind the predicted capacity: the whole workload arriving at once."""
    from infermeter.sim import SimTask
    from infermeter.workload.build import build_requests

    f = workload_fields(params)
    reqs, _ = build_requests(max(params.requests, 200), seed, f.get("workload"), f.get("input_tokens"),
                             f.get("output_tokens"))  # fmt: skip
    return SimTask(reqs, engine, 1, seed)


def predicted_capacity(out: SimOutcome) -> float:
    """Completed requests per second when the whole workload arrives at once: the most the model can carry."""
    return float(out.served().sum() / out.end_time) if out.end_time > 0 else 0.0


def prediction_task(engine: EngineConfig, params: TwinParams, rate: float, seed: int) -> tuple[SimTask, dict[str, Any]]:
    """The simulation of the requests a live run at `rate` sends, and their workload declaration."""
    from infermeter.sim import SimTask
    from infermeter.workload.build import arrival_spec, build_requests

    f = workload_fields(params)
    reqs, declaration = build_requests(
        params.requests, seed, f.get("workload"), f.get("input_tokens"), f.get("output_tokens"),
        arrivals=arrival_spec("poisson", rate, 1.0),
    )  # fmt: skip
    return SimTask(reqs, engine, 1, seed), declaration


def write_prediction(lab: Lab, key: str, out: SimOutcome, declaration: dict[str, Any], seed: int) -> Summary:
    """A prediction's run directory, written beside the measured runs."""
    from infermeter.sim import write_sim_run

    run_dir = lab.out / PREDICTED / key
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    return write_sim_run(out, run_dir, declaration, seed)


class TwinSuite:
    name = "twin"
    section = "twin"
    reference = "infermeter's wind tunnel: the engine model calibrated over HTTP, predictions held against runs"
    title = "Wind tunnel against the server"
    summary = "calibrate the engine model over HTTP, then predict and measure at 30/60/90% of capacity"
    params = TwinParams
    takes_dataset = False  # its predictions are drawn from the workload by name: a dataset's runs would not match

    def emulator(self, params: TwinParams) -> EmulatorConfig:
        return EmulatorConfig()

    def procedure(self, lab: Lab, params: TwinParams) -> Measured:
        from infermeter.metrics.columns import RecordColumns
        from infermeter.sim import simulate_task
        from infermeter.sim.predict import bound_engines, figure_intervals
        from infermeter.sim.run import outcome_summary

        engine = calibrated_engine(lab, params)
        seed = lab.base.workload.seed
        loads = sorted(set(params.loads))
        ends = bound_engines(engine)
        with lab.simulations() as tasks:  # dask tasks with --workers / --cluster
            capacity = predicted_capacity(next(iter(tasks(simulate_task, [capacity_task(engine, params, seed)]))))
            rates = [float(f"{capacity * pct / 100:.4g}") for pct in loads]
            # each load its own seed: other prompts, so a server's prefix cache holds none of an earlier load's
            planned = [prediction_task(engine, params, rate, seed + i) for i, rate in enumerate(rates)]
            band = [replace(task, config=end) for task, _ in planned for end in ends or ()]
            outcomes = list(tasks(simulate_task, [task for task, _ in planned] + band))
        outcomes, banded = outcomes[: len(planned)], outcomes[len(planned) :]
        points = []
        for i, (pct, rate, outcome, (_, declaration)) in enumerate(zip(loads, rates, outcomes, planned, strict=True)):
            key = f"load-{pct}pct"
            run_seed = seed + i
            predicted = write_prediction(lab, key, outcome, declaration, run_seed)
            intervals = None
            if banded:
                low, high = (outcome_summary(o, declaration, run_seed) for o in banded[2 * i : 2 * i + 2])
                intervals = figure_intervals(predicted, low, high, unreliable(engine.calibration))
            work = {**workload_fields(params), "seed": run_seed}
            cfg = lab.config(workload=work, load={"rate": rate, "requests": params.requests})
            run = lab.run(key, f"{pct}% of the predicted capacity: {rate:g} req/s", cfg)
            paired = paired_ttft_error(RecordColumns.of_run(lab.out / PREDICTED / key), run.columns())
            points.append(Point(pct, rate, predicted, run, paired, intervals))
        truth = lab.emulator.engine if lab.embedded and lab.emulator is not None and params.engine is None else None
        if truth is not None and lab.emulator is not None and lab.emulator.speed != 1.0:
            truth = None  # a sped-up emulator's true costs are its model's divided by the speed
        return Measured(engine, truth, capacity, points)

    def analyze(self, measured: Measured, params: TwinParams) -> Analysis:
        cal = measured.engine.calibration
        tables: list[Table] = []
        findings = [f"predicted capacity {measured.capacity:.3g} req/s (the whole workload at once, simulated)"]
        if cal is not None:
            headers, rows = parameter_table(cal, measured.truth)
            tables.append(Table(caption="Calibrated engine model", headers=headers, rows=rows, notes=cal.notes))
            headers, rows = quality_table(cal)
            tables.append(
                Table(caption="Fit quality: probes held out of each fit", headers=headers, rows=rows,
                      notes=[f"warning: {w}" for w in cal.warnings])
            )  # fmt: skip
            headers, rows = policy_table(cal)
            tables.append(Table(caption="Scheduling policy fits", headers=headers, rows=rows))
            findings += calibration_findings(cal, measured.engine)
            findings += [f"not seen from outside: {x}" for x in cal.unseen]
            findings += [f"warning (calibration): {w}" for w in cal.warnings]
        rows = []
        figures: dict[str, float | bool | None] = {"capacity_rps": measured.capacity}
        trusted = trust(cal)
        caveat = unreliable(cal)
        figures["calibration_unreliable"] = caveat is not None
        if caveat is not None:
            findings.insert(0, f"every predicted figure is {caveat}")
        for p in measured.points:
            for label, field in METRICS.items():
                for q in (50, 99):
                    pred = getattr(p.predicted, field).percentile(q)
                    meas = getattr(p.measured.summary, field).percentile(q)
                    error = relative_error(pred, meas)
                    bound = params.tolerance if q == 50 else 2 * params.tolerance
                    band = p.interval(label, q)
                    inside = None if band is None else band.holds(meas)
                    rows.append([
                        f"{p.pct}% ({p.rate:g} req/s)", f"{label} P{q}", fmt_ms(pred), fmt_ms(meas),
                        "-" if error is None else f"{error:+.1%}",
                        "-" if error is None else ("yes" if abs(error) * 100 <= bound else "no"),
                        "-" if band is None or band.low is None else f"{fmt_ms(band.low)} - {fmt_ms(band.high)}",
                        "-" if inside is None else ("yes" if inside else "no"),
                        trusted,
                    ])  # fmt: skip
                    figures[f"{label.lower()}_p{q}_error_{p.pct}"] = error
                    if inside is not None:
                        figures[f"{label.lower()}_p{q}_inside_{p.pct}"] = inside
            e = p.ttft_paired_error
            within = "-" if e is None else ("yes" if abs(e) * 100 <= params.tolerance else "no")
            rows.append([f"{p.pct}% ({p.rate:g} req/s)", "TTFT per request (median)", "-", "-",
                         "-" if e is None else f"{e:+.1%}", within, "-", "-", trusted])  # fmt: skip
            figures[f"ttft_paired_error_{p.pct}"] = e
        tables.append(
            Table(
                caption="Predicted against measured, per load",
                headers=TWIN_HEADERS,
                rows=rows,
                notes=[
                    f"within: P50 +-{params.tolerance:g}%, P99 +-{2 * params.tolerance:g}%; the error is "
                    "(predicted - measured) / measured",
                    "TTFT per request: the median over requests of each request's error (the same prompt sent at the "
                    "same time in both): the model's systematic error. Near half a one-at-a-time server's capacity "
                    "the TTFT P50 sits where requests that wait meet those that do not (under Poisson arrivals a "
                    "fraction 1 - utilization finds the server idle), so a few requests crossing over move it by "
                    "tens of percent",
                    INTERVAL_NOTE,
                ],
            )
        )
        units = {"ttft_p50_error_": "share", "itl_p50_error_": "share", "ttft_paired_error_": "share"}
        return Analysis(
            tables=tables,
            findings=findings,
            figures=figures,
            headline=headline(figures, units),
            charts=[twin_chart(measured)],
        )

    def requirements(
        self, measured: Measured, analysis: Analysis, params: TwinParams, quick: bool
    ) -> list[Requirement]:
        out = []
        for label in JUDGED:
            errs = {p.pct: analysis.figures.get(f"{label.lower()}_p50_error_{p.pct}") for p in measured.points}
            worst = max((abs(e) for e in errs.values() if isinstance(e, float)), default=None)
            out.append(
                requirement(
                    "MUST",
                    "twin",
                    f"predicted {label} P50 within {params.tolerance:g}% of the measured at every load",
                    worst is not None and worst * 100 <= params.tolerance,
                    ", ".join(f"{k}%: {'-' if not isinstance(e, float) else f'{e:+.1%}'}" for k, e in errs.items()),
                )
            )
        paired = {p.pct: p.ttft_paired_error for p in measured.points}
        worst_paired = max((abs(e) for e in paired.values() if e is not None), default=None)
        out.append(
            requirement(
                "SHOULD",
                "twin",
                f"each request's predicted TTFT within {params.tolerance:g}% of its measured one at the median, at "
                "every load",
                worst_paired is not None and worst_paired * 100 <= params.tolerance,
                ", ".join(f"{k}%: {'-' if e is None else f'{e:+.1%}'}" for k, e in paired.items()),
            )
        )
        out.append(interval_requirement(measured))
        for label in JUDGED:
            p99_errs = [analysis.figures.get(f"{label.lower()}_p99_error_{p.pct}") for p in measured.points]
            worst = max((abs(e) for e in p99_errs if isinstance(e, float)), default=None)
            out.append(
                requirement(
                    "SHOULD",
                    "twin",
                    f"predicted {label} P99 within {2 * params.tolerance:g}% at every load",
                    worst is not None and worst * 100 <= 2 * params.tolerance,
                    "worst " + ("-" if worst is None else f"{worst:.1%}"),
                )
            )
        return out


def interval_requirement(measured: Measured) -> Requirement:
    """Whether every load's measured TTFT, ITL and TPOT P50 fell inside its prediction interval."""
    text = f"measured {', '.join(IN_BAND)} P50 inside the prediction interval at every load"
    if any(p.intervals is None for p in measured.points):
        return not_verifiable(
            "SHOULD", "twin", text, "the calibration held no probe out of its fits: its predictions carry no interval"
        )
    misses, judged = [], 0
    for p in measured.points:
        for label in IN_BAND:
            band = p.interval(label, 50)
            inside = None if band is None else band.holds(getattr(p.measured.summary, METRICS[label]).percentile(50))
            if inside is None:
                continue
            judged += 1
            if not inside:
                misses.append(f"{label} at {p.pct}%")
    if not judged:
        return not_verifiable("SHOULD", "twin", text, "no load measured a P50 to hold against its interval")
    reason = f"{judged - len(misses)} of {judged} inside" + (f"; outside: {', '.join(misses)}" if misses else "")
    return requirement("SHOULD", "twin", text, not misses, reason)


def paired_ttft_error(predicted: RecordColumns, measured: RecordColumns) -> float | None:
    """The median over requests answered in both of (predicted - measured) / measured TTFT, paired by request id."""
    from infermeter.metrics.latency import ttft

    _, i, j = np.intersect1d(predicted.request_id, measured.request_id, return_indices=True)
    pred, meas = ttft(predicted)[i], ttft(measured)[j]
    keep = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    return float(np.median((pred[keep] - meas[keep]) / meas[keep])) if keep.any() else None


def relative_error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None or not measured or not np.isfinite(predicted):
        return None
    return (predicted - measured) / measured


def twin_chart(measured: Measured) -> Chart:
    """TTFT and ITL P50/P99 against load, predicted (dashed) and measured (solid)."""
    x = [float(p.rate) for p in measured.points]
    traces = []
    for row, (label, field) in enumerate((("TTFT", "ttft_ms"), ("ITL", "itl_ms")), start=1):
        for q in (50, 99):
            for kind, get, dash in (
                ("measured", lambda p: p.measured.summary, False),
                ("predicted", lambda p: p.predicted, True),
            ):
                stats: list[Stats] = [getattr(get(p), field) for p in measured.points]
                traces.append(
                    Trace(name=f"{label} P{q} {kind}", x=x, y=[s.percentile(q) for s in stats], row=row,
                          color=COLORS[float(q)], dash=dash)
                )  # fmt: skip
    return Chart(
        id="twin",
        title="Predicted (dashed) and measured (solid) latency against load",
        x_title="arrival rate (req/s)",
        panels=["TTFT (ms)", "ITL (ms)"],
        traces=traces,
        note=f"predicted capacity {measured.capacity:.3g} req/s",
    )


SUITE = TwinSuite()
