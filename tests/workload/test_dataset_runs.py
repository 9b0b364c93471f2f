"""Issue 35's acceptance, end to end through `infermeter run --url` against a server that keeps what it was sent:
dataset text sent verbatim, multi-turn sessions carrying their history, a Mooncake trace's shared prefixes and send
times, and bad input refused in one line with nothing written."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from infermeter.records import read_records
from infermeter.tokenizers import resolve_tokenizer
from tests.cli import exit_code
from tests.recording_server import recording_server

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "datasets"
QUIET = ["--warmup", "off", "--no-progress", "--scrape-interval", "0", "--telemetry-interval", "0"]


@pytest.fixture(autouse=True)
def _sigterm() -> Iterator[None]:
    """main() installs its own SIGTERM handler: give pytest its own back."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def sharegpt(path: Path, conversations: int = 30) -> list[list[str]]:
    """A ShareGPT file of `conversations` conversations of 1 to 5 human turns (text with the whitespace, newlines
    and non-ASCII a real dump has), each turn answered; returns each conversation's human turns."""
    rng = np.random.default_rng(3)
    data: list[dict[str, Any]] = []
    humans: list[list[str]] = []
    for c in range(conversations):
        turns = [
            f"  Conversation {c}, question {k}: why is the sky blue? ✓\nAnswer in {k + 2} words. "
            for k in range(int(rng.integers(1, 6)))
        ]
        messages = []
        for k, text in enumerate(turns):
            messages += [{"from": "human", "value": text}, {"from": "gpt", "value": f"Because of scattering {k}."}]
        data.append({"id": f"c{c}", "conversations": messages})
        humans.append(turns)
    path.write_bytes(orjson.dumps(data))
    return humans


def test_every_request_sends_a_human_turn_of_the_file_verbatim(tmp_path: Path) -> None:
    humans = sharegpt(tmp_path / "sharegpt.json")
    every = {t for turns in humans for t in turns}
    with recording_server() as (url, seen):
        code = exit_code(
            ["run", "--url", url, "--api", "chat", "--dataset", str(tmp_path / "sharegpt.json"), "--requests", "20",
             "--rate", "20", "--out", str(tmp_path / "run"), *QUIET]
        )  # fmt: skip
        bodies = seen.chat_bodies()
    assert code == 0
    assert len(bodies) == 20
    for body in bodies:
        assert [m["role"] for m in body["messages"]] == ["user"]
        assert body["messages"][0]["content"] in every
    sent = sorted(b["messages"][0]["content"] for b in bodies)
    assert sent == sorted(turns[0] for turns in humans[:20])  # each conversation's first turn, the first 20
    info = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    declared = info["workload"]["dataset"]
    assert declared["format"] == "sharegpt" and declared["rows"] == 30 and declared["used"] == 20
    assert len(declared["sha256"]) == 64 and declared["size_bytes"] == (tmp_path / "sharegpt.json").stat().st_size


def test_multi_turn_sessions_carry_their_human_turns_and_the_replies(tmp_path: Path) -> None:
    humans = sharegpt(tmp_path / "sharegpt.json")
    with recording_server() as (url, seen):
        code = exit_code(
            ["run", "--url", url, "--api", "chat", "--dataset", str(tmp_path / "sharegpt.json"), "--multi-turn",
             "--concurrency", "4", "--requests", "24", "--out", str(tmp_path / "run"), *QUIET]
        )  # fmt: skip
        bodies = seen.chat_bodies()
    assert code == 0
    assert len(bodies) == 24
    deepest = 0
    for body in bodies:
        messages = body["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        conversation = next(turns for turns in humans if turns[0] == users[0])
        assert users == conversation[: len(users)]  # human turns 1..k, in order
        assert [m["role"] for m in messages] == ["user", "assistant"] * (len(users) - 1) + ["user"]
        for k, reply in enumerate(m["content"] for m in messages if m["role"] == "assistant"):
            assert reply.strip() == f"reply to {2 * k + 1} messages"  # the server's own reply to turn k
        deepest = max(deepest, len(users))
    assert deepest >= 3
    table = read_records(tmp_path / "run")
    assert sorted(table.column("turn").to_pylist()).count(0) == len({b["messages"][0]["content"] for b in bodies})


def test_a_mooncake_trace_replays_its_times_and_shares_its_blocks(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 1100, "output_length": 3, "hash_ids": [10, 11, 12]},
        {"timestamp": 120, "input_length": 700, "output_length": 3, "hash_ids": [10, 11]},
        {"timestamp": 250, "input_length": 600, "output_length": 3, "hash_ids": [20, 21]},
        {"timestamp": 400, "input_length": 300, "output_length": 3, "hash_ids": [10]},
    ]
    trace.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    with recording_server() as (url, seen):
        code = exit_code(
            ["run", "--url", url, "--api", "completions", "--dataset", str(trace), "--block-tokens", "256",
             "--tokenizer", "cl100k_base", "--out", str(tmp_path / "run"), *QUIET]
        )  # fmt: skip
        sent = seen.completion_bodies()
    assert code == 0
    assert len(sent) == 4
    tok = resolve_tokenizer("cl100k_base")
    prompts = [tok.encode(b["prompt"]) for _, b in sent]
    assert [len(p) for p in prompts] == [r["input_length"] for r in rows]
    assert prompts[0][:512] == prompts[1][:512]  # hash_ids 10, 11 shared: two blocks of 256
    assert prompts[0][512] != prompts[1][512]  # then block 12 against the request's own text
    assert prompts[0][:256] == prompts[3][:256]  # hash_id 10
    assert prompts[2][0] != prompts[0][0]  # 20 against 10: different from the first token
    table = read_records(tmp_path / "run")
    scheduled = np.sort(np.asarray(table.column("scheduled_at").to_pylist()))
    np.testing.assert_allclose(scheduled - scheduled[0], [0.0, 0.12, 0.25, 0.40], atol=1e-9)
    arrived = np.asarray(sorted(t for t, _ in sent))
    lag = (arrived - arrived[0]) - np.asarray([0.0, 0.12, 0.25, 0.40])
    assert abs(float(np.median(lag))) < 0.015  # sent at the trace's relative times (a median: this VM is noisy)


@pytest.mark.parametrize(
    ("name", "content", "names"),
    [
        ("unknown.txt", b"hello\n", ["unknown.txt", "format"]),
        ("missing.jsonl", b'{"prompt": "a"}\n{"text": "b"}\n', ["missing.jsonl", "row 2", "prompt"]),
        ("empty.json", b"[]", ["empty.json", "empty"]),
        (
            "backwards.jsonl",
            b'{"timestamp": 5, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n'
            b'{"timestamp": 3, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n',
            ["backwards.jsonl", "row 2", "timestamp"],
        ),
        (
            "badhash.jsonl",
            b'{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1, "a"]}\n',
            ["badhash.jsonl", "row 1", "hash_ids"],
        ),
    ],
)
def test_bad_datasets_exit_2_in_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, names: list[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    out = tmp_path / "run"
    code = exit_code(["run", "--url", "http://127.0.0.1:9", "--rate", "5", "--dataset", str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    for part in names:
        assert part in err, err
    assert not out.exists()


@pytest.mark.parametrize("multi_turn", [False, True])
def test_a_conversations_system_message_opens_what_is_sent(tmp_path: Path, multi_turn: bool) -> None:
    data = [{"id": "s", "conversations": [
        {"from": "system", "value": "You are terse."}, {"from": "human", "value": "What is 2 + 2?"},
        {"from": "gpt", "value": "4."}, {"from": "human", "value": "And times 3?"}, {"from": "gpt", "value": "12."},
    ]}]  # fmt: skip
    (tmp_path / "s.json").write_bytes(orjson.dumps(data))
    extra = ["--multi-turn", "--concurrency", "1", "--requests", "2"] if multi_turn else ["--rate", "5"]
    with recording_server() as (url, seen):
        code = exit_code(
            ["run", "--url", url, "--api", "chat", "--dataset", str(tmp_path / "s.json"), "--out",
             str(tmp_path / "run"), *extra, *QUIET]
        )  # fmt: skip
        bodies = seen.chat_bodies()
    assert code == 0
    assert bodies[0]["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    if multi_turn:
        assert [m["role"] for m in bodies[1]["messages"]] == ["system", "user", "assistant", "user"]
    table = read_records(tmp_path / "run")
    tok = resolve_tokenizer("cl100k_base")
    assert table.column("ref_input_tokens").to_pylist()[0] > len(tok.encode("You are terse.What is 2 + 2?")) + 10


def test_the_emulators_prefix_cache_hits_a_traces_shared_blocks(tmp_path: Path) -> None:
    """Mooncake rows 2 and 4 open with the blocks of row 1 (two, then one, of 256 tokens): the embedded emulator
    serves exactly those from its prefix cache."""
    code = exit_code(
        ["run", "--dataset", str(FIXTURES / "mooncake.jsonl"), "--block-tokens", "256", "--out", str(tmp_path / "r"),
         "--warmup", "off", "--no-progress"]
    )  # fmt: skip
    assert code == 0
    rows = sorted(read_records(tmp_path / "r").to_pylist(), key=lambda r: r["request_id"])
    assert [r["cached_tokens"] for r in rows] == [0, 512, 0, 256]


def test_a_scenarios_dataset_block_is_the_workloads_dataset(tmp_path: Path) -> None:
    from infermeter.config.scenario import run_config
    from infermeter.errors import UserError

    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"dataset: {{path: {FIXTURES / 'sharegpt.json'}, format: sharegpt, max_input_tokens: 64, sample: 2}}\n"
        "load: {rate: 2}\n"
    )
    w = run_config(scenario, {}).workload
    assert (w.dataset, w.dataset_format, w.max_input_tokens, w.dataset_sample) == (
        FIXTURES / "sharegpt.json", "sharegpt", 64, 2,
    )  # fmt: skip
    scenario.write_text(f"dataset: {FIXTURES / 'prompts.jsonl'}\nload: {{rate: 2}}\n")
    assert run_config(scenario, {}).workload.dataset == FIXTURES / "prompts.jsonl"
    scenario.write_text("dataset: {path: x.json, fromat: sharegpt}\n")
    with pytest.raises(UserError, match=r"unknown key dataset.fromat: the keys are path, format"):
        run_config(scenario, {})


def test_run_json_runs_a_dataset_run_again(tmp_path: Path) -> None:
    with recording_server() as (url, seen):
        first = ["run", "--url", url, "--api", "chat", "--dataset", str(FIXTURES / "sharegpt.json"), "--rate", "50"]
        assert exit_code([*first, "--out", str(tmp_path / "a"), *QUIET]) == 0
        again = ["run", "--config", str(tmp_path / "a" / "run.json"), "--out", str(tmp_path / "b"), "--no-progress"]
        assert exit_code(again) == 0
        bodies = seen.chat_bodies()
    half = len(bodies) // 2
    assert half > 0 and sorted(map(str, bodies[:half])) == sorted(map(str, bodies[half:]))


def test_a_suite_refuses_a_dataset_smaller_than_its_runs_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "suite"
    code = exit_code(["test", "ttft", "--quick", "--dataset", str(FIXTURES / "sharegpt.json"), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "has 3 requests, fewer than the 200 each run of the 'ttft' test sends" in err
    assert "--requests 3 or fewer" in err
    assert not out.exists()


def test_a_dataset_is_read_once_per_file_version_and_choice(tmp_path: Path) -> None:
    import os

    from infermeter.config.sections import Workload
    from infermeter.workload.source import WorkloadSource

    path = tmp_path / "d.json"
    sharegpt(path, conversations=4)
    section = Workload(dataset=path)
    first = WorkloadSource.read(section)
    assert WorkloadSource.read(section) is first  # a suite's runs share one reading
    assert WorkloadSource.read(Workload(dataset=path, dataset_sample=2)) is not first  # another choice
    os.utime(path, ns=(1, 1))
    assert WorkloadSource.read(section) is not first  # the file changed: read again
