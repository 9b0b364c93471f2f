"""The calibration's tables: each fitted parameter with its error and fit quality (and the true value when the
target was infermeter's own emulator), and how well each scheduling policy explains the measurements."""

from __future__ import annotations

from infermeter.engine.calibration import Calibration
from infermeter.engine.config import EngineConfig
from infermeter.units import MS_PER_S

# parameter -> (display unit, factor from the stored SI value)
UNITS: dict[str, tuple[str, float]] = {
    "s": ("ms", MS_PER_S),
    "s/token": ("us/token", 1e6),
    "s/sequence": ("us/seq", 1e6),
}


def true_value(engine: EngineConfig, parameter: str) -> float:
    """A parameter of an engine configuration by its dotted name (iteration_model.fixed, api_overhead)."""
    value: object = engine
    for part in parameter.split("."):
        value = getattr(value, part)
    return float(value)  # type: ignore[arg-type]


def parameter_table(cal: Calibration, truth: EngineConfig | None = None) -> tuple[list[str], list[list[str]]]:
    headers = ["Parameter", "Fitted", "Std. error", "Fit", "R^2", "Residual RMS", "Points"]
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
        f"API overhead {engine.api_overhead * MS_PER_S:.2f} ms per request (isolated TTFT minus the model's prefill)",
        f"KV capacity: {f'{kv} tokens ({cal.kv_capacity_source})' if kv else cal.kv_capacity_source}",
        f"prefix cache: {cal.prefix_cache}",
        f"measured in {cal.duration_s:.1f} s against {cal.source}",
    ]
    if cal.quadratic_prefill_ms_per_ktoken2 is not None:
        lines.append(
            f"prefill's quadratic term: {cal.quadratic_prefill_ms_per_ktoken2:.3g} ms per (1000 tokens)^2 "
            "(the iteration model charges attention through per_context_token)"
        )
    return lines
