"""Request-id ranges are named once and disjoint, and a warm-up never sends the measured run's prompt words: it
cannot warm the prefix cache for the requests it precedes (draft 4.5.1, 5.7.3)."""

import itertools

import pytest

from infermeter.load.prompts import prepared
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload import ids
from infermeter.workload.build import build_requests
from infermeter.workload.prompts import ExactPrompter


def test_the_id_ranges_are_disjoint():
    spans = sorted((base, base + ids.SPAN) for base in ids.RANGES.values())
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    assert ids.request_id(ids.WARMUP, 0) == ids.WARMUP
    with pytest.raises(ValueError):
        ids.request_id(ids.MEASURED, ids.SPAN)


def leading_words(text: str, n: int = 12) -> tuple[str, ...]:
    return tuple(text.split()[:n])


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base"])
def test_warm_up_prompts_share_nothing_with_the_measured_prefixes(tokenizer):
    """conversation: half the requests share a 200-token system prompt.  The warm-up draws its own requests (seed
    + 1, ids from its own range): none of them may start like a measured request."""
    prompter = ExactPrompter(resolve_tokenizer(tokenizer), seed=42)
    measured, _ = build_requests(60, 42, workload="conversation")
    warm, _ = build_requests(60, 43, workload="conversation")
    run = list(prepared(measured, 42, prompter=prompter))
    warm_up = list(prepared(warm, 43, id_base=ids.WARMUP, prompter=prompter))
    shared = [p for p, pid in zip(run, measured.prefix_id, strict=True) if pid >= 0]
    assert len(shared) > 10 and len({leading_words(p.prompt) for p in shared}) == 1  # one shared prefix
    measured_starts = {leading_words(p.prompt) for p in run}
    assert not measured_starts & {leading_words(p.prompt) for p in warm_up}
    assert {p.request_id for p in warm_up}.isdisjoint(p.request_id for p in run)
