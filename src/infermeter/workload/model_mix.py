"""A mix of models or LoRA adapters (--model-mix a=0.7,b=0.3): each request names one, drawn with a seeded stream of
its own so the requests' lengths and order are the same with or without a mix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.errors import UserError

MODEL_STREAM = 17  # the random stream the choice draws from ([seed, MODEL_STREAM])


@dataclass(frozen=True)
class ModelMix:
    """Model names and their shares (summing to 1)."""

    names: tuple[str, ...]
    shares: tuple[float, ...]

    def choose(self, n: int, seed: int) -> np.ndarray:
        """The model of each of n requests (str objects); the first k are the same for any n >= k."""
        rng = np.random.default_rng([seed, MODEL_STREAM])
        picks = rng.choice(len(self.names), size=n, p=np.asarray(self.shares))
        return np.asarray(self.names, dtype=object)[picks]

    def describe(self) -> str:
        return ", ".join(f"{name} {share:.0%}" for name, share in zip(self.names, self.shares, strict=True))


def parse_model_mix(text: str) -> ModelMix:
    """`a=0.7,b=0.3` (weights normalised to shares; each name once)."""
    names: list[str] = []
    weights: list[float] = []
    for item in (x.strip() for x in text.split(",")):
        name, sep, weight = item.partition("=")
        name = name.strip()
        try:
            value = float(weight) if sep else float("nan")
        except ValueError:
            value = float("nan")
        if not name or not np.isfinite(value) or value <= 0:
            raise UserError(f"--model-mix {text!r}: expected NAME=WEIGHT pairs with positive weights, e.g. a=0.7,b=0.3")
        if name in names:
            raise UserError(f"--model-mix {text!r}: {name} is given twice")
        names.append(name)
        weights.append(value)
    total = sum(weights)
    return ModelMix(tuple(names), tuple(w / total for w in weights))
