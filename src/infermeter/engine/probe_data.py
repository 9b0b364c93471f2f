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


class Turnaround(BaseModel):
    """A server serving one request at a time: from one request's last token to the next one's first."""

    prompt_tokens: int = Field(gt=0)
    seconds: float


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
    duration_s: float = 0.0
    notes: list[str] = Field(default_factory=list)
