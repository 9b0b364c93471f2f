"""The emulator's routes beyond OpenAI's chat and completions: the Responses API, embeddings, rerank (vLLM and Jina,
Cohere, TEI) and the engines' native generation APIs (TGI, SGLang, Triton).  Every generation API is served by the
same engine model as chat (prefill, decode steps, KV, the prefix cache) and differs only in its framing; embeddings
and rerank are prefill-only work in that engine, answered once every input's prefill is done."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from infermeter.emulator.fault_replies import refused_by_fault
from infermeter.emulator.framed_stream import stream_reply, whole_reply
from infermeter.emulator.framing import ReplyInfo
from infermeter.emulator.generation_requests import (
    Generation,
    responses_generation,
    sglang_generation,
    tgi_generation,
    triton_generation,
)
from infermeter.emulator.openai_format import bad_request, parse_body
from infermeter.emulator.pooling import RerankShape, embedding_request, embeddings_reply, rerank_reply, rerank_request
from infermeter.emulator.server import Emulator

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# the paths an API key guards beside those under /v1/ and /v2/
GUARDED = ("/rerank", "/generate", "/generate_stream")


def guarded(path: str) -> bool:
    """Whether a request to this path must carry the API key (when one is set)."""
    return path.startswith(("/v1/", "/v2/")) or path in GUARDED


class ApiRoutes:
    """The handlers of these routes, over the emulator they serve."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator

    def add_to(self, app: web.Application) -> None:
        routes: dict[str, Handler] = {
            "/v1/responses": self.responses,
            "/v1/embeddings": self.embeddings,
            "/v1/rerank": self._rerank("vllm", "documents"),
            "/v2/rerank": self._rerank("cohere", "documents"),
            "/rerank": self.rerank_by_body,
            "/generate_stream": self.tgi_stream,
            "/generate": self.generate,
            "/v2/models/{model}/generate_stream": self.triton_stream,
            "/v2/models/{model}/generate": self.triton_whole,
        }
        for path, handler in routes.items():
            app.router.add_post(path, handler)

    # ----- generation

    async def responses(self, request: web.Request) -> web.StreamResponse:
        body = parse_body(await request.read())
        return await self._generate(request, responses_generation(body, self.emulator))

    async def tgi_stream(self, request: web.Request) -> web.StreamResponse:
        body = parse_body(await request.read())
        return await self._generate(request, tgi_generation(body, self.emulator, stream=True))

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """/generate: TGI's (a body with "inputs", answered whole) or SGLang's (a body with "text")."""
        body = parse_body(await request.read())
        if "inputs" in body and "text" not in body:
            return await self._generate(request, tgi_generation(body, self.emulator, stream=False))
        return await self._generate(request, sglang_generation(body, self.emulator))

    async def triton_stream(self, request: web.Request) -> web.StreamResponse:
        body = parse_body(await request.read())
        return await self._generate(request, triton_generation(body, self.emulator, stream=True))

    async def triton_whole(self, request: web.Request) -> web.StreamResponse:
        body = parse_body(await request.read())
        return await self._generate(request, triton_generation(body, self.emulator, stream=False))

    async def _generate(self, request: web.Request, g: Generation) -> web.StreamResponse:
        em = self.emulator
        received = time.perf_counter()
        fault = em.faults.draw()
        if (refused := refused_by_fault(fault, request)) is not None:
            em.metrics.failed()
            return refused
        handle = await em.admit(g.tokens, g.max_tokens, 0, g.media)
        if isinstance(handle, str):
            raise bad_request(handle)
        created = int(time.time())
        info = ReplyInfo(
            em.request_id(g.id_prefix), em.config.model, g.prompt, handle.req.cached, g.max_tokens, created
        )
        framing = g.framing(info)
        if not g.stream:
            return await whole_reply(em, framing, handle, received)
        return await stream_reply(em, request, framing, handle, received, fault)

    # ----- pooling

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        em = self.emulator
        received = time.perf_counter()
        req = embedding_request(parse_body(await request.read()), em.config.embedding_dim)
        prompts = [len(em.tokenizer.completion(x)) if isinstance(x, str) else len(x) for x in req.inputs]
        if (refused := await self._prefill(request, prompts, received)) is not None:
            return refused
        return _json(embeddings_reply(req, em.config.model, sum(prompts)))

    def _rerank(self, shape: RerankShape, key: str) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await self._serve_rerank(request, parse_body(await request.read()), shape, key)

        return handler

    async def rerank_by_body(self, request: web.Request) -> web.StreamResponse:
        """/rerank: TEI's (a body with "texts") or vLLM's (a body with "documents")."""
        body = parse_body(await request.read())
        if "texts" in body:
            return await self._serve_rerank(request, body, "tei", "texts")
        return await self._serve_rerank(request, body, "vllm", "documents")

    async def _serve_rerank(
        self, request: web.Request, body: dict[str, Any], shape: RerankShape, key: str
    ) -> web.StreamResponse:
        """Each (query, document) pair is prefilled as one input, as a cross-encoder reads it."""
        em = self.emulator
        received = time.perf_counter()
        req = rerank_request(body, key)
        query = len(em.tokenizer.completion(req.query))
        prompts = [query + len(em.tokenizer.completion(d)) for d in req.documents]
        if (refused := await self._prefill(request, prompts, received)) is not None:
            return refused
        return _json(rerank_reply(req, shape, em.request_id("rerank-"), em.config.model, sum(prompts)))

    async def _prefill(self, request: web.Request, prompts: list[int], received: float) -> web.Response | None:
        """The inputs' prefill in the engine (None once done), or the reply of a fault that refused the request."""
        em = self.emulator
        fault = em.faults.draw()
        if (refused := refused_by_fault(fault, request)) is not None:
            em.metrics.failed()
            return refused
        handles = await em.prefill_only(prompts)
        if isinstance(handles, str):
            raise bad_request(handles)
        em.metrics.pooled(received, time.perf_counter(), handles)
        return None


def _json(obj: Any) -> web.Response:
    return web.Response(body=orjson.dumps(obj), content_type="application/json")
