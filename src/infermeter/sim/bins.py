"""Multi-bin dynamic batching's bins for a workload the simulator knows in advance: Algorithm 3's equal-mass edges
over the whole workload's predicted output lengths and section 8.2's per-bin B_MAX, set before the run as the
method computes them (online learning, a server's way, stays `bin_edges: online`).

`plan_bins` is the one place a simulation's bins are resolved: it predicts each request's output once, and says
where the bins came from (the workload, the configuration); a simulation given its plan neither predicts again nor
reads workload edges as configured ones."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.engine.config import EngineConfig
from infermeter.engine.multi_bin import BinEdges, MultiBinConfig, workload_bin_edges, workload_bins
from infermeter.engine.request import predict_lengths
from infermeter.workload.spec import Requests


def predicted_outputs(requests: Requests, config: EngineConfig, seed: int) -> np.ndarray:
    """The output lengths the simulator's predictor gives each request (every request emits at least one token)."""
    outputs = requests.output_tokens.astype(np.int64, copy=False)
    if len(outputs) and outputs.min() < 1:
        outputs = np.maximum(outputs, 1)
    return predict_lengths(outputs, config.prediction_noise, seed)


def bins_from_workload(
    config: EngineConfig, prompts: np.ndarray, predicted: np.ndarray
) -> tuple[EngineConfig, BinEdges | None]:
    """`config` with a multi-bin scheduler's unset edges and B_MAX computed from the workload (unless it learns
    them online), and the bins it will run with; None for another scheduler, or bins still to be learned online."""
    mb = config.scheduler
    if not isinstance(mb, MultiBinConfig):
        return config, None
    if mb.edges is not None and mb.bin_b_max is not None:
        return config, workload_bin_edges(mb, mb, 0)
    if mb.bin_edges == "online":
        return config, None
    resolved = workload_bins(mb, prompts.astype(np.int64, copy=False), predicted, config.capacity())
    return config.model_copy(update={"scheduler": resolved}), workload_bin_edges(mb, resolved, len(predicted))


@dataclass(frozen=True)
class PlannedBins:
    """What a simulation of some requests runs with, known before it starts: the engine configuration with
    multi-bin's edges and B_MAX resolved (`config`), the bins as `sim` and `predict` describe them (None for another
    scheduler, or bins learned online: the simulator reports those in force at the end), and each request's
    predicted output length (which keys the bins and orders the schedulers that predict)."""

    config: EngineConfig
    bins: BinEdges | None
    predicted: np.ndarray


def plan_bins(config: EngineConfig, requests: Requests, seed: int) -> PlannedBins:
    """The plan of a simulation of `requests` under `config` with `seed`: the predictions made once, and the bins
    resolved from them (`bins_from_workload`)."""
    predicted = predicted_outputs(requests, config, seed)
    resolved, bins = bins_from_workload(config, requests.input_tokens, predicted)
    return PlannedBins(resolved, bins, predicted)
