"""`infermeter compare`: runs or suites of several systems held against a baseline (the IETF draft's section 6):
groups of repeated runs, equivalence findings, significance per metric, and the full report in HTML or Markdown.
Suites of one test are compared level by level, and on their headline figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import about, app
from infermeter.errors import UserError

if TYPE_CHECKING:
    from infermeter.config.sections import Monitors
    from infermeter.metrics.compared import Declared, Run
    from infermeter.metrics.comparison import Comparison
    from infermeter.metrics.suite_comparison import System
    from infermeter.run_info import RunInfo

Reps = opt.integer(200, 100_000)
NO_RUN = (
    "holds no run: give run directories (infermeter run), directories of them, suite directories (infermeter test), "
    "or directories of a suite's repeats (infermeter test --repeat)"
)


def _monitors(raw: object) -> Monitors:
    """run.json's `monitors` block through its typed model.  A count or price written as a boolean (`gpus: true`,
    which an int parser reads as 1 GPU) declares nothing, and neither does any other value the model refuses; the
    block's other values still count."""
    from pydantic import ValidationError

    from infermeter.config.sections import Monitors

    data = {k: v for k, v in raw.items() if not isinstance(v, bool)} if isinstance(raw, dict) else {}
    while True:
        try:
            return Monitors.model_validate(data)
        except ValidationError as exc:
            bad = {e["loc"][0] for e in exc.errors() if e["loc"]} & set(data)
            if not bad:
                return Monitors()
            data = {k: v for k, v in data.items() if k not in bad}


def _emulator_settings(raw: object) -> dict[str, str]:
    """The embedded emulator's configuration as 6.4 names its settings: through EmulatorConfig (so that a value
    left to its default reads as the default: `bin_edges: online`), the API key and gRPC port left out (neither
    changes what is measured).  A configuration this machine cannot validate (a tokenizer file it lacks) is read
    as written."""
    from pydantic import ValidationError

    from infermeter.emulator.config import EmulatorConfig
    from infermeter.metrics.checklist import flatten

    if not isinstance(raw, dict):
        return {}
    try:
        data = EmulatorConfig.model_validate(raw).model_dump(mode="json")
    except ValidationError:
        data = raw
    return flatten({k: v for k, v in data.items() if k not in ("api_key", "grpc_port")}, "emulator")


def _declared(info: RunInfo) -> Declared | None:
    """What run.json's resolved configuration declares (--gpus, --gpu-price, the emulator's settings), parsed here
    through the typed models (metrics may not import infermeter.config); None when run.json holds none."""
    from infermeter.metrics.compared import Declared

    if info.config is None:
        return None
    monitors = _monitors(info.config.get("monitors"))
    emulator = _emulator_settings(info.config.get("emulator")) if info.kind == "emulated" else {}
    return Declared(monitors.gpus, monitors.gpu_price, emulator)


def _read_run(path: Path) -> Run:
    """A run directory as the comparison reads it (its summary recomputed from the records, as `report` does)."""
    from infermeter.metrics import RecordColumns
    from infermeter.metrics.compared import Run
    from infermeter.metrics.summary import summary_of_run
    from infermeter.records import read_run_info

    info = read_run_info(path)
    cols = RecordColumns.of_run(path, info)
    summary = summary_of_run(path, info, cols, deadlines="")  # compared without deadlines, as it always was
    return Run.read(path, info, summary, cols, _declared(info))


def _system(d: Path) -> System | None:
    """A suite directory, or a directory of its repeats (repeat-1...), as one system; None when it is neither."""
    from infermeter.metrics.suite_comparison import PlannedRun, Repeat, System, numeric_figures
    from infermeter.suite_result import SUITE_JSON
    from infermeter.suites.execute import load_result, repeat_dirs, suite_run_dirs
    from infermeter.suites.lab import RUNS

    dirs = [d] if (d / SUITE_JSON).is_file() else [r for r in repeat_dirs(d) if (r / SUITE_JSON).is_file()]
    repeats, tests = [], set()
    for r in dirs:
        result = load_result(r)
        tests.add(result.suite)
        where = suite_run_dirs(r, result)  # a run that is nowhere is reported missing at its place in the suite
        runs = [PlannedRun(x.key, x.label, x.level, where.get(x.key, r / RUNS / x.key)) for x in result.runs]
        repeats.append(Repeat(r, runs, numeric_figures(result.analysis.figures), dict(result.analysis.headline)))
    if len(tests) > 1:
        raise UserError(f"{d} holds repeats of different tests ({', '.join(sorted(tests))}): give one test's repeats")
    return System(str(d), tests.pop(), repeats) if repeats else None


def _inputs(dirs: list[Path]) -> dict[str, list[tuple[Path, str | None]]]:
    """Run directories to compare, each with its group when the command line names it ("" keys plain runs).  A run
    directory is grouped with the runs of its configuration; a directory of run directories is one group (repeats
    kept apart from other repeats of the same configuration)."""
    from infermeter.records import RUN_JSON

    keyed: dict[str, list[tuple[Path, str | None]]] = {}
    for d in dirs:
        if (d / RUN_JSON).is_file():
            keyed.setdefault("", []).append((d, None))
        elif d.is_dir() and (inner := sorted(p for p in d.iterdir() if (p / RUN_JSON).is_file())):
            keyed.setdefault("", []).extend((p, str(d)) for p in inner)
        else:
            raise UserError(f"{d} {NO_RUN}")
    return keyed


def _refuse_twice(paths: list[Path], what: str) -> None:
    """One directory given twice (itself, or through a directory that holds it) would be compared with itself."""
    seen: dict[Path, Path] = {}
    for p in paths:
        resolved = p.resolve()
        if resolved in seen:
            first = seen[resolved]
            via = "" if first == p else f" (as {first})"
            raise UserError(f"{p} is given twice{via}: each {what} may be compared once")
        seen[resolved] = p


def _suites(dirs: list[Path]) -> list[System] | None:
    """The systems when the command line gives suites (of one test); None when it gives runs."""
    systems = [_system(d) for d in dirs]
    found = [s for s in systems if s is not None]
    if not found:
        return None
    if len(found) < len(systems):
        other = next(d for d, s in zip(dirs, systems, strict=True) if s is None)
        _inputs([other])  # a directory holding neither runs nor suites: say so
        raise UserError(f"{other} holds runs, not a suite: give suites, or runs, not both")
    _refuse_twice([r.directory for s in found for r in s.repeats], "suite")
    tests = list(dict.fromkeys(s.test for s in found))
    if len(tests) > 1:
        first, second = (next(s for s in found if s.test == t) for t in tests[:2])
        raise UserError(
            f"{first.label} holds a '{first.test}' test and {second.label} a '{second.test}' test: "
            "compare suites of one test"
        )
    if len(found) < 2:
        raise UserError(f"{found[0].label} is one system: give the suites of at least two systems")
    return found


@app.command()
def compare(
    dirs: Annotated[
        list[Path],
        typer.Argument(
            help="run directories (repeats of a configuration are grouped), suite directories of one test, or "
            "directories of a suite's repeats (infermeter test --repeat): one system each"
        ),
    ],
    baseline: Annotated[
        Path | None, typer.Option(help="a directory of the baseline group (default: the first)")
    ] = None,
    strict: Annotated[bool, typer.Option(help="refuse (exit 2) when the runs fail a 6.1 equivalence check")] = False,
    reps: Annotated[int, typer.Option(help="bootstrap replicates per CI", parser=Reps)] = 2000,
    html: opt.Html = None,
    markdown: opt.Markdown = None,
) -> None:
    """Compare systems as the IETF draft's section 6 asks: equivalence, repeated runs with 95% CIs, and a test with a
    multiple-comparison correction for every difference; suites of one test level by level and on their figures."""
    with about("dirs"):
        _refuse_twice(dirs, "directory")
        systems = _suites(dirs)
    if systems is not None:
        comparisons = _compare_suites(systems, baseline, reps, html, markdown)
    else:
        comparisons = _compare_runs(dirs, baseline, reps, html, markdown)
    failed = [f for _, c in comparisons for f in c.equivalence if f.must and not f.met]
    if strict and failed:
        raise UserError(
            f"--strict: the runs are not equivalent (draft 6.1): {failed[0].text.lower()} {failed[0].status.lower()} "
            f"({failed[0].reason})"
        )


def _compare_runs(
    dirs: list[Path], baseline: Path | None, reps: int, html: Path | None, markdown: Path | None
) -> list[tuple[str, Comparison]]:
    from infermeter.cli.report import write_documents
    from infermeter.metrics.compared import group_runs
    from infermeter.metrics.comparison import compare as compare_groups
    from infermeter.report.comparison import comparison_document, comparison_text

    with about("dirs"):
        keyed = _inputs(dirs)
        _refuse_twice([p for paths in keyed.values() for p, _ in paths], "run")
    if baseline is not None and not _among(baseline, [d for paths in keyed.values() for d, _ in paths], dirs):
        raise UserError(f"--baseline {baseline} is none of the compared runs or directories: give one of them")
    with about("dirs"):
        runs = {key: [(_read_run(p), hint) for p, hint in paths] for key, paths in keyed.items()}
    comparisons = []
    for key, found in runs.items():
        groups = group_runs([r for r, _ in found], [hint for _, hint in found])
        if len(groups) < 2:
            raise UserError(
                f"{len(found)} run(s){' for ' + key if key else ''} form one group: give runs of at least two "
                "configurations, or a directory of runs per group"
            )
        picked = [g for g in groups if baseline is not None and any(_among(baseline, [r.path], dirs) for r in g.runs)]
        base = picked[0] if picked else groups[0]
        comparisons.append((key, compare_groups(groups, base, reps)))
    for key, c in comparisons:
        print(comparison_text(c, key))
        print()
    if html or markdown:
        write_documents(comparison_document(comparisons), html, markdown)
    return comparisons


def _baseline_system(systems: list[System], baseline: Path | None) -> int:
    """The index of the baseline system: the one whose directory --baseline names (or holds, a repeat of it),
    found by resolved path; the first without --baseline."""
    if baseline is None:
        return 0
    b = baseline.resolve()
    for i, s in enumerate(systems):
        root = Path(s.label).resolve()
        if b == root or root in b.parents:
            return i
    raise UserError(f"--baseline {baseline} is none of the compared suites: give one of them")


def _compare_suites(
    systems: list[System], baseline: Path | None, reps: int, html: Path | None, markdown: Path | None
) -> list[tuple[str, Comparison]]:
    """Each level two or more systems ran, compared as runs are (one group a system, its repeats' runs at that
    level) with 6.1 judged on the plan, and the suites' headline figures."""
    from infermeter.cli.report import write_documents
    from infermeter.metrics.checklist import PlanMatch
    from infermeter.metrics.compared import Group, configuration
    from infermeter.metrics.comparison import compare as compare_groups
    from infermeter.metrics.suite_comparison import compare_figures, match_levels, name
    from infermeter.report.suite_comparison import suite_comparison_document, suite_comparison_text

    base = _baseline_system(systems, baseline)
    matching = match_levels(systems)
    comparisons = []
    for level in matching.levels:
        groups: dict[int, Group] = {}
        labels = []
        with about("dirs"):
            for i, planned in level.runs.items():
                runs = []
                for p in planned:
                    run = _read_run(p.run_dir)
                    run.level = p.level
                    runs.append(run)
                groups[i] = Group(f"{name(i)}: {systems[i].label}", runs, configuration(runs[0].info))
                labels.append(f"{name(i)} '{'; '.join(p.label for p in planned)}'")
        ordered = [groups[i] for i in sorted(groups)]
        level_base = groups.get(base, ordered[0])
        c = compare_groups(ordered, level_base, reps, PlanMatch(level.name, matching.by))
        c.notes.append("runs at this level: " + ", ".join(labels))
        if base not in groups:
            c.notes.append(f"{name(base)} (the baseline) did not run this level: {level_base.name} stands in for it")
        comparisons.append((f"{systems[base].test}, level '{level.name}'", c))
    figures = compare_figures(systems, base)
    print(suite_comparison_text(systems, base, matching, comparisons, figures))
    print()
    if html or markdown:
        write_documents(suite_comparison_document(systems, base, matching, comparisons, figures), html, markdown)
    return comparisons


def _among(baseline: Path, runs: list[Path], dirs: list[Path]) -> bool:
    """Whether --baseline names one of these runs, or a directory given on the command line that holds one."""
    b = baseline.resolve()
    given = {d.resolve() for d in dirs}
    return any(b == r.resolve() or (b in given and b in r.resolve().parents) for r in runs)
