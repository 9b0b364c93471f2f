"""Metron's user-experience metrics (seeds/001): fluidity-index, deadline-miss rates, fluid token generation rate.

Algorithm 1 walks a request's inter-token times T (T[0] is the time to the first token) against deadlines D_p
(first token) and D_d (every next one).  Its slack is a reflected random walk (a Lindley recursion):

    slack_i = max(0, slack_{i-1} + x_i),  x_i = D_i - T[i]
            = S_i - min(0, min_{k<=i} S_k),  S_i = x_0 + ... + x_i

and token i misses exactly when slack_{i-1} + x_i < 0, counting floor(deficit / D_d) + 1 missed deadlines.  So
every request is computed at once from cumulative sums and running minima: rows of a 2-D array, one per request,
grouped by length so padding stays under 2x.  Deficits within EPS of a deadline, or of a multiple of D_d, count
as met (float floors at exact multiples).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infermeter.errors import UserError
from infermeter.metrics.columns import Ragged
from infermeter.metrics.prefill_curve import PrefillCurve
from infermeter.metrics.statistics import stats
from infermeter.metrics.summary_model import Fluidity, MissRateCurve
from infermeter.units import parse_duration

EPS = 1e-9  # seconds: below any clock's resolution, above float error of sums of gaps


@dataclass(frozen=True)
class DeadlineCounts:
    """Per request: deadlines met and missed (Algorithm 1's totals)."""

    met: np.ndarray
    missed: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.met + self.missed

    def fluidity(self) -> np.ndarray:
        """1 - missed / total; NaN for requests with no deadlines."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.total > 0, 1.0 - self.missed / self.total, np.nan)

    def miss_rate(self) -> np.ndarray:
        return 1.0 - self.fluidity()

    def service_miss_rate(self) -> float | None:
        """Sum of missed over sum of total deadlines across requests."""
        total = float(self.total.sum())
        return float(self.missed.sum()) / total if total else None


def _rows(lengths: np.ndarray) -> list[np.ndarray]:
    """Request indices grouped by length in power-of-two buckets (each group is padded to its own max)."""
    has = lengths > 0
    bucket = np.zeros(len(lengths), dtype=np.int64)
    bucket[has] = np.ceil(np.log2(lengths[has])).astype(np.int64)
    return [np.flatnonzero(has & (bucket == b)) for b in np.unique(bucket[has])]


def deadline_counts(times: Ragged, d_first: np.ndarray | float, d_next: np.ndarray | float) -> DeadlineCounts:
    """Algorithm 1 for every request at once.

    `times` holds each request's T: T[0] the time to its first token, T[i] the gap before token i.  `d_first`
    and `d_next` are D_p and D_d, scalars or one per request.
    """
    return Layout(times).counts(d_first, d_next)


class Layout:
    """Requests' T laid out once as padded rows (blocks of ~2M cells), to evaluate many deadline settings."""

    def __init__(self, times: Ragged) -> None:
        self.n = len(times.offsets) - 1
        lengths = times.lengths
        self.blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (request idx, T rows, valid mask)
        for group in _rows(lengths):
            width = int(lengths[group].max())
            step = max(1, (1 << 21) // width)  # ~2M cells a block keeps temporaries small and in cache
            pos = np.arange(width)
            for start in range(0, len(group), step):
                idx = group[start : start + step]
                valid = pos[None, :] < lengths[idx, None]
                gather = np.minimum(times.offsets[idx, None] + pos[None, :], max(len(times.values) - 1, 0))
                self.blocks.append((idx, np.where(valid, times.values[gather], 0.0), valid))

    def counts(self, d_first: np.ndarray | float, d_next: np.ndarray | float) -> DeadlineCounts:
        d_first = np.broadcast_to(np.asarray(d_first, dtype=float), (self.n,))
        d_next = np.broadcast_to(np.asarray(d_next, dtype=float), (self.n,))
        met = np.zeros(self.n, dtype=np.int64)
        missed = np.zeros(self.n, dtype=np.int64)
        for idx, t, valid in self.blocks:
            dd = d_next[idx, None]
            x = np.where(valid, dd - t, 0.0)  # padding adds nothing and never misses
            x[:, 0] = np.where(valid[:, 0], d_first[idx] - t[:, 0], 0.0)
            s = np.cumsum(x, axis=1)
            floor_s = np.minimum(np.minimum.accumulate(s, axis=1), 0.0)
            deficit = -s
            deficit[:, 1:] += floor_s[:, :-1]  # = -(slack_{i-1} + x_i), slack_{i-1} = S_{i-1} - min(0, min S)
            miss = valid & (deficit > EPS)
            count = np.where(miss, np.floor((deficit + EPS) / dd) + 1, 0).astype(np.int64)
            missed[idx] = count.sum(axis=1)
            met[idx] = (valid & ~miss).sum(axis=1)
        return DeadlineCounts(met, missed)


def deadline_counts_loop(t: list[float], d_first: float, d_next: float) -> tuple[int, int]:
    """Algorithm 1 exactly as the paper writes it (with the same EPS guard): (met, missed).  The reference for
    tests; use deadline_counts for data."""
    total = missed = 0
    slack = 0.0
    for i, ti in enumerate(t):
        d = d_first if i == 0 else d_next
        if ti <= d + slack + EPS:
            slack = max(slack + d - ti, 0.0)
            total += 1
        else:
            misses = int((ti - slack - d + EPS) // d_next) + 1
            missed += misses
            total += misses
            slack = 0.0
    return total - missed, missed


def request_gaps(token_times: Ragged, submitted_at: np.ndarray, keep: np.ndarray) -> Ragged:
    """Each kept request's T: time to first token, then the gaps between its tokens."""
    tokens = token_times.keep_requests(keep)
    gaps = tokens.diffs()
    first = tokens.first() - submitted_at
    lengths = tokens.lengths
    values = np.empty(int(lengths.sum()))
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    has = lengths > 0
    values[starts[:-1][has]] = first[has]
    gap_pos = np.ones(len(values), dtype=bool)
    gap_pos[starts[:-1][has]] = False
    values[gap_pos] = gaps.values
    return Ragged(starts, values)


def decode_gaps(t: Ragged) -> Ragged:
    """T without its first entry: for black-box use, where the first-token deadline is ignored."""
    lengths = t.lengths
    has = lengths > 0
    keep = np.ones(len(t.values), dtype=bool)
    keep[t.offsets[:-1][has]] = False
    return t.select(keep)


def min_tbt_deadline(t: Ragged, target: float = 0.9, resolution: float = 1e-4) -> np.ndarray:
    """Per request, the smallest D_d (a multiple of `resolution`) whose fluidity over the decode gaps reaches
    `target`; NaN for requests with fewer than one gap.  Binary search, all requests at once."""
    gaps = decode_gaps(t)
    n = len(t.offsets) - 1
    has = gaps.lengths > 0
    out = np.full(n, np.nan)
    if not has.any():
        return out
    max_gap = np.zeros(n)
    max_gap[has] = np.maximum.reduceat(gaps.values, gaps.offsets[:-1][has])
    lo = np.zeros(n, dtype=np.int64)  # fails (or is below the grid)
    hi = np.maximum(np.ceil(max_gap / resolution - 1e-9), 1).astype(np.int64)  # every gap meets D_d = max gap
    layout = Layout(gaps)
    while True:
        todo = has & (hi - lo > 1)
        if not todo.any():
            break
        mid = (lo + hi) // 2
        dd = np.where(todo, mid * resolution, 1.0)
        ok = layout.counts(dd, dd).fluidity() >= target - 1e-12
        hi = np.where(todo & ok, mid, hi)
        lo = np.where(todo & ~ok, mid, lo)
    out[has] = hi[has] * resolution
    return out


@dataclass(frozen=True)
class Deadlines:
    """D_p (a fixed TTFT deadline, or a prefill curve plus scheduling slack) and D_d, with the fluidity target."""

    tbt: float
    ttft: float | None = None
    curve: PrefillCurve | None = None
    slack: float = 0.0
    target: float = 0.9

    def first(self, prompt_tokens: np.ndarray) -> np.ndarray:
        if self.curve is not None:
            return self.curve.predict(prompt_tokens) + self.slack
        return np.full(len(prompt_tokens), (self.ttft or 0.0) + self.slack)

    def describe_ttft_ms(self) -> float | str:
        if self.curve is not None:
            return f"prefill curve {self.curve.source or ''} + {self.slack * 1000:g} ms".replace("  ", " ")
        return ((self.ttft or 0.0) + self.slack) * 1000


def parse_deadlines(text: str) -> Deadlines:
    """'ttft=300ms,tbt=25ms[,target=0.9][,slack=50ms]'; ttft=@FILE uses a saved prefill curve."""
    fields: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"deadline item '{item}' is not key=value (e.g. ttft=300ms,tbt=25ms,target=0.9)")
        fields[key.strip().lower()] = value.strip()
    unknown = set(fields) - {"ttft", "tbt", "target", "slack"}
    if unknown:
        raise UserError(f"unknown deadline key(s) {', '.join(sorted(unknown))}: use ttft, tbt, target, slack")
    if "tbt" not in fields:
        raise UserError("deadlines need tbt=..., e.g. --deadlines ttft=300ms,tbt=25ms")

    def seconds(key: str, zero_ok: bool = False) -> float:
        value = parse_duration(fields[key])
        if value is None:
            raise UserError(f"deadline {key}={fields[key]} is not a duration like 25ms or 0.3s")
        if value == 0 and not zero_ok:
            raise UserError(f"deadline {key}={fields[key]} must be a positive, finite duration like 25ms or 0.3s")
        return value

    curve = None
    ttft = None
    if "ttft" in fields:
        if fields["ttft"].startswith("@"):
            curve = PrefillCurve.load(Path(fields["ttft"][1:]))
        else:
            ttft = seconds("ttft")
    try:
        target = float(fields.get("target", "0.9"))
    except ValueError:
        raise UserError(f"deadline target={fields['target']} is not a number") from None
    if not 0 < target <= 1:
        raise UserError(f"deadline target must be in (0, 1], got {target}")
    return Deadlines(
        tbt=seconds("tbt"),
        ttft=ttft,
        curve=curve,
        slack=seconds("slack", zero_ok=True) if "slack" in fields else 0.0,
        target=target,
    )


MISS_CURVE_MS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100)
CURVE_SAMPLE = 20_000


def fluidity_block(
    token_times: Ragged,
    submitted_at: np.ndarray,
    input_tokens: np.ndarray,
    ok: np.ndarray,
    deadlines: Deadlines,
    tpot_s: np.ndarray,
    itl_s: np.ndarray,
) -> Fluidity:
    """summary.json's `fluidity` block (see DESIGN.md and the fluidity issue)."""
    keep = ok & (token_times.lengths > 0)
    t = request_gaps(token_times, submitted_at, keep)
    if deadlines.ttft is None and deadlines.curve is None:  # no first-token deadline: decode deadlines only
        counts = deadline_counts(decode_gaps(t), deadlines.tbt, deadlines.tbt)
    else:
        counts = deadline_counts(t, deadlines.first(input_tokens), deadlines.tbt)
    index = np.where(keep, counts.fluidity(), np.nan)
    min_dd = min_tbt_deadline(t, deadlines.target)
    valid = min_dd[np.isfinite(min_dd)]
    p99_dd = float(np.percentile(valid, 99)) if len(valid) else None
    mean_tpot = float(np.nanmean(tpot_s)) if np.isfinite(tpot_s).any() else None
    p99_itl = float(np.percentile(itl_s, 99)) if len(itl_s) else None
    return Fluidity(
        ttft_deadline_ms=deadlines.describe_ttft_ms() if (deadlines.ttft or deadlines.curve) else None,
        tbt_deadline_ms=deadlines.tbt * 1000,
        target=deadlines.target,
        index=stats(index),
        service_miss_rate=counts.service_miss_rate(),
        share_meeting_target=float(np.mean(index[keep] >= deadlines.target - 1e-12)) if keep.any() else None,
        fluid_tok_s=1.0 / p99_dd if p99_dd else None,
        tpot_tok_s=1.0 / mean_tpot if mean_tpot else None,
        p99_itl_tok_s=1.0 / p99_itl if p99_itl else None,
        p99_min_tbt_deadline_ms=p99_dd * 1000 if p99_dd else None,
        miss_rate_curve=miss_rate_curve(t, keep),
    )


def miss_rate_curve(t: Ragged, keep: np.ndarray) -> MissRateCurve:
    """P99 over requests of the decode deadline-miss rate against target TBT, 1-100 ms (seeds/001 Figure 5d).

    Above CURVE_SAMPLE requests a fixed-seed random sample of them is used, and the block says so."""
    idx = np.flatnonzero(keep & (t.lengths > 1))
    sampled = len(idx) > CURVE_SAMPLE
    if sampled:
        idx = np.sort(np.random.default_rng(0).choice(idx, CURVE_SAMPLE, replace=False))
    mask = np.zeros(len(keep), dtype=bool)
    mask[idx] = True
    gaps = decode_gaps(t.keep_requests(mask))
    p99 = []
    for ms in MISS_CURVE_MS:
        rate = deadline_counts(gaps, ms / 1000, ms / 1000).miss_rate()[mask]
        p99.append(float(np.percentile(rate, 99)) if len(rate) else None)
    return MissRateCurve(tbt_ms=list(MISS_CURVE_MS), p99_miss_rate=p99, requests=len(idx), sampled=sampled)
