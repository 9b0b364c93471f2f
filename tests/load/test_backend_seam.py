"""The backend seam: a whole run through a Backend that is not HTTP, and the registry's refusal of unknown names."""

import asyncio

import pytest

from infermeter.client.backend import BACKENDS, open_backend
from infermeter.client.openai_sse import ClientConfig, PreparedRequest
from infermeter.errors import UserError
from infermeter.records import RequestRecord, RunClock, read_records, read_run_info
from infermeter.run_info import Client
from tests.load.runs import configured, measured

TTFT_S, ITL_S = 0.004, 0.002


class ScriptedBackend:
    """Answers every request in-process: the first token TTFT_S after it is sent, then one every ITL_S."""

    counting = "one token per scripted event"

    def __init__(self, config: ClientConfig, clock: RunClock, max_connections: int = 0) -> None:
        self.clock = clock
        self.sent: list[int] = []

    async def send(self, req: PreparedRequest, scheduled_at: float, record: RequestRecord | None = None):
        rec = record if record is not None else req.record(scheduled_at)
        rec.submitted_at = self.clock.now()
        self.sent.append(req.request_id)
        times = [rec.submitted_at + TTFT_S + k * ITL_S for k in range(req.max_tokens)]
        await asyncio.sleep(max(0.0, times[-1] - self.clock.now()))
        rec.token_times, rec.chunk_times, rec.chunk_tokens = times, times, [1] * len(times)
        rec.output_tokens, rec.status = len(times), "ok"
        return rec

    async def close(self) -> None:
        pass

    def start(self, req: PreparedRequest, scheduled_at: float, record: RequestRecord):
        return self.send(req, scheduled_at, record)

    def pace(self, poll) -> None:
        pass

    def declaration(self) -> Client:
        return Client(backend="scripted", transport="in-process")

    async def server_token_count(self, text: str) -> int | None:
        return None

    @property
    def token_count_source(self) -> str:
        return "none offered"


def test_a_run_goes_through_any_registered_backend(tmp_path, monkeypatch):
    monkeypatch.setitem(BACKENDS, "scripted", f"{__name__}:ScriptedBackend")
    url = "http://127.0.0.1:9"  # nothing listens: only the backend is ever asked
    cfg = configured(
        url,
        target={"model": "scripted"},
        workload={"input_tokens": 8, "output_tokens": 6},
        load={"requests": 40, "rate": 200.0, "warmup": 0},
    )
    # a backend registered after the options' checks were made: set on the checked configuration
    cfg = cfg.model_copy(update={"target": cfg.target.model_copy(update={"backend": "scripted"})})
    result = asyncio.run(measured(cfg, tmp_path / "run", url))
    records = read_records(result.run_dir)
    assert len(records) == 40 and set(records.column("status").to_pylist()) == {"ok"}
    assert read_run_info(result.run_dir).client.backend == "scripted"
    # the summary is computed from what the backend recorded, whatever the transport
    assert result.summary.ttft_ms.p50 == pytest.approx(TTFT_S * 1e3)
    assert result.summary.itl_ms.p50 == pytest.approx(ITL_S * 1e3)
    assert result.summary.requests.ok == 40


def test_an_unknown_backend_is_refused_with_the_choices():
    with pytest.raises(UserError, match="unknown backend 'grpc2': choose one of openai"):
        open_backend("grpc2", ClientConfig("http://127.0.0.1:9"), RunClock())
