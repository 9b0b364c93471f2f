"""Server-sent events: split a byte stream into `data:` payloads, reporting anything malformed."""

from __future__ import annotations

from dataclasses import dataclass, field

IGNORED_FIELDS = (b"event:", b"id:", b"retry:")


class SSEError(ValueError):
    """A line that is not valid server-sent events."""


@dataclass
class SSEParser:
    """Feed bytes as they arrive; get back the complete `data:` payloads in order.

    A malformed line stops parsing: `feed` returns the payloads before it and sets `error`; `check()` raises it.
    """

    _partial: bytes = b""
    lines: int = field(default=0)
    error: str | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._partial + chunk if self._partial else chunk
        parts = buf.split(b"\n")
        self._partial = parts.pop()
        out: list[bytes] = []
        for line in parts:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line or line[0] == 58:  # blank line ends an event; ':' starts a comment (keep-alive)
                continue
            self.lines += 1
            if line.startswith(b"data:"):
                out.append(line[6:] if line[5:6] == b" " else line[5:])
            elif not line.startswith(IGNORED_FIELDS):
                self.error = f"malformed SSE line: {line[:80]!r}"
                break
        return out

    def check(self) -> None:
        if self.error is not None:
            raise SSEError(self.error)

    @property
    def pending(self) -> bytes:
        """Bytes after the last newline (a stream that ends here was cut mid-line)."""
        return self._partial
