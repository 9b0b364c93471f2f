"""A stream's events written straight to its transport as the engine hands out its tokens: no task wakes per token,
which is what lets one core serve thousands of streams (the aiohttp routes and the lean front end both use it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from infermeter.emulator.engine_loop import Handle
from infermeter.emulator.openai_format import final_event, usage


class DirectEvents:
    """One stream's events written straight to its transport as the engine hands out tokens (chunked framing as
    aiohttp's writer would add it; the headers went before).  `ended` is called once: True after the last token,
    False when the client went away."""

    def __init__(
        self,
        transport: asyncio.Transport,
        chunked: bool,
        rid: str,
        obj: str,
        created: int,
        model: str,
        chat: bool,
        reply_json: Callable[[int], bytes],
        ended: Callable[[bool], None],
    ) -> None:
        self.transport, self.chunked, self.reply_json, self._ended = transport, chunked, reply_json, ended
        self.rid, self.obj, self.created, self.model, self.chat = rid, obj, created, model, chat
        self.times: list[float] = []
        self.over = False
        start = orjson.dumps({"id": rid, "object": obj, "created": created, "model": model})[:-1]
        self.head = b"data: " + start + b',"choices":[{"index":0,"finish_reason":null,'
        self.head += b'"delta":{"content":' if chat else b'"text":'
        self.tail = b"}}]}\n\n" if chat else b"}]}\n\n"
        self.role = self.head[: -len(b'"content":')] + b'"role":"assistant","content":""}}]}\n\n'

    def start(self, handle: Handle) -> None:
        """The chat role event, then the tokens as the engine hands them out (first those handed out already)."""
        if self.chat:
            self.write(self.role)
        handle.take_direct(self.token)

    def write(self, data: bytes) -> None:
        if self.transport.is_closing():
            self._end(False)
            return
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data)

    def token(self, t: float | None) -> None:
        """The engine handed out a token at `t` (None: the stream's last came before)."""
        if t is None:
            self._end(True)
            return
        piece = self.reply_json(len(self.times))
        self.times.append(t)
        self.write(self.head + piece + self.tail)

    def last(self, body: dict[str, Any], prompt: int, received: float, sent: float, handle: Handle) -> bytes:
        """The stream's last events: the final one (finish_reason, the server's token times, usage when the request
        asked for it) and [DONE]."""
        times = self.times
        final = final_event(self.rid, self.obj, self.created, self.model, self.chat, times, received, sent, handle)
        if (body.get("stream_options") or {}).get("include_usage"):
            final["usage"] = usage(prompt, len(times), handle.req.cached)
        return b"data: " + orjson.dumps(final) + b"\n\ndata: [DONE]\n\n"

    def _end(self, finished: bool) -> None:
        if not self.over:
            self.over = True
            self._ended(finished)
