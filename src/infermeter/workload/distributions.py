"""Token-length distributions (draft 4.3.1): fixed, uniform, normal, log-normal, empirical, quantile-matched.

Every distribution samples integer token counts with a numpy Generator, is clipped to its floor and cap,
and serializes to a plain dict so a run can declare exactly what it drew from.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import special

from infermeter.errors import UserError
from infermeter.workload.csv_columns import int_column, read_csv
from infermeter.workload.limits import MAX_LENGTH

Length = Annotated[int, Field(ge=0, le=MAX_LENGTH)]


class _Dist(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    min: Length = 1
    max: Length | None = None

    def _clip(self, x: np.ndarray) -> np.ndarray:
        hi = self.max if self.max is not None else np.iinfo(np.int32).max
        return np.clip(np.rint(x), self.min, hi).astype(np.int64)

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


class Fixed(_Dist):
    """Every request gets the same length."""

    kind: Literal["fixed"] = "fixed"
    value: Length
    min: Length = 0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value, dtype=np.int64)

    def describe(self) -> str:
        return f"fixed {self.value}"


class Uniform(_Dist):
    """Integers uniform on [min, max], both ends included (the draft's randint)."""

    kind: Literal["uniform"] = "uniform"
    max: Length

    @model_validator(mode="after")
    def _order(self) -> Uniform:
        if self.max < self.min:
            raise ValueError(f"uniform needs min <= max, got {self.min} > {self.max}")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.min, self.max + 1, size=n, dtype=np.int64)

    def describe(self) -> str:
        return f"uniform [{self.min}, {self.max}]"


class Normal(_Dist):
    """Normal(mean, std), rounded and clipped to [min, max]."""

    kind: Literal["normal"] = "normal"
    mean: float
    std: float = Field(ge=0)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._clip(rng.normal(self.mean, self.std, size=n))

    def describe(self) -> str:
        return f"normal(mean={self.mean:g}, std={self.std:g}) clipped to [{self.min}, {self.max}]"


class LogNormal(_Dist):
    """exp(Normal(mu, sigma)), rounded, with values below the floor raised to it and above the cap cut to it; with
    bounds "truncate" drawn from the part of the distribution between floor and cap instead (a length class carved
    out of a workload, as the IETF draft's 5.6.2 classes are out of Synthetic-Skewed)."""

    kind: Literal["lognormal"] = "lognormal"
    mu: float
    sigma: float = Field(gt=0)
    bounds: Literal["clip", "truncate"] = "clip"

    def _edges(self) -> tuple[float, float]:
        """The standard-normal quantiles of the values that round into [min, max]."""
        lo = (np.log(self.min - 0.5) - self.mu) / self.sigma if self.min > 0.5 else -np.inf
        hi = (np.log(self.max + 0.5) - self.mu) / self.sigma if self.max is not None else np.inf
        return float(lo), float(hi)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.bounds == "clip":
            return self._clip(rng.lognormal(self.mu, self.sigma, size=n))
        a, b = (float(special.ndtr(z)) for z in self._edges())
        z = special.ndtri(rng.uniform(a, b, size=n))
        return self._clip(np.exp(self.mu + self.sigma * z))

    def expected_mean(self) -> float:
        """Mean of the clipped (or truncated) distribution before rounding (closed form), for checks against
        samples."""
        lo, hi = float(self.min), float(self.max if self.max is not None else np.inf)
        mu, s = self.mu, self.sigma
        if self.bounds == "truncate":
            a, b = self._edges()
            mass = special.ndtr(b) - special.ndtr(a)
            return float(np.exp(mu + s * s / 2) * (special.ndtr(b - s) - special.ndtr(a - s)) / mass)
        a = (np.log(lo) - mu) / s if lo > 0 else -np.inf
        b = (np.log(hi) - mu) / s
        middle = np.exp(mu + s * s / 2) * (special.ndtr(b - s) - special.ndtr(a - s))
        return float(lo * special.ndtr(a) + middle + (hi * special.ndtr(-b) if np.isfinite(hi) else 0.0))

    @model_validator(mode="after")
    def _room(self) -> LogNormal:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"log-normal needs min <= max, got {self.min} > {self.max}")
        if self.bounds == "truncate" and self.max is None:
            raise ValueError("a truncated log-normal needs a max (its cap)")
        return self

    def describe(self) -> str:
        if self.bounds == "truncate":
            return f"log-normal(mu={self.mu:g}, sigma={self.sigma:g}) truncated to [{self.min}, {self.max}]"
        return f"log-normal(mu={self.mu:g}, sigma={self.sigma:g}), floor {self.min}, cap {self.max}"


class Empirical(_Dist):
    """Draws with replacement from observed lengths: a list, or a column of a CSV file."""

    kind: Literal["empirical"] = "empirical"
    values: list[Length] | None = None
    csv: str | None = None
    column: str | None = None

    @model_validator(mode="after")
    def _source(self) -> Empirical:
        if (self.values is None) == (self.csv is None):
            raise ValueError("empirical needs exactly one of 'values' or 'csv' (+ 'column')")
        if self.csv is not None and not self.column:
            raise ValueError("empirical with 'csv' needs 'column' naming the length column")
        if self.values is not None and not self.values:
            raise ValueError("empirical 'values' is empty")
        return self

    def observed(self) -> np.ndarray:
        if self.values is not None:
            return np.asarray(self.values, dtype=np.int64)
        assert self.csv is not None and self.column is not None  # _source: values, else csv and column
        return read_length_column(Path(self.csv), self.column)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        obs = self.observed()
        return self._clip(obs[rng.integers(0, len(obs), size=n)])

    def describe(self) -> str:
        src = f"{len(self.values)} listed values" if self.values is not None else f"{self.csv}:{self.column}"
        return f"empirical ({src})"


class Quantiles(_Dist):
    """A length distribution pinned to published percentiles.

    The quantile function is piecewise linear in (normal z-score, log length) through the given points, and
    extends past the outer points with the nearest segment's slope; below the lowest point it mirrors the first
    segment.  With two points this is exactly a log-normal; with more it reproduces every given percentile.
    """

    kind: Literal["quantiles"] = "quantiles"
    points: dict[float, float]

    @model_validator(mode="after")
    def _check(self) -> Quantiles:
        if len(self.points) < 2:
            raise ValueError("quantiles needs at least two percentile points, e.g. {50: 156, 95: 892}")
        for q, v in self.points.items():
            if not 0 < q < 100 or not 0 < v <= MAX_LENGTH:
                raise ValueError(
                    f"quantile point {q}: {v} must have 0 < percentile < 100 and a length from 1 to {MAX_LENGTH:,}"
                )
        lengths = [self.points[q] for q in sorted(self.points)]
        if any(b <= a for a, b in itertools.pairwise(lengths)):
            raise ValueError("quantile points must grow with the percentile")
        return self

    def _knots(self) -> tuple[np.ndarray, np.ndarray]:
        qs = sorted(self.points)
        z = special.ndtri(np.asarray(qs) / 100.0)
        logv = np.log(np.asarray([self.points[q] for q in qs], dtype=float))
        if np.any(np.diff(logv) <= 0):
            raise UserError("quantile points must grow with the percentile")
        return z, logv

    def ppf(self, u: np.ndarray) -> np.ndarray:
        z_knots, logv = self._knots()
        z = special.ndtri(u)
        slope = np.diff(logv) / np.diff(z_knots)
        out = np.interp(z, z_knots, logv)
        lo, hi = z < z_knots[0], z > z_knots[-1]
        out[lo] = logv[0] + slope[0] * (z[lo] - z_knots[0])
        out[hi] = logv[-1] + slope[-1] * (z[hi] - z_knots[-1])
        return np.exp(out)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._clip(self.ppf(rng.random(n)))

    def describe(self) -> str:
        pts = ", ".join(f"P{q:g}={v:g}" for q, v in sorted(self.points.items()))
        return f"quantile-matched ({pts}), floor {self.min}, cap {self.max}"


LengthDist = Annotated[Fixed | Uniform | Normal | LogNormal | Empirical | Quantiles, Field(discriminator="kind")]


def read_length_column(path: Path, column: str) -> np.ndarray:
    """Read one column of whole numbers of a CSV file (lengths of observed prompts or outputs)."""
    table = read_csv(path, f"a CSV with a '{column}' column")
    if column not in table.column_names:
        raise UserError(f"{path} has no column '{column}' (columns: {', '.join(table.column_names)})")
    values = int_column(table, column, path, MAX_LENGTH)
    if not len(values):
        raise UserError(f"{path} column '{column}' has no values")
    return values
