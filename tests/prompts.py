"""Exact-length prompts under cl100k_base for tests that send requests by hand (the emulator counts with it)."""

from __future__ import annotations

from functools import cache

from infermeter.client.openai_sse import PreparedRequest
from infermeter.tokenizers import REFERENCE, Tokenizer, resolve_tokenizer
from infermeter.workload.prompts import ExactPrompter


@cache
def cl100k() -> Tokenizer:
    return resolve_tokenizer(REFERENCE)


@cache
def prompter(chat: bool = False) -> ExactPrompter:
    return ExactPrompter(cl100k(), chat=chat)


def request(request_id: int, tokens: int, max_tokens: int, prefix: str = "") -> PreparedRequest:
    """A completions request whose prompt is exactly `tokens` cl100k_base tokens (`prefix` leading, when given)."""
    text = prompter().build(tokens, request_id, prefix)
    return PreparedRequest(request_id, text, tokens, max_tokens, ref_input_tokens=tokens)
