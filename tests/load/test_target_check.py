"""Before anything is measured: a server that is not up, or one that refuses the model named (as vLLM does, 404 "The
model ... does not exist"), is one line naming what to fix; a server that serves any name (llama.cpp) is not refused;
the context a server lists (vLLM's max_model_len) is read."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp import web

from infermeter.client.request import ClientConfig
from infermeter.errors import UserError
from infermeter.load.target import list_models, resolve_model
from tests.cli import infermeter
from tests.integration.servers import free_port

SERVED = "tiny-llama"
SENT = web.AppKey("sent", list[str])  # the model each completion named


def app(refuses_other_models: bool, lists: bool = True) -> web.Application:
    """A server listing SERVED (with max_model_len 2048, as vLLM does) that answers 404 to another model's name
    when `refuses_other_models`, else streams one token to any (llama-server's way)."""
    sent: list[str] = []

    async def models(_: web.Request) -> web.Response:
        if not lists:
            return web.Response(status=404)
        return web.json_response({"object": "list", "data": [{"id": SERVED, "max_model_len": 2048}]})

    async def completions(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        sent.append(body["model"])
        if refuses_other_models and body["model"] != SERVED:
            error = {"message": f"The model `{body['model']}` does not exist.", "type": "NotFoundError", "code": 404}
            return web.json_response({"error": error}, status=404)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"index": 0, "text": " hi"}]}\n\ndata: [DONE]\n\n')
        return resp

    application = web.Application()
    application[SENT] = sent
    application.router.add_get("/v1/models", models)
    application.router.add_post("/v1/completions", completions)
    return application


async def serving(application: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(application)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def vllm_like() -> AsyncIterator[tuple[str, web.Application]]:
    application = app(refuses_other_models=True)
    async for url in serving(application):
        yield url, application


@pytest.fixture
async def llama_like() -> AsyncIterator[tuple[str, web.Application]]:
    application = app(refuses_other_models=False)
    async for url in serving(application):
        yield url, application


async def test_a_model_the_server_refuses_is_one_line_naming_the_one_it_serves(vllm_like) -> None:
    url, application = vllm_like
    with pytest.raises(UserError) as caught:
        await resolve_model(ClientConfig(url, model="llama-3"), "openai", {})
    assert str(caught.value) == (
        f"--model llama-3: the server at {url} does not serve it (HTTP 404); it serves {SERVED}: give --model "
        f"{SERVED}, or leave --model out to send to the first it lists"
    )
    assert application[SENT] == ["llama-3"]  # one short request told it
    # the model it lists: nothing sent to check it; none named: the first it lists
    assert await resolve_model(ClientConfig(url, model=SERVED), "openai", {}) == SERVED
    assert await resolve_model(ClientConfig(url), "openai", {}) == SERVED
    assert application[SENT] == ["llama-3"]


async def test_a_server_that_serves_any_name_is_not_refused(llama_like) -> None:
    url, application = llama_like
    assert await resolve_model(ClientConfig(url, model="smollm2"), "openai", {}) == "smollm2"
    assert application[SENT] == ["smollm2"]


async def test_a_server_without_a_model_list_is_sent_the_model_named() -> None:
    async for url in serving(app(refuses_other_models=True, lists=False)):
        assert await resolve_model(ClientConfig(url, model="any"), "openai", {}) == "any"
        with pytest.raises(UserError, match=r"could not list models at .* \(HTTP 404\): check --url"):
            await resolve_model(ClientConfig(url), "openai", {})


async def test_nothing_listening_is_one_line_whether_a_model_is_named_or_not() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for model in ("", "m"):
        with pytest.raises(UserError) as caught:
            await resolve_model(ClientConfig(url, model=model), "openai", {})
        assert str(caught.value) == f"nothing answers at {url} (connection refused): start the server, or check --url"


async def test_the_listed_context_is_read(vllm_like) -> None:
    url, _ = vllm_like
    listing = await list_models(ClientConfig(url))
    assert listing.models == [SERVED] and listing.context(SERVED) == 2048 and listing.context("other") is None


def test_a_run_against_nothing_writes_nothing(tmp_path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    p = infermeter("run", "--url", url, "--rate", "5", "--requests", "3", "--out", tmp_path / "r")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == f"error: nothing answers at {url} (connection refused): start the server, or check --url"
    assert not (tmp_path / "r").exists()
