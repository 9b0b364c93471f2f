"""Endpoints that answer in one JSON body, not a token stream (client.apis): OpenAI embeddings, and rerank in the
shapes of vLLM, Cohere, Jina and Text Embeddings Inference (--rerank-shape).  `BodyDecoder` holds the body as it
arrives and checks it when it ends: one embedding or one result per input sent, no more, no less (the client holds
the count against what it sent)."""

from __future__ import annotations

import binascii
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from infermeter.client import reasons
from infermeter.client.events import EVENT_ERRORS, StreamFailure, StreamState, count, error_text, snippet

if TYPE_CHECKING:
    from infermeter.client.media import MediaKind
    from infermeter.client.request import ClientConfig, PreparedRequest

MAX_BODY_BYTES = 64 * 2**20  # a reply beyond this is not held (4096 floats of 256 inputs are ~10 MiB as JSON)

# --rerank-shape -> the path its server answers on
RERANK_PATHS = {"vllm": "/v1/rerank", "cohere": "/v2/rerank", "jina": "/v1/rerank", "tei": "/rerank"}


class BodyDecoder:
    """One JSON body: bytes held as they arrive (MAX_BODY_BYTES at most), read by `read` when it ends; the time
    of the last read is when the reply completed.  It has no first token: `feed` never says one arrived."""

    def __init__(self, read: Callable[[Any, StreamState], None], sent: int) -> None:
        self.state = StreamState()
        self.body = bytearray()
        self._read = read
        self.sent = sent  # inputs the request carried: each is owed one result

    def feed(self, data: bytes, now: float) -> bool:
        self.body += data
        if len(self.body) > MAX_BODY_BYTES:
            raise StreamFailure(reasons.REPLY_TOO_LARGE, f"more than {MAX_BODY_BYTES // 2**20} MiB")
        self.state.completed_at = now
        return False

    def end(self) -> None:
        try:
            value = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            raise StreamFailure(reasons.INVALID_JSON_REPLY, snippet(bytes(self.body[:200]))) from None
        if isinstance(value, dict) and "error" in value:
            raise StreamFailure(reasons.SERVER_ERROR_EVENT, error_text(value["error"]))
        try:
            self._read(value, self.state)
        except EVENT_ERRORS as exc:
            raise StreamFailure(reasons.MALFORMED_REPLY, str(exc)[:200]) from None
        if self.state.inputs != self.sent:
            raise StreamFailure(reasons.WRONG_COUNT, f"{self.state.inputs} came back for {self.sent} sent")

    def closed_complete(self) -> bool:
        return False  # a body framed by its length or chunks and cut short is never whole


def _one_each(indices: list[Any], what: str) -> None:
    """Indices must name each of 0..n-1 once (n: how many came back; the client checks n against what it sent)."""
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise TypeError(f"a {what} index that is not an integer")
    if sorted(indices) != list(range(len(indices))):
        raise ValueError(f"{what} indices are not one per input: {reprlib.repr(sorted(indices))}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_embeddings(value: Any, state: StreamState) -> None:
    """{"data": [{"index", "embedding": [floats] or base64}], "usage": {"prompt_tokens"}}."""
    if not isinstance(value, dict) or not isinstance(value.get("data"), list):
        raise TypeError("no data list")
    data: list[Any] = value["data"]
    for entry in data:
        if not isinstance(entry, dict):
            raise TypeError("an entry of data is not an object")
        vector = entry.get("embedding")
        if isinstance(vector, str):
            if not vector or not binascii.a2b_base64(vector, strict_mode=True):
                raise ValueError("an empty base64 embedding")
        elif not isinstance(vector, list) or not vector or not all(map(_number, vector)):
            raise TypeError("an embedding that is not a non-empty list of numbers")
    _one_each([entry.get("index", i) for i, entry in enumerate(data)], "embedding")
    state.inputs = len(data)
    _prompt_usage(value.get("usage"), state)


def read_rerank(value: Any, state: StreamState) -> None:
    """vLLM, Cohere, Jina: {"results": [{"index", "relevance_score"}], "usage"?}; TEI: [{"index", "score"}]."""
    results = value if isinstance(value, list) else value.get("results") if isinstance(value, dict) else None
    if not isinstance(results, list):
        raise TypeError("no results list")
    for entry in results:
        if not isinstance(entry, dict):
            raise TypeError("a result is not an object")
        score = entry.get("relevance_score", entry.get("score"))
        if not _number(score):
            raise TypeError(f"a result without a numeric score: {reprlib.repr(entry)}")
    _one_each([entry.get("index") for entry in results], "result")
    state.inputs = len(results)
    if isinstance(value, dict):
        _prompt_usage(value.get("usage"), state)


def _prompt_usage(usage: Any, state: StreamState) -> None:
    """usage.prompt_tokens, or total_tokens where only that is given (a pooling model generates nothing)."""
    if isinstance(usage, dict):
        prompt = count(usage.get("prompt_tokens"))
        state.usage_prompt = prompt if prompt is not None else count(usage.get("total_tokens"))


def texts(req: PreparedRequest) -> list[str]:
    """What an embeddings request embeds: its inputs, or its prompt alone."""
    return list(req.inputs) if req.inputs else [req.prompt]


@dataclass(frozen=True)
class Embeddings:
    name: str = "embeddings"
    generates: bool = False
    templated: bool = False
    media: tuple[MediaKind, ...] = ()
    ignores_eos: bool = False  # nothing is generated

    def path(self, config: ClientConfig) -> str:
        return "/v1/embeddings"

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        return {"model": req.model or config.model, "input": texts(req), "encoding_format": "float"}

    def decoder(self, req: PreparedRequest, keep_text: bool) -> BodyDecoder:
        return BodyDecoder(read_embeddings, len(texts(req)))


@dataclass(frozen=True)
class Rerank:
    name: str = "rerank"
    generates: bool = False
    templated: bool = False
    media: tuple[MediaKind, ...] = ()
    ignores_eos: bool = False  # nothing is generated

    def path(self, config: ClientConfig) -> str:
        return RERANK_PATHS[config.rerank_shape]

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        documents = list(req.inputs or ())
        if config.rerank_shape == "tei":
            return {"query": req.prompt, "texts": documents}
        model = req.model or config.model
        return {"model": model, "query": req.prompt, "documents": documents, "top_n": len(documents)}

    def decoder(self, req: PreparedRequest, keep_text: bool) -> BodyDecoder:
        # every shape's reply is told apart by its JSON (a list is TEI's); one result is owed per document
        return BodyDecoder(read_rerank, len(req.inputs or ()))


EMBEDDINGS = Embeddings()
RERANK = Rerank()
