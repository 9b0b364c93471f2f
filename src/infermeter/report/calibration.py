"""The calibration's tables: each fitted parameter with its error and fit quality (and the true value when the
target was infermeter's own emulator), and how well each scheduling policy explains the measurements."""

from __future__ import annotations

from typing import SupportsFloat

from infermeter.engine.calibration import Calibration
from infermeter.engine.config import EngineConfig
from infermeter.report.tables import fmt_ms, grid
from infermeter.sim.predict import INTERVAL_NOTE, FigureInterval
from infermeter.units import MS_PER_S

# parameter -> (display unit, factor from the stored SI value)
UNITS: dict[str, tuple[str, float]] = {
    "s": ("ms", MS_PER_S),
    "s/token": ("us/token", 1e6),
    "s/sequence": ("us/seq", 1e6),
    "s/pair": ("ns/pair", 1e9),
}


def true_value(engine: EngineConfig, parameter: str) -> float:
    """A parameter of an engine configuration by its dotted name (iteration_model.fixed, api_overhead)."""
    value: object = engine
    for part in parameter.split("."):
        value = getattr(value, part)
    if not isinstance(value, SupportsFloat):
        raise TypeError(f"{parameter} is not a number: {value!r}")
    return float(value)


def parameter_table(cal: Calibration, truth: EngineConfig | None = None) -> tuple[list[str], list[list[str]]]:
    headers = ["Parameter", "Fitted", "Std. error", "Fit", "R^2", "Residual RMS", "Held-out error", "Points"]
    if truth is not None:
        headers += ["True", "Error"]
    rows = []
    for p in cal.parameters:
        unit, k = UNITS.get(p.unit, (p.unit, 1.0))
        row = [
            p.parameter,
            f"{p.value * k:.4g} {unit}",
            "-" if p.stderr is None else f"{p.stderr * k:.2g}",
            p.fit,
            "-" if p.r2 is None else f"{p.r2:.4f}",
            "-" if p.residual_rms_ms is None else f"{p.residual_rms_ms:.3f} ms",
            "-" if p.held_out_rms is None else f"{p.held_out_rms:.1%}",
            str(p.points),
        ]
        if truth is not None:
            true = true_value(truth, p.parameter)
            row += [
                f"{true * k:.4g} {unit}",
                f"{(p.value - true) / true:+.1%}" if true else "-",
            ]
        rows.append(row)
    return headers, rows


def policy_table(cal: Calibration) -> tuple[list[str], list[list[str]]]:
    rows = [
        [f.policy + (" (chosen)" if cal.policy.endswith(f.policy) or cal.policy.endswith(f"({f.policy})") else ""),
         f"{f.residual_rms_ms:.3f} ms", f"{f.r2:.4f}"]
        for f in cal.policies
    ]  # fmt: skip
    return ["Scheduling policy", "Residual RMS of isolated TTFT", "R^2"], rows


def findings(cal: Calibration, engine: EngineConfig) -> list[str]:
    """What the calibration found, in words."""
    s = engine.scheduler
    batch = (
        f"largest running batch {cal.largest_batch} (the server queued the rest)"
        if cal.batch_limited
        else f"all {cal.largest_batch} requests sent together ran at once (max_num_seqs set to {s.max_batch()})"
    )
    kv = engine.kv_capacity_tokens
    lines = [
        f"scheduling: {cal.policy}; {batch}",
        f"prefill beside running decodes: {cal.prefill_mixing}",
        f"API overhead {engine.api_overhead * MS_PER_S:.2f} ms per request (isolated TTFT minus the model's prefill)",
        f"KV capacity: {f'{kv} tokens ({cal.kv_capacity_source})' if kv else cal.kv_capacity_source}",
        f"prefix cache: {cal.prefix_cache}",
        f"measured in {cal.duration_s:.1f} s against {cal.source}",
    ]
    return lines


def interval_table(intervals: list[FigureInterval], trusted: str | None = None) -> str:
    """Each predicted figure with its interval and, beside it, whether its calibration can be trusted (`trusted`:
    the cell of a figure without a caveat), as `predict` prints it."""
    rows = [
        [f"{i.metric} P{i.q}", fmt_ms(i.predicted), "-" if i.low is None else f"{fmt_ms(i.low)} - {fmt_ms(i.high)}"]
        + ([i.caveat or trusted] if trusted is not None else [])
        for i in intervals
    ]
    headers = ["Metric", "Predicted", "Interval"] + (["Calibration"] if trusted is not None else [])
    table = grid(headers, rows, "Prediction intervals (ms)")
    return f"{table}\n{INTERVAL_NOTE}"


def quality_table(cal: Calibration) -> tuple[list[str], list[list[str]]]:
    """Each fit's quality: R^2, and its error on probes held out of it (what its interval carries)."""
    rows = []
    for f in cal.fits:
        band = "-" if f.held_out_low is None else f"{f.held_out_low:+.1%} .. {f.held_out_high:+.1%}"
        tried = ", ".join(f"{m} {e:.1%}" for m, e in f.candidates.items()) or "-"
        rows.append([
            f.fit, f.model, f"{f.r2:.4f}", "-" if f.held_out_rms is None else f"{f.held_out_rms:.1%}", band, tried,
            str(f.points),
        ])  # fmt: skip
    headers = ["Fit", "Model", "R^2", "Held-out error (RMS)", "Held-out band", "Models tried (held-out RMS)", "Points"]
    return headers, rows
