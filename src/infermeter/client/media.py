"""An image or audio clip a request carries (--images, --audio): the file's bytes as base64, with what run.json
declares about it.  Made by `workload.media`; each API format puts it in its body its own way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MediaKind = Literal["image", "audio"]
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")  # the image files --image-dir sends


@dataclass(frozen=True)
class MediaItem:
    kind: MediaKind
    mime: str  # image/png, image/jpeg, audio/wav
    data_b64: str  # the whole file, base64
    size_bytes: int  # the file's size before base64
    width: int | None = None  # images: pixels
    height: int | None = None
    seconds: float | None = None  # audio: duration

    @property
    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.data_b64}"

    @property
    def format(self) -> str:
        """The file format's short name (png, jpeg, wav), as OpenAI's input_audio asks for it."""
        return self.mime.rpartition("/")[2]
