"""`infermeter compare` as the draft's section 6 asks: chunked prefill's lower ITL P99 against continuous batching is
significant over three emulator runs each; three repeats of one configuration against three more show nothing
significant; runs of different workloads or loads get the 6.1 findings, and --strict refuses them."""

from __future__ import annotations

from pathlib import Path

from infermeter.metrics.comparison import Comparison, compare, group_runs
from tests.cli import infermeter


def _compare(*dirs: Path) -> Comparison:
    from infermeter.cli.compare import _inputs, _read_run

    found = _inputs(list(dirs))[""]
    runs = [_read_run(p) for p, _ in found]
    groups = group_runs(runs, [hint for _, hint in found])
    return compare(groups, groups[0], reps=1000)


def test_chunked_prefill_lowers_the_itl_p99_significantly(groups: dict[str, Path]) -> None:
    c = _compare(groups["continuous"], groups["chunked"])
    assert c.equivalent, [f for f in c.equivalence if not f.met]
    row = next(r for r in c.rows if r.metric == "itl" and r.statistic == "P99")
    assert row.significant, row
    assert row.diff is not None and row.diff < 0 and row.hi is not None and row.hi < 0  # chunked prefill is lower
    assert row.runs_agree and row.p_adjusted < 0.05
    p = infermeter("compare", groups["continuous"], groups["chunked"], "--reps", "500")
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if "| ITL (ms)" in ln and "| P99 " in ln)
    assert line.rstrip(" |").endswith("significant")


def test_repeats_of_one_configuration_show_no_significant_difference(groups: dict[str, Path]) -> None:
    c = _compare(groups["continuous"], groups["continuous-again"])
    assert c.equivalent
    assert len(c.rows) == 5 * 3 + 2  # five latency metrics x (distribution, P50, P99), two throughput figures
    assert [r for r in c.rows if r.significant] == []
    assert not c.limitations  # three runs a group


def _sim(out: Path, *args: str) -> Path:
    p = infermeter("sim", "--scheduler", "continuous", "--requests", "60", "--out", out, *args)
    assert p.returncode == 0, p.stderr
    return out


def test_different_seeds_or_loads_are_findings_and_strict_refuses_them(tmp_path: Path) -> None:
    a = _sim(tmp_path / "a", "--seed", "1", "--rate", "5")
    b = _sim(tmp_path / "b", "--seed", "2", "--rate", "5")
    c = _sim(tmp_path / "c", "--seed", "1", "--rate", "9")
    p = infermeter("compare", a, b, c, "--reps", "200")
    assert p.returncode == 0, p.stderr
    identical = next(ln for ln in p.stdout.splitlines() if "Identical workload" in ln)
    assert "NOT MET" in identical and "seeds 1, 2" in identical
    load = next(ln for ln in p.stdout.splitlines() if "Same load model" in ln)
    assert "NOT MET" in load and "5 req/s" in load and "9 req/s" in load
    assert (
        "has 1 run: the draft's 6.3 asks for at least 3 independent runs" in p.stdout
    )  # fewer than three runs a group is a stated limitation
    strict = infermeter("compare", a, b, "--strict", "--reps", "200")
    assert strict.returncode == 2
    assert strict.stderr.strip().splitlines()[-1].startswith("error: --strict: the runs are not equivalent (draft 6.1)")
    assert "Identical workload" in strict.stdout  # the findings are printed before the refusal


def test_one_configuration_alone_is_a_one_line_error(tmp_path: Path) -> None:
    a = _sim(tmp_path / "a", "--seed", "1")
    p = infermeter("compare", a)
    assert p.returncode == 2 and "form one group" in p.stderr and "Traceback" not in p.stderr
    p = infermeter("compare", a, tmp_path / "missing")
    assert p.returncode == 2 and "holds no run" in p.stderr


def test_suites_are_compared_run_key_by_run_key(tmp_path: Path) -> None:
    from infermeter.suites.framework import SUITE_JSON, Analysis, RunRef, SuiteResult

    suites = []
    for scheduler in ("continuous", "chunked_prefill"):
        root = tmp_path / scheduler
        refs = []
        for key, rate in (("level-low", "4"), ("level-high", "8")):
            run = root / "runs" / key
            p = infermeter("sim", "--scheduler", scheduler, "--requests", "60", "--rate", rate, "--out", run)
            assert p.returncode == 0, p.stderr
            refs.append(RunRef(key=key, label=f"{rate} req/s", run_dir=str(run), reused=False))
        result = SuiteResult(
            suite="x",
            section="5.3",
            reference="r",
            title="t",
            quick=True,
            params={},
            command="c",
            directory=str(root),
            runs=refs,
            analysis=Analysis(),
            requirements=[],
            verdict="not compliant",
            started_at="s",
            finished_at="f",
        )
        (root / SUITE_JSON).write_text(result.model_dump_json())
        suites.append(root)
    p = infermeter("compare", *suites, "--reps", "200")
    assert p.returncode == 0, p.stderr
    heads = [ln for ln in p.stdout.splitlines() if ln.startswith("=== infermeter compare")]
    assert heads == [
        "=== infermeter compare: level-low: 4 req/s ===",
        "=== infermeter compare: level-high: 8 req/s ===",
    ]
    assert p.stdout.count("| Same load model and parameters") == 2 and "loads differ" not in p.stdout
