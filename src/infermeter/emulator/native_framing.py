"""The engines' native generation APIs as the emulator answers them: Text Generation Inference (/generate_stream,
/generate), SGLang (/generate: cumulative text per event, then [DONE]) and Triton's generate extension
(/v2/models/M/generate_stream and /generate: one text_output per token).  The emulator generates exactly the tokens
asked for, so every reply ends for its length."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infermeter.emulator.framing import ReplyInfo, sse


class TgiFraming:
    """TGI: one `data:` event per token; the last carries the whole text and the details."""

    done = b""

    def __init__(self, info: ReplyInfo, token_id: Callable[[int], int], details: bool) -> None:
        self.info, self.token_id, self.details = info, token_id, details
        self.text: list[str] = []

    def opening(self) -> bytes:
        return b""

    def token(self, k: int, piece: str, last: bool) -> bytes:
        self.text.append(piece)
        event = {
            "index": k,
            "token": {"id": self.token_id(k), "text": piece, "logprob": 0.0, "special": False},
            "generated_text": "".join(self.text) if last else None,
            "details": self._details(k + 1) if last and self.details else None,
        }
        return sse(event, space=False)

    def closing(self) -> bytes:
        return b""

    def error(self, message: str) -> bytes:
        return sse({"error": message, "error_type": "generation"}, space=False)

    def whole(self, text: str, tokens: int) -> dict[str, Any]:
        reply: dict[str, Any] = {"generated_text": text}
        if self.details:
            reply["details"] = self._details(tokens)
        return reply

    @staticmethod
    def _details(tokens: int) -> dict[str, Any]:
        return {"finish_reason": "length", "generated_tokens": tokens, "seed": None}


class SglangFraming:
    """SGLang: each event holds the whole text so far and meta_info; the last its finish_reason; then [DONE]."""

    done = b"data: [DONE]\n\n"

    def __init__(self, info: ReplyInfo) -> None:
        self.info = info
        self.text: list[str] = []

    def opening(self) -> bytes:
        return b""

    def token(self, k: int, piece: str, last: bool) -> bytes:
        self.text.append(piece)
        return sse({"text": "".join(self.text), "meta_info": self._meta(k + 1, last)})

    def closing(self) -> bytes:
        return b""

    def error(self, message: str) -> bytes:
        return sse({"error": {"message": message}})

    def whole(self, text: str, tokens: int) -> dict[str, Any]:
        return {"text": text, "meta_info": self._meta(tokens, True)}

    def _meta(self, tokens: int, last: bool) -> dict[str, Any]:
        info = self.info
        return {
            "id": info.rid,
            "prompt_tokens": info.prompt,
            "completion_tokens": tokens,
            "cached_tokens": info.cached,
            "finish_reason": {"type": "length", "length": tokens} if last else None,
        }


class TritonFraming:
    """Triton's generate extension: one event per token with that token's text."""

    done = b""

    def __init__(self, info: ReplyInfo) -> None:
        self.info = info

    def opening(self) -> bytes:
        return b""

    def token(self, k: int, piece: str, last: bool) -> bytes:
        return sse(self.whole(piece, 1))

    def closing(self) -> bytes:
        return b""

    def error(self, message: str) -> bytes:
        return sse({"error": message})

    def whole(self, text: str, tokens: int) -> dict[str, Any]:
        return {"model_name": self.info.model, "model_version": "1", "text_output": text}
