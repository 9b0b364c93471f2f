"""Backends: OpenAI-compatible completions and chat over SSE."""

from infermeter.client import reasons
from infermeter.client.openai import ClientConfig, OpenAIClient, PreparedRequest

__all__ = ["ClientConfig", "OpenAIClient", "PreparedRequest", "reasons"]
