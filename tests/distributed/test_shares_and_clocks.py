"""Dealing a run's requests to workers, and placing a worker's clock on the coordinator's (no cluster needed)."""

import numpy as np
import pytest

from infermeter.distributed import clocks
from infermeter.distributed.shares import deal, id_ranges
from infermeter.errors import UserError


def test_an_open_loop_is_dealt_round_robin_and_the_union_is_the_whole_schedule():
    shares = deal(10, 3)
    assert [s.rows.tolist() for s in shares] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(np.concatenate([s.rows for s in shares]).tolist()) == list(range(10))
    assert all(s.concurrency is None for s in shares)


def test_a_closed_loop_divides_the_concurrency_and_deals_requests_in_proportion():
    shares = deal(12, 3, concurrency=4)  # slots 0..3 to workers 0,1,2,0
    assert [s.concurrency for s in shares] == [2, 1, 1]
    assert [s.rows.tolist() for s in shares] == [[0, 3, 4, 7, 8, 11], [1, 5, 9], [2, 6, 10]]
    assert [s.concurrency for s in deal(5, 4, concurrency=2)] == [1, 1]  # never more workers than the concurrency


def test_request_ids_are_written_as_compact_runs():
    assert id_ranges([]) == ""
    assert id_ranges([5]) == "5"
    assert id_ranges([1, 2]) == "1,2"
    assert id_ranges([1, 3, 5, 7, 8, 20, 21, 22, 23, 30]) == "1-7:2,8,20-23,30"
    assert id_ranges(range(116, 600, 2)) == "116-598:2"


def test_the_minimum_round_trip_sample_gives_the_offset_within_half_its_round_trip():
    """A remote clock 1000 s ahead, read over round trips of 10, 0.2 and 4 ms with the delay all on the way there:
    the estimate keeps the 0.2 ms trip, whose error is its half (0.1 ms), not the 10 ms trip's 5 ms."""
    now = [0.0]

    def local() -> float:
        return now[0]

    remote_trips = iter([(0.010, 0.0), (0.0002, 0.0), (0.004, 0.0)])

    def remote_tight() -> float:
        there, back = next(remote_trips)
        now[0] += there
        reading = now[0] + 1000.0
        now[0] += back
        return reading

    est = clocks.estimate(remote_tight, local, rounds=3)
    assert est.rtt_s == pytest.approx(0.0002)
    assert est.offset_s == pytest.approx(1000.0 + 0.0001)  # off by half the kept round trip, no more


def test_a_worker_on_the_coordinators_host_reports_zero_offset_and_a_remote_one_its_drift():
    before, after = clocks.Estimate(0.0004, 0.002), clocks.Estimate(0.0010, 0.004)
    same = clocks.placed(before, after, same_host=True)
    assert (same.offset_s, same.accuracy_s, same.same_host) == (0.0, 0.0, True)
    remote = clocks.placed(before, after, same_host=False)
    assert remote.offset_s == 0.0004
    assert remote.drift_s == pytest.approx(0.0006)
    assert remote.accuracy_s == pytest.approx(0.002 + 0.0006)  # half the longer round trip plus the drift
    assert clocks.host_identity().startswith(__import__("socket").gethostname() + "/")


def test_without_dask_the_option_says_how_to_install_it(monkeypatch):
    import sys

    from infermeter.distributed import require

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(
        UserError,
        match=r"--workers runs on dask.distributed, which is not installed: pip install 'infermeter\[distributed\]'",
    ):
        require("--workers")
