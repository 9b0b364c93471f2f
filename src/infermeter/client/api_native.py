"""Engines' own streaming endpoints (client.apis): Text Generation Inference's /generate_stream, SGLang's /generate
and Triton's generate extension (/v2/models/M/generate_stream).  Each sends the raw prompt (no chat template) and
reads its engine's SSE events into a record's chunks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from infermeter.client import reasons
from infermeter.client.events import EventDecoder, StreamFailure, count

if TYPE_CHECKING:
    from infermeter.client.media import MediaKind
    from infermeter.client.request import ClientConfig, PreparedRequest

# TGI's details.finish_reason -> the finish_reason OpenAI's APIs would name
TGI_FINISH = {"eos_token": "stop", "stop_sequence": "stop", "length": "length"}
TRITON_DEFAULT_MODEL = "ensemble"  # the model TensorRT-LLM's Triton repository serves the whole pipeline as


class TgiDecoder(EventDecoder):
    """TGI /generate_stream: one event per token ({"token": {"text", "special"}}); a special token is not content;
    the event whose `generated_text` is not null is the last, its `details` saying why and how many tokens."""

    unfinished = "no event with generated_text"

    def closed_complete(self) -> bool:
        return self.state.final

    def _event(self, event: dict[str, Any], now: float) -> None:
        token = event.get("token")
        if token is not None:
            if not isinstance(token, dict):
                raise TypeError(f"token is a {type(token).__name__}, not an object")
            text = token.get("text") or ""
            if not isinstance(text, str):
                raise TypeError(f"token text is a {type(text).__name__}, not text")
            if token.get("special") is True:
                self._no_content(now)
            else:
                self._chunk(text, 1, now)
        else:
            self._no_content(now)
        if event.get("generated_text") is not None:
            self._ended(event.get("details"))

    def _ended(self, details: Any) -> None:
        state = self.state
        state.final = state.done = True  # TGI's own end of a stream (it sends no data: [DONE])
        if isinstance(details, dict):
            reason = details.get("finish_reason")
            if isinstance(reason, str):
                state.finish_reason = TGI_FINISH.get(reason, reason[:40])
            state.usage_completion = count(details.get("generated_tokens"))


class SglangDecoder(EventDecoder):
    """SGLang /generate: each event's `text` is the whole output so far; its new suffix is the content, carrying as
    many tokens as meta_info.completion_tokens grew since the last chunk recorded (one when not given)."""

    unfinished = "no finish_reason"

    def __init__(self, keep_text: bool = False) -> None:
        super().__init__(keep_text)
        self._chars = 0  # length of the text received so far
        self._counted = 0  # completion tokens the recorded chunks account for

    def _event(self, event: dict[str, Any], now: float) -> None:
        state = self.state
        meta = event.get("meta_info")
        meta = meta if isinstance(meta, dict) else {}
        total = count(meta.get("completion_tokens"))
        if total is not None:
            state.usage_completion = total
        prompt = count(meta.get("prompt_tokens"))
        if prompt is not None:
            state.usage_prompt = prompt
        cached = count(meta.get("cached_tokens"))
        if cached is not None:
            state.server.cached_tokens = cached
        reason = meta.get("finish_reason")
        if reason is not None:
            kind = reason.get("type") if isinstance(reason, dict) else reason
            if kind == "abort":  # SGLang ended the request itself (e.g. out of memory, a client abort)
                message = reason.get("message") if isinstance(reason, dict) else None
                raise StreamFailure(reasons.SERVER_ERROR_EVENT, f"aborted: {message or 'no message'}"[:200])
            state.finish_reason = kind[:40] if isinstance(kind, str) else None
            state.final = True
        text = event.get("text")
        if not isinstance(text, str):
            raise TypeError(f"text is a {type(text).__name__}, not text")
        if len(text) < self._chars:
            raise ValueError(f"the output so far shrank from {self._chars} to {len(text)} characters")
        piece, self._chars = text[self._chars :], len(text)
        grown = (total - self._counted) if total is not None else 0
        if self._chunk(piece, grown if grown > 0 else 1, now) or not state.content_started:
            self._counted = total if total is not None else self._counted


class TritonDecoder(EventDecoder):
    """Triton's generate_stream: one event per piece of new text (`text_output`), one token each; no marker ends
    it, so a body that ends cleanly is complete and one cut short is not."""

    unfinished = "no text_output"

    def end(self) -> None:
        """The body ended: complete unless it stopped mid-line or carried no text at all."""
        if self.parser.pending.strip() or not self.state.content_started:
            super().end()

    def closed_complete(self) -> bool:
        """No marker ends the stream: only the body's own end (the last chunk, or the close that frames it) does, and
        a connection cut before it lost the rest of the reply."""
        return False

    def _event(self, event: dict[str, Any], now: float) -> None:
        text = event.get("text_output")
        if text is None:
            self._no_content(now)
            return
        if not isinstance(text, str):
            raise TypeError(f"text_output is a {type(text).__name__}, not text")
        self._chunk(text, 1, now)


@dataclass(frozen=True)
class Tgi:
    name: str = "tgi"
    generates: bool = True
    templated: bool = False
    media: tuple[MediaKind, ...] = ()
    ignores_eos: bool = False  # TGI has no such parameter: replies may stop at EOS

    def path(self, config: ClientConfig) -> str:
        return "/generate_stream"

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        # TGI refuses a temperature of 0: greedy decoding is do_sample false without one; TGI has no ignore_eos
        parameters: dict[str, Any] = {"max_new_tokens": req.max_tokens, "details": True}
        if config.temperature > 0:
            parameters["temperature"] = config.temperature
        parameters["do_sample"] = config.temperature > 0
        return {"inputs": req.prompt, "parameters": parameters}

    def decoder(self, req: PreparedRequest, keep_text: bool) -> TgiDecoder:
        return TgiDecoder(keep_text)


@dataclass(frozen=True)
class Sglang:
    name: str = "sglang"
    generates: bool = True
    templated: bool = False
    media: tuple[MediaKind, ...] = ()
    ignores_eos: bool = True

    def path(self, config: ClientConfig) -> str:
        return "/generate"

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        params: dict[str, Any] = {"max_new_tokens": req.max_tokens, "temperature": config.temperature}
        if config.ignore_eos:
            params["ignore_eos"] = True
        return {"text": req.prompt, "sampling_params": params, "stream": True}

    def decoder(self, req: PreparedRequest, keep_text: bool) -> SglangDecoder:
        return SglangDecoder(keep_text)


@dataclass(frozen=True)
class Triton:
    name: str = "triton"
    generates: bool = True
    templated: bool = False
    media: tuple[MediaKind, ...] = ()
    ignores_eos: bool = True  # as min_length = max_tokens (TensorRT-LLM)

    def path(self, config: ClientConfig) -> str:
        return f"/v2/models/{quote(config.model, safe='')}/generate_stream"

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        body: dict[str, Any] = {
            "text_input": req.prompt,
            "max_tokens": req.max_tokens,
            "stream": True,
            "temperature": config.temperature,
        }
        if config.ignore_eos:  # TensorRT-LLM has no ignore_eos: a reply at least max_tokens long runs to the cap
            body["min_length"] = req.max_tokens
        return body

    def decoder(self, req: PreparedRequest, keep_text: bool) -> TritonDecoder:
        return TritonDecoder(keep_text)


TGI = Tgi()
SGLANG = Sglang()
TRITON = Triton()
