"""Dataset readers refuse bad input with one line naming the file, the row and the field, and how to fix it."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

from infermeter.errors import UserError
from infermeter.workload.datasets import detect_format, read_dataset

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "datasets"
MOONCAKE_ROW = '{{"timestamp": {t}, "input_length": {n}, "output_length": 4, "hash_ids": {ids}}}'


def refused(path: Path, fmt=None, **kwargs) -> str:
    with pytest.raises(UserError) as info:
        read_dataset(path, fmt, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"--dataset {path}")
    return message


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def mooncake(tmp_path: Path, *rows: tuple[object, int, str]) -> Path:
    return write(tmp_path, "trace.jsonl", "".join(MOONCAKE_ROW.format(t=t, n=n, ids=ids) + "\n" for t, n, ids in rows))


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.txt", "hello\n"),
        ("rows.jsonl", '{"text": "no known field"}\n'),
        ("table.csv", "question,answer\nx,y\n"),
        ("list.json", "[1, 2]"),
    ],
)
def test_no_known_format(tmp_path, name, content):
    p = write(tmp_path, name, content)
    message = refused(p)
    assert "no known dataset format" in message and "--dataset-format" in message
    assert "sharegpt" in message and "mooncake" in message and "azure" in message
    with pytest.raises(UserError, match="no known dataset format"):
        detect_format(p)


def test_missing_path():
    assert "does not exist" in refused(Path("/nonexistent/data.jsonl"))


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("p.jsonl", '{"prompt": "a"}\n{"reply": "b"}\n', "p.jsonl, row 2: prompt is missing"),
        ("p.csv", "prompt,output_tokens\na,3\nb,many\n", "p.csv, row 3: output_tokens 'many' is not a whole number"),
        ("p.jsonl", '{"prompt": "a", "output_tokens": 0}\n', "row 1: output_tokens 0 is not a whole number from 1 to"),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 20000000, "output_length": 2}\n',
            "row 1: input_length 20000000 is not a whole number from 1 to 10,000,000",
        ),
        ("p.jsonl", '{"prompt": 5}\n', "row 1: prompt 5 is not a string"),
        ("p.jsonl", '{"prompt": "a", "messages": []}\n', "row 1: has both prompt and messages"),
        ("c.json", '[{"conversations": [{"from": "human"}]}]', "c.json, element 0: conversations[0].value is missing"),
        (
            "c.json",
            '[{"conversations": []}, {"conversations": [{"from": "human", "value": "x"}, {"value": "y"}]}]',
            "c.json, element 1: conversations[1].from is missing",
        ),
        ("c.json", '[{"messages": [{"role": "user"}]}]', "element 0: messages[0].content is missing"),
        ("c.json", '[{"conversations": "hi"}]', "element 0: conversations 'hi' is not a list"),
        ("c.json", '[{"conversations": []}, "row"]', "element 1: 'row' is not an object"),
        ("c.json", '[{"conversations": []}, {"id": 3}]', "element 1: has no conversations"),
        ("m.jsonl", '{"timestamp": 0, "output_length": 3}\n', "m.jsonl, row 1: input_length is missing"),
        ("m.jsonl", '{"input_length": 3, "output_length": 3}\n', "m.jsonl, row 1: timestamp is missing"),
    ],
)
def test_missing_or_bad_field(tmp_path, name, content, expected):
    fmt = "mooncake" if name == "m.jsonl" else None
    assert expected in refused(write(tmp_path, name, content), fmt)


def test_explicit_format_that_does_not_fit_names_what_is_missing():
    message = refused(FIXTURES / "prompts.jsonl", "mooncake")
    assert "row 1: input_length is missing" in message
    message = refused(FIXTURES / "sharegpt.json", "azure")
    assert "no column ContextTokens, GeneratedTokens" in message or "not a readable CSV" in message
    assert "missing column(s)" in refused(FIXTURES / "azure.csv", "burstgpt")


def test_azure_missing_column(tmp_path):
    p = write(tmp_path, "az.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,5\n")
    assert "no column GeneratedTokens" in refused(p, "azure")


@pytest.mark.parametrize(
    ("name", "content", "dropped"),
    [
        (
            "c.json",
            '[{"conversations": [{"from": "gpt", "value": "x"}]},'
            ' {"conversations": [{"from": "human", "value": " "}]}, {"conversations": []}]',
            "3 read, dropped: 2 no user turn; 1 empty user text",
        ),
        ("p.jsonl", '{"prompt": ""}\n', "1 read, dropped: 1 empty prompt"),
        ("empty.jsonl", "\n", "0 read"),
        ("empty.json", "[]", "0 read"),
    ],
)
def test_empty_dataset_says_why(tmp_path, name, content, dropped):
    message = refused(write(tmp_path, name, content))
    assert "holds no usable rows" in message and dropped in message


def test_empty_trace_says_why(tmp_path):
    p = write(tmp_path, "az.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,5,0\n")
    assert "holds no usable rows (1 read, dropped: 1 no tokens generated (GeneratedTokens 0))" in refused(p)


def test_an_azure_length_beyond_any_prompt_is_refused(tmp_path):
    p = write(tmp_path, "az.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,20000000,1\n")
    assert "row 2: ContextTokens 20000000 is not a whole number of tokens: give a count from 0 to 10,000,000" in (
        refused(p)
    )


def test_decreasing_timestamps_mooncake(tmp_path):
    p = mooncake(tmp_path, (0, 10, "[1]"), (500, 10, "[1]"), (499.5, 10, "[2]"))
    message = refused(p)
    assert "trace.jsonl, row 3: timestamp 0.4995 is earlier than the row before (0.5)" in message
    assert "must not decrease" in message


def test_decreasing_timestamps_azure(tmp_path):
    p = write(
        tmp_path,
        "az.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,5,1\n2023-11-16 18:15:47.0000000,5,1\n2023-11-16 18:15:46.9000000,5,1\n",
    )
    message = refused(p)
    assert "az.csv, row 4: TIMESTAMP 2023-11-16 18:15:46.9000000 is earlier than the row before" in message
    assert "must not decrease" in message


def test_decreasing_and_partial_timestamps_prompt_table(tmp_path):
    p = write(tmp_path, "p.jsonl", '{"prompt": "a", "timestamp": 2}\n{"prompt": "b", "timestamp": 1}\n')
    assert "p.jsonl, row 2: timestamp 1 is earlier than the row before (2)" in refused(p)
    p = write(tmp_path, "q.jsonl", '{"prompt": "a", "timestamp": 2}\n{"prompt": "b"}\n')
    assert "q.jsonl, row 2: timestamp is given on some rows only" in refused(p)


def test_unreadable_azure_timestamp(tmp_path):
    p = write(tmp_path, "az.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,5,1\nyesterday,5,1\n")
    assert "az.csv, row 3: TIMESTAMP 'yesterday' is not a date and time" in refused(p)


@pytest.mark.parametrize(
    ("ids", "shown"),
    [('["a"]', "'a'"), ("[1, true]", "true"), ("[1.5]", "1.5"), ("[null]", "null")],
)
def test_hash_id_that_is_not_an_integer(tmp_path, ids, shown):
    p = mooncake(tmp_path, (0, 10, "[1]"), (1, 10, "[1]"), (2, 10, ids))
    assert f"trace.jsonl, row 3: hash_ids entry {shown} is not an integer" in refused(p)


def test_hash_ids_negative_or_not_a_list(tmp_path):
    assert "row 1: hash_ids entry -1 is negative" in refused(mooncake(tmp_path, (0, 10, "[-1]")))
    assert "row 1: hash_ids 'x' is not a list" in refused(mooncake(tmp_path, (0, 10, '"x"')))


def test_more_blocks_than_the_prompt_holds(tmp_path):
    p = mooncake(tmp_path, (0, 1025, "[1, 2, 3]"), (1, 1024, "[1, 2, 3]"))  # 1024 tokens fill 2 blocks of 512
    message = refused(p)
    assert "row 2: hash_ids holds 3 blocks but input_length 1024 fills at most 2 of 512 tokens" in message
    assert "--block-tokens" in message
    assert len(read_dataset(p, block_tokens=400).sessions) == 2


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.jsonl", '{"prompt": "a"}\n{"prompt": "b",}\n', "bad.jsonl, row 2: not valid JSON"),
        ("bad.json", '[{"conversations": []},\n {"conversations": [}]', "bad.json: not valid JSON"),
    ],
)
def test_malformed_json_names_the_line(tmp_path, name, content, expected):
    message = refused(write(tmp_path, name, content))
    assert expected in message
    if name == "bad.json":
        assert "line 2 column" in message


def test_session_turns_conflict(tmp_path):
    p = write(
        tmp_path,
        "s.jsonl",
        '{"prompt": "a", "session_id": "s", "turn": 1}\n{"prompt": "b", "session_id": "s", "turn": 1}\n',
    )
    assert "s.jsonl, row 2: turn 1 of session 's' is also on row 1" in refused(p)
    p = write(
        tmp_path, "t.jsonl", '{"prompt": "a", "session_id": "s", "turn": 1}\n{"prompt": "b", "session_id": "s"}\n'
    )
    assert "t.jsonl, row 2: turn is missing" in refused(p)
    p = write(
        tmp_path,
        "u.jsonl",
        '{"prompt": "a", "session_id": "s"}\n{"messages": [{"role": "user", "content": "b"}], "session_id": "s"}\n',
    )
    assert "u.jsonl, row 2: session_id 's' is also on row 1" in refused(p)


def test_hf_dict_without_train_lists_its_splits(tmp_path):
    d = tmp_path / "dd"
    for split in ("validation", "test"):
        shutil.copytree(FIXTURES / "hf_dict" / "test", d / split)
    (d / "dataset_dict.json").write_text('{"splits": ["validation", "test"]}')
    message = refused(d)
    assert "holds the splits validation, test and none is named train" in message


def test_directory_that_is_no_saved_dataset(tmp_path):
    (tmp_path / "readme.txt").write_text("x")
    assert "holds no .arrow files" in refused(tmp_path)


def test_burstgpt_errors_name_the_dataset(tmp_path):
    p = write(tmp_path, "b.csv", "Timestamp,Model,Request tokens,Response tokens\n1,a,5,1\n2,a,x,1\n")
    with pytest.raises(UserError) as info:
        read_dataset(p)
    message = str(info.value)  # traces.py names the file by its resolved path
    assert message.startswith("--dataset ") and "b.csv" in message
    assert "'Request tokens'" in message and "row 3 holds 'x'" in message


def test_explicit_format_of_another_kind_says_so(tmp_path):
    message = refused(FIXTURES / "prompts.csv", "sharegpt")
    assert "prompts.csv, row 1: not valid JSON" in message and "(read as --dataset-format sharegpt)" in message
    assert "is a directory, not a file" in refused(FIXTURES / "hf_dict", "jsonl")
    assert "is not a directory" in refused(FIXTURES / "prompts.jsonl", "hf-disk")


def test_block_tokens_below_one():
    with pytest.raises(UserError, match="--block-tokens 0 is below 1"):
        read_dataset(FIXTURES / "mooncake.jsonl", block_tokens=0)


def test_collector_is_on_again_after_a_refusal(tmp_path):
    assert gc.isenabled()
    refused(write(tmp_path, "p.jsonl", '{"reply": "b"}\n'))
    assert gc.isenabled()
