"""The emulator's KServe v2 / Triton gRPC front end: ModelStreamInfer over the same engine as the HTTP server.

A request carries its prompt as the BYTES input `text_input` and its length limit the way Triton's vLLM backend
takes it (`sampling_parameters`, a JSON string with max_tokens) or as a request parameter / INT input `max_tokens`;
the prompt is counted with the emulator's tokenizer as it is (no chat template, as Triton's vLLM backend takes it).
Each generated token is one ModelStreamInferResponse with a BYTES output `text_output`; the last one carries the
parameter `triton_final_response` = true and, as `infermeter_server_token_times`, the server's emission time of
each token (seconds after the request arrived, a JSON list), as the HTTP front end's final event does.

With `api_key` set, a call without `authorization: Bearer <key>` metadata ends UNAUTHENTICATED.  Configured faults
apply as gRPC has them: HTTP statuses become the status codes Triton answers with (429 RESOURCE_EXHAUSTED, 500
INTERNAL, 503 UNAVAILABLE), resets end the call UNAVAILABLE (before any response, after a share of the tokens, or
after the last token before the final response),
stalls hold the stream, an error event is a response with error_message; the SSE framing faults (invalid JSON, CRLF,
split reads, ...) have no gRPC form and are not injected.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

import grpc
import orjson

from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.engine_loop import Handle, RealClockEngine, offsets_from
from infermeter.emulator.faults import HTTP_MESSAGE, HTTP_STATUS, Fault, FaultPlan
from infermeter.emulator.guardrails import OutputFilter
from infermeter.emulator.tokenizer import EmulatorTokenizer
from infermeter.protocols import kserve_v2_pb2 as pb
from infermeter.protocols import kserve_v2_pb2_grpc as pb_grpc

DEFAULT_MAX_TOKENS = 16
MID_STREAM = ("stall_mid_stream", "reset_mid_stream", "error_event")
GRPC_STATUS = {429: grpc.StatusCode.RESOURCE_EXHAUSTED, 500: grpc.StatusCode.INTERNAL, 503: grpc.StatusCode.UNAVAILABLE}


class RequestError(ValueError):
    """A request the emulator cannot serve; its message goes back as the response's error_message."""


def _input(req: pb.ModelInferRequest, name: str) -> pb.ModelInferRequest.InferInputTensor | None:
    return next((t for t in req.inputs if t.name == name), None)


def _scalar(req: pb.ModelInferRequest, name: str) -> Any:
    """An input tensor's first element, from its typed contents or from raw_input_contents."""
    for i, t in enumerate(req.inputs):
        if t.name != name:
            continue
        c = t.contents
        for values in (c.bytes_contents, c.int64_contents, c.int_contents, c.uint_contents, c.bool_contents):
            if len(values):
                return values[0]
        if i < len(req.raw_input_contents):
            raw = req.raw_input_contents[i]
            if t.datatype == "BYTES" and len(raw) >= 4:  # Triton's raw BYTES: a 4-byte length, then the bytes
                return raw[4 : 4 + int.from_bytes(raw[:4], "little")]
            if t.datatype in ("INT32", "INT64", "UINT32", "UINT64") and raw:
                return int.from_bytes(raw[: int(t.datatype[-2:]) // 8], "little", signed=t.datatype[0] == "I")
        raise RequestError(f"input {name} has no contents")
    return None


def parse_request(req: pb.ModelInferRequest) -> tuple[str, int]:
    """The prompt and max_tokens of a ModelInferRequest; RequestError names what is wrong."""
    text = _scalar(req, "text_input")
    if text is None:
        raise RequestError("the request has no text_input (a BYTES input holding the prompt)")
    prompt = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    max_tokens: Any = DEFAULT_MAX_TOKENS
    if "max_tokens" in req.parameters:
        max_tokens = req.parameters["max_tokens"].int64_param
    elif _input(req, "max_tokens") is not None:
        max_tokens = _scalar(req, "max_tokens")
    elif (sampling := _scalar(req, "sampling_parameters")) is not None:
        try:
            max_tokens = orjson.loads(sampling).get("max_tokens", DEFAULT_MAX_TOKENS)
        except (orjson.JSONDecodeError, AttributeError):
            raise RequestError("sampling_parameters is not a JSON object") from None
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise RequestError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    return prompt, max_tokens


class Emulator(Protocol):
    """What this front end needs of the emulator (emulator/server.py's Emulator)."""

    config: EmulatorConfig
    engine: RealClockEngine | None
    faults: FaultPlan
    tokenizer: EmulatorTokenizer

    def too_long(self, prompt: int, max_tokens: int) -> str | None: ...

    async def admit(self, tokens: list[int], max_tokens: int, priority: int = 0) -> Handle | str: ...

    def account(self, times: list[float], received: float, handle: Handle) -> None: ...


class StreamInferServicer(pb_grpc.GRPCInferenceServiceServicer):
    """ServerReady and ModelStreamInfer, answered by an Emulator's engine."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator

    async def ServerReady(self, request: pb.ServerReadyRequest, context: Any) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.emulator.engine is not None)

    async def ModelStreamInfer(
        self, request_iterator: AsyncIterator[pb.ModelInferRequest], context: Any
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        key = self.emulator.config.api_key
        if key is not None and dict(context.invocation_metadata()).get("authorization") != f"Bearer {key}":
            # the request is read first: an abort racing the client's write of it reached the client as INTERNAL
            with contextlib.suppress(StopAsyncIteration):
                await anext(aiter(request_iterator))
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid or missing API key (authorization metadata)")
        async for req in request_iterator:
            async for resp in self._one(req, context):
                yield resp

    async def _one(self, req: pb.ModelInferRequest, context: Any) -> AsyncIterator[pb.ModelStreamInferResponse]:
        emu = self.emulator
        received = time.perf_counter()
        fault = emu.faults.draw()
        if fault is not None and fault.kind in HTTP_STATUS:
            status = HTTP_STATUS[fault.kind]
            await context.abort(GRPC_STATUS[status], HTTP_MESSAGE[status])
        if fault is not None and fault.kind == "reset_before_headers":
            await context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset (injected fault)")
        try:
            prompt, max_tokens = parse_request(req)
            tokens = emu.tokenizer.completion(prompt)
            too_long = emu.too_long(len(tokens), max_tokens)
            if too_long is not None:
                raise RequestError(too_long)
            handle = await emu.admit(tokens, max_tokens)
            if isinstance(handle, str):
                raise RequestError(handle)
        except RequestError as exc:
            yield pb.ModelStreamInferResponse(error_message=str(exc))
            return
        model = req.model_name or emu.config.model
        guard = OutputFilter(emu.config.output_filter_ms / 1000)
        times: list[float] = []
        strike = fault.token_index(max_tokens) if fault is not None else -1
        try:
            if fault is not None and fault.kind == "stall_before_first_token":
                await asyncio.sleep(fault.stall_s)
            while (t := await handle.queue.get()) is not None:
                await guard.hold(t)
                if len(times) == strike + 1 and fault is not None and fault.kind in MID_STREAM:
                    if fault.kind == "stall_mid_stream":
                        await asyncio.sleep(fault.stall_s)
                    else:
                        assert emu.engine is not None
                        emu.engine.abandon(handle)
                        yield await _ended(fault, context)
                        return
                times.append(t)
                out = pb.ModelInferResponse.InferOutputTensor(
                    name="text_output",
                    datatype="BYTES",
                    shape=[1],
                    contents=pb.InferTensorContents(bytes_contents=[emu.tokenizer.reply(len(times) - 1).encode()]),
                )
                yield pb.ModelStreamInferResponse(
                    infer_response=pb.ModelInferResponse(model_name=model, id=req.id, outputs=[out])
                )
        except asyncio.CancelledError:
            assert emu.engine is not None
            emu.engine.abandon(handle)
            raise
        emu.account(times, received, handle)
        if fault is not None and fault.kind == "reset_before_done":
            await context.abort(
                grpc.StatusCode.UNAVAILABLE, "connection reset before the final response (injected fault)"
            )
        final = pb.ModelInferResponse(model_name=model, id=req.id)
        final.parameters["triton_final_response"].bool_param = True
        offsets = orjson.dumps(offsets_from(times, received)).decode()
        final.parameters["infermeter_server_token_times"].string_param = offsets
        yield pb.ModelStreamInferResponse(infer_response=final)


async def _ended(fault: Fault, context: Any) -> pb.ModelStreamInferResponse:
    """A mid-stream fault that ends the stream: a reset ends the call, an error event is a last response."""
    if fault.kind == "reset_mid_stream":
        await context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset mid-stream (injected fault)")
    return pb.ModelStreamInferResponse(error_message="The engine failed mid-generation (injected fault)")


async def start_grpc(emulator: Emulator, host: str, port: int) -> tuple[grpc.aio.Server, int]:
    """A gRPC server on host:port (0: a free port) in the running event loop; returns it and the bound port."""
    server = grpc.aio.server()
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(StreamInferServicer(emulator), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot listen for gRPC on {host}:{port}")
    await server.start()
    return server, bound
