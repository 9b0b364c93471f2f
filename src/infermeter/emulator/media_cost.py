"""What the images and audio clips of a chat or Responses request cost the engine: prefill tokens per image tile
(the image's size read from its header with Pillow) and per second of audio (the WAV header's duration), added to
the request's prefill as a vision or audio encoder's tokens would be; a part that cannot be read is HTTP 400."""

from __future__ import annotations

import base64
import binascii
import io
import math
import wave
from dataclasses import dataclass
from typing import Any

from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.openai_format import bad_request

IMAGE_PARTS = frozenset({"image_url", "input_image"})
AUDIO_PARTS = frozenset({"input_audio"})
MEDIA_PARTS = IMAGE_PARTS | AUDIO_PARTS


@dataclass(frozen=True)
class MediaCost:
    """Prefill tokens per image tile (tiles = ceil(W / tile) * ceil(H / tile)) and per second of audio."""

    tile_px: int
    tokens_per_tile: int
    audio_tokens_per_second: float

    @classmethod
    def of(cls, config: EmulatorConfig) -> MediaCost:
        return cls(config.image_tile_px, config.image_tokens_per_tile, config.audio_tokens_per_second)

    def image_tokens(self, width: int, height: int) -> int:
        return math.ceil(width / self.tile_px) * math.ceil(height / self.tile_px) * self.tokens_per_tile

    def audio_tokens(self, seconds: float) -> int:
        return math.ceil(seconds * self.audio_tokens_per_second)

    def declaration(self) -> dict[str, Any]:
        """What /v1/models says about media prefill."""
        return {
            "image_tile_px": self.tile_px,
            "image_tokens_per_tile": self.tokens_per_tile,
            "audio_tokens_per_second": self.audio_tokens_per_second,
        }

    def describe(self) -> str:
        """One line for the system-under-test declaration."""
        return (
            f"media prefill {self.tokens_per_tile} tokens per {self.tile_px} px image tile, "
            f"{self.audio_tokens_per_second:g} tokens per audio second"
        )


def has_media(messages: Any) -> bool:
    """Whether any message carries an image or audio part (a structural look: nothing is decoded)."""
    if not isinstance(messages, list):
        return False
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") in MEDIA_PARTS for p in content):
            return True
    return False


def media_tokens(messages: Any, cost: MediaCost) -> int:
    """The prefill tokens of every image and audio part of the messages; HTTP 400 naming a part that is malformed."""
    if not isinstance(messages, list):
        return 0
    total = 0
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            where = f"message {i} part {j} ({kind})"
            if kind in IMAGE_PARTS:
                width, height = _image_size(_image_url(part), where)
                total += cost.image_tokens(width, height)
            elif kind in AUDIO_PARTS:
                total += cost.audio_tokens(_wav_seconds(part.get("input_audio"), where))
    return total


def _image_url(part: dict[str, Any]) -> Any:
    """The URL of an image part: chat's {"image_url": {"url": ...}} or the Responses API's {"image_url": "..."}."""
    url = part.get("image_url")
    return url.get("url") if isinstance(url, dict) else url


def _image_size(url: Any, where: str) -> tuple[int, int]:
    """An image data URL's width and height, from its header only."""
    if not isinstance(url, str) or not url.startswith("data:"):
        raise bad_request(f"{where}: the image must be a data: URL (base64)")
    meta, sep, payload = url.partition(",")
    if not sep or not meta.endswith(";base64"):
        raise bad_request(f"{where}: the image data URL is not base64")
    from PIL import Image, UnidentifiedImageError  # only requests with images need it loaded

    try:
        with Image.open(io.BytesIO(_decode(payload))) as image:
            width, height = image.size
    except (binascii.Error, UnidentifiedImageError, OSError, ValueError):
        raise bad_request(f"{where}: the image data is not a readable image") from None
    except Image.DecompressionBombError as exc:
        raise bad_request(f"{where}: the image has too many pixels: {exc}") from None
    return width, height


def _wav_seconds(audio: Any, where: str) -> float:
    """A base64 WAV's duration, from its header."""
    if not isinstance(audio, dict) or not isinstance(audio.get("data"), str):
        raise bad_request(f"{where}: input_audio must be an object with base64 'data'")
    if audio.get("format", "wav") != "wav":
        raise bad_request(f"{where}: the emulator reads WAV audio only, got format {audio.get('format')!r}")
    try:
        with wave.open(io.BytesIO(_decode(audio["data"]))) as wav:
            frames, rate = wav.getnframes(), wav.getframerate()
    except (binascii.Error, wave.Error, EOFError, ValueError):
        raise bad_request(f"{where}: the audio data is not a readable WAV file") from None
    if rate <= 0:
        raise bad_request(f"{where}: the WAV header gives no frame rate")
    return frames / rate


def _decode(payload: str) -> bytes:
    return base64.b64decode(payload, validate=True)
