"""The emulator counts as it declares: prompts under cl100k_base (chat under ChatML), replies one token a piece."""

import asyncio

import aiohttp
import pydantic
import pytest

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.records import RunClock
from tests.prompts import cl100k

TEXT = "Hello world"  # tiktoken's published cl100k_base ids: [9906, 1917]
MIXED = "Ünïcödé, digits 1234567 and code: def f(x): return x**2  # done\n\ttabbed"
SYSTEM, USER = "Be brief.", [{"type": "text", "text": "Hello "}, {"type": "text", "text": "world"}]
# the same conversation as ChatML text, written out by hand
CHATML = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def url():
    with running_emulator(EmulatorConfig(speed=20)) as u:
        yield u


async def post(url: str, path: str, body: dict) -> dict:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def get(url: str, path: str) -> dict:
    async with aiohttp.ClientSession() as s, s.get(url + path) as r:
        return await r.json()


def test_usage_prompt_tokens_is_the_cl100k_count_of_the_prompt(url):
    assert cl100k().encode(TEXT) == [9906, 1917]
    chat_body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]}

    async def go():
        completions = [await post(url, "/v1/completions", {"prompt": p, "max_tokens": 3}) for p in (TEXT, MIXED)]
        chat = await post(url, "/v1/chat/completions", {**chat_body, "max_tokens": 3})
        counted = [await post(url, "/tokenize", {"prompt": p}) for p in (TEXT, MIXED)]
        counted_chat = await post(url, "/tokenize", chat_body)
        return completions, chat, counted, counted_chat, await get(url, "/v1/models")

    completions, chat, counted, counted_chat, models = asyncio.run(go())
    assert [c["usage"]["prompt_tokens"] for c in completions] == [2, len(cl100k().encode(MIXED))]
    assert chat["usage"]["prompt_tokens"] == len(cl100k().encode(CHATML))
    assert [c["count"] for c in counted] == [2, len(cl100k().encode(MIXED))] and counted[0]["tokens"] == [9906, 1917]
    assert counted_chat["count"] == len(cl100k().encode(CHATML))
    model = models["data"][0]
    assert model["tokenizer"] == "cl100k_base" and "ChatML" in model["chat_template"]


def test_a_reply_counts_under_cl100k_as_many_tokens_as_were_streamed(url):
    """Every streamed piece is one cl100k_base token, and so is their concatenation: the client's reference count
    of the received text equals the server's completion_tokens."""

    async def go(api: str):
        cfg = ClientConfig(url, api=api, model="infermeter-emulator", count_text=lambda t: len(cl100k().encode(t)))
        client = OpenAIClient(cfg, RunClock())
        try:
            return await client.send(PreparedRequest(0, TEXT, 2, 45, ref_input_tokens=2), 0.0)
        finally:
            await client.close()

    completions, chat = asyncio.run(go("completions")), asyncio.run(go("chat"))
    assert completions.status == chat.status == "ok"
    assert completions.output_tokens == completions.ref_output_tokens == len(completions.token_times) == 45
    assert chat.output_tokens == chat.ref_output_tokens == 45
    # the server's usage count of the prompt, beside the reference count the request was built with
    assert (completions.input_tokens, completions.ref_input_tokens) == (2, 2)
    assert chat.input_tokens == len(cl100k().encode(f"<|im_start|>user\n{TEXT}<|im_end|>\n<|im_start|>assistant\n"))


def test_the_emulators_tokenizer_is_checked_when_configured(tmp_path):
    with pytest.raises(pydantic.ValidationError, match="unknown tokenizer"):
        EmulatorConfig(tokenizer="llama-3")
    with pytest.raises(pydantic.ValidationError, match="does not exist"):
        EmulatorConfig(tokenizer=str(tmp_path / "tokenizer.json"))
    assert EmulatorConfig(tokenizer="o200k_base").tokenizer == "o200k_base"
