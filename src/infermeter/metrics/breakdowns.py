"""A run's latency broken down by what its records say of each request's origin: by turn index (multi-turn
sessions, with the share of each prompt that was history), by model (--model-mix), and the waits for a slot
(--max-concurrency).  Each is None for a run whose records carry no such figure (older runs, simulations).

A turn's history tokens are estimated from the records alone: the history of turn k is turn k-1's prompt and its
reply, so it is counted as turn k-1's input plus output tokens (at most turn k's input).  That is exact but for the
few tokens a chat template puts around a reply; under --history dataset the reply carried is the dataset's, whose
length the previous turn's output matches where the server ran its reply to max_tokens (the dataset reply's length).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from infermeter.metrics.columns import Ragged, RecordColumns, distinct
from infermeter.metrics.summary_model import ByTurn, GroupLatency, SlotWait, TurnLatency
from infermeter.units import MS_PER_S

TURN_ROWS = 8  # turns 0 .. TURN_ROWS - 2 a row each; every later one together ("7+") when there are more
HISTORY_TOKENS = "estimated: the previous turn's input plus output tokens, at most the turn's input"
DEFAULT_MODEL = "(the run's model)"  # the label of requests that named no model of their own


class Breakdowns(NamedTuple):
    by_turn: ByTurn | None
    by_model: dict[str, GroupLatency] | None
    slot_wait: SlotWait | None


def breakdowns(cols: RecordColumns, ttft: np.ndarray, itl: Ragged | None) -> Breakdowns:
    """The three breakdowns of a run; `ttft` per request in seconds (NaN where none), `itl` the ITL samples per
    request (None: not known per request)."""
    return Breakdowns(by_turn(cols, ttft, itl), by_model(cols, ttft, itl), slot_wait(cols))


def _column(cols: RecordColumns, name: str) -> np.ndarray | None:
    """An optional record field (session_id, turn, model, slot_wait_s), or None where the columns have none (a
    simulation's, built without a table)."""
    try:
        value = getattr(cols, name)
    except AttributeError:
        return None
    assert isinstance(value, np.ndarray)
    return value


def _percentiles(values: np.ndarray, qs: tuple[float, ...], scale: float = 1.0) -> list[float | None]:
    """Percentiles (linear interpolation, as metrics.statistics) of the finite values, scaled; None without any."""
    finite = values[np.isfinite(values)]
    if not len(finite):
        return [None] * len(qs)
    return [float(v) * scale for v in np.percentile(finite, qs)]


def _latency(cols: RecordColumns, member: np.ndarray, ttft: np.ndarray, itl: Ragged | None) -> GroupLatency:
    """The latency of the requests where `member` holds."""
    t50, t90, t99 = _percentiles(ttft[member], (50, 90, 99), MS_PER_S)
    i50 = i99 = None
    if itl is not None:
        samples = itl.values[: itl.offsets[-1]][np.repeat(member, itl.lengths)]
        i50, i99 = _percentiles(samples, (50, 99), MS_PER_S)
    return GroupLatency(
        count=int(member.sum()),
        ok=int((member & cols.ok).sum()),
        ttft_p50=t50,
        ttft_p90=t90,
        ttft_p99=t99,
        itl_p50=i50,
        itl_p99=i99,
    )


def history_shares(cols: RecordColumns, session: np.ndarray, turn: np.ndarray) -> np.ndarray:
    """Each turn's share of its prompt that was history (the module's estimate): 0 for a turn 0, NaN where the
    turn before it is not among the records or the prompt has no tokens (and for requests of no session)."""
    n = len(turn)
    history = np.full(n, np.nan)
    history[turn == 0] = 0.0
    rows = np.flatnonzero((turn >= 0) & (session >= 0))
    order = rows[np.lexsort((turn[rows], session[rows]))]
    before, after = order[:-1], order[1:]
    follows = (session[after] == session[before]) & (turn[after] == turn[before] + 1)
    inputs = cols.input_tokens.astype(float)
    history[after[follows]] = inputs[before[follows]] + cols.output_tokens[before[follows]]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(inputs > 0, np.minimum(history, inputs) / inputs, np.nan)


def _mean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if len(finite) else None


def by_turn(cols: RecordColumns, ttft: np.ndarray, itl: Ragged | None) -> ByTurn | None:
    """Latency by turn index and the history's share of the prompt; None when no record has a turn."""
    turn, session = _column(cols, "turn"), _column(cols, "session_id")
    if turn is None or session is None or not (turn >= 0).any():
        return None
    shares = history_shares(cols, session, turn)
    gathered = int(turn.max()) >= TURN_ROWS
    bucket = np.minimum(turn, TURN_ROWS - 1) if gathered else turn
    rows = []
    for b in np.unique(bucket[turn >= 0]).tolist():
        member = bucket == b
        label = f"{b}+" if gathered and b == TURN_ROWS - 1 else str(b)
        group = _latency(cols, member, ttft, itl).model_dump()
        rows.append(TurnLatency(turn=label, history_share=_mean(shares[member]), **group))
    return ByTurn(
        sessions=len(np.unique(session[(session >= 0) & (turn >= 0)])),
        turns=int((turn >= 0).sum()),
        history_share=_mean(shares),
        history_tokens=HISTORY_TOKENS,
        rows=rows,
    )


def by_model(cols: RecordColumns, ttft: np.ndarray, itl: Ragged | None) -> dict[str, GroupLatency] | None:
    """Latency per model the requests named; None when none named one."""
    model = _column(cols, "model")
    if model is None:
        return None
    names = distinct(model)
    if names in ([], [""]):
        return None
    return {name or DEFAULT_MODEL: _latency(cols, model == name, ttft, itl) for name in names}


def slot_wait(cols: RecordColumns) -> SlotWait | None:
    """The waits for a slot; None when no record has a figure."""
    wait = _column(cols, "slot_wait_s")
    if wait is None:
        return None
    recorded = np.isfinite(wait)
    if not recorded.any():
        return None
    waited = wait[recorded & (wait > 0)]
    p50, p99 = _percentiles(waited, (50, 99))
    return SlotWait(
        recorded=int(recorded.sum()),
        waited=len(waited),
        p50_s=p50,
        p99_s=p99,
        max_s=float(waited.max()) if len(waited) else None,
    )
