"""Comparing systems (the IETF draft's section 6): runs grouped by configuration, the 6.1 equivalence checks, each
group's mean and 95% CI over its repeated runs (6.3), and per-metric significance on the per-request samples with
Holm's correction across every test of the comparison.

A difference is called significant only when three things hold: the per-request test rejects after the correction
(Mann-Whitney U for the distribution, a bootstrap stratified by run for P50 and P99), the difference is at least the
smallest effect of interest (a relative change for P50/P99, Cliff's delta for the distribution), and it holds run by
run (each of B's runs lies beyond each of A's).  Per-request samples of one run are not independent of each other;
the last two conditions keep a host's slow minute in one run from reading as a difference between systems."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infermeter.metrics import RecordColumns
from infermeter.metrics.latency import e2e, itl, normalized_latency, tpot, ttft
from infermeter.metrics.significance import (
    bootstrap_quantile_difference,
    effect_magnitude,
    holm,
    mann_whitney,
    mean_ci,
    welch_p,
)
from infermeter.metrics.summary_model import Summary
from infermeter.run_info import RunInfo

ALPHA = 0.05
MIN_EFFECT = 0.05  # the smallest relative change of a percentile worth calling a difference
MIN_DELTA = 0.147  # Cliff's delta below this is negligible (Romano et al., 2006)
MIN_RUNS = 3  # the draft's 6.3: at least three independent runs
METRICS = {  # name -> label with unit
    "ttft": "TTFT (ms)",
    "itl": "ITL (ms)",
    "tpot": "TPOT (ms)",
    "e2e": "E2E (ms)",
    "normalized": "normalized latency (ms/token)",
}
RUN_FIGURES = {"output_tok_s": "output throughput (tok/s)", "req_s": "request throughput (req/s)"}


@dataclass
class Run:
    """One run directory as the comparison reads it: its declaration, summary and per-request samples (ms)."""

    path: Path
    info: RunInfo
    summary: Summary
    samples: dict[str, np.ndarray]
    request_hash: str

    @classmethod
    def read(cls, path: Path, info: RunInfo, summary: Summary, cols: RecordColumns) -> Run:
        ok = cols.ok
        samples = {
            "ttft": ttft(cols)[ok] * 1000,
            "itl": itl(cols, summary.itl_option).values * 1000,
            "tpot": tpot(cols)[ok] * 1000,
            "e2e": e2e(cols)[ok] * 1000,
            "normalized": normalized_latency(cols)[ok] * 1000,
        }
        samples = {k: v[np.isfinite(v)] for k, v in samples.items()}
        return cls(path, info, summary, samples, request_hash(cols))

    def figure(self, name: str) -> float:
        return float(getattr(self.summary.throughput, name))


def request_hash(cols: RecordColumns) -> str:
    """The request sequence's fingerprint (6.1 "same requests in same order"): each request's position, class,
    input length and output cap, and its scheduled send time to the millisecond, counted from the first (a run's
    clock starts before its warm-up, whose length varies)."""
    order = np.argsort(cols.request_id, kind="stable")
    offsets = cols.scheduled_at[order] - (cols.scheduled_at.min() if cols.n else 0.0)
    h = hashlib.sha256()
    for name, values in (
        ("id", cols.request_id[order].astype(np.int64)),
        ("in", cols.input_tokens[order].astype(np.int64)),
        ("max", cols.max_tokens[order].astype(np.int64)),
        ("at", np.round(offsets * 1000).astype(np.int64)),
    ):
        h.update(name.encode() + values.tobytes())
    h.update("\x1f".join(cols.request_class[order].tolist()).encode())
    return h.hexdigest()[:16]


def configuration(info: RunInfo) -> dict[str, str]:
    """What makes two runs the same configuration: the system (its declaration; the embedded emulator's port
    left out), the workload and seed, and the load.  Repeats of one configuration share all of it."""
    sut = info.sut.model_dump(exclude={"url"} if info.kind == "emulated" else set())
    client = info.client.model_dump(exclude={"endpoint"}) if info.client is not None else {}
    engine = info.engine.config if info.engine is not None else None
    return {
        "system": repr(sorted({**sut, "kind": info.kind, "engine": engine, "client": client}.items(), key=str)),
        "workload": repr((info.workload.name, info.workload.seed, info.workload.spec, info.workload.source)),
        "load": repr(info.load.model_dump()),
    }


@dataclass
class Group:
    """Runs of one configuration (repeats); `label` names it in tables."""

    label: str
    runs: list[Run]
    config: dict[str, str]

    def pooled(self, metric: str) -> np.ndarray:
        return np.concatenate([r.samples[metric] for r in self.runs])


def group_runs(runs: list[Run], hints: list[str | None] | None = None) -> list[Group]:
    """Runs grouped by the group the command line gave them (a directory of runs) or else by configuration, in
    the order each group first appears."""
    groups: dict[str, Group] = {}
    for run, hint in zip(runs, hints or [None] * len(runs), strict=True):
        config = configuration(run.info)
        key = f"dir:{hint}" if hint is not None else repr(sorted(config.items()))
        if key not in groups:
            groups[key] = Group(f"G{len(groups) + 1}", [], config)
        groups[key].runs.append(run)
    for key, g in groups.items():
        first = g.runs[0].info
        what = key.removeprefix("dir:") if key.startswith("dir:") else None
        what = what or first.sut.software or first.sut.model or first.sut.url or first.kind
        g.label = f"{g.label}: {what}"
    return list(groups.values())


@dataclass
class Finding:
    """One 6.1 equivalence requirement or 6.4 checklist item, met or not, and why."""

    section: str
    text: str
    met: bool
    reason: str
    must: bool = False  # a 6.1 MUST: --strict refuses a comparison that fails one


def _same(values: list[object]) -> bool:
    return len({repr(v) for v in values}) <= 1


def equivalence(groups: list[Group]) -> list[Finding]:
    """The draft's 6.1 MUSTs across every run of the comparison."""
    runs = [r for g in groups for r in g.runs]
    infos = [r.info for r in runs]
    hashes = sorted({r.request_hash for r in runs})
    seeds = sorted({str(i.workload.seed) for i in infos})
    out = [
        Finding(
            "6.1",
            "Identical workload: same requests in the same order, same seed",
            len(hashes) == 1 and _same([(i.workload.name, i.workload.seed, i.workload.spec) for i in infos]),
            f"request-sequence hash {hashes[0]} in every run"
            if len(hashes) == 1
            else f"{len(hashes)} different request sequences (hashes {', '.join(hashes)}; seeds {', '.join(seeds)})",
            must=True,
        ),
    ]
    boundaries = sorted({str(i.sut.boundary) for i in infos})
    out.append(
        Finding(
            "6.1",
            "Equivalent SUT boundary",
            len(boundaries) == 1 and boundaries[0] != "None",
            "boundary "
            + ", ".join("not declared" if b == "None" else b for b in boundaries)
            + ("" if len(boundaries) == 1 else ": systems measured at different boundaries"),
            must=True,
        )
    )
    hardware = sorted({str(i.sut.hardware) for i in infos})
    declared = "None" not in hardware
    out.append(
        Finding(
            "6.1",
            "Comparable hardware (declared; normalized where it differs, 6.2)",
            declared,
            ("hardware " + "; ".join(hardware))
            if declared
            else "hardware not declared for every run (give --hardware)",
            must=True,
        )
    )
    loads = sorted({str(i.load.description) for i in infos})
    same_load = _same([(i.load.description, i.load.requests, i.load.concurrency, i.load.duration_s) for i in infos])
    out.append(
        Finding(
            "6.1",
            "Same load model and parameters",
            same_load,
            loads[0] if same_load else "loads differ: " + " | ".join(loads),
            must=True,
        )
    )
    return out


def checklist(groups: list[Group]) -> list[Finding]:
    """The draft's 6.4 fair-comparison checklist, each item checked from the runs where it can be."""
    infos = [r.info for g in groups for r in g.runs]
    windows = [r.summary.duration_s for g in groups for r in g.runs]
    spread = (max(windows) - min(windows)) / max(windows) if windows and max(windows) > 0 else 0.0
    starts = sorted(i.started_at for i in infos)
    warmups = {(i.warmup.done, i.warmup.requests, i.warmup.cold_start) for i in infos}
    slos = {repr(sorted(i.slo.items())) for i in infos}
    differences = sorted({k for g in groups for k, v in g.config.items() if v != groups[0].config[k]})
    return [
        Finding(
            "6.4",
            "Same workload specification",
            _same([i.workload.spec for i in infos]),
            "one workload specification" if _same([i.workload.spec for i in infos]) else "specifications differ",
        ),
        Finding(
            "6.4",
            "Same test duration",
            spread <= 0.10,
            f"measurement windows {min(windows):.1f}-{max(windows):.1f} s ({spread:.0%} apart; 10% allowed)",
        ),
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
        Finding(
            "6.4",
            "Systems tested at the same time (shared resources)",
            True,
            f"runs started between {starts[0]} and {starts[-1]}; interleave them on shared machines",
        ),
        Finding(
            "6.4",
            "Production-representative configuration",
            False,
            "cannot be checked from the runs: the tester declares it",
        ),
        Finding(
            "6.4",
            "Differences in configuration explicitly noted",
            True,
            "differences: "
            + (", ".join(differences) if differences else "none")
            + " (the groups' declarations are in the comparison's group table)",
        ),
    ]


@dataclass
class Row:
    """One compared statistic of one metric: the baseline's and the other group's value, the difference with its
    95% CI, the test's raw and Holm-adjusted p, the effect size, whether each run agrees, and the verdict."""

    group: str
    metric: str
    statistic: str  # "P50", "P99", "distribution", "mean over runs"
    a: float | None
    b: float | None
    diff: float | None
    lo: float | None
    hi: float | None
    p: float
    effect: str
    large_enough: bool
    runs_agree: bool | None  # None when a group has a single run
    p_adjusted: float = float("nan")
    significant: bool = False

    @property
    def relative(self) -> float | None:
        return self.diff / self.a if self.diff is not None and self.a else None


def _runs_agree(a: list[float], b: list[float]) -> bool | None:
    """Each of B's runs lies beyond each of A's, in one direction (None when a group has one run)."""
    if len(a) < 2 or len(b) < 2:
        return None
    return min(b) > max(a) or max(b) < min(a)


def _quantile_row(group: str, metric: str, q: float, base: Group, other: Group, reps: int) -> Row:
    a_runs = [r.samples[metric] for r in base.runs]
    b_runs = [r.samples[metric] for r in other.runs]
    qd = bootstrap_quantile_difference(a_runs, b_runs, q, reps=reps)
    a = float(np.quantile(base.pooled(metric), q)) if len(base.pooled(metric)) else None
    b = float(np.quantile(other.pooled(metric), q)) if len(other.pooled(metric)) else None
    per_run = [[float(np.quantile(s, q)) for s in runs if len(s)] for runs in (a_runs, b_runs)]
    rel = qd.diff / a if a else 0.0
    finite = np.isfinite(qd.diff)
    return Row(
        group,
        metric,
        f"P{q * 100:g}",
        a,
        b,
        float(qd.diff) if finite else None,
        float(qd.lo) if finite else None,
        float(qd.hi) if finite else None,
        float(qd.p),
        f"{rel:+.1%}" if a else "n/a",
        bool(finite and abs(rel) >= MIN_EFFECT),
        _runs_agree(*per_run),
    )


def _distribution_row(group: str, metric: str, base: Group, other: Group) -> Row:
    a, b = base.pooled(metric), other.pooled(metric)
    mw = mann_whitney(a, b)
    per_run = [[float(np.median(r.samples[metric])) for r in g.runs if len(r.samples[metric])] for g in (base, other)]
    med_a = float(np.median(a)) if len(a) else None
    med_b = float(np.median(b)) if len(b) else None
    diff = med_b - med_a if med_a is not None and med_b is not None else None
    delta = mw.cliffs_delta
    return Row(
        group,
        metric,
        "median (Mann-Whitney U)",
        med_a,
        med_b,
        diff,
        None,
        None,
        float(mw.p),
        f"Cliff's delta {delta:+.3f} ({effect_magnitude(delta)})" if np.isfinite(delta) else "n/a",
        bool(np.isfinite(delta) and abs(delta) >= MIN_DELTA),
        _runs_agree(*per_run),
    )


def _figure_row(group: str, name: str, base: Group, other: Group) -> Row:
    a_vals = [r.figure(name) for r in base.runs]
    b_vals = [r.figure(name) for r in other.runs]
    ma, mb = mean_ci(a_vals), mean_ci(b_vals)
    p = welch_p(a_vals, b_vals)
    diff = mb.mean - ma.mean if ma.mean is not None and mb.mean is not None else None
    rel = diff / ma.mean if diff is not None and ma.mean else 0.0
    return Row(
        group,
        name,
        "mean over runs (Welch t)",
        ma.mean,
        mb.mean,
        diff,
        None,
        None,
        float("nan") if p is None else p,
        f"{rel:+.1%}" if ma.mean else "n/a",
        abs(rel) >= MIN_EFFECT,
        _runs_agree(a_vals, b_vals),
    )


@dataclass
class Comparison:
    """Everything `infermeter compare` reports."""

    groups: list[Group]
    baseline: Group
    equivalence: list[Finding]
    checklist: list[Finding]
    rows: list[Row]
    limitations: list[str] = field(default_factory=list)

    @property
    def equivalent(self) -> bool:
        return all(f.met for f in self.equivalence if f.must)


def compare(groups: list[Group], baseline: Group, reps: int = 2000) -> Comparison:
    """Each group against the baseline, every p-value corrected together (Holm), each row judged."""
    rows: list[Row] = []
    for other in groups:
        if other is baseline:
            continue
        for metric in METRICS:
            if not len(baseline.pooled(metric)) or not len(other.pooled(metric)):
                continue
            rows.append(_distribution_row(other.label, metric, baseline, other))
            rows += [_quantile_row(other.label, metric, q, baseline, other, reps) for q in (0.5, 0.99)]
        rows += [_figure_row(other.label, name, baseline, other) for name in RUN_FIGURES]
    for row, adjusted in zip(rows, holm([r.p for r in rows]), strict=True):
        row.p_adjusted = adjusted
        row.significant = bool(adjusted < ALPHA and row.large_enough and row.runs_agree is not False)
    limitations = [
        f"{g.label} has {len(g.runs)} run{'s' if len(g.runs) != 1 else ''}: the draft's 6.3 asks for at least "
        f"{MIN_RUNS} independent runs per system"
        for g in groups
        if len(g.runs) < MIN_RUNS
    ]
    if any(len(g.runs) < 2 for g in groups):
        limitations.append(
            "with a single run, a difference cannot be checked run by run: significance rests on "
            "the per-request samples of one run alone"
        )
    return Comparison(groups, baseline, equivalence(groups), checklist(groups), rows, limitations)
