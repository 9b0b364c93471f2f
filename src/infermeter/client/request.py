"""What crosses from the load to a backend: a prepared request (its prompt, inputs and media) and the client's
configuration (where, which API, credentials, timeouts, TLS).  A leaf: the API formats (client.apis) and every
backend read these."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, get_args

from infermeter import secrets
from infermeter.client import reasons
from infermeter.client.headers import merged
from infermeter.client.media import MediaItem
from infermeter.client.tls import TlsOptions
from infermeter.records import RequestRecord

Api = str  # a name in client.apis.APIS
RerankShape = Literal["vllm", "cohere", "jina", "tei"]
RERANK_SHAPES: tuple[RerankShape, ...] = get_args(RerankShape)


class Message(NamedTuple):
    """One message of a chat conversation as the request body carries it."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class PreparedRequest:
    """A request ready to send: its prompt text and what the workload declared about it."""

    request_id: int
    prompt: str
    input_tokens: int
    max_tokens: int
    request_class: str = ""
    ref_input_tokens: int | None = None  # the prompt's exact length under the run's declared tokenizer
    # a chat conversation sent instead of `prompt` alone (a multi-turn session's history, then its turn)
    messages: tuple[Message, ...] | None = None
    session_id: int | None = None  # a multi-turn session's index in the run, and this turn's index in it
    turn: int | None = None
    model: str | None = None  # the model or adapter this request names instead of the run's (--model-mix)
    # told the reply's whole text when its stream ends well (a session's next turn carries it as history)
    on_reply: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    # embeddings: every input (prompt is the first); rerank: the documents (prompt is the query); None: the prompt
    inputs: tuple[str, ...] | None = field(default=None, repr=False)
    media: tuple[MediaItem, ...] = field(default=(), repr=False)  # images and audio sent with the prompt

    def record(self, scheduled_at: float) -> RequestRecord:
        """An empty record for this request, to be filled by `OpenAIClient.send`."""
        return RequestRecord(
            request_id=self.request_id,
            request_class=self.request_class,
            input_tokens=self.input_tokens,
            max_tokens=self.max_tokens,
            scheduled_at=scheduled_at,
            ref_input_tokens=self.ref_input_tokens,
            session_id=self.session_id,
            turn=self.turn,
            model=self.model,
            inputs=None if self.inputs is None else len(self.inputs),
        )


@dataclass
class ClientConfig:
    base_url: str
    api: Api = "completions"
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    connect_timeout: float = 10.0
    first_token_timeout: float = 120.0
    total_timeout: float = 900.0
    ignore_eos: bool = True
    temperature: float = 0.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    # counts a reply's whole text under the run's declared tokenizer when its stream ends (ref_output_tokens)
    count_text: Callable[[str], int] | None = field(default=None, repr=False, compare=False)
    # --header's (name, value) pairs, ${VAR}s read already (client.headers); an Authorization replaces the key's
    extra_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    request_id_prefix: str | None = None  # every request carries X-Request-Id: <prefix>-<request id>
    rerank_shape: RerankShape = "vllm"  # --api rerank: whose request and response shape
    tls: TlsOptions = field(default_factory=TlsOptions)

    def api_key(self) -> str | None:
        """The key from the environment (registered for redaction the moment it is read)."""
        key = os.environ.get(self.api_key_env) or None
        secrets.register(key)
        return key

    def headers(self) -> dict[str, str]:
        """Headers for every request to the server, the key's Authorization (or --header's) among them."""
        return merged(self.extra_headers, self.api_key)

    def rejected_field(self, status: int, body: bytes | bytearray) -> str:
        """A 400/422 whose body names a field this client sent beyond the OpenAI schema: which option sends it
        (servers such as `transformers serve` answer 422 to any field they do not know); else ''."""
        if status not in (400, 422):
            return ""
        text = bytes(body).decode("utf-8", "replace")
        if self.ignore_eos and "ignore_eos" in text:
            return f"{reasons.REJECTED_FIELD} ignore_eos (sent to run replies to max_tokens): add --no-ignore-eos"
        for key in self.extra_body:
            if key in text:
                return f"{reasons.REJECTED_FIELD} {key}: leave it out of --extra-body"
        return ""
