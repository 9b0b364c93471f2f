"""The server_timing block over hand records: prefill and decode time as servers reported them, prefix-cache hits."""

from __future__ import annotations

import dataclasses

import pytest

from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.server_timing import server_timing
from tests.conftest import hand_records


def reported_records():
    """The hand records (inputs 100, 300, 2000 failed, 1500; outputs 4, 1, -, 3) with what their server said."""
    r0, r1, r2, r3 = hand_records()
    return [
        dataclasses.replace(r0, server_prefill_s=0.020, server_decode_s=0.060),  # no cached-token count
        dataclasses.replace(r1, cached_tokens=256, server_prefill_s=0.005, server_decode_s=0.010),
        dataclasses.replace(r2, cached_tokens=1000, server_prefill_s=0.5, server_decode_s=0.1),  # failed: left out
        dataclasses.replace(r3, cached_tokens=1024, server_decode_s=0.090),  # no prefill time
    ]


def test_server_timing_of_hand_records():
    block = server_timing(RecordColumns.from_records(reported_records()))
    assert block is not None
    assert block.reported == 3 and block.cached_tokens_reported == 2
    assert block.prefill_ms is not None and block.prefill_ms.n == 2
    assert (block.prefill_ms.min, block.prefill_ms.max) == pytest.approx((5.0, 20.0))
    assert block.prefill_ms.mean == pytest.approx(12.5)
    # 60 ms / 4 tokens, 10 ms / 1 token, 90 ms / 3 tokens
    per_token = block.decode_ms_per_output_token
    assert per_token is not None and per_token.n == 3
    assert per_token.p50 == pytest.approx(15.0) and per_token.mean == pytest.approx(55 / 3)
    # request 0's count is missing, so it counts as none cached: (256 + 1024) / (100 + 300 + 1500)
    assert (block.cached_tokens, block.input_tokens) == (1280, 1900)
    assert block.prefix_cache_hit_share == pytest.approx(1280 / 1900)


def test_summary_has_the_block_only_when_a_server_reported_something(records):
    cols = RecordColumns.from_records(reported_records())
    assert summarize(cols).server_timing == server_timing(cols)
    assert "server_timing" not in summarize(RecordColumns.from_records(records)).model_dump(mode="json")
    # only the failed request carries a report: nothing to summarize
    only_failed = [dataclasses.replace(r, cached_tokens=5) if r.status != "ok" else r for r in records]
    assert server_timing(RecordColumns.from_records(only_failed)) is None


def test_cached_tokens_alone_give_a_hit_share_and_no_time_blocks(records):
    cached = [dataclasses.replace(r, cached_tokens=64) if r.request_id == 3 else r for r in records]
    block = server_timing(RecordColumns.from_records(cached))
    assert block is not None and block.reported == 1
    assert block.prefill_ms is None and block.decode_ms_per_output_token is None
    assert block.prefix_cache_hit_share == pytest.approx(64 / 1900)


def test_server_figures_stay_in_the_servers_tokens_under_option_b():
    """Under option B the metrics count with the reference tokenizer; the server's cache share and its time per
    token are still over the server's own counts (what it cached and generated)."""
    recs = [
        dataclasses.replace(r, ref_input_tokens=2 * r.input_tokens, ref_output_tokens=1) for r in reported_records()
    ]
    a = server_timing(RecordColumns.from_records(recs, "A"))
    b = server_timing(RecordColumns.from_records(recs, "B"))
    assert a is not None and b is not None
    assert (b.cached_tokens, b.input_tokens) == (1280, 1900) and b == a
