"""Compact log of token emissions from engine steps, expanded to per-request token times on demand.

A batch step emits each member's tokens as an arithmetic run (first, interval, count); an iteration step emits
one token per sequence at the step's end.  Both are kept as emission rows in typed arrays (24 bytes a row, one
row per request for batch schedulers), so a million requests cost megabytes until token times are expanded.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from infermeter.metrics.columns import Ragged


class TokenLog:
    def __init__(self) -> None:
        self.owner = array("l")
        self.first = array("d")
        self.interval = array("d")
        self.count = array("l")

    def add_runs(self, owners: list[int], first: list[float], interval: list[float], count: list[int]) -> None:
        """Several runs at once (a step's emissions)."""
        self.owner.extend(owners)
        self.first.extend(first)
        self.interval.extend(interval)
        self.count.extend(count)

    def rows(self, n_requests: int) -> Emissions:
        owner = np.frombuffer(self.owner, dtype=np.int64) if len(self.owner) else np.zeros(0, np.int64)
        order = np.argsort(owner, kind="stable")  # appended in time order, so each request stays in time order
        return Emissions(
            n_requests,
            owner[order],
            np.frombuffer(self.first, dtype=float)[order] if len(self.first) else np.zeros(0),
            np.frombuffer(self.interval, dtype=float)[order] if len(self.interval) else np.zeros(0),
            np.frombuffer(self.count, dtype=np.int64)[order] if len(self.count) else np.zeros(0, np.int64),
        )


@dataclass(frozen=True)
class TokenEnds:
    """Each request's first and last token time (NaN without tokens) and how many tokens it received."""

    first: np.ndarray
    last: np.ndarray
    count: np.ndarray  # integers

    def endpoint_times(self) -> Ragged:
        """Only each request's first and last token time (one value for a one-token reply)."""
        lengths = np.minimum(self.count, 2)
        values = np.column_stack([self.first, self.last]).ravel()
        keep = np.column_stack([lengths >= 1, lengths >= 2]).ravel()
        return Ragged.from_lengths(lengths, values[keep])


@dataclass(frozen=True)
class Emissions:
    """Emission rows sorted by request, each request's rows in time order."""

    n: int
    owner: np.ndarray
    first: np.ndarray
    interval: np.ndarray
    count: np.ndarray

    def tokens_per_request(self) -> np.ndarray:
        return np.bincount(self.owner, weights=self.count, minlength=self.n).astype(np.int64)

    @property
    def last(self) -> np.ndarray:
        """Time of each row's last token."""
        return self.first + (self.count - 1) * self.interval

    def first_token(self) -> np.ndarray:
        out = np.full(self.n, np.nan)
        rows_per = np.bincount(self.owner, minlength=self.n)
        starts = np.concatenate([[0], np.cumsum(rows_per)[:-1]])
        has = rows_per > 0
        out[has] = self.first[starts[has]]
        return out

    def last_token(self) -> np.ndarray:
        out = np.full(self.n, np.nan)
        rows_per = np.bincount(self.owner, minlength=self.n)
        ends = np.cumsum(rows_per) - 1
        has = rows_per > 0
        out[has] = self.last[ends[has]]
        return out

    def ends(self) -> TokenEnds:
        return TokenEnds(self.first_token(), self.last_token(), self.tokens_per_request())

    def token_times(self) -> Ragged:
        """Every token's time, per request (expands the runs)."""
        total = int(self.count.sum())
        row_start = np.zeros(len(self.count) + 1, dtype=np.int64)
        np.cumsum(self.count, out=row_start[1:])
        k = np.arange(total, dtype=np.int64) - np.repeat(row_start[:-1], self.count)
        values = np.repeat(self.first, self.count) + np.repeat(self.interval, self.count) * k
        return Ragged.from_lengths(self.tokens_per_request(), values)

    def itl_parts(self) -> tuple[ItlSamples, ItlSamples]:
        """ITL samples as (owner, value, weight): the gaps inside runs (count - 1 equal gaps), then those between
        a request's consecutive runs; each part in request order."""
        inside = self.count > 1
        same = self.owner[1:] == self.owner[:-1]
        between = self.first[1:] - self.last[:-1]
        return (
            (self.owner[inside], self.interval[inside], self.count[inside] - 1),
            (self.owner[1:][same], between[same], np.ones(int(same.sum()), dtype=np.int64)),
        )

    def itl_weighted(self) -> ItlSamples:
        """Both parts of `itl_parts` in one: inside runs, then between runs."""
        return joined(*self.itl_parts())

    def requests(self, lo: int, hi: int) -> Emissions:
        """The rows of requests lo .. hi - 1, renumbered from 0."""
        a, b = np.searchsorted(self.owner, [lo, hi])
        return Emissions(hi - lo, self.owner[a:b] - lo, self.first[a:b], self.interval[a:b], self.count[a:b])


ItlSamples = tuple[np.ndarray, np.ndarray, np.ndarray]  # owner, value, weight


def joined(first: ItlSamples, then: ItlSamples) -> ItlSamples:
    """Two sets of ITL samples as one: `first`'s, then `then`'s."""
    owner, value, weight = (np.concatenate([a, b]) for a, b in zip(first, then, strict=True))
    return owner, value, weight
