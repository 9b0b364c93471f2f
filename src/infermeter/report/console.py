"""Console reports in the draft's formats: Table 1 (TTFT), Table 2 (TTFT by input), Table 6 (ITL; Time Between Chunks
under option A), Tables 8-9 (fairness) and the Appendix C.1 Minimum Viable Report.  Given the endpoint a run measured
(report.endpoint.measured_text), a table's caption names it; an API that answers in one body (embeddings, rerank) gets
its latency and input rates instead of TTFT and ITL."""

from __future__ import annotations

from infermeter.metrics.statistics import PERCENTILES
from infermeter.metrics.summary_model import Summary
from infermeter.records import RunInfo, failure_reason
from infermeter.report.breakdowns import breakdown_lines, breakdown_tables
from infermeter.report.endpoint import (
    captioned,
    endpoint_lines,
    endpoint_table,
    generates,
    measured_line,
    measured_text,
    not_applicable,
)
from infermeter.report.server_table import server_table
from infermeter.report.tables import fmt_ms, fmt_num, fmt_pct, grid
from infermeter.run_info import ClockAccuracy, Tokenizer, Warmup

TTFT_BOUND_MS = 500.0  # C.1 "Throughput at P99 TTFT < 500ms"
ITL_OPTION_NAMES = {
    "A": "option A (time between chunks)",
    "B": "option B (chunk time given to each of its tokens)",
    "C": "option C (server-reported token times)",
}


def itl_name(option: str) -> str:
    """What a run's inter-token figure is called under its ITL option: the IETF draft, section 4.6.3, reports option
    A's inter-chunk times as "Time Between Chunks" rather than ITL."""
    return "Time Between Chunks" if option == "A" else "ITL"


def chunk_sizes(summary: Summary) -> str:
    """The chunk size distribution the IETF draft (4.6.3) asks to note beside option A's Time Between Chunks."""
    c = summary.chunking
    if not c.chunks or c.tokens_per_chunk_mean is None:
        return "no content chunks"
    single = f", {fmt_pct(c.single_token_share)} single-token" if c.single_token_share is not None else ""
    most = f", max {c.tokens_per_chunk_max}" if c.tokens_per_chunk_max is not None else ""
    return f"mean {c.tokens_per_chunk_mean:.2f} tokens{most}{single} ({c.chunks:,} chunks)"


def table1_ttft(summary: Summary, measured: str | None = None) -> str:
    s = summary.ttft_ms
    rows = [["Requests", str(summary.requests.total)]]
    rows += [[f"TTFT P{p:g}", fmt_ms(s.percentile(p))] for p in PERCENTILES]
    rows += [["TTFT Mean", fmt_ms(s.mean)], ["TTFT Min", fmt_ms(s.min)], ["TTFT Max", fmt_ms(s.max)]]
    return grid(["Metric", "Value"], rows, captioned("Table 1: TTFT Results", measured))


def table2_ttft_by_input(summary: Summary, measured: str | None = None) -> str:
    rows = [
        [b.bucket, str(b.n), fmt_ms(b.p50, ""), fmt_ms(b.p95, ""), fmt_ms(b.p99, "")]
        for b in summary.ttft_by_input_tokens
    ]
    caption = captioned("Table 2: TTFT by Input Length", measured)
    return grid(["Input Tokens", "Count", "P50 (ms)", "P95 (ms)", "P99 (ms)"], rows, caption)


def table6_itl(summary: Summary, measured: str | None = None) -> str:
    """Table 6; under option A its figures are Time Between Chunks, with the chunk sizes beside them (4.6.3)."""
    s, name = summary.itl_ms, itl_name(summary.itl_option)
    ratio = s.p99 / s.p50 if s.p50 and s.p99 is not None else None
    rows = [[f"{name} Samples", str(s.n)]]
    rows += [[f"{name} P{p:g}", fmt_ms(s.percentile(p))] for p in PERCENTILES]
    rows += [[f"{name} Mean", fmt_ms(s.mean)], [f"{name} Std Dev", fmt_ms(s.std)], ["P99/P50 Ratio", fmt_num(ratio)]]
    if summary.itl_option == "A":
        rows.append(["Chunk sizes", chunk_sizes(summary)])
    caption = f"Table 6: {name} Results ({ITL_OPTION_NAMES[summary.itl_option]})"
    return grid(["Metric", "Value"], rows, captioned(caption, measured))


def table_per_request_itl(summary: Summary, measured: str | None = None) -> str:
    """Each request's jitter and longest pause, named as Table 6 names the run's figure (4.6.3)."""
    j, m, name = summary.jitter_ms, summary.max_pause_ms, itl_name(summary.itl_option)
    rows = [[f"P{p:g}", fmt_ms(j.percentile(p)), fmt_ms(m.percentile(p))] for p in (50.0, 95.0, 99.0)]
    caption = captioned(f"Per-request {name} statistics (5.4.4.2)", measured)
    return grid(["Percentile", f"Jitter ({name} std)", "Max pause"], rows, caption)


def table8_classes(summary: Summary, measured: str | None = None) -> str:
    rows = [
        [name or "(none)", str(c.count), fmt_ms(c.ttft_p50), fmt_ms(c.ttft_p99), fmt_ms(c.tpot_p50), fmt_ms(c.tpot_p99)]
        for name, c in summary.fairness.classes.items()
    ]
    caption = captioned("Table 8: Per-Class Results", measured)
    return grid(["Class", "Count", "TTFT P50", "TTFT P99", "TPOT P50", "TPOT P99"], rows, caption)


def table9_fairness(summary: Summary, measured: str | None = None) -> str:
    f = summary.fairness
    rows = [["Jain's Fairness Index", fmt_num(f.jain_index)]]
    rows += [[f"{name or '(none)'} Class Starvation", fmt_pct(rate)] for name, rate in f.starvation.items()]
    return grid(["Metric", "Value"], rows, captioned("Table 9: Fairness Metrics", measured))


def throughput_table(summary: Summary, measured: str | None = None) -> str:
    t, g, r = summary.throughput, summary.goodput, summary.requests
    rows = [
        ["Requests (ok / failed)", f"{r.ok} / {r.failed}"],
        ["Success rate", fmt_pct(r.success_rate)],
        ["Measurement window", f"{summary.duration_s:.3f} s"],
        ["Output throughput", f"{t.output_tok_s:.1f} tok/s"],
        ["Input throughput", f"{t.input_tok_s:.1f} tok/s"],
        ["Request throughput", f"{t.req_s:.3f} req/s"],
        ["TPOT P50 / P99", f"{fmt_ms(summary.tpot_ms.p50)} / {fmt_ms(summary.tpot_ms.p99)}"],
        ["E2E P50 / P99", f"{fmt_ms(summary.e2e_ms.p50)} / {fmt_ms(summary.e2e_ms.p99)}"],
    ]
    if g.slo:
        bounds = ", ".join(f"{k}<={v:g}ms" for k, v in g.slo.items())
        goodput = f"{g.req_s or 0.0:.3f} req/s ({fmt_pct(g.fraction)} of requests)"
        rows += [["Goodput SLO", bounds], ["Goodput", goodput]]
    return grid(["Metric", "Value"], rows, captioned("Throughput and goodput", measured))


def counting_text(block: Tokenizer) -> str:
    """Which token counts the metrics use (the IETF draft's option A or B), as run.json declares it."""
    method = block.counting_method
    if method not in ("A", "B"):
        return "Tokens counted as the server reports them (no counting method declared)"
    kind = block.counting_method_text or ("native tokenizer" if method == "A" else "reference tokenizer")
    return f"Tokens counted with option {method}, {kind}: {block.name or 'not declared'}"


def itl_text(summary: Summary) -> str:
    """How the run's inter-token figure was measured, named as the IETF draft (4.6.3) names it, with option A's chunk
    size distribution."""
    text = f"{itl_name(summary.itl_option)} measured with {ITL_OPTION_NAMES[summary.itl_option]}"
    return text + (f"; chunk sizes {chunk_sizes(summary)}" if summary.itl_option == "A" else "")


def client_warning(info: RunInfo) -> str | None:
    """The client-bound warning a report opens with (run.json's client_health), or None."""
    return info.client_health.warning() if info.client_health is not None else None


def objective_results(summary: Summary) -> list[str]:
    """The key results a run's objectives add: goodput under --slo (seed 002) and Metron's fluidity-index and fluid
    token generation rate under --deadlines (seeds/001), as `report` computes them."""
    lines: list[str] = []
    g, f = summary.goodput, summary.fluidity
    if g.slo:
        bounds = ", ".join(f"{k}<={v:g}ms" for k, v in g.slo.items())
        share = f"{fmt_pct(g.fraction)} of requests meet every SLO: {bounds}"
        lines.append(f"- Goodput: {g.req_s or 0.0:.3f} req/s ({share})")
    if f is not None:
        d_p = f.ttft_deadline_ms
        d_p_text = "none" if d_p is None else (d_p if isinstance(d_p, str) else fmt_ms(d_p))
        lines += [
            f"- Fluidity-index: mean {fmt_num(f.index.mean, 3)}, P50 {fmt_num(f.index.p50, 3)} "
            f"({fmt_pct(f.share_meeting_target)} of requests >= {f.target:g}; D_p {d_p_text}, "
            f"D_d {fmt_ms(f.tbt_deadline_ms)})",
            "- Fluid Token Generation Rate: " + ("n/a" if f.fluid_tok_s is None else f"{f.fluid_tok_s:.1f} tok/s"),
        ]
    return lines


def minimum_report(summary: Summary, info: RunInfo, warned: bool = False, table: bool = True) -> str:
    """Appendix C.1, filled from run.json and the summary, under the endpoint it measured.  An API that answers in one
    body (embeddings, rerank) reports its latency and input rates in place of TTFT and TPOT, with their table unless
    `table` is False (the full report around it drew it)."""
    streams = generates(summary, info)
    sut, load = info.sut, info.load
    ttft, tpot = summary.ttft_ms, summary.tpot_ms
    out_tok_s = summary.throughput.output_tok_s
    p99 = ttft.p99
    if p99 is None:
        at_slo = "n/a (no successful requests)"
    elif p99 < TTFT_BOUND_MS:
        at_slo = f"{out_tok_s:.1f} tok/s (this run's P99 TTFT is {fmt_ms(p99)})"
    else:
        at_slo = f"not met at this load (P99 TTFT {fmt_ms(p99)}); a rate sweep finds it"
    notes = [*([itl_text(summary)] if streams else []), counting_text(info.tokenizer)]  # else: said in Key Results
    if not warned and (warning := client_warning(info)) is not None:  # `warned`: the report around it opened with it
        notes.insert(0, warning)
    notes.append(f"Warm-up: {warmup_text(info.warmup)}")
    failed = summary.requests.failures_by_reason
    if failed:
        notes.append("Failed requests: " + ", ".join(f"{n} {reason}" for reason, n in failed.items()))
    notes += disclosure_notes(info)
    notes += info.notes
    for name, s in (("TTFT", summary.ttft_ms), (itl_name(summary.itl_option), summary.itl_ms)):
        notes += [f"{name}: {w}" for w in s.warnings if w != "no samples"]
    seed = "n/a" if info.workload.seed is None else info.workload.seed
    key = [
        f"- TTFT P50: {fmt_ms(ttft.p50)}",
        f"- TTFT P99: {fmt_ms(ttft.p99)}",
        f"- TPOT P50: {fmt_ms(tpot.p50)}",
        f"- TPOT P99: {fmt_ms(tpot.p99)}",
        f"- Max Throughput: {out_tok_s:.1f} tok/s (this run's output throughput)",
        f"- Throughput at P99 TTFT < 500ms: {at_slo}",
    ]
    if not streams:
        key = endpoint_lines(summary, info) + (["", endpoint_table(summary, measured_text(info))] if table else [])
    measured = measured_line(info)
    lines = [
        "=== LLM Benchmark Report (Minimum) ===",
        *([measured] if measured is not None else []),
        "",
        "System Identification:",
        f"- Model: {sut.model or 'not declared'}",
        f"- Hardware: {sut.hardware or 'not declared'}",
        f"- Software: {sut.software or 'not declared'}",
        f"- SUT Boundary: {sut.boundary or 'not declared (draft 4.1: give --boundary)'}",
        f"- Prefix Caching: {sut.prefix_caching or 'not declared'}",
        "",
        "Test Configuration:",
        f"- Workload: {info.workload.name or 'not declared'} (seed {seed})",
        *(["- Cold Start: yes, measured without warm-up (draft 4.5.3)"] if info.warmup.cold_start else []),
        f"- Load Model: {load.description or 'not declared'}",
        f"- Request Count: {summary.requests.total}",
        f"- Test Duration: {summary.duration_s:.1f} seconds",
        "",
        "Key Results:",
        *key,
        *breakdown_lines(summary),
        *objective_results(summary),
        "",
        "Notes:",
        *[f"- {n}" for n in notes],
        "",
        "=== End Report ===",
    ]
    return "\n".join(lines)


def disclosure_notes(info: RunInfo) -> list[str]:
    """Guardrails and refusals (draft 4.8.1), the clock method and its measured accuracy (4.7.2), the network round
    trip (4.7.3) and non-content events before content (5.1.3.1), as the minimum report's notes."""
    sut = info.sut
    notes = [f"Guardrails: {sut.guardrails or 'not declared'}"]
    if info.stream is not None:
        s = info.stream
        notes.append(f"Refusals (finish_reason content_filter): {s.refusals}")
        if s.without_done:
            notes.append(
                f"{s.without_done} streams ended after their final chunk without data: [DONE]; counted complete, as "
                "the OpenAI SDK reads them"
            )
        if s.non_content_first:
            notes.append(
                f"{s.non_content_first} responses began with a non-content event (role-only or empty); TTFT is the "
                "time to the first content token (draft 5.1.3.1)"
            )
    notes.append(f"Special tokens (draft 4.4.3): {special_text(info.tokenizer)}")
    notes.append(f"Clock synchronization: {clock_sync_text(info)}")
    if info.clock_accuracy is not None and not info.clock_accuracy.same_host:
        notes.append(f"Clock accuracy (draft 4.7.2), measured before the load: {clock_text(info.clock_accuracy)}")
    if info.client is not None and info.client.scheduling is not None:
        notes.append(f"Load generator: the measured load was sent at {info.client.scheduling} (--realtime)")
    net = info.network
    if net is not None and net.rtt_ms_median is not None:
        notes.append(
            f"Network RTT: median {net.rtt_ms_median:.3f} ms ({net.method}); reported, not subtracted from TTFT"
        )
    return notes


def special_text(block: Tokenizer) -> str:
    """The run's special-token declaration in one line (run.json's tokenizer.special; an earlier run's one sentence)."""
    if block.special is not None:
        return block.special.line()
    return block.special_tokens or "not declared"


def clock_sync_text(info: RunInfo) -> str:
    """The clock synchronization as declared (--clock-sync, one clock on loopback), else measured (its line follows),
    else not declared."""
    if info.sut.clock_sync:
        return info.sut.clock_sync
    ca = info.clock_accuracy
    if ca is not None and not ca.same_host and ca.method() is not None:
        return f"measured (below): {ca.method()}"
    return "not declared (draft 4.7.2: give --clock-sync)"


def clock_text(ca: ClockAccuracy) -> str:
    """What was measured of the clocks' agreement, with its figures: the client's NTP daemon, the Date bound."""
    parts = []
    if ca.ntp is not None:
        n = ca.ntp
        parts.append(
            f"{n.source}: the client's clock within {n.accuracy_ms:.2f} ms of {n.reference or 'its reference'}"
            if n.accuracy_ms is not None
            else f"{n.source}: the client's clock is not synchronised"
        )
    if ca.date is not None:
        d = ca.date
        rtt = f", RTT {d.rtt_ms_min:.2f} ms" if d.rtt_ms_min is not None else ""
        parts.append(
            f"server clock - client clock in [{d.offset_lo_ms:+.1f}, {d.offset_hi_ms:+.1f}] ms ({d.probes} HTTP Date "
            f"probes{rtt}{'; ' + d.note if d.note else ''})"
        )
    if ca.unavailable:
        parts.append(f"not measured: {'; '.join(ca.unavailable)}")
    if ca.note:
        parts.append(ca.note)
    return "; ".join(parts) or ca.method() or "nothing measured"


def warmup_text(warmup: Warmup) -> str:
    if warmup.cold_start:
        return "none: COLD START measured (draft 4.5.3)"
    if not warmup.done:
        return warmup.note or "not performed"
    requests = "?" if warmup.requests is None else warmup.requests
    tokens = "?" if warmup.output_tokens is None else warmup.output_tokens
    return f"done, {requests} requests, {tokens} output tokens"


def failures_table(summary: Summary) -> str:
    """Failed requests by reason, with the most common full message of each as an example."""
    r = summary.requests
    examples: dict[str, str] = {}
    for e in r.errors:
        examples.setdefault(failure_reason(e.error), e.error)
    rows = [[reason, str(count), examples.get(reason, "")[:100]] for reason, count in r.failures_by_reason.items()]
    return grid(["Reason", "Requests", "Example"], rows, f"Failures ({r.failed} of {r.total} requests)")


def full_report(summary: Summary, info: RunInfo) -> str:
    """Every table that applies to the run, then the minimum report; a client-bound run opens with the warning, then
    the endpoint it measured.  An API that answers in one body gets its latency table and a line saying TTFT, ITL and
    TPOT do not apply, in place of Tables 1 to 6."""
    warning = client_warning(info)
    parts = [warning] if warning is not None else []
    measured, line = measured_text(info), measured_line(info)
    if line is not None:
        parts.append(line)
    streams = generates(summary, info)
    if streams:
        parts.append(table1_ttft(summary, measured))
        if len(summary.ttft_by_input_tokens) > 1:
            parts.append(table2_ttft_by_input(summary, measured))
        parts += [table6_itl(summary, measured), table_per_request_itl(summary, measured)]
        parts.append(throughput_table(summary, measured))
        if summary.endpoint is not None:  # some requests were answered in one body beside the streams
            parts.append(endpoint_table(summary, measured))
    else:
        parts += [not_applicable(info), endpoint_table(summary, measured)]
    if summary.requests.failed:
        parts.append(failures_table(summary))
    parts += breakdown_tables(summary, itl_name(summary.itl_option))
    if streams and len(summary.fairness.classes) > 1:
        parts += [table8_classes(summary, measured), table9_fairness(summary, measured)]
    if summary.fluidity is not None:
        parts.append(fluidity_table(summary))
    if summary.server_metrics is not None or summary.energy is not None:
        parts.append(server_table(summary))
    parts.append(minimum_report(summary, info, warned=True, table=False))
    return "\n\n".join(parts)


def sim_table(summary: Summary) -> str:
    """The simulator's own metrics (seeds/004 section 9); empty for a run that was not simulated."""
    s = summary.sim
    if s is None:
        return ""
    q = s.queueing_delay_ms
    rows = [
        ["Scheduler", f"{s.scheduler} ({s.latency_model} latency model)"],
        ["Engines", str(s.engines)],
        ["GPU utilization", fmt_pct(s.gpu_utilization)],
        ["Average batch size", f"{s.avg_batch_size:.1f}"],
        ["Queueing delay mean / P99", f"{fmt_ms(q.mean)} / {fmt_ms(q.p99)}"],
        [f"Token SLA violations (TPOT > {s.d_sla_token_ms:g} ms)", fmt_pct(s.token_sla_violation)],
        [f"Request SLA violations (E2E > {s.d_sla_request_s:g} s)", fmt_pct(s.request_sla_violation)],
        ["Preemptions (requests)", f"{s.preemptions} ({s.preempted_requests})"],
        ["Rejected (never fit in KV memory)", str(s.rejected)],
        ["Peak KV usage", fmt_pct(s.peak_kv_usage)],
    ]
    if s.decode_step_time_ms is not None:
        rows.append(["Decode step time (mean)", fmt_ms(s.decode_step_time_ms)])
    if s.seconds_per_generated_token is not None:
        rows.append(["Engine time per generated token", f"{s.seconds_per_generated_token * 1000:.3f} ms"])
    return grid(["Metric", "Value"], rows, "Simulated engine (utilization, batches, queueing, SLA)")


def comparison_table(named: list[tuple[str, Summary]]) -> str:
    """Key metrics of several runs side by side (one column per run)."""

    def ms(metric: str, stat: str) -> list[str]:
        return [fmt_ms(s.latency(metric).value(stat)) for _, s in named]

    itl = " / ".join(sorted({itl_name(s.itl_option) for _, s in named}))  # runs under options A and B: both names

    rows = [
        ["Requests (ok)", *[f"{s.requests.total} ({s.requests.ok})" for _, s in named]],
        ["Output throughput", *[f"{s.throughput.output_tok_s:.1f} tok/s" for _, s in named]],
        ["Request throughput", *[f"{s.throughput.req_s:.3f} req/s" for _, s in named]],
        ["TTFT P50", *ms("ttft", "p50")],
        ["TTFT P99", *ms("ttft", "p99")],
        [f"{itl} P50", *ms("itl", "p50")],
        [f"{itl} P99", *ms("itl", "p99")],
        ["TPOT P50", *ms("tpot", "p50")],
        ["TPOT P99", *ms("tpot", "p99")],
        ["E2E P99", *ms("e2e", "p99")],
    ]
    if any(s.endpoint is not None for _, s in named):  # runs of an API answering in one body (embeddings, rerank)
        rows += [
            ["Inputs/s", *["n/a" if s.endpoint is None else f"{s.endpoint.inputs_s:.1f}" for _, s in named]],
            ["Input throughput", *[f"{s.throughput.input_tok_s:.1f} tok/s" for _, s in named]],
        ]
    sims = [s.sim for _, s in named if s.sim is not None]
    if len(sims) == len(named):
        rows += [
            ["Scheduler", *[sim.scheduler for sim in sims]],
            ["GPU utilization", *[fmt_pct(sim.gpu_utilization) for sim in sims]],
            ["Average batch size", *[f"{sim.avg_batch_size:.1f}" for sim in sims]],
            ["Preemptions", *[str(sim.preemptions) for sim in sims]],
        ]
    return grid(["Metric", *[name for name, _ in named]], rows, "Run comparison")


def fluidity_table(summary: Summary) -> str:
    """Metron's metrics (seeds/001): fluidity-index and the three token rates side by side."""
    f = summary.fluidity
    if f is None:
        return ""
    idx = f.index
    ttft = f.ttft_deadline_ms
    ttft_text = "none (decode deadlines only)" if ttft is None else (ttft if isinstance(ttft, str) else fmt_ms(ttft))

    def rate(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.1f} tok/s"

    rows = [
        ["TTFT deadline (D_p)", ttft_text],
        ["TBT deadline (D_d)", fmt_ms(f.tbt_deadline_ms)],
        ["Fluidity-index mean / P50 / min", f"{fmt_num(idx.mean, 3)} / {fmt_num(idx.p50, 3)} / {fmt_num(idx.min, 3)}"],
        [f"Requests with fluidity >= {f.target:g}", fmt_pct(f.share_meeting_target)],
        ["Service deadline-miss rate", fmt_pct(f.service_miss_rate)],
        [f"Fluid token rate (P99 of min D_d at {f.target:g})", rate(f.fluid_tok_s)],
        ["1 / mean TPOT (too lax)", rate(f.tpot_tok_s)],
        ["1 / P99 ITL (too harsh)", rate(f.p99_itl_tok_s)],
    ]
    curve = f.miss_rate_curve
    points = [
        (ms, r)
        for ms, r in zip(curve.tbt_ms, curve.p99_miss_rate, strict=True)
        if ms in (5, 10, 15, 20, 25, 30, 40, 50, 75, 100) and r is not None
    ]
    rows += [[f"P99 deadline-miss rate at TBT {ms} ms", fmt_pct(r)] for ms, r in points]
    return grid(["Metric", "Value"], rows, "Fluidity (Metron)")
