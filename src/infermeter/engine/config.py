"""Engine configuration: which scheduler, latency model, memory and SLA knobs, and building engines from it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from infermeter.config_files import load_model
from infermeter.engine.batching import DynamicNoBins, MultiBinDynamic, StaticFifo
from infermeter.engine.core import EngineCore
from infermeter.engine.iteration import ChunkedPrefill, ContinuousBatching
from infermeter.engine.latency import BatchModel, IterationModel, LatencyModel
from infermeter.engine.memory import capacity_tokens

SchedulerName = Literal["static_fifo", "dynamic_no_bins", "multi_bin_dynamic", "continuous", "chunked_prefill"]
SCHEDULERS: tuple[str, ...] = SchedulerName.__args__  # type: ignore[attr-defined]
BATCH_SCHEDULERS = ("static_fifo", "dynamic_no_bins", "multi_bin_dynamic")

# seeds/004 8.1: RTX 4080 12 GB serving Qwen3-1.7B FP16
SEED_MEMORY = {"m_max_gb": 12.0, "m_model_gb": 4.0, "kv_gb_per_token": 1.875e-4}
# H100 80 GB at 90% utilization serving a Llama-3-8B-class model: 16 GB of weights, 128 KiB of KV per token
H100_MEMORY = {"m_max_gb": 72.0, "m_model_gb": 16.0, "kv_gb_per_token": 128 / 1024**2}


class EngineConfig(BaseModel):
    """One engine model; defaults follow the scheduler (the seed's GPU for batch schedulers, an H100 otherwise)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    scheduler: SchedulerName = "continuous"
    latency: Literal["batch", "iteration"] | None = None
    batch_model: BatchModel = Field(default_factory=BatchModel)
    iteration_model: IterationModel = Field(default_factory=IterationModel)
    m_max_gb: float | None = Field(default=None, gt=0)
    m_model_gb: float | None = Field(default=None, ge=0)
    kv_gb_per_token: float | None = Field(default=None, gt=0)
    kv_capacity_tokens: int | None = Field(default=None, gt=0, description="overrides the memory arithmetic")
    block_size: int = Field(default=16, gt=0)
    # batch schedulers (seeds/004)
    static_batch: int = Field(default=8, gt=0)
    b_min: int = Field(default=1, gt=0)
    b_max: int = Field(default=128, gt=0)
    bins: int = Field(default=4, gt=0, le=1024)
    bin_selection: Literal["round_robin", "longest_queue"] = "round_robin"
    bin_key: Literal["output", "total"] = "total"  # the seed bins by "output"; see README
    d_sla_token: float = Field(default=0.010, gt=0, description="seconds per decoded token")
    d_sla_request: float = Field(default=20.0, gt=0, description="seconds per request")
    epsilon: float = Field(default=0.005, ge=0)
    # iteration schedulers
    max_num_seqs: int = Field(default=256, gt=0)
    max_batched_tokens: int = Field(default=8192, gt=0)
    token_budget: int = Field(default=512, gt=0)
    # output-length prediction: oracle, or oracle x lognormal(0, spread)
    prediction_noise: float = Field(default=0.0, ge=0)

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
            "iteration_model.per_decode_seq": (it.per_decode_seq, 0.0, False),
            "iteration_model.per_context_token": (it.per_context_token, 0.0, False),
        }
        for name, (value, lo, above) in bounds.items():
            if not math.isfinite(value) or value < lo or (above and value == lo):
                raise ValueError(
                    f"{name} must be a finite number {'above' if above else 'at least'} {lo:g}, got {value}"
                )
        if (b.name, it.name) != ("batch", "iteration"):
            raise ValueError("batch_model.name and iteration_model.name name the model: leave them out")
        if self.b_min > self.b_max:
            raise ValueError(f"b_min ({self.b_min}) must not exceed b_max ({self.b_max})")
        try:
            room = self.capacity()
        except OverflowError:
            room = 0
        if room < 1:
            raise ValueError(
                "the memory settings leave no room for a KV cache: raise m_max_gb or set kv_capacity_tokens"
            )
        return self

    @property
    def is_batch(self) -> bool:
        return self.scheduler in BATCH_SCHEDULERS

    def latency_model(self) -> LatencyModel:
        kind = self.latency or ("batch" if self.is_batch else "iteration")
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

    def describe(self) -> dict[str, object]:
        model = self.latency_model()
        return {**self.model_dump(mode="json"), "latency_model": model.name, "kv_capacity": self.capacity()}


def load_engine_config(path: Path) -> EngineConfig:
    """An EngineConfig from YAML/JSON, with a one-line error naming the bad field."""
    return load_model(EngineConfig, path, "engine config")


def predict_lengths(output: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Oracle output lengths, optionally with multiplicative log-normal noise (spread = sigma in log space)."""
    if noise <= 0:
        return output.astype(np.int64)
    rng = np.random.default_rng([seed, 0x9E3])
    return np.maximum(1, np.rint(output * rng.lognormal(0.0, noise, len(output)))).astype(np.int64)


def build_engines(config: EngineConfig, n: int, prompts: np.ndarray, predicted: np.ndarray) -> list[EngineCore]:
    """n engines; batch schedulers share one queue (the seed's GPU pool), iteration ones get one each."""
    latency = config.latency_model()
    cap = config.capacity()

    def scheduler():  # type: ignore[no-untyped-def]
        if config.scheduler == "static_fifo":
            return StaticFifo(config.static_batch)
        if config.scheduler == "dynamic_no_bins":
            return DynamicNoBins(cap, config.d_sla_token, config.epsilon, config.b_min, config.b_max)
        if config.scheduler == "multi_bin_dynamic":
            return MultiBinDynamic.for_workload(
                prompts,
                predicted,
                config.bins,
                cap,
                config.b_max,
                d_sla=config.d_sla_token,
                epsilon=config.epsilon,
                b_min=config.b_min,
                selection=config.bin_selection,
                key=config.bin_key,
            )
        if config.scheduler == "continuous":
            return ContinuousBatching(config.max_num_seqs, config.max_batched_tokens)
        return ChunkedPrefill(config.max_num_seqs, config.token_budget)

    if config.is_batch:
        shared = scheduler()
        return [EngineCore(shared, latency, cap, config.block_size, i) for i in range(n)]
    return [EngineCore(scheduler(), latency, cap, config.block_size, i) for i in range(n)]
