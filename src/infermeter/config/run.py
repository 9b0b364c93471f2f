"""What a benchmark run is: the target, the workload, the load, the objectives and the monitors, as one model.  The
`run` and `capacity` commands are built from these sections, a scenario file holds the same keys, and run.json
keeps the resolved model so that `infermeter run --config RUN_DIR/run.json` sends the same requests again."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infermeter.client.backend import BACKENDS
from infermeter.config import checks
from infermeter.config.section import Flag, Section
from infermeter.emulator.config import EmulatorConfig
from infermeter.load.options import RunOptions
from infermeter.metrics.goodput import parse_slo
from infermeter.workload.build import RATE_PROCESSES, arrival_spec
from infermeter.workload.distributions import MAX_LENGTH

DEMO_RATE = 20.0  # the embedded emulator without a load: a moderate open loop
DEMO_REQUESTS = 300
LIVE_REQUESTS = 1000
DEFAULT_WORKLOAD = "synthetic-uniform"


class Target(Section):
    """The system under test and how to talk to it."""

    title = "target"
    url: Annotated[str | None, Flag("server base URL; without it the embedded emulator is benchmarked", checks.url)] = (
        None
    )
    backend: Annotated[str, Flag(f"transport: {', '.join(BACKENDS)}", checks.choice(*BACKENDS))] = "openai"
    api: Annotated[
        Literal["completions", "chat"], Flag("completions or chat", checks.choice("completions", "chat"))
    ] = "completions"
    model: Annotated[str | None, Flag("model name; default: the first the server lists")] = None
    api_key_env: Annotated[
        str, Flag("environment variable holding the API key (never written anywhere)", checks.env_name)
    ] = "OPENAI_API_KEY"
    extra_body: Annotated[
        dict[str, Any],
        Flag('JSON merged into every request body, e.g. \'{"logit_bias": {"2": -100}}\'', checks.extra_body),
    ] = Field(default_factory=dict)
    ignore_eos: Annotated[
        bool, Flag("ask the server to run every reply to max_tokens (vLLM, llama.cpp; hosted APIs may reject it)")
    ] = True
    timeout: Annotated[float, Flag("total seconds allowed per request", checks.SECONDS)] = 900.0
    first_token_timeout: Annotated[float, Flag("seconds allowed until the first token", checks.SECONDS)] = 120.0

    @model_validator(mode="after")
    def _transport(self) -> Target:
        if self.url is not None and self.url.startswith("grpc://") and self.backend != "grpc":
            raise ValueError(
                f"--url {self.url} is a gRPC address: add --backend grpc, or give the server's http:// URL"
            )
        return self

    @model_validator(mode="after")
    def _timeouts(self) -> Target:
        if self.first_token_timeout > self.timeout:
            raise ValueError(
                f"--first-token-timeout ({self.first_token_timeout:g} s) must not exceed --timeout ({self.timeout:g} s)"
            )
        return self


class Workload(Section):
    """Which requests: a workload (standard or a file), fixed lengths, or a trace; the random seed draws them."""

    title = "workload"
    workload: Annotated[str | None, Flag("standard workload name or YAML/JSON workload file", checks.WORKLOAD)] = None
    input_tokens: Annotated[
        int | None, Flag("fixed prompt length (with --output-tokens)", checks.integer(1, MAX_LENGTH))
    ] = None
    output_tokens: Annotated[
        int | None, Flag("fixed output length (with --input-tokens)", checks.integer(1, MAX_LENGTH))
    ] = None
    trace: Annotated[Path | None, Flag("a BurstGPT CSV: lengths and arrival times", checks.existing_file)] = None
    rps_scale: Annotated[
        float, Flag("trace arrivals compressed this many times", checks.number(0, 1e6, lo_open=True))
    ] = 1.0
    tokenizer: Annotated[
        str | None,
        Flag(
            "the tokenizer prompts are built to exact length with and reference counts are taken with: cl100k_base, "
            "o200k_base (shipped references, the IETF draft's option B), a tokenizer.json or .gguf (the model's own, "
            "option A; its chat template with --api chat); default: the one the server declares, else cl100k_base",
            checks.TOKENIZER,
        ),
    ] = None
    seed: Annotated[int, Flag("random seed (recorded)", checks.SEED)] = 42

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if self.trace is not None and (
            self.workload is not None or self.input_tokens is not None or self.output_tokens is not None
        ):
            raise ValueError("--trace gives the lengths: drop --workload, --input-tokens and --output-tokens")
        return self

    def given(self) -> bool:
        return any(x is not None for x in (self.workload, self.input_tokens, self.output_tokens, self.trace))


class Load(Section):
    """How requests are sent: an open loop at a rate, a closed loop at a concurrency, or a trace's own times."""

    title = "load"
    requests: Annotated[int | None, Flag("requests to measure", checks.REQUESTS, ("--requests", "-n"))] = None
    duration: Annotated[float | None, Flag("stop sending after this many seconds", checks.SECONDS)] = None
    rate: Annotated[float | None, Flag("open loop: requests per second", checks.RATE)] = None
    arrival: Annotated[str, Flag("poisson, gamma, constant or uniform", checks.choice(*RATE_PROCESSES))] = "poisson"
    burstiness: Annotated[
        float, Flag("gamma shape: 1 is Poisson, below 1 burstier", checks.number(0, 1e6, lo_open=True))
    ] = 1.0
    concurrency: Annotated[int | None, Flag("closed loop: requests kept in flight", checks.integer(1, 100_000))] = None
    barrier: Annotated[bool, Flag("closed loop: release the first C requests together")] = False
    warmup: Annotated[int, Flag("auto (>= 100 requests and 10,000 tokens), N requests, or off", checks.warmup)] = -1

    @model_validator(mode="after")
    def _one_loop(self) -> Load:
        if self.rate is not None and self.concurrency is not None:
            raise ValueError("give either --rate (open loop) or --concurrency (closed loop), not both")
        return self


class Objectives(Section):
    """What a request must meet: the goodput SLO and Metron's fluidity deadlines."""

    title = "objectives"
    slo: Annotated[str | None, Flag("goodput SLO, e.g. ttft=200ms,tpot=50ms", checks.SLO)] = None
    deadlines: Annotated[
        str | None,
        Flag("fluidity deadlines: ttft=300ms|@curve.json,tbt=25ms[,target=0.9][,slack=50ms]", checks.DEADLINES),
    ] = None


class Monitors(Section):
    """What is watched beside the load: server /metrics, host telemetry, and the cost basis."""

    title = "monitors"
    scrape_interval: Annotated[float, Flag("seconds between server /metrics scrapes (0: off)", checks.INTERVAL)] = 1.0
    telemetry_interval: Annotated[float, Flag("seconds between host telemetry samples (0: off)", checks.INTERVAL)] = 1.0
    gpu_price: Annotated[
        float | None, Flag("price per GPU-hour, for cost per million tokens", checks.number(0, 1e6))
    ] = None
    gpus: Annotated[
        int | None, Flag("GPUs serving (cost denominator; default: NVML count)", checks.integer(1, 100_000))
    ] = None


MAX_WORKERS = 1024


class Scale(Section):
    """Where the work runs: this process, N local processes, or an existing dask.distributed cluster."""

    title = "scale"
    workers: Annotated[
        int | None,
        Flag(
            "spread the work over N local processes (a dask.distributed LocalCluster)", checks.integer(1, MAX_WORKERS)
        ),
    ] = None
    cluster: Annotated[
        str | None,
        Flag(
            "run on the dask.distributed cluster whose scheduler is at this address (tcp://host:8786); its workers "
            "must reach the target",
            checks.scheduler_address,
        ),
    ] = None

    @model_validator(mode="after")
    def _one_place(self) -> Scale:
        if self.workers is not None and self.cluster is not None:
            from infermeter.distributed.tasks import ONE_PLACE

            raise ValueError(ONE_PLACE)
        return self

    @property
    def distributed(self) -> bool:
        return self.workers is not None or self.cluster is not None


BOUNDARIES = {"engine": "Model Engine", "gateway": "Application Gateway", "compound": "Compound System"}  # draft 4.1


class Disclosures(Section):
    """What the report must disclose about the system under test and cannot measure (draft 4.1, 4.7.2, 4.8.1,
    5.1.2.3); the embedded emulator declares its own, and what a live server's user leaves out is "not declared"."""

    title = "disclosures"
    boundary: Annotated[
        Literal["engine", "gateway", "compound"] | None,
        Flag(
            "the SUT boundary (draft 4.1): engine (the inference engine alone), gateway (behind an API gateway) "
            "or compound (retrieval, tools)",
            checks.choice(*BOUNDARIES),
        ),
    ] = None
    hardware: Annotated[
        str | None, Flag("accelerators serving the model, type, count and memory, e.g. '8x H100 80GB'", checks.text)
    ] = None
    prefix_caching: Annotated[
        Literal["enabled", "disabled"] | None,
        Flag("the server's prefix caching state", checks.choice("enabled", "disabled")),
    ] = None
    guardrails: Annotated[
        str | None,
        Flag(
            "the safety systems on the path (draft 4.8.1), e.g. 'none' or 'Llama Guard 3 on input and output'",
            checks.text,
        ),
    ] = None
    clock_sync: Annotated[
        str | None,
        Flag(
            "how the load generator's and the server's clocks agree and how well (draft 4.7.2), e.g. 'NTP, 2 ms'; "
            "a loopback server shares the client's clock",
            checks.text,
        ),
    ] = None

    def declared(self) -> dict[str, str]:
        """run.json's `sut` fields the user declared, the boundary by its name in the draft."""
        given = self.model_dump(exclude_none=True)
        if "boundary" in given:
            given["boundary"] = BOUNDARIES[given["boundary"]]
        return given


SECTIONS: dict[str, type[Section]] = {
    "target": Target,
    "workload": Workload,
    "load": Load,
    "objectives": Objectives,
    "monitors": Monitors,
    "disclosures": Disclosures,
    "scale": Scale,
}


class RunConfig(BaseModel):
    """A whole run, as a scenario file and run.json's `config` hold it (draft 4.3.3: enough to reproduce the run)."""

    model_config = ConfigDict(extra="forbid")
    target: Target = Target()
    workload: Workload = Workload()
    load: Load = Load()
    objectives: Objectives = Objectives()
    monitors: Monitors = Monitors()
    disclosures: Disclosures = Disclosures()
    scale: Scale = Scale()
    emulator: EmulatorConfig | None = None  # the embedded emulator's configuration, when no url is given

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if self.target.url is None and (declared := self.disclosures.declared()):
            names = ", ".join("--" + k.replace("_", "-") for k in declared)
            raise ValueError(
                f"{names}: the embedded emulator declares its own configuration (these options describe a server at "
                "--url); drop them"
            )
        if self.target.url is not None and self.emulator is not None:
            raise ValueError(
                "--emulator-config, --scheduler and a scenario's `emulator` configure the embedded emulator: "
                "drop them with --url"
            )
        replay = self.workload.trace is not None and self.load.rate is None and self.load.concurrency is None
        if replay and (self.load.arrival != "poisson" or self.load.burstiness != 1.0):
            raise ValueError(
                "--arrival and --burstiness shape a rate's arrivals: a replayed --trace keeps its own; add --rate "
                "to send its lengths at a rate instead, or drop them"
            )
        if self.workload.rps_scale != 1.0 and not replay:
            raise ValueError(
                "--rps-scale compresses a replayed --trace's own arrival times: it has none to compress here "
                "(no --trace, or --rate/--concurrency given): drop it"
            )
        if self.target.url is not None and self.load.rate is None and self.load.concurrency is None and not replay:
            raise ValueError(
                "give a load: --rate R (open loop), --concurrency C (closed loop) or --trace FILE (replay)"
            )
        return self

    def resolved(self, trace_length: int | None = None) -> RunConfig:
        """Every default a run decides made explicit (workload, request count, the emulator demo's rate, the trace as
        an absolute path), so that run.json's copy sends the same requests again.  Workload, tokenizer and curve
        files stay as they were named: relative to the directory the run started in."""
        workload, load = self.workload, self.load
        if not workload.given():
            workload = workload.model_copy(update={"workload": DEFAULT_WORKLOAD})
        if workload.trace is not None:
            workload = workload.model_copy(update={"trace": workload.trace.resolve()})
        replay = workload.trace is not None and load.rate is None and load.concurrency is None
        if self.target.url is None and load.rate is None and load.concurrency is None and not replay:
            load = load.model_copy(update={"rate": DEMO_RATE})
        if workload.trace is not None and load.requests is None:  # the whole trace, a duration cutting it short
            load = load.model_copy(update={"requests": trace_length})
        elif load.requests is None and load.duration is None:
            load = load.model_copy(update={"requests": DEMO_REQUESTS if self.target.url is None else LIVE_REQUESTS})
        emulator = self.emulator if self.target.url is not None or self.emulator else EmulatorConfig()
        return self.model_copy(update={"workload": workload, "load": load, "emulator": emulator})

    def options(self, out: Path, progress: bool) -> RunOptions:
        """The load package's options for this configuration (a resolved one), carrying it for run.json."""
        t, w, load, o, m = self.target, self.workload, self.load, self.objectives, self.monitors
        return RunOptions(
            url=t.url or "",
            out=out,
            api=t.api,
            backend=t.backend,
            model=t.model or "",
            api_key_env=t.api_key_env,
            workload=w.workload,
            input_tokens=w.input_tokens,
            output_tokens=w.output_tokens,
            trace=w.trace,
            rps_scale=w.rps_scale,
            requests=load.requests,
            duration=load.duration,
            arrivals=arrival_spec(load.arrival, load.rate, load.burstiness) if load.rate is not None else None,
            concurrency=load.concurrency,
            barrier=load.barrier,
            warmup=load.warmup,
            seed=w.seed,
            slo=parse_slo(o.slo) if o.slo else {},
            first_token_timeout=t.first_token_timeout,
            total_timeout=t.timeout,
            progress=progress,
            deadlines=o.deadlines,
            tokenizer=w.tokenizer,
            scrape_interval=m.scrape_interval,
            telemetry_interval=m.telemetry_interval,
            gpu_price_per_hour=m.gpu_price,
            gpus=m.gpus,
            extra_body=t.extra_body,
            ignore_eos=t.ignore_eos,
            disclosed=self.disclosures.declared(),
            workers=self.scale.workers,
            cluster=self.scale.cluster,
            scenario=self.model_dump(mode="json"),
        )
