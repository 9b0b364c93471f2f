"""Simulations as dask tasks: `sim-sweep --workers 2` writes the single-process sweep's CSVs byte for byte, resumes
the points already done, and `predict --workers 1` writes the same records."""

from __future__ import annotations

import pytest

from infermeter.sim.experiments import STEP1_CSV, STEP2_CSV
from tests.cli import infermeter

pytest.importorskip("distributed")

SWEEP = ["sim-sweep", "--requests", "1000", "--gpus", "1,2", "--bins", "1,4", "--levels", "high,low"]
RESULTS = [f"{level}/{name}" for level in ("high", "low") for name in (STEP1_CSV, STEP2_CSV)] + [
    "hypotheses.json",
    "hypotheses.md",
]


def test_sim_sweep_on_two_workers_writes_the_same_csvs_byte_for_byte(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    p = infermeter(*SWEEP, "--out", one)
    assert p.returncode == 0, p.stderr
    p = infermeter(*SWEEP, "--out", two, "--workers", "2")
    assert p.returncode == 0, p.stderr
    for name in RESULTS:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    assert (two / "high" / "step1_grid_search.wall_s.csv").read_text().count("\n") == 1 + 4  # a time per point


def test_a_sweep_on_workers_resumes_the_points_already_done(tmp_path):
    """Two of step 1's four rows kept (a sweep killed after them): the rerun on workers computes the rest only
    (its timing file gains just those) and ends with the uninterrupted sweep's CSV."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    small = [*SWEEP[:-2], "--levels", "high", "--step", "1"]
    assert infermeter(*small, "--out", whole).returncode == 0
    assert infermeter(*small, "--out", cut).returncode == 0
    lines = (cut / STEP1_CSV).read_bytes().splitlines(keepends=True)
    (cut / STEP1_CSV).write_bytes(b"".join(lines[:3]))
    timing = cut / "step1_grid_search.wall_s.csv"
    timing.write_bytes(b"".join(timing.read_bytes().splitlines(keepends=True)[:3]))
    p = infermeter(*small, "--out", cut, "--workers", "2")
    assert p.returncode == 0, p.stderr
    assert (cut / STEP1_CSV).read_bytes() == (whole / STEP1_CSV).read_bytes()
    assert timing.read_text().count("\n") == 1 + 4


def test_predict_on_a_worker_writes_the_same_records(tmp_path):
    engine = tmp_path / "engine.yaml"
    engine.write_text("scheduler:\n  name: continuous\n  max_num_seqs: 16\n")
    common = ["predict", "--engine", engine, "--rate", "4", "--requests", "200", "--workload", "synthetic-uniform"]
    p = infermeter(*common, "--out", tmp_path / "here")
    assert p.returncode == 0, p.stderr
    p = infermeter(*common, "--out", tmp_path / "there", "--workers", "1")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "here" / "records.parquet").read_bytes() == (tmp_path / "there" / "records.parquet").read_bytes()


def test_workers_and_cluster_together_are_refused(tmp_path):
    p = infermeter(*SWEEP, "--out", tmp_path, "--workers", "2", "--cluster", "tcp://127.0.0.1:8786")
    assert p.returncode == 2 and "give either --workers N" in p.stderr, p.stderr
    p = infermeter("run", "--workers", "0", "--out", tmp_path / "r")
    assert p.returncode == 2 and "--workers" in p.stderr, p.stderr
    p = infermeter("run", "--cluster", "not an address", "--out", tmp_path / "r")
    assert p.returncode == 2 and "dask scheduler address" in p.stderr, p.stderr


def test_a_suite_on_workers_sends_its_runs_from_them_and_simulates_as_tasks(tmp_path):
    """`test twin --workers 2`: its measured run comes from both workers, merged; its predictions (dask tasks)
    are written beside it; the suite's settings do not hold where it ran, so it resumes without the option."""
    import json

    args = ["test", "twin", "--quick", "--loads", "50", "--requests", "60", "--out", tmp_path / "twin"]
    p = infermeter(*args, "--workers", "2", "--no-progress")
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads((tmp_path / "twin" / "runs" / "load-50pct" / "run.json").read_text())
    assert [w["outcome"] for w in run["distributed"]["workers"]] == ["finished", "finished"]
    assert sum(w["recorded"] for w in run["distributed"]["workers"]) == 60
    predicted = json.loads((tmp_path / "twin" / "predicted" / "load-50pct" / "run.json").read_text())
    assert predicted["kind"] == "simulated" and predicted["load"]["requests"] == 60
    p = infermeter(*args, "--no-progress")
    said = " ".join(p.stderr.split())  # rich wraps its lines
    assert p.returncode == 0 and "finished runs are reused" in said and "req/s: reused" in said, said[-2000:]
