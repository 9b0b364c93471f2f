"""Prefill deadline as a function of prompt length (seeds/001 section 4.1): a quadratic fitted by least squares.

Metron's released code fits a random forest, which cannot extrapolate past the longest prompt profiled; a
quadratic in the prompt length follows attention's cost and extrapolates.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import orjson

from infermeter.errors import UserError


@dataclass(frozen=True)
class PrefillCurve:
    """TTFT(P) = a + b P + c P^2 seconds, from isolated requests' minimum TTFT per prompt length.

    P is the prompt's token count as a run's metrics count it: `counting_method` is the IETF draft's option (A:
    the server's usage counts, B: counts under the reference `tokenizer`), so deadlines evaluated on a run's
    counts are evaluated on the count the curve was fitted on.  Empty in curves saved before it was recorded.
    """

    a: float
    b: float
    c: float
    r2: float
    lengths: list[int] = field(default_factory=list)
    min_ttft_s: list[float] = field(default_factory=list)
    source: str = ""
    counting_method: str = ""
    tokenizer: str = ""

    def predict(self, prompt_tokens: np.ndarray | float) -> np.ndarray:
        p = np.asarray(prompt_tokens, dtype=float)
        return self.a + self.b * p + self.c * p * p

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2))

    @classmethod
    def load(cls, path: Path) -> PrefillCurve:
        """A saved curve whose coefficients are finite numbers (a curve file edited by hand may hold anything)."""
        if path.is_dir():
            raise UserError(
                f"prefill curve {path} is a directory: give the JSON file `infermeter profile-prefill` saved"
            )
        if not path.is_file():
            raise UserError(f"prefill curve {path} does not exist: make one with `infermeter profile-prefill`")
        try:
            curve = cls(**orjson.loads(path.read_bytes()))
        except (orjson.JSONDecodeError, TypeError, OSError) as exc:
            raise UserError(f"{path} is not a prefill curve: {exc}") from None
        for key in ("a", "b", "c", "r2"):
            value = getattr(curve, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise UserError(f"{path} is not a prefill curve: {key} must be a finite number, got {value!r}")
        return curve


def fit_quadratic(
    lengths: np.ndarray, ttft_s: np.ndarray, source: str = "", counting_method: str = "", tokenizer: str = ""
) -> PrefillCurve:
    x = np.asarray(lengths, dtype=float)
    y = np.asarray(ttft_s, dtype=float)
    if len(np.unique(x)) < 3:
        raise UserError("a prefill curve needs at least 3 distinct prompt lengths")
    design = np.column_stack([np.ones_like(x), x, x * x])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    pred = design @ coef
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - pred) ** 2)) / ss_tot if ss_tot > 0 else 1.0
    return PrefillCurve(
        float(coef[0]),
        float(coef[1]),
        float(coef[2]),
        r2,
        [int(v) for v in x],
        [float(v) for v in y],
        source,
        counting_method,
        tokenizer,
    )
