"""The dask client a scaled-out command works through: a LocalCluster of N processes, or a running scheduler."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

from infermeter.distributed import require
from infermeter.errors import UserError

if TYPE_CHECKING:
    from distributed import Client

CONNECT_TIMEOUT_S = 10


@contextlib.contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Worker processes started in the block ignore SIGINT: a terminal's Ctrl-C reaches the whole process group,
    and the coordinator alone decides what stops (it tells every worker, which keeps what it measured)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to change
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def describe(workers: int | None, address: str | None) -> str:
    return f"LocalCluster, {workers} worker processes" if address is None else f"the dask scheduler at {address}"


@contextlib.contextmanager
def cluster_client(workers: int | None, address: str | None) -> Iterator[Client]:
    """A client of `workers` fresh local processes (one thread each), or of the scheduler at `address`."""
    option = "--workers" if address is None else "--cluster"
    require(option)
    import dask

    from distributed import Client, LocalCluster

    # a task whose worker died is never run again elsewhere: a share of load sent twice would double the traffic
    settings = {
        "distributed.scheduler.allowed-failures": 0,
        "distributed.comm.timeouts.connect": "5s",  # a dead worker is known within seconds, not the default 30
        "distributed.admin.tick.limit": "30s",
    }
    with dask.config.set(settings):
        if address is not None:
            try:
                client = Client(address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise UserError(
                    f"--cluster {address}: no dask scheduler answered within {CONNECT_TIMEOUT_S} s ({exc}); start one "
                    "with `dask scheduler` and its workers with `dask worker ADDRESS`"
                ) from None
            with client:
                if not client.scheduler_info().get("workers"):
                    raise UserError(
                        f"--cluster {address}: the scheduler has no workers: start some with `dask worker {address}`"
                    )
                yield client
            return
        with _children_ignore_sigint():
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
        with cluster, Client(cluster) as client:
            client.wait_for_workers(workers or 1)
            yield client
