"""Simulations as tasks: `task_map` runs a function over items here, or as dask tasks on --workers / --cluster,
and yields the results in the items' order (so what is written from them is the same either way)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
ONE_PLACE = "give either --workers N (local processes) or --cluster ADDRESS (a running scheduler)"


class TaskMap(Protocol):
    def __call__(self, fn: Callable[[Any], T], items: Sequence[Any]) -> Iterator[T]: ...


def local_map(fn: Callable[[Any], T], items: Sequence[Any]) -> Iterator[T]:
    """One after another in this process."""
    for item in items:
        yield fn(item)


@contextlib.contextmanager
def task_map(workers: int | None, cluster: str | None) -> Iterator[TaskMap]:
    """`local_map`, or a map over the cluster's workers for the block (every item a task, all submitted at once)."""
    if workers is None and cluster is None:
        yield local_map
        return
    if workers is not None and cluster is not None:
        from infermeter.errors import UserError

        raise UserError(ONE_PLACE)
    from infermeter.distributed.cluster import cluster_client

    with cluster_client(workers, cluster) as client:

        def on_cluster(fn: Callable[[Any], T], items: Sequence[Any]) -> Iterator[T]:
            futures = client.map(fn, list(items), pure=False)
            try:
                for f in futures:
                    yield f.result()
            finally:
                client.cancel(futures)

        yield on_cluster
