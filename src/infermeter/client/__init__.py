"""Backends: OpenAI-compatible completions and chat over SSE (client.backend is the seam).

The HTTP transport loads on first use, so naming the backends (the CLI's --backend) does not import aiohttp.
"""

from infermeter.client import reasons
from infermeter.lazy import lazy_exports

_FROM = dict.fromkeys(["ClientConfig", "OpenAIClient", "PreparedRequest"], "openai_sse")

__all__ = [*_FROM, "reasons"]

__getattr__ = lazy_exports(__name__, _FROM)
