"""--header (with ${VAR} from the environment, never written), --request-id-prefix (X-Request-Id on every request)
and HTTP(S)_PROXY / NO_PROXY, against loopback servers that keep every request head they read."""

import asyncio
import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest, reasons
from infermeter.client.apis import declare
from infermeter.client.headers import extra_headers, names
from infermeter.client.proxy import bypassed, proxy_for
from infermeter.config.sections import Target
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.errors import UserError
from infermeter.load import LoadPattern, drive
from infermeter.load.target import client_config, discover_model
from infermeter.records import RequestRecord, RunClock, failure_reason
from infermeter.secrets import MASK, redact, redact_deep, redact_header, register_header_value

EVENTS = b'data: {"choices":[{"text":" a"}]}\n\ndata: [DONE]\n\n'
MODELS = b'{"data": [{"id": "through-the-proxy"}]}'
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy")


def _reply(body: bytes, kind: bytes = b"text/event-stream") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (kind, len(body), body)


class Recorder:
    """A loopback HTTP/1.1 server (kept alive) that keeps each request's line and headers (names lower-cased) and
    answers it: a model list to GET .../v1/models, else a two-event stream.  Standing as a proxy, it answers itself."""

    def __init__(self) -> None:
        self.heads: list[tuple[str, dict[str, str]]] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> "Recorder":
        self._server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                await reader.readexactly(int(headers.get("content-length", "0")))
                self.heads.append((lines[0], headers))
                models = lines[0].startswith("GET ") and "/v1/models" in lines[0]
                writer.write(_reply(MODELS, b"application/json") if models else _reply(EVENTS))
                await writer.drain()
        writer.close()


@pytest.fixture(autouse=True)
def _no_proxy_from_the_machine(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


async def _send(config: ClientConfig, n: int = 1) -> list[RequestRecord]:
    """n requests through the open loop (the first on a new connection, the rest on kept-alive ones, written by
    `start`)."""
    client = OpenAIClient(config, RunClock())
    records: list[RequestRecord] = []
    try:
        reqs = [PreparedRequest(i, "p", 1, 1) for i in range(n)]
        await drive(client, reqs, LoadPattern(offsets=np.arange(n) * 0.02), records.append)
    finally:
        await client.close()
    return sorted(records, key=lambda r: r.request_id)


# --header


def test_header_values_read_variables_from_the_environment():
    env = {"TEAM": "a", "TOKEN": "t0k"}
    got = extra_headers(["X-Tenant: team-${TEAM}", "Authorization: Bearer ${TOKEN}"], None, env)
    assert got == (("X-Tenant", "team-a"), ("Authorization", "Bearer t0k"))
    assert names(["X-Tenant: team-${TEAM}", "X-B: 1"]) == ["X-Tenant", "X-B"]


@pytest.mark.parametrize(
    ("lines", "prefix", "says"),
    [
        (["X-Tenant: ${NOT_SET_HERE}"], None, "--header X-Tenant: ${NOT_SET_HERE} is not set in the environment"),
        (["Content-Type: text/plain"], None, "--header Content-Type: infermeter sets Content-Type itself"),
        (["host: example.com"], None, "--header host: infermeter sets host itself"),
        (["Content-Length: 5"], None, "infermeter sets Content-Length itself"),
        (["Accept: */*"], None, "infermeter sets Accept itself"),
        (["X-Request-Id: 1"], "run", "--header X-Request-Id and --request-id-prefix both set X-Request-Id"),
        (["X-A: 1", "x-a: 2"], None, "--header x-a is given twice"),
    ],
)
def test_a_header_that_cannot_be_sent_is_a_one_line_error(lines, prefix, says):
    with pytest.raises(UserError) as err:
        extra_headers(lines, prefix, {})
    assert says in str(err.value) and "\n" not in str(err.value)


def test_client_config_expands_the_target_sections_headers(monkeypatch):
    monkeypatch.setenv("H4_TENANT", "tenant-from-env-8842")
    cfg = client_config(Target(header=["X-Tenant: ${H4_TENANT}"], request_id_prefix="bench"), "http://127.0.0.1:9")
    assert cfg.extra_headers == (("X-Tenant", "tenant-from-env-8842"),) and cfg.request_id_prefix == "bench"
    assert redact("the server said tenant-from-env-8842") == f"the server said {MASK}"  # registered as a secret
    monkeypatch.delenv("H4_TENANT")
    with pytest.raises(UserError, match=r"\$\{H4_TENANT\} is not set"):
        client_config(Target(header=["X-Tenant: ${H4_TENANT}"]), "http://127.0.0.1:9")


def test_authorization_given_by_header_replaces_the_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-key-from-the-environment-1")
    plain = ClientConfig("http://127.0.0.1:9")
    assert plain.headers()["Authorization"] == "Bearer sk-the-key-from-the-environment-1"
    cfg = ClientConfig("http://127.0.0.1:9", extra_headers=(("Authorization", "Basic dXNlcjpwdw=="),))
    sent = cfg.headers()
    assert sent["Authorization"] == "Basic dXNlcjpwdw==" and list(sent).count("Authorization") == 1
    assert declare(cfg).api_key == "from --header Authorization"


def test_credential_like_header_lines_are_masked_and_variable_references_kept():
    assert redact_header("X-Api-Key: abc123") == f"X-Api-Key: {MASK}"
    assert redact_header("Authorization: Bearer abc123") == f"Authorization: Bearer {MASK}"
    assert redact_header("Cookie: session=abc; other=1") == f"Cookie: {MASK}"
    assert redact_header("X-Auth-Token: pre-${T}") == f"X-Auth-Token: {MASK}${{T}}"
    for kept in ("Authorization: Bearer ${TOKEN}", "X-Api-Key: ${KEY}", "X-Tenant: a", "Authorization: Basic ${B}"):
        assert redact(kept) == kept
    for value in ("Basic Zm9vOmJhcg==", "s3cr3t-value"):  # what client_config registers for literal credentials
        register_header_value(value)
    written = redact_deep({"target": {"header": ["Proxy-Authorization: Basic Zm9vOmJhcg==", "X-Secret: s3cr3t-value"]}})
    assert "Zm9vOmJhcg==" not in json.dumps(written) and "s3cr3t-value" not in json.dumps(written)
    for message in ("KeyError: 'choices'", "TokenizerError: vocab mismatch"):  # error text is no header line
        assert redact(message) == message


def test_run_json_keeps_header_names_and_unexpanded_text_never_the_values(tmp_path):
    """The whole run: headers sent, run.json's config with ${VAR} as given and literal credentials masked, its load
    block naming the headers only."""
    env = {**os.environ, "H4_TENANT": "tenant-value-from-env-5521"}
    out = tmp_path / "run"
    with running_emulator(EmulatorConfig()) as url:
        p = subprocess.run(
            [sys.executable, "-m", "infermeter", "run", "--no-progress", "--url", url, "--model", "m", "--rate", "50",
             "-n", "6", "--warmup", "off", "--input-tokens", "8", "--output-tokens", "4", "--out", str(out),
             "--header", "X-Tenant: ${H4_TENANT}", "--header", "X-Api-Key: literal-key-value-7731",
             "--request-id-prefix", "bench"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    written = "\n".join(f.read_text("utf-8", "replace") for f in out.rglob("*.json")) + p.stdout + p.stderr
    assert "tenant-value-from-env-5521" not in written and "literal-key-value-7731" not in written
    info = json.loads((out / "run.json").read_text())
    assert info["config"]["target"]["header"] == ["X-Tenant: ${H4_TENANT}", f"X-Api-Key: {MASK}"]
    assert info["load"]["headers"] == ["X-Tenant", "X-Api-Key"]


# --request-id-prefix, and the headers as the server reads them


async def test_every_request_carries_its_headers_and_its_request_id():
    async with Recorder() as server:
        cfg = ClientConfig(server.url, model="m", extra_headers=(("X-Tenant", "a"),), request_id_prefix="run-7")
        records = await _send(cfg, 4)
        plain = await _send(ClientConfig(server.url, model="m"), 1)
    assert all(r.status == "ok" for r in records + plain)
    heads = [h for _, h in server.heads]
    assert sorted(h["x-request-id"] for h in heads[:4]) == ["run-7-0", "run-7-1", "run-7-2", "run-7-3"]
    assert all(h["x-tenant"] == "a" and h["content-length"] for h in heads[:4])
    assert "x-request-id" not in heads[4] and "x-tenant" not in heads[4]
    assert heads[4]["user-agent"].startswith("infermeter/")


# HTTP(S)_PROXY and NO_PROXY


async def test_an_http_target_goes_through_the_proxy_in_absolute_form(monkeypatch):
    async with Recorder() as origin, Recorder() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url.replace("://", "://user:pr0xy-pass@"))
        cfg = ClientConfig(origin.url, model="m")
        records = await _send(cfg, 2)
        client = OpenAIClient(cfg, RunClock())
        transport = client.declaration().transport or ""
        await client.close()
        model = await discover_model(cfg)  # a side request (aiohttp): through the same proxy
    assert all(r.status == "ok" for r in records) and origin.heads == []
    port = origin.url.rsplit(":", 1)[1]
    lines = [line for line, _ in proxy.heads]
    assert lines[:2] == [f"POST http://127.0.0.1:{port}/v1/completions HTTP/1.1"] * 2
    assert proxy.heads[0][1]["host"] == f"127.0.0.1:{port}"
    assert proxy.heads[0][1]["proxy-authorization"] == "Basic dXNlcjpwcjB4eS1wYXNz"  # user:pr0xy-pass
    assert model == "through-the-proxy" and lines[2] == f"GET http://127.0.0.1:{port}/v1/models HTTP/1.1"
    assert transport.endswith(f"through the HTTP proxy {proxy.url} (from $http_proxy)") and "pr0xy" not in transport


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "*", "localhost,127.0.0.0/8", ".0.0.1"])
async def test_no_proxy_sends_straight_to_the_target(monkeypatch, no_proxy):
    async with Recorder() as origin, Recorder() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        records = await _send(ClientConfig(origin.url, model="m"), 1)
    bypass = no_proxy != ".0.0.1"  # an address matches only itself: no suffix match on numbers
    assert records[0].status == "ok"
    assert (len(origin.heads), len(proxy.heads)) == ((1, 0) if bypass else (0, 1))
    if bypass:
        assert origin.heads[0][0] == "POST /v1/completions HTTP/1.1"


async def test_an_https_target_is_reached_through_a_connect_tunnel(monkeypatch):
    seen: list[bytes] = []

    async def tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        seen.append(await reader.read(3))  # what the client sends into the tunnel: the TLS handshake
        writer.close()

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    records = []
    for handler in (tunnel, refuse):
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        monkeypatch.setenv("HTTPS_PROXY", f"127.0.0.1:{server.sockets[0].getsockname()[1]}")  # no scheme: http://
        records += await _send(ClientConfig("https://127.0.0.1:8443", model="m", connect_timeout=5), 1)
        server.close()
    assert seen[0].startswith(b"CONNECT 127.0.0.1:8443 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n")
    assert seen[1][:2] == b"\x16\x03"  # a TLS record: the handshake went into the tunnel
    assert all(r.status == "error" for r in records)
    assert failure_reason(records[1].error) == reasons.CANNOT_CONNECT and "refused CONNECT" in records[1].error
    assert "407" in records[1].error


def test_no_proxy_entries_match_as_curl_matches_them():
    assert bypassed("api.example.com", 443, "example.com") and bypassed("api.example.com", 443, ".example.com")
    assert bypassed("example.com", 80, " other.org , example.com ")
    assert not bypassed("badexample.com", 80, "example.com")
    assert bypassed("anything", 1, "*") and not bypassed("anything", 1, "") and not bypassed("a", 1, "*.a")
    assert bypassed("10.1.2.3", 80, "10.0.0.0/8") and not bypassed("11.1.2.3", 80, "10.0.0.0/8")
    assert bypassed("::1", 80, "::1") and bypassed("[::1]", 80, "[::1]:80") and not bypassed("::1", 81, "[::1]:80")
    assert bypassed("host", 8000, "host:8000") and not bypassed("host", 8001, "host:8000")
    assert not bypassed("localhost", 80, "example.com")  # loopback is not exempt unless listed (curl)


def test_the_proxy_variables_as_read(monkeypatch):
    env = {"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:2", "HTTPS_PROXY": "proxy.corp:3128"}
    plain, secure = proxy_for("http://h/v1", env), proxy_for("https://h/v1", env)
    assert plain is not None and plain.host == "lower"  # the lower-case name first
    assert secure is not None and (secure.host, secure.port, secure.variable) == ("proxy.corp", 3128, "HTTPS_PROXY")
    loopback = proxy_for("http://127.0.0.1:8000", {"HTTP_PROXY": "http://p:1"})
    assert loopback is not None and loopback.host == "p"  # loopback goes through it too, as curl sends it
    assert proxy_for("http://h", {"http_proxy": ""}) is None and proxy_for("http://h", {}) is None
    assert proxy_for("http://h", {"http_proxy": "http://p:1", "no_proxy": ""}) is not None  # empty exempts nothing
    with pytest.raises(UserError, match=r"only http:// proxies"):
        proxy_for("http://h", {"http_proxy": "socks5://p:1080"})


def test_a_server_this_process_started_is_reached_directly():
    from infermeter.client.proxy import direct

    env = {"HTTP_PROXY": "http://p:1"}
    assert proxy_for("http://127.0.0.1:8123", env) is not None
    with direct("http://127.0.0.1:8123"):
        assert proxy_for("http://127.0.0.1:8123/v1/completions", env) is None
        assert proxy_for("http://127.0.0.1:8124", env) is not None  # only that server
    assert proxy_for("http://127.0.0.1:8123", env) is not None
