"""A run that fails before sending anything leaves no run directory behind, so the same command runs again (issue 35);
what was there before, and a run that sent requests, stay."""

from pathlib import Path

import numpy as np
import pytest

from infermeter.errors import UserError
from infermeter.records import LEDGER, LEDGER_DTYPE, RUN_JSON, RequestRecord, RunInfo, RunWriter, holds_run
from infermeter.records.writer import claimed_run_dir


def _fail_inside(run_dir: Path, *, write: str | None = None, sent: bool = False) -> None:
    """Claim `run_dir`, optionally write a file or record a send into it, then fail as a run before measuring would."""
    with pytest.raises(UserError, match="injected"), claimed_run_dir(run_dir, RunInfo()):
        assert (run_dir / RUN_JSON).exists()
        if write is not None:
            (run_dir / write).write_text("monitor output")
        if sent:
            (run_dir / LEDGER).write_bytes(np.zeros(1, dtype=LEDGER_DTYPE).tobytes())
        raise UserError("injected failure before measuring")


def test_a_directory_the_run_made_goes_with_the_parents_it_made(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "run"
    _fail_inside(out, write="telemetry.parquet")
    assert not (tmp_path / "a").exists() and tmp_path.exists()
    with claimed_run_dir(out, RunInfo()):  # the same --out again is accepted
        pass
    assert holds_run(out)


def test_an_existing_directory_keeps_what_was_there(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _fail_inside(empty, write="telemetry.parquet")
    assert empty.is_dir() and list(empty.iterdir()) == []
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (mine / "sub").mkdir()
    _fail_inside(mine, write="server_metrics.txt")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "sub"]


def test_a_run_that_sent_requests_keeps_its_directory(tmp_path: Path) -> None:
    out = tmp_path / "sent"
    _fail_inside(out, sent=True)
    assert (out / RUN_JSON).exists() and (out / LEDGER).exists()
    journaled = tmp_path / "journaled"
    with pytest.raises(RuntimeError), claimed_run_dir(journaled, RunInfo()):
        writer = RunWriter(journaled, RunInfo(), claimed=True)
        writer.append(RequestRecord(request_id=0, input_tokens=1, output_tokens=1, max_tokens=1))
        writer.flush()
        raise RuntimeError("stopped after one record was measured")
    assert holds_run(journaled)
    writer.close()


def test_a_refused_claim_never_removes_the_run_already_there(tmp_path: Path) -> None:
    out = tmp_path / "old"
    out.mkdir()
    (out / RUN_JSON).write_text("{}")
    with pytest.raises(UserError, match="already holds a run"), claimed_run_dir(out, RunInfo()):
        pass
    assert (out / RUN_JSON).read_text() == "{}"
