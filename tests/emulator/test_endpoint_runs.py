"""Every endpoint end to end, as a user runs it: `infermeter run --api X --requests 30 --rate 10` against the embedded
emulator, each run 30 of 30 ok with a summary holding the metrics that apply to its API and none that do not."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from infermeter.records import read_records, table_to_records
from tests.cli import infermeter

QUIET = ["--warmup", "off", "--no-progress", "--scrape-interval", "0", "--telemetry-interval", "0"]
GENERATING = ["responses", "tgi", "sglang", "triton"]


def _run(tmp_path: Path, api: str, *extra: str) -> tuple[dict, dict, Path]:
    out = tmp_path / api
    p = infermeter("run", "--api", api, "--requests", "30", "--rate", "10", "--out", out, *QUIET, *extra, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    info = orjson.loads((out / "run.json").read_bytes())
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["requests"]["ok"] == summary["requests"]["total"] == 30, summary["requests"]
    return info, summary, out


@pytest.mark.parametrize("api", GENERATING)
def test_a_generating_endpoint_measures_ttft_and_itl(tmp_path: Path, api: str) -> None:
    info, summary, out = _run(tmp_path, api)
    assert info["client"]["api"] == api and info["client"]["generates"] is True
    assert summary["ttft_ms"]["n"] == 30 and summary["ttft_ms"]["p50"] > 0
    assert summary["itl_ms"]["n"] > 0 and "endpoint" not in summary
    records = table_to_records(read_records(out))
    assert all(r.output_tokens == r.max_tokens == len(r.token_times) for r in records)


@pytest.mark.parametrize("api", ["embeddings", "rerank"])
def test_a_pooling_endpoint_measures_latency_and_inputs_not_ttft(tmp_path: Path, api: str) -> None:
    info, summary, out = _run(tmp_path, api, "--batch-inputs", "4")
    assert info["client"]["generates"] is False
    for absent in ("ttft_ms", "itl_ms", "tpot_ms"):
        assert summary[absent]["n"] == 0 and summary[absent]["p50"] is None  # absent, not zero
    block = summary["endpoint"]
    assert block["inputs"]["p50"] == 4 and block["latency_ms"]["n"] == 30 and block["latency_ms"]["p50"] > 0
    assert block["inputs_s"] == pytest.approx(4 * summary["throughput"]["req_s"], rel=1e-6)
    records = table_to_records(read_records(out))
    assert all(r.inputs == 4 and r.completed_at is not None and r.completed_at > r.submitted_at for r in records)


def test_chat_with_images_declares_them_and_sends_them(tmp_path: Path) -> None:
    """The server charged both images of every request: its usage (the records' input_tokens) is the built prompt's
    length plus 2 x 256, one 512 px tile of 256 tokens per 512x512 image (the emulator's defaults)."""
    info, summary, out = _run(tmp_path, "chat", "--images", "2", "--image-size", "512x512")
    media = info["workload"]["media"]
    assert media["images_per_request"] == 2 and media["images_sent"] == 60
    assert media["image_sizes"] == ["512x512"] and media["requests"] == 30
    assert summary["ttft_ms"]["n"] == 30
    records = table_to_records(read_records(out))
    assert len(records) == 30
    assert [r.input_tokens - (r.ref_input_tokens or 0) for r in records] == [2 * 256] * 30
