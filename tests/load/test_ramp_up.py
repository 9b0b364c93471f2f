"""--ramp-up S: an open loop's rate rises linearly from 0 to R over S seconds (the drawn offsets warped), a closed
loop's users start one after another, user i of C at i x S / C."""

import asyncio

import numpy as np
import pytest

from infermeter.client import PreparedRequest
from infermeter.load import LoadPattern, drive
from infermeter.records import RequestRecord, RunClock
from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets, ramped


class HoldingBackend:
    """Answers every request after `hold` seconds (only the driver's timing is under test)."""

    counting = "none"

    def __init__(self, hold: float) -> None:
        self.clock = RunClock()
        self.hold = hold

    async def send(self, req: PreparedRequest, scheduled_at: float, record: RequestRecord | None = None):
        rec = record if record is not None else req.record(scheduled_at)
        rec.submitted_at = self.clock.now()
        await asyncio.sleep(self.hold)
        rec.status = "ok"
        return rec

    def start(self, req: PreparedRequest, scheduled_at: float, record: RequestRecord):
        return self.send(req, scheduled_at, record)

    def pace(self, poll) -> None:
        pass


def test_ramped_poisson_arrivals_follow_the_quadratic_count_then_the_steady_rate():
    rate, ramp = 1000.0, 30.0
    steady = arrival_offsets(ArrivalSpec(kind="poisson", rate=rate), 130_000, seed=3)
    warped = ramped(steady, ramp)
    assert warped[0] == 0.0 and np.all(np.diff(warped) >= 0) and len(warped) == len(steady)
    # inside the ramp the count of arrivals in [0, t] is R t^2 / (2 S), within a Poisson count's spread (4 sigma)
    for t in (5.0, 10.0, 15.0, 20.0, 25.0, 30.0):
        expected = rate * t * t / (2 * ramp)
        assert abs(np.count_nonzero(warped <= t) - expected) < 4 * np.sqrt(expected), t
    # the arrivals in successive fifths of the ramp rise linearly: 1, 3, 5, 7, 9 x R S / 50
    fifths = np.histogram(warped, bins=np.linspace(0, ramp, 6))[0]
    shape = np.array([1, 3, 5, 7, 9]) * rate * ramp / 50
    assert np.all(np.abs(fifths - shape) < 4 * np.sqrt(shape)), (fifths, shape)
    # and not as a steady process would: half the ramp's time holds a quarter of its arrivals
    assert np.count_nonzero(warped < ramp / 2) / np.count_nonzero(warped < ramp) == pytest.approx(0.25, abs=0.02)
    # after the ramp the steady rate, and the steady process's own gaps
    after = warped[(warped >= ramp) & (warped < ramp + 100)]
    assert len(after) / 100 == pytest.approx(rate, rel=0.05)
    tail = steady >= ramp / 2
    assert np.allclose(np.diff(warped[tail]), np.diff(steady[tail]))


def test_ramped_constant_arrivals_hit_the_closed_form_exactly():
    rate, ramp = 10.0, 4.0
    steady = arrival_offsets(ArrivalSpec(kind="constant", rate=rate), 100, seed=0)
    warped = ramped(steady, ramp)
    k = np.arange(100)
    inside = k / rate < ramp / 2
    assert np.allclose(warped[inside], np.sqrt(2 * ramp * k[inside] / rate))  # R t^2 / (2 S) = k
    assert np.allclose(warped[~inside], k[~inside] / rate + ramp / 2)
    assert ramped(steady, 0.0).tolist() == steady.tolist()


async def test_closed_loop_users_start_one_after_another_over_the_ramp():
    users, ramp = 4, 1.2
    backend = HoldingBackend(hold=2.0)  # longer than the ramp: each user's first send is its start
    records: list[RequestRecord] = []
    start_at = backend.clock.now() + 0.05
    pattern = LoadPattern(concurrency=users, ramp_up=ramp)
    reqs = [PreparedRequest(i, "p", 1, 1) for i in range(users)]
    await drive(backend, reqs, pattern, records.append, start_at=start_at)
    starts = np.sort([r.scheduled_at for r in records]) - start_at
    due = np.arange(users) * ramp / users
    assert len(starts) == users
    assert np.all(starts >= due)  # never before its instant
    assert np.median(starts - due) < 0.15, starts  # and soon after it (a median: the host may take a whole 0.1 s)
    assert "users starting over 1.2 s" in pattern.describe()


async def test_a_stop_during_the_ramp_does_not_wait_for_users_still_to_start():
    backend = HoldingBackend(hold=0.01)
    stop = asyncio.Event()
    records: list[RequestRecord] = []
    reqs = [PreparedRequest(i, "p", 1, 1) for i in range(1000)]
    pattern = LoadPattern(concurrency=3, ramp_up=120.0)  # the 2nd user would start 40 s in
    driving = asyncio.create_task(drive(backend, reqs, pattern, records.append, stop=stop))
    while len(records) < 3:
        await asyncio.sleep(0.01)
    stop.set()
    started = backend.clock.now()
    await asyncio.wait_for(driving, 10)
    assert backend.clock.now() - started < 5
    assert all(r.scheduled_at <= started for r in records)  # no user started after the stop
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()
