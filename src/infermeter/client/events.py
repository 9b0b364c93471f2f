"""Streamed replies -> what a record needs: content chunks with their times, token counts, usage, and what the server
reported about its own timing (read by the extractors of `client.server_timing`).  `EventDecoder` is the loop every
SSE stream of JSON events shares; `StreamDecoder` reads OpenAI completions and chat events with it (the other
formats' decoders live beside their bodies, `client.api_*`).

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
from infermeter.client.server_timing import EXTRACTORS, INT32_MAX, ServerTiming, TimingExtractor
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
    # replies that are one body, not a token stream (embeddings, rerank)
    completed_at: float | None = None  # run-clock time the last read of the body returned
    inputs: int | None = None  # how many embeddings or rerank results came back

    @property
    def no_done(self) -> bool:
        """Complete (a final chunk arrived) but without data: [DONE]."""
        return self.final and not self.done

    @property
    def tokens(self) -> int:
        return sum(self.chunk_tokens)


def snippet(raw: bytes | str, n: int = 80) -> str:
    """The start of some received bytes, quoted, for an error's detail."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return repr(text[:n]) + ("..." if len(text) > n else "")


def count(value: Any) -> int | None:
    """A JSON integer (not a bool) a record's int32 column holds and not negative, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX else None


def error_text(error: Any) -> str:
    """What an error a server sent says: its message when it has one (200 characters at most)."""
    message = error.get("message", error) if isinstance(error, dict) else error
    # reprlib, not str(): JSON nested ~1000 deep (orjson allows 1024) would raise RecursionError
    text = message if isinstance(message, str) else reprlib.repr(message)
    return text[:200]


_READERS = tuple((e.key, e.extract) for e in EXTRACTORS)
_KEYS = frozenset(key for key, _ in _READERS)


# what reading one event's fields may raise on a malformed event: a MALFORMED_EVENT failure
EVENT_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError)


class EventDecoder:
    """One SSE stream of JSON events: each `data:` payload parsed and handed to `_event`; `data: [DONE]` ends it
    (what follows is ignored), an object with an "error" key is the server's failure.  Subclasses read the events
    of one API and say when a reply is complete (`closed_complete`)."""

    unfinished = "no finish_reason"  # what a cut reply lacked, for the failure's detail

    def __init__(self, keep_text: bool = False) -> None:
        self.parser = SSEParser()
        self.state = StreamState()
        self.keep_text = keep_text  # the reply's text is kept only when something counts it at the end

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
                raise StreamFailure(reasons.INVALID_JSON, snippet(payload)) from None
            if not isinstance(event, dict):
                raise StreamFailure(reasons.MALFORMED_EVENT, f"not a JSON object: {snippet(payload)}")
            if "error" in event:
                raise StreamFailure(reasons.SERVER_ERROR_EVENT, error_text(event["error"]))
            try:
                self._event(event, now)
            except EVENT_ERRORS as exc:
                raise StreamFailure(reasons.MALFORMED_EVENT, f"{exc}: {snippet(payload)}") from None
        if self.parser.error is not None and not state.done:  # a malformed line after [DONE] is ignored too
            raise StreamFailure(reasons.MALFORMED_SSE, self.parser.error)
        return state.content_started and not was_started

    def end(self) -> None:
        """The stream closed cleanly: complete after [DONE] that `closed_complete` accepts, else a failure if it
        stopped mid-line or before the reply was whole."""
        state = self.state
        if state.done and self.closed_complete():
            return
        if self.parser.pending.strip():
            raise StreamFailure(reasons.UNFINISHED, f"the stream stopped mid-line: {snippet(self.parser.pending)}")
        if not self.closed_complete():
            raise StreamFailure(reasons.UNFINISHED, f"after {state.tokens} tokens, {self.unfinished}")

    def closed_complete(self) -> bool:
        """Whether a stream that ends here (closed, or cut) delivered a whole reply: by default [DONE], or a final
        chunk (servers such as `transformers serve` send no [DONE], and the OpenAI SDK accepts that)."""
        return self.state.done or self.state.final

    def _event(self, event: dict[str, Any], now: float) -> None:
        """Read one event (a JSON object without "error"); malformed fields raise one of EVENT_ERRORS."""
        raise NotImplementedError

    def _chunk(self, text: str, tokens: int, now: float) -> bool:
        """Record a piece of reply text that arrived at `now` carrying `tokens` tokens; False when it is no content:
        before the first content token, an empty or whitespace-only piece is a 0-token chunk (draft 5.1.3.1), and
        after it an empty piece records nothing."""
        state = self.state
        if text and self.keep_text:
            state.text.append(text)
        if not state.content_started and not text.strip():
            state.chunk_times.append(now)
            state.chunk_tokens.append(0)
            return False
        if not text:
            return False
        state.content_started = True
        state.chunk_times.append(now)
        state.chunk_tokens.append(tokens)
        return True

    def _no_content(self, now: float) -> None:
        """An event that carries no text: a 0-token chunk before the first content token, nothing after."""
        if not self.state.content_started:
            self.state.chunk_times.append(now)
            self.state.chunk_tokens.append(0)


class StreamDecoder(EventDecoder):
    """Decodes one completions or chat-completions SSE stream."""

    def __init__(self, chat: bool, extractors: Iterable[TimingExtractor] = EXTRACTORS, keep_text: bool = False) -> None:
        super().__init__(keep_text)
        self.chat = chat
        if extractors is EXTRACTORS:
            self._timing_readers, self._timing_keys = _READERS, _KEYS
        else:
            self._timing_readers = tuple((e.key, e.extract) for e in extractors)
            self._timing_keys = frozenset(key for key, _ in self._timing_readers)

    def _event(self, event: dict[str, Any], now: float) -> None:
        state = self.state
        if not self._timing_keys.isdisjoint(event):  # one set test for the many events that carry no report
            for key, extract in self._timing_readers:
                if key in event:
                    extract(event[key], state.server)
        usage = event.get("usage")
        delta_usage: int | None = None
        if isinstance(usage, dict):
            total = count(usage.get("completion_tokens"))
            if total is not None:
                delta_usage = total - (state.cumulative or 0)
                state.cumulative = total
                state.usage_completion = total
            prompt = count(usage.get("prompt_tokens"))
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
            tokens = delta_usage
        elif isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list) and logprobs["tokens"]:
            tokens = len(logprobs["tokens"])
        else:
            tokens = 1
        state.content_started = True  # the chunk is recorded inline, not by _chunk: one call less per event
        state.chunk_times.append(now)
        state.chunk_tokens.append(tokens)
