"""summary.json as types: `Summary` and its blocks, versioned (`infermeter.summary/2`).

`model_dump(mode="json")` gives summary.json's keys exactly: the blocks that only some runs have (server metrics,
energy, the simulator's) and the keys some blocks only sometimes have are left out when they were never given,
rather than written as null, so a summary read back and written again is the same document.  A summary.json
without a version (written before versions) reads as this one.  The module imports only leaves of the package
(errors, records, run_info), so the modules that fill a block (telemetry, the metrics scraper, the simulator) can
build it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from infermeter.errors import UserError
from infermeter.run_info import ClientHealth, validation_problem

SUMMARY_SCHEMA: Final = "infermeter.summary/2"
READS = (None, SUMMARY_SCHEMA)  # None: summary.json before versions, the same keys


class Block(BaseModel):
    """A summary block: stray keys are refused; the fields in OPTIONAL are left out of the JSON unless given."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _leave_out_ungiven(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self.OPTIONAL - self.model_fields_set:
            data.pop(name, None)
        return data


class Ci95(Block):
    """Distribution-free 95% confidence interval [low, high] of each percentile; a side is null (too few samples)."""

    p50: list[float | None]
    p90: list[float | None]
    p95: list[float | None]
    p99: list[float | None]
    p99_9: list[float | None] = Field(alias="p99.9")


class Stats(Block):
    """A distribution's summary (metrics.statistics.stats): count, moments, extremes, percentiles, ci95."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p99_9: float | None = Field(alias="p99.9")
    ci95: Ci95
    warnings: list[str]

    def percentile(self, p: float) -> float | None:
        """The value at percentile p (one of metrics.statistics.PERCENTILES): 99.9 -> p99.9."""
        return self.value(f"p{p:g}")

    def value(self, stat: str) -> float | None:
        """A statistic by its summary.json name: "p50" ... "p99.9", "mean", "std", "min", "max"."""
        if stat not in STAT_NAMES:
            raise KeyError(stat)
        value: float | None = getattr(self, stat.replace(".", "_"))
        return value


STAT_NAMES = frozenset({"mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p99.9"})


class ErrorCount(Block):
    """A failed request's full error text and how many requests failed with it."""

    error: str
    count: int


class Requests(Block):
    """Requests by outcome: totals, status counts, failures by reason."""

    total: int
    ok: int
    failed: int
    success_rate: float | None
    by_status: dict[str, int]
    failures_by_reason: dict[str, int]  # by the reason part of each error, most common first
    errors: list[ErrorCount]  # the most common full messages


class Throughput(Block):
    """Successful requests' tokens and requests per second of the measurement window."""

    output_tok_s: float
    input_tok_s: float
    req_s: float


class Goodput(Block):
    """Requests meeting every SLO bound at once (seeds/002); all null without an SLO."""

    slo: dict[str, float]  # metric -> bound in ms
    req_s: float | None
    fraction: float | None
    met: int | None


class MissRateCurve(Block):
    """P99 over requests of the decode deadline-miss rate against target TBT (seeds/001 Figure 5d)."""

    tbt_ms: list[int]
    p99_miss_rate: list[float | None]
    requests: int
    sampled: bool


class Fluidity(Block):
    """Metron's user-experience metrics (seeds/001) under the run's deadlines."""

    ttft_deadline_ms: float | str | None  # a fixed D_p, a prefill curve's description, or none
    tbt_deadline_ms: float
    target: float
    index: Stats
    service_miss_rate: float | None
    share_meeting_target: float | None
    fluid_tok_s: float | None
    tpot_tok_s: float | None
    p99_itl_tok_s: float | None
    p99_min_tbt_deadline_ms: float | None
    miss_rate_curve: MissRateCurve


class TtftBucket(Block):
    """TTFT percentiles of the requests in one input-length bucket (the draft's Table 2)."""

    bucket: str
    n: int
    p50: float | None
    p95: float | None
    p99: float | None


class Chunking(Block):
    """Delivery pattern (draft B.2.1): tokens per content chunk."""

    OPTIONAL = frozenset({"tokens_per_chunk_max"})
    chunks: int
    tokens_per_chunk_mean: float | None
    tokens_per_chunk_max: int | None = None  # left out when there were no chunks
    single_token_share: float | None
    server_times: bool


class ClassLatency(Block):
    """One request class's counts and latency percentiles (the draft's Table 8)."""

    count: int
    ok: int
    ttft_p50: float | None
    ttft_p99: float | None
    tpot_p50: float | None
    tpot_p99: float | None


class Fairness(Block):
    """Draft 5.6.4: Jain's index over normalized latency, starvation per class, per-class latency."""

    jain_index: float | None
    starvation: dict[str, float]
    wait_metric: str
    classes: dict[str, ClassLatency]


class GroupLatency(Block):
    """The requests of one group (a turn index, a model): how many, how many ok, and their latency percentiles, ms."""

    count: int
    ok: int
    ttft_p50: float | None
    ttft_p90: float | None
    ttft_p99: float | None
    itl_p50: float | None  # null where ITL is not known per request (a simulation's known ITL)
    itl_p99: float | None


class TurnLatency(GroupLatency):
    """The turns of one index of a multi-turn run (the last row may gather every later index: "7+")."""

    turn: str
    history_share: float | None  # mean over these turns of the share of their prompt that was history


class ByTurn(Block):
    """A multi-turn run's latency by turn index, and how much of each prompt was the session's history."""

    sessions: int
    turns: int
    history_share: float | None  # mean over every turn (turn 0 has none)
    history_tokens: str  # how a turn's history tokens were counted
    rows: list[TurnLatency]


class SlotWait(Block):
    """Requests that waited for a free slot under --max-concurrency, and how long (seconds)."""

    recorded: int  # requests with a slot-wait figure
    waited: int  # of them, those that waited at all
    p50_s: float | None  # over those that waited
    p99_s: float | None
    max_s: float | None


class Gauge(Block):
    """A server gauge over the run (summed over label sets): the metric read, and its statistics."""

    metric: str
    mean: float
    p50: float
    p99: float
    max: float


class CounterDelta(Block):
    """A server counter's increase over the run."""

    metric: str
    delta: float


class HistogramDelta(Block):
    """A server histogram over the measurement window (bucket counts' increase between the first and the last
    scrape), in ms; quantiles interpolated inside buckets, so only as fine as the server's buckets.  From a
    cumulative time counter over a request counter (Triton) it has the mean alone: the quantiles are left out."""

    OPTIONAL = frozenset({"p50_ms", "p95_ms", "p99_ms"})
    metric: str
    count: int
    mean_ms: float
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None


class ServerMetrics(Block):
    """The server's own /metrics over the run; a role is left out when the server does not expose it (every field
    but the scrape counts is OPTIONAL)."""

    scrapes: int
    failed_scrapes: int
    dialect: Literal["vllm", "sglang", "tgi", "triton", "llamacpp", "unknown"] | None = None  # whose names were read
    waiting: Gauge | None = None
    running: Gauge | None = None
    kv_usage: Gauge | None = None
    preemptions: CounterDelta | None = None
    preempted_requests: CounterDelta | None = None  # requests preempted at least once (the emulator's own counters)
    preempted_finished: CounterDelta | None = None  # of those, finished: recovered (draft 5.8.4)
    preempted_tokens: CounterDelta | None = None  # KV tokens discarded, to be computed again
    prefix_queries: CounterDelta | None = None
    prefix_hits: CounterDelta | None = None
    prefix_cache_hit_rate: float | None = None
    batch_utilization: float | None = None  # mean running requests / the most a step holds, when the server says
    queue_time: HistogramDelta | None = None  # the TTFT components the draft names (5.1.4.2): waiting to be scheduled
    prefill_time: HistogramDelta | None = None  # and scheduled until the first token
    decode_time: HistogramDelta | None = None  # first token to last (vLLM per request; TGI per decode step)
    prompt_tokens: CounterDelta | None = None  # tokens the server counted over the run
    generation_tokens: CounterDelta | None = None
    prefill_seconds: CounterDelta | None = None  # busy seconds in prompt processing (llama.cpp)
    decode_seconds: CounterDelta | None = None  # and in generation
    per_batch: list[str] | None = None  # the timings above whose observations are batch steps, not requests (TGI)


ServerMetrics.OPTIONAL = frozenset(ServerMetrics.model_fields) - {"scrapes", "failed_scrapes"}


class GpuTelemetry(Block):
    """One of the server's GPUs as a DCGM exporter saw it over the run (a figure it does not export is null)."""

    gpu: str  # the exporter's gpu label (the index on its host)
    uuid: str | None
    model: str | None
    energy_j: float | None
    power_w_mean: float | None
    util_pct_mean: float | None
    mem_used_mib_max: float | None
    mem_free_mib_min: float | None
    sm_clock_mhz_mean: float | None


class ServerGpus(Block):
    """The server's GPUs' energy from a DCGM exporter (--dcgm-url): the total-energy counter's increase over the
    measurement window (no sampling error) or, where it did not move, its power readings integrated; per output
    token; absent, with a note, where neither moved inside the window."""

    source: str  # "DCGM exporter <url, secrets masked>: total energy counter" or "...: power integrated"
    window_s: float  # the measurement window, as the tokens'
    scrapes: int
    energy_j: float | None
    power_w: float | None
    joules_per_output_token: float | None
    gpus: list[GpuTelemetry]
    notes: list[str] = []  # why the energy is absent


class Energy(Block):
    """Energy over the window (seeds/003) and cost (seeds/002); a source's keys are left out when the host
    lacks it, the cost's when no price was given (`notes` says which and why).  `server_gpus`: the remote
    server's GPUs, read from its DCGM exporter."""

    OPTIONAL = frozenset(
        {
            "cpu_energy_j",
            "cpu_power_w",
            "gpu_energy_j",
            "gpu_power_w",
            "gpus",
            "gpu_seconds",
            "output_tok_per_gpu_s",
            "gpu_price_per_hour",
            "cost",
            "cost_per_million_output_tokens",
            "cpu_util_pct_mean",
            "server_gpus",
        }
    )
    window_s: float
    sources: dict[str, str]
    cpu_energy_j: float | None = None
    cpu_power_w: float | None = None
    gpu_energy_j: float | None = None
    gpu_power_w: float | None = None
    energy_j: float | None
    joules_per_output_token: float | None
    gpus: int | None = None
    gpu_seconds: float | None = None
    output_tok_per_gpu_s: float | None = None  # output tokens per GPU-second: the throughput over --gpus
    gpu_price_per_hour: float | None = None
    cost: float | None = None
    cost_per_million_output_tokens: float | None = None
    notes: list[str]
    cpu_util_pct_mean: float | None = None
    server_gpus: ServerGpus | None = None  # --dcgm-url


class Sim(Block):
    """The simulator's own metrics (seeds/004 section 9)."""

    OPTIONAL = frozenset({"decode_step_time_ms", "seconds_per_generated_token"})  # added after summary v2's keys

    scheduler: str
    engines: int
    latency_model: str
    kv_capacity_tokens: int
    gpu_utilization: float
    avg_batch_size: float
    steps: int
    queueing_delay_ms: Stats
    token_sla_violation: float
    request_sla_violation: float
    d_sla_token_ms: float
    d_sla_request_s: float
    preemptions: int
    preempted_requests: int
    rejected: int
    peak_kv_usage: float
    makespan_s: float
    # multi-bin dynamic batching's section 9.4: absent from summaries written before they were added
    decode_step_time_ms: float | None = None  # mean time of a decode iteration
    seconds_per_generated_token: float | None = None  # engine busy time per output token


class ServerTiming(Block):
    """What servers reported about their own timing (llama.cpp's timings, vLLM's cached tokens, the emulator's);
    a Stats block is None when no request reported its quantity."""

    reported: int  # ok requests carrying at least one of the server's figures
    prefill_ms: Stats | None  # the server's prompt processing time (the uncached part of the prompt)
    decode_ms_per_output_token: Stats | None  # its generation time / output tokens, per request
    cached_tokens_reported: int  # ok requests whose server gave a cached-token count
    cached_tokens: int | None  # prompt tokens served from the prefix cache, over ok requests
    input_tokens: int  # prompt tokens of ok requests
    prefix_cache_hit_share: float | None  # cached_tokens / input_tokens


class Endpoint(Block):
    """An API that answers each request with one body, not a token stream (embeddings, rerank): the ok requests that
    carried a list of inputs (embedding inputs, or documents to rerank), their latency and how many inputs and input
    tokens the server took per second of the measurement window.  TTFT, ITL and TPOT do not apply to them."""

    inputs: Stats  # inputs per request
    inputs_s: float  # inputs per second of the window
    input_tok_s: float  # these requests' input tokens per second of the window
    latency_ms: Stats  # submission to the reply's last byte


class Summary(Block):
    """summary.json: every metric over a run's records, then the blocks only some runs have."""

    OPTIONAL = frozenset(
        {
            "server_metrics",
            "energy",
            "itl_source",
            "fluidity_note",
            "sim",
            "server_timing",
            "client_health",
            "by_turn",
            "by_model",
            "slot_wait",
            "endpoint",
        }
    )
    schema_version: Literal["infermeter.summary/2"] = SUMMARY_SCHEMA
    requests: Requests
    duration_s: float
    ttft_ms: Stats
    itl_ms: Stats
    tpot_ms: Stats
    e2e_ms: Stats
    normalized_latency_ms: Stats
    throughput: Throughput
    goodput: Goodput
    fluidity: Fluidity | None  # null without deadlines
    itl_option: Literal["A", "B", "C"]
    jitter_ms: Stats
    max_pause_ms: Stats
    ttft_by_input_tokens: list[TtftBucket]
    chunking: Chunking
    fairness: Fairness
    output_tokens: Stats
    input_tokens: Stats
    server_metrics: ServerMetrics | None = None  # live runs that could scrape /metrics
    energy: Energy | None = None  # live runs with host telemetry
    itl_source: str | None = None  # where ITL came from when the records cannot give it (simulated endpoints)
    fluidity_note: str | None = None  # why fluidity is missing although deadlines were given
    sim: Sim | None = None  # simulated runs
    server_timing: ServerTiming | None = None  # only when some ok request carries a server-reported figure
    client_health: ClientHealth | None = None  # live and emulated runs sent by this process (as run.json has it)
    by_turn: ByTurn | None = None  # multi-turn runs (records with a turn)
    by_model: dict[str, GroupLatency] | None = None  # runs that named models per request (--model-mix)
    slot_wait: SlotWait | None = None  # runs whose sends waited for slots (--max-concurrency)
    endpoint: Endpoint | None = None  # runs of an API whose ok requests carried inputs (embeddings, rerank)

    def latency(self, metric: str) -> Stats:
        """A latency distribution by its SLO name: "ttft", "tpot", "itl" or "e2e"."""
        return {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "itl": self.itl_ms, "e2e": self.e2e_ms}[metric]


def parse_summary(doc: object, where: str) -> Summary:
    """A summary.json document of any version this infermeter reads; a one-line UserError naming the file (and
    the key at fault) otherwise."""
    if not isinstance(doc, dict):
        raise UserError(f"{where} is not a valid summary: it is not a JSON object")
    version = doc.get("schema_version")
    if version not in READS:
        raise UserError(
            f"{where} has schema_version {version!r}, which this infermeter cannot read (it reads summaries without "
            f"a version and {SUMMARY_SCHEMA}): read it with the infermeter that wrote it"
        )
    try:
        return Summary.model_validate(doc)
    except ValidationError as exc:
        raise UserError(f"{where} is not a valid summary: {validation_problem(exc, SUMMARY_SCHEMA)}") from None


def read_summary(run_dir: Path) -> Summary | None:
    """A run directory's summary.json as written (any version this infermeter reads); None when the run left none
    (it never finished); a damaged one is a one-line UserError naming the file."""
    from infermeter.records import SUMMARY  # here: the records package loads pyarrow, which a summary needs not

    path = run_dir / SUMMARY
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"{path} cannot be read ({exc.strerror})") from None
    try:
        return parse_summary(orjson.loads(data), str(path))
    except orjson.JSONDecodeError as exc:
        raise UserError(f"{path} is not a valid summary: {exc}") from None
