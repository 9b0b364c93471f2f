"""Shared fixtures: a small set of records whose every metric is computed by hand in the tests, and one quick
tradeoff suite against the embedded emulator that the suite, browser and comparison tests all read (a minute of
real clock, made once per session).  And the two tiers: `pytest` runs the first; `pytest --second-tier` runs
`SECOND_TIER` (real servers built by `.ci/run`) and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.records import RequestRecord

SECOND_TIER = Path(__file__).parent / "integration"  # against llama.cpp's servers: minutes each, and a build


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--second-tier", action="store_true", help=f"run only the tests under {SECOND_TIER.name}/")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The first tier never collects the second tier's modules (they need servers `.ci/run` builds after it starts);
    `--second-tier` collects nothing else."""
    inside = collection_path == SECOND_TIER or SECOND_TIER in collection_path.parents
    if config.getoption("--second-tier"):
        return None if inside or collection_path in SECOND_TIER.parents else True
    return True if inside else None


def hand_records() -> list[RequestRecord]:
    """Four requests covering multi-token chunks, an empty leading chunk, one token, a failure, server times."""
    return [
        # empty (role-only) event at 1.05, then 1 + 1 + 2 tokens
        RequestRecord(
            request_id=0,
            request_class="short",
            input_tokens=100,
            output_tokens=4,
            max_tokens=4,
            scheduled_at=0.99,
            submitted_at=1.0,
            token_times=[1.10, 1.13, 1.19, 1.19],
            chunk_times=[1.05, 1.10, 1.13, 1.19],
            chunk_tokens=[0, 1, 1, 2],
        ),
        # a single-token reply
        RequestRecord(
            request_id=1,
            request_class="short",
            input_tokens=300,
            output_tokens=1,
            max_tokens=8,
            scheduled_at=2.0,
            submitted_at=2.0,
            token_times=[2.2],
            chunk_times=[2.2],
            chunk_tokens=[1],
        ),
        # failed mid-stream: never counted in latency metrics
        RequestRecord(
            request_id=2,
            request_class="long",
            input_tokens=2000,
            output_tokens=1,
            max_tokens=16,
            scheduled_at=1.5,
            submitted_at=1.5,
            token_times=[1.9],
            chunk_times=[1.9],
            chunk_tokens=[1],
            status="error",
            error="connection lost mid-stream: after 1 tokens",
        ),
        # server-reported times (option C) beside a 2-token chunk
        RequestRecord(
            request_id=3,
            request_class="long",
            input_tokens=1500,
            output_tokens=3,
            max_tokens=3,
            scheduled_at=0.5,
            submitted_at=0.5,
            token_times=[0.6, 0.7, 0.7],
            chunk_times=[0.6, 0.7],
            chunk_tokens=[1, 2],
            server_token_times=[0.58, 0.64, 0.69],
        ),
    ]


@pytest.fixture
def records() -> list[RequestRecord]:
    return hand_records()


@pytest.fixture(scope="session")
def tradeoff_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`infermeter test tradeoff --quick --capacity 20 --html suite.html` as a user runs it: the suite's directory,
    with the HTML report the test command wrote beside it (suite.html)."""
    from tests.cli import infermeter

    out = tmp_path_factory.mktemp("tradeoff") / "suite"
    html = out.parent / "suite.html"
    p = infermeter("test", "tradeoff", "--quick", "--capacity", "20", "--no-progress", "--out", out, "--html", html)
    assert p.returncode == 0, p.stderr
    return out
