"""The extra headers a run sends (--header 'Name: value', repeatable), made ready when the client config is built.

`${VAR}` in a value is read from the environment there and then; the text as given (unexpanded) is what run.json
keeps, and every value read from the environment, like every literal credential-like value, is registered with
`secrets` so that nothing infermeter writes carries it.  Headers infermeter sets itself are refused: Host,
Content-Length, Content-Type, Accept, Connection and Transfer-Encoding (the request's framing and the stream it asks
for); Authorization and User-Agent given here replace the ones infermeter would send (the key from --api-key-env,
infermeter/<version>); X-Request-Id is refused together with --request-id-prefix, which sets it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence

from infermeter import __version__, secrets
from infermeter.client.http1 import Pool
from infermeter.errors import UserError

Header = tuple[str, str]
RESERVED = ("host", "content-length", "content-type", "accept", "connection", "transfer-encoding")
REPLACEABLE = ("authorization", "user-agent")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def split(line: str) -> Header:
    """'Name: value' as (name, value) with the spaces around both taken off."""
    name, _, value = line.partition(":")
    return name.strip(), value.strip()


def names(lines: Sequence[str] | None) -> list[str]:
    """The header names given, in order (what run.json's load block lists: never the values)."""
    return [split(line)[0] for line in lines or ()]


def extra_headers(
    lines: Sequence[str] | None, request_id_prefix: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Header, ...]:
    """The --header lines as (name, value) pairs with ${VAR} expanded from `environ` (os.environ by default); a
    reserved name, a name given twice, a missing variable: a one-line UserError naming it."""
    env = os.environ if environ is None else environ
    out: list[Header] = []
    seen: set[str] = set()
    for line in lines or ():
        name, value = split(line)
        key = name.lower()
        if key in RESERVED:
            raise UserError(
                f"--header {name}: infermeter sets {name} itself and it cannot be given (Authorization and User-Agent "
                "can: they replace infermeter's own)"
            )
        if key == "x-request-id" and request_id_prefix is not None:
            raise UserError("--header X-Request-Id and --request-id-prefix both set X-Request-Id: give one of them")
        if key in seen:
            raise UserError(f"--header {name} is given twice: give each header once")
        seen.add(key)
        out.append((name, _expand(name, value, env)))
    return tuple(out)


def _expand(name: str, value: str, env: Mapping[str, str]) -> str:
    """The value with each ${VAR} read from `env`, each value read registered as a secret (and a literal value of a
    credential-like header too)."""
    if secrets.sensitive_header(name):
        secrets.register_header_value(value)

    def read(match: re.Match[str]) -> str:
        var = match.group(1)
        if var not in env:
            raise UserError(f"--header {name}: ${{{var}}} is not set in the environment")
        found = env[var]
        secrets.register(found)
        return found

    expanded = _VAR.sub(read, value)
    if "\r" in expanded or "\n" in expanded:
        raise UserError(f"--header {name}: its value, read from the environment, holds a line break")
    return expanded


def replaces_key(extra: Sequence[Header]) -> bool:
    """Whether --header gives an Authorization (sent instead of the key's)."""
    return any(name.lower() == "authorization" for name, _ in extra)


def merged(extra: Sequence[Header], api_key: Callable[[], str | None]) -> dict[str, str]:
    """Every request's headers: Content-Type, Accept, the key's Authorization (the key read only when --header gives
    none), then --header's in the order given."""
    out = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    key = None if replaces_key(extra) else api_key()
    if key:
        out["Authorization"] = f"Bearer {key}"
    out.update(extra)
    return out


def request_heads(pool: Pool, headers: Mapping[str, str], id_prefix: str | None) -> tuple[bytes, bytes | None]:
    """A POST's head to the pool's URL as bytes up to its Content-Length's value, and with `id_prefix` the same head
    up to its X-Request-Id's request number (`<prefix>-`, the number and Content-Length to follow): built once per
    client, so that a request costs only its length (and its number)."""
    lines = [f"POST {pool.target} HTTP/1.1", f"Host: {pool.host_header}"]
    if not any(k.lower() == "user-agent" for k in headers):
        lines.append(f"User-Agent: infermeter/{__version__}")
    head = "\r\n".join([*lines, *(f"{k}: {v}" for k, v in headers.items()), *pool.proxy_headers()]) + "\r\n"
    with_id = None if id_prefix is None else (head + f"X-Request-Id: {id_prefix}-").encode("latin-1")
    return (head + "Content-Length: ").encode("latin-1"), with_id


def key_source(extra: Sequence[Header], api_key_env: str, key: str | None) -> str:
    """Where the Authorization sent comes from, for run.json (never the key)."""
    if replaces_key(extra):
        return "from --header Authorization"
    return f"from ${api_key_env}" if key else "none"
