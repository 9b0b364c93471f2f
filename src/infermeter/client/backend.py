"""The backend seam: what everything that sends requests (load driver, warm-up, prefill profiling, capacity) talks to.

A backend sends one prepared request and streams its reply into exactly one RequestRecord on the run's clock; it
declares itself for run.json and may count a prompt with the server's own tokenizer.  Backends are chosen by name
from BACKENDS (`--backend`): infermeter's own, and those other packages add (entry points `infermeter.backends`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from infermeter.errors import UserError
from infermeter.plugins import Entry, Registry

if TYPE_CHECKING:
    from infermeter.client.request import ClientConfig, PreparedRequest
    from infermeter.records import RequestRecord, RunClock
    from infermeter.run_info import Client


class Backend(Protocol):
    clock: RunClock
    counting: str  # how output tokens are counted per streamed event (run.json's tokenizer block)

    async def send(
        self, req: PreparedRequest, scheduled_at: float, record: RequestRecord | None = None
    ) -> RequestRecord:
        """Send one request; every outcome is a record.  Cancellation completes `record` and then propagates."""
        ...

    def start(self, req: PreparedRequest, scheduled_at: float, record: RequestRecord) -> Awaitable[RequestRecord]:
        """Begin a send at once: the request leaves now when it can without awaiting (an idle kept-alive
        connection); what is returned finishes it as `send` would.  A backend that cannot returns `send(...)`."""
        ...

    def pace(self, poll: Callable[[], None] | None) -> None:
        """Have `poll` called after each read of a reply is handled (None: no more), so that the open loop sends
        what falls due between two reads, not after the event loop's whole turn.  A backend whose reads happen
        outside its own code (gRPC) ignores it: its sends go at the driver's timer."""
        ...

    async def close(self) -> None: ...

    def declaration(self) -> Client:
        """What run.json says about the transport (never a secret)."""
        ...

    async def server_token_count(self, text: str) -> int | None:
        """The server's own token count of `text`, when the server offers a way to ask; else None."""
        ...

    @property
    def token_count_source(self) -> str:
        """Where `server_token_count` asks (for run.json), or "none offered"."""
        ...


# a Backend class taking (ClientConfig, RunClock, max_connections) by name, imported when opened, so the CLI can list
# the names without loading every transport
BACKENDS: Registry[Callable[..., Backend]] = Registry(
    "backend",
    [
        Entry("openai", "infermeter.client.openai_sse:OpenAIClient", "OpenAI-compatible completions and chat over SSE"),
        Entry("grpc", "infermeter.client.kserve_grpc:KServeGrpcClient", "KServe v2 / Triton gRPC streaming inference"),
    ],
    check=lambda name, obj: None if callable(obj) else "it is not a class",
)


def open_backend(name: str, config: ClientConfig, clock: RunClock, max_connections: int = 0) -> Backend:
    """A backend by name, with a one-line error naming the choices."""
    make = BACKENDS.load(name)
    if make is None:
        raise UserError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
    return make(config, clock, max_connections)
