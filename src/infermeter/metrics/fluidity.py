"""Metron's user-experience metrics (seeds/001): fluidity-index, deadline-miss rates, fluid token generation rate.

Algorithm 1 walks a request's inter-token times T (T[0] is the time to the first token) against deadlines D_p
(first token) and D_d (every next one).  Its slack is a reflected random walk (a Lindley recursion):

    slack_i = max(0, slack_{i-1} + x_i),  x_i = D_i - T[i]
            = S_i - min(0, min_{k<=i} S_k),  S_i = x_0 + ... + x_i

and token i misses exactly when slack_{i-1} + x_i < 0, counting floor(deficit / D_d) + 1 missed deadlines.  So
every request is computed at once from cumulative sums and running minima, walked token position by token position
across all requests (grouped by length so padding stays under 2x).  Deficits within EPS of a deadline, or of a
multiple of D_d, count as met (float floors at exact multiples).
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


BLOCK_CELLS = 1 << 24  # cells of one block: big enough that a numpy call per position costs little
LOOP_MIN_COLUMNS = 32  # below this many requests a block is walked as one 2-D array, not position by position


class Layout:
    """Requests' T laid out once, to evaluate many deadline settings: blocks of requests of similar length, each a
    position-major array (a row per token position, a column per request, padded with zero gaps), walked one
    position at a time across all its requests.  `skip` drops each request's first entries (1: decode gaps only);
    requests where `keep` is False are left out (they count nothing).

    The walk does the same float operations in the same order as a cumulative sum along each request, so its
    counts are those of the 2-D formulation (and of `deadline_counts_loop`) bit for bit."""

    def __init__(self, times: Ragged, skip: int = 0, keep: np.ndarray | None = None) -> None:
        self.n = len(times.offsets) - 1
        self.lengths = np.maximum(times.lengths - skip, 0)
        if keep is not None:
            self.lengths[~keep] = 0
        starts = times.offsets[:-1] + skip
        self.blocks: list[tuple[np.ndarray, np.ndarray]] = []  # (request indices, T as width x requests)
        for group in _rows(self.lengths):
            width = int(self.lengths[group].max())
            step = max(1, BLOCK_CELLS // width)
            for first in range(0, len(group), step):
                idx = group[first : first + step]
                self.blocks.append((idx, _gather(times.values, starts[idx], self.lengths[idx], width)))

    def per_request(self, reduce: str) -> np.ndarray:
        """Each request's max or sum of T (0 for requests without entries)."""
        out = np.zeros(self.n)
        for idx, t in self.blocks:
            out[idx] = t.max(axis=0) if reduce == "max" else t.sum(axis=0)
        return out

    def counts(
        self, d_first: np.ndarray | float, d_next: np.ndarray | float, which: np.ndarray | None = None
    ) -> DeadlineCounts:
        """Algorithm 1's totals for every request, or only those where `which` is True (the rest count 0)."""
        d_first = np.broadcast_to(np.asarray(d_first, dtype=float), (self.n,))
        d_next = np.broadcast_to(np.asarray(d_next, dtype=float), (self.n,))
        met = np.zeros(self.n, dtype=np.int64)
        missed = np.zeros(self.n, dtype=np.int64)
        for idx, t in self.blocks:
            live = np.ones(len(idx), dtype=bool) if which is None else which[idx]
            n_live = int(live.sum())
            if n_live == 0:
                continue
            if 2 * n_live < len(idx):  # gathering the live columns costs less than walking them all
                idx, t, live = idx[live], t[:, live], live[live]
            lengths = self.lengths[idx]
            walk = _walk_loop if len(idx) >= LOOP_MIN_COLUMNS else _walk_2d
            n_missed, n_deadlines = walk(t, lengths, d_first[idx], d_next[idx])
            met[idx[live]] = (lengths - n_missed)[live]
            missed[idx[live]] = n_deadlines[live]
        return DeadlineCounts(met, missed)

    def only(self, which: np.ndarray) -> Layout:
        """The same layout with only the requests where `which` is True (a smaller one to walk many times)."""
        out = Layout.__new__(Layout)
        out.n, out.lengths = self.n, np.where(which, self.lengths, 0)
        out.blocks = []
        for idx, t in self.blocks:
            live = which[idx]
            if not live.any():
                continue
            if not live.all():
                idx, t = idx[live], t[:, live]
            if out.blocks and len(out.blocks[-1][1]) == len(t) and t.size + out.blocks[-1][1].size <= BLOCK_CELLS:
                last_idx, last_t = out.blocks.pop()  # few requests left in blocks of one width: walk them as one
                idx, t = np.concatenate([last_idx, idx]), np.concatenate([last_t, t], axis=1)
            out.blocks.append((idx, t))
        return out


def _gather(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """Position-major (width x requests) array of each request's values[start:start + length], zero-padded.  Built
    a few hundred requests at a time (a 2-D gather, then its transpose), which keeps the source lines in cache."""
    t = np.empty((width, len(starts)))
    pos = np.arange(width)
    for first in range(0, len(starts), 256):
        start, length = starts[first : first + 256, None], lengths[first : first + 256, None]
        if (length == width).all():
            t[:, first : first + 256] = values[start + pos].T
        else:
            valid = pos < length
            t[:, first : first + 256] = np.where(valid, values[np.where(valid, start + pos, 0)], 0.0).T
    return t


def _walk_loop(
    t: np.ndarray, lengths: np.ndarray, d_first: np.ndarray, d_next: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens missed, deadlines missed) per column, a few numpy calls per position across all columns.

    s is the cumulative sum of x = D - T, r = min(0, running min of s), and token i misses when its deficit
    r_{i-1} - s_i exceeds EPS.  Zero-gap padding after a request's end only adds slack.  A miss worth more than one
    deadline (a deficit of at least one D_d) is rarer: its extra deadlines are counted for those columns only."""
    s = np.subtract(d_first, t[0])
    deficit = np.negative(s)
    n_missed = (deficit > EPS).astype(np.int64)
    extra = np.zeros(len(s), dtype=np.int64)
    # below deep_at, (deficit + EPS) / D_d floors to 0; above it the token surely missed (deep_at > EPS)
    deep_at = np.maximum(d_next * (1 - 1e-9) - EPS, np.nextafter(EPS, 1.0))
    deep = np.empty(len(s), dtype=bool)

    def add_extra() -> None:
        np.greater_equal(deficit, deep_at, out=deep)
        cols = deep.nonzero()[0]
        if len(cols):
            extra[cols] += np.floor((deficit[cols] + EPS) / d_next[cols]).astype(np.int64)

    add_extra()
    r = np.minimum(s, 0.0)
    x = np.empty_like(s)
    miss = np.empty(len(s), dtype=bool)
    tally = np.zeros(len(s), dtype=np.uint8)  # misses since the last flush into n_missed (at most 255)
    for i, row in enumerate(t[1:], 1):
        np.subtract(d_next, row, out=x)
        s += x
        np.subtract(r, s, out=deficit)
        np.greater(deficit, EPS, out=miss)
        tally += miss.view(np.uint8)
        if i % 255 == 0:
            n_missed += tally
            tally[:] = 0
        add_extra()
        np.minimum(r, s, out=r)
    n_missed += tally
    return n_missed, n_missed + extra


def _walk_2d(
    t: np.ndarray, lengths: np.ndarray, d_first: np.ndarray, d_next: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens missed, deadlines missed) per column of a small block, the whole block at once."""
    valid = np.arange(len(t))[:, None] < lengths[None, :]
    x = np.where(valid, d_next - t, 0.0)  # padding adds nothing and never misses
    x[0] = d_first - t[0]
    s = np.cumsum(x, axis=0)
    floor_s = np.minimum(np.minimum.accumulate(s, axis=0), 0.0)
    deficit = -s
    deficit[1:] += floor_s[:-1]  # = -(slack_{i-1} + x_i), slack_{i-1} = S_{i-1} - min(0, min S)
    miss = valid & (deficit > EPS)
    count = np.where(miss, np.floor((deficit + EPS) / d_next) + 1, 0).astype(np.int64)
    return miss.sum(axis=0), count.sum(axis=0)


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
    return Ragged.from_lengths(np.maximum(lengths - 1, 0), t.values[keep])


def min_tbt_deadline(
    t: Ragged, target: float = 0.9, resolution: float = 1e-4, layout: Layout | None = None
) -> np.ndarray:
    """Per request, the smallest D_d (a multiple of `resolution`) whose fluidity over the decode gaps reaches
    `target`; NaN for requests with fewer than one gap.

    Fluidity only grows with D_d (a larger deadline leaves at least as much slack before every token, so no token
    that met its deadline misses it, and each miss counts no more deadlines), so the answer is a binary search on
    the grid, all requests at once, each step a walk of only the requests whose bracket is still open.  The
    bracket starts tight: D_d = max gap meets every deadline, and no D_d at or below target x mean gap can reach
    the target (every miss counts at least deficit / D_d deadlines, and the deficits sum to at least
    sum(T) - m D_d over m gaps, so missed > m / target - m).  The first probe is the mean gap, where the slack's
    walk has no drift.  `layout`: t's decode gaps already laid out (`Layout(t, skip=1)`)."""
    n = len(t.offsets) - 1
    out = np.full(n, np.nan)
    layout = layout if layout is not None else Layout(t, skip=1)
    m = layout.lengths
    has = m > 0
    if not has.any():
        return out
    max_gap, mean_gap = layout.per_request("max"), layout.per_request("sum") / np.maximum(m, 1)
    tol_target = target - 1e-12
    hi = np.maximum(np.ceil(max_gap / resolution - 1e-9), 1).astype(np.int64)  # every gap meets D_d = max gap
    bound = tol_target * (mean_gap - EPS) / resolution * (1 - 1e-9)
    lo = np.clip(np.floor(bound).astype(np.int64) - 1, 0, hi - 1)  # fails (or is below the grid)
    probe = np.ceil(mean_gap / resolution).astype(np.int64)  # the first probe; then bisection
    walked = int(has.sum())  # requests in the layout
    while True:
        todo = has & (hi - lo > 1)
        left = int(todo.sum())
        if not left:
            break
        if 2 * left <= walked:
            layout, walked = layout.only(todo), left
        mid = np.where((probe > lo) & (probe < hi), probe, (lo + hi) // 2)
        dd = np.where(todo, mid * resolution, 1.0)
        ok = layout.counts(dd, dd, todo).fluidity() >= tol_target
        hi = np.where(todo & ok, mid, hi)
        lo = np.where(todo & ~ok, mid, lo)
        probe[:] = 0
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


@dataclass(frozen=True)
class PerRequest:
    """Each request's T (`gaps`), which requests have one (`keep`: ok, with a token), its deadlines met and missed,
    and the decode gaps' layout when the count walked it (None: it walked D_p and D_d from the first token)."""

    keep: np.ndarray
    gaps: Ragged
    counts: DeadlineCounts
    decode: Layout | None

    def index(self) -> np.ndarray:
        """Each request's fluidity-index; NaN for a request without tokens (failed, or a one-body reply)."""
        return np.where(self.keep, self.counts.fluidity(), np.nan)


def per_request(
    token_times: Ragged, submitted_at: np.ndarray, input_tokens: np.ndarray, ok: np.ndarray, deadlines: Deadlines
) -> PerRequest:
    """Algorithm 1 for each request under `deadlines`: against D_p and D_d, or, where no first-token deadline is
    given, against the decode deadline from the second token on.  The summary's block and the export's rows both
    count here."""
    keep = ok & (token_times.lengths > 0)
    t = request_gaps(token_times, submitted_at, keep)
    if deadlines.ttft is None and deadlines.curve is None:  # no first-token deadline: decode deadlines only
        decode = Layout(t, skip=1)
        return PerRequest(keep, t, decode.counts(deadlines.tbt, deadlines.tbt), decode)
    return PerRequest(keep, t, deadline_counts(t, deadlines.first(input_tokens), deadlines.tbt), None)


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
    each = per_request(token_times, submitted_at, input_tokens, ok, deadlines)
    keep, t, counts, index = each.keep, each.gaps, each.counts, each.index()
    decode = each.decode if each.decode is not None else Layout(t, skip=1)
    min_dd = min_tbt_deadline(t, deadlines.target, layout=decode)
    del decode, each  # the decode layout freed before the miss-rate curve lays out its own
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
    layout = Layout(t, skip=1, keep=mask)
    p99 = []
    for ms in MISS_CURVE_MS:
        rate = layout.counts(ms / 1000, ms / 1000).miss_rate()[mask]
        p99.append(float(np.percentile(rate, 99)) if len(rate) else None)
    return MissRateCurve(tbt_ms=list(MISS_CURVE_MS), p99_miss_rate=p99, requests=len(idx), sampled=sampled)
