"""Finding run directories (those holding run.json) under the directories given, recursively, and the suite each
belongs to: a run in a suite directory (one holding suite.json) under the key suite.json gives it, and a suite that
is one repeat of `infermeter test --repeat` with the directory of its repeats."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from infermeter.errors import UserError
from infermeter.records import RUN_JSON
from infermeter.suite_result import SUITE_JSON, RunRef, SuiteResult

NO_RUN = (
    "holds no run: give run directories (infermeter run), directories holding them at any depth, suite "
    "directories (infermeter test) or directories of a suite's repeats (infermeter test --repeat)"
)


@dataclass(frozen=True)
class SuiteMembership:
    """Where a run sits in a suite: the suite's directory, its test, the run's key and level in the plan, and the
    directory of the suite's repeats when the suite is one of them."""

    directory: Path
    test: str
    key: str
    level: str | None
    repeats: Path | None

    @property
    def root(self) -> Path:
        """The suite as one execution: the directory of its repeats, else the suite's own."""
        return self.repeats or self.directory


@dataclass(frozen=True)
class FoundRun:
    """A run directory, as found under the directories given, and its suite (None: a run of its own)."""

    path: Path
    suite: SuiteMembership | None = None


@dataclass(frozen=True)
class Problem:
    """A directory the catalog could not read as it should, why, and what it did instead ("skipped")."""

    path: Path
    reason: str
    outcome: str = "skipped"

    def text(self) -> str:
        """The directory and why (a reason that names a file of the directory names it from there)."""
        return f"{self.path}: {self.reason.removeprefix(f'{self.path}{os.sep}')}"

    def line(self) -> str:
        """The warning line the command prints on stderr."""
        return f"warning: {self.text()}; {self.outcome}"


@dataclass
class Found:
    """The runs under the directories given, each once, in the order found, and the suites that could not be read."""

    runs: list[FoundRun] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def run_dirs_under(top: Path) -> list[Path]:
    """Every run directory at or under `top`, sorted; a run directory's own subdirectories are not searched."""
    if not top.exists():
        raise UserError(f"{top} does not exist")
    if not top.is_dir():
        raise UserError(f"{top} is not a directory: give directories that hold runs")
    out = []
    for here, subdirs, files in os.walk(top):
        if RUN_JSON in files:
            out.append(Path(here))
            subdirs.clear()
        else:
            subdirs.sort()
    return sorted(out)


def find_runs(dirs: list[Path]) -> Found:
    """The runs under each directory (a run reached twice, through two of them, counted once), each with its
    suite; a directory holding no run at all is a one-line error naming it."""
    found = Found()
    seen: set[Path] = set()
    suites = _Suites(found.problems)
    for top in dirs:
        paths = run_dirs_under(top)
        if not paths:
            raise UserError(f"{top} {NO_RUN}")
        for path in paths:
            resolved = path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                found.runs.append(FoundRun(path, suites.membership(path)))
    return found


class _Suites:
    """suite.json of each suite directory met, read once with where its runs are (suites.execute says where); an
    unreadable one is reported once and its runs are indexed as runs of their own."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        self.suites: dict[Path, tuple[SuiteResult, dict[Path, RunRef]] | None] = {}
        self.repeats: dict[Path, list[Path]] = {}

    def membership(self, run: Path) -> SuiteMembership | None:
        suite_dir = run.parent.parent  # a suite writes its runs in SUITE/runs/KEY
        if not (suite_dir / SUITE_JSON).is_file():
            return None
        if suite_dir not in self.suites:
            self.suites[suite_dir] = self._read(suite_dir)
        suite = self.suites[suite_dir]
        ref = suite[1].get(run.resolve()) if suite is not None else None
        if suite is None or ref is None:
            return None
        return SuiteMembership(suite_dir, suite[0].suite, ref.key, ref.level, self._repeats_of(suite_dir))

    def _read(self, suite_dir: Path) -> tuple[SuiteResult, dict[Path, RunRef]] | None:
        """The suite's result and its runs by their resolved directories; None (the problem noted) when unreadable."""
        from infermeter.suites.execute import load_result, suite_run_dirs

        try:
            result = load_result(suite_dir)
        except UserError as exc:
            self.problems.append(Problem(suite_dir, str(exc), "its runs are indexed as runs of their own"))
            return None
        refs = {ref.key: ref for ref in result.runs}
        return result, {path.resolve(): refs[key] for key, path in suite_run_dirs(suite_dir, result).items()}

    def _repeats_of(self, suite_dir: Path) -> Path | None:
        """The directory of the suite's repeats when the suite is one repeat (OUT/repeat-K of `test --repeat`)."""
        from infermeter.suites.execute import repeat_dirs

        parent = suite_dir.parent
        if parent not in self.repeats:
            self.repeats[parent] = repeat_dirs(parent)
        return parent if suite_dir in self.repeats[parent] else None
