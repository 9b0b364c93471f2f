"""Which endpoint a run measured (run.json's client block), and the report of an API that answers each request with
one body instead of a token stream (embeddings, rerank): its latency and input rates, in place of TTFT and ITL."""

from __future__ import annotations

from urllib.parse import urlsplit

from infermeter.metrics.summary_model import Summary
from infermeter.report.tables import fmt_ms, fmt_num, fmt_pct, grid
from infermeter.run_info import RunInfo


def measured_text(info: RunInfo | None) -> str | None:
    """The API and endpoint a run sent its requests to ("--api chat, POST /v1/chat/completions"); None when run.json
    names no client (a simulated run)."""
    client = info.client if info is not None else None
    if client is None:
        return None
    if client.backend == "grpc":
        where = f" at {client.endpoint}" if client.endpoint else ""
        return f"--backend grpc, {client.transport or 'gRPC'}{where}"
    api = f"--api {client.api or 'completions'}"
    if not client.endpoint:
        return api
    return f"{api}, POST {urlsplit(client.endpoint).path or '/'}"


def measured_line(info: RunInfo | None) -> str | None:
    """The line a run's report opens with: "measured: " and the endpoint (None for a simulated run)."""
    text = measured_text(info)
    return None if text is None else f"measured: {text}"


def captioned(title: str, measured: str | None) -> str:
    """A table's caption naming the endpoint its figures measured, when known."""
    return title if measured is None else f"{title}; measured: {measured}"


def generates(summary: Summary, info: RunInfo | None) -> bool:
    """Whether the run's API streams generated tokens (TTFT, ITL and TPOT apply): as run.json's client declares it,
    else as the records show it (ok requests that carried inputs and no token: one body each)."""
    declared = info.client.generates if info is not None and info.client is not None else None
    if declared is not None:
        return declared
    return not (summary.endpoint is not None and summary.ttft_ms.n == 0)


def not_applicable(info: RunInfo | None) -> str:
    """The line said in place of the token metrics of an API that does not generate."""
    api = info.client.api if info is not None and info.client is not None else None
    to = f"--api {api}" if api else "this API"
    return f"TTFT, ITL and TPOT do not apply to {to} (one body per request, no token stream)"


def endpoint_table(summary: Summary, measured: str | None = None) -> str:
    """Latency, inputs per request, inputs/s and input tokens/s of the requests answered in one body (the run's
    requests and its e2e latency where no request carried inputs), with the run's requests and goodput."""
    e, t, r, g = summary.endpoint, summary.throughput, summary.requests, summary.goodput
    latency = e.latency_ms if e is not None else summary.e2e_ms
    rows = [
        ["Requests (ok / failed)", f"{r.ok} / {r.failed}"],
        ["Success rate", fmt_pct(r.success_rate)],
        ["Measurement window", f"{summary.duration_s:.3f} s"],
        ["Latency P50 / P90 / P99", " / ".join(fmt_ms(latency.value(p)) for p in ("p50", "p90", "p99"))],
        ["Latency Mean / Max", f"{fmt_ms(latency.mean)} / {fmt_ms(latency.max)}"],
        ["Inputs/s", "n/a" if e is None else f"{e.inputs_s:.1f} inputs/s"],
        [
            "Inputs per request (mean / max)",
            "n/a" if e is None else f"{fmt_num(e.inputs.mean)} / {fmt_num(e.inputs.max)}",
        ],
        ["Input throughput", f"{(e.input_tok_s if e is not None else t.input_tok_s):.1f} tok/s"],
        ["Request throughput", f"{t.req_s:.3f} req/s"],
    ]
    if g.slo:
        bounds = ", ".join(f"{k}<={v:g}ms" for k, v in g.slo.items())
        rows += [["Goodput SLO", bounds], ["Goodput", f"{g.req_s or 0.0:.3f} req/s ({fmt_pct(g.fraction)})"]]
    return grid(["Metric", "Value"], rows, captioned("Latency and inputs (one body per request)", measured))


def endpoint_lines(summary: Summary, info: RunInfo | None) -> list[str]:
    """The key results of an API that does not generate, as the minimum report's bullets."""
    e, t = summary.endpoint, summary.throughput
    latency = e.latency_ms if e is not None else summary.e2e_ms
    lines = [
        "- Latency P50 / P90 / P99: " + " / ".join(fmt_ms(latency.value(p)) for p in ("p50", "p90", "p99")),
        f"- Request Throughput: {t.req_s:.3f} req/s",
    ]
    if e is not None:
        lines += [
            f"- Inputs/s: {e.inputs_s:.1f} (inputs per request: mean {fmt_num(e.inputs.mean)})",
            f"- Input Throughput: {e.input_tok_s:.1f} tok/s",
        ]
    return [*lines, f"- {not_applicable(info)}"]
