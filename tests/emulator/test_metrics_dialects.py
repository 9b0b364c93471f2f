"""The emulator's /metrics in vLLM's, SGLang's, TGI's and Triton's names: each exposition parses with
prometheus_client's parser and carries its engine's metrics, with the same engine's counts (here: 4 chat streams of
5 tokens and one embeddings request of two inputs); `infermeter serve --metrics-dialect` and config files set it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from infermeter.cli import main
from infermeter.emulator import EmulatorConfig
from infermeter.emulator.config import load_emulator_config
from infermeter.emulator.routes import application
from infermeter.emulator.server import Emulator
from tests.prompts import cl100k

STREAMS, TOKENS = 4, 5
CHAT = {"messages": [{"role": "user", "content": "Hello world"}], "max_tokens": TOKENS, "stream": True}
EMBED = {"input": ["Hello world", "Hello"]}  # 2 + 1 tokens


@contextlib.asynccontextmanager
async def serving(config: EmulatorConfig) -> AsyncIterator[str]:
    runner = web.AppRunner(application(Emulator(config)), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def scraped(dialect: str) -> tuple[dict[str, dict[tuple, float]], str]:
    """Every sample after the load as the parser names it (name -> {sorted labels -> value}), and the text."""

    async def go() -> str:
        async with serving(EmulatorConfig(speed=20, metrics_dialect=dialect)) as url, aiohttp.ClientSession() as s:

            async def stream() -> None:
                async with s.post(url + "/v1/chat/completions", json=CHAT) as r:
                    await r.read()

            await asyncio.gather(*(stream() for _ in range(STREAMS)))
            async with s.post(url + "/v1/embeddings", json=EMBED) as r:
                assert r.status == 200
            async with s.get(url + "/metrics") as r:
                return await r.text()

    text = asyncio.run(go())
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples, text


def one(samples: dict[str, dict[tuple, float]], name: str, **labels: str) -> float:
    values = samples[name]
    if labels:
        return next(v for k, v in values.items() if set(labels.items()) <= set(k))
    (value,) = values.values()
    return value


def test_vllm_dialect_is_the_default_and_keeps_vllms_names():
    s, _ = scraped("vllm")
    assert one(s, "vllm:generation_tokens_total") == STREAMS * TOKENS
    assert one(s, "vllm:request_success_total") == STREAMS + 1
    for name in ("vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:request_queue_time_seconds_count",
                 "vllm:time_to_first_token_seconds_count", "vllm:prefix_cache_hits_total"):  # fmt: skip
        assert name in s


def test_sglang_dialect():
    s, _ = scraped("sglang")
    assert one(s, "sglang:generation_tokens_total") == STREAMS * TOKENS
    assert one(s, "sglang:time_to_first_token_seconds_count") == STREAMS
    assert one(s, "sglang:inter_token_latency_seconds_count") == STREAMS * (TOKENS - 1)
    assert one(s, "sglang:e2e_request_latency_seconds_count") == STREAMS + 1  # the embeddings request too
    assert one(s, "sglang:queue_time_seconds_count") == STREAMS + 1
    assert one(s, "sglang:num_running_reqs") == 0 and one(s, "sglang:num_queue_reqs") == 0
    assert one(s, "sglang:token_usage") == 0.0 and 0 < one(s, "sglang:cache_hit_rate") < 1  # the repeated prompt
    assert "sglang:gen_throughput" in s and "sglang:prompt_tokens_total" in s
    assert not any(name.startswith("vllm:") for name in s)


def test_tgi_dialect():
    s, text = scraped("tgi")
    # TGI writes counters without `_total` (the parser adds it)
    assert f"\ntgi_request_success {STREAMS + 1}.0\n" in text and f"\ntgi_request_count {STREAMS + 1}.0\n" in text
    assert one(s, "tgi_request_success_total") == one(s, "tgi_request_count_total") == STREAMS + 1
    assert one(s, "tgi_request_generated_tokens_count") == STREAMS
    assert one(s, "tgi_request_generated_tokens_sum") == STREAMS * TOKENS
    chatml = len(cl100k().encode("<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n"))
    assert one(s, "tgi_request_input_length_sum") == STREAMS * chatml + 3
    assert one(s, "tgi_request_mean_time_per_token_duration_count") == STREAMS
    assert one(s, "tgi_request_queue_duration_count") == STREAMS + 1
    for method in ("prefill", "decode"):
        forward = one(s, "tgi_batch_forward_duration_count", method=method)
        assert forward > 0 and forward == one(s, "tgi_batch_inference_duration_count", method=method)
    assert one(s, "tgi_queue_size") == 0 and one(s, "tgi_batch_current_size") == 0
    assert "tgi_batch_current_max_tokens" in s and "tgi_request_inference_duration_sum" in s
    assert not any("kv" in name or name.startswith("vllm:") for name in s)  # TGI exports no KV usage


def test_triton_dialect_has_cumulative_microsecond_counters():
    s, text = scraped("triton")
    model = {"model": "infermeter-emulator", "version": "1"}
    assert f'\nnv_inference_request_success{{model="infermeter-emulator",version="1"}} {STREAMS + 1}.0\n' in text
    assert one(s, "nv_inference_request_success_total", **model) == STREAMS + 1
    assert one(s, "nv_inference_request_failure_total") == 0
    assert one(s, "nv_inference_count_total") == STREAMS + 2  # the embeddings' two inputs
    assert one(s, "nv_inference_exec_count_total") >= TOKENS
    total = one(s, "nv_inference_request_duration_us_total")
    assert total >= one(s, "nv_inference_compute_infer_duration_us_total") > 1000  # 20 tokens: over a millisecond
    assert one(s, "nv_inference_queue_duration_us_total") >= 0 and one(s, "nv_inference_pending_request_count") == 0
    capacity = EmulatorConfig().engine
    blocks = capacity.capacity() // capacity.block_size
    assert one(s, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="max") == blocks
    assert one(s, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="tokens_per") == capacity.block_size
    assert one(s, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="used") == 0
    assert one(s, "nv_trt_llm_request_metrics", request_type="max") == capacity.scheduler.max_batch()
    assert one(s, "nv_trt_llm_inflight_batcher_metrics", inflight_batcher_specific_metric="paused_requests") == 0


def test_serve_sets_the_dialect_and_refuses_an_unknown_one(monkeypatch, capsys, tmp_path: Path):
    served: list[EmulatorConfig] = []

    async def fake_serve(config: EmulatorConfig, host: str, port: int) -> None:
        served.append(config)

    monkeypatch.setattr("infermeter.emulator.serving.serve", fake_serve)
    cfg = tmp_path / "emu.yaml"
    cfg.write_text("metrics_dialect: tgi\n")
    assert load_emulator_config(cfg).metrics_dialect == "tgi"
    for args in (["serve", "--metrics-dialect", "sglang"], ["serve", "--config", str(cfg)]):
        with contextlib.suppress(SystemExit):
            main(args)
    assert [c.metrics_dialect for c in served] == ["sglang", "tgi"]
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--metrics-dialect", "nope"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "vllm, sglang, tgi, triton" in err
