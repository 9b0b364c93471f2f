"""Constructed evidence for the requirement tests: runs built from hand-made records and run.json blocks, with no
server and no clock, so that a test states exactly what a suite's runs showed and checks what each requirement says.

    run = fake_run(stream(100, rate=10.0, output=64))           # 100 requests at 10 req/s, 64 tokens each
    run = fake_run(stream(50), info=info(warmup={"requests": 4}))  # a run.json whose warm-up sent 4 requests
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infermeter.metrics import RecordColumns, summarize
from infermeter.records import RequestRecord
from infermeter.run_info import RunInfo
from infermeter.suites.lab import Run


def stream(
    n: int,
    *,
    rate: float = 10.0,
    start: float = 0.0,
    ttft: float = 0.05,
    itl: float = 0.01,
    output: int = 64,
    input_tokens: int = 256,
    request_class: str = "",
    status: str = "ok",
    error: str = "",
    first_id: int = 0,
    chunk: int = 1,
    slowdown: float = 0.0,
) -> list[RequestRecord]:
    """`n` requests sent every 1/rate seconds from `start`, each answered after `ttft` (plus `slowdown` more for each
    request before it: a queue that grows) with `output` tokens `itl` apart, delivered `chunk` tokens per event; a
    failed status carries no tokens."""
    out = []
    for k in range(n):
        sub = start + k / rate
        ok = status == "ok"
        first = sub + ttft + k * slowdown
        times = [first + i * itl for i in range(output)] if ok else []
        chunk_times = times[chunk - 1 :: chunk] if times else []
        if times and len(times) % chunk:
            chunk_times.append(times[-1])
        sizes = [min(chunk, output - i) for i in range(0, output, chunk)] if ok else []
        per_chunk = [t for t, s in zip(chunk_times, sizes, strict=True) for _ in range(s)]
        out.append(
            RequestRecord(
                request_id=first_id + k,
                request_class=request_class,
                input_tokens=input_tokens,
                output_tokens=output if ok else 0,
                max_tokens=output,
                scheduled_at=sub,
                submitted_at=sub,
                token_times=per_chunk,
                chunk_times=chunk_times,
                chunk_tokens=sizes,
                status=status,  # type: ignore[arg-type]
                error=error,
                finish_reason="length" if ok else None,
            )
        )
    return out


def info(**blocks: Any) -> RunInfo:
    """A run.json as a live run writes it, every block given as a dict (or model) replacing the default."""
    base: dict[str, Any] = {
        "kind": "live",
        "sut": {"model": "m", "url": "http://10.0.0.2:8000", "hardware": "1x H100 80GB", "boundary": "Model Engine"},
        "workload": {"name": "synthetic-uniform", "seed": 42},
        "load": {"description": "open-loop poisson at 10 req/s", "requests": 100},
        "tokenizer": {"name": "cl100k_base", "counting_method": "B"},
        "warmup": {
            "done": True,
            "requests": 100,
            "output_tokens": 10_000,
            "queue_drained": True,
            "in_flight_after": 0,
            "stable": True,
        },
        "stream": {"non_content_first": 0, "refusals": 0},
        "network": {"method": "TCP connect", "samples": 10, "rtt_ms_median": 0.2},
    }
    for name, value in blocks.items():
        value = value.model_dump() if hasattr(value, "model_dump") else value
        base[name] = {**base[name], **value} if isinstance(base.get(name), dict) and isinstance(value, dict) else value
    return RunInfo.model_validate(base)


def fake_run(
    records: list[RequestRecord],
    run_info: RunInfo | None = None,
    *,
    key: str = "run",
    level: str | None = None,
    itl_option: str = "B",
) -> Run:
    """A finished run of a suite built from `records`: its summary computed as a live run's is."""
    cols = RecordColumns.from_records(records, "B")
    summary = summarize(cols, itl_option)  # type: ignore[arg-type]
    run = Run(key, key, Path("/nonexistent") / key, summary, run_info or info(), level=level)
    run._cols = cols
    return run
