"""An unknown option is answered with infermeter's name for a peer tool's option, or with close names only (issue 35:
`--num-prompts` was answered "Possible options: --no-progress")."""

import signal
from collections.abc import Iterator

import pytest

from infermeter.cli.app import command_group
from infermeter.cli.suggest import PEER_OPTIONS, close_options, no_such_option
from tests.cli import exit_code


@pytest.fixture(autouse=True)
def _sigterm() -> Iterator[None]:
    """main() installs its own SIGTERM handler: give pytest its own back."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def _refusal(capfd: pytest.CaptureFixture[str], *args: str) -> str:
    """`infermeter ARGS` refused with exit 2: its one line on stderr."""
    capfd.readouterr()
    assert exit_code(list(args)) == 2
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return " ".join(lines[0].split())


def _options(command: str) -> set[str]:
    group = command_group()
    cmd = group.get_command(None, command)
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("peer", list(PEER_OPTIONS))
def test_each_peer_option_names_ours(peer: str, capfd: pytest.CaptureFixture[str]) -> None:
    mapped = PEER_OPTIONS[peer]
    assert mapped.ours in _options("run"), f"{peer} maps to {mapped.ours}, which `run` does not have"
    assert peer not in _options("run")
    line = _refusal(capfd, "run", peer, "1")
    assert line.startswith(f"error: No such option: {peer} ({peer} is {mapped.tools} option; infermeter's is ")
    assert f"infermeter's is {mapped.give})" in line and "Possible options" not in line


def test_num_prompts_is_not_answered_with_no_progress(capfd: pytest.CaptureFixture[str]) -> None:
    line = _refusal(capfd, "run", "--num-prompts=10")
    assert "--requests N" in line and "--no-progress" not in line


def test_only_close_names_are_suggested(capfd: pytest.CaptureFixture[str]) -> None:
    assert _refusal(capfd, "run", "--reqests", "3") == (
        "error: No such option: --reqests (did you mean --requests?) (see infermeter run --help)"
    )
    assert _refusal(capfd, "run", "--concurency", "3").startswith(
        "error: No such option: --concurency (did you mean --concurrency or --max-concurrency?)"
    )
    assert _refusal(capfd, "run", "--bogus") == "error: No such option: --bogus (see infermeter run --help)"
    # a command without the peer's counterpart gets no mapping, and --no-progress is no close name of it
    assert _refusal(capfd, "report", "x", "--num-prompts", "3") == (
        "error: No such option: --num-prompts (see infermeter report --help)"
    )


def test_close_options_needs_a_real_likeness() -> None:
    options = ["--requests", "--rate", "--no-progress", "--progress", "--seed", "--tokenizer"]
    assert close_options("--num-prompts", options) == []
    assert close_options("--reqests", options) == ["--requests"]
    assert close_options("--seeds", options) == ["--seed"]
    assert close_options("--tokeniser", options) == ["--tokenizer"]
    assert close_options("--request-rate", options) == []  # the peer table answers this one
    assert no_such_option("--request-rate", options) == (
        "No such option: --request-rate (--request-rate is vLLM bench serve's and SGLang bench_serving's option; "
        "infermeter's is --rate R)"
    )
