"""The charts of one run: TTFT (CDF, histogram, against input length), the ITL distribution with its modality verdict,
the request timeline, Metron's stall picture and fluidity curve, and the run's course over time (throughput,
in-flight requests, the server's gauges, power).  Large runs are thinned so that a 10,000-request report stays small:
a CDF keeps at most CDF_POINTS ranks, histograms are binned here, every float is rounded to what a plot can show."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infermeter.chart import Chart, Mark, Trace
from infermeter.metrics import RecordColumns
from infermeter.metrics.fluidity import MISS_CURVE_MS, Layout, decode_gaps, request_gaps
from infermeter.metrics.latency import e2e, itl, max_pause, token_times, ttft
from infermeter.metrics.modality import modality
from infermeter.metrics.summary_model import Summary
from infermeter.report.console import itl_name

CDF_POINTS = 1000
MAX_BINS = 60
STALL_REQUESTS = 5
FLUIDITY_SAMPLE = 5000  # requests the fluidity curve evaluates (a fixed-seed sample above this)
SERVER_METRICS = "server_metrics.parquet"
TELEMETRY = "telemetry.parquet"
STATUS_COLORS = {"ok": "#1f77b4", "error": "#d62728", "timeout": "#ff7f0e", "cancelled": "#7f7f7f"}


def _r(values: np.ndarray, digits: int = 4) -> list[float | None]:
    """Floats rounded for the page (NaN becomes a gap)."""
    out = np.round(np.asarray(values, dtype=float), digits)
    return [None if not np.isfinite(v) else float(v) for v in out]


def _bins(values: np.ndarray) -> np.ndarray:
    """Histogram edges by the Freedman-Diaconis rule, at most MAX_BINS bins."""
    lo, hi = float(values.min()), float(values.max())
    if hi <= lo:
        return np.array([lo - 0.5, hi + 0.5])
    q75, q25 = np.percentile(values, [75, 25])
    width = 2 * (q75 - q25) / len(values) ** (1 / 3)
    count = int(np.clip(np.ceil((hi - lo) / width) if width > 0 else MAX_BINS, 5, MAX_BINS))
    return np.linspace(lo, hi, count + 1)


def histogram_trace(name: str, values: np.ndarray, color: str | None = None) -> Trace:
    """A binned histogram as bars at the bins' centres (the page carries counts, not samples)."""
    counts, edges = np.histogram(values, _bins(values))
    centres = (edges[:-1] + edges[1:]) / 2
    return Trace(name=name, kind="bar", x=_r(centres, 3), y=counts.astype(float).tolist(), color=color)


def cdf_trace(name: str, values: np.ndarray, color: str | None = None, tail: bool = False) -> Trace:
    """Empirical CDF as a step line through at most CDF_POINTS order statistics (always the first and last); with
    `tail`, the share of samples at or above each value instead (for a log axis: the tail stays visible)."""
    v = np.sort(values)
    n = len(v)
    idx = np.unique(np.linspace(0, n - 1, min(n, CDF_POINTS)).round().astype(int))
    share = (n - idx) / n if tail else (idx + 1) / n
    return Trace(name=name, kind="step", x=_r(v[idx], 3), y=_r(share, 6), color=color)


def ttft_charts(cols: RecordColumns, summary: Summary) -> list[Chart]:
    """TTFT's CDF (one curve per class when there are several), its histogram, and TTFT against input length."""
    ms = ttft(cols) * 1000
    ok = np.isfinite(ms)
    if not ok.any():
        return []
    classes = sorted(set(cols.request_class[ok].tolist()))
    cdf = [cdf_trace("all requests", ms[ok])]
    if len(classes) > 1:
        cdf += [cdf_trace(f"class {c or '(none)'}", ms[ok & (cols.request_class == c)]) for c in classes]
    s = summary.ttft_ms
    marks = [Mark(label=f"P{p}", x=round(v, 3)) for p, v in (("50", s.p50), ("99", s.p99)) if v is not None]
    charts = [
        Chart(
            id="ttft-cdf",
            title="TTFT: cumulative distribution",
            x_title="TTFT (ms)",
            panels=["share of requests"],
            traces=cdf,
            marks=marks,
        ),
        Chart(
            id="ttft-histogram",
            title="TTFT: histogram",
            x_title="TTFT (ms)",
            panels=["requests"],
            traces=[histogram_trace("requests", ms[ok])],
            marks=marks,
        ),
    ]
    by_len = [
        Trace(
            name="one request",
            kind="markers",
            x=cols.input_tokens[ok].astype(float).tolist(),
            y=_r(ms[ok], 3),
            color="#9ecae1",
        )
    ]
    p50s = [(b.bucket, b.p50) for b in summary.ttft_by_input_tokens if b.p50 is not None]
    if p50s:
        mids = [float(np.median(cols.input_tokens[ok & _in_bucket(cols.input_tokens, bucket)])) for bucket, _ in p50s]
        by_len.append(
            Trace(
                name="P50 of its length bucket",
                kind="lines+markers",
                x=_r(np.array(mids), 1),
                y=[round(p50, 3) for _, p50 in p50s],
                color="#d62728",
            )
        )
    charts.append(
        Chart(
            id="ttft-by-input",
            title="TTFT against input length (draft 5.1.4.3)",
            x_title="input tokens",
            panels=["TTFT (ms)"],
            traces=by_len,
        )
    )
    return charts


def latency_chart(cols: RecordColumns, summary: Summary) -> Chart | None:
    """The latency of the requests answered in one body (embeddings, rerank): their CDF, with P50 and P99 marked;
    None when no ok request carried inputs."""
    if summary.endpoint is None:
        return None
    ms = np.where(~np.isnan(cols.one_body("inputs")), e2e(cols), np.nan) * 1000
    ms = ms[np.isfinite(ms)]
    if not len(ms):
        return None
    s = summary.endpoint.latency_ms
    return Chart(
        id="latency-cdf",
        title="Latency (one body per request): cumulative distribution",
        x_title="latency (ms)",
        panels=["share of requests"],
        traces=[cdf_trace("requests", ms)],
        marks=[Mark(label=f"P{p}", x=round(v, 3)) for p, v in (("50", s.p50), ("99", s.p99)) if v is not None],
        note="Submission to the reply's last byte; TTFT and ITL do not apply to a reply that is one body.",
    )


def _in_bucket(tokens: np.ndarray, label: str) -> np.ndarray:
    """Requests in a Table 2 bucket, from its label ("0-128", "4096+")."""
    lo_text, _, hi_text = label.replace("+", "-").partition("-")
    lo = int(lo_text)
    hi = int(hi_text) if hi_text else None
    return (tokens >= lo) & (tokens < hi) if hi is not None else tokens >= lo


def itl_chart(cols: RecordColumns, summary: Summary) -> Chart | None:
    """The ITL distribution (binned; zero gaps of chunked delivery in their own bin) with the modality verdict; under
    option A it is the Time Between Chunks (the IETF draft, 4.6.3)."""
    samples = itl(cols, summary.itl_option).values * 1000
    if not len(samples):
        return None
    verdict = modality(samples)
    s = summary.itl_ms
    marks = [Mark(label=f"P{p}", x=round(v, 3)) for p, v in (("50", s.p50), ("99", s.p99)) if v is not None]
    return Chart(
        id="itl-distribution",
        title=f"{itl_name(summary.itl_option)} distribution ({len(samples):,} gaps)",
        x_title=f"{itl_name(summary.itl_option)} (ms)",
        panels=["gaps"],
        traces=[histogram_trace("gaps", samples)],
        marks=marks,
        y_log=True,
        note=f"Modality (draft 5.4.4.3): {verdict.describe()}",
    )


def timeline_chart(cols: RecordColumns) -> Chart | None:
    """One bar per request from its scheduled send to its last token: waiting (to the first token) light, streaming
    dark, a reply that is one body (embeddings, rerank) from its send to its last byte, failures as red marks at their
    scheduled time.  Requests are stacked in the order they were scheduled."""
    n = cols.n
    if not n:
        return None
    order = np.argsort(cols.scheduled_at, kind="stable")
    row = np.empty(n)
    row[order] = np.arange(n)
    first, last = cols.tokens.first(), cols.tokens.last()
    ok = cols.ok & np.isfinite(first)
    traces = [
        _segments("waiting for the first token", cols.scheduled_at[ok], first[ok], row[ok], "#c6dbef"),
    ]
    body = cols.ok & ~np.isfinite(first)  # no token: a reply that is one body, where it has a completion time
    if body.any():
        end = cols.one_body("completed_at")
        body &= np.isfinite(end)
        if body.any():
            name = "waiting for the reply (one body)"
            traces.append(_segments(name, cols.scheduled_at[body], end[body], row[body], "#6baed6"))
    classes = sorted(set(cols.request_class[ok].tolist()))
    for i, c in enumerate(classes):
        pick = ok & (cols.request_class == c)
        label = "streaming" if len(classes) == 1 else f"streaming, class {c or '(none)'}"
        color = "#1f77b4" if len(classes) == 1 else ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b")[i % 4]
        traces.append(_segments(label, first[pick], last[pick], row[pick], color))
    failed = ~cols.ok
    if failed.any():
        for status in sorted(set(cols.status[failed].tolist())):
            pick = failed & (cols.status == status)
            traces.append(
                Trace(
                    name=f"failed: {status}",
                    kind="markers",
                    x=_r(cols.scheduled_at[pick]),
                    y=row[pick].tolist(),
                    color=STATUS_COLORS.get(status, "#d62728"),
                )
            )
    return Chart(
        id="request-timeline",
        title="Request timeline: scheduled send to last token",
        x_title="run time (s)",
        panels=["request (in scheduled order)"],
        traces=traces,
        height=420,
        note="A light bar is time spent before the first token (queueing and prefill); gaps in the dark "
        "part are not drawn: the stall chart shows them.",
    )


def _segments(name: str, start: np.ndarray, end: np.ndarray, row: np.ndarray, color: str) -> Trace:
    """Horizontal segments as one line trace: x = start, end, gap; y = row, row, gap."""
    k = len(start)
    x = np.full(3 * k, np.nan)
    y = np.full(3 * k, np.nan)
    x[0::3], x[1::3] = start, end
    y[0::3], y[1::3] = row, row
    return Trace(name=name, kind="line", x=_r(x), y=_r(y, 0), color=color, width=1.5)


def stall_chart(cols: RecordColumns, summary: Summary) -> Chart | None:
    """Tokens received against time since submission for the requests with the longest pauses (Metron, Fig. 1)."""
    gaps = itl(cols, summary.itl_option)
    pauses = np.where(cols.ok, max_pause(gaps), np.nan)  # failed requests keep no gaps
    pick = np.flatnonzero(np.isfinite(pauses))
    if not len(pick):
        return None
    worst = pick[np.argsort(-pauses[pick], kind="stable")[:STALL_REQUESTS]]
    times = token_times(cols, summary.itl_option)
    traces = []
    for i in worst:
        t = times.values[times.offsets[i] : times.offsets[i + 1]] - cols.submitted_at[i]
        traces.append(
            Trace(
                name=f"request {int(cols.request_id[i])} (max pause {pauses[i] * 1000:.0f} ms)",
                kind="step",
                x=_r(np.concatenate([[0.0], t])),
                y=list(range(len(t) + 1)),
            )
        )
    return Chart(
        id="stalls",
        title=f"Tokens received over time: the {len(worst)} requests with the longest pause",
        x_title="time since submission (s)",
        panels=["tokens received"],
        traces=traces,
        note="A flat stretch is a stall (Metron's picture of what users see); the first rise is TTFT.",
    )


def fluidity_chart(cols: RecordColumns, summary: Summary) -> Chart | None:
    """Mean fluidity-index and the P99 deadline-miss rate against the target TBT (Metron, Fig. 5d), with the three
    token rates as the TBT each one implies (1000 / rate)."""
    keep = cols.ok & (cols.tokens.lengths > 1)
    if not keep.any():
        return None
    idx = np.flatnonzero(keep)
    if len(idx) > FLUIDITY_SAMPLE:
        keep = np.zeros(cols.n, dtype=bool)
        keep[np.random.default_rng(0).choice(idx, FLUIDITY_SAMPLE, replace=False)] = True
    layout = Layout(decode_gaps(request_gaps(token_times(cols, summary.itl_option), cols.submitted_at, keep)))
    mean = [float(np.mean(layout.counts(ms / 1000, ms / 1000).fluidity())) for ms in MISS_CURVE_MS]
    traces = [Trace(name="mean fluidity-index", kind="lines+markers", x=list(MISS_CURVE_MS), y=_r(np.array(mean)))]
    f = summary.fluidity
    if f is not None:
        curve = f.miss_rate_curve
        traces.append(
            Trace(
                name="P99 deadline-miss rate",
                kind="lines+markers",
                x=list(curve.tbt_ms),
                y=list(curve.p99_miss_rate),
                color="#d62728",
            )
        )
        rates = (
            ("fluid token rate", f.fluid_tok_s, "#2ca02c"),
            ("1 / mean TPOT", f.tpot_tok_s, "#9467bd"),
            ("1 / P99 ITL", f.p99_itl_tok_s, "#7f7f7f"),
        )
        for label, rate, color in rates:  # a vertical line each, named in the legend (labels on the plot collide)
            if rate:
                at = round(1000 / rate, 3)
                name = f"{label}: {rate:.0f} tok/s = TBT {at:.1f} ms"
                traces.append(
                    Trace(name=name, kind="line", x=[at, at], y=[0.0, 1.0], color=color, dash=True, width=1.5)
                )
    return Chart(
        id="fluidity",
        title="Fluidity against the target time between tokens (Metron)",
        x_title="target TBT, D_d (ms)",
        panels=["fluidity-index / miss rate (0-1)"],
        traces=traces,
        note="Decode deadlines only; the dashed lines place each token rate at the TBT it implies.",
    )


def over_time_chart(cols: RecordColumns, run_dir: Path) -> Chart | None:
    """Output throughput, in-flight requests and the server's gauges on one shared time axis (1 s bins)."""
    last = cols.tokens.last()
    ok = cols.ok & np.isfinite(last)
    if not ok.any():
        return None
    begin, end = float(np.floor(cols.submitted_at[ok].min())), float(np.nanmax(last[ok]))
    edges = np.arange(begin, end + 1.0, 1.0)  # from the first measured send: the warm-up is not drawn
    centres = edges[:-1] + 0.5
    tok = np.histogram(cols.tokens.keep_requests(ok).values, edges)[0].astype(float)
    done = np.histogram(last[ok], edges)[0].astype(float)
    started = np.searchsorted(np.sort(cols.submitted_at[ok]), centres, side="right")
    finished = np.searchsorted(np.sort(last[ok]), centres, side="right")
    inflight = (started - finished).astype(float).tolist()
    panels = ["output (tok/s)", "requests in flight (client)"]
    traces = [
        Trace(name="output tokens/s", kind="line", x=_r(centres, 2), y=tok.tolist(), row=1),
        Trace(name="completions/s", kind="line", x=_r(centres, 2), y=done.tolist(), row=1, dash=True),
        Trace(name="in flight", kind="step", x=_r(centres, 2), y=inflight, row=2, color="#2ca02c"),
    ]
    gauges = server_series(run_dir)
    queue = [(name, t, v) for name, t, v in gauges if name in ("waiting", "running", "preemptions")]
    if queue:
        panels.append("server (requests)")
        for name, t, v in queue:
            traces.append(Trace(name=f"server {name}", kind="step", x=_r(t, 2), y=_r(v, 2), row=len(panels)))
    kv = [(name, t, v) for name, t, v in gauges if name == "kv_usage"]
    if kv:
        panels.append("KV cache usage (%)")
        for _, t, v in kv:
            traces.append(Trace(name="KV cache usage", kind="step", x=_r(t, 2), y=_r(v * 100, 2), row=len(panels)))
    return Chart(
        id="over-time",
        title="The run over time",
        x_title="run time (s)",
        panels=panels,
        traces=traces,
        note="Server gauges as scraped from its /metrics; preemptions as the counter's increase since the "
        "first scrape.",
    )


def server_series(run_dir: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(role, times, values) of the server gauges the run scraped; counters start at zero."""
    path = run_dir / SERVER_METRICS
    if not path.is_file():
        return []
    import pyarrow.parquet as pq

    from infermeter.client.server_metrics import ROLES

    table = pq.read_table(path)
    names = np.asarray(table.column("name").to_pylist(), dtype=object)
    t_all = table.column("t").to_numpy()
    v_all = table.column("value").to_numpy()
    out = []
    for role in ("waiting", "running", "kv_usage", "preemptions"):
        for metric in ROLES[role]:
            mask = names == metric
            if mask.any():
                t, v = t_all[mask], v_all[mask]
                times = np.unique(t)
                summed = np.bincount(np.searchsorted(times, t), weights=v, minlength=len(times))
                if role == "preemptions":
                    summed = summed - summed[0]
                out.append((role, times, summed))
                break
    return out


def energy_chart(run_dir: Path) -> Chart | None:
    """Power over time (W) from the host's energy counters or the GPUs' power readings, when the run measured them."""
    path = run_dir / TELEMETRY
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    cols = {k: table.column(k).to_numpy(zero_copy_only=False).astype(float) for k in table.column_names}
    t = cols.get("t")
    if t is None or len(t) < 2:
        return None
    traces = []
    if "cpu_energy_j" in cols and np.isfinite(cols["cpu_energy_j"]).sum() > 1:
        watts = np.diff(cols["cpu_energy_j"]) / np.diff(t)
        traces.append(Trace(name="CPU package power (RAPL)", kind="step", x=_r(t[1:], 2), y=_r(watts, 2)))
    if "gpu_power_w" in cols and np.isfinite(cols["gpu_power_w"]).any():
        traces.append(Trace(name="GPU power (NVML)", kind="line", x=_r(t, 2), y=_r(cols["gpu_power_w"], 2)))
    if not traces:
        return None
    return Chart(id="power", title="Power over the run", x_title="run time (s)", panels=["power (W)"], traces=traces)


def run_charts(cols: RecordColumns, summary: Summary, run_dir: Path, endpoints_only: bool = False) -> list[Chart]:
    """Every chart that applies to the run, in the order the report shows them; a simulated run that kept only each
    stream's first and last token (`endpoints_only`) has no gaps to draw, so its ITL, stall and fluidity charts are
    left out."""
    charts = ttft_charts(cols, summary)
    if (latency := latency_chart(cols, summary)) is not None:
        charts.append(latency)
    gaps = [] if endpoints_only else [itl_chart(cols, summary), stall_chart(cols, summary)]
    fluid = [] if endpoints_only else [fluidity_chart(cols, summary)]
    for chart in (*gaps, timeline_chart(cols), *fluid, over_time_chart(cols, run_dir), energy_chart(run_dir)):
        if chart is not None:
            charts.append(chart)
    return charts
