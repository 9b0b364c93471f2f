"""Property tests of the client's SSE decoding: any split of a stream into reads records the same thing, and no bytes
a server may send make the client raise anything but a `StreamFailure` naming a known reason."""

from __future__ import annotations

import asyncio
import bisect
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import DataObject, DrawFn

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest, reasons
from infermeter.client.events import StreamDecoder, StreamFailure
from infermeter.records import RequestRecord, RunClock, failure_reason

REASONS = frozenset(v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str))

# ---- valid streams ----------------------------------------------------------------------------------------------

EOL = st.sampled_from([b"\n", b"\r\n"])
IGNORED_LINES = st.lists(
    st.sampled_from([b": keep-alive", b":", b"event: message", b"event:delta", b"id: 7", b"id:", b"retry: 3000"]),
    max_size=2,
)
BLANKS = st.sampled_from(["", " ", "  ", "\n", "\t", " \n "])  # texts that are never the first token


@dataclass
class Stream:
    """A valid stream's bytes and what decoding it must record."""

    chat: bool
    data: bytes = b""
    line_ends: list[int] = field(default_factory=list)  # offset of the newline ending each chunk's data: line
    tokens: list[int] = field(default_factory=list)
    usage_completion: int | None = None
    usage_prompt: int | None = None

    def add(self, draw: DrawFn, event: dict[str, Any] | None, tokens: int | None) -> None:
        """Append one event (None: [DONE]) in a random framing; `tokens` is the chunk it records (None: none)."""
        for line in draw(IGNORED_LINES):
            self.data += line + draw(EOL)
        payload = b"[DONE]" if event is None else orjson.dumps(event)
        self.data += draw(st.sampled_from([b"data: ", b"data:"])) + payload + draw(EOL)
        if tokens is not None:
            self.line_ends.append(len(self.data) - 1)
            self.tokens.append(tokens)
        if draw(st.booleans()):
            self.data += draw(EOL)  # the blank line ending an event is optional: each data: line is an event


def content(chat: bool, text: str, **fields: Any) -> dict[str, Any]:
    """A completions or chat content event."""
    choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
    return {"id": "cmpl-1", "choices": [choice], **fields}


@st.composite
def valid_streams(draw: DrawFn) -> Stream:
    """An OpenAI stream: [role event], blank events, content (multi-token by usage), [finish], [usage], [DONE]."""
    s = Stream(chat=draw(st.booleans()))
    continuous = draw(st.booleans())  # usage on every event (vLLM's continuous usage stats), else only at the end
    prompt, total = draw(st.integers(0, 10**6)), 0

    def usage(grow: int) -> dict[str, Any]:
        nonlocal total
        total += grow
        if not continuous:
            return {}
        s.usage_completion, s.usage_prompt = total, prompt
        return {"usage": {"prompt_tokens": prompt, "completion_tokens": total}}

    if s.chat:
        s.add(draw, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], **usage(0)}, 0)
    for blank in draw(st.lists(BLANKS, max_size=3)):
        s.add(draw, content(s.chat, blank, **usage(draw(st.integers(0, 1)) if blank else 0)), 0)
    first = draw(st.none() | st.text(min_size=1).filter(str.strip))  # None: a reply without content
    pieces = [first, *draw(st.lists(st.text(max_size=4), max_size=6))] if first else []
    for text in pieces:  # after the first content, an empty text records nothing
        grow = draw(st.integers(1, 4)) if text else 0
        s.add(draw, content(s.chat, text, **usage(grow)), (grow if continuous else 1) if text else None)
    if draw(st.booleans()):  # the finish event: empty, a 0-token chunk only before content
        s.add(
            draw, {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], **usage(0)}, None if first else 0
        )
    if draw(st.booleans()):
        s.usage_completion, s.usage_prompt = total, prompt
        s.add(draw, {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": total}}, None)
    s.add(draw, None, None)  # [DONE]: whatever follows is ignored
    s.data += draw(st.sampled_from([b"", b"\n", b"data: [DONE]\n", b'data: {"choices": 1}\n', b"junk\n", b"\xff"]))
    return s


def cut_points(size: int) -> st.SearchStrategy[list[int]]:
    """Where reads end: anywhere (empty reads included), or after every byte."""
    return st.lists(st.integers(0, size), max_size=30).map(sorted) | st.just(list(range(1, size)))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """The reads of `data` ending at `cuts`."""
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@settings(derandomize=True, deadline=None, max_examples=600)
@given(valid_streams(), st.data())
def test_any_split_records_the_same_chunks_each_at_the_read_completing_its_data_line(
    s: Stream, data: DataObject
) -> None:
    """Chunks, tokens, usage and [DONE] do not depend on how TCP cut the stream, and each event is timed by the read
    holding its data: line's newline (draft B.1.1); blank events before content are 0-token chunks, never the first."""
    cuts = data.draw(cut_points(len(s.data)))
    decoder = StreamDecoder(chat=s.chat)
    first = [now for now, part in enumerate(split(s.data, cuts)) if decoder.feed(part, now)]
    decoder.end()
    got = decoder.state
    times = [bisect.bisect_right(cuts, end) for end in s.line_ends]  # the read holding byte `end`
    assert got.chunk_tokens == s.tokens and got.tokens == sum(s.tokens)
    assert got.chunk_times == times
    assert (got.usage_completion, got.usage_prompt, got.done) == (s.usage_completion, s.usage_prompt, True)
    assert first == [t for t, n in zip(times, s.tokens, strict=True) if n][:1]


# ---- arbitrary bytes ---------------------------------------------------------------------------------------------

KEYS = ["choices", "usage", "infermeter", "delta", "text", "content", "reasoning_content", "role", "logprobs"]
KEYS += ["tokens", "completion_tokens", "prompt_tokens", "server_token_times", "response_start", "error", "message"]
KEYS += ["timings", "prompt_ms", "predicted_ms", "cache_n", "prompt_tokens_details", "cached_tokens"]
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(2**63 - 2, 2**70)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["nan", "inf", "-1e999", " ", "\n", "[DONE]"])
)
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(KEYS), kids, max_size=3),
    max_leaves=12,
)


def maybe(shape: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """A dict with some of these keys, or any JSON value in its place."""
    return st.fixed_dictionaries({}, optional=shape) | json_values


shaped_events = maybe(
    {
        "choices": st.lists(
            maybe(
                {
                    "text": json_values,
                    "delta": maybe({"content": json_values, "reasoning_content": json_values, "role": json_values}),
                    "logprobs": maybe({"tokens": json_values}),
                }
            ),
            max_size=2,
        )
        | json_values,
        "usage": maybe(
            {
                "completion_tokens": json_values,
                "prompt_tokens": json_values,
                "prompt_tokens_details": maybe({"cached_tokens": json_values}),
            }
        ),
        "infermeter": maybe(
            {
                "server_token_times": st.lists(json_values, max_size=3),
                "response_start": json_values,
                "cached_tokens": json_values,
            }
        ),
        "timings": maybe({"prompt_ms": json_values, "predicted_ms": json_values, "cache_n": json_values}),
        "error": json_values,
    }
)
NASTY = [b"NaN", b"-Infinity", b"1e999", b"1" + b"0" * 400, b'"\xff\xfe"', b'{"choices": [{"text": "\xc3"}]}', b""]
payloads = (
    shaped_events.map(lambda v: json.dumps(v, ensure_ascii=False).encode())  # NaN and Infinity included
    | st.sampled_from(NASTY)
    | st.binary(max_size=24)
    | st.integers(1, 1100).map(lambda n: b'{"error": ' + b"[" * n + b"]" * n + b"}")  # up to past orjson's limit
)
lines = (
    st.tuples(st.sampled_from([b"data: ", b"data:"]), payloads).map(b"".join)
    | st.sampled_from([b"", b":", b": ping", b"event: x", b"id: 1", b"retry: x", b"data", b"data: [DONE]", b"\r"])
    | st.binary(max_size=16)
)
well_framed = st.tuples(
    st.lists(shaped_events.map(lambda v: b"data: " + json.dumps(v).encode() + b"\n"), max_size=6).map(b"".join),
    st.sampled_from([b"", b"data: [DONE]\n"]),
).map(b"".join)
junk_streams = (
    well_framed
    | st.lists(st.tuples(lines, st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n", b""])).map(b"".join), max_size=8).map(
        b"".join
    )
    | st.binary(max_size=200)
)


def decode(chat: bool, parts: list[bytes]) -> tuple[StreamDecoder, str | None]:
    """Feed reads as the client does (read i at time i) and end; the failure's reason, or None."""
    decoder = StreamDecoder(chat=chat)
    try:
        for now, part in enumerate(parts):
            decoder.feed(part, now)
        decoder.end()
    except StreamFailure as exc:
        assert exc.reason in REASONS and str(exc).startswith(exc.reason), exc
        return decoder, exc.reason
    return decoder, None


@settings(derandomize=True, deadline=None, max_examples=1000)
@given(st.booleans(), junk_streams, st.data())
def test_arbitrary_bytes_raise_nothing_but_a_stream_failure_with_a_known_reason(
    chat: bool, body: bytes, data: DataObject
) -> None:
    """Whatever a server sends, decoding ends in a record or a known reason, the same for every split into reads."""
    decoder, reason = decode(chat, split(body, data.draw(cut_points(len(body)))))
    whole, whole_reason = decode(chat, [body])
    event(f"reason: {reason}")
    got = decoder.state
    assert len(got.chunk_times) == len(got.chunk_tokens) and got.chunk_times == sorted(got.chunk_times)
    assert all(n >= 0 for n in got.chunk_tokens)
    assert (reason, got.chunk_tokens, got.usage_completion, got.usage_prompt, got.done, got.server) == (
        whole_reason,
        whole.state.chunk_tokens,
        whole.state.usage_completion,
        whole.state.usage_prompt,
        whole.state.done,
        whole.state.server,
    )


def test_an_error_event_nested_deeper_than_repr_can_go_is_a_stream_failure() -> None:
    """Outside hypothesis (which raises the recursion limit): str() of JSON nested 1000 deep raised RecursionError."""
    _, reason = decode(False, [b'data: {"error": ' + b"[" * 1020 + b"]" * 1020 + b"}\n"])
    assert reason == reasons.SERVER_ERROR_EVENT


# ---- end to end --------------------------------------------------------------------------------------------------


async def serve_and_send(chat: bool, status: int, parts: list[bytes], close_early: bool) -> RequestRecord:
    """One request through the real client to a server that writes `parts` as the body (closing mid-body if told)."""

    async def reply(request: web.Request) -> web.StreamResponse:
        await request.read()
        if status != 200:
            return web.Response(status=status, body=b"".join(parts))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for part in parts:
            await resp.write(part)
            await asyncio.sleep(0)
        if close_early and request.transport is not None:
            request.transport.close()  # no final chunk: the body is cut short
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", reply)
    app.router.add_post("/v1/chat/completions", reply)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = ClientConfig(
        f"http://127.0.0.1:{port}",
        api="chat" if chat else "completions",
        model="m",
        first_token_timeout=2,
        total_timeout=3,
    )
    client = OpenAIClient(config, RunClock())
    try:
        return await client.send(PreparedRequest(0, "hi", 1, 8), 0.0)
    finally:
        await client.close()
        await runner.cleanup()


bodies = st.one_of(valid_streams().map(lambda s: (s.chat, s.data)), st.tuples(st.booleans(), junk_streams))


@settings(derandomize=True, deadline=None, max_examples=15)
@given(bodies, st.sampled_from([200, 200, 200, 429, 500]), st.booleans(), st.data())
def test_the_client_turns_any_response_into_a_record_with_a_known_reason(
    body: tuple[bool, bytes], status: int, close_early: bool, data: DataObject
) -> None:
    """`send` never raises: the record is ok exactly when the bytes decode, else its error is "<reason>: <detail>"."""
    chat, raw = body
    parts = split(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=4).map(sorted)))
    rec = asyncio.run(serve_and_send(chat, status, parts, close_early))
    assert rec.status in ("ok", "error", "timeout"), rec
    reason = failure_reason(rec.error)
    event(f"{rec.status}: {reason}")
    assert (rec.status == "ok") == (reason == ""), rec.error
    assert reason in REASONS | {""} or reason.startswith("HTTP "), rec.error
    if status != 200:
        assert reason == f"HTTP {status}"
        return
    offline, expected = decode(chat, [raw])
    if close_early and expected == reasons.UNFINISHED:  # cut before a final chunk: the cut is what the client sees
        assert reason in (reasons.LOST_MID_STREAM, reasons.UNFINISHED), rec.error
    elif rec.status != "timeout":  # a 2 s stall of this machine is the only way to a timeout here
        assert reason == (expected or ""), rec.error
        assert rec.chunk_tokens == offline.state.chunk_tokens
