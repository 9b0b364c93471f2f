"""Every requirement the draft's tests judge, held against constructed evidence (the IETF draft, sections 5.1-5.10 and
exo bench's grid): for each suite, runs that meet everything it asks, then for each requirement one change to the
evidence that makes exactly that requirement fail (or "not verifiable" where the evidence cannot exist).  A suite that
gains a requirement without a failing case here fails `test_every_requirement_has_a_failing_case`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from infermeter.metrics.summary_model import CounterDelta, Gauge, ServerMetrics
from infermeter.records import RequestRecord
from infermeter.suite_result import Analysis, Requirement
from infermeter.suites.lab import Run
from infermeter.suites.levels import measure
from infermeter.suites.probe import Capacity
from infermeter.suites.registry import get_suite
from infermeter.workload.spec import generate
from infermeter.workload.standard import CODE_COMPLETION
from tests.evidence import fake_run, info, stream


@dataclass
class Case:
    """A suite's measured runs and parameters, and optionally a change to what its analysis reported."""

    measured: Any
    params: Any
    edit: Callable[[Analysis], None] | None = None


@dataclass
class Break:
    """A change to the passing evidence, and what the requirement it targets must then say."""

    change: Callable[[Case], None]
    expect: bool | None = False


def swap(case: Case, other: Case) -> None:
    """Replace the passing evidence's runs with another case's."""
    case.measured = other.measured


def judged(name: str, case: Case, quick: bool = False) -> dict[str, Requirement]:
    suite = get_suite(name)
    analysis = suite.analyze(case.measured, case.params)
    if case.edit is not None:
        case.edit(analysis)
    return {r.text: r for r in suite.requirements(case.measured, analysis, case.params, quick)}


def at(started: int) -> str:
    """A run's start, `started` seconds into a day (run.json's ISO 8601, which sorts as it reads)."""
    return f"2026-01-01T{started // 3600:02d}:{started // 60 % 60:02d}:{started % 60:02d}.000Z"


def emulated(records: list[RequestRecord], key: str = "run", **blocks: Any) -> Run:
    return fake_run(records, info(kind="emulated", **blocks), key=key)


def open_loop(rate: float, started: int = 0, **blocks: Any) -> dict[str, Any]:
    return {
        "load": {"description": f"open-loop poisson at {rate:g} req/s", "arrivals": {"kind": "poisson", "rate": rate}},
        "started_at": at(started),
        **blocks,
    }


# ----- 5.1 TTFT


def ttft_case() -> Case:
    params = get_suite("ttft").params.build({}, False)
    return Case(fake_run(stream(10_000, rate=100.0, output=2)), params)


def _varied(case: Case) -> None:
    recs = stream(10_000, rate=100.0, output=2)
    for k, r in enumerate(recs):
        r.input_tokens = 100 if k % 2 else 3000
    case.measured = fake_run(recs)


def _drop_table_2(analysis: Analysis) -> None:
    analysis.tables = [t for t in analysis.tables if not t.caption.startswith("Table 2")]


def _vary_without_table_2(case: Case) -> None:
    _varied(case)
    case.edit = _drop_table_2


def _table_1_without_count(analysis: Analysis) -> None:
    analysis.tables[0].rows = [r for r in analysis.tables[0].rows if r[0] != "Requests"]


TTFT = {
    "at least 1000 requests for the P99": Break(lambda c: setattr(c, "measured", fake_run(stream(999, output=2)))),
    "at least 10000 requests for the P99.9": Break(lambda c: setattr(c, "measured", fake_run(stream(9_999, output=2)))),
    "P50, P90, P95, P99, P99.9, mean, min and max reported": Break(
        lambda c: setattr(c, "measured", fake_run(stream(10_000, status="error", error="HTTP 500")))
    ),
    "the sample count is stated": Break(lambda c: setattr(c, "edit", _table_1_without_count)),
    "results in tabular form": Break(lambda c: setattr(c, "edit", lambda a: setattr(a, "tables", []))),
    "TTFT by input length when input lengths vary": Break(_vary_without_table_2),
    "a histogram or CDF of TTFT": Break(lambda c: setattr(c, "edit", lambda a: setattr(a, "plots", []))),
}


# ----- 5.2 throughput


def _level(rate: float, seconds: float, **kw: Any) -> Any:
    recs = stream(int(rate * seconds), rate=rate, output=10, itl=0.01, **kw)
    return measure(rate, emulated(recs, key=f"r{rate:g}", **open_loop(rate)))


def throughput_case(seconds: float = 302.0) -> Case:
    from infermeter.suites.throughput import Search

    ok, bad = _level(1.0, seconds), _level(2.0, seconds, slowdown=0.05)
    assert not ok.saturation(None) and bad.saturation(None)
    search = Search(levels=[(ok, []), (bad, bad.saturation(None))], sustainable=ok)
    return Case(search, get_suite("throughput").params.build({}, False))


def _unsteady(case: Case) -> None:
    recs = stream(100, rate=1.0, output=10) + stream(600, rate=3.0, output=10, start=100.0, first_id=100)
    level = measure(1.0, emulated(recs, **open_loop(1.0)))
    assert not level.saturation(None) and not level.steady.stable
    case.measured.levels[0] = (level, [])
    case.measured.sustainable = level


def _live_without_gpus(case: Case) -> None:
    level = case.measured.sustainable
    level.run.info = info(**open_loop(1.0))


THROUGHPUT = {
    "test duration of at least 60 seconds per level": Break(lambda c: swap(c, throughput_case(seconds=50.0))),
    "binary search to the maximum sustainable load": Break(lambda c: c.measured.levels.pop()),
    "steady state at the level reported: queue stable, throughput stable, the first 10% excluded": Break(_unsteady),
    "tokens per GPU-second (output throughput divided by the GPU count)": Break(_live_without_gpus),
    "300 seconds per level for stable measurement": Break(lambda c: swap(c, throughput_case(seconds=120.0))),
}


# ----- 5.3 tradeoff


def tradeoff_case(pcts: tuple[int, ...] = tuple(range(10, 130, 10))) -> Case:
    capacity = 2.0
    levels = []
    for i, pct in enumerate(pcts):
        rate = capacity * pct / 100
        slow = 0.02 if pct >= 100 else 0.0  # from capacity on, the queue grows
        recs = stream(int(rate * 60) + 2, rate=rate, output=10, slowdown=slow)
        levels.append((pct, measure(rate, emulated(recs, key=f"level-{pct}pct", **open_loop(rate, started=i)))))
    measured = {"capacity": capacity, "source": "given (--capacity)", "levels": levels}
    return Case(measured, get_suite("tradeoff").params.build({"capacity": capacity}, False))


def _closed_level(case: Case) -> None:
    lv = case.measured["levels"][3][1]
    lv.run.info = info(kind="emulated", load={"concurrency": 4, "description": "closed-loop concurrency 4"})


def _swap_starts(case: Case) -> None:
    a, b = case.measured["levels"][0][1].run, case.measured["levels"][1][1].run
    a.info.started_at, b.info.started_at = b.info.started_at, a.info.started_at


def _never_saturated(case: Case) -> None:
    case.measured = tradeoff_case(pcts=(10, 20, 30, 40, 50, 60, 70, 80, 90, 95)).measured


def _short_level(case: Case) -> None:
    rate = 0.2
    case.measured["levels"][0] = (10, measure(rate, emulated(stream(6, rate=rate, output=10), **open_loop(rate))))


TRADEOFF = {
    "at least 10 load levels": Break(
        lambda c: setattr(c, "measured", tradeoff_case(pcts=tuple(range(10, 130, 20))).measured)
    ),
    "levels span low load (10% of capacity) to saturation": Break(_never_saturated),
    "at least 60 seconds per load level": Break(_short_level),
    "open loop at every level": Break(_closed_level),
    "levels run in ascending order": Break(_swap_starts),
}


# ----- 5.4 ITL


def itl_case(pcts: tuple[int, ...] = (25, 50, 75, 90), n: int = 100, output: int = 60) -> Case:
    runs = [(pct, emulated(stream(n, rate=pct / 10, output=output), key=f"level-{pct}pct")) for pct in pcts]
    measured = {"saturation": Capacity(10.0, "given (--saturation)"), "runs": runs}
    return Case(measured, get_suite("itl").params.build({"saturation": 10.0}, False))


def _ttft_counted(case: Case) -> None:
    run = case.measured["runs"][0][1]
    run.summary.itl_ms = run.summary.itl_ms.model_copy(update={"n": run.summary.itl_ms.n + 100})


def _no_chunks(case: Case) -> None:
    run = case.measured["runs"][0][1]
    run.summary.chunking = run.summary.chunking.model_copy(update={"chunks": 0})


ITL = {
    "every request generates at least 50 output tokens": Break(lambda c: swap(c, itl_case(output=49))),
    "at least 100 requests per level": Break(lambda c: swap(c, itl_case(n=99))),
    "5000+ ITL samples per level": Break(lambda c: swap(c, itl_case(output=50))),
    "TTFT is not included in ITL": Break(_ttft_counted),
    "the chunking and the ITL measurement option are declared": Break(_no_chunks),
    "several load levels: 25, 50, 75, 90% of saturation": Break(lambda c: swap(c, itl_case(pcts=(50, 75)))),
}


# ----- 5.5 capacity


def _probe(c: int, seconds: float, per_slot: int, ttft: float = 0.05, barrier: bool = True) -> Any:
    from infermeter.suites.concurrency import Probe

    n = c * per_slot
    recs = stream(n, rate=n / seconds, output=16, ttft=ttft)
    load = {"concurrency": c, "barrier": barrier, "description": f"closed-loop concurrency {c}"}
    params = get_suite("capacity").params.build({}, False)
    return Probe(c, emulated(recs, key=f"concurrency-{c}", load=load), params)


def capacity_case() -> Case:
    probes = [_probe(8, 61.0, 100), _probe(9, 61.0, 100, ttft=2.0)]
    return Case(probes, get_suite("capacity").params.build({}, False))


def _cut_reply(case: Case) -> None:
    recs = stream(800, rate=800 / 61.0, output=16)
    recs[5].max_tokens = 256  # an EOS before the cap
    case.measured[0] = type(case.measured[0])(8, emulated(recs, load={"concurrency": 8, "barrier": True}), case.params)


CAPACITY = {
    "each level runs >= 60 s and >= 100 completions per slot (whichever is longer)": Break(
        lambda c: c.measured.__setitem__(0, _probe(8, 61.0, 60))
    ),
    "binary search to convergence": Break(lambda c: c.measured.__setitem__(1, _probe(12, 61.0, 100, ttft=2.0))),
    "each level's first [concurrency] requests submitted simultaneously": Break(
        lambda c: c.measured.__setitem__(0, _probe(8, 61.0, 100, barrier=False))
    ),
    "a fixed output length": Break(_cut_reply),
}


def test_a_capacity_level_needs_both_the_minute_and_the_completions() -> None:
    """5.5.3 c: 60 seconds or 100 completions per slot, whichever is longer: a level short of either fails."""
    text = "each level runs >= 60 s and >= 100 completions per slot (whichever is longer)"
    for probe in (_probe(8, 30.0, 100), _probe(8, 61.0, 99)):  # enough requests in 30 s; a minute of too few
        case = capacity_case()
        case.measured[0] = probe
        assert judged("capacity", case)[text].met is False


# ----- 5.6 fairness


def fairness_case(short: int = 2000, long: int = 500, seconds: float = 310.0) -> Case:
    from infermeter.suites.fairness import mix_spec

    rate = (short + long) / seconds
    recs = stream(short, rate=short / seconds, output=64, input_tokens=128, request_class="short")
    recs += stream(long, rate=long / seconds, output=300, input_tokens=2048, request_class="long", first_id=short)
    spec = mix_spec(0.8).model_dump(mode="json")
    mix = emulated(recs, key="mix", **open_loop(rate), workload={"spec": spec})
    alone = {
        "short": emulated(
            stream(500, rate=rate, output=64, input_tokens=128, request_class="short"), **open_loop(rate)
        ),
        "long": emulated(
            stream(500, rate=rate, output=300, input_tokens=2048, request_class="long"), **open_loop(rate)
        ),
    }
    measured = {"runs": {**alone, "mix": mix}, "rate": rate, "saturation": Capacity(rate / 0.8, "given")}
    return Case(measured, get_suite("fairness").params.build({"rate": rate}, False))


def _half_rate_alone(case: Case) -> None:
    rate = case.measured["rate"] / 2
    case.measured["runs"]["short"] = emulated(stream(500, rate=rate, output=64, input_tokens=128), **open_loop(rate))


def _outside_class(case: Case) -> None:
    run = case.measured["runs"]["long"]
    recs = stream(500, rate=case.measured["rate"], output=300, input_tokens=5000, request_class="long")
    case.measured["runs"]["long"] = emulated(recs, **open_loop(case.measured["rate"]), workload=run.info.workload)


FAIRNESS = {
    "at least 500 requests per class": Break(lambda c: swap(c, fairness_case(long=499))),
    "the mix runs for at least 300 seconds": Break(lambda c: swap(c, fairness_case(seconds=250))),
    "each class measured alone at the same total load": Break(_half_rate_alone),
    "Synthetic-Skewed requests in the short and long classes as 5.6.2 defines them": Break(_outside_class),
    "load at 70-90% of the saturation rate": Break(
        lambda c: c.measured.__setitem__("saturation", Capacity(c.measured["rate"] * 2, "given"))
    ),
}


def test_fairness_load_share_is_not_verifiable_without_a_saturation_rate() -> None:
    case = fairness_case()
    case.measured["saturation"] = None
    assert judged("fairness", case)["load at 70-90% of the saturation rate"].met is None


# ----- 5.7 prefix cache


def _cached_run(drawn: Any, key: str, cached: str, state: str, shared: int, seed: int = 7) -> Run:
    """A run of the drawn requests; cached: "none", "after-first" (each prefix's first request cold), "all", or
    "unreported" (a server that does not say)."""
    recs = stream(len(drawn), rate=4.0, output=8)
    seen: set[int] = set()
    for r, pid, plen, inp in zip(recs, drawn.prefix_id, drawn.prefix_tokens, drawn.input_tokens, strict=True):
        r.input_tokens = int(inp)
        first = pid >= 0 and int(pid) not in seen
        seen.add(int(pid))
        hit = cached == "all" or (cached == "after-first" and not first)
        r.cached_tokens = None if cached == "unreported" else int(plen) if pid >= 0 and hit else 0
    workload = {"name": "code-completion", "seed": seed, "spec": CODE_COMPLETION.model_dump(mode="json")}
    workload["prefix_sharing"] = {"fraction": 0.8, "count": 10, "length": "uniform [512, 1024]"}
    return emulated(
        recs,
        key=key,
        workload=workload,
        load={"requests": len(drawn), "description": "open-loop poisson at 4 req/s"},
        sut={"prefix_caching": state},
        warmup={"shared_prefixes": shared},
    )


def _waiting(run: Run, mean: float) -> Run:
    gauge = Gauge(metric="vllm:num_requests_waiting", mean=mean, p50=mean, p99=mean, max=mean)
    run.summary.server_metrics = ServerMetrics(scrapes=10, failed_scrapes=0, waiting=gauge)
    return run


def prefix_case() -> Case:
    from infermeter.suites.prefix_cache import Measured

    drawn = generate(CODE_COMPLETION, 60, 7)
    runs = {
        "disabled": _cached_run(drawn, "cache-disabled", "none", "disabled", 0),
        "cold": _cached_run(drawn, "cache-cold", "after-first", "enabled", 0),
        "warm": _cached_run(drawn, "cache-warm", "all", "enabled", 10),
    }
    capacity = {
        "disabled": _waiting(emulated(stream(64, rate=20.0, output=8), key="cap-off"), 12.0),
        "enabled": _waiting(emulated(stream(64, rate=25.0, output=8), key="cap-on"), 9.0),
    }
    measured = Measured(runs, capacity, 4.0, "given (--rate)")
    return Case(measured, get_suite("prefix-cache").params.build({"rate": 4.0}, False))


def _drawn() -> Any:
    return generate(CODE_COMPLETION, 60, 7)


def _other_requests(case: Case) -> None:
    drawn = generate(CODE_COMPLETION, 60, 8)  # another seed: other requests
    case.measured.runs["warm"] = _cached_run(drawn, "cache-warm", "all", "enabled", 10)


def _words(case: Case) -> None:
    run = case.measured.runs["warm"]
    spec = {**(run.info.workload.spec or {}), "content": "words"}
    run.info.workload = run.info.workload.model_copy(update={"spec": spec})


PREFIX = {
    "runs with the cache disabled (baseline) and enabled": Break(
        lambda c: c.measured.runs.__setitem__("disabled", _cached_run(_drawn(), "cache-disabled", "none", "enabled", 0))
    ),
    "an identical workload in every configuration": Break(_other_requests),
    "warm-up without populating the prefix cache (disabled and cold configurations)": Break(
        lambda c: c.measured.runs.__setitem__("cold", _cached_run(_drawn(), "cache-cold", "after-first", "enabled", 3))
    ),
    "the cold configuration starts with none of the prefixes cached, the warm one with them": Break(
        lambda c: c.measured.runs.__setitem__("cold", _cached_run(_drawn(), "cache-cold", "all", "enabled", 0))
    ),
    "a Code Completion workload (source code, high prefix sharing)": Break(_words),
    "the throughput improvement measured at capacity (requests queued behind a full batch)": Break(
        lambda c: _waiting(c.measured.capacity["enabled"], 0.2)
    ),
}


def test_prefix_cache_states_are_not_verifiable_when_the_server_reports_no_cached_tokens() -> None:
    case = prefix_case()
    for name, state in (("cold", "enabled"), ("warm", "enabled")):
        case.measured.runs[name] = _cached_run(
            _drawn(), f"cache-{name}", "unreported", state, 0 if name == "cold" else 10
        )
    got = judged("prefix-cache", case)
    assert got["the cold configuration starts with none of the prefixes cached, the warm one with them"].met is None


# ----- 5.8 memory pressure


def _pressured(c: int, seconds: float = 125.0, detail: bool = True, metrics: bool = True) -> Run:
    run = emulated(stream(4 * c, rate=4 * c / seconds, output=16), key=f"oversub-c{c}")
    if metrics:
        n = 4 * c
        counters = {"preemptions": CounterDelta(metric="vllm:num_preemptions", delta=float(c))}
        if detail:
            counters |= {
                "preempted_requests": CounterDelta(metric="infermeter:preempted_requests", delta=float(c) / 2),
                "preempted_finished": CounterDelta(metric="infermeter:preempted_finished", delta=float(c) / 2),
                "preempted_tokens": CounterDelta(metric="infermeter:preempted_tokens", delta=100.0 * c),
            }
        run.summary.server_metrics = ServerMetrics(scrapes=n, failed_scrapes=0, **counters)
    return run


def memory_case(base_from: bool | None = True) -> Case:
    runs = [(pct, c, _pressured(c)) for pct, c in ((100, 8), (110, 9), (125, 10), (150, 12))]
    measured = {"base": 8, "source": "the 5.5 search run in this suite", "from_5_5": base_from, "runs": runs}
    return Case(measured, get_suite("memory-pressure").params.build({"capacity": 8}, False))


MEMORY = {
    "at least 120 seconds per level": Break(lambda c: c.measured["runs"].__setitem__(0, (100, 8, _pressured(8, 60.0)))),
    "the base is the maximum concurrency of section 5.5": Break(lambda c: c.measured.update(from_5_5=None), None),
    "preemption events monitored": Break(
        lambda c: c.measured["runs"].__setitem__(1, (110, 9, _pressured(9, metrics=False)))
    ),
    "preemption rate, recovery rate and tokens lost per preemption": Break(
        lambda c: c.measured["runs"].__setitem__(1, (110, 9, _pressured(9, detail=False)))
    ),
}


def test_preemption_is_not_verifiable_when_the_server_exports_no_counter() -> None:
    case = memory_case()
    run = case.measured["runs"][0][2]
    run.summary.server_metrics = ServerMetrics(scrapes=5, failed_scrapes=0)
    got = judged("memory-pressure", case)
    assert got["preemption events monitored"].met is None
    assert got["preemption rate, recovery rate and tokens lost per preemption"].met is None


# ----- 5.9 long context


def _length_run(n: int, c: int, started: int, requests: int = 20, output: int = 256, warm: int = 512) -> Run:
    spec = {"name": f"long-context-{n}", "content": "document-question", "classes": []}
    recs = stream(requests, rate=0.5, output=output, itl=0.001, ttft=0.02 + n * 1e-5, input_tokens=n)
    return emulated(
        recs,
        key=f"length-{n}-c{c}",
        load={"concurrency": c, "description": f"closed-loop concurrency {c}"},
        workload={"spec": spec},
        warmup={"max_input_tokens": warm},
        started_at=at(started),
    )


def long_context_case(lengths: tuple[int, ...] = (1024, 2048, 4096, 8192), **kw: Any) -> Case:
    runs, throughput = [], {}
    for i, n in enumerate(lengths):
        by_c = {c: _length_run(n, c, 10 * i + c, **kw) for c in (1, 2, 3, 4)}
        runs.append((n, by_c[1]))
        throughput[n] = by_c
    params = get_suite("long-context").params.build({"max_context": 100_000}, False)
    return Case({"runs": runs, "throughput": throughput, "skipped": []}, params)


def _eight(case: Case) -> None:
    case.measured["throughput"][1024][4] = _length_run(1024, 8, 5)


def _reverse_starts(case: Case) -> None:
    (_, a), (_, b) = case.measured["runs"][0], case.measured["runs"][1]
    a.info.started_at, b.info.started_at = b.info.started_at, a.info.started_at


def _long_warmup(case: Case) -> None:
    n, run = case.measured["runs"][0]
    run.info.warmup = run.info.warmup.model_copy(update={"max_input_tokens": n + 1})


def _words_prompts(case: Case) -> None:
    run = case.measured["runs"][0][1]
    run.info.workload = run.info.workload.model_copy(update={"spec": {"content": "words"}})


LONG = {
    "at least 20 requests per context length": Break(lambda c: swap(c, long_context_case(requests=19))),
    "closed loop at low concurrency (1-4)": Break(_eight),
    "lengths in ascending order": Break(_reverse_starts),
    "warm-up with short-context requests": Break(_long_warmup),
    "a fixed output of 256 tokens": Break(lambda c: swap(c, long_context_case(output=128))),
    "the scaling exponent and the fits are reported": Break(lambda c: swap(c, long_context_case(lengths=(1024, 2048)))),
    "the Long Context workload (document + question prompts)": Break(_words_prompts),
}


# ----- 5.10 guardrail


def _config_run(name: str, pct: int, text: str | None, refusals: int | None = 0) -> Run:
    rate = pct / 10
    stream_block = None if refusals is None else {"non_content_first": 0, "refusals": refusals}
    recs = stream(int(rate * 60), rate=rate, output=10)
    return emulated(recs, key=f"{name}-{pct}pct", **open_loop(rate), sut={"guardrails": text}, stream=stream_block)


GUARDS = {"baseline": "none", "input": "input filter 40 ms", "output": "output filter 10 ms", "full": "both"}


def guardrail_case(configs: tuple[str, ...] = tuple(GUARDS), pcts: tuple[int, ...] = (25, 50, 75)) -> Case:
    from infermeter.suites.guardrail import Measured

    runs = {name: {pct: _config_run(name, pct, GUARDS[name]) for pct in pcts} for name in configs}
    searches = {name: throughput_case(seconds=60.0).measured for name in configs}
    return Case(Measured(10.0, list(pcts), runs, searches), get_suite("guardrail").params.build({}, False))


def _alike(case: Case) -> None:
    for name, by in case.measured.runs.items():
        for pct in by:
            by[pct] = _config_run(name, pct, "Llama Guard 3")


def _refused(case: Case) -> None:
    case.measured.runs["full"][50] = _config_run("full", 50, GUARDS["full"], refusals=3)


def _unbracketed(case: Case) -> None:
    case.measured.searches["output"].levels.pop()


GUARDRAIL = {
    "baseline, input, output and full filtering compared": Break(
        lambda c: swap(c, guardrail_case(configs=("baseline", "input")))
    ),
    "load levels of 25, 50 and 75% of capacity": Break(lambda c: swap(c, guardrail_case(pcts=(50,)))),
    "the report notes whether safety systems are disabled, per configuration": Break(_alike),
    "benign content (nothing refused)": Break(_refused),
    "throughput reduction from each configuration's own capacity search": Break(_unbracketed),
}


def test_a_configuration_without_a_guardrail_disclosure_fails_and_uncounted_refusals_are_not_verifiable() -> None:
    case = guardrail_case()
    case.measured.runs["input"][25] = _config_run("input", 25, None)
    got = judged("guardrail", case)
    assert got["the report notes whether safety systems are disabled, per configuration"].met is False
    case = guardrail_case()
    case.measured.runs["input"][25] = _config_run("input", 25, GUARDS["input"], refusals=None)
    assert judged("guardrail", case)["benign content (nothing refused)"].met is None


# ----- exo bench's grid


def _batch(c: int, spread: float = 0.001, ignore_eos: bool = True, mismatches: int = 0) -> Run:
    recs = stream(c, rate=c / spread if spread else 1e9, output=16)
    blocks: dict[str, Any] = {
        "load": {"concurrency": c, "barrier": True},
        "client": {"ignore_eos": ignore_eos},
        "prompt_verification": {"endpoint": "/tokenize", "checked": c, "mismatches": mismatches},
    }
    return emulated(recs, key=f"c{c}", **blocks)


def grid_case() -> Case:
    from infermeter.suites.grid import Cell

    measured = {Cell(64, 16, 4): [_batch(4), _batch(4)], Cell(64, 16, 1): [_batch(1)]}
    return Case(measured, get_suite("grid").params.build({}, False))


def _first_cell(case: Case, run: Run) -> None:
    first = next(iter(case.measured))
    case.measured[first][0] = run


GRID = {
    "prompts of the exact token length": Break(lambda c: _first_cell(c, _batch(4, mismatches=2))),
    "EOS banned: every reply runs to max_tokens": Break(lambda c: _first_cell(c, _batch(4, ignore_eos=False))),
    "a batch's requests start at the same instant": Break(lambda c: _first_cell(c, _batch(4, spread=0.05))),
}


# ----- every suite


@dataclass
class Plan:
    good: Callable[[], Case]
    breaks: dict[str, Break] = field(default_factory=dict)


PLANS = {
    "ttft": Plan(ttft_case, TTFT),
    "throughput": Plan(throughput_case, THROUGHPUT),
    "tradeoff": Plan(tradeoff_case, TRADEOFF),
    "itl": Plan(itl_case, ITL),
    "capacity": Plan(capacity_case, CAPACITY),
    "fairness": Plan(fairness_case, FAIRNESS),
    "prefix-cache": Plan(prefix_case, PREFIX),
    "memory-pressure": Plan(memory_case, MEMORY),
    "long-context": Plan(long_context_case, LONG),
    "guardrail": Plan(guardrail_case, GUARDRAIL),
    "grid": Plan(grid_case, GRID),
}


@pytest.mark.parametrize("name", list(PLANS))
def test_every_requirement_has_a_failing_case(name: str) -> None:
    """The passing evidence meets every requirement, and the table of changes names each one."""
    got = judged(name, PLANS[name].good())
    unmet = {text: (r.status, r.reason) for text, r in got.items() if r.met is not True}
    assert not unmet, unmet
    assert set(PLANS[name].breaks) == set(got), set(got) ^ set(PLANS[name].breaks)


CASES = [(name, text) for name, plan in PLANS.items() for text in plan.breaks]


@pytest.mark.parametrize(("name", "text"), CASES, ids=[f"{n}: {t[:50]}" for n, t in CASES])
def test_each_requirement_fails_on_evidence_against_it(name: str, text: str) -> None:
    case = PLANS[name].good()
    brk = PLANS[name].breaks[text]
    brk.change(case)
    got = judged(name, copy.copy(case))[text]
    assert got.met is brk.expect, (got.status, got.reason)


def test_the_twins_requirements_hold_the_predictions_to_the_tolerance() -> None:
    """The twin's MUSTs and SHOULDs, judged from the errors its analysis found: within the tolerance met, one load
    beyond it (or no figure at all) not met."""
    from infermeter.engine.config import EngineConfig
    from infermeter.suites.twin import JUDGED, Measured, Point

    suite = get_suite("twin")
    params = suite.params.build({"tolerance": 10.0}, False)
    from infermeter.sim.predict import METRICS, FigureInterval

    run = emulated(stream(50, output=16))

    def around(scale: float) -> list[FigureInterval]:
        """Intervals of +-10% around `scale` times each measured P50."""
        out = []
        for label, name in METRICS.items():
            v = getattr(run.summary, name).percentile(50) * scale
            out.append(FigureInterval(metric=label, q=50, predicted=v, low=0.9 * v, high=1.1 * v))
        return out

    points = [Point(p, p / 10, run.summary, run, 0.02, around(1.0)) for p in (30, 60, 90)]
    measured = Measured(EngineConfig(), None, 10.0, points)

    def judge(errors: dict[str, float | None]) -> dict[str, Requirement]:
        figures = {f"{m.lower()}_{q}_error_{p}": errors.get(f"{m} {q}", 0.03) for m in JUDGED for q in ("p50", "p99")
                   for p in (30, 60, 90)}  # fmt: skip
        return {r.text: r for r in suite.requirements(measured, Analysis(figures=figures), params, False)}

    good = judge({})
    assert all(r.met for r in good.values()), {t: r.reason for t, r in good.items() if not r.met}
    for m in JUDGED:
        for q, bound in (("p50", 0.10), ("p99", 0.20)):
            got = judge({f"{m} {q}": bound + 0.01})
            text = next(t for t in got if m in t and q.upper() in t and "predicted" in t and "request" not in t)
            assert got[text].met is False, got[text].reason
            assert sum(r.met is False for r in got.values()) == 1
    inside = next(t for t in good if "inside the prediction interval" in t)
    assert good[inside].reason == "9 of 9 inside"
    measured.points[2].intervals = around(1.5)  # the 90% load's intervals all above what it measured
    got = judge({})
    assert got[inside].met is False and got[inside].reason.endswith("outside: TTFT at 90%, ITL at 90%, TPOT at 90%")
    measured.points[2].intervals = None  # a calibration that held nothing out: no evidence either way
    assert judge({})[inside].met is None
    measured.points[2].intervals = around(1.0)
    measured.points[1].ttft_paired_error = -0.2
    got = judge({})
    assert [t for t, r in got.items() if r.met is False] == [next(t for t in got if "each request" in t)]
