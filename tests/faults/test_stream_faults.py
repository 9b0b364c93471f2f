"""The fault suite, part 1: every fault the emulator injects, through `infermeter run` as a user runs it.

For each fault: every request sent has exactly one record; the faulted ones carry the status and the reason a person
understands, the others are served; the run finishes with the exit code README documents; `infermeter report` reads
the run and summary.json counts the failures by reason.
"""

import orjson
import pyarrow.parquet as pq
import pytest

from infermeter.emulator import EmulatorConfig, Fault, running_emulator
from infermeter.errors import ExitCode
from infermeter.metrics import RecordColumns
from tests.cli import infermeter, report_json
from tests.timing import Noise, measured

N = 16

# kind, fault parameters, extra run options, expected (status, reason, words in the detail) of a faulted request
FAULTS = [
    ("http_429", {"retry_after_s": 2}, [], ("error", "HTTP 429", "Retry-After 2 s")),
    ("http_429", {}, [], ("error", "HTTP 429", "no Retry-After")),
    ("http_500", {}, [], ("error", "HTTP 500", "Internal Server Error")),
    ("http_503", {}, [], ("error", "HTTP 503", "overloaded")),
    ("reset_before_headers", {}, [], ("error", "connection closed before the response", "")),
    ("reset_mid_stream", {}, [], ("error", "connection lost mid-stream", "after 4 tokens")),
    (
        "stall_before_first_token",
        {"stall_s": 3},
        ["--first-token-timeout", "0.5"],
        ("timeout", "first-token timeout", "no content token within 0.5 s"),
    ),
    (
        "stall_mid_stream",
        {"stall_s": 3},
        ["--timeout", "1.5", "--first-token-timeout", "1"],
        ("timeout", "total timeout", "not finished within 1.5 s"),
    ),
    ("invalid_json", {}, [], ("error", "invalid JSON event", "broken")),
    ("line_without_data", {}, [], ("error", "malformed SSE", "this line has no data field")),
    ("error_event", {}, [], ("error", "server error event", "engine failure while decoding")),
    ("end_before_finish", {}, [], ("error", "stream ended before its final chunk", "after 4 tokens")),
]
VALID_SHAPES = ["crlf", "split_reads", "keep_alive", "no_final_usage", "no_done", "reset_before_done"]


def run_against(cfg: EmulatorConfig, out, *extra: str):
    with running_emulator(cfg) as url:
        return infermeter(
            "run", "--no-progress", "--url", url, "--rate", "40", "--arrival", "constant", "-n", str(N),
            "--warmup", "off", "--input-tokens", "16", "--output-tokens", "8", "--out", str(out), *extra,
            timeout=120,
        )  # fmt: skip


def one_record_each(out) -> RecordColumns:
    cols = RecordColumns.of_run(out)
    assert sorted(cols.request_id.tolist()) == list(range(N)), cols.request_id  # exactly one record per request
    return cols


@pytest.mark.parametrize(
    "kind, params, extra, expected", FAULTS, ids=[f"{k}-{'-'.join(p) or 'plain'}" for k, p, _, _ in FAULTS]
)
def test_a_fault_ends_its_requests_records_and_the_run_goes_on(tmp_path, kind, params, extra, expected):
    status, reason, detail = expected
    out = tmp_path / "run"
    p = run_against(EmulatorConfig(speed=10, faults=[Fault(kind=kind, share=0.5, **params)]), out, *extra)
    assert p.returncode == ExitCode.OK, p.stderr
    assert "Traceback" not in p.stderr and "=== LLM Benchmark Report (Minimum) ===" in p.stdout
    cols = one_record_each(out)
    failed = ~cols.ok
    assert 0 < failed.sum() < N, "a share of 0.5 hits some requests, not all"
    for s, e in zip(cols.status[failed], cols.error[failed], strict=True):
        assert s == status and e.startswith(f"{reason}: ") and detail in e, e
    assert (cols.output_tokens[cols.ok] == 8).all()
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["requests"]["failures_by_reason"] == {reason: int(failed.sum())}
    assert report_json(out)["requests"]["failures_by_reason"] == {reason: int(failed.sum())}
    shown = infermeter("report", out)
    assert shown.returncode == 0 and f"Failures ({int(failed.sum())} of {N} requests)" in shown.stdout


@pytest.mark.parametrize("kind", VALID_SHAPES)
def test_valid_stream_shapes_are_read_as_the_plain_stream(tmp_path, kind):
    """CRLF line endings, events split over many reads, keep-alive comments, a final chunk without usage and a
    stream that ends (or is cut) after its final chunk without [DONE] are all valid: every request is served and
    every token counted; run.json counts the streams that had no [DONE]."""
    out = tmp_path / "run"
    p = run_against(EmulatorConfig(speed=10, faults=[Fault(kind=kind)]), out)
    assert p.returncode == ExitCode.OK, p.stderr
    cols = one_record_each(out)
    assert cols.ok.all(), cols.error
    assert (cols.output_tokens == 8).all() and (cols.tokens.lengths == 8).all()
    info = orjson.loads((out / "run.json").read_bytes())
    if kind != "split_reads":  # split writes delay the events past the server's own emission times
        assert info["itl_option"] == "C"
    assert info["stream"]["without_done"] == (N if kind in ("no_done", "reset_before_done") else 0)
    assert pq.read_table(out / "records.parquet").column("no_done").to_pylist().count(True) == N - (
        0 if kind in ("no_done", "reset_before_done") else N
    )


def test_a_run_where_nothing_succeeds_says_so_with_its_exit_code(tmp_path):
    out = tmp_path / "run"
    p = run_against(EmulatorConfig(faults=[Fault(kind="http_503")]), out)
    assert p.returncode == ExitCode.NO_SUCCESS, p.stderr
    assert f"no request succeeded: {N} of {N} failed (most often: HTTP 503)" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert report_json(out)["requests"]["failures_by_reason"] == {"HTTP 503": N}


def test_split_reads_really_arrive_in_many_reads():
    """The split_reads fault is what it claims: events reach the client's socket in pieces (how many reads that
    takes depends on when the reader runs, hence the noise probe)."""
    import asyncio

    import aiohttp

    async def reads(url: str) -> tuple[int, int]:
        body = {"model": "m", "prompt": "a b c", "max_tokens": 8, "stream": True}
        async with aiohttp.ClientSession() as s, s.post(url + "/v1/completions", json=body) as r:
            chunks = [c async for c in r.content.iter_any()]
        return len(chunks), b"".join(chunks).count(b"data: ")

    def measure() -> tuple[int, int]:
        with running_emulator(EmulatorConfig(faults=[Fault(kind="split_reads")])) as url:
            return asyncio.run(reads(url))

    def check(got: tuple[int, int], noise: Noise) -> None:
        n_reads, n_events = got
        assert n_events == 10, got  # 8 tokens, the final usage, [DONE]
        assert n_reads > n_events, f"{n_reads} reads for {n_events} events: the events were not split"

    measured(measure, check)
