"""Disclosures every run makes (draft 4.1, 4.7, 4.8.1, 5.1.3.1): what the user declares, the clock method, the
network round trip before the load, refusals and non-content events seen in the streams."""

from __future__ import annotations

import asyncio
import socket

import orjson
import pytest

from infermeter.client.events import StreamDecoder
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.load.disclosure import SINGLE_MACHINE, clock_method, round_trip, stream_block
from infermeter.records import RequestRecord, read_run_info, records_to_table
from tests.cli import infermeter


def _event(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    return b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n"


def test_the_stream_keeps_the_servers_finish_reason() -> None:
    decoder = StreamDecoder(chat=False)
    decoder.feed(_event(" a") + _event(" b"), 1.0)
    assert decoder.state.finish_reason is None
    decoder.feed(_event("", "content_filter") + b"data: [DONE]\n\n", 2.0)
    decoder.end()
    assert decoder.state.finish_reason == "content_filter" and decoder.state.tokens == 2


def test_stream_block_counts_refusals_and_non_content_first_events() -> None:
    records = [
        RequestRecord(request_id=0, chunk_tokens=[0, 1, 1], finish_reason="length"),  # role-only event first
        RequestRecord(request_id=1, chunk_tokens=[1, 1], finish_reason="length"),
        RequestRecord(request_id=2, chunk_tokens=[0, 0, 2], finish_reason="content_filter"),
        RequestRecord(request_id=3, chunk_tokens=[1], finish_reason="content_filter"),
        RequestRecord(request_id=4, chunk_tokens=[0], status="error", error="timeout", finish_reason=None),
    ]
    block = stream_block(records_to_table(records))
    assert block.non_content_first == 2  # requests 0 and 2; the failed request 4 does not count
    assert block.refusals == 2
    assert block.finish_reasons == {"length": 2, "content_filter": 2}


def test_round_trip_connects_to_a_listening_port_and_counts_a_closed_one() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        net = asyncio.run(round_trip(f"http://127.0.0.1:{port}", samples=5))
    assert net.samples == 5 and net.failures == 0
    assert net.rtt_ms_median is not None and net.rtt_ms_min is not None and 0 < net.rtt_ms_min <= net.rtt_ms_median
    assert f"127.0.0.1:{port}" in net.method
    closed = asyncio.run(round_trip(f"http://127.0.0.1:{port}", samples=3))  # the listener is gone
    assert closed.samples == 0 and closed.failures == 3 and closed.rtt_ms_median is None


def test_only_a_loopback_server_states_its_clock_method_by_itself() -> None:
    assert clock_method("http://127.0.0.1:8000") == SINGLE_MACHINE
    assert clock_method("http://localhost:8000/v1") == SINGLE_MACHINE
    assert clock_method("http://[::1]:8000") == SINGLE_MACHINE
    assert clock_method("https://api.example.com") is None
    assert clock_method("http://10.0.0.5:8000") is None


@pytest.fixture(scope="module")
def server() -> object:
    with running_emulator(EmulatorConfig(speed=4)) as url:
        yield url


def test_a_live_run_reports_what_was_declared_and_not_declared(server: str, tmp_path) -> None:
    """A server at --url declares nothing by itself: the report says "not declared" for what the user left out
    and prints what they gave, with the draft's name for the boundary."""
    common = ("run", "--url", server, "--requests", "5", "--rate", "20", "--warmup", "off", "--no-progress")
    bare = infermeter(*common, "--out", tmp_path / "bare")
    assert bare.returncode == 0, bare.stderr
    assert "- SUT Boundary: not declared" in bare.stdout and "- Hardware: not declared" in bare.stdout
    assert "- Prefix Caching: not declared" in bare.stdout and "Guardrails: not declared" in bare.stdout
    info = read_run_info(tmp_path / "bare")
    assert info.sut.boundary is None and info.sut.clock_sync == SINGLE_MACHINE  # 127.0.0.1: one clock
    assert info.network is not None and info.network.samples == 10 and info.network.rtt_ms_median is not None
    assert info.stream is not None and info.stream.finish_reasons == {"length": 5} and info.stream.refusals == 0

    declared = infermeter(
        *common,
        "--boundary",
        "gateway",
        "--hardware",
        "1x L4 24GB",
        "--prefix-caching",
        "disabled",
        "--guardrails",
        "Llama Guard 3 on input",
        "--clock-sync",
        "NTP, 2 ms",
        "--out",
        tmp_path / "declared",
    )
    assert declared.returncode == 0, declared.stderr
    assert "- SUT Boundary: Application Gateway" in declared.stdout and "- Hardware: 1x L4 24GB" in declared.stdout
    assert "Guardrails: Llama Guard 3 on input" in declared.stdout and "NTP, 2 ms" in declared.stdout
    sut = read_run_info(tmp_path / "declared").sut
    assert (sut.boundary, sut.prefix_caching, sut.clock_sync) == ("Application Gateway", "disabled", "NTP, 2 ms")


def test_declarations_are_refused_for_the_embedded_emulator(tmp_path) -> None:
    p = infermeter("run", "--requests", "3", "--hardware", "8x H100", "--out", tmp_path / "r")
    assert p.returncode == 2 and "--hardware" in p.stderr and "emulator declares its own" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
