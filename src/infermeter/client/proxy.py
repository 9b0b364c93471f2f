"""Which HTTP proxy a request goes through, read from the environment as curl reads it (with two differences).

`http_proxy` / `HTTP_PROXY` for http:// targets, `https_proxy` / `HTTPS_PROXY` for https:// ones (the lower-case name
first; curl ignores an upper-case HTTP_PROXY, Python's clients and aiohttp, which sends the side requests, read it, and
so does infermeter).  `no_proxy` / `NO_PROXY` lists, comma-separated, where not to use it: `*` for everywhere; a name
matches itself and every name under it (`example.com` and `.example.com` both match `api.example.com`, never
`badexample.com`); an IP address matches itself (IPv6 without brackets), and a CIDR block (`10.0.0.0/8`) every
address in it; `name:port` matches that port only (curl has no ports there).  As in curl, loopback (localhost,
127.0.0.1, ::1) goes through the proxy too unless NO_PROXY lists it, and an empty NO_PROXY exempts nothing.  The
proxy is an http:// URL (no scheme means http://, no port means 80, as Python's clients take it: curl assumes 1080);
user:password in it is sent as Proxy-Authorization (Basic) and never written anywhere.  The embedded emulator, which
infermeter starts itself, is always reached directly.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from infermeter import secrets
from infermeter.errors import UserError


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy: where it listens, the Proxy-Authorization value its URL's credentials make, and the variable
    that named it."""

    host: str
    port: int
    variable: str
    authorization: str | None = field(default=None, repr=False)

    def describe(self) -> str:
        """Where the requests went, for run.json (never the credentials)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"HTTP proxy http://{host}:{self.port} (from ${self.variable})"


def _first(environ: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """The first of the variables set (an empty one counts as set), with its name."""
    for name in names:
        if name in environ:
            return name, environ[name]
    return None


_DIRECT: set[str] = set()  # servers this process started itself (the embedded emulator): never through a proxy


@contextlib.contextmanager
def direct(url: str) -> Iterator[None]:
    """Requests to `url` (a server this process started on loopback) bypass any proxy for the block."""
    netloc = urlsplit(url).netloc.lower()
    _DIRECT.add(netloc)
    try:
        yield
    finally:
        _DIRECT.discard(netloc)


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy a request to `url` goes through under `environ` (os.environ by default), or None: none is set, or
    NO_PROXY exempts the URL's host, or the URL is a server this process started (`direct`)."""
    env = os.environ if environ is None else environ
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or parts.netloc.lower() in _DIRECT:
        return None
    given = _first(env, f"{scheme}_proxy", f"{scheme.upper()}_PROXY")
    if given is None or not given[1].strip():
        return None
    exempt = _first(env, "no_proxy", "NO_PROXY")
    port = parts.port or (443 if scheme == "https" else 80)
    if exempt is not None and bypassed(parts.hostname, port, exempt[1]):
        return None
    return _parse(*given)


def _parse(variable: str, text: str) -> Proxy:
    """The proxy a variable names."""
    raw = text.strip()
    parts = urlsplit(raw if "://" in raw else f"http://{raw}")
    shown = secrets.redact_url(raw)
    if parts.scheme.lower() != "http":
        raise UserError(f"${variable}={shown}: only http:// proxies are supported, not {parts.scheme}://")
    try:
        port = parts.port or 80
    except ValueError:
        raise UserError(f"${variable}={shown}: not a proxy URL (its port is not a number)") from None
    if not parts.hostname:
        raise UserError(f"${variable}={shown}: not a proxy URL (no host)")
    authorization = None
    if parts.username is not None:
        user, password = unquote(parts.username), unquote(parts.password or "")
        secrets.register(password)
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        secrets.register(authorization.split(" ", 1)[1])
    return Proxy(parts.hostname, port, variable, authorization)


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether NO_PROXY's list exempts `host` (a name or an IP address, IPv6 without brackets) at `port`."""
    host = host.strip("[]").rstrip(".").lower()
    address = _address(host)
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name, want = _entry(entry)
        if want is not None and want != port:
            continue
        if "/" in name and address is not None:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        listed = _address(name)
        if listed is not None or address is not None:
            if listed is not None and address is not None and listed == address:
                return True
            continue
        name = name.lstrip(".").rstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def _entry(entry: str) -> tuple[str, int | None]:
    """A NO_PROXY entry as (name, port or None): `[v6]:port`, `name:port`, or a bare name or address."""
    if entry.startswith("["):
        inside, _, rest = entry[1:].partition("]")
        return inside, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, int(port) if port.isdigit() else None
    return entry, None


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
