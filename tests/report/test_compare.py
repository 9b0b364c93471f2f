"""`infermeter compare` as the draft's section 6 asks: chunked prefill's lower ITL P99 against continuous batching is
significant over three emulator runs each; three repeats of one configuration against three more show nothing
significant; runs of different workloads or loads get the 6.1 findings, and --strict refuses them.  Suites of one test
compare level by level and on their figures, and `infermeter test --repeat` makes the repeats they take."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.metrics.compared import group_runs
from infermeter.metrics.comparison import Comparison, compare
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


# ----- suites of one test: constructed suite directories (runs written from tests/evidence.py's records)


def _suite(
    root: Path,
    test: str,
    plan: list[tuple[str, str | None, float]],
    figures: dict[str, float],
    headline: dict[str, str] | None = None,
) -> Path:
    """A finished suite in `root`: a run per (key, level, rate), each 20 requests at that rate, its figures and the
    headline figures it names for a comparison (with units)."""
    from infermeter.records import write_records
    from infermeter.suite_result import Analysis, RunRef, SuiteResult
    from infermeter.suites.execute import save
    from tests.evidence import info, stream

    refs = []
    for key, level, rate in plan:
        run = root / "runs" / key
        arrivals = {"kind": "poisson", "rate": rate}
        write_records(
            run, info(load={"description": f"{rate} req/s", "requests": 20, "arrivals": arrivals}), stream(20)
        )
        refs.append(RunRef(key=key, label=f"{rate:g} req/s", run_dir=str(run), reused=False, level=level))
    result = SuiteResult(
        suite=test,
        section="5.3",
        reference="IETF draft, section 5.3",
        title="t",
        quick=True,
        params={},
        command="c",
        directory=str(root),
        runs=refs,
        analysis=Analysis(figures={**figures, "modality_50": "unimodal", "stable": True}, headline=headline or {}),
        requirements=[],
        verdict="not compliant",
        started_at="s",
        finished_at="f",
    )
    save(root, result)
    return root


def test_suites_are_compared_level_by_level_and_on_their_figures(tmp_path: Path) -> None:
    """A suite against a directory of two repeats of another: levels pair by name although the rates in their keys
    and labels differ (the groups: 1 run and 2, one per repeat), 6.1 is judged on the plan (the rates stated), a
    level one suite alone ran is listed, and the headline figures are compared with their units (B's over its
    repeats: 620 and 640, mean 630 -/+ t(0.975, 1) x 10 = 127.06); the fits' bookkeeping is not."""
    headline = {"peak_output_tok_s": "tok/s"}
    a = _suite(
        tmp_path / "A",
        "tradeoff",
        [("r2", "10%", 2.0), ("r4", "20%", 4.0), ("p3", "probe 3", 9.0)],
        {"peak_output_tok_s": 600.0, "fit_r2": 0.9},
        headline,
    )
    b = tmp_path / "B"
    for k, peak in ((1, 620.0), (2, 640.0)):
        plan = [("r2.4", "10%", 2.4), ("r4.8", "20%", 4.8)]
        _suite(b / f"repeat-{k}", "tradeoff", plan, {"peak_output_tok_s": peak, "fit_r2": 0.8}, headline)
    p = infermeter("compare", a, b, "--reps", "200")
    assert p.returncode == 0, p.stderr
    heads = [ln for ln in p.stdout.splitlines() if ln.startswith("=== infermeter compare")]
    assert heads == [
        "=== infermeter compare: 2 'tradeoff' suites, levels matched by their place in the plan (suite.json's "
        "level) ===",
        "=== infermeter compare: tradeoff, level '10%' ===",
        "=== infermeter compare: tradeoff, level '20%' ===",
        "=== infermeter compare: the 'tradeoff' suites' figures ===",
    ]
    assert f"| G2: {b} | 2    |" in p.stdout  # its two repeats' runs at the level form the group
    assert "- runs at this level: G1 '2 req/s', G2 '2.4 req/s; 2.4 req/s'" in p.stdout
    load = next(ln for ln in p.stdout.splitlines() if "Same load model at the same level of the plan" in ln)
    assert "| met " in load and "level '10%' of the plan (suite.json) in every run" in load
    assert "G1 open loop, poisson at 2 req/s, 20 requests | G2 open loop, poisson at 2.4 req/s, 20 requests" in load
    workload = next(ln for ln in p.stdout.splitlines() if "Identical workload" in ln)
    assert "| met " in workload
    peak = next(ln for ln in p.stdout.splitlines() if "| peak_output_tok_s (tok/s)" in ln)
    assert (
        "| 600.00 (1 suite) | 630.00 [502.94, 757.06] (2 suites) | +30.00 " in peak
        and "n/a (< 2 suites a side)" in peak
    )
    assert "a single suite per system cannot show significance" in p.stdout
    assert "- level 'probe 3': only G1 ran it (9 req/s)" in p.stdout
    assert "modality_50" not in p.stdout and "| stable" not in p.stdout  # words and flags are not compared
    assert "fit_r2" not in p.stdout  # not a headline figure
    again = infermeter("compare", a, b, "--baseline", b / "repeat-1", "--reps", "200")  # a repeat names its system
    assert again.returncode == 0, again.stderr
    assert f"| G2 (baseline) | {b} " in again.stdout


def test_suites_of_different_tests_or_no_suite_are_refused(tmp_path: Path) -> None:
    a = _suite(tmp_path / "A", "tradeoff", [("r2", "10%", 2.0)], {})
    c = _suite(tmp_path / "C", "ttft", [("ttft", "ttft", 2.0)], {})
    p = infermeter("compare", a, c)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert f"{a} holds a 'tradeoff' test and {c} a 'ttft' test: compare suites of one test" in line
    (tmp_path / "empty").mkdir()
    p = infermeter("compare", a, tmp_path / "empty")
    assert p.returncode == 2 and "holds no run" in p.stderr and "directories of a suite's repeats" in p.stderr
    p = infermeter("compare", a)
    assert p.returncode == 2 and "is one system" in p.stderr


def test_a_directory_given_twice_is_a_one_line_error(tmp_path: Path) -> None:
    """`compare A A` compared a suite with itself and exited 0; a directory named twice (as itself, through another
    spelling, or through a directory of runs that holds it) is refused, naming the argument, writing nothing."""
    a = _suite(tmp_path / "A", "tradeoff", [("r2", "10%", 2.0)], {})
    run = tmp_path / "A" / "runs" / "r2"
    for args in ((a, a), (a, tmp_path / "." / "A"), (run, run), (tmp_path / "A" / "runs", run)):
        before = sorted(str(p) for p in tmp_path.rglob("*"))
        p = infermeter("compare", *args, "--html", tmp_path / "c.html")
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        lines = p.stderr.strip().splitlines()
        assert "is given twice" in lines[-1] and "'dirs'" in p.stderr, p.stderr
        assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_finding_without_evidence_reads_not_verifiable() -> None:
    from infermeter.metrics.checklist import Finding
    from infermeter.report.comparison import findings_table

    table = findings_table([Finding("6.4", "x", None, "why"), Finding("6.4", "y", False, "")], "c")
    assert [row[2] for row in table.rows] == ["not verifiable", "NOT MET"]


def test_repeat_runs_the_whole_suite_into_repeat_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--repeat 3 claims OUT/repeat-1..3 as suites (a stand-in procedure finds 10, 12 and 14) and ends with the mean
    and 95% CI over them: 12 -/+ t(0.975, 2) x 2 / sqrt(3) = 4.968; `compare` then takes OUT as one system."""
    import infermeter.suites.execute as execute
    from infermeter.suite_result import Analysis, SuiteResult
    from tests.cli import exit_code

    found = iter([10.0, 12.0, 14.0])

    def fake(suite, lab, params, quick, command):  # type: ignore[no-untyped-def]
        result = SuiteResult(
            suite=suite.name,
            section=suite.section,
            reference="r",
            title="t",
            quick=quick,
            params={},
            command=command,
            directory=str(lab.out),
            runs=[],
            analysis=Analysis(figures={"peak_output_tok_s": next(found)}),
            requirements=[],
            verdict="not compliant",
            started_at="s",
            finished_at="f",
        )
        execute.save(lab.out, result)
        return result

    monkeypatch.setattr(execute, "execute", fake)
    out = tmp_path / "out"
    args = ["test", "tradeoff", "--quick", "--capacity", "20", "--no-progress", "--out", str(out)]
    assert exit_code([*args, "--repeat", "3"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["repeat-1", "repeat-2", "repeat-3"]
    assert all((out / f"repeat-{k}" / "suite.json").is_file() for k in (1, 2, 3))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [
        "=== over 3 repeats: each suite figure's mean [95% CI, Student t] ===",
        "- peak_output_tok_s (tok/s): 12.00 [7.03, 16.97]",
    ]
    for bad, message in ((["--repeat", "0"], "--repeat"), (["--out", str(out / "repeat-1"), "--repeat", "2"], "--out")):
        before = sorted(str(p) for p in tmp_path.rglob("*"))
        assert exit_code([*args, *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
        assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written


def test_two_tradeoff_suites_compare_with_a_table_per_level_and_for_the_suite_figures(
    tradeoff_suite: Path, tmp_path: Path
) -> None:
    """The issue's acceptance, on the real clock (about a minute a suite): capacities 20 and 24 req/s give every
    level another rate; today's levels pair by their place in the plan."""
    from infermeter.suites.execute import load_result

    a, b = tradeoff_suite, tmp_path / "b"  # a: `test tradeoff --quick --capacity 20`
    extra = ["--capacity", "24", "--scheduler", "chunked_prefill"]
    p = infermeter("test", "tradeoff", "--quick", "--no-progress", "--out", b, *extra)
    assert p.returncode == 0, p.stderr
    p = infermeter("compare", a, b, "--reps", "200")
    assert p.returncode == 0, p.stderr
    levels = [ref.level or ref.key for ref in load_result(a).runs]
    assert len(levels) == 12
    heads = [ln for ln in p.stdout.splitlines() if ln.startswith("=== infermeter compare: tradeoff, level")]
    assert heads == [f"=== infermeter compare: tradeoff, level '{name}' ===" for name in levels]
    assert p.stdout.count("Differences against the baseline (G1)") == 12
    assert "=== infermeter compare: the 'tradeoff' suites' figures ===" in p.stdout
    peak = [ln for ln in p.stdout.splitlines() if "| peak_output_tok_s (tok/s) " in ln]
    assert len(peak) == 1 and peak[0].startswith("| G2 ") and " (1 suite) " in peak[0]
    assert "Levels not compared" not in p.stdout
