"""The run's requests as prompts: drawn from the workload, built to length, checked against the server."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from infermeter.client.backend import Backend
from infermeter.client.request import Message, PreparedRequest
from infermeter.load.conversation import with_system
from infermeter.load.counting import TokenCounting
from infermeter.load.request_inputs import Batch, batched, sent_texts
from infermeter.load.special_tokens import special_tokens_line
from infermeter.run_info import PromptMismatch, PromptVerification, SpecialTokens, Tokenizer
from infermeter.workload import ids
from infermeter.workload.blocks import BlockPrompter
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests


def prepared(
    requests: Requests,
    seed: int,
    id_base: int = ids.MEASURED,
    *,
    prompter: ExactPrompter,
    rows: Iterable[int] | None = None,
    prefix_seed: int | None = None,
    batch: Batch | None = None,
) -> Iterator[PreparedRequest]:
    """Prompts built lazily, one per request, as the driver asks for them: each exactly its workload length under
    the prompter's tokenizer (after its chat template), which is also its reference count.  Ids come from the
    range at `id_base`; `rows` builds only those requests (a worker's share), each the same as in the whole run.
    Shared prefixes are drawn from `prefix_seed` (default `seed`): a warm-up gives the run's seed to send the run's.

    A dataset's request with text sends it verbatim, counted as rendered; a trace's with hash_ids sends its blocks
    (workload/blocks.py, drawn from the shared-prefix seed too), then its own words, to its length (the content's
    length; with a chat template the count is the rendered prompt's).  A dataset's system message opens its
    conversation (load/conversation.py).  Each carries its model (--model-mix) and, in a multi-turn run, its session
    and turn.  With a `batch` (--api embeddings, rerank) the prompt is the first of the request's texts, the others
    built to its length (load/request_inputs.py); the texts go out raw, so a dataset's system message is not sent.
    Images and audio are given later, as the driver takes each request (load/request_extras.py)."""
    shared_seed = seed if prefix_seed is None else prefix_seed
    prefixes: dict[int, str] = {}
    raw = ExactPrompter(prompter.tok, chat=False, seed=shared_seed)
    texts, hash_ids, models = requests.texts, requests.hash_ids, requests.models
    sessions, turns, systems = requests.session, requests.turn, requests.systems
    blocks: BlockPrompter | None = None
    for i in range(len(requests)) if rows is None else (int(r) for r in rows):
        rid, n = ids.request_id(id_base, i), int(requests.input_tokens[i])
        text = None if texts is None else texts[i]
        system = None if systems is None else systems[i]
        prefix = ""  # the shared prefix a built prompt opens with
        if text is not None:
            n = prompter.count(text) if system is None or batch else n  # with a system message: counted as sent, below
        elif hash_ids is not None and hash_ids[i]:
            if blocks is None:
                blocks = BlockPrompter(prompter.tok, requests.block_tokens, shared_seed)
            own = max(n - blocks.bare, 1)  # the content's tokens: what the tokenizer adds to any text is counted in n
            text = blocks.build(hash_ids[i], own, rid)
            n = prompter.count(text) if prompter.template else own + blocks.bare
        else:
            pid, ptok = int(requests.prefix_id[i]), int(requests.prefix_tokens[i])
            if pid >= 0 and pid not in prefixes:
                prefixes[pid] = raw.build_prefix(max(ptok, 1), pid, requests.content)
            prefix = prefixes.get(pid, "")
            text = prompter.build(n, rid, prefix, requests.content)
        req = PreparedRequest(
            rid,
            text,
            n,
            int(requests.output_tokens[i]),
            str(requests.request_class[i]),
            n,
            session_id=None if sessions is None else int(sessions[i]),
            turn=None if turns is None else int(turns[i]),
            model=None if models is None else str(models[i]),
        )
        if batch is not None:
            yield batched(prompter, req, batch, prefix, requests.content)
        elif system is None:
            yield req
        elif sessions is not None:  # the session driver opens the conversation with it (load/conversation.py)
            yield dataclasses.replace(req, messages=(Message("system", system), Message("user", req.prompt)))
        else:
            yield with_system(prompter, req, system)


def tokenizer_block(
    counting: TokenCounting, prompter: ExactPrompter, per_event: str, special: SpecialTokens | None = None
) -> Tokenizer:
    """run.json's tokenizer block: the tokenizer, its counting option and why, what each record count holds, and the
    run's special-token handling (load/special_tokens.py; None: not declared)."""
    return counting.block().model_copy(
        update={
            "special": special,
            "special_tokens": special_tokens_line(special) if special is not None else None,
            "per_event": per_event,
            "prompts": "exact length after the chat template" if prompter.template else "exact length",
            "chat_template": prompter.template.origin if prompter.template else None,
            "template_overhead_tokens": prompter.overhead,
        }
    )


async def verify_prompts(
    client: Backend, prompter: ExactPrompter, sample: list[PreparedRequest], method: str, batch: Batch | None = None
) -> PromptVerification:
    """Count a sample of the run's prompts with the server's own tokenizer, when it offers a way to ask (an embeddings
    or rerank request's texts each on its own, summed)."""
    checked, mismatches = 0, 0
    examples: list[PromptMismatch] = []
    for req in sample:
        got = await _server_count(client, prompter, sent_texts(req, batch))
        if got is None:
            break
        checked += 1
        if got != req.input_tokens:
            mismatches += 1
            if len(examples) < 5:
                examples.append(PromptMismatch(request_id=req.request_id, built=req.input_tokens, server=got))
    meaning = (
        "prompts built under the server's own tokenizer (option A): a mismatch means it is not the one the server uses"
        if method == "A"
        else "prompts built under the reference tokenizer (option B): the server's own may count them differently"
    )
    return PromptVerification(
        endpoint=client.token_count_source, checked=checked, mismatches=mismatches, examples=examples, meaning=meaning
    )


async def _server_count(client: Backend, prompter: ExactPrompter, texts: tuple[str, ...]) -> int | None:
    """The server's count of the texts, summed (None: it offers no way to ask)."""
    total = 0
    for text in texts:
        one = await client.server_token_count(prompter.render(text))
        if one is None:
            return None
        total += one
    return total
