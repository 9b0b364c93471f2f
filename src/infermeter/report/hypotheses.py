"""Multi-bin dynamic batching's experiment report: H1-H3 stated, their evidence and verdicts, and the figures."""

from __future__ import annotations

from infermeter.report.tables import grid
from infermeter.sim.hypotheses import BIN_KEYS, MARGIN, STATEMENTS, HypothesisReport, LevelResults

KEY_NAMES = {"output": "predicted output length (the paper's)", "total": "prompt + predicted output (infermeter's)"}
LEVEL_HEADERS = [
    "method", "req/s", "goodput", "P99 latency", "token SLA miss", "req SLA miss", "busy", "engine ms/token",
    "decode step", "mean batch", "E[max out|batch]",
]  # fmt: skip


def verdict_rows(report: HypothesisReport) -> list[list[str]]:
    """One row per hypothesis and bin key: the verdict at each level."""
    levels = [lv.level for lv in report.levels]
    got = {(v.hypothesis, v.bin_key, v.level): v.outcome for v in report.verdicts}
    return [[h, key, *[got[(h, key, lv)] for lv in levels]] for h in STATEMENTS for key in BIN_KEYS]


def verdict_table(report: HypothesisReport) -> str:
    levels = [f"{lv.level} ({lv.rate_req_s:.3g} req/s)" for lv in report.levels]
    return grid(["hypothesis", "bin key", *levels], verdict_rows(report), "Multi-bin dynamic batching: H1-H3")


def capacity_rows(report: HypothesisReport) -> list[list[str]]:
    return [
        [c.method, f"{c.capacity_threshold_lambda:.3f}", f"{c.capacity_qps_under_sla:.3f}"] for c in report.capacities
    ]


def capacity_table(report: HypothesisReport) -> str:
    return grid(
        ["method", "capacity_threshold_lambda (req/s)", "capacity_qps_under_sla (req/s)"],
        capacity_rows(report),
        "Section 9.4 capacities (1 engine)",
    )


def level_rows(level: LevelResults) -> list[list[str]]:
    return [
        [
            m.method,
            f"{m.throughput_req_s:.3f}",
            f"{m.goodput_req_s:.3f}",
            f"{m.p99_latency_s:.1f} s",
            f"{m.token_sla_violation_pct:.1f}%",
            f"{m.request_sla_violation_pct:.1f}%",
            f"{m.gpu_utilization:.0%}",
            f"{m.seconds_per_generated_token * 1e3:.3f}",
            f"{m.decode_step_time_ms:.2f} ms",
            f"{m.avg_batch_size:.1f}",
            f"{m.mean_batch_max_output:.0f}",
        ]
        for m in level.methods
    ]


def console(report: HypothesisReport) -> str:
    """What sim-sweep prints: the verdicts, then the evidence per hypothesis, then the capacities."""
    lines = [verdict_table(report), ""]
    for h, statement in STATEMENTS.items():
        lines.append(f"{h}: {statement}")
        lines += [f"  {v.level}, {v.bin_key}: {v.outcome}; {v.evidence}" for v in report.verdicts if v.hypothesis == h]
    lines += ["", capacity_table(report)]
    return "\n".join(lines)


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
        *["| " + " | ".join(r) + " |" for r in rows],
        "",
    ]


def markdown(report: HypothesisReport) -> str:
    """hypotheses.md: each hypothesis stated, its evidence and verdict per bin key and level, then the figures."""
    out = [
        "# Multi-bin dynamic batching: hypotheses H1-H3",
        "",
        f"{report.requests} requests per run, one engine, K = {report.bins} bins, seed {report.seed}; token SLA "
        f"{report.d_sla_token_ms:g} ms per output token (TPOT), request SLA {report.d_sla_request_s:g} s end to end. "
        f"A difference under {MARGIN:.0%} counts as no difference. Bins are keyed two ways: "
        + "; ".join(f"`{k}`: {name}" for k, name in KEY_NAMES.items())
        + ".",
        "",
        "H3 is judged by the engine time per output token (busy seconds / tokens): a busy fraction alone cannot "
        "judge utilization, since at a load every method carries the slower method is the busier one; the busy "
        "fraction is given beside it.",
        "",
    ]
    for h, statement in STATEMENTS.items():
        out += [f"## {h}: {statement}", ""]
        rows = [[v.bin_key, v.level, v.outcome, v.evidence] for v in report.verdicts if v.hypothesis == h]
        out += _md_table(["bin key", "level", "verdict", "evidence"], rows)
    out += ["## Section 9.4 capacities", ""]
    out += _md_table(["method", "capacity_threshold_lambda (req/s)", "capacity_qps_under_sla (req/s)"],
                     capacity_rows(report))  # fmt: skip
    for level in report.levels:
        out += [f"## Load level {level.level}: {level.rate_req_s:.3g} req/s offered", ""]
        out += _md_table(LEVEL_HEADERS, level_rows(level))
    return "\n".join(out)
