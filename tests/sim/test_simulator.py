"""The simulator against closed-form cases, the schedulers' relative standing, and run directories."""

import numpy as np
import pytest

from infermeter.engine.config import EngineConfig
from infermeter.engine.latency import BatchModel
from infermeter.metrics import RecordColumns
from infermeter.records import read_records
from infermeter.sim import simulate, write_sim_run
from infermeter.workload import STANDARD, ArrivalSpec, arrival_offsets, generate
from infermeter.workload.spec import Requests
from tests.cli import infermeter, report_json


def requests(prompts, outputs, arrivals=None):
    n = len(prompts)
    return Requests(
        np.full(n, "", dtype=object),
        np.asarray(prompts),
        np.asarray(outputs),
        np.full(n, -1),
        np.zeros(n, dtype=np.int64),
        np.zeros(n) if arrivals is None else np.asarray(arrivals, float),
    )


@pytest.mark.parametrize("scheduler", ["static_fifo", "dynamic_no_bins", "multi_bin_dynamic"])
def test_single_request_on_idle_engine_gets_alpha_then_beta(scheduler):
    out = simulate(requests([100], [6], [2.0]), EngineConfig(scheduler={"name": scheduler}))
    times = out.emissions.token_times().values
    m = BatchModel()
    # TTFT = alpha exactly, TBT = beta * h(1) = beta exactly
    np.testing.assert_allclose(times - 2.0, m.alpha + m.beta * np.arange(6), rtol=0, atol=1e-12)
    assert out.end_time == pytest.approx(2.0 + m.batch_time(1, 106, 100))


def test_static_batch_finishes_at_T_b_max_L():
    prompts, outputs = [10, 50, 30, 5, 80, 20, 60, 40], [100, 20, 300, 7, 50, 10, 90, 200]
    out = simulate(requests(prompts, outputs), EngineConfig(scheduler="static_fifo"))
    m = BatchModel()
    assert out.steps == 1
    assert out.end_time == pytest.approx(m.batch_time(8, max(p + o for p, o in zip(prompts, outputs, strict=True)), 0))
    # and every member streams at TBT = beta * h(8) from alpha
    first = out.emissions.first_token()
    np.testing.assert_allclose(first, m.alpha)
    np.testing.assert_allclose(out.emissions.last_token(), m.alpha + (np.array(outputs) - 1) * m.beta * m.h(8))


def _skewed(n=4000, rate=20.0, seed=1):
    r = generate(STANDARD["synthetic-skewed"], n, seed)
    r.arrival_s = arrival_offsets(ArrivalSpec(kind="poisson", rate=rate), n, seed)
    return r


def _throughput(out):
    return len(out.requests) / (np.nanmax(out.emissions.last_token()) - out.requests.arrival_s.min())


def test_multi_bin_by_total_length_beats_static_and_dynamic_at_saturation():
    """synthetic-skewed at 20 req/s saturates static_fifo (capacity ~0.7 req/s) on one engine; bins by prompt +
    predicted output (the batch time's own length) beat one queue by far."""
    r = _skewed()
    thr = {name: _throughput(simulate(r, EngineConfig(scheduler=name))) for name in ("static_fifo", "dynamic_no_bins")}
    for k, name in ((4, "multi_bin_dynamic"), (8, "multi_bin_k8")):
        config = EngineConfig(scheduler={"name": "multi_bin_dynamic", "bins": k, "bin_key": "total"})
        thr[name] = _throughput(simulate(r, config))
    assert thr["static_fifo"] < 1.0
    for k in ("multi_bin_dynamic", "multi_bin_k8"):
        assert thr[k] > 1.25 * thr["dynamic_no_bins"] > 1.25 * thr["static_fifo"], thr


def test_binning_by_output_alone_gains_little_when_prompts_dominate():
    """Multi-bin dynamic batching bins by predicted output only (the default); under T(b, max(prompt + output))
    heavy-tailed prompts still set the batch time, so it stays within a few percent of dynamic_no_bins (README)."""
    r = _skewed()
    dyn = _throughput(simulate(r, EngineConfig(scheduler="dynamic_no_bins")))
    by_output = _throughput(simulate(r, EngineConfig(scheduler="multi_bin_dynamic", bins=4)))
    assert abs(by_output / dyn - 1) < 0.1


def test_chunked_prefill_has_lower_p99_itl_than_continuous():
    from infermeter.metrics.statistics import stats_weighted

    r = _skewed(n=2000)
    p99 = {}
    for name in ("continuous", "chunked_prefill"):
        out = simulate(r, EngineConfig(scheduler=name))
        _, v, w = out.emissions.itl_weighted()
        p99[name] = stats_weighted(v, w).p99
        assert len(out.rejected) == 0
    assert p99["chunked_prefill"] < 0.5 * p99["continuous"], p99


def test_pool_spreads_iteration_engines_and_shares_batch_queue():
    r = _skewed(n=400, rate=50)
    one = simulate(r, EngineConfig(scheduler="continuous"), engines=1)
    four = simulate(r, EngineConfig(scheduler="continuous"), engines=4)
    assert (four.busy_time > 0).all()
    assert np.nanmean(four.emissions.last_token() - r.arrival_s) < np.nanmean(one.emissions.last_token() - r.arrival_s)
    shared = simulate(r, EngineConfig(scheduler="static_fifo"), engines=4)
    assert (shared.busy_time > 0).all()


def test_same_seed_same_simulation():
    r = _skewed(n=300)
    a = simulate(r, EngineConfig(scheduler="chunked_prefill", prediction_noise=0.5), seed=3)
    b = simulate(r, EngineConfig(scheduler="chunked_prefill", prediction_noise=0.5), seed=3)
    np.testing.assert_array_equal(a.emissions.token_times().values, b.emissions.token_times().values)


def test_run_directory_and_report_work_unchanged(tmp_path):
    r = _skewed(n=500, rate=5)
    out = simulate(r, EngineConfig(scheduler="chunked_prefill"), engines=2)
    run = tmp_path / "sim"
    summary = write_sim_run(out, run, {"name": "synthetic-skewed", "seed": 1}, 1, "full")
    assert set(summary.model_dump(mode="json")["sim"]) >= {
        "gpu_utilization",
        "avg_batch_size",
        "queueing_delay_ms",
        "token_sla_violation",
        "request_sla_violation",
        "preemptions",
    }
    assert summary.sim is not None and 0 < summary.sim.gpu_utilization <= 1
    cols = RecordColumns.of_run(run)
    assert cols.n == 500 and (cols.output_tokens == r.output_tokens).all()
    p = infermeter("report", run)
    assert p.returncode == 0, p.stderr
    assert "Table 1: TTFT Results" in p.stdout and "Simulated engine (utilization, batches, queueing, SLA)" in p.stdout
    j = report_json(run)
    assert j["itl_ms"]["p99"] == pytest.approx(summary.itl_ms.p99) and "sim" in j


def test_endpoints_mode_keeps_the_same_summary(tmp_path):
    r = _skewed(n=400, rate=5)
    out = simulate(r, EngineConfig(scheduler="continuous"))
    slo = {"itl": float(np.median(out.ends.last - out.ends.first)) / 4}  # a max-pause bound some streams miss
    full = write_sim_run(out, tmp_path / "full", {}, 1, "full", slo=slo)
    ends = write_sim_run(out, tmp_path / "ends", {}, 1, "endpoints", slo=slo)
    assert 0 < full.goodput.fraction < 1
    assert ends.goodput.fraction == full.goodput.fraction  # judged on each stream's longest pause, not its span
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "itl_ms", "max_pause_ms", "jitter_ms"):
        a, b = getattr(ends, key), getattr(full, key)
        assert a.n == b.n, key
        for stat in ("mean", "p50", "p99", "max"):
            assert a.value(stat) == pytest.approx(b.value(stat), rel=1e-9), (key, stat)
    assert read_records(tmp_path / "ends").column("token_times").combine_chunks().value_lengths().to_numpy().max() == 2
    j = report_json(tmp_path / "ends")
    assert j["itl_ms"]["p99"] == pytest.approx(full.itl_ms.p99)
    assert j["goodput"]["fraction"] == full.goodput.fraction  # `report` keeps the simulation's verdict
    assert report_json(tmp_path / "ends", "--slo", "ttft=1s")["goodput"]["slo"] == {"ttft": 1000.0}


def test_sim_cli_and_side_by_side_report_show_chunked_prefill_smoother(tmp_path):
    runs = []
    for name in ("continuous", "chunked_prefill"):
        run = tmp_path / name
        p = infermeter("sim", "--scheduler", name, "--requests", "1500", "--rate", "20", "--seed", "1", "--out", run)
        assert p.returncode == 0, p.stderr
        assert "Simulated engine (utilization, batches, queueing, SLA)" in p.stdout
        assert f"run directory: {run}" in p.stdout
        runs.append(run)
    p = infermeter("report", *runs)
    assert p.returncode == 0, p.stderr
    assert "Run comparison" in p.stdout
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("| ITL P99"))
    cont, chunk = (float(c.strip().split()[0]) for c in line.split("|")[2:4])
    assert chunk < 0.5 * cont


def test_sim_cli_rejects_bad_options(tmp_path):
    p = infermeter("sim", "--scheduler", "fifo", "--out", tmp_path / "x")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "Invalid value for '--scheduler': must be one of" in p.stderr


def test_sim_replays_a_burstgpt_trace_with_rps_scaling(tmp_path):
    rng = np.random.default_rng(0)
    ts = np.cumsum(rng.exponential(4.0, 300))  # ~0.25 req/s, as BurstGPT's base rate
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    lines += [f"{t:.3f},ChatGPT,{rng.integers(20, 800)},{rng.integers(1, 300)},0,Conversation log" for t in ts]
    trace = tmp_path / "burst.csv"
    trace.write_text("\n".join(lines) + "\n")
    run = tmp_path / "run"
    scaled = ("--trace", trace, "--rps-scale", "100", "--requests", "300")
    p = infermeter("sim", *scaled, "--scheduler", "multi_bin_dynamic", "--out", run)
    assert p.returncode == 0, p.stderr
    cols = RecordColumns.of_run(run)
    # arrivals replay the trace compressed 100x
    np.testing.assert_allclose(cols.submitted_at, (ts - ts[0]) / 100, atol=1e-3)
    assert set(cols.request_class.tolist()) == {"ChatGPT"}
