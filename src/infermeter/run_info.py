"""run.json as types: `RunInfo` and its blocks, versioned (`infermeter.run/2`), every block closed to stray keys.

A leaf of the package (it imports nothing of infermeter but the version and errors), so records and every writer
can use it.  Two blocks hold JSON snapshots of models that live further down the flow, which this module may
not import: the workload specification (`WorkloadDeclaration.spec`, a workload.spec.WorkloadSpec) and the
simulated engine's configuration (`Engine.config`, an engine.config.EngineConfig); `RunInfo.config`, the
resolved scenario configuration, is validated by infermeter.config.  Reading upgrades every earlier version.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import platform
import sys
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any, Final, Literal

from pydantic import Field, ValidationError

from infermeter import __version__
from infermeter.errors import UserError
from infermeter.run_block import Block
from infermeter.workload_declaration import Arrivals, WorkloadDeclaration

RUN_SCHEMA: Final = "infermeter.run/2"
RUN_SCHEMA_V1 = "infermeter.run/1"


def wall_clock_iso(t: float | None = None) -> str:
    """UTC wall-clock time as ISO 8601 with milliseconds (draft 4.7.4)."""
    moment = dt.datetime.fromtimestamp(time.time() if t is None else t, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def wall_time(iso: str) -> dt.datetime | None:
    """An ISO 8601 wall-clock time (run.json's started_at, suite.json's finished_at) as an aware UTC datetime, UTC
    when it names no zone; None when it is no such time."""
    try:
        moment = dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def software_versions() -> dict[str, str]:
    """Versions of infermeter, Python, the platform and the libraries the figures depend on."""
    out = {"infermeter": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("numpy", "pyarrow", "scipy", "aiohttp"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


class SoftwareVersion(Block):
    """One piece of the SUT's software and its version (draft Appendix C.1 "Software"), and where the version came
    from: the user's --software, the server's own answer (GET /version, /info, ...), or the embedded emulator."""

    name: str
    version: str
    source: str


class Sut(Block):
    """The system under test as the report declares it (draft Appendix C.1 "System Identification")."""

    model: str | None = None
    url: str | None = None  # credentials masked
    hardware: str | None = None
    software: str | None = None  # the versions below in one line, as the reports print it
    software_versions: list[SoftwareVersion] = Field(default_factory=list)
    boundary: str | None = None
    tokenizer: str | None = None  # the tokenizer the server declares (the emulator's own)
    prefix_caching: str | None = None
    guardrails: str | None = None
    clock_sync: str | None = None  # how the client's and the server's clocks agree (draft 4.7.2)
    faults: list[dict[str, Any]] | None = None  # the emulator's injected faults (emulator.faults models, as JSON)


class Load(Block):
    """The load the run applied: open loop (arrivals), closed loop (concurrency), bounded by count or time."""

    description: str | None = None
    requests: int | None = None
    duration_s: float | None = None
    concurrency: int | None = None
    barrier: bool = False
    arrivals: Arrivals | None = None
    ramp_up_s: float | None = None  # the rate or users rose over these seconds; their requests are not summarized
    ramped: int | None = None  # requests sent during the ramp-up (left out of the summary)
    max_concurrency: int | None = None  # an open loop's cap on requests in flight (sends waited for a slot)
    model_mix: dict[str, float] | None = None  # model or adapter -> share of requests
    headers: list[str] = Field(default_factory=list)  # names of the extra headers sent (values never written)
    request_id_prefix: str | None = None


class SpecialTokens(Block):
    """The special-token handling the IETF draft (4.4.3) asks a report to specify, each part computed from the
    tokenizer and the run's options: BOS/EOS (added? counted?), the chat template's own tokens, the system prompt
    (counted in the input or apart), tool/function-call formatting tokens."""

    bos_eos: str
    chat_template: str
    system_prompt: str
    tool_calls: str

    def line(self) -> str:
        """The declaration in one line, as run.json's tokenizer.special_tokens and the reports' notes give it."""
        return (
            f"BOS/EOS: {self.bos_eos}. Chat template: {self.chat_template}. System prompt: {self.system_prompt}. "
            f"Tool calls: {self.tool_calls}"
        )


class Tokenizer(Block):
    """How tokens were counted (draft 4.4.1-4.4.3); every field is optional, as runs differ in what applies."""

    name: str | None = None
    counting_method: str | None = None  # "A" native, "B" reference
    counting_method_text: str | None = None
    vocab_size: int | None = None
    source: str | None = None
    per_event: str | None = None
    special_tokens: str | None = None  # the parts of `special` in one line (older runs: a fixed sentence)
    special: SpecialTokens | None = None
    prompts: str | None = None
    template_overhead_tokens: int | None = None
    method: str | None = None  # the IETF draft's option, named
    chosen_because: str | None = None
    server_declares: str | None = None  # the tokenizer the server names in /v1/models, when it does
    metrics_count: str | None = None  # which record counts the metrics used
    record_counts: dict[str, str] | None = None  # what each count field of the records holds
    chat_template: str | None = None


class Warmup(Block):
    """The draft's warm-up (section 4.5): what was sent, and whether the server settled before measuring."""

    done: bool = False
    cold_start: bool | None = None  # --warmup off: a cold start was measured (draft 4.5.3)
    note: str | None = None
    requests: int | None = None
    failed: int | None = None
    output_tokens: int | None = None
    queue_drained: bool | None = None  # in_flight_after == 0 (earlier runs: set whenever the warm-up was not stopped)
    in_flight_after: int | None = None  # warm-up requests not finished on their own when its load returned (cut off)
    probe_before_s: float | None = None
    probes_after_s: list[float] | None = None
    stable: bool | None = None
    seconds: float | None = None
    workload: str | None = None  # what the warm-up sent: the run's workload, or its own (--warmup-workload)
    shared_prefixes: int | None = None  # distinct shared prefixes of the run it sent (cached for the measurement)
    max_input_tokens: int | None = None  # its longest prompt


class Timeouts(Block):
    """The client's timeouts in seconds: connecting, the first token, the whole request."""

    connect: float
    first_token: float
    total: float


class Client(Block):
    """The transport and request options (the API key itself never appears, only where it came from)."""

    backend: str | None = None
    transport: str | None = None
    endpoint: str | None = None
    api: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeouts_s: Timeouts | None = None
    ignore_eos: bool | None = None
    temperature: float | None = None
    extra_body: dict[str, Any] | None = None  # the user's own request-body fields, as given
    open_files_limit: int | None = None
    scheduling: str | None = None  # the sending thread's class when raised (--realtime), e.g. "SCHED_FIFO 1"
    tls: str | None = None  # --ca-bundle, --insecure, --client-cert as declared (client.tls); None: system CAs
    insecure: bool | None = None  # True: the server's certificate was not verified (--insecure)
    generates: bool | None = None  # the API streams generated tokens (TTFT, ITL apply); False: embeddings, rerank
    batch_inputs: int | None = None  # embeddings' inputs or rerank's documents per request (--batch-inputs)
    rerank_shape: str | None = None  # --api rerank: whose request shape was sent


class ServerMetricsSource(Block):
    """Where the server's Prometheus /metrics were scraped, or why they were not."""

    url: str
    available: bool
    interval_s: float | None = None
    reason: str | None = None
    dialect: str | None = None  # whose metric names the server writes: vllm, sglang, tgi, triton, llamacpp, unknown


class Telemetry(Block):
    """Telemetry beside the run: the sampling interval and each source (psutil, RAPL, NVML on this host; "dcgm": the
    server's GPUs through a DCGM exporter) with its method, or why it is unavailable."""

    interval_s: float
    sources: dict[str, str] = Field(default_factory=dict)


class Engine(Block):
    """A simulated engine: its latency model and KV capacity, and its EngineConfig as JSON (`config`)."""

    latency_model: str
    kv_capacity: int
    config: dict[str, Any]


class ClockAnchor(Block):
    """The run clock's 0 on the machine's clocks, read together to the nanosecond, so that anything stamped outside
    this process (a server's log, a packet capture, another tool's trace) can be placed on the run clock."""

    monotonic_ns: int  # CLOCK_MONOTONIC (time.perf_counter_ns on Linux) at run-clock 0
    wall_ns: int  # the wall clock (time.time_ns, UTC) at run-clock 0
    uncertainty_ns: int  # half the interval between the two wall-clock reads the pair was taken between


CLIENT_BOUND = "CLIENT-BOUND: the load generator could not keep up, so these figures are upper bounds"
TAKEN_MS = 10.0  # CPU time others took from the client worth naming in the warning (one steal tick)


class ClientHealth(Block):
    """Whether the load generator kept up (draft 4.2.5): the CPU its event loop's thread used, the lag of a 1 ms
    ticker on that loop, and how late its sends started (open loop); `bound` when a threshold was crossed
    (`load.client_health`), each crossing named in `reasons`."""

    bound: bool
    reasons: list[str] = Field(default_factory=list)
    cpu_fraction: float  # the loop thread's CPU time over the load's wall time (1.0: one core saturated)
    tick_lag_ms_p50: float | None = None
    tick_lag_ms_p99: float | None = None
    tick_lag_ms_max: float | None = None
    send_lag_ms_p50: float | None = None  # open loop: a send's start less its scheduled time
    send_lag_ms_p99: float | None = None
    late_sends: float | None = None  # open loop: the share of sends started more than 5 ms late
    behind_at_end_ms: float | None = None  # open loop: the median send lag of the last tenth of the sends
    # who else had the client's CPU (Linux): the loop thread runnable but waiting behind other tasks, and the time
    # the hypervisor took from the CPUs the client may run on (a VM's steal, in 10 ms ticks; 0 on bare metal)
    cpu_wait_ms: float | None = None
    steal_ms: float | None = None

    def warning(self) -> str | None:
        """The line a client-bound run's reports open with; None when the client kept up."""
        return f"{CLIENT_BOUND} ({'; '.join(self.reasons)}{self.taken()})" if self.bound else None

    def taken(self) -> str:
        """What others took of the client's CPU, as a clause for the warning ('' when nothing worth saying): a
        client that waited behind other tasks needs a CPU of its own, not a faster machine."""
        parts = [
            f"by {who} for {ms:.0f} ms"
            for ms, who in ((self.cpu_wait_ms, "other tasks"), (self.steal_ms, "the hypervisor"))
            if ms is not None and ms >= TAKEN_MS
        ]
        return f"; its CPU was taken {' and '.join(parts)}" if parts else ""


class NtpStatus(Block):
    """The client's own clock discipline as its NTP daemon reports it (chrony's `chronyc tracking`, ntpd's `ntpq`):
    the accuracy is |offset| + root dispersion + root delay / 2, the daemon's bound on the clock's error."""

    source: str
    synchronised: bool
    offset_ms: float | None = None
    root_delay_ms: float | None = None
    root_dispersion_ms: float | None = None
    accuracy_ms: float | None = None
    reference: str | None = None


class DateBound(Block):
    """Bounds on the server's clock less the client's (ms), from the HTTP Date headers (1 s resolution) of probes
    sent around the instants the server's second turns over: each answer places the server's time within its own
    second and its probe's round trip.  `lag_allowance_ms` widens the bound for a server known to refresh its Date
    header once a second at any phase (uvicorn: vLLM, SGLang)."""

    probes: int
    offset_lo_ms: float
    offset_hi_ms: float
    rtt_ms_min: float | None = None
    server: str | None = None  # the Server header
    lag_allowance_ms: float = 0.0
    note: str | None = None


class ClockAccuracy(Block):
    """How well the client's clock agrees with the server's (draft 4.7.2), measured before the load: one clock for a
    server on loopback; else the client's NTP daemon, and a bound from the server's Date headers."""

    methods: list[str] = Field(default_factory=list)  # those that gave a figure (none: see `unavailable`)
    same_host: bool
    ntp: NtpStatus | None = None
    date: DateBound | None = None
    unavailable: list[str] = Field(default_factory=list)  # why a method gave nothing ("chronyc and ntpq not found")
    note: str | None = None  # e.g. a measurement this process made for the same URL shortly before, reused

    def method(self) -> str | None:
        """The methods that gave a figure, in one phrase; None when none did."""
        return " and ".join(self.methods) or None


class Network(Block):
    """The round trip to the server measured before the load (draft 4.7.3), reported beside TTFT, never
    subtracted from it."""

    method: str
    samples: int
    rtt_ms_median: float | None = None
    rtt_ms_min: float | None = None
    failures: int = 0


class Stream(Block):
    """What the responses' event streams showed beyond tokens: non-content events before the first content
    (draft 5.1.3.1) and refusals (finish_reason content_filter, draft 4.8.1)."""

    non_content_first: int  # requests whose first event carried no content (role-only, empty, whitespace)
    refusals: int
    finish_reasons: dict[str, int] = Field(default_factory=dict)  # as the server reported them, over ok requests
    without_done: int = 0  # complete replies whose stream ended after its final chunk with no data: [DONE]


class PromptMismatch(Block):
    """A prompt whose length the server counted differently from the length it was built to."""

    request_id: int
    built: int
    server: int


class PromptVerification(Block):
    """A sample of the run's prompts counted by the server's own tokenizer."""

    endpoint: str
    checked: int
    mismatches: int
    examples: list[PromptMismatch] = Field(default_factory=list)
    meaning: str | None = None  # what a mismatch means under the counting option


class WorkerClock(Block):
    """How a worker's clock was placed on the coordinator's (draft 4.7.2): offset = worker - coordinator, from the
    minimum-round-trip sample; accuracy is half that round trip plus the drift seen between before and after."""

    method: str
    same_host: bool
    offset_s: float
    accuracy_s: float
    rtt_s_before: float | None = None
    rtt_s_after: float | None = None
    drift_s: float | None = None  # offset after the run less offset before (None: not measured after)


class WorkerShare(Block):
    """One worker's share of a distributed run and what became of it."""

    worker: str  # its address
    host: str
    requests: int  # dealt to it
    concurrency: int | None = None  # closed loop: its part of the concurrency
    sent: int = 0
    recorded: int = 0
    not_sent: int = 0
    not_sent_ids: str = ""  # ranges of request ids, "3-7,12"
    outcome: str = "finished"  # finished, stopped, or died: why
    clock: WorkerClock | None = None


class Distributed(Block):
    """A run whose load came from several processes (`--workers N` / `--cluster ADDRESS`), merged into this one."""

    engine: str  # "dask.distributed 2026.8.0"
    cluster: str  # "LocalCluster, 2 worker processes" or the scheduler's address
    dealing: str
    start_at_clock: float | None = None  # the shared start instant, on the coordinator's clock
    workers: list[WorkerShare] = Field(default_factory=list)


class RunInfo(Block):
    """run.json: everything a report must declare about how the records were produced."""

    schema_version: Literal["infermeter.run/2"] = RUN_SCHEMA
    kind: Literal["live", "emulated", "simulated", "test"] = "live"
    started_at: str = Field(default_factory=lambda: wall_clock_iso())
    clock: str = "time.perf_counter (monotonic), seconds since the run's start"
    clock_anchor: ClockAnchor | None = None  # live and emulated runs: the run clock's 0 in nanoseconds
    client_health: ClientHealth | None = None  # runs sent by this process: did the load generator keep up
    sut: Sut = Field(default_factory=Sut)
    workload: WorkloadDeclaration = Field(default_factory=WorkloadDeclaration)
    load: Load = Field(default_factory=Load)
    tokenizer: Tokenizer = Field(default_factory=Tokenizer)
    itl_option: Literal["A", "B", "C"] = "B"
    warmup: Warmup = Field(default_factory=Warmup)
    slo: dict[str, float] = Field(default_factory=dict)  # metric -> bound in seconds (metrics.goodput.parse_slo)
    software: dict[str, str] = Field(default_factory=software_versions)
    notes: list[str] = Field(default_factory=list)
    stopped: str | None = None  # why the run ended before its plan ("interrupted", "terminated", a disk failure)
    deadlines: str | None = None  # --deadlines as given (metrics.fluidity.parse_deadlines)
    started_at_clock: float | None = None  # run clock when the measured load began (after the warm-up)
    token_times: Literal["full", "endpoints"] | None = None  # simulated runs: every token time, or first and last
    client: Client | None = None
    server_metrics: ServerMetricsSource | None = None
    telemetry: Telemetry | None = None
    prompt_verification: PromptVerification | None = None
    network: Network | None = None
    clock_accuracy: ClockAccuracy | None = None  # live and emulated runs: measured before the load (draft 4.7.2)
    stream: Stream | None = None
    engine: Engine | None = None
    distributed: Distributed | None = None
    config: dict[str, Any] | None = None  # the resolved scenario configuration (validated by infermeter.config)

    def start_time(self) -> dt.datetime | None:
        """When the run started (started_at) as an aware UTC datetime; None when run.json's time is no ISO 8601."""
        return wall_time(self.started_at)


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """infermeter.run/1 kept a simulated engine's EngineConfig flat beside its derived figures."""
    engine = doc.get("engine")
    if isinstance(engine, dict):
        config = dict(engine)
        derived = {k: config.pop(k) for k in ("latency_model", "kv_capacity") if k in config}
        doc["engine"] = {**derived, "config": config}
    return {**doc, "schema_version": RUN_SCHEMA}


UPGRADES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {RUN_SCHEMA_V1: _v1_to_v2}


def parse_run_info(doc: object, where: str) -> RunInfo:
    """A run.json document of any version this infermeter knows, upgraded and checked; anything else is a
    one-line UserError naming the file (and the key at fault)."""
    if not isinstance(doc, dict):
        raise UserError(f"{where} is not a valid run description: it is not a JSON object")
    version = doc.get("schema_version", RUN_SCHEMA_V1)
    while isinstance(version, str) and version in UPGRADES:
        doc = UPGRADES[version](doc)
        version = doc["schema_version"]
    if version != RUN_SCHEMA:
        known = ", ".join([*UPGRADES, RUN_SCHEMA])
        raise UserError(
            f"{where} has schema_version {version!r}, which infermeter {__version__} cannot read (it reads {known}): "
            "read it with the infermeter that wrote it"
        )
    try:
        return RunInfo.model_validate(doc)
    except ValidationError as exc:
        raise UserError(f"{where} is not a valid run description: {validation_problem(exc, RUN_SCHEMA)}") from None


def validation_problem(exc: ValidationError, schema: str) -> str:
    """The first problem pydantic found, in one line: the dotted key, and what is wrong with it."""
    first = exc.errors()[0]
    key = ".".join(str(x) for x in first["loc"]) or "(top level)"
    if first["type"] == "extra_forbidden":
        return f"unknown key '{key}' (not part of {schema})"
    return f"{key}: {' '.join(first['msg'].split())}"
