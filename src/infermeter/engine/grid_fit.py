"""The multi-bin batch model T(b, L) = alpha + beta * L * h(b) fitted to a measured latency grid (a CSV)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from infermeter.engine.latency import BatchModel
from infermeter.errors import UserError

GRID_COLUMNS = ("batch_size", "max_seq_len", "mean_latency_sec")


@dataclass(frozen=True)
class Fit:
    model: BatchModel
    r2: float
    rows: int
    max_abs_error_s: float


def fit_batch_model(b: np.ndarray, length: np.ndarray, latency_s: np.ndarray) -> Fit:
    """Least squares in the linear form alpha + beta * L + (beta * gamma) * L * (b - 1) / b."""
    b, length, y = (np.asarray(v, dtype=float) for v in (b, length, latency_s))
    if len(y) < 3:
        raise UserError(f"calibration needs at least 3 grid rows, got {len(y)}")
    if not (np.isfinite(b).all() and np.isfinite(length).all() and np.isfinite(y).all()):
        raise UserError("the calibration grid holds a value that is not a finite number (NaN, inf or empty)")
    if np.any(b < 1) or np.any(length <= 0):
        raise UserError("calibration grid needs batch_size >= 1 and max_seq_len > 0 in every row")
    if np.any(y < 0) or np.ptp(y) == 0:
        raise UserError("the grid's mean_latency_sec must be >= 0 and vary across rows to fit a model")
    design = np.column_stack([np.ones_like(y), length, length * (b - 1) / b])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    alpha, beta, beta_gamma = (float(c) for c in coef)
    if beta <= 0:
        raise UserError("the grid's latency does not grow with sequence length: cannot fit beta > 0")
    pred = design @ coef
    with np.errstate(over="ignore", invalid="ignore"):
        ss_res = float(np.sum((y - pred) ** 2))
        ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    if not all(np.isfinite([alpha, beta, beta_gamma, r2])):
        raise UserError("the grid's values are too large to fit a latency model: give latencies in seconds")
    model = BatchModel(alpha=alpha, beta=beta, gamma=beta_gamma / beta)
    return Fit(model, r2, len(y), float(np.max(np.abs(y - pred))))


def fit_grid_file(path: Path) -> Fit:
    if not path.is_file():
        raise UserError(f"latency grid {path} does not exist: give a CSV with {', '.join(GRID_COLUMNS)}")
    try:
        table = pacsv.read_csv(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"{path} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in GRID_COLUMNS if c not in table.column_names]
    if missing:
        raise UserError(f"{path} lacks column(s) {', '.join(missing)}: a latency grid has {', '.join(GRID_COLUMNS)}")
    cols = []
    for c in GRID_COLUMNS:
        try:
            cols.append(np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=float))
        except (ValueError, TypeError):
            raise UserError(f"{path} column {c} must hold numbers") from None
    return fit_batch_model(*cols)
