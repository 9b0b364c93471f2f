"""A run's plan, resolved once from its configuration (config.run.RunConfig): the target, the requests (drawn once,
the warm-up drawing its own from the same source), the load pattern, the parsed objectives and the disclosures.
Everything that conducts, sends, watches or records a run takes the plan as it is; nothing patches it afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.errors import UserError
from infermeter.load.driver import LoadPattern
from infermeter.load.target import Endpoint, RunTarget, resolve_target
from infermeter.run_info import WorkloadDeclaration
from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets
from infermeter.workload.content import describe
from infermeter.workload.spec import Requests, WorkloadSpec, generate

if TYPE_CHECKING:
    from infermeter.config.run import RunConfig
    from infermeter.config.sections import Workload
    from infermeter.metrics.fluidity import Deadlines

MIN_DURATION_POOL = 100_000  # requests drawn for a closed loop bounded by both a count and a time
MAX_DRAWN = 10_000_000  # a generated workload draws as many requests as asked (the CLI bounds a run to this)
GRACE_S = 30.0  # after a stop, how long in-flight requests may finish before they are cancelled
NO_LOAD = "give a load: --rate R (open loop), --concurrency C (closed loop) or --trace FILE (replay)"


@dataclass(frozen=True)
class WorkloadSource:
    """Where requests are drawn from, its file read once: a BurstGPT trace's usable requests in arrival order (its
    own times, uncompressed), or a workload to generate from."""

    spec: WorkloadSpec | None = None
    trace: Requests | None = None
    trace_path: Path | None = None

    @classmethod
    def read(cls, section: Workload) -> WorkloadSource:
        """The configuration's workload: its trace or workload file read here, and only here."""
        if section.trace is not None:
            from infermeter.workload.traces import load_burstgpt

            try:
                return cls(trace=load_burstgpt(section.trace), trace_path=section.trace.resolve())
            except UserError as exc:
                raise UserError(f"--trace {exc}") from None
        return cls.named(section.workload, section.input_tokens, section.output_tokens)

    @classmethod
    def named(
        cls, workload: str | None, input_tokens: int | None = None, output_tokens: int | None = None
    ) -> WorkloadSource:
        """A standard workload, a workload file, or fixed lengths."""
        from infermeter.workload.standard import fixed_lengths, resolve

        if input_tokens is not None or output_tokens is not None:
            if workload is not None or input_tokens is None or output_tokens is None:
                raise UserError("give either --workload, or both --input-tokens and --output-tokens")
            return cls(spec=fixed_lengths(input_tokens, output_tokens))
        return cls(spec=resolve(workload or "synthetic-uniform"))

    def size(self) -> int:
        """How many requests it can give: a trace's usable rows, else (a generated workload) no bound."""
        return MAX_DRAWN if self.trace is None else len(self.trace)

    def draw(
        self, n: int, seed: int, arrivals: ArrivalSpec | None = None, rps_scale: float = 1.0
    ) -> tuple[Requests, dict[str, Any]]:
        """n requests with their arrival offsets, and the declaration run.json keeps.  A trace gives its first n,
        arriving at its own times compressed rps_scale times unless `arrivals` names a rate process."""
        if self.trace is None:
            assert self.spec is not None
            requests = generate(self.spec, n, seed)
            declaration = self.spec.declaration(seed)
        else:
            assert self.trace_path is not None
            if n > len(self.trace):
                have = len(self.trace)
                raise UserError(
                    f"--trace {self.trace_path} has {have} usable requests, fewer than the {n} asked for: ask for at "
                    f"most {have}"
                )
            requests = self.trace.head(n)
            requests.arrival_s = requests.arrival_s / rps_scale
            declaration = {
                "name": f"trace:{self.trace_path.name}",
                "seed": seed,
                "source": str(self.trace_path),
                "content": describe("words"),
                "notes": ["lengths and arrival times replayed from a BurstGPT-format trace, sorted by timestamp"],
            }
            if arrivals is None:
                arrivals = ArrivalSpec(kind="trace", time_scale=rps_scale)
        if arrivals is not None and arrivals.kind != "trace":
            requests.arrival_s = arrival_offsets(arrivals, n, seed)
        declaration["arrivals"] = (
            None if arrivals is None else {**arrivals.model_dump(), "description": arrivals.describe()}
        )
        return requests, declaration


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

    @classmethod
    def draw(cls, config: RunConfig, source: WorkloadSource) -> Work:
        """The requests and pattern of a resolved configuration, drawn from `source` (read once by the caller)."""
        from infermeter.workload.build import arrival_spec

        load, w = config.load, config.workload
        arrivals = arrival_spec(load.arrival, load.rate, load.burstiness) if load.rate is not None else None
        open_loop = arrivals is not None or (w.trace is not None and load.concurrency is None)
        if load.concurrency is None and not open_loop:
            raise UserError(NO_LOAD)
        requests, declared = source.draw(_request_count(config, arrivals), w.seed, arrivals, w.rps_scale)
        pattern = LoadPattern(
            offsets=requests.arrival_s if open_loop else None,
            concurrency=load.concurrency,
            duration=load.duration if load.min_duration is None else load.min_duration,
            barrier=load.barrier,
            min_requests=load.requests if load.min_duration is not None else None,
        )
        own = load.warmup_workload
        warm_source = source if own is None else WorkloadSource.named(own)
        warmup = WarmupPlan(load.warmup, warm_source, w.seed, arrivals, w.rps_scale, own)
        return cls(
            requests, WorkloadDeclaration.model_validate(declared), pattern, arrivals, load.requests, load.duration,
            load.min_duration, w.trace, w.rps_scale, warmup,
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
        text += f", {self.duration:g} s" if self.duration else ""
        text += f", until {self.asked} requests and {self.min_duration:g} s" if self.min_duration else ""
        return text


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
