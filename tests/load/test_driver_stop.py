"""The open-loop driver's wait between sends: a stop ends it at once, however long the gap to the next send."""

import asyncio

import numpy as np
import pytest

from infermeter.client import PreparedRequest
from infermeter.load import LoadPattern, drive
from infermeter.load.client_health import HealthProbe
from infermeter.records import RequestRecord, RunClock


class InstantBackend:
    """Answers every request at once (only the driver's timing is under test)."""

    counting = "none"

    def __init__(self) -> None:
        self.clock = RunClock()

    async def send(self, req: PreparedRequest, scheduled_at: float, record: RequestRecord | None = None):
        rec = record if record is not None else req.record(scheduled_at)
        rec.submitted_at = self.clock.now()
        return rec

    def start(self, req: PreparedRequest, scheduled_at: float, record: RequestRecord):
        return self.send(req, scheduled_at, record)

    def pace(self, poll) -> None:
        pass


async def test_a_stop_during_a_long_gap_ends_the_schedule_without_waiting_it_out():
    backend = InstantBackend()
    reqs = [PreparedRequest(i, "p", 1, 1) for i in range(3)]
    stop = asyncio.Event()
    records: list[RequestRecord] = []
    driving = asyncio.create_task(
        drive(backend, reqs, LoadPattern(offsets=[0.0, 60.0, 120.0]), records.append, stop=stop)
    )
    while not records:
        await asyncio.sleep(0.01)
    stop.set()
    started = backend.clock.now()
    await asyncio.wait_for(driving, 10)
    assert backend.clock.now() - started < 5  # the next send was a minute away
    assert [r.request_id for r in records] == [0]
    # nothing of the driver's is left waiting on the stop
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


@pytest.mark.parametrize("offsets", [[0.0, 0.05, 0.1], [0.1, 0.1, 0.1]])
async def test_every_send_waits_for_its_scheduled_time(offsets):
    backend = InstantBackend()
    records: list[RequestRecord] = []
    await drive(
        backend, [PreparedRequest(i, "p", 1, 1) for i in range(3)], LoadPattern(offsets=offsets), records.append
    )
    assert len(records) == 3
    await asyncio.sleep(0)  # a cancelled task leaves the loop on its next step
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()  # no waiter left behind
    assert all(r.submitted_at >= r.scheduled_at for r in records)
    assert sorted(r.scheduled_at - records[0].scheduled_at for r in records) == pytest.approx(
        [o - offsets[0] for o in offsets]
    )


async def test_a_duration_is_half_open_and_each_send_tells_the_probe_how_late_it_started():
    """--duration 0.2 at 50 req/s sends the arrivals in [0, 0.2): ten, not the eleventh due at 0.2 itself."""
    backend = InstantBackend()
    reqs = [PreparedRequest(i, "p", 1, 1) for i in range(20)]
    records: list[RequestRecord] = []
    probe = HealthProbe()
    offsets = np.arange(20) / 50.0
    await drive(backend, reqs, LoadPattern(offsets=offsets, duration=0.2), records.append, probe=probe)
    assert [r.request_id for r in records] == list(range(10))
    assert len(probe.send_lag) == 10 and float(np.median(probe.send_lag)) < 0.05  # one per send, as late as it was


def test_a_stop_at_the_first_send_still_records_every_request_launched():
    """A stop and a hard stop raised while a send is launched (the journal failing on its note of the send) cancel the
    in-flight tasks at once, before any has run a step: each request sent is still exactly one record."""
    backend = InstantBackend()
    reqs = [PreparedRequest(i, "p", 1, 1) for i in range(3)]
    stop, hard_stop = asyncio.Event(), asyncio.Event()
    records: list[RequestRecord] = []
    sent: list[int] = []

    def on_send(req: PreparedRequest, at: float) -> None:
        sent.append(req.request_id)
        stop.set()
        hard_stop.set()

    async def go() -> None:
        pattern = LoadPattern(offsets=np.zeros(3))
        await drive(
            backend, reqs, pattern, records.append, stop=stop, hard_stop=hard_stop, on_send=on_send,
            start_at=backend.clock.now(),  # due at once: the driver's own poll launches it, then sees the stop
        )  # fmt: skip

    asyncio.run(go())
    assert sent and sorted(r.request_id for r in records) == sorted(sent)
