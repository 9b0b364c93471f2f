"""Whether an ITL distribution is unimodal or multimodal (the IETF draft, 5.4.4.3): one and two-component Gaussian
mixtures fitted to log ITL by EM, compared by BIC, with the two components required to be well separated."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_SAMPLES = 50
MAX_SAMPLES = 20_000
METHOD = (
    "Gaussian mixtures on log ITL (EM): multimodal when BIC prefers two components by more than 10, their "
    "separation (Ashman's D) exceeds 2 and the smaller holds >= 5% of samples"
)


@dataclass(frozen=True)
class Modality:
    verdict: str  # "unimodal", "multimodal" or "too few samples"
    n: int
    zeros: int  # non-positive gaps (chunked delivery) left out of the fit
    delta_bic: float | None
    means_ms: tuple[float, ...]
    weights: tuple[float, ...]
    separation: float | None

    def describe(self) -> str:
        if self.verdict == "too few samples":
            return f"too few samples ({self.n} positive ITL samples, {MIN_SAMPLES} needed)"
        modes = ", ".join(f"{m:.2f} ms ({100 * w:.0f}%)" for m, w in zip(self.means_ms, self.weights, strict=True))
        return f"{self.verdict} (components at {modes}; ΔBIC {self.delta_bic:.1f}, Ashman's D {self.separation:.2f})"


def _loglik(x: np.ndarray, w: np.ndarray, mu: np.ndarray, var: np.ndarray) -> tuple[float, np.ndarray]:
    dens = w * np.exp(-((x[:, None] - mu) ** 2) / (2 * var)) / np.sqrt(2 * np.pi * var)
    total = dens.sum(axis=1) + 1e-300
    return float(np.log(total).sum()), dens / total[:, None]


def modality(samples_ms: np.ndarray) -> Modality:
    v = np.asarray(samples_ms, dtype=float)
    v = v[np.isfinite(v)]
    pos = v[v > 0]
    zeros = len(v) - len(pos)
    if len(pos) < MIN_SAMPLES:
        return Modality("too few samples", len(pos), zeros, None, (), (), None)
    if len(pos) > MAX_SAMPLES:  # an even subsample: deterministic, and plenty for two components
        pos = np.sort(pos)[np.linspace(0, len(pos) - 1, MAX_SAMPLES).astype(int)]
    x = np.log(pos)
    n = len(x)
    floor = max(float(x.var()) * 1e-4, 1e-8)
    bic1 = -2 * _loglik(x, np.ones(1), np.array([x.mean()]), np.array([max(x.var(), floor)]))[0] + 2 * np.log(n)
    w, mu = np.array([0.5, 0.5]), np.quantile(x, [0.25, 0.75])
    var = np.full(2, max(x.var() / 4, floor))
    for _ in range(200):
        _, resp = _loglik(x, w, mu, var)
        nk = resp.sum(axis=0) + 1e-12
        w, mu = nk / n, (resp * x[:, None]).sum(axis=0) / nk
        var = np.maximum((resp * (x[:, None] - mu) ** 2).sum(axis=0) / nk, floor)
    ll2, _ = _loglik(x, w, mu, var)
    bic2 = -2 * ll2 + 5 * np.log(n)
    delta = float(bic1 - bic2)
    d = float(np.sqrt(2) * abs(mu[0] - mu[1]) / np.sqrt(var[0] + var[1]))
    multi = delta > 10 and d > 2 and float(w.min()) >= 0.05
    order = np.argsort(mu)
    return Modality(
        "multimodal" if multi else "unimodal",
        n,
        zeros,
        delta,
        tuple(float(np.exp(mu[i])) for i in order),
        tuple(float(w[i]) for i in order),
        d,
    )
