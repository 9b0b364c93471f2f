"""Dataset readers: each format read from its fixture (tests/fixtures/datasets/) into the exact sessions and turns,
and each format detected from its content."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from infermeter.errors import UserError
from infermeter.workload.dataset import Session, Turn
from infermeter.workload.datasets import detect_format, read_dataset

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "datasets"


def test_sharegpt_conversations_become_sessions_of_verbatim_turns():
    d = read_dataset(FIXTURES / "sharegpt.json")
    assert d.format == "sharegpt" and d.rows == 6 and not d.timed and d.block_tokens is None
    assert d.dropped == {"no user turn": 1, "empty user text": 1}
    assert d.sessions == (
        Session(
            "conv-a",
            (
                Turn("What is 2 + 2?", reply="4."),
                Turn("And  times 3?\n", reply="12."),  # verbatim: spaces and newline kept
                Turn("Thanks!"),
            ),
            row=0,
            system="You are terse.",
        ),
        Session("conv-b", (Turn("Name a prime.", reply="7"),), row=1),  # the leading gpt message skipped
        Session(  # no id: its element index; two user messages in a row; two replies joined
            "4", (Turn("First."), Turn("Second, before any answer.", reply="Part one.\n\nPart two.")), row=4
        ),
        Session("17", (Turn("Messages form.", reply="Also read."),), row=5),
    )


def test_identity_is_the_files_bytes():
    path = FIXTURES / "sharegpt.json"
    d = read_dataset(path)
    assert d.path == path
    assert d.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert d.size_bytes == path.stat().st_size


def test_sharegpt_jsonl_messages_form(tmp_path):
    p = tmp_path / "chats.jsonl"
    p.write_text(
        '{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]}\n'
        '{"id": "x", "conversations": [{"from": "human", "value": "c"}]}\n'
    )
    d = read_dataset(p)
    assert d.format == "sharegpt"
    assert d.sessions == (Session("1", (Turn("a", reply="b"),), row=1), Session("x", (Turn("c"),), row=2))


def test_openai_text_parts_are_joined_and_images_dropped(tmp_path):
    p = tmp_path / "parts.json"
    p.write_text(
        '[{"messages": [{"role": "user", "content": [{"type": "text", "text": "one"},'
        ' {"type": "text", "text": "two"}]},'
        ' {"role": "assistant", "content": null}]},'
        ' {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}]'
    )
    d = read_dataset(p)
    assert d.sessions == (Session("0", (Turn("one\ntwo", reply=""),), row=0),)
    assert d.dropped == {"content that is not text (images, audio)": 1}


def test_prompt_jsonl_rows_sessions_turn_order_and_timestamps():
    d = read_dataset(FIXTURES / "prompts.jsonl")
    assert d.format == "jsonl" and d.rows == 5 and d.timed
    assert d.dropped == {"empty prompt": 1}
    assert d.sessions == (
        Session(
            "1",
            (Turn("Summarize: the cat sat on the mat.", output_tokens=12, reply="A cat sat."),),
            row=1,
            timestamp_s=0.0,
            label="summary",
        ),
        Session(  # rows on lines 2 and 4, ordered by `turn`; completion and response read as replies
            "s1", (Turn("Start of s1", reply="Hi!"), Turn("Hi there", reply="Hello again")), row=2, timestamp_s=0.5
        ),
        Session(  # a messages row: one whole session; its output_tokens for its last user message
            "6",
            (Turn("One", reply="Two"), Turn("Three", output_tokens=5)),
            row=6,
            timestamp_s=2.25,
            system="Be kind.",
        ),
    )


def test_prompt_csv_keeps_text_as_text_and_groups_sessions():
    d = read_dataset(FIXTURES / "prompts.csv")
    assert d.format == "csv" and d.rows == 4 and d.dropped == {} and not d.timed
    assert d.sessions == (
        Session("2", (Turn('Translate "hello", please', output_tokens=7, reply="bonjour"),), row=2, label="translate"),
        Session("3", (Turn("12345"),), row=3, label="digits"),  # a prompt of digits stays a string
        Session(
            "u1", (Turn("Tell me a joke", output_tokens=30), Turn("And another", reply="Why not")), row=4, label="chat"
        ),
    )


def test_prompt_parquet_with_prompt_and_messages_rows():
    d = read_dataset(FIXTURES / "prompts.parquet")
    assert d.format == "parquet" and d.rows == 3
    assert d.sessions == (
        Session("1", (Turn("Write a haiku about rain.", output_tokens=17),), row=1, label="poem"),
        Session("2", (Turn("List three colours."),), row=2, label="list"),
        Session("3", (Turn("Hi", output_tokens=3, reply="Hello!"),), row=3, label="chat"),
    )


def test_hf_disk_conversations_read_as_sharegpt():
    path = FIXTURES / "hf_sharegpt"
    d = read_dataset(path)
    assert d.format == "hf-disk" and d.rows == 3 and d.dropped == {"no user turn": 1}
    assert d.sessions == (
        Session("hf-0", (Turn("Ping?", reply="Pong."),), row=1),
        Session("hf-2", (Turn("Count to two.", reply="1, 2"), Turn("Now three.")), row=3),
    )
    files = sorted(p for p in path.iterdir() if p.suffix in (".arrow", ".json"))
    assert d.sha256 == hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()
    assert d.size_bytes == sum(p.stat().st_size for p in files)


def test_hf_disk_dataset_dict_reads_train_else_the_only_split(tmp_path):
    d = read_dataset(FIXTURES / "hf_dict")
    assert d.format == "hf-disk" and d.rows == 2
    assert [s.turns for s in d.sessions] == [
        (Turn("train prompt one", output_tokens=5),),
        (Turn("train prompt two", output_tokens=6),),
    ]
    only = tmp_path / "only"
    shutil.copytree(FIXTURES / "hf_dict" / "test", only / "test")
    (only / "dataset_dict.json").write_text('{"splits": ["test"]}')
    assert [s.turns for s in read_dataset(only).sessions] == [(Turn("test prompt", output_tokens=9),)]


def test_mooncake_rows_are_timed_length_turns_with_blocks():
    d = read_dataset(FIXTURES / "mooncake.jsonl")
    assert d.format == "mooncake" and d.timed and d.block_tokens == 512 and d.rows == 4
    assert d.sessions == (
        Session("1", (Turn(None, input_tokens=1200, output_tokens=40, hash_ids=(0, 1, 2)),), row=1, timestamp_s=0.0),
        Session("2", (Turn(None, input_tokens=600, output_tokens=12, hash_ids=(0, 1)),), row=2, timestamp_s=0.25),
        Session("3", (Turn(None, input_tokens=100, output_tokens=1, hash_ids=(7,)),), row=3, timestamp_s=0.25),
        Session("4", (Turn(None, input_tokens=2048, output_tokens=64, hash_ids=(0, 3)),), row=4, timestamp_s=1.5005),
    )
    assert read_dataset(FIXTURES / "mooncake.jsonl", block_tokens=400).block_tokens == 400


def test_azure_trace_timestamps_with_seven_fractional_digits():
    d = read_dataset(FIXTURES / "azure.csv")
    assert d.format == "azure" and d.timed and d.rows == 4
    assert d.dropped == {"no tokens generated (GeneratedTokens 0)": 1}
    assert [(s.key, s.row, s.turns) for s in d.sessions] == [
        ("2", 2, (Turn(None, input_tokens=374, output_tokens=44),)),
        ("3", 3, (Turn(None, input_tokens=396, output_tokens=109),)),
        ("5", 5, (Turn(None, input_tokens=2048, output_tokens=7),)),
    ]
    t0 = 1700158546.68059  # 2023-11-16 18:15:46.6805900 UTC
    assert [s.timestamp_s for s in d.sessions] == pytest.approx([t0, t0 + 4.314579, t0 + 13.4194101], abs=1e-6)


def test_azure_timestamps_with_a_utc_offset(tmp_path):
    p = tmp_path / "azure2024.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:00.0089750+00:00,10,2\n"
        "2024-05-10 00:00:01.5000000+00:00,20,3\n"
    )
    d = read_dataset(p)
    assert [s.timestamp_s for s in d.sessions] == pytest.approx([1715299200.008975, 1715299201.5], abs=1e-6)


def test_burstgpt_sorted_by_time_failed_rows_dropped_labelled_by_model():
    d = read_dataset(FIXTURES / "burstgpt.csv")
    assert d.format == "burstgpt" and d.timed and d.rows == 4
    assert d.dropped == {"failed request (Response tokens 0)": 1}
    assert [(s.row, s.timestamp_s, s.label, s.turns) for s in d.sessions] == [
        (4, 10.0, "ChatGPT", (Turn(None, input_tokens=200, output_tokens=30),)),
        (2, 20.0, "ChatGPT", (Turn(None, input_tokens=300, output_tokens=40),)),
        (5, 40.0, "GPT-4", (Turn(None, input_tokens=500, output_tokens=60),)),
    ]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("sharegpt.json", "sharegpt"),
        ("prompts.jsonl", "jsonl"),
        ("prompts.csv", "csv"),
        ("prompts.parquet", "parquet"),
        ("hf_sharegpt", "hf-disk"),
        ("hf_dict", "hf-disk"),
        ("mooncake.jsonl", "mooncake"),
        ("azure.csv", "azure"),
        ("burstgpt.csv", "burstgpt"),
    ],
)
def test_detect_each_fixture(name, fmt):
    assert detect_format(FIXTURES / name) == fmt


@pytest.mark.parametrize(
    ("name", "content", "fmt"),
    [
        ("a.jsonl", '{"input_length": 5, "output_length": 2, "timestamp": 0}\n', "mooncake"),
        ("b.jsonl", '{"hash_ids": [1], "input_length": 5, "output_length": 2, "timestamp": 0}\n', "mooncake"),
        ("c.jsonl", '{"conversations": [{"from": "human", "value": "x"}]}\n', "sharegpt"),
        ("d.jsonl", '{"messages": [{"role": "user", "content": "x"}]}\n', "jsonl"),
        ("e.json", '[{"messages": [{"role": "user", "content": "x"}]}]', "sharegpt"),
        ("f.json", '[{"prompt": "x"}]', "jsonl"),
        ("g.json", '{"conversations": [{"from": "human", "value": "x"}]}\n', "sharegpt"),  # JSONL named .json
    ],
)
def test_detect_from_first_row(tmp_path, name, content, fmt):
    p = tmp_path / name
    p.write_text(content)
    assert detect_format(p) == fmt
    assert read_dataset(p).format == fmt


def test_explicit_format_overrides_detection(tmp_path):
    p = tmp_path / "data.txt"  # a name that tells nothing
    p.write_text('{"prompt": "hello"}\n')
    with pytest.raises(UserError, match="no known dataset format"):
        detect_format(p)
    d = read_dataset(p, "jsonl")
    assert d.format == "jsonl" and d.sessions == (Session("1", (Turn("hello"),), row=1),)
