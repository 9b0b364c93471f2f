"""KServe v2 / Triton streaming over gRPC (`--backend grpc`): one ModelStreamInfer stream per request.

The request is what Triton's vLLM backend takes: a BYTES input `text_input`, a BOOL `stream`, and
`sampling_parameters` as JSON (max_tokens, ignore_eos, temperature).  Every response with a `text_output` is one
content chunk, stamped on the run clock when the response is handed to the event loop (the draft's Appendix B.1.1
stamp, as for SSE); `submitted_at` is when the request message was written.  A response with `error_message` ends
the record as a server error; the stream's end (or `triton_final_response`) completes it.  The emulator's final
response carries its token times (`infermeter_server_token_times`), anchored like the HTTP extension.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlsplit

import grpc
import orjson

from infermeter import secrets
from infermeter.client import reasons
from infermeter.client.apis import declare
from infermeter.client.request import ClientConfig, PreparedRequest
from infermeter.errors import UserError
from infermeter.protocols import kserve_v2_pb2 as pb
from infermeter.protocols import kserve_v2_pb2_grpc as pb_grpc
from infermeter.records import RequestRecord, RunClock, Status, failure
from infermeter.run_info import Client


def grpc_target(base_url: str) -> str:
    """host:port from `grpc://host:port`, `https://host:port` (TLS), `http://host:port` or `host:port`."""
    parts = urlsplit(base_url if "://" in base_url else f"grpc://{base_url}")
    if not parts.hostname or parts.port is None:
        raise UserError(f"--url {base_url} does not name a gRPC server: give host:port or grpc://host:port")
    return f"{parts.hostname}:{parts.port}"


def _channel(config: ClientConfig, target: str) -> grpc.aio.Channel:
    """A plain channel, or a TLS one for an https:// URL (its CA bundle and client certificate from --ca-bundle,
    --client-cert and --client-key)."""
    if not config.base_url.startswith("https://"):
        return grpc.aio.insecure_channel(target)
    tls = config.tls
    if tls.insecure:
        raise UserError("--insecure: gRPC always verifies the server's certificate: give its CA with --ca-bundle")
    try:
        root = tls.ca_bundle.read_bytes() if tls.ca_bundle else None
        chain = tls.client_cert.read_bytes() if tls.client_cert else None
        key = (tls.client_key or tls.client_cert).read_bytes() if tls.client_cert else None
    except OSError as exc:
        raise UserError(
            f"cannot read a TLS file ({exc.strerror}: {exc.filename}): check --ca-bundle/--client-cert"
        ) from None
    credentials = grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=chain)
    return grpc.aio.secure_channel(target, credentials)


class _Failure(Exception):
    def __init__(self, status: Status, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.status, self.error = status, failure(reason, detail)


class KServeGrpcClient:
    """One gRPC channel shared by every request of a run."""

    counting = "one token per streamed response with a text_output"

    def __init__(self, config: ClientConfig, clock: RunClock, max_connections: int = 0) -> None:
        self.config = config
        self.clock = clock
        self.target = grpc_target(config.base_url)
        self._channel = _channel(config, self.target)
        self._stub = pb_grpc.GRPCInferenceServiceStub(self._channel)
        # the API key's Authorization and every --header, as gRPC metadata (whose keys are lower case)
        heads = config.headers().items()
        self._metadata = tuple((k.lower(), v) for k, v in heads if k.lower() not in ("content-type", "accept"))

    def start(
        self, req: PreparedRequest, scheduled_at: float, record: RequestRecord
    ) -> Coroutine[Any, Any, RequestRecord]:
        """grpc.aio writes a call only from a task: the whole send is the coroutine."""
        return self.send(req, scheduled_at, record)

    def pace(self, poll: Callable[[], None] | None) -> None:
        """grpc.aio reads replies in its own code: the open loop's sends go at the driver's timer."""

    async def close(self) -> None:
        await self._channel.close()

    def declaration(self) -> Client:
        transport = "gRPC" + (" over TLS" if self.config.base_url.startswith("https://") else "")
        transport += ", KServe v2 / Triton ModelStreamInfer"
        return declare(self.config).model_copy(
            update={"backend": "grpc", "transport": transport, "endpoint": self.target}
        )

    async def server_token_count(self, text: str) -> int | None:
        return None  # the KServe v2 protocol has no tokenize call

    @property
    def token_count_source(self) -> str:
        return "none offered"

    def message(self, req: PreparedRequest) -> pb.ModelInferRequest:
        cfg = self.config
        msg = pb.ModelInferRequest(model_name=cfg.model, id=str(req.request_id))
        msg.inputs.add(name="text_input", datatype="BYTES", shape=[1]).contents.bytes_contents.append(
            req.prompt.encode()
        )
        msg.inputs.add(name="stream", datatype="BOOL", shape=[1]).contents.bool_contents.append(True)
        sampling = {"max_tokens": req.max_tokens, "temperature": cfg.temperature, "ignore_eos": cfg.ignore_eos}
        sampling.update(cfg.extra_body)
        msg.inputs.add(name="sampling_parameters", datatype="BYTES", shape=[1]).contents.bytes_contents.append(
            orjson.dumps(sampling)
        )
        return msg

    async def send(
        self, req: PreparedRequest, scheduled_at: float, record: RequestRecord | None = None
    ) -> RequestRecord:
        """Send one request and stream its reply into a record; cancellation completes it, then propagates."""
        rec = record if record is not None else req.record(scheduled_at)
        cfg = self.config
        loop = asyncio.get_running_loop()
        started = loop.time()
        metadata = self._metadata
        if cfg.request_id_prefix is not None:
            metadata = (*metadata, ("x-request-id", f"{cfg.request_id_prefix}-{req.request_id}"))
        call = self._stub.ModelStreamInfer(metadata=metadata)
        offsets: list[float] | None = None
        text: list[str] = []
        try:
            try:
                async with asyncio.timeout(min(cfg.first_token_timeout, cfg.total_timeout)) as deadline:
                    await call.write(self.message(req))
                    rec.submitted_at = self.clock.now()
                    await call.done_writing()
                    async for resp in call:
                        now = self.clock.now()
                        if resp.error_message:
                            raise _Failure("error", reasons.SERVER_ERROR_EVENT, resp.error_message[:200])
                        piece = _text_output(resp.infer_response)
                        if piece is not None:
                            text.append(piece)
                            if not rec.chunk_times:
                                deadline.reschedule(started + cfg.total_timeout)
                            rec.chunk_times.append(now)
                            rec.chunk_tokens.append(1)
                        params = resp.infer_response.parameters
                        if "infermeter_server_token_times" in params:
                            offsets = _offsets(params["infermeter_server_token_times"].string_param)
                        if "triton_final_response" in params and params["triton_final_response"].bool_param:
                            break
                rec.status = "ok"
            except TimeoutError:
                raise self._timed_out(rec, loop.time() - started) from None
            except grpc.aio.AioRpcError as exc:
                raise self._rpc_failure(exc, rec) from None
        except _Failure as f:
            rec.status, rec.error = f.status, secrets.redact(f.error)
            call.cancel()
        except asyncio.CancelledError:
            rec.status, rec.error = "cancelled", failure(reasons.CANCELLED, "the run stopped before it finished")
            call.cancel()
            self._fill(rec, offsets, text)
            raise
        self._fill(rec, offsets, text)
        return rec

    def _rpc_failure(self, exc: grpc.aio.AioRpcError, rec: RequestRecord) -> _Failure:
        code, detail = exc.code(), (exc.details() or "")[:200]
        if code == grpc.StatusCode.UNAVAILABLE:
            if rec.chunk_times:
                return _Failure("error", reasons.LOST_MID_STREAM, f"after {len(rec.chunk_times)} tokens ({detail})")
            if "connect" in detail.lower() and "reset" not in detail.lower():
                return _Failure("error", reasons.CANNOT_CONNECT, detail)
        return _Failure("error", reasons.grpc_status(code.name), detail)

    def _timed_out(self, rec: RequestRecord, elapsed: float) -> _Failure:
        cfg = self.config
        if rec.chunk_times or elapsed >= cfg.total_timeout:
            detail = f"not finished within {cfg.total_timeout:g} s ({len(rec.chunk_times)} tokens)"
            return _Failure("timeout", reasons.TOTAL_TIMEOUT, detail)
        return _Failure("timeout", reasons.FIRST_TOKEN_TIMEOUT, f"no token within {cfg.first_token_timeout:g} s")

    def _fill(self, rec: RequestRecord, offsets: list[float] | None, text: list[str]) -> None:
        rec.token_times = list(rec.chunk_times)
        rec.output_tokens = len(rec.token_times)
        if offsets is not None and len(offsets) == len(rec.token_times) and rec.token_times:
            # the server counts from the request's arrival; anchoring at submission keeps its gaps exact
            rec.server_token_times = [rec.submitted_at + off for off in offsets]
        if self.config.count_text is not None:
            rec.ref_output_tokens = self.config.count_text("".join(text))


def _text_output(resp: pb.ModelInferResponse) -> str | None:
    """The text of a response's `text_output` (typed contents, or Triton's raw length-prefixed BYTES), or None."""
    for i, out in enumerate(resp.outputs):
        if out.name != "text_output":
            continue
        if len(out.contents.bytes_contents):
            return b"".join(out.contents.bytes_contents).decode("utf-8", "replace")
        raw = resp.raw_output_contents[i] if i < len(resp.raw_output_contents) else b""
        return raw[4 : 4 + int.from_bytes(raw[:4], "little")].decode("utf-8", "replace") if len(raw) >= 4 else ""
    return None


def _offsets(text: str) -> list[float] | None:
    try:
        values = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(values, list) or not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
        return None
    return [float(v) for v in values]
