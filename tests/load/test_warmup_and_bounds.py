"""The warm-up's requests (the run's shared prefixes by default, or a workload of their own) and a closed loop bounded
by both a count and a time (the IETF draft, 4.5.1 item 4, 5.5.3, 5.7.3, 5.9.3), against the embedded emulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.load.warmup import with_run_prefixes
from infermeter.metrics import RecordColumns
from infermeter.records import read_run_info
from infermeter.workload.spec import Requests
from tests.cli import infermeter

SHARED = 256  # tokens of the one shared prefix every request opens with


@pytest.fixture(scope="module")
def fast_emulator():
    with running_emulator(EmulatorConfig(speed=4, prefix_caching=True)) as url:
        yield url


def _requests(prefix_id: list[int], prefix_tokens: list[int], body: int = 100) -> Requests:
    n = len(prefix_id)
    pid, ptok = np.asarray(prefix_id, dtype=np.int64), np.asarray(prefix_tokens, dtype=np.int64)
    return Requests(np.full(n, "", dtype=object), body + ptok, np.full(n, 16, dtype=np.int64), pid, ptok)


def test_the_warm_up_takes_the_runs_prefix_lengths_and_drops_prefixes_the_run_never_sends() -> None:
    run = _requests([0, 2, -1, 0], [300, 700, 0, 300])
    warm = _requests([2, 1, 0, -1, 2], [650, 900, 310, 0, 650], body=50)
    got = with_run_prefixes(warm, run)
    assert got.prefix_id.tolist() == [2, -1, 0, -1, 2]  # prefix 1 is not the run's: the request goes without one
    assert got.prefix_tokens.tolist() == [700, 0, 300, 0, 700]
    assert got.input_tokens.tolist() == [750, 50, 350, 50, 750]  # the warm-up's own 50 tokens after the prefix
    assert got.output_tokens.tolist() == warm.output_tokens.tolist()
    plain = _requests([-1, -1], [0, 0])  # a workload without shared prefixes is left as it is
    assert with_run_prefixes(plain, plain) is plain and with_run_prefixes(plain, run) is plain


def _run(url: str, out: Path, *args: str):
    return infermeter("run", "--no-progress", "--url", url, "--out", out, *args, timeout=240)


def test_the_warm_up_caches_the_runs_shared_prefix_and_its_own_workload_does_not(fast_emulator, tmp_path) -> None:
    spec = tmp_path / "shared.json"
    spec.write_text(
        '{"name": "shared", "classes": [{"input": {"kind": "fixed", "value": 64}, '
        '"output": {"kind": "fixed", "value": 8}}], '
        f'"prefix": {{"fraction": 1.0, "count": 1, "length": {{"kind": "fixed", "value": {SHARED}}}}}}}'
    )
    load = ("--workload", str(spec), "--concurrency", "1", "--requests", "3")
    first = {}
    for seed, (name, warm) in enumerate((("run", ()), ("own", ("--warmup-workload", "synthetic-uniform"))), 101):
        out = tmp_path / name
        p = _run(fast_emulator, out, *load, "--warmup", "5", "--seed", str(seed), *warm)
        assert p.returncode == 0, p.stderr
        cols = RecordColumns.of_run(out)
        first[name] = float(np.nan_to_num(cols.cached_tokens[np.argmin(cols.submitted_at)]))
        info = read_run_info(out)
        assert info.warmup.shared_prefixes == (1 if name == "run" else 0), info.warmup
    # each run's seed is new to this server: its prefix is not in the cache unless its warm-up sent it
    assert first["run"] >= SHARED * 0.75, first  # block granularity may leave a partial block uncached
    assert first["own"] < SHARED * 0.25, first


def test_min_duration_keeps_a_closed_loop_sending_until_both_bounds(fast_emulator, tmp_path) -> None:
    short = ("--concurrency", "2", "--input-tokens", "32", "--output-tokens", "4", "--warmup", "off")
    out = tmp_path / "time"
    assert _run(fast_emulator, out, *short, "--requests", "4", "--min-duration", "1.5").returncode == 0
    cols = RecordColumns.of_run(out)
    assert cols.n > 4  # the count was reached long before the seconds
    assert float(cols.submitted_at.max() - cols.submitted_at.min()) >= 1.4
    info = read_run_info(out)
    assert (
        info.load.requests == 4
        and info.load.duration_s == 1.5
        and "until 4 requests and 1.5 s" in str(info.load.description)
    )
    out = tmp_path / "count"
    assert _run(fast_emulator, out, *short, "--seed", "7", "--requests", "30", "--min-duration", "0.1").returncode == 0
    assert RecordColumns.of_run(out).n == 30  # the seconds passed first: the count decides


@pytest.mark.parametrize(
    "args, word",
    [
        (("--rate", "5", "--requests", "10", "--min-duration", "60"), "--min-duration"),
        (("--concurrency", "2", "--duration", "5", "--min-duration", "60"), "--min-duration"),
        (("--concurrency", "2", "--requests", "5", "--min-duration", "0"), "--min-duration"),
        (("--concurrency", "2", "--requests", "5", "--warmup-workload", "no-such"), "--warmup-workload"),
    ],
)
def test_bad_bounds_are_one_line_errors(tmp_path, args, word) -> None:
    out = tmp_path / "never"
    p = infermeter("run", "--no-progress", "--out", out, *args)
    assert p.returncode == 2, p.stderr
    assert word in p.stderr and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not out.exists()
