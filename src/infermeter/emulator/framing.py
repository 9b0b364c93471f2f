"""What every generation API's framing is told about a reply (`ReplyInfo`), and what a framing is (`Framing`): the
bytes of a stream's events before, per and after its tokens, its error event, and the whole reply when not streamed.
The engine's tokens are the same for every API (emulator/framed_stream.py writes them); only the framing differs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson


@dataclass(frozen=True)
class ReplyInfo:
    """One reply's identity and counts: its id, model, prompt tokens (media included), cached prompt tokens, the
    tokens it will stream, its creation time (Unix seconds)."""

    rid: str
    model: str
    prompt: int
    cached: int
    max_tokens: int
    created: int


class Framing(Protocol):
    """One API's reply, as bytes for a stream or an object for a whole reply."""

    done: bytes  # written after the closing events unless a fault says otherwise (b"": the body's end is the end)

    def opening(self) -> bytes:
        """The events before the first token (b"" when none)."""
        ...

    def token(self, k: int, piece: str, last: bool) -> bytes:
        """The event of token k (`last`: the reply's final token)."""
        ...

    def closing(self) -> bytes:
        """The events after the last token (b"" when none)."""
        ...

    def error(self, message: str) -> bytes:
        """An error event in this API's format."""
        ...

    def whole(self, text: str, tokens: int) -> Any:
        """The reply not streamed: a JSON-ready object."""
        ...


def sse(obj: Any, space: bool = True) -> bytes:
    """One SSE data event (`space`: "data: " rather than TGI's "data:")."""
    return (b"data: " if space else b"data:") + orjson.dumps(obj) + b"\n\n"


def named_sse(kind: str, obj: dict[str, Any]) -> bytes:
    """One SSE event with an `event:` line naming its type."""
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"
