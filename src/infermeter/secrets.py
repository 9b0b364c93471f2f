"""API keys never leave the process: every text infermeter writes or prints passes through `redact`.

The key itself is registered when it is read (from $OPENAI_API_KEY or the variable --api-key-env names); besides
exact matches, bearer tokens, credentials in URLs and the common key shapes (sk-..., hf_..., AIza...) are masked,
so a server that echoes a key back ("Incorrect API key provided: sk-...") cannot put it into a record either.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "[REDACTED]"
_known: set[str] = set()
_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s\"',;]+"),
    re.compile(
        r"(?i)((?:api[-_]?key|authorization|access[-_]?token|password)[\"']?\s*[:=]\s*[\"']?)(?!bearer\b)(?!\[REDACTED)[^\s\"',;&}]+"
    ),
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),
    re.compile(r"\bAIza[A-Za-z0-9_\-]{20,}"),
)
_SECRET_PARAMS = re.compile(r"(?i)^(api[-_]?key|key|token|access[-_]?token|secret|password|sig|signature)$")


def register(secret: str | None) -> None:
    """Remember a secret so that `redact` masks it wherever it appears."""
    if secret and len(secret.strip()) >= 4:
        _known.add(secret.strip())


def redact(text: str) -> str:
    """The text with every known secret and anything shaped like a credential masked."""
    if not text:
        return text
    for secret in _known:
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + MASK, text)
    return text


def redact_url(url: str) -> str:
    """A URL without user:password and with key-like query parameters masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = [(k, MASK if _SECRET_PARAMS.match(k) else v) for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode(pairs, safe="[]")
    return redact(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def redact_deep(value: Any) -> Any:
    """Every string inside a JSON-like structure redacted (dict keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_deep(k): redact_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_deep(v) for v in value]
    return value
