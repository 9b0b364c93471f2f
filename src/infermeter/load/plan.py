"""A run's plan, resolved once from its configuration (config.run.RunConfig): the target, the requests (drawn once,
the warm-up drawing its own from the same source), the load pattern, the parsed objectives and the disclosures.
Everything that conducts, sends, watches or records a run takes the plan as it is; nothing patches it afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.errors import UserError
from infermeter.load.driver import LoadPattern
from infermeter.load.target import Endpoint, RunTarget, resolve_target
from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets, ramped
from infermeter.workload.source import WorkloadSource
from infermeter.workload.spec import Requests
from infermeter.workload_declaration import WorkloadDeclaration

if TYPE_CHECKING:
    from infermeter.config.run import RunConfig
    from infermeter.metrics.fluidity import Deadlines

MIN_DURATION_POOL = 100_000  # requests drawn for a closed loop bounded by both a count and a time
GRACE_S = 30.0  # after a stop, how long in-flight requests may finish before they are cancelled
NO_LOAD = "give a load: --rate R (open loop), --concurrency C (closed loop) or --trace FILE (replay)"
NO_LOAD_DATASET = (
    "--dataset: this dataset has no timestamps to replay: give a load, --rate R (open loop) or --concurrency C "
    "(closed loop)"
)
DATASET_WARMUP = "synthetic-uniform"  # the warm-up's workload when a dataset's every row is measured
SYNTHETIC_TURNS = (2, 6)  # a generated workload's sessions (--multi-turn): turns drawn uniformly from this range
SESSION_STREAM = 23  # the random stream synthetic sessions' lengths draw from ([seed, SESSION_STREAM])


@dataclass(frozen=True)
class WarmupPlan:
    """The warm-up (draft 4.5): `count` -1 follows the draft's rule, 0 is off, N sends exactly N requests, drawn from
    `source` with the run's seed + 1 (the run's own workload unless --warmup-workload names `own`)."""

    count: int
    source: WorkloadSource
    seed: int
    arrivals: ArrivalSpec | None = None
    rps_scale: float = 1.0
    own: str | None = None


@dataclass(frozen=True)
class Work:
    """What a run sends, drawn before anything starts: the requests, their declaration, the driver's pattern, and
    the load options run.json describes."""

    requests: Requests
    declaration: WorkloadDeclaration
    pattern: LoadPattern
    arrivals: ArrivalSpec | None
    asked: int | None  # --requests
    duration: float | None
    min_duration: float | None
    trace: Path | None
    rps_scale: float
    warmup: WarmupPlan
    ramp_up: float | None = None  # --ramp-up: the rate or the users rise over these seconds

    @classmethod
    def draw(cls, config: RunConfig, source: WorkloadSource) -> Work:
        """The requests and pattern of a resolved configuration, drawn from `source` (read once by the caller)."""
        from infermeter.workload.build import arrival_spec

        load, w = config.load, config.workload
        arrivals = arrival_spec(load.arrival, load.rate, load.burstiness) if load.rate is not None else None
        open_loop = arrivals is not None or (source.timed and load.concurrency is None)
        if load.concurrency is None and not open_loop:
            raise UserError(NO_LOAD if source.dataset is None else NO_LOAD_DATASET)
        n = _request_count(config, arrivals)
        if source.trace is not None and load.requests is None:
            n = min(n, source.size())  # a duration bounds it: the file holds at most this many
        requests, declared = source.draw(n, w.seed, arrivals, w.rps_scale)
        if w.multi_turn:
            if requests.session is None:
                requests.session, requests.turn = synthetic_sessions(len(requests), w.seed)
            declared["sessions"] = _sessions_block(config, requests)
        if load.model_mix is not None:
            from infermeter.workload.model_mix import parse_model_mix

            mix = parse_model_mix(load.model_mix)
            if requests.session is None:
                requests.models = mix.choose(len(requests), w.seed)
            else:  # a conversation stays on one model
                requests.models = mix.choose(int(requests.session.max()) + 1, w.seed)[requests.session]
        offsets = requests.arrival_s if open_loop else None
        if offsets is not None and w.multi_turn:  # a session arrives, its later turns follow their replies
            opening = requests.turn == 0
            if arrivals is None:  # a timed dataset's own clock: each turn carries its session's arrival
                offsets = offsets[opening]
            else:
                offsets = arrival_offsets(arrivals, int(np.count_nonzero(opening)), w.seed)
        if offsets is not None and load.ramp_up:
            offsets = ramped(offsets, load.ramp_up)
        pattern = LoadPattern(
            offsets=offsets,
            concurrency=load.concurrency,
            duration=load.duration if load.min_duration is None else load.min_duration,
            barrier=load.barrier,
            min_requests=load.requests if load.min_duration is not None else None,
            ramp_up=load.ramp_up if offsets is None else None,
            max_concurrency=load.max_concurrency,
        )
        own = load.warmup_workload
        warm_source = source.rest(len(requests)) if own is None else WorkloadSource.named(own)
        if warm_source is None:  # a dataset whose every row is measured: the warm-up must not send them first
            own = DATASET_WARMUP
            warm_source = WorkloadSource.named(own)
        warmup = WarmupPlan(load.warmup, warm_source, w.seed, arrivals, w.rps_scale, own)
        return cls(
            requests, WorkloadDeclaration.model_validate(declared), pattern, arrivals, load.requests, load.duration,
            load.min_duration, w.trace or w.dataset, w.rps_scale, warmup, load.ramp_up,
        )  # fmt: skip

    @property
    def n(self) -> int:
        return len(self.requests)

    @property
    def shown(self) -> int:
        """The requests the progress display counts to (a closed loop held for a duration: the ones asked for)."""
        return self.asked if self.min_duration is not None and self.asked is not None else self.n

    def describe(self) -> str:
        """run.json's one-line description of the load (where it is sent from apart)."""
        pattern = self.pattern
        if self.arrivals is not None:
            text = f"open-loop {self.arrivals.describe()}"
        elif pattern.offsets is not None and self.trace is not None:
            text = f"open-loop replay of {self.trace.name}'s arrival times, compressed x{self.rps_scale:g}"
        else:
            text = f"closed-loop concurrency {pattern.concurrency}"
            text += ", simultaneous start" if pattern.barrier else ""
        if self.ramp_up:
            text += f", rising linearly over the first {self.ramp_up:g} s"
        if pattern.max_concurrency is not None:
            text += f", at most {pattern.max_concurrency} in flight (a send waits for a free slot)"
        if self.requests.session is not None:
            text += ": multi-turn sessions (open loop: session arrivals; closed loop: users)"
        text += f", {self.duration:g} s" if self.duration else ""
        text += f", until {self.asked} requests and {self.min_duration:g} s" if self.min_duration else ""
        return text


def synthetic_sessions(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Session and turn columns for n generated requests (--multi-turn with a workload): sessions of
    SYNTHETIC_TURNS turns, drawn with a seeded stream of their own, filled in request order."""
    rng = np.random.default_rng([seed, SESSION_STREAM])
    lo, hi = SYNTHETIC_TURNS
    lengths = rng.integers(lo, hi + 1, size=n // lo + 1)
    session = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)[:n]
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    turn = np.arange(n, dtype=np.int64) - starts[session]
    return session, turn


def _sessions_block(config: RunConfig, requests: Requests) -> dict[str, Any]:
    """run.json's sessions block of a multi-turn run."""
    from infermeter.workload.think_time import ThinkTime

    assert requests.session is not None
    w, load = config.workload, config.load
    loop = (
        f"closed: {load.concurrency} users, each running sessions one after another"
        if load.concurrency is not None
        else "open: sessions arriving on their own, each turn sent after the previous reply and a think time"
    )
    lo, hi = SYNTHETIC_TURNS
    history = "the server's actual replies" if w.history == "replies" else "the dataset's own replies"
    return {
        "sessions": len(np.unique(requests.session)),
        "turns": len(requests),
        "history": history if w.dataset is not None else f"{history}; sessions of {lo}-{hi} turns (uniform)",
        "think_time": ThinkTime.parse(w.think_time).describe(),
        "loop": loop,
    }


def _request_count(config: RunConfig, arrivals: ArrivalSpec | None) -> int:
    """How many requests to draw: those asked for, or enough for the duration."""
    load = config.load
    if load.min_duration is not None:
        return max(load.requests or 0, MIN_DURATION_POOL)  # how many the seconds take beyond `requests` is seen live
    if load.requests is not None:
        return load.requests
    if load.duration is None:
        return 1000
    if arrivals is not None and arrivals.rate is not None:
        return int(arrivals.rate * load.duration * 1.2) + 100
    return 100_000  # closed loop bounded by time: more than it can send


@dataclass(frozen=True)
class RunPlan:
    """One run, resolved: its configuration (run.json keeps it), where it is written, the target, the work, the
    parsed SLOs and deadlines, and what the user declared about the server."""

    config: RunConfig
    out: Path
    progress: bool
    target: RunTarget
    work: Work
    slo: dict[str, float] = field(default_factory=dict)
    deadlines: Deadlines | None = None
    disclosed: dict[str, str] = field(default_factory=dict)  # run.json's sut fields (config.sections.Disclosures)
    software: dict[str, str] = field(default_factory=dict)  # --software NAME=VERSION, name -> version
    grace_s: float = GRACE_S

    @property
    def seed(self) -> int:
        return self.config.workload.seed


async def plan_run(
    config: RunConfig, endpoint: Endpoint, out: Path, progress: bool, work: Work | None = None
) -> RunPlan:
    """The plan of a resolved configuration sent to `endpoint` (its model resolved here); `work`: the requests and
    pattern when the caller drew them already (before the target started, so a bad workload costs nothing)."""
    from infermeter.metrics.fluidity import parse_deadlines
    from infermeter.metrics.goodput import parse_slo

    work = work or Work.draw(config, WorkloadSource.read(config.workload))
    target = await resolve_target(config.target, endpoint)
    o, d = config.objectives, config.disclosures
    return RunPlan(
        config, out, progress, target, work,
        slo=parse_slo(o.slo) if o.slo else {},
        deadlines=parse_deadlines(o.deadlines) if o.deadlines else None,
        disclosed=d.declared(),
        software=d.software_versions(),
    )  # fmt: skip
