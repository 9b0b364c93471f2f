"""The OpenAI Responses API, streamed (client.apis): the body (messages as typed content parts, images after the last
user text) and `ResponsesDecoder`, which reads its typed events; the first non-empty output-text delta is
the first token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infermeter.client import reasons
from infermeter.client.events import EventDecoder, StreamFailure, count, error_text

if TYPE_CHECKING:
    from infermeter.client.media import MediaItem, MediaKind
    from infermeter.client.request import ClientConfig, PreparedRequest

TEXT_DELTAS = frozenset({"response.output_text.delta", "response.reasoning_text.delta"})  # reasoning counts as chat's
ENDS = frozenset({"response.completed", "response.incomplete"})
FAILURES = frozenset({"response.failed", "error"})
# incomplete_details.reason -> the finish_reason chat completions would name
FINISH = {"max_output_tokens": "length"}


def input_messages(req: PreparedRequest) -> list[dict[str, Any]]:
    """The request's conversation (or its prompt as one user message) as Responses input messages: the user's and the
    system's turns as input_text parts, the assistant's as plain text (a message's content list holds input parts
    only), and the request's images after the last user text."""
    turns = [(m.role, m.content) for m in req.messages] if req.messages is not None else [("user", req.prompt)]
    items: list[dict[str, Any]] = [
        {"role": role, "content": text if role == "assistant" else [{"type": "input_text", "text": text}]}
        for role, text in turns
    ]
    if req.media:
        users = [i for i, (role, _) in enumerate(turns) if role == "user"]
        if not users:
            items.append({"role": "user", "content": []})
            users = [len(items) - 1]
        items[users[-1]]["content"].extend(map(input_part, req.media))
    return items


def input_part(item: MediaItem) -> dict[str, Any]:
    """An image as a data URL: a Responses input_image part (the Responses API takes no audio in a message)."""
    if item.kind != "image":
        raise ValueError(f"the Responses API takes no {item.kind} in a message")
    return {"type": "input_image", "image_url": item.data_url, "detail": "auto"}


class ResponsesDecoder(EventDecoder):
    """Decodes one Responses API event stream: text deltas are content (one token each), response.completed or
    response.incomplete ends the reply with its usage, response.failed and error events are the server's failure."""

    unfinished = "no response.completed"

    def closed_complete(self) -> bool:
        return self.state.final

    def _event(self, event: dict[str, Any], now: float) -> None:
        kind = event.get("type")
        if kind in TEXT_DELTAS:
            text = event.get("delta")
            if not isinstance(text, str):
                raise TypeError(f"delta is a {type(text).__name__}, not text")
            self._chunk(text, 1, now)
            return
        if kind in ENDS:
            self._ended(event.get("response"))
        elif kind in FAILURES:
            response = event.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            raise StreamFailure(reasons.SERVER_ERROR_EVENT, error_text(error if error is not None else event))
        elif not isinstance(kind, str):
            raise TypeError(f"an event without a type: {kind!r}")
        self._no_content(now)

    def _ended(self, response: Any) -> None:
        """response.completed or response.incomplete: the reply is whole; its usage and why it stopped."""
        if not isinstance(response, dict):
            raise TypeError("no response object in the final event")
        state = self.state
        state.final = state.done = True  # the Responses API's own end of a stream (it sends no data: [DONE])
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if response.get("status") == "incomplete" or isinstance(reason, str):
            state.finish_reason = FINISH.get(reason, reason)[:40] if isinstance(reason, str) else "length"
        else:
            state.finish_reason = "stop"
        usage = response.get("usage")
        if isinstance(usage, dict):
            state.usage_completion = count(usage.get("output_tokens"))
            state.usage_prompt = count(usage.get("input_tokens"))


@dataclass(frozen=True)
class Responses:
    name: str = "responses"
    generates: bool = True
    templated: bool = True
    media: tuple[MediaKind, ...] = ("image",)
    ignores_eos: bool = True  # vLLM's extension of the API

    def path(self, config: ClientConfig) -> str:
        return "/v1/responses"

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": req.model or config.model,
            "input": input_messages(req),
            "max_output_tokens": req.max_tokens,
            "stream": True,
            "temperature": config.temperature,
        }
        if config.ignore_eos:
            body["ignore_eos"] = True
        return body

    def decoder(self, req: PreparedRequest, keep_text: bool) -> ResponsesDecoder:
        return ResponsesDecoder(keep_text)


RESPONSES = Responses()
