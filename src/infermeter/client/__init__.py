"""Backends: OpenAI-compatible completions and chat over SSE (client.backend is the seam).

The HTTP transport loads on first use, so naming the backends (the CLI's --backend) does not import aiohttp.
"""

from typing import TYPE_CHECKING

from infermeter.client import reasons
from infermeter.lazy import lazy_exports

if TYPE_CHECKING:  # what the names below are, for type checkers (at run time they load on first use)
    from infermeter.client.openai_sse import OpenAIClient as OpenAIClient
    from infermeter.client.request import ClientConfig as ClientConfig
    from infermeter.client.request import PreparedRequest as PreparedRequest

_FROM = {"ClientConfig": "request", "OpenAIClient": "openai_sse", "PreparedRequest": "request"}

__all__ = [*_FROM, "reasons"]

__getattr__ = lazy_exports(__name__, _FROM)
