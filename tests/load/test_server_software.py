"""The SUT's software (Appendix C.1): --software NAME=VERSION declarations, and the server's own version asked where
servers offer it (vLLM /version, TGI /info, SGLang /get_server_info, llama.cpp /props), shown in C.1 and C.2."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from infermeter.client.openai_sse import ClientConfig
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.load import server_software
from infermeter.load.server_software import (
    DECLARED,
    MAX_ANSWER_BYTES,
    disclose_software,
    server_versions,
    software_line,
)
from infermeter.load.target import Endpoint, RunTarget
from infermeter.records import read_run_info
from infermeter.run_info import Sut
from tests.cli import infermeter
from tests.loopback import serving

# what each server answers, as their sources write it (trimmed)
VLLM = {"/version": {"version": "0.11.0"}}
TGI = {
    "/info": {"model_id": "mistralai/Ministral-8B-Instruct-2410", "max_total_tokens": 32768, "version": "3.2.1"},
    "/version": None,  # TGI has no /version: 404
}
SGLANG = {"/get_server_info": {"model_path": "qwen/qwen2.5-0.5b-instruct", "tp_size": 1, "version": "0.5.2"}}
LLAMA_CPP = {"/props": {"total_slots": 1, "chat_template": "...", "build_info": "b6200-3f196be8"}}


@asynccontextmanager
async def answering(routes: dict[str, Any], delay_s: float = 0.0) -> AsyncIterator[str]:
    """A server on 127.0.0.1 answering `routes` with JSON (anything else: 404), after `delay_s`."""

    async def answer(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay_s)
        body = routes.get(request.path)
        if body is None:
            raise web.HTTPNotFound()
        return web.json_response(body) if not isinstance(body, str) else web.Response(text=body)

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    async with serving(app) as url:
        yield url


def ask(routes: dict[str, Any]) -> list[tuple[str, str, str]]:
    async def run() -> list[tuple[str, str, str]]:
        async with answering(routes) as url:
            return [(v.name, v.version, v.source) for v in await server_versions(url)]

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("routes", "name", "version", "endpoint"),
    [
        (VLLM, "server", "0.11.0", "GET /version"),
        (TGI, "text-generation-inference", "3.2.1", "GET /info"),
        (SGLANG, "sglang", "0.5.2", "GET /get_server_info"),
        (LLAMA_CPP, "llama.cpp server", "b6200-3f196be8", "GET /props"),
    ],
)
def test_each_server_is_asked_where_it_answers(routes: dict[str, Any], name: str, version: str, endpoint: str) -> None:
    (got,) = ask(routes)
    assert got[:2] == (name, version) and endpoint in got[2]


def test_answers_that_name_no_version_are_left_out() -> None:
    odd = {"/info": {"version": "1.0"}, "/version": "<html>not json</html>", "/props": {"build_info": ""}}
    assert ask(odd) == []  # an /info without TGI's model_id, HTML, an empty build
    assert ask({}) == []


def test_a_server_that_does_not_answer_costs_the_timeout_and_no_more() -> None:
    async def run() -> tuple[list[object], float]:
        async with answering(VLLM, delay_s=2.0) as url:
            started = time.monotonic()
            got = await server_versions(url, timeout=0.3)
            return list(got), time.monotonic() - started

    got, took = asyncio.run(run())
    assert got == [] and took < 1.5  # every endpoint at once, each cut at the timeout (not the 2 s answer)


@asynccontextmanager
async def raw_server(answer: bytes, split_at: int, pause_s: float = 0.05) -> AsyncIterator[str]:
    """A server on 127.0.0.1 writing `answer` to every request in two writes, `split_at` bytes then the rest after
    `pause_s` (as a large JSON body arrives: SGLang's server arguments run to tens of kilobytes)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer[:split_at])
            await writer.drain()
            await asyncio.sleep(pause_s)
            writer.write(answer[split_at:])
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def _json_answer(body: bytes, length: int | None = None) -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length or len(body)}\r\n\r\n"
    return head.encode() + body


def _asked(answer: bytes, split_at: int) -> list[tuple[str, str]]:
    async def run() -> list[tuple[str, str]]:
        async with raw_server(answer, split_at) as url:
            return [(v.name, v.version) for v in await server_versions(url)]

    return asyncio.run(run())


def test_a_body_that_arrives_in_two_writes_is_read_whole() -> None:
    """SGLang's /get_server_info in two writes: the whole body is read (a mutant reading what is buffered, as
    content.read(n) does, parses half a JSON document and finds no version)."""
    body = orjson.dumps({"model_path": "m", "args": "x" * 40_000, "version": "0.5.2"})
    answer = _json_answer(body)
    got = _asked(answer, len(answer) - len(body) + 1000)  # every path gets this answer: two of them read it
    assert got == [("sglang", "0.5.2"), ("server", "0.5.2")]


def test_an_answer_over_the_cap_is_refused() -> None:
    big = orjson.dumps({"version": "1.0", "pad": "x" * MAX_ANSWER_BYTES})
    assert _asked(_json_answer(big), 100) == []  # its Content-Length says too much: refused unread
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    for k in range(0, len(big), 1 << 16):  # no length given: read up to the cap, then given up
        part = big[k : k + (1 << 16)]
        chunked += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    assert _asked(chunked + b"0\r\n\r\n", 100) == []


def test_declared_and_reported_software_fill_the_sut() -> None:
    async def run() -> Sut:
        async with answering(VLLM) as url:
            sut = Sut()
            target = RunTarget("openai", ClientConfig(url), Endpoint(url, {}, url))
            await disclose_software(sut, target, {"vllm": "0.11.0", "cuda": "12.8"}, {})
            return sut

    sut = asyncio.run(run())
    assert [(v.name, v.version) for v in sut.software_versions] == [
        ("vllm", "0.11.0"),
        ("cuda", "12.8"),
        ("server", "0.11.0"),
    ]
    assert sut.software_versions[0].source == DECLARED and "GET /version" in sut.software_versions[2].source
    assert sut.software == software_line(sut.software_versions)
    assert sut.software is not None and sut.software.startswith("vllm 0.11.0, cuda 12.8 (declared with --software); ")


def test_a_live_run_declares_its_software_in_run_json_and_the_reports(tmp_path: Path) -> None:
    with running_emulator(EmulatorConfig(speed=4)) as url:
        common = ("run", "--url", url, "--requests", "3", "--rate", "20", "--warmup", "off", "--no-progress")
        bare = infermeter(*common, "--out", tmp_path / "bare")
        run = infermeter(*common, "--software", "vllm=0.11.0", "--software", "cuda=12.8", "--out", tmp_path / "r")
    assert bare.returncode == 0 and run.returncode == 0, run.stderr
    assert "- Software: not declared" in bare.stdout  # the emulator at --url offers no version endpoint
    assert "- Software: vllm 0.11.0, cuda 12.8 (declared with --software)" in run.stdout
    sut = read_run_info(tmp_path / "r").sut
    assert [(v.name, v.version, v.source) for v in sut.software_versions] == [
        ("vllm", "0.11.0", DECLARED),
        ("cuda", "12.8", DECLARED),
    ]
    html = tmp_path / "r.md"
    report = infermeter("report", tmp_path / "r", "--markdown", html)
    assert report.returncode == 0, report.stderr
    assert "Software: vllm 0.11.0, cuda 12.8 (declared with --software)" in html.read_text()  # C.2


def test_the_embedded_emulator_declares_its_own_version(tmp_path: Path) -> None:
    from infermeter import __version__

    p = infermeter("run", "--requests", "3", "--warmup", "off", "--no-progress", "--out", tmp_path / "e")
    assert p.returncode == 0, p.stderr
    sut = read_run_info(tmp_path / "e").sut
    assert [(v.name, v.version) for v in sut.software_versions] == [("infermeter emulator", __version__)]
    assert f"- Software: infermeter emulator {__version__}" in p.stdout


@pytest.mark.parametrize("given", [["vllm=0.11.0", "cuda=12.8"], {"vllm": "0.11.0", "cuda": "12.8"}])
def test_a_scenario_declares_software_as_a_list_or_a_mapping(given: Any) -> None:
    from pydantic import ValidationError

    from infermeter.config.run import RunConfig

    doc = {"target": {"url": "http://127.0.0.1:9"}, "load": {"rate": 1}, "disclosures": {"software": given}}
    cfg = RunConfig.model_validate(doc)
    assert cfg.disclosures.software_versions() == {"vllm": "0.11.0", "cuda": "12.8"}
    assert "software" not in cfg.disclosures.declared()  # kept apart from the one-line declarations
    with pytest.raises(ValidationError, match="--software"):  # the embedded emulator declares its own
        RunConfig.model_validate({**doc, "target": {}})


def test_a_scenario_version_yaml_reads_as_a_number_is_refused(tmp_path: Path) -> None:
    """`torch: 2.10` is the number 2.1 to YAML: refused with a line asking to quote it (exit 2, nothing written),
    where a mutant formatting the number would declare torch 2.1."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "target: {url: 'http://127.0.0.1:9'}\nload: {rate: 1}\ndisclosures: {software: {torch: 2.10}}\n"
    )
    p = infermeter("run", "--config", scenario, "--out", tmp_path / "r")
    assert p.returncode == 2 and p.stdout == ""
    (line,) = p.stderr.strip().splitlines()
    assert "software" in line and "torch: 2.1" in line and "quote" in line
    assert not (tmp_path / "r").exists()
    quoted = tmp_path / "q.yaml"
    quoted.write_text(scenario.read_text().replace("2.10", '"2.10"'))
    from infermeter.config.run import RunConfig
    from infermeter.config.scenario import read_scenario

    assert RunConfig.model_validate(read_scenario(quoted)).disclosures.software_versions() == {"torch": "2.10"}


def test_the_emulators_declaration_holds_typed_versions() -> None:
    from infermeter.emulator.declaration import sut_declaration
    from infermeter.run_info import SoftwareVersion

    versions = sut_declaration(EmulatorConfig())["software_versions"]
    assert versions and all(isinstance(v, SoftwareVersion) for v in versions)
    sut = Sut.model_validate({k: v for k, v in sut_declaration(EmulatorConfig()).items() if k != "emulated"})
    assert sut.software_versions == versions  # the run.json model keeps them as declared


def test_a_remote_servers_answer_is_asked_once_per_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """A suite's levels reuse the answer: a second ask of the same URL sends nothing."""
    monkeypatch.setattr(server_software, "is_loopback", lambda url: False)
    monkeypatch.setattr(server_software, "_ASKED", {})

    async def run() -> tuple[list[Any], list[Any], int]:
        hits: list[str] = []

        async def answer(request: web.Request) -> web.Response:
            hits.append(request.path)
            raise web.HTTPNotFound() if request.path != "/version" else web.HTTPOk(text='{"version": "0.11.0"}')

        app = web.Application()
        app.router.add_get("/{tail:.*}", answer)
        async with serving(app) as url:
            first = await server_versions(url)
            n = len(hits)
            again = await server_versions(url)
            return first, again, len(hits) - n

    first, again, asked_again = asyncio.run(run())
    assert [v.version for v in first] == ["0.11.0"] and again == first and asked_again == 0
