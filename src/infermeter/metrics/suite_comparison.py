"""Suites of one test compared (the IETF draft's section 6 over a section-5 test): each system is a suite, or the
repeats of one (`infermeter test NAME --repeat N`); its runs are matched level by level by their place in the plan
(never by the absolute load, which differs between systems), and the suites' headline figures (what each suite's
analysis names for a comparison, with its unit: max throughput, knee, capacity, reductions) are compared with 95%
CIs and Welch's test over repeats, or as plain differences without.  Systems are known by their position on the
command line (G1, G2...), never by a label: two systems may print alike."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import numpy as np

from infermeter.metrics.comparison import ALPHA, MIN_EFFECT, runs_agree
from infermeter.metrics.comparison import MIN_RUNS as MIN_REPEATS
from infermeter.metrics.significance import Difference, MeanCI, holm, mean_ci, welch_difference

SINGLE = (
    "a single suite per system cannot show significance: the suite figures are plain differences (run each system "
    f"with `infermeter test NAME --repeat N`, N >= {MIN_REPEATS} as the IETF draft's section 6.3 asks)"
)
NO_HEADLINE = (
    "suite.json written before suites named their headline figures (analysis.headline): every numeric figure "
    "both sides have is compared, each unit read from its name"
)


def name(index: int) -> str:
    """A system's name in tables: G1, G2... in the order the command line gave them."""
    return f"G{index + 1}"


@dataclass(frozen=True)
class PlannedRun:
    """One run of a suite as the comparison matches it: its key (directory name), label, place in the plan (None in
    a suite.json written before suites named them) and directory."""

    key: str
    label: str
    level: str | None
    run_dir: Path


@dataclass
class Repeat:
    """One finished suite of a system: its directory, its runs in plan order, its numeric figures, and its headline
    (the figures a comparison holds side by side, each with its unit; empty in a suite.json written before it)."""

    directory: Path
    runs: list[PlannedRun]
    figures: dict[str, float]
    headline: dict[str, str] = field(default_factory=dict)


@dataclass
class System:
    """A system as the command line gave it: a suite directory, or a directory of its repeats (`label`: as given)."""

    label: str
    test: str
    repeats: list[Repeat]

    @property
    def headline(self) -> dict[str, str]:
        """Its repeats' headline figures with their units, in the order the suite names them."""
        out: dict[str, str] = {}
        for r in self.repeats:
            for figure, unit in r.headline.items():
                out.setdefault(figure, unit)
        return out


def numeric_figures(figures: Mapping[str, object]) -> dict[str, float]:
    """The figures a comparison can hold against each other: finite numbers (flags and words left out)."""
    return {
        k: float(v)
        for k, v in figures.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


# ----- levels


@dataclass
class Level:
    """One place in the plan and each system's runs there (one per repeat that has it), by system index."""

    name: str
    runs: dict[int, list[PlannedRun]] = field(default_factory=dict)


@dataclass
class Matching:
    """Levels every two or more systems ran (compared) and those one system alone ran (listed), how the runs were
    matched (by their level, by their key, or by their position in the plan), and why not by level where not."""

    levels: list[Level]
    unmatched: list[Level]
    by: str
    notes: list[str] = field(default_factory=list)


def _names(repeat: Repeat, by: str) -> list[str]:
    if by == "position":
        return [f"position {i}" for i in range(1, len(repeat.runs) + 1)]
    if by == "key":
        return [r.key for r in repeat.runs]
    return [r.level or r.key for r in repeat.runs]


def _named_twice(systems: list[System]) -> list[str]:
    """Suites that name one level for two of their runs (which pairing by level would pool as repeats)."""
    out = []
    for i, s in enumerate(systems):
        for r in s.repeats:
            named = [run.level for run in r.runs if run.level is not None]
            twice = list(dict.fromkeys(n for n in named if named.count(n) > 1))
            if twice:
                out.append(f"{name(i)} ({r.directory}) names level {', '.join(repr(n) for n in twice)} more than once")
    return out


def match_levels(systems: list[System]) -> Matching:
    """Runs matched across systems by `level`.  A suite.json without levels, or one that names a level for two of
    its runs (pairing them by level would pool two different runs as repeats), falls back to the keys when every
    suite has the same keys, else to the runs' positions in the plan; a note says why.  Levels come in the first
    system's order."""
    repeats = [r for s in systems for r in s.repeats]
    by, notes = "level", []
    twice = _named_twice(systems)
    if twice or any(run.level is None for r in repeats for run in r.runs):
        same_keys = len({tuple(sorted(run.key for run in r.runs)) for r in repeats}) == 1
        by = "key" if same_keys else "position"
        if twice:
            notes.append(f"{'; '.join(twice)}: runs paired by {by} instead (a level must name one run of a suite)")
    levels: dict[str, Level] = {}
    for i, s in enumerate(systems):
        for r in s.repeats:
            for level_name, run in zip(_names(r, by), r.runs, strict=True):
                levels.setdefault(level_name, Level(level_name)).runs.setdefault(i, []).append(run)
    matched = [lv for lv in levels.values() if len(lv.runs) > 1]
    return Matching(matched, [lv for lv in levels.values() if len(lv.runs) == 1], by, notes)


# ----- suite figures


def figure_unit(name: str) -> str:
    """A figure's unit read from its name, as the suites name them (`peak_output_tok_s`, `knee_rate`,
    `warm_ttft_reduction`, `itl_p50_ms_50`); "" when the name says none.  Only for a suite.json written before
    suites named their headline figures with units (analysis.headline)."""
    words = name.split("_")
    pairs = set(pairwise(words))
    if "ms" in words:
        return "ms"
    if ("tok", "s") in pairs:
        return "tok/s"
    if ("req", "s") in pairs or "rps" in words:
        return "req/s"
    if ("hit", "rate") in pairs or {"reduction", "completion", "fraction", "share"} & set(words):
        return "fraction"
    if words[-1] == "rate":
        return "req/s"
    if "inflation" in words:
        return "x"
    if "concurrency" in words:
        return "requests in flight"
    return "s" if words[-1] == "s" else ""


def figure_label(name: str, unit: str) -> str:
    return f"{name} ({unit})" if unit else name


@dataclass
class FigureRow:
    """One suite figure of one system (by index) against the baseline: each side's mean over its repeats [95% CI],
    the difference with its CI and Welch's p (none from a single suite a side), and the verdict."""

    name: str
    unit: str
    system: int
    a: MeanCI
    b: MeanCI
    difference: Difference
    repeats_agree: bool | None  # each of B's repeats beyond each of A's (None below two a side)
    p_adjusted: float | None = None
    significant: bool = False

    @property
    def relative(self) -> float | None:
        return self.difference.diff / self.a.mean if self.a.mean else None

    @property
    def large_enough(self) -> bool:
        return self.relative is not None and abs(self.relative) >= MIN_EFFECT


@dataclass
class FigureComparison:
    """The headline figures both the baseline (by index) and another system name, and what could not be
    compared; one family of tests (Holm) of its own."""

    baseline: int
    rows: list[FigureRow]
    missing: list[str]  # "knee_rate: none in G2" and the like
    notes: list[str]


def values(system: System, figure: str) -> list[float]:
    """A figure over a system's repeats (repeats without it left out)."""
    return [r.figures[figure] for r in system.repeats if figure in r.figures]


def _pair(base: System, other: System, other_name: str, base_name: str) -> tuple[dict[str, str], list[str]]:
    """The figures two systems are compared on, with their units, and those one side alone has: the names both
    sides' headlines hold (the baseline's unit); where either suite.json predates headlines, every numeric figure
    both have, each unit from the headline where one names it, else read from its name."""
    a, b = base.headline, other.headline
    if a and b:
        missing = [f"{n}: none in {other_name}" for n in a if n not in b]
        missing += [f"{n}: none in {base_name}" for n in b if n not in a]
        return {n: unit for n, unit in a.items() if n in b}, missing
    names = list(dict.fromkeys(n for s in (base, other) for r in s.repeats for n in r.figures))
    both, missing = {}, []
    for n in names:
        have_a, have_b = bool(values(base, n)), bool(values(other, n))
        if have_a and have_b:
            both[n] = a.get(n) or b.get(n) or figure_unit(n)
        else:
            missing.append(f"{n}: none in {other_name if have_a else base_name}")
    return both, missing


def compare_figures(systems: list[System], baseline: int) -> FigureComparison:
    """Each other system's headline figures against the baseline's, every p-value of this table corrected
    together (Holm)."""
    rows, missing, notes = [], [], []
    base = systems[baseline]
    for i, other in enumerate(systems):
        if i == baseline:
            continue
        compared, lacking = _pair(base, other, name(i), name(baseline))
        missing += lacking
        for figure, unit in compared.items():
            a, b = values(base, figure), values(other, figure)
            if not a or not b:
                missing.append(f"{figure}: none in {name(i) if a else name(baseline)}")
                continue
            rows.append(FigureRow(figure, unit, i, mean_ci(a), mean_ci(b), welch_difference(a, b), runs_agree(a, b)))
    for row, adjusted in zip(rows, holm([_p(r) for r in rows]), strict=True):
        row.p_adjusted = None if np.isnan(adjusted) else adjusted
        row.significant = bool(
            row.p_adjusted is not None
            and row.p_adjusted < ALPHA
            and row.large_enough
            and row.repeats_agree is not False
        )
    old = [name(i) for i, s in enumerate(systems) if not s.headline]
    if old:
        notes.append(f"{', '.join(old)}: {NO_HEADLINE}")
    few = [name(i) for i, s in enumerate(systems) if len(s.repeats) < MIN_REPEATS]
    if any(len(s.repeats) < 2 for s in systems):
        notes.append(SINGLE)
    elif few:
        notes.append(f"{', '.join(few)}: fewer than {MIN_REPEATS} repeats (the IETF draft's section 6.3)")
    return FigureComparison(baseline, rows, list(dict.fromkeys(missing)), notes)


def _p(row: FigureRow) -> float:
    return float("nan") if row.difference.p is None else row.difference.p


@dataclass(frozen=True)
class FigureSummary:
    """A suite figure over repeats: its unit, and its mean and 95% CI (Student t)."""

    name: str
    unit: str
    stats: MeanCI


def summarize_repeats(figures: list[dict[str, float]], headline: dict[str, str]) -> list[FigureSummary]:
    """The repeats of one suite: each headline figure (every numeric one, its unit read from its name, where the
    suite names none), in the order the suite names them."""
    names = headline or {n: figure_unit(n) for f in figures for n in f}
    return [FigureSummary(n, unit, mean_ci([f[n] for f in figures if n in f])) for n, unit in names.items()]
