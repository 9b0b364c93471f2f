"""The request and response shapes one HTTP transport speaks (`--api`): OpenAI completions, chat and Responses,
embeddings and rerank, and the engines' native streams (TGI, SGLang, Triton).  Each is an `ApiFormat`: where it
posts, the body it sends for a prepared request, and the decoder that turns the reply's bytes into a record's times
and counts.  `client.openai_sse` sends every one of them; other packages add formats under the entry point group
`infermeter.apis`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from infermeter import secrets
from infermeter.client.headers import key_source
from infermeter.client.request import ClientConfig, PreparedRequest
from infermeter.client.urls import endpoint
from infermeter.errors import UserError
from infermeter.plugins import Entry, Registry
from infermeter.run_info import Client, Timeouts

if TYPE_CHECKING:
    from infermeter.client.events import StreamState
    from infermeter.client.media import MediaKind


class Decoder(Protocol):
    """A reply's bytes as they arrive -> its StreamState; malformed input raises `events.StreamFailure`."""

    state: StreamState

    def feed(self, data: bytes, now: float) -> bool:
        """Take the bytes of one read (`now`: run-clock time it returned); True when the first content token
        arrived in them."""
        ...

    def end(self) -> None:
        """The reply ended cleanly: raise `StreamFailure` when it is not complete."""
        ...

    def closed_complete(self) -> bool:
        """Whether a reply cut off here had already delivered all of itself."""
        ...


class ApiFormat(Protocol):
    """One API's shape over HTTP."""

    @property
    def name(self) -> str: ...

    @property
    def generates(self) -> bool:
        """Replies stream generated tokens: TTFT, ITL and TPOT apply (False: one body, its latency)."""
        ...

    @property
    def templated(self) -> bool:
        """The prompt is sent as chat messages, so the server applies its chat template."""
        ...

    @property
    def media(self) -> tuple[MediaKind, ...]:
        """What requests may carry beside the text (--images, --audio)."""
        ...

    @property
    def ignores_eos(self) -> bool:
        """The API can ask for replies that run to max_tokens (--ignore-eos is sent); False: run.json says none."""
        ...

    def path(self, config: ClientConfig) -> str:
        """The path requests are posted to (config.model may be part of it)."""
        ...

    def body(self, req: PreparedRequest, config: ClientConfig) -> dict[str, Any]:
        """The JSON body of one request (config.extra_body is merged by the caller)."""
        ...

    def decoder(self, req: PreparedRequest, keep_text: bool) -> Decoder:
        """A fresh decoder for the reply to `req` (a one-body reply checks it answers each input once); `keep_text`:
        keep the reply's text in `state.text`."""
        ...


APIS: Registry[ApiFormat] = Registry(
    "api",
    [
        Entry("completions", "infermeter.client.api_openai:COMPLETIONS", "OpenAI /v1/completions, streamed (SSE)"),
        Entry("chat", "infermeter.client.api_openai:CHAT", "OpenAI /v1/chat/completions, streamed (SSE)"),
        Entry("responses", "infermeter.client.api_responses:RESPONSES", "OpenAI Responses API /v1/responses, streamed"),
        Entry("embeddings", "infermeter.client.api_pooling:EMBEDDINGS", "OpenAI /v1/embeddings (--batch-inputs)"),
        Entry("rerank", "infermeter.client.api_pooling:RERANK", "rerank: a query and documents (--rerank-shape)"),
        Entry("tgi", "infermeter.client.api_native:TGI", "Text Generation Inference /generate_stream"),
        Entry("sglang", "infermeter.client.api_native:SGLANG", "SGLang native /generate, streamed"),
        Entry("triton", "infermeter.client.api_native:TRITON", "Triton / TensorRT-LLM /v2/models/M/generate_stream"),
    ],
    check=lambda name, obj: None if hasattr(obj, "decoder") and hasattr(obj, "body") else "it is not an ApiFormat",
)


def api_format(name: str) -> ApiFormat:
    """The format named by --api, with a one-line error naming the choices."""
    fmt = APIS.load(name)
    if fmt is None:
        raise UserError(f"unknown --api {name!r}: choose one of {', '.join(APIS)}")
    return fmt


def templated(name: str) -> bool:
    """Whether prompts of this API go out as chat messages (the chat template applies to their length)."""
    return api_format(name).templated


def endpoint_url(config: ClientConfig) -> str:
    """The URL the configuration's requests are posted to."""
    return endpoint(config.base_url, api_format(config.api).path(config))


def declare(config: ClientConfig) -> Client:
    """What run.json says about the client (the API key itself never appears)."""
    https = config.base_url.startswith("https:")
    fmt = api_format(config.api)
    return Client(
        endpoint=secrets.redact_url(endpoint_url(config)),
        api=config.api,
        model=config.model,
        api_key=key_source(config.extra_headers, config.api_key_env, config.api_key()),
        timeouts_s=Timeouts(
            connect=config.connect_timeout, first_token=config.first_token_timeout, total=config.total_timeout
        ),
        ignore_eos=config.ignore_eos if fmt.ignores_eos else None,
        temperature=config.temperature,
        extra_body=secrets.redact_deep(config.extra_body),
        tls=config.tls.declaration() if https else None,
        insecure=True if config.tls.insecure and https else None,
        generates=fmt.generates,
        rerank_shape=config.rerank_shape if config.api == "rerank" else None,
    )
