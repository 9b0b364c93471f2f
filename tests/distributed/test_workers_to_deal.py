"""A run's requests are dealt to the workers the scheduler lists; a moment with none listed is waited out."""

import pytest

pytest.importorskip("distributed")

from infermeter.client.openai_sse import ClientConfig
from infermeter.distributed import load as cluster_load
from infermeter.errors import UserError


class Scheduler:
    """A client whose scheduler lists no worker until `wait_for_workers` has been called `appear_after` times."""

    def __init__(self, appear_after: int | None) -> None:
        self.appear_after, self.waits = appear_after, 0

    def scheduler_info(self) -> dict:
        listed = self.appear_after is not None and self.waits >= self.appear_after
        return {"workers": {"tcp://127.0.0.1:2": {}, "tcp://127.0.0.1:1": {}} if listed else {}}

    def wait_for_workers(self, n: int, timeout: float) -> None:
        self.waits += 1
        if self.appear_after is None or self.waits < self.appear_after:
            raise TimeoutError("no workers")


def _load(client: Scheduler) -> cluster_load.ClusterLoad:
    return cluster_load.ClusterLoad(client, "LocalCluster(2)", ClientConfig(base_url="http://127.0.0.1:1"))  # type: ignore[arg-type]


def test_workers_listed_at_once_are_dealt_without_waiting():
    client = Scheduler(appear_after=0)
    assert _load(client).workers_to_deal() == ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"] and client.waits == 0


def test_a_moment_without_workers_is_waited_out():
    client = Scheduler(appear_after=1)
    assert _load(client).workers_to_deal() == ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"] and client.waits == 1


def test_a_cluster_without_workers_is_a_clear_error():
    with pytest.raises(UserError, match="LocalCluster\\(2\\) has no workers to send from"):
        _load(Scheduler(appear_after=None)).workers_to_deal()
