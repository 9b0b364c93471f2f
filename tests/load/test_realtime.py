"""--realtime: the sending thread at SCHED_FIFO for the load window, in its class before afterwards, and what run.json
and the report say."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import pytest

from infermeter.process_limits import REALTIME, Scheduling, realtime
from infermeter.records import read_run_info
from tests.cli import infermeter

needs_linux = pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="SCHED_FIFO is Linux's")
RESET = getattr(os, "SCHED_RESET_ON_FORK", 0x40000000)


@dataclass
class FakeKernel:
    """os.sched_* for one thread, as Linux answers them: `refuse` fails every change; without CAP_SYS_NICE
    (`capable` False) a change that clears SCHED_RESET_ON_FORK is refused, as the kernel refuses it."""

    policy: int = 0  # SCHED_OTHER
    priority: int = 0
    capable: bool = True
    refuse: bool = False
    calls: list[tuple[int, int]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(os, "sched_getscheduler", lambda pid: self.policy, raising=False)
        monkeypatch.setattr(os, "sched_getparam", lambda pid: os.sched_param(self.priority), raising=False)
        monkeypatch.setattr(os, "sched_setscheduler", self.set, raising=False)

    def set(self, pid: int, policy: int, param: os.sched_param) -> None:
        self.calls.append((policy, param.sched_priority))
        if self.refuse or (not self.capable and self.policy & RESET and not policy & RESET):
            raise PermissionError(1, "Operation not permitted")
        self.policy, self.priority = policy, param.sched_priority


FIFO = getattr(os, "SCHED_FIFO", 1)


def test_the_class_is_raised_for_the_block_and_restored_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeKernel()
    kernel.install(monkeypatch)
    with realtime(True) as scheduling:
        assert scheduling == Scheduling(in_force="SCHED_FIFO 1") and REALTIME == "SCHED_FIFO 1"
        assert (kernel.policy, kernel.priority) == (FIFO | RESET, 1)  # reset on fork: threads started are ordinary
    assert (kernel.policy, kernel.priority) == (0, 0)


def test_the_class_is_restored_when_the_block_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeKernel()
    kernel.install(monkeypatch)
    with pytest.raises(KeyboardInterrupt), realtime(True):
        raise KeyboardInterrupt
    assert (kernel.policy, kernel.priority) == (0, 0)


def test_without_cap_sys_nice_the_class_comes_back_with_reset_on_fork_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real-time allowed by RLIMIT_RTPRIO alone: Linux will not clear SCHED_RESET_ON_FORK, and the restore must
    neither raise (the run's records are written after it) nor leave the thread real-time."""
    kernel = FakeKernel(capable=False)
    kernel.install(monkeypatch)
    with realtime(True) as scheduling:
        assert scheduling.in_force == REALTIME
    assert (kernel.policy, kernel.priority) == (RESET, 0)
    assert kernel.calls[-2:] == [(0, 0), (RESET, 0)]


def test_a_refusal_says_why_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeKernel(refuse=True)
    kernel.install(monkeypatch)
    with realtime(True) as scheduling:
        assert scheduling.in_force is None
        assert scheduling.refused == (
            "--realtime: the real-time class was refused (Operation not permitted: it needs root, CAP_SYS_NICE or an "
            "RLIMIT_RTPRIO (ulimit -r), and a cgroup with a real-time budget): the load was sent at ordinary priority"
        )
    assert len(kernel.calls) == 1 and (kernel.policy, kernel.priority) == (0, 0)


def test_a_platform_without_sched_fifo_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_setscheduler", raising=False)
    with realtime(True) as scheduling:
        assert scheduling.in_force is None and "this platform has no SCHED_FIFO" in (scheduling.refused or "")


def test_not_asked_for_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = FakeKernel()
    kernel.install(monkeypatch)
    with realtime(False) as scheduling:
        assert scheduling == Scheduling()
    assert kernel.calls == []


def permitted() -> bool:
    """Whether this process may take the real-time class, tried and undone."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, policy, param)
    return True


@needs_linux
def test_on_this_kernel_threads_started_in_the_block_are_ordinary() -> None:
    """The real system calls, where this process may make them: the thread is SCHED_FIFO 1, a thread it starts is
    not (a pool's or a resolver's outlives the block), and the class before comes back."""
    if not permitted():
        pytest.skip("this process may not take SCHED_FIFO")
    before = os.sched_getscheduler(0)
    started: list[int] = []
    with realtime(True):
        assert os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK == os.SCHED_FIFO
        assert os.sched_getparam(0).sched_priority == 1
        worker = threading.Thread(target=lambda: started.append(os.sched_getscheduler(0)))
        worker.start()
        worker.join()
    assert started == [os.SCHED_OTHER]
    assert os.sched_getscheduler(0) == before


@needs_linux
def test_a_realtime_run_says_so_in_run_json_and_the_report(tmp_path) -> None:
    """Against the embedded emulator: the class the load was sent at is in run.json's client block and the report's
    notes, or, where the system refused it, a note says so and the run is measured all the same."""
    out = tmp_path / "run"
    p = infermeter("run", "--no-progress", "--realtime", "--requests", "20", "--rate", "40", "--warmup", "off",
                   "--out", out, timeout=240)  # fmt: skip
    assert p.returncode == 0, p.stderr
    info = read_run_info(out)
    if permitted():
        assert info.client is not None and info.client.scheduling == "SCHED_FIFO 1"
        assert "Load generator: the measured load was sent at SCHED_FIFO 1 (--realtime)" in p.stdout
        assert not any("--realtime" in n for n in info.notes)
    else:
        assert info.client is not None and info.client.scheduling is None
        assert any("real-time class was refused" in n for n in info.notes) and "was refused" in p.stdout
    assert '"realtime": true' in (out / "run.json").read_text()  # the configuration that reruns it
