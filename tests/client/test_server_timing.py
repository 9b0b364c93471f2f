"""Server-reported timing: each extractor on the payloads its server sends, the decoder running them, and the fields
landing in the record (fake server, and the emulator's prefix cache end to end)."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest, reasons
from infermeter.client.events import StreamDecoder, StreamFailure
from infermeter.client.server_timing import (
    EXTRACTORS,
    EmulatorTimes,
    LlamaCppTimings,
    ServerTiming,
    UsageCachedTokens,
)
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.load import LoadPattern, drive
from infermeter.metrics import RecordColumns, summarize
from infermeter.records import RunClock
from tests.fake_server import SERVER_TIMING_FINAL, FakeServer
from tests.prompts import prompter

LLAMA_TIMINGS = SERVER_TIMING_FINAL["llamacpp"]["timings"]


def extracted(extractor, value) -> ServerTiming:
    timing = ServerTiming()
    extractor.extract(value, timing)
    return timing


def sse(*events: dict) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_llama_cpp_timings_give_prefill_decode_and_cached_tokens():
    # prompt_ms 38.5 over the 4 uncached prompt tokens, predicted_ms 61.25 over 5 generated, 12 reused from the cache
    assert extracted(LlamaCppTimings(), LLAMA_TIMINGS) == ServerTiming(
        cached_tokens=12, prefill_s=0.0385, decode_s=0.06125
    )


def test_llama_cpp_timings_without_cache_n_or_with_mangled_values_keep_what_they_can():
    # llama.cpp builds before cache_n, and forks such as ik_llama.cpp, send the times alone
    older = {k: v for k, v in LLAMA_TIMINGS.items() if k != "cache_n"}
    assert extracted(LlamaCppTimings(), older) == ServerTiming(prefill_s=0.0385, decode_s=0.06125)
    timing = ServerTiming(prefill_s=1.0, decode_s=2.0, cached_tokens=3)
    LlamaCppTimings().extract({"prompt_ms": "38.5", "predicted_ms": -1.0, "cache_n": True}, timing)
    assert timing == ServerTiming(prefill_s=1.0, decode_s=2.0, cached_tokens=3)
    LlamaCppTimings().extract({"prompt_ms": float("inf"), "predicted_ms": 0, "cache_n": -2}, timing)
    assert timing == ServerTiming(prefill_s=1.0, decode_s=0.0, cached_tokens=3)
    assert extracted(LlamaCppTimings(), [38.5]) == ServerTiming()


def test_vllm_usage_details_give_cached_tokens_and_nothing_else():
    usage = SERVER_TIMING_FINAL["vllmcached"]["usage"]
    assert extracted(UsageCachedTokens(), usage) == ServerTiming(cached_tokens=32)
    # vLLM leaves the details out when nothing was cached; a null or mangled count is no count
    assert extracted(UsageCachedTokens(), {"prompt_tokens": 40, "completion_tokens": 5}) == ServerTiming()
    for details in (
        None,
        {"cached_tokens": None},
        {"cached_tokens": 3.5},
        {"cached_tokens": False},
        {"cached_tokens": 2**40},
        [32],
    ):
        assert extracted(UsageCachedTokens(), {"prompt_tokens_details": details}) == ServerTiming()
    assert extracted(UsageCachedTokens(), {"prompt_tokens_details": {"cached_tokens": 0}}) == ServerTiming(
        cached_tokens=0
    )


def test_emulator_extension_gives_token_times_response_start_and_cached_tokens():
    report = {"server_token_times": [0.05, 0.06, 0.0725], "response_start": 0.001, "cached_tokens": 2000}
    assert extracted(EmulatorTimes(), report) == ServerTiming(
        token_offsets=[0.05, 0.06, 0.0725], response_start=0.001, cached_tokens=2000
    )
    # a non-finite token time drops the times (and their response start); a non-numeric start is no start
    assert extracted(EmulatorTimes(), {"server_token_times": [0.05, float("nan")], "response_start": 0.0}) == (
        ServerTiming()
    )
    assert extracted(EmulatorTimes(), {"server_token_times": [1], "response_start": True}) == ServerTiming(
        token_offsets=[1.0]
    )
    with pytest.raises(ValueError):  # the decoder turns this into a malformed-event failure, as it always did
        extracted(EmulatorTimes(), {"server_token_times": ["soon"]})


def test_the_decoder_runs_every_registered_extractor_and_the_last_report_wins():
    """llama-server with timings_per_token sends timings in every chunk: the final one is the request's."""
    assert [e.key for e in EXTRACTORS] == ["infermeter", "timings", "usage"]
    early = {**LLAMA_TIMINGS, "prompt_ms": 38.5, "predicted_ms": 0.0, "predicted_n": 1}
    chunk = {"choices": [{"index": 0, "delta": {"content": " a"}}], "timings": early}
    final = {"choices": [], "usage": {"prompt_tokens": 16, "completion_tokens": 2}, "timings": LLAMA_TIMINGS}
    decoder = StreamDecoder(chat=True)
    decoder.feed(sse(chunk, {**chunk, "timings": {**early, "predicted_ms": 30.0}}, final), 1.0)
    decoder.end()
    assert decoder.state.server == ServerTiming(cached_tokens=12, prefill_s=0.0385, decode_s=0.06125)
    assert decoder.state.chunk_tokens == [1, 1] and decoder.state.usage_prompt == 16


def test_a_decoder_takes_the_extractors_it_is_given():
    class Hypothetical:
        """A server reporting {"x_timing": {"queue_ms": ...}}: plugged in without touching the decoder."""

        key = "x_timing"

        def extract(self, value: object, timing: ServerTiming) -> None:
            assert isinstance(value, dict)
            timing.prefill_s = value["queue_ms"] / 1000

    stream = sse({"choices": [{"index": 0, "text": " a"}], "x_timing": {"queue_ms": 7.0}, "timings": LLAMA_TIMINGS})
    custom = StreamDecoder(chat=False, extractors=[Hypothetical()])
    custom.feed(stream, 1.0)
    assert custom.state.server == ServerTiming(prefill_s=0.007)
    default = StreamDecoder(chat=False)
    default.feed(stream, 1.0)
    assert default.state.server == ServerTiming(cached_tokens=12, prefill_s=0.0385, decode_s=0.06125)


def test_a_malformed_emulator_extension_still_fails_the_stream():
    decoder = StreamDecoder(chat=False)
    with pytest.raises(StreamFailure) as failure:
        decoder.feed(sse({"choices": [], "infermeter": {"server_token_times": [None]}}), 1.0)
    assert failure.value.reason == reasons.MALFORMED_EVENT


@pytest.fixture(scope="module")
def server():
    s = FakeServer()
    yield s
    s.close()


async def test_reported_timing_lands_in_the_record(server):
    client = OpenAIClient(ClientConfig(server.url, model="m"), RunClock())
    clock = client.clock
    llama, vllm, silent = [
        await client.send(PreparedRequest(i, f"{mode} t{i}", 3, 8), clock.now())
        for i, mode in enumerate(("llamacpp", "vllmcached", "ok"))
    ]
    await client.close()
    assert llama.status == vllm.status == silent.status == "ok"
    assert (llama.input_tokens, llama.output_tokens, llama.cached_tokens) == (16, 5, 12)
    assert llama.server_prefill_s == pytest.approx(0.0385) and llama.server_decode_s == pytest.approx(0.06125)
    assert (vllm.input_tokens, vllm.output_tokens, vllm.cached_tokens) == (40, 5, 32)
    assert vllm.server_prefill_s is None and vllm.server_decode_s is None
    assert (silent.cached_tokens, silent.server_prefill_s, silent.server_decode_s) == (None, None, None)
    assert llama.server_token_times is None  # the emulator's extension is not llama.cpp's


async def _final_usage(url: str, prompt: str) -> dict:
    """The usage of one streamed completion from the emulator, as sent."""
    body = {"model": "m", "prompt": prompt, "max_tokens": 2, "stream": True, "stream_options": {"include_usage": True}}
    async with aiohttp.ClientSession() as s, s.post(url + "/v1/completions", json=body) as r:
        text = (await r.read()).decode()
    events = [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    return next(e["usage"] for e in events if "usage" in e)


def test_the_emulators_prefix_cache_reaches_the_record_and_the_summary():
    """Six 2016-token prompts sharing a 2000-token prefix (125 blocks of 16): the first is computed whole, the other
    five find the prefix cached."""
    shared, other = prompter().build_prefix(2000, 7), prompter().build_prefix(2000, 8)
    reqs = [PreparedRequest(i, prompter().build(2016, i, shared), 2016, 4) for i in range(6)]

    async def run(url: str) -> tuple[list, dict, dict]:
        client = OpenAIClient(ClientConfig(url, model="infermeter-emulator"), RunClock())
        records: list = []
        await drive(client, reqs, LoadPattern(concurrency=1), records.append)
        await client.close()
        hit = await _final_usage(url, prompter().build(2016, 6, shared))
        miss = await _final_usage(url, prompter().build(2016, 7, other))
        return sorted(records, key=lambda r: r.request_id), hit, miss

    with running_emulator(EmulatorConfig()) as url:
        records, hit, miss = asyncio.run(run(url))
    assert [r.status for r in records] == ["ok"] * 6
    assert [r.cached_tokens for r in records] == [0, 2000, 2000, 2000, 2000, 2000]
    # the usage is vLLM's: the details only when something was cached
    assert hit["prompt_tokens_details"] == {"cached_tokens": 2000} and "prompt_tokens_details" not in miss
    block = summarize(RecordColumns.from_records(records)).model_dump(mode="json")["server_timing"]
    assert block["reported"] == block["cached_tokens_reported"] == 6
    assert (block["cached_tokens"], block["input_tokens"]) == (10000, 12096)
    assert block["prefix_cache_hit_share"] == pytest.approx(10000 / 12096)
    assert block["prefill_ms"] is None and block["decode_ms_per_output_token"] is None
