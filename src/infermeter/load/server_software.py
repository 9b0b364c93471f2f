"""The SUT's software and versions (the IETF draft's Appendix C.1, "Software: inference engine and version"): what the
user declares with --software NAME=VERSION, and what the server says of itself where it offers a way to ask.

Servers answer in their own places: vLLM (and TensorRT-LLM's trtllm-serve) `GET /version` -> {"version": ...};
Hugging Face TGI `GET /info` -> {"model_id", ..., "version", "sha", "docker_label"}; SGLang `GET /get_server_info`
-> its server arguments with "version"; llama.cpp's server `GET /props` -> {..., "build_info": "b5123-<commit>"}.
All are asked at once with a short timeout before the load (beside the clock's measurement); whatever answers is
recorded with the endpoint it came from, and nothing that does not answer costs more than the timeout."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from infermeter.client.urls import endpoint
from infermeter.load.clock_accuracy import CACHE_S
from infermeter.load.disclosure import is_loopback
from infermeter.load.target import RunTarget
from infermeter.run_info import SoftwareVersion, Sut

VERSION_TIMEOUT_S = 2.0
MAX_ANSWER_BYTES = 1 << 20  # SGLang's answer carries every server argument: tens of kilobytes, in several writes
CHUNK_BYTES = 1 << 16
DECLARED = "declared (--software)"
ENDPOINTS = ("/info", "/get_server_info", "/props", "/version")  # those that name their software first


def _version(path: str, doc: object) -> SoftwareVersion | None:
    """The version a server's JSON answer at `path` gives, or None when it is not such an answer."""
    if not isinstance(doc, dict):
        return None
    if path == "/props":
        build = doc.get("build_info")
        if not isinstance(build, str) or not build:
            return None
        return SoftwareVersion(name="llama.cpp server", version=build, source="the server: GET /props (build_info)")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, str | int | float) or str(version) == "":
        return None
    if path == "/info":
        if "model_id" not in doc:  # TGI's Info; another server's /info says nothing known
            return None
        return SoftwareVersion(name="text-generation-inference", version=str(version), source="the server: GET /info")
    if path == "/get_server_info":
        return SoftwareVersion(name="sglang", version=str(version), source="the server: GET /get_server_info")
    return SoftwareVersion(
        name="server", version=str(version), source="the server: GET /version (as vLLM and trtllm-serve answer it)"
    )


async def _body(r: aiohttp.ClientResponse) -> bytes | None:
    """The whole answer body however many writes it came in, or None when it is over MAX_ANSWER_BYTES (a declared
    Content-Length is refused before anything is read)."""
    if r.content_length is not None and r.content_length > MAX_ANSWER_BYTES:
        return None
    body = bytearray()
    async for chunk in r.content.iter_chunked(CHUNK_BYTES):  # ends at the body's end, or past the cap below
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            return None
    return bytes(body)


async def _ask(
    session: aiohttp.ClientSession, base_url: str, path: str, headers: dict[str, str]
) -> SoftwareVersion | None:
    try:
        async with session.get(endpoint(base_url, path), headers=headers, allow_redirects=False) as r:
            if r.status != 200:
                return None
            body = await _body(r)
            return None if body is None else _version(path, orjson.loads(body))
    except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError, ValueError, UnicodeError):
        return None


_ASKED: dict[str, tuple[float, list[SoftwareVersion]]] = {}  # base URL -> (when, what it said)


async def server_versions(
    base_url: str, headers: dict[str, str] | None = None, timeout: float = VERSION_TIMEOUT_S
) -> list[SoftwareVersion]:
    """What the server says of its own software, asked at every known endpoint at once (at most `timeout` seconds);
    the answers that name the software come first.  A remote server is asked once per URL within CACHE_S in this
    process (a suite's levels reuse the answer)."""
    if not base_url:
        return []
    if (cached := _ASKED.get(base_url)) is not None and time.monotonic() - cached[0] < CACHE_S:
        return list(cached[1])
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        found = await asyncio.gather(*(_ask(session, base_url, path, headers or {}) for path in ENDPOINTS))
    versions = [v for v in found if v is not None]
    if not is_loopback(base_url):  # a remote server's answer is kept; one on loopback costs nothing to ask again
        _ASKED[base_url] = (time.monotonic(), versions)
    return list(versions)


def software_versions(declared: dict[str, str], server: list[SoftwareVersion]) -> list[SoftwareVersion]:
    """The run's software list: the user's declarations, then what the server reported."""
    return [SoftwareVersion(name=n, version=v, source=DECLARED) for n, v in declared.items()] + server


def software_line(versions: list[SoftwareVersion]) -> str | None:
    """The software in one line, as C.1 and C.2 print it: 'vllm 0.11.0, cuda 12.8 (declared with --software); server
    0.11.0 (the server: GET /version ...)'; None when nothing is known."""
    declared = [f"{v.name} {v.version}" for v in versions if v.source == DECLARED]
    parts = [f"{', '.join(declared)} (declared with --software)"] if declared else []
    reported = [f"{v.name} {v.version} ({v.source})" for v in versions if v.source != DECLARED]
    return "; ".join(parts + reported) or None


async def disclose_software(sut: Sut, target: RunTarget, declared: dict[str, str], headers: dict[str, str]) -> None:
    """Fill `sut`'s software from --software and the server's own answer (an HTTP server: the OpenAI backend's URL,
    or a gRPC target's HTTP port where known); the embedded emulator's declaration stands as it is."""
    if target.emulated:
        return
    versions = software_versions(declared, await server_versions(target.http_url or "", headers))
    sut.software_versions = versions
    sut.software = software_line(versions)
