"""--realtime: the sending thread at SCHED_FIFO for the load window, as before afterwards, and what run.json says."""

from __future__ import annotations

import os
import threading

import pytest

from infermeter.process_limits import REALTIME, realtime
from infermeter.records import read_run_info
from tests.cli import infermeter

needs_linux = pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="SCHED_FIFO is Linux's")


def permitted() -> bool:
    """Whether this process may take the real-time class (root or CAP_SYS_NICE), tried and undone."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, policy, param)
    return True


@needs_linux
def test_the_thread_is_real_time_for_the_block_only_and_threads_it_starts_are_not() -> None:
    if not permitted():
        pytest.skip("this process may not take SCHED_FIFO (no root or CAP_SYS_NICE)")
    before = os.sched_getscheduler(0)
    started: list[int] = []
    with realtime(True) as scheduling:
        assert scheduling == REALTIME == "SCHED_FIFO 1"
        assert os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO
        assert os.sched_getparam(0).sched_priority == 1
        worker = threading.Thread(target=lambda: started.append(os.sched_getscheduler(0)))
        worker.start()
        worker.join()
    assert started == [os.SCHED_OTHER]  # a pool's or resolver's thread outlives the block: it is an ordinary one
    assert os.sched_getscheduler(0) == before


@needs_linux
def test_a_refusal_says_why_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    before = os.sched_getscheduler(0)
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with realtime(True) as scheduling:
        assert scheduling == (
            "--realtime: the real-time class was refused (Operation not permitted: it needs root or CAP_SYS_NICE): "
            "the load was sent at ordinary priority"
        )
        assert os.sched_getscheduler(0) == before


def test_not_asked_for_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def called(*_: object) -> None:
        raise AssertionError("the scheduling class was changed without --realtime")

    monkeypatch.setattr(os, "sched_setscheduler", called, raising=False)
    with realtime(False) as scheduling:
        assert scheduling is None


@needs_linux
def test_a_realtime_run_says_so_in_run_json(tmp_path) -> None:
    """Against the embedded emulator: the class the load was sent at is in run.json's client block, or, where the
    system refused it, a note says so and the run is measured all the same."""
    out = tmp_path / "run"
    p = infermeter("run", "--no-progress", "--realtime", "--requests", "20", "--rate", "40", "--warmup", "off",
                   "--out", out, timeout=240)  # fmt: skip
    assert p.returncode == 0, p.stderr
    info = read_run_info(out)
    if permitted():
        assert info.client.scheduling == "SCHED_FIFO 1" and not any("--realtime" in n for n in info.notes)
    else:
        assert info.client.scheduling is None and any("real-time class was refused" in n for n in info.notes)
    assert '"realtime": true' in (out / "run.json").read_text()  # the configuration that reruns it
