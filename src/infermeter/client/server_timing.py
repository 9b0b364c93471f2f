"""What servers report about their own timing in a stream's events, each report read by one small extractor.

An extractor names the top-level event key that carries its report; the decoder hands it the value only in events
that have the key, and an event without any of the keys costs one set test.
Reports read today:

- infermeter's emulator: `"infermeter": {"server_token_times": [...], "response_start": s, "cached_tokens": n}`;
- llama.cpp's llama-server: `"timings": {"prompt_ms", "predicted_ms", "cache_n", ...}` in the last chunk of a
  stream (in every chunk with `timings_per_token`: the last one seen wins);
- OpenAI-style usage details, as vLLM sends them with `--enable-prompt-tokens-details`:
  `"usage": {"prompt_tokens_details": {"cached_tokens": n}}` (vLLM leaves it out when nothing was cached).

A later report of the same quantity replaces an earlier one; within one event, extractors run in `EXTRACTORS` order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Protocol

from infermeter.units import S_PER_MS

INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class ServerTiming:
    """One request's timing as its server reported it; None where no event reported it."""

    token_offsets: list[float] | None = None  # emission time of each token, s after the request arrived (emulator)
    response_start: float | None = None  # s after the request arrived at which the headers were sent (emulator)
    cached_tokens: int | None = None  # prompt tokens served from the server's prefix cache
    prefill_s: float | None = None  # time the server spent processing the prompt (its uncached part)
    decode_s: float | None = None  # time the server spent generating the output tokens


class TimingExtractor(Protocol):
    """Reads one server's timing report from the value under `key` in an event that has it."""

    @property
    def key(self) -> str: ...

    def extract(self, value: object, timing: ServerTiming) -> None:
        """Fill `timing` from the report; a field the report lacks or mangles is left as it was."""


def _number(value: object) -> float | None:
    """A finite JSON number (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _count(value: object) -> int | None:
    """A JSON integer (not a bool) that fits the record's int32 column and is not negative, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX else None


def _ms(value: object) -> float | None:
    """Seconds from a non-negative number of milliseconds, else None."""
    ms = _number(value)
    return ms * S_PER_MS if ms is not None and ms >= 0 else None


class EmulatorTimes:
    """infermeter's emulator: each token's emission time and when the response started, on the server's clock."""

    key = "infermeter"

    def extract(self, value: object, timing: ServerTiming) -> None:
        # float() of a non-number raises, which the decoder reports as a malformed event: the emulator is ours
        if not isinstance(value, dict):
            return
        if isinstance(value.get("server_token_times"), list):
            offsets = [float(x) for x in value["server_token_times"]]
            if all(math.isfinite(x) for x in offsets):
                timing.token_offsets = offsets
                timing.response_start = _number(value.get("response_start"))
        cached = _count(value.get("cached_tokens"))
        if cached is not None:
            timing.cached_tokens = cached


class LlamaCppTimings:
    """llama.cpp's llama-server `timings`: prompt_ms (uncached prompt), predicted_ms, cache_n (reused prompt)."""

    key = "timings"

    def extract(self, value: object, timing: ServerTiming) -> None:
        if not isinstance(value, dict):
            return
        prefill, decode, cached = (
            _ms(value.get("prompt_ms")),
            _ms(value.get("predicted_ms")),
            _count(value.get("cache_n")),
        )
        if prefill is not None:
            timing.prefill_s = prefill
        if decode is not None:
            timing.decode_s = decode
        if cached is not None:
            timing.cached_tokens = cached


class UsageCachedTokens:
    """OpenAI-style `usage.prompt_tokens_details.cached_tokens` (vLLM with --enable-prompt-tokens-details)."""

    key = "usage"

    def extract(self, value: object, timing: ServerTiming) -> None:
        details = value.get("prompt_tokens_details") if isinstance(value, dict) else None
        if isinstance(details, dict):
            cached = _count(details.get("cached_tokens"))
            if cached is not None:
                timing.cached_tokens = cached


EXTRACTORS: Final[tuple[TimingExtractor, ...]] = (EmulatorTimes(), LlamaCppTimings(), UsageCachedTokens())
