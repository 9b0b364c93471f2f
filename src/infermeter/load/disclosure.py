"""What a run measures and declares about the path to the server besides the load itself: the clock method (draft
4.7.1-4.7.2), the network round trip before the load (4.7.3), and what the event streams showed beyond tokens
(non-content events first, 5.1.3.1; refusals, 4.8.1)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections import Counter
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa

from infermeter.run_info import Network, Stream

RTT_SAMPLES = 10
RTT_TIMEOUT_S = 2.0
SINGLE_MACHINE = "single machine (draft 4.7.1): the server is on loopback and shares the load generator's clock"
REFUSAL = "content_filter"


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return parts.hostname or "", parts.port or default


def is_loopback(url: str) -> bool:
    host = _host_port(url)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def clock_method(url: str) -> str | None:
    """The clock method a run can state by itself: one clock when the server is on this machine; else the user's."""
    return SINGLE_MACHINE if url and is_loopback(url) else None


async def round_trip(url: str, samples: int = RTT_SAMPLES, timeout: float = RTT_TIMEOUT_S) -> Network:
    """The TCP connect time to the server's host and port, `samples` times: one round trip (SYN, SYN-ACK) each,
    without TLS or HTTP, so it is the network's share of TTFT and nothing of the server's."""
    host, port = _host_port(url)
    times: list[float] = []
    failures = 0
    for _ in range(samples):
        start = time.perf_counter()
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError):
            failures += 1
            continue
        times.append((time.perf_counter() - start) * 1000)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return Network(
        method=f"TCP connect to {host}:{port}, {samples} samples before the load",
        samples=len(times),
        rtt_ms_median=float(np.median(times)) if times else None,
        rtt_ms_min=min(times) if times else None,
        failures=failures,
    )


def stream_block(table: pa.Table) -> Stream:
    """Successful requests with a non-content event before the first content (a first chunk carrying no tokens)
    or a stream that ended without [DONE], and over every request the finish reasons the server named, refusals
    among them."""
    ok = np.asarray(table.column("status").to_numpy(zero_copy_only=False) == "ok")
    chunks = table.column("chunk_tokens").to_pylist()
    first_empty = sum(1 for good, c in zip(ok, chunks, strict=True) if good and c and c[0] == 0)
    reasons = Counter(r for r in table.column("finish_reason").to_pylist() if r is not None)
    no_done = table.column("no_done").to_pylist() if "no_done" in table.column_names else []
    without_done = sum(1 for good, missing in zip(ok, no_done, strict=True) if good and missing)
    return Stream(
        non_content_first=first_empty,
        refusals=reasons.get(REFUSAL, 0),
        finish_reasons=dict(reasons),
        without_done=without_done,
    )
