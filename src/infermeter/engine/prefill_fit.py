"""An isolated prompt's TTFT under one scheduling policy (one prefill step, or chunks of a token budget): the API's
overhead, a cost per prompt token and, where it predicts held-out lengths better, attention's cost per pair."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.engine.decode_fit import DecodeFit
from infermeter.engine.least_squares import HeldOut, LinearFit, nonnegative_fit
from infermeter.engine.probe_data import PrefillPoint

SHAPE_GAIN = 0.75  # prefill's attention term must cut the held-out error to this share of the linear model's
MIN_ATTENTION_LENGTHS = 5  # prompt lengths the isolated TTFTs must span for attention's P^2 term to be fitted


def chunks(prompt: int, budget: int | None) -> tuple[int, int]:
    """An isolated prompt prefilled in chunks of `budget` (None: one step): (steps, context tokens summed over the
    steps, as the iteration model charges attention)."""
    if budget is None or prompt <= budget:
        return 1, prompt
    steps = -(-prompt // budget)
    ends = np.minimum(np.arange(1, steps + 1) * budget, prompt)
    return steps, int(ends.sum())


@dataclass(frozen=True)
class PrefillFit:
    """Isolated TTFT under one scheduling policy: the API's overhead, a cost per prompt token and, where it predicts
    held-out lengths better, attention's cost per (token, token it attends to) pair."""

    policy: str
    budget: int | None
    overhead: float
    per_prefill_token: float
    fit: LinearFit  # coef: overhead, per token[, per pair]; rms in seconds
    per_prefill_pair: float = 0.0
    attention: bool = False  # the model has the pair term (it may still have fitted it to 0)
    held_out: HeldOut | None = None  # None: too few lengths to hold one out

    @property
    def model(self) -> str:
        return f"{self.policy}, {'attention P^2' if self.attention else 'linear'}"

    @property
    def error(self) -> float:
        """What fits are chosen by: the RMS relative error on held-out lengths (in-sample where none was held out)."""
        return self.held_out.rms if self.held_out is not None else self.fit.rms_relative


def _prefill_lines(points: list[PrefillPoint], decode: DecodeFit,
                   budget: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    p = np.asarray([x.prompt_tokens for x in points], dtype=float)
    y = np.asarray([x.ttft_s for x in points], dtype=float)
    shape = np.asarray([chunks(int(n), budget) for n in p], dtype=float)
    known = shape[:, 0] * decode.fixed + shape[:, 1] * decode.per_context_token
    return p, y, known


def _relative_fit(design: np.ndarray, y: np.ndarray, target: np.ndarray) -> LinearFit:
    """Non-negative least squares of `target` on `design`, each row weighted by 1 / y: every prompt length counts
    by its relative error, as predictions are judged (unweighted, the longest prompts' noise sets the slope and the
    short prompts a workload sends are missed by tens of percent)."""
    w = 1.0 / y
    fit, _ = nonnegative_fit(design * w[:, None], target * w, free=0)
    return fit


def fit_prefill(points: list[PrefillPoint], decode: DecodeFit, budget: int | None,
                attention: bool = False) -> PrefillFit:  # fmt: skip
    """TTFT of an isolated prompt under one policy: overhead + its prefill steps (each `fixed` plus the attention
    to its context) + per_prefill_token * P [+ per_prefill_pair * P (P + 1) / 2]; the costs are the unknowns, none
    below 0.  Each length is also left out in turn and predicted from the others (the held-out error)."""
    p, y, known = _prefill_lines(points, decode, budget)
    columns = [np.ones_like(p), p] + ([p * (p + 1) / 2] if attention else [])
    design = np.column_stack(columns)
    fit = _relative_fit(design, y, y - known)
    resid = y - known - design @ fit.coef
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0
    plain = LinearFit(fit.coef, fit.stderr, r2, float(np.sqrt(np.mean(resid**2))), len(y),
                      float(np.sqrt(np.mean((resid / y) ** 2))))  # fmt: skip
    policy = "continuous" if budget is None else f"chunked_prefill (budget {budget})"
    held: HeldOut | None = None
    if len(p) > design.shape[1]:
        predicted = np.empty_like(y)
        for i in range(len(p)):
            rest = np.arange(len(p)) != i
            fold = _relative_fit(design[rest], y[rest], (y - known)[rest])
            predicted[i] = known[i] + design[i] @ fold.coef
        held = HeldOut("each prompt length's isolated TTFT, fitted on the other lengths", (predicted - y) / y)
    pair = float(fit.coef[2]) if attention else 0.0
    return PrefillFit(policy, budget, float(fit.coef[0]), float(fit.coef[1]), plain, pair, attention, held)


def fit_policy(points: list[PrefillPoint], decode: DecodeFit,
               budget: int | None) -> tuple[PrefillFit, list[PrefillFit]]:  # fmt: skip
    """A policy's prefill model: linear in the prompt, or with attention's P^2 where the probe spans
    MIN_ATTENTION_LENGTHS lengths and it cuts the held-out error to SHAPE_GAIN of the linear model's.  Returns the
    model kept and every model tried."""
    linear = fit_prefill(points, decode, budget)
    if len({x.prompt_tokens for x in points}) < MIN_ATTENTION_LENGTHS:
        return linear, [linear]
    quadratic = fit_prefill(points, decode, budget, attention=True)
    kept = quadratic if quadratic.per_prefill_pair > 0 and quadratic.error < SHAPE_GAIN * linear.error else linear
    return kept, [linear, quadratic]
