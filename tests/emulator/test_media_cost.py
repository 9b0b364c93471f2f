"""Images and audio cost prefill: a 1024x1024 image is ceil(1024/512)^2 = 4 tiles of 256 tokens (1024 prompt tokens
more, and a longer TTFT), two seconds of WAV 2 * 25 = 50 tokens; a part that cannot be read is HTTP 400 naming it."""

from __future__ import annotations

import asyncio
import base64
import io
import statistics
import time
import wave
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from PIL import Image

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.emulator.declaration import sut_declaration
from infermeter.emulator.media_cost import MediaCost, media_tokens

IMAGE_TOKENS = 4 * 256
AUDIO_TOKENS = 50


def png(width: int, height: int) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (40, 90, 200)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def wav(seconds: float, rate: int = 16000) -> str:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * int(seconds * rate))
    return base64.b64encode(buf.getvalue()).decode()


IMAGE_PART = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png(1024, 1024)}"}}
AUDIO_PART = {"type": "input_audio", "input_audio": {"data": wav(2.0), "format": "wav"}}
TEXT_PART = {"type": "text", "text": "Describe this."}


def chat(*parts: dict, stream: bool = False) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [TEXT_PART, *parts]}], "max_tokens": 2, "stream": stream}


@pytest.fixture(scope="module")
def url():
    with running_emulator(EmulatorConfig(speed=4)) as u:
        yield u


async def _post(url: str, path: str, body: dict) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body) as r:
        return r.status, orjson.loads(await r.read())


def prompt_tokens(url: str, body: dict) -> int:
    status, reply = asyncio.run(_post(url, "/v1/chat/completions", body))
    assert status == 200, reply
    return reply["usage"]["prompt_tokens"]


def test_an_image_adds_its_tiles_tokens_and_audio_its_seconds_to_prompt_tokens(url):
    text = prompt_tokens(url, chat())
    assert prompt_tokens(url, chat(IMAGE_PART)) == text + IMAGE_TOKENS
    assert prompt_tokens(url, chat(AUDIO_PART)) == text + AUDIO_TOKENS
    assert prompt_tokens(url, chat(IMAGE_PART, IMAGE_PART, AUDIO_PART)) == text + 2 * IMAGE_TOKENS + AUDIO_TOKENS


def test_the_responses_api_charges_input_image_and_input_audio(url):
    def usage(*parts: dict) -> int:
        content = [{"type": "input_text", "text": "Describe this."}, *parts]
        body = {"input": [{"role": "user", "content": content}], "max_output_tokens": 2}
        status, reply = asyncio.run(_post(url, "/v1/responses", body))
        assert status == 200, reply
        return reply["usage"]["input_tokens"]

    image = {"type": "input_image", "image_url": IMAGE_PART["image_url"]["url"]}
    assert usage(image, AUDIO_PART) == usage() + IMAGE_TOKENS + AUDIO_TOKENS


SLOW_TILES = 2560  # prefill tokens per tile: a 1024x1024 image's 4 tiles add ~115 ms of prefill at speed 4


def test_an_image_lengthens_ttft_by_its_prefill():
    """4 x 2560 = 10240 more prefill tokens at 0.045 ms each, run 4x fast: ~115 ms more TTFT (more with the chunks'
    steps), large beside a noisy VM's jitter; the medians of 3 requests each must differ by more than half of it."""
    config = EmulatorConfig(speed=4, image_tokens_per_tile=SLOW_TILES)
    assert config.engine.latency_model().name == "iteration"
    added = 4 * SLOW_TILES * config.engine.iteration_model.per_prefill_token / config.speed
    assert added > 0.1

    async def ttft(url: str, body: dict) -> float:
        async with aiohttp.ClientSession() as s:
            t = time.perf_counter()
            async with s.post(url + "/v1/chat/completions", json=body) as r:
                async for line in r.content:
                    if b'"content":" ' in line:  # the first token (the role event's content is empty)
                        return time.perf_counter() - t
        raise AssertionError("no token streamed")

    async def medians(url: str) -> tuple[float, float]:
        plain, image = [], []
        for _ in range(3):
            plain.append(await ttft(url, chat(stream=True)))
            image.append(await ttft(url, chat(IMAGE_PART, stream=True)))
        return statistics.median(plain), statistics.median(image)

    with running_emulator(config) as url:
        plain, image = asyncio.run(medians(url))
    assert image - plain > added / 2, (plain, image, added)


BAD = [
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,not-base64!"}}, "message 0 part 1 (image_url)"),
    ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "must be a data: URL"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"x" * 64).decode()}},
     "not a readable image"),
    ({"type": "input_audio", "input_audio": {"data": base64.b64encode(b"RIFF0000").decode(), "format": "wav"}},
     "message 0 part 1 (input_audio): the audio data is not a readable WAV"),
    ({"type": "input_audio", "input_audio": {"data": wav(1.0), "format": "mp3"}}, "WAV audio only"),
]  # fmt: skip


@pytest.mark.parametrize(("part", "message"), BAD, ids=[m for _, m in BAD])
def test_a_malformed_media_part_is_a_400_naming_it(url, part, message):
    status, reply = asyncio.run(_post(url, "/v1/chat/completions", chat(part, stream=True)))
    assert status == 400 and message in reply["error"]["message"]


def test_an_image_with_too_many_pixels_to_read_is_a_400_naming_it(monkeypatch):
    """Pillow refuses an image over twice MAX_IMAGE_PIXELS as a decompression bomb (an Exception, not an OSError)."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # a 20x20 image (400 pixels) is over 2 x 100
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png(20, 20)}"}}
    with pytest.raises(web.HTTPBadRequest) as err:
        media_tokens(chat(part)["messages"], MediaCost.of(EmulatorConfig()))
    message = orjson.loads(err.value.text or "")["error"]["message"]
    assert message.startswith("message 0 part 1 (image_url): the image has too many pixels"), message
    assert "\n" not in message


def test_the_media_cost_is_declared(url):
    async def models() -> dict:
        async with aiohttp.ClientSession() as s, s.get(url + "/v1/models") as r:
            return await r.json()

    model = asyncio.run(models())["data"][0]
    assert (model["image_tile_px"], model["image_tokens_per_tile"], model["audio_tokens_per_second"]) == (512, 256, 25)
    config = EmulatorConfig(image_tile_px=336, image_tokens_per_tile=144, audio_tokens_per_second=12.5)
    assert "144 tokens per 336 px image tile, 12.5 tokens per audio second" in sut_declaration(config)["hardware"]
