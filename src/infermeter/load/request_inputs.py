"""The texts an embeddings or rerank request carries (--batch-inputs N): embeddings send N inputs, each built to the
request's drawn length; rerank sends a RERANK_QUERY_TOKENS-token query and N documents of the drawn length.  Each text
draws its words from a key of its own, so no two texts of a run are alike; a request's input_tokens is the sum of
what it carries, each text counted exactly under the run's tokenizer (raw text: these APIs apply no chat template)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from infermeter.client.request import PreparedRequest
from infermeter.workload.content import ContentKind
from infermeter.workload.prompts import ExactPrompter

RERANK_QUERY_TOKENS = 32  # each rerank query's exact length
INPUT_KEY_SPAN = 2**40  # beyond every request id (workload/ids.py's ranges end below 4 * 10**9)
QUERY_SLOT = 2**20  # the rerank query's key: past any input's slot
BatchApi = Literal["embeddings", "rerank"]
BATCH_APIS: tuple[BatchApi, ...] = ("embeddings", "rerank")


@dataclass(frozen=True)
class Batch:
    """What an embeddings or rerank request carries besides its first text: `count` inputs or documents."""

    api: BatchApi
    count: int = 1

    def describe(self) -> str:
        """run.json's note on how these requests' texts were built."""
        if self.api == "embeddings":
            return (
                f"--api embeddings: {self.count} input text(s) per request, each built to the request's drawn length "
                "(distinct words each); input_tokens is their sum"
            )
        return (
            f"--api rerank: a {RERANK_QUERY_TOKENS}-token query and {self.count} document(s) per request, each "
            "document built to the request's drawn length (distinct words each); input_tokens is the query's and the "
            "documents' sum"
        )


def batch_for(api: str, count: int) -> Batch | None:
    """The batch of an API that takes one (None: a generating API, which sends one prompt)."""
    for name in BATCH_APIS:
        if api == name:
            return Batch(name, count)
    return None


def sent_texts(req: PreparedRequest, batch: Batch | None) -> tuple[str, ...]:
    """Every text a request sends, each counted on its own: its prompt, or its inputs (and a rerank query)."""
    if batch is None or req.inputs is None:
        return (req.prompt,)
    return req.inputs if batch.api == "embeddings" else (req.prompt, *req.inputs)


def input_key(request_id: int, slot: int) -> int:
    """The word stream of a request's slot-th text (slot 0: the request's own, as a single prompt draws it)."""
    return request_id + slot * INPUT_KEY_SPAN


def batched(
    prompter: ExactPrompter,
    req: PreparedRequest,
    batch: Batch,
    prefix: str = "",
    content: ContentKind = "words",
) -> PreparedRequest:
    """`req` (its prompt `req.input_tokens` tokens long) as an embeddings or rerank request: its prompt is the first
    input or document, the others built to the same length after the same shared prefix; a rerank query opens it."""
    n, rid = req.input_tokens, req.request_id
    texts = (req.prompt, *(prompter.build(n, input_key(rid, k), prefix, content) for k in range(1, batch.count)))
    total = n * batch.count
    if batch.api == "embeddings":
        return dataclasses.replace(req, inputs=texts, input_tokens=total, ref_input_tokens=total)
    query = prompter.build(RERANK_QUERY_TOKENS, input_key(rid, QUERY_SLOT), content=content)
    total += RERANK_QUERY_TOKENS
    return dataclasses.replace(req, prompt=query, inputs=texts, input_tokens=total, ref_input_tokens=total)
