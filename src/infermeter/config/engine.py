"""The simulated engine as the command line sets it (`sim`, `sim-sweep`, `predict`, and `--scheduler` wherever an
emulator runs): its scheduler, the pool's size, multi-bin dynamic batching's bins, the latency model, memory, the
output-length predictor, the SLAs, and an engine file they are laid over."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from infermeter.config import checks
from infermeter.config.section import Flag, Section
from infermeter.engine.registry import SCHEDULERS
from infermeter.errors import UserError

if TYPE_CHECKING:
    from infermeter.engine.config import EngineConfig

MAX_ENGINES = 100_000
BIN_OPTIONS = ("bins", "bin_key", "bin_edges")  # multi-bin dynamic batching's own settings


class SimEngine(Section):
    """The engine a simulation runs, and how many of it."""

    title = "engine"
    scheduler: Annotated[str, Flag(", ".join(SCHEDULERS), checks.choice(*SCHEDULERS))] = "continuous"
    engines: Annotated[int, Flag("engines (GPUs) in the pool", checks.integer(1, MAX_ENGINES))] = 1
    bins: Annotated[int | None, Flag("K bins of multi_bin_dynamic (default 4)", checks.integer(1, 1024))] = None
    bin_key: Annotated[
        Literal["total", "output"] | None,
        Flag(
            "bin by 'total' (prompt + predicted output) or 'output' (as multi-bin dynamic batching does)",
            checks.choice("total", "output"),
        ),
    ] = None
    bin_edges: Annotated[
        Literal["workload", "online"] | None,
        Flag(
            "multi_bin_dynamic's edges and per-bin B_MAX: 'workload' (Algorithm 3 over the workload's predicted "
            "output lengths before the run, as the method computes them; the default) or 'online' (learned from the "
            "requests as they arrive, as a server must)",
            checks.choice("workload", "online"),
        ),
    ] = None
    latency: Annotated[
        Literal["batch", "iteration"] | None,
        Flag(
            "batch (T(b, L) of multi-bin dynamic batching) or iteration; default per scheduler",
            checks.choice("batch", "iteration"),
        ),
    ] = None
    kv_tokens: Annotated[
        int | None, Flag("KV capacity per engine in tokens (overrides memory)", checks.integer(16, 10**12))
    ] = None
    prediction_noise: Annotated[
        float, Flag("output-length predictor: lognormal sigma, 0 = oracle", checks.number(0, 10))
    ] = 0.0
    sla_token_ms: Annotated[
        float,
        Flag("per-token decode SLA, ms (D_SLA_TOKEN of multi-bin dynamic batching)", checks.number(0, 1e6, True)),
    ] = 10.0
    sla_request_s: Annotated[
        float,
        Flag(
            "per-request latency SLA, s (D_SLA_REQUEST of multi-bin dynamic batching)",
            checks.number(0, checks.MAX_SECONDS, True),
        ),
    ] = 20.0
    config: Annotated[
        Path | None, Flag("engine config YAML/JSON (any EngineConfig field)", checks.ENGINE_CONFIG_FILE)
    ] = None

    def engine_config(self) -> EngineConfig:
        """The engine of --config with these settings on top (a file's scheduler settings are kept when it names the
        same scheduler); a setting the file's contradicts is one line naming both."""
        from pydantic import ValidationError

        from infermeter.engine.config import EngineConfig, load_engine_config

        base = load_engine_config(self.config) if self.config else EngineConfig()
        chosen = base.scheduler.model_dump() if base.scheduler.name == self.scheduler else {"name": self.scheduler}
        for key in BIN_OPTIONS:
            value = getattr(self, key)
            if value is None:
                continue
            if self.scheduler != "multi_bin_dynamic":
                option = "--" + key.replace("_", "-")
                raise UserError(f"{option} sets multi-bin dynamic batching's bins: add --scheduler multi_bin_dynamic")
            chosen[key] = value
        update: dict[str, object] = {
            "scheduler": chosen,
            "prediction_noise": self.prediction_noise,
            "d_sla_token": self.sla_token_ms / 1000,
            "d_sla_request": self.sla_request_s,
        }
        if self.latency is not None:
            update["latency"] = self.latency
        if self.kv_tokens is not None:
            update["kv_capacity_tokens"] = self.kv_tokens
        try:
            return EngineConfig.model_validate({**base.model_dump(), **update})
        except ValidationError as exc:  # the command line's settings against the file's (--bins 8 with 4 edges)
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "engine"
            origin = "the command line's settings"
            origin = f"--config {self.config} with {origin}" if self.config else origin
            raise UserError(f"{origin}: {where}: {first['msg'].removeprefix('Value error, ')}") from None
