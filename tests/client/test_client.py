"""The streaming client against a server with exactly known timing and every failure mode."""

import asyncio
import contextlib

import numpy as np
import pytest

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest, openai_sse, reasons
from infermeter.client.apis import declare
from infermeter.client.sse import SSEError, SSEParser
from infermeter.load import LoadPattern, drive
from infermeter.records import RequestRecord, RunClock, failure_reason
from tests.fake_server import TIMED, FakeServer
from tests.timing import Noise, measured_async

# A systematic error (a wrong anchor, a stamp taken at the wrong moment) moves the median by a millisecond or more.
# Medians are held against the same path taken over a bare socket beside the client (FakeServer.raw_timed): a slow
# machine's wake-ups and the server's HTTP parsing are in both, so what is left is what the client adds.  What the
# machine adds on top shows up in the tail, and is allowed for by the noise probe.
MEDIAN_S = 0.0005
TAIL_S = 0.001


async def bare_socket_floor(server, names: list[str]) -> tuple[float, float]:
    """Median (s) of bare-socket upload (server read - last byte written) and delivery (arrival - server write), each
    at least 0: a server cannot read a request before its last byte is written, so a negative median is the two
    clocks' noise, and as a floor it would only tighten the bound it is added to."""
    upload, delivery = [], []
    for name in names:
        sent, arrived = await server.raw_timed(name)
        truth = server.truth(name)
        upload.append(truth["received"][0] - sent)
        delivery += list(np.asarray(arrived) - np.asarray(truth["before"]))
    return max(0.0, float(np.median(upload))), max(0.0, float(np.median(delivery)))


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


async def test_every_token_is_stamped_when_its_event_arrives(server):
    """Client receive time minus the server's write time, for every content event of five requests."""

    async def measure():
        client, clock = client_for(server.url)
        recs = []
        for k in range(5):
            recs.append(await client.send(req(k, f"timed r{k}"), clock.now()))
            await asyncio.sleep(0.01)
        await client.close()
        floor = await bare_socket_floor(server, [f"bare{k}" for k in range(5)])
        return clock, recs, [server.truth(f"r{k}") for k in range(5)], floor

    def check(result, noise: Noise) -> None:
        clock, recs, truths, (floor_upload, floor_delivery) = result
        late, upload = [], []
        for rec, truth in zip(recs, truths, strict=True):
            assert rec.status == "ok", rec.error
            # the empty and the whitespace-only events are kept as 0-token chunks, never the first token
            assert rec.chunk_tokens[:2] == [0, 0]
            content = [(t, n) for t, n in zip(rec.chunk_times, rec.chunk_tokens, strict=True) if n > 0]
            assert [n for _, n in content] == [n for _, _, n in TIMED if n]
            assert rec.output_tokens == 6 and rec.input_tokens == 3  # from the server's usage
            written = np.asarray(truth["before"]) - clock.t0  # on the run clock
            late += list(np.asarray([t for t, _ in content]) - written)
            # submitted_at is the last byte sent: before the server had the whole request, and only just before
            upload.append(truth["received"][0] - clock.t0 - rec.submitted_at)
        late_ms, upload_ms = np.asarray(late) * 1e3, np.asarray(upload) * 1e3
        assert late_ms.min() > -0.05, f"an event stamped before it was written: {late_ms.round(3)}"
        floors = f"(bare socket: upload {floor_upload * 1e3:.3f} ms, delivery {floor_delivery * 1e3:.3f} ms)"
        assert np.median(late_ms) < (floor_delivery + MEDIAN_S) * 1e3, f"late {floors}: {late_ms.round(3)}"
        assert late_ms.max() < (TAIL_S + noise.allowance_s) * 1e3, f"a token late beyond the noise: {late_ms.round(3)}"
        assert np.all(np.asarray(upload_ms) > -0.05), f"submitted_at after the server read it: {upload_ms}"
        assert np.median(upload_ms) < (floor_upload + MEDIAN_S) * 1e3, f"submitted_at early {floors}: {upload_ms}"

    await measured_async(measure, check)


async def test_server_times_are_anchored_where_both_sides_saw_the_response_start(server):
    """The server counts from 30 ms before the request arrived; anchoring on the response headers cancels that."""

    async def measure():
        client, clock = client_for(server.url)
        recs = [await client.send(req(k, f"servertimes s{k}"), clock.now()) for k in range(3)]
        await client.close()
        floor = await bare_socket_floor(server, [f"sbare{k}" for k in range(3)])
        return clock, recs, [server.truth(f"s{k}") for k in range(3)], floor

    def check(result, noise: Noise) -> None:
        clock, recs, truths, (_, floor_delivery) = result
        diff = []
        for rec, truth in zip(recs, truths, strict=True):
            assert rec.status == "ok", rec.error
            diff += list(np.asarray(rec.server_token_times) - (np.asarray(truth["before"]) - clock.t0))
        # anchored on the client's receipt of the response start, server times run late by that delivery, no more
        diff_ms = np.asarray(diff) * 1e3
        floor = f"(bare-socket delivery {floor_delivery * 1e3:.3f} ms): {diff_ms.round(3)}"
        assert -MEDIAN_S * 1e3 < np.median(diff_ms) < (floor_delivery + MEDIAN_S) * 1e3, floor  # a missing 30 ms
        assert np.abs(diff_ms).max() < (TAIL_S + floor_delivery + noise.allowance_s) * 1e3, floor

    await measured_async(measure, check)


def test_sse_parser_handles_split_lines_comments_and_fields():
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.feed(b": 1}\r\n\r\n: keep-alive\n\nevent: x\nid: 3\ndata:[DONE]\n") == [b'{"a": 1}', b"[DONE]"]
    assert p.feed(b"data: 1\n\nnonsense\ndata: 2\n\n") == [b"1"]
    with pytest.raises(SSEError, match="malformed"):
        p.check()


@pytest.mark.parametrize(
    "mode, status, reason, detail",
    [
        ("http500", "error", "HTTP 500", "boom: the model is overloaded"),
        ("reset", "error", reasons.LOST_MID_STREAM, "after 2 tokens"),
        ("malformed", "error", reasons.MALFORMED_SSE, "this is not sse"),
        ("nodone", "error", reasons.UNFINISHED, "after 2 tokens, no finish_reason"),
        ("nonjson", "error", reasons.INVALID_JSON, "{not json"),
        ("errorevent", "error", reasons.SERVER_ERROR_EVENT, "out of memory"),
        ("slowfirst", "timeout", reasons.FIRST_TOKEN_TIMEOUT, "no content token within 0.3 s"),
        ("slowtotal", "timeout", reasons.TOTAL_TIMEOUT, "not finished within 0.5 s"),
    ],
)
async def test_failure_modes_end_the_record_not_the_run(server, mode, status, reason, detail):
    client, _clock = client_for(server.url, first_token_timeout=0.3, total_timeout=0.5)
    records = []
    # the failing request sits between two good ones: the run goes on and all three are recorded
    reqs = [req(0, "ok x"), req(1, f"{mode} y"), req(2, "ok z")]
    await drive(client, reqs, LoadPattern(concurrency=1), records.append)
    await client.close()
    assert [r.request_id for r in records] == [0, 1, 2]
    assert records[0].status == records[2].status == "ok"
    bad = records[1]
    assert bad.status == status and failure_reason(bad.error) == reason and detail in bad.error, bad.error
    if mode in ("reset", "nodone", "malformed", "nonjson"):
        assert len(bad.token_times) >= 1  # what arrived before the failure is kept


@pytest.mark.parametrize("mode", ["finalnodone", "usagenodone"])
async def test_a_stream_ending_after_its_final_chunk_without_done_is_complete(server, mode):
    """`transformers serve` ends its streams after the finish_reason or usage chunk, with no [DONE]: the reply is
    complete (as the OpenAI SDK reads it), and the record notes the missing terminator."""
    client, _clock = client_for(server.url)
    records = []
    await drive(client, [req(0, f"{mode} x"), req(1, "ok y")], LoadPattern(concurrency=1), records.append)
    await client.close()
    cut, plain = records
    assert cut.status == "ok" and cut.error == "" and cut.no_done is True, cut.error
    assert cut.output_tokens == 2 and len(cut.token_times) == 2
    assert plain.status == "ok" and plain.no_done is None


async def test_connection_refused_is_a_record():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    client, clock = client_for(f"http://127.0.0.1:{port}")
    rec = await client.send(req(0, "ok"), clock.now())
    await client.close()
    assert rec.status == "error" and failure_reason(rec.error) == reasons.CANNOT_CONNECT


async def test_api_key_is_sent_but_never_declared(server, monkeypatch):
    monkeypatch.setenv("INFERMETER_TEST_KEY", "sk-secret-123")
    cfg = ClientConfig(server.url, model="m", api_key_env="INFERMETER_TEST_KEY")
    client = OpenAIClient(cfg, RunClock())
    assert client.headers["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in str(declare(cfg))
    await client.close()


async def _written(server, name: str, events: int) -> None:
    """Wait until the server has written `events` content events of request NAME (bounded: 10 s)."""
    for _ in range(1000):
        if len(server.truth(name).get("before", [])) >= events:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the server never wrote {events} events of {name}")


async def test_cancelling_a_send_records_it_then_propagates(server):
    """Cancellation is not swallowed: the record is completed as cancelled, then CancelledError goes on."""
    client, clock = client_for(server.url)
    rec = req(0, "slowtotal q").record(clock.now())
    task = asyncio.create_task(client.send(req(0, "slowtotal q"), rec.scheduled_at, rec))
    await _written(server, "q", 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.close()
    assert task.cancelled()
    assert rec.status == "cancelled" and failure_reason(rec.error) == reasons.CANCELLED, rec.error
    assert rec.submitted_at > 0 and len(rec.token_times) <= len(server.truth("q")["before"])


async def test_asyncio_timeout_around_send_raises_timeout_error(server):
    """With the cancellation propagating, asyncio.timeout works around a send (it used to return a record)."""
    client, clock = client_for(server.url)
    rec = req(0, "slowtotal t").record(clock.now())
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await client.send(req(0, "slowtotal t"), rec.scheduled_at, rec)
    await client.close()
    assert rec.status == "cancelled"


async def test_a_task_group_cancels_sends_when_a_sibling_fails(server):
    client, clock = client_for(server.url)
    rec = req(0, "slowtotal g").record(clock.now())

    async def sibling() -> None:
        await _written(server, "g", 1)
        raise RuntimeError("sibling failed")

    with pytest.raises(ExceptionGroup) as caught:
        async with asyncio.TaskGroup() as group:
            group.create_task(client.send(req(0, "slowtotal g"), rec.scheduled_at, rec))
            group.create_task(sibling())
    await client.close()
    assert [type(e) for e in caught.value.exceptions] == [RuntimeError]
    assert rec.status == "cancelled"


async def test_drive_records_requests_cancelled_at_a_hard_stop(server):
    """A stop, then a hard stop: in-flight requests are cancelled and still reach the sink, once each."""
    client, _ = client_for(server.url)
    stop, hard = asyncio.Event(), asyncio.Event()
    records = []
    reqs = [req(k, f"slowtotal h{k}") for k in range(3)]
    driving = asyncio.create_task(
        drive(client, reqs, LoadPattern(concurrency=3), records.append, stop=stop, hard_stop=hard)
    )
    await _written(server, "h2", 1)
    stop.set()
    hard.set()
    await asyncio.wait_for(driving, 10)
    await client.close()
    assert sorted(r.request_id for r in records) == [0, 1, 2]
    assert {r.status for r in records} == {"cancelled"}


@pytest.mark.parametrize(
    "base, want",
    [
        ("http://h:8000", "http://h:8000/v1/models"),
        ("http://h:8000/", "http://h:8000/v1/models"),
        ("https://h/openai/", "https://h/openai/v1/models"),
        ("https://h/openai?api-version=2024-06-01", "https://h/openai/v1/models?api-version=2024-06-01"),
    ],
)
def test_endpoints_keep_the_base_urls_path_and_query(base, want):
    from infermeter.client.urls import endpoint

    assert endpoint(base, "/v1/models") == want


def _reply(writer: asyncio.StreamWriter, *texts: bytes) -> None:
    """A whole streamed reply: one event per text, then [DONE]."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    events = [b'data: {"choices":[{"text":"%s"}]}\n\n' % t for t in texts] + [b"data: [DONE]\n\n"]
    for event in events:
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
    writer.write(b"0\r\n\r\n")


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
    await reader.readexactly(length)


async def _one_at_a_time(handler, n: int, output_tokens: int, way: str = "send") -> list[RequestRecord]:
    """n requests, one after another, from one client to a loopback server running `handler` per connection; each
    by `send`, or by `start` (the open loop's way: written at once on an idle kept-alive connection)."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    clock = RunClock()
    client = OpenAIClient(ClientConfig(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", model="m"), clock)
    out = []
    for i in range(n):
        req = PreparedRequest(i, "x", 1, output_tokens)
        if way == "send":
            out.append(await client.send(req, clock.now()))
        else:
            out.append(await client.start(req, clock.now(), req.record(clock.now())))
    await client.close()
    server.close()
    return out


async def _close_after_each_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request per connection: read it, stream a reply, close without saying so (as llama.cpp's server does)."""
    await _read_request(reader)
    _reply(writer, b" a", b" b")
    await writer.drain()
    writer.close()


@pytest.mark.parametrize("way", ["send", "start"])
def test_a_request_whose_write_fails_on_a_connection_the_server_closed_is_sent_again(monkeypatch, way):
    """A kept-alive connection the server closed after its reply fails the next write: that request never reached
    the server, so it goes again on a fresh connection; without that, every second request of a closed loop fails."""

    def twenty() -> list[RequestRecord]:
        return asyncio.run(_one_at_a_time(_close_after_each_reply, 20, output_tokens=2, way=way))

    records = twenty()
    assert [r.status for r in records] == ["ok"] * 20 and all(r.output_tokens == 2 for r in records)
    monkeypatch.setattr(openai_sse, "STALE_RETRIES", 0)  # the same without sending again: the failure it prevents
    failed = [r for r in twenty() if r.status != "ok"]
    assert failed and all(failure_reason(r.error) == reasons.CLOSED_BEFORE_RESPONSE for r in failed)


def _serve_then_drop(connections: list[int], answer_fresh: bool):
    """Answers the first request of a connection (or not, with answer_fresh False), then ends the connection when
    the next one arrives without a byte of response: a server that had closed the idle connection just before."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await _read_request(reader)
        if answer_fresh:
            _reply(writer, b" a")
            await writer.drain()
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                await _read_request(reader)
        writer.close()

    return handle


@pytest.mark.parametrize("way", ["send", "start"])
@pytest.mark.parametrize("answer_fresh", [True, False])
def test_a_reused_connection_dropped_before_any_reply_is_sent_again_a_fresh_one_is_not(answer_fresh, way):
    """The request written into a kept-alive connection the server had already closed goes again on a new one; a
    fresh connection closed without a reply is that request's failure (the server got it), and it is not resent."""

    opened: list[int] = []
    records = asyncio.run(_one_at_a_time(_serve_then_drop(opened, answer_fresh), 3, output_tokens=1, way=way))
    connections = len(opened)
    if answer_fresh:
        assert [r.status for r in records] == ["ok"] * 3
        assert connections == 3  # each later request dropped once on the reused connection, then sent on a new one
    else:
        assert [failure_reason(r.error) for r in records] == [reasons.CLOSED_BEFORE_RESPONSE] * 3
        assert connections == 3  # one each: never sent again
