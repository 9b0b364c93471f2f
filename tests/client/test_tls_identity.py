"""TLS and identity for every backend: --ca-bundle, --insecure and client certificates over https, and --header with
--request-id-prefix as gRPC metadata, against loopback servers with a throwaway certificate authority."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import orjson
import pytest
from aiohttp import web

from infermeter.client import reasons
from infermeter.client.apis import declare
from infermeter.client.backend import open_backend
from infermeter.client.headers import extra_headers
from infermeter.client.openai_sse import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.client.tls import TlsOptions
from infermeter.errors import UserError
from infermeter.protocols import kserve_v2_pb2 as pb
from infermeter.protocols import kserve_v2_pb2_grpc as pb_grpc
from infermeter.records import RunClock, failure_reason
from tests.loopback import serving
from tests.tls_certs import Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("ca"))


def _stream_app(seen: list[dict[str, str]]) -> web.Application:
    async def completions(request: web.Request) -> web.StreamResponse:
        seen.append(dict(request.headers))
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for text in (" a", " b", " c"):
            event = {"choices": [{"text": text, "index": 0, "finish_reason": None}]}
            await resp.write(b"data: " + orjson.dumps(event) + b"\n\n")
        final = {"choices": [{"text": "", "index": 0, "finish_reason": "length"}]}
        await resp.write(b"data: " + orjson.dumps(final) + b"\n\ndata: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    return app


async def _send_one(url: str, tls: TlsOptions, **kw: object):
    client = OpenAIClient(ClientConfig(url, model="m", tls=tls, **kw), RunClock())  # type: ignore[arg-type]
    try:
        return await client.send(PreparedRequest(0, "hi", 1, 3), 0.0)
    finally:
        await client.close()


def _outcomes(certs: Certs, require_client: bool, options: list[TlsOptions]) -> list[tuple[str, str, int]]:
    seen: list[dict[str, str]] = []

    async def go() -> list[tuple[str, str, int]]:
        async with serving(_stream_app(seen), certs.server_context(require_client)) as url:
            assert url.startswith("https://")
            recs = [await _send_one(url, tls) for tls in options]
        return [(r.status, failure_reason(r.error), r.output_tokens) for r in recs]

    return asyncio.run(go())


def test_https_trusts_the_ca_bundle_and_refuses_an_unknown_ca_unless_insecure(certs: Certs) -> None:
    got = _outcomes(certs, False, [TlsOptions(ca_bundle=certs.ca), TlsOptions(), TlsOptions(insecure=True)])
    assert got[0] == ("ok", "", 3)
    assert got[1][0] == "error" and got[1][1] == reasons.CANNOT_CONNECT  # the system's CAs do not know the test CA
    assert got[2] == ("ok", "", 3)


def test_mutual_tls_needs_the_client_certificate(certs: Certs) -> None:
    with_cert = TlsOptions(ca_bundle=certs.ca, client_cert=certs.client_cert, client_key=certs.client_key)
    got = _outcomes(certs, True, [with_cert, TlsOptions(ca_bundle=certs.ca)])
    assert got[0] == ("ok", "", 3)
    assert got[1][0] == "error"


def test_run_json_declares_insecure_and_the_ca_bundle_never_for_plain_http(certs: Certs) -> None:
    insecure = declare(ClientConfig("https://h:1", model="m", tls=TlsOptions(insecure=True)))
    assert insecure.insecure is True and insecure.tls is not None and "not verified" in insecure.tls
    bundle = declare(ClientConfig("https://h:1", model="m", tls=TlsOptions(ca_bundle=certs.ca)))
    assert bundle.insecure is None and bundle.tls == "CA bundle ca.pem"
    plain = declare(ClientConfig("http://h:1", model="m", tls=TlsOptions(insecure=True)))
    assert plain.tls is None and plain.insecure is None


def test_an_unreadable_ca_bundle_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-ca.pem"
    bad.write_text("hello\n")
    with pytest.raises(UserError) as exc:
        TlsOptions(ca_bundle=bad).context()
    assert "--ca-bundle" in str(exc.value) and "\n" not in str(exc.value)


class _Recorder(pb_grpc.GRPCInferenceServiceServicer):
    """Answers every stream with one token and the final flag, keeping each call's metadata."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    async def ModelStreamInfer(self, request_iterator, context):
        self.metadata.append({k: v for k, v in context.invocation_metadata()})
        async for _ in request_iterator:
            break
        resp = pb.ModelInferResponse(model_name="m")
        resp.outputs.add(name="text_output", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b" x")
        resp.parameters["triton_final_response"].bool_param = True
        yield pb.ModelStreamInferResponse(infer_response=resp)


async def _grpc_round(config: ClientConfig, recorder: _Recorder, server_credentials=None) -> list:
    server = grpc.aio.server()
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(recorder, server)
    address = "127.0.0.1:0"
    if server_credentials is not None:
        port = server.add_secure_port(address, server_credentials)
    else:
        port = server.add_insecure_port(address)
    await server.start()
    scheme = "https" if server_credentials else "grpc"
    config.base_url = f"{scheme}://127.0.0.1:{port}"
    try:
        client = open_backend("grpc", config, RunClock())
        try:
            return [await client.send(PreparedRequest(i, "hi", 1, 1), 0.0) for i in range(2)]
        finally:
            await client.close()
    finally:
        await server.stop(None)


def test_headers_and_request_ids_travel_as_grpc_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANT_FOR_TEST", "team-a")
    headers = extra_headers(["X-Tenant: ${TENANT_FOR_TEST}", "X-Trace: on"], "run7")
    config = ClientConfig("", model="m", api_key_env="NO_SUCH_KEY_FOR_TEST", extra_headers=headers,
                          request_id_prefix="run7")  # fmt: skip
    recorder = _Recorder()
    records = asyncio.run(_grpc_round(config, recorder))
    assert [r.status for r in records] == ["ok", "ok"]
    assert [m.get("x-tenant") for m in recorder.metadata] == ["team-a", "team-a"]
    assert [m.get("x-trace") for m in recorder.metadata] == ["on", "on"]
    assert [m.get("x-request-id") for m in recorder.metadata] == ["run7-0", "run7-1"]
    assert all("content-type" not in m or m["content-type"].startswith("application/grpc") for m in recorder.metadata)


def test_grpc_over_tls_verifies_with_the_ca_bundle(certs: Certs) -> None:
    credentials = grpc.ssl_server_credentials([(certs.server_key.read_bytes(), certs.server_cert.read_bytes())])
    config = ClientConfig("", model="m", tls=TlsOptions(ca_bundle=certs.ca))
    records = asyncio.run(_grpc_round(config, _Recorder(), credentials))
    assert [(r.status, r.output_tokens) for r in records] == [("ok", 1), ("ok", 1)]
    with pytest.raises(UserError, match="--insecure"):
        asyncio.run(_grpc_round(ClientConfig("", model="m", tls=TlsOptions(insecure=True)), _Recorder(), credentials))


def test_an_encrypted_client_key_is_one_line_not_a_passphrase_prompt(certs: Certs, tmp_path: Path) -> None:
    import subprocess

    locked = tmp_path / "locked.key"
    subprocess.run(
        ["openssl", "pkey", "-in", str(certs.client_key), "-aes256", "-passout", "pass:x", "-out", str(locked)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with pytest.raises(UserError) as exc:
        TlsOptions(client_cert=certs.client_cert, client_key=locked).context()
    assert str(exc.value) == f"--client-key {locked} is encrypted: give an unencrypted PEM key"


@pytest.mark.parametrize("url", [None, "http://127.0.0.1:8000"])
def test_tls_options_without_an_https_url_are_refused(certs: Certs, url: str | None) -> None:
    from infermeter.config.sections import Target

    with pytest.raises(UserError, match=r"^--ca-bundle, --insecure secure\(s\) an https:// --url"):
        Target.from_options({"url": url, "ca_bundle": certs.ca, "insecure": True})
    assert Target.from_options({"url": "https://h:8443", "ca_bundle": certs.ca}).ca_bundle == certs.ca
