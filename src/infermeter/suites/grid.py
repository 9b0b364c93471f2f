"""exo bench's grid: prompt lengths x generation lengths x concurrency levels, each cell repeated, every batch released
at one instant (the simultaneous-start barrier), exact-length prompts, EOS banned (ignore_eos).  Per cell: prefill
and generation tokens/s (from the server's own timing when it reports it), batch wall time, aggregate generation
tokens/s (the fastest stream's rate x concurrency, as exo bench defines it), the prefix-cache outcome of each request
(none / partial / exact) when the server reports cached tokens, and mean and spread over the repeats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import Field

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.metrics.columns import RecordColumns
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.common import headline, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.workload.distributions import MAX_LENGTH

REFERENCE = "exo bench's methodology"
SIMULTANEOUS_MS = 10.0  # a batch's sends within this of each other start "at the same instant"
LENGTHS = checks.int_list(1, MAX_LENGTH)


class GridParams(SuiteParams):
    pp: Annotated[list[int], Flag("prompt lengths in tokens, comma-separated", LENGTHS)] = Field(
        default_factory=lambda: [128, 512, 2048]
    )
    tg: Annotated[
        list[int], Flag("generation lengths in tokens (>= 2), comma-separated", checks.int_list(2, MAX_LENGTH))
    ] = Field(default_factory=lambda: [128, 512])
    concurrency: Annotated[list[int], Flag("concurrency levels, comma-separated", checks.int_list(1, 4096))] = Field(
        default_factory=lambda: [1, 4]
    )
    repeat: Annotated[int, Flag("runs of each cell (mean and spread over them)", checks.integer(1, 1000))] = 3

    QUICK: ClassVar[dict[str, Any]] = {"pp": [64, 256], "tg": [16], "concurrency": [1, 4], "repeat": 2}


@dataclass(frozen=True)
class Cell:
    pp: int
    tg: int
    concurrency: int


@dataclass
class BatchFigures:
    """One batch (one repeat of a cell): per-request rates and the batch's own figures."""

    prefill_tok_s: float  # mean over the batch's requests
    gen_tok_s: float  # mean over the batch's requests
    agg_gen_tok_s: float  # max per-request generation rate x concurrency (exo bench)
    wall_s: float  # the shared start to the last response's end
    prefill_source: str
    gen_source: str
    cache: dict[str, int]  # prefix-cache outcome -> requests


def batch_figures(cols: RecordColumns) -> BatchFigures:
    """exo bench's per-batch figures from a batch's records."""
    ok = cols.ok & (cols.tokens.lengths >= 2)
    n_out = cols.tokens.lengths.astype(float)
    if np.all(~np.isnan(cols.server_prefill_s[ok])) and ok.any():
        cached = np.nan_to_num(cols.cached_tokens[ok])
        prefill = (cols.server_input_tokens[ok] - cached) / cols.server_prefill_s[ok]
        prefill_source = "server-reported prompt time"
    else:
        prefill = cols.input_tokens[ok] / (cols.tokens.first()[ok] - cols.submitted_at[ok])
        prefill_source = "client TTFT (includes queueing and transport)"
    if ok.any() and np.all(cols.has_server[ok]):
        span = cols.server.last()[ok] - cols.server.first()[ok]
        gen = (cols.server.lengths[ok] - 1) / span
        gen_source = "server token times"
    elif ok.any() and np.all(~np.isnan(cols.server_decode_s[ok])):
        gen = cols.server_output_tokens[ok] / cols.server_decode_s[ok]
        gen_source = "server-reported generation time"
    else:
        span = cols.tokens.last()[ok] - cols.tokens.first()[ok]
        gen = (n_out[ok] - 1) / span
        gen_source = "client token arrival times"
    c = len(cols.ok)
    wall = float(np.nanmax(cols.tokens.last()[cols.ok]) - cols.submitted_at.min()) if cols.ok.any() else float("nan")
    return BatchFigures(
        prefill_tok_s=float(np.mean(prefill)) if len(prefill) else float("nan"),
        gen_tok_s=float(np.mean(gen)) if len(gen) else float("nan"),
        agg_gen_tok_s=float(np.max(gen)) * c if len(gen) else float("nan"),
        wall_s=wall,
        prefill_source=prefill_source,
        gen_source=gen_source,
        cache=cache_outcomes(cols),
    )


def cache_outcomes(cols: RecordColumns) -> dict[str, int]:
    """Each ok request's prefix-cache outcome as exo bench names it, when the server reports cached tokens."""
    reported = cols.ok & ~np.isnan(cols.cached_tokens)
    if not reported.any():
        return {}
    cached = cols.cached_tokens[reported]
    total = cols.server_input_tokens[reported]
    return {
        "none": int((cached == 0).sum()),
        "partial": int(((cached > 0) & (cached < total)).sum()),
        "exact": int((cached >= total).sum()),
    }


def _spread(values: list[float]) -> str:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return "n/a"
    return f"{v.mean():.1f} ± {v.std(ddof=1):.1f}" if len(v) > 1 else f"{v.mean():.1f}"


class GridSuite:
    name = "grid"
    section = "exo"
    reference = REFERENCE
    title = "Prompt x generation x concurrency grid"
    summary = "exo bench's grid: prefill and generation tokens/s per cell, simultaneous start, repeats"
    params = GridParams

    def emulator(self, params: GridParams) -> EmulatorConfig:
        return EmulatorConfig(prefix_caching=False)  # exo bench's bench endpoint: every request from a cold cache

    def cells(self, params: GridParams) -> list[Cell]:
        return [Cell(pp, tg, c) for pp in params.pp for tg in params.tg for c in params.concurrency]

    def procedure(self, lab: Lab, params: GridParams) -> dict[Cell, list[Run]]:
        out: dict[Cell, list[Run]] = {}
        for cell in self.cells(params):
            for r in range(params.repeat):
                cfg = lab.config(
                    workload={"input_tokens": cell.pp, "output_tokens": cell.tg},
                    load={"concurrency": cell.concurrency, "requests": cell.concurrency, "barrier": True},
                )
                key = f"pp{cell.pp}-tg{cell.tg}-c{cell.concurrency}-r{r + 1}"
                label = f"pp {cell.pp}, tg {cell.tg}, concurrency {cell.concurrency}, repeat {r + 1}/{params.repeat}"
                out.setdefault(cell, []).append(lab.run(key, label, cfg))
        return out

    def analyze(self, measured: dict[Cell, list[Run]], params: GridParams) -> Analysis:
        rows, sources, figures = [], set(), {}
        for cell, runs in measured.items():
            batches = [batch_figures(r.columns()) for r in runs]
            cache: dict[str, int] = {}
            for b in batches:
                sources.add(f"prefill tokens/s from {b.prefill_source}; generation tokens/s from {b.gen_source}")
                for k, v in b.cache.items():
                    cache[k] = cache.get(k, 0) + v
            gen = [b.gen_tok_s for b in batches]
            agg = [b.agg_gen_tok_s for b in batches]
            rows.append(
                [
                    str(cell.pp),
                    str(cell.tg),
                    str(cell.concurrency),
                    _spread([b.prefill_tok_s for b in batches]),
                    _spread(gen),
                    _spread(agg),
                    _spread([b.wall_s * 1000 for b in batches]),
                    ", ".join(f"{k} {v}" for k, v in cache.items() if v) or "not reported",
                ]
            )
            tag = f"pp{cell.pp}_tg{cell.tg}_c{cell.concurrency}"
            figures[f"{tag}_gen_tok_s"] = float(np.nanmean(gen))
            figures[f"{tag}_agg_gen_tok_s"] = float(np.nanmean(agg))
            figures[f"{tag}_prefill_tok_s"] = float(np.nanmean([b.prefill_tok_s for b in batches]))
        table = Table(
            caption=f"Grid results (mean ± standard deviation over {params.repeat} repeats)",
            headers=[
                "pp",
                "tg",
                "Concurrency",
                "Prefill tok/s",
                "Gen tok/s",
                "Agg gen tok/s",
                "Batch wall ms",
                "Prefix cache",
            ],
            rows=rows,
            notes=[
                *sorted(sources),
                "aggregate generation tokens/s = the fastest stream's rate x concurrency (exo bench)",
            ],
        )
        findings = [f"{len(measured)} cells x {params.repeat} repeats, every batch released together (barrier)"]
        units = {name: "tok/s" for name in figures}
        return Analysis(tables=[table], findings=findings, figures=figures, headline=headline(figures, units))

    def requirements(
        self, measured: dict[Cell, list[Run]], analysis: Analysis, params: GridParams, quick: bool
    ) -> list[Requirement]:
        runs = [r for rs in measured.values() for r in rs]
        exact = all(r.info.prompt_verification is None or r.info.prompt_verification.mismatches == 0 for r in runs)
        short = sum(int(np.sum(r.columns().ok & (r.columns().output_tokens < r.columns().max_tokens))) for r in runs)
        full = short == 0
        eos = all(r.info.client is not None and r.info.client.ignore_eos for r in runs)
        spread = max((start_spread_ms(r) for r in runs), default=float("nan"))
        barrier = all(r.info.load.barrier for r in runs)
        together = bool(runs) and barrier and spread <= SIMULTANEOUS_MS
        return [
            requirement(
                "MUST",
                "exo: prompts",
                "prompts of the exact token length",
                exact,
                "server counts matched the built lengths" if exact else "the server counted some differently",
            ),
            requirement(
                "MUST",
                "exo: bench endpoint",
                "EOS banned: every reply runs to max_tokens",
                eos and full,
                "ignore_eos sent with every request"
                if full and eos
                else f"{short} replies ended before max_tokens"
                if eos
                else "ignore_eos was off",
            ),
            requirement(
                "MUST",
                "exo: concurrency",
                "a batch's requests start at the same instant",
                together,
                f"released through a barrier; the widest batch's sends {spread:.2f} ms apart (<= {SIMULTANEOUS_MS:g} "
                "allowed)"
                if barrier
                else "some batches were not released through a barrier",
            ),
        ]


def start_spread_ms(run: Run) -> float:
    """How far apart a batch's requests were sent: the first to the last submission, in ms."""
    sub = run.columns().submitted_at
    return float(sub.max() - sub.min()) * 1000 if len(sub) else 0.0


SUITE = GridSuite()
