"""The bodies of the generation APIs beside OpenAI's chat and completions, read into one `Generation`: the Responses
API (chat messages, images and audio), TGI's /generate_stream and /generate, SGLang's /generate and Triton's generate
extension.  A bad body is HTTP 400 naming what is wrong.  Lengths the body leaves out default to 16 tokens, as the
emulator's OpenAI routes do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infermeter.emulator.framing import Framing, ReplyInfo
from infermeter.emulator.media_cost import media_tokens
from infermeter.emulator.native_framing import SglangFraming, TgiFraming, TritonFraming
from infermeter.emulator.openai_format import bad_request
from infermeter.emulator.responses_framing import ResponsesFraming, responses_messages
from infermeter.emulator.server import Emulator

DEFAULT_TOKENS = 16


@dataclass(frozen=True)
class Generation:
    """A generation request in any API: its prompt's text tokens, its media's prefill tokens, the tokens to
    generate, whether to stream, the reply's framing and its id's prefix."""

    tokens: list[int]
    media: int
    max_tokens: int
    stream: bool
    framing: Callable[[ReplyInfo], Framing]
    id_prefix: str

    @property
    def prompt(self) -> int:
        return len(self.tokens) + self.media


def responses_generation(body: dict[str, Any], em: Emulator) -> Generation:
    """POST /v1/responses: input messages under the chat template, their images and audio, max_output_tokens."""
    messages = responses_messages(body)
    try:
        tokens = em.tokenizer.chat(messages)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    return _checked(
        em,
        Generation(
            tokens,
            media_tokens(messages, em.media),
            _count(body.get("max_output_tokens"), "max_output_tokens"),
            _flag(body.get("stream", False), "stream"),
            lambda info: ResponsesFraming(info, body),
            "resp_",
        ),
    )


def tgi_generation(body: dict[str, Any], em: Emulator, stream: bool) -> Generation:
    """TGI: {"inputs": prompt, "parameters": {"max_new_tokens", "details", ...}}."""
    params = _params(body, "parameters")
    details = _flag(params.get("details", False), "parameters.details")
    return _checked(
        em,
        Generation(
            em.tokenizer.completion(_text(body, "inputs")),
            0,
            _count(params.get("max_new_tokens"), "parameters.max_new_tokens"),
            stream,
            lambda info: TgiFraming(info, em.tokenizer.reply_id, details),
            "tgi-",
        ),
    )


def sglang_generation(body: dict[str, Any], em: Emulator) -> Generation:
    """SGLang: {"text": prompt, "sampling_params": {"max_new_tokens", ...}, "stream"}."""
    params = _params(body, "sampling_params")
    return _checked(
        em,
        Generation(
            em.tokenizer.completion(_text(body, "text")),
            0,
            _count(params.get("max_new_tokens"), "sampling_params.max_new_tokens"),
            _flag(body.get("stream", False), "stream"),
            SglangFraming,
            "",
        ),
    )


def triton_generation(body: dict[str, Any], em: Emulator, stream: bool) -> Generation:
    """Triton's generate extension: {"text_input": prompt, "max_tokens", ...}."""
    return _checked(
        em,
        Generation(
            em.tokenizer.completion(_text(body, "text_input")),
            0,
            _count(body.get("max_tokens"), "max_tokens"),
            stream,
            TritonFraming,
            "triton-",
        ),
    )


def _checked(em: Emulator, g: Generation) -> Generation:
    """The request, or HTTP 400 when it exceeds the model's context."""
    if (too_long := em.too_long(g.prompt, g.max_tokens)) is not None:
        raise bad_request(too_long)
    return g


def _text(body: dict[str, Any], key: str) -> str:
    text = body.get(key)
    if not isinstance(text, str) or not text:
        raise bad_request(f"'{key}' must be a non-empty text")
    return text


def _params(body: dict[str, Any], key: str) -> dict[str, Any]:
    params = body.get(key)
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise bad_request(f"'{key}' must be an object")
    return params


def _count(value: Any, name: str) -> int:
    if value is None:
        return DEFAULT_TOKENS
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise bad_request(f"'{name}' must be an integer of at least 1")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise bad_request(f"'{name}' must be true or false")
    return value
