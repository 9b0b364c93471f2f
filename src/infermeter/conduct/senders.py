"""Who sends a run's measured requests: this process (the load driver, at real-time priority when asked, its client
health watched) or the workers of a dask cluster.  The conductor picks one with `open_sender` and hands it a `Shipment`;
either way every request sent reaches the run's writer as exactly one record."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from infermeter.client.apis import templated
from infermeter.client.backend import Backend
from infermeter.client.request import ClientConfig, PreparedRequest
from infermeter.load.client_health import HealthProbe, watched
from infermeter.load.driver import LiveStats, OnSend, drive
from infermeter.load.plan import RunPlan
from infermeter.load.sessions import SessionRules, conversations, converse
from infermeter.load.stopping import WORKER_LOST, Stopper
from infermeter.process_limits import realtime
from infermeter.records import RunClock, RunInfo, RunWriter
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.think_time import ThinkTime

if TYPE_CHECKING:
    from infermeter.distributed.load import ClusterLoad


@dataclass
class Shipment:
    """What a sender is given: the plan, the built prompts (this process's sender sends them; a cluster's workers
    build their own from the plan's requests), and where the records, the live figures and run.json's facts go."""

    plan: RunPlan
    client: Backend
    clock: RunClock
    prompter: ExactPrompter
    prompts: Iterable[PreparedRequest]
    info: RunInfo
    writer: RunWriter
    stats: LiveStats
    stopper: Stopper
    per_worker: dict[str, tuple[LiveStats, int]] = field(default_factory=dict)  # the progress display's rows


class Sender(Protocol):
    """Sends a run's measured requests into the run's writer."""

    @property
    def where(self) -> str | None:
        """Where the load is sent from, as run.json names it (None: this process)."""
        ...

    @property
    def prebuilds(self) -> bool:
        """Whether every prompt is built before the clock starts (an open loop sent from this process)."""
        ...

    async def send(self, shipment: Shipment) -> None: ...


@dataclass(frozen=True)
class LocalSender:
    """This process's driver: open or closed loop, at real-time priority with --realtime."""

    open_loop: bool
    where: str | None = None

    @property
    def prebuilds(self) -> bool:
        return self.open_loop

    async def send(self, shipment: Shipment) -> None:
        s, info, writer = shipment, shipment.info, shipment.writer
        plan = s.plan
        with realtime(plan.config.load.realtime) as scheduling:
            async with watched() as probe:
                if plan.config.workload.multi_turn:
                    await _sessions(s, probe)
                else:
                    await drive(
                        s.client, s.prompts, plan.work.pattern, writer.append, s.stats, s.stopper.stop, plan.grace_s,
                        hard_stop=s.stopper.hard_stop, on_send=_ledger(writer), probe=probe,
                    )  # fmt: skip
        if info.client is not None:
            info.client.scheduling = scheduling.in_force
        if scheduling.refused is not None:
            info.notes.append(scheduling.refused)
        if s.stats.sent:
            info.client_health = probe.health()


def _ledger(writer: RunWriter) -> OnSend:
    """Each send noted in the run's ledger as it starts."""
    return lambda req, at: writer.sent(req.request_id, at, req.input_tokens, req.max_tokens)


async def _sessions(s: Shipment, probe: HealthProbe) -> None:
    """A multi-turn plan sent through the session driver: its turns grouped into sessions (the dataset's replies
    beside them), its think time and history from the workload; run.json's notes say what became of the sessions."""
    plan, workload = s.plan, s.plan.config.workload
    rules = SessionRules(
        prompter=s.prompter,
        chat=templated(plan.target.client.api),
        think=ThinkTime.parse(workload.think_time),
        history=workload.history,
        turns=plan.work.asked if plan.work.min_duration is None else None,
        seed=plan.seed,
    )
    replies = plan.work.requests.replies
    outcome = await converse(
        s.client, conversations(s.prompts, None if replies is None else replies.tolist()), plan.work.pattern,
        s.writer.append, rules, s.stats, s.stopper.stop, plan.grace_s, hard_stop=s.stopper.hard_stop,
        on_send=_ledger(s.writer), probe=probe,
    )  # fmt: skip
    s.info.notes.extend(outcome.notes())


@dataclass(frozen=True)
class ClusterSender:
    """The workers of a dask cluster (--workers N local processes, or --cluster ADDRESS), each sending its share."""

    load: ClusterLoad
    prebuilds: bool = False

    @property
    def where(self) -> str | None:
        return self.load.cluster

    async def send(self, shipment: Shipment) -> None:
        from infermeter.distributed.load import drive_on_cluster, worker_notes

        s, info, plan = shipment, shipment.info, shipment.plan
        if s.stopper.stop.is_set():
            return
        info.distributed = await drive_on_cluster(
            self.load, backend=plan.target.backend, reqs=plan.work.requests, seed=plan.seed, prompter=s.prompter,
            pattern=plan.work.pattern, grace_s=plan.grace_s, clock=s.clock, info=info, writer=s.writer,
            stats=s.stats, per_worker=s.per_worker, stop=s.stopper.stop, hard_stop=s.stopper.hard_stop,
        )  # fmt: skip
        info.notes.extend(worker_notes(info.distributed))
        if any(w.outcome.startswith(("died", "failed")) for w in info.distributed.workers):
            s.stopper.reason = s.stopper.reason or WORKER_LOST


@contextlib.contextmanager
def open_sender(plan: RunPlan, client: ClientConfig) -> Iterator[Sender]:
    """The sender the plan asks for, open for the block: this process, or the cluster's workers (--workers,
    --cluster), which send with `client`."""
    scale = plan.config.scale
    if not scale.distributed:
        yield LocalSender(plan.work.pattern.offsets is not None)
        return
    from infermeter.distributed.cluster import cluster_client, describe
    from infermeter.distributed.load import ClusterLoad

    with cluster_client(scale.workers, scale.cluster) as dask_client:
        yield ClusterSender(ClusterLoad(dask_client, describe(scale.workers, scale.cluster), client))
