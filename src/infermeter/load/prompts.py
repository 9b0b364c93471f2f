"""The run's requests as prompts: drawn from the workload, built to length, checked against the server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infermeter.client.backend import Backend
from infermeter.client.openai_sse import PreparedRequest
from infermeter.load.options import RunOptions
from infermeter.run_info import PromptMismatch, PromptVerification
from infermeter.workload import ids
from infermeter.workload.build import build_requests
from infermeter.workload.prompts import ExactPrompter, build_prompt
from infermeter.workload.spec import Requests
from infermeter.workload.tokenizers import TiktokenTokenizer
from infermeter.workload.tokenizers import declaration as tokenizer_declaration


def prepared(
    requests: Requests, seed: int, id_base: int = ids.MEASURED, prompter: ExactPrompter | None = None
) -> Iterator[PreparedRequest]:
    """Prompts built lazily, one per request, as the driver asks for them: exact-length under a tokenizer when
    one is given, else whole words (one token each to the emulator).  Ids come from the range at `id_base`."""
    prefixes: dict[int, str] = {}
    raw = ExactPrompter(prompter.tok, chat=False, seed=seed) if prompter is not None else None
    for i in range(len(requests)):
        rid, n = ids.request_id(id_base, i), int(requests.input_tokens[i])
        pid, ptok = int(requests.prefix_id[i]), int(requests.prefix_tokens[i])
        if prompter is not None and raw is not None:
            if pid >= 0 and pid not in prefixes:
                prefixes[pid] = raw.build_prefix(max(ptok, 1), pid)
            text = prompter.build(n, rid, prefixes.get(pid, ""))
        else:
            text = build_prompt(rid, n, pid, ptok, seed)
        yield PreparedRequest(rid, text, n, int(requests.output_tokens[i]), str(requests.request_class[i]))


def workload_for(opts: RunOptions, n: int, seed: int) -> tuple[Requests, dict[str, Any]]:
    return build_requests(
        n,
        seed,
        workload=opts.workload,
        input_tokens=opts.input_tokens,
        output_tokens=opts.output_tokens,
        arrivals=opts.arrivals,
        trace=opts.trace,
        rps_scale=opts.rps_scale,
    )


def tokenizer_block(prompter: ExactPrompter | None, counting: str) -> dict[str, Any]:
    if prompter is None:
        return {
            "name": "server-reported usage (completion_tokens, prompt_tokens)",
            "counting_method": "A",
            "per_event": counting,
            "special_tokens": "as the server counts them",
            "prompts": "whole words (one token each to infermeter's emulator); real servers count their own",
        }
    tok = prompter.tok
    # tiktoken's encodings are reference tokenizers (option B); a model's own vocabulary is native (option A)
    block = tokenizer_declaration(tok, "B" if isinstance(tok, TiktokenTokenizer) else "A")
    block.update(
        {
            "per_event": counting,
            "prompts": "exact length after the chat template" if prompter.template else "exact length",
            "template_overhead_tokens": prompter.overhead,
        }
    )
    return block


async def verify_prompts(client: Backend, prompter: ExactPrompter, sample: list[PreparedRequest]) -> PromptVerification:
    """Count a sample of the run's prompts with the server's own tokenizer, when it offers a way to ask."""
    checked, mismatches, examples = 0, 0, []
    for req in sample:
        got = await client.server_token_count(prompter.render(req.prompt))
        if got is None:
            break
        checked += 1
        if got != req.input_tokens:
            mismatches += 1
            if len(examples) < 5:
                examples.append(PromptMismatch(request_id=req.request_id, built=req.input_tokens, server=got))
    return PromptVerification(
        endpoint=client.token_count_source, checked=checked, mismatches=mismatches, examples=examples
    )
