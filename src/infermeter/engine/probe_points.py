"""A probe's streams turned into the calibration's measurements: decode steps by running batch, turnarounds, how a
prefill met a running request, and the largest batch seen streaming."""

from __future__ import annotations

import itertools

import numpy as np

from infermeter.engine.probe_data import DecodePoint, Interference, Turnaround


def turnarounds(token_times: list[np.ndarray], prompts: list[int]) -> list[Turnaround]:
    """Consecutive requests of a server that ran them one after another: the engine time between them."""
    order = sorted((t[0], t[-1], p) for t, p in zip(token_times, prompts, strict=True) if len(t))
    return [
        Turnaround(prompt_tokens=p, seconds=first - last)
        for (_, last, _), (first, _, p) in itertools.pairwise(order)
        if first > last
    ]


MIXED_SHARE = 0.3  # a running token this close to a newcomer's first token (share of a decode step): the same step


def interference(running: np.ndarray, first_token: float) -> Interference | None:
    """How a newcomer's prefill met a request decoding alone; None unless the running request streamed tokens on
    both sides of the newcomer's first token (the prefill fell inside its decoding)."""
    if len(running) < 4 or not running[1] < first_token < running[-1]:
        return None
    nearest = running[int(np.argmin(np.abs(running - first_token)))]
    return Interference(offset_s=float(nearest - first_token), step_s=float(np.median(np.diff(running))))


def longest_gap(times: np.ndarray, start: float, end: float) -> float:
    """A stream's longest gap between two of its tokens that overlaps (start, end]: how long another request's
    arrival and prefill stalled it."""
    a, b = times[:-1], times[1:]
    overlaps = (b > start) & (a < end)
    return float((b - a)[overlaps].max()) if overlaps.any() else 0.0


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


# gaps a decode point averages at least: a batch size held for only a few gaps (while a ladder's requests start or
# finish one by one) is a handful of steps, each of which may also hold a request's arrival or last reply
MIN_GAPS = 16


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
    token_times: list[np.ndarray],
    prompts: list[int],
    trim: float = 0.1,
    sent: list[float] | None = None,
    min_gaps: int = MIN_GAPS,
) -> list[DecodePoint]:
    """Decode steps of requests sent together, grouped by the batch streaming at each gap's midpoint.

    A gap that overlaps another request's prefill is left out: a step then also computed prompt tokens (an engine
    that mixes prefill into its decode steps, as llama-server and vLLM do, stretches the running requests' gaps by
    a whole prompt chunk).  The prefill runs from `prefill_starts` to the first token when the sending times are
    given, else it is seen only in the gap holding the first token.  The context at a gap is every streaming
    request's prompt plus the tokens it had received by then.  A batch size seen for fewer than `min_gaps` gaps is
    left out."""
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
        if len(gaps) >= min_gaps and n > 0 and trimmed_mean(np.asarray(gaps), trim) > 0
    ]
