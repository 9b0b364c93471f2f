"""fluidity-index against the paper's worked examples, hand cases, and a plain loop over Algorithm 1."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infermeter.errors import UserError
from infermeter.metrics import RecordColumns, fluidity, summarize
from infermeter.metrics.columns import Ragged
from infermeter.metrics.fluidity import (
    Layout,
    deadline_counts,
    deadline_counts_loop,
    min_tbt_deadline,
    parse_deadlines,
    request_gaps,
)
from infermeter.records import RequestRecord


def rag(rows):
    return Ragged.from_lengths(
        np.array([len(r) for r in rows], dtype=np.int64), np.array([v for r in rows for v in r], dtype=float)
    )


def counts(rows, dp, dd):
    c = deadline_counts(rag(rows), dp, dd)
    return list(zip(c.met.tolist(), c.missed.tolist(), strict=True))


def test_paper_section_4_examples():
    """D_d = 100 ms: ten tokens 10 ms apart then one 150 ms later meets every deadline; ten tokens 100 ms apart
    then one 150 ms later misses one."""
    fast = [0.1] + [0.01] * 9 + [0.15]
    steady = [0.1] + [0.1] * 9 + [0.15]
    assert counts([fast, steady], 0.1, 0.1) == [(11, 0), (10, 1)]
    c = deadline_counts(rag([fast, steady]), 0.1, 0.1)
    np.testing.assert_allclose(c.fluidity(), [1.0, 10 / 11])
    assert c.service_miss_rate() == pytest.approx(1 / 22)


def test_stall_counts_every_missed_deadline_then_resets():
    # D_d = 10 ms; a 45 ms stall on time-zero slack misses floor((45 - 10) / 10) + 1 = 4 deadlines; the deadlines
    # reset, so the next on-time gaps all meet
    t = [0.05, 0.01, 0.045, 0.01, 0.01]
    assert counts([t], 0.05, 0.01) == [(4, 4)]
    assert deadline_counts_loop(t, 0.05, 0.01) == (4, 4)


def test_slack_carries_from_an_early_first_token():
    # the first token is 200 ms early against D_p = 300 ms: that slack absorbs a 150 ms gap (D_d = 25 ms)
    assert counts([[0.1, 0.15, 0.025]], 0.3, 0.025) == [(3, 0)]
    # without the early first token the same gap misses floor((150 - 25) / 25) + 1 = 6 deadlines
    assert counts([[0.3, 0.15, 0.025]], 0.3, 0.025) == [(2, 6)]


def test_exact_multiples_do_not_fall_through_the_float_floor():
    # 0.3 / 0.1 is 2.9999999999999996 in floats: a 300 ms deficit is exactly 3 deadlines, +1 for the miss itself
    assert counts([[0.1, 0.4]], 0.1, 0.1) == [(1, 4)]
    # a token exactly on its deadline (after accumulated float slack) meets it
    assert counts([[0.1] + [0.1] * 30 + [0.1]], 0.1, 0.1) == [(32, 0)]


def test_multi_token_chunks_give_zero_gaps_that_bank_slack():
    # a 3-token chunk after a 60 ms gap (D_d = 20 ms): tokens at gaps 60, 0, 0 meet 20 + 20 + 20 = 60 together
    rec = RequestRecord(
        request_id=0,
        submitted_at=0.0,
        output_tokens=4,
        token_times=[0.1, 0.16, 0.16, 0.16],
        chunk_times=[0.1, 0.16],
        chunk_tokens=[1, 3],
    )
    cols = RecordColumns.from_records([rec])
    t = request_gaps(cols.tokens, cols.submitted_at, cols.ok)
    np.testing.assert_allclose(t.values, [0.1, 0.06, 0.0, 0.0])
    c = deadline_counts(t, 0.1, 0.02)
    # the 60 ms gap misses (60-20)//20 + 1 = 3 deadlines, then the zero gaps meet theirs
    assert (c.met[0], c.missed[0]) == (3, 3)


micros = st.integers(0, 200_000).map(lambda u: u / 1e6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(micros, min_size=1, max_size=40), min_size=1, max_size=12),
    st.integers(1, 300_000).map(lambda u: u / 1e6),
    st.integers(1, 50_000).map(lambda u: u / 1e6),
)
def test_vectorized_equals_the_plain_loop(rows, dp, dd):
    c = deadline_counts(rag(rows), dp, dd)
    for i, row in enumerate(rows):
        assert (c.met[i], c.missed[i]) == deadline_counts_loop(row, dp, dd)


@contextlib.contextmanager
def walked(by_position: bool):
    """Walk every block position by position across its requests, or as one 2-D array."""
    saved = fluidity.LOOP_MIN_COLUMNS
    fluidity.LOOP_MIN_COLUMNS = 1 if by_position else 10**9
    try:
        yield
    finally:
        fluidity.LOOP_MIN_COLUMNS = saved


rows_of_gaps = st.lists(st.lists(micros, min_size=1, max_size=40), min_size=1, max_size=40)
# gaps on a coarse grid hit exact multiples of the deadline and exact ties with the slack
coarse = st.integers(0, 12).map(lambda k: k * 0.01)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(rows_of_gaps, st.lists(st.lists(coarse, min_size=1, max_size=40), min_size=1, max_size=40)),
    st.integers(1, 300_000).map(lambda u: u / 1e6),
    st.one_of(st.integers(1, 50_000).map(lambda u: u / 1e6), st.sampled_from([0.01, 0.02, 0.03, 0.1])),
)
def test_both_walks_equal_the_plain_loop(rows, dp, dd):
    expect = [deadline_counts_loop(row, dp, dd) for row in rows]
    for by_position in (True, False):
        with walked(by_position):
            c = deadline_counts(rag(rows), dp, dd)
        assert list(zip(c.met.tolist(), c.missed.tolist(), strict=True)) == expect


@pytest.mark.parametrize("by_position", [True, False])
def test_layout_counts_only_the_requests_asked_for(by_position):
    rng = np.random.default_rng(3)
    rows = [list(rng.gamma(2.0, 0.01, rng.integers(1, 300))) for _ in range(200)]
    layout = Layout(rag(rows))
    which = rng.random(200) < 0.3
    d = rng.uniform(0.005, 0.05, 200)
    with walked(by_position):
        some, every = layout.counts(d, d, which), layout.counts(d, d)
        smaller = layout.only(which).counts(d, d)
    np.testing.assert_array_equal(some.met, np.where(which, every.met, 0))
    np.testing.assert_array_equal(some.missed, np.where(which, every.missed, 0))
    np.testing.assert_array_equal(smaller.missed, some.missed)
    for i in np.flatnonzero(which)[:20]:
        assert (every.met[i], every.missed[i]) == deadline_counts_loop(rows[i], d[i], d[i])


def brute_force_min_tbt(t: list[float], target: float, resolution: float) -> float:
    """The smallest grid D_d whose decode fluidity reaches the target, by trying every grid point in turn."""
    gaps = t[1:]
    if not gaps:
        return float("nan")
    k = 1
    while True:
        met, missed = deadline_counts_loop(gaps, k * resolution, k * resolution)
        if 1 - missed / (met + missed) >= target - 1e-12 or k * resolution >= max(gaps):
            return k * resolution
        k += 1


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.lists(st.lists(st.integers(0, 150_000).map(lambda u: u / 1e6), min_size=1, max_size=40), max_size=45),
        st.lists(st.lists(coarse, min_size=1, max_size=40), min_size=1, max_size=45),
    ),
    st.sampled_from([0.5, 0.8, 0.9, 0.95, 1.0]),
)
def test_min_tbt_deadline_equals_trying_every_grid_point(rows, target):
    expect = np.array([brute_force_min_tbt(row, target, 1e-3) for row in rows], dtype=float)
    for by_position in (True, False):
        with walked(by_position):
            np.testing.assert_array_equal(min_tbt_deadline(rag(rows), target=target, resolution=1e-3), expect)


def test_min_tbt_deadline_by_hand():
    # four 10 ms gaps, then 30 ms.  D_d = 14 ms banks 4 x 4 = 16 ms of slack: the 30 ms gap meets its deadline
    # (fluidity 1).  13 ms banks 12 ms: a deficit of 30 - 12 - 13 = 5 ms, one miss (4 / 5 = 0.8); 12 ms banks 8 ms: a
    # 10 ms deficit, one miss (0.8); 11 ms banks 4 ms: a 15 ms deficit, floor(15 / 11) + 1 = 2 misses (4 / 6)
    t = [0.5, 0.01, 0.01, 0.01, 0.01, 0.03]
    for ms, expect in ((14, (5, 0)), (13, (4, 1)), (12, (4, 1)), (11, (4, 2))):
        assert deadline_counts_loop(t[1:], ms / 1000, ms / 1000) == expect
    m = min_tbt_deadline(rag([t, t, t[:2], t[:1]]), target=0.85, resolution=1e-3)
    np.testing.assert_allclose(m[:3], [0.014, 0.014, 0.01])  # one 10 ms gap: 10 ms
    assert np.isnan(m[3])  # no decode gap
    assert min_tbt_deadline(rag([t]), target=0.8, resolution=1e-3)[0] == pytest.approx(0.012)


def test_min_tbt_deadline_is_the_smallest_passing_grid_point():
    gaps = [0.1] + [0.02] * 9 + [0.05]  # the first entry (TTFT) is ignored
    m = min_tbt_deadline(rag([gaps, [0.1]]), target=0.9, resolution=1e-4)
    assert np.isnan(m[1])
    dd = m[0]
    loop = lambda d: deadline_counts_loop(gaps[1:], d, d)  # noqa: E731
    met, missed = loop(dd)
    assert met / (met + missed) >= 0.9
    met, missed = loop(dd - 1e-4)
    assert met / (met + missed) < 0.9


def test_summary_fluidity_block_and_rates():
    recs = [
        RequestRecord(
            request_id=i,
            submitted_at=0.0,
            output_tokens=11,
            input_tokens=100,
            token_times=list(0.1 + np.cumsum([0.0] + [g] * 10)),
        )
        for i, g in enumerate([0.02] * 99 + [0.08])
    ]
    s = summarize(RecordColumns.from_records(recs), "B", None, parse_deadlines("ttft=300ms,tbt=25ms,target=0.9"))
    f = s.fluidity
    assert f is not None
    assert f.tbt_deadline_ms == 25 and f.ttft_deadline_ms == 300
    # 99 smooth requests meet every deadline; the one with 80 ms gaps misses most of its 25 ms deadlines
    assert f.share_meeting_target == pytest.approx(0.99)
    assert f.index.n == 100 and f.index.max == 1.0
    assert f.tpot_tok_s == pytest.approx(1 / np.mean([0.02] * 99 + [0.08]))
    assert f.p99_itl_tok_s == pytest.approx(1 / np.percentile([0.02] * 990 + [0.08] * 10, 99))
    # min D_d: 20 ms for the smooth ones, 80 ms for the slow one (no slack to borrow): P99 interpolates
    expect_p99 = np.percentile([0.02] * 99 + [0.08], 99)
    assert f.fluid_tok_s == pytest.approx(1 / expect_p99, rel=1e-3)
    assert len(f.miss_rate_curve.tbt_ms) == len(f.miss_rate_curve.p99_miss_rate)


def test_parse_deadlines_errors():
    d = parse_deadlines("ttft=0.3s, tbt=25ms, target=0.95, slack=50ms")
    assert (d.ttft, d.tbt, d.target, d.slack) == (0.3, 0.025, 0.95, 0.05)
    for bad, msg in (
        ("ttft=300ms", "need tbt"),
        ("tbt=fast", "not a duration"),
        ("tbt=25ms,x=1", "unknown"),
        ("tbt=25ms,target=2", "target must be"),
        ("tbt=25ms,ttft=@/nope.json", "does not exist"),
    ):
        with pytest.raises(UserError, match=msg):
            parse_deadlines(bad)
