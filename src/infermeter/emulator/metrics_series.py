"""What the SGLang, TGI and Triton metric dialects export beyond vLLM's series (kept only when one is chosen, so
vLLM's /metrics costs what it did): each request's inference and decode time, mean time per token, input and output
lengths; each engine step's duration, prefill or decode; inferences and steps counted."""

from __future__ import annotations

from infermeter.emulator.batch_histogram import TOKEN_BUCKETS, BatchHistogram
from infermeter.emulator.engine_loop import Handle
from infermeter.engine.step import Step


class DialectSeries:
    """The extra series, observed as requests finish and steps end."""

    def __init__(self, model: str) -> None:
        self.inference_time = BatchHistogram("inference", "First scheduled to last token.", model)
        self.decode_time = BatchHistogram("decode", "First token to last token.", model)
        self.mean_time_per_token = BatchHistogram("tpot", "A request's mean time per output token.", model)
        self.input_length = BatchHistogram("input", "Prompt tokens per request.", model, TOKEN_BUCKETS)
        self.generated = BatchHistogram("generated", "Output tokens per request.", model, TOKEN_BUCKETS)
        self.prefill_steps = BatchHistogram("prefill_step", "Duration of steps that prefill.", model)
        self.decode_steps = BatchHistogram("decode_step", "Duration of decode-only steps.", model)
        self.inferences = 0  # inputs served (a batch of embeddings counts each)
        self.steps = 0
        self.throughput_mark: tuple[float, float] | None = None  # (time, generated tokens) at the last scrape

    def generated_request(self, times: list[float], handle: Handle) -> None:
        """A finished generation request (times: its tokens' hand-out times)."""
        first, last, n = times[0], times[-1], len(times)
        scheduled = handle.req.first_scheduled
        self.inference_time.observe(max(last - (scheduled if scheduled >= 0 else handle.received), 0.0))
        self.decode_time.observe(last - first)
        if n > 1:
            self.mean_time_per_token.observe((last - first) / (n - 1))
        self.input_length.observe(handle.req.prompt)
        self.generated.observe(n)
        self.inferences += 1

    def pooled_request(self, started: float, done: float, prompts: list[int]) -> None:
        """A finished embeddings or rerank request: its inputs' prefill from `started` to `done`."""
        self.inference_time.observe(max(done - started, 0.0))
        self.input_length.observe(sum(prompts))
        self.inferences += len(prompts)

    def step(self, step: Step) -> None:
        """An engine step ended: a step with any prefill (a batch-level step always) counts as prefill."""
        self.steps += 1
        prefill = bool(step.plan.prefill) if step.plan is not None else True
        (self.prefill_steps if prefill else self.decode_steps).observe(step.duration)
