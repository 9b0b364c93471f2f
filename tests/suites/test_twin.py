"""The wind tunnel against a server: `infermeter calibrate` recovers an emulator's engine it was not told, and the
twin suite's predictions match the runs it then measures."""

import re

import pytest
import yaml

from infermeter.engine.config import load_engine_config
from infermeter.report.calibration import true_value
from tests.cli import infermeter, suite_result

# not the emulator's default: every latency parameter and the KV capacity differ
SECRET = {
    "engine": {
        "scheduler": {"name": "continuous", "max_num_seqs": 256},
        "iteration_model": {
            "fixed": 0.010,
            "per_prefill_token": 80e-6,
            "per_decode_seq": 0.2e-3,
            "per_context_token": 0.2e-6,
        },
        "kv_capacity_tokens": 200_000,
    }
}
PARAMETERS = (
    "iteration_model.fixed",
    "iteration_model.per_prefill_token",
    "iteration_model.per_decode_seq",
    "iteration_model.per_context_token",
)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The default (full) probe of an emulator started with SECRET, which calibrate is not told."""
    d = tmp_path_factory.mktemp("twin")
    (d / "secret.yaml").write_text(yaml.safe_dump(SECRET))
    p = infermeter("calibrate", "--emulator-config", d / "secret.yaml", "--out", d / "engine.yaml")
    return d, p


def test_calibrate_recovers_an_engine_it_was_not_told(calibrated):
    d, p = calibrated
    assert p.returncode == 0, p.stderr
    engine = load_engine_config(d / "engine.yaml")
    truth = load_engine_config_from(SECRET)
    for name in PARAMETERS:
        fitted, true = true_value(engine, name), true_value(truth, name)
        assert fitted == pytest.approx(true, rel=0.10), (name, fitted, true)
    assert engine.kv_capacity_tokens == pytest.approx(200_000, rel=0.10)
    assert engine.scheduler.name == "continuous"
    assert engine.calibration.prefill_mixing.startswith("separate")
    assert "iteration_model.per_prefill_token" in p.stdout and "Which scheduling policy" in p.stdout
    # the emulator's own HTTP path takes little from its steps: the loops and the newcomer say how little
    assert "closed loops and newcomers" in p.stdout and "- not seen from outside: " in p.stdout


def load_engine_config_from(data):
    from infermeter.emulator.config import EmulatorConfig

    return EmulatorConfig.model_validate(data).engine


def test_twin_suite_predicts_the_runs_it_measures(calibrated, tmp_path):
    d, _ = calibrated
    result = suite_result(
        "twin", tmp_path / "twin", "--emulator-config", str(d / "secret.yaml"), "--engine", str(d / "engine.yaml")
    )
    figures = result.analysis.figures
    for pct in (30, 60, 90):
        for metric in ("ttft", "itl"):
            assert abs(figures[f"{metric}_p50_error_{pct}"]) <= 0.10, (metric, pct, figures)
        assert abs(figures[f"ttft_paired_error_{pct}"]) <= 0.10, (pct, figures)
    judged = [r for r in result.requirements if r.section == "twin" and r.level == "MUST"]
    assert len(judged) == 2 and all(r.met for r in judged), judged
    assert (tmp_path / "twin" / "predicted" / "load-30pct" / "summary.json").is_file()


def test_paired_ttft_error_is_the_median_of_each_requests_error():
    """Paired by request id whatever the order; a request failed or missing on one side is left out."""
    from infermeter.metrics.columns import RecordColumns
    from infermeter.records import RequestRecord
    from infermeter.suites.twin import paired_ttft_error

    def rec(rid: int, ttft: float, status: str = "ok") -> RequestRecord:
        return RequestRecord(rid, output_tokens=1, submitted_at=1.0, token_times=[1.0 + ttft], chunk_times=[1.0 + ttft],
                             chunk_tokens=[1], status=status)  # fmt: skip

    predicted = RecordColumns.from_records([rec(3, 0.30), rec(1, 0.10), rec(2, 0.25), rec(4, 0.5), rec(5, 0.2)])
    # errors: id 1 (0.10 - 0.20) / 0.20 = -0.5, id 2 (0.25 - 0.20) / 0.20 = +0.25, id 3 (0.30 - 0.24) / 0.24 = +0.25;
    # id 4 failed when measured, id 5 never measured, id 6 never predicted
    measured = RecordColumns.from_records([rec(1, 0.20), rec(2, 0.20), rec(3, 0.24), rec(4, 0.0, "error"), rec(6, 1.0)])
    assert paired_ttft_error(predicted, measured) == pytest.approx(0.25)
    assert paired_ttft_error(predicted, RecordColumns.from_records([rec(9, 0.2)])) is None


@pytest.mark.parametrize(
    ("scheduler", "mixing"),
    [({"name": "continuous"}, "separate"), ({"name": "chunked_prefill", "token_budget": 4096}, "mixed")],
)
def test_the_probe_stops_its_ladder_where_a_batching_server_queues(tmp_path, scheduler, mixing):
    """A server that runs 4 at a time: the short prompts' ladder ends at the first rung it queued (8); only a
    one-at-a-time server is sent more short prompts, for their turnarounds.  A prompt sent while another decodes
    tells an engine that mixes prefill into its decode steps (chunked prefill, whose budget no probed prompt
    reached) from one that runs prefills in steps of their own (continuous)."""
    (tmp_path / "four.yaml").write_text(yaml.safe_dump({"engine": {"scheduler": {**scheduler, "max_num_seqs": 4}}}))
    p = infermeter("calibrate", "--quick", "--emulator-config", tmp_path / "four.yaml", "--out", tmp_path / "e.yaml")
    assert p.returncode == 0, p.stderr
    rungs = re.findall(r"(\d+) together, 32-token prompts: (\d+) streaming at most", p.stdout + p.stderr)
    assert rungs == [("1", "1"), ("2", "2"), ("4", "4"), ("8", "4")], rungs
    engine = load_engine_config(tmp_path / "e.yaml")
    assert engine.calibration.prefill_mixing.startswith(mixing), engine.calibration.prefill_mixing
    assert engine.scheduler.name == scheduler["name"]
    assert f"prefill beside running decodes: {mixing}" in p.stdout
