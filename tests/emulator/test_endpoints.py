"""The emulator's endpoints beyond OpenAI chat and completions, each through a real HTTP client on 127.0.0.1: the
Responses API, embeddings, rerank in vLLM's, Cohere's and TEI's shapes, and TGI's, SGLang's and Triton's native
generation APIs, framed as the wire formats say, counting as the emulator's tokenizer counts."""

from __future__ import annotations

import asyncio
import base64
import statistics
import time
from typing import Any

import aiohttp
import numpy as np
import orjson
import pytest

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.emulator.tokenizer import EmulatorTokenizer
from tests.prompts import cl100k

TOK = EmulatorTokenizer("cl100k_base")
N = 5  # tokens asked for


def reply_text(n: int) -> str:
    return "".join(TOK.reply(k) for k in range(n))


@pytest.fixture(scope="module")
def url():
    with running_emulator(EmulatorConfig(speed=20)) as u:
        yield u


async def _post(url: str, path: str, body: Any) -> tuple[int, str, bytes]:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.read()


def post(url: str, path: str, body: Any) -> tuple[int, str, bytes]:
    return asyncio.run(_post(url, path, body))


def ok_json(url: str, path: str, body: Any) -> Any:
    status, _, raw = post(url, path, body)
    assert status == 200, raw
    return orjson.loads(raw)


def sse_events(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) per SSE event."""
    out = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].removeprefix(" ")
        assert data is not None, block
        out.append((name, data))
    return out


def count(text: str) -> int:
    return len(cl100k().encode(text))


# ----- embeddings


def test_embeddings_give_one_unit_vector_per_input_and_count_their_tokens(url):
    texts = ["Hello world", "an embedding of this text", "Hello world"]
    body = ok_json(url, "/v1/embeddings", {"model": "m", "input": texts})
    vectors = np.array([d["embedding"] for d in body["data"]])
    assert [d["index"] for d in body["data"]] == [0, 1, 2] and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.array_equal(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])
    tokens = sum(count(t) for t in texts)
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


def test_embeddings_in_base64_are_the_same_vectors_as_float32(url):
    floats = ok_json(url, "/v1/embeddings", {"input": "Hello world", "dimensions": 8})["data"][0]["embedding"]
    encoded = ok_json(url, "/v1/embeddings", {"input": "Hello world", "dimensions": 8, "encoding_format": "base64"})
    decoded = np.frombuffer(base64.b64decode(encoded["data"][0]["embedding"]), dtype="<f4")
    assert len(floats) == 8 and np.allclose(decoded, floats, atol=1e-7)


def _prompt_tokens_total(url: str) -> float:
    status, _, raw = asyncio.run(_get(url + "/metrics"))
    assert status == 200
    line = next(x for x in raw.decode().splitlines() if x.startswith("vllm:prompt_tokens_total"))
    return float(line.rsplit(" ", 1)[1])


async def _get(url: str) -> tuple[int, str, bytes]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.read()


def test_an_embeddings_reply_waits_for_the_prefill_of_its_inputs(url):
    """Prefill-only work in the engine: the engine counts every input's tokens as prefill, and eight 2000-token
    inputs take longer than one short one (medians of five)."""
    long_inputs = {"input": [("word " * 2000).strip() + f" {i}" for i in range(8)]}
    before = _prompt_tokens_total(url)
    usage = ok_json(url, "/v1/embeddings", long_inputs)["usage"]["prompt_tokens"]
    assert usage > 16_000 and _prompt_tokens_total(url) - before == usage

    def latency(body: dict) -> float:
        t = time.perf_counter()
        ok_json(url, "/v1/embeddings", body)
        return time.perf_counter() - t

    short = statistics.median(latency({"input": "hi"}) for _ in range(5))
    long = statistics.median(latency(long_inputs) for _ in range(5))
    assert long > short, (short, long)


# ----- rerank

QUERY = "capital of France"
DOCS = ["Berlin is in Germany", "Paris is the capital of France", "the capital city"]


def _pair_tokens() -> int:
    return sum(count(QUERY) + count(d) for d in DOCS)


def test_vllm_rerank_ranks_every_document_best_first_with_usage(url):
    body = ok_json(url, "/v1/rerank", {"model": "m", "query": QUERY, "documents": DOCS})
    results = body["results"]
    scores = [r["relevance_score"] for r in results]
    assert sorted(r["index"] for r in results) == [0, 1, 2] and scores == sorted(scores, reverse=True)
    assert results[0]["index"] == 1 and results[0]["document"] == {"text": DOCS[1]}  # all of the query's words
    assert body["usage"] == {"prompt_tokens": _pair_tokens(), "total_tokens": _pair_tokens()}


def test_cohere_rerank_keeps_top_n_in_its_shape(url):
    body = ok_json(url, "/v2/rerank", {"model": "m", "query": QUERY, "documents": DOCS, "top_n": 2})
    assert set(body) == {"id", "results", "meta"} and body["meta"] == {"billed_units": {"search_units": 1}}
    assert [set(r) for r in body["results"]] == [{"index", "relevance_score"}] * 2
    assert body["results"][0]["index"] == 1


def test_tei_rerank_is_a_list_and_rerank_with_documents_is_vllms(url):
    tei = ok_json(url, "/rerank", {"query": QUERY, "texts": DOCS})
    assert isinstance(tei, list) and [set(r) for r in tei] == [{"index", "score"}] * 3
    assert [r["score"] for r in tei] == sorted((r["score"] for r in tei), reverse=True) and tei[0]["index"] == 1
    vllm = ok_json(url, "/rerank", {"query": QUERY, "documents": DOCS})
    assert [r["index"] for r in vllm["results"]] == [r["index"] for r in tei] and "usage" in vllm


# ----- generation


def test_responses_stream_its_events_in_order(url):
    status, ctype, raw = post(url, "/v1/responses", {"model": "m", "input": "Hello world", "max_output_tokens": N,
                                                      "stream": True})  # fmt: skip
    assert status == 200 and ctype.startswith("text/event-stream")
    events = sse_events(raw)
    datas = [orjson.loads(d) for _, d in events]
    assert all(name == d["type"] for (name, _), d in zip(events, datas, strict=True))
    types = [d["type"] for d in datas]
    assert types == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        *["response.output_text.delta"] * N,
        "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete",
    ]  # fmt: skip
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    deltas = [d["delta"] for d in datas if d["type"] == "response.output_text.delta"]
    assert "".join(deltas) == reply_text(N) == datas[-4]["text"]
    final = datas[-1]["response"]
    prompt = count("<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n")
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["usage"]["input_tokens"] == prompt and final["usage"]["output_tokens"] == N
    assert final["usage"]["total_tokens"] == prompt + N


def test_responses_not_streamed_return_the_final_object(url):
    messages = [{"role": "user", "content": [{"type": "input_text", "text": "Hello world"}]}]
    body = ok_json(url, "/v1/responses", {"input": messages, "instructions": "Be brief.", "max_output_tokens": 3})
    assert body["object"] == "response" and body["output"][0]["content"][0]["text"] == reply_text(3)
    chatml = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n"
    assert body["usage"]["input_tokens"] == count(chatml) and body["usage"]["output_tokens"] == 3


def test_tgi_streams_a_token_per_event_and_the_whole_text_last(url):
    body = {"inputs": "Hello world", "parameters": {"max_new_tokens": N, "details": True, "do_sample": False}}
    status, _, raw = post(url, "/generate_stream", body)
    assert status == 200 and raw.startswith(b"data:{")
    events = [orjson.loads(d) for _, d in sse_events(raw)]
    assert [e["index"] for e in events] == list(range(N))
    assert [e["token"]["text"] for e in events] == [TOK.reply(k) for k in range(N)]
    assert [e["token"]["id"] for e in events] == [cl100k().encode(TOK.reply(k))[0] for k in range(N)]
    assert all(e["generated_text"] is None and e["details"] is None for e in events[:-1])
    assert events[-1]["generated_text"] == reply_text(N)
    assert events[-1]["details"] == {"finish_reason": "length", "generated_tokens": N, "seed": None}
    whole = ok_json(url, "/generate", {"inputs": "Hello world", "parameters": {"max_new_tokens": 3}})
    assert whole == {"generated_text": reply_text(3)}


def test_sglang_streams_cumulative_text_then_done(url):
    body = {"text": "Hello world", "sampling_params": {"max_new_tokens": N, "temperature": 0}, "stream": True}
    status, _, raw = post(url, "/generate", body)
    events = sse_events(raw)
    assert status == 200 and events[-1] == (None, "[DONE]")
    datas = [orjson.loads(d) for _, d in events[:-1]]
    assert [d["text"] for d in datas] == [reply_text(k + 1) for k in range(N)]
    assert [d["meta_info"]["completion_tokens"] for d in datas] == list(range(1, N + 1))
    assert {d["meta_info"]["prompt_tokens"] for d in datas} == {2}  # "Hello world": 2 tokens
    assert [d["meta_info"]["finish_reason"] for d in datas] == [None] * (N - 1) + [{"type": "length", "length": N}]
    whole = ok_json(url, "/generate", {"text": "Hello world", "sampling_params": {"max_new_tokens": 3}})
    assert whole["text"] == reply_text(3) and whole["meta_info"]["completion_tokens"] == 3


def test_triton_streams_each_tokens_text(url):
    status, _, raw = post(url, "/v2/models/m/generate_stream", {"text_input": "Hello world", "max_tokens": N})
    datas = [orjson.loads(d) for _, d in sse_events(raw)]
    assert status == 200 and [d["text_output"] for d in datas] == [TOK.reply(k) for k in range(N)]
    assert {(d["model_name"], d["model_version"]) for d in datas} == {("infermeter-emulator", "1")}
    whole = ok_json(url, "/v2/models/m/generate", {"text_input": "Hello world", "max_tokens": 3})
    assert whole["text_output"] == reply_text(3)


BAD = [
    ("/v1/embeddings", {"model": "m"}, "'input' is required"),
    ("/v1/embeddings", {"input": []}, "'input' must be"),
    ("/v1/embeddings", {"input": ["ok", 3.5]}, "input 1 must be"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "hex"}, "encoding_format"),
    ("/v1/rerank", {"query": "q", "documents": []}, "'documents' must be a non-empty list"),
    ("/v2/rerank", {"documents": ["a"]}, "'query' must be"),
    ("/rerank", {"query": "q", "texts": ["a", 7]}, "texts 1 must be"),
    ("/v1/rerank", {"query": "q", "documents": ["a"], "top_n": 0}, "'top_n'"),
    ("/v1/responses", {"max_output_tokens": 3}, "'input' must be"),
    ("/v1/responses", {"input": "x", "max_output_tokens": "3"}, "'max_output_tokens'"),
    ("/generate_stream", {"inputs": 5}, "'inputs' must be"),
    ("/generate", {"text": "x", "sampling_params": []}, "'sampling_params' must be an object"),
    ("/v2/models/m/generate_stream", {"text_input": "x", "max_tokens": 0}, "'max_tokens'"),
    ("/v1/responses", {"input": "x", "max_output_tokens": 10**9}, "exceeds max_model_len"),
]


@pytest.mark.parametrize(("path", "body", "message"), BAD, ids=[f"{p} {m}" for p, _, m in BAD])
def test_a_bad_body_is_a_400_with_a_one_line_json_error(url, path, body, message):
    status, ctype, raw = post(url, path, body)
    assert status == 400 and ctype.startswith("application/json") and b"\n" not in raw.strip()
    error = orjson.loads(raw)["error"]
    assert message in error["message"] and error["type"] == "invalid_request_error"


def test_a_body_that_is_not_json_is_a_400(url):
    async def go() -> tuple[int, bytes]:
        async with aiohttp.ClientSession() as s, s.post(url + "/v1/embeddings", data=b"{nope") as r:
            return r.status, await r.read()

    status, raw = asyncio.run(go())
    assert status == 400 and orjson.loads(raw)["error"]["message"] == "request body is not JSON"
