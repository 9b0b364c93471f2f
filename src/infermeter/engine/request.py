"""A request as the engine model sees it: lengths, prediction, and progress through the engine."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True, eq=False)
class EngineRequest:
    idx: int  # position in the run's workload
    arrival: float
    prompt: int
    output: int  # tokens it will generate before stopping (the engine model knows; schedulers must not peek)
    predicted: int  # what a length predictor says output will be (schedulers may use this)
    request_class: str = ""
    generated: int = 0
    prefilled: int = 0  # tokens of prefill_target done in the current admission
    prefill_target: int = 0  # prompt, or prompt + generated when readmitted after preemption
    kv: int = 0  # tokens whose KV is cached
    blocks: int = 0  # KV blocks held
    first_scheduled: float = -1.0
    preemptions: int = 0
    admitted: int = -1  # admission order, for preemption victims (latest admitted goes first)
    cached: int = 0  # leading prompt tokens found in a prefix cache: held in KV, never prefilled
    priority: int = 0  # lower is served first by schedulers that order by priority (vLLM's convention)

    def __post_init__(self) -> None:
        self.prefill_target = self.prompt - self.cached

    @property
    def total_len(self) -> int:
        return self.prompt + self.output

    @property
    def prefilling(self) -> bool:
        return self.prefilled < self.prefill_target


def predict_lengths(output: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Oracle output lengths, optionally with multiplicative log-normal noise (spread = sigma in log space)."""
    if noise <= 0:
        return output.astype(np.int64, copy=False)
    rng = np.random.default_rng([seed, 0x9E3])
    return np.maximum(1, np.rint(output * rng.lognormal(0.0, noise, len(output)))).astype(np.int64)
