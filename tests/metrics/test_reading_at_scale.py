"""Metrics over big runs: a run directory's fields are read as they are used (the summary never reads chunk or
server times), streamed, and computed a block at a time; every result is the one of the whole-array formulas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infermeter.metrics import RecordColumns, columns, latency, statistics, summarize
from infermeter.metrics.columns import Ragged
from infermeter.metrics.statistics import stats
from infermeter.records import RequestRecord, RunInfo, read_records, write_records

lists = st.lists(st.lists(st.floats(0, 1e3, allow_nan=False), max_size=7), max_size=12)


def ragged(xs: list[list[float]]) -> Ragged:
    return Ragged.from_lengths(np.array([len(x) for x in xs], dtype=np.int64), np.array([v for x in xs for v in x]))


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few values, so that every blockwise pass crosses many block boundaries."""
    monkeypatch.setattr(columns, "BLOCK_VALUES", 5)


@settings(max_examples=200, deadline=None)
@given(lists, st.data())
def test_diffs_of_kept_requests_equal_per_list_diffs(xs, data):
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(xs), max_size=len(xs))), dtype=bool)
    for size in (5, 1 << 20):
        got = ragged(xs).diffs(keep) if size == 1 << 20 else _with_blocks(size, lambda: ragged(xs).diffs(keep))
        expect = [np.diff(x) if k and len(x) > 1 else np.zeros(0) for x, k in zip(xs, keep, strict=True)]
        np.testing.assert_array_equal(got.lengths, [len(e) for e in expect])
        np.testing.assert_array_equal(got.values, np.concatenate([np.zeros(0), *expect]))


def _with(module: object, name: str, value: int, fn):  # type: ignore[no-untyped-def]
    """fn() with module.name set to value (a constant that sizes blocks or bands)."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        return fn()
    finally:
        setattr(module, name, saved)


def _with_blocks(size: int, fn):  # type: ignore[no-untyped-def]
    return _with(columns, "BLOCK_VALUES", size, fn)


@settings(max_examples=200, deadline=None)
@given(lists)
def test_jitter_by_blocks_is_the_whole_array_formula_to_the_bit(xs):
    """The per-request sums are differences of one cumulative sum over every sample, carried across blocks."""
    samples = ragged(xs)
    counts = samples.lengths
    cs = np.zeros(len(samples.values) + 1)
    np.cumsum(samples.values, out=cs[1:])
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (cs[samples.offsets[1:]] - cs[samples.offsets[:-1]]) / counts
        dev = samples.values - np.repeat(np.nan_to_num(mean), counts)
        cs2 = np.zeros(len(dev) + 1)
        np.cumsum(dev * dev, out=cs2[1:])
        expect = np.where(counts >= 2, np.sqrt((cs2[samples.offsets[1:]] - cs2[samples.offsets[:-1]]) / counts), np.nan)
    np.testing.assert_array_equal(_with_blocks(3, lambda: latency.jitter(samples)), expect)
    np.testing.assert_array_equal(latency.jitter(samples), expect)


values = st.one_of(
    st.floats(-1e6, 1e6),
    st.sampled_from([0.0, 0.0, 1.0, np.nan, np.inf, -np.inf]),
    st.integers(0, 5).map(float),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(values, min_size=1, max_size=3000))
def test_stats_in_one_pass_equal_the_partition(xs):
    """Above BIG values stats take one pass with sampled bands: the same order statistics exactly, the same mean
    and std to float error (ties, NaN and infinities included)."""
    x = np.array(xs)
    whole = stats(x, 1000).model_dump()
    banded = _with(statistics, "BIG", 0, lambda: stats(x, 1000)).model_dump()
    finite = x[np.isfinite(x)]
    rounding = 1e-13 * 1000 * max(1.0, float(np.abs(finite).max(initial=0.0)))  # float error scales with the values
    for key in ("mean", "std"):
        a, b = whole.pop(key), banded.pop(key)
        assert (a is None and b is None) or b == pytest.approx(a, rel=1e-9, abs=rounding)
    assert banded == whole


def test_stats_of_a_big_array_in_one_pass():
    rng = np.random.default_rng(1)
    x = rng.gamma(4.0, 0.005, statistics.BIG + 1000)
    x[rng.integers(0, len(x), 50)] = np.nan
    assert statistics._one_pass(x) is not None  # the one pass answers: no copy to fall back on
    got = stats(x, 1000).model_dump()
    finite = np.sort(x[np.isfinite(x)])
    n = len(finite)
    assert got["n"] == n and got["min"] == finite[0] * 1000 and got["max"] == finite[-1] * 1000
    for p in statistics.PERCENTILES:
        h = (n - 1) * p / 100
        lo = int(np.floor(h))
        expect = finite[lo] + (finite[int(np.ceil(h))] - finite[lo]) * (h - lo)
        assert got[statistics.pkey(p)] == float(expect) * 1000
    assert got["mean"] == pytest.approx(finite.mean() * 1000, rel=1e-12)
    assert got["std"] == pytest.approx(finite.std() * 1000, rel=1e-9)


def records(n: int, seed: int = 0) -> list[RequestRecord]:
    """Requests of every shape: failed ones, tokenless ones, multi-token chunks, empty chunks, server times."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(0, 9))
        times = list(np.round(np.cumsum(rng.uniform(0, 0.05, k)) + 0.2, 6))
        sizes = [int(s) for s in rng.integers(0, 3, k)]
        out.append(
            RequestRecord(
                request_id=i,
                request_class=("a", "b")[i % 2],
                input_tokens=100,
                output_tokens=k,
                max_tokens=8,
                submitted_at=0.0,
                token_times=times,
                chunk_times=times,
                chunk_tokens=sizes,
                server_token_times=[t - 0.001 for t in times] if i % 3 == 0 else None,
                status="ok" if i % 11 else "error",
                error="" if i % 11 else "HTTP 500: boom",
            )
        )
    return out


@pytest.mark.parametrize("option", ["A", "B", "C"])
def test_a_run_directory_read_as_used_summarizes_as_the_whole_table(tmp_path, small_blocks, option):
    """Sealed in records.parquet (and streamed a few thousand rows at a time), a run gives the summary the whole
    table in memory gives, field for field; the B summary reads neither the chunk times nor the server's."""
    run = tmp_path / "run"
    write_records(run, RunInfo(kind="test"), records(9000))
    lazy = RecordColumns.of_run(run)
    whole = RecordColumns.from_table(read_records(run))
    for f in ("tokens", "chunks", "chunk_tokens", "server", "has_server"):  # read every field first
        getattr(whole, f)
    slo = {"ttft": 0.3, "itl": 0.04}
    assert summarize(lazy, option, slo).model_dump() == summarize(whole, option, slo).model_dump()
    if option == "B":
        assert not {"tokens", "chunks", "chunk_tokens", "server", "has_server"} & set(vars(lazy))
        first, last = lazy.token_ends()
        np.testing.assert_array_equal(first, whole.tokens.first())
        np.testing.assert_array_equal(last, whole.tokens.last())
        gaps = lazy.token_gaps()
        np.testing.assert_array_equal(gaps.offsets, whole.tokens.diffs(whole.ok).offsets)
        np.testing.assert_array_equal(gaps.values, whole.tokens.diffs(whole.ok).values)


def test_server_times_are_found_without_reading_them_all(tmp_path):
    run = tmp_path / "run"
    recs = records(20)
    for r in recs:
        r.server_token_times = None
    write_records(run, RunInfo(kind="test"), recs)
    cols = RecordColumns.of_run(run)
    assert not cols.any_server_times(cols.ok)
    recs[-1].server_token_times, recs[-1].status = [0.5], "ok"
    write_records(tmp_path / "run2", RunInfo(kind="test"), recs)
    cols = RecordColumns.of_run(tmp_path / "run2")
    assert cols.any_server_times(cols.ok) and not cols.any_server_times(np.zeros(cols.n, dtype=bool))
    assert "has_server" not in vars(cols)
    assert cols.has_server.tolist() == [False] * 19 + [True]

    many = records(9000)  # three batches of rows; the first request carries server times
    for r in many[1:]:
        r.server_token_times = None
    many[0].server_token_times, many[0].status = [0.5], "ok"
    write_records(tmp_path / "run3", RunInfo(kind="test"), many)
    cols = RecordColumns.of_run(tmp_path / "run3")
    source, read = vars(cols)["_source"], []
    batches = source.valid_batches

    def counted(name: str):  # type: ignore[no-untyped-def]
        for batch in batches(name):
            read.append(len(batch))
            yield batch

    source.valid_batches = counted
    assert cols.any_server_times(cols.ok) and read == [4096]  # the first batch told: the rest was never read
