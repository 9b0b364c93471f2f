"""A user's think time between a reply and their next turn (--think-time): fixed, exponential or uniform, seeded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infermeter.errors import UserError
from infermeter.units import DURATION, duration_s

ThinkKind = Literal["fixed", "exp", "uniform"]
_SPEC = re.compile(rf"^(fixed|exp|uniform):{DURATION}(?:-{DURATION})?$")
FORMS = "fixed:500ms, exp:2s (exponential with that mean) or uniform:1s-3s"


@dataclass(frozen=True)
class ThinkTime:
    """How long a user waits after a reply before sending the next turn."""

    kind: ThinkKind
    mean_s: float  # fixed: the value; exp: the mean; uniform: the midpoint
    low_s: float = 0.0  # uniform's bounds
    high_s: float = 0.0

    @classmethod
    def parse(cls, text: str) -> ThinkTime:
        """`fixed:500ms`, `exp:2s` or `uniform:1s-3s`; `0` or `none` is no think time."""
        spec = text.strip().replace(" ", "")
        if spec in ("0", "none", "off"):
            return cls("fixed", 0.0)
        match = _SPEC.match(spec)
        if match is None:
            raise UserError(f"--think-time {text!r}: expected {FORMS}")
        kind, first = match.group(1), duration_s(match.group(2), match.group(3))
        if kind == "uniform":
            if match.group(4) is None:
                raise UserError(f"--think-time {text!r}: uniform needs two bounds, e.g. uniform:1s-3s")
            high = duration_s(match.group(4), match.group(5))
            if high < first:
                raise UserError(f"--think-time {text!r}: the upper bound is below the lower")
            return cls("uniform", (first + high) / 2, first, high)
        if match.group(4) is not None:
            raise UserError(f"--think-time {text!r}: {kind} takes one duration, e.g. {kind}:2s")
        return cls("exp" if kind == "exp" else "fixed", first)

    def sample(self, rng: np.random.Generator) -> float:
        """One think time, seconds."""
        if self.kind == "exp":
            return float(rng.exponential(self.mean_s)) if self.mean_s > 0 else 0.0
        if self.kind == "uniform":
            return float(rng.uniform(self.low_s, self.high_s))
        return self.mean_s

    def describe(self) -> str:
        if self.kind == "exp":
            return f"exponential, mean {self.mean_s:g} s"
        if self.kind == "uniform":
            return f"uniform {self.low_s:g}-{self.high_s:g} s"
        return f"fixed {self.mean_s:g} s" if self.mean_s else "none"
