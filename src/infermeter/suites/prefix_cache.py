"""Prefix Cache Effectiveness (the IETF draft, section 5.7): the same shared-prefix workload with the cache disabled,
enabled and cold, enabled and warm; TTFT per configuration (Table 10), TTFT reduction, hit rate, throughput change."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError
from infermeter.report.chart import Chart, Trace
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suites.charts import COLORS
from infermeter.suites.common import requirement
from infermeter.suites.framework import Analysis, Requirement, SuiteParams, Table
from infermeter.suites.lab import Lab, Run
from infermeter.workload.distributions import Fixed, Uniform
from infermeter.workload.spec import PrefixSharing, RequestClass, WorkloadSpec


class PrefixParams(SuiteParams):
    prefix_tokens: Annotated[int, Flag("length of the shared prefix", checks.integer(1, 1_000_000))] = 2048
    sharing: Annotated[float, Flag("share of requests with a shared prefix", checks.number(0, 1))] = 0.8
    prefixes: Annotated[int, Flag("distinct shared prefixes (repository contexts)", checks.integer(1, 10_000))] = 4
    rate: Annotated[float | None, Flag("open-loop load, req/s", checks.RATE)] = None
    requests: Annotated[int, Flag("requests per configuration", checks.REQUESTS)] = 1000
    url_disabled: Annotated[str | None, Flag("a server with prefix caching disabled", checks.url)] = None
    url_enabled: Annotated[str | None, Flag("the same server with prefix caching enabled", checks.url)] = None

    QUICK: ClassVar[dict[str, Any]] = {"requests": 60}


class PrefixCacheSuite:
    name = "prefix-cache"
    section = "5.7"
    reference = "IETF draft, section 5.7"
    title = "Prefix Cache Effectiveness"
    summary = "cache disabled, cold and warm on a shared-prefix workload: TTFT reduction (Table 10)"
    params = PrefixParams

    def emulator(self, params: PrefixParams) -> EmulatorConfig:
        return EmulatorConfig(prefix_caching=True)

    def spec(self, params: PrefixParams) -> WorkloadSpec:
        return WorkloadSpec(
            name="prefix-cache",
            purpose="the draft 5.7: code-completion-like requests sharing repository contexts",
            classes=[RequestClass(input=Uniform(min=64, max=256), output=Fixed(value=16))],
            prefix=PrefixSharing(
                fraction=params.sharing, count=params.prefixes, length=Fixed(value=params.prefix_tokens)
            ),
        )

    def procedure(self, lab: Lab, params: PrefixParams) -> dict[str, Run]:
        if not lab.embedded and (params.url_disabled is None or params.url_enabled is None):
            raise UserError("against servers give --url-disabled and --url-enabled (the same server, cache off and on)")
        work = {"workload": lab.workload("prefix-cache", self.spec(params))}
        load = {"rate": params.rate or 8.0, "requests": params.requests}
        emu = lab.emulator
        off = lab.config(
            workload=work,
            load=load,
            url=params.url_disabled,
            emulator=emu.model_copy(update={"prefix_caching": False}) if emu else None,
        )
        on = lab.config(
            workload=work,
            load=load,
            url=params.url_enabled,
            emulator=emu.model_copy(update={"prefix_caching": True}) if emu else None,
        )
        cold = on.model_copy(update={"load": on.load.model_copy(update={"warmup": 0})})
        return {
            "disabled": lab.run("cache-disabled", "prefix cache disabled", off, fresh=True),
            # cold: a fresh server and no warm-up, so nothing is cached when the measurement starts (draft 4.5.3)
            "cold": lab.run("cache-cold", "prefix cache enabled, cold", cold, fresh=True),
            # warm: the warm-up sends the same shared prefixes first, so they are cached (even on a resumed suite)
            "warm": lab.run("cache-warm", "prefix cache enabled, warm", on),
        }

    def analyze(self, runs: dict[str, Run], params: PrefixParams) -> Analysis:
        rows, figures = [], {}
        base = runs["disabled"].summary
        for name, label in (("disabled", "Cache Disabled"), ("cold", "Cache (Cold)"), ("warm", "Cache (Warm)")):
            s = runs[name].summary
            sm = s.server_metrics
            hit = sm.prefix_cache_hit_rate if sm is not None else None
            if hit is None and s.server_timing is not None:
                hit = s.server_timing.prefix_cache_hit_share
            cut = (base.ttft_ms.p50 - s.ttft_ms.p50) / base.ttft_ms.p50 if base.ttft_ms.p50 and s.ttft_ms.p50 else None
            gain = (
                s.throughput.output_tok_s / base.throughput.output_tok_s - 1 if base.throughput.output_tok_s else None
            )
            rows.append(
                [
                    label,
                    fmt_ms(s.ttft_ms.p50),
                    fmt_ms(s.ttft_ms.p95),
                    fmt_ms(s.ttft_ms.p99),
                    fmt_pct(cut) if name != "disabled" else "-",
                    fmt_pct(hit),
                    fmt_pct(gain) if name != "disabled" else "-",
                ]
            )
            figures[f"{name}_ttft_p50_ms"] = s.ttft_ms.p50
            figures[f"{name}_ttft_reduction"] = cut if name != "disabled" else None
            figures[f"{name}_hit_rate"] = hit
        table = Table(
            caption="Table 10: Cache Effectiveness",
            headers=[
                "Configuration",
                "TTFT P50",
                "TTFT P95",
                "TTFT P99",
                "TTFT reduction (P50)",
                "Cache hit rate",
                "Throughput change",
            ],
            rows=rows,
            notes=[
                "hit rate: prompt tokens served from the cache, from the server's metrics",
                "cold: fresh server, no warm-up; warm: the warm-up sent the shared prefixes first",
            ],
        )
        findings = [f"{r[0]}: TTFT P50 {r[1]}, reduction {r[4]}, hit rate {r[5]}" for r in rows[1:]]
        labels = ["cache disabled", "cache cold", "cache warm"]
        order = [runs[k].summary for k in ("disabled", "cold", "warm")]
        chart = Chart(
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
        return Analysis(tables=[table], findings=findings, figures=figures, charts=[chart])

    def requirements(
        self, runs: dict[str, Run], analysis: Analysis, params: PrefixParams, quick: bool
    ) -> list[Requirement]:
        off = runs["disabled"].info.sut.prefix_caching
        return [
            requirement(
                "MUST",
                "5.7.2",
                "runs with the cache disabled (baseline) and enabled",
                True,
                f"disabled ({off or 'declared by URL'}), enabled cold and warm",
            ),
            requirement(
                "MUST",
                "5.7.3",
                "an identical workload in every configuration",
                True,
                "one workload file and seed for all three runs",
            ),
            requirement(
                "SHOULD",
                "5.7.2",
                "a Code Completion workload (high prefix sharing)",
                True,
                f"{params.sharing:.0%} of requests share one of {params.prefixes} {params.prefix_tokens}-token "
                "prefixes (random text, not source code)",
            ),
        ]


SUITE = PrefixCacheSuite()
