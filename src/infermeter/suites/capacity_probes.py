"""The `capacity` command's search against a target: the configuration checked and its workload read once, the search
directory claimed, and each probe a run of that configuration at the probe's rate (a trace keeps its own arrival
pattern, compressed to the rate)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infermeter.config.run import RunConfig
from infermeter.errors import ExitCode, Stopped, UserError
from infermeter.load.plan import Work
from infermeter.load.target import Endpoint
from infermeter.metrics.slo import Slo
from infermeter.suites.capacity import CapacityResult, ProbeResult, claim_search_dir
from infermeter.workload.source import WorkloadSource


@dataclass(frozen=True)
class Bounds:
    """How the search goes: its first and highest rate, when it stops, and what a probe must meet."""

    start_rate: float
    max_rate: float
    tolerance: float
    max_probes: int
    min_success: float


@dataclass(frozen=True)
class CapacitySearch:
    """A search ready to run: the resolved configuration (its rate a placeholder), its workload read once, the trace's
    own rate when it replays one, and where the probes go."""

    config: RunConfig
    source: WorkloadSource
    natural: float | None  # a trace's own mean arrival rate, req/s
    slos: list[Slo]
    bounds: Bounds
    out: Path
    progress: bool

    @classmethod
    def prepare(cls, config: RunConfig, slos: list[Slo], bounds: Bounds, out: Path, progress: bool) -> CapacitySearch:
        """Check the configuration before anything starts, read its workload, and claim `out` (a search with the same
        settings there is resumed)."""
        from infermeter.workload.build import arrival_spec
        from infermeter.workload.traces import offered_rate

        w, load = config.workload, config.load
        source = WorkloadSource.read(w)
        drawn, _ = source.draw((load.requests or 300) if source.trace is not None else 1, w.seed)  # a file: as asked
        if source.timed and (load.arrival != "poisson" or load.burstiness != 1.0):
            raise UserError(
                f"--arrival and --burstiness shape a rate's arrivals: with {source.flag} each probe keeps the file's "
                "own pattern, scaled to its rate: drop them"
            )
        natural = offered_rate(drawn) if source.timed else None
        arrival_spec(load.arrival, bounds.start_rate, load.burstiness)
        settings = {
            "config": config.model_dump(mode="json", exclude={"load": {"rate"}}),
            "slos": [s.text for s in slos],
            "min_success": bounds.min_success,
        }
        claim_search_dir(out, settings)
        return cls(config, source, natural, slos, bounds, out, progress)

    def probe_config(self, rate: float) -> RunConfig:
        """The configuration of the probe at `rate`: an open loop at it, or the trace's own pattern compressed to it."""
        cfg, load = self.config, self.config.load
        if self.natural is None:
            return cfg.model_copy(update={"load": load.model_copy(update={"rate": rate})})
        scaled = cfg.workload.model_copy(update={"rps_scale": rate / self.natural})
        return cfg.model_copy(update={"workload": scaled, "load": load.model_copy(update={"rate": None})})

    def run(self, endpoint: Endpoint, on_probe: Callable[[ProbeResult], None]) -> CapacityResult:
        """The search against `endpoint`, each probe a full run kept in the search's directory."""
        from infermeter.conduct.run import conduct
        from infermeter.event_loop import run_async
        from infermeter.suites.capacity import search
        from infermeter.suites.lab import STOP_CODES

        def run_probe(rate: float, run_dir: Path) -> None:
            cfg = self.probe_config(rate)
            work = Work.draw(cfg, self.source)
            result = run_async(conduct(cfg, endpoint, run_dir, self.progress, work))
            if result.stopped is not None:
                raise Stopped(
                    f"capacity search stopped during the probe at {rate:g} req/s ({result.stopped}); the probes "
                    f"finished so far are kept in {self.out}: run the same command again to resume",
                    STOP_CODES.get(result.stopped, ExitCode.INCOMPLETE),
                )

        b = self.bounds
        return search(
            run_probe, self.slos, self.out, b.start_rate, b.max_rate, b.tolerance, b.max_probes,
            min_success=b.min_success, on_probe=on_probe,
        )  # fmt: skip
