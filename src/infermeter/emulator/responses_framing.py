"""The OpenAI Responses API as the emulator answers it: the request's input as chat messages, and the reply as the
typed events of a stream (response.created ... response.incomplete) or as the final response object.

The emulator generates exactly max_output_tokens tokens, so a reply ends as OpenAI ends one cut by that limit:
status "incomplete" with incomplete_details.reason "max_output_tokens"."""

from __future__ import annotations

from typing import Any

from infermeter.emulator.framing import ReplyInfo, named_sse
from infermeter.emulator.openai_format import bad_request


def responses_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's `instructions` and `input` (a text, or messages whose content is a text or typed parts) as chat
    messages; HTTP 400 when there is no input or an item is not a message."""
    raw = body.get("input")
    if isinstance(raw, str) and raw:
        messages: list[dict[str, Any]] = [{"role": "user", "content": raw}]
    elif isinstance(raw, list) and raw:
        messages = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str | list):
                raise bad_request(f"input {i} must be a message with a role and content")
            messages.append({"role": str(item.get("role", "user")), "content": item["content"]})
    else:
        raise bad_request("'input' must be a non-empty text or a non-empty list of messages")
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise bad_request("'instructions' must be a text")
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


class ResponsesFraming:
    """One reply's events, numbered in order (sequence_number) as OpenAI numbers them."""

    done = b""

    def __init__(self, info: ReplyInfo, body: dict[str, Any]) -> None:
        self.info = info
        self.item_id = "msg_" + info.rid.removeprefix("resp_")
        self.temperature = body.get("temperature", 1.0)
        self.seq = 0
        self.text: list[str] = []

    def opening(self) -> bytes:
        item = self._item("in_progress", [])
        part = {"type": "output_text", "text": "", "annotations": []}
        return (
            self._event("response.created", response=self._response("in_progress", [], None))
            + self._event("response.in_progress", response=self._response("in_progress", [], None))
            + self._event("response.output_item.added", output_index=0, item=item)
            + self._event("response.content_part.added", **self._where(), part=part)
        )

    def token(self, k: int, piece: str, last: bool) -> bytes:
        self.text.append(piece)
        return self._event("response.output_text.delta", **self._where(), delta=piece, logprobs=[])

    def closing(self) -> bytes:
        text = "".join(self.text)
        part = self._part(text)
        item = self._item("completed", [part])
        final = self._response("incomplete", [item], len(self.text))
        return (
            self._event("response.output_text.done", **self._where(), text=text, logprobs=[])
            + self._event("response.content_part.done", **self._where(), part=part)
            + self._event("response.output_item.done", output_index=0, item=item)
            + self._event("response.incomplete", response=final)
        )

    def error(self, message: str) -> bytes:
        return self._event("error", code="server_error", message=message, param=None)

    def whole(self, text: str, tokens: int) -> dict[str, Any]:
        return self._response("incomplete", [self._item("completed", [self._part(text)])], tokens)

    def _event(self, kind: str, **fields: Any) -> bytes:
        event = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return named_sse(kind, event)

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "output_index": 0, "content_index": 0}

    @staticmethod
    def _part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def _item(self, status: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self.item_id, "type": "message", "status": status, "role": "assistant", "content": content}

    def _response(self, status: str, output: list[dict[str, Any]], tokens: int | None) -> dict[str, Any]:
        info = self.info
        usage = None
        if tokens is not None:
            usage = {
                "input_tokens": info.prompt,
                "input_tokens_details": {"cached_tokens": info.cached},
                "output_tokens": tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": info.prompt + tokens,
            }
        return {
            "id": info.rid,
            "object": "response",
            "created_at": info.created,
            "status": status,
            "model": info.model,
            "output": output,
            "usage": usage,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": None,
            "max_output_tokens": info.max_tokens,
            "parallel_tool_calls": True,
            "temperature": self.temperature,
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
        }
