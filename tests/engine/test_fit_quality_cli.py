"""Fit quality where people read it: `predict` with an engine.yaml of a poor fit repeats the calibration's warning
beside its tables and gives each figure its interval; `calibrate` recovers an engine whose decode cost grows
sub-linearly with the batch from black-box probes of the emulator, which it is not told."""

import orjson
import pytest
import yaml

from infermeter.engine.config import EngineConfig, load_engine_config, save_engine_config
from infermeter.engine.probe_fit import fit_engine
from infermeter.report.calibration import true_value
from infermeter.sim.predict import METRICS, unreliable
from tests.cli import infermeter
from tests.engine.test_probe_fit import TRUE, noisy, probe


def prediction_rows(text: str) -> list[list[str]]:
    """The rows of predict's table of predicted figures (metric, predicted, interval, calibration)."""
    names = {f"{m} P{q}" for m in METRICS for q in (50, 99)}
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line[:1] == "|"]
    return [c for c in cells if len(c) == 4 and c[0] in names]


def test_predict_repeats_a_poor_fits_warning_and_gives_intervals(tmp_path):
    engine = fit_engine(noisy(probe(TRUE, 0.001, None, 64), 0.3))
    save_engine_config(engine, tmp_path / "engine.yaml")
    warning = next(w for w in engine.calibration.warnings if w.startswith("poor fit"))
    p = infermeter(
        "predict", "--engine", tmp_path / "engine.yaml", "--rate", "5", "--requests", "60",
        "--workload", "synthetic-uniform", "--out", tmp_path / "run",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert f"warning (calibration): {warning}" in p.stdout
    assert "Prediction intervals (ms)" in p.stdout
    # held-out error over 15%: said first, and beside every predicted figure, and in the run's notes
    caveat = unreliable(engine.calibration)
    assert caveat is not None and caveat.startswith("unreliable: the calibration misses held-out probes by over 15%")
    assert p.stdout.splitlines()[0] == f"warning: every figure below is {caveat}"
    figures = prediction_rows(p.stdout)
    assert len(figures) == 8 and all(r[-1] == caveat for r in figures), figures
    assert f"- every figure of this prediction is {caveat}" in infermeter("report", tmp_path / "run").stdout
    doc = orjson.loads((tmp_path / "run" / "intervals.json").read_bytes())
    rows = {(i["metric"], i["q"]): i for i in doc["intervals_ms"]}
    summary = orjson.loads((tmp_path / "run" / "summary.json").read_bytes())
    ttft = rows[("TTFT", 50)]
    assert ttft["predicted"] == pytest.approx(summary["ttft_ms"]["p50"])
    assert ttft["low"] <= ttft["predicted"] <= ttft["high"] and ttft["low"] < ttft["high"]


def test_predict_from_a_good_fit_prints_no_warning(tmp_path):
    save_engine_config(fit_engine(probe(TRUE, 0.001, None, 64)), tmp_path / "engine.yaml")
    p = infermeter(
        "predict", "--engine", tmp_path / "engine.yaml", "--rate", "5", "--requests", "30",
        "--workload", "synthetic-uniform", "--out", tmp_path / "run",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stdout and "unreliable" not in p.stdout
    figures = prediction_rows(p.stdout)
    assert len(figures) == 8 and all(r[-1].startswith("held-out error") for r in figures), figures
    assert all(r[-1].endswith("at most (within 15%)") for r in figures), figures


# decode cost 3 ms x b ** 0.6 over an 8 ms step: at batch 32 the batch adds 24 ms, three times the fixed cost (steps
# this long keep a busy host's lost milliseconds a small share of each)
HIDDEN = {
    "engine": {
        "scheduler": {"name": "continuous", "max_num_seqs": 256},
        "iteration_model": {
            "fixed": 0.008,
            "per_prefill_token": 60e-6,
            "per_decode_seq": 3e-3,
            "per_context_token": 1e-6,
            "batch_exponent": 0.6,
        },
    }
}


def test_calibrate_recovers_a_decode_cost_growing_sublinearly_with_the_batch(tmp_path):
    (tmp_path / "hidden.yaml").write_text(yaml.safe_dump(HIDDEN))
    p = infermeter("calibrate", "--emulator-config", tmp_path / "hidden.yaml", "--out", tmp_path / "e.yaml")
    assert p.returncode == 0, p.stderr
    engine = load_engine_config(tmp_path / "e.yaml")
    truth = EngineConfig.model_validate(HIDDEN["engine"])
    for name in ("fixed", "per_prefill_token", "per_decode_seq", "per_context_token", "batch_exponent"):
        fitted, true = true_value(engine, f"iteration_model.{name}"), true_value(truth, f"iteration_model.{name}")
        assert fitted == pytest.approx(true, rel=0.10), (name, fitted, true)
    decode = next(f for f in engine.calibration.fits if f.fit == "decode steps")
    assert decode.model.startswith("batch ** ") and decode.model in p.stdout  # kept over the linear model
