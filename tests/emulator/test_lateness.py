"""The emulator keeps score of its own punctuality: every token's lateness against its timeline in /metrics, and a
log line when a window's tokens were late more than 1% of the time."""

import asyncio
import re

import pytest

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.emulator.engine_loop import LATE_BUCKETS, LATE_S, REPORT_S, Lateness
from infermeter.load import LoadPattern
from tests.emulator.test_emulator import metric, run_requests, scrape
from tests.prompts import request


def test_a_window_with_late_tokens_is_reported_once_a_punctual_one_never():
    late = Lateness()
    assert late.behind(REPORT_S) is None  # the first window: nothing handed out yet
    for _ in range(98):
        late.add(0.0002)
    late.add(LATE_S * 2)
    late.add(LATE_S * 3)
    assert late.tokens == 100 and late.late == 2 and late.counts[late.bounds.index(0.00025)] == 98
    assert late.total_s == pytest.approx(98 * 0.0002 + LATE_S * 5)
    message = late.behind(2 * REPORT_S)
    assert message is not None and "2 of 100 tokens (2.0%)" in message
    assert late.behind(2 * REPORT_S + 1) is None  # at most once per window
    late.add(LATE_S * 2)
    for _ in range(200):
        late.add(0.0)
    assert late.behind(3 * REPORT_S) is None  # 1 of 201: under 1%


def test_metrics_count_every_token_the_engine_handed_out():
    with running_emulator(EmulatorConfig(speed=10)) as url:
        reqs = [request(i, 16, 8) for i in range(6)]
        records = asyncio.run(run_requests(url, reqs, LoadPattern(concurrency=3)))
        text = asyncio.run(scrape(url))
    assert [r.status for r in records] == ["ok"] * 6 and sum(r.output_tokens for r in records) == 48
    assert metric(text, "infermeter:token_lateness_seconds_count") == 48
    buckets = {
        le: float(v)
        for le, v in re.findall(
            r'^infermeter:token_lateness_seconds_bucket\{le="([^"]+)",[^}]*\} ([0-9.e+-]+)$', text, re.M
        )
    }
    assert list(buckets) == [f"{b:g}" for b in LATE_BUCKETS] + ["+Inf"] and buckets["+Inf"] == 48
    counts = list(buckets.values())
    assert counts == sorted(counts)  # cumulative
    # "late" is over LATE_S, which is one of the bucket bounds: the counter is what the histogram puts above it
    late = metric(text, "infermeter:tokens_late_total")
    assert late == 48 - buckets[f"{LATE_S:g}"], (late, buckets)
    lateness_sum = metric(text, "infermeter:token_lateness_seconds_sum")
    assert lateness_sum is not None and lateness_sum >= 0
    assert metric(text, "infermeter:timeline_resets_total") is not None
    assert metric(text, "vllm:inter_token_latency_seconds_count") == 6 * 7  # the batch histogram: every gap
