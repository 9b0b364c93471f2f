"""ITL option A read from a sealed run streams the chunk times and sizes side by side, keeping neither: its gaps
and chunk counts are those of the whole fields in memory."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.metrics import RecordColumns, columns, latency
from infermeter.metrics.chunk_sizes import ChunkSizes
from infermeter.records import RunInfo, read_records, write_records
from tests.metrics.test_reading_at_scale import records


@pytest.mark.parametrize("pair_rows", [7, 2048])
def test_option_a_gaps_streamed_equal_the_whole_fields(tmp_path, monkeypatch, pair_rows):
    monkeypatch.setattr(columns, "PAIR_ROWS", pair_rows)
    recs = records(5000, seed=3)
    run = tmp_path / "run"
    write_records(run, RunInfo(kind="test"), recs)
    lazy = RecordColumns.of_run(run)
    whole = RecordColumns.from_table(read_records(run))

    got = latency.itl(lazy, "A")
    expect = [
        np.diff([t for t, k in zip(r.chunk_times, r.chunk_tokens, strict=True) if k > 0])
        for r in recs
        if r.status == "ok"
    ]
    assert got.lengths[~lazy.ok].sum() == 0
    np.testing.assert_array_equal(got.lengths[lazy.ok], [len(e) for e in expect])
    np.testing.assert_array_equal(got.values, np.concatenate(expect))
    assert "_token_gaps" not in vars(lazy)  # option A never differences the token times

    sizes = [k for r in recs if r.status == "ok" for k in r.chunk_tokens if k > 0]
    counted = ChunkSizes(len(sizes), sum(sizes), sizes.count(1), max(sizes))
    assert lazy.chunk_sizes() == whole.chunk_sizes() == counted  # lazy's from option A's pass
    assert RecordColumns.of_run(run).chunk_sizes() == counted  # read on its own, streamed
    first, last = lazy.token_ends()
    np.testing.assert_array_equal(first, whole.tokens.first())
    np.testing.assert_array_equal(last, whole.tokens.last())
    assert not {"tokens", "chunks", "chunk_tokens"} & set(vars(lazy))


def test_option_a_takes_the_token_ends_from_the_content_chunks_only_where_they_carry_every_token(tmp_path):
    from tests.conftest import hand_records

    recs = hand_records()  # a role-only chunk, a 2-token chunk, a failure
    whole = RecordColumns.from_table(write_and_read(tmp_path / "carried", recs))
    lazy = RecordColumns.of_run(tmp_path / "carried")
    latency.itl(lazy, "A")
    assert "_token_ends" in vars(lazy)  # from the chunk pass: no token time read
    first, last = lazy.token_ends()
    np.testing.assert_array_equal(first, whole.tokens.first())
    np.testing.assert_array_equal(last, whole.tokens.last())
    np.testing.assert_array_equal(first[[0, 3]], [1.10, 0.6])  # after the empty chunk at 1.05; the first chunk

    recs[3].output_tokens = 4  # the server's usage counts a token the chunks did not carry
    write_records(tmp_path / "usage", RunInfo(kind="test"), recs)
    lazy = RecordColumns.of_run(tmp_path / "usage")
    latency.itl(lazy, "A")
    assert "_token_ends" not in vars(lazy)  # the token times decide
    np.testing.assert_array_equal(lazy.token_ends()[0], whole.tokens.first())


def write_and_read(run, recs):
    write_records(run, RunInfo(kind="test"), recs)
    return read_records(run)
