"""Engine configuration: which scheduler, latency model, memory and SLA knobs, and building engines from it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator, model_validator

from infermeter.config_files import load_model
from infermeter.engine.calibration import Calibration
from infermeter.engine.core import EngineCore
from infermeter.engine.latency import BatchModel, IterationModel, LatencyModel
from infermeter.engine.memory import capacity_tokens
from infermeter.engine.registry import SCHEDULER_CONFIGS, SCHEDULERS, scheduler_config
from infermeter.engine.scheduler import EngineLimits, SchedulerConfig
from infermeter.errors import UserError

__all__ = ["SCHEDULERS", "EngineConfig", "build_engines", "load_engine_config"]

MAX_BATCH_EXPONENT = 2.0  # iteration_model.batch_exponent above this is a typo, not an engine
# multi-bin dynamic batching's evaluation (section 8.1): RTX 4080 12 GB serving Qwen3-1.7B FP16
SEED_MEMORY = {"m_max_gb": 12.0, "m_model_gb": 4.0, "kv_gb_per_token": 1.875e-4}
# H100 80 GB at 90% utilization serving a Llama-3-8B-class model: 16 GB of weights, 128 KiB of KV per token
H100_MEMORY = {"m_max_gb": 72.0, "m_model_gb": 16.0, "kv_gb_per_token": 128 / 1024**2}
_ENGINE_KEYS = {
    "scheduler", "latency", "batch_model", "iteration_model", "m_max_gb", "m_model_gb", "kv_gb_per_token",
    "kv_capacity_tokens", "block_size", "d_sla_token", "d_sla_request", "prediction_noise", "api_overhead",
    "calibration",
}  # fmt: skip


def _nest_scheduler_settings(data: dict[str, Any]) -> dict[str, Any]:
    """Settings of the scheduler written beside `scheduler: NAME` (the flat form) move into the scheduler."""
    flat = {k: v for k, v in data.items() if k not in _ENGINE_KEYS}
    if not flat:
        return data
    given = data.get("scheduler", "continuous")
    name = given if isinstance(given, str) else getattr(given, "name", None) or given.get("name")
    fields = SCHEDULER_CONFIGS[name].model_fields if name in SCHEDULER_CONFIGS else {}
    for key in flat:
        if key not in fields:
            owners = [n for n, c in SCHEDULER_CONFIGS.items() if key in c.model_fields]
            where = f"a setting of {' and '.join(owners)}, not of {name}" if owners else "not an engine setting"
            raise ValueError(f"{key} is {where}")
    nested = dict(given) if isinstance(given, dict) else {"name": name}
    if isinstance(given, SchedulerConfig):
        nested = given.model_dump()
    return {**{k: v for k, v in data.items() if k in _ENGINE_KEYS}, "scheduler": {**nested, **flat}}


class EngineConfig(BaseModel):
    """One engine model; defaults follow the scheduler (the seed's GPU for batch schedulers, an H100 otherwise)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    scheduler: SerializeAsAny[SchedulerConfig] = Field(
        default_factory=lambda: scheduler_config("continuous"),
        description="a scheduler's name, or a mapping with its name and settings",
    )
    latency: Literal["batch", "iteration"] | None = None
    batch_model: BatchModel = Field(default_factory=BatchModel)
    iteration_model: IterationModel = Field(default_factory=IterationModel)
    m_max_gb: float | None = Field(default=None, gt=0)
    m_model_gb: float | None = Field(default=None, ge=0)
    kv_gb_per_token: float | None = Field(default=None, gt=0)
    kv_capacity_tokens: int | None = Field(default=None, gt=0, description="overrides the memory arithmetic")
    block_size: int = Field(default=16, gt=0)
    # the SLA the engine is held to: dynamic batch sizing aims at d_sla_token, and the simulator counts violations
    d_sla_token: float = Field(default=0.010, gt=0, description="seconds per decoded token")
    d_sla_request: float = Field(default=20.0, gt=0, description="seconds per request")
    # output-length prediction: oracle, or oracle x lognormal(0, spread)
    prediction_noise: float = Field(default=0.0, ge=0)
    api_overhead: float = Field(
        default=0.0,
        ge=0,
        le=60,
        description="seconds a live server's API adds to each request before its engine sees it (HTTP, "
        "tokenization, streaming); the simulator adds it to TTFT and E2E, the emulator's own HTTP path is real",
    )
    calibration: Calibration | None = Field(
        default=None, description="how `infermeter calibrate` measured this engine (kept, not used by the model)"
    )

    @model_validator(mode="before")
    @classmethod
    def _nested(cls, data: Any) -> Any:
        return _nest_scheduler_settings(data) if isinstance(data, dict) else data

    @field_validator("scheduler", mode="before")
    @classmethod
    def _scheduler(cls, value: Any) -> SchedulerConfig:
        return scheduler_config(value)

    @model_validator(mode="after")
    def _consistent(self) -> EngineConfig:
        """Latency models that give positive, finite step times, and memory that leaves room for a KV cache."""
        b, it = self.batch_model, self.iteration_model
        bounds = {
            "batch_model.alpha": (b.alpha, 0.0, False),
            "batch_model.beta": (b.beta, 0.0, True),
            "batch_model.gamma": (b.gamma, -1.0, True),
            "iteration_model.fixed": (it.fixed, 0.0, True),
            "iteration_model.per_prefill_token": (it.per_prefill_token, 0.0, False),
            "iteration_model.per_prefill_pair": (it.per_prefill_pair, 0.0, False),
            "iteration_model.per_decode_seq": (it.per_decode_seq, 0.0, False),
            "iteration_model.per_context_token": (it.per_context_token, 0.0, False),
            "iteration_model.per_request": (it.per_request, 0.0, False),
            "iteration_model.per_request_token": (it.per_request_token, 0.0, False),
            "iteration_model.per_arrival": (it.per_arrival, 0.0, False),
            "iteration_model.per_arrival_token": (it.per_arrival_token, 0.0, False),
            "iteration_model.batch_exponent": (it.batch_exponent, 0.0, True),
        }
        if it.batch_exponent > MAX_BATCH_EXPONENT:
            raise ValueError(
                f"iteration_model.batch_exponent must be at most {MAX_BATCH_EXPONENT:g} (a step's decode cost grows "
                f"at most as the batch squared), got {it.batch_exponent}"
            )
        for name, (value, lo, above) in bounds.items():
            if not math.isfinite(value) or value < lo or (above and value == lo):
                raise ValueError(
                    f"{name} must be a finite number {'above' if above else 'at least'} {lo:g}, got {value}"
                )
        if (b.name, it.name) != ("batch", "iteration"):
            raise ValueError("batch_model.name and iteration_model.name name the model: leave them out")
        try:
            room = self.capacity()
        except OverflowError:
            room = 0
        if room < 1:
            raise ValueError(
                "the memory settings leave no room for a KV cache: raise m_max_gb or set kv_capacity_tokens"
            )
        return self

    def latency_model(self) -> LatencyModel:
        kind = self.latency or self.scheduler.latency
        return self.batch_model if kind == "batch" else self.iteration_model

    def capacity(self) -> int:
        if self.kv_capacity_tokens is not None:
            return self.kv_capacity_tokens
        base = SEED_MEMORY if self.latency_model().name == "batch" else H100_MEMORY
        return capacity_tokens(
            self.m_max_gb if self.m_max_gb is not None else base["m_max_gb"],
            self.m_model_gb if self.m_model_gb is not None else base["m_model_gb"],
            self.kv_gb_per_token if self.kv_gb_per_token is not None else base["kv_gb_per_token"],
        )


def load_engine_config(path: Path) -> EngineConfig:
    """An EngineConfig from YAML/JSON, with a one-line error naming the bad field."""
    return load_model(EngineConfig, path, "engine config")


def save_engine_config(config: EngineConfig, path: Path) -> None:
    """YAML that `load_engine_config` (and the emulator's and the simulator's --config) read back."""
    import yaml

    text = yaml.safe_dump(config.model_dump(mode="json", exclude_none=True), sort_keys=False)
    header = "# an infermeter engine model" + (
        " calibrated by `infermeter calibrate` (its fit under `calibration`)" if config.calibration else ""
    )
    try:
        path.write_text(f"{header}\n{text}")
    except OSError as exc:
        raise UserError(f"cannot write the engine configuration {path} ({exc.strerror})") from None


def build_engines(config: EngineConfig, n: int, latency: LatencyModel | None = None) -> list[EngineCore]:
    """n engines; schedulers that share a queue (batch-level) share one scheduler, the others get one each."""
    model = latency or config.latency_model()
    cap = config.capacity()
    limits = EngineLimits(cap, config.d_sla_token)
    if config.scheduler.shares_queue:
        shared = config.scheduler.build(limits)
        return [EngineCore(shared, model, cap, config.block_size, i) for i in range(n)]
    return [EngineCore(config.scheduler.build(limits), model, cap, config.block_size, i) for i in range(n)]
