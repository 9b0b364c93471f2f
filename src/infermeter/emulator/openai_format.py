"""OpenAI's API as the emulator reads and answers it: a request's JSON body, its prompt's tokens, the fields it may
hold; a reply's `object`, its usage, a stream's final event, and the errors (HTTP 400 and 422) a bad request gets."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from infermeter.emulator.engine_loop import Handle, offsets_from
from infermeter.emulator.tokenizer import EmulatorTokenizer


def prompt_tokens(body: dict[str, Any], tokenizer: EmulatorTokenizer) -> list[int]:
    """A completions prompt's tokens: text, or a list holding one text (pre-tokenized ids are taken as is)."""
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        if prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return list(prompt)
        prompt = prompt[0] if prompt and isinstance(prompt[0], str) else ""
    return tokenizer.completion(str(prompt))


def chat_tokens(body: dict[str, Any], tokenizer: EmulatorTokenizer) -> list[int]:
    """The chat messages' tokens under the tokenizer's chat template, or HTTP 400 saying what is wrong with them."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list")
    try:
        return tokenizer.chat(messages)
    except ValueError as exc:
        raise bad_request(str(exc)) from None


def final_event(
    rid: str,
    obj: str,
    created: int,
    model: str,
    chat: bool,
    times: list[float],
    received: float,
    headers_sent: float,
    handle: Handle,
) -> dict[str, Any]:
    """A stream's last event: finish_reason and the server's own token times (usage is added when asked for)."""
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "length", **({"delta": {}} if chat else {"text": ""})}],
        "infermeter": {
            "server_token_times": offsets_from(times, received),
            "response_start": round(headers_sent - received, 6),
            "cached_tokens": handle.req.cached,
        },
    }


def usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    """OpenAI usage; prompt_tokens_details only when some prompt tokens were cached, as vLLM leaves it out at 0."""
    counts: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        counts["prompt_tokens_details"] = {"cached_tokens": cached}
    return counts


def object_name(chat: bool, streamed: bool) -> str:
    """A reply's OpenAI `object`: a chat completion (each event of its stream a chunk) or a text completion."""
    if not chat:
        return "text_completion"
    return "chat.completion.chunk" if streamed else "chat.completion"


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request's JSON object, or HTTP 400 saying it is not one."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("request body is not JSON") from None
    if not isinstance(body, dict):
        raise bad_request("request body must be a JSON object")
    return body


def error_body(message: str) -> bytes:
    """An HTTP 400's JSON body, in OpenAI's error format."""
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "code": 400}})


# the request fields of OpenAI's API reference (completions and chat completions)
_COMMON_FIELDS = frozenset(
    {"model", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n", "presence_penalty", "seed", "stop",
     "stream", "stream_options", "temperature", "top_p", "user"}
)  # fmt: skip
COMPLETION_FIELDS = _COMMON_FIELDS | {"prompt", "best_of", "echo", "suffix"}
CHAT_FIELDS = _COMMON_FIELDS | {
    "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
    "response_format", "modalities", "audio", "metadata", "store", "reasoning_effort", "service_tier", "prediction",
}  # fmt: skip


def unprocessable(fields: list[str]) -> web.Response:
    """HTTP 422 as a pydantic-validated server (FastAPI, `transformers serve`) answers an unknown field."""
    detail = [{"type": "extra_forbidden", "loc": ["body", f], "msg": "Extra inputs are not permitted"} for f in fields]
    return web.json_response({"detail": detail}, status=422)


def bad_request(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=error_body(message).decode(), content_type="application/json")
