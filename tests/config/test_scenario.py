"""Scenario files and run.json's resolved configuration: a run is reproduced from its directory (draft 4.3.3)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest
from aiohttp import web

from infermeter.config.run import RunConfig
from infermeter.config.scenario import run_config
from infermeter.errors import UserError
from infermeter.records import read_records, read_run_info
from tests.cli import infermeter


class RecordingServer:
    """An OpenAI completions server that streams two tokens and keeps what each request asked for, and when."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, float]] = []  # (prompt, max_tokens, perf_counter at arrival)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._complete)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.ready.set()
        self.loop.run_forever()

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen.append((body["prompt"], body["max_tokens"], time.perf_counter()))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for text in (" a", " b"):
            await resp.write(b"data: " + orjson.dumps({"choices": [{"text": text}]}) + b"\n\n")
        usage = {"prompt_tokens": 1, "completion_tokens": 2}
        await resp.write(b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def recording() -> Iterator[RecordingServer]:
    server = RecordingServer()
    yield server
    server.close()


def _requests(seen: list[tuple[str, int, float]]) -> tuple[list[tuple[str, int]], list[float]]:
    """(prompt, max_tokens) of every request, and arrival offsets, each sorted: two sends a few microseconds apart
    may reach the server in either order."""
    t0 = min(t for _, _, t in seen)
    return sorted((p, m) for p, m, _ in seen), sorted(t - t0 for _, _, t in seen)


def test_a_run_directory_reproduces_its_requests(recording: RecordingServer, tmp_path: Path) -> None:
    """`run --config RUN_DIR/run.json --out NEW` sends the same prompts with the same lengths at the same offsets."""
    first = infermeter(
        "run", "--url", recording.url, "--workload", "synthetic-skewed", "--requests", "12", "--rate", "40",
        "--arrival", "gamma", "--burstiness", "0.5", "--seed", "11", "--warmup", "off", "--scrape-interval", "0",
        "--telemetry-interval", "0", "--no-progress", "--out", tmp_path / "a",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    original = list(recording.seen)
    recording.seen.clear()
    again = infermeter("run", "--config", tmp_path / "a" / "run.json", "--out", tmp_path / "b", "--no-progress")
    assert again.returncode == 0, again.stderr
    asked_a, at_a = _requests(original)
    asked_b, at_b = _requests(recording.seen)
    assert len(asked_a) == 12 and len({m for _, m in asked_a}) > 3  # skewed lengths: runs can be told apart
    assert asked_b == asked_a
    # arrival offsets: the schedules are identical (records); what the server saw agrees at the median (a noisy
    # machine may delay single sends by whole milliseconds)
    sched_a = read_records(tmp_path / "a").sort_by("request_id").column("scheduled_at").to_pylist()
    sched_b = read_records(tmp_path / "b").sort_by("request_id").column("scheduled_at").to_pylist()
    assert [x - sched_a[0] for x in sched_a] == pytest.approx([x - sched_b[0] for x in sched_b], abs=1e-9)
    assert float(np.median(np.abs(np.subtract(at_b, at_a)))) < 0.01
    assert read_run_info(tmp_path / "b").config == read_run_info(tmp_path / "a").config


def test_a_scenario_file_with_overrides(tmp_path: Path) -> None:
    """A scenario file gives the options; the command line overrides the keys it names, and defaults resolve."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("target: {url: 'http://127.0.0.1:9', model: m}\nload: {rate: 5, requests: 50}\n")
    cfg = run_config(scenario, {"load": {"rate": 7.5}, "workload": {"seed": 3}})
    assert (cfg.load.rate, cfg.load.requests, cfg.workload.seed, cfg.target.model) == (7.5, 50, 3, "m")
    resolved = cfg.resolved()
    assert resolved.workload.workload == "synthetic-uniform" and resolved.emulator is None
    demo = RunConfig().resolved()  # no url: the embedded emulator at the demo load
    assert (demo.load.rate, demo.load.requests, demo.emulator is not None) == (20.0, 300, True)


def test_scenario_errors_name_the_key(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("load: {rate: 0}\n")
    with pytest.raises(UserError, match=r"^--config .*s\.yaml: load\.rate: must be a rate"):
        run_config(scenario, {})
    scenario.write_text("load: {rate: 1, concurrency: 4}\n")
    with pytest.raises(UserError, match=r"^give either --rate \(open loop\) or --concurrency"):
        run_config(scenario, {})
    with pytest.raises(UserError, match=r"unknown key workload\.sed"):
        scenario.write_text("workload: {sed: 1}\n")
        run_config(scenario, {})


def test_an_option_given_replaces_the_files_alternatives_to_it(tmp_path: Path) -> None:
    """A run.json holds a resolved workload, rate and request count; --input-tokens, --concurrency or --duration
    given beside it answer the same questions, so they replace those keys rather than clash with them."""
    scenario = tmp_path / "run.yaml"
    scenario.write_text("workload: {workload: synthetic-uniform, seed: 4}\nload: {rate: 5, requests: 300}\n")
    cfg = run_config(scenario, {"workload": {"input_tokens": 8, "output_tokens": 4}, "load": {"concurrency": 2}})
    assert (cfg.workload.workload, cfg.workload.input_tokens, cfg.workload.seed) == (None, 8, 4)
    assert (cfg.load.rate, cfg.load.concurrency, cfg.load.requests) == (None, 2, 300)
    cfg = run_config(scenario, {"load": {"duration": 10.0}})
    assert (cfg.load.requests, cfg.load.duration, cfg.load.rate) == (None, 10.0, 5)


def test_options_that_would_be_ignored_are_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    trace.write_text(header + "0,m,5,5,10,x\n1,m,5,5,10,x\n")
    with pytest.raises(UserError, match=r"--arrival and --burstiness shape a rate's arrivals"):
        run_config(None, {"workload": {"trace": trace}, "load": {"arrival": "gamma", "burstiness": 0.5}})
    with pytest.raises(UserError, match=r"--rps-scale \(--time-scale\) compresses a replayed --trace"):
        run_config(None, {"workload": {"rps_scale": 2.0}})
    with pytest.raises(UserError, match=r"is a gRPC address: add --backend grpc"):
        run_config(None, {"target": {"url": "grpc://127.0.0.1:8001"}, "load": {"rate": 1.0}})
    with pytest.raises(UserError, match=r"^--realtime raises this process's sending thread: with --workers"):
        run_config(None, {"load": {"realtime": True}, "scale": {"workers": 2}})
    ok = run_config(None, {"target": {"url": "grpc://127.0.0.1:8001", "backend": "grpc"}, "load": {"rate": 1.0}})
    assert ok.target.url == "grpc://127.0.0.1:8001"


def test_a_section_that_is_not_a_mapping_is_named(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("target: 'http://127.0.0.1:8000'\n")
    with pytest.raises(UserError, match=r"--config .*s\.yaml: target: "):
        run_config(scenario, {})
    scenario.write_text("emulator: {speeed: 2}\n")
    with pytest.raises(UserError, match=r"unknown key emulator\.speeed: the keys are model, engine, .*speed"):
        run_config(scenario, {})


@pytest.mark.parametrize(
    "text, keys",
    [
        ("emulator: {faults: [{kind: http_429, foo: 1}]}", "kind, share, at, stall_s, retry_after_s"),
        (
            "emulator: {engine: {scheduler: {name: multi_bin_dynamic, foo: 1}}}",
            "name, b_min, b_max, .*learn_requests, controller",
        ),
        ("emulator: {engine: {scheduler: {name: priority, foo: 1}}}", "name, max_num_seqs, max_batched_tokens"),
    ],
)
def test_an_unknown_key_deep_in_a_list_or_a_named_config_is_named_with_its_neighbours(tmp_path, text, keys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text + "\n")
    with pytest.raises(
        UserError, match=rf"^--config .*s\.yaml: unknown key emulator\.[a-z.0-9]*foo: the keys are {keys}$"
    ):
        run_config(scenario, {})
