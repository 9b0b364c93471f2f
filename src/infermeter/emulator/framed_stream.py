"""A generation reply in any API's framing (emulator/framing.py), streamed as the engine hands out its tokens or
answered whole once the last is out; injected faults strike these streams as they strike OpenAI's."""

from __future__ import annotations

import asyncio

import orjson
from aiohttp import web

from infermeter.emulator.engine_loop import Handle
from infermeter.emulator.fault_replies import ERROR_MESSAGE, FaultWriter, StreamBreaks, abort, strike_mid_stream
from infermeter.emulator.faults import Fault
from infermeter.emulator.framing import Framing
from infermeter.emulator.guardrails import OutputFilter
from infermeter.emulator.server import Emulator


async def whole_reply(emulator: Emulator, framing: Framing, handle: Handle, received: float) -> web.Response:
    """The reply once its last token is out (faults other than HTTP errors and resets apply to streams only)."""
    times = []
    while (t := await handle.queue.get()) is not None:
        times.append(t)
    emulator.account(times, received, handle)
    text = "".join(emulator.tokenizer.reply(i) for i in range(len(times)))
    return web.Response(body=orjson.dumps(framing.whole(text, len(times))), content_type="application/json")


async def stream_reply(
    emulator: Emulator,
    request: web.Request,
    framing: Framing,
    handle: Handle,
    received: float,
    fault: Fault | None,
) -> web.StreamResponse:
    """The reply as SSE, one event per token as the engine hands it out, in the framing's events."""
    assert emulator.engine is not None
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    if request.version >= (1, 1):
        resp.enable_chunked_encoding()
    await resp.prepare(request)
    guard = OutputFilter(emulator.config.output_filter_ms / 1000)
    kind = fault.kind if fault is not None else None
    strike = fault.token_index(handle.req.output) if fault is not None else -1
    out = FaultWriter(resp, kind)
    times: list[float] = []
    total = handle.req.output
    try:
        if kind == "keep_alive":
            await out.raw(b": keep-alive\n\n")
        if opening := framing.opening():
            await out.events(opening)
        if kind == "stall_before_first_token" and fault is not None:
            await asyncio.sleep(fault.stall_s)
        while (t := await handle.queue.get()) is not None:
            k = len(times)
            times.append(t)
            await guard.hold(t)
            await out.events(framing.token(k, emulator.tokenizer.reply(k), k + 1 == total))
            if k == strike and fault is not None:
                breaks = StreamBreaks(b'data: {"text": " broken\n\n', framing.error(ERROR_MESSAGE), framing.done)
                if await strike_mid_stream(emulator.engine, fault, request, handle, out, breaks):
                    return resp
        emulator.account(times, received, handle)
        if closing := framing.closing():
            await out.events(closing)
        if kind == "reset_before_done":
            abort(request)
            return resp
        if kind != "no_done" and framing.done:
            await out.raw(framing.done)
    except (ConnectionResetError, asyncio.CancelledError):
        emulator.engine.abandon(handle)
        raise
    return resp
