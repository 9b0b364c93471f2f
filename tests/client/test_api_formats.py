"""Every --api format beyond completions and chat: the body it sends, its decoder fed recorded replies split at every
byte and at random places, malformed replies failing with a known reason, and one request each through the client
against a small server on 127.0.0.1 written here."""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.strategies import DataObject

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest, api_pooling, reasons
from infermeter.client.api_native import SGLANG, TGI, TRITON, SglangDecoder, TgiDecoder, TritonDecoder
from infermeter.client.api_openai import CHAT, COMPLETIONS
from infermeter.client.api_pooling import EMBEDDINGS, RERANK, BodyDecoder, read_embeddings, read_rerank
from infermeter.client.api_responses import RESPONSES, ResponsesDecoder
from infermeter.client.apis import api_format
from infermeter.client.events import EventDecoder, StreamFailure
from infermeter.client.media import MediaItem
from infermeter.client.openai_sse import Message
from infermeter.records import RequestRecord, RunClock, failure_reason

REASONS = frozenset(v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str))
IMAGE = MediaItem("image", "image/png", "aW1n", 3, width=2, height=2)
AUDIO = MediaItem("audio", "audio/wav", "d2F2", 3, seconds=0.5)


def config(api: str, **kw: Any) -> ClientConfig:
    return ClientConfig("http://127.0.0.1:1", api=api, **{"model": "m", **kw})


# ---- bodies ------------------------------------------------------------------------------------------------------


def test_every_format_is_registered_under_its_name() -> None:
    formats = [COMPLETIONS, CHAT, RESPONSES, EMBEDDINGS, RERANK, TGI, SGLANG, TRITON]
    assert [api_format(f.name) for f in formats] == formats
    assert [f.generates for f in formats] == [True, True, True, False, False, True, True, True]


def test_a_chat_body_without_media_is_the_bytes_it_always_was() -> None:
    """Content stays a plain string, and the keys keep their order (servers and recorded fixtures see the same)."""
    body = orjson.dumps(CHAT.body(PreparedRequest(0, "hi", 1, 8), config("chat", temperature=0.5)))
    assert body == (
        b'{"model":"m","max_tokens":8,"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,'
        b'"messages":[{"role":"user","content":"hi"}],"ignore_eos":true}'
    )
    body = orjson.dumps(COMPLETIONS.body(PreparedRequest(0, "hi", 1, 8), config("completions", ignore_eos=False)))
    assert body == (
        b'{"model":"m","max_tokens":8,"stream":true,"stream_options":{"include_usage":true},"temperature":0.0,'
        b'"prompt":"hi"}'
    )


HISTORY = (
    Message("system", "be brief"),
    Message("user", "first"),
    Message("assistant", "answer"),
    Message("user", "second"),
    Message("assistant", "prefill"),
)


def test_chat_media_follow_the_text_of_the_last_user_message() -> None:
    req = PreparedRequest(0, "second", 1, 8, messages=HISTORY, media=(IMAGE, AUDIO))
    messages = CHAT.body(req, config("chat"))["messages"]
    assert [m["content"] for m in messages[:3]] == ["be brief", "first", "answer"]
    assert messages[3]["content"] == [
        {"type": "text", "text": "second"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
        {"type": "input_audio", "input_audio": {"data": "d2F2", "format": "wav"}},
    ]
    assert messages[4] == {"role": "assistant", "content": "prefill"}
    alone = CHAT.body(PreparedRequest(0, "look", 1, 8, media=(IMAGE,)), config("chat"))["messages"]
    assert alone == [{"role": "user", "content": [{"type": "text", "text": "look"}, CHAT_IMAGE]}]


CHAT_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}}


def test_a_responses_body_types_every_part_and_puts_media_after_the_last_user_text() -> None:
    req = PreparedRequest(0, "second", 1, 8, messages=HISTORY, media=(IMAGE,))
    body = RESPONSES.body(req, config("responses", temperature=0.7))
    assert RESPONSES.path(config("responses")) == "/v1/responses"
    assert {k: v for k, v in body.items() if k != "input"} == {
        "model": "m",
        "max_output_tokens": 8,
        "stream": True,
        "temperature": 0.7,
        "ignore_eos": True,
    }
    assert body["input"] == [
        {"role": "system", "content": [{"type": "input_text", "text": "be brief"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "first"}]},
        {"role": "assistant", "content": "answer"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "second"},
                {"type": "input_image", "image_url": "data:image/png;base64,aW1n", "detail": "auto"},
            ],
        },
        {"role": "assistant", "content": "prefill"},
    ]
    # every item as the OpenAI SDK's own types define a Responses input item (vLLM validates against them)
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    items = TypeAdapter(list[ResponseInputItemParam])
    assert items.validate_python(body["input"]) == body["input"]
    with pytest.raises(ValueError, match="no audio"):
        RESPONSES.body(dataclasses.replace(req, media=(AUDIO,)), config("responses"))
    plain = RESPONSES.body(PreparedRequest(0, "hi", 1, 8, model="lora"), config("responses", ignore_eos=False))
    assert plain == {
        "model": "lora",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "max_output_tokens": 8,
        "stream": True,
        "temperature": 0.0,
    }


def test_embeddings_and_rerank_bodies_carry_every_input() -> None:
    req = PreparedRequest(0, "a", 1, 0, inputs=("a", "b", "c"))
    assert EMBEDDINGS.path(config("embeddings")) == "/v1/embeddings"
    assert EMBEDDINGS.body(req, config("embeddings")) == {
        "model": "m",
        "input": ["a", "b", "c"],
        "encoding_format": "float",
    }
    assert EMBEDDINGS.body(PreparedRequest(0, "solo", 1, 0), config("embeddings"))["input"] == ["solo"]
    owed = [EMBEDDINGS.decoder(r, False).sent for r in (PreparedRequest(0, "solo", 1, 0), req)]
    assert owed == [1, 3]  # one embedding per text of the body
    docs = PreparedRequest(0, "query", 1, 0, inputs=("d0", "d1"))
    want = {"model": "m", "query": "query", "documents": ["d0", "d1"], "top_n": 2}
    for shape, path in [("vllm", "/v1/rerank"), ("cohere", "/v2/rerank"), ("jina", "/v1/rerank")]:
        cfg = config("rerank", rerank_shape=shape)
        assert (RERANK.path(cfg), RERANK.body(docs, cfg)) == (path, want)
    tei = config("rerank", rerank_shape="tei")
    assert (RERANK.path(tei), RERANK.body(docs, tei)) == ("/rerank", {"query": "query", "texts": ["d0", "d1"]})
    assert RERANK.body(PreparedRequest(0, "q", 1, 0), config("rerank"))["documents"] == []
    assert [RERANK.decoder(r, False).sent for r in (PreparedRequest(0, "q", 1, 0), docs)] == [0, 2]


def test_native_bodies_speak_each_engines_parameters() -> None:
    req = PreparedRequest(0, "Once", 1, 16, model="ignored")
    greedy, warm = config("tgi"), config("tgi", temperature=0.8, ignore_eos=False)
    assert TGI.path(greedy) == "/generate_stream"
    assert TGI.body(req, greedy) == {
        "inputs": "Once",
        "parameters": {"max_new_tokens": 16, "details": True, "do_sample": False},
    }
    assert TGI.body(req, warm)["parameters"] == {
        "max_new_tokens": 16,
        "details": True,
        "temperature": 0.8,
        "do_sample": True,
    }
    assert SGLANG.path(greedy) == "/generate"
    assert SGLANG.body(req, config("sglang", temperature=0.3)) == {
        "text": "Once",
        "sampling_params": {"max_new_tokens": 16, "temperature": 0.3, "ignore_eos": True},
        "stream": True,
    }
    assert "ignore_eos" not in SGLANG.body(req, config("sglang", ignore_eos=False))["sampling_params"]
    assert TRITON.path(config("triton", model="org/llama 3")) == "/v2/models/org%2Fllama%203/generate_stream"
    assert TRITON.body(req, config("triton")) == {
        "text_input": "Once",
        "max_tokens": 16,
        "stream": True,
        "temperature": 0.0,
        "min_length": 16,  # TensorRT-LLM's way to run a reply to its cap: it has no ignore_eos
    }
    assert "min_length" not in TRITON.body(req, config("triton", ignore_eos=False))


# ---- recorded streams --------------------------------------------------------------------------------------------


@dataclass
class Recorded:
    """A stream's bytes, the offset of the newline ending each chunk's data: line, and what decoding it records."""

    data: bytes = b""
    ends: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def add(
        self, event: dict[str, Any] | str, tokens: int | None, named: bool = False, prefix: bytes = b"data: "
    ) -> None:
        if named and isinstance(event, dict):
            self.data += b"event: " + event["type"].encode() + b"\n"
        self.data += prefix + (event.encode() if isinstance(event, str) else orjson.dumps(event)) + b"\n"
        if tokens is not None:
            self.ends.append(len(self.data) - 1)
            self.tokens.append(tokens)
        self.data += b"\n"


def recorded(events: list[tuple[dict[str, Any] | str, int | None]], named: bool = False, prefix: bytes = b"data: "):
    r = Recorded()
    for payload, tokens in events:
        r.add(payload, tokens, named, prefix)
    return r


def responses_event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "sequence_number": 0, **fields}


def delta(text: str, kind: str = "response.output_text.delta") -> dict[str, Any]:
    return responses_event(kind, item_id="msg_1", output_index=0, content_index=0, delta=text)


USAGE = {"input_tokens": 7, "output_tokens": 4, "total_tokens": 11}
RESPONSES_STREAM = recorded(
    [
        (responses_event("response.created", response={"id": "resp_1", "status": "in_progress"}), 0),
        (responses_event("response.in_progress", response={"id": "resp_1", "status": "in_progress"}), 0),
        (responses_event("response.output_item.added", item={"type": "reasoning"}), 0),
        (delta("", "response.reasoning_text.delta"), 0),
        (delta("Think", "response.reasoning_text.delta"), 1),
        (responses_event("response.content_part.added", part={"type": "output_text", "text": ""}), None),
        (delta("Hello"), 1),
        (delta(""), None),
        (delta(" world"), 1),
        (delta("!"), 1),
        (responses_event("response.output_text.done", text="Hello world!"), None),
        (responses_event("response.output_item.done", item={}), None),
        (responses_event("response.completed", response={"status": "completed", "usage": USAGE}), None),
    ],
    named=True,
)
TGI_STREAM = recorded(
    [
        ({"index": 1, "token": {"id": 1, "text": "<s>", "special": True}, "generated_text": None, "details": None}, 0),
        ({"index": 2, "token": {"id": 2, "text": " ", "special": False}, "generated_text": None, "details": None}, 0),
        ({"index": 3, "token": {"id": 3, "text": "Hi", "special": False}, "generated_text": None, "details": None}, 1),
        ({"index": 4, "token": {"id": 4, "text": " you", "special": False}, "generated_text": None}, 1),
        (
            {
                "index": 5,
                "token": {"id": 2, "text": "</s>", "logprob": -0.1, "special": True},
                "generated_text": " Hi you",
                "details": {"finish_reason": "eos_token", "generated_tokens": 4, "seed": None},
            },
            None,
        ),
    ],
    prefix=b"data:",
)


def sglang_event(text: str, completion: int, finish: Any = None) -> dict[str, Any]:
    meta = {"id": "r1", "prompt_tokens": 5, "completion_tokens": completion, "cached_tokens": 2}
    return {"text": text, "meta_info": {**meta, "finish_reason": finish}}


SGLANG_STREAM = recorded(
    [
        (sglang_event("", 0), 0),
        (sglang_event("Hello", 1), 1),
        (sglang_event("Hello", 2), None),  # a token whose text is held back: it arrives with the next piece
        (sglang_event("Hello wor", 3), 2),
        (sglang_event("Hello world", 4, {"type": "length", "length": 4}), 1),
        ("[DONE]", None),
    ]
)
TRITON_STREAM = recorded(
    [({"model_name": "m", "model_version": "1", "text_output": text}, 1) for text in ["A", " b", " c"]]
    + [({"model_name": "m", "model_version": "1", "text_output": ""}, None)]
)


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], EventDecoder]
    stream: Recorded
    usage: tuple[int | None, int | None]  # completion, prompt
    finish: str | None
    text: str


CASES = [
    Case("responses", lambda: ResponsesDecoder(keep_text=True), RESPONSES_STREAM, (4, 7), "stop", "ThinkHello world!"),
    Case("tgi", lambda: TgiDecoder(keep_text=True), TGI_STREAM, (4, None), "stop", " Hi you"),
    Case("sglang", lambda: SglangDecoder(keep_text=True), SGLANG_STREAM, (4, 5), "length", "Hello world"),
    Case("triton", lambda: TritonDecoder(keep_text=True), TRITON_STREAM, (None, None), None, "A b c"),
]


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def check(case: Case, cuts: list[int]) -> None:
    """Decode the case's stream read by read (read i at time i): every chunk is timed by the read holding its data
    line's newline, and the first token is reported by that read alone."""
    decoder = case.make()
    first = [now for now, part in enumerate(split(case.stream.data, cuts)) if decoder.feed(part, now)]
    decoder.end()
    got = decoder.state
    times = [bisect.bisect_right(cuts, end) for end in case.stream.ends]
    assert (got.chunk_tokens, got.chunk_times) == (case.stream.tokens, times)
    assert first == [t for t, n in zip(times, case.stream.tokens, strict=True) if n][:1]
    assert (got.usage_completion, got.usage_prompt, got.finish_reason) == (*case.usage, case.finish)
    assert "".join(got.text) == case.text
    assert decoder.closed_complete() is (case.name != "triton")  # Triton's stream has no end marker: its body ends it


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_recorded_stream_read_a_byte_at_a_time(case: Case) -> None:
    check(case, list(range(1, len(case.stream.data))))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_recorded_stream_read_whole(case: Case) -> None:
    check(case, [])


@settings(derandomize=True, deadline=None, max_examples=200)
@given(st.sampled_from(CASES), st.data())
def test_a_recorded_stream_split_anywhere_records_the_same(case: Case, data: DataObject) -> None:
    check(case, data.draw(st.lists(st.integers(0, len(case.stream.data)), max_size=20).map(sorted)))


def feed_all(decoder: EventDecoder | BodyDecoder, data: bytes) -> str | None:
    """Feed `data` in one read and end; the failure's reason, or None."""
    try:
        decoder.feed(data, 0.0)
        decoder.end()
    except StreamFailure as exc:
        assert exc.reason in REASONS and str(exc).startswith(exc.reason), exc
        return exc.reason
    return None


def lines(*events: Any) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else orjson.dumps(e)) + b"\n\n" for e in events)


COMPLETED = responses_event("response.completed", response={"status": "completed", "usage": USAGE})
INCOMPLETE = responses_event(
    "response.incomplete",
    response={"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": USAGE},
)
TRITON_A = {"model_name": "m", "text_output": "A"}


@pytest.mark.parametrize(
    ("make", "data", "reason"),
    [
        (ResponsesDecoder, lines(delta("x"), INCOMPLETE), None),
        (ResponsesDecoder, lines(delta("x")), reasons.UNFINISHED),
        (
            ResponsesDecoder,
            lines(delta("x"), responses_event("response.failed", response={"error": {"message": "oom"}})),
            reasons.SERVER_ERROR_EVENT,
        ),
        (ResponsesDecoder, lines(responses_event("error", message="rate limited")), reasons.SERVER_ERROR_EVENT),
        (ResponsesDecoder, lines(delta("x"), {"delta": "no type"}), reasons.MALFORMED_EVENT),
        (ResponsesDecoder, lines(responses_event("response.output_text.delta", delta=5)), reasons.MALFORMED_EVENT),
        (ResponsesDecoder, lines(responses_event("response.completed", response=3)), reasons.MALFORMED_EVENT),
        (ResponsesDecoder, lines(b"{not json"), reasons.INVALID_JSON),
        (ResponsesDecoder, b"event: x\nbogus line\n", reasons.MALFORMED_SSE),
        # response.completed ends the stream as data: [DONE] ends chat's: a cut line after it is ignored
        (ResponsesDecoder, lines(delta("x"), COMPLETED) + b'data: {"type"', None),
        (ResponsesDecoder, lines(delta("x")) + b'data: {"type"', reasons.UNFINISHED),
        (
            TgiDecoder,
            lines({"error": "Input validation error", "error_type": "validation"}),
            reasons.SERVER_ERROR_EVENT,
        ),
        (TgiDecoder, lines({"token": "x", "generated_text": None}), reasons.MALFORMED_EVENT),
        (TgiDecoder, lines({"token": {"text": 3}, "generated_text": None}), reasons.MALFORMED_EVENT),
        (TgiDecoder, lines({"token": {"text": "a"}, "generated_text": None}), reasons.UNFINISHED),
        (TgiDecoder, lines({"token": {"text": "a"}, "generated_text": None}, b"[DONE]"), reasons.UNFINISHED),
        (SglangDecoder, lines(sglang_event("ab", 2), sglang_event("a", 3)), reasons.MALFORMED_EVENT),
        (SglangDecoder, lines({"text": None, "meta_info": {}}), reasons.MALFORMED_EVENT),
        (SglangDecoder, lines(sglang_event("ab", 2)), reasons.UNFINISHED),
        (SglangDecoder, lines(sglang_event("ab", 2, {"type": "stop"})), None),  # a finish_reason without [DONE]
        (SglangDecoder, lines({"error": {"message": "bad"}}), reasons.SERVER_ERROR_EVENT),
        (TritonDecoder, lines({"error": "model not ready"}), reasons.SERVER_ERROR_EVENT),
        (TritonDecoder, lines({"text_output": 1}), reasons.MALFORMED_EVENT),
        (TritonDecoder, lines(TRITON_A) + b'data: {"text_', reasons.UNFINISHED),
        (TritonDecoder, b"", reasons.UNFINISHED),  # a clean end without any text_output is no reply
        (SglangDecoder, lines(sglang_event("ab", 2, {"type": "abort", "message": "OOM"})), reasons.SERVER_ERROR_EVENT),
    ],
)
def test_malformed_streams_fail_with_their_reason(make: Callable[[], EventDecoder], data: bytes, reason: str) -> None:
    assert feed_all(make(), data) == reason


def test_why_a_responses_or_tgi_stream_stopped() -> None:
    incomplete = ResponsesDecoder()
    incomplete.feed(lines(delta("x"), INCOMPLETE), 0.0)
    assert (incomplete.state.finish_reason, incomplete.state.final) == ("length", True)
    tgi = TgiDecoder()
    last = {
        "token": {"text": "z"},
        "generated_text": "z",
        "details": {"finish_reason": "length", "generated_tokens": 1},
    }
    tgi.feed(lines(last), 0.0)
    assert (tgi.state.finish_reason, tgi.state.chunk_tokens, tgi.state.usage_completion) == ("length", [1], 1)


def test_a_cut_triton_stream_is_never_whole() -> None:
    """No marker ends a Triton stream: a cut before its body's end lost the rest, whatever it had delivered; the
    body's clean end is complete."""
    before, after, mid = TritonDecoder(), TritonDecoder(), TritonDecoder()
    before.feed(b": keep-alive\n\n", 0.0)
    after.feed(lines(TRITON_A), 0.0)
    mid.feed(lines(TRITON_A) + b"data: {", 0.0)
    assert (before.closed_complete(), after.closed_complete(), mid.closed_complete()) == (False, False, False)
    after.end()  # the body ended cleanly here
    assert after.state.chunk_tokens == [1]


# ---- one-body replies --------------------------------------------------------------------------------------------

EMBEDDINGS_REPLY = orjson.dumps(
    {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.5, -1, 2e-3]},
            {"object": "embedding", "index": 0, "embedding": "AAAAPwAAgL8="},
        ],
        "model": "m",
        "usage": {"prompt_tokens": 9, "total_tokens": 9},
    }
)
RERANK_REPLIES = {
    "vllm": {
        "id": "r",
        "model": "m",
        "usage": {"total_tokens": 21},
        "results": [
            {"index": 1, "document": {"text": "d1"}, "relevance_score": 0.9},
            {"index": 0, "document": {"text": "d0"}, "relevance_score": 0.1},
        ],
    },
    "cohere": {
        "id": "r",
        "results": [{"index": 0, "relevance_score": 0.7}, {"index": 1, "relevance_score": 0.2}],
        "meta": {"billed_units": {"search_units": 1}},
    },
    "jina": {
        "model": "m",
        "usage": {"total_tokens": 30, "prompt_tokens": 25},
        "results": [{"index": 1, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.25}],
    },
    "tei": [{"index": 0, "score": 0.8}, {"index": 1, "score": 0.3}],
}


def test_an_embeddings_reply_split_anywhere_is_read_when_it_ends() -> None:
    """The last read is when the reply completed; nothing is a first token; base64 vectors count as numeric ones."""
    for cuts in ([], list(range(1, len(EMBEDDINGS_REPLY), 7)), [5]):
        decoder = BodyDecoder(read_embeddings, 2)
        assert not any(decoder.feed(part, 1.0 + now) for now, part in enumerate(split(EMBEDDINGS_REPLY, cuts)))
        decoder.end()
        got = decoder.state
        assert (got.inputs, got.usage_prompt, got.completed_at) == (2, 9, 1.0 + len(cuts))
        assert (got.chunk_times, got.content_started, decoder.closed_complete()) == ([], False, False)


@pytest.mark.parametrize(("shape", "prompt"), [("vllm", 21), ("cohere", None), ("jina", 25), ("tei", None)])
def test_each_rerank_shape_is_read(shape: str, prompt: int | None) -> None:
    decoder = BodyDecoder(read_rerank, 2)
    assert feed_all(decoder, orjson.dumps(RERANK_REPLIES[shape])) is None
    assert (decoder.state.inputs, decoder.state.usage_prompt) == (2, prompt)


def test_a_body_answering_a_different_number_of_inputs_fails_when_it_ends() -> None:
    """Each input sent is owed one result: two embeddings for three texts, or for one, is the wrong count."""
    for sent in (3, 1):
        assert feed_all(BodyDecoder(read_embeddings, sent), EMBEDDINGS_REPLY) == reasons.WRONG_COUNT
    assert feed_all(BodyDecoder(read_embeddings, 2), EMBEDDINGS_REPLY) is None


def vector(v: Any, index: Any = 0) -> bytes:
    return orjson.dumps({"data": [{"index": index, "embedding": v}]})


@pytest.mark.parametrize(
    ("read", "data", "reason"),
    [
        (read_embeddings, b'{"data": [{"index": 0, "embedding": [1.0]', reasons.INVALID_JSON_REPLY),
        (read_embeddings, b"", reasons.INVALID_JSON_REPLY),
        (read_embeddings, b"[1.0, NaN]", reasons.INVALID_JSON_REPLY),
        (read_embeddings, b'{"object": "list"}', reasons.MALFORMED_REPLY),
        (read_embeddings, vector(["a"]), reasons.MALFORMED_REPLY),
        (read_embeddings, vector([True]), reasons.MALFORMED_REPLY),
        (read_embeddings, vector([]), reasons.MALFORMED_REPLY),
        (read_embeddings, vector("not base64!"), reasons.MALFORMED_REPLY),
        (read_embeddings, vector([1.0], index=1), reasons.MALFORMED_REPLY),  # the only entry must be input 0
        (read_embeddings, vector([1.0], index="0"), reasons.MALFORMED_REPLY),
        (read_embeddings, b'{"error": {"message": "too long", "code": 400}}', reasons.SERVER_ERROR_EVENT),
        (
            read_rerank,
            b'{"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 1}]}',
            reasons.MALFORMED_REPLY,
        ),
        (read_rerank, b'{"results": [{"index": 2, "relevance_score": 1}]}', reasons.MALFORMED_REPLY),
        (read_rerank, b'{"results": [{"index": 0}]}', reasons.MALFORMED_REPLY),
        (read_rerank, b'[{"index": 0, "score": "high"}]', reasons.MALFORMED_REPLY),
        (read_rerank, b'{"data": []}', reasons.MALFORMED_REPLY),
        (read_rerank, b"7", reasons.MALFORMED_REPLY),
    ],
)
def test_malformed_bodies_fail_with_their_reason(read: Callable[..., None], data: bytes, reason: str) -> None:
    assert feed_all(BodyDecoder(read, 1), data) == reason


def test_a_body_beyond_the_cap_is_refused_as_it_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_pooling, "MAX_BODY_BYTES", 10)
    decoder = BodyDecoder(read_embeddings, 1)
    decoder.feed(b"0123456789", 0.0)
    with pytest.raises(StreamFailure) as failed:
        decoder.feed(b"x", 1.0)
    assert failed.value.reason == reasons.REPLY_TOO_LARGE


# ---- arbitrary bytes ---------------------------------------------------------------------------------------------

KEYS = ["type", "delta", "response", "usage", "output_tokens", "input_tokens", "incomplete_details", "reason"]
KEYS += ["status", "token", "text", "special", "generated_text", "details", "finish_reason", "generated_tokens"]
KEYS += ["meta_info", "completion_tokens", "prompt_tokens", "cached_tokens", "text_output", "error", "message"]
KEYS += ["data", "embedding", "index", "results", "relevance_score", "score"]
TYPES = ["response.output_text.delta", "response.reasoning_text.delta", "response.completed", "response.incomplete"]
TYPES += ["response.failed", "error", "response.created"]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 5)
    | st.integers(2**31 - 2, 2**70)
    | st.floats()
    | st.text(max_size=4)
    | st.sampled_from([*TYPES, "length", "eos_token", "max_output_tokens", "[DONE]", "AAAA", " "])
)
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(KEYS), kids, max_size=4),
    max_leaves=14,
)


def maybe(shape: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """A dict with some of these keys, or any JSON value in its place."""
    return st.fixed_dictionaries({}, optional=shape) | json_values


texts = st.text(max_size=4) | json_values
usage = maybe({k: st.integers(-1, 9) | json_values for k in ["output_tokens", "input_tokens", "prompt_tokens"]})
# per decoder: events shaped like its API's, fields drawn from valid and invalid values
SHAPED: list[st.SearchStrategy[Any]] = [
    maybe(
        {
            "type": st.sampled_from(TYPES) | json_values,
            "delta": texts,
            "message": json_values,
            "response": maybe(
                {
                    "status": st.sampled_from(["completed", "incomplete"]) | json_values,
                    "usage": usage,
                    "incomplete_details": maybe({"reason": json_values}),
                    "error": json_values,
                }
            ),
        }
    ),
    maybe(
        {
            "token": maybe({"text": texts, "special": json_values}),
            "generated_text": json_values,
            "details": maybe({"finish_reason": json_values, "generated_tokens": st.integers(-1, 9) | json_values}),
        }
    ),
    maybe(
        {
            "text": st.sampled_from(["", "a", "ab", "abc", " "]) | json_values,
            "meta_info": maybe(
                {
                    "completion_tokens": st.integers(-1, 9) | json_values,
                    "prompt_tokens": json_values,
                    "finish_reason": maybe({"type": json_values}),
                }
            ),
        }
    ),
    maybe({"text_output": texts, "model_name": json_values}),
]
vectors = st.lists(st.floats(allow_nan=False), max_size=3) | st.sampled_from(["AAAA", "", "A"]) | json_values
BODIES: list[st.SearchStrategy[Any]] = [
    maybe({"data": st.lists(maybe({"index": st.integers(-1, 3) | json_values, "embedding": vectors}), max_size=3)}),
    maybe({"results": st.lists(maybe({"index": st.integers(-1, 3), "relevance_score": json_values}), max_size=3)})
    | st.lists(maybe({"index": st.integers(-1, 3), "score": st.floats() | json_values}), max_size=3),
]
payloads = (
    json_values.map(lambda v: json.dumps(v).encode())
    | st.sampled_from([b"[DONE]", b"NaN", b"", b"{"])
    | st.binary(max_size=12)
)
junk_lines = st.tuples(st.sampled_from([b"data: ", b"data:", b"event: x\ndata: "]), payloads).map(b"".join) | st.binary(
    max_size=12
)
junk_streams = st.lists(
    st.tuples(junk_lines, st.sampled_from([b"\n", b"\n\n", b"\r\n", b""])).map(b"".join), max_size=8
).map(b"".join)


def framed(events: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """A well-framed stream of these events, with or without [DONE], maybe cut at its end."""
    lines = st.lists(events.map(lambda v: b"data: " + json.dumps(v).encode() + b"\n\n"), max_size=6).map(b"".join)
    return st.tuples(lines, st.sampled_from([b"", b"data: [DONE]\n\n", b"data: {"])).map(b"".join)


DECODERS: list[tuple[Callable[[], EventDecoder | BodyDecoder], st.SearchStrategy[bytes]]] = [
    (ResponsesDecoder, framed(SHAPED[0])),
    (TgiDecoder, framed(SHAPED[1])),
    (SglangDecoder, framed(SHAPED[2])),
    (TritonDecoder, framed(SHAPED[3])),
    (lambda: BodyDecoder(read_embeddings, 1), BODIES[0].map(lambda v: json.dumps(v).encode())),
    (lambda: BodyDecoder(read_rerank, 1), BODIES[1].map(lambda v: json.dumps(v).encode())),
]


def decode(make: Callable[[], EventDecoder | BodyDecoder], parts: list[bytes]) -> tuple[Any, str | None]:
    decoder = make()
    try:
        for now, part in enumerate(parts):
            decoder.feed(part, now)
        decoder.end()
    except StreamFailure as exc:
        assert exc.reason in REASONS and str(exc).startswith(exc.reason), exc
        return decoder.state, exc.reason
    return decoder.state, None


@settings(derandomize=True, deadline=None, max_examples=400)
@given(st.integers(0, len(DECODERS) - 1), st.data())
def test_arbitrary_bytes_raise_nothing_but_a_stream_failure_the_same_for_every_split(
    which: int, data: DataObject
) -> None:
    """Whatever a server sends, decoding ends in a state or a known reason, the same however the reads cut it."""
    make, shaped = DECODERS[which]
    body = data.draw(shaped | junk_streams | payloads)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=10).map(sorted))
    got, reason = decode(make, split(body, cuts))
    whole, whole_reason = decode(make, [body])
    event(f"decoder {which}: {reason}")
    assert reason == whole_reason
    assert len(got.chunk_times) == len(got.chunk_tokens) and all(n >= 0 for n in got.chunk_tokens)
    assert (got.chunk_tokens, got.usage_completion, got.usage_prompt, got.inputs, got.final) == (
        whole.chunk_tokens,
        whole.usage_completion,
        whole.usage_prompt,
        whole.inputs,
        whole.final,
    )


# ---- end to end --------------------------------------------------------------------------------------------------


def events_of(stream: Recorded) -> list[bytes]:
    """The stream cut into its SSE events, to be written one by one."""
    return [part + b"\n\n" for part in stream.data.split(b"\n\n") if part]


@dataclass
class Server:
    """Answers every POST with the reply set for its path (its raw path, as the request line carried it)."""

    replies: dict[str, tuple[list[bytes], bool]] = field(default_factory=dict)  # path -> parts, streamed
    delay: float = 0.0  # seconds before answering
    cut: bool = False  # close the connection after the parts, before the body's end
    seen: list[tuple[str, Any]] = field(default_factory=list)  # (raw path, JSON body) of every request
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.raw_path, orjson.loads(await request.read())))
        await asyncio.sleep(self.delay)
        parts, streamed = self.replies[request.raw_path]
        if not streamed:
            return web.Response(body=b"".join(parts), content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for part in parts:
            await resp.write(part)
            await asyncio.sleep(0.002)
        if self.cut and request.transport is not None:
            request.transport.close()
        return resp


@pytest.fixture
async def server():
    s = Server()
    app = web.Application()
    app.router.add_post("/{tail:.*}", s.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    s.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield s
    await runner.cleanup()


async def send(server: Server, api: str, req: PreparedRequest, **kw: Any) -> RequestRecord:
    cfg = ClientConfig(server.url, api=api, model="org/m", **{"first_token_timeout": 2, "total_timeout": 3, **kw})
    client = OpenAIClient(cfg, RunClock())
    try:
        return await client.send(req, 0.0)
    finally:
        await client.close()


STREAMED = [
    ("responses", "/v1/responses", RESPONSES_STREAM, 4, "stop"),
    ("tgi", "/generate_stream", TGI_STREAM, 4, "stop"),  # generated_tokens, the special end token among them
    ("sglang", "/generate", SGLANG_STREAM, 4, "length"),
    ("triton", "/v2/models/org%2Fm/generate_stream", TRITON_STREAM, 3, None),
]


@pytest.mark.parametrize(("api", "path", "stream", "output", "finish"), STREAMED, ids=[s[0] for s in STREAMED])
async def test_a_streamed_format_end_to_end(server: Server, api: str, path: str, stream: Recorded, output: int, finish):
    server.replies[path] = (events_of(stream), True)
    replies: list[str] = []
    rec = await send(server, api, PreparedRequest(0, "Once", 3, 8, on_reply=replies.append))
    assert (rec.status, rec.error, rec.output_tokens, rec.finish_reason) == ("ok", "", output, finish)
    assert [p for p, _ in server.seen] == [path]
    assert rec.chunk_tokens == stream.tokens and len(rec.token_times) == sum(stream.tokens)
    content = [t for t, n in zip(rec.chunk_times, rec.chunk_tokens, strict=True) if n]
    assert 0 < rec.submitted_at < rec.token_times[0] == content[0] <= rec.token_times[-1]
    assert rec.chunk_times == sorted(rec.chunk_times) and rec.completed_at is None
    assert replies == [CASES[[c.name for c in CASES].index(api)].text]


async def test_a_triton_stream_cut_before_or_after_text_is_lost_mid_stream(server: Server) -> None:
    """No marker ends a Triton stream: only the body's own end does; a cut connection lost the rest of the reply."""
    path = "/v2/models/org%2Fm/generate_stream"
    server.cut = True
    server.replies[path] = ([b": warming up\n\n"], True)
    before = await send(server, "triton", PreparedRequest(0, "Once", 3, 8))
    server.replies[path] = (events_of(TRITON_STREAM), True)
    after = await send(server, "triton", PreparedRequest(1, "Once", 3, 8))
    assert (before.status, failure_reason(before.error)) == ("error", reasons.LOST_MID_STREAM)
    assert (after.status, failure_reason(after.error), after.output_tokens) == ("error", reasons.LOST_MID_STREAM, 3)


def embeddings_reply(n: int) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": [0.1 * i, 1.0]} for i in range(n)]
    return orjson.dumps({"object": "list", "data": data, "usage": {"prompt_tokens": 6, "total_tokens": 6}})


async def test_embeddings_end_to_end(server: Server) -> None:
    """Latency ends at the reply's last byte; no token times (no TTFT, no ITL); input tokens as the server counted."""
    server.replies["/v1/embeddings"] = ([embeddings_reply(2)], False)
    rec = await send(server, "embeddings", PreparedRequest(0, "a", 1, 0, inputs=("a", "b")))
    assert (rec.status, rec.error, rec.inputs, rec.input_tokens, rec.output_tokens) == ("ok", "", 2, 6, 0)
    assert rec.completed_at is not None and rec.completed_at > rec.submitted_at > 0
    assert (rec.token_times, rec.chunk_times) == ([], [])
    assert server.seen[0][1] == {"model": "org/m", "input": ["a", "b"], "encoding_format": "float"}


async def test_an_embeddings_reply_with_the_wrong_count_fails(server: Server) -> None:
    server.replies["/v1/embeddings"] = ([embeddings_reply(1)], False)
    rec = await send(server, "embeddings", PreparedRequest(0, "a", 1, 0, inputs=("a", "b")))
    assert (rec.status, failure_reason(rec.error)) == ("error", reasons.WRONG_COUNT)
    assert "1 came back for 2 sent" in rec.error and rec.completed_at is not None


@pytest.mark.parametrize("shape", ["vllm", "cohere", "jina", "tei"])
async def test_rerank_end_to_end(server: Server, shape: str) -> None:
    path = {"vllm": "/v1/rerank", "cohere": "/v2/rerank", "jina": "/v1/rerank", "tei": "/rerank"}[shape]
    server.replies[path] = ([orjson.dumps(RERANK_REPLIES[shape])], False)
    rec = await send(server, "rerank", PreparedRequest(0, "q", 1, 0, inputs=("d0", "d1")), rerank_shape=shape)
    assert (rec.status, rec.error, rec.inputs, rec.output_tokens, rec.token_times) == ("ok", "", 2, 0, [])
    assert rec.completed_at is not None and rec.completed_at > rec.submitted_at
    three = await send(server, "rerank", PreparedRequest(1, "q", 1, 0, inputs=("a", "b", "c")), rerank_shape=shape)
    assert (three.status, failure_reason(three.error), three.inputs) == ("error", reasons.WRONG_COUNT, 3)


async def test_a_one_body_reply_waits_out_the_total_timeout_not_the_first_token_one(server: Server) -> None:
    """A single body has no first token: a reply slower than --first-token-timeout is still served; one slower than
    the total timeout is a total timeout."""
    server.replies["/v1/embeddings"] = ([embeddings_reply(1)], False)
    server.replies["/generate"] = (events_of(SGLANG_STREAM), True)
    server.delay = 0.3
    req = PreparedRequest(0, "a", 1, 8, inputs=("a",))
    served = await send(server, "embeddings", req, first_token_timeout=0.05)
    streamed = await send(server, "sglang", req, first_token_timeout=0.05)
    slow = await send(server, "embeddings", req, total_timeout=0.1)
    assert served.status == "ok" and served.completed_at is not None and served.completed_at > 0.3
    assert (streamed.status, failure_reason(streamed.error)) == ("timeout", reasons.FIRST_TOKEN_TIMEOUT)
    assert (slow.status, failure_reason(slow.error)) == ("timeout", reasons.TOTAL_TIMEOUT)
