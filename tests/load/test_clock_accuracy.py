"""The clocks' agreement measured before the load (the IETF draft, 4.7.2): the client's NTP daemon read where one runs,
and a bound on the server's offset from its HTTP Date headers (HEAD probes), tested against local servers (127.0.0.1)
whose Date is shifted by a known amount; the two measured together, in 3 s at most, once per URL in a process."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from email.utils import formatdate
from pathlib import Path

import pytest
from aiohttp import web

from infermeter.client.openai_sse import ClientConfig
from infermeter.load import clock_accuracy as ca
from infermeter.load.disclosure import SINGLE_MACHINE
from infermeter.load.target import Endpoint, RunTarget
from infermeter.suites.disclosures import agreement_verdict, ntp_verdict
from tests.loopback import serving

CHRONY = "A29FC87B,162.159.200.123,3,1700000000.123456789,-0.000012345,0.000001234,0.000023456,-12.345,-0.001,0.012,"
CHRONY_OK = CHRONY + "0.012345678,0.001234567,1024.5,Normal"
CHRONY_UNSYNCED = CHRONY + "0.012345678,0.001234567,1024.5,Not synchronised"
NTPQ = "leap=00, offset=-0.123, rootdelay=1.500, rootdisp=2.250"


@pytest.fixture(autouse=True)
def fresh_measurements() -> Iterator[None]:
    """Each test measures for itself: nothing reused from another test's measurement of the same URL."""
    ca._MEASURED.clear()
    yield
    ca._MEASURED.clear()


@asynccontextmanager
async def shifted_server(
    shift_s: float,
    server_header: str | None = "Python aiohttp",
    methods: list[str] | None = None,
    delay_s: float = 0.0,
) -> AsyncIterator[str]:
    """An HTTP server on 127.0.0.1 whose Date header reads its clock shifted by `shift_s` seconds (its Server header
    names aiohttp, which stamps Date as it answers, unless told otherwise), answering after `delay_s`; `methods`
    collects each request's method."""

    async def answer(request: web.Request) -> web.Response:
        if methods is not None:
            methods.append(request.method)
        await asyncio.sleep(delay_s)
        headers = {"Date": formatdate(time.time() + shift_s, usegmt=True)}
        if server_header is not None:
            headers["Server"] = server_header
        return web.Response(text="x" * 100_000, headers=headers)  # a page as large as a web UI's, for a GET

    app = web.Application()
    app.router.add_route("*", "/", answer)
    async with serving(app) as url:
        yield url


async def _bound(shift_s: float, server_header: str | None = "Python aiohttp") -> ca.DateBound:
    async with shifted_server(shift_s, server_header) as url:
        return await ca.date_bound(url)


def remote(ntp: ca.NtpStatus | None = None, date: ca.DateBound | None = None) -> ca.ClockAccuracy:
    return ca.ClockAccuracy(same_host=False, ntp=ntp, date=date)


@pytest.mark.parametrize("shift_s", [3.25, -0.0123])
def test_the_date_bound_brackets_a_known_offset_well_below_the_dates_second(shift_s: float) -> None:
    started = time.monotonic()
    b = asyncio.run(_bound(shift_s))
    assert b.offset_lo_ms <= shift_s * 1000 <= b.offset_hi_ms, b
    assert b.offset_hi_ms - b.offset_lo_ms < 500  # a single Date answer leaves a whole second
    assert b.probes <= ca.MAX_COARSE + ca.MAX_FINE + 2 and b.lag_allowance_ms == 0
    assert time.monotonic() - started < ca.DATE_BUDGET_S + 0.5  # each probe's timeout is what the budget has left


def test_a_uvicorn_date_is_allowed_its_lag_and_decides_nothing_finer() -> None:
    b = asyncio.run(_bound(0.0, "uvicorn"))
    assert b.lag_allowance_ms == 1500 and b.note is not None and "uvicorn" in b.note and "1.5 s" in b.note
    assert b.offset_lo_ms <= 0 <= b.offset_hi_ms and b.offset_hi_ms - b.offset_lo_ms > 1000
    got, why = agreement_verdict(remote(date=b))
    assert got is None and "too wide" in why
    far = asyncio.run(_bound(5.0, "uvicorn"))  # a gross offset still shows through the allowance
    assert agreement_verdict(remote(date=far))[0] is False


@pytest.mark.parametrize("server", ["envoy", "istio-envoy", None, "Werkzeug/3.0 Python/3.11", "uvicorn"])
def test_a_server_not_known_to_stamp_date_per_answer_is_allowed_the_lag(server: str | None) -> None:
    """envoy in front of vLLM passes uvicorn's cached Date on; a server that names nothing is not trusted either
    (a mutant trusting every server but uvicorn gives envoy and the unnamed one no allowance)."""
    lag, said = ca.date_lag(server)
    assert lag == ca.CACHED_DATE_LAG_S and "not known to stamp" in said and "1.5 s of lag allowed" in said
    assert (server or "no Server header") in said


@pytest.mark.parametrize("server", ["Python/3.11 aiohttp/3.9.5", "nginx/1.25.3", "nginx", "Caddy", "hyper/1.0"])
def test_servers_known_to_stamp_date_per_answer_get_the_fine_bracket(server: str) -> None:
    lag, said = ca.date_lag(server)
    assert lag == 0.0 and "stamps its Date as it answers" in said and server in said


@asynccontextmanager
async def bare_server(date: bool = True) -> AsyncIterator[str]:
    """An HTTP server on 127.0.0.1 that sends no Server header (as Go's net/http and hyper do), and a Date or not."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(200):  # each request on the kept-alive connection, at most 200
            if not await reader.readuntil(b"\r\n\r\n"):
                break
            stamp = f"Date: {formatdate(time.time(), usegmt=True)}\r\n" if date else ""
            writer.write(f"HTTP/1.1 200 OK\r\n{stamp}Content-Length: 0\r\n\r\n".encode())
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def test_the_bound_says_which_assumption_it_used() -> None:
    fine = asyncio.run(_bound(0.0))
    assert fine.lag_allowance_ms == 0 and fine.note is not None and "stamps its Date as it answers" in fine.note

    async def unnamed() -> ca.DateBound:
        async with bare_server() as url:
            return await ca.date_bound(url)

    b = asyncio.run(unnamed())
    assert b.lag_allowance_ms == 1500 and b.note is not None and "no Server header" in b.note


def test_the_probes_ask_for_headers_only() -> None:
    """HEAD, not GET: llama.cpp serves its ~1 MB web UI at / (a mutant sending GET shows here)."""

    async def run() -> list[str]:
        methods: list[str] = []
        async with shifted_server(0.0, methods=methods) as url:
            await ca.date_bound(url)
        return methods

    methods = asyncio.run(run())
    assert methods and set(methods) == {"HEAD"}


def test_a_date_in_zone_minus_0000_is_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """RFC 2822's "-0000" gives a naive datetime, which .timestamp() would read in the local zone: 5.5 h off here
    (a mutant without the UTC default fails)."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    try:
        assert ca.date_seconds("Tue, 15 Nov 1994 08:12:31 -0000") == 784887151
        assert ca.date_seconds("Tue, 15 Nov 1994 08:12:31 GMT") == 784887151
    finally:
        monkeypatch.undo()
        time.tzset()
    with pytest.raises(ValueError, match="not an HTTP date"):
        ca.date_seconds("yesterday")


def test_each_probe_waits_no_longer_than_the_budget_has_left() -> None:
    """A server slower than the budget: the probes give up when it is spent, not PROBE_TIMEOUT_S per probe later."""

    async def run() -> float:
        async def slow(request: web.Request) -> web.Response:
            await asyncio.sleep(5.0)
            return web.Response()

        app = web.Application()
        app.router.add_route("*", "/", slow)
        async with serving(app) as url:
            started = time.monotonic()
            with pytest.raises(ValueError, match="did not answer"):
                await ca.date_bound(url, budget_s=0.3)
            return time.monotonic() - started

    assert asyncio.run(run()) < 0.3 + 0.5  # not the 1 s of one probe's own timeout


def test_a_server_without_a_date_header_gives_no_bound() -> None:
    async def run() -> str:
        async with bare_server(date=False) as url:
            with pytest.raises(ValueError, match="no Date header") as caught:
                await ca.date_bound(url)
        return str(caught.value)

    assert "Date" in asyncio.run(run())


def test_a_loopback_server_shares_the_clients_clock() -> None:
    got = asyncio.run(ca.clock_accuracy("http://127.0.0.1:8000", "http://127.0.0.1:8000"))
    assert got.same_host and got.ntp is None and got.date is None and got.method() == SINGLE_MACHINE
    assert ntp_verdict(got)[0] is True and agreement_verdict(got)[0] is True


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty PATH of fake commands: chronyc and ntpq exist only where a test writes them."""
    monkeypatch.setenv("PATH", str(tmp_path))
    yield tmp_path


def command(where: Path, name: str, output: str, status: int = 0) -> None:
    script = where / name
    script.write_text(f"#!/bin/sh\necho '{output}'\nexit {status}\n")  # builtins only: PATH holds nothing else
    os.chmod(script, 0o755)


def test_chrony_tracking_gives_the_clients_accuracy(bin_dir: Path) -> None:
    command(bin_dir, "chronyc", CHRONY_OK)
    command(bin_dir, "ntpq", NTPQ)  # chrony is asked first
    ntp, why = ca.ntp_status()
    assert ntp is not None and ntp.source.startswith("chrony") and why == []
    assert ntp.synchronised and ntp.accuracy_ms == pytest.approx(0.012345 + 1.234567 + 12.345678 / 2, abs=1e-3)
    assert ntp.reference == "162.159.200.123"


def test_an_unsynchronised_chrony_has_no_accuracy(bin_dir: Path) -> None:
    command(bin_dir, "chronyc", CHRONY_UNSYNCED)
    ntp, _ = ca.ntp_status()
    assert ntp is not None and not ntp.synchronised and ntp.accuracy_ms is None
    got, why = ntp_verdict(remote(ntp=ntp))
    assert got is False and "not synchronised" in why


def test_ntpq_when_chrony_is_not_running(bin_dir: Path) -> None:
    command(bin_dir, "chronyc", "506 Cannot talk to daemon", status=1)
    command(bin_dir, "ntpq", NTPQ)
    ntp, why = ca.ntp_status()
    assert ntp is not None and ntp.source.startswith("ntpd") and ntp.accuracy_ms == pytest.approx(3.123)
    assert why == ["chronyc: 506 Cannot talk to daemon"]


def test_no_ntp_daemon_says_why(bin_dir: Path) -> None:
    ntp, why = ca.ntp_status()
    assert ntp is None and why == ["chronyc not found", "ntpq not found"]


def test_a_remote_server_is_measured_both_ways_and_judged(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole measurement as a run makes it for a remote server (the loopback test server stands in for one)."""
    command(bin_dir, "chronyc", CHRONY_OK)
    monkeypatch.setattr(ca, "is_loopback", lambda url: False)

    async def measure() -> ca.ClockAccuracy:
        async with shifted_server(0.0) as url:
            return await ca.clock_accuracy(url, url)

    got = asyncio.run(measure())
    assert not got.same_host and got.ntp is not None and got.date is not None
    assert got.method() == "chrony (chronyc tracking) and HTTP Date bracket against the server"
    assert got.date.offset_lo_ms <= 0 <= got.date.offset_hi_ms
    assert ntp_verdict(got) == (True, "the client's clock within 7.42 ms of its reference (chrony (chronyc tracking))")
    assert agreement_verdict(got)[0] is True


def test_nothing_measured_names_no_method(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ca, "is_loopback", lambda url: False)
    got = asyncio.run(ca.clock_accuracy("http://127.0.0.1:9", "http://127.0.0.1:9"))  # nothing listens on port 9
    assert got.methods == [] and got.method() is None
    assert got.unavailable[:2] == ["chronyc not found", "ntpq not found"] and "Date probe" in got.unavailable[2]


def test_a_grpc_target_is_probed_at_its_metrics_url_or_says_it_has_no_http(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ca, "is_loopback", lambda url: False)

    async def measure() -> tuple[ca.ClockAccuracy, ca.ClockAccuracy]:
        async with shifted_server(0.0) as url:
            grpc = "10.0.0.2:8001"
            given = RunTarget("grpc", ClientConfig(grpc), Endpoint(grpc, {}, url))
            bare = RunTarget("grpc", ClientConfig(grpc), Endpoint(grpc, {}, None))
            return await ca.measure_clock(given, {}), await ca.measure_clock(bare, {})

    given, bare = asyncio.run(measure())
    assert given.date is not None
    assert bare.date is None and ca.NO_HTTP in bare.unavailable and "gRPC" in ca.NO_HTTP
    assert agreement_verdict(bare)[0] is None


def test_the_measurements_run_together_in_3_s_and_once_per_url(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NTP, the Date bracket and the server's version are asked at once: a chronyc that hangs to its 1 s timeout
    and a server that answers each of the two Date probes 0.45 s late take about 1 s together, not 2 s one after
    the other; a second measurement of the same URL reuses the first and says so."""
    from infermeter.load.server_software import disclose_software
    from infermeter.run_info import Sut

    slow = bin_dir / "chronyc"
    slow.write_text("#!/bin/sh\nwhile :; do :; done\n")  # builtins only; killed at COMMAND_TIMEOUT_S
    os.chmod(slow, 0o755)
    monkeypatch.setattr(ca, "is_loopback", lambda url: False)

    async def both() -> tuple[float, ca.ClockAccuracy, ca.ClockAccuracy, float]:
        async with shifted_server(0.0, "uvicorn", delay_s=0.45) as url:  # uvicorn: two probes, no fine pass
            opts = RunTarget("openai", ClientConfig(url), Endpoint(url, {}, url))
            started = time.monotonic()
            first, _ = await asyncio.gather(ca.measure_clock(opts, {}), disclose_software(Sut(), opts, {}, {}))
            took = time.monotonic() - started
            again_started = time.monotonic()
            again = await ca.measure_clock(opts, {})
            return took, first, again, time.monotonic() - again_started

    took, first, again, again_took = asyncio.run(both())
    assert first.date is not None and first.date.probes == 2 and "chronyc failed (TimeoutExpired)" in first.unavailable
    assert took < ca.COMMAND_TIMEOUT_S + 0.6, took  # one after the other: 1 s + 0.9 s
    assert again.date == first.date and again.note is not None and "reused" in again.note and first.note is None
    assert again_took < 0.05


def test_a_run_measures_the_clock_and_asks_the_software_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conduct/run.py starts both before either ends (a mutant awaiting one after the other fails)."""
    from infermeter.conduct import run as run_module
    from infermeter.emulator import EmulatorConfig, running_emulator
    from tests.load.runs import configured, measured

    events: list[str] = []

    async def clock(target: RunTarget, headers: dict[str, str]) -> ca.ClockAccuracy:
        events.append("clock started")
        await asyncio.sleep(0.2)
        events.append("clock ended")
        return remote()

    async def software(*args: object) -> None:
        events.append("software started")
        await asyncio.sleep(0.2)
        events.append("software ended")

    monkeypatch.setattr(run_module, "measure_clock", clock)
    monkeypatch.setattr(run_module, "disclose_software", software)
    with running_emulator(EmulatorConfig(speed=8)) as url:
        cfg = configured(url, load={"requests": 2, "rate": 20, "warmup": 0})
        asyncio.run(measured(cfg, tmp_path / "r", url))
    assert sorted(events[:2]) == ["clock started", "software started"], events
