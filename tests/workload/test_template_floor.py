"""A drawn input shorter than the chat template allows is raised to the shortest prompt, never an exit (issue 35)."""

import dataclasses

import numpy as np
import pytest

from infermeter.errors import UserError
from infermeter.load.prompts import prepared
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import generate
from infermeter.workload.standard import CODE_COMPLETION, CONVERSATION
from infermeter.workload.template_floor import floor_to_template


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_conversation_under_chat_builds_every_prompt_at_its_recorded_length(seed):
    """The seeds that exited 2 ("cannot build a 9-token prompt: the template alone takes 22 tokens"): each short draw is
    raised to the template + 1 token (plus its shared prefix), the rest are untouched, and every prompt built is
    exactly the length the request records."""
    tok = resolve_tokenizer("cl100k_base")
    prompter = ExactPrompter(tok, chat=True, seed=seed)
    reqs = generate(CONVERSATION, 60, seed)
    with pytest.raises(UserError, match="template alone takes 22 tokens"):
        list(prepared(reqs, seed, prompter=prompter))  # the bug: the drawn lengths as they are cannot be built
    floored = floor_to_template(reqs, prompter)
    assert floored.floor == prompter.overhead + 1 == 23
    body = floored.requests.input_tokens - floored.requests.prefix_tokens
    assert body.min() >= 22  # a prefixed prompt's floor counts the prefix as the template sees it (one less, at most)
    low = reqs.input_tokens < floored.requests.input_tokens
    assert floored.raised == int(low.sum()) >= 1
    assert np.array_equal(floored.requests.input_tokens[~low], reqs.input_tokens[~low])
    assert np.array_equal(floored.requests.prefix_tokens, reqs.prefix_tokens)
    got = list(prepared(floored.requests, seed, prompter=prompter))
    assert [len(tok.encode(prompter.render(r.prompt))) for r in got] == [int(n) for n in floored.requests.input_tokens]
    assert all(r.input_tokens == r.ref_input_tokens for r in got)
    note = floored.note()
    assert note is not None and note.startswith(f"{floored.raised} of 60 requests drew an input shorter")
    assert "the chat template alone takes 22 tokens" in note and "23 tokens" in note


def test_code_completion_prefixed_draws_are_raised_past_their_repository_context():
    """code-completion draws function bodies down to 16 tokens after a 512-1024-token shared context: every one is
    buildable after the floor, the context counted as the chat template sees it."""
    tok = resolve_tokenizer("cl100k_base")
    prompter = ExactPrompter(tok, chat=True, seed=42)
    reqs = generate(CODE_COMPLETION, 150, 42)
    floored = floor_to_template(reqs, prompter)
    assert floored.raised >= 1
    shared = floored.requests.prefix_id >= 0
    assert np.all(floored.requests.input_tokens[shared] >= floored.requests.prefix_tokens[shared] + 22)
    got = list(prepared(floored.requests, 42, prompter=prompter))
    assert [len(tok.encode(prompter.render(r.prompt))) for r in got] == [int(n) for n in floored.requests.input_tokens]


def test_completions_prompts_and_verbatim_text_are_left_as_drawn():
    """Without a chat template nothing of conversation is short; a dataset's verbatim text is never re-lengthed."""
    tok = resolve_tokenizer("cl100k_base")
    reqs = generate(CONVERSATION, 60, 7)
    plain = floor_to_template(reqs, ExactPrompter(tok, chat=False, seed=7))
    assert plain.raised == 0 and plain.requests is reqs and plain.note() is None
    texts = np.array(["hi"] * len(reqs), dtype=object)
    verbatim = dataclasses.replace(reqs, input_tokens=np.full(len(reqs), 3), texts=texts)
    kept = floor_to_template(verbatim, ExactPrompter(tok, chat=True, seed=7))
    assert kept.raised == 0 and np.array_equal(kept.requests.input_tokens, np.full(len(reqs), 3))
