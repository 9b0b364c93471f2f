"""The runs a comparison holds against each other (the IETF draft's section 6): each run's declaration, summary,
per-request samples and wall-clock window, and the groups of repeated runs of one configuration."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infermeter.metrics import RecordColumns
from infermeter.metrics.latency import e2e, itl, normalized_latency, tpot, ttft
from infermeter.metrics.summary_model import Summary
from infermeter.metrics.throughput import measurement_window
from infermeter.run_info import RunInfo


@dataclass(frozen=True)
class Span:
    """A run's measurement window on the wall clock (UTC, seconds since the epoch): first submission to last
    completion; what "tested at the same time" (6.4) is judged from."""

    start: float
    end: float


@dataclass(frozen=True)
class Requests:
    """A run's requests in id order, each by its position, class, input length and output cap (send times left
    out): what a level of two suites sends, each system at its own rate, compared head to head."""

    ids: np.ndarray
    inputs: np.ndarray
    caps: np.ndarray
    classes: np.ndarray

    @classmethod
    def of(cls, cols: RecordColumns) -> Requests:
        order = np.argsort(cols.request_id, kind="stable")
        return cls(
            cols.request_id[order].astype(np.int64),
            cols.input_tokens[order].astype(np.int64),
            cols.max_tokens[order].astype(np.int64),
            np.asarray(cols.request_class[order], dtype=object),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def same_head(self, other: Requests, n: int) -> bool:
        """Whether both runs' first n requests are the same requests."""
        return all(
            np.array_equal(a[:n], b[:n])
            for a, b in (
                (self.ids, other.ids),
                (self.inputs, other.inputs),
                (self.caps, other.caps),
                (self.classes, other.classes),
            )
        )


@dataclass(frozen=True)
class Declared:
    """What run.json's resolved configuration (`config`) declares beyond its blocks, parsed by the caller through
    its typed model (infermeter.config.run.RunConfig, which metrics may not import): --gpus, --gpu-price, and the
    embedded emulator's settings flattened ("emulator.engine.scheduler.name" -> the value's repr) for 6.4's
    "differences noted".  A run whose run.json holds no configuration (simulated, older) has none."""

    gpus: int | None = None
    gpu_price: float | None = None
    emulator: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    """One run directory as the comparison reads it: its declaration, summary and per-request samples (ms), its
    window on the wall clock (None for a simulated run, whose clock is virtual), its request sequence with and
    without send times, the span of its scheduled sends, what its configuration declares, and its place in a
    suite's plan when it is compared as a suite's run."""

    path: Path
    info: RunInfo
    summary: Summary
    samples: dict[str, np.ndarray]
    request_hash: str
    span: Span | None = None
    declared: Declared | None = None
    sent: Requests | None = None  # its requests without send times: what a suite's level sends at any rate
    schedule_s: float = 0.0  # first to last scheduled send, seconds
    level: str | None = None  # suite.json's level of the run (set by a suite comparison)

    @classmethod
    def read(
        cls, path: Path, info: RunInfo, summary: Summary, cols: RecordColumns, declared: Declared | None = None
    ) -> Run:
        ok = cols.ok
        samples = {
            "ttft": ttft(cols)[ok] * 1000,
            "itl": itl(cols, summary.itl_option).values * 1000,
            "tpot": tpot(cols)[ok] * 1000,
            "e2e": e2e(cols)[ok] * 1000,
            "normalized": normalized_latency(cols)[ok] * 1000,
        }
        samples = {k: v[np.isfinite(v)] for k, v in samples.items()}
        scheduled = cols.scheduled_at[np.isfinite(cols.scheduled_at)] if cols.n else np.zeros(0)
        return cls(
            path,
            info,
            summary,
            samples,
            request_hash(cols),
            window(info, cols),
            declared,
            Requests.of(cols),
            float(scheduled.max() - scheduled.min()) if len(scheduled) else 0.0,
        )

    def figure(self, name: str) -> float:
        return float(getattr(self.summary.throughput, name))

    @property
    def gpus(self) -> int | None:
        """The GPUs serving the system as declared (--gpus): 6.2's normalization.  A run without a configuration
        in run.json (older runs) falls back on its energy block's count."""
        if self.declared is not None:
            return self.declared.gpus
        energy = self.summary.energy
        n = energy.gpus if energy is not None else None
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    @property
    def gpu_price(self) -> float | None:
        """The declared price of a GPU-hour (--gpu-price); the energy block's for a run without a configuration."""
        if self.declared is not None:
            return self.declared.gpu_price
        energy = self.summary.energy
        price = energy.gpu_price_per_hour if energy is not None else None
        return price if price is not None and price > 0 else None

    @property
    def tok_per_gpu_s(self) -> float | None:
        """Output tokens per GPU-second (6.2) over the declared --gpus: the energy block's figure where it counted
        the declared GPUs; older runs (no figure, or one over another count: before it followed --gpus alone) are
        computed here from the throughput and the declared count.  None without a declared count."""
        if not self.gpus:
            return None
        energy = self.summary.energy
        if energy is not None and energy.output_tok_per_gpu_s is not None and energy.gpus == self.gpus:
            return energy.output_tok_per_gpu_s
        return self.summary.throughput.output_tok_s / self.gpus


def wall_zero(info: RunInfo) -> float:
    """The run clock's 0 on the wall clock: run.json's clock anchor, else its start time (older runs)."""
    if info.clock_anchor is not None:
        return info.clock_anchor.wall_ns / 1e9
    return dt.datetime.fromisoformat(info.started_at.replace("Z", "+00:00")).timestamp()


def window(info: RunInfo, cols: RecordColumns) -> Span | None:
    """The measurement window (metrics.throughput.measurement_window: first submission to last token) on the wall
    clock; None for a simulated run (a virtual clock) or a run that sent nothing."""
    if info.kind == "simulated" or not cols.n:
        return None
    start, end = measurement_window(cols)
    if not np.isfinite(start):
        return None
    zero = wall_zero(info)
    return Span(zero + start, zero + end)


def request_hash(cols: RecordColumns) -> str:
    """The request sequence's fingerprint (6.1 "same requests in same order"): each request's position, class,
    input length and output cap, and its scheduled send time to the millisecond, counted from the first (a run's
    clock starts before its warm-up, whose length varies)."""
    order = np.argsort(cols.request_id, kind="stable")
    offsets = cols.scheduled_at[order] - (cols.scheduled_at.min() if cols.n else 0.0)
    columns = [
        ("id", cols.request_id[order].astype(np.int64)),
        ("in", cols.input_tokens[order].astype(np.int64)),
        ("max", cols.max_tokens[order].astype(np.int64)),
        ("at", np.round(offsets * 1000).astype(np.int64)),
    ]
    h = hashlib.sha256()
    for name, values in columns:
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

    @property
    def name(self) -> str:
        """The short name tables use ("G2")."""
        return self.label.split(":")[0]


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
