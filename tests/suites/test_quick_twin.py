"""The twin suite at its smallest plan (the short calibration probe of a sped-up emulator, one load, a few requests),
and the calibration's tables from a constructed `Calibration` whose every cell is computed by hand.  The second tier
holds the twin to its tolerance on the real clock (tests/suites/test_twin.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.engine.calibration import Calibration, FitQuality, ParameterFit, PolicyFit
from infermeter.engine.config import EngineConfig, load_engine_config
from infermeter.report.calibration import findings, interval_table, parameter_table, policy_table, quality_table
from infermeter.report.tables import fmt_ms
from infermeter.sim.predict import METRICS, FigureInterval, bound_engines, trust, unreliable
from infermeter.suites.lab import read_run
from tests.cli import suite_result


def test_twin_calibrates_predicts_and_measures_one_load(tmp_path: Path) -> None:
    emu = tmp_path / "fast.json"
    emu.write_text('{"speed": 10}')
    out = tmp_path / "twin"
    args = (
        "--quick-probe",
        "--loads",
        "50",
        "--requests",
        "8",
        "--input-tokens",
        "64",
        "--output-tokens",
        "16",
        "--tolerance",
        "25",
        "--emulator-config",
        str(emu),
        "--warmup",
        "off",
    )
    result = suite_result("twin", out, *args)
    engine = load_engine_config(out / "engine.yaml")  # the probe's fit, kept so that a resumed suite reuses it
    cal = engine.calibration
    assert cal is not None and cal.parameters
    tables = {t.caption: t for t in result.analysis.tables}
    fitted = tables["Calibrated engine model"]
    assert [r[0] for r in fitted.rows] == [p.parameter for p in cal.parameters]
    assert "True" not in fitted.headers  # a sped-up emulator's true costs are not its configuration's
    assert [r[0] for r in tables["Fit quality: probes held out of each fit"].rows] == [f.fit for f in cal.fits]
    assert sum(r[0].endswith("(chosen)") for r in tables["Scheduling policy fits"].rows) == 1

    f = result.analysis.figures
    capacity = f["capacity_rps"]
    assert isinstance(capacity, float) and capacity > 0
    assert result.analysis.findings[0].startswith(f"predicted capacity {capacity:.3g} req/s")
    [ref] = result.runs
    assert ref.key == "load-50pct"
    measured = read_run(ref.key, ref.label, Path(ref.run_dir), reused=True)
    arrivals = measured.info.load.arrivals
    assert arrivals is not None and arrivals.rate == float(f"{capacity * 0.5:.4g}")
    predicted = read_run("p", "", out / "predicted" / "load-50pct", reused=True).summary
    banded = bound_engines(engine) is not None
    table = tables["Predicted against measured, per load"]
    rows = table.rows
    assert len(rows) == 2 * len(METRICS) + 1  # P50 and P99 of each metric, then the paired TTFT error
    # beside every figure, what the calibration says of it: unreliable where a fit missed held-out probes by > 15%
    assert table.headers[-1] == "Calibration" and {r[-1] for r in rows} == {trust(cal)}
    assert f["calibration_unreliable"] is (unreliable(cal) is not None)
    for row in rows[:-1]:
        label, q = row[1].split(" P")
        pred = getattr(predicted, METRICS[label]).percentile(int(q))
        meas = getattr(measured.summary, METRICS[label]).percentile(int(q))
        assert row[2:4] == [fmt_ms(pred), fmt_ms(meas)]
        error = f[f"{label.lower()}_p{q}_error_50"]
        assert error == pytest.approx((pred - meas) / meas)
        bound = 0.25 if q == "50" else 0.5
        assert row[4:6] == [f"{error:+.1%}", "yes" if abs(error) <= bound else "no"]
        assert (row[6] != "-") is banded  # an interval where the calibration held probes out of its fits
    must = [r for r in result.requirements if r.section == "twin" and r.level == "MUST"]
    assert [r.met for r in must] == [abs(f[f"{m}_p50_error_50"]) <= 0.25 for m in ("ttft", "itl")]  # type: ignore[arg-type]


def calibration() -> Calibration:
    """Two parameters fitted 10% high and 20% low against the truth below, one held-out band, two policies."""
    fit = dict(fit="decode steps", r2=0.99, residual_rms_ms=0.5, points=8, held_out_rms=0.04)
    return Calibration(
        source="http://server:8000",
        duration_s=12.34,
        parameters=[
            ParameterFit(parameter="iteration_model.fixed", value=0.0055, unit="s", stderr=1e-4, **fit),
            ParameterFit(parameter="api_overhead", value=0.0008, unit="s", fit="isolated TTFT", points=5),
        ],
        policies=[
            PolicyFit(policy="continuous", residual_rms_ms=0.25, r2=0.999),
            PolicyFit(policy="chunked_prefill (budget 512)", residual_rms_ms=1.5, r2=0.9),
        ],
        policy="continuous",
        prefill_mixing="separate",
        largest_batch=6,
        batch_limited=True,
        prefix_cache="absent",
        kv_capacity_source="the server's /metrics",
        fits=[
            FitQuality(
                fit="decode steps",
                model="linear in the batch",
                points=8,
                r2=0.99,
                held_out="each size",
                held_out_rms=0.04,
                held_out_low=-0.05,
                held_out_high=0.03,
                candidates={"linear in the batch": 0.04, "power law": 0.06},
            ),
            FitQuality(fit="isolated TTFT", model="continuous, linear", points=5, r2=0.95),
        ],
    )


def test_the_calibration_tables_hold_each_fit_against_the_truth() -> None:
    truth = EngineConfig.model_validate({"iteration_model": {"fixed": 0.005}, "api_overhead": 0.001})
    cal = calibration()
    headers, rows = parameter_table(cal, truth)
    assert headers[-2:] == ["True", "Error"]
    assert rows == [
        ["iteration_model.fixed", "5.5 ms", "0.1", "decode steps", "0.9900", "0.500 ms", "4.0%", "8", "5 ms", "+10.0%"],
        ["api_overhead", "0.8 ms", "-", "isolated TTFT", "-", "-", "-", "5", "1 ms", "-20.0%"],
    ]
    assert len(parameter_table(cal)[0]) == 8  # no truth: no True and Error columns
    assert policy_table(cal)[1] == [
        ["continuous (chosen)", "0.250 ms", "0.9990"],
        ["chunked_prefill (budget 512)", "1.500 ms", "0.9000"],
    ]
    assert quality_table(cal)[1] == [
        [
            "decode steps",
            "linear in the batch",
            "0.9900",
            "4.0%",
            "-5.0% .. +3.0%",
            "linear in the batch 4.0%, power law 6.0%",
            "8",
        ],
        ["isolated TTFT", "continuous, linear", "0.9500", "-", "-", "-", "5"],
    ]
    engine = truth.model_copy(update={"kv_capacity_tokens": 4096, "calibration": cal})
    assert findings(cal, engine) == [
        "scheduling: continuous; largest running batch 6 (the server queued the rest)",
        "prefill beside running decodes: separate",
        "API overhead 1.00 ms per request (isolated TTFT minus the model's prefill)",
        "KV capacity: 4096 tokens (the server's /metrics)",
        "prefix cache: absent",
        "measured in 12.3 s against http://server:8000",
    ]
    unbounded = cal.model_copy(update={"batch_limited": False})
    assert findings(unbounded, truth)[0].endswith(
        f"all 6 requests sent together ran at once (max_num_seqs set to {truth.scheduler.max_batch()})"
    )
    assert findings(unbounded, truth)[3] == "KV capacity: the server's /metrics"


def test_the_interval_table_shows_each_predicted_figure_and_its_band() -> None:
    text = interval_table(
        [
            FigureInterval(metric="TTFT", q=50, predicted=12.0, low=10.0, high=15.5),
            FigureInterval(metric="ITL", q=99, predicted=3.0, low=None, high=None),
        ]
    )
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    assert cells == [
        ["Metric", "Predicted", "Interval"],
        ["TTFT P50", "12.0 ms", "10.0 ms - 15.5 ms"],  # fmt_ms: a tenth of a ms from 10 ms, a hundredth below
        ["ITL P99", "3.00 ms", "-"],
    ]
    assert "Prediction intervals (ms)" in text and text.splitlines()[-1].startswith("interval: the simulation rerun")
