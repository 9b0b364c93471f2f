"""The streaming client against a server with exactly known timing and every failure mode."""

import asyncio

import numpy as np
import pytest

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.client.sse import SSEError, SSEParser
from infermeter.load import LoadPattern, drive
from infermeter.records import RunClock
from tests.fake_server import TIMED, FakeServer


@pytest.fixture(scope="module")
def server():
    s = FakeServer()
    yield s
    s.close()


def client_for(url, **kw):
    clock = RunClock()
    return OpenAIClient(ClientConfig(url, model="m", **kw), clock), clock


def req(i, prompt):
    return PreparedRequest(i, prompt, 3, 8)


async def test_ttft_and_every_itl_within_1ms_of_truth(server):
    client, clock = client_for(server.url)
    recs = []
    for k in range(5):
        recs.append(await client.send(req(k, f"timed r{k}"), clock.now()))
        await asyncio.sleep(0.01)
    await client.close()
    for k, rec in enumerate(recs):
        assert rec.status == "ok", rec.error
        truth = np.asarray(server.truth[f"r{k}"]) - clock.t0  # server write times on the run clock
        content = [(t, n) for t, n in zip(rec.chunk_times, rec.chunk_tokens, strict=True) if n > 0]
        got = np.asarray([t for t, _ in content])
        # the empty and the whitespace-only events are kept as 0-token chunks, never the first token
        assert rec.chunk_tokens[:2] == [0, 0]
        assert [n for _, n in content] == [n for _, _, n in TIMED if n]
        assert np.all(np.abs(got - truth) < 0.001), (got - truth) * 1000
        assert abs((rec.token_times[0] - rec.submitted_at) - (truth[0] - rec.submitted_at)) < 0.001
        assert rec.output_tokens == 6 and rec.input_tokens == 3  # from the server's usage


async def test_server_times_are_anchored_where_both_sides_saw_the_response_start(server):
    client, clock = client_for(server.url)
    rec = await client.send(req(0, "servertimes s0"), clock.now())
    await client.close()
    assert rec.status == "ok", rec.error
    truth = np.asarray(server.truth["s0"]) - clock.t0
    # the server counts from 30 ms before the request arrived; anchoring on the response headers cancels that
    assert np.all(np.abs(np.asarray(rec.server_token_times) - truth) < 0.001), rec.server_token_times - truth


def test_sse_parser_handles_split_lines_comments_and_fields():
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.feed(b": 1}\r\n\r\n: keep-alive\n\nevent: x\nid: 3\ndata:[DONE]\n") == [b'{"a": 1}', b"[DONE]"]
    assert p.feed(b"data: 1\n\nnonsense\ndata: 2\n\n") == [b"1"]
    with pytest.raises(SSEError, match="malformed"):
        p.check()


@pytest.mark.parametrize(
    "mode, status, reason",
    [
        ("http500", "error", "HTTP 500: boom: the model is overloaded"),
        ("reset", "error", "connection lost mid-stream"),
        ("malformed", "error", "malformed SSE line"),
        ("nodone", "error", "stream ended without [DONE]"),
        ("nonjson", "error", "non-JSON event"),
        ("errorevent", "error", "server error event"),
        ("slowfirst", "timeout", "no content token within 0.3 s"),
        ("slowtotal", "timeout", "not finished within the total timeout of 0.5 s"),
    ],
)
async def test_failure_modes_end_the_record_not_the_run(server, mode, status, reason):
    client, _clock = client_for(server.url, first_token_timeout=0.3, total_timeout=0.5)
    records = []
    # the failing request sits between two good ones: the run goes on and all three are recorded
    reqs = [req(0, "ok x"), req(1, f"{mode} y"), req(2, "ok z")]
    await drive(client, reqs, LoadPattern(concurrency=1), records.append)
    await client.close()
    assert [r.request_id for r in records] == [0, 1, 2]
    assert records[0].status == records[2].status == "ok"
    bad = records[1]
    assert bad.status == status and reason in bad.error, bad.error
    if mode in ("reset", "nodone", "malformed", "nonjson"):
        assert len(bad.token_times) >= 1  # what arrived before the failure is kept


async def test_connection_refused_is_a_record():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    client, clock = client_for(f"http://127.0.0.1:{port}")
    rec = await client.send(req(0, "ok"), clock.now())
    await client.close()
    assert rec.status == "error" and "cannot connect" in rec.error


async def test_api_key_is_sent_but_never_declared(server, monkeypatch):
    monkeypatch.setenv("INFERMETER_TEST_KEY", "sk-secret-123")
    cfg = ClientConfig(server.url, model="m", api_key_env="INFERMETER_TEST_KEY")
    client = OpenAIClient(cfg, RunClock())
    assert client._headers["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in str(cfg.declaration())
    await client.close()


async def test_cancel_keeps_a_cancelled_record(server):
    client, clock = client_for(server.url)
    task = asyncio.create_task(client.send(req(0, "slowtotal q"), clock.now()))
    await asyncio.sleep(0.35)
    task.cancel()
    rec = await task
    await client.close()
    assert rec.status == "cancelled" and 2 <= len(rec.token_times) <= 5
