"""Issue 35's first two bugs end to end, through `infermeter run` on the embedded emulator (each a few seconds)."""

import signal
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from infermeter.errors import UserError
from tests.cli import exit_code


@pytest.fixture(autouse=True)
def _sigterm() -> Iterator[None]:
    """main() installs its own SIGTERM handler: give pytest its own back."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def _run(out: Path, requests: int = 5) -> int:
    """conversation under chat with seed 110: its first request draws 19 tokens after its system prompt."""
    return exit_code(
        ["run", "--workload", "conversation", "--api", "chat", "--seed", "110", "--requests", str(requests),
         "--warmup", "off", "--no-progress", "--out", str(out)]
    )  # fmt: skip


def test_conversation_under_chat_runs_with_its_short_draws_raised_and_declared(tmp_path: Path) -> None:
    """It exited 2 ("cannot build a 219-token prompt: the template alone takes 22 tokens")."""
    out = tmp_path / "run"
    assert _run(out) == 0
    info = orjson.loads((out / "run.json").read_bytes())
    notes = [n for n in info["workload"]["notes"] if "drew an input shorter than a prompt can be" in n]
    assert len(notes) == 1 and notes[0].startswith("1 of 5 requests") and "23 tokens" in notes[0]
    assert info["tokenizer"]["template_overhead_tokens"] == 22
    records = pq.read_table(out / "records.parquet").sort_by("request_id")
    inputs = records["input_tokens"].to_pylist()
    assert inputs == [223, 88, 468, 368, 292]  # drew 219 = its 200-token system prompt + 19: now + 23


def test_a_run_that_fails_before_measuring_leaves_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure after the directory was claimed and before any request was sent: nothing left, and the same command
    runs again (it was refused: "already holds a run")."""

    async def fail(*args: object, **kwargs: object) -> None:
        raise UserError("injected failure before measuring")

    monkeypatch.setattr("infermeter.conduct.run.verify_prompts", fail)
    out = tmp_path / "new" / "run"
    assert _run(out) == 2
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    assert _run(out, requests=2) == 0 and (out / "records.parquet").exists()
