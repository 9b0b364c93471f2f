"""What a benchmark run is: the target, the workload, the load, the objectives and the monitors, as one model.  The
`run` and `capacity` commands are built from these sections (config.sections), a scenario file holds the same keys,
and run.json keeps the resolved model so that `infermeter run --config RUN_DIR/run.json` sends the same requests
again.  A run's plan (load.plan) is made from a resolved one."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from infermeter.config.sections import Disclosures, Load, Monitors, Objectives, Scale, Target, Workload
from infermeter.emulator.config import EmulatorConfig

__all__ = ["Disclosures", "Load", "Monitors", "Objectives", "RunConfig", "Scale", "Target", "Workload"]

DEMO_RATE = 20.0  # the embedded emulator without a load: a moderate open loop
DEMO_REQUESTS = 300
LIVE_REQUESTS = 1000
DEFAULT_WORKLOAD = "synthetic-uniform"


class RunConfig(BaseModel):
    """A whole run, as a scenario file and run.json's `config` hold it (draft 4.3.3: enough to reproduce the run)."""

    model_config = ConfigDict(extra="forbid")
    target: Target = Target()
    workload: Workload = Workload()
    load: Load = Load()
    objectives: Objectives = Objectives()
    monitors: Monitors = Monitors()
    disclosures: Disclosures = Disclosures()
    scale: Scale = Scale()
    emulator: EmulatorConfig | None = None  # the embedded emulator's configuration, when no url is given

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        declared = list(self.disclosures.declared())
        if self.disclosures.software:
            declared.append("software")
        if self.target.url is None and declared:
            names = ", ".join("--" + k.replace("_", "-") for k in declared)
            raise ValueError(
                f"{names}: the embedded emulator declares its own configuration (these options describe a server at "
                "--url); drop them"
            )
        if self.target.url is not None and self.emulator is not None:
            raise ValueError(
                "--emulator-config, --scheduler and a scenario's `emulator` configure the embedded emulator: "
                "drop them with --url"
            )
        replay = self._replay()
        if replay and (self.load.arrival != "poisson" or self.load.burstiness != 1.0):
            raise ValueError(
                "--arrival and --burstiness shape a rate's arrivals: a replayed --trace keeps its own; add --rate "
                "to send its lengths at a rate instead, or drop them"
            )
        if self.workload.rps_scale != 1.0 and not replay:
            raise ValueError(
                "--rps-scale (--time-scale) compresses a replayed --trace's or --dataset's own arrival times: it has "
                "none to compress here (no --trace or --dataset, or --rate/--concurrency given): drop it"
            )
        if self.target.url is not None and self.load.rate is None and self.load.concurrency is None and not replay:
            raise ValueError(
                "give a load: --rate R (open loop), --concurrency C (closed loop) or --trace FILE (replay)"
            )
        if self.load.min_duration is not None and self.scale.distributed:
            raise ValueError(
                "--min-duration counts one closed loop's sends: with --workers or --cluster each worker sends its own "
                "share; drop one of them"
            )
        if self.workload.multi_turn and self.scale.distributed:
            raise ValueError(
                "--multi-turn sessions wait on their own replies in this process: drop --workers/--cluster, or "
                "--multi-turn"
            )
        if self.workload.multi_turn and (self.load.min_duration is not None or self.load.barrier):
            raise ValueError(
                "--multi-turn sessions are bounded by --requests (turns) or --duration: drop --min-duration and "
                "--barrier"
            )
        if self.workload.multi_turn and (self.load.max_concurrency is not None or self.load.ramp_up is not None):
            raise ValueError(
                "--max-concurrency and --ramp-up shape independent requests; --multi-turn sessions set their own "
                "pace (--concurrency users, or sessions at --rate): drop them"
            )
        if self.workload.multi_turn and self.target.backend != "openai":
            raise ValueError(
                f"--multi-turn carries each reply into the next turn's messages: --backend {self.target.backend} "
                "sends no messages; use the openai backend"
            )
        self._endpoint_fits()
        if self.load.max_concurrency is not None and self.scale.distributed:
            raise ValueError(
                "--max-concurrency caps one process's requests in flight: with --workers or --cluster each worker "
                "sends its own share; drop one of them"
            )
        if self.load.realtime and self.scale.distributed:
            raise ValueError(
                "--realtime raises this process's sending thread: with --workers or --cluster the workers send; drop "
                "one of them"
            )
        return self

    def _endpoint_fits(self) -> None:
        """Images, audio and sessions need an API that carries them (client.apis)."""
        from infermeter.client.apis import APIS, api_format

        api, workload = self.target.api, self.workload
        fmt = api_format(api)
        wanted = {"image": workload.images > 0 or workload.image_dir is not None, "audio": workload.audio > 0}
        for kind, option, plural in (("image", "--images", "images"), ("audio", "--audio", "audio")):
            if wanted[kind] and kind not in fmt.media:
                takers = ", ".join(n for n in APIS if kind in api_format(n).media)
                raise ValueError(f"{option}: --api {api} sends no {plural} in a request; use --api {takers}")
        if workload.multi_turn and not fmt.generates:
            raise ValueError(f"--multi-turn carries each reply into the next turn: --api {api} gives no reply text")

    def _replay(self) -> bool:
        """A trace, or a dataset that may carry timestamps, sent with no rate or concurrency: its own times."""
        from_file = self.workload.trace is not None or self.workload.dataset is not None
        return from_file and self.load.rate is None and self.load.concurrency is None

    def resolved(self, file_rows: int | None = None, timed: bool = False) -> RunConfig:
        """Every default a run decides made explicit (workload, request count, the emulator demo's rate, the trace or
        dataset as an absolute path), so that run.json's copy sends the same requests again.  Workload, tokenizer and
        curve files stay as they were named: relative to the directory the run started in.  `file_rows`: how many
        requests the trace or dataset holds; `timed`: whether they carry their own arrival times."""
        workload, load = self.workload, self.load
        if not workload.given():
            workload = workload.model_copy(update={"workload": DEFAULT_WORKLOAD})
        for name in ("trace", "dataset"):
            if (path := getattr(workload, name)) is not None:
                workload = workload.model_copy(update={name: path.resolve()})
        replay = self._replay() and (workload.trace is not None or timed)
        if self.target.url is None and load.rate is None and load.concurrency is None and not replay:
            load = load.model_copy(update={"rate": DEMO_RATE})
        default = DEMO_REQUESTS if self.target.url is None else LIVE_REQUESTS
        if replay and load.requests is None:  # the whole trace, a duration cutting it short
            load = load.model_copy(update={"requests": file_rows})
        elif load.requests is None and load.duration is None:
            load = load.model_copy(update={"requests": min(default, file_rows or default)})
        emulator = self.emulator if self.target.url is not None or self.emulator else EmulatorConfig()
        return self.model_copy(update={"workload": workload, "load": load, "emulator": emulator})
