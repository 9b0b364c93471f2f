"""One engine model, two clocks: `infermeter sim` against `infermeter run` on the embedded emulator.

For each scheduler and load (a share of the capacity the simulator predicts: completed requests/s when the whole
workload arrives at once), one workload, seed and Poisson arrival schedule is simulated and sent to a fresh emulator
with the same engine configuration (the run builds its requests and send times with the simulator's builder and
seed).  Both are summarized from their records the same way (client token times, ITL option B).  The table gives
TTFT, ITL, TPOT and E2E at P50 and P99: simulated, emulated, the relative error (sim - emulator) / emulator, and
whether it is within the bound (P50 3%, P99 10%).

The emulator's HTTP path (request parsing, tokenization, SSE writing, the client's reading) is measured first and
given to the simulator as EngineConfig.api_overhead: the median, over sparse requests (10 req/s, two tokens each), of
the emulator's TTFT less the simulator's for the same request.  Each load's progress line gives the same paired
median for its own requests (a timeline drifting from the model's shows there first).  Wall-clock figures: a busy
machine shows in them.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from infermeter.conduct.run import RunResult, conduct
from infermeter.config.run import RunConfig
from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.declaration import sut_declaration
from infermeter.emulator.process import emulator_process
from infermeter.engine.config import EngineConfig
from infermeter.load.target import Endpoint
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.summary_model import Summary
from infermeter.records import RECORDS, read_run_info
from infermeter.sim import simulate, write_sim_run
from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.distributions import Fixed, Uniform
from infermeter.workload.spec import RequestClass, WorkloadSpec

SCHEDULERS = ("continuous", "chunked_prefill", "multi_bin_dynamic")
# iteration schedulers hold 32 sequences: the engine's timings stay the default model's (6 ms decode steps) while the
# tokens/s stay within what one emulator core and one client core stream on a small machine
SCHEDULER_SETTINGS: dict[str, dict[str, object]] = {
    "continuous": {"name": "continuous", "max_num_seqs": 32},
    "chunked_prefill": {"name": "chunked_prefill", "max_num_seqs": 32},
    "multi_bin_dynamic": {"name": "multi_bin_dynamic"},
}
WORKLOAD = WorkloadSpec(
    name="twin-fidelity",
    purpose="sim against emulator: short requests, so a few hundred per load fit in seconds",
    classes=[RequestClass(input=Uniform(min=64, max=256), output=Uniform(min=16, max=112))],
)
METRICS = {"TTFT": "ttft_ms", "ITL": "itl_ms", "TPOT": "tpot_ms", "E2E": "e2e_ms"}
BOUNDS = {50: 0.03, 99: 0.10}
SEED = 42
CAPACITY_REQUESTS = 400
OVERHEAD_REQUESTS = 50
OVERHEAD_RATE = 10.0


@dataclass(frozen=True)
class Point:
    """One scheduler at one load: the simulator's and the emulator's summaries of the same requests."""

    scheduler: str
    pct: int
    rate: float
    sim: Summary
    emu: Summary


def engine(scheduler: str, api_overhead: float = 0.0) -> EngineConfig:
    return EngineConfig.model_validate({"scheduler": SCHEDULER_SETTINGS[scheduler], "api_overhead": api_overhead})


def write_workload(spec: WorkloadSpec, path: Path) -> str:
    path.write_text(spec.model_dump_json())
    return str(path)


def capacity(cfg: EngineConfig, workload: str) -> float:
    """Completed requests per second when the whole workload arrives at once (simulated)."""
    reqs, _ = build_requests(CAPACITY_REQUESTS, SEED, workload=workload)
    out = simulate(reqs, cfg, 1, SEED)
    return float(out.served().sum() / out.end_time)


def client_summary(run_dir: Path) -> Summary:
    """A run's summary from its records with client token times (option B), for sim and emulator alike."""
    return summarize(RecordColumns.of_run(run_dir, read_run_info(run_dir)), "B")


def simulated(cfg: EngineConfig, workload: str, n: int, rate: float, run_dir: Path) -> Summary:
    """`infermeter sim` of n requests of the workload sent at `rate` (Poisson), written as a run directory."""
    reqs, declaration = build_requests(n, SEED, workload=workload, arrivals=arrival_spec("poisson", rate))
    write_sim_run(simulate(reqs, cfg, 1, SEED), run_dir, declaration, SEED, "full")
    return client_summary(run_dir)


def emulated(cfg: EngineConfig, workload: str, n: int, rate: float, run_dir: Path) -> Summary:
    """`infermeter run` against a fresh embedded emulator (no warm-up, no monitors: only the measured requests)."""
    emu = EmulatorConfig(engine=cfg.model_copy(update={"api_overhead": 0.0}), prefix_caching=False)
    run = RunConfig.model_validate({
        "workload": {"workload": workload, "seed": SEED},
        "load": {"requests": n, "rate": rate, "warmup": 0},
        "monitors": {"scrape_interval": 0, "telemetry_interval": 0},
        "emulator": emu.model_dump(),
    }).resolved()  # fmt: skip
    with emulator_process(emu, pin_cpus=True) as proc:
        result = run_async(conduct(run, Endpoint(proc.url, sut_declaration(emu), proc.url), run_dir, False))
    if result.stopped is not None:
        raise SystemExit(f"the emulator run stopped early: {result.stopped}")
    return client_summary(run_dir)


def run_async(coro: Coroutine[Any, Any, RunResult]) -> RunResult:
    """On uvloop, as `infermeter run` does."""
    import uvloop

    return uvloop.run(coro)


def same_requests(sim_dir: Path, emu_dir: Path) -> None:
    """The run sent the simulator's requests (lengths, max_tokens) at the simulator's send times, or exit."""
    sim, emu = (_records(d, ["input_tokens", "max_tokens", "scheduled_at"]) for d in (sim_dir, emu_dir))
    for name in ("input_tokens", "max_tokens"):
        if sim[name] != emu[name]:
            raise SystemExit(f"{emu_dir.name}: the run's {name} differ from the simulator's")
    sent = [np.asarray(r["scheduled_at"]) - r["scheduled_at"][0] for r in (sim, emu)]
    if not np.allclose(sent[0], sent[1], rtol=0, atol=1e-9):
        raise SystemExit(f"{emu_dir.name}: the run's send times differ from the simulator's")


def measure_api_overhead(tmp: Path) -> float:
    """Seconds the emulator's HTTP path adds to TTFT: the median over requests of the emulator's TTFT less the
    simulator's (without overhead) for the same requests, sent sparsely (two tokens each, 10 req/s)."""
    first = WORKLOAD.classes[0]
    spec = WORKLOAD.model_copy(update={"classes": [first.model_copy(update={"output": Fixed(value=2)})]})
    workload = write_workload(spec, tmp / "overhead.json")
    cfg = engine("continuous")
    simulated(cfg, workload, OVERHEAD_REQUESTS, OVERHEAD_RATE, tmp / "overhead-sim")
    emulated(cfg, workload, OVERHEAD_REQUESTS, OVERHEAD_RATE, tmp / "overhead-emu")
    return float(np.median(ttfts(tmp / "overhead-emu") - ttfts(tmp / "overhead-sim")))


def _records(run_dir: Path, columns: list[str]) -> dict[str, list[Any]]:
    """Columns of a run's records, in request order."""
    return pq.read_table(run_dir / RECORDS, columns=["request_id", *columns]).sort_by("request_id").to_pydict()


def ttfts(run_dir: Path) -> np.ndarray:
    """Each request's TTFT in seconds, in request order."""
    rows = _records(run_dir, ["submitted_at", "token_times"])
    return np.array([t[0] - s for s, t in zip(rows["submitted_at"], rows["token_times"], strict=True)])


def measure(scheduler: str, pcts: list[int], n: int, workload: str, overhead: float, tmp: Path) -> list[Point]:
    """Simulate and run each load of one scheduler (a share of its simulated capacity)."""
    cfg = engine(scheduler, overhead)
    cap = capacity(cfg, workload)
    points = []
    for pct in pcts:
        rate = float(f"{cap * pct / 100:.4g}")
        sim_dir, emu_dir = tmp / f"{scheduler}-{pct}-sim", tmp / f"{scheduler}-{pct}-emu"
        t0 = time.monotonic()
        sim = simulated(cfg, workload, n, rate, sim_dir)
        emu = emulated(cfg, workload, n, rate, emu_dir)
        same_requests(sim_dir, emu_dir)
        paired = float(np.median(ttfts(emu_dir) - ttfts(sim_dir))) * 1000
        print(
            f"  {scheduler} {pct}% ({rate:g} req/s of {cap:.3g}): {time.monotonic() - t0:.0f} s; median per-request "
            f"TTFT emulator - sim {paired:+.3f} ms",
            flush=True,
        )
        points.append(Point(scheduler, pct, rate, sim, emu))
    return points


def rows(points: list[Point]) -> list[list[str]]:
    out = []
    for p in points:
        for label, field in METRICS.items():
            for q, bound in BOUNDS.items():
                s, e = getattr(p.sim, field).percentile(q), getattr(p.emu, field).percentile(q)
                err = (s - e) / e if s is not None and e else None
                ok = "-" if err is None else ("yes" if abs(err) <= bound else "NO")
                out.append([
                    p.scheduler, f"{p.pct}%", f"{label} P{q}", _ms(s), _ms(e),
                    "-" if err is None else f"{err:+.1%}", ok,
                ])  # fmt: skip
    return out


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def print_table(points: list[Point]) -> None:
    headers = ["scheduler", "load", "metric", "sim ms", "emulator ms", "error", "within"]
    body = rows(points)
    widths = [max(len(r[i]) for r in [headers, *body]) for i in range(len(headers))]
    for r in [headers, *body]:
        print("  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    bad = [r for r in body if r[-1] == "NO"]
    print(f"\n{len(body) - len(bad)} of {len(body)} within the bound (P50 3%, P99 10%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=250, help="requests per load (default 250)")
    parser.add_argument("--loads", default="20,50,90", help="loads in %% of capacity (default 20,50,90)")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--quick", action="store_true", help="100 requests per load")
    parser.add_argument("--out", type=Path, help="keep the run directories here (default: a temporary directory)")
    args = parser.parse_args()
    n = 100 if args.quick else args.requests
    pcts = [int(x) for x in args.loads.split(",")]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        tmp = args.out or Path(d)
        tmp.mkdir(parents=True, exist_ok=True)
        workload = write_workload(WORKLOAD, tmp / "workload.json")
        overhead = measure_api_overhead(tmp)
        print(f"emulator API overhead (isolated TTFT, emulator less simulator): {overhead * 1000:.3f} ms", flush=True)
        points = [p for s in args.schedulers.split(",") for p in measure(s, pcts, n, workload, overhead, tmp)]
    print()
    print_table(points)
    print(f"({time.monotonic() - t0:.0f} s; wall-clock figures on this machine)")


if __name__ == "__main__":
    main()
