"""An API key and injected faults reach the new endpoints as they reach chat: without the key HTTP 401, with it the
configured fault (HTTP 503 here, on every request), counted as a failure in Triton's metrics."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest

from infermeter.emulator import EmulatorConfig, Fault, running_emulator

PATHS = {
    "/v1/embeddings": {"input": "x"},
    "/v1/rerank": {"query": "q", "documents": ["d"]},
    "/v2/rerank": {"query": "q", "documents": ["d"]},
    "/rerank": {"query": "q", "texts": ["d"]},
    "/v1/responses": {"input": "x", "max_output_tokens": 2, "stream": True},
    "/generate_stream": {"inputs": "x"},
    "/generate": {"text": "x", "stream": True},
    "/v2/models/m/generate_stream": {"text_input": "x"},
}


@pytest.fixture(scope="module")
def url():
    config = EmulatorConfig(speed=20, api_key="k", faults=[Fault(kind="http_503")], metrics_dialect="triton")
    with running_emulator(config) as u:
        yield u


async def _statuses(url: str, key: str | None) -> list[tuple[int, dict]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    out = []
    async with aiohttp.ClientSession(headers=headers) as s:
        for path, body in PATHS.items():
            async with s.post(url + path, json=body) as r:
                out.append((r.status, orjson.loads(await r.read())))
    return out


def test_every_new_route_needs_the_key_then_meets_the_fault(url):
    without = asyncio.run(_statuses(url, None))
    assert [s for s, _ in without] == [401] * len(PATHS)
    assert all(b["error"]["code"] == "invalid_api_key" for _, b in without)
    with_key = asyncio.run(_statuses(url, "k"))
    assert [s for s, _ in with_key] == [503] * len(PATHS)

    async def scrape() -> str:
        async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
            return await r.text()

    text = asyncio.run(scrape())
    assert f'nv_inference_request_failure{{model="infermeter-emulator",version="1"}} {len(PATHS)}.0' in text
