"""Energy over a run's measurement window, from an energy counter's increase or by trapezoidal integration of power
samples (seeds/003), joules per output token, output tokens per GPU-second (the GPU count alone normalizes), and cost
per million output tokens with GPU-seconds as the denominator (seeds/002)."""

from __future__ import annotations

from typing import Any

import numpy as np

from infermeter.metrics.summary_model import Energy


def trapezoid_window(t: np.ndarray, power_w: np.ndarray, start: float, end: float) -> float | None:
    """Joules between start and end: power samples integrated by trapezoids, interpolated at both edges."""
    t, p = np.asarray(t, float), np.asarray(power_w, float)
    ok = np.isfinite(p)
    t, p = t[ok], p[ok]
    if len(t) < 2 or end <= start or start < t[0] - 1e-9 or end > t[-1] + 1e-9:
        return None
    inside = (t > start) & (t < end)
    ts = np.concatenate([[start], t[inside], [end]])
    ps = np.interp(ts, t, p)
    return float(np.sum((ps[1:] + ps[:-1]) / 2 * np.diff(ts)))


def counter_window(t: np.ndarray, energy_j: np.ndarray, start: float, end: float) -> float | None:
    """Joules between start and end from a cumulative energy counter's readings: its increase, interpolated
    linearly at both edges (exact when the edges fall on readings)."""
    t, e = np.asarray(t, float), np.asarray(energy_j, float)
    ok = np.isfinite(e)
    t, e = t[ok], e[ok]
    if len(t) < 2 or end <= start or start < t[0] - 1e-9 or end > t[-1] + 1e-9:
        return None
    return float(np.interp(end, t, e) - np.interp(start, t, e))


def power_from_energy(t: np.ndarray, energy_j: np.ndarray) -> np.ndarray:
    """Average power between consecutive cumulative-energy readings, placed at interval midpoints' ends."""
    p = np.diff(energy_j) / np.diff(t)
    return np.concatenate([[p[0] if len(p) else np.nan], p])


def energy_block(
    samples: dict[str, np.ndarray],
    start: float,
    end: float,
    output_tokens: int,
    sources: dict[str, str],
    gpu_price_per_hour: float | None = None,
    gpus: int | None = None,
    measured_gpus: int | None = None,
) -> Energy:
    """The summary's `energy` block: whichever of CPU (RAPL) and GPU (NVML) energy the host could measure.  `gpus`
    (the server's, as declared) alone normalizes throughput per GPU; `measured_gpus` (those NVML saw here, whose
    energy is counted) never does, as the load generator's GPUs need not be the server's."""
    out: dict[str, Any] = {"window_s": end - start, "sources": sources}
    t = samples.get("t", np.zeros(0))
    notes = []
    if "cpu_energy_j" in samples:
        cpu_j = trapezoid_window(t, power_from_energy(t, samples["cpu_energy_j"]), start, end)
        out["cpu_energy_j"] = cpu_j
        out["cpu_power_w"] = cpu_j / (end - start) if cpu_j is not None else None
    else:
        notes.append("CPU energy " + sources.get("cpu_energy", "unavailable: no RAPL"))
    if "gpu_energy_j" in samples:  # NVML's total-energy counter: read off at the window's edges
        gpu_j = counter_window(t, samples["gpu_energy_j"], start, end)
        out["gpu_energy_j"] = gpu_j
        out["gpu_power_w"] = gpu_j / (end - start) if gpu_j is not None else None
    elif "gpu_power_w" in samples:
        gpu_j = trapezoid_window(t, samples["gpu_power_w"], start, end)
        out["gpu_energy_j"] = gpu_j
        out["gpu_power_w"] = gpu_j / (end - start) if gpu_j is not None else None
    else:
        notes.append("GPU energy " + sources.get("gpu", "unavailable: no NVML"))
    total = sum(v for k, v in out.items() if k in ("cpu_energy_j", "gpu_energy_j") and v is not None)
    measured = any(out.get(k) is not None for k in ("cpu_energy_j", "gpu_energy_j"))
    out["energy_j"] = total if measured else None
    out["joules_per_output_token"] = total / output_tokens if measured and output_tokens else None
    if gpus is not None or gpu_price_per_hour is not None:  # the GPU count normalizes with or without a price
        n = gpus or 1
        gpu_seconds = (end - start) * n
        out.update(
            {
                "gpus": n,
                "gpu_seconds": gpu_seconds,
                "output_tok_per_gpu_s": output_tokens / gpu_seconds if gpu_seconds > 0 else None,
            }
        )
        if gpus is None:
            notes.append("a price without --gpus: costed as 1 GPU")
    elif measured_gpus:
        notes.append(
            f"no tokens per GPU-second: the server's GPU count was not declared (give --gpus); the {measured_gpus} "
            "GPU(s) NVML sees on the load generator's machine count for energy only (a remote server's are elsewhere)"
        )
    if gpu_price_per_hour is not None:
        cost = out["gpu_seconds"] * gpu_price_per_hour / 3600.0
        out.update(
            {
                "gpu_price_per_hour": gpu_price_per_hour,
                "cost": cost,
                "cost_per_million_output_tokens": cost / output_tokens * 1e6 if output_tokens else None,
            }
        )
    out["notes"] = notes
    return Energy.model_validate(out)  # the keys of a source the host lacks stay out of summary.json
