"""Backends: OpenAI-compatible completions and chat over SSE (client.backend is the seam).

The HTTP transport loads on first use, so naming the backends (the CLI's --backend) does not import aiohttp.
"""

import importlib
from typing import Any

from infermeter.client import reasons

__all__ = ["ClientConfig", "OpenAIClient", "PreparedRequest", "reasons"]


def __getattr__(name: str) -> Any:
    if name in ("ClientConfig", "OpenAIClient", "PreparedRequest"):
        return getattr(importlib.import_module("infermeter.client.openai_sse"), name)
    raise AttributeError(f"module 'infermeter.client' has no attribute {name!r}")
