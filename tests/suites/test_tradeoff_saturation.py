"""5.3's saturation point and knee judged from constructed levels (no server, no clock): a level is past saturation
when its queue grows, it falls behind its arrivals, it delivers clearly less output than was offered, or its achieved
throughput falls from the previous level's; a judgment resting on a level of few requests carries a sample-size
warning; where no level can show it the verdict is "not verifiable"."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.metrics.curves import saturation_point
from infermeter.metrics.steady_state import output_flow
from infermeter.suite_result import Analysis
from infermeter.suites.levels import Level, measure
from infermeter.suites.registry import get_suite
from infermeter.suites.tradeoff import SATURATION_TOLERANCE, spans_to_saturation
from tests.evidence import fake_run, info, stream


def _level(rate: float, n: int, output: int = 10, slowdown: float = 0.0) -> Level:
    recs = stream(n, rate=rate, output=output, slowdown=slowdown)
    load = {"description": f"open-loop poisson at {rate:g} req/s", "arrivals": {"kind": "poisson", "rate": rate}}
    return measure(rate, fake_run(recs, info(kind="emulated", load=load), key=f"r{rate:g}"))


def _analysis(levels: list[tuple[int, Level]]) -> Analysis:
    suite = get_suite("tradeoff")
    return suite.analyze({"capacity": 1.0, "source": "given", "levels": levels}, suite.params.build({}, False))


def _findings(levels: list[tuple[int, Level]]) -> dict[str, str]:
    """The suite's findings by what each judges ("Knee point", "Saturation point", ...)."""
    return {f.split(":")[0]: f for f in _analysis(levels).findings}


def test_output_flow_holds_delivered_against_offered_tokens_each_over_its_own_span() -> None:
    """Three requests of 10 tokens sent at 0, 1, 2 s and finished at 1, 3, 5 s: 20 tokens over 2 s offered, 20 over
    4 s delivered; a failed request counts its max_tokens as asked for and delivers nothing."""
    flow = output_flow(np.array([0.0, 1.0, 2.0]), np.array([10, 10, 10]), np.array([1.0, 3.0, 5.0]), np.full(3, 10))
    assert flow is not None and (flow.offered_tok_s, flow.delivered_tok_s, flow.ratio) == (10.0, 5.0, 0.5)
    failed = output_flow(
        np.array([0.0, 1.0, 2.0, 3.0]), np.array([10, 10, 10, 30]), np.array([1.0, 2.0, 3.0, np.inf]), np.full(4, 10)
    )
    assert failed is not None and (failed.offered_tok_s, failed.delivered_tok_s) == (50 / 3, 10.0)
    assert output_flow(np.array([0.0, 1.0]), np.array([10, 10]), np.array([1.0, 2.0]), np.full(2, 10)) is None


def test_every_queue_growing_and_output_short_of_the_offer_saturates_at_the_first_level() -> None:
    """Each request answered 0.25 s later than the one before it (a queue that grows), at 2, 4 and 6 req/s: sent
    every 1/r s, finished every 1/r + 0.25 s, so 10-token requests deliver 10 / (1/r + 0.25) tok/s of the 10 r offered:
    13.3 of 20 (66.7%) at 2 req/s.  Achieved throughput rises level on level, so the old rule ("first decreases")
    never fires: the suite said "not reached" of exactly this evidence."""
    levels = [(10 * k, _level(rate, 60, slowdown=0.25)) for k, rate in enumerate((2.0, 4.0, 6.0), 1)]
    achieved = [lv.output_tok_s for _, lv in levels]
    assert achieved == sorted(achieved) and saturation_point(achieved, SATURATION_TOLERANCE) is None
    assert all(lv.growing for _, lv in levels)
    flow = levels[0][1].flow
    assert flow is not None and flow.offered_tok_s == pytest.approx(20.0) and flow.ratio == pytest.approx(2 / 3)
    found = _findings(levels)
    sat = found["Saturation point"]
    assert sat.startswith("Saturation point: 2 req/s (queue grows (")
    assert sat.endswith(
        "; completions 66.7% of arrivals; delivered 13 of the 20 output tok/s offered (66.7%, under 90%); the lowest "
        "level run: saturation may begin below it)"
    )
    assert "[sample size" not in sat  # 60 requests a level
    assert _analysis(levels).figures["saturation_rate"] == 2.0
    span = spans_to_saturation(levels)  # 5.3.2: from 10% of capacity to saturation
    assert span.met is True and span.reason.startswith("10%..30% of capacity; saturated from 10% (queue grows (")
    assert spans_to_saturation([(p + 10, lv) for p, lv in levels]).met is False  # from 20%: no low load


def test_achieved_throughput_falling_from_one_level_to_the_next_still_marks_saturation() -> None:
    """No queue grows and every level delivers what it was offered, but achieved throughput falls: 60 requests of 10
    tokens at 2 req/s, then 90 of 5 at 3 req/s.  Steady windows (the last 90% of sending): 2.95-29.5 s holds the
    tokens of requests 6-58 (530 over 26.55 s), 2.967-29.667 s those of requests 9-88 (400 over 26.7 s)."""
    first, second = _level(2.0, 60), _level(3.0, 90, output=5)
    assert first.output_tok_s == pytest.approx(530 / 26.55) and second.output_tok_s == pytest.approx(400 / 26.7)
    levels = [(10, _level(1.0, 40)), (20, first), (30, second)]
    assert not any(lv.growing for _, lv in levels)
    assert [lv.flow.ratio for _, lv in levels if lv.flow] == pytest.approx([1.0, 1.0, 1.0])
    found = _findings(levels)
    assert found["Saturation point"] == (
        "Saturation point: 3 req/s (achieved throughput fell from 20 tok/s at 2 req/s to 15 tok/s (by more than 3%))"
    )
    assert found["First saturated level (5.2.3.1)"].endswith("none (no level's queue grew or fell behind its arrivals)")


def test_judgments_resting_on_a_level_of_few_requests_carry_a_sample_size_warning() -> None:
    """Twelve requests at 0.5 req/s, then 60 and 120: nothing saturates and no P99 doubles; both judgments rest on
    every level, the small one among them.  A knee at the small level is warned of too; 40 requests are not."""
    small = _level(0.5, 12)
    levels = [(10, small), (20, _level(2.0, 60)), (30, _level(4.0, 120))]
    found = _findings(levels)
    warning = (
        " [sample size: level at 0.5 req/s: only 12 completed requests (under 30): its percentiles and trends are not "
        "reliable]"
    )
    assert found["Knee point"] == "Knee point: none (E2E P99 never exceeded 2x its minimum)" + warning
    assert found["Saturation point"].startswith("Saturation point: not reached (no level's queue grew")
    assert found["Saturation point"].endswith(warning)
    enough = _findings([(10, _level(1.0, 40)), (20, _level(2.0, 60))])
    assert "[sample size" not in enough["Knee point"] and "[sample size" not in enough["Saturation point"]
    slow = _level(1.0, 12, output=100)  # E2E 0.05 + 99 x 0.01 s against 0.14 s: the knee is the small level
    knee = _findings([(10, _level(2.0, 60)), (20, slow)])["Knee point"]
    assert knee == (
        "Knee point: 1 req/s (E2E P99 1040 ms exceeds 2x the minimum, 140 ms at 2 req/s) [sample size: level at 1 "
        "req/s: only 12 completed requests (under 30): its percentiles and trends are not reliable]"
    )


def test_a_level_too_small_to_show_saturation_makes_it_not_verifiable() -> None:
    """Two requests give no queue trend and no rates: where no other level saturated, whether the sweep reached
    saturation is not verifiable (neither "not reached" nor met); one level alone has no knee."""
    levels = [(10, _level(1.0, 40)), (20, _level(5.0, 2))]
    found = _findings(levels)
    assert found["Saturation point"].startswith(
        "Saturation point: not verifiable (the levels at 5 req/s sent under 3 requests, too few for a queue trend or "
        "a rate; at the others no level's queue grew"
    )
    span = spans_to_saturation(levels)
    assert (
        span.met is None
        and span.reason == "10%..20% of capacity; no measured level saturated; 20% sent under 3 requests"
    )
    assert _findings([(10, _level(1.0, 40))])["Knee point"] == (
        "Knee point: not verifiable (1 level with an E2E P99: a knee needs a P99 at two levels or more)"
    )
