"""What a benchmark run is asked to do (RunOptions) and what it left (RunResult)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infermeter.client.openai_sse import Api
from infermeter.metrics.summary_model import Summary
from infermeter.workload.arrivals import ArrivalSpec

MIN_DURATION_POOL = 100_000  # requests drawn for a closed loop bounded by both a count and a time


@dataclass
class RunOptions:
    url: str
    out: Path
    api: Api = "completions"
    backend: str = "openai"  # a name in client.backend.BACKENDS
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    workload: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    trace: Path | None = None  # a BurstGPT CSV: lengths, and arrival times unless `arrivals` replaces them
    rps_scale: float = 1.0  # the trace's arrivals compressed this many times
    requests: int | None = None
    duration: float | None = None
    arrivals: ArrivalSpec | None = None
    concurrency: int | None = None
    barrier: bool = False
    warmup: int | None = -1  # -1: the draft's rule; 0 / None: off; N: exactly N requests
    warmup_workload: str | None = None  # the warm-up's own workload (default: the run's, its shared prefixes included)
    min_duration: float | None = None  # closed loop: send until both `requests` and this many seconds are reached
    realtime: bool = False  # send from a SCHED_FIFO thread (process_limits.realtime)
    seed: int = 42
    slo: dict[str, float] = field(default_factory=dict)
    grace_s: float = 30.0
    connect_timeout: float = 10.0
    first_token_timeout: float = 120.0
    total_timeout: float = 900.0
    ignore_eos: bool = True
    sut: dict[str, Any] = field(default_factory=dict)  # what the embedded emulator declares about itself
    disclosed: dict[str, str] = field(default_factory=dict)  # what the user declared (config.run.Disclosures)
    software: dict[str, str] = field(default_factory=dict)  # --software NAME=VERSION, name -> version
    progress: bool = True
    deadlines: str | None = None
    # prompts are built to exact length under this tokenizer (after its chat template for chat) and reference counts
    # taken with it; None: the tokenizer the server declares, else the shipped cl100k_base (load/counting.py)
    tokenizer: str | None = None
    scrape_interval: float = 1.0  # server /metrics; 0 turns scraping off
    metrics_url: str | None = None  # where /metrics is served, when not at `url` (a gRPC target)
    telemetry_interval: float = 1.0  # host telemetry; 0 turns it off
    gpu_price_per_hour: float | None = None
    gpus: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    workers: int | None = None  # send from this many local processes (infermeter.distributed)
    cluster: str | None = None  # or from the workers of the dask scheduler at this address
    scenario: dict[str, Any] | None = None  # the resolved configuration (config.RunConfig) run.json keeps

    @property
    def open_loop(self) -> bool:
        """Sends at arrival times (a rate process, or a trace's own) rather than on completions."""
        return self.arrivals is not None or (self.trace is not None and self.concurrency is None)

    def request_count(self) -> int:
        if self.min_duration is not None:
            return max(
                self.requests or 0, MIN_DURATION_POOL
            )  # how many the seconds take beyond `requests` is seen live
        if self.requests is not None:
            return self.requests
        if self.duration is None:
            return 1000
        if self.arrivals is not None and self.arrivals.rate is not None:
            return int(self.arrivals.rate * self.duration * 1.2) + 100
        return 100_000  # closed loop bounded by time: more than it can send


@dataclass
class RunResult:
    """What a run left: its directory, its summary, and why it ended early (None when it ran as planned)."""

    run_dir: Path
    summary: Summary
    stopped: str | None = None  # "interrupted" (SIGINT), "terminated" (SIGTERM) or why the directory failed
    disk_failure: str | None = None
