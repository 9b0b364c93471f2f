"""The rule that calls a difference between groups of runs significant, the 6.1 equivalence findings and the 6.4
checklist judged from constructed evidence, and suites compared level by level and on their figures (the statistics
themselves: tests/metrics/test_significance.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from infermeter.metrics.checklist import equivalence
from infermeter.metrics.compared import Group, Run
from infermeter.metrics.comparison import compare, runs_agree
from infermeter.metrics.significance import welch_difference
from infermeter.metrics.suite_comparison import (
    NO_HEADLINE,
    SINGLE,
    PlannedRun,
    Repeat,
    System,
    compare_figures,
    figure_unit,
    match_levels,
)
from infermeter.run_info import RunInfo


def _run(samples: dict[str, np.ndarray], out_tok_s: float = 100.0) -> Run:
    summary = SimpleNamespace(throughput=SimpleNamespace(output_tok_s=out_tok_s, req_s=1.0), duration_s=10.0)
    return Run(path=Path("x"), info=RunInfo(), summary=summary, samples=samples, request_hash="h")  # type: ignore


def _group(label: str, shift: float, runs: int, seed: int, n: int = 400, repeat: bool = False) -> Group:
    """Runs of lognormal samples (each run drawn anew, or the same draw `repeat`ed) moved by `shift`."""
    rng = np.random.default_rng(seed)
    made = []
    first = None
    for _ in range(runs):
        if first is None or not repeat:
            first = {m: rng.lognormal(3, 0.3, n) for m in ("ttft", "itl", "tpot", "e2e", "normalized")}
        made.append(_run({m: v + shift for m, v in first.items()}))
    return Group(label, made, {"system": label})


def test_a_large_consistent_shift_is_significant() -> None:
    base = _group("A", 0.0, 3, 1)
    c = compare([base, _group("B", 10.0, 3, 2)], base, reps=500)
    p50 = [r for r in c.rows if r.statistic == "P50"]
    assert p50 and all(r.significant and r.runs_agree for r in p50)


def test_noise_is_rarely_called_a_difference() -> None:
    """Twenty comparisons of groups drawn from one distribution (17 tests each): Holm's correction holds the chance
    of any false call near 5% a comparison, and the effect and run-by-run conditions lower it further."""
    falsely = 0
    for seed in range(20):
        base = _group("A", 0.0, 3, 100 + seed)
        c = compare([base, _group("B", 0.0, 3, 200 + seed)], base, reps=200)
        falsely += any(r.significant for r in c.rows)
    assert falsely <= 2


def test_a_difference_below_the_smallest_effect_is_not_significant() -> None:
    base = _group("A", 0.0, 3, 1, n=3000, repeat=True)
    c = compare([base, _group("B", 0.6, 3, 1, n=3000, repeat=True)], base, reps=1000)  # the same samples, +3%
    row = next(r for r in c.rows if r.metric == "ttft" and r.statistic == "P50")
    assert row.p_adjusted < 0.05 and row.runs_agree  # real and consistent, but below the smallest effect (5%)
    assert row.relative == pytest.approx(0.03, abs=0.002) and not row.large_enough and not row.significant


def test_runs_agree_only_when_every_run_is_beyond() -> None:
    assert runs_agree([1, 2, 3], [4, 5, 6]) is True
    assert runs_agree([1, 2, 5], [4, 5, 6]) is False
    assert runs_agree([1], [4, 5]) is None


def test_equivalence_names_what_differs() -> None:
    def run(seed: int, rate: float, boundary: str | None, hw: str | None, h: str) -> Run:
        info = RunInfo.model_validate(
            {
                "workload": {"name": "w", "seed": seed},
                "load": {"arrivals": {"kind": "poisson", "rate": rate}},
                "sut": {"boundary": boundary, "hardware": hw},
            }
        )
        r = _run({})
        r.info, r.request_hash = info, h
        return r

    a = Group("G1", [run(1, 5.0, "Model Engine", "H100", "x")], {})
    b = Group("G2", [run(2, 9.0, "Gateway", None, "y")], {})
    found = {f.text.split(":")[0]: f for f in equivalence([a, b])}
    assert not found["Identical workload"].met and "seeds 1, 2" in found["Identical workload"].reason
    assert not found["Equivalent SUT boundary"].met and "Gateway" in found["Equivalent SUT boundary"].reason
    assert not found["Comparable hardware (declared; normalized where it differs, 6.2)"].met
    assert not found["Same load model and parameters"].met
    same = {f.text: f.met for f in equivalence([a, Group("G3", [run(1, 5.0, "Model Engine", "H100", "x")], {})])}
    assert all(same.values())


# ----- 6.1's load and 6.4's checklist, judged from constructed evidence (tests/evidence.py)

EPOCH = "2026-01-01T00:00:00.000Z"
EPOCH_S = 1767225600.0  # EPOCH on the wall clock


def _read(run_info: RunInfo, start: float = 0.0, n: int = 10, rate: float = 10.0, ttft: float = 0.05) -> Run:
    """A run read as `compare` reads one (run.json's configuration parsed as cli.compare parses it): `n` requests
    at `rate` req/s from `start` s on the run clock, 64 tokens each, the first after `ttft` s."""
    from infermeter.cli.compare import _declared
    from infermeter.metrics import RecordColumns, summarize
    from tests.evidence import stream

    cols = RecordColumns.from_records(stream(n, rate=rate, start=start, ttft=ttft), "B")
    return Run.read(Path("x"), run_info, summarize(cols, "B"), cols, _declared(run_info))


def _groups(*runs: Run) -> list[Group]:
    from infermeter.metrics.compared import configuration

    return [Group(f"G{k}: g", [r], configuration(r.info)) for k, r in enumerate(runs, 1)]


def test_the_load_is_compared_by_meaning_not_wording() -> None:
    """A live run says "open-loop poisson at 0.757 req/s" (load.arrivals), its prediction "poisson at 0.757 req/s"
    (the workload's arrivals only): the same load.  A mutant comparing the descriptions calls them different."""
    from infermeter.metrics.checklist import same_load
    from tests.evidence import info

    poisson = {"kind": "poisson", "rate": 0.757, "description": "poisson at 0.757 req/s"}
    live = info(load={"description": "open-loop poisson at 0.757 req/s", "requests": 100, "arrivals": poisson})
    predicted = info(
        kind="simulated",
        load={"description": "poisson at 0.757 req/s", "requests": 100},
        workload={"arrivals": poisson},
    )
    same = same_load(_groups(_read(live), _read(predicted)))
    assert same.met is True and same.reason == "open loop, poisson at 0.757 req/s, 100 requests"
    faster = info(kind="simulated", load={"requests": 100}, workload={"arrivals": {**poisson, "rate": 0.8}})
    differ = same_load(_groups(_read(live), _read(faster)))
    assert differ.met is False and differ.reason.startswith("loads differ in rate: ")
    closed = info(load={"description": "open-loop poisson at 0.757 req/s", "requests": 100, "concurrency": 4})
    assert "loop" in same_load(_groups(_read(live), _read(closed))).reason


def test_a_prediction_and_the_live_run_of_its_requests_hold_the_same_load() -> None:
    """run.json as `predict` writes it (the arrivals in the workload block, "poisson at 0.757 req/s") and as a live
    run writes it (load.arrivals too, "open-loop poisson at 0.757 req/s"), the same 100 requests at the same times
    (one request hash): every 6.1 MUST on the workload and the load is met, and the 6.4 item naming differences names
    the systems' declarations alone, not the load (its wording differs, its parameters do not)."""
    from infermeter.metrics.checklist import differences_noted
    from tests.evidence import info

    poisson = {"kind": "poisson", "rate": 0.757, "description": "poisson at 0.757 req/s"}
    workload = {"name": "conversation", "seed": 42, "arrivals": poisson}
    live = info(
        sut={"software": "transformers serve 4.57"},
        workload=workload,
        load={"description": "open-loop poisson at 0.757 req/s", "requests": 100, "arrivals": poisson},
    )
    predicted = info(
        kind="simulated",
        sut={"model": "engine model", "url": None, "hardware": "1 x simulated engine", "software": "infermeter sim"},
        workload=workload,
        load={"description": "poisson at 0.757 req/s", "requests": 100},
    )
    groups = _groups(_read(live, n=100, rate=0.757), _read(predicted, n=100, rate=0.757))
    found = {f.text: f for f in equivalence(groups)}
    assert found["Identical workload: same requests in the same order, same seed"].met is True
    load = found["Same load model and parameters"]
    assert load.met is True and load.reason == "open loop, poisson at 0.757 req/s, 100 requests"
    noted = differences_noted(groups)
    assert noted.reason.startswith("differences: model: G1 'm' vs G2 'engine model'; hardware: ")
    assert "differ" not in noted.reason.split("software: ")[-1]  # no "(the load differs too)"
    faster = info(
        kind="simulated",
        sut=predicted.sut,
        load={"description": "poisson at 1 req/s", "requests": 100},
        workload={**workload, "arrivals": {**poisson, "rate": 1}},
    )
    other = _groups(_read(live, n=100, rate=0.757), _read(faster, n=100, rate=0.757))
    differ = next(f for f in equivalence(other) if f.text == "Same load model and parameters")
    assert differ.met is False and differ.reason == (
        "loads differ in rate: G1 open loop, poisson at 0.757 req/s, 100 requests | G2 open loop, poisson at 1 req/s, "
        "100 requests"
    )
    assert differences_noted(other).reason.endswith(" (the load differs too)")


def test_a_run_s_window_is_placed_on_the_wall_clock() -> None:
    """First submission at 5 s on the run clock, the last token 0.9 + 0.05 + 63 x 0.01 s later."""
    from tests.evidence import info

    run = _read(info(started_at=EPOCH), start=5.0)
    assert run.span is not None
    assert (run.span.start - EPOCH_S, run.span.end - EPOCH_S) == pytest.approx((5.0, 6.58))
    assert _read(info(kind="simulated", started_at=EPOCH)).span is None  # a virtual clock has no wall time


def test_tested_at_the_same_time_is_judged_from_the_windows_and_what_was_shared() -> None:
    """Emulated systems share the load generator's host: run one after the other they fail, interleaved they pass;
    live systems on different hosts are not verifiable apart; simulated ones need no shared time.  The constant
    it replaced (met True) fails the second assertion."""
    from infermeter.metrics.checklist import same_time
    from infermeter.metrics.compared import configuration
    from tests.evidence import info

    def run(kind: str, start: float, url: str = "http://10.0.0.2:8000") -> Run:
        return _read(info(kind=kind, started_at=EPOCH, sut={"url": url}), start=start)

    a, b = run("emulated", 0.0), run("emulated", 100.0)
    apart = same_time(_groups(a, b))
    assert apart.met is False and "98 s apart" in apart.reason and "load generator's own host" in apart.reason
    a2, b2 = run("emulated", 200.0), run("emulated", 50.0)  # A, B, B, A: the groups' spans overlap
    together = [Group("G1: a", [a, a2], configuration(a.info)), Group("G2: b", [b2, b], configuration(b.info))]
    found = same_time(together)
    assert found.met is True and "0 s apart" in found.reason
    remote = same_time(_groups(run("live", 0.0), run("live", 100.0, "http://10.0.0.3:8000")))
    assert remote.met is None and remote.status == "not verifiable" and "10.0.0.3" in remote.reason
    one_host = same_time(_groups(run("live", 0.0), run("live", 100.0)))
    assert one_host.met is False and "one host (10.0.0.2)" in one_host.reason
    assert same_time(_groups(run("simulated", 0.0), run("simulated", 100.0))).met is True


def test_production_representative_is_judged_from_the_declarations() -> None:
    """Safety systems off at a gateway fail (4.8.2), faults injected fail, an undeclared guardrail state is not
    verifiable, declared engines pass.  The constant it replaced (met False) fails the last assertion."""
    from infermeter.metrics.checklist import production_representative
    from tests.evidence import info

    def run(**sut: object) -> Run:
        return _read(info(sut={"guardrails": "none", "prefix_caching": "enabled", **sut}))

    gateway = production_representative(_groups(run(), run(boundary="Application Gateway")))
    assert gateway.met is False and "G2: safety systems off ('none') at the Application Gateway" in gateway.reason
    faults = production_representative(_groups(run(), run(faults=[{"kind": "error", "rate": 0.1}])))
    assert faults.met is False and "G2: 1 fault(s) injected" in faults.reason
    undeclared = production_representative(_groups(run(), run(guardrails=None)))
    assert undeclared.met is None and undeclared.reason.startswith("G2 declares no guardrails")
    filtered = run(boundary="Application Gateway", guardrails="Llama Guard 3 on input and output")
    assert production_representative(_groups(run(), filtered)).met is True


def test_differences_in_configuration_must_be_declared_to_be_noted() -> None:
    """A system that declares no software, or two servers that differ only in their URL, fail; a declared
    difference passes and is named.  The constant it replaced (met True) fails the first assertion."""
    from infermeter.metrics.checklist import differences_noted
    from tests.evidence import info

    def run(url: str = "http://10.0.0.2:8000", **sut: object) -> Run:
        return _read(info(sut={"url": url, "software": "vLLM 0.6", **sut}))

    lacking = differences_noted(_groups(run(), run(software=None)))
    assert lacking.met is False and lacking.reason.startswith("G2 declares no software: a difference there")
    unsaid = differences_noted(_groups(run(), run("http://10.0.0.3:8000")))
    assert unsaid.met is False and "state what differs" in unsaid.reason
    noted = differences_noted(_groups(run(), run("http://10.0.0.3:8000", software="SGLang 0.3")))
    assert noted.met is True and noted.reason == "differences: software: G1 'vLLM 0.6' vs G2 'SGLang 0.3'"
    assert differences_noted(_groups(run(), run())).reason == "no difference in the systems' configuration"


def test_tokens_per_gpu_second_need_no_price() -> None:
    """6.2: --gpus 2 without --gpu-price halves the throughput per GPU (the table read the count only beside a
    price, through the energy block)."""
    from infermeter.report.comparison import normalization_table
    from tests.evidence import info

    runs = [_read(info(config={"monitors": {"gpus": gpus, "gpu_price": None}})) for gpus in (2, 4)]
    tok_s = [r.summary.throughput.output_tok_s for r in runs]
    table = normalization_table(compare(_groups(*runs), _groups(*runs)[0], reps=200))
    assert table is not None
    assert [row[1:3] for row in table.rows] == [
        ["2", f"{tok_s[0] / 2:.2f} (1 run)"],
        ["4", f"{tok_s[1] / 4:.2f} (1 run)"],
    ]
    assert table.rows[0][3] == "no price declared (--gpu-price)"


# ----- suites compared: levels matched by their place in the plan, suite figures with and without repeats


def _system(
    label: str,
    *repeats: tuple[list[tuple[str, str | None]], dict[str, float]],
    headline: dict[str, str] | None = None,
) -> System:
    return System(
        label,
        "tradeoff",
        [
            Repeat(
                Path(label) / f"repeat-{k}",
                [PlannedRun(key, key, level, Path(key)) for key, level in runs],
                figs,
                {n: u for n, u in (headline or {}).items() if n in figs},
            )
            for k, (runs, figs) in enumerate(repeats, 1)
        ],
    )


def test_levels_are_matched_by_level_then_key_then_position() -> None:
    """Named levels pair whatever the keys hold (a rate); levels one suite alone ran are listed, not compared;
    suite.json files without levels pair by key when the keys agree, else by position in the plan."""
    a = _system("A", ([("r8", "10%"), ("r16", "20%"), ("s3", "probe 3")], {}), ([("r8", "10%")], {}))
    b = _system("B", ([("r9.6", "10%"), ("r19.2", "20%"), ("s4", "probe 4")], {}))
    m = match_levels([a, b])
    assert m.by == "level" and [lv.name for lv in m.levels] == ["10%", "20%"]
    assert [len(lv.runs[0]) for lv in m.levels] == [2, 1]  # both repeats of A (system 0) ran 10%
    assert [(lv.name, list(lv.runs)) for lv in m.unmatched] == [("probe 3", [0]), ("probe 4", [1])]
    old = match_levels(
        [_system("A", ([("lo", None), ("hi", None)], {})), _system("B", ([("lo", None), ("hi", None)], {}))]
    )
    assert old.by == "key" and [lv.name for lv in old.levels] == ["lo", "hi"]
    search = match_levels(
        [_system("A", ([("r8", None), ("r16", None)], {})), _system("B", ([("r8", None), ("r4", None)], {}))]
    )
    assert search.by == "position" and [lv.name for lv in search.levels] == ["position 1", "position 2"]
    assert [r.key for r in search.levels[1].runs[1]] == ["r4"]


def test_suite_figures_over_repeats_get_a_welch_ci_and_test() -> None:
    """Three repeats a side, 10, 12, 14 against 20, 22, 24: means 12 and 22 with t(0.975, 2) x 2 / sqrt(3) = 4.968
    either side; the difference 10 with Welch's df = 4, t(0.975, 4) x sqrt(8/3) = 4.534 either side, p = 0.0036."""
    a = _system("A", *[([], {"peak_output_tok_s": v, "knee_rate": 4.0}) for v in (10.0, 12.0, 14.0)])
    b = _system("B", *[([], {"peak_output_tok_s": v}) for v in (20.0, 22.0, 24.0)])
    fc = compare_figures([a, b], 0)
    (row,) = fc.rows
    assert (row.a.mean, row.b.mean) == (12.0, 22.0)
    assert (row.a.lo, row.a.hi) == pytest.approx((7.031725, 16.968275))
    assert (row.difference.diff, row.difference.lo, row.difference.hi) == pytest.approx((10.0, 5.466084, 14.533916))
    assert row.difference.p == pytest.approx(0.0036022, rel=1e-4) and row.p_adjusted == row.difference.p
    assert row.repeats_agree and row.significant
    assert fc.missing == ["knee_rate: none in G2"] and fc.notes == [f"G1, G2: {NO_HEADLINE}"]


def test_single_suites_give_a_plain_difference_and_say_why() -> None:
    a = _system("A", ([], {"peak_output_tok_s": 600.0, "levels": 12}))
    b = _system("B", ([], {"peak_output_tok_s": 632.0, "levels": 12}))
    fc = compare_figures([a, b], 0)
    peak = fc.rows[0]
    assert peak.difference.diff == 32.0 and peak.difference.lo is None and peak.difference.p is None
    assert peak.relative == pytest.approx(32 / 600) and not peak.significant
    assert fc.notes == [f"G1, G2: {NO_HEADLINE}", SINGLE]
    assert [figure_unit(n) for n in ("peak_output_tok_s", "knee_rate", "warm_hit_rate", "itl_p50_ms_50", "k")] == [
        "tok/s",
        "req/s",
        "fraction",
        "ms",
        "",
    ]


def test_welch_difference_by_hand_with_unequal_spreads() -> None:
    """10, 12, 14 against 20, 30: se = sqrt(4/3 + 50/2) = 5.1316, Welch's df = 1.108, half-width 51.952."""
    d = welch_difference([10.0, 12.0, 14.0], [20.0, 30.0])
    assert d.diff == 13.0 and (d.lo, d.hi) == pytest.approx((13 - 51.951994, 13 + 51.951994))
    assert d.p == pytest.approx(0.2193200, rel=1e-5)


# ----- suites compared level by level: 6.1 judged on the plan, systems by index, headline figures


def _equivalence_by_name(findings: list) -> dict:  # type: ignore[type-arg]
    return {f.text.split(":")[0].split(" (")[0]: f for f in findings}


def test_a_suite_level_is_judged_on_the_plan_not_on_the_absolute_load() -> None:
    """One level ('10%') of two suites: the same ten requests sent at each system's own rate (2 and 2.4 req/s) are
    the same workload and the same load model at the same level, the absolute rates stated; the same runs compared
    as plain runs fail both.  A mutant judging a suite's level as plain runs (the plan ignored: send times in the
    hash, the rate compared) fails the first two assertions."""
    from infermeter.metrics.checklist import PlanMatch
    from tests.evidence import info

    def run(rate: float, level: str | None = "10%", **load: object) -> Run:
        arrivals = {"kind": "poisson", "rate": rate}
        r = _read(info(load={"description": "x", "requests": 10, "arrivals": arrivals, **load}), rate=rate)
        r.level = level
        return r

    a, b = run(2.0), run(2.4)
    plan = PlanMatch("10%", "level")
    found = _equivalence_by_name(equivalence(_groups(a, b), plan))
    workload, load = found["Identical workload"], found["Same load model at the same level of the plan"]
    assert workload.met is True and "sent them at its own rate for the level (10, 10 requests)" in workload.reason
    assert load.met is True and load.must
    assert load.reason == (
        "level '10%' of the plan (suite.json) in every run; load model open loop, poisson in every run; the absolute "
        "load, set by each system's own capacity (not judged): G1 open loop, poisson at 2 req/s, 10 requests | G2 "
        "open loop, poisson at 2.4 req/s, 10 requests"
    )
    plain = _equivalence_by_name(equivalence(_groups(a, b)))
    assert plain["Identical workload"].met is False and plain["Same load model and parameters"].met is False
    closed = _equivalence_by_name(equivalence(_groups(a, run(2.0, concurrency=4)), plan))
    assert closed["Same load model at the same level of the plan"].met is False
    assert "load models differ in loop" in closed["Same load model at the same level of the plan"].reason
    other = _equivalence_by_name(equivalence(_groups(a, run(2.4, "20%")), plan))
    assert other["Same load model at the same level of the plan"].met is False
    unnamed = [run(2.0, None), run(2.4, None)]
    by_position = _equivalence_by_name(equivalence(_groups(*unnamed), PlanMatch("position 1", "position")))
    assert by_position["Same load model at the same level of the plan"].met is None
    by_key = _equivalence_by_name(equivalence(_groups(*unnamed), PlanMatch("level-10pct", "key")))
    assert by_key["Same load model at the same level of the plan"].met is True


def test_a_suite_level_sends_heads_of_one_sequence() -> None:
    """Two systems loaded for one level's time at their own rates send different counts: the same workload when the
    shorter run's requests are the longer's first ones, not when a request differs.  A mutant comparing the whole
    request sets (the count counted) fails the first assertion."""
    from infermeter.metrics.checklist import PlanMatch, same_requests
    from tests.evidence import info

    plan = PlanMatch("10%", "level")
    short, long = _read(info(), n=10, rate=2.0), _read(info(), n=14, rate=2.8)
    found = same_requests(_groups(short, long), plan)
    assert found.met is True and "the first 10 requests" in found.reason and "(10, 14 requests)" in found.reason
    other = _read(info(), n=14, rate=2.8)
    assert other.sent is not None
    other.sent.inputs[3] += 1  # the fourth request of the longer run is another request
    assert same_requests(_groups(short, other), plan).met is False


def test_same_test_duration_is_judged_on_the_configured_bound() -> None:
    """Ten requests each (load.requests), one system answering every request 5 s later: the bound is the same,
    though the measured windows (0.9 + 0.05 + 0.63 = 1.58 s against 6.58 s) are 76% apart; a mutant judging the
    measured windows fails the first assertion.  Configured durations of 60 and 90 s fail; runs without either
    bound are judged on the span of their scheduled sends (0.9 s at 10 req/s against 1.8 s at 5)."""
    from infermeter.metrics.checklist import same_duration
    from tests.evidence import info

    fast, slow = _read(info(), ttft=0.05), _read(info(), ttft=5.05)
    counted = same_duration(_groups(fast, slow))
    assert counted.met is True
    assert counted.reason.startswith("judged on the configured request count (load.requests): 100-100 requests (0%")
    assert "the measured windows (1.6-6.6 s)" in counted.reason
    timed = same_duration(_groups(_read(info(load={"duration_s": 60.0})), _read(info(load={"duration_s": 90.0}))))
    assert timed.met is False and "configured duration (load.duration_s): 60-90 s (33% apart" in timed.reason
    unbounded = info(load={"requests": None})
    sent = same_duration(_groups(_read(unbounded, rate=10.0), _read(unbounded, rate=5.0)))
    assert sent.met is False and "span of scheduled send times: 0.9-1.8 s (50% apart" in sent.reason


def test_a_guardrail_declaration_is_disabled_by_its_first_word_only() -> None:
    """ "offline moderation" is a guardrail (the prefix match read it as "off"); "none", "No guardrails", "off:
    tested raw" and "Disabled." say there is none."""
    from infermeter.metrics.checklist import _disabled

    assert [_disabled(t) for t in ("none", "No guardrails", "off: tested raw", "Disabled.", " NONE ")] == [True] * 5
    assert [_disabled(t) for t in ("offline moderation", "nonstop filter", "Llama Guard 3", "")] == [False] * 4


def test_levels_named_twice_in_one_suite_are_not_pooled_as_repeats() -> None:
    """A suite that names '10%' for two of its runs: pairing by level would pool them as two repeats of one level;
    the matching falls back to the keys (the same in both suites) and says why.  The old matching fails the
    first assertion."""
    a = _system("A", ([("r8", "10%"), ("r9", "10%")], {}))
    b = _system("B", ([("r8", "10%"), ("r9", "20%")], {}))
    m = match_levels([a, b])
    assert m.by == "key" and [lv.name for lv in m.levels] == ["r8", "r9"]
    assert all(len(runs) == 1 for lv in m.levels for runs in lv.runs.values())
    assert m.notes == [
        f"G1 ({Path('A') / 'repeat-1'}) names level '10%' more than once: runs paired by key instead (a level must "
        "name one run of a suite)"
    ]


def test_systems_are_known_by_their_index_not_their_label() -> None:
    """Two systems that print alike (the same label) are two systems: keyed by label they were one, and every
    level was 'ran by one system alone'."""
    same = match_levels([_system("S", ([("r", "10%")], {})), _system("S", ([("r", "10%")], {}))])
    assert [list(lv.runs) for lv in same.levels] == [[0, 1]] and same.unmatched == []


def test_only_the_headline_figures_are_compared_with_their_units() -> None:
    """Each suite names its headline figures with units (analysis.headline): their intersection is compared, a
    figure one side names alone is listed, and the fits' bookkeeping (levels, fit_r2) is left out; a suite.json
    written before headlines falls back to every numeric figure, units read from the names, and says so.  The old
    comparison (every numeric figure) fails the first assertion."""
    units = {"max_output_tok_s": "tok/s", "knee_rate": "req/s"}
    figures = {"max_output_tok_s": 600.0, "knee_rate": 4.0, "levels": 12.0, "fit_r2": 0.9}
    a = _system("A", ([], figures), headline=units)
    b = _system("B", ([], {"max_output_tok_s": 640.0, "levels": 12.0, "fit_r2": 0.8}), headline=units)
    fc = compare_figures([a, b], 0)
    assert [(r.name, r.unit, r.system) for r in fc.rows] == [("max_output_tok_s", "tok/s", 1)]
    assert fc.missing == ["knee_rate: none in G2"] and fc.notes == [SINGLE]
    old = _system("B", ([], {"max_output_tok_s": 640.0, "levels": 12.0, "fit_r2": 0.8}))
    fallback = compare_figures([a, old], 0)
    assert [(r.name, r.unit) for r in fallback.rows] == [("max_output_tok_s", "tok/s"), ("levels", ""), ("fit_r2", "")]
    assert fallback.notes == [f"G2: {NO_HEADLINE}", SINGLE]


def test_throughput_rows_carry_a_welch_ci() -> None:
    """Output throughput 10, 12, 14 against 20, 22, 24 tok/s over three runs each: the difference 10 with Welch's
    CI (df 4: +/- 4.534), as the suite figures have it; the old row had no CI."""
    rng = np.random.default_rng(1)
    samples = {m: rng.lognormal(3, 0.3, 50) for m in ("ttft", "itl", "tpot", "e2e", "normalized")}
    base = Group("A", [_run(samples, v) for v in (10.0, 12.0, 14.0)], {})
    other = Group("B", [_run(samples, v) for v in (20.0, 22.0, 24.0)], {})
    row = next(r for r in compare([base, other], base, reps=200).rows if r.metric == "output_tok_s")
    assert (row.diff, row.lo, row.hi) == pytest.approx((10.0, 5.466084, 14.533916))
    assert row.p == pytest.approx(0.0036022, rel=1e-4)


def test_tokens_per_gpu_second_come_from_the_energy_block_where_it_counted_the_declared_gpus() -> None:
    """The energy block's figure (its own window) where it counted the 2 declared GPUs; computed from the
    throughput for a run whose block counted another number (written before it followed --gpus alone).  A mutant
    that always recomputes fails the first row."""
    from infermeter.metrics.summary_model import Energy
    from infermeter.report.comparison import normalization_table
    from tests.evidence import info

    def run(energy_gpus: int) -> Run:
        r = _read(info(config={"monitors": {"gpus": 2}}))
        r.summary.energy = Energy.model_validate(
            {
                "window_s": 2.0,
                "sources": {},
                "energy_j": None,
                "joules_per_output_token": None,
                "notes": [],
                "gpus": energy_gpus,
                "output_tok_per_gpu_s": 123.0,
            }
        )
        return r

    runs = [run(2), run(1)]
    table = normalization_table(compare(_groups(*runs), _groups(*runs)[0], reps=200))
    assert table is not None
    assert [row[2] for row in table.rows] == [
        "123.00 (1 run)",
        f"{runs[1].summary.throughput.output_tok_s / 2:.2f} (1 run)",
    ]


def test_run_json_configuration_is_read_through_its_typed_models() -> None:
    """--gpus and --gpu-price through config.sections.Monitors, strictly: `gpus: true` (a lax int reads 1) declares
    no GPUs while the price still counts; no configuration at all (a simulated run) declares nothing.  The emulator's
    settings come through EmulatorConfig: a multi-bin engine reads as the online edges it serves with."""
    from infermeter.cli.compare import _declared
    from tests.evidence import info

    assert _declared(info(config={"monitors": {"gpus": 2, "gpu_price": 2.5}})) is not None
    declared = _declared(info(config={"monitors": {"gpus": True, "gpu_price": 2.5}}))
    assert declared is not None and (declared.gpus, declared.gpu_price) == (None, 2.5)
    assert _declared(info()) is None
    emulated = info(kind="emulated", config={"emulator": {"engine": {"scheduler": "multi_bin_dynamic"}}})
    settings = _declared(emulated)
    assert settings is not None and settings.emulator["emulator.engine.scheduler.bin_edges"] == "'online'"
    assert not any("api_key" in k or "grpc_port" in k for k in settings.emulator)


def test_the_inter_token_figure_is_named_by_the_runs_itl_option() -> None:
    """Option A's inter-chunk times are the "Time Between Chunks" (the IETF draft, 4.6.3), in every table of a
    comparison; option B's stay ITL.  The fixed "ITL (ms)" label fails the first assertion."""
    from infermeter.metrics import RecordColumns, summarize
    from infermeter.report.comparison import means_table, significance_table
    from tests.evidence import info, stream

    def run(option: str) -> Run:
        cols = RecordColumns.from_records(stream(10), "B")
        run_info = info(itl_option=option)
        return Run.read(Path("x"), run_info, summarize(cols, option), cols)  # type: ignore[arg-type]

    a = [run("A"), run("A")]
    c = compare(_groups(*a), _groups(*a)[0], reps=200)
    assert {row[1] for row in significance_table(c).rows if "(ms)" in row[1] and "TT" not in row[1]} >= {
        "Time Between Chunks (ms)"
    }
    assert "ITL (ms)" not in {row[1] for row in significance_table(c).rows}
    assert "Time Between Chunks P99 (ms)" in means_table(c).headers
    b = [run("B"), run("B")]
    assert "ITL (ms)" in {row[1] for row in significance_table(compare(_groups(*b), _groups(*b)[0], reps=200)).rows}


def test_repeat_directories_are_named_by_ascii_digits(tmp_path: Path) -> None:
    """repeat-2 and repeat-10 in numeric order; "repeat-²" (str.isdigit takes it, int() raises) and "repeat-x"
    are no repeats."""
    from infermeter.suites.execute import repeat_dirs

    for name in ("repeat-10", "repeat-2", "repeat-²", "repeat-x"):
        (tmp_path / name).mkdir()
    assert [p.name for p in repeat_dirs(tmp_path)] == ["repeat-2", "repeat-10"]


def test_welch_difference_of_nothing_is_nan_without_a_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = welch_difference([], [1.0, 2.0])
    assert np.isnan(d.diff) and (d.lo, d.hi, d.p) == (None, None, None)
