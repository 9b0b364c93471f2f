"""The catalog's evidence: the hierarchical bootstrap draws runs, then requests within each drawn run, and its
statistic over rows of unequal length is numpy's; the success rate's change is Newcombe's interval."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.catalog.evidence import Spread, _row_statistic, _welch_df, critical, hierarchical_replicates


def test_runs_are_drawn_before_their_requests() -> None:
    # run A: 10 requests of 1 ms, run B: 30 of 3 ms; each request drawn from its own run leaves its run's value, so
    # a replicate is (A, A), (B, B) or a mix of both, with probabilities 1/4, 1/4 and 1/2
    runs = [np.full(10, 1.0), np.full(30, 3.0)]
    means = hierarchical_replicates(runs, None, 4000, np.random.default_rng(0))
    values, counts = np.unique(means, return_counts=True)
    assert values.tolist() == pytest.approx([1.0, 2.5, 3.0])  # the mix: (10 x 1 + 30 x 3) / 40
    assert (counts / 4000).tolist() == pytest.approx([0.25, 0.5, 0.25], abs=0.03)
    medians = hierarchical_replicates(runs, 0.5, 4000, np.random.default_rng(0))
    assert set(np.unique(medians).tolist()) == {1.0, 3.0}  # the mix's median is B's


def test_one_run_is_the_bootstrap_of_its_requests() -> None:
    run = np.arange(100, dtype=float)
    means = hierarchical_replicates([run], None, 4000, np.random.default_rng(1))
    assert means.mean() == pytest.approx(49.5, abs=0.2)
    assert means.std() == pytest.approx(run.std() / 10, rel=0.05)  # the standard error of a mean of 100


def test_rows_of_unequal_length_match_numpy() -> None:
    rng = np.random.default_rng(2)
    rows = [rng.normal(size=n) for n in (5, 9, 2, 9)]
    padded = np.full((4, 9), np.nan)
    for i, r in enumerate(rows):
        padded[i, : len(r)] = r
    counts = np.array([len(r) for r in rows])
    for q in (0.5, 0.9, 0.99):
        assert _row_statistic(padded, counts, q).tolist() == pytest.approx([np.quantile(r, q) for r in rows])
    assert _row_statistic(padded, counts, None).tolist() == pytest.approx([r.mean() for r in rows])


def test_the_degrees_of_freedom_come_from_the_runs() -> None:
    assert critical(2) == pytest.approx(4.3027, abs=1e-4)
    assert critical(np.inf) == pytest.approx(1.95996, abs=1e-5)
    # two groups of three runs with equal spreads: Welch-Satterthwaite gives 4; a one-run side adds no uncertainty
    assert _welch_df(Spread(1.0, 3), Spread(1.0, 3)) == pytest.approx(4.0)
    assert _welch_df(Spread(1.0, 3), Spread(1.0, 1)) == pytest.approx(8.0)  # (1 + 1)^2 / (1 / 2)
    assert _welch_df(Spread(1.0, 1), Spread(1.0, 1)) == np.inf
