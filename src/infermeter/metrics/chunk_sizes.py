"""Tokens per content chunk over a run's successful requests (draft B.2.1's delivery pattern), counted a block of
requests at a time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChunkSizes:
    """Tokens per content chunk (one that carried a token) over the ok requests: how many chunks, their tokens,
    how many carried a single token, and the most one carried."""

    chunks: int = 0
    tokens: int = 0
    single: int = 0
    top: int = 0

    @classmethod
    def of(cls, values: np.ndarray, ok: np.ndarray) -> ChunkSizes:
        """The chunks of a block of requests: each chunk's tokens, and whether its request succeeded."""
        content = (values > 0) & ok
        counted = int(np.count_nonzero(content))
        if not counted:
            return cls()
        return cls(
            chunks=counted,
            tokens=int(values.sum(where=content, dtype=np.int64)),
            single=int(np.count_nonzero(content & (values == 1))),
            top=int(values.max(where=content, initial=0)),
        )

    def __add__(self, other: ChunkSizes) -> ChunkSizes:
        return ChunkSizes(
            self.chunks + other.chunks, self.tokens + other.tokens, self.single + other.single, max(self.top, other.top)
        )
