"""The system a run sends to, resolved once: where it is (the given server or the embedded emulator), what it declares
about itself, the client configuration every request goes out with, and the model, named or asked of the server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
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


class Listing(NamedTuple):
    """What GET /v1/models answered: the models listed (None: no list), or why not."""

    models: list[str] | None
    why: str = ""
    refused: bool = False  # nothing answered at the address at all
    contexts: dict[str, int] = {}  # noqa: RUF012 - a NamedTuple's default, never mutated: model -> max_model_len

    def context(self, model: str) -> int | None:
        """The most tokens (prompt and output) the server holds for `model`, where its listing says (vLLM's and
        SGLang's max_model_len)."""
        return self.contexts.get(model)


async def list_models(config: ClientConfig) -> Listing:
    """The models the server lists at /v1/models (asked with the run's credentials)."""
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
                return Listing(None, f"HTTP {r.status}")
            data = orjson.loads(await r.read())
            entries = data["data"]
            contexts = {str(m["id"]): int(m["max_model_len"]) for m in entries
                        if isinstance(m.get("max_model_len"), int) and m["max_model_len"] > 0}  # fmt: skip
            return Listing([str(m["id"]) for m in entries], contexts=contexts)
    except aiohttp.ClientConnectorError as exc:
        refused = isinstance(exc.os_error, ConnectionRefusedError)
        return Listing(None, "connection refused" if refused else str(exc.os_error), refused=True)
    except (aiohttp.ClientError, TimeoutError, KeyError, AttributeError, orjson.JSONDecodeError, TypeError) as exc:
        return Listing(None, type(exc).__name__)


def not_answering(config: ClientConfig, why: str) -> UserError:
    return UserError(f"nothing answers at {redact_url(config.base_url)} ({why}): start the server, or check --url")


async def discover_model(config: ClientConfig, backend: str = "openai", listing: Listing | None = None) -> str:
    """The first model the server lists, for runs that do not name one."""
    if backend != "openai":
        raise UserError(f"--backend {backend} cannot list the server's models: give --model")
    listing = listing or await list_models(config)
    if listing.refused:
        raise not_answering(config, listing.why)
    url = redact_url(endpoint_url(config.base_url, "/v1/models"))
    if listing.models is None:
        hint = "check --url and the API key, or give --model" if listing.why.startswith("HTTP") else "give --model"
        raise UserError(f"could not list models at {url} ({listing.why}): {hint}")
    if not listing.models:
        raise UserError(f"the server at {url} lists no models: give --model")
    return listing.models[0]


async def refused_model(config: ClientConfig, backend: str, listed: list[str]) -> UserError | None:
    """A model the server does not list, tried with one short request: the one-line error when the server refuses
    it by name (vLLM answers 404 "The model ... does not exist"); None when it serves it (llama.cpp serves its one
    model under any name)."""
    from infermeter.client.backend import open_backend
    from infermeter.client.request import PreparedRequest
    from infermeter.records import RunClock

    clock = RunClock()
    client = open_backend(backend, config, clock)
    try:
        rec = await client.send(PreparedRequest(0, "Hello", 1, 1), clock.now())
    finally:
        await client.close()
    error = rec.error or ""
    if rec.status == "ok" or not error.startswith(("HTTP 404", "HTTP 400")) or "model" not in error.lower():
        return None
    served = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
    return UserError(
        f"--model {config.model}: the server at {redact_url(config.base_url)} does not serve it ({error[:8]}); it "
        f"serves {served}: give --model {listed[0]}, or leave --model out to send to the first it lists"
    )


async def resolve_model(config: ClientConfig, backend: str, sut: Mapping[str, Any]) -> str:
    """The model a run or a probe sends to: the one named, else the embedded emulator's, else the first the server
    lists (the only place that decides it).  A server that is not up, or that refuses the model named, is a
    one-line error here, before anything is measured."""
    named = config.model or str(sut.get("model") or "")
    if sut.get("emulated"):
        return named
    if not named and config.api == "triton":  # Triton serves no /v1/models: TensorRT-LLM's pipeline is this model
        return TRITON_DEFAULT_MODEL
    if backend != "openai":
        return named or await discover_model(config, backend)
    listing = await list_models(config)
    if listing.refused:
        raise not_answering(config, listing.why)
    if not named:
        return await discover_model(config, backend, listing)
    if listing.models and named not in listing.models:
        refused = await refused_model(replace(config, model=named), backend, listing.models)
        if refused is not None:
            raise refused
    return named


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
