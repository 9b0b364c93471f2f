"""API keys never leave the process: every text infermeter writes or prints passes through `redact`.

The key itself is registered when it is read (from $OPENAI_API_KEY or the variable --api-key-env names), and so is
every --header value read from the environment and every literal value of a credential-like header; besides exact
matches, bearer tokens, credentials in URLs, the common key shapes (sk-..., hf_..., AIza...) and the values of
credential-like header lines ('X-Api-Key: ...', as --header gives them) are masked, so a server that echoes a key back
("Incorrect API key provided: sk-...") cannot put it into a record either.  A `${VAR}` reference is kept as written:
it names where a value comes from, not the value.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "[REDACTED]"
_known: set[str] = set()
_VAR_REF = r"(?!\$\{[A-Za-z_][A-Za-z0-9_]*\}(?:[\s\"',;&}]|$))"  # not a ${VAR} reference standing alone
_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)" + _VAR_REF + r"[^\s\"',;]+"),
    re.compile(
        r"(?i)((?:api[-_]?key|authorization|access[-_]?token|password)[\"']?\s*[:=]\s*[\"']?(?:(?:basic|digest)\s+)?+)(?!bearer\b)(?!\[REDACTED)"
        + _VAR_REF
        + r"[^\s\"',;&}]+"
    ),
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),
    re.compile(r"\bAIza[A-Za-z0-9_\-]{20,}"),
)
_SECRET_PARAMS = re.compile(r"(?i)^(api[-_]?key|key|token|access[-_]?token|secret|password|sig|signature)$")
# headers whose values are credentials: these names, and any name holding token, secret, key or password
_SENSITIVE_HEADER = re.compile(
    r"(?i)^(?:authorization|proxy-authorization|api-key|x-api-key|cookie|set-cookie)$|token|secret|key|password"
)
_HEADER_LINE = re.compile(r"([A-Za-z0-9-]+)(\s*:\s*)(.*)", re.DOTALL)  # a whole string 'Name: value' (no '_')
_SCHEME = re.compile(r"(?i)^(?:bearer|basic|token|digest|apikey)(?=\s)")
_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def register(secret: str | None) -> None:
    """Remember a secret so that `redact` masks it wherever it appears."""
    if secret and len(secret.strip()) >= 4:
        _known.add(secret.strip())


def sensitive_header(name: str) -> bool:
    """Whether a header's value is a credential (Authorization, Cookie, X-Api-Key, X-Auth-Token, ...)."""
    return bool(_SENSITIVE_HEADER.search(name.strip()))


def _literals(value: str) -> list[str]:
    """The parts of a header value that are written out, not ${VAR} references, an auth scheme (Bearer) left out."""
    return [part.strip() for part in _REF.split(_SCHEME.sub("", value.strip())) if part.strip()]


def register_header_value(value: str) -> None:
    """Remember the written-out parts of a credential-like header's value (not its ${VAR} references)."""
    for part in _literals(value):
        register(part)


def redact_header(line: str) -> str:
    """'Name: value' with a credential-like name: its written-out parts masked, an auth scheme and ${VAR} references
    kept ('Authorization: Bearer ${TOKEN}' stays, 'X-Api-Key: abc123' becomes 'X-Api-Key: [REDACTED]')."""
    match = _HEADER_LINE.fullmatch(line)
    if match is None or not sensitive_header(match.group(1)):
        return line
    name, colon, value = match.groups()
    scheme = _SCHEME.match(value.strip())
    head = scheme.group(0) + " " if scheme else ""
    rest = value.strip()[len(scheme.group(0)) :].strip() if scheme else value.strip()
    pieces = _REF.split(rest)
    refs = _REF.findall(rest)
    masked = "".join(
        (MASK if piece.strip() else piece) + (refs[i] if i < len(refs) else "") for i, piece in enumerate(pieces)
    )
    return f"{name}{colon}{head}{masked}"


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
