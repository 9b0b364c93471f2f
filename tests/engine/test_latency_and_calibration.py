import numpy as np
import pytest

from infermeter.engine.core import EngineCore
from infermeter.engine.grid_fit import fit_batch_model, fit_grid_file
from infermeter.engine.iteration import ChunkedPrefill, ContinuousBatching
from infermeter.engine.latency import BatchModel, IterationModel, attention_pairs
from infermeter.engine.request import EngineRequest
from infermeter.errors import UserError


def test_seed_batch_model_closed_form():
    m = BatchModel()
    assert m.alpha == pytest.approx(0.059653) and m.beta == pytest.approx(0.005742)
    # h(8) = 1 + 0.316 * 7/8 = 1.2765; the seed quotes TBT ~ 7.3 ms at b = 8
    assert m.tbt(8, 0) == pytest.approx(0.005742 * 1.2765)
    assert m.tbt(1, 0) == m.beta
    assert m.batch_time(4, 100, 0) == pytest.approx(0.059653 + 0.005742 * 100 * (1 + 0.316 * 0.75))


def test_iteration_model_step_arithmetic():
    m = IterationModel()
    assert m.step_time(1000, 0, 1000) == pytest.approx(0.006 + 0.045 + 0.00004)
    assert m.step_time(0, 10, 5000) == pytest.approx(0.006 + 0.0003 + 0.0002)
    # a static batch: prefill, then (L - 1) decode steps whose context grows by b each step
    b, L, P = 4, 10, 400
    expect = m.step_time(P, 0, P) + sum(m.step_time(0, b, P + b * k) for k in range(1, L))
    assert m.batch_time(b, L, P) == pytest.approx(expect)


def test_prefill_attention_costs_the_prompts_pairs_however_it_is_chunked():
    m = IterationModel(fixed=0.002, per_prefill_token=1e-4, per_context_token=1e-6, per_prefill_pair=1e-8)
    assert attention_pairs(3, 0) == 6 and attention_pairs(2, 3) == 2 * 3 + 3  # (1 + 2 + 3); two tokens after 3 held
    assert sum(attention_pairs(c, held) for c, held in [(512, 0), (512, 512), (76, 1024)]) == 1100 * 1101 // 2

    def steps(scheduler: ContinuousBatching | ChunkedPrefill) -> list[float]:
        """An isolated 1100-token prompt's prefill steps (its first token ends the last)."""
        core = EngineCore(scheduler, m, capacity_tokens=10**6)
        core.submit(EngineRequest(0, 0.0, 1100, 2, 2))
        out, now = [], 0.0
        while True:
            step = core.next_step(now)
            core.finish(step)
            out.append(step.duration)
            now += step.duration
            if step.reqs:
                return out

    pairs = 1e-8 * 1100 * 1101 / 2
    assert steps(ContinuousBatching()) == [pytest.approx(0.002 + 0.11 + 1100e-6 + pairs)]
    chunked = steps(ChunkedPrefill(token_budget=512))
    # three chunks: three fixed costs, the context each chunk attends (512 + 1024 + 1100), the same pairs
    assert len(chunked) == 3
    assert sum(chunked) == pytest.approx(3 * 0.002 + 0.11 + (512 + 1024 + 1100) * 1e-6 + pairs)
    assert m.ttft(1, 1100) == pytest.approx(0.002 + 0.11 + 1100e-6 + pairs)


def test_calibration_recovers_parameters(tmp_path):
    truth = BatchModel(alpha=0.05, beta=0.004, gamma=0.25)
    rng = np.random.default_rng(0)
    rows = [
        (b, L, truth.batch_time(b, L, 0) * (1 + rng.normal(0, 0.002)))
        for b in (1, 2, 4, 8, 16, 32)
        for L in (128, 256, 512, 1024, 2048)
    ]
    b, L, y = map(np.array, zip(*rows, strict=True))
    fit = fit_batch_model(b, L, y)
    assert fit.model.alpha == pytest.approx(0.05, rel=0.05)
    assert fit.model.beta == pytest.approx(0.004, rel=0.01)
    assert fit.model.gamma == pytest.approx(0.25, rel=0.03)
    assert fit.r2 > 0.999
    p = tmp_path / "grid.csv"
    p.write_text(
        "batch_size,max_seq_len,mean_latency_sec,std_latency_sec,num_trials\n"
        + "".join(f"{bi},{li},{yi},0.001,5\n" for bi, li, yi in rows)
    )
    assert fit_grid_file(p).model.beta == pytest.approx(fit.model.beta)


def test_calibration_errors(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("batch,len\n1,2\n")
    with pytest.raises(UserError, match="lacks column"):
        fit_grid_file(p)
    with pytest.raises(UserError, match="at least 3"):
        fit_batch_model(np.array([1]), np.array([1]), np.array([1.0]))
