"""A server shaped like `transformers serve`: streams end after the final chunk without [DONE], and any request
field outside the OpenAI schema is answered with HTTP 422.  infermeter measures it fully once told not to send
ignore_eos, and says which option to turn off when it is not."""

import orjson
import pytest

from infermeter.emulator import EmulatorConfig, Fault, running_emulator
from infermeter.errors import ExitCode
from infermeter.metrics import RecordColumns
from tests.cli import infermeter

N = 12
STRICT = EmulatorConfig(speed=10, strict_fields=True, faults=[Fault(kind="no_done")])


@pytest.fixture(scope="module")
def strict_url():
    with running_emulator(STRICT) as url:
        yield url


def run(url: str, out, *extra: str):
    return infermeter(
        "run", "--no-progress", "--url", url, "--rate", "40", "--arrival", "constant", "-n", str(N),
        "--warmup", "off", "--input-tokens", "16", "--output-tokens", "8", "--out", str(out), *extra, timeout=120,
    )  # fmt: skip


def test_streams_without_done_are_measured_with_full_success(strict_url, tmp_path):
    out = tmp_path / "run"
    p = run(strict_url, out, "--no-ignore-eos")
    assert p.returncode == ExitCode.OK, p.stderr
    cols = RecordColumns.of_run(out)
    assert cols.ok.all() and cols.n == N, cols.error
    assert (cols.output_tokens == 8).all()
    info = orjson.loads((out / "run.json").read_bytes())
    assert info["stream"]["without_done"] == N and info["client"]["ignore_eos"] is False
    assert f"{N} streams ended after their final chunk without data: [DONE]" in p.stdout


def test_a_422_for_ignore_eos_names_the_option_that_sends_it(strict_url, tmp_path):
    out = tmp_path / "run"
    p = run(strict_url, out)
    assert p.returncode == ExitCode.NO_SUCCESS and "Traceback" not in p.stderr
    assert "the server rejects the field ignore_eos" in p.stderr and "add --no-ignore-eos" in p.stderr, p.stderr
    cols = RecordColumns.of_run(out)
    assert cols.n == N and not cols.ok.any()
    assert all(e.startswith("HTTP 422: ") and "ignore_eos" in e and "add --no-ignore-eos" in e for e in cols.error)


def test_calibrate_against_a_422_names_the_field_and_the_option(strict_url, tmp_path):
    p = infermeter("calibrate", "--url", strict_url, "--quick", "--out", str(tmp_path / "engine.yaml"), timeout=120)
    assert p.returncode == ExitCode.USAGE and "Traceback" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "ignore_eos" in lines[0] and "--no-ignore-eos" in lines[0], p.stderr


def test_profile_prefill_sends_no_ignore_eos_when_told(strict_url, tmp_path):
    out = tmp_path / "curve.json"
    p = infermeter(
        "profile-prefill", "--url", strict_url, "--no-ignore-eos", "--lengths", "16,32,64", "--repeats", "1",
        "--out", str(out), timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert out.exists()
