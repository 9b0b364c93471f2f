"""seeds/004 section 7: step 1 grid search (requests x GPUs x K bins) and step 2 method comparison.

Each experiment appends one CSV row as soon as it finishes; rerunning the same sweep skips the rows already
written, so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import csv
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infermeter import resumable
from infermeter.distributed.tasks import TaskMap, local_map
from infermeter.engine.batching import DynamicNoBinsConfig
from infermeter.engine.config import EngineConfig
from infermeter.engine.multi_bin import MultiBinConfig, workload_bins
from infermeter.engine.registry import scheduler_config
from infermeter.engine.scheduler import SchedulerConfig
from infermeter.errors import UserError
from infermeter.sim.bins import predicted_outputs
from infermeter.sim.run import sim_block
from infermeter.sim.simulator import SimOutcome, simulate
from infermeter.workload.spec import Requests

STEP1_CSV = "step1_grid_search.csv"
STEP2_CSV = "step2_comparison.csv"
REQUEST_SLA_OK = 5.0  # percent: the "optimal" step-1 configuration must keep request-SLA violations below this

COLUMNS = [
    "experiment",
    "method",
    "num_requests",
    "num_gpus",
    "k_bins",
    "throughput_req_s",
    "throughput_tok_s",
    "avg_latency_s",
    "p50_latency_s",
    "p95_latency_s",
    "p99_latency_s",
    "max_latency_s",
    "token_sla_violation_pct",
    "request_sla_violation_pct",
    "gpu_utilization",
    "avg_batch_size",
    "avg_queueing_delay_s",
    "preemptions",
]
TIMING_SUFFIX = ".wall_s.csv"  # beside each results CSV: seconds each experiment took (not in the results, which
# depend only on the sweep's settings and are byte-identical however and wherever they were computed)


@dataclass(frozen=True)
class Experiment:
    name: str  # unique key of the row, used to resume
    method: str
    requests: int
    gpus: int
    bins: int


def experiment_row(exp: Experiment, out: SimOutcome) -> dict[str, Any]:
    block = sim_block(out)
    n = len(out.requests)
    arrivals = out.requests.arrival_s if len(out.requests.arrival_s) == n else np.zeros(n)
    latency = (out.ends.last - arrivals)[out.served()]
    makespan = block.makespan_s or float("nan")
    queueing = block.queueing_delay_ms.mean
    tokens = int(out.ends.count.sum())
    pct = np.percentile(latency, [50, 95, 99]) if len(latency) else [np.nan] * 3
    return {
        "experiment": exp.name,
        "method": exp.method,
        "num_requests": exp.requests,
        "num_gpus": exp.gpus,
        "k_bins": exp.bins,
        "throughput_req_s": len(latency) / makespan,
        "throughput_tok_s": tokens / makespan,
        "avg_latency_s": float(np.mean(latency)) if len(latency) else np.nan,
        "p50_latency_s": pct[0],
        "p95_latency_s": pct[1],
        "p99_latency_s": pct[2],
        "max_latency_s": float(np.max(latency)) if len(latency) else np.nan,
        "token_sla_violation_pct": 100 * block.token_sla_violation,
        "request_sla_violation_pct": 100 * block.request_sla_violation,
        "gpu_utilization": block.gpu_utilization,
        "avg_batch_size": block.avg_batch_size,
        "avg_queueing_delay_s": queueing / 1000 if queueing is not None else np.nan,
        "preemptions": block.preemptions,
    }


SETTINGS = "sweep.json"  # what the rows were simulated under: a resumed sweep must be the same sweep


def claim_sweep_dir(out: Path, settings: dict[str, Any]) -> None:
    """Start a sweep in `out`, or resume the one there if it was made with the same settings."""
    if not (out / SETTINGS).exists() and any((out / name).exists() for name in (STEP1_CSV, STEP2_CSV)):
        raise UserError(f"--out {out} holds sweep results without their settings ({SETTINGS}): choose a new directory")
    resumable.claim(out, SETTINGS, settings, "sweep")


def read_rows(path: Path) -> list[dict[str, str]]:
    """The complete rows of a results CSV; a last line cut short by a killed process is dropped from the file."""
    if not path.is_file():
        return []
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        keep = raw[: raw.rfind(b"\n") + 1]
        with path.open("r+b") as fh:
            fh.truncate(len(keep))
    with path.open(newline="") as fh:
        return [row for row in csv.DictReader(fh) if None not in row.values() and None not in row]


def run_experiments(
    experiments: Iterable[Experiment],
    csv_path: Path,
    base: EngineConfig,
    workload: Callable[[int], Requests],
    seed: int,
    on_done: Callable[[Experiment, bool], None] | None = None,
    tasks: TaskMap = local_map,
) -> list[dict[str, str]]:
    """Run what the CSV does not hold yet (as `tasks` runs them), appending rows in the plan's order; returns all
    rows.  Each experiment's wall-clock seconds go to the CSV's timing file beside it."""
    done = {row["experiment"] for row in read_rows(csv_path)}
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    plan = list(experiments)
    for exp in plan:
        if exp.name in done and on_done:
            on_done(exp, True)
    todo = [(exp, workload(exp.requests), base, seed) for exp in plan if exp.name not in done]
    timing = csv_path.with_name(csv_path.name.removesuffix(".csv") + TIMING_SUFFIX)
    with _appender(csv_path, COLUMNS) as rows, _appender(timing, ["experiment", "wall_s"]) as walls:
        for (exp, *_), (row, wall) in zip(todo, tasks(simulate_experiment, todo), strict=True):
            rows(row)  # one complete line per experiment, so a kill loses at most those running
            walls({"experiment": exp.name, "wall_s": wall})
            if on_done:
                on_done(exp, False)
    return read_rows(csv_path)


def simulate_experiment(item: tuple[Experiment, Requests, EngineConfig, int]) -> tuple[dict[str, Any], float]:
    """One experiment's row and the seconds it took (a task of its own on a cluster)."""
    exp, requests, base, seed = item
    config = method_config(base, exp, requests, seed)
    t0 = time.perf_counter()
    out = simulate(requests, config, exp.gpus, seed)
    return experiment_row(exp, out), time.perf_counter() - t0


@contextlib.contextmanager
def _appender(path: Path, columns: list[str]) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Append rows to a CSV, flushed one by one, under the header it already has (a sweep begun by an earlier
    version keeps its columns)."""
    new_file = not path.is_file() or path.stat().st_size == 0
    if new_file:
        header = columns
    else:
        with path.open(newline="") as fh:
            header = next(csv.reader(fh), columns)
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header, restval="", extrasaction="ignore")
        if new_file:
            writer.writeheader()

        def write(row: dict[str, Any]) -> None:
            writer.writerow(row)
            fh.flush()

        yield write


def method_config(base: EngineConfig, exp: Experiment, requests: Requests, seed: int) -> EngineConfig:
    """The engine of one experiment: `base` (a multi-bin config) set up for the experiment's method.

    Multi-bin's bin edges and per-bin B_MAX come from the workload's predicted lengths, as the method's own study
    computes them offline; dynamic_no_bins shares the base's controller settings.
    """
    mb = base.scheduler
    assert isinstance(mb, MultiBinConfig), "a sweep's base engine runs multi_bin_dynamic"
    scheduler: SchedulerConfig
    if exp.method == "multi_bin_dynamic":
        prompts = requests.input_tokens.astype(np.int64)
        k_bins = mb.model_copy(update={"bins": exp.bins, "edges": None, "bin_b_max": None})
        scheduler = workload_bins(k_bins, prompts, predicted_outputs(requests, base, seed), base.capacity())
    elif exp.method == "dynamic_no_bins":
        scheduler = DynamicNoBinsConfig(b_min=mb.b_min, b_max=mb.b_max, epsilon=mb.epsilon)
    else:
        scheduler = scheduler_config(exp.method)
    return base.model_copy(update={"scheduler": scheduler})


def step1_grid(requests: Iterable[int], gpus: Iterable[int], bins: Iterable[int]) -> list[Experiment]:
    return [
        Experiment(f"step1/n={n}/gpus={g}/k={k}", "multi_bin_dynamic", n, g, k)
        for n in requests
        for g in gpus
        for k in bins
    ]


def optimal(rows: list[dict[str, str]], n: int) -> tuple[int, int] | None:
    """Fewest GPUs whose request-SLA violations stay under 5%, best throughput among their K; else the best
    throughput overall.  None when step 1 has no row for n requests."""
    mine = [r for r in rows if int(r["num_requests"]) == n]
    if not mine:
        return None
    meeting = [r for r in mine if float(r["request_sla_violation_pct"]) <= REQUEST_SLA_OK]
    if meeting:
        fewest = min(int(r["num_gpus"]) for r in meeting)
        pool = [r for r in meeting if int(r["num_gpus"]) == fewest]
    else:
        pool = mine
    best = max(pool, key=lambda r: float(r["throughput_req_s"]))
    return int(best["num_gpus"]), int(best["k_bins"])


def step2_methods(requests: Iterable[int], step1_rows: list[dict[str, str]]) -> list[Experiment]:
    out: list[Experiment] = []
    for n in requests:
        out += [
            Experiment(f"step2/n={n}/static_fifo", "static_fifo", n, 1, 1),
            Experiment(f"step2/n={n}/dynamic_no_bins", "dynamic_no_bins", n, 1, 1),
            Experiment(f"step2/n={n}/multi_bin_k8", "multi_bin_dynamic", n, 1, 8),
        ]
        best = optimal(step1_rows, n)
        if best is not None:
            g, k = best
            out.append(Experiment(f"step2/n={n}/multi_bin_optimal", "multi_bin_dynamic", n, g, k))
    return out
