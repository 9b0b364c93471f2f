"""The decode step's cost against the running batch and its context, fitted to a probe's decode steps; sub- or
super-linear in the batch only where that predicts held-out batch sizes better."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.engine.least_squares import HeldOut, LinearFit, identifiable, nonnegative_fit
from infermeter.engine.probe_data import DecodePoint
from infermeter.errors import UserError

BATCH_EXPONENTS = np.round(np.arange(20, 151) / 100, 2)  # decode cost ~ b ** e: the exponents the fit tries
SUBLINEAR_GAIN = 0.75  # a batch exponent other than 1 must cut the held-out error to this share of the linear one's
LINEAR_ENOUGH = 0.03  # ... and the linear model must miss held-out batch sizes by more than this (RMS, relative)
MIN_BATCH_SIZES = 3  # batch sizes the decode steps must span for their growth with the batch to be fitted


@dataclass(frozen=True)
class DecodeFit:
    fixed: float
    per_decode_seq: float
    per_context_token: float
    fit: LinearFit
    kept: np.ndarray  # fixed, per sequence, per context token: which the data could fit
    batch_exponent: float = 1.0
    held_out: HeldOut | None = None  # None: one batch size only, nothing to hold out
    candidates: tuple[tuple[str, float], ...] = ()  # (model, held-out RMS) of each decode model tried

    def step(self, batch: np.ndarray, context: np.ndarray) -> np.ndarray:
        return self.fixed + self.per_decode_seq * batch**self.batch_exponent + self.per_context_token * context


def _decode_arrays(points: list[DecodePoint]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    b = np.asarray([p.batch for p in points], dtype=float)
    ctx = np.asarray([p.context_tokens for p in points], dtype=float)
    y = np.asarray([p.step_s for p in points], dtype=float)
    w = np.sqrt(np.asarray([p.gaps for p in points], dtype=float))
    return b, ctx, y, w


def _fit_decode_at(b: np.ndarray, ctx: np.ndarray, y: np.ndarray, w: np.ndarray, e: float) -> DecodeFit:
    """step = fixed + per_decode_seq * b ** e + per_context_token * context, weighted by the gaps behind each point."""
    design = np.column_stack([np.ones_like(y), b**e, ctx])
    cols = identifiable(design)
    fit, kept = nonnegative_fit(design[:, cols] * w[:, None], y * w, free=0)  # a CPU's step can be all per-sequence
    coef = np.zeros(3)
    coef[cols] = fit.coef
    err = np.full(3, np.nan)
    err[cols] = fit.stderr
    resid = y - design @ coef
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0
    used = np.zeros(3, dtype=bool)
    used[np.flatnonzero(cols)[kept]] = True
    plain = LinearFit(coef, err, r2, float(np.sqrt(np.mean(resid**2))), len(y))
    exponent = e if used[1] else 1.0
    return DecodeFit(float(coef[0]), float(coef[1]), float(coef[2]), plain, used, exponent)


def _weighted_sse(fit: DecodeFit, b: np.ndarray, ctx: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum((w * (y - fit.step(b, ctx))) ** 2))


def _held_out_by_batch(b: np.ndarray, ctx: np.ndarray, y: np.ndarray, w: np.ndarray, e: float) -> HeldOut:
    """Each batch size left out in turn: the model fitted to the others predicts its steps."""
    errors, weights = [], []
    for size in np.unique(b):
        out = b == size
        fold = _fit_decode_at(b[~out], ctx[~out], y[~out], w[~out], e)
        errors.append((fold.step(b[out], ctx[out]) - y[out]) / y[out])
        weights.append(w[out] ** 2)  # the gaps each step time averages, as the fit weighs them
    return HeldOut("each batch size's decode steps, fitted on the other sizes", np.concatenate(errors),
                   np.concatenate(weights))  # fmt: skip


def fit_decode(points: list[DecodePoint]) -> DecodeFit:
    """The decode step against batch and context.  Where the steps span MIN_BATCH_SIZES batch sizes, the cost per
    sequence may grow sub- or super-linearly (b ** e, e by least squares over BATCH_EXPONENTS), and the model kept
    is the one that predicts held-out batch sizes best: the linear one unless it misses them by more than
    LINEAR_ENOUGH and another exponent cuts that error to SUBLINEAR_GAIN of it."""
    if not points:
        raise UserError("the probe measured no decode steps: the server streamed fewer than 2 tokens per request")
    b, ctx, y, w = _decode_arrays(points)
    linear = _fit_decode_at(b, ctx, y, w, 1.0)
    if len(np.unique(b)) < MIN_BATCH_SIZES:
        return linear
    linear_out = _held_out_by_batch(b, ctx, y, w, 1.0)
    chosen, held, tried = linear, linear_out, [("linear in the batch", linear_out.rms)]
    if linear_out.rms > LINEAR_ENOUGH:  # the linear model misses held-out batch sizes: try the exponents
        best = min((_fit_decode_at(b, ctx, y, w, float(e)) for e in BATCH_EXPONENTS),
                   key=lambda f: _weighted_sse(f, b, ctx, y, w))  # fmt: skip
        if best.kept[1] and best.batch_exponent != 1.0:
            best_out = _held_out_by_batch(b, ctx, y, w, best.batch_exponent)
            tried.append((f"batch ** {best.batch_exponent:g}", best_out.rms))
            if best_out.rms < SUBLINEAR_GAIN * linear_out.rms:
                chosen, held = best, best_out
    return DecodeFit(chosen.fixed, chosen.per_decode_seq, chosen.per_context_token, chosen.fit, chosen.kept,
                     chosen.batch_exponent, held, tuple(tried))  # fmt: skip
