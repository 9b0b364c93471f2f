"""prepared() on a dataset's requests: text is sent verbatim and counted as rendered, a trace's hash_ids become its
block prompt of exactly its length, and model, session and turn ride along; generated requests are unchanged."""

from pathlib import Path

import numpy as np
import pytest

from infermeter.load.prompts import prepared
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload import ids
from infermeter.workload.blocks import BlockPrompter
from infermeter.workload.build import build_requests
from infermeter.workload.dataset import Dataset, Session, Turn
from infermeter.workload.dataset_requests import DatasetChoice, dataset_requests
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests

TOK = resolve_tokenizer("cl100k_base")
TEXTS = ["What is a llama?", "  Verbatim,\n\twith odd   spacing <|endoftext|> and all. ", "Hi"]


def text_requests(multi_turn: bool = False) -> Requests:
    sessions = (
        Session("a", (Turn(TEXTS[0], reply="An animal."), Turn(TEXTS[1], output_tokens=9)), row=1),
        Session("b", (Turn(TEXTS[2], reply="Hello!"),), row=2, label="short"),
    )
    ds = Dataset(Path("d.jsonl"), "jsonl", "0" * 64, 10, sessions, rows=2)
    return dataset_requests(ds, TOK, DatasetChoice(multi_turn=multi_turn), seed=0)[0]


@pytest.mark.parametrize("chat", [False, True])
def test_text_is_sent_verbatim_and_counted_as_rendered(chat):
    prompter = ExactPrompter(TOK, chat=chat, seed=0)
    sent = list(prepared(text_requests(multi_turn=True), 0, prompter=prompter))
    assert [p.prompt for p in sent] == TEXTS
    for p in sent:
        assert p.input_tokens == p.ref_input_tokens == len(TOK.encode(prompter.render(p.prompt)))
    if chat:
        assert all(p.input_tokens > len(TOK.encode(p.prompt)) for p in sent)  # the template is counted
    assert [p.max_tokens for p in sent] == [len(TOK.encode("An animal.")), 9, len(TOK.encode("Hello!"))]
    assert [(p.session_id, p.turn) for p in sent] == [(0, 0), (0, 1), (1, 0)]
    assert [p.request_class for p in sent] == ["", "", "short"]
    assert [p.request_id for p in sent] == [0, 1, 2]


def test_single_turn_requests_carry_no_session():
    sent = list(prepared(text_requests(), 0, prompter=ExactPrompter(TOK)))
    assert [p.prompt for p in sent] == [TEXTS[0], TEXTS[2]]
    assert all(p.session_id is None and p.turn is None and p.model is None for p in sent)


def test_models_name_each_requests_model_and_rows_pick_a_share():
    req = text_requests(multi_turn=True)
    req.models = np.asarray(["a", "b", "a"], dtype=object)
    sent = list(prepared(req, 0, ids.WARMUP, prompter=ExactPrompter(TOK), rows=[2, 0]))
    assert [(p.request_id, p.prompt, p.model) for p in sent] == [
        (ids.WARMUP + 2, TEXTS[2], "a"),
        (ids.WARMUP, TEXTS[0], "a"),
    ]


def trace_requests() -> Requests:
    rows = [(0.0, 1100, (7, 8, 9)), (0.1, 1024, (7, 8)), (0.2, 600, (5, 8)), (0.3, 300, ())]
    sessions = tuple(
        Session(str(i), (Turn(None, input_tokens=n, output_tokens=4, hash_ids=h),), row=i + 1, timestamp_s=t)
        for i, (t, n, h) in enumerate(rows)
    )
    ds = Dataset(Path("t.jsonl"), "mooncake", "0" * 64, 10, sessions, rows=4, block_tokens=512, timed=True)
    return dataset_requests(ds, TOK, DatasetChoice(), seed=0)[0]


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base"])
def test_a_trace_sends_its_blocks_exactly_to_length(tokenizer):
    tok = resolve_tokenizer(tokenizer)
    sent = list(prepared(trace_requests(), 4, prompter=ExactPrompter(tok, seed=4)))
    counts = [len(tok.encode(p.prompt)) for p in sent]
    assert counts == [p.input_tokens for p in sent] == [p.ref_input_tokens for p in sent] == [1100, 1024, 600, 300]
    a, b, c = (tok.encode(p.prompt) for p in sent[:3])
    assert a[:1024] == b  # hash_ids 7, 8 shared: two whole blocks, byte for byte
    assert sent[0].prompt.startswith(sent[1].prompt)
    assert a[0] != c[0]  # a different first hash_id differs from its first token
    assert a[1024] != c[512]  # block 9 is not block 8
    assert a[512:600] == c[512:600]  # block 8 second in both (cut at 600 in c): the same tokens
    assert sent[0].prompt.startswith("".join(BlockPrompter(tok, 512, seed=4).block(7)))


def test_a_trace_in_chat_sends_the_same_content_counted_with_its_template():
    completions = list(prepared(trace_requests(), 4, prompter=ExactPrompter(TOK, seed=4)))
    prompter = ExactPrompter(TOK, chat=True, seed=4)
    chat = list(prepared(trace_requests(), 4, prompter=prompter))
    assert [p.prompt for p in chat[:3]] == [p.prompt for p in completions[:3]]
    assert [p.input_tokens for p in chat] == [len(TOK.encode(prompter.render(p.prompt))) for p in chat]
    assert chat[0].input_tokens == 1100 + prompter.overhead  # ChatML does not merge with the words it wraps


def test_a_warm_up_with_the_runs_prefix_seed_sends_the_same_blocks():
    req = trace_requests()
    run = list(prepared(req, 4, prompter=ExactPrompter(TOK, seed=4)))
    warm = list(prepared(req, 5, ids.WARMUP, prompter=ExactPrompter(TOK, seed=5), prefix_seed=4))
    assert [w.prompt for w in warm[:3]] == [r.prompt for r in run[:3]]  # the hash_ids cover them: blocks only
    assert warm[3].prompt != run[3].prompt  # no hash_ids: words of its own (warm-up ids)
    other = list(prepared(req, 4, prompter=ExactPrompter(TOK, seed=4), prefix_seed=6))
    assert len({other[0].prompt, run[0].prompt}) == 2  # the blocks follow the seed


def test_generated_requests_are_built_as_before():
    """A generated workload's prompts are exactly their lengths and carry no dataset fields."""
    req, _ = build_requests(40, 3, workload="conversation")
    prompter = ExactPrompter(TOK, seed=3)
    sent = list(prepared(req, 3, prompter=prompter))
    assert [len(TOK.encode(p.prompt)) for p in sent] == list(req.input_tokens)
    assert all(p.model is None and p.session_id is None and p.turn is None for p in sent)
    alone = [i for i in range(40) if req.prefix_id[i] < 0][:5]
    fresh = ExactPrompter(TOK, seed=3)
    assert [sent[i].prompt for i in alone] == [fresh.build(int(req.input_tokens[i]), i, "", req.content) for i in alone]
