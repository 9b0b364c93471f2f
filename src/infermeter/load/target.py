"""The system a run sends to, resolved once: where it is (the given server or the embedded emulator), what it declares
about itself, the client configuration every request goes out with, and the model, named or asked of the server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import aiohttp
import orjson

from infermeter.client.api_native import TRITON_DEFAULT_MODEL
from infermeter.client.headers import extra_headers
from infermeter.client.proxy import proxy_for
from infermeter.client.request import ClientConfig
from infermeter.client.tls import TlsOptions
from infermeter.client.urls import endpoint as endpoint_url
from infermeter.errors import UserError
from infermeter.secrets import redact_url

if TYPE_CHECKING:
    from infermeter.config.sections import Target


class Endpoint(NamedTuple):
    """Where the load goes (what `python_api.endpoint.serving` yields): the target's address, what the embedded
    emulator declares about itself ({} for a server at --url), and the HTTP base URL its /metrics are served at."""

    url: str
    sut: dict[str, Any]
    metrics_url: str | None


@dataclass(frozen=True)
class RunTarget:
    """The target as a run sends to it: the transport, the client configuration (its model resolved) and the
    endpoint it came from."""

    backend: str
    client: ClientConfig
    endpoint: Endpoint

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def sut(self) -> dict[str, Any]:
        return self.endpoint.sut

    @property
    def metrics_url(self) -> str | None:
        return self.endpoint.metrics_url

    @property
    def emulated(self) -> bool:
        return bool(self.sut.get("emulated"))

    @property
    def http_url(self) -> str | None:
        """Where the server answers plain HTTP: the OpenAI backend's URL, or a gRPC target's HTTP port where known."""
        return self.url if self.backend == "openai" else self.metrics_url


async def discover_model(config: ClientConfig, backend: str = "openai") -> str:
    """The first model the server lists, for runs that do not name one (asked with the run's credentials)."""
    if backend != "openai":
        raise UserError(f"--backend {backend} cannot list the server's models: give --model")
    url = endpoint_url(config.base_url, "/v1/models")
    try:
        async with (
            aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=10),
                trust_env=proxy_for(url) is not None,
                connector=aiohttp.TCPConnector(ssl=config.tls.context() if url.startswith("https:") else True),
            ) as s,
            s.get(url, headers=config.headers()) as r,
        ):
            if r.status != 200:
                hint = "check --url and the API key, or give --model"
                raise UserError(f"could not list models at {redact_url(url)} (HTTP {r.status}): {hint}")
            data = orjson.loads(await r.read())
            return str(data["data"][0]["id"])
    except (aiohttp.ClientError, TimeoutError, KeyError, IndexError, orjson.JSONDecodeError, TypeError) as exc:
        raise UserError(f"could not list models at {redact_url(url)} ({type(exc).__name__}): give --model") from None


async def resolve_model(config: ClientConfig, backend: str, sut: Mapping[str, Any]) -> str:
    """The model a run or a probe sends to: the one named, else the embedded emulator's, else the first the server
    lists (the only place that decides it)."""
    named = config.model or str(sut.get("model") or "")
    if not named and config.api == "triton":  # Triton serves no /v1/models: TensorRT-LLM's pipeline is this model
        return TRITON_DEFAULT_MODEL
    return named or await discover_model(config, backend)


def client_config(section: Target, url: str) -> ClientConfig:
    """The client configuration of the configuration's target section, sending to `url` (its model as named); the
    --header values' ${VAR}s are read from the environment here (a missing one is a UserError naming it)."""
    return ClientConfig(
        url,
        section.api,
        section.model or "",
        api_key_env=section.api_key_env,
        first_token_timeout=section.first_token_timeout,
        total_timeout=section.timeout,
        ignore_eos=section.ignore_eos,
        extra_body=dict(section.extra_body),
        extra_headers=extra_headers(section.header, section.request_id_prefix),
        request_id_prefix=section.request_id_prefix,
        rerank_shape=section.rerank_shape,
        tls=TlsOptions(section.ca_bundle, section.insecure, section.client_cert, section.client_key),
    )


async def resolve_target(section: Target, endpoint: Endpoint) -> RunTarget:
    """The target section sent to `endpoint`, its model resolved."""
    config = client_config(section, endpoint.url)
    config.model = await resolve_model(config, section.backend, endpoint.sut)
    return RunTarget(section.backend, config, endpoint)
