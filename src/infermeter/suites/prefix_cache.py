"""Prefix Cache Effectiveness (the IETF draft, section 5.7): the same shared-prefix workload (Code Completion by
default) with the cache disabled, enabled and cold (a warm-up that sends none of the run's prefixes, 5.7.3), enabled
and warm (the warm-up pre-populated the run's prefixes); TTFT per configuration (Table 10), TTFT reduction, hit rate,
and the throughput change at capacity (a saturating closed loop with the cache off and on)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np

from infermeter.chart import Chart, Trace
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError
from infermeter.metrics.compared import request_hash
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.charts import COLORS
from infermeter.suites.common import headline, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.suites.probe import completion_rate
from infermeter.suites.throughput import small_engine
from infermeter.workload.spec import Requests, WorkloadSpec, generate
from infermeter.workload.standard import resolve

LATENCY_SHARE = 0.5  # the embedded emulator's TTFT runs: half the cache-disabled configuration's capacity
COLD, WARM = 0.5, 0.5  # a prefix's first request with under half of it cached found it cold; at least half, warm
CONFIGS = {"disabled": "Cache Disabled", "cold": "Cache (Cold)", "warm": "Cache (Warm)"}


class PrefixParams(SuiteParams):
    workload: Annotated[
        str, Flag("a workload with shared prefixes (the draft recommends Code Completion)", checks.WORKLOAD)
    ] = "code-completion"
    rate: Annotated[float | None, Flag("open-loop load of the TTFT runs, req/s", checks.RATE)] = None
    requests: Annotated[int, Flag("requests per configuration", checks.REQUESTS)] = 1000
    capacity_concurrency: Annotated[
        int,
        Flag(
            "closed-loop concurrency of the throughput runs (above the server's batch, so that they run at capacity)",
            checks.integer(1, 100_000),
        ),
    ] = 32
    capacity_requests: Annotated[int, Flag("requests of each throughput run", checks.REQUESTS)] = 400
    url_disabled: Annotated[str | None, Flag("a server with prefix caching disabled", checks.url)] = None
    url_enabled: Annotated[str | None, Flag("the same server with prefix caching enabled", checks.url)] = None

    QUICK: ClassVar[dict[str, Any]] = {"requests": 60, "capacity_requests": 64}


@dataclass
class Measured:
    runs: dict[str, Run]  # disabled, cold, warm (TTFT at one open-loop rate)
    capacity: dict[str, Run]  # disabled, enabled (saturating closed loops)
    rate: float
    rate_source: str


def _drawn(run: Run) -> Requests | None:
    """The run's requests drawn again from run.json's workload, seed and request count (their shared prefixes)."""
    w = run.info.workload
    if w.spec is None or w.seed is None or run.info.load.requests is None:
        return None
    return generate(WorkloadSpec.model_validate(w.spec), int(run.info.load.requests), int(w.seed))


def first_hits(run: Run) -> np.ndarray | None:
    """For each shared prefix, the share of it the server served from its cache the first time the run sent it
    (None: the server reports no cached tokens, or the prefixes cannot be told)."""
    cols, drawn = run.columns(), _drawn(run)
    if drawn is None or not cols.ok.any() or np.all(np.isnan(cols.cached_tokens[cols.ok])):
        return None
    at = np.minimum(cols.request_id, len(drawn) - 1)
    pid, length = drawn.prefix_id[at], drawn.prefix_tokens[at]
    out = []
    seen: set[int] = set()
    for i in np.argsort(cols.submitted_at):
        if pid[i] < 0 or not cols.ok[i] or int(pid[i]) in seen:
            continue
        seen.add(int(pid[i]))
        out.append(float(np.nan_to_num(cols.cached_tokens[i])) / float(length[i]))
    return np.asarray(out)


def hit_rate(run: Run) -> float | None:
    """Prompt tokens served from the cache: the server's counters, else its per-request cached tokens."""
    s = run.summary
    hit = s.server_metrics.prefix_cache_hit_rate if s.server_metrics is not None else None
    if hit is None and s.server_timing is not None:
        hit = s.server_timing.prefix_cache_hit_share
    return hit


class PrefixCacheSuite:
    name = "prefix-cache"
    section = "5.7"
    reference = "IETF draft, section 5.7"
    title = "Prefix Cache Effectiveness"
    summary = "cache disabled, cold and warm on a shared-prefix workload: TTFT reduction, throughput (Table 10)"
    params = PrefixParams

    def emulator(self, params: PrefixParams) -> EmulatorConfig:
        """A small batch (throughput.small_engine), so the capacity runs' requests in flight keep it at capacity."""
        return small_engine(prefix_caching=True)

    def spec(self, params: PrefixParams) -> WorkloadSpec:
        spec = resolve(params.workload)
        if spec.prefix is None or spec.prefix.fraction <= 0:
            raise UserError(
                f"--workload {params.workload} shares no prefixes: the IETF draft's 5.7 measures a prefix cache on "
                "requests that share them (Code Completion, or a workload file with a `prefix` block)"
            )
        return spec

    def procedure(self, lab: Lab, params: PrefixParams) -> Measured:
        if not lab.embedded and (params.url_disabled is None or params.url_enabled is None):
            raise UserError("against servers give --url-disabled and --url-enabled (the same server, cache off and on)")
        spec = self.spec(params)
        work = {"workload": lab.workload("prefix-cache", spec)}
        bare = lab.workload(
            "warm-up-without-prefixes",
            spec.model_copy(update={"prefix": None, "name": f"{spec.name}-without-prefixes"}),
        )
        emu = lab.emulator

        def target(enabled: bool) -> dict[str, Any]:
            if emu is not None:
                return {"emulator": emu.model_copy(update={"prefix_caching": enabled})}
            url = params.url_enabled if enabled else params.url_disabled
            return {"url": url, "disclosures": {"prefix_caching": "enabled" if enabled else "disabled"}}

        closed = {"concurrency": params.capacity_concurrency, "requests": params.capacity_requests}
        capacity = {
            "disabled": lab.run(
                "capacity-cache-disabled",
                f"prefix cache disabled, closed loop at concurrency {params.capacity_concurrency}",
                lab.config(workload=work, load={**closed, "warmup_workload": bare}, **target(False)),
                fresh=True,
                level="capacity disabled",
            )
        }
        if params.rate is not None:
            rate, source = params.rate, "given (--rate)"
        elif lab.embedded:
            got = completion_rate(capacity["disabled"].columns())
            if got is None:
                raise UserError(f"the cache-disabled throughput run completed too few requests: see {lab.out}")
            rate = float(f"{LATENCY_SHARE * got:.4g}")
            source = f"half the {got:.3g} req/s the cache-disabled configuration completed at capacity (measured)"
        else:
            raise UserError("give the load of the TTFT runs: --rate R (req/s)")
        load = {"rate": rate, "requests": params.requests}
        runs = {
            "disabled": lab.run(
                "cache-disabled",
                "prefix cache disabled",
                lab.config(workload=work, load={**load, "warmup_workload": bare}, **target(False)),
                level="disabled",
            ),
            # cold: a fresh server whose warm-up sent none of the run's prefixes (5.7.3 step 2)
            "cold": lab.run(
                "cache-cold",
                "prefix cache enabled, cold",
                lab.config(workload=work, load={**load, "warmup_workload": bare}, **target(True)),
                fresh=True,
                level="cold",
            ),
            # warm: the warm-up sent the run's shared prefixes first (5.7.3 step 5, pre-populated)
            "warm": lab.run(
                "cache-warm",
                "prefix cache enabled, warm",
                lab.config(workload=work, load=load, **target(True)),
                level="warm",
            ),
        }
        capacity["enabled"] = lab.run(
            "capacity-cache-enabled",
            f"prefix cache enabled, closed loop at concurrency {params.capacity_concurrency}",
            lab.config(workload=work, load=closed, **target(True)),
            level="capacity enabled",
        )
        return Measured(runs, capacity, rate, source)

    def analyze(self, measured: Measured, params: PrefixParams) -> Analysis:
        off, on = (measured.capacity[k].summary.throughput.output_tok_s for k in ("disabled", "enabled"))
        gain = on / off - 1 if off else None
        rows, figures = table10_rows(measured.runs)
        figures.update(capacity_disabled_output_tok_s=off, capacity_enabled_output_tok_s=on, throughput_change=gain)
        c = params.capacity_concurrency
        tables = [table10(measured, rows), capacity_table(measured, params, gain)]
        findings = [f"{r[0]}: TTFT P50 {r[1]}, reduction {r[4]}, hit rate {r[5]}" for r in rows[1:]]
        findings.append(f"throughput at capacity (closed loop at concurrency {c}): {fmt_pct(gain)} with the cache")
        units = {
            "disabled_ttft_p50_ms": "ms",
            "cold_ttft_p50_ms": "ms",
            "warm_ttft_p50_ms": "ms",
            "cold_ttft_reduction": "share",
            "warm_ttft_reduction": "share",
            "cold_hit_rate": "share",
            "warm_hit_rate": "share",
            "capacity_disabled_output_tok_s": "tok/s",
            "capacity_enabled_output_tok_s": "tok/s",
            "throughput_change": "share",
        }
        return Analysis(
            tables=tables,
            findings=findings,
            figures=figures,
            headline=headline(figures, units),
            charts=[ttft_chart(measured.runs)],
        )

    def requirements(
        self, measured: Measured, analysis: Analysis, params: PrefixParams, quick: bool
    ) -> list[Requirement]:
        runs = measured.runs
        states = {k: runs[k].info.sut.prefix_caching for k in CONFIGS}
        declared = states["disabled"] == "disabled" and states["cold"] == states["warm"] == "enabled"
        hits = {k: hit_rate(runs[k]) for k in CONFIGS}
        contradicted = (hits["disabled"] or 0) > 0 or (hits["warm"] is not None and hits["warm"] <= 0)
        hashes = {k: request_hash(runs[k].columns()) for k in CONFIGS}
        sent = {k: runs[k].info.warmup.shared_prefixes for k in ("disabled", "cold")}
        cold, warm = first_hits(runs["cold"]), first_hits(runs["warm"])
        w = runs["warm"].info.workload
        fraction = w.prefix_sharing.fraction if w.prefix_sharing is not None else 0.0
        code = (w.spec or {}).get("content") == "code"  # the workload's content kind, not its wording
        queued = {k: _queued(r) for k, r in measured.capacity.items()}
        return [
            requirement(
                "MUST",
                "5.7.2",
                "runs with the cache disabled (baseline) and enabled",
                declared and not contradicted,
                f"declared: disabled run {states['disabled']}, cold and warm runs {states['cold']}/{states['warm']}; "
                f"hit rates {', '.join(f'{k} {fmt_pct(v)}' for k, v in hits.items())}",
            ),
            requirement(
                "MUST",
                "5.7.3",
                "an identical workload in every configuration",
                len(set(hashes.values())) == 1,
                f"request-sequence hash {hashes['disabled']} in all three"
                if len(set(hashes.values())) == 1
                else "different requests: " + ", ".join(f"{k} {h}" for k, h in hashes.items()),
            ),
            requirement(
                "MUST",
                "5.7.3",
                "warm-up without populating the prefix cache (disabled and cold configurations)",
                all(v == 0 for v in sent.values()) and all(runs[k].info.warmup.done for k in sent),
                ", ".join(f"{k}: warm-up sent {v} of the run's shared prefixes" for k, v in sent.items()),
            ),
            requirement(
                "SHOULD",
                "5.7.3",
                "the cold configuration starts with none of the prefixes cached, the warm one with them",
                None if cold is None or warm is None else bool(np.all(cold < COLD) and np.all(warm >= WARM)),
                "the server reports no cached tokens per request"
                if cold is None or warm is None
                else f"first request of each prefix: cold {100 * float(np.mean(cold)):.0f}% of it cached, warm "
                f"{100 * float(np.mean(warm)):.0f}% (mean over {len(cold)} prefixes)",
            ),
            requirement(
                "SHOULD",
                "5.7.2",
                "a Code Completion workload (source code, high prefix sharing)",
                code and fraction >= 0.5,
                f"{w.name}: {w.content or 'content not declared'}; {fraction:.0%} of requests share a prefix",
            ),
            requirement(
                "SHOULD",
                "5.7.4",
                "the throughput improvement measured at capacity (requests queued behind a full batch)",
                None if None in queued.values() else all(v is not None and v >= 1 for v in queued.values()),
                "the server exports no waiting-requests gauge"
                if None in queued.values()
                else ", ".join(f"{k}: {v:.1f} requests waiting on average" for k, v in queued.items() if v is not None),
            ),
        ]


def table10_rows(runs: dict[str, Run]) -> tuple[list[list[str]], dict[str, Any]]:
    """Table 10's rows (TTFT percentiles, the P50's reduction from the cache-disabled run's, the hit rate) per
    configuration, and those figures by name."""
    base = runs["disabled"].summary
    rows: list[list[str]] = []
    figures: dict[str, Any] = {}
    for name, label in CONFIGS.items():
        s = runs[name].summary
        hit = hit_rate(runs[name])
        cut = (base.ttft_ms.p50 - s.ttft_ms.p50) / base.ttft_ms.p50 if base.ttft_ms.p50 and s.ttft_ms.p50 else None
        rows.append(
            [
                label,
                fmt_ms(s.ttft_ms.p50),
                fmt_ms(s.ttft_ms.p95),
                fmt_ms(s.ttft_ms.p99),
                fmt_pct(cut) if name != "disabled" else "-",
                fmt_pct(hit),
            ]
        )
        figures[f"{name}_ttft_p50_ms"] = s.ttft_ms.p50
        figures[f"{name}_ttft_reduction"] = cut if name != "disabled" else None
        figures[f"{name}_hit_rate"] = hit
    return rows, figures


def table10(measured: Measured, rows: list[list[str]]) -> Table:
    """Table 10 (Cache Effectiveness), with the load of its runs and what cold and warm mean."""
    return Table(
        caption="Table 10: Cache Effectiveness",
        headers=["Configuration", "TTFT P50", "TTFT P95", "TTFT P99", "TTFT reduction (P50)", "Cache hit rate"],
        rows=rows,
        notes=[
            f"TTFT runs: open loop at {measured.rate:g} req/s ({measured.rate_source})",
            "hit rate: prompt tokens served from the cache, from the server's metrics",
            "cold: a fresh server whose warm-up sent none of the run's shared prefixes; warm: the warm-up sent "
            "them first",
        ],
    )


def capacity_table(measured: Measured, params: PrefixParams, gain: float | None) -> Table:
    """The throughput at capacity with the cache off and on, and the change (5.7.4)."""
    return Table(
        caption="Throughput at capacity (draft 5.7.4: throughput improvement)",
        headers=["Configuration", "Output tok/s", "Request/s", "Change"],
        rows=[
            [
                label,
                f"{measured.capacity[k].summary.throughput.output_tok_s:.0f}",
                f"{measured.capacity[k].summary.throughput.req_s:.2f}",
                "-" if k == "disabled" else fmt_pct(gain),
            ]
            for k, label in (("disabled", "Cache Disabled"), ("enabled", "Cache Enabled"))
        ],
        notes=[
            f"closed loop at concurrency {params.capacity_concurrency}, {params.capacity_requests} requests per "
            "configuration"
        ],
    )


def ttft_chart(runs: dict[str, Run]) -> Chart:
    """TTFT P50 and P99 bars per configuration: disabled, cold, warm."""
    labels = ["cache disabled", "cache cold", "cache warm"]
    order = [runs[k].summary for k in CONFIGS]
    return Chart(
        id="prefix-cache",
        title="TTFT with the prefix cache disabled, cold and warm (draft 5.7)",
        x_title="configuration",
        panels=["TTFT (ms)"],
        traces=[
            Trace(
                name=f"TTFT P{p:g}",
                kind="bar",
                x=labels,
                y=[s.ttft_ms.percentile(p) for s in order],
                color=COLORS[p],
            )
            for p in (50.0, 99.0)
        ],
        note="The bars are grouped per configuration: P50 left, P99 right.",
    )


def _queued(run: Run) -> float | None:
    """The mean of the server's waiting-requests gauge over a run (None when it exports none)."""
    sm = run.summary.server_metrics
    return sm.waiting.mean if sm is not None and sm.waiting is not None else None


SUITE = PrefixCacheSuite()
