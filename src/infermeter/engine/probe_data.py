"""What a black-box probe of a live server measured, over its normal API: the inputs of the calibration's fits."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PrefillPoint(BaseModel):
    """An isolated request (nothing else on the server): its prompt's tokens and the median TTFT of its repeats."""

    prompt_tokens: int = Field(gt=0)
    ttft_s: float = Field(gt=0)


class DecodePoint(BaseModel):
    """Decode steps measured while `batch` sequences held `context_tokens` of KV: their trimmed mean step time."""

    batch: int = Field(gt=0)
    context_tokens: float = Field(ge=0)
    step_s: float = Field(gt=0)
    gaps: int = Field(gt=0, description="inter-token gaps averaged")


class PrefixCacheProbe(BaseModel):
    """The same prompt sent twice in a row, alone: a prefix cache serves the second from KV it kept."""

    prompt_tokens: int
    first_ttft_s: float
    second_ttft_s: float

    @property
    def present(self) -> bool:
        return self.second_ttft_s < 0.6 * self.first_ttft_s


class Interference(BaseModel):
    """A prompt sent while another request decoded alone: where the running request's nearest token came relative
    to the newcomer's first token.  An engine that mixes prompt chunks into its decode steps (llama-server, vLLM v1,
    Sarathi) ends both in the same step (offset ~0); one that runs prefills in steps of their own (vLLM v0) gives
    the running request its next token a decode step later."""

    offset_s: float  # the running request's token nearest the newcomer's first token, minus that first token
    step_s: float  # the running request's median inter-token gap: what the offset is judged against
    # the scene, for the simulator to replay (None in probes of earlier versions): the running request's prompt and
    # output, the newcomer's prompt and when it was sent after the running one, and the running request's longest
    # gap between the newcomer's sending and its first token (a prefill in one step stalls it for the whole prompt,
    # chunks of a small budget only a chunk at a time)
    running_prompt: int | None = None
    running_output: int | None = None
    prompt_tokens: int | None = None
    delay_s: float | None = None
    stall_s: float | None = None
    newcomer_ttft_s: float | None = None  # the newcomer's TTFT, beside the running request


class Turnaround(BaseModel):
    """A server serving one request at a time: from one request's last token to the next one's first."""

    prompt_tokens: int = Field(gt=0)
    seconds: float


class SentTogether(BaseModel):
    """Long prompts sent at once to an idle server: each one's TTFT, in order.  A token budget per step smaller than
    their sum prefills them a step or more apart; a larger one, together."""

    prompt_tokens: int = Field(gt=0)
    ttfts_s: list[float] = Field(min_length=2)


class ClosedLoop(BaseModel):
    """`concurrency` requests kept in flight (each completion sends the next) until `requests` were sent: the server at
    saturation, where whatever it spends per request beyond its engine steps (the API's work for a request's arrival
    and its last reply, on the engine's CPU) costs throughput."""

    prompt_tokens: int = Field(gt=0)
    output_tokens: int = Field(gt=0)
    concurrency: int = Field(gt=0)
    requests: int = Field(gt=0, description="requests sent, every one completed")
    duration_s: float = Field(gt=0, description="from the first sending to the last completion")


class ProbeData(BaseModel):
    """What a black-box probe measured: the inputs of `fit_engine`."""

    model_config = ConfigDict(extra="forbid")
    source: str
    prefill: list[PrefillPoint]
    decode: list[DecodePoint]
    turnarounds: list[Turnaround] = Field(default_factory=list)
    interference: list[Interference] = Field(default_factory=list)
    largest_batch: int = Field(gt=0, description="most sequences seen streaming at once")
    most_sent: int = Field(gt=0, description="most requests the probe sent at once")
    kv_capacity_tokens: int | None = None
    kv_capacity_source: str = "not measured"
    prefix_cache: PrefixCacheProbe | None = None
    closed_loops: list[ClosedLoop] = Field(default_factory=list)
    together: list[SentTogether] = Field(default_factory=list)
    duration_s: float = 0.0
    notes: list[str] = Field(default_factory=list)
