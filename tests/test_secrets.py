"""The API key never leaves the process: not in run.json, records, summary.json, console output, or an HTTP error
body that echoes it back ("Incorrect API key provided: sk-...")."""

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.errors import ExitCode
from infermeter.secrets import MASK, redact, redact_url, register
from tests.cli import infermeter

KEY = "sk-infermeter-test-7f3a9c1e5b2d4068a1c3e5f7"
SERVER_KEY = "sk-the-right-one-0000000000000000"


def produced(out: Path, streams: list[str]) -> str:
    """Every byte the run left: each file as raw bytes and, for Parquet, every value decoded; plus the streams."""
    texts = list(streams)
    for path in sorted(out.rglob("*")):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
            if path.suffix == ".parquet":
                texts.append(str(pq.read_table(path).to_pylist()))
    return "\n".join(texts)


def run(url: str, out: Path, env_key: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": env_key}
    return subprocess.run(
        [sys.executable, "-m", "infermeter", "run", "--no-progress", "--url", url, "--model", "m", "--rate", "50",
         "-n", "8", "--warmup", "2", "--input-tokens", "8", "--output-tokens", "4", "--out", str(out), *extra],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_key_echoed_in_a_401_body_is_masked_everywhere(tmp_path):
    with running_emulator(EmulatorConfig(api_key=SERVER_KEY)) as url:
        p = run(url, tmp_path / "run", KEY)
    assert p.returncode == ExitCode.NO_SUCCESS, p.stderr  # every request refused: the key is wrong
    everything = produced(tmp_path / "run", [p.stdout, p.stderr])
    assert "HTTP 401" in everything and "Incorrect API key provided: [REDACTED]" in everything
    assert KEY not in everything and KEY[:16] not in everything
    report = infermeter("report", tmp_path / "run")
    assert KEY not in report.stdout + report.stderr and "HTTP 401" in report.stdout


def test_a_key_in_the_url_or_the_request_body_is_masked(tmp_path):
    """A key in a query parameter and a key-like field in --extra-body are declared in run.json, masked; a URL
    carrying user:password is refused, without echoing the password."""
    with running_emulator(EmulatorConfig(api_key=SERVER_KEY)) as url:
        p = run(f"{url}?api-key={KEY}", tmp_path / "run", SERVER_KEY, "--extra-body", f'{{"api_key": "{KEY}"}}')
        refused = run(url.replace("http://", f"http://user:{KEY}@"), tmp_path / "other", SERVER_KEY)
    assert p.returncode == ExitCode.OK, p.stderr
    everything = produced(tmp_path / "run", [p.stdout, p.stderr, refused.stdout, refused.stderr])
    assert KEY not in everything and SERVER_KEY not in everything, p.stderr
    assert MASK in (tmp_path / "run" / "run.json").read_text()
    assert refused.returncode == ExitCode.USAGE and "carries credentials" in refused.stderr, refused.stderr


def test_the_right_key_authenticates_and_is_never_written(tmp_path):
    with running_emulator(EmulatorConfig(api_key=SERVER_KEY)) as url:
        p = run(url, tmp_path / "run", SERVER_KEY)
    assert p.returncode == ExitCode.OK, p.stderr
    assert SERVER_KEY not in produced(tmp_path / "run", [p.stdout, p.stderr])


def test_a_crash_report_is_redacted_too(tmp_path, monkeypatch):
    """An internal error writes its traceback to a file: the key in an exception message is masked there."""
    from infermeter import cli

    register(KEY)

    def boom(*args, **kwargs):
        raise RuntimeError(f"unexpected failure with {KEY}")

    monkeypatch.setattr("infermeter.cli.workload.build_requests", boom)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["workload", "synthetic-uniform", "-n", "2", "--out", str(tmp_path / "w.csv")])
    assert exit_.value.code == ExitCode.INTERNAL
    (crash,) = tmp_path.glob("infermeter-crash-*.txt")
    assert "RuntimeError" in crash.read_text() and KEY not in crash.read_text()


@pytest.mark.parametrize(
    "text",
    [
        f"Incorrect API key provided: {KEY}.",
        "Authorization: Bearer abc.def.ghi",
        '{"api_key": "zzz-123-secret"}',
        "Incorrect API key provided: sk-proj-****************************abcd",
        "token hf_abcdefghijklmnopqrstu in the log",
    ],
)
def test_redact_masks_keys_and_key_shapes(text):
    register(KEY)
    out = redact(text)
    assert MASK in out and KEY not in out and "abc.def" not in out and "zzz-123" not in out and "hf_abc" not in out


def test_redact_keeps_ordinary_text():
    text = "HTTP 503: Service Unavailable, max_tokens=32, prompt_tokens: 5, ttft=200ms"
    assert redact(text) == text
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
