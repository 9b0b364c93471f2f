"""How injected faults reach the wire (emulator/faults.py): an HTTP error reply, a connection cut, and SSE written
in the stream shape a fault asks for (CRLF, small writes, keep-alive comments); shared by every streaming route."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from infermeter.emulator.faults import HTTP_MESSAGE, HTTP_STATUS, Fault

if TYPE_CHECKING:
    from infermeter.emulator.engine_loop import Handle, RealClockEngine

ERROR_MESSAGE = "engine failure while decoding (injected fault)"  # the error event a mid-stream fault sends


class FaultWriter:
    """Writes SSE events, in the stream shape a fault asks for (CRLF, split into small writes, keep-alives)."""

    SPLIT = 7  # bytes per write for split_reads

    def __init__(self, resp: web.StreamResponse, kind: str | None) -> None:
        self.resp = resp
        self.kind = kind

    async def event(self, obj: dict[str, Any]) -> None:
        await self.events(b"data: " + orjson.dumps(obj) + b"\n\n")

    async def events(self, data: bytes) -> None:
        """One or more whole events, already framed."""
        await self.raw(data)
        if self.kind == "keep_alive":
            await self.raw(b": keep-alive\n\n")

    async def raw(self, data: bytes) -> None:
        if self.kind == "crlf":
            data = data.replace(b"\n", b"\r\n")
        if self.kind != "split_reads":
            await self.resp.write(data)
            return
        for i in range(0, len(data), self.SPLIT):
            await self.resp.write(data[i : i + self.SPLIT])
            await asyncio.sleep(0.0005)  # let each piece leave as its own segment


def abort(request: web.Request) -> None:
    """Cut the connection (a reset, as the client sees it)."""
    if request.transport is not None:
        request.transport.abort()


def http_fault(fault: Fault) -> web.Response:
    """The HTTP error reply of an http_* fault, in OpenAI's error format (Retry-After when configured)."""
    status = HTTP_STATUS[fault.kind]
    headers = {"Retry-After": f"{fault.retry_after_s:g}"} if fault.retry_after_s is not None else None
    kind = "rate_limit_error" if status == 429 else "server_error"
    body = {"error": {"message": HTTP_MESSAGE[status], "type": kind, "code": status}}
    return web.json_response(body, status=status, headers=headers)


def refused_by_fault(fault: Fault | None, request: web.Request) -> web.Response | None:
    """The reply of a fault that strikes before any response (an HTTP error, a reset), or None."""
    if fault is None:
        return None
    if fault.kind in HTTP_STATUS:
        return http_fault(fault)
    if fault.kind == "reset_before_headers":
        abort(request)
        return web.Response(status=500)  # never reaches the client: the connection is gone
    return None


@dataclass(frozen=True)
class StreamBreaks:
    """How one API's stream breaks: a cut-off JSON line, its error event, and what follows that (b"": nothing)."""

    broken: bytes
    error: bytes
    done: bytes


async def strike_mid_stream(
    engine: RealClockEngine, fault: Fault, request: web.Request, handle: Handle, out: FaultWriter, breaks: StreamBreaks
) -> bool:
    """Strike a mid-stream fault after the current token; True when the stream ends here."""
    if fault.kind == "stall_mid_stream":
        await asyncio.sleep(fault.stall_s)
        return False
    if fault.kind in ("reset_mid_stream", "end_before_finish"):
        engine.abandon(handle)
        if fault.kind == "reset_mid_stream":
            abort(request)
        return True
    if fault.kind == "invalid_json":
        await out.raw(breaks.broken)
        return False
    if fault.kind == "line_without_data":
        await out.raw(b"this line has no data field\n\n")
        return False
    if fault.kind == "error_event":
        engine.abandon(handle)
        await out.events(breaks.error)
        if breaks.done:
            await out.raw(breaks.done)
        return True
    return False
