"""The requirements every test of the draft shares (sections 4.1-4.8, 5.1.3.1), judged from the runs' run.json:
what was declared, what was measured before the load (warm-up, probes, clocks, round trip), and whether the procedure
ran at full length.  Each is met, not met, or not verifiable (the evidence cannot exist for these runs), with why."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from infermeter.load.clock_accuracy import NTP_ACCURACY_MS
from infermeter.load.disclosure import SINGLE_MACHINE
from infermeter.load.warmup import PROBE_STABLE, WARMUP_MIN_REQUESTS, WARMUP_MIN_TOKENS
from infermeter.run_info import ClockAccuracy, RunInfo, Warmup
from infermeter.suite_result import Level, Requirement

NOT_DECLARED = "not declared"
Judged = tuple[bool | None, str]
NO_RUNS: Judged = (None, "no run was made: nothing to judge")


def _req(level: Level, section: str, text: str, judged: Judged) -> Requirement:
    return Requirement(level=level, section=section, text=text, met=judged[0], reason=judged[1])


def _over(infos: Sequence[RunInfo], one: Callable[[RunInfo], Judged], met_text: str) -> Judged:
    """Every run judged by `one`: not met when any run fails (its reason), not verifiable when any cannot tell
    and none fails, else met with `met_text` (formatted with the runs' own reasons)."""
    if not infos:
        return NO_RUNS
    judged = [one(i) for i in infos]
    failed = [why for met, why in judged if met is False]
    if failed:
        return False, f"{len(failed)} of {len(infos)} runs: {failed[0]}"
    unknown = [why for met, why in judged if met is None]
    if unknown:
        return None, f"{len(unknown)} of {len(infos)} runs: {unknown[0]}"
    return True, met_text.format(first=judged[0][1] if judged else "", n=len(infos))


def _declared(infos: Sequence[RunInfo], attr: str, what: str, option: str) -> Judged:
    if not infos:
        return NO_RUNS
    values = [getattr(i.sut, attr) for i in infos]
    missing = sum(v is None for v in values)
    if missing:
        return False, f"{what} {NOT_DECLARED} for {missing} of {len(values)} runs: give {option}"
    return True, "; ".join(sorted({str(v) for v in values}))


def _refusals(infos: Sequence[RunInfo]) -> Judged:
    if not infos:
        return NO_RUNS
    known = [i.stream.refusals for i in infos if i.stream is not None]
    if len(known) < len(infos):
        return False, f"refusals were not counted for {len(infos) - len(known)} of {len(infos)} runs"
    return True, f"{sum(known)} refusals (finish_reason content_filter) over {len(known)} runs"


def _client(infos: Sequence[RunInfo]) -> Judged:
    """4.2.5: each run's client_health block, which a run sent by this process always has."""
    if not infos:
        return NO_RUNS
    bound = [i.client_health for i in infos if i.client_health is not None and i.client_health.bound]
    if bound:
        return False, f"client-bound in {len(bound)} of {len(infos)} runs: {bound[0].warning()}"
    unknown = [i for i in infos if i.client_health is None]
    if unknown:
        by = "its workers (--workers/--cluster)" if unknown[0].distributed is not None else "a process that kept none"
        return (
            None,
            f"the load generator's health was not recorded for {len(unknown)} of {len(infos)} runs (sent by {by})",
        )
    return True, f"the client kept up in all {len(infos)} runs"


def _tokenizer(info: RunInfo) -> Judged:
    """4.4.1: name (and version), vocabulary size and source."""
    t = info.tokenizer
    missing = [what for what, v in (("name", t.name), ("vocabulary size", t.vocab_size), ("source", t.source)) if not v]
    if missing:
        return False, f"the tokenizer's {', '.join(missing)} not declared"
    return True, f"{t.name}, {t.vocab_size:,} tokens, {t.source}"


def _counting(info: RunInfo) -> Judged:
    method = info.tokenizer.counting_method
    if method not in ("A", "B"):
        return False, f"no token counting option declared (run.json says {method!r})"
    return True, f"option {method} ({info.tokenizer.counting_method_text or 'declared'})"


def _special(info: RunInfo) -> Judged:
    """4.4.3: BOS/EOS, system prompt and tool/function-call tokens, each declared for the run."""
    s = info.tokenizer.special
    if s is None:
        old = info.tokenizer.special_tokens
        return False, "special-token handling not specified per part" + (f" (only {old!r})" if old else "")
    parts = {"BOS/EOS": s.bos_eos, "system prompt": s.system_prompt, "tool/function-call tokens": s.tool_calls}
    missing = [name for name, text in parts.items() if not text.strip()]
    if missing:
        return False, f"{', '.join(missing)} not specified"
    return True, f"BOS/EOS: {s.bos_eos}; system prompt: {s.system_prompt}; tool calls: {s.tool_calls}"


def _warm(w: Warmup) -> Judged:
    """4.5.1 for one warmed-up run: completed, >= 100 requests and >= 10,000 output tokens, and every warm-up request
    finished on its own before the measurement (none in flight or cut off when the warm-up's load returned)."""
    if not w.done:
        return False, f"the warm-up did not complete ({w.note or 'stopped'})"
    if w.requests is None or w.output_tokens is None:
        return None, "the warm-up's requests and tokens were not recorded (a run made before infermeter kept them)"
    ok = w.requests - (w.failed or 0)
    counts = f"{ok} requests and {w.output_tokens:,} output tokens"
    if ok < WARMUP_MIN_REQUESTS or w.output_tokens < WARMUP_MIN_TOKENS:
        return False, (
            f"the warm-up processed {counts}: the IETF draft, section 4.5.1, asks for at least "
            f"{WARMUP_MIN_REQUESTS} requests and {WARMUP_MIN_TOKENS:,} output tokens, whichever is greater"
        )
    if w.in_flight_after is None:
        return None, (
            f"the warm-up processed {counts}, but whether its queue drained was not recorded (a run made before "
            "infermeter counted the requests in flight at its end)"
        )
    if w.in_flight_after:
        return False, f"the warm-up processed {counts}, but {w.in_flight_after} of its requests were still in flight"
    return True, f"{counts}, queue drained (none in flight at its end)"


def _probes(w: Warmup) -> Judged:
    """4.5.2 for one warmed-up run: the probe before answered, and the last three after within 10% of each other."""
    after = w.probes_after_s or []
    if w.probe_before_s is None:
        return False, "the probe before the warm-up did not answer: nothing to compare the settled server with"
    if not after:
        return False, "no probe answered after the warm-up"
    if len(after) < 3:
        return False, f"only {len(after)} of the 10 probes after the warm-up answered: 3 are needed to show it settled"
    last = after[-3:]
    spread = max(last) / min(last) - 1 if min(last) > 0 else float("inf")
    shown = "/".join(f"{p * 1000:.1f}" for p in last)
    figures = f"probe before {w.probe_before_s * 1000:.1f} ms, last after {shown} ms (spread {spread:.1%})"
    if not max(last) <= (1 + PROBE_STABLE) * min(last):  # as the warm-up stops probing
        return False, f"{figures}: not within {PROBE_STABLE:.0%} (the IETF draft, 4.5.2)"
    return True, f"{figures}, within {PROBE_STABLE:.0%}"


def _cold(w: Warmup) -> Judged:
    """4.5.3 for one declared cold start: no warm-up request was sent, and run.json notes the cold start (the reports
    print it)."""
    if w.requests or w.done:
        return False, f"a cold start was declared, but {w.requests or 0} warm-up requests were sent"
    if not w.note:
        return False, "a cold start was declared, but run.json carries no note of it for the reports"
    return True, f"no warm-up request sent; {w.note}"


def _clock_stated(info: RunInfo) -> Judged:
    """4.7.2: the synchronization method and estimated accuracy stated (one clock, measured, or declared)."""
    ca = info.clock_accuracy
    if (ca is not None and ca.same_host) or info.sut.clock_sync == SINGLE_MACHINE:
        return True, "single machine: one clock"
    if ca is not None and ((ca.ntp is not None and ca.ntp.accuracy_ms is not None) or ca.date is not None):
        return True, ca.method() or "measured"
    if info.sut.clock_sync:
        return True, f"declared: {info.sut.clock_sync}"
    why = f" ({'; '.join(ca.unavailable)})" if ca is not None and ca.unavailable else ""
    return False, f"a remote server, no accuracy measured{why} and none declared: give --clock-sync"


def ntp_verdict(ca: ClockAccuracy) -> Judged:
    """4.7.2's 10 ms for the load generator's own clock: its NTP daemon's estimate (one clock on loopback); not
    verifiable when no daemon could be read."""
    if ca.same_host:
        return True, "single machine: one clock"
    if ca.ntp is None:
        return None, f"the client's NTP daemon could not be read ({'; '.join(ca.unavailable) or 'none found'})"
    if not ca.ntp.synchronised or ca.ntp.accuracy_ms is None:
        return False, f"the client's clock is not synchronised ({ca.ntp.source})"
    within = f"the client's clock within {ca.ntp.accuracy_ms:.2f} ms of its reference ({ca.ntp.source})"
    if ca.ntp.accuracy_ms > NTP_ACCURACY_MS:
        return False, f"{within}: more than {NTP_ACCURACY_MS:g} ms"
    return True, within


def agreement_verdict(ca: ClockAccuracy) -> Judged:
    """4.7.2's 10 ms between the load generator's and the server's clocks: only an observation of the server's clock
    (the HTTP Date bracket) decides it; one clock on loopback; not verifiable when nothing observed the server's clock,
    or the bracket is too wide to tell."""
    if ca.same_host:
        return True, "single machine: one clock"
    limit = NTP_ACCURACY_MS
    if ca.date is None:
        why = "; ".join(ca.unavailable) or "no Date bracket was measured"
        return None, f"nothing observed the server's clock ({why}); the client's own NTP says nothing of it"
    lo, hi = ca.date.offset_lo_ms, ca.date.offset_hi_ms
    bracket = f"server clock - client clock in [{lo:+.1f}, {hi:+.1f}] ms from {ca.date.probes} Date probes"
    if lo > limit or hi < -limit:
        return False, f"{bracket}: they disagree by more than {limit:g} ms"
    if -limit <= lo and hi <= limit:
        return True, f"{bracket}: within {limit:g} ms"
    return None, f"{bracket}: too wide to tell ({ca.date.note or 'a long round trip'})"


def _ntp(info: RunInfo) -> Judged:
    """4.7.2's 10 ms for the load generator's clock in one run."""
    if info.clock_accuracy is None:
        if info.sut.clock_sync == SINGLE_MACHINE:
            return True, "single machine: one clock"
        return None, "the client's clock was not measured (a run made before infermeter measured it)"
    return ntp_verdict(info.clock_accuracy)


def _agree(info: RunInfo) -> Judged:
    """4.7.2's 10 ms between clocks in one run: the server's, and any remote workers' placed on the coordinator's."""
    far = [w for w in (info.distributed.workers if info.distributed else []) if w.clock and not w.clock.same_host]
    worst = max(far, key=lambda w: w.clock.accuracy_s if w.clock else 0.0, default=None)
    if worst is not None and worst.clock is not None and worst.clock.accuracy_s * 1000 > NTP_ACCURACY_MS:
        return False, f"worker {worst.worker}'s clock is placed within {worst.clock.accuracy_s * 1000:.1f} ms only"
    if info.clock_accuracy is None:
        if info.sut.clock_sync == SINGLE_MACHINE:
            return True, "single machine: one clock"
        return None, "the clocks' agreement was not measured (a run made before infermeter measured it)"
    return agreement_verdict(info.clock_accuracy)


def _rtt(infos: Sequence[RunInfo]) -> Judged:
    if not infos:
        return NO_RUNS
    got = [i.network.rtt_ms_median for i in infos if i.network is not None and i.network.rtt_ms_median is not None]
    if len(got) < len(infos):
        return False, f"not measured for {len(infos) - len(got)} of {len(infos)} runs"
    return True, f"median TCP connect RTT {min(got):.3f}-{max(got):.3f} ms, reported beside TTFT"


def _non_content(infos: Sequence[RunInfo]) -> Judged:
    if not infos:
        return NO_RUNS
    noted = [i.stream.non_content_first for i in infos if i.stream is not None]
    if len(noted) < len(infos):
        return False, f"not counted for {len(infos) - len(noted)} of {len(infos)} runs"
    return True, f"{sum(noted)} requests had a non-content event first; TTFT is time to first content token"


def common_requirements(infos: Sequence[RunInfo], quick: bool) -> list[Requirement]:
    """The MUSTs and SHOULDs that hold for every test, each judged from the runs.  A declared cold start (--warmup
    off) is judged by 4.5.3 instead of 4.5.1 and 4.5.2."""
    return [*declarations(infos, quick), *warmup_requirements(infos), *clock_and_network(infos)]


def declarations(infos: Sequence[RunInfo], quick: bool) -> list[Requirement]:
    """What the runs declared (4.1-4.4, 4.8.1, 5.1.2.3), the procedure's length (5) and whether the client kept its
    schedule (4.2.5)."""
    return [
        _req(
            "MUST",
            "5",
            "the procedure runs at the draft's durations and counts",
            (
                not quick,
                "--quick scaled durations and counts down (a demonstration, not a measurement)"
                if quick
                else "full-length procedure",
            ),
        ),
        _req(
            "MUST",
            "4.1",
            "the SUT boundary is declared before benchmarking",
            _declared(infos, "boundary", "the SUT boundary", "--boundary engine|gateway|compound"),
        ),
        _req(
            "MUST",
            "5.1.2.3",
            "hardware (accelerator type, count, memory) is defined",
            _declared(infos, "hardware", "the hardware", "--hardware"),
        ),
        _req(
            "MUST",
            "5.1.2.3",
            "the prefix caching state is defined",
            _declared(infos, "prefix_caching", "the prefix caching state", "--prefix-caching enabled|disabled"),
        ),
        _req(
            "MUST",
            "4.8.1",
            "the guardrail configuration is disclosed",
            _declared(infos, "guardrails", "the guardrail configuration", "--guardrails"),
        ),
        _req("MUST", "4.8.1", "the report says whether any requests were refused", _refusals(infos)),
        _req(
            "MUST",
            "4.2.5",
            "the load generator keeps its schedule (the client is not the bottleneck)",
            _client(infos),
        ),
        _req(
            "MUST",
            "4.3.3",
            "the workload is generated from a reported deterministic seed",
            _over(
                infos,
                lambda i: (i.workload.seed is not None, f"seed {i.workload.seed}"),
                "{first} (and each run's own)",
            ),
        ),
        _req(
            "MUST",
            "4.4.1",
            "the tokenizer's name, vocabulary size and source are specified",
            _over(infos, _tokenizer, "{first}"),
        ),
        _req("MUST", "4.4.2", "the token counting option (A or B) is declared", _over(infos, _counting, "{first}")),
        _req(
            "MUST",
            "4.4.3",
            "special-token handling is specified: BOS/EOS, system prompt tokens, tool/function-call tokens",
            _over(infos, _special, "{first}"),
        ),
    ]


def warmup_requirements(infos: Sequence[RunInfo]) -> list[Requirement]:
    """The warm-up (4.5.1, 4.5.2) of the runs that had one, and the cold-start declaration (4.5.3) of those that
    did not; none of either when no run was made."""
    req: list[Requirement] = []
    warm = [i for i in infos if i.warmup.cold_start is not True]
    cold = [i for i in infos if i.warmup.cold_start is True]
    if warm:
        req.append(
            _req(
                "MUST",
                "4.5.1",
                f"warm-up completes before measurement: >= {WARMUP_MIN_REQUESTS} requests and "
                f">= {WARMUP_MIN_TOKENS:,} output tokens, the queue drained",
                _over(warm, lambda i: _warm(i.warmup), "every run: {first} (the first)"),
            )
        )
        req.append(
            _req(
                "SHOULD",
                "4.5.2",
                "warm-up completion is verified by a probe before and after",
                _over(warm, lambda i: _probes(i.warmup), "settled in every run; the first: {first}"),
            )
        )
    if cold:
        req.append(
            _req(
                "MUST",
                "4.5.3",
                "a cold-start measurement skips the warm-up and the report clearly indicates it",
                _over(cold, lambda i: _cold(i.warmup), "{n} cold-start runs: {first}"),
            )
        )
    return req


def clock_and_network(infos: Sequence[RunInfo]) -> list[Requirement]:
    """The clocks (4.7.2), the network round trip (4.7.3) and what TTFT measures past non-content events (5.1.3.1)."""
    return [
        _req(
            "MUST",
            "4.7.2",
            "the clock synchronization method and estimated accuracy are stated",
            _over(infos, _clock_stated, "{first}"),
        ),
        _req(
            "MUST",
            "4.7.2",
            f"the load generator's clock is synchronised within {NTP_ACCURACY_MS:g} ms (NTP)",
            _over(infos, _ntp, "{first}"),
        ),
        _req(
            "MUST",
            "4.7.2",
            f"the clocks of load generator and server agree within {NTP_ACCURACY_MS:g} ms",
            _over(infos, _agree, "{first}"),
        ),
        _req("SHOULD", "4.7.3", "the network round trip is measured and reported separately", _rtt(infos)),
        _req(
            "MUST",
            "5.1.3.1",
            "non-content events before content are noted, with what TTFT measures",
            _non_content(infos),
        ),
    ]
