"""Plots drawn in text for the console report (the draft 5.1.5.4 asks for a histogram or CDF of TTFT)."""

from __future__ import annotations

import itertools

import numpy as np

from infermeter.report.tables import fmt_ms

BAR = "#"


def histogram(values_ms: np.ndarray, caption: str, bins: int = 12, width: int = 40) -> str:
    """A horizontal-bar histogram over equal-width bins from the minimum to the P99.9 (the few beyond it share the
    last bar, marked '+'), with each bar's count and share."""
    v = np.asarray(values_ms, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return f"{caption}: no samples"
    lo, hi = float(v.min()), float(np.percentile(v, 99.9))
    if hi <= lo:
        hi = lo + 1e-9
    edges = np.linspace(lo, hi, bins + 1)
    counts = np.histogram(np.clip(v, lo, hi), bins=edges)[0]
    beyond = int((v > hi).sum())
    peak = max(int(counts.max()), 1)
    labels = [
        f"{fmt_ms(a, '')}-{fmt_ms(b, '')}" + ("+" if i == bins - 1 and beyond else "")
        for i, (a, b) in enumerate(itertools.pairwise(edges))
    ]
    pad = max(len(s) for s in labels)
    lines = [caption]
    for label, c in zip(labels, counts, strict=True):
        bar = BAR * max(round(width * c / peak), 1 if c else 0)
        lines.append(f"  {label.rjust(pad)} ms | {bar.ljust(width)} {c} ({100 * c / len(v):.1f}%)")
    return "\n".join(lines)
