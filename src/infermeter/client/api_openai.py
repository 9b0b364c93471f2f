"""OpenAI completions and chat completions, streamed over SSE (client.apis): the bodies (chat's with images and audio
as content parts), and `events.StreamDecoder`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infermeter.client.events import StreamDecoder

if TYPE_CHECKING:
    from infermeter.client.media import MediaItem, MediaKind
    from infermeter.client.request import ClientConfig, PreparedRequest


def sampling(req: PreparedRequest, config: ClientConfig, prompt: dict[str, Any]) -> dict[str, Any]:
    """What every OpenAI generation body carries: the model, the cap, streaming with usage, the temperature, the
    prompt's field(s), and ignore_eos when asked (in this order: the bytes sent stay those of earlier versions)."""
    body: dict[str, Any] = {
        "model": req.model or config.model,
        "max_tokens": req.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": config.temperature,
        **prompt,
    }
    if config.ignore_eos:
        body["ignore_eos"] = True
    return body


def chat_messages(req: PreparedRequest) -> list[dict[str, Any]]:
    """The conversation a chat body carries: the request's messages, or its prompt as one user message; its images
    and audio follow the text of the last user message as content parts (without any, content stays a string)."""
    if req.messages is not None:
        messages = [{"role": m.role, "content": m.content} for m in req.messages]
    else:
        messages = [{"role": "user", "content": req.prompt}]
    if req.media:
        message = last_user(messages)
        message["content"] = [{"type": "text", "text": message["content"]}, *map(chat_part, req.media)]
    return messages


def last_user(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The last user message, which a request's media go with (one is added at the end when there is none)."""
    for message in reversed(messages):
        if message["role"] == "user":
            return message
    messages.append({"role": "user", "content": ""})
    return messages[-1]


def chat_part(item: MediaItem) -> dict[str, Any]:
    """An image as a data URL, or an audio clip as base64 with its format: chat completions' content parts."""
    if item.kind == "image":
        return {"type": "image_url", "image_url": {"url": item.data_url}}
    return {"type": "input_audio", "input_audio": {"data": item.data_b64, "format": item.format}}


@dataclass(frozen=True)
class Completions:
    name: str = "completions"
    generates: bool = True
    templated: bool = False
    media: tuple[MediaKind, ...] = ()
    ignores_eos: bool = True

    def path(self, config: ClientConfig) -> str:
        return "/v1/completions"

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        return sampling(req, config, {"prompt": req.prompt})

    def decoder(self, req: PreparedRequest, keep_text: bool) -> StreamDecoder:
        return StreamDecoder(chat=False, keep_text=keep_text)


@dataclass(frozen=True)
class Chat:
    name: str = "chat"
    generates: bool = True
    templated: bool = True
    media: tuple[MediaKind, ...] = ("image", "audio")
    ignores_eos: bool = True

    def path(self, config: ClientConfig) -> str:
        return "/v1/chat/completions"

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        return sampling(req, config, {"messages": chat_messages(req)})

    def decoder(self, req: PreparedRequest, keep_text: bool) -> StreamDecoder:
        return StreamDecoder(chat=True, keep_text=keep_text)


COMPLETIONS = Completions()
CHAT = Chat()
