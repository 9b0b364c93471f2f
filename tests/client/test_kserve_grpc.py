"""KServe v2 / Triton streaming over gRPC: the emulator's front end, the backend, and agreement with SSE."""

import asyncio
import re
import urllib.request
from collections import Counter

import numpy as np
import pytest

from infermeter.client import reasons
from infermeter.client.backend import open_backend
from infermeter.client.kserve_grpc import grpc_target
from infermeter.client.openai_sse import ClientConfig, PreparedRequest
from infermeter.emulator import EmulatorConfig
from infermeter.emulator.faults import Fault, FaultPlan
from infermeter.emulator.grpc_server import RequestError, parse_request
from infermeter.emulator.process import emulator_process
from infermeter.errors import UserError
from infermeter.load import LoadPattern, drive
from infermeter.protocols import kserve_v2_pb2 as pb
from infermeter.records import RunClock, failure_reason
from tests.prompts import cl100k
from tests.prompts import request as exact_request
from tests.timing import Noise, measured


@pytest.fixture(scope="module")
def emulator():
    with emulator_process(EmulatorConfig(grpc_port=0, max_model_len=4096, prefix_caching=False)) as emu:
        assert emu.grpc_target is not None
        yield emu


def request(*inputs: tuple[str, str, bytes | int], raw: bool = False) -> pb.ModelInferRequest:
    msg = pb.ModelInferRequest(model_name="m")
    for name, datatype, value in inputs:
        t = msg.inputs.add(name=name, datatype=datatype, shape=[1])
        if raw:
            data = value if isinstance(value, bytes) else int(value).to_bytes(4, "little", signed=True)
            msg.raw_input_contents.append(len(data).to_bytes(4, "little") + data if datatype == "BYTES" else data)
        elif isinstance(value, bytes):
            t.contents.bytes_contents.append(value)
        else:
            t.contents.int_contents.append(value)
    return msg


def test_the_emulator_reads_each_way_a_triton_client_sends_a_prompt_and_its_length():
    vllm_style = request(("text_input", "BYTES", b"a b c"), ("sampling_parameters", "BYTES", b'{"max_tokens": 7}'))
    assert parse_request(vllm_style) == ("a b c", 7)
    trtllm_style = request(("text_input", "BYTES", b"x y"), ("max_tokens", "INT32", 5))
    assert parse_request(trtllm_style) == ("x y", 5)
    raw = request(("text_input", "BYTES", b"raw words"), ("max_tokens", "INT32", 3), raw=True)
    assert parse_request(raw) == ("raw words", 3)
    param = request(("text_input", "BYTES", b"p"))
    param.parameters["max_tokens"].int64_param = 9
    assert parse_request(param) == ("p", 9)
    with pytest.raises(RequestError, match="no text_input"):
        parse_request(request(("prompt", "BYTES", b"x")))
    with pytest.raises(RequestError, match="max_tokens must be a positive integer"):
        parse_request(request(("text_input", "BYTES", b"x"), ("max_tokens", "INT32", 0)))


def test_targets_are_host_and_port():
    assert grpc_target("grpc://127.0.0.1:8001") == grpc_target("127.0.0.1:8001") == "127.0.0.1:8001"
    with pytest.raises(UserError, match="does not name a gRPC server"):
        grpc_target("grpc://127.0.0.1")


async def _send_all(target: str, reqs: list[PreparedRequest], backend: str, **kw):
    client = open_backend(backend, ClientConfig(target, model="infermeter-emulator", **kw), RunClock())
    records = []
    await drive(client, reqs, LoadPattern(concurrency=1), records.append)
    await client.close()
    return sorted(records, key=lambda r: r.request_id)


def test_a_stream_over_grpc_is_one_record_per_request_with_every_token(emulator):
    reqs = [exact_request(i, 32, 12) for i in range(4)]
    records = asyncio.run(_send_all(emulator.grpc_target, reqs, "grpc"))
    for rec in records:
        assert rec.status == "ok", rec.error
        assert rec.output_tokens == len(rec.token_times) == 12 and rec.chunk_tokens == [1] * 12
        assert rec.submitted_at < rec.token_times[0] and np.all(np.diff(rec.token_times) > 0)
        # the emulator's own emission times come along; their gaps are the engine's steps
        assert rec.server_token_times is not None and len(rec.server_token_times) == 12


def _prompt_tokens_total(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return float(re.search(r"^vllm:prompt_tokens_total\{[^}]*\} ([0-9.e+]+)$", text, re.M).group(1))


def test_grpc_prompts_are_counted_with_the_emulators_tokenizer_and_replies_with_the_reference(emulator):
    """The engine prefills the prompt's cl100k_base tokens (no prefix cache here: every one is computed), and the
    reply's text, counted under cl100k_base when the stream ends, is as many tokens as responses were streamed."""
    text = "Hello, world! 12345 \u00fcn\u00efc\u00f6d\u00e9 \u2014 tabs\tand\nnewlines"
    before = _prompt_tokens_total(emulator.url)
    count = lambda t: len(cl100k().encode(t))  # noqa: E731
    (rec,) = asyncio.run(_send_all(emulator.grpc_target, [PreparedRequest(0, text, 1, 9)], "grpc", count_text=count))
    assert rec.status == "ok", rec.error
    assert _prompt_tokens_total(emulator.url) - before == len(cl100k().encode(text)) == 20
    assert rec.output_tokens == 9 and rec.ref_output_tokens == 9


def test_grpc_failures_are_records_with_reasons(emulator):
    too_long = [exact_request(0, 64, 5000)]  # past max_model_len 4096
    (rec,) = asyncio.run(_send_all(emulator.grpc_target, too_long, "grpc"))
    assert rec.status == "error" and failure_reason(rec.error) == reasons.SERVER_ERROR_EVENT
    assert "exceeds max_model_len" in rec.error
    (refused,) = asyncio.run(_send_all("127.0.0.1:9", [PreparedRequest(1, "a", 1, 2)], "grpc", connect_timeout=2))
    assert refused.status == "error" and failure_reason(refused.error) == reasons.CANNOT_CONNECT, refused.error


def test_ttft_and_itl_over_grpc_agree_with_sse_on_the_same_emulator(emulator):
    """One request at a time, alternating transports on one engine: what differs is the transport alone."""
    # unique prompts and no prefix cache on this engine: neither transport finds the other's work cached
    reqs = {b: [exact_request(i + k * 10**6, 128, 16) for i in range(24)] for k, b in enumerate(("openai", "grpc"))}

    def measure():
        ttft, itl = {"grpc": [], "openai": []}, {"grpc": [], "openai": []}
        for half in (slice(0, 12), slice(12, 24)):
            for backend, target in (("openai", emulator.url), ("grpc", emulator.grpc_target)):
                for rec in asyncio.run(_send_all(target, reqs[backend][half], backend)):
                    assert rec.status == "ok", rec.error
                    ttft[backend].append(rec.token_times[0] - rec.submitted_at)
                    itl[backend] += list(np.diff(rec.token_times))
        return ttft, itl

    def check(result, noise: Noise) -> None:
        ttft, itl = result
        med = {k: {b: float(np.median(v[b])) * 1e3 for b in v} for k, v in (("ttft", ttft), ("itl", itl))}
        # a transport that added a step, a missed event or a wrong stamp would be a millisecond or more apart
        assert abs(med["ttft"]["grpc"] - med["ttft"]["openai"]) < 1.0, med
        assert abs(med["itl"]["grpc"] - med["itl"]["openai"]) < 0.5, med

    measured(measure, check)


def test_grpc_faults_and_keys_are_records_with_their_status(monkeypatch):
    """The emulator's faults as gRPC has them, counted per reason exactly as its seeded plan draws them; a call without
    the key ends UNAUTHENTICATED, one with it is served."""
    faults = [
        Fault(kind="http_429", share=0.2),
        Fault(kind="http_503", share=0.15),
        Fault(kind="reset_mid_stream", share=0.15, at=0.5),
        Fault(kind="error_event", share=0.15, at=0.25),
        Fault(kind="stall_mid_stream", share=0.1, stall_s=0.01),
    ]
    cfg = EmulatorConfig(grpc_port=0, faults=faults, seed=5, api_key="emu-key-123", prefix_caching=False)
    plan = FaultPlan(faults, 5)
    drawn = Counter((f.kind if f is not None else "none") for f in (plan.draw() for _ in range(40)))
    want = {
        "gRPC RESOURCE_EXHAUSTED": drawn["http_429"],
        "gRPC UNAVAILABLE": drawn["http_503"],
        reasons.LOST_MID_STREAM: drawn["reset_mid_stream"],
        reasons.SERVER_ERROR_EVENT: drawn["error_event"],
    }
    reqs = [exact_request(i, 16, 8) for i in range(40)]
    with emulator_process(cfg) as emu:
        assert emu.grpc_target is not None
        monkeypatch.delenv("GRPC_TEST_KEY", raising=False)
        (refused,) = asyncio.run(_send_all(emu.grpc_target, reqs[:1], "grpc", api_key_env="GRPC_TEST_KEY"))
        assert failure_reason(refused.error) == "gRPC UNAUTHENTICATED", refused.error
        monkeypatch.setenv("GRPC_TEST_KEY", "emu-key-123")
        records = asyncio.run(_send_all(emu.grpc_target, reqs, "grpc", api_key_env="GRPC_TEST_KEY"))
    got = Counter(failure_reason(r.error) for r in records if r.status != "ok")
    assert dict(got) == {k: v for k, v in want.items() if v}, (got, drawn)
    ok = [r for r in records if r.status == "ok"]
    assert len(ok) == drawn["none"] + drawn["stall_mid_stream"] and all(r.output_tokens == 8 for r in ok)
    cut = [r for r in records if failure_reason(r.error) == reasons.LOST_MID_STREAM]
    assert all(len(r.chunk_times) == 4 for r in cut)  # reset after half of the 8 tokens
    # one request at a time, so request i met draw i: a stalled stream held at least stall_s after its fourth token
    again = FaultPlan(faults, 5)
    order = [(f.kind if f is not None else "none") for f in (again.draw() for _ in range(40))]
    stalled = [r for r in records if order[r.request_id] == "stall_mid_stream"]
    assert len(stalled) == drawn["stall_mid_stream"] > 0
    assert all(r.token_times[4] - r.token_times[3] >= 0.01 for r in stalled)
