"""Drawn inputs never shorter than the prompt the chat template allows: such a request is raised to the shortest prompt
that holds the template, its shared prefix and one token of content, so its recorded input length is what was sent.

A workload's lengths are drawn before the run knows its tokenizer (the server may declare it), so the floor is applied
to the drawn requests once the prompter exists, and run.json's workload notes say how many were raised and to what.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests


@dataclass(frozen=True)
class Floored:
    """Requests with every generated input at least its floor, and how many had to be raised."""

    requests: Requests
    raised: int  # requests whose drawn input was below their floor
    floor: int  # the shortest prompt of a request without a shared prefix: the template's tokens + 1
    template_tokens: int  # what the chat template (or the tokenizer alone) adds to any prompt
    chat: bool

    def note(self, what: str = "requests") -> str | None:
        """run.json's workload note on the raise (None when no request was raised)."""
        if not self.raised:
            return None
        around = (
            f"the chat template alone takes {self.template_tokens} tokens"
            if self.chat
            else f"the tokenizer adds {self.template_tokens} tokens to any text"
        )
        return (
            f"{self.raised} of {len(self.requests)} {what} drew an input shorter than a prompt can be ({around}): "
            f"each was raised to the shortest prompt holding one token of content, {self.floor} tokens (plus its "
            "shared prefix, if any); records' input_tokens are the lengths sent"
        )


def floor_to_template(requests: Requests, prompter: ExactPrompter, prefix_seed: int | None = None) -> Floored:
    """`requests` with each input built to length raised to at least the template's tokens, its shared prefix's and
    one of content.  Rows with verbatim text or trace blocks are left as they are.  `prefix_seed`: the seed the shared
    prefixes are built from (default the prompter's), as load/prompts.py's `prepared` builds them."""
    inputs = np.asarray(requests.input_tokens, dtype=np.int64)
    floors = np.full(len(inputs), prompter.overhead + 1, dtype=np.int64)
    prefix_id = np.asarray(requests.prefix_id, dtype=np.int64)
    shared = prefix_id >= 0
    if shared.any():
        raw = ExactPrompter(prompter.tok, chat=False, seed=prompter.seed if prefix_seed is None else prefix_seed)
        pids, first = np.unique(prefix_id[shared], return_index=True)
        lengths = np.asarray(requests.prefix_tokens, dtype=np.int64)[shared][first]
        shortest = np.zeros(int(pids[-1]) + 1, dtype=np.int64)
        for pid, length in zip(pids.tolist(), lengths.tolist(), strict=True):
            # the prefix exactly as the run's prompts carry it, counted under the template
            shortest[pid] = prompter.shortest(raw.build_prefix(max(length, 1), pid, requests.content))
        floors[shared] = shortest[prefix_id[shared]]
    built = np.ones(len(inputs), dtype=bool) if requests.hash_ids is None else np.zeros(len(inputs), dtype=bool)
    if requests.texts is not None:
        built &= np.array([t is None for t in requests.texts], dtype=bool)
    low = built & (inputs < floors)
    raised = int(low.sum())
    out = requests if not raised else dataclasses.replace(requests, input_tokens=np.where(low, floors, inputs))
    return Floored(out, raised, prompter.overhead + 1, prompter.overhead, prompter.template is not None)
