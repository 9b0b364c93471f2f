"""Embeddings and rerank as the emulator reads and answers them: the request bodies (OpenAI embeddings; vLLM, Jina,
Cohere and TEI rerank), deterministic vectors and scores computed from the texts, and each API's reply shape.

Vectors are unit vectors drawn from a hash of each input, so equal texts embed equally; a rerank score is the share
of the query's words a document holds (most of the score) plus a little of a hash of the pair, so a document that
shares the query's words ranks first and ties still order deterministically."""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from infermeter.emulator.openai_format import bad_request

RerankShape = Literal["vllm", "cohere", "tei"]
WORD = re.compile(r"\w+")
OVERLAP_WEIGHT = 0.9  # the rest of a score (0.1) comes from the pair's hash


@dataclass(frozen=True)
class EmbeddingRequest:
    """An embeddings request: its inputs (texts, or token ids as given), the vector length and the encoding."""

    inputs: list[str | list[int]]
    dimensions: int
    base64: bool


@dataclass(frozen=True)
class RerankRequest:
    """A rerank request: the query, the documents, how many results to return and whether to echo the texts."""

    query: str
    documents: list[str]
    top_n: int
    return_documents: bool


def embedding_request(body: dict[str, Any], max_dim: int) -> EmbeddingRequest:
    """OpenAI's /v1/embeddings body (input: a text, texts, token ids or lists of them), or HTTP 400."""
    if "input" not in body:
        raise bad_request("'input' is required")
    raw = body["input"]
    if isinstance(raw, str) or (isinstance(raw, list) and raw and all(_is_token(t) for t in raw)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise bad_request("'input' must be a text or a non-empty list of texts (or token id lists)")
    inputs: list[str | list[int]] = []
    for i, item in enumerate(raw):
        if isinstance(item, str) and item:
            inputs.append(item)
        elif isinstance(item, list) and item and all(_is_token(t) for t in item):
            inputs.append(list(item))
        else:
            raise bad_request(f"input {i} must be a non-empty text or a non-empty list of token ids")
    dims = body.get("dimensions")
    if dims is None:
        dims = max_dim
    elif not _is_int(dims) or not 1 <= dims <= max_dim:
        raise bad_request(f"'dimensions' must be an integer from 1 to {max_dim}")
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise bad_request("'encoding_format' must be 'float' or 'base64'")
    return EmbeddingRequest(inputs, dims, encoding == "base64")


def rerank_request(body: dict[str, Any], documents_key: str) -> RerankRequest:
    """A rerank body: a query and its documents under `documents_key` ("documents", or TEI's "texts"), or HTTP 400."""
    query = body.get("query")
    if not isinstance(query, str) or not query:
        raise bad_request("'query' must be a non-empty text")
    raw = body.get(documents_key)
    if not isinstance(raw, list) or not raw:
        raise bad_request(f"'{documents_key}' must be a non-empty list of texts")
    documents = []
    for i, doc in enumerate(raw):
        text = doc.get("text") if isinstance(doc, dict) else doc
        if not isinstance(text, str) or not text:
            raise bad_request(f"{documents_key} {i} must be a non-empty text (or an object with 'text')")
        documents.append(text)
    top_n = body.get("top_n")
    if top_n is None:
        top_n = len(documents)
    elif not _is_int(top_n) or top_n < 1:
        raise bad_request("'top_n' must be an integer of at least 1")
    echo = body.get("return_documents", body.get("return_text", documents_key == "documents"))
    if not isinstance(echo, bool):
        raise bad_request("'return_documents' must be true or false")
    return RerankRequest(query, documents, min(top_n, len(documents)), echo)


def unit_vector(item: str | list[int], dims: int) -> np.ndarray:
    """A unit vector drawn from a hash of the input (equal inputs, equal vectors)."""
    data = item.encode() if isinstance(item, str) else np.asarray(item, dtype=np.int64).tobytes()
    seed = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
    v = np.random.default_rng(seed).standard_normal(dims)
    return v / np.linalg.norm(v)


def relevance(query: str, document: str) -> float:
    """A score in [0, 1]: the share of the query's words found in the document, and a little of the pair's hash."""
    words = set(WORD.findall(query.lower()))
    overlap = len(words & set(WORD.findall(document.lower()))) / len(words) if words else 0.0
    digest = hashlib.blake2b(f"{query}\0{document}".encode(), digest_size=8).digest()
    jitter = int.from_bytes(digest, "little") / 2**64
    return OVERLAP_WEIGHT * overlap + (1 - OVERLAP_WEIGHT) * jitter


def embeddings_reply(req: EmbeddingRequest, model: str, prompt_tokens: int) -> dict[str, Any]:
    """OpenAI's embeddings list: one entry per input, floats or base64 of little-endian float32."""
    data = []
    for i, item in enumerate(req.inputs):
        v = unit_vector(item, req.dimensions)
        vector: Any = base64.b64encode(v.astype("<f4").tobytes()).decode() if req.base64 else v.tolist()
        data.append({"object": "embedding", "index": i, "embedding": vector})
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def rerank_reply(req: RerankRequest, shape: RerankShape, rid: str, model: str, tokens: int) -> Any:
    """The ranked results, best first, in the shape of vLLM's (and Jina's) /v1/rerank, Cohere's /v2/rerank or
    TEI's /rerank."""
    scores = [relevance(req.query, d) for d in req.documents]
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: req.top_n]
    if shape == "tei":
        return [
            {"index": i, "score": scores[i], **({"text": req.documents[i]} if req.return_documents else {})}
            for i in order
        ]
    if shape == "cohere":
        results = [{"index": i, "relevance_score": scores[i]} for i in order]
        return {"id": rid, "results": results, "meta": {"billed_units": {"search_units": 1}}}
    results = []
    for i in order:
        result: dict[str, Any] = {"index": i}
        if req.return_documents:
            result["document"] = {"text": req.documents[i]}
        result["relevance_score"] = scores[i]
        results.append(result)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"id": rid, "model": model, "usage": usage, "results": results}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_token(value: Any) -> bool:
    return _is_int(value) and value >= 0
