"""Against vLLM: its CPU build (V1 engine: chunked prefill, prefix caching, a token budget per step) serving a
random-weight 11 M-parameter Llama and a word-level tokenizer built offline (vllm_model.py), on loopback, pinned to
one core with infermeter on the other.  The second tier (`pytest --second-tier`).

CI installs vLLM in a venv of its own and sets INFERMETER_VLLM_PYTHON, INFERMETER_VLLM_MODEL and
INFERMETER_REQUIRE_VLLM=1, so there these tests run or fail; on a machine without them they are skipped.  The bounds
on predictions are the mechanism's, wide enough for a shared 2-core machine; benchmarks/twin_real.py --engine vllm
gives the figures on a quiet one.
"""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from infermeter.metrics import RecordColumns
from infermeter.records import read_run_info
from tests.cli import infermeter, suite_result
from tests.integration import servers
from tests.integration.conftest import wait_for
from tests.integration.workloads import fixed_workload, two_lengths

REQUIRED = os.environ.get("INFERMETER_REQUIRE_VLLM") == "1"
MAX_NUM_SEQS = 8

INSTALLING = "INFERMETER_VLLM_INSTALL_STATUS"  # `.ci/run` installs vLLM while the tests before these run

if not os.environ.get(INSTALLING) and servers.vllm_missing():
    if REQUIRED:
        raise RuntimeError(f"INFERMETER_REQUIRE_VLLM=1 but {servers.vllm_missing()}")
    pytest.skip(servers.vllm_missing() or "", allow_module_level=True)

SERVER_CORE, CLIENT_CORE = servers.cores()


def tokenizer() -> str:
    model = servers.vllm_model()
    assert model is not None
    return str(model / "tokenizer.json")


@pytest.fixture(scope="module", autouse=True)
def client_core() -> Iterator[None]:
    """vLLM installed (`.ci/run` installs it meanwhile), and infermeter (this process and the commands it starts) on
    the core the servers leave free."""
    wait_for(INSTALLING, "vLLM's install")
    if servers.vllm_missing():
        raise RuntimeError(f"vLLM's install ended, but {servers.vllm_missing()}")
    with servers.client_pinned(CLIENT_CORE):
        yield


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM with MAX_NUM_SEQS sequences, prefix caching on (its default)."""
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with servers.vllm_server(log, MAX_NUM_SEQS, SERVER_CORE) as url:
        yield url


def metrics(url: str) -> dict[str, float]:
    """vLLM's counters and gauges by name (labels summed)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for name, value in re.findall(r"^(vllm:[a-z_]+)(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M):
        out[name] = out.get(name, 0.0) + float(value)
    return out


def run(url: str, out: Path, *args: str) -> RecordColumns:
    p = infermeter("run", "--no-progress", "--url", url, "--tokenizer", tokenizer(), "--out", out, *args)
    assert p.returncode == 0, p.stderr[-2000:]
    return RecordColumns.of_run(out)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_every_prompt_and_token_counted_exactly(vllm: str, tmp_path: Path, api: str) -> None:
    """Exact-length prompts as vLLM counts them (chat: through the tokenizer's chat template), one event per
    generated token, every reply to max_tokens (ignore_eos)."""
    cols = run(vllm, tmp_path / api, "--api", api, "--input-tokens", "128", "--output-tokens", "24",
               "--requests", "12", "--rate", "4", "--warmup", "2")  # fmt: skip
    assert cols.n == 12 and cols.ok.all(), cols.error
    assert (cols.server_input_tokens == 128).all(), cols.server_input_tokens  # the server's usage.prompt_tokens
    assert (cols.output_tokens == 24).all() and (cols.tokens.lengths == 24).all()
    # the word-level vocabulary: every token its own event (chat opens with a role-only one, no token)
    assert set(np.unique(cols.chunk_tokens.values).tolist()) <= {0, 1}
    assert int(cols.chunk_tokens.values.sum()) == 12 * 24
    info = read_run_info(tmp_path / api)
    assert info.prompt_verification is not None and info.prompt_verification.mismatches == 0
    if api == "chat":  # the template the tokenizer config carries, its tokens counted in every prompt's 128
        assert (info.tokenizer.chat_template or "").startswith("the chat template that comes with")
    assert info.server_metrics is not None and info.server_metrics.available


def test_a_model_it_does_not_serve_and_a_server_that_is_not_up_are_one_line(vllm: str, tmp_path: Path) -> None:
    p = infermeter("run", "--url", vllm, "--model", "llama-3", "--requests", "3", "--rate", "3",
                   "--out", tmp_path / "wrong")  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == (
        f"error: --model llama-3: the server at {vllm} does not serve it (HTTP 404); it serves "
        f"{servers.VLLM_MODEL_NAME}: give --model {servers.VLLM_MODEL_NAME}, or leave --model out to send to the "
        "first it lists"
    )
    down = f"http://127.0.0.1:{servers.free_port()}"
    p = infermeter("calibrate", "--url", down, "--out", tmp_path / "e.yaml")
    assert p.returncode == 2 and p.stderr.strip() == (
        f"error: nothing answers at {down} (connection refused): start the server, or check --url"
    )
    assert not (tmp_path / "wrong").exists() and not (tmp_path / "e.yaml").exists()


@pytest.fixture(scope="module")
def calibrated(vllm: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`infermeter calibrate --quick` against vLLM: engine.yaml and what calibrate printed."""
    out = tmp_path_factory.mktemp("vllm-engine") / "engine.yaml"
    p = infermeter("calibrate", "--url", vllm, "--quick", "--tokenizer", tokenizer(), "--out", out, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return out, p.stdout


def test_calibrate_finds_the_batch_the_mixed_steps_and_the_kv_cache(vllm: str, calibrated) -> None:
    from infermeter.engine.config import load_engine_config

    path, printed = calibrated
    engine = load_engine_config(path)
    cal = engine.calibration
    assert cal is not None
    assert cal.batch_limited and cal.largest_batch == MAX_NUM_SEQS and engine.scheduler.max_batch() == MAX_NUM_SEQS
    # V1's scheduler puts a newcomer's prompt in the same step as the running sequences' next tokens
    assert cal.prefill_mixing.startswith("mixed"), cal.prefill_mixing
    assert engine.scheduler.name == "chunked_prefill"
    # its KV cache, as vLLM sizes it (1 GiB of the tiny model's KV), from tokens held / vllm:kv_cache_usage_perc
    with urllib.request.urlopen(vllm + "/metrics", timeout=10) as r:
        size = int(re.search(r'kv_cache_size_tokens="(\d+)"', r.read().decode()).group(1))  # type: ignore[union-attr]
    assert engine.kv_capacity_tokens is not None and abs(engine.kv_capacity_tokens / size - 1) < 0.2, size
    assert "present" in cal.prefix_cache  # the same prompt again: served from vLLM's prefix cache
    for line in cal.warnings:  # whatever the machine made of the fits, calibrate said it
        assert f"warning: {line}" in printed


def test_predict_against_a_live_run_of_the_same_requests(vllm: str, calibrated, tmp_path: Path) -> None:
    """At half the calibrated engine's capacity, the same requests at the same send times live and predicted: the
    decode step (ITL P50) and TTFT P50 within 35% on a shared 2-core machine (the quiet machine's figures are
    benchmarks/twin_real.py's)."""
    path, _ = calibrated
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(
        "name: fixed\nclasses:\n  - {input: {kind: fixed, value: 128}, output: {kind: fixed, value: 32}}\n"
    )
    workload = ("--workload", str(fixed), "--requests", "60", "--seed", "4242")
    p = infermeter("predict", "--engine", path, "--concurrency", str(2 * MAX_NUM_SEQS), *workload,
                   "--out", tmp_path / "capacity")  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    capacity = orjson.loads((tmp_path / "capacity" / "summary.json").read_bytes())["throughput"]["req_s"]
    rate = f"{capacity / 2:.4g}"
    p = infermeter("predict", "--engine", path, "--rate", rate, *workload, "--out", tmp_path / "predicted")
    assert p.returncode == 0, p.stderr[-2000:]
    run(vllm, tmp_path / "live", "--rate", rate, *workload, "--warmup", "4")
    live, pred = (orjson.loads((tmp_path / k / "summary.json").read_bytes()) for k in ("live", "predicted"))
    errors = {m: pred[m]["p50"] / live[m]["p50"] - 1 for m in ("ttft_ms", "itl_ms", "tpot_ms")}
    print(f"\npredict against vLLM at {rate} req/s, P50 errors: {errors}")
    assert abs(errors["itl_ms"]) < 0.35 and abs(errors["ttft_ms"]) < 0.35, errors


def test_twin_suite_on_vllm(vllm: str, calibrated, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The twin suite with the calibrated engine at 60% of its predicted capacity: every figure with its interval
    and what the calibration says of it, and verdicts computed from the measured runs."""
    path, _ = calibrated
    result = quick_suite("twin", tmp_path / "twin", capsys, vllm, "--engine", str(path), "--loads", "60",
                         "--input-tokens", "128", "--output-tokens", "32", "--requests", "40")  # fmt: skip
    figures = result.analysis.figures
    assert abs(figures["itl_p50_error_60"]) <= 0.5, figures
    table = next(t for t in result.analysis.tables if t.caption.startswith("Predicted against measured"))
    assert table.headers[-1] == "Calibration" and all(r[-1] for r in table.rows)
    must = [r for r in result.requirements if r.level == "MUST"]
    assert all(r.met is not None for r in must)


def quick_suite(name: str, out: Path, capsys: pytest.CaptureFixture[str], url: str, *args: str) -> Any:
    """`infermeter test NAME --quick` against vLLM, its report printed past pytest's capture so that CI's log shows
    the tables."""
    capsys.readouterr()
    result = suite_result(name, out, "--url", url, "--tokenizer", tokenizer(), "--warmup", "2", *args)
    report = capsys.readouterr().out
    with capsys.disabled():
        print(f"\n{report}")
    return result


def test_ttft_and_throughput_suites(vllm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TTFT grows with the prompt (Table 2), and the throughput sweep over concurrency finds where vLLM saturates."""
    wl = two_lengths(tmp_path, 64, 1000, 16)
    ttft = quick_suite("ttft", tmp_path / "ttft", capsys, vllm, "--workload", str(wl), "--requests", "16",
                       "--concurrency", "1")  # fmt: skip
    rows = {r[0]: r for r in next(t for t in ttft.analysis.tables if t.caption.startswith("Table 2")).rows}
    assert float(rows["512-1024"][2]) > 2 * float(rows["0-256"][2]), rows
    # short requests and 8 s a level, so that a level's completions keep up with its arrivals until it saturates
    tput = quick_suite("throughput", tmp_path / "tput", capsys, vllm, "--workload", str(fixed_workload(tmp_path)),
                       "--search", "concurrency", "--start", "4", "--max-load", "64", "--duration", "8")  # fmt: skip
    f = tput.analysis.figures
    # vLLM runs 8 sequences at once: past them, requests queue and the sweep finds saturation
    assert isinstance(f["sustainable_load"], float) and isinstance(f["saturated_at"], float), f
    assert 2 <= f["sustainable_load"] < f["saturated_at"], f
    assert isinstance(f["max_output_tok_s"], float) and f["max_output_tok_s"] > 0, f


def test_capacity_finds_a_concurrency_between_passing_and_failing(
    vllm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = quick_suite("capacity", tmp_path / "cap", capsys, vllm, "--input-tokens", "128", "--output-tokens",
                         "32", "--ttft-p99", "150")  # fmt: skip
    f = result.analysis.figures
    best, failed = f["max_concurrency"], f["first_failure"]
    assert isinstance(best, int) and isinstance(failed, int) and failed > best >= 1, f


@pytest.fixture(scope="module")
def vllm_no_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same vLLM with prefix caching off: the draft's 5.7 baseline."""
    log = tmp_path_factory.mktemp("vllm-no-cache") / "server.log"
    with servers.vllm_server(log, MAX_NUM_SEQS, SERVER_CORE, "--no-enable-prefix-caching") as url:
        yield url


def test_prefix_cache_hits_agree_with_vllms_counters(
    vllm: str, vllm_no_cache: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The draft's 5.7 with vLLM's prefix caching off and on.  In every run, the cached tokens vLLM's replies report
    (usage.prompt_tokens_details) add up to what its own counter (vllm:prefix_cache_hits) counted over the run; in
    the cold run no request that shares no prefix finds any; the disabled server finds none at all."""
    from infermeter.suites.lab import read_run
    from infermeter.suites.prefix_cache import _drawn

    result = quick_suite("prefix-cache", tmp_path / "pc", capsys, vllm, "--url-disabled", vllm_no_cache,
                         "--url-enabled", vllm, "--rate", "4", "--requests", "40",
                         "--capacity-requests", "32")  # fmt: skip
    runs = sorted(p.parent for p in (tmp_path / "pc").rglob("records.parquet"))
    assert len(runs) == 5
    for run_dir in runs:
        cols = RecordColumns.of_run(run_dir)
        summary = orjson.loads((run_dir / "summary.json").read_bytes())
        counted = summary["server_metrics"]["prefix_hits"]["delta"]
        reported = float(np.nansum(cols.cached_tokens[cols.ok]))
        assert counted == reported, (run_dir.name, counted, reported)
        if read_run_info(run_dir).sut.prefix_caching == "disabled":
            assert counted == 0, run_dir.name
    cold_dir = next(r for r in runs if r.name == "cache-cold")
    drawn = _drawn(read_run("cold", "cold", cold_dir, False))
    assert drawn is not None
    cols = RecordColumns.of_run(cold_dir)
    alone = drawn.prefix_id[np.minimum(cols.request_id, len(drawn) - 1)] < 0
    assert alone.any() and np.nansum(cols.cached_tokens[alone & cols.ok]) == 0
    figures = result.analysis.figures
    assert figures["disabled_hit_rate"] == 0 and figures["cold_hit_rate"] > 0, figures


KV_BLOCKS = 24  # vLLM's KV cache cut to 24 blocks of 128 tokens: two 512+640-token requests fit, four do not


@pytest.fixture(scope="module")
def vllm_small_kv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM with a KV cache of KV_BLOCKS blocks: oversubscribed past two long requests, it preempts."""
    log = tmp_path_factory.mktemp("vllm-small-kv") / "server.log"
    with servers.vllm_server(log, MAX_NUM_SEQS, SERVER_CORE, "--num-gpu-blocks-override", str(KV_BLOCKS),
                             "--no-enable-prefix-caching") as url:  # fmt: skip
        yield url


def test_memory_pressure_reads_vllms_kv_usage_and_preemptions(
    vllm_small_kv: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The draft's 5.8 at 100% and 200% of the two requests vLLM's KV cache holds whole: none preempted at 100%;
    at 200% four are admitted (4 blocks of prompt each) and outgrow the cache as they decode, and vLLM preempts
    (vllm:num_preemptions), its KV usage gauge near full."""
    result = quick_suite("memory-pressure", tmp_path / "mem", capsys, vllm_small_kv, "--capacity", "2",
                         "--levels", "100,200", "--input-tokens", "512", "--output-tokens", "640",
                         "--duration", "6")  # fmt: skip
    f = result.analysis.figures
    assert f["preemptions_100"] == 0 and isinstance(f["preemptions_200"], float) and f["preemptions_200"] > 0, f
    for level in ("oversub-100pct", "oversub-200pct"):
        summary = orjson.loads((tmp_path / "mem" / "runs" / level / "summary.json").read_bytes())
        usage = summary["server_metrics"]["kv_usage"]
        assert usage["metric"] == "vllm:kv_cache_usage_perc" and 0.5 < usage["max"] <= 1.0, usage
