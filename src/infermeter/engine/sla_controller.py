"""seeds/004 Algorithms 1-2: the memory bound b_mem and the SLA controller's b_SLA for dynamic batching."""

from __future__ import annotations

from dataclasses import dataclass

EMA = 0.2
STEP = 4  # alpha_step: interval expansion / contraction
NUDGE = 2  # delta_step: corrective step
SAFETY = 0.1  # rho: 10% of the token capacity kept free


@dataclass
class LengthStats:
    """EMA of prompt and output lengths, updated after each batch with the batch's means."""

    prompt: float | None = None
    output: float | None = None

    def update(self, mean_prompt: float, mean_output: float) -> None:
        if self.prompt is None or self.output is None:
            self.prompt, self.output = mean_prompt, mean_output
        else:
            self.prompt = EMA * mean_prompt + (1 - EMA) * self.prompt
            self.output = EMA * mean_output + (1 - EMA) * self.output

    @property
    def total(self) -> float | None:
        return None if self.prompt is None or self.output is None else self.prompt + self.output


def b_mem(capacity_tokens: int, expected_len: float, b_min: int, b_max: int) -> int:
    """Algorithm 1: floor((eta - 0.1 eta) / E[l_total]), clamped to [B_MIN, B_MAX]."""
    if expected_len <= 0:
        return b_max
    b = int((capacity_tokens - SAFETY * capacity_tokens) // expected_len)
    return max(b_min, min(b, b_max))


@dataclass
class SlaController:
    """Algorithm 2: keeps an interval [b_low, b_high] around a batch size meeting the decode-TBT SLA.

    The seed leaves the start open.  It starts optimistic: interval [B_MIN, B_MAX], b_avg = B_MAX and no latency
    seen yet (tau_avg = 0, the "too fast" case), so the first batches are as large as memory allows and the
    SLA pulls the size down only when decode TBT actually exceeds D_SLA + epsilon.
    """

    d_sla: float  # seconds per token
    epsilon: float  # tolerance band, seconds
    b_min: int = 1
    b_max: int = 128

    def __post_init__(self) -> None:
        self.b_low = float(self.b_min)
        self.b_high = float(self.b_max)
        self.tau_avg = 0.0
        self.b_avg = float(self.b_max)

    def target(self) -> int:
        if self.tau_avg > self.d_sla + self.epsilon:  # too slow: shrink to the left
            self.b_high = max(self.b_avg, self.b_low + STEP)
            self.b_low = max(self.b_low - NUDGE, self.b_min)
        elif self.tau_avg < self.d_sla - self.epsilon:  # fast: expand to the right
            self.b_low = min(self.b_avg, self.b_high - STEP)
            self.b_high = min(self.b_high + NUDGE, self.b_max)
        else:  # within tolerance: centre on the average
            self.b_high = min(self.b_avg + STEP / 2, self.b_max)
            self.b_low = max(self.b_avg - STEP / 2, self.b_min)
        return max(self.b_min, min(int((self.b_low + self.b_high) // 2), self.b_max))

    def update(self, recent_tbt: float, recent_batch: int) -> None:
        self.tau_avg = EMA * recent_tbt + (1 - EMA) * self.tau_avg
        self.b_avg = EMA * recent_batch + (1 - EMA) * self.b_avg
