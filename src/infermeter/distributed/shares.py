"""How a run's requests are dealt to workers: every request keeps its id, lengths and scheduled time, so the union
of the shares is the single-process run's schedule exactly."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Deal:
    """One worker's rows of the run's requests and, in a closed loop, its part of the concurrency."""

    rows: np.ndarray
    concurrency: int | None = None


def deal(n: int, workers: int, concurrency: int | None = None) -> list[Deal]:
    """Open loop: request i to worker i mod W, each sent at its own absolute time (the arrival process kept).
    Closed loop: the concurrency's C slots to the workers in turn (no worker gets none; at most C workers), and
    request i to the worker holding slot i mod C, so each worker's share matches its part of the concurrency."""
    rows = np.arange(n, dtype=np.int64)
    if concurrency is None:
        return [Deal(rows[k::workers]) for k in range(workers)]
    used = min(workers, concurrency)
    slots = np.arange(concurrency) % used  # slot -> worker
    owner = slots[rows % concurrency]
    return [Deal(rows[owner == k], int(np.sum(slots == k))) for k in range(used)]


def id_ranges(ids: Iterable[int]) -> str:
    """Request ids as compact runs: "3-7,12,20-40:2" (a step after the colon when it is not 1; a run is three or
    more ids a constant step apart, as a round-robin share's are)."""
    values = sorted({int(i) for i in ids})
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i + 1
        if j < len(values):
            step = values[j] - values[i]
            while j + 1 < len(values) and values[j + 1] - values[j] == step:
                j += 1
            if j - i >= 2:
                out.append(f"{values[i]}-{values[j]}" + (f":{step}" if step != 1 else ""))
                i = j + 1
                continue
        out.append(str(values[i]))
        i += 1
    return ",".join(out)
