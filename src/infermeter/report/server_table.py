"""The server's side of a run as a table: its own gauges and phase timings from /metrics, and energy and cost
where measured (the host's, and the server's GPUs through DCGM)."""

from __future__ import annotations

from infermeter.metrics.summary_model import ServerMetrics, Summary
from infermeter.report.tables import fmt_num, fmt_pct, grid


def _server_times(m: ServerMetrics) -> list[list[str]]:
    """The server's own timing of the phases of a request (queue, prefill, decode), where it exports them."""
    rows = []
    per_batch = set(m.per_batch or ())
    for label, name, h in (("Queue time", "queue_time", m.queue_time), ("Prefill time", "prefill_time", m.prefill_time),
                           ("Decode time", "decode_time", m.decode_time)):  # fmt: skip
        if h is None:
            continue
        each = "per batch step" if name in per_batch else "per request"
        spread = f", p95 {h.p95_ms:.1f} ms" if h.p95_ms is not None else ""
        rows.append([f"{label} ({each}, as the server reports it)", f"mean {h.mean_ms:.1f} ms{spread}"])
    return rows


def server_table(summary: Summary) -> str:
    """The server's own gauges over the run, and energy and cost where measured."""
    rows: list[list[str]] = []
    m = summary.server_metrics
    if m is not None:
        if m.dialect is not None:
            rows.append(["Metric names read", m.dialect])
        gauges = (("Queue depth (waiting)", m.waiting), ("Running batch", m.running), ("KV-cache usage", m.kv_usage))
        for label, g in gauges:
            if g is not None:
                rows.append([f"{label} mean / p99 / max", f"{g.mean:.2f} / {g.p99:.2f} / {g.max:.2f}"])
        rows += _server_times(m)
        if m.preemptions is not None:
            rows.append(["Preemptions during the run", f"{m.preemptions.delta:g}"])
        if m.prefix_cache_hit_rate is not None:
            rows.append(["Prefix-cache hit rate", fmt_pct(m.prefix_cache_hit_rate)])
    e = summary.energy
    if e is not None:
        rows.append(
            [
                "Energy over the window",
                "unavailable"
                if e.energy_j is None
                else f"{e.energy_j:.1f} J ({fmt_num(e.joules_per_output_token, 3)} J/token)",
            ]
        )
        rows += [[f"  {n}", ""] for n in e.notes]
        if (dcgm := e.server_gpus) is not None:
            energy = "unavailable" if dcgm.energy_j is None else f"{dcgm.energy_j:.1f} J"
            per_token = fmt_num(dcgm.joules_per_output_token, 3)
            rows.append([f"Server GPUs' energy ({len(dcgm.gpus)} GPUs, DCGM)", f"{energy} ({per_token} J/token)"])
            rows += [[f"  {line}", ""] for line in (dcgm.source, *dcgm.notes)]
        if e.output_tok_per_gpu_s is not None and e.gpus and summary.endpoint is None:
            rows.append(["Output tokens per GPU-second", f"{e.output_tok_per_gpu_s:.1f} (over {e.gpus} GPUs)"])
        if e.cost_per_million_output_tokens is not None and e.gpus and e.gpu_seconds is not None:
            rows.append(
                [
                    "Cost per million output tokens",
                    f"{e.cost_per_million_output_tokens:.4f} "
                    f"({e.gpus} GPU x {e.gpu_seconds / e.gpus:.1f} s at {e.gpu_price_per_hour:g}/h)",
                ]
            )
    return grid(["Metric", "Value"], rows, "Server metrics and energy")
