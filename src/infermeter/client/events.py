"""OpenAI streaming events -> what a record needs: content chunks with their times, token counts, usage, and what
the server reported about its own timing (read by the extractors of `client.server_timing`).

Pure and clock-free: `feed(bytes, now)` with the time the read returned, `end()` when the stream closes.  Anything
malformed ends the stream with a `StreamFailure` naming the reason; nothing else escapes, whatever the bytes.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from infermeter.client import reasons
from infermeter.client.server_timing import EXTRACTORS, ServerTiming, TimingExtractor
from infermeter.client.sse import SSEParser


class StreamFailure(Exception):
    """The stream cannot be read further; `reason` is one of `client.reasons`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class StreamState:
    """What one response stream has delivered so far."""

    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    content_started: bool = False
    usage_completion: int | None = None
    usage_prompt: int | None = None
    server: ServerTiming = field(default_factory=ServerTiming)
    headers_at: float | None = None  # run-clock time the client received the response headers
    done: bool = False
    cumulative: int | None = None  # continuous usage stats: completion tokens so far
    text: list[str] = field(default_factory=list)  # the content pieces, joined and counted once the stream ends
    finish_reason: str | None = None  # the last one the stream named
    final: bool = False  # a final chunk arrived: one naming a finish_reason, or usage with no choices

    @property
    def no_done(self) -> bool:
        """Complete (a final chunk arrived) but without data: [DONE]."""
        return self.final and not self.done

    @property
    def tokens(self) -> int:
        return sum(self.chunk_tokens)


def _snippet(raw: bytes | str, n: int = 80) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return repr(text[:n]) + ("..." if len(text) > n else "")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


_READERS = tuple((e.key, e.extract) for e in EXTRACTORS)
_KEYS = frozenset(key for key, _ in _READERS)


class StreamDecoder:
    """Decodes one completions or chat-completions SSE stream."""

    def __init__(self, chat: bool, extractors: Iterable[TimingExtractor] = EXTRACTORS, keep_text: bool = False) -> None:
        self.chat = chat
        self.parser = SSEParser()
        self.state = StreamState()
        self.keep_text = keep_text  # the reply's text is kept only when something counts it at the end
        if extractors is EXTRACTORS:
            self._timing_readers, self._timing_keys = _READERS, _KEYS
        else:
            self._timing_readers = tuple((e.key, e.extract) for e in extractors)
            self._timing_keys = frozenset(key for key, _ in self._timing_readers)

    def feed(self, data: bytes, now: float) -> bool:
        """Take the bytes of one read; True when the first content token arrived in them."""
        state = self.state
        was_started = state.content_started
        for payload in self.parser.feed(data):
            if state.done:
                continue  # nothing after [DONE] counts
            if payload == b"[DONE]":
                state.done = True
                continue
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise StreamFailure(reasons.INVALID_JSON, _snippet(payload)) from None
            if not isinstance(event, dict):
                raise StreamFailure(reasons.MALFORMED_EVENT, f"not a JSON object: {_snippet(payload)}")
            if "error" in event:
                error = event["error"]
                message = error.get("message", error) if isinstance(error, dict) else error
                # reprlib, not str(): JSON nested ~1000 deep (orjson allows 1024) would raise RecursionError
                text = message if isinstance(message, str) else reprlib.repr(message)
                raise StreamFailure(reasons.SERVER_ERROR_EVENT, text[:200])
            try:
                self._event(event, now)
            except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as exc:
                raise StreamFailure(reasons.MALFORMED_EVENT, f"{exc}: {_snippet(payload)}") from None
        if self.parser.error is not None and not state.done:  # a malformed line after [DONE] is ignored too
            raise StreamFailure(reasons.MALFORMED_SSE, self.parser.error)
        return state.content_started and not was_started

    def end(self) -> None:
        """The stream closed cleanly: complete after [DONE] or after a final chunk (servers such as `transformers
        serve` send no [DONE], and the OpenAI SDK accepts that); a failure if it stopped mid-line or before any
        final chunk."""
        state = self.state
        if state.done:
            return
        if self.parser.pending.strip():
            raise StreamFailure(reasons.UNFINISHED, f"the stream stopped mid-line: {_snippet(self.parser.pending)}")
        if not self.closed_complete():
            raise StreamFailure(reasons.UNFINISHED, f"after {state.tokens} tokens, no finish_reason")

    def closed_complete(self) -> bool:
        """Whether a stream that ends here (closed, or cut) delivered a whole reply: [DONE], or a final chunk."""
        return self.state.done or self.state.final

    def _event(self, event: dict[str, Any], now: float) -> None:
        state = self.state
        if not self._timing_keys.isdisjoint(event):  # one set test for the many events that carry no report
            for key, extract in self._timing_readers:
                if key in event:
                    extract(event[key], state.server)
        usage = event.get("usage")
        delta_usage: int | None = None
        if isinstance(usage, dict):
            total = _count(usage.get("completion_tokens"))
            if total is not None:
                delta_usage = total - (state.cumulative or 0)
                state.cumulative = total
                state.usage_completion = total
            prompt = _count(usage.get("prompt_tokens"))
            if prompt is not None:
                state.usage_prompt = prompt
        choices = event.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            if isinstance(usage, dict) and not choices:
                state.final = True  # the usage chunk include_usage asks for: the last before [DONE]
            return
        choice = choices[0]
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            state.finish_reason = reason[:40]
            state.final = True
        if self.chat:
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            text = delta.get("content") or delta.get("reasoning_content") or ""
        else:
            text = choice.get("text") or ""
        if not isinstance(text, str):
            raise TypeError(f"content is a {type(text).__name__}, not text")
        if text and self.keep_text:
            state.text.append(text)
        if not state.content_started and not text.strip():
            # draft 5.1.3.1: empty, whitespace-only and role-only events before content are not the first token
            state.chunk_times.append(now)
            state.chunk_tokens.append(0)
            return
        if not text:
            return
        logprobs = choice.get("logprobs")
        if delta_usage is not None and delta_usage > 0:
            count = delta_usage
        elif isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list) and logprobs["tokens"]:
            count = len(logprobs["tokens"])
        else:
            count = 1
        state.content_started = True
        state.chunk_times.append(now)
        state.chunk_tokens.append(count)
