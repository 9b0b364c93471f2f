"""Multi-bin dynamic batching's hypotheses H1-H3 (seeds/004 section 1.3) tested on the simulator.

At each load level (section 7.2: BurstGPT's 0.27 req/s scaled 100x, 10x, 1x) the same requests run through the
single-queue methods (static FIFO, dynamic batching without bins) and multi-bin dynamic batching with K bins, its
SLA controllers per bin or one shared by all bins, binned by predicted output length (the method's key, the default)
and by prompt + predicted output, each with Algorithm 3's edges over the level's workload.  Each method also gets
the section 9.4 capacities, found by bisection over the arrival rate.  A verdict compares figures with a margin: a
difference under MARGIN is no difference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from pydantic import BaseModel

from infermeter.distributed.tasks import TaskMap, local_map
from infermeter.engine.config import EngineConfig
from infermeter.engine.multi_bin import BinKey, Controller, MultiBinConfig
from infermeter.sim.experiments import REQUEST_SLA_OK, Experiment, method_config
from infermeter.sim.run import makespan_of, sim_block, tpot_e2e
from infermeter.sim.simulator import SimOutcome, simulate
from infermeter.workload.spec import Requests
from infermeter.workload.traces import LEVELS

HYPOTHESES_JSON, HYPOTHESES_MD = "hypotheses.json", "hypotheses.md"
BINS = 8  # K of the method's one-GPU comparison (section 7.1, step 2)
MARGIN = 0.01  # relative: a difference smaller than this is no difference
SLA_SHARE = REQUEST_SLA_OK / 100  # at most this share of requests may miss an SLA at a sustainable rate
BISECTIONS = 7  # halvings of a factor-of-two bracket: the capacities are found within 2^(1/128), about 0.5%
BRACKET_STEPS = 24  # doublings or halvings tried to bracket a capacity from the medium level
BIN_KEYS: tuple[BinKey, ...] = ("output", "total")
Outcome = Literal["held", "partly held", "did not hold", "no difference"]


class MethodResult(BaseModel):
    """One method's figures at one load level (1 engine), from its simulated run."""

    method: str
    throughput_req_s: float
    goodput_req_s: float  # completed within both SLAs, per second of the run
    p99_latency_s: float
    token_sla_violation_pct: float
    request_sla_violation_pct: float
    gpu_utilization: float  # busy time / run time (section 9.3)
    seconds_per_generated_token: float  # busy time / output tokens (section 9.4)
    decode_step_time_ms: float  # mean decode iteration (section 9.4)
    avg_batch_size: float
    mean_batch_max_output: float  # E[max t_j | batch]: the longest output of each batch, averaged over batches


class Capacity(BaseModel):
    """Section 9.4's capacities of one method, found by bisection over the arrival rate."""

    method: str
    capacity_threshold_lambda: float  # req/s: the highest arrival rate with <= 5% of requests over D_SLA_REQUEST
    capacity_qps_under_sla: float  # req/s completed at the highest arrival rate meeting both SLAs (<= 5% miss each)


class Verdict(BaseModel):
    """Whether one hypothesis held at one level with one bin key, and the figures that say so."""

    hypothesis: str
    bin_key: BinKey
    level: str
    outcome: Outcome
    evidence: str


class LevelResults(BaseModel):
    level: str
    rate_req_s: float  # the offered arrival rate
    methods: list[MethodResult]


class HypothesisReport(BaseModel):
    """Everything `sim-sweep` found about H1-H3: per level and method, the capacities, the verdicts."""

    requests: int
    bins: int
    seed: int
    d_sla_token_ms: float
    d_sla_request_s: float
    levels: list[LevelResults]
    capacities: list[Capacity]
    verdicts: list[Verdict]


STATEMENTS = {
    "H1": "Partitioning requests by predicted output length reduces E[max(t_j) | bin], enabling larger batch sizes",
    "H2": "Bin-specific SLA controllers outperform a global controller under heterogeneous workloads",
    "H3": "Multi-bin scheduling provides better GPU utilization than single-queue approaches",
}
STATIC, NO_BINS = "static_fifo", "dynamic_no_bins"


CONTROLLERS: tuple[Controller, ...] = ("per_bin", "global")


def multi_bin(bin_key: BinKey, controller: Controller = "per_bin") -> str:
    return f"multi_bin K={BINS} {controller.replace('_', '-')} ({bin_key})"


MULTI_BIN: dict[str, tuple[BinKey, Controller]] = {multi_bin(k, c): (k, c) for k in BIN_KEYS for c in CONTROLLERS}


def methods() -> list[str]:
    return [STATIC, NO_BINS, *MULTI_BIN]


def method_engine(base: EngineConfig, method: str, requests: Requests, seed: int) -> EngineConfig:
    """The engine a method runs on: `base` (multi-bin) set up as the sweep's step 2 does, bins from the workload."""
    if method in (STATIC, NO_BINS):
        return method_config(base, Experiment(method, method, len(requests), 1, 1), requests, seed)
    mb = base.scheduler
    assert isinstance(mb, MultiBinConfig)
    key, controller = MULTI_BIN[method]
    keyed = base.model_copy(update={"scheduler": mb.model_copy(update={"bin_key": key, "controller": controller})})
    return method_config(keyed, Experiment(method, "multi_bin_dynamic", len(requests), 1, BINS), requests, seed)


def measure(out: SimOutcome, method: str) -> MethodResult:
    """A method's figures from its simulated run."""
    block = sim_block(out)
    cfg = out.config
    tpot, e2e = tpot_e2e(out)
    ok = out.served()
    met = ok & (e2e <= cfg.d_sla_request) & ~(tpot > cfg.d_sla_token)
    makespan = makespan_of(out)
    latency = e2e[ok]
    return MethodResult(
        method=method,
        throughput_req_s=float(ok.sum() / makespan) if makespan > 0 else 0.0,
        goodput_req_s=float(met.sum() / makespan) if makespan > 0 else 0.0,
        p99_latency_s=float(np.percentile(latency, 99)) if len(latency) else float("nan"),
        token_sla_violation_pct=100 * block.token_sla_violation,
        request_sla_violation_pct=100 * block.request_sla_violation,
        gpu_utilization=block.gpu_utilization,
        seconds_per_generated_token=block.seconds_per_generated_token or float("nan"),
        decode_step_time_ms=block.decode_step_time_ms or float("nan"),
        avg_batch_size=block.avg_batch_size,
        mean_batch_max_output=out.batch_max_output_sum / out.steps if out.steps else float("nan"),
    )


def offered_rate(requests: Requests) -> float:
    """Requests per second of the arrival schedule: (n - 1) over the time from the first arrival to the last."""
    span = float(requests.arrival_s.max() - requests.arrival_s.min()) if len(requests.arrival_s) > 1 else 0.0
    return (len(requests) - 1) / span if span > 0 else float("inf")


def search(feasible: Callable[[float], bool], start: float) -> float:
    """The largest scaling factor at which `feasible` holds (assumed to hold below some factor and fail above it):
    bracketed by doubling or halving from `start`, then bisected geometrically; 0 when none tried holds."""
    lo = hi = start
    if feasible(start):
        for _ in range(BRACKET_STEPS):
            hi = lo * 2
            if not feasible(hi):
                break
            lo = hi
        else:
            return lo
    else:
        for _ in range(BRACKET_STEPS):
            lo = hi / 2
            if feasible(lo):
                break
            hi = lo
        else:
            return 0.0
    for _ in range(BISECTIONS):
        mid = float(np.sqrt(lo * hi))
        lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
    return lo


def capacity(method: str, run: Callable[[float], tuple[Requests, MethodResult]]) -> Capacity:
    """Section 9.4's capacities of one method; `run(factor)` simulates the workload at a scaled arrival rate."""
    seen: dict[float, tuple[Requests, MethodResult]] = {}

    def at(factor: float) -> tuple[Requests, MethodResult]:
        if factor not in seen:
            seen[factor] = run(factor)
        return seen[factor]

    def latency_ok(f: float) -> bool:
        return at(f)[1].request_sla_violation_pct <= 100 * SLA_SHARE

    def both_ok(f: float) -> bool:
        r = at(f)[1]
        return latency_ok(f) and r.token_sla_violation_pct <= 100 * SLA_SHARE

    lam = search(latency_ok, LEVELS["medium"])
    qps = search(both_ok, LEVELS["medium"])
    return Capacity(
        method=method,
        capacity_threshold_lambda=offered_rate(at(lam)[0]) if lam > 0 else 0.0,
        capacity_qps_under_sla=at(qps)[1].throughput_req_s if qps > 0 else 0.0,
    )


def _rel(a: float, b: float) -> float:
    """a relative to b: (a - b) / b."""
    return (a - b) / b if b else (0.0 if a == b else float("inf"))


def _better(gain: float) -> Outcome:
    return "held" if gain > MARGIN else ("did not hold" if gain < -MARGIN else "no difference")


def judge(level: LevelResults, bin_key: BinKey, caps: dict[str, Capacity]) -> list[Verdict]:
    """H1-H3 at one level with one bin key."""
    by = {m.method: m for m in level.methods}
    mb, glob, nob, fifo = by[multi_bin(bin_key)], by[multi_bin(bin_key, "global")], by[NO_BINS], by[STATIC]

    shorter = _rel(nob.mean_batch_max_output, mb.mean_batch_max_output)
    larger = _rel(mb.avg_batch_size, nob.avg_batch_size)
    # H1 claims two things: shorter batches (E[max t_j]) and, through them, larger ones
    h1: Outcome
    if shorter > MARGIN:
        h1 = "held" if larger > MARGIN else "partly held"
    else:
        h1 = "no difference" if abs(shorter) <= MARGIN and abs(larger) <= MARGIN else "did not hold"
    h1_text = (
        f"E[max output | batch] {mb.mean_batch_max_output:.0f} tokens with {BINS} bins vs "
        f"{nob.mean_batch_max_output:.0f} in one queue; mean batch {mb.avg_batch_size:.1f} vs {nob.avg_batch_size:.1f}"
    )

    h2 = _better(_rel(mb.goodput_req_s, glob.goodput_req_s))
    cp, cg = caps[mb.method], caps[glob.method]
    h2_text = (
        f"goodput {mb.goodput_req_s:.3f} vs {glob.goodput_req_s:.3f} req/s (per-bin vs global); token SLA missed "
        f"{mb.token_sla_violation_pct:.1f}% vs {glob.token_sla_violation_pct:.1f}%; P99 latency {mb.p99_latency_s:.1f}"
        f" vs {glob.p99_latency_s:.1f} s; capacity under both SLAs {cp.capacity_qps_under_sla:.3f} vs "
        f"{cg.capacity_qps_under_sla:.3f} req/s"
    )

    # a busy fraction alone cannot judge: at a load every method carries, the slower one is the busier; the work a
    # busy engine does per output token can
    gain = min(
        _rel(fifo.seconds_per_generated_token, mb.seconds_per_generated_token),
        _rel(nob.seconds_per_generated_token, mb.seconds_per_generated_token),
    )
    h3 = _better(gain)
    h3_text = (
        f"engine time per output token {mb.seconds_per_generated_token * 1e3:.3f} ms with bins vs "
        f"{fifo.seconds_per_generated_token * 1e3:.3f} (static FIFO), {nob.seconds_per_generated_token * 1e3:.3f} "
        f"(dynamic, no bins); busy {mb.gpu_utilization:.0%} vs {fifo.gpu_utilization:.0%}, {nob.gpu_utilization:.0%}"
    )
    return [
        Verdict(hypothesis="H1", bin_key=bin_key, level=level.level, outcome=h1, evidence=h1_text),
        Verdict(hypothesis="H2", bin_key=bin_key, level=level.level, outcome=h2, evidence=h2_text),
        Verdict(hypothesis="H3", bin_key=bin_key, level=level.level, outcome=h3, evidence=h3_text),
    ]


def run_hypotheses(
    base: EngineConfig,
    levels: dict[str, float],
    workload: Callable[[float], Requests],
    seed: int,
    on_done: Callable[[str], None] | None = None,
    tasks: TaskMap = local_map,
) -> HypothesisReport:
    """Run every method at every level (`levels`: name -> scaling factor; `workload(factor)` gives the requests) and
    search each method's capacities; every method at a level, and every method's search, is a task of `tasks`."""
    at_level = {name: workload(factor) for name, factor in levels.items()}
    runs = [(m, at_level[name], base, seed) for name in levels for m in methods()]
    got = iter(tasks(_method_run, runs))
    results = []
    for name in levels:
        reqs = at_level[name]
        results.append(LevelResults(level=name, rate_req_s=offered_rate(reqs), methods=[next(got) for _ in methods()]))
        if on_done:
            on_done(f"level {name}")
    caps = []
    for c in tasks(_method_capacity, [(m, workload, base, seed) for m in methods()]):
        caps.append(c)
        if on_done:
            on_done(f"capacity of {c.method}")
    by_method = {c.method: c for c in caps}
    verdicts = [v for k in BIN_KEYS for level in results for v in judge(level, k, by_method)]
    return HypothesisReport(
        requests=len(next(iter(at_level.values()))),
        bins=BINS,
        seed=seed,
        d_sla_token_ms=base.d_sla_token * 1000,
        d_sla_request_s=base.d_sla_request,
        levels=results,
        capacities=caps,
        verdicts=verdicts,
    )


def _method_run(item: tuple[str, Requests, EngineConfig, int]) -> MethodResult:
    """One method on one level's requests (a task)."""
    method, reqs, base, seed = item
    return measure(simulate(reqs, method_engine(base, method, reqs, seed), 1, seed), method)


def _method_capacity(item: tuple[str, Callable[[float], Requests], EngineConfig, int]) -> Capacity:
    """One method's section 9.4 capacities, its bisections run one after another (a task)."""
    method, workload, base, seed = item

    def run(factor: float) -> tuple[Requests, MethodResult]:
        reqs = workload(factor)
        return reqs, _method_run((method, reqs, base, seed))

    return capacity(method, run)
