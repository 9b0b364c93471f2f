"""Faults the emulator injects, so that every way a server or a stream can fail is reproducible on a laptop.

A configuration lists faults, each hitting a share of the generation requests; shares never overlap (one draw per
request picks at most one fault), so a test can count exactly what it asked for.  Some kinds are not failures but
stream shapes a correct client must accept (CRLF line endings, events split over many reads, keep-alive comments,
no usage in the final chunk).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

FaultKind = Literal[
    "http_429",
    "http_500",
    "http_503",
    "reset_before_headers",
    "reset_mid_stream",
    "reset_before_done",
    "stall_before_first_token",
    "stall_mid_stream",
    "invalid_json",
    "line_without_data",
    "error_event",
    "no_done",
    "end_before_finish",
    "crlf",
    "split_reads",
    "keep_alive",
    "no_final_usage",
]

KINDS: dict[str, str] = {
    "http_429": "answer HTTP 429 Too Many Requests (with Retry-After when retry_after_s is set)",
    "http_500": "answer HTTP 500 Internal Server Error",
    "http_503": "answer HTTP 503 Service Unavailable",
    "reset_before_headers": "close the connection before any response",
    "reset_mid_stream": "close the connection after a share `at` of the tokens",
    "reset_before_done": "close the connection after the final chunk (usage), before [DONE] (a complete reply)",
    "stall_before_first_token": "hold the stream stall_s seconds before the first token",
    "stall_mid_stream": "hold the stream stall_s seconds after a share `at` of the tokens",
    "invalid_json": "send an event whose data is not JSON after a share `at` of the tokens",
    "line_without_data": "send a line without a data: field after a share `at` of the tokens",
    "error_event": "send an error event (as vLLM does) after a share `at` of the tokens, then [DONE]",
    "no_done": "end the stream after its final chunk without [DONE], as `transformers serve` does (valid)",
    "end_before_finish": "end the stream cleanly after a share `at` of the tokens, before any final chunk",
    "crlf": "end every line with CRLF (valid SSE)",
    "split_reads": "write every event a few bytes at a time (valid SSE)",
    "keep_alive": "send ': keep-alive' comment lines between events (valid SSE)",
    "no_final_usage": "leave usage out of the final chunk (valid)",
}
HTTP_STATUS = {"http_429": 429, "http_500": 500, "http_503": 503}
HTTP_MESSAGE = {
    429: "Rate limit reached for requests (injected fault)",
    500: "The server had an error while processing your request (injected fault)",
    503: "The engine is overloaded, try again later (injected fault)",
}
VALID_SHAPES = ("crlf", "split_reads", "keep_alive", "no_final_usage", "no_done", "reset_before_done")


class Fault(BaseModel):
    """One fault: its kind, the share of requests it hits, and its parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    kind: FaultKind
    share: float = Field(default=1.0, ge=0, le=1, description="share of generation requests it hits")
    at: float = Field(default=0.5, ge=0, le=1, description="mid-stream faults: after this share of the tokens")
    stall_s: float = Field(default=5.0, ge=0, le=3600, description="stalls: how long the stream holds")
    retry_after_s: float | None = Field(default=None, ge=0, le=86400, description="http_429: Retry-After header")

    @model_validator(mode="after")
    def _retry_after_for_429(self) -> Fault:
        if self.retry_after_s is not None and self.kind != "http_429":
            raise ValueError("retry_after_s applies to http_429 only")
        return self

    def token_index(self, max_tokens: int) -> int:
        """Which token (0-based) a mid-stream fault strikes after: at 0.5 of 10 tokens, after the fifth (index 4)."""
        return min(max(int(self.at * max_tokens) - 1, 0), max(max_tokens - 1, 0))


def check_shares(faults: list[Fault]) -> None:
    total = sum(f.share for f in faults)
    if total > 1.0 + 1e-9:
        raise ValueError(f"fault shares add up to {total:g}; they must not exceed 1 (a request gets one fault at most)")


class FaultPlan:
    """Draws at most one fault per request from the configured shares, reproducibly from the seed."""

    def __init__(self, faults: list[Fault], seed: int) -> None:
        check_shares(faults)
        self.faults = faults
        self.edges = np.cumsum([f.share for f in faults])
        self.rng = np.random.default_rng([seed, 0xFA17])

    def draw(self) -> Fault | None:
        if not self.faults:
            return None
        u = self.rng.random()
        k = int(np.searchsorted(self.edges, u, side="right"))
        return self.faults[k] if k < len(self.faults) else None
