"""The IETF draft's 6.1 equivalence requirements and 6.4 fair-comparison checklist, each judged from the runs: their
declarations, their structured load and their windows on the wall clock.  An item the runs cannot show either way is
"not verifiable" (met None), never met by default."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from urllib.parse import urlsplit

from infermeter.metrics.compared import Group, Run, Span
from infermeter.metrics.load_model import PLAN, LoadModel, differing
from infermeter.run_info import RunInfo, Sut

DURATION_SPREAD = 0.10  # "same test duration": configured bounds at most this far apart, relative
SAFETY_BOUNDARIES = ("Application Gateway", "Compound System")  # where 4.8.2's safety systems are inside the SUT
DISABLED = frozenset({"none", "disabled", "off", "no"})  # a guardrail declaration's first word that says there is none
IDENTIFYING = ("model", "hardware", "software")  # what each system must declare for a difference to be noted
DECLARED = (*IDENTIFYING, "boundary", "prefix_caching", "guardrails")
SHOWN = 6  # differing settings named in a reason before "and N more"


@dataclass
class Finding:
    """One 6.1 equivalence requirement or 6.4 checklist item: met, not met, or not verifiable (None), and why."""

    section: str
    text: str
    met: bool | None
    reason: str
    must: bool = False  # a 6.1 MUST: --strict refuses a comparison that fails one

    @property
    def status(self) -> str:
        return "not verifiable" if self.met is None else "met" if self.met else "NOT MET"


def _same(values: Iterable[object]) -> bool:
    return len({repr(v) for v in values}) <= 1


def _infos(groups: list[Group]) -> list[RunInfo]:
    return [r.info for g in groups for r in g.runs]


def _runs(groups: list[Group]) -> list[Run]:
    return [r for g in groups for r in g.runs]


@dataclass(frozen=True)
class PlanMatch:
    """How a suite comparison paired the runs of one level: the level's name and what paired them (suite.json's
    level, the runs' keys, or their positions in the plan; metrics.suite_comparison.Matching)."""

    level: str
    by: str  # "level", "key", "position"


def equivalence(groups: list[Group], plan: PlanMatch | None = None) -> list[Finding]:
    """The draft's 6.1 MUSTs across every run of the comparison.  Runs of suites compared level by level (`plan`)
    are judged on the plan: each system ran the level at a load relative to its own capacity, so the absolute rate,
    concurrency and send times differ by design and are stated, not judged."""
    infos = _infos(groups)
    boundaries = sorted({str(i.sut.boundary) for i in infos})
    hardware = sorted({str(i.sut.hardware) for i in infos})
    declared = "None" not in hardware
    return [
        same_requests(groups, plan),
        Finding(
            "6.1",
            "Equivalent SUT boundary",
            len(boundaries) == 1 and boundaries[0] != "None",
            "boundary "
            + ", ".join("not declared" if b == "None" else b for b in boundaries)
            + ("" if len(boundaries) == 1 else ": systems measured at different boundaries"),
            must=True,
        ),
        Finding(
            "6.1",
            "Comparable hardware (declared; normalized where it differs, 6.2)",
            declared,
            ("hardware " + "; ".join(hardware))
            if declared
            else "hardware not declared for every run (give --hardware)",
            must=True,
        ),
        same_load(groups) if plan is None else same_plan(groups, plan),
    ]


def same_requests(groups: list[Group], plan: PlanMatch | None = None) -> Finding:
    """6.1 "identical workload": the same requests in the same order from the same workload and seed.  Runs
    compared as they are: their send times too (request_hash); one level of suites (`plan`): the requests alone
    (id, class, input length, output cap), each system sending them at its own level's rate, so for as long as the
    level lasts: the runs' requests must be heads of one sequence (the shortest run's all sent by every other)."""
    runs = _runs(groups)
    infos = [r.info for r in runs]
    seeds = sorted({str(i.workload.seed) for i in infos})
    declared = _same((i.workload.name, i.workload.seed, i.workload.spec) for i in infos)
    text = "Identical workload: same requests in the same order, same seed"
    if plan is None:
        hashes = sorted({r.request_hash for r in runs})
        met = len(hashes) == 1 and declared
        reason = (
            f"request-sequence hash {hashes[0]} in every run"
            if len(hashes) == 1
            else f"{len(hashes)} different request sequences (hashes {', '.join(hashes)}; seeds {', '.join(seeds)})"
        )
    else:
        text += " (send times follow each system's load at the level)"
        sent = [r.sent for r in runs if r.sent is not None]
        head = min((len(s) for s in sent), default=0)
        alike = len(sent) == len(runs) and all(s.same_head(sent[0], head) for s in sent)
        met = alike and declared
        counts = ", ".join(str(len(s)) for s in sent)
        reason = (
            f"the first {head} requests (id, class, input length, output cap) the same in every run; each system "
            f"sent them at its own rate for the level ({counts} requests)"
            if alike
            else f"the runs' requests are not heads of one sequence (seeds {', '.join(seeds)}; {counts} requests)"
        )
    if not declared:
        reason += "; the workload's name, seed or specification differs"
    return Finding("6.1", text, met, reason, must=True)


def same_load(groups: list[Group]) -> Finding:
    """6.1 "same load model and parameters", judged on the structured load (loop, arrival process, rate,
    burstiness, concurrency, requests, duration), not on the words that describe it."""
    by_group = [(g.name, LoadModel.of(r.info)) for g in groups for r in g.runs]
    loads = [m for _, m in by_group]
    what = differing(loads)
    if not what:
        reason = loads[0].describe() if loads else "no runs"
    else:
        seen = list(dict.fromkeys(f"{name} {m.describe()}" for name, m in by_group))
        reason = f"loads differ in {', '.join(what).replace('_', ' ')}: " + " | ".join(seen)
    return Finding("6.1", "Same load model and parameters", not what, reason, must=True)


def _same_level(runs: list[Run], plan: PlanMatch) -> tuple[bool | None, str]:
    """Whether the runs hold one place in the plan: suite.json's level, else the key they were paired by; runs
    paired by position alone cannot show it."""
    named = list(dict.fromkeys(r.level for r in runs))
    if None not in named:
        if len(named) == 1:
            return True, f"level '{named[0]}' of the plan (suite.json) in every run"
        return False, "the runs hold different levels of the plan: " + ", ".join(f"'{n}'" for n in named)
    if plan.by == "key":
        return True, f"the run '{plan.level}' of every suite (suite.json names no levels: paired by key)"
    return None, (
        f"suite.json names no levels and the suites' keys differ: paired by position ('{plan.level}'), which "
        "cannot show that the runs hold the same place in the plan"
    )


def same_plan(groups: list[Group], plan: PlanMatch) -> Finding:
    """6.1 "same load model and parameters" for one level of suites compared: the same level of the plan
    (suite.json's level), and the same kind of load (PLAN: the loop, the arrival process and its burstiness, a
    closed loop's simultaneous start).  The absolute rates and concurrencies, set by each system's own capacity,
    are stated in the reason."""
    runs = _runs(groups)
    level_met, level = _same_level(runs, plan)
    by_group = [(g.name, LoadModel.of(r.info)) for g in groups for r in g.runs]
    loads = [m for _, m in by_group]
    what = differing(loads, PLAN)
    kinds = list(dict.fromkeys(f"{name} {m.kind()}" for name, m in by_group))
    kind = (
        f"load model {loads[0].kind()} in every run"
        if not what and loads
        else f"load models differ in {', '.join(what)}: " + " | ".join(kinds)
    )
    absolute = " | ".join(dict.fromkeys(f"{name} {m.describe()}" for name, m in by_group))
    met: bool | None = False if level_met is False or what else level_met
    reason = f"{level}; {kind}; the absolute load, set by each system's own capacity (not judged): {absolute}"
    return Finding("6.1", "Same load model at the same level of the plan (suites compared)", met, reason, must=True)


def same_duration(groups: list[Group]) -> Finding:
    """6.4 "same test duration", judged on the bound the runs were configured with: their duration
    (load.duration_s), else their request count, else the span of their scheduled send times.  The measured window
    (first send to last token) is not judged: it holds each system's drain, so the slower system would fail."""
    runs = _runs(groups)
    loads = [r.info.load for r in runs]
    durations = [x.duration_s for x in loads]
    counts = [x.requests for x in loads]
    values: list[float]
    if runs and all(d is not None for d in durations):
        what, unit, values = "configured duration (load.duration_s)", "s", [float(d or 0) for d in durations]
    elif runs and all(c is not None for c in counts):
        what, unit, values = "configured request count (load.requests)", "requests", [float(c or 0) for c in counts]
    else:
        what, unit, values = "span of scheduled send times", "s", [r.schedule_s for r in runs]
    top = max(values, default=0.0)
    spread = (top - min(values)) / top if top > 0 else 0.0
    windows = [r.summary.duration_s for r in runs]
    measured = f"{min(windows):.1f}-{max(windows):.1f} s" if windows else "none"
    reason = (
        f"judged on the {what}: {min(values, default=0.0):g}-{top:g} {unit} ({spread:.0%} apart; "
        f"{DURATION_SPREAD:.0%} allowed); the measured windows ({measured}) hold each system's own drain and are "
        "not judged"
    )
    return Finding("6.4", "Same test duration", spread <= DURATION_SPREAD, reason)


def checklist(groups: list[Group]) -> list[Finding]:
    """The draft's 6.4 fair-comparison checklist, each item judged from the runs."""
    infos = _infos(groups)
    warmups = {(i.warmup.done, i.warmup.requests, i.warmup.cold_start) for i in infos}
    slos = {repr(sorted(i.slo.items())) for i in infos}
    specs = _same(i.workload.spec for i in infos)
    return [
        Finding("6.4", "Same workload specification", specs, "one workload specification" if specs else "differ"),
        same_duration(groups),
        Finding(
            "6.4",
            "Same warm-up procedure",
            len(warmups) == 1,
            "one warm-up procedure" if len(warmups) == 1 else f"{len(warmups)} different warm-ups",
        ),
        Finding(
            "6.4",
            "Same success criteria (SLOs)",
            len(slos) == 1,
            "one set of SLOs" if len(slos) == 1 else "the runs were judged against different SLOs",
        ),
        same_time(groups),
        production_representative(groups),
        differences_noted(groups),
    ]


# ----- "both systems tested at same time (if using shared resources)"


def _clock(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _host(info: RunInfo) -> str | None:
    return urlsplit(info.sut.url).hostname if info.sut.url else None


def shared_resources(groups: list[Group]) -> tuple[bool | None, str]:
    """Whether the systems drew on one machine, and the evidence: the embedded emulator serves on the load
    generator's host (every emulated system shares it), and live systems served from one host share that host.
    Different hosts: run.json cannot tell (a network or a cluster may still be shared)."""
    emulated = [g.name for g in groups if any(r.info.kind == "emulated" for r in g.runs)]
    if emulated:
        return True, f"{', '.join(emulated)} ran on the embedded emulator, on the load generator's own host"
    hosts = {g.name: {h for r in g.runs if (h := _host(r.info))} for g in groups}
    together = sorted({h for a, b in combinations(hosts.values(), 2) for h in a & b})
    if together:
        return True, f"the systems were served from one host ({', '.join(together)})"
    named = "; ".join(f"{g} {', '.join(sorted(h)) or 'no URL'}" for g, h in hosts.items())
    return None, f"the systems were served from different hosts ({named}); a shared network or cluster is not declared"


def _gap(a: Span, b: Span) -> float:
    """Seconds between two windows (0 when they overlap)."""
    return max(0.0, max(a.start, b.start) - min(a.end, b.end))


def same_time(groups: list[Group]) -> Finding:
    """Judged from each group's runs on the wall clock: the groups' spans overlap (interleaved or concurrent runs)
    or they ran apart, by how much; a gap matters where the systems shared resources."""
    text = "Systems tested at the same time (if using shared resources)"
    spans = {g.name: [r.span for r in g.runs if r.span is not None] for g in groups}
    virtual = [g.name for g in groups if all(r.info.kind == "simulated" for r in g.runs)]
    blind = [name for name, s in spans.items() if not s and name not in virtual]
    if blind:
        return Finding("6.4", text, None, f"{', '.join(blind)}: no wall-clock window in run.json (no request sent)")
    timed = {name: Span(min(s.start for s in got), max(s.end for s in got)) for name, got in spans.items() if got}
    apart = max((_gap(a, b) for a, b in combinations(timed.values(), 2)), default=0.0)  # none: < 2 timed
    when = "; ".join(f"{name} {_clock(s.start)}-{_clock(s.end)[11:]} UTC" for name, s in timed.items())
    shared, evidence = shared_resources(groups)
    met: bool | None = apart == 0 or (False if shared else None)
    if len(timed) < 2:
        reason = f"{', '.join(virtual)} simulated on a virtual clock: at most one system drew on real resources"
    elif apart == 0:
        reason = f"the groups' runs overlap in time, 0 s apart ({when})"
    elif shared:
        reason = (
            f"{evidence}, and the groups ran one after the other, {apart:.0f} s apart ({when}): interleave their "
            "runs (A, B, A, B) so that both meet the same conditions"
        )
    else:
        reason = (
            f"the groups ran {apart:.0f} s apart ({when}); whether they shared resources cannot be told: {evidence}"
        )
    return Finding("6.4", text, met, reason)


# ----- "both systems in production-representative configuration"


def _disabled(guardrails: str) -> bool:
    """Whether a guardrail declaration says there is none: its first word is one of DISABLED ("none", "off: ..."),
    not merely its start ("offline moderation", "nonstop filtering" are guardrails)."""
    words = re.findall(r"[a-z]+", guardrails.lower())
    return bool(words) and words[0] in DISABLED


def _suts(g: Group) -> list[Sut]:
    seen: dict[str, Sut] = {}
    for r in g.runs:
        seen.setdefault(r.info.sut.model_dump_json(exclude={"url"}), r.info.sut)
    return list(seen.values())


def production_representative(groups: list[Group]) -> Finding:
    """Judged from the declarations: a boundary, the guardrails and the prefix caching state as served.  Safety
    systems switched off at a boundary that includes them (4.8.2: enabled in their default configuration) or faults
    injected into the server are not production-representative; an undeclared item leaves it not verifiable."""
    text = "Production-representative configuration (4.8.2: safety systems in their default configuration)"
    problems, unknown, said = [], [], []
    for g in groups:
        for sut in _suts(g):
            caching = sut.prefix_caching if sut.prefix_caching in ("enabled", "disabled") else None
            missing = [n for n, v in (("boundary", sut.boundary), ("guardrails", sut.guardrails)) if v is None]
            missing += [] if caching is not None else [f"prefix caching ({sut.prefix_caching or 'not declared'})"]
            if missing:
                unknown.append(f"{g.name} declares no {', '.join(missing)}")
            if sut.boundary in SAFETY_BOUNDARIES and sut.guardrails is not None and _disabled(sut.guardrails):
                problems.append(
                    f"{g.name}: safety systems off ('{sut.guardrails}') at the {sut.boundary} boundary, which "
                    "includes them"
                )
            if sut.faults:
                problems.append(f"{g.name}: {len(sut.faults)} fault(s) injected into the server")
            said.append(f"{g.name}: {sut.boundary}, guardrails {sut.guardrails}, prefix caching {caching}")
    met: bool | None = None if unknown and not problems else not problems
    if problems:
        reason = "; ".join(problems)
    elif unknown:
        reason = "; ".join(unknown) + " (give --boundary, --guardrails, --prefix-caching)"
    else:
        reason = "; ".join(dict.fromkeys(said))
    return Finding("6.4", text, met, reason)


# ----- "differences in configuration explicitly noted"


def flatten(value: object, prefix: str) -> dict[str, str]:
    """A nested mapping's leaves by dotted name ("emulator.engine.scheduler.name"), each one's repr."""
    if isinstance(value, Mapping):
        return {k: v for key, item in value.items() for k, v in flatten(item, f"{prefix}.{key}").items()}
    return {prefix: repr(value)}


def settings(run: Run) -> dict[str, str]:
    """What configures a system beyond its declaration, flattened: the embedded emulator's configuration (as the
    caller parsed it, Run.declared), the simulated engine's, and the client's request options."""
    out = dict(run.declared.emulator) if run.info.kind == "emulated" and run.declared is not None else {}
    if run.info.engine is not None:
        out.update(flatten(run.info.engine.config, "engine"))
    if run.info.client is not None:
        out.update(flatten(run.info.client.model_dump(exclude={"endpoint", "open_files_limit"}), "client"))
    return out


def differences_noted(groups: list[Group]) -> Finding:
    """Every system declares its model, hardware and software (else a difference there would go unnoted), and each
    difference between the groups is named: in the declarations, or in the emulator's, engine's or client's
    settings; different systems whose every declaration and setting is the same fail (what differs is unsaid)."""
    text = "Differences in configuration explicitly noted"
    lacking = []
    for g in groups:
        missing = [f for f in IDENTIFYING if any(getattr(r.info.sut, f) is None for r in g.runs)]
        if missing:
            lacking.append(f"{g.name} declares no {', '.join(missing)}")
    firsts = [g.runs[0].info for g in groups]
    declared = [f for f in DECLARED if not _same(getattr(i.sut, f) for i in firsts)]
    flats = [settings(g.runs[0]) for g in groups]
    other = [k for k in sorted({k for f in flats for k in f}) if not _same(f.get(k) for f in flats)]
    named = [
        f"{f.replace('_', ' ')}: "
        + " vs ".join(f"{g.name} '{getattr(i.sut, f)}'" for g, i in zip(groups, firsts, strict=True))
        for f in declared
    ]
    if other:
        more = f" and {len(other) - SHOWN} more" if len(other) > SHOWN else ""
        named.append(f"settings {', '.join(other[:SHOWN])}{more}")
    unsaid = not named and not _same(g.config.get("system") for g in groups)
    apart = {  # the load by its parameters (LoadModel), not by the words run.json describes it in
        "load": bool(differing([LoadModel.of(i) for i in firsts])),
        "workload": not _same(g.config.get("workload") for g in groups),
    }
    rest = [k for k, differs in apart.items() if differs]
    if lacking:
        flags = ", ".join(f"--{f}" for f in IDENTIFYING)
        reason = f"{'; '.join(lacking)}: a difference there would go unnoted (give {flags})"
    elif unsaid:
        reason = (
            "the groups are different systems (run.json's system blocks differ, e.g. their URLs) with the same "
            "declarations and settings: state what differs (--software, --hardware)"
        )
    else:
        reason = ("differences: " + "; ".join(named) if named else "no difference in the systems' configuration") + (
            f" (the {' and '.join(rest)} differ{'' if len(rest) > 1 else 's'} too)" if rest else ""
        )
    return Finding("6.4", text, not lacking and not unsaid, reason)
