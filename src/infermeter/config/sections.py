"""The sections a run's configuration is made of: the target, the workload, the load, the objectives, the monitors,
the disclosures and where the work runs.  The command line's options are built from them; this module imports no more
than their checks need, so that building options stays quick."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from infermeter.client.apis import APIS
from infermeter.client.backend import BACKENDS
from infermeter.client.request import RERANK_SHAPES, RerankShape
from infermeter.config import checks
from infermeter.config.section import Flag, Section
from infermeter.workload.dataset import FORMATS, DatasetFormat
from infermeter.workload.limits import RATE_PROCESSES


class Target(Section):
    """The system under test and how to talk to it."""

    title = "target"
    url: Annotated[str | None, Flag("server base URL; without it the embedded emulator is benchmarked", checks.url)] = (
        None
    )
    backend: Annotated[str, Flag(f"transport: {', '.join(BACKENDS)}", checks.choice(*BACKENDS))] = "openai"
    api: Annotated[str, Flag(f"the API requests speak: {', '.join(APIS)}", checks.choice(*APIS))] = "completions"
    batch_inputs: Annotated[
        int,
        Flag("--api embeddings: texts per request; --api rerank: documents per query", checks.integer(1, 4096)),
    ] = 1
    rerank_shape: Annotated[
        RerankShape, Flag("--api rerank: whose request shape to send", checks.choice(*RERANK_SHAPES))
    ] = "vllm"
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
    header: Annotated[
        list[str] | None,
        Flag(
            "repeatable: an HTTP header sent with every request, 'Name: value'; ${VAR} in the value is read from the "
            "environment when the run starts and never written anywhere (like the API key)",
            checks.header,
            repeatable=True,
        ),
    ] = None
    request_id_prefix: Annotated[
        str | None, Flag("send X-Request-Id: PREFIX-<request id> with every request", checks.request_id_prefix)
    ] = None
    first_token_timeout: Annotated[float, Flag("seconds allowed until the first token", checks.SECONDS)] = 120.0
    ca_bundle: Annotated[
        Path | None, Flag("https: trust the CA certificates of this PEM file", checks.existing_file)
    ] = None
    insecure: Annotated[bool, Flag("https: do not verify the server's certificate (declared in run.json)")] = False
    client_cert: Annotated[
        Path | None, Flag("https: a client certificate (PEM, its key too unless --client-key)", checks.existing_file)
    ] = None
    client_key: Annotated[Path | None, Flag("https: the client certificate's key (PEM)", checks.existing_file)] = None

    @model_validator(mode="after")
    def _endpoint_options(self) -> Target:
        if self.batch_inputs != 1 and self.api not in ("embeddings", "rerank"):
            raise ValueError(f"--batch-inputs sizes embeddings and rerank requests: --api {self.api} sends one prompt")
        if self.rerank_shape != "vllm" and self.api != "rerank":
            raise ValueError("--rerank-shape shapes --api rerank requests: drop it, or add --api rerank")
        if self.client_key is not None and self.client_cert is None:
            raise ValueError("--client-key is the key of a --client-cert: add --client-cert FILE")
        tls = {
            "--ca-bundle": self.ca_bundle is not None,
            "--insecure": self.insecure,
            "--client-cert": self.client_cert is not None,
        }
        if (named := [k for k, v in tls.items() if v]) and not (self.url or "").startswith("https://"):
            raise ValueError(
                f"{', '.join(named)} secure(s) an https:// --url: drop it, or give the server's https:// URL"
            )
        if self.api != "completions" and self.backend != "openai":
            raise ValueError(f"--api {self.api} is spoken over HTTP: drop --backend {self.backend}")
        return self

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
    input_tokens: Annotated[int | None, Flag("fixed prompt length (with --output-tokens)", checks.LENGTH)] = None
    output_tokens: Annotated[int | None, Flag("fixed output length (with --input-tokens)", checks.LENGTH)] = None
    trace: Annotated[Path | None, Flag("a BurstGPT CSV: lengths and arrival times", checks.existing_file)] = None
    dataset: Annotated[
        Path | None,
        Flag(
            "requests from a dataset you have: ShareGPT JSON, JSONL/CSV/Parquet of prompts, a Hugging Face dataset "
            "saved on disk (a directory), a Mooncake trace (JSONL with hash_ids), an Azure LLM inference trace or a "
            "BurstGPT CSV; prompt text is sent verbatim",
            checks.existing_path,
        ),
    ] = None
    dataset_format: Annotated[
        DatasetFormat | None,
        Flag(f"the dataset's format when its content does not tell: {', '.join(FORMATS)}", checks.choice(*FORMATS)),
    ] = None
    max_input_tokens: Annotated[
        int | None,
        Flag("leave out dataset rows whose prompt is longer than this (under the tokenizer)", checks.LENGTH),
    ] = None
    max_output_tokens: Annotated[
        int | None,
        Flag("leave out dataset rows whose reply is longer than this (under the tokenizer)", checks.LENGTH),
    ] = None
    dataset_sample: Annotated[
        int | None,
        Flag("use N dataset rows drawn at random (with --seed) from those the filters keep", checks.REQUESTS),
    ] = None
    block_tokens: Annotated[int, Flag("the tokens one hash_id of a Mooncake trace stands for", checks.LENGTH)] = 512
    multi_turn: Annotated[
        bool,
        Flag(
            "send each conversation as a session: turn k carries the turns before it and their replies, after the "
            "previous reply and a think time (--requests counts turns)"
        ),
    ] = False
    history: Annotated[
        Literal["replies", "dataset"],
        Flag(
            "--multi-turn's history: the server's actual replies, or the dataset's own",
            checks.choice("replies", "dataset"),
        ),
    ] = "replies"
    think_time: Annotated[
        str, Flag("--multi-turn: a user's pause after a reply: fixed:500ms, exp:2s or uniform:1s-3s", checks.THINK_TIME)
    ] = "0"
    rps_scale: Annotated[
        float,
        Flag(
            "a replayed trace's arrivals compressed this many times",
            checks.number(0, 1e6, lo_open=True),
            ("--rps-scale", "--time-scale"),
        ),
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
    images: Annotated[
        int,
        Flag(
            "images sent with each chat or Responses prompt (synthetic, seeded, unless --image-dir)",
            checks.integer(0, 64),
        ),
    ] = 0
    image_size: Annotated[
        str, Flag("synthetic images' size WxH in pixels, e.g. 512x512 (each side 1 to 16384)", checks.image_size)
    ] = "512x512"
    image_format: Annotated[
        Literal["png", "jpeg"], Flag("synthetic images' file format: png or jpeg", checks.choice("png", "jpeg"))
    ] = "png"
    image_dir: Annotated[
        Path | None, Flag("send images from this folder (PNG/JPEG files, in name order) instead", checks.image_dir)
    ] = None
    audio: Annotated[
        float,
        Flag(
            "seconds of synthetic WAV audio sent with each chat or Responses prompt (0: none)", checks.number(0, 3600)
        ),
    ] = 0.0

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if self.trace is not None and self.dataset is not None:
            raise ValueError("--trace and --dataset both give the requests: give one (--dataset reads BurstGPT too)")
        if self.trace is not None and (
            self.workload is not None or self.input_tokens is not None or self.output_tokens is not None
        ):
            raise ValueError("--trace gives the lengths: drop --workload, --input-tokens and --output-tokens")
        if self.dataset is not None and (self.workload is not None or self.input_tokens is not None):
            raise ValueError(
                "--dataset gives the requests: drop --workload and --input-tokens (--output-tokens gives the output "
                "length of rows that carry none)"
            )
        dataset_only = {
            "--dataset-format": self.dataset_format is not None,
            "--max-input-tokens": self.max_input_tokens is not None,
            "--max-output-tokens": self.max_output_tokens is not None,
            "--dataset-sample": self.dataset_sample is not None,
        }
        if self.dataset is None and (named := [k for k, v in dataset_only.items() if v]):
            raise ValueError(f"{', '.join(named)} choose(s) rows of a --dataset: add --dataset FILE, or drop them")
        if self.images == 0 and self.image_dir is None and (self.image_size != "512x512" or self.image_format != "png"):
            raise ValueError("--image-size and --image-format shape --images: add --images N, or drop them")
        if not self.multi_turn and (self.history != "replies" or self.think_time != "0"):
            raise ValueError("--history and --think-time shape --multi-turn sessions: add --multi-turn, or drop them")
        return self

    def given(self) -> bool:
        sources = (self.workload, self.input_tokens, self.output_tokens, self.trace, self.dataset)
        return any(x is not None for x in sources)


# the options that choose a dataset's rows (a `test` suite that sends a workload takes them: suites/lab.py)
DATASET_FIELDS = (
    "dataset", "dataset_format", "max_input_tokens", "max_output_tokens", "dataset_sample", "block_tokens",
)  # fmt: skip


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
    max_concurrency: Annotated[
        int | None,
        Flag(
            "open loop: at most this many requests in flight; a send waits for a free slot (the wait is recorded)",
            checks.integer(1, 100_000),
        ),
    ] = None
    ramp_up: Annotated[
        float | None,
        Flag(
            "the rate (open loop) or the users (closed loop) rise linearly over this many seconds; those requests "
            "are left out of the steady window and declared",
            checks.SECONDS,
        ),
    ] = None
    model_mix: Annotated[
        str | None,
        Flag(
            "models or LoRA adapters chosen per request, seeded, e.g. a=0.7,b=0.3 (the report has a table per model)",
            checks.MODEL_MIX,
        ),
    ] = None
    warmup: Annotated[int, Flag("auto (>= 100 requests and 10,000 tokens), N requests, or off", checks.warmup)] = -1
    warmup_workload: Annotated[
        str | None,
        Flag(
            "the workload the warm-up sends instead of the run's (standard name or file), e.g. short prompts before "
            "long contexts, or prompts without the run's shared prefixes so a prefix cache starts cold",
            checks.WORKLOAD,
        ),
    ] = None
    min_duration: Annotated[
        float | None,
        Flag(
            "closed loop with --requests: keep sending until this many seconds have passed too (the IETF draft, "
            "5.5.3: 60 s or 100 completions per slot, whichever is longer)",
            checks.SECONDS,
        ),
    ] = None
    realtime: Annotated[
        bool,
        Flag(
            "send at real-time priority (Linux SCHED_FIFO: root, CAP_SYS_NICE or ulimit -r): other tasks on the "
            "client's CPU wait for its idle moments instead of delaying sends"
        ),
    ] = False

    @model_validator(mode="after")
    def _one_loop(self) -> Load:
        if self.rate is not None and self.concurrency is not None:
            raise ValueError("give either --rate (open loop) or --concurrency (closed loop), not both")
        if self.min_duration is not None and (self.concurrency is None or self.requests is None):
            raise ValueError(
                "--min-duration keeps a closed loop sending until both --requests and its seconds are reached: give "
                "--concurrency and --requests with it, or drop it"
            )
        if self.max_concurrency is not None and self.rate is None:
            raise ValueError(
                "--max-concurrency caps an open loop's requests in flight: add --rate R, or use --concurrency C for a "
                "closed loop"
            )
        if self.min_duration is not None and self.duration is not None:
            raise ValueError("--min-duration and --duration bound the same closed loop two ways: give one of them")
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
    dcgm_url: Annotated[
        str | None,
        Flag("a DCGM exporter's /metrics (the server's GPUs: power, energy, utilization, memory, clocks)", checks.url),
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


def software_item(value: Any) -> Any:
    """--software NAME=VERSION (one; a scenario file gives a list of them, or a mapping of names to versions): a name
    and a version, neither empty nor holding spaces, e.g. vllm=0.11.0 or cuda=12.8."""
    if isinstance(value, list):
        return [software_item(v) for v in value]
    if isinstance(value, dict):
        for name, version in value.items():
            if not isinstance(name, str) or not isinstance(version, str):
                raise ValueError(
                    f"{name}: {version!r} is a number, not a version (YAML reads 2.10 as 2.1): quote each version as "
                    f'written, e.g. {name}: "12.8"'
                )
        return [software_item(f"{name}={version}") for name, version in value.items()]
    name, sep, version = value.partition("=") if isinstance(value, str) else ("", "", "")
    name, version = name.strip(), version.strip()
    if not sep or not name or not version or any(c.isspace() for c in name + version) or "=" in version:
        raise ValueError(f"expected NAME=VERSION, e.g. vllm=0.11.0 (repeat the option for more), got {value!r}")
    return f"{name}={version}"


class Disclosures(Section):
    """What the report must disclose about the system under test and cannot measure (draft 4.1, 4.7.2, 4.8.1,
    5.1.2.3, Appendix C.1's software); the embedded emulator declares its own, and what a live server's user leaves
    out is "not declared"."""

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
    software: Annotated[
        list[str] | None,
        Flag(
            "repeatable: the SUT's software and its version as NAME=VERSION, e.g. --software vllm=0.11.0 --software "
            "cuda=12.8 (Appendix C.1); the server's own version is asked for where it offers one",
            software_item,
        ),
    ] = None

    @model_validator(mode="after")
    def _software_once(self) -> Disclosures:
        seen: dict[str, str] = {}
        for name, version in (item.split("=", 1) for item in self.software or []):
            if name in seen:
                raise ValueError(f"--software gives {name} twice ({seen[name]} and {version}): give each one once")
            seen[name] = version
        return self

    def declared(self) -> dict[str, str]:
        """run.json's `sut` fields the user declared, the boundary by its name in the draft (the software apart:
        `software_versions`)."""
        given = self.model_dump(exclude_none=True, exclude={"software"})
        if "boundary" in given:
            given["boundary"] = BOUNDARIES[given["boundary"]]
        return given

    def software_versions(self) -> dict[str, str]:
        """--software as name -> version, in the order given."""
        return dict(item.split("=", 1) for item in self.software or [])


SECTIONS: dict[str, type[Section]] = {
    "target": Target,
    "workload": Workload,
    "load": Load,
    "objectives": Objectives,
    "monitors": Monitors,
    "disclosures": Disclosures,
    "scale": Scale,
}
