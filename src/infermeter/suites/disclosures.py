"""The requirements every test of the draft shares (sections 4.1-4.8, 5.1.3.1), judged from the runs' run.json:
what was declared, what was measured before the load, and whether the procedure ran at full length."""

from __future__ import annotations

from collections.abc import Sequence

from infermeter.run_info import RunInfo
from infermeter.suites.framework import Requirement

NOT_DECLARED = "not declared"


def _all(infos: Sequence[RunInfo], attr: str) -> list[str | None]:
    return [getattr(i.sut, attr) for i in infos]


def _declared(infos: Sequence[RunInfo], attr: str, what: str, option: str) -> tuple[bool, str]:
    values = _all(infos, attr)
    missing = sum(v is None for v in values)
    if missing:
        return False, f"{what} {NOT_DECLARED} for {missing} of {len(values)} runs: give {option}"
    shown = sorted({str(v) for v in values})
    return True, "; ".join(shown)


def common_requirements(infos: Sequence[RunInfo], quick: bool) -> list[Requirement]:
    """The MUSTs and SHOULDs that hold for every test, each met or not with its reason."""
    req: list[Requirement] = []

    def add(level: str, section: str, text: str, met: bool, reason: str) -> None:
        req.append(Requirement(level=level, section=section, text=text, met=met, reason=reason))  # type: ignore[arg-type]

    add(
        "MUST",
        "5",
        "the procedure runs at the draft's durations and counts",
        not quick,
        "--quick scaled durations and counts down (a demonstration, not a measurement)"
        if quick
        else "full-length procedure",
    )
    met, why = _declared(infos, "boundary", "the SUT boundary", "--boundary engine|gateway|compound")
    add("MUST", "4.1", "the SUT boundary is declared before benchmarking", met, why)
    met, why = _declared(infos, "hardware", "the hardware", "--hardware")
    add("MUST", "5.1.2.3", "hardware (accelerator type, count, memory) is defined", met, why)
    met, why = _declared(infos, "prefix_caching", "the prefix caching state", "--prefix-caching enabled|disabled")
    add("MUST", "5.1.2.3", "the prefix caching state is defined", met, why)
    met, why = _declared(infos, "guardrails", "the guardrail configuration", "--guardrails")
    add("MUST", "4.8.1", "the guardrail configuration is disclosed", met, why)
    refusals = [i.stream.refusals if i.stream is not None else None for i in infos]
    known = [r for r in refusals if r is not None]
    add(
        "MUST",
        "4.8.1",
        "the report says whether any requests were refused",
        len(known) == len(infos),
        f"{sum(known)} refusals (finish_reason content_filter) over {len(known)} runs"
        if len(known) == len(infos)
        else "refusals were not counted for some runs",
    )
    bound = [k for k, i in enumerate(infos) if i.client_health is not None and i.client_health.bound]
    add(
        "MUST",
        "4.2.5",
        "the load generator keeps its schedule (the client is not the bottleneck)",
        not bound,
        f"client-bound in {len(bound)} of {len(infos)} runs: {infos[bound[0]].client_health.warning()}"  # type: ignore[union-attr]
        if bound
        else "the client kept up in every run it sent",
    )
    seeds = {i.workload.seed for i in infos}
    add(
        "MUST",
        "4.3.3",
        "the workload is generated from a reported deterministic seed",
        None not in seeds,
        f"seed {', '.join(str(s) for s in sorted(s for s in seeds if s is not None))}"
        if None not in seeds
        else "a run has no workload seed",
    )
    names = {i.tokenizer.name for i in infos}
    methods = {i.tokenizer.counting_method for i in infos}
    add(
        "MUST",
        "4.4.1, 4.4.2",
        "the tokenizer and the token counting option are declared",
        None not in names and methods <= {"A", "B"},
        f"{', '.join(sorted(str(n) for n in names))}, option {', '.join(sorted(str(m) for m in methods))}",
    )
    special = {i.tokenizer.special_tokens for i in infos}
    add(
        "MUST",
        "4.4.3",
        "special-token handling (BOS/EOS, counted or not) is specified",
        None not in special,
        "; ".join(sorted(str(s) for s in special if s is not None)) or NOT_DECLARED,
    )
    cold = [i for i in infos if not i.warmup.done]
    add(
        "MUST",
        "4.5.1",
        "warm-up completes before measurement",
        not cold,
        "every run was warmed up"
        if not cold
        else f"{len(cold)} of {len(infos)} runs measured without a completed warm-up ({cold[0].warmup.note})",
    )
    stable = [i.warmup.stable for i in infos]
    add(
        "SHOULD",
        "4.5.2",
        "warm-up completion is verified by a probe before and after",
        all(s is True for s in stable),
        "latency probes settled in every run"
        if all(s is True for s in stable)
        else f"verified in {sum(s is True for s in stable)} of {len(stable)} runs",
    )
    clocks = _all(infos, "clock_sync")
    add(
        "MUST",
        "4.7.2",
        "the clock synchronization method and accuracy are stated",
        None not in clocks,
        "; ".join(sorted({str(c) for c in clocks if c is not None})) or f"{NOT_DECLARED}: give --clock-sync",
    )
    rtts = [i.network.rtt_ms_median if i.network is not None else None for i in infos]
    got = [r for r in rtts if r is not None]
    add(
        "SHOULD",
        "4.7.3",
        "the network round trip is measured and reported separately",
        len(got) == len(infos),
        f"median TCP connect RTT {min(got):.3f}-{max(got):.3f} ms" if got else "not measured",
    )
    noted = [i.stream.non_content_first if i.stream is not None else None for i in infos]
    add(
        "MUST",
        "5.1.3.1",
        "non-content events before content are noted, with what TTFT measures",
        all(n is not None for n in noted),
        f"{sum(n or 0 for n in noted)} requests had a non-content event first; TTFT is time to first content token"
        if all(n is not None for n in noted)
        else "not counted for some runs",
    )
    return req
