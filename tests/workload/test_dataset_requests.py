"""A read dataset as the run's requests: first turns or every turn, lengths counted or taken from the row, filters
and their dropped counts, a seeded sample in file order, timestamps, blocks, and run.json's declaration."""

from pathlib import Path

import numpy as np
import pytest

from infermeter.errors import UserError
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload.dataset import Dataset, Session, Turn
from infermeter.workload.dataset_requests import DatasetChoice, dataset_requests

TOK = resolve_tokenizer("cl100k_base")


def count(text: str) -> int:
    return len(TOK.encode(text))


def chat(key: str, *pairs: tuple[str, str | None], row: int = 1, label: str = "") -> Session:
    return Session(key=key, turns=tuple(Turn(text=q, reply=a) for q, a in pairs), row=row, label=label)


def dataset(*sessions: Session, **kw) -> Dataset:
    defaults = dict(
        path=Path("/data/sharegpt.json"),
        format="sharegpt",
        sha256="ab" * 32,
        size_bytes=1234,
        sessions=sessions,
        rows=len(sessions),
    )
    return Dataset(**{**defaults, **kw})


CONVERSATIONS = dataset(
    chat(
        "c0", ("What is a llama?", "A llama is a domesticated South American camelid."), ("And an alpaca?", "Smaller.")
    ),
    chat(
        "c1",
        ("Write a haiku about rain.", "Rain on tin roofs / a drum for the sleepless night / morning brings puddles"),
    ),
    chat("c2", ("Hi", "Hello! How can I help you today?"), ("Tell me a joke", None), label="casual"),
)


def test_without_multi_turn_each_conversation_gives_its_first_turn_verbatim():
    req, decl = dataset_requests(CONVERSATIONS, TOK, DatasetChoice(), seed=0)
    assert list(req.texts) == ["What is a llama?", "Write a haiku about rain.", "Hi"]
    assert list(req.input_tokens) == [count("What is a llama?"), count("Write a haiku about rain."), count("Hi")]
    replies = [s.turns[0].reply for s in CONVERSATIONS.sessions]
    assert list(req.output_tokens) == [count(r) for r in replies]
    assert list(req.request_class) == ["", "", "casual"]
    assert req.session is None and req.turn is None and req.replies is None and req.hash_ids is None
    assert len(req.arrival_s) == 0  # not timed: the run's arrival process decides
    assert set(req.prefix_id) == {-1} and set(req.prefix_tokens) == {0}
    assert decl.used == 3 and decl.rows == 3 and decl.dropped == {}
    assert decl.output_lengths == "the dataset's replies counted under cl100k_base (3), its output_tokens field (0)"


def test_multi_turn_gives_every_turn_session_major_with_its_reply():
    req, decl = dataset_requests(CONVERSATIONS, TOK, DatasetChoice(multi_turn=True, fallback_output_tokens=64), seed=0)
    assert list(req.texts) == [
        "What is a llama?",
        "And an alpaca?",
        "Write a haiku about rain.",
        "Hi",
        "Tell me a joke",
    ]
    assert list(req.session) == [0, 0, 1, 2, 2]
    assert list(req.turn) == [0, 1, 0, 0, 1]
    assert list(req.replies) == [
        "A llama is a domesticated South American camelid.",
        "Smaller.",
        "Rain on tin roofs / a drum for the sleepless night / morning brings puddles",
        "Hello! How can I help you today?",
        None,
    ]
    assert list(req.output_tokens)[-1] == 64  # no reply, no field: --output-tokens
    assert list(req.output_tokens)[1] == count("Smaller.")
    assert decl.used == 5
    assert decl.output_lengths == (
        "the dataset's replies counted under cl100k_base (4), its output_tokens field (0), --output-tokens 64 (1)"
    )


def test_the_rows_own_output_length_is_preferred_to_its_reply():
    ds = dataset(
        Session("a", (Turn("one", output_tokens=77, reply="a long reply that is not counted"),), row=1),
        Session("b", (Turn("two", reply="."),), row=2),
    )
    req, decl = dataset_requests(ds, TOK, DatasetChoice(), seed=0)
    assert list(req.output_tokens) == [77, 1]
    assert decl.output_lengths == "the dataset's replies counted under cl100k_base (1), its output_tokens field (1)"


def test_an_empty_reply_counts_as_one_token_and_a_row_without_length_is_dropped():
    ds = dataset(
        Session("a", (Turn("one", reply=""),), row=1),
        Session("b", (Turn("two"),), row=2),
    )
    req, decl = dataset_requests(ds, TOK, DatasetChoice(), seed=0)
    assert list(req.texts) == ["one"] and list(req.output_tokens) == [1]
    assert decl.dropped == {"no output length (give --output-tokens)": 1}


def test_filters_drop_rows_and_count_why_merged_with_the_readers():
    long_prompt = "word " * 50
    ds = dataset(
        Session("a", (Turn("short", reply="ok"),), row=1),
        Session("b", (Turn(long_prompt, reply="ok"),), row=2),
        Session("c", (Turn("short too", reply="a " * 40),), row=3),
        Session("d", (Turn("fine", output_tokens=8),), row=4),
        dropped={"no human turn": 2},
        rows=6,
    )
    choice = DatasetChoice(max_input_tokens=20, max_output_tokens=10)
    req, decl = dataset_requests(ds, TOK, choice, seed=0)
    assert list(req.texts) == ["short", "fine"]
    assert decl.dropped == {
        "no human turn": 2,
        "prompt over --max-input-tokens": 1,
        "reply over --max-output-tokens": 1,
    }
    assert (decl.max_input_tokens, decl.max_output_tokens, decl.rows, decl.used) == (20, 10, 6, 2)


def test_limits_are_inclusive():
    ds = dataset(Session("a", (Turn("x", input_tokens=None, output_tokens=10),), row=1))
    n = count("x")
    req, _ = dataset_requests(ds, TOK, DatasetChoice(max_input_tokens=n, max_output_tokens=10), seed=0)
    assert len(req) == 1
    with pytest.raises(UserError):
        dataset_requests(ds, TOK, DatasetChoice(max_input_tokens=n - 1 if n > 1 else 0), seed=0)


def test_with_multi_turn_one_turn_over_a_filter_drops_the_whole_session():
    ds = dataset(
        chat("a", ("q1", "r1"), ("q2 " * 30, "r2"), ("q3", "r3")),
        chat("b", ("p1", "s1"), ("p2", "s2")),
    )
    req, decl = dataset_requests(ds, TOK, DatasetChoice(multi_turn=True, max_input_tokens=10), seed=0)
    assert list(req.texts) == ["p1", "p2"] and list(req.session) == [0, 0]
    assert decl.dropped == {"prompt over --max-input-tokens": 1}
    # without multi_turn only the first turn is looked at: both are kept
    req, decl = dataset_requests(ds, TOK, DatasetChoice(max_input_tokens=10), seed=0)
    assert list(req.texts) == ["q1", "p1"] and decl.dropped == {}


def test_history_dataset_needs_a_reply_before_every_next_turn():
    ds = dataset(
        chat("a", ("q1", None), ("q2", "r2")),
        chat("b", ("p1", "s1"), ("p2", None)),
    )
    choice = DatasetChoice(multi_turn=True, history="dataset", fallback_output_tokens=5)
    req, decl = dataset_requests(ds, TOK, choice, seed=0)
    assert list(req.texts) == ["p1", "p2"]  # the last turn's reply is never history
    assert decl.dropped == {"a turn without a reply for --history dataset": 1}


def many(n: int) -> Dataset:
    return dataset(*(Session(str(i), (Turn(f"prompt {i}", output_tokens=i + 1),), row=i + 1) for i in range(n)))


def test_a_sample_is_reproducible_for_a_seed_and_kept_in_file_order():
    ds = many(200)
    one, decl = dataset_requests(ds, TOK, DatasetChoice(sample=20), seed=5)
    again, _ = dataset_requests(ds, TOK, DatasetChoice(sample=20), seed=5)
    other, _ = dataset_requests(ds, TOK, DatasetChoice(sample=20), seed=6)
    assert list(one.texts) == list(again.texts)
    assert list(one.texts) != list(other.texts)
    keys = [int(t.split()[1]) for t in one.texts]
    assert keys == sorted(keys) and len(set(keys)) == 20
    assert list(one.output_tokens) == [k + 1 for k in keys]
    assert decl.sample == 20 and decl.used == 20
    assert decl.dropped == {"not drawn by --dataset-sample": 180}


def test_a_sample_draws_from_what_the_filters_keep_and_tokenizes_lazily(monkeypatch):
    ds = many(1000)
    counted: list[str] = []

    class Counting:
        name = "counting"

        def encode(self, text: str) -> list[int]:
            counted.append(text)
            return TOK.encode(text)

    req, decl = dataset_requests(ds, Counting(), DatasetChoice(sample=10, max_output_tokens=500), seed=1)
    assert len(req) == 10 and all(int(t.split()[1]) < 500 for t in req.texts)
    assert len(counted) < 100  # about 20 rows looked at (half pass), not 1000
    looked = 1000 - decl.dropped["not drawn by --dataset-sample"]
    assert looked == 10 + decl.dropped["reply over --max-output-tokens"]


def test_with_multi_turn_a_sample_draws_whole_sessions():
    ds = dataset(*(chat(str(i), (f"q{i}", "r"), (f"again {i}", "r")) for i in range(30)))
    req, decl = dataset_requests(ds, TOK, DatasetChoice(sample=4, multi_turn=True), seed=2)
    assert len(req) == 8 and list(req.session) == [0, 0, 1, 1, 2, 2, 3, 3] and list(req.turn) == [0, 1] * 4
    firsts = [t for t in req.texts if t.startswith("q")]
    assert [f"again {t[1:]}" for t in firsts] == [t for t in req.texts if t.startswith("again")]
    assert decl.used == 8 and decl.dropped == {"not drawn by --dataset-sample": 26}


def test_asking_for_more_than_the_filters_keep_names_how_many_there_are():
    with pytest.raises(UserError, match=r"--dataset-sample 60: sharegpt.json has 50 rows that the filters keep"):
        dataset_requests(many(100), TOK, DatasetChoice(sample=60, max_output_tokens=50), seed=0)


def test_an_empty_result_names_the_file_and_the_reasons():
    ds = dataset(Session("a", (Turn("x" * 10),), row=1), dropped={"empty prompt": 3})
    with pytest.raises(UserError) as err:
        dataset_requests(ds, TOK, DatasetChoice(), seed=0)
    msg = str(err.value)
    assert "sharegpt.json" in msg and "empty prompt (3)" in msg and "no output length (give --output-tokens) (1)" in msg


def trace() -> Dataset:
    rows = [(1000.0, 700, 10, (1, 2)), (1000.5, 300, 20, (1,)), (1002.25, 900, 30, (3, 4))]
    sessions = tuple(
        Session(str(i), (Turn(None, input_tokens=n, output_tokens=o, hash_ids=h),), row=i + 1, timestamp_s=t)
        for i, (t, n, o, h) in enumerate(rows)
    )
    return Dataset(
        path=Path("trace.jsonl"),
        format="mooncake",
        sha256="cd" * 32,
        size_bytes=99,
        sessions=sessions,
        rows=3,
        block_tokens=512,
        timed=True,
    )


def test_a_trace_gives_its_lengths_blocks_and_relative_arrivals():
    req, decl = dataset_requests(trace(), TOK, DatasetChoice(), seed=0)
    assert req.texts is None  # every prompt is built: blocks, then the request's own words
    assert list(req.input_tokens) == [700, 300, 900] and list(req.output_tokens) == [10, 20, 30]
    assert req.hash_ids == ((1, 2), (1,), (3, 4)) and req.block_tokens == 512
    np.testing.assert_allclose(req.arrival_s, [0.0, 0.5, 2.25])
    assert decl.block_tokens == 512 and decl.block_first_tokens == 24648
    assert decl.format == "mooncake" and decl.time_scale is None
    assert decl.output_lengths == "the dataset's replies counted under cl100k_base (0), its output_tokens field (3)"


def test_a_sampled_trace_starts_at_its_first_used_row():
    req, _ = dataset_requests(trace(), TOK, DatasetChoice(max_input_tokens=800), seed=0)
    np.testing.assert_allclose(req.arrival_s, [0.0, 0.5])
    req, _ = dataset_requests(trace(), TOK, DatasetChoice(max_input_tokens=400), seed=0)
    np.testing.assert_allclose(req.arrival_s, [0.0])


def test_the_declaration_names_the_file():
    _, decl = dataset_requests(CONVERSATIONS, TOK, DatasetChoice(sample=2), seed=3)
    assert (decl.file, decl.path, decl.sha256, decl.size_bytes, decl.format) == (
        "sharegpt.json",
        str(Path("/data/sharegpt.json").resolve()),
        "ab" * 32,
        1234,
        "sharegpt",
    )
    assert decl.counted_with == "cl100k_base" and decl.block_tokens is None and decl.block_first_tokens is None
