"""Emulator configuration: the engine model plus the knobs the methodology tests turn."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from infermeter.config_files import read_mapping, validate
from infermeter.emulator.dialects import MetricsDialect
from infermeter.emulator.faults import Fault, check_shares
from infermeter.engine.config import EngineConfig
from infermeter.engine.multi_bin import MultiBinConfig, refuse_workload_bins
from infermeter.errors import UserError
from infermeter.tokenizers import REFERENCE, check_spec


class EmulatorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    model: str = "infermeter-emulator"
    engine: EngineConfig = Field(default_factory=EngineConfig)
    speed: float = Field(default=1.0, gt=0, le=1e6, description="run the engine this many times faster than its model")
    prefix_caching: bool = True
    max_model_len: int = Field(default=131072, gt=0, le=10**8)
    input_filter_ms: float = Field(default=0.0, ge=0, le=3.6e6, description="guardrail before the engine (+ TTFT)")
    output_filter_ms: float = Field(default=0.0, ge=0, le=3.6e6, description="guardrail time per event, in turn")
    faults: list[Fault] = Field(default_factory=list, description="injected faults (emulator/faults.py)")
    grpc_port: int | None = Field(
        default=None, ge=0, le=65535, description="also serve KServe v2 gRPC streaming here (0: a free port)"
    )
    api_key: str | None = Field(default=None, description="when set, requests must carry it (else HTTP 401)")
    strict_fields: bool = Field(
        default=False,
        description="answer HTTP 422 to a request field outside the OpenAI schema (ignore_eos, ...), as "
        "`transformers serve` does",
    )
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    embedding_dim: int = Field(default=384, ge=1, le=65536, description="length of /v1/embeddings vectors")
    image_tile_px: int = Field(default=512, ge=1, le=65536, description="images are charged per tile of this side")
    image_tokens_per_tile: int = Field(default=256, ge=0, le=10**6, description="prefill tokens an image tile costs")
    audio_tokens_per_second: float = Field(
        default=25.0, ge=0, le=10**6, description="prefill tokens a second of input audio costs"
    )
    metrics_dialect: MetricsDialect = Field(
        default="vllm", description="/metrics speaks this engine's metric names: vllm, sglang, tgi or triton"
    )
    tokenizer: str = Field(
        default=REFERENCE,
        description="counts prompt tokens (ChatML for chat with a tiktoken encoding): cl100k_base, o200k_base, a "
        "tokenizer.json or a .gguf; declared in /v1/models",
    )

    def with_scheduler(self, name: str | None) -> EmulatorConfig:
        """This configuration with its engine's scheduler replaced (None: as it is); the settings both schedulers
        have keep their values."""
        if name is None:
            return self
        from infermeter.engine.registry import SCHEDULER_CONFIGS

        # settings the new scheduler shares with the old one (batch size, token budget) are kept
        fields = SCHEDULER_CONFIGS[name].model_fields if name in SCHEDULER_CONFIGS else {}
        kept = {k: v for k, v in self.engine.scheduler.model_dump().items() if k in fields and k != "name"}
        engine = self.engine.model_validate({**self.engine.model_dump(), "scheduler": {**kept, "name": name}})
        return self.model_copy(update={"engine": served_engine(engine)})

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer(cls, spec: str) -> str:
        try:
            return check_spec(spec)
        except UserError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("engine")
    @classmethod
    def _online_bins(cls, engine: EngineConfig) -> EngineConfig:
        return served_engine(engine)

    @field_validator("faults")
    @classmethod
    def _shares(cls, faults: list[Fault]) -> list[Fault]:
        check_shares(faults)
        return faults


def served_engine(engine: EngineConfig) -> EngineConfig:
    """The engine as the emulator serves it.  A server knows no workload in advance, so multi-bin's edges and B_MAX
    left unset are learned online: recorded as `bin_edges: online` in the configuration the emulator declares (and
    run.json keeps), since the simulator reads an unset `bin_edges` as `workload`, and a prediction or twin of the
    run must model the policy it ran.  `bin_edges: workload` with values still to compute is refused."""
    refuse_workload_bins(engine.scheduler)
    scheduler = engine.scheduler
    if isinstance(scheduler, MultiBinConfig) and scheduler.bin_edges is None:
        return engine.model_copy(update={"scheduler": scheduler.model_copy(update={"bin_edges": "online"})})
    return engine


def load_emulator_config(path: Path) -> EmulatorConfig:
    """An emulator configuration, or an engine configuration (what `infermeter calibrate` writes) to emulate."""
    data = read_mapping(path, "emulator config")
    if data and not set(data) & set(EmulatorConfig.model_fields) and set(data) <= set(EngineConfig.model_fields):
        data = {"engine": data}
    return validate(EmulatorConfig, data, path, "emulator config")
