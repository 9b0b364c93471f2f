"""Calibrate the engine model: the batch model T(b, L) = alpha + beta * L * h(b) of multi-bin dynamic batching from a
measured latency grid, and the iteration model from what a black-box probe of a live server measured."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from pydantic import BaseModel, ConfigDict, Field

from infermeter.engine.latency import BatchModel, attention_pairs
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


# ----- black-box calibration of the iteration model from measurements over a server's normal API

CHUNK_BUDGETS = (128, 256, 512, 1024, 2048, 4096)  # chunked-prefill token budgets the policy fit tries


class PrefillPoint(BaseModel):
    """An isolated request (nothing else on the server): its prompt's tokens and the median TTFT of its repeats."""

    prompt_tokens: int = Field(gt=0)
    ttft_s: float = Field(gt=0)


class DecodePoint(BaseModel):
    """Decode steps measured while `batch` sequences held `context_tokens` of KV: their trimmed mean step time."""

    batch: int = Field(gt=0)
    context_tokens: float = Field(ge=0)
    step_s: float = Field(gt=0)
    gaps: int = Field(gt=0, description="inter-token gaps averaged")


class PrefixCacheProbe(BaseModel):
    """The same prompt sent twice in a row, alone: a prefix cache serves the second from KV it kept."""

    prompt_tokens: int
    first_ttft_s: float
    second_ttft_s: float

    @property
    def present(self) -> bool:
        return self.second_ttft_s < 0.6 * self.first_ttft_s


class Interference(BaseModel):
    """A prompt sent while another request decoded alone: where the running request's nearest token came relative
    to the newcomer's first token.  An engine that mixes prompt chunks into its decode steps (llama-server, vLLM v1,
    Sarathi) ends both in the same step (offset ~0); one that runs prefills in steps of their own (vLLM v0) gives
    the running request its next token a decode step later."""

    offset_s: float  # the running request's token nearest the newcomer's first token, minus that first token
    step_s: float  # the running request's median inter-token gap: what the offset is judged against


class Turnaround(BaseModel):
    """A server serving one request at a time: from one request's last token to the next one's first."""

    prompt_tokens: int = Field(gt=0)
    seconds: float


class ProbeData(BaseModel):
    """What a black-box probe measured: the inputs of `fit_engine`."""

    model_config = ConfigDict(extra="forbid")
    source: str
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]
    turnarounds: list[Turnaround] = Field(default_factory=list)
    interference: list[Interference] = Field(default_factory=list)
    largest_batch: int = Field(gt=0, description="most sequences seen streaming at once")
    most_sent: int = Field(gt=0, description="most requests the probe sent at once")
    kv_capacity_tokens: int | None = None
    kv_capacity_source: str = "not measured"
    prefix_cache: PrefixCacheProbe | None = None
    duration_s: float = 0.0
    notes: list[str] = Field(default_factory=list)


class ParameterFit(BaseModel):
    """One calibrated parameter: its value, its standard error, and the fit it came from."""

    parameter: str
    value: float
    unit: str
    stderr: float | None = None
    fit: str  # which measurements it was fitted to
    r2: float | None = None  # None: a median, not a least-squares fit
    residual_rms_ms: float | None = None
    points: int
    held_out_rms: float | None = None  # its fit's RMS relative error on probes held out of it (FitQuality)


class FitQuality(BaseModel):
    """How well one of the calibration's fits explains its probes, and how well it predicts probes held out of it;
    the held-out errors' range is the relative error band `predict` carries into its intervals."""

    fit: str  # which measurements: "decode steps", "isolated TTFT"
    model: str  # the model chosen, in words
    points: int
    r2: float
    held_out: str | None = None  # what was held out in turn; None: too few measurements to hold any out
    held_out_rms: float | None = None  # RMS of the held-out relative errors
    held_out_low: float | None = None  # the lowest held-out relative error ((predicted - measured) / measured)
    held_out_high: float | None = None
    candidates: dict[str, float] = Field(default_factory=dict)  # each model tried -> its held-out RMS


class PolicyFit(BaseModel):
    """How well one scheduling policy explains the isolated prompts' TTFT (RMS of the residuals)."""

    policy: str
    residual_rms_ms: float
    r2: float


class Calibration(BaseModel):
    """How `infermeter calibrate` measured an engine: kept in the engine file beside the parameters it set."""

    source: str
    measured_at: str = ""
    duration_s: float = 0.0
    parameters: list[ParameterFit] = Field(default_factory=list)
    policies: list[PolicyFit] = Field(default_factory=list)
    policy: str = ""
    prefill_mixing: str = "not measured"  # whether prefill shares the decode steps, and the evidence
    largest_batch: int = 0
    batch_limited: bool = False
    prefix_cache: str = "not measured"
    kv_capacity_source: str = "not measured"
    notes: list[str] = Field(default_factory=list)
    fits: list[FitQuality] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # poor fits: predict repeats them beside its tables

    def band(self, fit: str) -> tuple[float, float] | None:
        """A fit's held-out relative error band (lowest, highest), or None where nothing was held out."""
        for f in self.fits:
            if f.fit == fit and f.held_out_low is not None and f.held_out_high is not None:
                return f.held_out_low, f.held_out_high
        return None


@dataclass(frozen=True)
class LinearFit:
    """Least squares with its standard errors, R^2 and residual RMS (in the unit of y)."""

    coef: np.ndarray
    stderr: np.ndarray
    r2: float
    rms: float
    points: int
    rms_relative: float = float("nan")  # RMS of the residuals / the measurements, where a fit reports it


def least_squares(design: np.ndarray, y: np.ndarray) -> LinearFit:
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    n, k = design.shape
    dof = max(n - k, 1)
    sigma2 = float(resid @ resid) / dof
    try:
        cov = sigma2 * np.linalg.inv(design.T @ design)
        stderr = np.sqrt(np.maximum(np.diag(cov), 0.0))
    except np.linalg.LinAlgError:
        stderr = np.full(k, np.nan)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0
    return LinearFit(coef, stderr, r2, float(np.sqrt(np.mean(resid**2))), n)


def nonnegative_fit(design: np.ndarray, y: np.ndarray, free: int = 1) -> tuple[LinearFit, np.ndarray]:
    """Least squares where every coefficient after the first `free` must be >= 0: a negative one (noise around a
    cost too small to see) is pinned to 0 and the rest refitted.  Returns the fit and which columns it kept."""
    keep = np.ones(design.shape[1], dtype=bool)
    while True:
        fit = least_squares(design[:, keep], y)
        full = np.zeros(design.shape[1])
        full[keep] = fit.coef
        bad = [j for j in range(free, design.shape[1]) if keep[j] and full[j] < 0]
        if not bad:
            err = np.full(design.shape[1], np.nan)
            err[keep] = fit.stderr
            return LinearFit(full, err, fit.r2, fit.rms, fit.points), keep
        keep[min(bad, key=lambda j: full[j])] = False


def identifiable(design: np.ndarray) -> np.ndarray:
    """Columns that vary independently of the ones before them (a batch size never varied cannot be fitted)."""
    keep = np.zeros(design.shape[1], dtype=bool)
    for j in range(design.shape[1]):
        trial = keep.copy()
        trial[j] = True
        sub = design[:, trial]
        scale = np.maximum(np.abs(sub).max(axis=0), 1e-300)
        keep[j] = np.linalg.matrix_rank(sub / scale, tol=1e-6) == int(trial.sum())
    return keep


def chunks(prompt: int, budget: int | None) -> tuple[int, int]:
    """An isolated prompt prefilled in chunks of `budget` (None: one step): (steps, context tokens summed over the
    steps, as the iteration model charges attention)."""
    if budget is None or prompt <= budget:
        return 1, prompt
    steps = -(-prompt // budget)
    ends = np.minimum(np.arange(1, steps + 1) * budget, prompt)
    return steps, int(ends.sum())


DECODE_FIT, PREFILL_FIT = "decode steps", "isolated TTFT"  # the calibration's two fits, by what they were fitted to
BATCH_EXPONENTS = np.round(np.arange(20, 151) / 100, 2)  # decode cost ~ b ** e: the exponents the fit tries
SUBLINEAR_GAIN = 0.75  # a batch exponent other than 1 must cut the held-out error to this share of the linear one's
LINEAR_ENOUGH = 0.03  # ... and the linear model must miss held-out batch sizes by more than this (RMS, relative)
HELD_OUT_MAX = 0.15  # a fit whose held-out probes it misses by more (RMS of relative errors) is a warning
R2_MIN = 0.9  # a fit explaining less of its measurements' variance is a warning (where they vary beyond noise)
MIN_BATCH_SIZES = 3  # batch sizes the decode steps must span for their growth with the batch to be fitted


@dataclass(frozen=True)
class HeldOut:
    """How a fit predicts measurements it was not fitted to: each group left out in turn, fitted on the rest."""

    what: str  # which measurements were held out, in words
    errors: np.ndarray  # each held-out measurement's (predicted - measured) / measured

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(self.errors**2))) if len(self.errors) else float("nan")

    @property
    def band(self) -> tuple[float, float]:
        """The lowest and highest relative error of a held-out measurement."""
        return (float(self.errors.min()), float(self.errors.max())) if len(self.errors) else (0.0, 0.0)


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
    errors = []
    for size in np.unique(b):
        out = b == size
        fold = _fit_decode_at(b[~out], ctx[~out], y[~out], w[~out], e)
        errors.append((fold.step(b[out], ctx[out]) - y[out]) / y[out])
    return HeldOut("each batch size's decode steps, fitted on the other sizes", np.concatenate(errors))


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


SHAPE_GAIN = 0.75  # prefill's attention term must cut the held-out error to this share of the linear model's
MIN_ATTENTION_LENGTHS = 5  # prompt lengths the isolated TTFTs must span for attention's P^2 term to be fitted
CHUNK_GAIN = 2 / 3  # chunking must cut the held-out error to this share of one prefill step's to be preferred


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


def choose_policy(points: list[PrefillPoint],
                  decode: DecodeFit) -> tuple[PrefillFit, list[PrefillFit], list[PrefillFit]]:  # fmt: skip
    """Every policy fitted; the chosen one predicts held-out prompt lengths best (relative error; in-sample where
    there are too few to hold one out), and chunking must cut that error to CHUNK_GAIN of one prefill step per
    prompt's (the simpler explanation) to be preferred.  Returns the chosen fit, each policy's kept fit, and every
    model tried."""
    longest = max(x.prompt_tokens for x in points)
    per_policy, tried = [], []
    for budget in [None, *(b for b in CHUNK_BUDGETS if b < longest)]:
        kept, models = fit_policy(points, decode, budget)
        per_policy.append(kept)
        tried += models
    best = min(per_policy, key=lambda f: f.error)
    if best.budget is not None and best.error >= CHUNK_GAIN * per_policy[0].error:
        best = per_policy[0]
    return best, per_policy, tried


def turnarounds(token_times: list[np.ndarray], prompts: list[int]) -> list[Turnaround]:
    """Consecutive requests of a server that ran them one after another: the engine time between them."""
    order = sorted((t[0], t[-1], p) for t, p in zip(token_times, prompts, strict=True) if len(t))
    return [
        Turnaround(prompt_tokens=p, seconds=first - last)
        for (_, last, _), (first, _, p) in itertools.pairwise(order)
        if first > last
    ]


SHORT_TURN = 2.0  # turnarounds whose prompt is within this factor of the shortest carry the per-request cost


def short_turnarounds(points: list[Turnaround]) -> list[Turnaround]:
    """The turnarounds before the shortest prompts: the prefill subtracted from a turnaround is a prediction whose
    error grows with the prompt (a 10% drift of the host's speed is 85 ms of an 850 ms prefill, more than the
    per-request cost sought)."""
    shortest = min((x.prompt_tokens for x in points), default=0)
    return [x for x in points if x.prompt_tokens <= SHORT_TURN * shortest]


def per_request_cost(points: list[Turnaround], decode: DecodeFit, prefill: PrefillFit) -> float | None:
    """Engine time after a request completes: the median turnaround (before the shortest prompts) less the next
    request's prefill steps (the API's overhead overlaps the previous request, so it is not part of a turnaround)."""
    if not points:
        return None
    rest = []
    for x in short_turnarounds(points):
        steps, ctx = chunks(x.prompt_tokens, prefill.budget)
        rest.append(x.seconds - steps * decode.fixed - prefill.per_prefill_token * x.prompt_tokens
                    - prefill.per_prefill_pair * attention_pairs(x.prompt_tokens, 0)
                    - decode.per_context_token * ctx)  # fmt: skip
    return max(float(np.median(rest)), 0.0)


MIXED_SHARE = 0.3  # a running token this close to a newcomer's first token (share of a decode step): the same step


def interference(running: np.ndarray, first_token: float) -> Interference | None:
    """How a newcomer's prefill met a request decoding alone; None unless the running request streamed tokens on
    both sides of the newcomer's first token (the prefill fell inside its decoding)."""
    if len(running) < 4 or not running[1] < first_token < running[-1]:
        return None
    nearest = running[int(np.argmin(np.abs(running - first_token)))]
    return Interference(offset_s=float(nearest - first_token), step_s=float(np.median(np.diff(running))))


def mixes_prefill(points: list[Interference]) -> bool | None:
    """Whether the engine runs prompt chunks in its decode steps: most probes found the running request's token in
    the newcomer's first step.  None: nothing measured."""
    if not points:
        return None
    same = sum(abs(p.offset_s) < MIXED_SHARE * p.step_s for p in points)
    return 2 * same > len(points)


def trimmed_mean(values: np.ndarray, trim: float = 0.1) -> float:
    """Mean of the values with `trim` of them cut from each end: a host's stall or a timer's rounding does not
    move it, and unlike a median it does not snap to a clock's granularity."""
    v = np.sort(values)
    cut = int(len(v) * trim)
    return float(v[cut : len(v) - cut].mean()) if len(v) > 2 * cut else float(v.mean())


def streaming_peak(token_times: list[np.ndarray]) -> int:
    """The most requests streaming at once (between their first and last token): the running batch seen."""
    spans = [(t[0], t[-1]) for t in token_times if len(t)]
    if not spans:
        return 0
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], -e[1]))
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


MIN_GAPS = 4  # gaps a decode point averages at least


def prefill_starts(firsts: np.ndarray, lasts: np.ndarray, sent: np.ndarray) -> np.ndarray:
    """When each request's prefill began, as a client can tell: its sending, or, if another request finished
    between its sending and its first token, the last such finish (the slot it waited for came free then)."""
    starts = sent.copy()
    index = np.arange(len(firsts))
    for k in index:
        freed = (lasts > sent[k]) & (lasts < firsts[k]) & (index != k)
        if freed.any():
            starts[k] = lasts[freed].max()
    return starts


def decode_points(
    token_times: list[np.ndarray], prompts: list[int], trim: float = 0.1, sent: list[float] | None = None
) -> list[DecodePoint]:
    """Decode steps of requests sent together, grouped by the batch streaming at each gap's midpoint.

    A gap that overlaps another request's prefill is left out: a step then also computed prompt tokens (an engine
    that mixes prefill into its decode steps, as llama-server and vLLM do, stretches the running requests' gaps by
    a whole prompt chunk).  The prefill runs from `prefill_starts` to the first token when the sending times are
    given, else it is seen only in the gap holding the first token.  The context at a gap is every streaming
    request's prompt plus the tokens it had received by then."""
    kept = [i for i, t in enumerate(token_times) if len(t)]
    live = [(np.asarray(token_times[i], dtype=float), prompts[i]) for i in kept]
    if not live:
        return []
    firsts = np.asarray([t[0] for t, _ in live])
    lasts = np.asarray([t[-1] for t, _ in live])
    starts = firsts if sent is None else prefill_starts(firsts, lasts, np.asarray([sent[i] for i in kept]))
    groups: dict[int, tuple[list[float], list[float]]] = {}
    for j, (t, _) in enumerate(live):
        if len(t) < 2:
            continue
        a, b = t[:-1], t[1:]
        mid = (a + b) / 2
        others = np.arange(len(live)) != j
        s, f = starts[others], firsts[others]
        # another's prefill overlaps the gap (a, b]: it began by the gap's end, and its first token came after the
        # gap began (sent=None: starts are the first tokens, so the first token itself falls in the gap)
        prefill = ((s[None, :] <= b[:, None]) & (f[None, :] > a[:, None])).any(axis=1)
        streaming = (firsts[None, :] <= mid[:, None]) & (lasts[None, :] >= mid[:, None])
        context = np.zeros(len(mid))
        for j, (tj, pj) in enumerate(live):
            context += np.where(streaming[:, j], pj + np.searchsorted(tj, mid, side="right"), 0)
        batch = streaming.sum(axis=1)
        for g, c, n in zip((b - a)[~prefill], context[~prefill], batch[~prefill], strict=True):
            gaps, ctx = groups.setdefault(int(n), ([], []))
            gaps.append(float(g))
            ctx.append(float(c))
    return [
        DecodePoint(
            batch=n, context_tokens=float(np.mean(ctx)), step_s=trimmed_mean(np.asarray(gaps), trim), gaps=len(gaps)
        )
        for n, (gaps, ctx) in sorted(groups.items())
        if len(gaps) >= MIN_GAPS and n > 0 and trimmed_mean(np.asarray(gaps), trim) > 0
    ]
