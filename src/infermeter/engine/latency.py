"""Latency models of one serving engine, behind one Protocol so any scheduler can run on any model.

Batch schedulers ask for whole-batch quantities (ttft, tbt, batch_time); iteration-level schedulers ask for
the time of one step.  Each model answers both, from its own parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from infermeter.units import S_PER_MS


class LatencyModel(Protocol):
    @property
    def name(self) -> str:
        """The model's kind: "batch" or "iteration" (read-only: a frozen model's field)."""
        ...

    def ttft(self, b: int, prompt_tokens: int) -> float:
        """Seconds from batch start to the first token of a batch of b requests holding prompt_tokens in all."""
        ...

    def tbt(self, b: int, context_tokens: float) -> float:
        """Seconds between consecutive tokens while b sequences holding context_tokens decode together."""
        ...

    def batch_time(self, b: int, max_len: int, prompt_tokens: int) -> float:
        """Seconds the engine is busy serving a static batch whose longest request is max_len tokens."""
        ...

    def step_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: int = 0) -> float:
        """Seconds of one engine iteration (continuous batching); `prefill_pairs`: (prompt token, token it attends
        to) pairs its prefill chunks compute (`attention_pairs`)."""
        ...

    def after_requests(self, finished: int, prompt_tokens: int = 0) -> float:
        """Seconds the engine still works after `finished` requests holding `prompt_tokens` in all completed, before
        its next step."""
        ...

    def arrival_cost(self, prompt_tokens: int) -> float:
        """Seconds a request with `prompt_tokens` takes from the engine when it arrives during a step (the next one
        starts that much later)."""
        ...


@dataclass(frozen=True)
class BatchModel:
    """seeds/004: T(b, L) = alpha + beta * L * h(b), h(b) = 1 + gamma * (b - 1) / b; TTFT = alpha, TBT = beta * h(b).

    Defaults are the seed's calibration (Qwen3-1.7B FP16 on an RTX 4080, R^2 0.9995).  As an iteration model a
    step that starts prefills costs alpha and a step decoding d sequences costs beta * h(d).
    """

    alpha: float = 59.653 * S_PER_MS
    beta: float = 5.742 * S_PER_MS
    gamma: float = 0.316
    name: str = "batch"

    def h(self, b: int) -> float:
        return 1.0 + self.gamma * (b - 1) / b if b > 0 else 1.0

    def ttft(self, b: int, prompt_tokens: int) -> float:
        return self.alpha

    def tbt(self, b: int, context_tokens: float) -> float:
        return self.beta * self.h(b)

    def batch_time(self, b: int, max_len: int, prompt_tokens: int) -> float:
        return self.alpha + self.beta * max_len * self.h(b)

    def after_requests(self, finished: int, prompt_tokens: int = 0) -> float:
        return 0.0

    def arrival_cost(self, prompt_tokens: int) -> float:
        return 0.0

    def step_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: int = 0) -> float:
        t = self.alpha if prefill_tokens > 0 else 0.0
        return t + (self.beta * self.h(decode_seqs) if decode_seqs > 0 else 0.0)


def attention_pairs(chunk: int, held: int) -> int:
    """(prompt token, token it attends to) pairs of a prefill chunk of `chunk` tokens after `held` tokens of KV: each
    token attends to the KV before it and to itself (causal attention), so a whole prompt of P tokens computes
    P (P + 1) / 2 however it is chunked."""
    return chunk * held + chunk * (chunk + 1) // 2


@dataclass(frozen=True)
class IterationModel:
    """One continuous-batching step: fixed + per prefill token + per decoding sequence (to the power
    batch_exponent) + per context token held.

    Defaults model a Llama-3-8B-class model in FP16 on one H100 SXM (3.35 TB/s HBM, ~990 dense TFLOP/s):
    - fixed 6.0 ms: reading 16 GB of weights once per step takes ~4.8 ms at full bandwidth, plus launch and
      sampling overhead; this is the decode step time at batch 1 (~160 tok/s single-stream, as public vLLM
      runs of 8B models on H100 report);
    - 0.045 ms per prefill token: 2 x 8e9 = 16 GFLOP per token at ~360 TFLOP/s achieved (about 36% MFU), so
      a 1,000-token prompt prefills in ~51 ms;
    - 0.03 ms per decoding sequence: sampling, the LM head and per-sequence bookkeeping;
    - 4e-5 ms per context token: attention reads 128 KiB of KV per token (32 layers x 8 KV heads x 128 dims
      x K and V x 2 bytes) at ~3.3 TB/s, so 100k cached tokens add ~4 ms to a step;
    - 0 per prefill attention pair: prefill attention's compute (~0.5 MFLOP a pair, 1.5e-9 ms at the rate above)
      is a fraction of a millisecond below 10k-token prompts on an H100; a CPU or a small model's prefill is
      visibly quadratic, and `calibrate` fits it where the probe's prompts show it.
    """

    fixed: float = 6.0 * S_PER_MS
    per_prefill_token: float = 0.045 * S_PER_MS
    per_decode_seq: float = 0.03 * S_PER_MS
    per_context_token: float = 4e-5 * S_PER_MS
    # engine time after each request completes, before the next step (a server serving one at a time spends it
    # between requests: detokenizing, releasing its slot; an API server sharing the engine's CPU, its work for the
    # request's arrival and last reply); 0 for the GPU engines modelled by default
    per_request: float = 0.0
    # ... and per token of its prompt (an API server sharing the engine's CPU parses and tokenizes each prompt)
    per_request_token: float = 0.0
    # engine time each request's arrival takes while a step runs (an API server sharing the engine's CPU parses and
    # tokenizes the request meanwhile): the next step starts that much later; and per token of its prompt
    per_arrival: float = 0.0
    per_arrival_token: float = 0.0
    # how the decode cost grows with the batch: per_decode_seq * b ** batch_exponent.  1 is linear (sampling and
    # bookkeeping per sequence); below 1 the batch's rows share the weight reads and kernel launches, as a small
    # model's step on a GPU or a CPU does until compute saturates
    batch_exponent: float = 1.0
    # seconds per (prompt token, token it attends to) pair in prefill: attention's compute, which grows as the
    # prompt squared (`attention_pairs`)
    per_prefill_pair: float = 0.0
    name: str = "iteration"

    def decode_cost(self, decode_seqs: int | float) -> float:
        """Seconds a step spends on its decoding sequences (beyond `fixed` and the context)."""
        if decode_seqs <= 0:
            return 0.0
        if self.batch_exponent == 1.0:
            return self.per_decode_seq * decode_seqs
        return self.per_decode_seq * float(decode_seqs) ** self.batch_exponent

    def step_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: int = 0) -> float:
        return (
            self.fixed
            + self.per_prefill_token * prefill_tokens
            + self.per_prefill_pair * prefill_pairs
            + self.decode_cost(decode_seqs)
            + self.per_context_token * context_tokens
        )

    def after_requests(self, finished: int, prompt_tokens: int = 0) -> float:
        return self.per_request * finished + self.per_request_token * prompt_tokens

    def arrival_cost(self, prompt_tokens: int) -> float:
        return self.per_arrival + self.per_arrival_token * prompt_tokens

    def ttft(self, b: int, prompt_tokens: int) -> float:
        each = prompt_tokens // max(b, 1)  # b prompts of equal length prefilled together
        return self.step_time(prompt_tokens, 0, prompt_tokens, max(b, 1) * attention_pairs(each, 0))

    def tbt(self, b: int, context_tokens: float) -> float:
        return self.step_time(0, b, int(context_tokens))

    def batch_time(self, b: int, max_len: int, prompt_tokens: int) -> float:
        # prefill, then max_len - 1 decode steps with all b sequences (a static batch runs to its longest);
        # context grows by b per step: sum over k of (prompt + b k) in closed form
        steps = max(max_len - 1, 0)
        decode = steps * (self.fixed + self.decode_cost(b) + self.per_context_token * prompt_tokens)
        decode += self.per_context_token * b * steps * (steps + 1) / 2
        return self.ttft(b, prompt_tokens) + decode
