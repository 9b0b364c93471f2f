"""Endpoint URLs from a server's base URL: the path appended, the base's query (`?api-version=...`) kept."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def endpoint(base_url: str, path: str) -> str:
    """`http://h:8000/prefix?q=1` + `/v1/models` -> `http://h:8000/prefix/v1/models?q=1`."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))
