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


def curve(x: list[float], y: list[float], caption: str, width: int = 50, height: int = 12) -> str:
    """A scatter of points on a character grid (x across, y up), for a throughput-latency curve."""
    pts = [(a, b) for a, b in zip(x, y, strict=True) if np.isfinite(a) and np.isfinite(b)]
    if not pts:
        return f"{caption}: no points"
    xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    x0, x1 = float(xs.min()), float(xs.max()) or 1.0
    y0, y1 = 0.0, float(ys.max()) or 1.0
    grid = [[" "] * width for _ in range(height)]
    for a, b in pts:
        col = round((a - x0) / ((x1 - x0) or 1.0) * (width - 1))
        row = height - 1 - round((b - y0) / ((y1 - y0) or 1.0) * (height - 1))
        grid[row][col] = "*"
    label = len(f"{y1:.0f}")
    lines = [caption]
    for i, cells in enumerate(grid):
        tick = f"{y1:.0f}" if i == 0 else (f"{y0:.0f}" if i == height - 1 else "")
        lines.append(f"  {tick.rjust(label)} |{''.join(cells)}")
    lines.append(f"  {' ' * label} +{'-' * width}")
    lines.append(f"  {' ' * label}  {x0:.0f}{f'{x1:.0f}'.rjust(width - len(f'{x0:.0f}'))}")
    return "\n".join(lines)
