import csv

from infermeter.sim.experiments import STEP1_CSV, STEP2_CSV
from tests.cli import infermeter


def sweep(out, *extra):
    return infermeter(
        "sim-sweep", "--out", out, "--requests", "300", "--gpus", "1,2", "--bins", "1,4", "--rate", "10", *extra
    )


def rows(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_sweep_writes_seed_csvs_and_resumes(tmp_path):
    p = sweep(tmp_path)
    assert p.returncode == 0, p.stderr
    grid, comp = rows(tmp_path / STEP1_CSV), rows(tmp_path / STEP2_CSV)
    assert len(grid) == 4 and {r["k_bins"] for r in grid} == {"1", "4"}
    assert [r["method"] for r in comp] == ["static_fifo", "dynamic_no_bins", "multi_bin_dynamic", "multi_bin_dynamic"]
    assert all(float(r["throughput_req_s"]) > 0 for r in grid + comp)
    # drop one finished row, as if interrupted before it was written: only that one runs again
    with (tmp_path / STEP1_CSV).open() as fh:
        lines = fh.readlines()
    (tmp_path / STEP1_CSV).write_text("".join(lines[:-1]))
    again = sweep(tmp_path, "--step", "1")
    assert again.returncode == 0, again.stderr
    after = rows(tmp_path / STEP1_CSV)
    assert len(after) == 4 and after[:3] == grid[:3]
    assert after[3]["experiment"] == grid[3]["experiment"]
