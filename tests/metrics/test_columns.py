import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from infermeter.metrics.columns import Ragged, segment_max, segment_sum

lists = st.lists(st.lists(st.floats(-1e3, 1e3, allow_nan=False), max_size=6), max_size=8)


def _ragged(xs):
    return Ragged.from_lengths(
        np.array([len(x) for x in xs], dtype=np.int64), np.array([v for x in xs for v in x], dtype=float)
    )


@given(lists)
def test_diffs_match_per_list_diff(xs):
    got = _ragged(xs).diffs()
    expect = [np.diff(x) if len(x) > 1 else np.zeros(0) for x in xs]
    np.testing.assert_array_equal(got.lengths, [len(e) for e in expect])
    np.testing.assert_allclose(got.values, np.concatenate([np.zeros(0), *expect]))


@given(lists)
def test_segment_reductions(xs):
    r = _ragged(xs)
    np.testing.assert_allclose(segment_sum(r.values, r.offsets), [sum(x) for x in xs], atol=1e-6)
    expect = [max(x) if x else np.nan for x in xs]
    np.testing.assert_array_equal(segment_max(r.values, r.offsets), expect)


def test_select_keeps_ownership():
    r = _ragged([[1.0, 2.0], [], [3.0, 4.0, 5.0]])
    s = r.select(np.array([False, True, True, False, True]))
    np.testing.assert_array_equal(s.lengths, [1, 0, 2])
    np.testing.assert_array_equal(s.values, [2.0, 3.0, 5.0])
    np.testing.assert_array_equal(r.first(), [1.0, np.nan, 3.0])
    np.testing.assert_array_equal(r.last(), [2.0, np.nan, 5.0])
