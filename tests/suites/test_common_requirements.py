"""The requirements every suite shares (suites/disclosures.py), each judged from constructed run.json evidence: every
one is met by a run that does what the IETF draft asks, and each fails under a mutation of that evidence.  The table
of mutations is checked to cover every requirement common_requirements returns, so a requirement added later
without a failing case fails here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from infermeter.load import clock_accuracy as ca
from infermeter.load.disclosure import SINGLE_MACHINE
from infermeter.run_info import RunInfo, Warmup
from infermeter.suite_result import Requirement
from infermeter.suites.disclosures import agreement_verdict, common_requirements, ntp_verdict
from infermeter.suites.framework import verdict
from tests.evidence import info

SPECIAL = {
    "bos_eos": "cl100k_base has no BOS token: none is sent or counted; EOS: ignore_eos",
    "chat_template": "none: the completions API",
    "system_prompt": "none is sent",
    "tool_calls": "none: no tools or functions are sent",
}
NTP_OK = {"source": "chrony (chronyc tracking)", "synchronised": True, "offset_ms": 0.2, "accuracy_ms": 1.2}
DATE_OK = {"probes": 31, "offset_lo_ms": -2.0, "offset_hi_ms": 3.5, "rtt_ms_min": 0.3}
GOOD: dict[str, Any] = {
    "sut": {"prefix_caching": "disabled", "guardrails": "none"},
    "tokenizer": {"vocab_size": 100_277, "source": "tiktoken cl100k_base", "special": SPECIAL},
    "warmup": {
        "failed": 0,
        "in_flight_after": 0,
        "probe_before_s": 0.8,
        "probes_after_s": [0.101, 0.100, 0.102],
    },
    "client_health": {"bound": False, "cpu_fraction": 0.2},
    "clock_accuracy": {
        "methods": ["chrony (chronyc tracking)", "HTTP Date"],
        "same_host": False,
        "ntp": NTP_OK,
        "date": DATE_OK,
    },
}
COLD = Warmup(done=False, cold_start=True, note="warm-up skipped (--warmup off): a cold start was measured")


def good(**blocks: Any) -> RunInfo:
    """A run that does everything the draft asks, with `blocks` replacing parts of it."""
    merged = {k: dict(v) for k, v in GOOD.items()}
    for name, value in blocks.items():
        merged[name] = {**merged[name], **value} if isinstance(value, dict) and name in merged else value
    return info(**merged)


def cold(**blocks: Any) -> RunInfo:
    return good(warmup=COLD, **blocks)


def judged(infos: list[RunInfo], quick: bool = False) -> dict[tuple[str, str], Requirement]:
    return {(r.section, r.text): r for r in common_requirements(infos, quick)}


WARMUP_TEXT = (
    "4.5.1",
    "warm-up completes before measurement: >= 100 requests and >= 10,000 output tokens, the queue drained",
)
COLD_TEXT = ("4.5.3", "a cold-start measurement skips the warm-up and the report clearly indicates it")
PROBE_TEXT = ("4.5.2", "warm-up completion is verified by a probe before and after")
NTP_TEXT = ("4.7.2", "the load generator's clock is synchronised within 10 ms (NTP)")
AGREE = ("4.7.2", "the clocks of load generator and server agree within 10 ms")
SPECIAL_TEXT = (
    "4.4.3",
    "special-token handling is specified: BOS/EOS, system prompt tokens, tool/function-call tokens",
)
# requirement -> evidence that must make it fail (the runs, and whether the suite ran --quick)
MUTATIONS: dict[tuple[str, str], Callable[[], tuple[list[RunInfo], bool]]] = {
    ("5", "the procedure runs at the draft's durations and counts"): lambda: ([good()], True),
    ("4.1", "the SUT boundary is declared before benchmarking"): lambda: ([good(sut={"boundary": None})], False),
    ("5.1.2.3", "hardware (accelerator type, count, memory) is defined"): lambda: (
        [good(), good(sut={"hardware": None})],
        False,
    ),
    ("5.1.2.3", "the prefix caching state is defined"): lambda: ([good(sut={"prefix_caching": None})], False),
    ("4.8.1", "the guardrail configuration is disclosed"): lambda: ([good(sut={"guardrails": None})], False),
    ("4.8.1", "the report says whether any requests were refused"): lambda: ([good(stream=None)], False),
    ("4.2.5", "the load generator keeps its schedule (the client is not the bottleneck)"): lambda: (
        [good(client_health={"bound": True, "reasons": ["sends started 40 ms late"]})],
        False,
    ),
    ("4.3.3", "the workload is generated from a reported deterministic seed"): lambda: (
        [good(workload={"seed": None})],
        False,
    ),
    ("4.4.1", "the tokenizer's name, vocabulary size and source are specified"): lambda: (
        [good(tokenizer={"vocab_size": None})],
        False,
    ),
    ("4.4.2", "the token counting option (A or B) is declared"): lambda: (
        [good(tokenizer={"counting_method": None})],
        False,
    ),
    (
        "4.4.3",
        "special-token handling is specified: BOS/EOS, system prompt tokens, tool/function-call tokens",
    ): lambda: (
        [good(tokenizer={"special": {**SPECIAL, "tool_calls": " "}})],
        False,
    ),
    WARMUP_TEXT: lambda: ([good(warmup={"requests": 4, "output_tokens": 512})], False),  # --warmup 4
    ("4.5.2", "warm-up completion is verified by a probe before and after"): lambda: (
        [good(warmup={"stable": False, "probes_after_s": [0.1, 0.2, 0.3]})],
        False,
    ),
    ("4.5.3", "a cold-start measurement skips the warm-up and the report clearly indicates it"): lambda: (
        [cold(), good(warmup=COLD.model_copy(update={"requests": 20}))],
        False,
    ),
    ("4.7.2", "the clock synchronization method and estimated accuracy are stated"): lambda: (
        [good(clock_accuracy={"ntp": None, "date": None, "unavailable": ["chronyc not found", "ntpq not found"]})],
        False,
    ),
    NTP_TEXT: lambda: ([good(clock_accuracy={"ntp": {**NTP_OK, "accuracy_ms": 25.0}})], False),
    AGREE: lambda: ([good(clock_accuracy={"date": {**DATE_OK, "offset_lo_ms": 40.0, "offset_hi_ms": 45.0}})], False),
    ("4.7.3", "the network round trip is measured and reported separately"): lambda: ([good(network=None)], False),
    ("5.1.3.1", "non-content events before content are noted, with what TTFT measures"): lambda: (
        [good(stream=None)],
        False,
    ),
}


def test_a_run_that_does_what_the_draft_asks_meets_every_common_requirement() -> None:
    for infos in ([good()], [cold()], [good(), cold()]):
        unmet = [
            f"{r.section} {r.text}: {r.status} ({r.reason})" for r in common_requirements(infos, False) if not r.met
        ]
        assert not unmet, unmet
    assert verdict(common_requirements([good()], False)) == "unconditionally compliant"


def test_every_common_requirement_has_a_failing_mutation() -> None:
    """The union of what common_requirements returns for warmed-up and cold-start runs is exactly the table's keys."""
    returned = set(judged([good()])) | set(judged([cold()]))
    assert returned == set(MUTATIONS), (returned - set(MUTATIONS), set(MUTATIONS) - returned)


@pytest.mark.parametrize("key", list(MUTATIONS), ids=lambda k: f"{k[0]} {k[1][:40]}")
def test_each_common_requirement_fails_under_its_mutation(key: tuple[str, str]) -> None:
    infos, quick = MUTATIONS[key]()
    assert judged([good()] if key != COLD_TEXT else [cold()])[key].met is True  # met before the mutation
    got = judged(infos, quick)[key]
    assert got.met is False, got
    assert got.reason


def test_warmup_4_fails_4_5_1_with_the_counts() -> None:
    r = judged([good(warmup={"requests": 4, "output_tokens": 512})])[WARMUP_TEXT]
    assert r.met is False and "4 requests and 512 output tokens" in r.reason and "4.5.1" in r.reason
    short_tokens = judged([good(warmup={"requests": 150, "output_tokens": 9_999})])[WARMUP_TEXT]
    assert short_tokens.met is False and "150 requests and 9,999 output tokens" in short_tokens.reason
    failed = judged([good(warmup={"requests": 120, "failed": 30, "output_tokens": 12_000})])[WARMUP_TEXT]
    assert failed.met is False and "90 requests" in failed.reason  # only answered requests were processed
    undrained = judged([good(warmup={"in_flight_after": 3, "queue_drained": True})])[WARMUP_TEXT]
    assert undrained.met is False and "3 of its requests were still in flight" in undrained.reason
    earlier = judged([good(warmup={"in_flight_after": None, "queue_drained": True})])[WARMUP_TEXT]
    assert earlier.met is None and "was not recorded" in earlier.reason  # queue_drained then only repeated `done`
    stopped = judged([good(warmup={"done": False, "note": "stopped during the warm-up"})])[WARMUP_TEXT]
    assert stopped.met is False and "did not complete" in stopped.reason


def test_a_declared_cold_start_is_judged_by_4_5_3_not_4_5_1() -> None:
    only_cold = judged([cold(), cold()])
    assert not any(section in ("4.5.1", "4.5.2") for section, _ in only_cold)
    assert only_cold[COLD_TEXT].met is True and COLD.note is not None and COLD.note in only_cold[COLD_TEXT].reason
    silent = judged([good(warmup=COLD.model_copy(update={"note": None}))])[COLD_TEXT]
    assert silent.met is False and "no note" in silent.reason  # the evidence the reports print, missing
    sent = judged([good(warmup=COLD.model_copy(update={"done": True}))])[COLD_TEXT]
    assert sent.met is False
    mixed = judged([good(), cold()])  # each run is judged by the rule that applies to it
    assert mixed[WARMUP_TEXT].met is True and mixed[COLD_TEXT].met is True


def test_the_probe_requirement_states_its_figures() -> None:
    r = judged([good()])[PROBE_TEXT]
    assert r.met is True and "800.0 ms" in r.reason and "101.0/100.0/102.0 ms" in r.reason and "2.0%" in r.reason


@pytest.mark.parametrize(
    ("warmup", "said"),
    [
        ({"stable": None, "probes_after_s": []}, "no probe answered after the warm-up"),
        ({"stable": None, "probes_after_s": None}, "no probe answered after the warm-up"),
        ({"stable": False, "probes_after_s": [0.1, 0.1]}, "only 2 of the 10 probes"),
        ({"probe_before_s": None}, "the probe before the warm-up did not answer"),
        ({"stable": True, "probes_after_s": [0.1, 0.1, 0.2]}, "not within 10%"),  # the figures decide, not the flag
    ],
)
def test_a_probe_that_did_not_answer_fails_4_5_2(warmup: dict[str, Any], said: str) -> None:
    """Unanswered probes verify nothing: not met, never not verifiable (the evidence could exist and does not)."""
    r = judged([good(warmup=warmup)])[PROBE_TEXT]
    assert r.met is False and said in r.reason, r.reason


def test_the_load_generators_health_is_not_verifiable_when_workers_sent_the_load() -> None:
    r = judged([good(client_health=None)])[
        ("4.2.5", "the load generator keeps its schedule (the client is not the bottleneck)")
    ]
    assert r.met is None and "not recorded" in r.reason


def _bound(lo: float, hi: float, note: str | None = None) -> dict[str, Any]:
    return {"probes": 30, "offset_lo_ms": lo, "offset_hi_ms": hi, "rtt_ms_min": 0.3, "note": note}


@pytest.mark.parametrize(
    ("clock", "met", "said"),
    [
        ({"date": None, "ntp": NTP_OK}, True, "1.20 ms"),
        ({"date": None, "ntp": {**NTP_OK, "accuracy_ms": 25.0}}, False, "more than 10 ms"),
        ({"date": None, "ntp": {**NTP_OK, "synchronised": False, "accuracy_ms": None}}, False, "not synchronised"),
        ({"date": None, "ntp": None, "unavailable": ["chronyc not found"]}, None, "chronyc not found"),
        ({"date": _bound(-2.0, 3.5), "ntp": None, "unavailable": ["ntpq not found"]}, None, "could not be read"),
        ({"same_host": True, "methods": [SINGLE_MACHINE], "ntp": None, "date": None}, True, "single machine"),
    ],
)
def test_the_clients_own_clock_is_judged_from_its_ntp_daemon(
    clock: dict[str, Any], met: bool | None, said: str
) -> None:
    run = good(clock_accuracy=clock)
    assert run.clock_accuracy is not None
    got, why = ntp_verdict(run.clock_accuracy)
    assert got is met and said in why, why
    assert judged([run])[NTP_TEXT].met is met


@pytest.mark.parametrize(
    ("clock", "met", "said"),
    [
        ({"ntp": None, "date": _bound(-2.0, 3.5)}, True, "within 10 ms"),
        ({"ntp": None, "date": _bound(12.0, 14.0)}, False, "more than 10 ms"),
        ({"ntp": None, "date": _bound(-3250.0, -3248.0)}, False, "more than 10 ms"),
        ({"ntp": None, "date": _bound(-900.0, 1500.0, "uvicorn refreshes its Date")}, None, "too wide"),
        ({"ntp": None, "date": None, "unavailable": ["chronyc not found"]}, None, "nothing observed the server's"),
        # the client's NTP within 10 ms says nothing of the server's clock (it once decided this alone)
        ({"ntp": NTP_OK, "date": None, "unavailable": [ca.NO_HTTP]}, None, "gRPC only"),
        ({"ntp": NTP_OK, "date": _bound(-900.0, 1500.0)}, None, "too wide"),
        # a bracket within 10 ms decides, whatever the client's daemon estimates of its own worst case
        ({"ntp": {**NTP_OK, "accuracy_ms": 25.0}, "date": _bound(-2.0, 3.5)}, True, "within 10 ms"),
        ({"ntp": NTP_OK, "date": _bound(40.0, 45.0)}, False, "more than 10 ms"),
        ({"same_host": True, "methods": [SINGLE_MACHINE], "ntp": None, "date": None}, True, "single machine"),
    ],
)
def test_the_clocks_agreement_is_judged_only_from_the_servers_clock(
    clock: dict[str, Any], met: bool | None, said: str
) -> None:
    run = good(clock_accuracy=clock)
    assert run.clock_accuracy is not None
    got, why = agreement_verdict(run.clock_accuracy)
    assert got is met and said in why, why
    assert judged([run])[AGREE].met is met


def test_a_remote_worker_clock_placed_worse_than_10_ms_fails() -> None:
    worker = {
        "worker": "tcp://10.0.0.7:40000",
        "host": "w7",
        "requests": 50,
        "clock": {"method": "ping", "same_host": False, "offset_s": 0.2, "accuracy_s": 0.03},
    }
    run = good(distributed={"engine": "dask", "cluster": "2 workers", "dealing": "round robin", "workers": [worker]})
    r = judged([run])[AGREE]
    assert r.met is False and "tcp://10.0.0.7:40000" in r.reason and "30.0 ms" in r.reason


def test_a_run_before_clocks_were_measured_is_met_on_loopback_and_not_verifiable_remote() -> None:
    for text in (NTP_TEXT, AGREE):
        loop = judged([good(clock_accuracy=None, sut={"clock_sync": SINGLE_MACHINE})])[text]
        remote = judged([good(clock_accuracy=None)])[text]
        assert loop.met is True and remote.met is None and "not measured" in remote.reason


def test_special_tokens_of_an_earlier_run_are_not_specified_per_part() -> None:
    old = good(tokenizer={"special": None, "special_tokens": "BOS/EOS excluded from counts"})
    r = judged([old])[SPECIAL_TEXT]
    assert r.met is False and "BOS/EOS excluded from counts" in r.reason


def test_no_runs_leave_every_run_requirement_not_verifiable() -> None:
    judged_none = [r for r in common_requirements([], False) if r.section != "5"]
    assert judged_none and all(r.met is None for r in judged_none)
