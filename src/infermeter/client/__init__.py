"""Backends: OpenAI-compatible completions and chat over SSE."""

from infermeter.client import reasons
from infermeter.client.openai_sse import ClientConfig, OpenAIClient, PreparedRequest

__all__ = ["ClientConfig", "OpenAIClient", "PreparedRequest", "reasons"]
